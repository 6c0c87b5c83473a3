"""User-defined differentiable operations: ``ember.autograd.Function``.

A subclass writes ``forward`` and ``backward`` as static methods; ``MyFn.apply(...)``
runs ``forward`` without recording a graph and leaves one node, ``MyFnBackward``,
in the graph of its outputs. That node is also the ``ctx`` both methods receive,
as in PyTorch. ``backward`` runs on ember Tensors with grad mode set to the
caller's ``create_graph``, so a backward written in ember ops is itself
differentiable.

    class Exp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, gy):
            y, = ctx.saved_tensors
            return gy * y
"""
import functools
import inspect

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd import _modes, _saved_hooks, anomaly
from ember.autograd.grad_mode import no_grad
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Node
from ember.autograd.node import in_backward as _in_backward
from ember.autograd.saved import _FREED, _FREED_MSG

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable",
           "InplaceFunction", "NestedIOFunction"]


class FunctionCtx:
    """The methods available on ``ctx`` inside ``forward``/``setup_context``."""

    __slots__ = ()

    def save_for_backward(self, *tensors):
        """Save tensors (or None) for ``backward``; read them back with ``ctx.saved_tensors``.

        Saved tensors are checked against in-place modification: changing one in
        place after saving makes ``saved_tensors`` raise a RuntimeError.
        """
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} "
                                f"is of type {type(t).__name__}")
        self._to_save = tensors

    def save_for_forward(self, *tensors):
        """Save tensors (or None) for ``jvp``, which reads them as ``ctx.saved_tensors``."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_forward expects all arguments to be tensors; but "
                                f"got argument {i} of type {type(t).__name__}.")
        self._fw_saved = tensors

    def mark_dirty(self, *args):
        """Declare inputs that ``forward`` modified in place (they must also be returned)."""
        self._dirty = args

    def mark_non_differentiable(self, *args):
        """Declare outputs that are not differentiable (they get ``requires_grad=False``)."""
        self._non_differentiable = args

    def set_materialize_grads(self, value):
        """Whether missing output gradients reach ``backward`` as zeros (default) or None."""
        self._materialize = bool(value)

    @property
    def needs_input_grad(self):
        """A bool per forward argument: True for tensors that require grad."""
        return self._needs_input_grad


class BackwardCFunction(FunctionCtx, Node):
    """The graph node of one ``Function.apply`` call; also the ``ctx`` of that call."""

    _forward_cls = None
    _node_name = "BackwardCFunction"
    _custom_zeros = True  # the engine leaves missing output grads to this node

    @property
    def saved_tensors(self):
        """The tensors given to ``save_for_backward``, checked against in-place changes
        (inside ``jvp``: those given to ``save_for_forward``)."""
        if self.__dict__.get("_in_jvp"):
            return tuple(self.__dict__.get("_fw_saved", ()))
        saved = self._saved
        if saved is None:
            return ()
        if type(saved) is not list:  # the engine's "freed" mark
            raise RuntimeError(_FREED_MSG)
        out = []
        for item in saved:
            if type(item) is _saved_hooks.Packed:
                # as in PyTorch, what the hooks keep is not checked for in-place changes
                out.append(item.input() if not item.output else
                           self._rebuild(item.value(), item))
                continue
            if type(item) is _SavedOutput:
                # an output of this node, rebuilt on access so the graph holds no cycle
                t = _make(item.arr, True)
                t._vc = item.vc
                t.grad_fn = self
                t._output_nr = item.nr
                version = item.version
            else:
                t, version = item
            if t is not None and t._vc[0] != version:
                self._stale(t, version)
            out.append(t)
        return tuple(out)

    def _stale(self, t, version):
        self._raise_stale(t, 0, t._vc[0], version)

    def _release(self):
        if self._saved is not None:
            self._saved = _FREED

    def backward(self, *grads):
        """Called by the engine: runs the user's ``backward`` and checks what it returns."""
        grads = list(grads)
        for i, xp in enumerate(self._out_xp):
            if xp is None:
                grads[i] = None  # the gradient of a non-tensor output
            elif grads[i] is None and self._materialize:
                grads[i] = _make(xp.zeros(*self._out_meta[i]))
        cls = self._forward_cls
        user_fn = cls.backward
        vjp = cls.vjp
        if vjp is not Function.vjp:  # ``vjp`` is the other name of ``backward``
            if user_fn is not Function.backward:
                raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function "
                                   "is not allowed. You should only implement one of them.")
            user_fn = vjp
        # the user's code is not ember's: built-in nodes hide ``saved_tensors`` from it
        depth = _in_backward[0]
        _in_backward[0] = 0
        try:
            result = user_fn(self, *grads)
        finally:
            _in_backward[0] = depth
        return self._check_grads(result)

    def _check_grads(self, result):
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self._edges)
        if len(result) > n and all(r is None for r in result[n:]):
            result = result[:n]
        if len(result) != n:
            raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                               f"gradients (expected {n}, got {len(result)})")
        out = []
        for i, (g, edge) in enumerate(zip(result, self._edges)):
            if g is None:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
            meta = self._in_meta[i]
            if meta is None:
                raise RuntimeError(
                    f"function {self.name()} returned a gradient different than None at "
                    f"position {i + 1}, but the corresponding forward input was not a Variable")
            if edge is None:
                out.append(None)
                continue
            shape, dt = meta
            if g._data.shape != shape:
                if not _expandable(shape, g._data.shape):
                    raise RuntimeError(
                        f"Function {self.name()} returned an invalid gradient at index {i} - "
                        f"got {list(g._data.shape)} but expected shape compatible with "
                        f"{list(shape)}")
                g = g.sum_to_size(shape)
            if g._data.dtype != dt:
                from ember.backend.dtypes import FROM_NP
                g = g.to(FROM_NP[dt])
            out.append(g)
        return tuple(out)


