"""Ops along one dim that take an index of positions in it: ``index_select``,
``index_add``, ``index_copy``, ``index_fill`` (their primitives and in-place forms).
Re-exported by :mod:`ember.ops`; the gathers and scatters they share helpers with are in
:mod:`ember.ops.gather_scatter`."""
import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.autograd.saved import hook_saves_of
from ember.backend.dtypes import through_float32
from ember.backend.meta import is_meta as _is_meta
from ember.ops import _batch, _jvp
from ember.ops._inplace import check_inplace, check_writes, commit, inplace_method
from ember.ops._util import (
    checked_scalar,
    follows_int_reads,
    reduced_float,
    with_out,
    with_out_apart,
    wrap_dim,
)
from ember.ops.arithmetic import MulScalar
from ember.ops.gather_scatter import _check_range, _dtype_name, _index_array, _xp, _zeros
from ember.ops.indexing import transforming

__all__ = ["index_select", "index_add", "index_copy", "index_fill"]


# ----- index_* along one dim ----------------------------------------------------------

def _along(idx, dim):
    return (slice(None),) * dim + (idx,)


class IndexSelect(Primitive):
    _hook_saves = hook_saves_of(1)  # PyTorch's node saves the index

    def forward(self, x, idx, dim):
        self.meta = (x.shape, idx, dim)
        if x.ndim == 0:  # one element, at its one valid index (checked by the caller)
            return _xp(x).array(x, copy=True)
        return _xp(x).take(x, idx, axis=dim)

    def backward(self, gy):
        shape, idx, dim = self.meta
        idx, = self._saved_and_hooked(idx)[1]  # as the hooks' unpack gives it
        if not shape:
            return gy, None, None
        return IndexAdd.apply(_zeros(gy, shape), gy, idx, dim, 1), None, None

    jvp = _jvp.linear(0)
    batch = _batch.index_select
    complex32_math = True


class IndexAdd(Primitive):
    _hook_saves = hook_saves_of(2, 1)  # PyTorch's node saves the index and the source
    shared_value_broadcasts = False  # (see IndexFill)

    def forward(self, x, src, idx, dim, alpha=1):
        self.meta = (idx, dim, alpha, src.shape)
        xp = _xp(x)
        if x.ndim > 1 and alpha == 1 and reduced_float(x.dtype):
            # PyTorch adds the slices of a float16/bfloat16 tensor of 2+ dims in float32,
            # rounding once (a 1-D one, or any with an alpha, in its own dtype, each sum
            # rounded)
            f = np.float32
            return self.forward(x.astype(f), src.astype(f), idx, dim, alpha).astype(x.dtype)
        out = xp.array(x, copy=True)
        if x.ndim == 0:  # one element along dim 0 (the caller checked the source's size)
            xp.add.at(out.reshape(1), idx, src.reshape(-1) if alpha == 1 else
                      src.reshape(-1) * alpha)
            return out
        xp.add.at(out, _along(idx, dim), src if alpha == 1 else src * alpha)
        return out

    def backward(self, gy):
        idx, dim, alpha, src_shape = self.meta
        idx, _ = self._saved_and_hooked(idx, None)[1]  # as the hooks' unpack gives it
        g_src = None
        if self._edges[1] is not None:
            g_src = _shaped(IndexSelect.apply(gy, idx, dim), src_shape)
            if alpha != 1:  # PyTorch's maybe_multiply: mul.Scalar (MulBackward1)
                g_src = MulScalar.apply(g_src, alpha)
        return gy, g_src, None, None, None

    jvp = _jvp.linear(0, 1)
    batch = _batch.index_scatter


def _shaped(g, shape):
    """A gradient ``g`` for an operand of ``shape`` holding as many elements (a 0-d
    operand written as one slice, or one slice as a 0-d one): PyTorch's ``expand_as``."""
    return g if tuple(g.shape) == tuple(shape) else g.reshape(shape)


class IndexCopy(Primitive):
    # PyTorch's node saves the index, and the source where it has a gradient
    _hook_saves = hook_saves_of(2, 1, if_grad=(1,))
    shared_value_broadcasts = False  # (see IndexFill)

    def forward(self, x, src, idx, dim):
        self.meta = (idx, dim, src.shape)
        out = _xp(x).array(x, copy=True)
        if x.ndim == 0 or src.ndim == 0:  # 0-d operands are one element along dim 0
            out.reshape(-1)[idx.reshape(-1)] = src.reshape(-1)
            return out
        out[_along(idx, dim)] = src
        return out

    def backward(self, gy):
        idx, dim, src_shape = self.meta
        own = (idx,) if self._edges[1] is None else (idx, None)
        idx = self._saved_and_hooked(*own)[1][0]  # as the hooks' unpack gives it
        g_x = IndexFill.apply(gy, 0, idx, dim) if self._edges[0] is not None else None
        g_src = None
        if self._edges[1] is not None:
            g_src = _shaped(IndexSelect.apply(gy, idx, dim), src_shape)
        return g_x, g_src, None, None

    jvp = _jvp.linear(0, 1)
    batch = _batch.index_scatter


