"""ScriptModule, RecursiveScriptModule, ScriptFunction, and the constructor trace/script use.

A :class:`RecursiveScriptModule` is an ``nn.Module`` whose methods are TorchScript
source run by ember's interpreter (:mod:`ember.jit._interpreter`). Its class is a
:class:`ScriptClass`: a qualified name (``__torch__.torch.nn.modules.linear.Linear``),
the names of its parameters and buffers, its typed attributes and its compiled
methods. ``jit.load`` builds these from an archive; :func:`create_script_module`
builds them from an eager module plus the TorchScript source that ``jit.trace`` or
``jit.script`` produced, sharing the eager module's parameters and buffers. Either
way the same interpreter runs the same source, before ``save`` and after ``load``.
"""
import ast
import collections
import copy
import functools
import itertools
import pickle
import re
import textwrap

from ember.jit._errors import ScriptError
from ember.nn.modules.module import Module

__all__ = ["ScriptModule", "RecursiveScriptModule", "ScriptFunction", "ScriptClass",
           "create_script_module", "create_script_function", "qualified_name"]


class ScriptClass:
    """A TorchScript class type: name, state layout and compiled methods."""

    def __init__(self, qualname, kind="module"):
        self.qualname = qualname
        self.kind = kind  # "module", "namedtuple", "class", "enum", "interface"
        self.parameters = []
        self.buffers = []
        self.attributes = {}  # name -> TorchScript type string, in declaration order
        self.constants = {}  # Final name -> value, with its type string in const_types
        self.const_types = {}
        self.methods = {}  # name -> compiled callable(self, *args)
        self.method_sources = {}  # name -> source text of the def (dedented)
        # compiled by ``jit.script``: ``.code`` prints the SSA form, and calls from the
        # second on give outputs a ``DifferentiableGraphBackward`` node, as in PyTorch
        self.scripted = False
        self.calls = {}  # method name -> calls made from Python (see _diff_graph)
        self._ctor = None

    @property
    def name(self):
        return self.qualname.rsplit(".", 1)[-1]

    def declare(self, name, type_node, value, has_value):
        type_s = ast.unparse(type_node) if isinstance(type_node, ast.AST) else type_node
        if has_value:
            self.constants[name] = value
            self.const_types[name] = type_s
        else:
            self.attributes[name] = type_s

    def constructor(self):
        """``__torch__.X(...)`` in code: builds a NamedTuple value; modules cannot be built."""
        if self._ctor is None:
            if self.kind != "namedtuple":
                raise ScriptError(f"{self.qualname} cannot be constructed by TorchScript code "
                                  "in ember (only NamedTuple classes can)")
            fields = list(self.attributes)
            nt = collections.namedtuple(self.name, fields)
            nt._jit_qualname = self.qualname
            self._ctor = nt
        return self._ctor


class ScriptObject:
    """An object of a TorchScript class (not a module) loaded from an archive: its
    declared attributes and methods are what scripted code may reach."""

    def __init__(self, script_class, state):
        # not under "_jit_class": that key marks script modules for the interpreter
        self.__dict__["_jit_type"] = script_class
        self.__dict__["_jit_state"] = dict(state)

    @property
    def _jit_class(self):
        return self.__dict__["_jit_type"]

    def _jit_attr(self, name):
        cls = self.__dict__["_jit_type"]
        state = self.__dict__["_jit_state"]
        if name in state and name in cls.attributes:
            return state[name]
        if name in cls.methods:
            return _bind(cls.methods[name], self)
        raise ScriptError(f"object of {cls.qualname} has no attribute {name!r}")

    def __getattr__(self, name):
        state = self.__dict__["_jit_state"]
        if name in state:
            return state[name]
        raise AttributeError(name)

    def __repr__(self):
        return f"<{self._jit_class.qualname} object>"


def _bind(fn, obj):
    return functools.partial(fn, obj)


class ScriptModule(Module):
    """The base class of modules whose methods are TorchScript (PyTorch's ``ScriptModule``)."""


