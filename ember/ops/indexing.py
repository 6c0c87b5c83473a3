"""Indexing: ``x[idx]``, ``x[idx] = v`` and ``index_put`` (``take``, ``put`` and
``masked_select`` are in ``flat_index``; ``masked_fill``, ``masked_scatter`` and ``nonzero``
in ``masking``).

An index is applied in two stages, as PyTorch does: first its basic part (ints,
slices, None, ``...``) as a view, then its advanced part (int/bool tensors or
lists) as a copy. Ints are applied before the advanced part, so ``x[0, :, [0, 1]]``
has PyTorch's shape (NumPy would move the advanced dim to the front). The
gradient of an advanced index is scattered back with accumulation, so repeated
indices sum their gradients.
"""
import warnings

import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder, _mode_stack
from ember.autograd._modes import routed
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive, _wrap
from ember.backend import dtypes as _dt
from ember.backend.meta import is_meta as _is_meta
from ember.ops import _batch, _jvp
from ember.ops._inplace import (
    check_inplace,
    commit,
    overlaps_itself,
    refuse_overlap,
    warn_shared_write,
    writable,
)
from ember.ops._overlap import refuse_basic_write_overlap
from ember.ops._util import checked_scalar, reduced_float, write_error
from ember.ops._views import ViewPrimitive, grad_array

__all__ = ["index_put", "index_put_"]

_BASIC = (int, slice, type(None), type(Ellipsis))
_FLOAT_INDEX = "tensors used as indices must be long, int, byte or bool tensors"
_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.uint8), np.dtype(np.bool_))


def transforming():
    """Whether a mode that transforms or captures calls sees this one (not only modes that
    watch, as the profiler): ops that record PyTorch's own node in eager mode then run as
    the ops those modes have rules and spellings for."""
    n = _mode_active[0]
    return bool(n) and not all(getattr(_mode_stack[i], "observer", False) for i in range(n))


def _xp(a):
    from ember.backend import array_module
    return array_module(a)


# ----- index parsing ------------------------------------------------------------------

def _as_tuple(idx):
    """PyTorch's rule for a non-tuple index: a short list holding sequences, slices,
    tensors, None or ``...`` is read as a tuple of indices (deprecated in PyTorch)."""
    if type(idx) is tuple:
        return idx
    if type(idx) is list and len(idx) < 32 and any(
            isinstance(i, (list, tuple, slice, Tensor)) or i is None or i is Ellipsis
            for i in idx):
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated; "
                      "use x[tuple(seq)] instead of x[seq].", UserWarning, stacklevel=3)
        return tuple(idx)
    return (idx,)


