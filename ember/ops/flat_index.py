"""Elements by flat position or by mask, each one node over its inputs as in PyTorch:
``take``, ``put`` (and ``put_``) and ``masked_select``. Under transforms and captures
they run as the index ops of ``indexing``, which have their rules and spellings."""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd._modes import routed
from ember.autograd.node import Primitive
from ember.autograd.saved import hook_saves_of
from ember.backend.meta import is_meta as _is_meta
from ember.ops import _jvp
from ember.ops._inplace import check_inplace, commit
from ember.ops._util import type_name, with_out_apart
from ember.ops.indexing import GetItemAdvanced, IndexPut, _name, _xp, transforming
from ember.ops.masking import _check_bool_mask

__all__ = ["masked_select", "take", "put"]


class Put(Primitive):
    """``x`` with ``src``'s elements written (or added) at the flat positions ``idx``."""
    _node_name = "PutBackward0"
    # PyTorch's node saves the index, and the source where it has a gradient
    _hook_saves = hook_saves_of(2, 1, if_grad=(1,))

    def forward(self, x, src, idx, accumulate):
        self.meta = (idx, accumulate, src.shape)
        xp = _xp(x)
        out = xp.array(x, copy=True, order="C")
        flat, pos, vals = out.reshape(-1), idx.reshape(-1), src.reshape(-1)
        if accumulate:
            xp.add.at(flat, pos, vals)
        else:
            flat[pos] = vals
        return out

    def backward(self, gy):
        idx, accumulate, src_shape = self.meta
        own = (idx,) if self._edges[1] is None else (idx, None)
        idx = self._saved_and_hooked(*own)[1][0]  # as the hooks' unpack gives it
        g_x = g_src = None
        if self._edges[0] is not None:
            g_x = gy if accumulate else Put.apply(
                gy, _make(_xp(gy._data).zeros(src_shape, gy._data.dtype)), idx, False)
        if self._edges[1] is not None:
            g_src = Take.apply(gy, idx)
            if idx.shape != src_shape:
                g_src = g_src.reshape(src_shape)
        return g_x, g_src, None, None

    jvp = _jvp.linear(0, 1)


class Take(Primitive):
    """The elements of ``x`` read as 1-D at the positions ``idx`` (of ``idx``'s shape)."""
    _node_name = "TakeBackward0"
    _hook_saves = hook_saves_of(1, 0)  # PyTorch's node saves the index and the input

    def forward(self, x, idx):
        self.meta = (x.shape, idx)
        return x.reshape(-1)[idx.reshape(-1)].reshape(idx.shape)

    def backward(self, gy):
        shape, idx = self.meta
        idx, _ = self._saved_and_hooked(idx, None)[1]  # as the hooks' unpack gives it
        zeros = _make(_xp(gy._data).zeros(shape, gy._data.dtype))
        return Put.apply(zeros, gy, idx, True), None

    jvp = _jvp.linear(0)


def put(input, index, source, accumulate=False):
    """``input`` with ``source``'s elements written at the flat positions ``index``."""
    idx = _check_flat_index(index, input._data.size, "put_")
    if source._data.dtype != input._data.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_name(input)} and source.dtype = {_name(source)}")
    if source._data.size != idx.size:
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source._data.size}, "
                         f"index.numel() = {idx.size}")
    if transforming():  # transforms and captures see it as an index_put on the flat view
        return IndexPut.apply(input.reshape(-1), source.reshape(-1), (Ellipsis,),
                              (idx.reshape(-1),), bool(accumulate)).reshape(input.shape)
    return Put.apply(input, source, idx, bool(accumulate))


def put_(self, index, source, accumulate=False):
    """In-place :func:`put`."""
    check_inplace(self)
    return commit(self, put(self, index, source, accumulate))


def _check_flat_index(index, n, op="take"):
    a = index._data
    if n == 0 and a.size and op == "take":
        raise IndexError("take(): tried to take from an empty tensor")
    if a.dtype != np.int64:
        raise RuntimeError(f"{op}(): Expected a long tensor for index, but got "
                           f"{type_name(a.dtype)}")
    a = a.reshape(-1) if a.ndim != 1 else a
    if a.size and not _is_meta(a):
        lo, hi = int(a.min()), int(a.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} "
                             "elements.")
    return index._data


@with_out_apart
def take(input, index):
    """The elements of ``input`` (read as 1-D) at ``index``; the result has ``index``'s shape."""
    idx = _check_flat_index(index, input._data.size)
    if transforming():  # transforms and captures see it as an index of the flat view
        return GetItemAdvanced.apply(input.reshape(-1), (idx,))
    return Take.apply(input, idx)


class MaskedSelect(Primitive):
    """The elements of ``x`` where ``mask`` (an array; both broadcast) is True, as 1-D."""
    _node_name = "MaskedSelectBackward0"
    _hook_saves = hook_saves_of(1, 0)  # PyTorch's node saves the mask and the input

    def forward(self, x, mask):
        xp = _xp(x)
        shape = np.broadcast_shapes(x.shape, mask.shape)
        pos = xp.broadcast_to(mask, shape).reshape(-1).nonzero()[0]
        self.meta = (x.shape, shape, pos)
        return xp.broadcast_to(x, shape).reshape(-1)[pos]

    def backward(self, gy):
        in_shape, shape, pos = self.meta
        mask, _ = self._saved_and_hooked(None, None)[1]
        if mask is not None:  # the mask as the hooks' unpack gives it
            pos = _xp(mask).broadcast_to(mask, shape).reshape(-1).nonzero()[0]
        zeros = _make(_xp(gy._data).zeros(shape, gy._data.dtype))
        g = Put.apply(zeros, gy, pos, False)
        return (g if shape == in_shape else g.sum_to_size(in_shape)), None

    jvp = _jvp.linear(0)


def _check_broadcast(a, b):
    """PyTorch's error where the shapes ``a`` and ``b`` (the mask's first) do not broadcast."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    for d in range(n - 1, -1, -1):
        if pa[d] != pb[d] and pa[d] != 1 and pb[d] != 1:
            raise RuntimeError(f"The size of tensor a ({pa[d]}) must match the size of tensor b "
                               f"({pb[d]}) at non-singleton dimension {d}")


@routed  # vmap refuses a batched mask (ember.func._function_rules)
@with_out_apart
def masked_select(input, mask):
    """A 1-D tensor of the elements of ``input`` where ``mask`` is True (both broadcast)."""
    _check_bool_mask("masked_select", mask)
    _check_broadcast(mask._data.shape, input._data.shape)
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        # a whole call in a capture: its length is the number of True values of the
        # mask, which a replay counts again
        return m.composite("masked_select", masked_select, (input, mask), {})
    if not transforming():
        return MaskedSelect.apply(input, mask._data)
    # transforms and captures see it as broadcasting and an index
    from ember.ops.shape import broadcast_tensors
    x, m = broadcast_tensors(input, mask)
    if x._data.ndim == 0:
        x, m = x.reshape(1), m.reshape(1)
    return GetItemAdvanced.apply(x, _xp(m._data).nonzero(m._data))


Tensor.masked_select = masked_select
Tensor.put = put
Tensor.put_ = put_
Tensor.take = take
