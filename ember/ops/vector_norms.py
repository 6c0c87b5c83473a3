"""The vector norm primitives: ``linalg.vector_norm``'s (``VectorNorm``, real and
complex input; ``ember.linalg`` builds its norms on it) and ``torch.norm``'s
(``_VectorNorm`` and the nodes PyTorch's composites record, real input).

Both are PyTorch's ``LinalgVectorNormBackward0``: ``sum(|x|^p)^(1/p)`` over the
reduced dims, with the limits for p = 0 (count of nonzeros) and +-inf (max/min of
``|x|``). Their backwards are written in Tensor ops, so higher derivatives work.
"""
import builtins
import math

import numpy as np

from ember._tensor import Tensor, _make, _mode_active
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._util import follows_int_reads, opmath, reduced_float, traced_ints, with_out
from ember.ops.composite_node import one_node
from ember.ops.reduction import _axes, _dtype_name, _keep

__all__ = ["norm"]


# ----- linalg.vector_norm -------------------------------------------------------------------
def _modulus(z):
    """``|z|`` of a complex array, correctly rounded for complex64 as PyTorch's (NumPy's
    single precision ``abs`` is an ulp off for about a third of values)."""
    if z.dtype == np.complex64:
        re, im = z.real.astype(np.float64), z.imag.astype(np.float64)
        return np.sqrt(re * re + im * im).astype(np.float32)
    return np.hypot(z.real, z.imag)


class VectorNorm(Primitive):
    """``sum(|x|^p)^(1/p)`` over ``axes`` (with the limits for p = 0 and +-inf)."""
    _node_name = "LinalgVectorNormBackward0"
    save_inputs = (0,)
    save_output = True
    batch = _batch.vector_norm
    complex32_math = True

    @opmath
    def forward(self, x, p, axes, keepdim):
        self.meta = (p, axes, keepdim, x.shape)
        if x.dtype.kind == "c":  # the norm of the moduli: a real result
            if p == 2:
                sq = x.real * x.real + x.imag * x.imag
                return np.sqrt(sq.sum(axis=axes, keepdims=keepdim))
            ax = _modulus(x)
        elif p == 2:
            return np.sqrt((x * x).sum(axis=axes, keepdims=keepdim))
        else:
            ax = np.abs(x)
        if p == 1:
            return ax.sum(axis=axes, keepdims=keepdim)
        if p == math.inf:
            return ax.max(axis=axes, keepdims=keepdim)
        if p == -math.inf:
            return ax.min(axis=axes, keepdims=keepdim)
        if p == 0:
            return (x != 0).sum(axis=axes, keepdims=keepdim).astype(ax.dtype)
        return ((ax ** p).sum(axis=axes, keepdims=keepdim)) ** (1.0 / p)

    def backward(self, g):
        x, norm = self.saved_tensors
        p, axes, keepdim, shape = self.meta
        if p == 0:
            return None, None, None, None
        if not keepdim and axes:
            kept = tuple(1 if i in axes else s for i, s in enumerate(shape))
            g, norm = g.reshape(kept), norm.reshape(kept)
        zero = norm == 0
        if p == 1:
            gx = x.sgn() * g
        elif p == 2:
            gx = g * (x / norm).masked_fill(zero, 0.0)
        elif math.isinf(p):
            # the positions of the extreme modulus, found with the forward's own modulus
            xa = _make(_modulus(x._data)) if x.is_complex() else x.abs()
            mask = (xa == norm).logical_or(xa.isnan())
            gx = x.sgn() * ((g / mask.sum(axes, keepdim=True)) * mask)
        elif p < 1:
            scaled = x.sgn() * x.abs().pow(p - 1).masked_fill(x == 0, 0.0)
            gx = scaled * g * norm.pow(1 - p)
        elif p < 2:
            gx = x.sgn() * x.abs().pow(p - 1) * (g / norm.pow(p - 1)).masked_fill(zero, 0.0)
        else:
            gx = x * x.abs().pow(p - 2) * (g / norm.pow(p - 1)).masked_fill(zero, 0.0)
        return gx, None, None, None

    def jvp(self, t, *_):
        g = None
        if t is not None and t.is_complex() and not self.fw_output.is_complex():
            # a real norm of complex x: dy = Re(sum(conj(g) t)), g the gradient of y
            # (its rows), which is 0 (not nan) at x = 0 as torch's subgradient
            from ember import ones_like
            g = _jvp.through_backward(self, 0, ones_like(self.fw_output).detach())
        if g is not None:
            d = (g.conj() * t).real
            axes, keepdim = self.meta[1], self.meta[2]
            if axes is None:
                return d.sum()
            return d if len(axes) == 0 else d.sum(tuple(axes), keepdim=keepdim)
        return _jvp.reduced(self, t, self.meta[1], self.meta[2])


