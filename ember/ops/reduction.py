"""Reductions over dims: sums, means, products, statistics, norms, logsumexp, softmax.

Extrema and other value-selecting reductions (max, amax, argmax, median, mode) live
in ``extrema.py`` and scans (cumsum, cummax, ...) in ``scan.py``. Every
reduction takes ``dim`` as None (all dims), an int, or a tuple where PyTorch does,
and ``keepdim``; gradients are broadcast back over the reduced dims in Tensor ops,
so second derivatives come for free.
"""
import builtins
import collections
import math
import types

import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend.dtypes import FROM_NP
from ember.ops import _batch, _jvp
from ember.ops._util import to_float, with_out, wrap_dim, wrap_dims
from ember.ops.composite_node import one_node

__all__ = ["sum", "mean", "nansum", "nanmean", "prod", "std", "var", "std_mean", "var_mean",
           "norm", "logsumexp", "softmax", "log_softmax", "all", "any", "count_nonzero",
           "return_types"]


# ----- named results -----------------------------------------------------------------------
def _return_type(name, fields):
    """A namedtuple that prints like PyTorch's ``torch.return_types.<name>``."""
    cls = collections.namedtuple(name, fields)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"torch.return_types.{name}(\n{body})"
    cls.__repr__ = __repr__
    cls.__module__ = __name__
    return cls


return_types = types.SimpleNamespace(**{
    n: _return_type(n, f) for n, f in [
        ("max", "values indices"), ("min", "values indices"), ("median", "values indices"),
        ("nanmedian", "values indices"), ("mode", "values indices"),
        ("kthvalue", "values indices"), ("aminmax", "min max"),
        ("cummax", "values indices"), ("cummin", "values indices"),
        ("sort", "values indices"), ("topk", "values indices")]})
for _cls in vars(return_types).values():
    globals()["_rt_" + _cls.__name__] = _cls  # module-level names so the tuples pickle
    _cls.__qualname__ = "_rt_" + _cls.__name__


# ----- dims ----------------------------------------------------------------------------------
def _axes(input, dim):
    """``dim`` (None, int, or sequence; empty means all) as a sorted tuple of axes."""
    nd = input._data.ndim
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(nd))
    axes = wrap_dims(dim, nd)
    return () if nd == 0 else tuple(sorted(axes))


def _axis(input, dim, op):
    """A single ``dim`` (an int) wrapped to an axis; None for a 0-d input."""
    if isinstance(dim, (tuple, list)) or isinstance(dim, bool) or dim is None:
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    nd = input._data.ndim
    a = wrap_dim(int(dim), nd)
    return None if nd == 0 else a


def _keep_shape(in_shape, axes):
    shape = list(in_shape)
    for a in axes:
        shape[a] = 1
    return tuple(shape)


def _keep(g, in_shape, axes, keepdim):
    """A reduced tensor reshaped to keep its reduced dims (size 1), ready to broadcast."""
    if keepdim or not axes:
        return g
    return g.reshape(_keep_shape(in_shape, axes))


def _restore(g, in_shape, axes, keepdim):
    """Broadcast a reduced gradient back over the reduced ``axes``."""
    if g._data.ndim == 0:
        return g.expand(in_shape)  # a full reduction's: it broadcasts as it is (PyTorch's)
    return _keep(g, in_shape, axes, keepdim).expand(in_shape)


def _dtype_name(np_dtype):
    return FROM_NP[np.dtype(np_dtype)].name.capitalize()


def _np_dtype(dtype):
    if dtype is None:
        return None
    from ember.backend.dtypes import to_dtype
    return to_dtype(dtype).np


def _int64_if_integral(x, np_dtype):
    """PyTorch accumulates bool and integer sums and products in int64."""
    if np_dtype is None and x.dtype.kind in "biu":
        return np.int64
    return np_dtype


def _check_nonempty(op, x, axes, full):
    """PyTorch's errors for reductions without an identity over an empty dim."""
    if full:
        if x.size == 0:
            raise RuntimeError(f"{op}(): Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' "
                               "argument.")
        return
    for a in axes:
        if x.shape[a] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {a} to have non-zero size.")