def _int_or_none(v):
    return None if v is None else int(v)


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def _convert_item(i):
    """One index item as int, slice, None, Ellipsis, bool (a Python bool), or an array."""
    if isinstance(i, Tensor):
        a = i._data
        k = a.dtype.kind
        if k == "f" or a.dtype not in _INDEX_DTYPES:
            raise IndexError(_FLOAT_INDEX)
        if a.dtype == np.uint8:
            a = a.astype(bool)
            k = "b"
        if a.ndim == 0:
            return bool(a) if k == "b" else int(a)
        return a
    if isinstance(i, (bool, np.bool_)):
        return bool(i)
    if isinstance(i, (int, np.integer)):
        return int(i)
    if isinstance(i, slice):
        step = _int_or_none(i.step)
        if step is not None and step <= 0:
            raise ValueError("step must be greater than zero")
        return slice(_int_or_none(i.start), _int_or_none(i.stop), step)
    if i is None or i is Ellipsis:
        return i
    if isinstance(i, range):
        i = list(i)  # PyTorch reads a range as the list of its values
    if isinstance(i, (list, tuple, np.ndarray)):
        if isinstance(i, np.ndarray):
            a = i
            if a.ndim == 0 and a.dtype.kind in "biu":
                return bool(a) if a.dtype.kind == "b" else int(a)
        else:
            a = np.asarray([v.item() if isinstance(v, Tensor) else v for v in i])
            if a.dtype.kind == "f" or a.size == 0:
                # PyTorch reads a list of Python numbers as a long index
                a = a.astype(np.int64)
        if a.dtype.kind == "f":
            raise IndexError(_FLOAT_INDEX)
        if a.dtype.kind not in "biu":
            raise IndexError(f"invalid index {i!r}")
        return a
    if isinstance(i, str):
        raise TypeError(f"new(): invalid data type '{type(i).__name__}'")
    raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                     f"Variables are valid indices (got {type(i).__name__})")


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def parse_index(idx, shape, like=None):
    """Split a user index into ``(basic, advanced)`` for a tensor of ``shape``.

    ``basic`` is a NumPy basic index (it ends with ``...`` so that a full integer
    index still gives a 0-d view); ``advanced`` is None, or a tuple of slices and
    int arrays to apply to the result of ``basic`` (bool masks become their
    ``nonzero`` arrays, Python bools a new dim indexed by ``[0]`` or ``[]``). Index
    arrays are moved to ``like``'s array module (CuPy for cuda tensors).
    """
    items = [_convert_item(i) for i in _as_tuple(idx)]
    ndim = len(shape)
    consumed = 0
    for it in items:
        if it is Ellipsis or it is None or type(it) is bool:
            continue
        elif type(it) is int or type(it) is slice or it.dtype.kind != "b":
            consumed += 1
        else:
            consumed += it.ndim
    if consumed > ndim:
        if ndim == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    if sum(1 for it in items if it is Ellipsis) > 1:
        items = _expand_ellipses(items, ndim, consumed)
    basic, adv = [], []
    bad = []
    has_adv = False
    dim = 0
    for it in items:
        if it is Ellipsis:
            k = ndim - consumed
            basic.extend([slice(None)] * k)
            adv.extend([slice(None)] * k)
            dim += k
        elif it is None:
            basic.append(None)
            adv.append(slice(None))
        elif type(it) is bool:
            basic.append(None)
            adv.append(np.zeros(1 if it else 0, dtype=np.int64))
            has_adv = True
        elif type(it) is int:
            n = shape[dim]
            if not -n <= it < n:
                raise IndexError(f"index {it} is out of bounds for dimension {dim} with size {n}")
            basic.append(it)
            dim += 1
        elif type(it) is slice:
            basic.append(it)
            adv.append(slice(None))
            dim += 1
        elif it.dtype.kind == "b":
            k = it.ndim
            if tuple(it.shape) != tuple(shape[dim:dim + k]):
                for j in range(k):
                    if it.shape[j] != shape[dim + j]:
                        raise IndexError(
                            f"The shape of the mask {list(it.shape)} at index {j} does not match "
                            f"the shape of the indexed tensor {list(shape)} at index {dim + j}")
            basic.extend([slice(None)] * k)
            adv.extend(_xp(it).nonzero(it))
            has_adv = True
            dim += k
        else:
            n = shape[dim]
            if it.size and not _is_meta(it):
                lo, hi = int(it.min()), int(it.max())
                if lo < -n or hi >= n:
                    bad.append((len(adv), lo if lo < -n else hi, dim, n))
            basic.append(slice(None))
            adv.append(it)
            has_adv = True
            dim += 1
    basic.append(Ellipsis)
    if not has_adv:
        return tuple(basic), None
    while adv and type(adv[-1]) is slice:
        adv.pop()
    if bad:
        _out_of_range(shape, basic, adv, bad)
    if like is not None and type(like) is not np.ndarray:
        xp = _xp(like)
        adv = [a if type(a) is slice else xp.asarray(a) for a in adv]
    return tuple(basic), tuple(adv)


def _out_of_range(shape, basic, adv, bad):
    """Raise for an out-of-range index, unless the result is empty anyway (PyTorch
    checks only the indices it uses): then clip them, as their values are unused."""
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1), shape, (0,) * len(shape))
    rshape = dummy[tuple(basic)].shape
    arrays = [a for a in adv if type(a) is not slice]
    empty = any(rshape[i] == 0 for i in range(len(rshape))
                if i >= len(adv) or type(adv[i]) is slice)
    try:
        empty = empty or 0 in np.broadcast_shapes(*[a.shape for a in arrays])
    except ValueError:
        pass
    if not empty:
        _, v, dim, n = bad[0]
        raise IndexError(f"index {v} is out of bounds for dimension {dim} with size {n}")
    for pos, _, _, n in bad:
        adv[pos] = _xp(adv[pos]).clip(adv[pos], -n, max(n - 1, 0)) if n else \
            adv[pos] * 0


