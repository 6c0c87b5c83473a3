"""``jit.script``: compile a module's methods (or a function) from Python source to
TorchScript, and run the compiled code.

:class:`ModuleCompiler` gives each module instance of the tree its methods' TorchScript
source: user classes are compiled from their Python source by
:class:`ember.jit._frontend.FunctionCompiler`; ember's own ``nn`` classes use the
TorchScript templates of :mod:`ember.jit._script_templates` (their eager forwards check
shapes and pick fast paths in Python that TorchScript cannot express, and PyTorch writes
its library modules' own TorchScript into archives the same way). The sources go to
jit-load's :func:`ember.jit._module.create_script_module`, so the scripted module runs the
compiled code — before ``save`` exactly as after ``torch.jit.load``.
"""
import inspect

from ember.jit import _builtins_script  # noqa: F401  (registers the cell builtins)
from ember.jit import _types as T
from ember.jit._frontend import FrontendError, FunctionCompiler, NotSupportedError
from ember.jit._frontend_expr import Val, static
from ember.jit._script_calls import bind_call

__all__ = ["script", "ignore", "unused", "export", "is_scripting", "annotate", "Final",
           "FrontendError", "NotSupportedError"]

Final = T.Final
_UNUSED_MSG = "This Python function is annotated to be ignored and cannot be run"


# ---------------------------------------------------------------------------------------
# decorators and helpers usable in eager code
# ---------------------------------------------------------------------------------------
def ignore(drop=False, **kwargs):
    """Leave a function or method as Python: scripted code calls it through Python (so a
    module that calls it cannot be saved), as ``torch.jit.ignore``. ``drop=True`` is
    :func:`unused`."""
    if callable(drop):
        drop._ember_jit_ignore = True
        return drop

    def deco(fn):
        if drop:
            fn._ember_jit_unused = True
        else:
            fn._ember_jit_ignore = True
        return fn
    return deco


def unused(fn):
    """Compile only the signature: calling the method from scripted code raises, and the
    module still saves (``torch.jit.unused``)."""
    fn._ember_jit_unused = True
    return fn


def export(fn):
    """Compile this method too, although ``forward`` does not call it
    (``torch.jit.export``)."""
    fn._ember_jit_export = True
    return fn


def is_scripting():
    """True inside scripted code, False in eager Python (``torch.jit.is_scripting``).

    >>> ember.jit.is_scripting()
    False
    """
    return False


def annotate(the_type, the_value):
    """Give an empty container (or None) its TorchScript type; the identity in eager."""
    return the_value


# ---------------------------------------------------------------------------------------
# compiling a module tree
# ---------------------------------------------------------------------------------------
class _Context:
    """State shared while compiling one ``jit.script`` call: one ModuleCompiler per
    module instance, and the free functions reached."""

    def __init__(self, root=None):
        self.compilers = {}
        self.paths = {}
        if root is not None:
            for path, mod in root.named_modules(remove_duplicate=True):
                self.paths[id(mod)] = path
        self.functions = {}       # qualname -> FunctionCompiler
        self.function_names = {}  # fn -> qualname
        self.in_progress = set()
        self.script_functions = {}  # qualname -> source, of ScriptFunctions called

    def call_script_function(self, fc, node, sf):
        """A call of an already scripted function: its code is added to the archive."""
        from ember.jit._script_calls import _args
        from ember.jit._script_templates import TemplateMethod
        cu = getattr(sf, "_cu", None)
        sources = dict(getattr(cu, "function_sources", {}) or {})
        sources.setdefault(sf.qualified_name, sf.code)
        self.script_functions.update(sources)
        sig = TemplateMethod(sources[sf.qualified_name], is_method=False)
        args, kwargs = _args(fc, node)
        codes = bind_call(fc, node, sig.params, args, kwargs, sf.qualified_name)
        return Val(f"{sf.qualified_name}({', '.join(codes)})", sig.return_type)

    def all_functions(self):
        out = dict(self.script_functions)
        out.update({q: c.source() for q, c in self.functions.items()})
        return out

    def compiler_for(self, module):
        c = self.compilers.get(id(module))
        if c is None:
            c = self.compilers[id(module)] = ModuleCompiler(self, module)
        return c

    def call_function(self, fc, node, fn):
        """A call of a free Python function: compiled once as a script function."""
        if getattr(fn, "_ember_jit_ignore", False) or getattr(fn, "_ember_jit_unused", False):
            fc.error(node, f"the ignored function {fn.__qualname__} cannot be called from "
                     "scripted code in ember (only ignored/unused methods can)",
                     NotSupportedError)
        qual = self.function_names.get(fn)
        if qual is None:
            if fn in self.in_progress:
                fc.error(node, f"recursive calls ({fn.__qualname__}) aren't supported",
                         NotSupportedError)
            qual = _function_qualname(fn)
            self.in_progress.add(fn)
            try:
                comp = FunctionCompiler(fn, owner=_FreeOwner(self)).compile()
            finally:
                self.in_progress.discard(fn)
            comp.name = qual.rsplit(".", 1)[-1]
            self.functions[qual] = comp
            self.function_names[fn] = qual
        comp = self.functions[qual]
        from ember.jit._script_calls import _args
        args, kwargs = _args(fc, node)
        codes = bind_call(fc, node, comp.params, args, kwargs, fn.__qualname__)
        return Val(f"{qual}({', '.join(codes)})", comp.return_type)


