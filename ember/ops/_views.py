"""Views: outputs that share memory (and the version counter) with their input.

Also the rebase done when a view is changed in place while a graph is recorded:
the view's region of the base is expressed as the flat positions of its elements
in the base, and the base gets a node that scatters the new values into it
(PyTorch's CopySlices).
"""
import weakref

import numpy as np

from ember._tensor import Tensor, _as_array, _make, _mode_active
from ember.autograd._saved_hooks import Packed as _Packed
from ember.autograd.anomaly import enabled as _anomaly
from ember.autograd.anomaly import forward_trace as _anomaly_trace
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import AccumulateGrad, Node, Primitive, _active
from ember.backend import array_module
from ember.backend.meta import is_meta as _is_meta
from ember.ops import _batch, _jvp
from ember.ops._grad_arrays import _plain_type
from ember.ops._util import refuse_storage_of_conj
from ember.storage import _memory_root

_ndarray = np.ndarray
_new = object.__new__
_ref = weakref.ref


class ViewPrimitive(Primitive):
    """A primitive whose outputs are views of its first input."""

    @classmethod
    def apply(cls, x, *args, **params):
        # The common case written out: one output, a Tensor input, plain arguments
        # (shapes, dims, index tuples), no mode, nothing saved. It makes the same Tensor
        # and node as ``Primitive.apply`` followed by ``_general`` below; a view costs
        # a few microseconds, so the general path's generic steps are most of its cost.
        if _active[0] or params or cls.n_outputs != 1 or not isinstance(x, Tensor) or \
                cls.save_inputs or cls.save_output:
            return cls._general(x, *args, **params)
        for a in args:
            if isinstance(a, Tensor):
                return cls._general(x, *args, **params)
        self = _new(cls)
        try:
            out = self.forward(x._data, *args)
        except Exception:  # noqa: BLE001 - errors and complex32 take the general path
            return cls._general(x, *args)
        if type(out) is not _ndarray:
            out = _as_array(out)
        base = x._base
        if base is None:
            base = x
        t = _new(Tensor)
        t._data = out
        t._grad = t._extra = None
        t._output_nr = 0
        t._base = base
        t._vc = x._vc
        if x._requires_grad and _grad_state.grad_enabled and out.dtype.kind in "fcV":
            fn = x.grad_fn
            edge = x if fn is None else (fn, x._output_nr)
            if args:
                # PyTorch lists the Tensor input only: dims and shapes are no edges
                self._edges = (edge, None) if len(args) == 1 else (edge,) + (None,) * len(args)
                self._n_in = 1
            else:
                self._edges = (edge,)
            if _anomaly[0]:
                self._trace = _anomaly_trace()
            t._requires_grad = True
            t.grad_fn = self
            if base.grad_fn is not None:  # ``_track(base, t)``, written out
                entry = _VIEWS.get(id(base))
                if entry is None or entry[0]() is not base or len(entry[1]) >= entry[2]:
                    _track(base, t)
                else:
                    entry[1].append(_ref(t))
        else:
            t._requires_grad = False
            t.grad_fn = None
        return t

    @classmethod
    def _general(cls, x, *args, **params):
        out = Primitive.apply.__func__(cls, x, *args, **params)
        base = x if x._base is None else x._base
        if type(out) is tuple:
            for o in out:
                o._base = base
                o._vc = x._vc
                if o._requires_grad and base.grad_fn is not None:
                    _track(base, o)
        else:
            out._base = base
            out._vc = x._vc
            if out._requires_grad and base.grad_fn is not None:
                _track(base, out)
        return out

    def jvp(self, t, *rest):
        # a view's tangent is the same view of its input's tangent (it shares its memory)
        if t is None:
            return None
        return type(self).apply(t, *self.fw_inputs[1:], **self.fw_params)


