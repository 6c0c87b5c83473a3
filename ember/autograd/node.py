"""Graph nodes. A :class:`Primitive` is both an op (its forward on arrays) and the
node it leaves in the graph (its backward, written in ember Tensor ops)."""
import dis
import os
import sys
import weakref

from ember import _tensor
from ember.autograd import _modes, _saved_hooks, anomaly
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.saved import _FREED, _read_saved
from ember.backend import complex32 as _c32

Tensor = _tensor.Tensor
_make = _tensor._make
_as_array = _tensor._as_array
_ndarray = _tensor._ndarray
_new = object.__new__

__all__ = ["Node", "Primitive", "AccumulateGrad"]

# how many modes (ember.autograd._modes) the current call sees: every op call checks it
_active = _modes.active
# whether anomaly mode is on (nodes then keep the stack that made them)
_anomaly = anomaly.enabled
# the active saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks)
_hook_stack = _saved_hooks.stack
_Packed = _saved_hooks.Packed

def _align_devices(args):
    """PyTorch's device rule for one op's Tensor arguments, asked after the op failed:
    tensors on different devices raise its error, except 0-dim CPU tensors, which join
    the other tensors' device as scalars do. Returns the arguments with those moved, or
    None when every Tensor argument is already on one device."""
    dev = None
    for a in args:
        if isinstance(a, _tensor.Tensor) and type(a._data) is not _ndarray:
            dev = a.device  # (a memory-mapped or meta tensor's is not an accelerator)
            if dev.type not in ("cpu", "meta"):
                break
            dev = None
    if dev is None:
        return None
    out, moved = [], False
    for a in args:
        if isinstance(a, _tensor.Tensor) and a.device != dev:
            if a._data.ndim or a.device.type != "cpu":
                raise RuntimeError("Expected all tensors to be on the same device, but found "
                                   f"at least two devices, {dev} and {a.device}!")
            a, moved = a.to(dev), True
        elif type(a) is _ndarray:
            # the data of a CPU tensor passed on as an array (an index, a mask)
            if a.ndim:
                raise RuntimeError("Expected all tensors to be on the same device, but found "
                                   f"at least two devices, {dev} and cpu!")
            from ember.backend import to_device
            a, moved = to_device(a, dev), True
        elif type(a) is tuple and any(type(i) is _ndarray and i.ndim for i in a):
            raise RuntimeError("Expected all tensors to be on the same device, but found at "
                               f"least two devices, {dev} and cpu!")  # CPU index arrays
        out.append(a)
    return out if moved else None