# ----- torch.norm ----------------------------------------------------------------------------
class _VectorNorm(Primitive):
    _node_name = "LinalgVectorNormBackward0"
    save_inputs = (0,)
    save_output = True
    batch = _batch.vector_norm

    @opmath
    def forward(self, x, p, axes, keepdim):
        self.meta = (x.shape, axes, keepdim, p)
        xp = array_module(x)
        ax = xp.abs(x)
        kw = dict(axis=axes, keepdims=keepdim)
        if p == 0:
            return (x != 0).sum(**kw).astype(x.dtype)
        if math.isinf(p):
            if x.size == 0 and (not axes or builtins.any(x.shape[a] == 0 for a in axes)):
                raise RuntimeError("linalg.vector_norm cannot compute the "
                                   f"{'' if p > 0 else '-'}inf norm on an empty tensor because "
                                   "the operation does not have an identity")
            return ax.max(**kw) if p > 0 else ax.min(**kw)
        if p == 1:
            return ax.sum(**kw)
        if p == 2:
            return xp.sqrt((x * x).sum(**kw))
        return (ax ** p).sum(**kw) ** (1.0 / p)

    def backward(self, gy):
        x, y = self.saved_tensors
        in_shape, axes, keepdim, p = self.meta
        if p == 0:
            return None, None, None, None
        g = _keep(gy, in_shape, axes, keepdim)
        y = _keep(y, in_shape, axes, keepdim)
        if p == 1:
            gx = x.sign() * g
        elif p == 2:
            gx = g * (x / y).masked_fill(y == 0, 0.0)
        elif math.isinf(p):
            xa = x.abs()
            mask = (xa == y) | xa.isnan()
            gx = x.sign() * (g / mask.sum(axes, keepdim=True) * mask)
        elif p < 1:
            scaled = x.sign() * x.abs().pow(p - 1).masked_fill(x == 0, 0.0)
            gx = scaled * g * y.pow(1 - p)
        else:
            scaled = x.sign() * x.abs().pow(p - 1) if p < 2 else x * x.abs().pow(p - 2)
            gx = scaled * (g / y.pow(p - 1)).masked_fill(y == 0, 0.0)
        return gx, None, None, None

    def jvp(self, t, *_):
        return _jvp.reduced(self, t, self.meta[1], self.meta[2])


class NormScalarOpt(_VectorNorm):
    """``norm(input, p, dim)``'s node as PyTorch's own composites record it
    (``NormBackward1``); ``torch.norm`` from Python is ``linalg.vector_norm``'s node."""
    _node_name = "NormBackward1"
    _op_name = "_VectorNorm"   # the same op: its spellings write it


class NormScalar(_VectorNorm):
    """``norm(input, p)`` over every element as PyTorch's own composites record it
    (``NormBackward0``)."""
    _node_name = "NormBackward0"
    _op_name = "_VectorNorm"


def _vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None):
    """``linalg.vector_norm``: ``sum(|x|**ord)**(1/ord)`` over ``dim`` (all dims when None),
    with ``ord`` 0 (count of nonzeros), inf (max |x|) and -inf (min |x|)."""
    if input._data.dtype.kind == "c" or input._data.dtype.names:  # complex (or complex32)
        from ember.linalg import vector_norm
        return vector_norm(input, ord, dim, keepdim, dtype=dtype)
    if input._data.dtype.kind != "f" and not reduced_float(input._data.dtype):
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {_dtype_name(input._data.dtype)}")
    if dtype is not None:
        input = input.to(dtype)
    return _VectorNorm.apply(input, float(ord), _axes(input, dim), keepdim)


def _vector_casts(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    return dtype is not None and p != "nuc"


# with a dtype, PyTorch's one node computes in it (no ToCopyBackward0 below)
@one_node("LinalgVectorNormBackward0", 1, when=_vector_casts)
@with_out
@follows_int_reads
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """The vector norm of ``input`` over ``dim`` (all dims when None) for a number ``p``
    (2 by default or for ``'fro'``; also 1, inf, -inf, 0 and any other p).

    The gradient at a zero vector is 0, as PyTorch's. ``p='nuc'`` is the nuclear norm
    of the matrices over ``dim`` (a 2-D input when ``dim`` is None).
    """
    if _mode_active[0] and out is None and (r := traced_ints(p, dim)) is not None:
        # a traced order or dim picks the norm in Python: the call is one node
        return r[0].composite("norm", norm, (input,) + r[1] + (keepdim,), {"dtype": dtype})
    if isinstance(p, str):
        dims = dim if dim is None or isinstance(dim, (tuple, list)) else (dim,)
        if p == "fro" and (dims is None or len(dims) <= 2):
            return _vector_norm(input, 2, dim, keepdim, dtype=dtype)
        if p == "fro":
            raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                               f"{' '.join(str(d) for d in dims)}")
        if p == "nuc":  # the nuclear norm: sum of the singular values (ember.linalg)
            import ember.linalg
            if dims is None and input.dim() != 2:
                raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                                   f"{' '.join(str(d) for d in range(input.dim()))}")
            return ember.linalg.matrix_norm(input, "nuc", (-2, -1) if dims is None else
                                            tuple(dims), keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    return _vector_norm(input, 2.0 if p is None else p, dim, keepdim, dtype=dtype)


Tensor.norm = norm