def _function_qualname(fn):
    mod = fn.__module__ or "__main__"
    parts = [] if mod == "__main__" else mod.split(".")
    return ".".join(["__torch__"] + parts + [fn.__qualname__.replace(".<locals>.", "_")
                                            .replace(".", "_")])


class _FreeOwner:
    """The owner of a free function: no ``self``, but it shares the context."""

    def __init__(self, ctx):
        self.ctx = ctx

    @staticmethod
    def is_module(obj):
        import ember
        return isinstance(obj, ember.nn.Module)

    @staticmethod
    def _no_modules(fc, node, *args):
        fc.error(node, "modules cannot be used from a free script function",
                 NotSupportedError)

    call_method = module_attr = module_index = module_items = _no_modules

    def self_val(self):
        raise AssertionError("free functions have no self")


def _library_class(cls):
    """The ember.nn class whose forward ``cls`` runs (None for user code)."""
    for klass in cls.__mro__:
        if klass.__module__ == "ember.nn.modules.module":
            break
        if "forward" in klass.__dict__:
            return klass if klass.__module__.startswith("ember.nn") else None
    return cls if cls.__module__.startswith("ember.nn") else None


class ModuleCompiler:
    """The TorchScript methods and attributes of one module instance."""

    def __init__(self, ctx, module):
        self.ctx = ctx
        self.module = module
        self.methods = {}      # name -> FunctionCompiler or _TemplateMethod
        self.attrs = {}        # plain attributes the code reads: name -> type string
        self.ignored = {}      # name -> python function run through Python
        self.in_progress = set()
        self.qualname = None
        self.library = _library_class(type(module))
        self.template = None
        from ember.jit._module import RecursiveScriptModule
        if isinstance(module, RecursiveScriptModule):
            self._adopt_script_module(module)
        elif self.library is not None:
            from ember.jit._script_templates import template_for
            self.template = template_for(module, self.library)

    def _adopt_script_module(self, module):
        """An already scripted (or loaded) submodule keeps its class, code and attributes."""
        from ember.jit._script_templates import TemplateMethod
        cls = module._jit_class
        self.library = type(module)
        self.template = {n: TemplateMethod(src) for n, src in cls.method_sources.items()}
        self.attrs = {n: t for n, t in cls.attributes.items()
                      if n != "training" and n not in module._modules}
        self.qualname = cls.qualname
        cu = module.__dict__.get("_jit_cu")
        if cu is not None:
            self.ctx.script_functions.update(getattr(cu, "function_sources", {}) or {})

    # -- helpers used by the frontend ---------------------------------------------------
    @staticmethod
    def is_module(obj):
        import ember
        return isinstance(obj, ember.nn.Module)

    def self_val(self):
        return static(self.module, "self")

    def constants(self):
        jit_class = self.module.__dict__.get("_jit_class")
        if jit_class is not None:
            return set(jit_class.constants)
        names = set(getattr(type(self.module), "__constants__", ()) or ())
        for klass in type(self.module).__mro__:
            for name, ann in getattr(klass, "__annotations__", {}).items():
                if ann is T.Final or str(ann).startswith("typing.Final") or (
                        isinstance(ann, str) and ("Final" in ann)):
                    names.add(name)
        return names

    def module_attr(self, fc, node, base, attr):
        mod = base.obj
        comp = self.ctx.compiler_for(mod)
        return comp._attr(fc, node, base.code, attr)

    def _attr(self, fc, node, code, attr):
        mod = self.module
        d = mod.__dict__
        if attr in d.get("_parameters", {}) or attr in d.get("_buffers", {}):
            store = d["_parameters"] if attr in d["_parameters"] else d["_buffers"]
            if store[attr] is None:
                return Val("None", T.NONE)
            return Val(f"{code}.{attr}", T.TENSOR)
        if attr in d.get("_modules", {}):
            sub = d["_modules"][attr]
            if sub is None:
                return Val("None", T.NONE)
            return static(sub, f"{code}.{attr}")
        if attr == "training":
            return Val(f"{code}.training", T.BOOL)
        if attr in self.constants():
            jit_class = d.get("_jit_class")
            value = jit_class.constants[attr] if jit_class is not None else getattr(mod, attr)
            if self.is_module(value):
                return static(value, f"{code}.{attr}")
            try:
                return Val(T.literal(value), T.type_of_value(value))
            except TypeError:
                fc.error(node, f"constant '{attr}' of type {type(value).__name__} is not "
                         "supported")
        if attr in d:
            value = d[attr]
            ty = T.type_of_value(value)
            if ty is None or ty.is_tensor:
                fc.error(node, f"module '{type(mod).__name__}' has no attribute '{attr}' "
                         f"usable in scripted code (its value is a {type(value).__name__}; "
                         "TorchScript attributes are tensors, numbers, strings and lists, "
                         "tuples and dicts of those)")
            self.attrs[attr] = str(ty)
            return Val(f"{code}.{attr}", ty)
        klass_attr = inspect.getattr_static(mod, attr, None)
        if inspect.isfunction(klass_attr):
            return static(getattr(mod, attr))
        if isinstance(klass_attr, property):
            fc.error(node, f"property '{attr}' of {type(mod).__name__} isn't supported in "
                     "scripted code", NotSupportedError)
        fc.error(node, f"module '{type(mod).__name__}' has no attribute '{attr}'")

    def attr_type_for_store(self, fc, node, attr, v):
        d = self.module.__dict__
        if attr in d.get("_parameters", {}) or attr in d.get("_buffers", {}):
            return T.TENSOR
        if attr in d:
            ty = T.type_of_value(d[attr])
            if ty is not None:
                self.attrs[attr] = str(ty)
                return ty
        fc.error(node, f"cannot assign to module attribute '{attr}': it is not a parameter, "
                 "buffer or typed attribute")

    def module_index(self, fc, node, base, sl):
        mod = base.obj
        key = fc.static_value(sl)
        names = list(mod._modules)
        if isinstance(key, int) and not isinstance(key, bool):
            try:
                name = names[key]
            except IndexError:
                fc.error(node, f"index {key} is out of range for {type(mod).__name__} of "
                         f"length {len(names)}")
        elif isinstance(key, str) and key in mod._modules:
            name = key
        else:
            fc.error(node, f"{type(mod).__name__} can only be indexed by a constant int or "
                     "str in scripted code")
        return static(mod._modules[name], f'getattr({base.code}, "{name}")')

    def module_items(self, fc, node, v):
        mod = v.obj
        import ember
        if isinstance(mod, _ModuleDictView):
            return mod.items()
        if isinstance(mod, ember.nn.ModuleDict):
            return [Val(T.literal(k), T.STR) for k in mod._modules]
        if not isinstance(mod, (ember.nn.ModuleList, ember.nn.Sequential)):
            fc.error(node, f"'{type(mod).__name__}' object is not iterable")
        return [static(sub, f'getattr({v.code}, "{name}")')
                for name, sub in mod._modules.items()]

    def call_method(self, fc, node, base, name):
        mod = base.obj
        comp = self.ctx.compiler_for(mod)
        import ember
        from ember.jit._script_calls import _args
        if isinstance(mod, ember.nn.ModuleDict) and name in ("items", "values", "keys"):
            if node.args or node.keywords:
                fc.error(node, f"ModuleDict.{name}() takes no arguments")
            return static(_ModuleDictView(mod, base.code, name))
        if name != "forward" and name in mod._modules:
            sub = mod._modules[name]
            return self.call_method(fc, node, static(sub, f"{base.code}.{name}"), "forward")
        if name == "forward":
            comp.ensure_forward(fc, node)
        sig = comp.method_signature(fc, node, name)
        args, kwargs = _args(fc, node)
        what = f"{type(mod).__name__}.{name}"
        params, ret = sig
        codes = bind_call(fc, node, params, args, kwargs, what)
        return Val(f"{base.code}.{name}({', '.join(codes)})", ret)

    # -- compiling this module's methods ------------------------------------------------
    def ensure_forward(self, fc=None, node=None):
        if self.template is None and "forward" not in type(self.module).__dict__ and not any(
                "forward" in k.__dict__ for k in type(self.module).__mro__[:-1]
                if k.__module__ != "ember.nn.modules.module"):
            msg = f"module {type(self.module).__name__} has no forward method"
            if fc is not None:
                fc.error(node, msg)
            raise FrontendError(msg)

    def method_signature(self, fc, node, name):
        if name in self.methods:
            m = self.methods[name]
            return m.params, m.return_type
        if self.template is not None:
            if name not in self.template:
                fc.error(node, f"{type(self.module).__name__}.{name} is not available in "
                         "scripted code", NotSupportedError)
            self.methods[name] = self.template[name]
            return self.template[name].params, self.template[name].return_type
        fn = inspect.getattr_static(self.module, name, None)
        if isinstance(fn, (staticmethod, classmethod)) or not inspect.isfunction(fn):
            fc.error(node, f"'{type(self.module).__name__}' has no method '{name}' usable in "
                     "scripted code", NotSupportedError)
        comp = self.compile_method(name, fn, fc, node)
        return comp.params, comp.return_type

    def compile_method(self, name, fn, fc=None, node=None):
        if name in self.methods:
            return self.methods[name]
        if getattr(fn, "_ember_jit_unused", False):
            comp = _unused_method(fn, self, name)
            self.methods[name] = comp
            return comp
        if getattr(fn, "_ember_jit_ignore", False):
            comp = FunctionCompiler(fn, owner=self, is_method=True)
            comp.compile_signature_only()
            if comp.ret_ann is None:
                comp.ret_ann = T.TENSOR  # as TorchScript types an unannotated ignored fn
            self.ignored[name] = fn
            return comp
        if name in self.in_progress:
            err = f"recursive method calls ({type(self.module).__name__}.{name}) aren't " \
                  "supported"
            if fc is not None:
                fc.error(node, err, NotSupportedError)
            raise NotSupportedError(err)
        self.in_progress.add(name)
        try:
            comp = FunctionCompiler(fn, owner=self, is_method=True).compile()
        except (FrontendError, NotSupportedError) as e:
            if self.library is None:
                raise
            # an ember.nn layer without a template whose own forward does not compile
            raise NotSupportedError(
                f"jit.script of ember.nn.{self.library.__name__} is not supported yet: it "
                f"has no TorchScript template and its {name} does not compile ({e})") from e
        finally:
            self.in_progress.discard(name)
        self.methods[name] = comp
        return comp

    def compile_all(self):
        """forward (when the class has one) and every ``@jit.export`` method."""
        if self.template is not None:
            self.methods.update(self.template)
            return
        cls = type(self.module)
        has_forward = any("forward" in k.__dict__ for k in cls.__mro__
                          if k.__module__ != "ember.nn.modules.module")
        if has_forward:
            fwd = inspect.getattr_static(self.module, "forward")
            if not getattr(fwd, "_ember_jit_ignore", False):
                self.compile_method("forward", fwd)
        for klass in reversed(cls.__mro__):
            for name, fn in klass.__dict__.items():
                if inspect.isfunction(fn) and getattr(fn, "_ember_jit_export", False):
                    self.compile_method(name, fn)

    def sources(self):
        return {name: (m.source() if hasattr(m, "source") else m.text)
                for name, m in self.methods.items() if name not in self.ignored}