def grad_array(gy):
    """``gy``'s NumPy array when a view's backward formula may run on arrays, else None.

    Without a graph of the gradient (grad mode off in the engine) and with no mode
    watching ops, a view's formula (``gy.reshape(shape)``, ``gy.permute(inverse)``) only
    calls NumPy's view of ``gy``'s array and wraps it as ``ViewPrimitive.apply`` does;
    :func:`grad_view` makes that Tensor directly. As in ``ember.ops._grad_arrays``, the
    Tensor ops stay for ``create_graph``, modes, subclasses that change what ops do, and
    arrays other than NumPy's."""
    if _active[0] or _grad_state.grad_enabled:
        return None
    tg = type(gy)
    if tg is not Tensor and not _plain_type(tg):
        return None
    g = gy._data
    return g if type(g) is _ndarray else None


def passes_array(node):
    """Whether a view node's gradient may go on as a bare NumPy view of the incoming
    gradient's array (its ``_array_grads``, on the engine's short path): only to a node
    with no hooks. A hook sees the gradient as the Tensor op makes it (a view, with its
    ``_base``), and a leaf's ``.grad`` must not share a gradient that is also passed
    elsewhere, so those take ``backward`` (``grad_view``'s Tensor)."""
    e = node._edges[0]
    return type(e) is tuple and not e[0]._hooked


def grad_view(gy, arr):
    """The Tensor a view op returns outside the graph for ``arr``, a NumPy view of
    ``gy``'s array: it shares ``gy``'s base and version counter."""
    t = _new(Tensor)
    t._data = arr
    t._requires_grad = False
    t._grad = t.grad_fn = t._extra = None
    t._output_nr = 0
    base = gy._base
    t._base = gy if base is None else base
    t._vc = gy._vc
    return t


# The differentiable views of each non-leaf base, so that when the base is changed in
# place their nodes can be rebuilt from its new node (PyTorch regenerates a view's
# grad_fn when its base's version moves on). Keyed by id: tensors compare elementwise.
_VIEWS = {}


def _track(base, view):
    k = id(base)
    entry = _VIEWS.get(k)
    if entry is None or entry[0]() is not base:
        # (base's ref, its views' refs, the length at which dead refs are next dropped)
        entry = _VIEWS[k] = [weakref.ref(base, lambda r, k=k: _VIEWS.pop(k, None)), [], 16]
    views = entry[1]
    # a plain ref (no callback: CPython then shares one ref per view, made once); dead
    # ones are dropped as the list grows, so it stays within twice its live views
    views.append(weakref.ref(view))
    if len(views) >= entry[2]:
        views[:] = [r for r in views if r() is not None]
        entry[2] = 2 * len(views) + 16


def refresh_views(base, skip=None):
    """Rebuild the nodes of ``base``'s live views from its current node (after an
    in-place change of ``base``), except ``skip``."""
    entry = _VIEWS.get(id(base))
    if entry is None or entry[0]() is not base:
        return
    for ref in list(entry[1]):
        v = ref()
        if v is None or v is skip or not v._requires_grad or v._base is not base:
            continue
        idx = _flat_index_of(v._data, _as_parts(base, v)._data)
        if idx is None:
            continue
        node = TakeFlat.apply(_as_parts(_make_alias(base), v), idx)
        v.grad_fn = node.grad_fn
        v._output_nr = 0