class Node:
    """A function in the backward graph (PyTorch's ``grad_fn``).

    ``_edges`` holds one entry per forward input: None (no gradient needed), a leaf
    Tensor (its gradient is accumulated), or ``(node, output_nr)``.
    """

    __slots__ = ("_edges", "__weakref__", "__dict__")
    n_outputs = 1
    # class-level defaults: a new node writes only what it has (nodes are made per op)
    _saved = None
    _in_shapes = None
    _hooks = None
    _pre_hooks = None
    _tensor_pre_hooks = None
    _hooked = False  # set once any hook above is registered: the engine's one check
    _n_in = None  # set when trailing inputs were plain values (dims, flags), not Tensors
    # where in ``_saved`` the entries a ``Primitive._hook_saves`` added begin; set only
    # when saved-tensor hooks packed them (see ``_saved_and_hooked``)
    _hook_at = None
    # a basic index outside which the first input's gradient is zero (a select's or
    # slice's node says it, so the engine adds only that part into a buffered gradient)
    grad_region = None
    # the inputs PyTorch's node lists, in its order, where they are not all of ember's
    # (``where``'s condition and ``masked_fill``'s mask are no edges in PyTorch's graph)
    _edge_inputs = None
    # how many inputs PyTorch's node lists in ``next_functions`` when that is not "every
    # Tensor argument up to the last one given": a node of an op whose optional Tensor
    # (a bias) may be None, or whose integer operands (targets) PyTorch does not list
    n_inputs = None
    # how many output gradients node hooks and pre-hooks receive where PyTorch's node
    # has other outputs than ember's (group norm's mean and rstd: None there; ``max``'s
    # indices: not listed); None: one per output of ember's node
    _hook_n_outputs = None
    # ``_array_grads(gy, g)``: the node's backward on the array ``g`` of its one output
    # gradient ``gy`` (``gy`` itself: a Tensor, or ``g`` when the gradient came as an
    # array), for the engine's pass without a graph of the gradients (no create_graph,
    # no mode, no hook on the node). It returns what ``backward`` returns, each gradient
    # a new array (or ``gy`` passed on): the same NumPy calls as ``backward``'s Tensor
    # ops, in the same order; or None, having called no user code, where only
    # ``backward`` can answer (another dtype, a saved tensor changed or packed by hooks)
    _array_grads = None
    # True on an op class whose gradients (``backward``'s and ``_array_grads``') already
    # have each input's shape and dtype although its inputs broadcast against each other
    # (``_in_shapes`` set: layer norm's weight, ``mm``'s operands): the engine's short
    # path takes its node, checking each gradient's shape and dtype instead of summing
    _grads_in_input_shapes = False

    def name(self):
        """The node's name as PyTorch prints it, e.g. ``MulBackward0``."""
        return type(self)._node_name

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "_node_name" not in cls.__dict__:
            cls._node_name = cls.__name__ + "Backward0"
        # From the outside a node's class is PyTorch's (``type(fn).__name__`` is
        # ``MulBackward0``: torchviz and tutorials print it); ember's own op name stays in
        # ``_op_name`` for error messages. ``__qualname__`` is kept, so pickling by
        # module path still finds the class.
        cls._op_name = cls.__dict__.get("_op_name", cls.__name__)
        if "backward" in cls.__dict__ and "_array_grads" not in cls.__dict__:
            cls._array_grads = None  # a new backward: an inherited array form is not its
        if not cls.__dict__.get("_base_class"):
            cls.__name__ = cls._node_name.rsplit("::", 1)[-1]

    def __repr__(self):
        return f"<{self.name().rsplit('::', 1)[-1]} object at {hex(id(self))}>"

    @property
    def next_functions(self):
        """((node, output_nr), ...) for each input; leaves appear as ``AccumulateGrad``."""
        out = []
        if self._edge_inputs is not None:
            edges = [self._edges[i] for i in self._edge_inputs if i < len(self._edges)]
        else:
            edges = self._edges if self._n_in is None else self._edges[:self._n_in]
            n = type(self).n_inputs
            if n is not None:
                edges = (list(self._edges) + [None] * n)[:n]
        for e in edges:
            if e is None:
                out.append((None, 0))
            elif type(e) is tuple:
                out.append(e)
            else:
                out.append((AccumulateGrad.of(e), 0))
        return tuple(out)

    def _hook_slots(self):
        """For each entry of ``next_functions``, the position of the gradient in what
        ``backward`` returns (None where PyTorch lists an input ember keeps no slot
        for); None when the two are the same list. Node hooks see the gradients in
        ``next_functions``' order, as PyTorch's do, not the plain arguments' slots."""
        n_e = len(self._edges)
        if self._edge_inputs is not None:
            return [i for i in self._edge_inputs if i < n_e]
        n = type(self).n_inputs
        if n is not None:
            return None if n == n_e else [i if i < n_e else None for i in range(n)]
        if self._n_in is None or self._n_in >= n_e:
            return None
        return list(range(self._n_in))

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
        self._hooked = True
        self._hooks.append(fn)
        return _Handle(self._hooks, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before this node; may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = []
        self._hooked = True
        self._pre_hooks.append(fn)
        return _Handle(self._pre_hooks, fn)

    def _add_tensor_pre_hook(self, nr, fn):
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        self._hooked = True
        hooks = self._tensor_pre_hooks.setdefault(nr, [])
        hooks.append(fn)
        return _Handle(hooks, fn)

    @property
    def saved_tensors(self):
        """Saved inputs, then saved outputs, each checked against in-place modification."""
        return _read_saved(self)

    def _rebuild(self, value, item):
        """A saved output as a Tensor of this node: its values, counter and output slot."""
        t = _make(value._data, item.rg)
        t._vc = item.vc
        if item.rg:
            t.grad_fn = self
            t._output_nr = item.nr
        return t

    def _saved_and_hooked(self, *own):
        """``(saved, hooked)`` for backward: ``saved`` is what ``saved_tensors`` gives of
        the entries the node saves for itself; ``hooked`` is ``own`` (the node's own arrays
        for the tensors its ``_hook_saves`` gives saved-tensor hooks, in the same order)
        when no hook packed them, else the arrays of what the unpack hooks return: as in
        PyTorch, backward computes with what unpack gives back. Each entry is unpacked
        once per call (the hooks count as PyTorch's do), so backward calls this once and
        reads ``saved_tensors`` no more."""
        at = self._hook_at
        if at is None:
            return (_read_saved(self) if self._saved is not None else ()), own
        saved = _read_saved(self)
        hooked = tuple(t._data for t in saved[at:])
        if len(hooked) != len(own):
            raise RuntimeError(f"{self.name()}: {len(hooked)} hooked saves for {len(own)} arrays")
        return saved[:at], hooked

    def _pack_saved(self):
        """Pack this node's saved entries with the active saved-tensor hooks."""
        def output(entry):
            arr, vc, version, rg, nr = entry
            t = _make(arr, rg)
            t._vc = vc
            if rg:
                t.grad_fn, t._output_nr = self, nr
            return t
        self._saved = _saved_hooks.pack_entries(self._saved, output)

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

    _node_name = "torch::autograd::AccumulateGrad"  # PyTorch's name(), C++ namespace included

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"

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


# how many backward functions the engine is running now (nested backward passes count
# each): inside one, ``Primitive.saved_tensors`` is read by ember's formulas
in_backward = [0]
_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


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
    - ``batch``: the vmap batching rule (``ember.ops._batch``); None: no rule.

    and how the op is written out by the exporters:

    - ``onnx``: a string is the ONNX op type applied to the op's operands (``"Exp"``);
      a callable ``f(g, node, *args, **kwargs)`` is its converter (``ember.onnx``)
    - ``torchscript``: a string is the aten function called on the op's arguments
      (``"exp"`` writes ``torch.exp(x)``); a callable ``f(em, node, *args, **kwargs)``
      writes the expression (``ember.jit``)
    - ``complex32_math``: True where PyTorch's CPU kernels compute the op on complex32.
    """

    _base_class = True  # keeps its own __name__: no node is ever a plain Primitive
    save_inputs = ()
    save_output = False
    # ``_hook_saves(self, args, out)``: entries a node adds to what it saves while
    # saved-tensor hooks are active (``(tensor, version)``, or a saved output's entry),
    # where PyTorch's node saves tensors that ember's forward keeps as arrays of its own
    # (a loss's target and total weight) or does not keep (pow's result): the hooks then
    # see what PyTorch's see. ``out`` is the output Tensor (a list of them for several).
    _hook_saves = None
    broadcasts = False
    n_outputs = 1
    batch = None  # the vmap rule, a function (cls, level, args, params): ops/_batch.py
    vjp = None  # an array-level vjp for the compile plan; None: it uses ``backward``
    differentiable_outputs = None  # None: all floating outputs are differentiable
    onnx = None          # export spellings: see the docstring
    torchscript = None
    complex32_math = False

    @property
    def saved_tensors(self):
        """What backward saved; read by ember's own backward formulas only."""
        # PyTorch's built-in nodes have no ``saved_tensors`` (custom Functions do), and
        # tools test for it with hasattr (torchviz draws every saved tensor it finds):
        # outside ember the attribute is absent, as in PyTorch.
        # While the engine runs a backward function (``in_backward``) the read is ember's
        # own and costs no frame inspection; elsewhere the caller's file decides.
        if not in_backward[0] and \
                not sys._getframe(1).f_code.co_filename.startswith(_EMBER_DIR):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                 "'saved_tensors'")
        return _read_saved(self)

    @classmethod
    def apply(cls, *args, **params):
        """Run the op on Tensors (and plain values) and record it in the graph."""
        if _active[0]:
            return _modes.dispatch(cls, args, params)
        self = _new(cls)
        rg = False
        if len(args) == 1:
            x = args[0]
            if isinstance(x, Tensor):
                rg = x._requires_grad
                arrays = (x._data,)
            else:
                arrays = args
        else:
            arrays = []
            for a in args:
                if isinstance(a, Tensor):
                    arrays.append(a._data)
                    if a._requires_grad:
                        rg = True
                else:
                    arrays.append(a)
        try:
            out = self.forward(*arrays, **params)
        except Exception as e:  # noqa: BLE001 - complex32 operands get another route
            aligned = _align_devices(args)
            if aligned is not None:
                return cls.apply(*aligned, **params)
            if _c32.involved(arrays, params):
                out = _c32.run(self, cls, args, arrays, params)
            elif isinstance(e, ValueError):
                raise _as_runtime_error(cls, args, e) from None
            else:
                raise
        if rg and _grad_state.grad_enabled:
            if cls.n_outputs == 1:
                res = self._record(args, out)
            else:
                res = self._record_many(args, out)
        elif cls.n_outputs == 1:
            res = _wrap(out)
        else:
            res = tuple(_make(o, False) for o in out)
        return res

    def jvp(self, *tangents):
        """Output tangent(s) from one tangent per positional input (None where the input
        has none), in ember Tensor ops; read the primals from ``self.fw_inputs`` (the
        positional arguments), ``self.fw_params`` and ``self.fw_output``. A None result
        stands for zeros. This default is the mechanical double-vjp fallback
        (``forward_ad.fallback_jvp``); ops override it with their rule."""
        from ember.autograd.forward_ad import fallback_jvp
        return fallback_jvp(self, tangents)

    @classmethod
    def unary_function(cls):
        """``f(x)`` running this one-input op with the least Python between the user
        and NumPy (used for the hot elementwise functions and methods)."""
        forward = cls.forward
        multi = cls.n_outputs != 1
        if cls.broadcasts:
            raise TypeError(f"{cls.__qualname__}: unary_function is for elementwise ops, "
                            "whose output has the input's shape (broadcasts=False)")

        lean = not _reads_self(forward)  # then the node is made only when it is recorded

        def f(x):
            if _active[0]:
                return cls.apply(x)
            self = None if lean else _new(cls)
            if not isinstance(x, Tensor):
                raise TypeError(f"{cls._op_name.lower()}(): argument 'input' must be Tensor, "
                                f"not {type(x).__name__}")
            try:
                out = forward(self, x._data)
            except Exception:  # noqa: BLE001 - complex32 operands take apply's route
                if _c32.is_c32(x._data):
                    return cls.apply(x)
                raise
            if multi:
                return cls._finish(self or _new(cls), (x,), out)
            if x._requires_grad and _grad_state.grad_enabled:
                return (self or _new(cls))._record1(x, out)
            # ``_wrap``, inlined: this is the whole cost of an op outside the graph
            if type(out) is not _ndarray:
                out = _as_array(out)
            t = _new(Tensor)
            t._data = out
            t._requires_grad = False
            t._grad = t.grad_fn = t._base = t._extra = None
            t._output_nr = 0
            t._vc = [0]
            return t
        return f

    @classmethod
    def binary_function(cls, reflected=False):
        """``f(a, b)`` (or ``f(b, a)`` when ``reflected``) for a two-input op, as fast as
        ``unary_function``; either operand may be a Python number."""
        forward = cls.forward
        lean = not _reads_self(forward)  # then the node is made only when it is recorded

        def f(a, b):
            if reflected:
                a, b = b, a
            if _active[0]:
                return cls.apply(a, b)
            self = None if lean else _new(cls)
            rg = False
            if isinstance(a, Tensor):
                da = a._data
                rg = a._requires_grad
            else:
                da = a
                if type(a) not in _PLAIN:
                    _check_operand(cls, a)
            if isinstance(b, Tensor):
                db = b._data
                rg = rg or b._requires_grad
            else:
                db = b
                if type(b) not in _PLAIN:
                    _check_operand(cls, b)
            try:
                out = forward(self, da, db)
            except Exception as e:  # noqa: BLE001 - complex32 operands take apply's route
                if _c32.is_c32(da) or _c32.is_c32(db) or _align_devices((a, b)) is not None:
                    return cls.apply(a, b)
                if isinstance(e, ValueError):
                    raise _as_runtime_error(cls, (a, b), e) from None
                raise
            if rg and _grad_state.grad_enabled:
                return (self or _new(cls))._record((a, b), out)
            if type(out) is not _ndarray:  # ``_wrap``, inlined as in ``unary_function``
                out = _as_array(out)
            t = _new(Tensor)
            t._data = out
            t._requires_grad = False
            t._grad = t.grad_fn = t._base = t._extra = None
            t._output_nr = 0
            t._vc = [0]
            return t
        return f

    @classmethod
    def _finish(cls, self, args, out):
        if any(isinstance(a, Tensor) and a._requires_grad for a in args) and \
                _grad_state.grad_enabled:
            return self._record_many(args, out)
        return tuple(_make(o, False) for o in out)

    def _edges_of(self, args):
        if len(args) == 1:
            a = args[0]
            if isinstance(a, Tensor) and a._requires_grad:
                fn = a.grad_fn
                self._edges = (a if fn is None else (fn, a._output_nr),)
            else:
                self._edges = (None,)
            if type(self).save_inputs:
                self._saved = [(a, a._vc[0]) if isinstance(a, Tensor) else (a, None)]
            if _anomaly[0]:
                self._trace = anomaly.forward_trace()
            return
        edges = []
        last = 0
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                last = i
                if a._requires_grad:
                    fn = a.grad_fn
                    edges.append(a if fn is None else (fn, a._output_nr))
                    continue
            edges.append(None)
        self._edges = edges
        if last + 1 < len(edges):
            # PyTorch lists Tensor inputs only: dims and flags after them are not edges
            self._n_in = last + 1
        cls = type(self)
        if cls.save_inputs:
            # Python numbers and None are kept as they are: backward formulas take them
            self._saved = [(args[i], args[i]._vc[0]) if isinstance(args[i], Tensor)
                           else (args[i], None) for i in cls.save_inputs]
        if _anomaly[0]:
            self._trace = anomaly.forward_trace()

    def _record1(self, x, out):
        """``_record`` for a one-input op whose input requires grad (``unary_function``).

        The output Tensor is made here as at the end of ``_record``, written out in both
        rather than shared: the hot path of every recorded op, one Python call less."""
        fn = x.grad_fn
        self._edges = (x if fn is None else (fn, x._output_nr),)
        cls = type(self)
        if cls.save_inputs:
            self._saved = [(x, x._vc[0])]
        if _anomaly[0]:
            self._trace = anomaly.forward_trace()
        if type(out) is not _ndarray:
            out = _as_array(out)
        t = _new(Tensor)
        t._data = out
        t._grad = t._base = t._extra = None
        t._output_nr = 0
        t._vc = vc = [0]
        if out.dtype.kind in "fcV":
            t._requires_grad = True
            t.grad_fn = self
            if cls.save_output:
                # (array, counter, version, requires_grad, output_nr): see ``_record``
                if self._saved is None:
                    self._saved = [(out, vc, 0, True, 0)]
                else:
                    self._saved.append((out, vc, 0, True, 0))
        else:
            t._requires_grad = False
            t.grad_fn = None
        if _hook_stack:
            if cls._hook_saves is not None:
                self._hook_at = len(self._saved or ())
                self._saved = (self._saved or []) + cls._hook_saves(self, (x,), t)
            if self._saved:
                self._pack_saved()
        return t

    def _record(self, args, out):
        """Make the output Tensor and link this node into the graph (grad mode only)."""
        cls = type(self)
        if len(args) == 2:
            a, b = args
            ea = eb = None
            if isinstance(a, Tensor) and a._requires_grad:
                fn = a.grad_fn
                ea = a if fn is None else (fn, a._output_nr)
            if isinstance(b, Tensor):
                if b._requires_grad:
                    fn = b.grad_fn
                    eb = b if fn is None else (fn, b._output_nr)
            elif not cls.broadcasts:
                # a plain parameter (shape, dim), not an operand: PyTorch has no edge for
                # it; an arithmetic op's number is an operand (a wrapped tensor there)
                self._n_in = 1
            self._edges = (ea, eb)
            si = cls.save_inputs
            if si:
                if si == (0, 1):
                    self._saved = [(a, a._vc[0]) if isinstance(a, Tensor) else (a, None),
                                   (b, b._vc[0]) if isinstance(b, Tensor) else (b, None)]
                else:
                    self._saved = [(args[i], args[i]._vc[0]) if isinstance(args[i], Tensor)
                                   else (args[i], None) for i in si]
            if _anomaly[0]:
                self._trace = anomaly.forward_trace()
        else:
            self._edges_of(args)
        if type(out) is not _ndarray:
            out = _as_array(out)
        if cls.broadcasts:
            shape, dt = out.shape, out.dtype
            for a in args:
                if isinstance(a, Tensor) and (a._data.shape != shape or
                                              a._data.dtype is not dt and a._data.dtype != dt):
                    # gradients are summed back over broadcast dims and cast back to
                    # each input's dtype in one place, the engine
                    self._in_shapes = [(a._data.shape, a._data.dtype)
                                       if isinstance(a, Tensor) else None for a in args]
                    break
        t = _new(Tensor)
        t._data = out
        t._grad = t._base = t._extra = None
        t._output_nr = 0
        t._vc = vc = [0]
        if out.dtype.kind in "fcV":
            t._requires_grad = True
            t.grad_fn = self
            if cls.save_output:
                # kept as (array, counter, version, requires_grad, output_nr), not as
                # the Tensor, so that the graph holds no reference cycle
                if self._saved is None:
                    self._saved = [(out, vc, 0, True, 0)]
                else:
                    self._saved.append((out, vc, 0, True, 0))
        else:
            t._requires_grad = False
            t.grad_fn = None
        if _hook_stack:
            if cls._hook_saves is not None:
                self._hook_at = len(self._saved or ())
                self._saved = (self._saved or []) + cls._hook_saves(self, args, t)
            if self._saved:
                self._pack_saved()
        return t

    def _record_many(self, args, out):
        self._edges_of(args)
        cls = type(self)
        self._out_meta = [(o.shape, o.dtype) for o in out]
        diff = cls.differentiable_outputs
        outs = []
        for nr, o in enumerate(out):
            t = _make(o, o.dtype.kind in "fcV" and (diff is None or nr in diff))
            if t._requires_grad:
                t.grad_fn = self
                t._output_nr = nr
            outs.append(t)
        if _hook_stack:
            if cls._hook_saves is not None:
                self._hook_at = len(self._saved or ())
                self._saved = (self._saved or []) + cls._hook_saves(self, args, outs)
            if self._saved:
                self._pack_saved()
        return tuple(outs)