def _expand_ellipses(items, ndim, consumed):
    """PyTorch reads every ``...`` as the dims no other item names, so a second one
    runs past the last dim: full slices there are no-ops, anything else an error."""
    out = []
    pos = 0  # PyTorch's dim pointer, which may run past the tensor's dims
    for it in items:
        if it is Ellipsis:
            for _ in range(ndim - consumed):
                if pos < ndim:
                    out.append(slice(None))
                pos += 1
            continue
        if it is None or type(it) is bool:
            if pos > ndim:
                raise IndexError(f"Dimension out of range (expected to be in range of "
                                 f"[{-ndim - 1}, {ndim}], but got {pos})")
            out.append(it)
            continue
        n = it.ndim if type(it) not in (int, slice) and it.dtype.kind == "b" else 1
        if pos + n > ndim:
            if type(it) is slice and it.start in (None, 0) and it.step in (None, 1):
                pos += 1
                continue
            raise IndexError(f"too many indices for tensor of dimension {ndim}")
        out.append(it)
        pos += n
    return out


_FULL = slice(None)


def _index(arr, idx):
    try:
        return arr[idx]
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None


# ----- reading ------------------------------------------------------------------------

class GetItem(ViewPrimitive):
    """Basic indexing: a view."""
    _node_name = "SliceBackward0"
    batch = _batch.getitem

    def forward(self, x, idx):
        self.idx = idx
        self.in_shape = x.shape
        return _index(x, idx)

    def backward(self, gy):
        g = grad_array(gy)
        if g is not None:
            # ``IndexScatter.forward``'s zeros and write, wrapped as its no-graph result
            out = np.zeros(self.in_shape, dtype=g.dtype)
            out[self.idx] = g
            return _wrap(out), None
        return IndexScatter.apply(gy, self.in_shape, self.idx, False), None

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``): a new array,
        the one ``backward`` wraps, so it may go to any node or leaf."""
        out = np.zeros(self.in_shape, dtype=g.dtype)
        out[self.idx] = g
        return out, None

    @property
    def grad_region(self):
        """Where the input's gradient can be nonzero (the engine adds only that part
        into a gradient already buffered)."""
        return self.idx


class Select(GetItem):
    """Basic indexing whose last index that does something is an int (``x[0]``,
    ``x[:, 2]``): PyTorch's last node for it is a ``select``."""
    _node_name = "SelectBackward0"


class GetItemUnsqueeze(GetItem):
    """Basic indexing whose last index that does something is None (``x[None]``)."""
    _node_name = "UnsqueezeBackward0"
    _op_name = "GetItem"


class GetItemAlias(GetItem):
    """Basic indexing that does nothing (``x[...]``, ``x[:]``): PyTorch's alias."""
    _node_name = "AliasBackward0"
    _op_name = "GetItem"


def _basic_steps(idx, shape):
    """The steps PyTorch's indexing takes for the basic index tuple ``idx`` (ints, slices,
    None and one ``...``) on ``shape``, as ``(class, dim, item)``: items act in order, each
    on the result of the ones before (an int selects, None unsqueezes, a slice slices
    unless it keeps the whole dim, which is skipped); ``dim`` is the dim the item acts on
    in that result."""
    steps, dim, cur = [], 0, 0  # dim: in ``shape``; cur: in the result so far
    for it in idx:
        t = type(it)
        if t is int:
            steps.append((Select, cur, it))
            dim += 1
        elif it is None:
            steps.append((GetItemUnsqueeze, cur, it))
            cur += 1
        elif t is slice:
            if not (it.start in (None, 0) and it.step in (None, 1) and
                    (it.stop is None or (type(it.stop) is int and dim < len(shape) and
                                         it.stop >= shape[dim]))):
                steps.append((GetItem, cur, it))
            dim += 1
            cur += 1
        elif it is Ellipsis:
            k = len(shape) - _n_dims_after(idx, it) - dim
            dim += k
            cur += k
    return steps


def _basic_class(idx, shape):
    """The class whose node PyTorch's indexing leaves last for the basic index ``idx``
    (see :func:`_basic_steps`); where no item does anything, an alias."""
    steps = _basic_steps(idx, shape)
    return steps[-1][0] if steps else GetItemAlias


