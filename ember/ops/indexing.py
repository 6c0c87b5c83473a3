"""Indexing: ``x[idx]``, ``x[idx] = v``, and masked fills.

Basic indices (ints, slices, None, Ellipsis) give views; advanced ones (int/bool
tensors or lists) give copies whose gradient is scattered back with accumulation,
so repeated indices sum their gradients.
"""
import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.ops._inplace import check_inplace, commit
from ember.ops._views import ViewPrimitive

__all__ = ["masked_fill"]

_BASIC = (int, slice, type(None), type(Ellipsis))


def _convert_index(idx, x):
    """Turn a user index into one NumPy accepts, with PyTorch's type rules and errors."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    out = []
    basic = True
    for i in idx:
        if isinstance(i, Tensor):
            a = i._data
            if a.dtype.kind == "f":
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
            if a.dtype == np.uint8:
                a = a.astype(bool)
            if a.ndim == 0 and a.dtype.kind in "iu":
                out.append(int(a))
                continue
            out.append(a)
            basic = False
        elif isinstance(i, bool):
            out.append(np.array(i))
            basic = False
        elif isinstance(i, (int, np.integer)):
            out.append(int(i))
        elif isinstance(i, slice):
            if i.step is not None and int(i.step) <= 0:
                raise ValueError("step must be greater than zero")
            out.append(slice(_intify(i.start), _intify(i.stop), _intify(i.step)))
        elif i is None or i is Ellipsis:
            out.append(i)
        elif isinstance(i, (list, tuple, np.ndarray)):
            a = np.asarray([v.item() if isinstance(v, Tensor) else v for v in i]
                           if isinstance(i, (list, tuple)) else i)
            if a.dtype.kind == "f":
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
            if a.dtype == object:
                raise IndexError(f"invalid index {i!r}")
            if a.size == 0:
                a = a.astype(np.int64)
            out.append(a)
            basic = False
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"byte Variables are valid indices (got {type(i).__name__})")
    return tuple(out), basic


def _intify(v):
    if v is None:
        return None
    return int(v)


def _index(arr, idx):
    try:
        return arr[idx]
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None


class GetItem(ViewPrimitive):
    """Basic indexing: a view."""
    _node_name = "SliceBackward0"

    def forward(self, x, idx):
        self.idx = idx
        self.in_shape = x.shape
        return _index(x, idx)

    def backward(self, gy):
        return IndexScatter.apply(gy, self.in_shape, self.idx, False), None


class GetItemAdvanced(Primitive):
    """Advanced indexing: a copy."""
    _node_name = "IndexBackward0"

    def forward(self, x, idx):
        self.idx = idx
        self.in_shape = x.shape
        return _index(x, idx)

    def backward(self, gy):
        return IndexScatter.apply(gy, self.in_shape, self.idx, True), None


class IndexScatter(Primitive):
    """Zeros of ``shape`` with ``g`` added at ``idx`` (the adjoint of indexing)."""
    _node_name = "IndexPutBackward0"

    def forward(self, g, shape, idx, accumulate):
        self.idx = idx
        out = np.zeros(shape, dtype=g.dtype) if type(g) is np.ndarray else \
            _xp(g).zeros(shape, dtype=g.dtype)
        if accumulate:
            np.add.at(out, idx, g) if type(g) is np.ndarray else \
                _xp(g).add.at(out, idx, g)
        else:
            out[idx] = g
        return out

    def backward(self, gy):
        return gy[self.idx], None, None, None


def _xp(a):
    from ember.backend import array_module
    return array_module(a)


def getitem(self, idx):
    """``x[idx]`` with ints, slices, None, ``...``, int/bool tensors or lists, mixed."""
    if type(idx) is int and self._data.ndim:
        n = self._data.shape[0]
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of bounds for dimension 0 with size {n}")
        return GetItem.apply(self, idx)
    if self._data.ndim == 0 and not (idx is None or idx is Ellipsis or idx == () or isinstance(
            idx, (Tensor, bool)) or (isinstance(idx, tuple) and all(
                i is None or i is Ellipsis for i in idx))):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    np_idx, basic = _convert_index(idx, self)
    if basic:
        return GetItem.apply(self, np_idx)
    return GetItemAdvanced.apply(self, np_idx)


class IndexPut(Primitive):
    """``x`` with ``value`` written at ``idx`` (the out-of-place form of ``x[idx] = v``)."""
    _node_name = "IndexPutBackward0"

    def forward(self, x, value, idx):
        self.idx = idx
        self.value_shape = np.shape(value)
        out = x.copy()
        out[idx] = value
        return out

    def backward(self, gy):
        idx = self.idx
        g_x = IndexPut.apply(gy, 0.0, idx) if self._edges[0] is not None else None
        g_v = None
        if self._edges[1] is not None:
            g_v = gy[idx] if not isinstance(idx, tuple) else _getitem_np(gy, idx)
            g_v = g_v.sum_to_size(self.value_shape) if g_v._data.shape != self.value_shape \
                else g_v
        return g_x, g_v, None


def _getitem_np(t, np_idx):
    basic = all(isinstance(i, _BASIC) for i in np_idx)
    return GetItem.apply(t, np_idx) if basic else GetItemAdvanced.apply(t, np_idx)


def setitem(self, idx, value):
    """``x[idx] = value``: in place, and differentiable w.r.t. both ``x`` and ``value``."""
    np_idx, _ = _convert_index(idx, self)
    if isinstance(value, Tensor):
        if value._data.dtype != self._data.dtype:
            value = value.to(self.dtype)
    elif not isinstance(value, (int, float, bool, np.generic)):
        from ember._factory import tensor
        value = tensor(value, dtype=self.dtype)
    from ember.autograd.grad_mode import state
    if not state.grad_enabled or not (self._requires_grad or (
            isinstance(value, Tensor) and value._requires_grad)):
        try:
            self._data[np_idx] = value._data if isinstance(value, Tensor) else value
        except IndexError as e:
            raise IndexError(str(e).replace("axis", "dimension")) from None
        except ValueError as e:
            raise RuntimeError(f"shape mismatch: {e}") from None
        self._vc[0] += 1
        return
    check_inplace(self)
    try:
        result = IndexPut.apply(self, value, np_idx)
    except ValueError as e:
        raise RuntimeError(f"shape mismatch: {e}") from None
    commit(self, result)


class MaskedFill(Primitive):
    broadcasts = True

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
            v = v.astype(x.dtype)
        elif x.dtype.kind != "f" and isinstance(v, float) and not v.is_integer():
            v = x.dtype.type(v)
        return np.where(mask, np.asarray(v, dtype=x.dtype), x)

    def backward(self, gy):
        m = _make(self.mask)
        g_x = gy.masked_fill(m, 0.0) if self._edges[0] is not None else None
        g_v = None
        if self._edges[2] is not None:
            g_v = gy.masked_fill(~m, 0.0).sum()
        return g_x, None, g_v


def masked_fill(input, mask, value):
    """``input`` with ``value`` where ``mask`` (bool, broadcastable) is True."""
    return MaskedFill.apply(input, mask, value)


def masked_fill_(self, mask, value):
    """In-place ``masked_fill``."""
    check_inplace(self)
    return commit(self, MaskedFill.apply(self, mask, value))


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
Tensor.masked_fill = masked_fill
Tensor.masked_fill_ = masked_fill_