# the bytecodes that read or write a local by index; the superinstructions pack two
# 4-bit indices in one argument
_FAST_OPS = frozenset(op for name, op in dis.opmap.items() if "FAST" in name)
_FAST_PAIRS = frozenset(dis.opmap[n] for n in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST",
                                                "STORE_FAST_STORE_FAST") if n in dis.opmap)


def _reads_self(fn):
    """Whether the method ``fn`` uses its first argument (a ``forward`` that keeps values
    on its node); read from its bytecode, once, when an op's fast function is made. Any
    doubt answers True (the node is then made before ``forward``, as for any op)."""
    code = fn.__code__
    if not code.co_argcount:
        return True
    if code.co_varnames[0] in code.co_cellvars or "__class__" in code.co_freevars:
        return True  # kept by a closure, or read by a zero-argument super()
    raw = code.co_code
    for i in range(0, len(raw), 2):
        op = raw[i]
        if op in _FAST_OPS:
            arg = raw[i + 1]
            if arg == 0 or op in _FAST_PAIRS and (arg < 16 or not arg & 15):
                return True  # local 0 is the first argument
    return False


def _wrap(out):
    """A new Tensor outside the graph (``_make``, inlined for the no-grad hot path)."""
    if type(out) is not _ndarray:
        out = _as_array(out)
    t = _new(Tensor)
    t._data = out
    t._requires_grad = False
    t._grad = t.grad_fn = t._base = t._extra = None
    t._output_nr = 0
    t._vc = [0]
    return t


_PLAIN = {int, float, bool, complex}
_SYMBOLS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}


def _check_operand(cls, x):
    """A binary op's non-Tensor operand must be a number or an array (PyTorch's TypeError)."""
    import numpy as np
    if isinstance(x, (int, float, complex, np.generic, np.ndarray)) or \
            hasattr(x, "__cuda_array_interface__"):
        return
    raise TypeError(f"unsupported operand type(s) for {_SYMBOLS.get(cls._op_name, cls._op_name)}:"
                    f" 'Tensor' and '{type(x).__name__}'")


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
                    f"at non-singleton dimension {d} (in {cls._op_name.lower()})")
    return RuntimeError(f"{cls._op_name.lower()}: {msg}")