class RecursiveScriptModule(ScriptModule):
    """A module whose methods run as TorchScript in ember's interpreter.

    Made by ``jit.load``, ``jit.trace`` and ``jit.script``. Behaves as an
    ``nn.Module`` (parameters, ``state_dict``, ``train``/``eval``, ``to``) and adds
    ``code``, ``graph`` and ``save``.
    """

    def __init__(self, script_class, parameters, buffers, modules, attributes,
                 non_persistent=None):
        super().__init__()
        d = self.__dict__
        d["_parameters"] = parameters
        d["_buffers"] = buffers
        d["_modules"] = modules
        if non_persistent is not None:
            d["_non_persistent_buffers_set"] = non_persistent
        d["_jit_class"] = script_class
        d["_jit_graphs"] = {}
        d["_jit_inlined_graphs"] = {}
        d["_jit_cu"] = None
        for k, v in attributes.items():
            d[k] = v

    # ----- the interpreter's doors (see _expressions.get_attr / call_method) -------------
    def _jit_attr(self, name):
        d = self.__dict__
        for store in (d["_parameters"], d["_buffers"], d["_modules"]):
            if name in store:
                return store[name]
        cls = d["_jit_class"]
        # only what the class declares: the module's private state (hook dicts, the
        # compilation unit) must not be reachable from a file's code
        if name in d and (name in cls.attributes or name == "training"):
            return d[name]
        if name in cls.constants:
            return cls.constants[name]
        if name in cls.methods:
            return _bind(cls.methods[name], self)
        raise ScriptError(f"module {cls.qualname} has no attribute {name!r}")

    def _jit_method(self, name):
        fn = self.__dict__["_jit_class"].methods.get(name)
        if fn is None:
            raise ScriptError(f"module {self._jit_class.qualname} has no method {name!r}")
        return _bind(fn, self)

    def _jit_setattr(self, name, value):
        d = self.__dict__
        if name in d["_parameters"] or name in d["_buffers"]:
            (d["_parameters"] if name in d["_parameters"] else d["_buffers"])[name] = value
        elif name in d["_jit_class"].attributes or name == "training":
            d[name] = value
        else:
            raise ScriptError(f"module {self._jit_class.qualname} has no attribute {name!r} "
                              "to assign")

    # ----- nn.Module surface ----------------------------------------------------------------
    def _forward(self, *args, **kwargs):
        fn = self.__dict__["_jit_class"].methods.get("forward")
        if fn is None:
            raise RuntimeError(f"{self._jit_class.qualname} has no forward method")
        cls = self.__dict__["_jit_class"]
        if cls.scripted:
            from ember.jit._diff_graph import run_scripted
            return run_scripted(cls.calls, "forward", fn, (self,) + args, kwargs,
                                list(self.parameters()) + list(self.buffers()))
        return fn(self, *args, **kwargs)

    @property
    def forward(self):
        """``forward`` as a method object: callable, with ``graph`` and ``code``."""
        return ScriptMethod(self, "forward")

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            cls = self.__dict__.get("_jit_class")
            if cls is not None:
                if name in cls.methods:
                    return _bind(cls.methods[name], self)
                if name in cls.constants:
                    return cls.constants[name]
            raise

    @property
    def original_name(self):
        """The class name the module had in Python (``Linear``)."""
        return self._jit_class.name

    @property
    def qualified_name(self):
        return self._jit_class.qualname

    def _method_code(self, name):
        src = self._jit_class.method_sources.get(name)
        if src is None:
            raise RuntimeError(f"{self._jit_class.qualname} has no method {name!r}")
        # a file's ``self: __torch__.X`` annotation is not shown, as PyTorch prints code
        src = _SELF_ANNOTATION.sub(r"\1self", src, count=1)
        return (printed_code(src) if self._jit_class.scripted else src) + "\n"

    @property
    def code(self):
        """The TorchScript source of ``forward``."""
        return self._method_code("forward")

    @property
    def code_with_constants(self):
        return self.code, dict(enumerate(self._root_cu().constants))

    def _root_cu(self):
        return self.__dict__.get("_jit_cu")

    @property
    def graph(self):
        """``forward``'s graph: the IR as PyTorch prints it (traced, or read off the
        compiled code), else its code, printed."""
        g = self._jit_graphs.get("forward")
        if g is not None:
            return g
        src = self._jit_class.method_sources.get("forward")
        if self._jit_class.scripted and src is not None:
            # a loaded file's code reads ``self`` as a variable (``%self.1``)
            text = _script_graph(_SELF_ANNOTATION.sub(r"\1self", src, count=1),
                                 self._jit_attr_type, _method_type(self),
                                 bool(_SELF_ANNOTATION.match(src)),
                                 getattr(self._root_cu(), "function_sources", None),
                                 (src.file, src.lines) if getattr(src, "lines", None)
                                 else None)
            if text is not None:
                return _CodeGraph(text.rstrip("\n") + "\n")
        return _CodeGraph(self.code)

    def _jit_attr_type(self, name):
        """The TorchScript type of ``self.<name>`` (``None``: of ``self``)."""
        cls = self._jit_class
        if name is None:
            return cls.qualname
        from ember.jit._script_graph import _annotation
        d = self.__dict__
        if name in d["_modules"] and d["_modules"][name] is not None:
            return d["_modules"][name]._jit_class.qualname
        if name in cls.attributes:   # as declared: ``Optional[Tensor]`` for a bias
            return _annotation(cls.attributes[name])
        if name in d["_parameters"] or name in d["_buffers"]:
            return "Tensor"
        return None

    @property
    def inlined_graph(self):
        g = self._jit_inlined_graphs.get("forward")
        return g if g is not None else self.graph

    def save(self, f, _extra_files=None):
        """Write this module as a TorchScript archive that ``torch.jit.load`` reads."""
        from ember.jit._archive import save_archive
        save_archive(self, f, _extra_files)

    def _save_for_lite_interpreter(self, *args, **kwargs):
        raise NotImplementedError("ember does not write PyTorch Mobile (lite interpreter) "
                                  "archives; use save()")

    def __repr__(self):
        return f"RecursiveScriptModule(original_name={self.original_name})" if not \
            self._modules else super().__repr__()

    def _get_name(self):
        return "RecursiveScriptModule"

    def extra_repr(self):
        return f"original_name={self.original_name}"

    def __getstate__(self):
        raise pickle.PickleError("ScriptModules cannot be pickled; use jit.save / "
                                 "ScriptModule.save")

    _SHARED_ON_COPY = ("_jit_class", "_jit_cu", "_jit_graphs", "_jit_inlined_graphs")

    def __deepcopy__(self, memo):
        """A copy with its own parameters, buffers and attributes, running the same code."""
        new = RecursiveScriptModule.__new__(type(self))
        memo[id(self)] = new
        d = new.__dict__
        for k, v in self.__dict__.items():
            d[k] = v if k in self._SHARED_ON_COPY else copy.deepcopy(v, memo)
        return new