def _geometry(view_arr, base_arr):
    """(shape, strides in elements, offset in elements) of a view inside its base."""
    isz = base_arr.itemsize
    if type(base_arr) is np.ndarray:
        off = view_arr.__array_interface__["data"][0] - base_arr.__array_interface__["data"][0]
    else:
        off = view_arr.data.ptr - base_arr.data.ptr
    return view_arr.shape, tuple(s // isz for s in view_arr.strides), off // isz


def _strided(arr, shape, strides, offset):
    """The view of contiguous ``arr`` given by shape/strides/offset (in elements)."""
    isz = arr.itemsize
    flat = arr.reshape(-1)
    xp_strides = tuple(s * isz for s in strides)
    if type(arr) is np.ndarray:
        return np.lib.stride_tricks.as_strided(flat[offset:], shape, xp_strides)
    import cupy
    return cupy.lib.stride_tricks.as_strided(flat[offset:], shape, xp_strides)


class AsStrided(ViewPrimitive):
    """A strided window of a contiguous tensor."""

    def forward(self, x, shape, strides, offset):
        self.geom = (x.shape, shape, strides, offset)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        return _strided(x, shape, strides, offset)

    def backward(self, gy):
        base_shape, shape, strides, offset = self.geom
        return AsStridedScatter.apply(_zeros(gy, base_shape), gy, shape, strides, offset,
                                      True), None, None, None


class AsStridedScatter(Primitive):
    """``base`` with the strided window replaced by (or, accumulating, added to) ``src``."""

    def forward(self, base, src, shape, strides, offset, accumulate=False):
        self.geom = (shape, strides, offset)
        xp = array_module(base)  # NumPy or CuPy, whichever holds the tensor
        out = xp.array(base, copy=True, order="C")
        if accumulate:
            # windows may overlap (expanded views): add element by element
            idx = _strided(xp.arange(out.size).reshape(out.shape), shape, strides, offset)
            xp.add.at(out.reshape(-1), idx.reshape(-1), xp.broadcast_to(src, shape).reshape(-1))
        else:
            _strided(out, shape, strides, offset)[...] = src
        self.accumulate = accumulate
        return out

    def backward(self, gy):
        shape, strides, offset = self.geom
        g_src = AsStrided.apply(gy.contiguous(), shape, strides, offset)
        if self.accumulate:
            return gy, g_src, None, None, None, None
        g_base = AsStridedScatter.apply(gy, _zeros(g_src, shape), shape, strides, offset)
        return g_base, g_src, None, None, None, None

    jvp = _jvp.linear(0, 1)


def _xp(arr):
    from ember.backend import array_module
    return array_module(arr)


def _zeros(like, shape):
    return _make(_xp(like._data).zeros(shape, like._data.dtype))


def _flat_index_of(view_arr, base_arr):
    """For each element of ``view_arr``, the C-order flat index of the same memory in
    ``base_arr`` (the view shares the base's memory; the base may have any strides)."""
    xp = _xp(base_arr)
    shape, vstrides, off = _geometry(view_arr, base_arr)
    mem = xp.full(shape, off, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, vstrides)):
        if s and n > 1:
            step = xp.arange(n, dtype=np.int64) * s
            mem = mem + step.reshape((n,) + (1,) * (len(shape) - d - 1))
    if base_arr.flags.c_contiguous:
        lo, hi = 0, base_arr.size - 1
    else:
        isz = base_arr.itemsize
        bstrides = tuple(s // isz for s in base_arr.strides)
        lo = sum((n - 1) * s for n, s in zip(base_arr.shape, bstrides) if s < 0 and n)
        hi = sum((n - 1) * s for n, s in zip(base_arr.shape, bstrides) if s > 0 and n)
    if mem.size and not _is_meta(mem) and (int(mem.min()) < lo or int(mem.max()) > hi):
        return None  # not inside the base's memory (its data was replaced)
    if base_arr.flags.c_contiguous:
        return mem
    # a scratch buffer laid out like the base's memory, holding each element's flat index
    scratch = xp.zeros(hi - lo + 1, dtype=np.int64)
    laid = _strided(scratch, base_arr.shape, bstrides, -lo)
    laid[...] = xp.arange(base_arr.size, dtype=np.int64).reshape(base_arr.shape)
    return scratch[mem - lo]


class TakeFlat(Primitive):
    """The elements of ``x`` at C-order flat positions ``idx`` (a view's region of its base)."""
    _node_name = "AsStridedBackward0"

    def forward(self, x, idx):
        self.meta = (x.shape, idx)
        return x.reshape(-1)[idx]

    def backward(self, gy):
        shape, idx = self.meta
        return PutFlat.apply(_zeros(gy, shape), gy, idx, True), None

    jvp = _jvp.linear(0)


class PutFlat(Primitive):
    """``base`` with the flat positions ``idx`` set to (or, accumulating, increased by) ``src``."""
    _node_name = "torch::autograd::CopySlices"
    broadcasts = True  # src broadcasts to idx's shape; its gradient is summed back

    def forward(self, base, src, idx, accumulate=False):
        self.meta = (idx, accumulate)
        xp = _xp(base)
        out = xp.array(base, copy=True, order="C")
        flat = out.reshape(-1)
        if accumulate:
            xp.add.at(flat, idx, xp.broadcast_to(xp.asarray(src, dtype=out.dtype), idx.shape))
        else:
            flat[idx] = src
        return out

    def backward(self, gy):
        idx, accumulate = self.meta
        g_base = g_src = None
        if self._edges[0] is not None:
            g_base = gy if accumulate else PutFlat.apply(gy, 0.0, idx, False)
        if self._edges[1] is not None:
            g_src = TakeFlat.apply(gy, idx)
        return g_base, g_src, None, None

    jvp = _jvp.linear(0, 1)


def rebase_view(view, result):
    """Write ``result`` into ``view`` in place and route gradients through its base.

    The base's node becomes "base with the view's region replaced by ``result``"
    (PyTorch's CopySlices), and the view's node reads that region back out of it.
    The region is kept as the flat positions of the view's elements in the base, so
    bases of any layout work.
    """
    base = view._base
    if base.grad_fn is None and base._requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an "
                           "in-place operation.")
    idx = _flat_index_of(view._data, _as_parts(base, view)._data)
    if idx is None:
        raise RuntimeError("in-place operation on a view whose base's data was replaced "
                           "(e.g. through .data); write into the base directly")
    node = _CopySlices.wrap(base, view, result, idx)
    if node is None:
        old_base = _make_alias(base)
        new_base = PutFlat.apply(_as_parts(old_base, view), result, idx, False)
        if new_base._data.dtype != base._data.dtype:
            new_base = _from_parts(new_base)
        node = new_base.grad_fn
    try:
        view._data[...] = result._data
    except ValueError:
        from ember.ops._util import write_error
        if isinstance(write_error(view._data), NotImplementedError):  # a view of conj()'s
            raise write_error(view._data) from None
        raise RuntimeError("unsupported operation: some elements of the input tensor and the "
                           "written-to tensor refer to a single memory location. Please clone() "
                           "the tensor before performing the operation.") from None
    view._vc[0] += 1
    base.grad_fn = node
    base._output_nr = 0
    base._requires_grad = True
    new_view = TakeFlat.apply(_as_parts(_make_alias(base), view), idx)
    view.grad_fn = new_view.grad_fn
    view._output_nr = 0
    view._requires_grad = True
    if type(node) is _CopySlices:
        node.saves_the_view(view)
    refresh_views(base, skip=view)


