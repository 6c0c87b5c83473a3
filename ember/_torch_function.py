"""``torch.overrides.TorchFunctionMode`` on ember's mode stack.

A ``TorchFunctionMode`` is a :class:`ember.autograd._modes.Mode`: it is pushed on the one
stack, in the order the user enters it, beside captures, vmap levels and the profiler.
What it sees are the *public* calls -- ``torch.add``, ``Tensor.add``, ``F.relu``,
``x[key]``, ``x.T`` -- not the primitives beneath them, so it is told of them by the public
functions themselves: while at least one such mode is on the stack, the public functions
of the ``ember`` namespace, ``Tensor`` (methods, operators, and the properties that
compute a tensor: ``T``, ``mT``, ``H``, ``mH``, ``real``, ``imag``),
``nn.functional`` (and its families), ``nn.init``, ``linalg``, ``fft``, ``special`` and
ember's op modules are replaced by wrappers that hand the call to the innermost visible
``TorchFunctionMode``, wherever ember binds them (module attributes, imported names,
static methods, tables of functions); when the last one leaves, the originals come
back. So a program with no such mode pays nothing, not even the stack's one check.

While a mode's ``__torch_function__`` runs, that mode is taken off the stack (as torch
pops it), so ``func(*args, **kwargs)`` inside the handler re-dispatches to the next
``TorchFunctionMode`` down and finally to the plain function, and the ops the function
runs are not reported again; other modes (a profiler, a capture) still see those ops.

A primitive that reaches the mode without having passed a wrapper was called through a
name bound before the mode was entered (``from torch import add`` at import time) or
through an entry point ember does not wrap: the mode raises rather than let the call go
unreported. Not reported: backward steps (torch runs them below the Python layer too),
reads of tensor metadata properties (``shape``, ``dtype``, ``grad``, ...), and the updates
of ``torch.optim`` optimizers, which ember runs on arrays.
"""
import types as _types

from ember import _tensor
from ember.autograd import _modes

# the operators torch reports under the name of the method they call
_DUNDER_AS_METHOD = {"__add__": "add", "__radd__": "add", "__sub__": "sub",
                     "__mul__": "mul", "__rmul__": "mul", "__truediv__": "div",
                     "__matmul__": "matmul", "__neg__": "neg", "__lt__": "lt",
                     "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__ne__": "ne",
                     "__pow__": "pow", "__abs__": "abs", "__mod__": "remainder",
                     "__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_",
                     "__itruediv__": "div_"}

# the properties that compute a tensor (reported as ``__get__``); reads of metadata
# (shape, dtype, device, grad, requires_grad, ...) are not reported: ember's own Python
# code reads them everywhere, where torch reads them in C++
_COMPUTED_PROPERTIES = frozenset({"T", "mT", "H", "mH", "real", "imag"})

# torch's own name of an operator
_RENAMED = {"__rtruediv__": "__rdiv__"}

# Tensor attributes that are object plumbing, not operations
_TENSOR_SKIP = frozenset({
    "__init__", "__new__", "__getattribute__", "__getattr__", "__setattr__",
    "__delattr__", "__init_subclass__", "__class_getitem__", "__torch_function__",
    "__reduce_ex__", "__reduce__", "__hash__", "__del__", "__dir__", "__sizeof__",
    "__subclasshook__", "__array__", "__array_wrap__", "__array_priority__",
    "__deepcopy__", "__copy__", "__setstate__", "__getstate__", "__class__",
    "__dict__", "__weakref__", "__module__", "__doc__", "__slots__", "__format__",
    "__array_function__", "__array_ufunc__", "__dlpack__", "__dlpack_device__",
    "__cuda_array_interface__", "__array_interface__",
    "__iter__"})  # iteration is reported as the calls it makes, as torch does

# ember-namespace functions that set or read process state rather than compute
_NAMESPACE_SKIP = frozenset({
    "manual_seed", "seed", "initial_seed", "set_default_dtype", "get_default_dtype",
    "set_default_device", "get_default_device", "is_grad_enabled", "set_grad_enabled",
    "is_tensor", "is_storage", "set_printoptions", "compile", "load", "save",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_inference_mode_enabled", "typename", "set_num_threads", "get_num_threads",
    "set_num_interop_threads", "get_num_interop_threads", "get_rng_state",
    "set_rng_state", "set_default_tensor_type", "is_anomaly_enabled"})

