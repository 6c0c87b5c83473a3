"""Gathers and scatters along a dim: ``gather``/``scatter``/``scatter_add``/
``scatter_reduce``, ``take_along_dim`` (the ``index_*`` ops along one dim are in
:mod:`ember.ops.index_along`).

Each scatter's derivative is a gather and each gather's a scatter-add, so second
derivatives come from the same few primitives.
"""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd.node import Primitive
from ember.autograd.saved import hook_saves_of
from ember.backend.dtypes import through_float32
from ember.backend.meta import is_meta as _is_meta
from ember.ops import _batch, _jvp
from ember.ops._inplace import inplace_method
from ember.ops._util import (
    checked_scalar,
    follows_int_reads,
    opmath,
    reduced_float,
    type_name,
    with_out,
    with_out_apart,
    wrap_dim,
)
from ember.ops.indexing import transforming

__all__ = ["gather", "scatter", "scatter_add", "scatter_reduce", "take_along_dim"]


def _xp(a):
    from ember.backend import array_module
    return array_module(a)


def _zeros(like, shape):
    return _make(_xp(like._data).zeros(shape, like._data.dtype))


def _dtype_name(t):
    return type_name(t._data.dtype)


# ----- helpers on arrays ---------------------------------------------------------------

def _dim_index(idx, dim):
    """The advanced index that picks ``a[..., idx[i, j, k], ...]`` (``idx`` at ``dim``)."""
    xp = _xp(idx)
    n = idx.ndim
    out = []
    for d in range(n):
        if d == dim:
            out.append(idx)
        else:
            shape = [1] * n
            shape[d] = idx.shape[d]
            out.append(xp.arange(idx.shape[d]).reshape(shape))
    return tuple(out)


def _extent(a, shape):
    """The leading ``shape`` block of ``a`` (a ``src`` may be larger than its index)."""
    if a.shape == tuple(shape):
        return a
    return a[tuple(slice(0, s) for s in shape)]


def _pad_to(t, shape):
    """``t`` zero-padded at the end of each dim up to ``shape``."""
    if t._data.shape == tuple(shape):
        return t
    from ember.ops.shape import pad
    pads = []
    for have, want in zip(reversed(t._data.shape), reversed(shape)):
        pads += [0, want - have]
    return pad(t, tuple(pads))


def _index_array(op, index, kinds="int32/int64", exc=RuntimeError, empty_any=False):
    """``index``'s array after PyTorch's dtype check; with ``empty_any`` (gather and the
    scatters) an empty index of any dtype passes, as in PyTorch, as an int64 array."""
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}(): argument 'index' must be Tensor, not {type(index).__name__}")
    a = index._data
    if empty_any and a.size == 0:
        return a.astype(np.int64)
    if a.dtype != np.int64 and (kinds == "int64" or a.dtype != np.int32):
        raise exc(f"{op}(): Expected dtype {kinds} for index")
    return a


def _check_range(a, n, dim, exc=RuntimeError, prefix="", negative=True):
    """PyTorch's bounds check of the index ``a`` into a dim of size ``n``; negative
    indices count from the end where the op takes them (``negative``)."""
    if a.size and not _is_meta(a):  # meta indices have no values to check
        lo, hi = int(a.min()), int(a.max())
        if lo < (-n if negative else 0) or hi >= n:
            raise exc(f"{prefix}index {hi if hi >= n else lo} is out of bounds for dimension "
                      f"{dim} with size {n}")


# ----- gather / scatter ---------------------------------------------------------------

def _flat(x, idx):
    """Whether the op reads ``x`` and ``idx`` as 1-D: PyTorch takes a 0-d operand as one
    element, and a 0-d index beside a 1-D self (or the reverse) as one position."""
    return x.ndim == 0 or idx.ndim != x.ndim


class Gather(Primitive):
    _hook_saves = hook_saves_of(1, 0)  # PyTorch's node saves the index and the input

    def forward(self, x, idx, dim):
        self.meta = (x.shape, idx, dim)
        if _flat(x, idx) or idx.size == 0:  # the result has idx's shape
            return x.reshape(-1)[idx.reshape(-1)].reshape(idx.shape)
        return x[_dim_index(idx, dim)]

    def backward(self, gy):
        shape, idx, dim = self.meta
        idx, _ = self._saved_and_hooked(idx, None)[1]  # as the hooks' unpack gives it
        return ScatterAdd.apply(_zeros(gy, shape), gy, idx, dim), None, None

    jvp = _jvp.linear(0)
    batch = _batch.gather