class _CopySlices(Node):
    """The base's node after an op wrote into its view in place, as PyTorch records it:
    the op's own node ``fn`` wrapped, its first input (the view's old values) replaced by
    the base. Backward hands the view's region of the gradient to ``fn`` and writes
    ``fn``'s gradient for that input back into the region; ``fn``'s other gradients pass
    through to its other inputs."""
    _node_name = "torch::autograd::CopySlices"

    @classmethod
    def wrap(cls, base, view, result, idx):
        """The node, or None where the write is not one op's single output over the
        view's old values (a cast, a part of a complex base, a composite's last step)."""
        fn = result.grad_fn
        if fn is None or fn.n_outputs != 1 or not hasattr(fn, "backward") or \
                result._data.shape != view._data.shape or \
                result._data.dtype != view._data.dtype or \
                view._data.dtype != base._data.dtype or not fn._edges:
            return None
        if fn._saved and any(type(item) is _Packed and item.output for item in fn._saved):
            return None  # an output kept by saved-tensor hooks unpacks to fn's own place
        first = fn._edges[0]
        if view.grad_fn is None:
            if first is not None:
                return None
        elif type(first) is not tuple or first[0] is not view.grad_fn or \
                first[1] != view._output_nr:
            return None
        self = cls()
        old = base.grad_fn
        edge = (old, base._output_nr) if old is not None else (
            base if base._requires_grad else None)
        self._edges = (edge,) + tuple(fn._edges[1:])
        if fn._in_shapes is not None:
            self._in_shapes = [None] + list(fn._in_shapes[1:])
        self.fn, self.idx = fn, idx
        trace = getattr(fn, "_trace", None)
        if trace is not None:  # anomaly mode: the op's forward line is this node's
            self._trace = trace
        return self

    # what the op saved is this node's: the engine frees it after a backward pass
    @property
    def _saved(self):
        return self.fn._saved

    @_saved.setter
    def _saved(self, value):
        self.fn._saved = value

    def saves_the_view(self, view):
        """The op's saved output is the view's new value: read back, it is the view, at
        the view's place in the graph (a second derivative goes through this node), and
        a later in-place change of the view makes it stale, as in PyTorch."""
        saved = self.fn._saved
        if saved and any(type(item) is tuple and len(item) == 5 for item in saved):
            self.fn._saved = [(view, view._vc[0]) if type(item) is tuple and len(item) == 5
                              else item for item in saved]

    @property
    def next_functions(self):
        e = self._edges[0]
        first = (None, 0) if e is None else e if type(e) is tuple else (AccumulateGrad.of(e), 0)
        return (first,) + tuple(self.fn.next_functions[1:])

    def _hook_slots(self):
        # node hooks see the gradients the op's node lists (its edges are this node's)
        return self.fn._hook_slots()

    def backward(self, gy):
        fn, idx = self.fn, self.idx
        grads = fn.backward(TakeFlat.apply(gy, idx))
        if type(grads) is not tuple:
            grads = tuple(grads) if type(grads) is list else (grads,)
        g_self = grads[0]
        if g_self is not None and fn._in_shapes is not None and fn._in_shapes[0] is not None:
            from ember.autograd.engine import _restore_meta
            g_self = _restore_meta(g_self, fn._in_shapes[0])
        g_base = PutFlat.apply(gy, 0.0 if g_self is None else g_self, idx, False)
        return (g_base,) + tuple(grads[1:len(fn._edges)])