def printed_code(source):
    """A compiled ``def`` as PyTorch prints it (SSA form, see
    :mod:`ember.jit._code_print`); constructs that printer does not model print as
    compiled."""
    from ember.jit._code_print import Unmodelled, ssa_code
    try:
        return ssa_code(source)
    except Unmodelled:
        return source


_SELF_ANNOTATION = re.compile(r"^(def \w+\()self\s*:\s*[\w.]+")


def _script_graph(source, attr_type=None, method_type=None, self_var=False,
                  function_sources=None, positions=None):
    """PyTorch's IR text of a compiled ``def`` (:mod:`ember.jit._script_graph`), or
    None where that printer does not model the code."""
    from ember.jit._code_ssa import Unmodelled
    from ember.jit._script_graph import graph_text
    try:
        return graph_text(source, attr_type, method_type, self_var, function_sources,
                          positions)
    except Unmodelled:
        return None


def _method_type(module):
    """``method_type(type, name)`` for the graph printer: the annotated result type
    of a method of ``module`` or of one of its submodules."""
    by_type = {m._jit_class.qualname: m for m in module.modules()
               if isinstance(m, RecursiveScriptModule)}

    def result(type_, name):
        from ember.jit._code_ssa import Unmodelled
        from ember.jit._script_graph import _result_type
        m = by_type.get(type_)
        src = m._jit_class.method_sources.get(name) if m is not None else None
        if src is None:
            raise Unmodelled(f"graph: method {name} of {type_}")
        return _result_type(src)
    return result