class ScatterAdd(Primitive):
    _hook_saves = hook_saves_of(2)  # PyTorch's node saves the index

    @opmath  # PyTorch's CPU kernel sums float16/bfloat16 in float32, rounding once
    def forward(self, x, src, idx, dim):
        self.meta = (idx, dim, src.shape)
        out = _xp(x).array(x, copy=True)
        if _flat(x, idx) or idx.size == 0:
            _xp(x).add.at(out.reshape(-1), idx.reshape(-1), src.reshape(-1)[:idx.size])
            return out
        _xp(x).add.at(out, _dim_index(idx, dim), _extent(src, idx.shape))
        return out

    def backward(self, gy):
        idx, dim, src_shape = self.meta
        idx, = self._saved_and_hooked(idx)[1]  # as the hooks' unpack gives it
        g_src = None
        if self._edges[1] is not None:
            g_src = _pad_to(Gather.apply(gy, idx, dim), src_shape)
        return gy, g_src, None, None

    jvp = _jvp.linear(0, 1)
    batch = _batch.scatter


class Scatter(Primitive):
    batch = _batch.scatter
    _hook_saves = hook_saves_of(2)  # PyTorch's node saves the index

    @opmath  # with reduce=, PyTorch combines float16/bfloat16 in float32, rounding once
    def forward(self, x, src, idx, dim, reduce=None):
        xp = _xp(x)
        self.meta = (idx, dim, np.shape(src), reduce)
        out = xp.array(x, copy=True)
        if _flat(x, idx) or idx.size == 0:
            target, pos = out.reshape(-1), idx.reshape(-1)
            s = src.reshape(-1)[:idx.size] if hasattr(src, "ndim") else src
        else:
            target, pos = out, _dim_index(idx, dim)
            s = _extent(src, idx.shape) if hasattr(src, "ndim") else src
        if not hasattr(src, "ndim"):
            s = through_float32(s, x.dtype)
        if reduce is None:
            target[pos] = s
        elif reduce == "add":
            xp.add.at(target, pos, s)
        else:
            xp.multiply.at(target, pos, s)
        return out

    def backward(self, gy):
        idx, dim, src_shape, reduce = self.meta
        if reduce is not None:
            raise RuntimeError("derivative for aten::scatter is not implemented")
        idx, = self._saved_and_hooked(idx)[1]  # as the hooks' unpack gives it
        g_x = g_src = None
        if self._edges[0] is not None:
            g_x = Scatter.apply(gy, 0, idx, dim)
        if self._edges[1] is not None:
            g_src = _pad_to(Gather.apply(gy, idx, dim), src_shape)
        return g_x, g_src, None, None, None

    def jvp(self, *tangents):
        if self.fw_inputs[4:5] not in ((), (None,)):
            return _jvp._fallback(self, tangents)  # scatter with reduce= is not linear
        return _LINEAR01(self, *tangents)


def scatter_picked(gy, shape, idx, dim, keepdim=True):
    """The gradient of values picked from a tensor of ``shape`` at the indices ``idx``
    along ``dim`` (a sort's, ``max``'s with a dim): ``gy`` written into zeros at them, as
    PyTorch's ``value_selecting_reduction_backward`` (a ``scatter``, so a second
    derivative records ``ScatterBackward0``). Without ``keepdim``, ``gy`` and ``idx``
    lack ``dim`` (a 0-d input's have its no dims either way)."""
    if not keepdim and shape:
        gy = gy.unsqueeze(dim)
        idx = _xp(idx).expand_dims(idx, dim)
    return Scatter.apply(_zeros(gy, shape), gy, idx, dim)


def _gather_checks(op, input, dim, index, src=None):
    """PyTorch's checks for gather/scatter: returns (wrapped dim, index array)."""
    idx = _index_array(op, index, empty_any=True)
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    if idx.ndim != nd and max(idx.ndim, nd) > 1:  # a 0-d operand counts as 1-D
        raise RuntimeError("Index tensor must have the same number of dimensions as "
                           f"{'self' if src is not None else 'input'} tensor")
    if src is not None and src._data.ndim != idx.ndim and max(src._data.ndim, idx.ndim) > 1:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    ishape, xshape = idx.shape, input._data.shape
    if idx.ndim == nd:
        for k in range(nd):
            if k != d and ishape[k] > xshape[k]:
                if src is None:
                    raise RuntimeError(f"Size does not match at dimension {k} expected index "
                                       f"{list(ishape)} to be no larger than self "
                                       f"{list(xshape)} apart from dimension {d}")
                raise RuntimeError(f"Expected index {list(ishape)} to be no larger than self "
                                   f"{list(xshape)} apart from dimension {d} and to be no larger "
                                   f"size than src {list(src._data.shape)}")
            if src is not None and ishape[k] > src._data.shape[k]:
                raise RuntimeError(f"Expected index {list(ishape)} to be no larger than self "
                                   f"{list(xshape)} apart from dimension {d} and to be no larger "
                                   f"size than src {list(src._data.shape)}")
    n = xshape[d] if nd else 1
    if idx.size and not _is_meta(idx):
        # PyTorch's gather and scatters take no negative index
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= n:
            raise RuntimeError(f"index {lo if lo < 0 else hi} is out of bounds for dimension "
                               f"{d} with size {n}")
    return d, idx