def _as_parts(base, view=None):
    """``base`` itself, or, when ``view`` is its real or imaginary part (another dtype),
    ``base`` seen as real pairs, so that the view's elements have flat positions in it."""
    if view is None or view._data.dtype == base._data.dtype:
        return base
    from ember.ops.complex_numbers import ViewAsReal
    return Primitive.apply.__func__(ViewAsReal, base)


def _from_parts(pairs):
    from ember.ops.complex_numbers import ViewAsComplex
    return Primitive.apply.__func__(ViewAsComplex, pairs)


def _make_alias(t):
    a = _make(t._data, t._requires_grad)
    a.grad_fn = t.grad_fn
    a._output_nr = t._output_nr
    return a


def _ptr(arr):
    return arr.__array_interface__["data"][0] if type(arr) is np.ndarray else arr.data.ptr


def _storage_of(arr):
    """``(flat, offset)``: the storage under ``arr`` as a flat array of its dtype, and the
    position of ``arr``'s first element in it; None when that memory is not one block."""
    root = _memory_root(arr)
    if root.flags.c_contiguous:
        flat = root.reshape(-1)
    elif root.flags.f_contiguous:
        flat = root.reshape(-1, order="F")
    else:
        return None
    if flat.dtype != arr.dtype:  # a real view of complex memory, or the reverse
        try:
            flat = flat.view(np.uint8).view(arr.dtype)
        except ValueError:
            return None
    off, rem = divmod(_ptr(arr) - _ptr(flat), arr.itemsize) if arr.size else (0, 0)
    return (flat, off) if rem == 0 else None


def _span(shape, strides, offset):
    """One past the last storage position a geometry reaches (``offset`` when empty)."""
    if 0 in shape:
        return offset
    return offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1


def _positions(shape, strides, offset):
    """The storage position of each element of a geometry."""
    pos = np.full(shape, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(shape) - d - 1))
    return pos


