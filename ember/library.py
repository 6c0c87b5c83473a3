"""``torch.library``: user-defined operators, callable as ``torch.ops.NS.NAME``.

``custom_op("ns::name", mutates_args=())`` turns a Python function on tensors into an
operator: calling it runs the function with autograd recording off (as torch's
dispatcher runs the kernel below autograd), ``register_autograd`` gives it a
derivative (without one, ``backward`` through it raises torch's error),
``register_fake`` gives its shape function (used for inputs on the ``meta`` device),
and the operator is reachable as ``ember.ops.ns.name`` (``torch.ops.ns.name`` under
``ember run``) with its ``.default`` overload. ``Library(ns, "DEF").define(schema)``
plus ``impl`` registers an operator from a schema string the same way.
"""
import functools
import inspect
import re

__all__ = ["custom_op", "CustomOpDef", "register_fake", "register_autograd",
           "register_kernel", "impl", "define", "Library", "opcheck", "get_ctx",
           "infer_schema", "OpOverloadPacket", "OpOverload"]

_namespaces = {}  # namespace -> {op name: OpOverloadPacket}


def _split(qualname):
    if not isinstance(qualname, str) or qualname.count("::") != 1:
        raise ValueError(f"Expected `name` to be of the form \"namespace::name\", "
                         f"got {qualname!r}")
    ns, name = qualname.split("::")
    if not ns.isidentifier() or not name.split(".")[0].isidentifier():
        raise ValueError(f"Expected `name` to be of the form \"namespace::name\", "
                         f"got {qualname!r}")
    return ns, name


class _OpNamespace:
    """``torch.ops.NS``: the operators registered under one namespace."""

    def __init__(self, name):
        self.name = name

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        ops = _namespaces.get(self.name, {})
        if op not in ops:
            raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute "
                                 f"'{op}'")
        return ops[op]

    def __dir__(self):
        return sorted(_namespaces.get(self.name, {}))

    def __repr__(self):
        return f"<module 'torch.ops.{self.name}'>"


def namespace(name):
    """``torch.ops.NAME`` if an operator was registered under ``NAME``, else None."""
    return _OpNamespace(name) if name in _namespaces else None


class OpOverload:
    """One overload of an operator (``torch.ops.ns.name.default``)."""

    def __init__(self, packet, overload):
        self._packet = packet
        self._overloadname = overload

    def __call__(self, *args, **kwargs):
        return self._packet._op(*args, **kwargs)

    def name(self):
        return f"{self._packet._qualname}.{self._overloadname}"

    def __repr__(self):
        ns, name = _split(self._packet._qualname)
        return f"{ns}.{name}.{self._overloadname}"


class OpOverloadPacket:
    """An operator as ``torch.ops.ns.name``: call it, or pick ``.default``."""

    def __init__(self, qualname, op):
        self._qualname = qualname
        self._op = op
        self.default = OpOverload(self, "default")

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def overloads(self):
        return ["default"]

    def __repr__(self):
        ns, name = _split(self._qualname)
        return f"{ns}.{name}"


def _is_meta(args):
    from ember._tensor import Tensor
    return any(isinstance(a, Tensor) and a.device.type == "meta" for a in args)