class IndexFill(Primitive):
    _node_name = "IndexFillBackward1"  # a Tensor value; a number: IndexFillValue
    # vmap over 0-d samples: an unbatched 0-d value is every sample's, written as is
    # (a source of index_add/copy is given each sample's copy: _batch._scatter)
    shared_value_broadcasts = True
    _hook_saves = hook_saves_of(2)  # PyTorch's node saves the index

    def forward(self, x, value, idx, dim):
        self.meta = (idx, dim)
        out = _xp(x).array(x, copy=True)
        target = out.reshape(1) if x.ndim == 0 else out  # a 0-d input: one element
        target[_along(idx, dim)] = through_float32(value, x.dtype)  # PyTorch's double rounding
        return out

    def backward(self, gy):
        idx, dim = self.meta
        idx, = self._saved_and_hooked(idx)[1]  # as the hooks' unpack gives it
        g_x = IndexFill.apply(gy, 0, idx, dim) if self._edges[0] is not None else None
        g_v = None
        if self._edges[1] is not None:
            g_v = IndexSelect.apply(gy, _xp(idx).unique(idx), dim).sum()
        return g_x, g_v, None, None

    jvp = _jvp.linear(0, 1)
    batch = _batch.index_scatter


def _dim_and_index(op, input, dim, index, kinds="int32 or int64", exc=RuntimeError):
    idx = _index_array(op, index, kinds, exc)
    if idx.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector")
    nd = input._data.ndim
    d = wrap_dim(dim, nd)
    return d, idx.reshape(-1)


@with_out_apart
@follows_int_reads
def index_select(input, dim, index, *, out=None):
    """The slices of ``input`` along ``dim`` at the positions in ``index`` (1-D)."""
    d, idx = _dim_and_index("index_select", input, dim, index)
    if input._data.ndim == 0:
        if idx.size != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                               f"{idx.size} value(s)")
        _check_range(idx, 1, 0, IndexError)
        if transforming():  # the modes' rules (vmap's) take the op on arrays of 1+ dims
            return input.clone()
        return IndexSelect.apply(input, idx, 0)  # PyTorch's node, on the 0-d input
    n = input._data.shape[d]
    if n == 0 and idx.size:
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    if idx.size and not _is_meta(idx) and (int(idx.min()) < 0 or int(idx.max()) >= n):
        raise IndexError("index out of range in self")
    return IndexSelect.apply(input, idx, d)


def _slice_shape_check(op, input, source, idx, d):
    xs, ss = input._data.shape, source._data.shape
    if op != "index_add_":  # index_copy sees a 0-d operand as one element
        xs, ss = xs or (1,), ss or (1,)
    elif not xs and not ss:
        xs = ss = (1,)
    n_src = ss[d] if d < len(ss) else 1
    if idx.size != n_src:
        if op == "index_add_":
            raise RuntimeError(f"index_add_(): Number of indices ({idx.size}) should be equal to "
                               f"source.size(dim): ({n_src}), for dim: {d}")
        raise IndexError(f"{op}(): Number of indices ({idx.size}) should be equal to "
                         f"source.size(dim) ({n_src})")
    if len(ss) != len(xs) or any(a != b for k, (a, b) in enumerate(zip(xs, ss)) if k != d):
        if op == "index_add_":
            raise RuntimeError(f"source tensor shape must match self tensor shape, excluding "
                               f"the specified dimension. Got self.shape = {list(xs)} "
                               f"source.shape = {list(source._data.shape)}")
        raise RuntimeError(f"{op}(): Source/destination tensor must have same slice shapes. "
                           f"Destination slice shape: {list(xs)} and source slice shape: "
                           f"{list(source._data.shape)}.")