# ----- sums and means ------------------------------------------------------------------------
class Sum(Primitive):
    def forward(self, x, axes, keepdim, np_dtype):
        self.meta = (x.shape, axes, keepdim, x.dtype)
        np_dtype = _int64_if_integral(x, np_dtype)
        if (x.dtype == np.float16 or x.dtype.kind == "V") and np_dtype is None:
            # half and bfloat16 accumulate in float32, as PyTorch's kernels
            return x.sum(axis=axes, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
        return x.sum(axis=axes, keepdims=keepdim, dtype=np_dtype)

    def backward(self, gy):
        in_shape, axes, keepdim, dt = self.meta
        if gy._data.dtype != dt:
            gy = gy.to(FROM_NP[dt])
        return _restore(gy, in_shape, axes, keepdim), None, None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(1)


class Nansum(Primitive):
    batch = _batch.dim_rule(1)

    def forward(self, x, axes, keepdim, np_dtype):
        self.meta = (x.shape, axes, keepdim, x.dtype)
        self.nan = np.isnan(x) if x.dtype.kind == "f" else None
        return array_module(x).nansum(x, axis=axes, keepdims=keepdim,
                                      dtype=_int64_if_integral(x, np_dtype))

    def backward(self, gy):
        in_shape, axes, keepdim, dt = self.meta
        if gy._data.dtype != dt:
            gy = gy.to(FROM_NP[dt])
        g = _restore(gy, in_shape, axes, keepdim)
        if self.nan is not None:
            g = g * _make(~self.nan)  # a product, as PyTorch's: inf * 0 is NaN
        return g, None, None, None

    def jvp(self, t, *_):
        return Nansum.apply(t.masked_fill(self.fw_inputs[0].isnan(), 0.0), *self.fw_inputs[1:])


class Mean(Primitive):
    def forward(self, x, axes, keepdim, np_dtype):
        if np_dtype is None and x.dtype.kind not in "fcV":
            raise RuntimeError(
                f"mean(): could not infer output dtype. Input dtype must be either a floating "
                f"point or complex dtype. Got: {_dtype_name(x.dtype)}")
        self.meta = (x.shape, axes, keepdim, x.dtype)
        self.n = math.prod(x.shape[a] for a in axes)
        if self.n == 0:  # the mean of nothing is NaN (without NumPy's warning)
            s = x.sum(axis=axes, keepdims=keepdim, dtype=np_dtype)
            return array_module(x).full_like(s, np.nan, dtype=np_dtype or x.dtype)
        if (x.dtype == np.float16 or x.dtype.kind == "V") and np_dtype is None:
            return x.mean(axis=axes, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
        return x.mean(axis=axes, keepdims=keepdim, dtype=np_dtype)

    def backward(self, gy):
        in_shape, axes, keepdim, dt = self.meta
        if gy._data.dtype != dt:
            gy = gy.to(FROM_NP[dt])
        return _restore(gy / self.n, in_shape, axes, keepdim), None, None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(1)

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``): ``g / n`` broadcast back to the input."""
        in_shape, axes, keepdim, dt = self.meta
        g = np.asarray(grads[0].astype(dt, copy=False) / dt.type(self.n), dt)
        if not keepdim:
            g = np.expand_dims(g, tuple(sorted(a % len(in_shape) for a in axes)))
        return [np.broadcast_to(g, in_shape), None, None, None]


# PyTorch names the node of a reduction over given dims after its second overload
class SumDim(Sum):
    _node_name = "SumBackward1"
    _op_name = "Sum"  # the same op to the graph IR and its consumers


class MeanDim(Mean):
    _node_name = "MeanBackward1"
    _op_name = "Mean"


class _AllDims:
    """The default ``dim`` of ``sum`` and ``mean``: all dims, and PyTorch's node of the
    overload without ``dim`` (``SumBackward0``); ``dim=None`` given explicitly is the
    ``dim`` overload (``SumBackward1``), as in PyTorch."""
    __slots__ = ()

    def __repr__(self):
        return "None"


_ALL_DIMS = _AllDims()


@with_out
def sum(input, dim=_ALL_DIMS, keepdim=False, *, dtype=None, out=None):
    """Sum of ``input`` over ``dim`` (an int, a tuple of ints, or all dims when None).

    Bool and integer tensors sum as int64 unless ``dtype`` is given; ``dtype`` casts
    the input before summing.

        >>> ember.tensor([[1, 2], [3, 4]]).sum(0)
        tensor([4, 6])
    """
    if dim is _ALL_DIMS:
        op, dim = Sum, None
    else:
        op = SumDim
    return op.apply(input, _axes(input, dim), keepdim, _np_dtype(dtype))


@with_out
def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Sum over ``dim`` treating NaN as zero (their gradient is zero)."""
    return Nansum.apply(input, _axes(input, dim), keepdim, _np_dtype(dtype))


@with_out
def mean(input, dim=_ALL_DIMS, keepdim=False, *, dtype=None, out=None):
    """Mean of ``input`` over ``dim`` (an int, a tuple, or all dims); floating inputs only,
    unless ``dtype`` names a floating dtype to compute in. The mean of nothing is NaN."""
    if dim is _ALL_DIMS:
        op, dim = Mean, None
    else:
        op = MeanDim
    return op.apply(input, _axes(input, dim), keepdim, _np_dtype(dtype))


@with_out
def nanmean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Mean over ``dim`` of the elements that are not NaN."""
    if dtype is not None:
        input = input.to(dtype)
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype "
                           f"but got {_dtype_name(input._data.dtype)}")
    count = input.isnan().logical_not().sum(dim, keepdim)
    return nansum(input, dim, keepdim) / count


# ----- products ------------------------------------------------------------------------------
def _exclusive_products(x, axis):
    """For each element, the product of the other elements along ``axis`` (no division)."""
    xp = array_module(x)
    n = x.shape[axis]
    ones = xp.ones(_keep_shape(x.shape, (axis,)), dtype=x.dtype)
    head = [slice(None)] * x.ndim
    tail = [slice(None)] * x.ndim
    head[axis], tail[axis] = slice(0, n - 1), slice(1, n)
    before = xp.cumprod(xp.concatenate([ones, x[tuple(head)]], axis), axis=axis)
    rev = xp.flip(x[tuple(tail)], axis)
    after = xp.flip(xp.cumprod(xp.concatenate([ones, rev], axis), axis=axis), axis)
    return before * after


def _eye_along(n, ndim, axis, xp, k=0):
    """A bool ``(n, n)`` diagonal (``k=0``) or strictly lower (``k=-1``) mask placed at dims
    ``(axis, axis + 1)`` of an ``ndim + 1``-dim tensor, size 1 elsewhere."""
    r = xp.arange(n)
    m = r[:, None] == r[None, :] if k == 0 else r[None, :] < r[:, None]
    shape = [1] * (ndim + 1)
    shape[axis], shape[axis + 1] = n, n
    return _make(m.reshape(shape))


class ProdOthers(Primitive):
    """Products of all other elements along an axis: the gradient of ``prod`` that stays
    exact when the input holds zeros. Its own derivative uses it again, one dim up."""
    save_inputs = (0,)
    batch = _batch.dim_rule(1)

    def forward(self, x, axis):
        self.axis = axis
        return _exclusive_products(x, axis)

    def backward(self, g):
        x, = self.saved_tensors
        a = self.axis
        n = x.shape[a]
        eye = _eye_along(n, x.dim(), a, array_module(x._data))
        # row m: x with x_m replaced by 1; its others-products are prod_{j not in {k, m}} x_j
        others = ProdOthers.apply(x.unsqueeze(a).masked_fill(eye, 1.0), a + 1)
        return (g.unsqueeze(a) * others).masked_fill(eye, 0.0).sum(a + 1), None


class Prod(Primitive):
    save_inputs = (0,)
    save_output = True
    batch = _batch.dim_rule(1, all_if_none=False)

    def forward(self, x, axis, keepdim, np_dtype):
        np_dtype = _int64_if_integral(x, np_dtype)
        self.meta = (x.shape, axis, keepdim, x.dtype)
        if axis is None:
            return x.prod(dtype=np_dtype).reshape((1,) * x.ndim if keepdim else ())
        return x.prod(axis=axis, keepdims=keepdim, dtype=np_dtype)

    def backward(self, gy):
        x, y = self.saved_tensors
        in_shape, axis, keepdim, dt = self.meta
        if gy._data.dtype != dt:
            gy, y = gy.to(FROM_NP[dt]), y.to(FROM_NP[dt])
        if x.dim() == 0:
            return gy, None, None, None
        axes = tuple(range(x.dim())) if axis is None else (axis,)
        g = _keep(gy, in_shape, axes, keepdim)
        if x.numel() == 0:
            return g.expand(in_shape), None, None, None
        if not (x._data == 0).any():
            return g * (_keep(y, in_shape, axes, keepdim) / x), None, None, None
        if axis is None:
            from ember.autograd.grad_mode import state
            if not state.grad_enabled and int((x._data == 0).sum()) > 1:
                # two zeros make every product of the others 0, whatever else (NaN, inf)
                # the input holds: zeros, as torch's first derivative gives
                return x.new_zeros(in_shape), None, None, None
            others = ProdOthers.apply(x.reshape(-1), 0).reshape(in_shape)
        else:
            others = ProdOthers.apply(x, axis)
        return g * others, None, None, None

    def jvp(self, t, *_):
        axis, keepdim = self.fw_inputs[1:3]
        return _jvp.reduced(self, t, None if axis is None else (axis,), keepdim)


class ProdDim(Prod):
    _node_name = "ProdBackward1"
    _op_name = "Prod"


@with_out
def prod(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Product of ``input``'s elements over one ``dim`` (an int) or all of them.

    Bool and integer tensors multiply as int64. The gradient is exact with zeros in
    the input: with one zero, only that element gets a (nonzero) gradient.
    """
    axis = None if dim is None else _axis(input, dim, "prod")
    return (Prod if dim is None else ProdDim).apply(input, axis, keepdim, _np_dtype(dtype))


# ----- variance and standard deviation --------------------------------------------------------
def _two_pass_var(x, axes, correction, keepdim, n):
    centred = x - x.mean(axis=axes, keepdims=True)
    # the divisor is clipped at 0, as PyTorch's (so too few elements give inf or NaN)
    return (centred * centred).sum(axis=axes, keepdims=keepdim) / \
        x.dtype.type(builtins.max(n - correction, 0))


def _stat_mean(input, axes, keepdim):
    """The mean beside var_mean's and std_mean's statistic, as PyTorch's running (Welford)
    update gives it: in double for float32 (a sum that overflows float32 does not make
    it infinite), and NaN once an infinite element is followed by any other (the next
    update subtracts the infinite mean from it)."""
    m = mean(input, axes, keepdim)
    d = m._data
    xp = array_module(d)
    if d.dtype.kind != "f" or xp.isfinite(d).all():
        return m
    m._data = _stat_mean_fix(d, input._data, axes, keepdim)
    return m


def _stat_mean_fix(d, x, axes, keepdim):
    """:func:`_stat_mean`'s correction of a mean ``d`` that is not finite (a new array)."""
    xp = array_module(d)
    if d.dtype == np.float32:
        d = xp.asarray(x.astype(np.float64).mean(axis=axes, keepdims=keepdim), np.float32)
    else:
        d = xp.array(d)
    last = xp.ones((), dtype=bool)
    for a in axes:
        shape = [1] * x.ndim
        shape[a] = x.shape[a]
        last = last & (xp.arange(x.shape[a]) == x.shape[a] - 1).reshape(shape)
    d[(xp.isinf(x) & ~last).any(axis=axes, keepdims=keepdim)] = np.nan
    return d


class _VarStd(Primitive):
    save_inputs = (0,)
    batch = _batch.dim_rule(1)

    def forward(self, x, axes, correction, keepdim):
        if x.dtype.kind != "f":
            raise RuntimeError("std and var only support floating point and complex dtypes")
        n = math.prod(x.shape[a] for a in axes)
        self.meta = (x.shape, axes, keepdim, n - correction)
        if n == 0:
            v = array_module(x).full_like(x.sum(axis=axes, keepdims=keepdim), np.nan)
        else:
            v = self.finish(_two_pass_var(x, axes, correction, keepdim, n))
            if x.dtype == np.float32 and not array_module(v).isfinite(v).all():
                # PyTorch accumulates float32 statistics in double: squares of large
                # values that overflow float32 stay finite there (and so does their root)
                v = _two_pass_var(x.astype(np.float64), axes, correction, keepdim, n)
                v = self.finish(v).astype(np.float32)
            return v
        return self.finish(v)

    def _var_backward(self, gy, x):
        in_shape, axes, keepdim, dof = self.meta
        scale = 2.0 / dof if dof != 0 else math.copysign(math.inf, dof)
        centred = x - x.mean(axes, keepdim=True)
        return _keep(gy, in_shape, axes, keepdim) * centred * scale

    def jvp(self, t, *_):
        return _jvp.reduced(self, t, self.meta[1], self.meta[2])


class _Var(_VarStd):
    _node_name = "VarBackward0"

    @staticmethod
    def finish(v):
        return v

    def backward(self, gy):
        x, = self.saved_tensors
        return self._var_backward(gy, x), None, None, None


class _Std(_VarStd):
    _node_name = "StdBackward0"
    save_output = True

    @staticmethod
    def finish(v):
        return np.sqrt(v)

    def backward(self, gy):
        x, y = self.saved_tensors
        g_var = (gy / (y * 2)).masked_fill(y == 0, 0.0)
        return self._var_backward(g_var, x), None, None, None


class _StatMean(_VarStd):
    """``(statistic, mean)`` in one node, as PyTorch's ``var_mean``/``std_mean``; the
    mean as :func:`_stat_mean` gives it."""
    n_outputs = 2

    def forward(self, x, axes, correction, keepdim):
        v = _VarStd.forward(self, x, axes, correction, keepdim)
        m = object.__new__(Mean).forward(x, axes, keepdim, None)
        if not array_module(m).isfinite(m).all():
            m = _stat_mean_fix(array_module(m).asarray(m), x, axes, keepdim)
        return v, m

    def backward(self, g_stat, g_mean):
        x, = self.saved_tensors
        in_shape, axes, keepdim, _ = self.meta
        g = None if g_stat is None else self.stat_backward(g_stat, x)
        if g_mean is not None:
            n = math.prod(in_shape[a] for a in axes)
            part = _restore(g_mean / n, in_shape, axes, keepdim)
            g = part if g is None else g + part
        return g, None, None, None

    def jvp(self, t, *_):
        if t is None:
            return None, None
        x = self.fw_inputs[0].detach()
        _, axes, keepdim, dof = self.meta
        scale = 2.0 / dof if dof != 0 else math.copysign(math.inf, dof)
        t_var = ((x - x.mean(axes, keepdim=True)) * t).sum(axes, keepdim=keepdim) * scale
        return self.stat_tangent(t_var, x), t.mean(axes, keepdim=keepdim)


class _VarMean(_StatMean):
    _node_name = "VarMeanBackward0"
    finish = staticmethod(_Var.finish)

    def stat_backward(self, gy, x):
        return self._var_backward(gy, x)

    @staticmethod
    def stat_tangent(t_var, x):
        return t_var


class _StdMean(_StatMean):
    _node_name = "StdMeanBackward0"
    finish = staticmethod(_Std.finish)

    def _std(self, x):
        # the forward's standard deviation again, recorded under create_graph so that
        # second derivatives see it depend on x (a node with two outputs saves no output)
        _, axes, keepdim, dof = self.meta
        n = math.prod(x.shape[a] for a in axes)
        return _Std.apply(x, axes, n - dof, keepdim)

    def stat_backward(self, gy, x):
        y = self._std(x)
        return self._var_backward((gy / (y * 2)).masked_fill(y == 0, 0.0), x)

    def stat_tangent(self, t_var, x):
        y = self._std(x)
        return (t_var / (y * 2)).masked_fill(y == 0, 0.0)


def _var_args(op, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):  # var(input, unbiased)
        if unbiased is not None:
            raise TypeError(f"{op}(): unbiased given twice")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{op}: can't specify both correction and unbiased")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return _axes(input, dim), correction, keepdim


@with_out
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """Variance over ``dim`` with ``correction`` (Bessel's, 1, by default; ``unbiased=False``
    means 0): ``sum((x - mean)**2) / (N - correction)``; of a complex input, the real
    variance of ``|x - mean|`` (that of the real part plus that of the imaginary part)."""
    if input.is_complex():
        return var(input.real, dim, unbiased, keepdim, correction=correction) + \
            var(input.imag, dim, unbiased, keepdim, correction=correction)
    return _Var.apply(input, *_var_args("var", input, dim, unbiased, keepdim, correction))


@with_out
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """Standard deviation over ``dim``: ``sqrt(var(...))``; its gradient is 0 where it is 0."""
    if input.is_complex():
        return var(input, dim, unbiased, keepdim, correction=correction).sqrt()
    return _Std.apply(input, *_var_args("std", input, dim, unbiased, keepdim, correction))


@with_out
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """``(var, mean)`` over ``dim``, as a tuple."""
    axes, c, keepdim = _var_args("var_mean", input, dim, unbiased, keepdim, correction)
    if input.is_complex():
        return var(input, dim, unbiased, keepdim, correction=correction), \
            _stat_mean(input, axes, keepdim)
    return _VarMean.apply(input, axes, c, keepdim)


@with_out
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """``(std, mean)`` over ``dim``, as a tuple."""
    axes, c, keepdim = _var_args("std_mean", input, dim, unbiased, keepdim, correction)
    if input.is_complex():
        return std(input, dim, unbiased, keepdim, correction=correction), \
            _stat_mean(input, axes, keepdim)
    return _StdMean.apply(input, axes, c, keepdim)


# ----- norms ---------------------------------------------------------------------------------
class _VectorNorm(Primitive):
    _node_name = "LinalgVectorNormBackward0"
    save_inputs = (0,)
    save_output = True
    batch = _batch.vector_norm

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
    if input._data.dtype.kind != "f":
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
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """The vector norm of ``input`` over ``dim`` (all dims when None) for a number ``p``
    (2 by default or for ``'fro'``; also 1, inf, -inf, 0 and any other p).

    The gradient at a zero vector is 0, as PyTorch's. ``p='nuc'`` is the nuclear norm
    of the matrices over ``dim`` (a 2-D input when ``dim`` is None).
    """
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


# ----- logsumexp -----------------------------------------------------------------------------
class _Logsumexp(Primitive):
    _node_name = "LogsumexpBackward0"
    save_inputs = (0,)
    save_output = True
    batch = _batch.dim_rule(1)
    torchscript = "logsumexp"

    def forward(self, x, axes, keepdim):
        x = to_float(x)
        xp = array_module(x)
        self.meta = (x.shape, axes, keepdim)
        if not axes and x.dtype.kind != "c":
            return x.copy()
        if x.size == 0:  # the log of an empty sum
            return xp.full_like(x.sum(axis=axes, keepdims=keepdim), -np.inf)
        # complex: shifted by the largest real part only, so the result's imaginary part is
        # the principal log's, in (-pi, pi], as torch's (even for a single element)
        m = (x.real if x.dtype.kind == "c" else x).max(axis=axes, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0).astype(x.dtype)
        s = xp.log(xp.exp(x - m).sum(axis=axes, keepdims=True)) + m
        return s if keepdim else s.squeeze(axes)

    def backward(self, gy):
        x, y = self.saved_tensors
        in_shape, axes, keepdim = self.meta
        return _keep(gy, in_shape, axes, keepdim) * (x - _keep(y, in_shape, axes, keepdim)).exp(
        ), None, None

    def jvp(self, t, *_):
        return _jvp.reduced(self, t, self.meta[1], self.meta[2])


@with_out
def logsumexp(input, dim, keepdim=False, *, out=None):
    """``log(sum(exp(input)))`` over ``dim`` (an int or tuple), computed without overflow."""
    if dim is None:
        raise TypeError("logsumexp(): argument 'dim' (position 1) must be tuple of ints, not "
                        "NoneType")
    return _Logsumexp.apply(input, _axes(input, dim), keepdim)


# ----- softmax -------------------------------------------------------------------------------
def _shifted(x, axis, op):
    if x.dtype.kind != "f":
        raise NotImplementedError(f'"{op}_kernel_impl" not implemented for '
                                  f"'{_dtype_name(x.dtype)}'")
    if x.size == 0:
        return x.copy()
    m = x.max(axis=axis, keepdims=True)
    # the max is subtracted even when infinite, as PyTorch does: a slice holding +inf (or
    # only -inf) comes out all NaN, never a one-hot of the infinity
    with np.errstate(invalid="ignore"):
        return x - m


class Softmax(Primitive):
    save_output = True

    def forward(self, x, axis):
        self.axis = axis
        e = array_module(x).exp(_shifted(x, axis, "softmax"))
        return e / e.sum(axis=axis, keepdims=True)

    def backward(self, gy):
        y, = self.saved_tensors
        a = self.axis
        return y * (gy - (gy * y).sum(a, keepdim=True)), None

    jvp = _jvp.diagonal
    batch = _batch.dim_rule(1)


class SafeSoftmax(Softmax):
    """``_safe_softmax``: softmax whose slices holding only -inf give zeros instead of
    NaN (the weights of PyTorch's math attention: a query that may attend to nothing)."""
    _node_name = "SafeSoftmaxBackward0"
    torchscript = "_safe_softmax"

    def forward(self, x, axis):
        y = Softmax.forward(self, x, axis)
        xp = array_module(x)
        empty = (x == -np.inf).all(axis=axis, keepdims=True)
        if empty.any():
            y = xp.where(empty, y.dtype.type(0), y)
        return y


def _safe_softmax(input, dim):
    """Softmax over ``dim`` with all -inf slices given zero weights (PyTorch's
    ``torch._safe_softmax``)."""
    input, axis = _prepare(input, dim, None)
    return SafeSoftmax.apply(input, axis)


class LogSoftmax(Primitive):
    save_output = True
    batch = _batch.dim_rule(1)

    def forward(self, x, axis):
        self.axis = axis
        xp = array_module(x)
        s = _shifted(x, axis, "log_softmax")
        return s - xp.log(xp.exp(s).sum(axis=axis, keepdims=True))

    def backward(self, gy):
        y, = self.saved_tensors
        a = self.axis
        if not _grad_state.grad_enabled and y._data.dtype in (np.float32, np.float64):
            # first order (cross_entropy's hot path): the same formula on arrays
            g, yd = gy._data, y._data
            xp = array_module(yd)
            return _make(g - xp.exp(yd) * g.sum(axis=a, keepdims=True)), None
        return gy - y.exp() * gy.sum(a, keepdim=True), None

    def jvp(self, t, _):
        return t - (self.fw_output.exp() * t).sum(self.axis, keepdim=True)


def _prepare(input, dim, dtype):
    if dim is None:
        raise TypeError("softmax(): argument 'dim' must be int, not NoneType")
    if dtype is not None:
        input = input.to(dtype)
    nd = input._data.ndim
    axis = wrap_dim(int(dim), nd)
    return input, (None if nd == 0 else axis)


@with_out
def softmax(input, dim, dtype=None):
    """``exp(x) / exp(x).sum(dim)`` along ``dim``; ``dtype`` casts the input first.

        >>> ember.tensor([1., 2., 3.]).softmax(0)
        tensor([0.0900, 0.2447, 0.6652])
    """
    input, axis = _prepare(input, dim, dtype)
    return Softmax.apply(input, axis)


@with_out
def log_softmax(input, dim, dtype=None):
    """``log(softmax(x, dim))``, computed as ``x - logsumexp(x, dim)`` for stability."""
    input, axis = _prepare(input, dim, dtype)
    return LogSoftmax.apply(input, axis)


# ----- logical reductions and counts ---------------------------------------------------------
class _AllAny(Primitive):
    batch = _batch.dim_rule(1)

    def forward(self, x, axes, keepdim):
        out = self.fn(x, axis=axes, keepdims=keepdim)
        if x.dtype == np.uint8:  # PyTorch keeps uint8 for uint8 inputs
            return array_module(x).asarray(out, dtype=np.uint8)
        return array_module(x).asarray(out)


class _All(_AllAny):
    fn = staticmethod(np.all)


class _Any(_AllAny):
    fn = staticmethod(np.any)


@with_out
def all(input, dim=None, keepdim=False, *, out=None):
    """True where every element over ``dim`` (an int, a tuple, or all dims) is nonzero."""
    return _All.apply(input, _axes(input, dim), keepdim)


@with_out
def any(input, dim=None, keepdim=False, *, out=None):
    """True where some element over ``dim`` (an int, a tuple, or all dims) is nonzero."""
    return _Any.apply(input, _axes(input, dim), keepdim)


class _CountNonzero(Primitive):
    batch = _batch.dim_rule(1)
    complex32_math = True

    def forward(self, x, axes):
        return array_module(x).asarray((x != 0).sum(axis=axes), dtype=np.int64)


def count_nonzero(input, dim=None):
    """The number of nonzero elements over ``dim`` (an int, a tuple, or all), as int64."""
    return _CountNonzero.apply(input, _axes(input, dim))


# ----- Tensor methods --------------------------------------------------------------------------
def _bind():
    for fn in (sum, mean, nansum, nanmean, prod, std, var, norm, logsumexp, softmax, log_softmax,
               all, any, count_nonzero):
        setattr(Tensor, fn.__name__, fn)


_bind()