class CustomOpDef:
    """A custom operator (what :func:`custom_op` returns): call it like the function."""

    def __init__(self, qualname, fn, mutates_args, schema=None):
        self._qualname = qualname
        self._name = _split(qualname)[1]
        self._init_fn = fn
        self._kernels = {}
        self._fake = None
        self._backward = None
        self._setup_context = None
        self._signature = inspect.signature(fn) if fn is not None else None
        self._mutates = mutates_args
        self._schema = schema
        functools.update_wrapper(self, fn) if fn is not None else None
        ns, name = _split(qualname)
        ops = _namespaces.setdefault(ns, {})
        if name in ops:
            raise RuntimeError(f"Tried to register an operator ({qualname}) with the same "
                               "name as an existing operator")
        ops[name] = OpOverloadPacket(qualname, self)

    def register_kernel(self, device_types, fn=None):
        """Use ``fn`` on tensors of ``device_types`` ("cpu", "cuda", or a tuple)."""
        def register(f):
            for d in ([device_types] if isinstance(device_types, str) or device_types is None
                      else device_types):
                self._kernels[d] = f
            return f
        return register if fn is None else register(fn)

    def register_fake(self, fn=None):
        """Register the shape function (``meta`` inputs go through it)."""
        def register(f):
            self._fake = f
            return f
        return register if fn is None else register(fn)

    def register_autograd(self, backward, *, setup_context=None):
        """Give the operator a derivative: ``backward(ctx, *grads)`` returns one
        gradient per input; ``setup_context(ctx, inputs, output)`` saves what it needs."""
        self._backward = backward
        self._setup_context = setup_context

    def _positional(self, args, kwargs):
        if not kwargs or self._signature is None:
            return args
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    def _kernel(self, args):
        from ember._tensor import Tensor
        if _is_meta(args):
            if self._fake is None:
                raise RuntimeError(f"There was no fake impl registered for "
                                   f"{self._qualname}. This is necessary for torch.compile/"
                                   "export/fx tracing to work. Please use "
                                   "`torch.library.register_fake` to add a fake impl.")
            return self._fake
        device = next((a.device.type for a in args if isinstance(a, Tensor)), None)
        fn = self._kernels.get(device, self._kernels.get(None, self._init_fn))
        if fn is None:
            raise NotImplementedError(f"{self._qualname}: no kernel registered for device "
                                      f"{device!r}")
        return fn

    def __call__(self, *args, **kwargs):
        from ember._tensor import Tensor
        from ember.autograd.grad_mode import is_grad_enabled, no_grad
        args = self._positional(args, kwargs)
        kernel = self._kernel(args)
        needs_grad = is_grad_enabled() and any(
            isinstance(a, Tensor) and a.requires_grad for a in args)
        if not needs_grad:
            with no_grad():
                return kernel(*args)
        return _autograd_function(self)(kernel).apply(*args)

    def __repr__(self):
        return f"<CustomOpDef({self._qualname})>"


def _autograd_function(op):
    from ember.autograd.function import Function

    def make(kernel):
        def forward(*args):
            return kernel(*args)

        def setup_context(ctx, inputs, output):
            if op._setup_context is not None:
                op._setup_context(ctx, inputs, output)

        def backward(ctx, *grads):
            if op._backward is None:
                raise RuntimeError(f"Autograd has not been implemented for operator "
                                   f"{op._qualname}. Please use "
                                   "`torch.library.register_autograd` to register an "
                                   "autograd formula.")
            grads = op._backward(ctx, *grads)
            return grads if isinstance(grads, tuple) else (grads,)

        return type(op._name, (Function,), {
            "forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
            "backward": staticmethod(backward)})
    return make


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """Make ``fn`` the operator ``name`` ("namespace::op"); as a decorator too."""
    def make(f):
        op = CustomOpDef(name, None if device_types is not None else f, mutates_args,
                         schema)
        if device_types is not None:
            op._signature = inspect.signature(f)
            functools.update_wrapper(op, f)
            op.register_kernel(device_types, f)
        return op
    return make if fn is None else make(fn)


def _op(target):
    if isinstance(target, CustomOpDef):
        return target
    if isinstance(target, OpOverload):
        target = target._packet
    if isinstance(target, OpOverloadPacket):
        return target._op
    if isinstance(target, str):
        ns, name = _split(target)
        packet = _namespaces.get(ns, {}).get(name.split(".")[0])
        if packet is not None:
            return packet._op
    raise ValueError(f"{target!r} is not an operator registered with torch.library")


def register_fake(op, fn=None, /, *, lib=None, _stacklevel=1, allow_override=False):
    """Register the shape function of ``op`` (a custom op or its "ns::name")."""
    return _op(op).register_fake(fn)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """Register the derivative of ``op``; see :meth:`CustomOpDef.register_autograd`."""
    _op(op).register_autograd(backward, setup_context=setup_context)