_installed = []  # (owner, name, original) of every wrapper in place
_entered = [0]   # how many TorchFunctionModes are on the stack


def _innermost():
    for mode in reversed(_modes.stack[:_modes.active[0]]):
        if isinstance(mode, TorchFunctionMode):
            return mode
    return None


class _OffStack:
    """``with _OffStack(mode):`` takes ``mode`` off the stack for the block (as torch pops
    a mode while it handles a call) and puts it back in its place after; the modes
    above and below it stay visible."""

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        stack, active = _modes.stack, _modes.active
        self.at = stack.index(self.mode)
        self.visible = self.at < active[0]
        del stack[self.at]
        if self.visible:
            active[0] -= 1
        return self

    def __exit__(self, *exc):
        _modes.stack.insert(self.at, self.mode)
        if self.visible:
            _modes.active[0] += 1
        return False


def _call_mode(mode, func, args, kwargs):
    """Run ``mode.__torch_function__`` with ``mode`` off the stack meanwhile."""
    with _OffStack(mode):
        return mode.__torch_function__(func, (), args, kwargs)


def _wrap(orig, name, owner, reported=None):
    """A function that reports its calls to the innermost visible mode, else runs
    ``orig``; it is named ``name`` as an attribute of ``owner`` (its public spelling).
    ``reported`` gives the public function reported in its place."""
    def wrapper(*args, **kwargs):
        if _modes.active[0]:
            mode = _innermost()
            if mode is not None:
                func = wrapper if reported is None else reported()
                return _call_mode(mode, func, args, kwargs)
        return orig(*args, **kwargs)
    wrapper.__module__ = getattr(orig, "__module__", None)
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    wrapper.__name__ = _RENAMED.get(name, name)
    wrapper.__qualname__ = (owner.__name__ + "." if isinstance(owner, type) else "") + name
    wrapper.__wrapped__ = orig
    return wrapper


def _wrap_property(prop):
    def fget(self):
        if _modes.active[0]:
            mode = _innermost()
            if mode is not None:
                return _call_mode(mode, new.__get__, (self,), {})
        return prop.fget(self)
    new = property(fget, prop.fset, prop.fdel, prop.__doc__)
    return new


def _plain_function(value):
    return isinstance(value, (_types.FunctionType, _types.BuiltinFunctionType))


def _install():
    import ember
    from ember import fft, linalg, special
    from ember.nn import functional, init

    def put(owner, name, new):
        _installed.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, new)

    Tensor = _tensor.Tensor
    for name, value in list(vars(Tensor).items()):
        if name in _TENSOR_SKIP or (name.startswith("_") and not name.startswith("__")):
            continue
        if isinstance(value, property):
            if name in _COMPUTED_PROPERTIES:
                put(Tensor, name, _wrap_property(value))
        elif _plain_function(value) and name not in _DUNDER_AS_METHOD:
            put(Tensor, name, _wrap(value, name, Tensor))
    for name, method in _DUNDER_AS_METHOD.items():
        value = vars(Tensor).get(name)
        if _plain_function(value):
            put(Tensor, name, _wrap(value, name, Tensor,
                                    lambda m=method: getattr(Tensor, m)))
    import sys
    wrappers = {}  # id(original) -> wrapper: one wrapper per function, wherever it is bound
    namespaces = [(ember, _NAMESPACE_SKIP), (functional, ()), (init, ()), (linalg, ()),
                  (fft, ()), (special, ())]
    # the functional families and op modules the public functions come from, so a
    # module that calls one through its own module attribute is seen too
    namespaces += [(m, _NAMESPACE_SKIP) for name, m in list(sys.modules.items())
                   if m is not None and (name.startswith("ember.ops.")
                                         or name.startswith("ember.nn.functional_"))]
    for module, skip in namespaces:
        for name, value in list(vars(module).items()):
            if name.startswith("_") or name in skip or not _plain_function(value):
                continue
            if not getattr(value, "__module__", "").startswith("ember"):
                continue
            w = wrappers.get(id(value))
            if w is None:
                w = wrappers[id(value)] = (value, _wrap(value, name, module))
            put(module, name, w[1])
    def wrapper_of(value):
        w = wrappers.get(id(value)) if _plain_function(value) else None
        return w[1] if w is not None and w[0] is value else None

    # the same wrapper wherever else ember binds the function: names imported with
    # ``from ... import f``, static methods of classes (a module's ``_fn``), and the
    # values of module-level tables of functions
    for mod_name, module in list(sys.modules.items()):
        if module is None or not mod_name.startswith("ember") or \
                mod_name in ("ember._torch_function", "ember.autograd._modes"):
            continue
        for name, value in list(vars(module).items()):
            w = wrapper_of(value)
            if w is not None:
                put(module, name, w)
            elif isinstance(value, type) and value.__module__ == mod_name:
                for attr, member in list(vars(value).items()):
                    if isinstance(member, staticmethod):
                        w = wrapper_of(member.__func__)
                        if w is not None:
                            put(value, attr, staticmethod(w))
            elif type(value) is dict and len(value) < 64 and not name.startswith("__"):
                for key, member in list(value.items()):
                    w = wrapper_of(member)
                    if w is not None:
                        _installed.append((value, key, member))
                        value[key] = w


