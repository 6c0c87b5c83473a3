"""Masks: ``masked_fill`` and ``masked_scatter`` (``x`` with the True positions of a bool
mask replaced), and ``nonzero``, ``argwhere`` and ``nonzero_static`` (where a tensor is
nonzero). ``masked_select`` is in ``flat_index``; ``x[mask]`` and ``x[mask] = v`` are
advanced indexing (``indexing``).
"""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd._modes import routed
from ember.autograd.node import Primitive
from ember.autograd.saved import hook_saves_of
from ember.backend import dtypes as _dt
from ember.ops import _batch, _jvp
from ember.ops._inplace import check_inplace, commit, warn_shared_write
from ember.ops._util import checked_scalar, int_arg, traced_ints, type_name, with_out
from ember.ops.indexing import GetItemAdvanced, _xp

__all__ = ["masked_fill", "masked_scatter", "nonzero", "nonzero_static", "argwhere"]


class MaskedFill(Primitive):
    broadcasts = True
    _hook_saves = hook_saves_of(1)  # PyTorch's node saves the mask

    def forward(self, x, mask, value):
        if mask.dtype != np.bool_:
            raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with "
                               f"dtype {mask.dtype}")
        self.mask = mask
        v = value
        if hasattr(v, "ndim"):
            if v.ndim != 0:
                raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, "
                                   f"but got tensor with {v.ndim} dimension(s).")
            if isinstance(v, np.ndarray):  # PyTorch's checked conversion of its value
                checked_scalar(v.item(), x.dtype)
            v = _dt.through_float32(v, x.dtype).astype(x.dtype)  # PyTorch's double rounding
        else:  # PyTorch's checked conversion (its errors, truncation and wrapping), then
            # its double rounding
            v = _dt.through_float32(checked_scalar(v, x.dtype), x.dtype)
        return _xp(x).where(mask, _xp(x).asarray(v, dtype=x.dtype), x)

    def backward(self, gy):
        mask, = self._saved_and_hooked(self.mask)[1]  # as the hooks' unpack gives it
        m = _make(mask)
        g_x = gy.masked_fill(m, 0.0) if self._edges[0] is not None else None
        g_v = None
        if self._edges[2] is not None:
            g_v = gy.masked_fill(~m, 0.0).sum()
        return g_x, None, g_v

    jvp = _jvp.linear(0, 2)
    batch = _batch.elementwise
    complex32_math = True
    _edge_inputs = (0,)  # PyTorch's node lists the input only: the mask is no edge


class MaskedFillTensor(MaskedFill):
    """``masked_fill`` with a 0-d Tensor value: PyTorch's second overload."""
    _node_name = "MaskedFillBackward1"
    _op_name = "MaskedFill"
    _edge_inputs = (0, 2)


def _masked_fill(input, mask, value):
    op = MaskedFillTensor if isinstance(value, Tensor) else MaskedFill
    return op.apply(input, mask, value)


def masked_fill(input, mask, value):
    """``input`` with ``value`` (a number or 0-d tensor) where ``mask`` (bool,
    broadcastable) is True."""
    return _masked_fill(input, mask, value)


def masked_fill_(self, mask, value):
    """In-place ``masked_fill``."""
    check_inplace(self)
    def scattered(a, result):
        # torch writes it into memory shared by several elements: the masked positions only
        warn_shared_write("masked_fill_", "tensor[mask] = scalar", 6)
        np.copyto(a, result._data, where=mask._data)
    return commit(self, _masked_fill(self, mask, value), scattered)


def _check_bool_mask(op, mask):
    if not isinstance(mask, Tensor) or mask._data.dtype != np.bool_:
        raise RuntimeError(f"{op}: expected BoolTensor for mask")