@with_out_apart
@follows_int_reads
def gather(input, dim, index, *, sparse_grad=False, out=None):
    """``out[i][j][k] = input[i][index[i][j][k]][k]`` for ``dim=1`` (likewise for others);
    ``index`` has ``input``'s number of dims and is no larger outside ``dim``."""
    if index._data.size == 0:
        # an empty index gathers nothing, whatever its shape or dtype: PyTorch checks no
        # more
        idx = _index_array("gather", index, empty_any=True)
        return Gather.apply(input, idx, wrap_dim(dim, input._data.ndim))
    d, idx = _gather_checks("gather", input, dim, index)
    if _flat(input._data, idx):  # 0-d operands are one element; the result has index's shape
        if not transforming():
            return Gather.apply(input, idx, 0)  # one node, as PyTorch's kernel takes it
        return Gather.apply(input.reshape(-1), idx.reshape(-1), 0).reshape(index.shape)
    if _mode_active[0]:
        # under a mode the index goes in as the tensor, so that a capture (jit.trace,
        # onnx.export) records it as an input of the op rather than as a constant of
        # the example's values; eagerly it is the array (the node's inputs are torch's)
        return Gather.apply(input, index if index._data.ndim else index.reshape(1), d)
    return Gather.apply(input, idx if idx.ndim else idx.reshape(1), d)


def _src_for(input, src, op="scatter"):
    if isinstance(src, Tensor):
        if src._data.dtype != input._data.dtype:
            raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
        return src
    if op != "scatter":
        raise TypeError(f"{op}(): argument 'src' (position 3) must be Tensor, not "
                        f"{type(src).__name__}")
    if isinstance(src, (int, float, bool, complex, np.generic)):
        # PyTorch converts the number first (truncating, wrapping, or refusing)
        src = checked_scalar(src, input._data.dtype)
        return bool(src) if input._data.dtype.kind == "b" else src
    raise TypeError(f"scatter(): argument 'src' must be Tensor or a number, not "
                    f"{type(src).__name__}")


class ScatterValue(Scatter):
    _node_name = "ScatterBackward1"  # PyTorch's ``scatter.value`` overload (a number)
    _op_name = "Scatter"


class ScatterReduceArg(Scatter):
    """``scatter`` with ``reduce=``: PyTorch has no derivative for it and records its
    placeholder node, whose backward raises."""
    _node_name = "torch::autograd::NotImplemented"
    _op_name = "Scatter"


@with_out
@follows_int_reads
def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """``input`` with ``src`` (a tensor, or the number ``value``) written at ``index``
    along ``dim``; ``reduce='add'|'multiply'`` combines instead of overwriting."""
    if src is None:
        src = value
    if src is None:
        raise TypeError("scatter() missing required argument 'src' or 'value'")
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    src = _src_for(input, src)
    d, idx = _gather_checks("scatter", input, dim, index,
                            src if isinstance(src, Tensor) else None)
    op = ScatterReduceArg if reduce is not None else \
        Scatter if isinstance(src, Tensor) else ScatterValue
    return op.apply(input, src, idx, d, reduce)


@with_out
@follows_int_reads
def scatter_add(input, dim, index, src):
    """``input`` with ``src`` added at ``index`` along ``dim``; repeated indices sum."""
    src = _src_for(input, src, "scatter_add")
    d, idx = _gather_checks("scatter_add", input, dim, index, src)
    return ScatterAdd.apply(input, src, idx, d)


# ----- scatter_reduce -----------------------------------------------------------------

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