@with_out
def index_add(input, dim, index, source, *, alpha=1, out=None):
    """``input`` with ``alpha * source``'s slices added along ``dim`` at ``index``;
    repeated indices sum."""
    if index._data.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{_dtype_name(index)}")
    d, idx = _dim_and_index("index_add_", input, dim, index)
    if source._data.dtype != input._data.dtype:
        raise RuntimeError(f"index_add_(): self ({_dtype_name(input)}) and source "
                           f"({_dtype_name(source)}) must have the same scalar type")
    _slice_shape_check("index_add_", input, source, idx, d)
    _check_range(idx, input._data.shape[d] if input._data.ndim else 1, d, negative=False)
    kind = input._data.dtype.kind
    if kind in "iub" and isinstance(alpha, (int, float)):  # PyTorch converts alpha first
        alpha = bool(alpha) if kind == "b" else checked_scalar(alpha, input._data.dtype)
    if input._data.ndim == 0:  # a 0-d self is one element along dim 0
        if transforming():  # the modes' rules take the op on 1+ dims
            return index_add(input.reshape(1), 0, index, source.reshape(1),
                             alpha=alpha).reshape(())
        return IndexAdd.apply(input, source, idx, 0, alpha)
    return IndexAdd.apply(input, _slices_of(input, source, idx, d), idx, d, alpha)


@with_out
@follows_int_reads
def index_copy(input, dim, index, source, *, out=None):
    """``input`` with ``source``'s slices written along ``dim`` at ``index``."""
    if index._data.dtype != np.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got "
                           f"{_dtype_name(index)}")
    if index._data.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got "
                         f"{index._data.ndim})")
    d, idx = _dim_and_index("index_copy_", input, dim, index)
    if source._data.dtype != input._data.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {_dtype_name(input)} and (source) "
                           f"{_dtype_name(source)}")
    _slice_shape_check("index_copy_", input, source, idx, d)
    _check_range(idx, input._data.shape[d] if input._data.ndim else 1, d, IndexError,
                 "index_copy_(): ", negative=False)
    if input._data.ndim == 0 or source._data.ndim == 0:  # 0-d operands are one element
        if not transforming():
            return IndexCopy.apply(input, source, idx, d)
        res = index_copy(input.reshape(input.shape or (1,)), d, index,
                         source.reshape(source.shape or (1,)))
        return res.reshape(input.shape)
    return IndexCopy.apply(input, _slices_of(input, source, idx, d), idx, d)


def _slices_of(input, source, idx, d):
    """``source`` in the shape of ``input`` with ``len(idx)`` slices along ``d``: itself
    when it has that shape already (no node), else reshaped (a 0-d source is one slice)."""
    shape = input._data.shape[:d] + (idx.size,) + input._data.shape[d + 1:]
    return source if source._data.shape == shape else source.reshape(shape)


class IndexFillValue(IndexFill):
    _node_name = "IndexFillBackward0"  # PyTorch's overload with a number
    _op_name = "IndexFill"


def index_fill(input, dim, index, value):
    """``input`` with the slices along ``dim`` at ``index`` set to ``value`` (a number or
    a 0-d tensor, which gets a gradient)."""
    if isinstance(index, Tensor) and index._data.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    d, idx = _dim_and_index("index_fill_", input, dim, index, "int64", IndexError)
    if isinstance(value, Tensor):
        if value._data.ndim:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value._data.ndim} dimension(s).")
        if value._data.dtype != input._data.dtype:
            value = value.to(input.dtype)
    else:
        value = checked_scalar(value, input._data.dtype, "index_fill_(): Converting complex "
                               "Scalar to non-complex type is not supported")
    _check_range(idx, input._data.shape[d] if input._data.ndim else 1, d, IndexError)
    op = IndexFill if isinstance(value, Tensor) else IndexFillValue
    if input._data.ndim == 0 and transforming():  # the modes' rules take 1+ dims
        return op.apply(input.reshape(1), value, idx, 0).reshape(())
    return op.apply(input, value, idx, d)


def index_fill_(self, dim, index, value):
    """In-place :func:`index_fill`."""
    check_inplace(self)
    check_writes((self,), (dim, index, value))

    def scattered(a, result):
        # torch writes it into memory shared by several elements: the filled slices only
        from ember.ops._inplace import warn_shared_write
        warn_shared_write("index_fill_", "tensor[mask] = scalar", 7)  # (through _numpy_names)
        where = index_fill(_make(np.zeros(a.shape, np.bool_), False), dim, index, True)._data
        np.copyto(a, result._data, where=where)
    return commit(self, index_fill(self, dim, index, value), scattered)


def _bind():
    T = Tensor
    for fn in (index_select, index_add, index_copy, index_fill):
        setattr(T, fn.__name__, fn)
    index_fill_._forwards_to = index_fill  # its parameters, for ops._numpy_names
    T.index_fill_ = index_fill_
    for fn in (index_add, index_copy):
        setattr(T, fn.__name__ + "_", inplace_method(fn, False))


_bind()