class _CodeGraph:
    """``.graph``'s printed text: PyTorch's IR, or the code where ember prints no IR."""

    def __init__(self, code):
        self.code = code

    def __str__(self):
        return self.code

    __repr__ = __str__


class ScriptMethod:
    """A script module's ``forward`` as PyTorch's ``ScriptMethod``: calling it runs the
    module's forward; ``graph``, ``inlined_graph`` and ``code`` are the module's."""

    def __init__(self, module, name):
        self.owner, self.name = module, name

    def __call__(self, *args, **kwargs):
        return self.owner._forward(*args, **kwargs)

    @property
    def __signature__(self):
        """The parameters of the TorchScript ``def`` after ``self``."""
        import inspect
        src = self.owner._jit_class.method_sources.get(self.name)
        if src is None:
            return inspect.Signature([inspect.Parameter(
                "args", inspect.Parameter.VAR_POSITIONAL)])
        args = ast.parse(textwrap.dedent(src)).body[0].args.args[1:]
        return inspect.Signature([inspect.Parameter(
            a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in args])

    @property
    def graph(self):
        return self.owner.graph

    @property
    def inlined_graph(self):
        return self.owner.inlined_graph

    @property
    def code(self):
        return self.owner.code

    def __repr__(self):
        return f"<ember.jit.ScriptMethod {self.owner.qualified_name}.{self.name}>"


class ScriptFunction:
    """A free TorchScript function (``jit.script`` of a function, archive helpers)."""

    def __init__(self, fn, qualname, source, cu=None):
        self._fn, self.qualified_name, self._source, self._cu = fn, qualname, source, cu
        # compiled by ``jit.script``: see ScriptClass.scripted
        self._scripted = False
        self._calls = {}
        self._graph = None   # a traced function's IR, set by the trace

    @property
    def graph(self):
        """The function's IR as PyTorch prints it (its code where ember prints none)."""
        if self._graph is not None:
            return self._graph
        text = _script_graph(self._source) if self._scripted else None
        return _CodeGraph(text.rstrip("\n") + "\n" if text else self.code)

    @graph.setter
    def graph(self, g):
        self._graph = g

    @property
    def inlined_graph(self):
        return self.graph

    @inlined_graph.setter
    def inlined_graph(self, g):
        self._graph = g

    @property
    def name(self):
        return self.qualified_name.rsplit(".", 1)[-1]

    @property
    def code(self):
        return (printed_code(self._source) if self._scripted else self._source) + "\n"

    def __call__(self, *args, **kwargs):
        if self._scripted:
            from ember.jit._diff_graph import run_scripted
            return run_scripted(self._calls, "call", self._fn, args, kwargs)
        return self._fn(*args, **kwargs)

    def save(self, f, _extra_files=None):
        raise NotImplementedError("saving a ScriptFunction on its own is not supported by "
                                  "ember; wrap it in a module's forward and script that")

    def __repr__(self):
        return f"<ember.jit.ScriptFunction object {self.qualified_name}>"


# ----- building script modules from an eager module + TorchScript source -------------------
_MANGLE = itertools.count()
_TYPES = {}  # base qualified name -> [(type key, qualified name)]


# the nn module classes ember defines in a file of another name than torch's (torch's
# ``BatchNorm2d`` is in ``torch.nn.modules.batchnorm``): their qualified names are torch's
_TORCH_MODULE_FILES = {
    **dict.fromkeys(("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d",
                     "LazyBatchNorm2d", "LazyBatchNorm3d", "SyncBatchNorm"), "batchnorm"),
    **dict.fromkeys(("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
                     "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"),
                    "instancenorm"),
    **dict.fromkeys(("LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
                     "LazyConvTranspose2d", "LazyConvTranspose3d"), "conv"),
    **dict.fromkeys(("FractionalMaxPool2d", "FractionalMaxPool3d"), "pooling"),
    **dict.fromkeys(("Fold", "Unfold"), "fold"),
    "ChannelShuffle": "channelshuffle", "Container": "container",
    "CrossMapLRN2d": "normalization", "LazyLinear": "linear",
    "MultiheadAttention": "activation", "NonDynamicallyQuantizableLinear": "linear",
}


def qualified_name(cls):
    """PyTorch's class naming: ``__torch__.<module path>.<class>``.

    ``__main__`` is dropped (``__torch__.Net``) and ember's own modules take torch's
    names (``ember.nn.modules.linear.Linear`` -> ``__torch__.torch.nn.modules.linear.Linear``).
    """
    mod = cls.__module__
    if mod == "__main__":
        path = ""
    elif mod.startswith("ember.nn.modules.") and cls.__name__ in _TORCH_MODULE_FILES:
        path = "torch.nn.modules." + _TORCH_MODULE_FILES[cls.__name__]
    elif mod == "ember" or mod.startswith("ember."):
        path = "torch" + mod[len("ember"):]
    else:
        path = mod
    # the class's own name, as PyTorch's qualified names use (a nested or local class
    # of the same name as another gets a ``___torch_mangle_N`` prefix, see _mangled)
    name = cls.__name__
    return "__torch__." + (path + "." if path else "") + name


def _mangled(base, key):
    """``base`` for the first distinct class of that name, else ``...___torch_mangle_N.X``."""
    seen = _TYPES.setdefault(base, [])
    for k, q in seen:
        if k == key:
            return q
    if not seen:
        q = base
    else:
        prefix, name = base.rsplit(".", 1)
        q = f"{prefix}.___torch_mangle_{next(_MANGLE)}.{name}"
    seen.append((key, q))
    return q


def _infer_type(value):
    from ember._tensor import Tensor
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, Tensor):
        return "Tensor"
    if value is None:
        return "NoneType"
    if isinstance(value, (list, tuple)) and value:
        inner = [_infer_type(v) for v in value]
        if isinstance(value, tuple):
            return f"Tuple[{', '.join(inner)}]"
        if len(set(inner)) == 1:
            return f"List[{inner[0]}]"
    if isinstance(value, list):
        return "List[Tensor]"
    raise TypeError(f"cannot infer a TorchScript type for attribute value {value!r}; "
                    "pass its type in attributes=")