class ScatterReduce(Primitive):
    save_inputs = (0, 1)
    save_output = True
    batch = _batch.scatter
    # PyTorch's scatter_reduce kernel sums and multiplies float16/bfloat16 in float32
    float32_accumulation = True

    def forward(self, x, src, idx, dim, reduce, include_self):
        if _flat(x, idx):  # 0-d operands as one element: the same on 1-D views
            out = self.forward(x.reshape(-1), src.reshape(-1), idx.reshape(-1), 0, reduce,
                               include_self)
            _, _, _, _, touched, count, _ = self.meta
            self.meta = (idx, dim, reduce, include_self, touched.reshape(x.shape),
                         None if count is None else count.reshape(x.shape), src.shape)
            if self.amax is not None:
                mask_x, mask_s, n = self.amax
                self.amax = (mask_x.reshape(x.shape), mask_s.reshape(idx.shape),
                             n.reshape(x.shape))
            return out.reshape(x.shape)
        xp = _xp(x)
        if reduce in ("sum", "mean", "prod") and self.float32_accumulation and \
                reduced_float(x.dtype):
            # PyTorch's CPU kernel accumulates float16/bfloat16 in float32, rounding once
            f = np.float32
            out = self.forward(x.astype(f), src.astype(f), idx, dim, reduce, include_self)
            if self.meta[5] is not None:
                self.meta = self.meta[:5] + (self.meta[5].astype(x.dtype),) + self.meta[6:]
            return out.astype(x.dtype)
        if reduce == "mean" and x.dtype.kind == "b":
            raise NotImplementedError('"scatter_gather_tensor_cpu_reduce_mean" not '
                                      "implemented for 'Bool'")
        pos = _dim_index(idx, dim)
        s = _extent(src, idx.shape)
        out = xp.array(x, copy=True)
        touched = xp.zeros(x.shape, dtype=bool)
        touched[pos] = True
        count = self.amax = None
        if reduce in ("amax", "amin", "max", "min"):
            # PyTorch keeps the first of equal values (the input's, then the sources in
            # order; the sign of a zero shows which) where NumPy's maximum keeps the last:
            # the sources go in reversed, and the input last
            pick = xp.maximum if reduce in ("amax", "max") else xp.minimum
            if x.dtype.kind == "f" or reduced_float(x.dtype):
                ident = -np.inf if pick is xp.maximum else np.inf
            elif x.dtype.kind == "b":
                ident = pick is xp.minimum
            else:
                info = np.iinfo(x.dtype)
                ident = info.min if pick is xp.maximum else info.max
            if not (s == 0).any() and not (include_self and (x == 0).any()):
                # no zeros: equal values are the same bits (NaNs aside), the order is moot
                if not include_self:
                    out[touched] = ident
                pick.at(out, pos, s)
            else:
                out[touched] = ident
                pick.at(out, tuple(xp.broadcast_to(p, idx.shape).reshape(-1)[::-1]
                                   for p in pos), s.reshape(-1)[::-1])
                if include_self:
                    out = xp.where(touched, pick(out, x), out)
        else:
            if not include_self:
                out[touched] = 1 if reduce == "prod" else 0
            if reduce == "prod":
                xp.multiply.at(out, pos, s)
            else:
                xp.add.at(out, pos, s)
            if reduce == "mean":
                count = xp.ones(x.shape, x.dtype) if include_self else \
                    xp.zeros(x.shape, x.dtype)
                xp.add.at(count, pos, 1)
                count = xp.maximum(count, 1)
                if x.dtype.kind == "f" or reduced_float(x.dtype):  # (bfloat16's kind: "V")
                    out /= count
                else:
                    out //= count
        self.meta = (idx, dim, reduce, include_self, touched, count, src.shape)
        if reduce in ("amax", "amin", "max", "min") and (x.dtype.kind == "f" or
                                                         reduced_float(x.dtype)):
            # ties share the gradient evenly, as in PyTorch. A NaN result equals none of
            # its candidates: the count there is 0 and the shares 0 * (g / 0) are NaN, as
            # torch's; an untouched NaN input likewise gets a NaN gradient
            # (arrays even for 0-d operands, where ``==`` gives a NumPy scalar)
            mask_x = xp.asarray((x == out) if include_self else (x == out) & ~touched)
            mask_s = xp.asarray(s == out[pos])
            n = mask_x.astype(x.dtype)
            xp.add.at(n, pos, mask_s.astype(x.dtype))
            self.amax = (mask_x, mask_s, n)
        return out

    def backward(self, gy):
        idx, dim, reduce, include_self, touched, count, src_shape = self.meta
        g_x = g_s = None
        if reduce in ("max", "min"):  # PyTorch's forward takes these; its backward does not
            raise RuntimeError(f"Expected 'reduce' to be one of 'sum', 'prod', 'mean', 'amax', "
                               f"'amin' but got {reduce}.")
        if reduce == "sum":
            g_x = gy
            g_s = Gather.apply(gy, idx, dim)
        elif reduce == "mean":
            g = gy / _make(count)
            g_x = g
            g_s = Gather.apply(g, idx, dim)
        elif reduce in ("amax", "amin"):
            mask_x, mask_s, n = self.amax
            g = gy / _make(n)
            g_x = g * _make(mask_x)
            g_s = Gather.apply(g, idx, dim) * _make(mask_s)
        else:
            x, src, out = self.saved_tensors
            g_x, g_s = _prod_grads(gy, x, src, out, idx, dim, include_self)
        if not include_self:
            g_x = g_x.masked_fill(_make(touched), 0.0)
        return g_x, _pad_to(g_s, src_shape), None, None, None, None


