"""Reductions over dims: sums, means, products, and the logical reductions and counts.

The other reductions live by family: variance and standard deviation in
``variance.py``, logsumexp and softmax in ``softmaxes.py``, the vector norms in
``vector_norms.py``, extrema and other value-selecting reductions (max, amax,
argmax, median, mode) in ``extrema.py`` and scans (cumsum, cummax, ...) in
``scan.py``. Every reduction takes ``dim`` as None (all dims), an int, or a tuple
where PyTorch does, and ``keepdim``; gradients are broadcast back over the reduced
dims in Tensor ops, so second derivatives come for free. The dim helpers and the
named result tuples (``return_types``) here are shared by those families.
"""
import collections
import math
import types

import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import gemm as _gemm
from ember.backend.dtypes import FROM_NP
from ember.ops import _batch, _jvp
from ember.ops._util import (
    cj,
    follows_int_reads,
    opmath,
    reduced_float,
    type_name,
    with_out,
    wrap_dim,
    wrap_dims,
)
from ember.ops.arithmetic import DivScalar

__all__ = ["sum", "mean", "nansum", "nanmean", "prod", "all", "any", "count_nonzero",
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
def _axes(input, dim, empty_is_all=True):
    """``dim`` (None, int, or sequence) as a sorted tuple of axes. An empty sequence
    means all dims, or none for ``all``/``any`` (``empty_is_all=False``), as in PyTorch."""
    nd = input._data.ndim
    if isinstance(dim, (tuple, list)) and len(dim) == 0 and not empty_is_all:
        return ()
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(nd))
    axes = wrap_dims(dim, nd)
    return () if nd == 0 else tuple(sorted(axes))


def _axis(input, dim, op):
    """A single ``dim`` (an int) wrapped to an axis; None for a 0-d input."""
    if isinstance(dim, (tuple, list)) or isinstance(dim, bool) or dim is None:
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    nd = input._data.ndim
    a = wrap_dim(dim, nd)
    return None if nd == 0 else a


def _keep_shape(in_shape, axes):
    shape = list(in_shape)
    for a in axes:
        shape[a] = 1
    return tuple(shape)


def _keep(g, in_shape, axes, keepdim, view=False):
    """A reduced tensor reshaped to keep its reduced dims (size 1), ready to broadcast;
    recorded as PyTorch's formulas do: unsqueezes, or with ``view`` one view."""
    if keepdim or not axes:
        return g
    if not view and g._requires_grad and _grad_state.grad_enabled:
        # recorded (create_graph): PyTorch's formulas unsqueeze each reduced dim in turn
        for a in sorted(axes):
            g = g.unsqueeze(a)
        return g
    return g.reshape(_keep_shape(in_shape, axes))


def _restore(g, in_shape, axes, keepdim):
    """Broadcast a reduced gradient back over the reduced ``axes``."""
    if g._data.ndim == 0:
        return g.expand(in_shape)  # a full reduction's: it broadcasts as it is (PyTorch's)
    return _keep(g, in_shape, axes, keepdim).expand(in_shape)


def _dtype_name(np_dtype):
    """PyTorch's scalar type name (Short, Char, Byte, Long, Float, ...)."""
    return type_name(np_dtype)


def _np_dtype(dtype, input=None):
    """``dtype`` as a NumPy dtype (None stays None). With ``input``: PyTorch's refusal of
    an integer or bool result for an input that records a gradient."""
    if dtype is None:
        return None
    from ember.backend.dtypes import to_dtype
    np_dtype = to_dtype(dtype).np
    if input is not None and np.dtype(np_dtype).kind in "biu" and \
            isinstance(input, Tensor) and input.requires_grad:
        from ember.autograd.grad_mode import state
        if state.grad_enabled:
            raise RuntimeError(f"Autograd not support dtype: {type_name(np_dtype)}")
    return np_dtype


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
        if np_dtype is not None and reduced_float(np.dtype(np_dtype)):
            # a given float16/bfloat16: the input cast to it, then accumulated in float32
            return x.astype(np_dtype).sum(axis=axes, keepdims=keepdim,
                                          dtype=np.float32).astype(np_dtype)
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
        if np_dtype is None:
            return self._nansum(x, axes, keepdim, None)
        self.meta = (x.shape, axes, keepdim, x.dtype)
        self.nan = np.isnan(x) if x.dtype.kind in "fV" else None
        # a given dtype is the one summed in (the input cast first), as PyTorch's (NumPy
        # would sum small integers as int64)
        return array_module(x).nansum(x.astype(np_dtype), axis=axes, keepdims=keepdim,
                                      dtype=np_dtype)

    @opmath
    def _nansum(self, x, axes, keepdim, np_dtype):
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
                f"point or complex dtype. Got: {type_name(x.dtype)}")
        if np_dtype is not None and np.dtype(np_dtype).kind not in "fcV":
            raise RuntimeError(
                f"mean(): could not infer output dtype. Optional dtype must be either a "
                f"floating point or complex dtype. Got: {type_name(np_dtype)}")
        self.meta = (x.shape, axes, keepdim, x.dtype)
        self.n = math.prod(x.shape[a] for a in axes)
        if self.n == 0:  # the mean of nothing is NaN (without NumPy's warning)
            s = x.sum(axis=axes, keepdims=keepdim, dtype=np_dtype)
            nan = complex(np.nan, np.nan) if s.dtype.kind == "c" else np.nan  # (0/0)
            return array_module(x).full_like(s, nan, dtype=np_dtype or x.dtype)
        if (x.dtype == np.float16 or x.dtype.kind == "V") and np_dtype is None:
            return x.mean(axis=axes, keepdims=keepdim, dtype=np.float32).astype(x.dtype)
        if np_dtype is not None and reduced_float(np.dtype(np_dtype)):
            # a given float16/bfloat16: the input cast to it, then accumulated in float32
            return x.astype(np_dtype).mean(axis=axes, keepdims=keepdim,
                                           dtype=np.float32).astype(np_dtype)
        return x.mean(axis=axes, keepdims=keepdim, dtype=np_dtype)

    def backward(self, gy):
        in_shape, axes, keepdim, dt = self.meta
        if gy._data.dtype != dt:
            gy = gy.to(FROM_NP[dt])
        return _restore(DivScalar.apply(gy, self.n), in_shape, axes, keepdim), None, None, None

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