def _parse_def(source, where):
    tree = ast.parse(textwrap.dedent(source), filename=where)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(tree.body) != 1 or len(defs) != 1:
        raise ScriptError(f"{where}: expected exactly one def in the method source")
    return defs[0]


def create_script_module(module, methods, *, functions=None, attributes=None, constants=(),
                         qualnames=None):
    """Wrap an eager module tree as a :class:`RecursiveScriptModule` running TorchScript.

    Args:
        module: the eager ``nn.Module``. Every module in its tree gets a script twin
            whose ``_parameters``/``_buffers`` dicts *are* the eager module's (shared).
        methods: ``{submodule path: {method name: source}}``; path ``""`` is the root,
            others as in ``named_modules()`` (``"seq.0"``). A source is one TorchScript
            ``def``: ``def forward(self, x: Tensor) -> Tensor: ...`` (``self`` unannotated).
        functions: ``{qualified name: source}`` for free functions the methods call,
            e.g. ``"__torch__.torch.nn.functional.relu"``.
        attributes: ``{path: {name: type string or None}}``: plain attributes the code
            reads (copied from the eager module; ``None`` infers the type from the value).
            ``training`` is always declared.
        constants: tensors the code reads as ``CONSTANTS.c0``, ``CONSTANTS.c1``, ...
        qualnames: ``{path: qualified name}`` to override :func:`qualified_name`.

    Returns the root :class:`RecursiveScriptModule`.
    """
    from ember.jit._interpreter import CompilationUnit, compile_function
    cu = CompilationUnit(constants)
    for qual, src in (functions or {}).items():
        fdef = _parse_def(src, f"<{qual}>")
        cu.functions[qual] = compile_function(cu, fdef, f"<{qual}>")
        cu.function_sources[qual] = _dedented(src)
    methods = methods or {}
    attributes = attributes or {}
    qualnames = qualnames or {}
    memo = {}

    reused = set()

    def build(mod, path):
        if id(mod) in memo:
            return memo[id(mod)]
        if isinstance(mod, RecursiveScriptModule) and path:
            # a compiled TorchScript module inside the tree (a trace through scripted
            # code): kept as it is, its functions joining this compilation unit
            _adopt(cu, mod)
            memo[id(mod)] = mod
            reused.add(id(mod))
            return mod
        children = {}
        for name, child in mod._modules.items():
            if child is not None:
                children[name] = build(child, f"{path}.{name}" if path else name)
        attrs = {"training": mod.training}
        types = {"training": "bool"}
        for name, t in (attributes.get(path) or {}).items():
            value = getattr(mod, name)
            attrs[name] = value
            types[name] = t or _infer_type(value)
        for name, child in children.items():
            types[name] = child._jit_class.qualname
        srcs = {n: _dedented(s) for n, s in (methods.get(path) or {}).items()}
        base = qualnames.get(path) or qualified_name(type(mod))
        key = (tuple(sorted(srcs.items())), tuple(mod._parameters), tuple(mod._buffers),
               tuple(types.items()))
        cls = ScriptClass(_mangled(base, key) if path not in qualnames else base)
        cls.parameters = list(mod._parameters)
        cls.buffers = list(mod._buffers)
        cls.attributes = dict(types)
        for n, s in srcs.items():
            where = f"<{cls.qualname}.{n}>"
            cls.methods[n] = compile_function(cu, _parse_def(s, where), where, method_of=cls,
                                              lines=textwrap.dedent(s).splitlines())
            cls.method_sources[n] = s
        sm = RecursiveScriptModule(cls, mod._parameters, mod._buffers, children, attrs,
                                   mod._non_persistent_buffers_set)
        memo[id(mod)] = sm
        return sm
    root = build(module, "")
    root.__dict__["_jit_cu"] = cu
    root.__dict__["_jit_reused"] = reused
    cu.warn_missing(f"the TorchScript code of {type(module).__name__}")
    return root