class _ModuleDictView:
    """``self.heads.items()`` / ``.values()`` / ``.keys()``: iterated by unrolling."""

    def __init__(self, mod, code, kind):
        self.mod, self.code, self.kind = mod, code, kind

    def items(self):
        out = []
        for k, sub in self.mod._modules.items():
            key = Val(T.literal(k), T.STR)
            val = static(sub, f"getattr({self.code}, {T.literal(k)})")
            out.append({"items": (key, val), "values": val, "keys": key}[self.kind])
        return out


def _unused_method(fn, owner, name):
    comp = FunctionCompiler(fn, owner=owner, is_method=True)
    comp.compile_signature_only()
    if comp.ret_ann is None:
        comp.ret_ann = T.TENSOR
    comp.lines = [f'  ops.prim.RaiseException("{_UNUSED_MSG}")']
    return comp


# ---------------------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------------------
def script(obj, optimize=None, _frontend=None, _rcb=None, example_inputs=None):
    """Compile ``obj`` (an ``nn.Module`` or a function) from its Python source to
    TorchScript and return a ``RecursiveScriptModule`` / ``ScriptFunction`` that runs the
    compiled code (``torch.jit.script``).

    ``forward`` and what it calls are compiled (submodules recursively), plus methods
    marked ``@jit.export``. Unsupported Python raises :class:`FrontendError` naming the
    construct, the file and the line.

    >>> m = ember.jit.script(ember.nn.Linear(2, 3))
    >>> m(ember.ones(1, 2)).shape
    ember.Size([1, 3])
    """
    import ember
    from ember.jit._module import (
        RecursiveScriptModule,
        ScriptFunction,
        create_script_function,
        create_script_module,
    )
    if isinstance(obj, (RecursiveScriptModule, ScriptFunction)):
        return obj
    if isinstance(obj, ember.nn.Module):
        ctx = _Context(obj)
        paths = ctx.paths
        for mod in obj.modules():
            ctx.compiler_for(mod).compile_all()
        methods, attributes, qualnames = {}, {}, {}
        for key, comp in ctx.compilers.items():
            path = paths.get(key)
            if path is None:
                continue
            methods[path] = comp.sources()
            if comp.attrs:
                attributes[path] = dict(comp.attrs)
            if comp.qualname is not None:
                qualnames[path] = comp.qualname
        functions = ctx.all_functions()
        sm = create_script_module(obj, methods, functions=functions, attributes=attributes,
                                  qualnames=qualnames)
        _attach_ignored(sm, obj, ctx)
        reused = sm.__dict__.get("_jit_reused", ())
        for m in sm.modules():
            if id(m) not in reused and not _inside_reused(sm, m, reused):
                m._jit_class.scripted = True
        return sm
    if inspect.isfunction(obj):
        if getattr(obj, "_ember_jit_ignore", False):
            return obj
        ctx = _Context()
        comp = FunctionCompiler(obj, owner=_FreeOwner(ctx)).compile()
        qual = _function_qualname(obj)
        comp.name = qual.rsplit(".", 1)[-1]
        functions = ctx.all_functions()
        sf = create_script_function(comp.source(), qual, functions=functions)
        sf._scripted = True
        return sf
    if inspect.isclass(obj):
        raise NotSupportedError(f"jit.script of the Python class {obj.__name__} is not "
                                "supported in ember: script an nn.Module instance or a "
                                "function")
    raise FrontendError(f"jit.script cannot compile a {type(obj).__name__}: pass an "
                        "nn.Module instance or a function")


def _inside_reused(root, mod, reused):
    """Whether ``mod`` belongs to a compiled module kept as it was (a traced submodule
    keeps the code its trace printed)."""
    for m in root.modules():
        if id(m) in reused and any(sub is mod for sub in m.modules()):
            return True
    return False


def _attach_ignored(sm, root, ctx):
    """Methods marked ``@jit.ignore`` run as Python on the eager module."""
    twins = dict(zip([id(m) for m in root.modules()], sm.modules()))
    for key, comp in ctx.compilers.items():
        if not comp.ignored or key not in twins:
            continue
        twin = twins[key]
        for name, fn in comp.ignored.items():
            eager = comp.module

            def call(_self, *args, _fn=fn, _m=eager, **kwargs):
                return _fn(_m, *args, **kwargs)
            twin._jit_class.methods[name] = call
        names = ", ".join(repr(n) for n in comp.ignored)

        def refuse(f, _extra_files=None, _names=names):
            raise RuntimeError(f"Could not export Python function call {_names}: it is "
                               "marked @jit.ignore and runs as Python, which an archive "
                               "cannot hold. Remove the call (or use @jit.unused) to save.")
        for holder in {id(twin): twin, id(sm): sm}.values():
            holder.__dict__["save"] = refuse