class MaskedScatter(Primitive):
    """``x`` with the True positions of ``mask`` filled, in order, from ``source``."""
    broadcasts = True

    def forward(self, x, source, mask):
        xp = _xp(x)
        shape = np.broadcast_shapes(x.shape, mask.shape)
        mask = xp.broadcast_to(mask, shape)
        k = int(mask.sum())
        if source.size < k:
            raise RuntimeError("masked_scatter: Number of elements of source < number of ones "
                               "in mask")
        self.meta = (mask, source.shape, k)
        out = xp.array(xp.broadcast_to(x, shape), copy=True)
        out[mask] = source.reshape(-1)[:k].astype(x.dtype, copy=False)
        return out

    def backward(self, gy):
        mask, src_shape, k = self.meta
        m = _make(mask)
        g_x = g_src = None
        if self._edges[0] is not None:
            g_x = gy.masked_fill(m, 0.0)
        if self._edges[1] is not None:
            from ember.ops.shape import pad
            n = 1
            for s in src_shape:
                n *= s
            if mask.ndim == 0:  # a 0-d mask picks its one element, or none
                gy, mask = gy.reshape(-1), mask.reshape(-1)
            g_src = pad(GetItemAdvanced.apply(gy, _xp(mask).nonzero(mask)),
                        (0, n - k)).reshape(src_shape)
        return g_x, g_src, None

    jvp = _jvp.linear(0, 1)


def masked_scatter(input, mask, source):
    """``input`` with the True positions of ``mask`` taken, in order, from ``source``."""
    if isinstance(mask, Tensor) and mask._data.dtype != np.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {type_name(mask._data.dtype)}")
    _check_bool_mask("masked_scatter_", mask)
    if source._data.dtype != input._data.dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but "
                           f"got {type_name(input._data.dtype)} and "
                           f"{type_name(source._data.dtype)}")
    return MaskedScatter.apply(input, source, mask._data)


def masked_scatter_(self, mask, source):
    """In-place :func:`masked_scatter`."""
    check_inplace(self)
    return commit(self, masked_scatter(self, mask, source))


@with_out
@routed  # vmap refuses it: a result of each sample's own length (ember.func._function_rules)
def nonzero(input, *, out=None, as_tuple=False):
    """Indices of the nonzero elements: an ``(n, input.dim())`` int64 tensor, or with
    ``as_tuple`` one 1-D tensor per dim (a 0-d input counts as 1-D)."""
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        return m.composite_locals("nonzero", nonzero, locals())
    a = input._data
    xp = _xp(a)
    if as_tuple:
        return tuple(_make(i.astype(np.int64)) for i in xp.nonzero(xp.atleast_1d(a)))
    return _make(xp.argwhere(a).astype(np.int64))


def argwhere(input):
    """``nonzero(input)``: the indices of the nonzero elements, one row per element."""
    # not the routed nonzero, which vmap refuses: PyTorch's vmap runs argwhere sample by
    # sample (stacking rows of one length), and so does ember's loop
    return nonzero.routed.__wrapped__(input)


def nonzero_static(input, *, size, fill_value=-1):
    """``nonzero(input)`` with exactly ``size`` rows: truncated, or padded with
    ``fill_value``."""
    if _mode_active[0] and (m := _mode_recorder((input, size, fill_value))) is not None:
        # one node: its rows are the input's values (a trace kept them as a constant)
        r = traced_ints(size, fill_value)
        size, fill_value = (size, fill_value) if r is None else r[1]
        return m.composite("nonzero_static", _nonzero_static, (input, size, fill_value), {})
    return _nonzero_static(input, size, fill_value)


def _nonzero_static(input, size, fill_value):
    size, fill_value = int_arg(size), int_arg(fill_value)
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, but got "
                           f"{size}")
    x = input._data
    xp = _xp(x)
    nz = xp.stack(xp.nonzero(x.reshape(()) if x.ndim == 0 else x), axis=-1) if x.ndim else \
        xp.zeros((int(bool(x)), 0), dtype=np.int64)
    res = xp.full((int(size), x.ndim), fill_value, dtype=np.int64)
    k = min(int(size), nz.shape[0])
    res[:k] = nz[:k]
    return _make(res, False)


Tensor.masked_fill = masked_fill
Tensor.masked_fill_ = masked_fill_
Tensor.masked_scatter = masked_scatter
Tensor.masked_scatter_ = masked_scatter_
Tensor.nonzero = nonzero
Tensor.nonzero_static = nonzero_static
Tensor.argwhere = argwhere