def _prod_grads(gy, x, src, out, idx, dim, include_self):
    """PyTorch's gradient of a product scatter, exact when some factors are zero."""
    from ember.ops.elementwise import where
    ix = _make(idx)
    s = src if src._data.shape == idx.shape else src[tuple(slice(0, k) for k in idx.shape)]
    masked_x = x.masked_fill(x == 0, 1.0)
    g_x = gy * scatter_reduce(masked_x, dim, ix, s, "prod", include_self=include_self) / masked_x
    s_zero = s == 0
    n_zeros = gather(scatter_add(_zeros(x, x._data.shape), dim, ix, s_zero.to(x.dtype)), dim, ix)
    single = s_zero & (n_zeros == 1)
    masked_s = s.masked_fill(single, 1.0)
    masked_res = scatter_reduce(x, dim, ix, masked_s, "prod", include_self=include_self)
    g_s = where(single, gather(gy * masked_res, dim, ix),
                gather(gy * out, dim, ix) / s.masked_fill(s_zero, 1.0))
    return g_x, g_s


@with_out
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """``input`` with ``src`` combined in at ``index`` along ``dim`` by ``reduce``
    (``'sum'``, ``'prod'``, ``'mean'``, ``'amax'`` or ``'amin'``); with
    ``include_self=False`` the scattered-to positions ignore ``input``'s values."""
    if reduce not in _REDUCTIONS and reduce not in ("max", "min"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    src = _src_for(input, src, "scatter_reduce")
    d, idx = _gather_checks("scatter_reduce", input, dim, index, src)
    return ScatterReduce.apply(input, src, idx, d, reduce, bool(include_self))


@with_out_apart
def take_along_dim(input, indices, dim=None, *, out=None):
    """Values of ``input`` at ``indices`` along ``dim`` (``input`` and ``indices``
    broadcast outside ``dim``); with ``dim=None`` both are read as 1-D."""
    if indices._data.dtype != np.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{type_name(indices._data.dtype)}")
    if dim is None:
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    if out is None and _mode_active[0] and (m := _mode_recorder()) is not None:
        # a whole call in a capture: the broadcast shape and the wrap of negative indices
        # are read from the sizes and the indices' values below
        return m.composite("take_along_dim", take_along_dim, (input, indices, dim), {})
    nd = input._data.ndim
    if nd == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if indices._data.ndim != nd:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {nd} dimensions for input, and "
                           f"{indices._data.ndim} dimensions for indices")
    d = wrap_dim(dim, nd)
    from ember.ops.shape import broadcast_shapes
    xs = list(input._data.shape)
    xs[d] = indices._data.shape[d]
    shape = list(broadcast_shapes(tuple(xs), indices._data.shape))
    # expand only what broadcasting grows (-1 keeps a size: a traced size stays traced)
    idx = indices if list(indices._data.shape) == shape else indices.expand(
        tuple(s if s != n else -1 for s, n in zip(shape, indices._data.shape)))
    shape[d] = input._data.shape[d]
    a, n = indices._data, input._data.shape[d]
    if a.size and not _is_meta(a) and (int(a.min()) < 0 or int(a.max()) >= n):
        # PyTorch reads the indices along ``dim`` modulo its size (-1 is the last)
        idx = idx.remainder(n)
    # PyTorch broadcasts the input with an expand even where its shape stays
    if transforming():
        if list(input._data.shape) != shape:
            input = input.expand(tuple(s if s != n else -1
                                       for s, n in zip(shape, input._data.shape)))
    else:
        from ember.ops.shape import Expand
        input = Expand.apply(input, tuple(shape))
    return gather(input, d, idx)


def _bind():
    T = Tensor
    for fn in (gather, scatter, scatter_add, scatter_reduce, take_along_dim):
        setattr(T, fn.__name__, fn)
    for fn in (scatter, scatter_add, scatter_reduce):
        # (scatter_reduce's backward reads self for prod, amax, amin: keep the old values)
        setattr(T, fn.__name__ + "_", inplace_method(fn, fn is scatter_reduce))


_bind()


_LINEAR01 = _jvp.linear(0, 1)