def apply_basic(t, idx, alias=True):
    """``t[idx]`` for a basic index tuple, with PyTorch's nodes: one per item that does
    something, in order (``x[0, 1]`` is two selects), or an alias (with ``alias``; else
    ``t`` itself) where none does. Without a graph to record, one view does it all."""
    steps = _basic_steps(idx, t._data.shape)
    if not steps:
        return GetItemAlias.apply(t, idx) if alias else t
    if len(steps) == 1 or not (t._requires_grad and _grad_state.grad_enabled):
        return steps[-1][0].apply(t, idx)
    for cls, cur, it in steps:
        t = cls.apply(t, (_FULL,) * cur + (it, Ellipsis))
    return t


def _n_dims_after(idx, ell):
    """How many dims the items after ``...`` in ``idx`` index."""
    after = idx[next(i for i, it in enumerate(idx) if it is ell) + 1:]
    return len([it for it in after if it is not None and it is not Ellipsis])


class GetItemAdvanced(Primitive):
    """Advanced indexing: a copy."""
    _node_name = "IndexBackward0"

    def _hook_saves(self, args, out):
        """PyTorch's node saves the index tensors (a mask as it is): for saved-tensor
        hooks (``Primitive._hook_saves``)."""
        return [(_make(it, False), None)
                for it in (self.idx if isinstance(self.idx, tuple) else (self.idx,))
                if isinstance(it, np.ndarray)]

    def forward(self, x, idx):
        self.idx = idx
        self.in_shape = x.shape
        return _index(x, idx)

    def backward(self, gy):
        idx = self.idx if self._hook_at is None else _with_hooked(self, self.idx)
        return IndexScatter.apply(gy, self.in_shape, idx, True), None

    jvp = _jvp.linear(0)
    batch = _batch.getitem_advanced


class IndexScatter(Primitive):
    """Zeros of ``shape`` with ``g`` written (or added, for advanced indices) at ``idx``:
    the adjoint of indexing."""
    _node_name = "IndexPutBackward0"
    batch = _batch.index_adjoint

    def forward(self, g, shape, idx, accumulate):
        self.idx, self.accumulate = idx, accumulate
        xp = _xp(g)
        out = xp.zeros(shape, dtype=g.dtype)
        if accumulate:
            xp.add.at(out, idx, g)
        else:
            out[idx] = g
        return out

    def backward(self, gy):
        cls = GetItemAdvanced if self.accumulate else GetItem
        return cls.apply(gy, self.idx), None, None, None

    jvp = _jvp.linear(0)


def gather_index(t, basic, adv):
    """``t[basic][adv]`` through the differentiable primitives."""
    t = apply_basic(t, basic, alias=False)
    if adv is not None:
        t = GetItemAdvanced.apply(t, adv)
    return t


def getitem(self, idx):
    """``x[idx]`` with ints, slices, None, ``...``, int/bool tensors or lists, mixed."""
    if _mode_active[0] and (m := _mode_recorder((self, idx))) is not None:
        return m.composite("getitem", getitem, (self, idx), {})
    ti = type(idx)
    if ti is int:
        shape = self._data.shape
        if not shape:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        n = shape[0]
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of bounds for dimension 0 with size {n}")
        return Select.apply(self, (idx, Ellipsis))
    if ti is slice and (idx.step is None or (type(idx.step) is int and idx.step > 0)) \
            and self._data.ndim:
        # a lone slice is always PyTorch's slice node (even ``x[:]``; ``x[:,]`` is not)
        return GetItem.apply(self, (idx, Ellipsis))
    if ti is Tensor and self._data.size:
        a = idx._data
        if a.ndim and (a.dtype == np.int64 or a.dtype == np.int32) and a.size and \
                not _is_meta(a) and \
                type(a) is type(self._data):  # (an index on another device: parse_index)
            # fast path: one int tensor, the common gather of rows
            n = self._data.shape[0]
            lo, hi = int(a.min()), int(a.max())
            if lo < -n or hi >= n:
                raise IndexError(f"index {lo if lo < -n else hi} is out of bounds for "
                                 f"dimension 0 with size {n}")
            return GetItemAdvanced.apply(self, (a,))
    if ti is tuple:
        # fast path: ints, slices with a positive step, None and at most one ``...``
        n_ell = 0
        for i in idx:
            t = type(i)
            if t is int or i is None:
                continue
            if t is slice:
                if i.step is None or (type(i.step) is int and i.step > 0):
                    continue
                break
            if i is Ellipsis:
                n_ell += 1
                continue
            break
        else:
            if n_ell <= 1:
                return apply_basic(self, idx if n_ell else idx + (Ellipsis,))
    basic, adv = parse_index(idx, self._data.shape, self._data)
    if adv is None:
        return apply_basic(self, basic)
    return gather_index(self, basic, adv)