def register_kernel(op, device_types, func=None, /, *, lib=None):
    """Register the kernel of ``op`` on ``device_types``."""
    return _op(op).register_kernel(device_types, func)


_SCHEMA_RE = re.compile(r"^\s*(?P<name>[A-Za-z_][\w.]*)\s*\((?P<args>.*)\)\s*->\s*(?P<ret>.+)$")


def define(qualname, schema, *, lib=None, tags=()):
    """Declare the operator ``qualname`` with a schema ``"(Tensor x) -> Tensor"``; give
    it a kernel with :func:`impl`."""
    ns, name = _split(qualname)
    if not re.match(r"^\s*\(.*\)\s*->", schema):
        raise RuntimeError(f"torch.library.define: expected a schema like "
                           f"'(Tensor x) -> Tensor', got {schema!r}")
    CustomOpDef(qualname, None, (), schema)


def impl(qualname, types, func=None, *, lib=None):
    """Register the kernel of a defined operator for ``types`` ("cpu", "default"...)."""
    op = _op(qualname)
    types = ("cpu", "cuda") if types in ("default", "CompositeImplicitAutograd",
                                         "CompositeExplicitAutograd") else types
    types = "cpu" if types == "CPU" else "cuda" if types == "CUDA" else types
    return op.register_kernel(types, func)


class Library:
    """``torch.library.Library(ns, "DEF" | "IMPL" | "FRAGMENT")``: define operators from
    schema strings and register their kernels."""

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError("Unsupported kind: ", kind)
        self.ns = ns
        self.kind = kind
        self.dispatch_key = dispatch_key

    def define(self, schema, alias_analysis="", *, tags=()):
        """Declare ``"name(Tensor x) -> Tensor"`` in this library's namespace."""
        m = _SCHEMA_RE.match(schema)
        if m is None:
            raise RuntimeError(f"Library.define: cannot parse schema {schema!r}")
        define(f"{self.ns}::{m['name'].split('.')[0]}", f"({m['args']}) -> {m['ret']}")
        return m["name"]

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False):
        """Register ``fn`` as the kernel of ``op_name`` for ``dispatch_key``."""
        if with_keyset:
            raise NotImplementedError("torch.library.Library.impl(with_keyset=True): ember "
                                      "has no dispatch key sets")
        name = op_name if isinstance(op_name, str) else repr(op_name)
        key = (dispatch_key or self.dispatch_key or "default")
        if key == "Autograd":
            raise NotImplementedError("Library.impl(..., 'Autograd'): use "
                                      "torch.library.register_autograd")
        if key == "Meta":
            return register_fake(f"{self.ns}::{name.split('.')[0]}", fn)
        return impl(f"{self.ns}::{name.split('.')[0]}", key, fn)


def get_ctx():
    """The context of a fake kernel (dynamic sizes): ember's fakes see real shapes."""
    raise NotImplementedError("torch.library.get_ctx: ember's fake kernels run on meta "
                              "tensors with concrete shapes; there are no dynamic sizes")


def infer_schema(prototype_function, /, *, mutates_args, op_name=None):
    """The schema string torch would infer from a function's annotations."""
    names = {"Tensor": "Tensor", "int": "SymInt", "float": "float", "bool": "bool",
             "str": "str"}
    parts = []
    for p in inspect.signature(prototype_function).parameters.values():
        ann = p.annotation
        ann = getattr(ann, "__name__", str(ann))
        if ann not in names:
            raise ValueError(f"infer_schema(func): Parameter {p.name} has unsupported "
                             f"type {ann}.")
        parts.append(f"{names[ann]} {p.name}")
    ret = inspect.signature(prototype_function).return_annotation
    ret = names.get(getattr(ret, "__name__", str(ret)), "Tensor")
    return f"({', '.join(parts)}) -> {ret}"


def opcheck(op, args, kwargs=None, *, test_utils=None, raise_exception=True,
            atol=None, rtol=None):
    """Check a custom op: ember checks that it runs and that its fake matches."""
    raise NotImplementedError("torch.library.opcheck is not implemented in ember")