def _uninstall():
    while _installed:
        owner, name, original = _installed.pop()
        if type(owner) is dict:
            owner[name] = original
        else:
            setattr(owner, name, original)


class TorchFunctionMode(_modes.Mode):
    """A context manager that sees every public torch-level call made while it is
    active: subclasses define ``__torch_function__(self, func, types, args=(),
    kwargs=None)`` and usually end it with ``func(*args, **(kwargs or {}))``."""

    def __init__(self):
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError()

    def op(self, cls, args, params):
        name = getattr(cls, "_op_name", cls.__name__)
        raise RuntimeError(
            f"TorchFunctionMode {type(self).__name__}: the primitive {name} was reached by "
            "a call ember cannot report to the mode (a function bound before the mode was "
            "entered, such as 'from torch import add' at import time, or an entry point "
            "outside torch, Tensor, nn.functional, nn.init, linalg, fft and special); call "
            "it through its module attribute instead")

    def node(self, node, grads, below):
        # backward steps run below the Python layer in torch: the mode does not see them
        # (the other modes, a profiler's children of the step, still do)
        with _OffStack(self):
            return below()

    def __enter__(self):
        if _entered[0] == 0:
            _install()
        _entered[0] += 1
        try:
            _modes.push(self)
        except BaseException:
            self._leave()
            raise
        return self

    def __exit__(self, *exc):
        try:
            _modes.pop(self)
        finally:
            self._leave()
        return False

    def _leave(self):
        _entered[0] -= 1
        if _entered[0] == 0:
            _uninstall()

    @classmethod
    def push(cls, *args, **kwargs):
        """Make a mode and enter it."""
        return cls(*args, **kwargs).__enter__()


def is_torch_function_mode_enabled():
    """True while a :class:`TorchFunctionMode` is visible on the stack."""
    return _innermost() is not None


class DisableTorchFunction:
    """``torch._C.DisableTorchFunction``: the visible ``TorchFunctionMode``\\ s are taken
    off the stack for the block and put back after it."""

    def __enter__(self):
        stack, n = _modes.stack, _modes.active[0]
        self.removed = [(i, m) for i, m in enumerate(stack[:n])
                        if isinstance(m, TorchFunctionMode)]
        for i, _ in reversed(self.removed):
            del stack[i]
        _modes.active[0] = n - len(self.removed)
        return self

    def __exit__(self, *exc):
        for i, m in self.removed:
            _modes.stack.insert(i, m)
        _modes.active[0] += len(self.removed)
        return False


class DisableTorchFunctionSubclass:
    """``torch._C.DisableTorchFunctionSubclass``: turns off the ``__torch_function__`` of
    tensor subclasses for the block, leaving modes on. ember's operators never dispatch
    to a subclass's ``__torch_function__``, so within the block ember behaves as outside
    it; the context exists so code written for torch runs."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