def _adopt(cu, sm):
    """Join the free functions of ``sm``'s compilation unit (and its submodules') to
    ``cu``, so that an archive of the tree writes them."""
    for sub in sm.modules():
        other = sub.__dict__.get("_jit_cu")
        if other is None or other is cu:
            continue
        if other.constants:
            raise NotImplementedError("jit: a TorchScript submodule whose code reads "
                                      "CONSTANTS cannot be part of another module's archive")
        for qual, fn in other.functions.items():
            cu.functions.setdefault(qual, fn)
        for qual, src in other.function_sources.items():
            cu.function_sources.setdefault(qual, src)
        for qual, c in other.classes.items():
            cu.classes.setdefault(qual, c)


def create_script_function(source, qualname, *, functions=None, constants=()):
    """A :class:`ScriptFunction` running one TorchScript ``def`` (plus helper functions)."""
    from ember.jit._interpreter import CompilationUnit, compile_function
    cu = CompilationUnit(constants)
    for qual, src in {**(functions or {}), qualname: source}.items():
        fdef = _parse_def(src, f"<{qual}>")
        cu.functions[qual] = compile_function(cu, fdef, f"<{qual}>")
        cu.function_sources[qual] = _dedented(src)
    cu.warn_missing(f"the TorchScript function {qualname}")
    return ScriptFunction(cu.functions[qualname], qualname, cu.function_sources[qualname], cu)


_SELF_RE = re.compile(r"def\s+\w+\(\s*(\w+)\s*(?=[,)])")


def _dedented(src):
    """``src`` dedented, keeping the user's line of each of its lines where the
    frontend recorded them (see ember.jit._script_graph.SourceText)."""
    text = textwrap.dedent(src).rstrip()
    if getattr(src, "lines", None) is None:
        return text
    from ember.jit._script_graph import SourceText
    return SourceText(text, src.file, src.lines)


def annotate_self(source, qualname):
    """``def forward(self, ...`` -> ``def forward(self: <qualname>, ...`` for writing."""
    return _SELF_RE.sub(lambda m: m.group(0) + f": {qualname}", source, count=1)
