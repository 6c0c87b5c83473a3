"""Scatters by index and by stride: ``index_reduce`` and ``as_strided_scatter``.

``index_reduce`` is ``scatter_reduce`` with the index spread along the source's other
dims, so it shares that primitive's derivative; ``as_strided_scatter`` is a primitive
here (its gradient is a gather and a masked copy of the output gradient).
"""
import math

import numpy as np

from ember._tensor import Tensor, _make, _mode_active
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch
from ember.ops._inplace import inplace_method
from ember.ops._util import traced_ints, wrap_dim, write_out
from ember.ops.gather_scatter import ScatterReduce
from ember.ops.indexing import transforming

__all__ = ["index_reduce", "as_strided_scatter"]

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


class IndexReduce(ScatterReduce):
    """``index_reduce``: ``scatter_reduce`` with the index spread along the source's
    other dims (its arithmetic and derivative), PyTorch's node. Its kernel reduces
    float16/bfloat16 in their own dtype (a product may overflow where scatter_reduce's
    does not)."""
    _node_name = "IndexReduceBackward0"
    float32_accumulation = False


def index_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    """``input`` with the slices ``source.select(dim, i)`` reduced into
    ``input.select(dim, index[i])`` by ``reduce`` (``'prod'``, ``'mean'``, ``'amax'`` or
    ``'amin'``); ``include_self=False`` leaves ``input``'s values out of the reduction
    at the positions written to. Differentiable in ``input`` and ``source``."""
    import ember
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    if index.dim() > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    if index._data.dtype not in (np.int64, np.int32):
        raise RuntimeError("index_reduce_(): Expected dtype int32/int64 for index")
    if input.dtype != source.dtype:
        raise RuntimeError("index_reduce_(): self and source must have the same scalar type")
    d = wrap_dim(dim, max(input.dim(), 1))
    x, src = input, source
    if input.dim() == 0:  # a 0-d self is a 1-element vector along dim 0
        x = input.reshape(1)
    if src.dim() == 0:
        src = src.reshape(1)
    if src.dim() != x.dim():
        raise IndexError("index_reduce_(): Source and self must have the same number of "
                         "dimensions")
    n = index.numel()
    if src.shape[d] != n:
        raise IndexError("index_reduce_(): Number of indices should be equal to "
                         "source.size(dim)")
    a = index._data.reshape(-1)
    if a.size and (int(a.min()) < 0 or int(a.max()) >= x.shape[d]):
        raise IndexError("index out of range in self")
    if transforming():  # the modes' rules see it as the scatter_reduce it computes
        idx = index.reshape(-1).to(ember.int64).reshape(
            (1,) * d + (n,) + (1,) * (src.dim() - d - 1))
        res = ember.scatter_reduce(x, d, idx.expand(*src.shape), src, reduce,
                                   include_self=include_self)
    elif input.dim() == 0 and source.dim() == 0:
        # one node, as PyTorch's (its kernel takes 0-d operands as one element itself)
        return write_out(IndexReduce.apply(input, source, a.astype(np.int64).reshape(()), 0,
                                           reduce, bool(include_self)), out)
    else:
        idx = np.broadcast_to(a.astype(np.int64).reshape(
            (1,) * d + (n,) + (1,) * (src.dim() - d - 1)), src.shape)
        res = IndexReduce.apply(x, src, idx, d, reduce, bool(include_self))
    if input.dim() == 0:
        res = res.reshape(())
    return write_out(res, out) if out is not None else res


# ----- as_strided_scatter ------------------------------------------------------------------
def _strided_positions(size, stride, offset):
    """Flat (contiguous) positions of the elements of an ``as_strided`` view."""
    pos = np.full(tuple(size), int(offset), dtype=np.int64)
    for i, (n, s) in enumerate(zip(size, stride)):
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape((1,) * i + (n,) +
                                                                (1,) * (len(size) - i - 1))
    return pos