# ----- writing ------------------------------------------------------------------------

def _write(arr, basic, adv, value, accumulate):
    """Write (or add) ``value`` into ``arr[basic][adv]`` in place."""
    target = arr[basic]
    if adv is None:
        if accumulate:
            target += value
        else:
            target[...] = value
    elif accumulate:
        xp = _xp(arr)
        xp.add.at(target, adv, value)
    else:
        target[adv] = value


def _write_checked(arr, basic, adv, value, accumulate=False):
    try:
        _write(arr, basic, adv, value, accumulate)
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None
    except ValueError as e:
        if "read-only" in str(e):
            raise write_error(arr) from None
        target = arr[basic] if adv is None else arr[basic][adv]
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(np.shape(value))} "
                           f"cannot be broadcast to indexing result of shape "
                           f"{list(target.shape)}") from None


def _with_hooked(node, adv):
    """The advanced index ``adv`` (an array or a tuple of items) with its arrays replaced,
    in order, by what saved-tensor hooks' unpack gives back for them."""
    items = adv if isinstance(adv, (tuple, list)) else (adv,)
    own = [a for a in items if isinstance(a, np.ndarray)]
    hooked = iter(node._saved_and_hooked(*own)[1])
    out = [next(hooked) if isinstance(a, np.ndarray) else a for a in items]
    return type(adv)(out) if isinstance(adv, (tuple, list)) else out[0]


class IndexPut(Primitive):
    """``x`` with ``value`` written (or added) at ``x[basic][adv]``; out of place."""
    _node_name = "IndexPutBackward0"
    _edge_inputs = (0, 1)  # a number value is an edge too (a wrapped tensor in PyTorch)

    def _hook_saves(self, args, out):
        """PyTorch's node saves the index tensors, for saved-tensor hooks
        (``Primitive._hook_saves``)."""
        adv = args[3]
        return [(_make(a, False), None)
                for a in (adv if isinstance(adv, (tuple, list)) else (adv,))
                if isinstance(a, np.ndarray)]

    def forward(self, x, value, basic, adv, accumulate=False):
        # a value of another floating dtype is cast by the write itself (as a copy_)
        self.meta = (basic, adv, accumulate, np.shape(value), getattr(value, "dtype", None))
        out = _xp(x).array(x, copy=True)
        _write_checked(out, basic, adv, value, accumulate)
        return out

    def backward(self, gy):
        basic, adv, accumulate, value_shape, value_dtype = self.meta
        if self._hook_at is not None:  # the index arrays as the hooks' unpack gives them
            adv = _with_hooked(self, adv)
        g_x = g_v = None
        if self._edges[0] is not None:
            g_x = gy if accumulate else IndexPut.apply(gy, 0, basic, adv, False)
        if self._edges[1] is not None:
            g_v = _reduce_to(gather_index(gy, basic, adv), value_shape)
            if value_dtype is not None and value_dtype != g_v._data.dtype:
                g_v = g_v.to(_dt.FROM_NP[value_dtype])
        return g_x, g_v, None, None, None

    jvp = _jvp.linear(0, 1)
    complex32_math = True


def _reduce_to(g, shape):
    """Sum a gradient back to the shape of a value that was broadcast on assignment
    (which may also have had extra leading dims of size 1)."""
    if g._data.shape == tuple(shape):
        return g
    lead = 0
    while len(shape) - lead > g._data.ndim and shape[lead] == 1:
        lead += 1
    core = tuple(shape[lead:])
    if g._data.shape != core:
        g = g.sum_to_size(core)
    return g.reshape(shape) if lead else g