class RowSum(SumDim):
    """A bias gradient's sum over the rows of a matrix, recorded (a gradient made with a
    graph: ``create_graph``, a compiled step's recording): PyTorch's ``SumBackward1``
    whose kernel is the one the first-order gradient takes on arrays,
    ``gemm.sum_rows``, so that both ways give the same bits."""
    _node_name = "SumBackward1"
    _op_name = "Sum"

    def forward(self, x, axes, keepdim, np_dtype):
        if axes == (0,) and np_dtype is None and x.ndim == 2 and x.dtype.char in "fd":
            self.meta = (x.shape, axes, keepdim, x.dtype)
            r = _gemm.sum_rows(x)
            return r.reshape(1, -1) if keepdim else r
        return super().forward(x, axes, keepdim, np_dtype)


def sum_rows(g):
    """``g.sum(0)`` of a matrix Tensor ``g`` as a bias's gradient (:class:`RowSum`),
    recorded as PyTorch's ``sum_to`` records it: the sum kept in its dim, then a view."""
    return RowSum.apply(g, (0,), True, None).view(g.shape[1])


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
@follows_int_reads
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
    return op.apply(input, _axes(input, dim), keepdim, _np_dtype(dtype, input))


@with_out
def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Sum over ``dim`` treating NaN as zero (their gradient is zero)."""
    if input._data.dtype.kind == "c":
        raise RuntimeError("nansum on CPU does not support complex inputs")
    return Nansum.apply(input, _axes(input, dim), keepdim, _np_dtype(dtype, input))


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
    if input._data.dtype.kind not in "fcV":  # (the input's, before any dtype=)
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype "
                           f"but got {_dtype_name(input._data.dtype)}")
    if input._data.dtype.kind == "c":
        raise RuntimeError("nansum on CPU does not support complex inputs")
    if dtype is not None:
        input = input.to(dtype)
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
        return (g.unsqueeze(a) * cj(others)).masked_fill(eye, 0.0).sum(a + 1), None


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
            return g * cj(_keep(y, in_shape, axes, keepdim) / x), None, None, None
        if axis is None:
            from ember.autograd.grad_mode import state
            if not state.grad_enabled and int((x._data == 0).sum()) > 1:
                # two zeros make every product of the others 0, whatever else (NaN, inf)
                # the input holds: zeros, as torch's first derivative gives
                return x.new_zeros(in_shape), None, None, None
            others = ProdOthers.apply(x.reshape(-1), 0).reshape(in_shape)
        else:
            others = ProdOthers.apply(x, axis)
        return g * cj(others), None, None, None

    def jvp(self, t, *_):
        axis, keepdim = self.fw_inputs[1:3]
        return _jvp.reduced(self, t, None if axis is None else (axis,), keepdim)


class ProdDim(Prod):
    _node_name = "ProdBackward1"
    _op_name = "Prod"


@with_out
@follows_int_reads
def prod(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Product of ``input``'s elements over one ``dim`` (an int) or all of them.

    Bool and integer tensors multiply as int64. The gradient is exact with zeros in
    the input: with one zero, only that element gets a (nonzero) gradient.
    """
    axis = None if dim is None else _axis(input, dim, "prod")
    return (Prod if dim is None else ProdDim).apply(input, axis, keepdim, _np_dtype(dtype, input))


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
    return _All.apply(input, _axes(input, dim, empty_is_all=False), keepdim)


@with_out
def any(input, dim=None, keepdim=False, *, out=None):
    """True where some element over ``dim`` (an int, a tuple, or all dims) is nonzero."""
    return _Any.apply(input, _axes(input, dim, empty_is_all=False), keepdim)


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
    for fn in (sum, mean, nansum, nanmean, prod, all, any, count_nonzero):
        setattr(Tensor, fn.__name__, fn)


_bind()