def _storage_lookup(x):
    """``(where, storage_size, offset)`` for reading ``as_strided_scatter``'s geometry in the
    storage under the array ``x``, as PyTorch does (``clone_preserve_strides``: the whole
    storage copied, ``x``'s view of it kept): ``where[p]`` is the (C-order) position in
    ``x`` of the element at storage position ``p``, -1 where ``x`` has none, and
    ``offset`` the position of ``x``'s first element. None when
    ``x`` is its whole storage in C order, or has elements sharing memory (PyTorch then
    clones it contiguously): the positions count in ``x`` itself."""
    from ember.ops._views import _positions, _storage_of
    found = _storage_of(x) if type(x) is np.ndarray and x.size else None
    if found is None:
        return None
    flat, own = found
    strides = tuple(st // x.itemsize for st in x.strides)
    if own == 0 and flat.size == x.size and x.flags.c_contiguous:
        return None
    pos = _positions(x.shape, strides, own).reshape(-1)
    where = np.full(flat.size, -1, dtype=np.int64)
    where[pos] = np.arange(x.size, dtype=np.int64)
    if (where >= 0).sum() != x.size:  # internal overlap (an expanded x)
        return None
    return where, flat.size, own


class AsStridedScatter(Primitive):
    """``input`` with the strided view ``(size, stride, offset)`` of its memory replaced
    by ``src``; the view counts in the storage under ``input`` (see
    :func:`_storage_lookup`); ``src``'s elements that land outside ``input`` are not
    seen."""
    _node_name = "AsStridedScatterBackward0"
    # the offset and strides count in memory that each sample's slice of a batch shares
    batch = _batch.refuse("vmap: as_strided_scatter has no batching rule (its storage "
                          "offset and strides would count in the whole batch's memory); "
                          "PyTorch's vmap refuses it too")

    def forward(self, x, src, size, stride, offset):
        xp = array_module(x)
        lookup = _storage_lookup(x)
        n = x.size if lookup is None else lookup[1]
        if offset is None:  # PyTorch's default: input's own offset in its storage
            offset = 0 if lookup is None else lookup[2]
        pos = _strided_positions(size, stride, offset)
        if pos.size and (pos.min() < 0 or pos.max() >= n):
            need = int(pos.max()) + 1
            raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, "
                               f"storage offset {offset}, and itemsize {x.itemsize} "
                               f"requiring a storage size of {need * x.itemsize} are out "
                               f"of bounds for storage of size {n * x.itemsize}")
        if lookup is not None:
            pos = lookup[0][pos]  # positions in x; -1: a storage element x does not show
        seen = pos >= 0
        flat = xp.array(x, copy=True).reshape(-1)
        values = xp.broadcast_to(xp.asarray(src, dtype=x.dtype), pos.shape)
        flat[xp.asarray(pos[seen])] = values[xp.asarray(seen)]
        self.meta = (x.shape, pos, None if seen.all() else seen)
        return flat.reshape(x.shape)

    def backward(self, gy):
        shape, pos, seen = self.meta
        xp = array_module(gy._data)
        flat = gy.reshape(-1)
        keep = np.ones(math.prod(shape), dtype=gy._data.dtype)
        keep[pos[pos >= 0]] = 0
        gx = (flat * _make(xp.asarray(keep), False)).reshape(shape)
        if seen is None:
            gsrc = flat[_make(xp.asarray(pos), False)]
        else:  # src's elements outside x have no effect on the result
            gsrc = flat[_make(xp.asarray(np.maximum(pos, 0)), False)] * \
                _make(xp.asarray(seen.astype(gy._data.dtype)), False)
        return gx, gsrc, None, None, None


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A copy of ``input`` where ``input.as_strided(size, stride, storage_offset)`` holds
    ``src``. Differentiable in both tensors.

    As in PyTorch, the geometry counts in the storage under ``input`` (the offset from
    the storage's start, default ``input``'s own): for a partial or permuted view,
    ``src``'s elements land on the elements of ``input`` at those storage positions, and
    those landing outside ``input`` are not seen."""
    if _mode_active[0] and (r := traced_ints(size, stride, storage_offset)) is not None:
        # a traced size, stride or offset: one node, run again at their values
        return r[0].composite("as_strided_scatter", as_strided_scatter, (input, src) + r[1], {})
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if tuple(src.shape) != size:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(size)}")
    if input.requires_grad and not input.is_contiguous():
        # PyTorch's kernel asserts this (its backward assumes a contiguous input)
        raise RuntimeError("as_strided_scatter is currently only supported for contiguous "
                           "inputs (an input that requires grad must be contiguous)")
    return AsStridedScatter.apply(input, src, size, stride,
                                  None if storage_offset is None else int(storage_offset))


def _bind():
    Tensor.index_reduce = index_reduce
    Tensor.index_reduce_ = inplace_method(index_reduce, copies_self=True)
    Tensor.as_strided_scatter = as_strided_scatter


_bind()