def _value_for(self, value):
    if isinstance(value, Tensor):
        dt, vdt = self._data.dtype, value._data.dtype
        if vdt != dt and not (value._requires_grad and _grad_state.grad_enabled and
                              dt.kind == vdt.kind == "f"):
            value = value.to(self.dtype)
        if type(value._data) is not type(self._data) and not value._data.ndim:
            value = value.to(self.device)  # a 0-dim value from another device: a scalar
        return value
    if isinstance(value, (int, float, bool, complex, np.generic)):
        # PyTorch's checked conversion (its errors, truncation, wrapping; float16 and
        # bfloat16 are reached unchecked, past their range to inf), then its double rounding
        dt = self._data.dtype
        checked = checked_scalar(value, np.dtype(np.float64) if reduced_float(dt) else dt)
        return _dt.through_float32(checked, dt)
    from ember._factory import tensor
    return tensor(value, dtype=self.dtype, device=self.device)


# ``x[idx] = v`` as PyTorch records it: a copy into the view ``x[basic]`` (its node wraps
# the copy: CopySlices), or, where ``basic`` is all of ``x``, the copy itself
class SetItemSlices(IndexPut):
    _node_name = "torch::autograd::CopySlices"
    _op_name = "IndexPut"


class SetItemCopy(IndexPut):
    _node_name = "torch::autograd::CopyBackwards"
    _op_name = "IndexPut"


def _put(self, basic, adv, value, accumulate, op=IndexPut):
    """Write into ``self`` in place, recording the write when a graph is being built."""
    value = _value_for(self, value)
    if not _grad_state.grad_enabled or not (self._requires_grad or (
            isinstance(value, Tensor) and value._requires_grad)):
        if _mode_active[0]:  # a mode (a trace) sees the write as the op
            return commit(self, op.apply(self, value, basic, adv, accumulate))
        arr = self._data
        if type(arr) is np.ndarray and 0 in arr.strides and overlaps_itself(arr):
            # torch writes an indexed assignment into memory shared by several elements,
            # element by element; a copy into a slice that overlaps itself it refuses
            if adv is None:
                refuse_overlap(_make(arr[basic], False))
            else:
                warn_shared_write("index_put_", "tensor[indices] = tensor")
            arr = writable(arr)
        _write_checked(arr, basic, adv, value._data if isinstance(value, Tensor) else value,
                       accumulate)
        self._vc[0] += 1
        return self
    check_inplace(self)
    return commit(self, op.apply(self, value, basic, adv, accumulate))


