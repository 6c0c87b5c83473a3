"""Graph nodes. A :class:`Primitive` is both an op (its forward on arrays) and the
node it leaves in the graph (its backward, written in ember Tensor ops)."""
import sys
import traceback
import weakref

from ember import _tensor
from ember.autograd import anomaly
from ember.autograd.grad_mode import state as _grad_state

Tensor = _tensor.Tensor
_make = _tensor._make
_new = object.__new__

__all__ = ["Node", "Primitive", "AccumulateGrad"]

_FREED = "freed"
_FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")


class Node:
    """A function in the backward graph (PyTorch's ``grad_fn``).

    ``_edges`` holds one entry per forward input: None (no gradient needed), a leaf
    Tensor (its gradient is accumulated), or ``(node, output_nr)``.
    """

    __slots__ = ("_edges", "_saved", "_in_shapes", "_hooks", "_pre_hooks",
                 "_tensor_pre_hooks", "__weakref__", "__dict__")
    n_outputs = 1

    def name(self):
        """The node's name as PyTorch prints it, e.g. ``MulBackward0``."""
        return type(self)._node_name

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "_node_name" not in cls.__dict__:
            cls._node_name = cls.__name__ + "Backward0"

    def __repr__(self):
        return f"<{self.name()} object at {hex(id(self))}>"

    @property
    def next_functions(self):
        """((node, output_nr), ...) for each input; leaves appear as ``AccumulateGrad``."""
        out = []
        for e in self._edges:
            if e is None:
                out.append((None, 0))
            elif type(e) is tuple:
                out.append(e)
            else:
                out.append((AccumulateGrad.of(e), 0))
        return tuple(out)

    @property
    def needs_input_grad(self):
        """A bool per forward input: whether backward must produce its gradient."""
        return tuple(e is not None for e in self._edges)

    @property
    def metadata(self):
        d = self.__dict__.get("_metadata")
        if d is None:
            d = self.__dict__["_metadata"] = {}
        return d

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` runs after this node; may return new grad_inputs."""
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(fn)
        return _Handle(self._hooks, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before this node; may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = []
        self._pre_hooks.append(fn)
        return _Handle(self._pre_hooks, fn)

    def _add_tensor_pre_hook(self, nr, fn):
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        hooks = self._tensor_pre_hooks.setdefault(nr, [])
        hooks.append(fn)
        return _Handle(hooks, fn)

    @property
    def saved_tensors(self):
        """Saved inputs, then saved outputs, each checked against in-place modification."""
        saved = self._saved
        if saved is _FREED:
            raise RuntimeError(_FREED_MSG)
        if saved is None:
            return ()
        out = []
        for i, item in enumerate(saved):
            if type(item) is _SavedOutput:
                # a saved output: rebuilt here so that the graph holds no cycle
                arr, vc, version, nr, rg = item.arr, item.vc, item.version, item.nr, item.rg
                t = _make(arr, rg)
                t._vc = vc
                if rg:
                    t.grad_fn = self
                    t._output_nr = nr
                cur = vc[0]
                if cur != version:
                    self._raise_stale(t, i, cur, version, output=True)
                out.append(t)
            else:
                t, version = item
                if version is not None and t._vc[0] != version:
                    self._raise_stale(t, i, t._vc[0], version)
                out.append(t)
        return tuple(out)

    def _raise_stale(self, t, i, cur, version, output=False):
        if output:
            role = f"output {t._output_nr} of {self.name()}"
        elif t.grad_fn is not None:
            role = f"output {t._output_nr} of {t.grad_fn.name()}"
        else:
            role = "a leaf Variable"
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{t._type_name()} {list(t.shape)}], which is {role}, is at "
            f"version {cur}; expected version {version} instead. Hint: the tensor was saved "
            f"by {self.name()}; avoid changing it in place, or clone it first.")

    def _release(self):
        if self._saved is not None:
            self._saved = _FREED

    def backward(self, *grad_outputs):
        raise NotImplementedError(f"{self.name()} has no backward")


class _SavedOutput:
    """An op's own output kept for backward: its array and version, not the Tensor."""

    __slots__ = ("arr", "vc", "version", "nr", "rg")

    def __init__(self, arr, vc, rg, nr=0):
        self.arr, self.vc, self.version, self.nr, self.rg = arr, vc, vc[0], nr, rg


class _Handle:
    __slots__ = ("_list", "_fn")

    def __init__(self, lst, fn):
        self._list, self._fn = lst, fn

    def remove(self):
        try:
            self._list.remove(self._fn)
        except ValueError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class AccumulateGrad(Node):
    """The node that stands for a leaf in ``next_functions`` (``.variable`` is the leaf)."""

    _node_name = "AccumulateGrad"

    def __init__(self, variable):
        self._edges = ()
        self._saved = None
        self._hooks = self._pre_hooks = self._tensor_pre_hooks = None
        self.variable = variable

    @staticmethod
    def of(leaf):
        ref = leaf._get_extra().grad_accumulator
        acc = ref() if ref is not None else None
        if acc is None:
            acc = AccumulateGrad(leaf)
            leaf._get_extra().grad_accumulator = weakref.ref(acc)
        return acc


def _node_init(node):
    node._saved = None
    node._in_shapes = None
    node._hooks = node._pre_hooks = node._tensor_pre_hooks = None


class Primitive(Node):
    """Base of every op in ``ember.ops``.

    A subclass writes ``forward(self, *arrays, **params)`` on arrays (NumPy or CuPy)
    and ``backward(self, *grad_outputs)`` in ember Tensor ops, returning one gradient
    per positional input (None where no gradient flows). Class attributes declare
    what backward needs, so nothing is saved when no graph is recorded:

    - ``save_inputs``: positions of inputs backward reads (via ``saved_tensors``)
    - ``save_output``: True if backward reads the (single) output
    - ``broadcasts``: True if inputs broadcast, so gradients are summed back to shape
    - ``n_outputs`` and ``differentiable_outputs`` for ops with several outputs.
    """

    save_inputs = ()
    save_output = False
    broadcasts = False
    n_outputs = 1
    differentiable_outputs = None  # None: all floating outputs are differentiable

    @classmethod
    def apply(cls, *args, **params):
        """Run the op on Tensors (and plain values) and record it in the graph."""
        self = _new(cls)
        arrays = []
        rg = False
        for a in args:
            if isinstance(a, Tensor):
                arrays.append(a._data)
                if a._requires_grad:
                    rg = True
            else:
                arrays.append(a)
        try:
            out = self.forward(*arrays, **params)
        except ValueError as e:
            raise _as_runtime_error(cls, args, e) from None
        if rg and _grad_state.grad_enabled:
            return self._record(args, out)
        if cls.n_outputs == 1:
            return _make(out, False)
        return tuple(_make(o, False) for o in out)

    def _record(self, args, out):
        _node_init(self)
        edges = []
        for a in args:
            if isinstance(a, Tensor) and a._requires_grad:
                fn = a.grad_fn
                edges.append(a if fn is None else (fn, a._output_nr))
            else:
                edges.append(None)
        self._edges = edges
        cls = type(self)
        if cls.save_inputs:
            # Python numbers and None are kept as they are: backward formulas take them
            self._saved = [(args[i], args[i]._vc[0]) if isinstance(args[i], Tensor)
                           else (args[i], None) for i in cls.save_inputs]
        if anomaly.enabled[0]:
            self._trace = traceback.format_stack()[:-3]
        if cls.n_outputs == 1:
            if cls.broadcasts:
                shape, dt = out.shape, out.dtype
                for a in args:
                    if isinstance(a, Tensor) and (a._data.shape != shape or a._data.dtype != dt):
                        # gradients are summed back over broadcast dims and cast back to
                        # each input's dtype in one place, the engine
                        self._in_shapes = [(a._data.shape, a._data.dtype)
                                           if isinstance(a, Tensor) else None for a in args]
                        break
            t = _make(out, out.dtype.kind == "f")
            if t._requires_grad:
                t.grad_fn = self
            if cls.save_output:
                if self._saved is None:
                    self._saved = []
                self._saved.append(_SavedOutput(out, t._vc, t._requires_grad))
            return t
        self._out_meta = [(o.shape, o.dtype) for o in out]
        diff = cls.differentiable_outputs
        outs = []
        for nr, o in enumerate(out):
            t = _make(o, o.dtype.kind == "f" and (diff is None or nr in diff))
            if t._requires_grad:
                t.grad_fn = self
                t._output_nr = nr
            outs.append(t)
        return tuple(outs)


def _as_runtime_error(cls, args, err):
    """NumPy's ValueErrors (mostly broadcasting) become PyTorch's RuntimeErrors."""
    msg = str(err)
    shapes = [a._data.shape for a in args if isinstance(a, Tensor)]
    if "broadcast" in msg and len(shapes) >= 2:
        a, b = shapes[0], shapes[1]
        n = max(len(a), len(b))
        pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
        for d in range(n - 1, -1, -1):
            if pa[d] != pb[d] and pa[d] != 1 and pb[d] != 1:
                return RuntimeError(
                    f"The size of tensor a ({pa[d]}) must match the size of tensor b ({pb[d]}) "
                    f"at non-singleton dimension {d} (in {cls.__name__.lower()})")
    return RuntimeError(f"{cls.__name__.lower()}: {msg}")