def _expandable(shape, to):
    if len(shape) > len(to):
        return False
    return all(s == t or s == 1 for s, t in zip(shape[::-1], to[::-1]))


def _is_overridden(cls, name):
    return getattr(cls, name) is not getattr(Function, name)


class _FunctionMeta(type):
    """Gives each Function subclass its node class, ``<Name>Backward``."""

    def __init__(cls, name, bases, attrs):
        backward_cls = type(name + "Backward", (BackwardCFunction,),
                            {"_forward_cls": cls, "_node_name": name + "Backward",
                             "__module__": cls.__module__})
        cls._backward_cls = backward_cls
        super().__init__(name, bases, attrs)


class Function(metaclass=_FunctionMeta):
    """Base class of user-defined differentiable operations (``torch.autograd.Function``).

    Subclasses define static ``forward(ctx, *args, **kwargs)`` and
    ``backward(ctx, *grad_outputs)`` (one gradient per ``forward`` argument, None
    for non-tensors and inputs that need none), or the newer style: ``forward(*args)``
    plus ``setup_context(ctx, inputs, output)``. Call them with ``MyFn.apply(...)``.

    ``ctx`` offers ``save_for_backward``/``saved_tensors``, ``needs_input_grad``,
    ``mark_dirty``, ``mark_non_differentiable``, ``set_materialize_grads`` and
    takes any other attribute.
    """

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please "
            "use new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(*args, **kwargs):
        """The operation, on Tensors, run without recording a graph."""
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """New-style hook that fills ``ctx`` from ``inputs`` and ``output`` after ``forward``."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Gradients of the inputs given the gradients of the outputs."""
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` on ``args`` and record one node for ``backward``."""
        if _mode_active[0] and (m := _mode_recorder()) is not None and \
                (getattr(cls, "symbolic", None) is not None or getattr(m, "python_ops", False)):
            # a graph capture records a Function with an ONNX spelling as one node (and
            # every Function, for the pictures: PyTorch's prim::PythonOp)
            return m.composite(cls.__name__, cls, args, kwargs, run=cls.apply)
        setup = _is_overridden(cls, "setup_context")
        if kwargs or setup:
            sig_fn = cls.forward
            bound = inspect.signature(sig_fn).bind(*((None,) if not setup else ()), *args,
                                                   **kwargs)
            if setup:
                bound.apply_defaults()
            args = bound.args[0 if setup else 1:]
            kwargs = bound.kwargs
        if _modes.active[0]:
            # the modes see the call (forward AD runs ``jvp``, vmap refuses a batched
            # argument); the forward itself runs under the modes beneath them
            return _modes.run_function(cls, args, kwargs, cls._forward_and_record)[0]
        return cls._forward_and_record(args, kwargs)[0]

    @classmethod
    def _forward_and_record(cls, args, kwargs):
        """Run ``forward`` and record the node: ``(result, ctx)``."""
        setup = _is_overridden(cls, "setup_context")
        ctx = _new_ctx(cls, args)
        recording = _grad_state.grad_enabled and any(ctx._needs_input_grad)
        prev = _grad_state.grad_enabled
        _grad_state.grad_enabled = False
        try:
            if setup:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        finally:
            _grad_state.grad_enabled = prev
        return _wrap_outputs(ctx, args, output, recording), ctx

    @staticmethod
    def vmap(info, in_dims, *args):
        raise NotImplementedError(
            "autograd.Function.vmap: ember has no custom batching rules for Functions; "
            "vmap runs a Function per sample (with a warning)")

    @staticmethod
    def mark_shared_storage(*pairs):
        raise NotImplementedError("mark_shared_storage is deprecated in PyTorch; ember does "
                                  "not support it")


def _new_ctx(cls, args):
    ctx = object.__new__(cls._backward_cls)
    ctx._saved = ctx._in_shapes = None
    ctx._hooks = ctx._pre_hooks = ctx._tensor_pre_hooks = None
    ctx._to_save = ()
    ctx._dirty = ()
    ctx._non_differentiable = ()
    ctx._materialize = True
    nig = []
    edges = []
    meta = []
    for a in args:
        if isinstance(a, Tensor):
            rg = a._requires_grad
            nig.append(rg)
            edges.append((a if a.grad_fn is None else (a.grad_fn, a._output_nr)) if rg
                         else None)
            meta.append((a._data.shape, a._data.dtype))
        else:
            nig.append(False)
            edges.append(None)
            meta.append(None)
    ctx._needs_input_grad = tuple(nig)
    ctx._edges = edges
    ctx._in_meta = meta
    if None in meta:
        # PyTorch's node lists the Tensor arguments only (``next_functions``, what node
        # hooks receive); ``backward`` still returns one gradient per argument
        ctx._edge_inputs = [i for i, m in enumerate(meta) if m is not None]
    return ctx


def _wrap_outputs(ctx, args, output, recording):
    is_tuple = isinstance(output, tuple)
    outputs = list(output) if is_tuple else [output]
    input_ids = {id(a): a for a in args if isinstance(a, Tensor)}
    dirty = {id(t) for t in ctx._dirty}
    for t in ctx._dirty:
        if id(t) not in input_ids:
            raise RuntimeError("mark_dirty only accepts input tensors, but argument "
                               f"{ctx._dirty.index(t)} isn't one")
    out_ids = {id(o) for o in outputs if isinstance(o, Tensor)}
    if not dirty <= out_ids:
        raise RuntimeError("Some elements marked as dirty during the forward method were not "
                           "returned as output. The inputs that are modified inplace must all "
                           "be outputs of the Function.")
    non_diff = {id(t) for t in ctx._non_differentiable}
    ctx.n_outputs = len(outputs)
    # (shape, dtype) of each output, as the engine reads it, and its array module
    ctx._out_meta = [(o._data.shape, o._data.dtype) if isinstance(o, Tensor)
                     else ((), "float64") for o in outputs]
    ctx._out_xp = [_xp(o._data) if isinstance(o, Tensor) else None for o in outputs]
    if anomaly.enabled[0] and recording:
        ctx._trace = anomaly.forward_trace()
    result = []
    for nr, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            result.append(o)
            continue
        is_dirty = id(o) in dirty
        if is_dirty:
            o._vc[0] += 1
            if recording and o._requires_grad and o.grad_fn is None:
                raise RuntimeError("a leaf Variable that requires grad has been used in an "
                                   "in-place operation.")
        elif id(o) in input_ids:
            # an input returned unchanged becomes a view of it, as in PyTorch
            alias = _make(o._data, False)
            alias._vc = o._vc
            alias._base = o if o._base is None else o._base
            o = alias
        differentiable = (recording and id(o) not in non_diff and o._data.dtype.kind in "fcV")
        if differentiable:
            if is_dirty and o._base is not None:
                from ember.ops._views import rebase_view
                src = _make(o._data, True)
                src.grad_fn = ctx
                src._output_nr = nr
                rebase_view(o, src)
            else:
                o.grad_fn = ctx
                o._output_nr = nr
                o._requires_grad = True
        elif not is_dirty:
            if o.grad_fn is not None:
                o.grad_fn = None
                o._output_nr = 0
            o._requires_grad = False
        result.append(o)
    if recording:
        ctx._saved = _saved_list(ctx, result)
        if _saved_hooks.stack and ctx._saved:
            ctx._saved = _saved_hooks.pack_entries(
                [(o.arr, o.vc, o.version, True, o.nr) if type(o) is _SavedOutput else o
                 for o in ctx._saved], lambda e: ctx._rebuild(_make(e[0]), _Out(*e)))
    ctx._to_save = ()
    return tuple(result) if is_tuple else result[0]


def _saved_list(ctx, outputs):
    by_id = {id(o): (nr, o) for nr, o in enumerate(outputs) if isinstance(o, Tensor)}
    saved = []
    for t in ctx._to_save:
        if t is None:
            saved.append((None, None))
        elif id(t) in by_id and by_id[id(t)][1].grad_fn is ctx:
            # an output of this node: kept as array + version, so the graph has no cycle
            nr, o = by_id[id(t)]
            saved.append(_SavedOutput(o._data, o._vc, nr))
        else:
            saved.append((t, t._vc[0]))
    return saved


class _Out:
    """A saved output entry's fields by name (for ``Node._rebuild``)."""

    __slots__ = ("arr", "vc", "version", "rg", "nr")

    def __init__(self, arr, vc, version, rg, nr):
        self.arr, self.vc, self.version, self.rg, self.nr = arr, vc, version, rg, nr


class _SavedOutput:
    __slots__ = ("arr", "vc", "version", "nr")

    def __init__(self, arr, vc, nr):
        self.arr, self.vc, self.version, self.nr = arr, vc, vc[0], nr


def _xp(arr):
    from ember.backend import array_module
    return array_module(arr)


def once_differentiable(fn):
    """Decorate a ``backward`` that is not itself differentiable.

    It runs without recording a graph; differentiating its results again (with
    ``create_graph=True``) raises a RuntimeError instead of a silently wrong answer.
    """
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not _grad_state.grad_enabled:
            return outputs
        if not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            return outputs
        from ember.ops.identity import _DelayedError  # ops sit above autograd
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        wrapped = []
        for o in outs:
            if isinstance(o, Tensor) and o._data.dtype.kind in "fcV":
                o = _DelayedError.apply(_make(o._data, True))
            wrapped.append(o)
        return wrapped[0] if single else tuple(wrapped)
    return wrapper


class InplaceFunction(Function):
    """A Function with an ``inplace`` flag (PyTorch's legacy helper)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class NestedIOFunction(Function):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("NestedIOFunction is a legacy PyTorch API; ember does not "
                                  "support it")