def setitem(self, idx, value):
    """``x[idx] = value``: in place, and differentiable w.r.t. both ``x`` and ``value``."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.setitem(setitem, self, idx, value)
    if not isinstance(value, (Tensor, int, float, complex, np.generic, np.ndarray)) and \
            not hasattr(value, "__cuda_array_interface__"):
        raise TypeError(f"can't assign a {type(value).__name__} to a {self.type()}")
    basic, adv = parse_index(idx, self._data.shape, self._data)
    if type(idx) is Tensor or type(idx) is tuple:
        _check_byte_mask_fill(idx if type(idx) is tuple else (idx,), value)
    if _basic_class(basic, self._data.shape) is not GetItemAlias:
        op = SetItemSlices
    else:
        op = IndexPut if adv is not None else SetItemCopy
    if adv is not None and isinstance(value, Tensor) and \
            value._data.dtype != self._data.dtype and not (
                value._data.ndim == 0 and _one_mask(idx)):
        _index_put_dtype_error(self, basic, adv, value)
    if adv is None and isinstance(value, Tensor):
        refuse_basic_write_overlap(self._data, basic, value)
    if isinstance(value, Tensor) and value._requires_grad and _grad_state.grad_enabled:
        value = _setitem_value(value, self._data[basic].shape, adv is None)
    _put(self, basic, adv, value, False, op)


def _check_byte_mask_fill(items, value):
    """PyTorch writes a one-element value at one mask (the only tensor of the index) as
    ``masked_fill_``, which refuses a uint8 mask: its error, where it would raise."""
    tensors = [i for i in items if isinstance(i, (Tensor, list, range, np.ndarray))]
    if len(tensors) != 1 or not isinstance(tensors[0], Tensor) or \
            tensors[0]._data.dtype != np.uint8 or not tensors[0]._data.ndim:
        return
    n = value._data.size if isinstance(value, Tensor) else np.size(value)
    if n == 1:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           "unsigned char")


def _one_mask(idx):
    """Whether the advanced part of ``idx`` is one bool (or byte) tensor."""
    items = idx if type(idx) is tuple else (idx,)
    adv = [i for i in items if isinstance(i, (Tensor, list, range, np.ndarray))]
    return len(adv) == 1 and isinstance(adv[0], Tensor) and \
        adv[0]._data.dtype in (np.bool_, np.uint8)


def _index_put_dtype_error(self, basic, adv, value):
    """PyTorch's error for ``x[idx] = v`` with an advanced index and a ``v`` of another
    dtype (``index_put_`` takes none; a 0-d value under one mask is a ``masked_fill_``,
    which casts): a shape that cannot be written is reported first, as there."""
    target = _index(self._data[basic], adv).shape
    shape = value._data.shape
    lead = 0
    while lead < len(shape) and shape[lead] == 1:
        lead += 1
    try:
        core = shape[lead:]  # a zero-stride stand-in: nothing is allocated
        np.broadcast_to(np.lib.stride_tricks.as_strided(np.zeros(1), core, (0,) * len(core)),
                        target)
    except ValueError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(shape[lead:])} cannot "
                           f"be broadcast to indexing result of shape {list(target)}") from None
    raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                       f"{_name(self)} for the destination and {_name(value)} for the source.")


def _setitem_value(value, dst, copy):
    """The value as PyTorch's ``x[idx] = value`` prepares it, with its nodes: for a copy
    into the view ``x[basic]`` of shape ``dst`` (``copy``), a value of another shape that
    is not 0-d loses its leading 1s (a view) and is expanded to ``dst``; for an
    ``index_put`` (an advanced index), only leading 1s are dropped."""
    from ember.ops.shape import Expand, View
    shape = value._data.shape
    if copy and (shape == dst or not shape):
        return value
    lead = 0
    while lead < len(shape) and shape[lead] == 1:
        lead += 1
    core = shape[lead:]
    if not copy:
        return View.apply(value, core) if lead else value
    if len(core) > len(dst) or any(s != 1 and s != d for s, d in zip(core[::-1], dst[::-1])):
        return value  # not broadcastable: the write raises PyTorch's error
    value = View.apply(value, core)
    return value if core == dst else Expand.apply(value, dst)


def _index_put_args(input, indices, values):
    if isinstance(indices, Tensor) or not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' (position 1) must be tuple of "
                        f"Tensors, not {type(indices).__name__}")
    for i, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(values).__name__}")
    if values._data.dtype != input._data.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_name(input)} for the destination and {_name(values)} for the "
                           "source.")
    return parse_index(tuple(indices), input._data.shape, input._data)


def _name(t):
    from ember.ops._util import scalar_type_name
    return scalar_type_name(t.dtype)  # torch's C++ name (``Double``), as its messages


def index_put(input, indices, values, accumulate=False):
    """``input`` with ``values`` put at ``input[indices]`` (added there when
    ``accumulate``, so repeated indices sum); ``indices`` is a tuple of tensors."""
    basic, adv = _index_put_args(input, indices, values)
    if not accumulate:
        _check_byte_mask_fill(indices, values)
    return IndexPut.apply(input, values, basic, adv, bool(accumulate))


def index_put_(input, indices, values, accumulate=False):
    """In-place :func:`index_put`."""
    basic, adv = _index_put_args(input, indices, values)
    if not accumulate:
        _check_byte_mask_fill(indices, values)
    return _put(input, basic, adv, values, bool(accumulate))


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
Tensor.index_put = index_put
Tensor.index_put_ = index_put_


def _is_basic(key):
    key = key if type(key) is tuple else (key,)
    return all(k is None or k is Ellipsis or type(k) in (int, slice) or isinstance(k, int)
               for k in key)


def _getitem_vjp(grads, inputs, outputs, out=None):
    """``getitem``'s array gradient (``Primitive.vjp``'s form without ``self``, for the
    compile plan, which records the call): zeros with the gradient put (or, for an
    advanced index, added) at the indexed places."""
    x, key = inputs[0], inputs[1]
    gx = np.zeros(x.shape, x.dtype)
    if _is_basic(key):
        gx[key] = grads[0]
    else:
        np.add.at(gx, key, grads[0])
    return [gx, None]


getitem.vjp = _getitem_vjp