class StorageAsStrided(ViewPrimitive):
    """``torch.as_strided``: a window on the storage under ``x``, which may reach elements
    outside ``x`` itself (a partial view of a larger storage). The gradient goes to the
    storage positions that ``x`` covers; positions ``x`` sees more than once share it."""
    _node_name = "AsStridedBackward0"
    batch = _batch.storage_as_strided

    def forward(self, x, shape, strides, offset):
        refuse_storage_of_conj(x)
        found = _storage_of(x)
        if found is None:  # memory in pieces: the tensor's values, in order, are its storage
            flat, own, x_strides = _xp(x).ascontiguousarray(x).reshape(-1), 0, None
        else:
            (flat, own), x_strides = found, tuple(s // x.itemsize for s in x.strides)
        if x_strides is None or x.size == 0:
            x_strides = tuple(int(np.prod(x.shape[d + 1:])) for d in range(x.ndim))
        offset = own if offset is None else offset
        if offset < 0:
            raise RuntimeError(f"Tensor: invalid storage offset {offset}")
        need = _span(shape, strides, offset) if 0 not in shape else 0
        if need > flat.size:
            raise RuntimeError(
                f"setStorage: sizes {list(shape)}, strides {list(strides)}, storage offset "
                f"{offset}, and itemsize {x.itemsize} requiring a storage size of "
                f"{need * x.itemsize} are out of bounds for storage of size "
                f"{flat.size * x.itemsize}")
        self.geom = ((x.shape, x_strides, own), (shape, strides, offset))
        if 0 in shape:
            return flat[:0].reshape(shape)
        return _strided(flat, shape, strides, offset)

    def _window(self):
        """Storage positions [lo, hi) that both geometries lie in."""
        live = [g for g in self.geom if 0 not in g[0]]
        return min(g[2] for g in live), max(_span(*g) for g in live)

    def backward(self, gy):
        (ishape, istrides, ioff), (oshape, ostrides, ooff) = self.geom
        if 0 in ishape or 0 in oshape:
            return _zeros(gy, ishape), None, None, None
        lo, hi = self._window()
        buf = AsStridedScatter.apply(_zeros(gy, (hi - lo,)), gy, oshape, ostrides, ooff - lo,
                                     True)
        ipos = _positions(ishape, istrides, ioff - lo)
        count = np.bincount(ipos.reshape(-1), minlength=hi - lo)
        if count.max() > 1:  # x sees some positions more than once: they share the gradient
            buf = buf / _make(_xp(gy._data).asarray(np.maximum(count, 1), gy._data.dtype))
        return AsStrided.apply(buf, ishape, istrides, ioff - lo).contiguous(), None, None, None

    def jvp(self, t, *rest):
        # the tangent laid out as x in the storage; positions outside x have none
        if t is None:
            return None
        (ishape, istrides, ioff), (oshape, ostrides, ooff) = self.geom
        if 0 in ishape or 0 in oshape:
            return _zeros(t, oshape)
        lo, hi = self._window()
        buf = AsStridedScatter.apply(_zeros(t, (hi - lo,)), t, ishape, istrides, ioff - lo)
        return AsStrided.apply(buf, oshape, ostrides, ooff - lo)


class StorageAsStridedInplace(StorageAsStrided):
    """``as_strided_``: the same op, PyTorch's in-place node."""
    _node_name = "AsStridedBackward1"
    _op_name = "StorageAsStrided"


def as_strided(input, size, stride, storage_offset=None, _op=StorageAsStrided):
    """A view with the given size and stride (in elements) over the storage under
    ``input``, as in PyTorch: the offset counts from the start of the storage (default:
    ``input``'s own), and the window may reach elements outside ``input`` when it is a
    partial view of a larger storage. Strides must be non-negative."""
    if _op is StorageAsStrided and _mode_active[0]:
        from ember.ops._util import traced_ints
        if (r := traced_ints(size, stride, storage_offset)) is not None:
            # a traced size, stride or offset: one node, its view made again at their values
            return r[0].composite("as_strided", as_strided, (input,) + r[1], {})
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, "
                           f"got strides: {list(stride)}")
    if any(n < 0 for n in size):
        raise RuntimeError(f"as_strided: negative size in {list(size)}")
    return _op.apply(input, size, stride, None if storage_offset is None else int(storage_offset))


Tensor.as_strided = as_strided
