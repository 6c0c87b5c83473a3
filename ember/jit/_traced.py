"""What ``jit.trace`` returns: a module (or function) that runs the traced graph.

The traced module shares the original module's parameters, buffers and submodules
(``named_parameters``, ``state_dict``, ``train()``/``eval()`` are the original's, as
PyTorch's ``TracedModule``), and exposes ``.graph``, ``.inlined_graph`` and ``.code``.
"""
from ember.nn.modules.module import Module

__all__ = ["TracedModule", "make_traced_module", "make_traced_function"]


def _param_slots(mod, graph):
    """[(qualified name, owning module, attribute)] for the graph's parameters."""
    slots = []
    for qn in graph.params:
        owner = mod
        *path, attr = qn.split(".")
        for p in path:
            owner = getattr(owner, p)
        slots.append((qn, owner, attr))
    return slots


def _params_of(slots):
    out = {}
    for qn, owner, attr in slots:
        t = owner._parameters.get(attr)
        if t is None:
            t = owner._buffers.get(attr)
        out[qn] = t
    return out


class TracedModule(Module):
    """A module whose ``forward`` runs the graph traced from ``original``."""

    def __init__(self, original, graphs):
        super().__init__()
        # the original's parameter, buffer and submodule dicts themselves: shared, as
        # PyTorch's traced module shares the tensors
        self.__dict__["_parameters"] = original._parameters
        self.__dict__["_buffers"] = original._buffers
        self.__dict__["_modules"] = original._modules
        self.__dict__["_non_persistent_buffers_set"] = getattr(
            original, "_non_persistent_buffers_set", set())
        self.training = original.training
        self.__dict__["_graphs"] = graphs
        self.__dict__["_slots"] = {k: _param_slots(self, g) for k, g in graphs.items()}
        self.__dict__["original_name"] = type(original).__name__
        for name in graphs:
            if name != "forward":
                self.__dict__[name] = self._method(name)

    def _method(self, name):
        def call(*args):
            return self._graphs[name].run(*args, params=_params_of(self._slots[name]))
        call.__name__ = name
        return call

    def forward(self, *args):
        return self._graphs["forward"].run(*args, params=_params_of(self._slots["forward"]))

    @property
    def graph(self):
        """The traced IR of ``forward`` (printable like torch's ``graph``)."""
        return self._graphs["forward"]

    @property
    def inlined_graph(self):
        """The same IR: ember's trace records one flat graph, submodules inlined."""
        return self._graphs["forward"]

    @property
    def code(self):
        """``forward`` as TorchScript source (raises naming an op without a spelling)."""
        from ember.jit._codegen import forward_source
        return forward_source(self._graphs["forward"])

    def save(self, f, _extra_files=None):
        """Raises: some op of this trace has no TorchScript spelling (named)."""
        why = self.__dict__.get("_why")
        raise NotImplementedError(f"jit: this trace cannot be saved as TorchScript: {why}")

    def _get_name(self):
        return self.original_name


def make_traced_function(fn, graph, module=None):
    """The traced function: a ``ScriptFunction`` (jit-load's, compiled from the
    generated TorchScript) whose calls replay the IR; ``.graph`` is the IR."""
    from ember.jit._codegen import function_source
    from ember.jit._errors import ScriptSafetyError
    from ember.jit._module import ScriptFunction, create_script_function
    name = getattr(fn, "__name__", "fn")
    qualname = "__torch__." + ("".join(c if c.isalnum() else "_" for c in name) or "fn")
    try:
        src = function_source(graph, qualname.rsplit(".", 1)[1])
        sf = create_script_function(src, qualname,
                                    constants=[c.data for c in graph.constants])
    except NotImplementedError as e:
        sf = ScriptFunction(None, qualname, f"# not expressible in TorchScript: {e}")
    except ScriptSafetyError:
        # TorchScript that ember's loader refuses to run (``as_strided``: strides a file
        # could choose): the code stands as written, the calls replay the IR
        sf = ScriptFunction(None, qualname, src)
    sf.__class__ = _traced_function_class()
    sf.graph = sf.inlined_graph = graph
    sf._jit_slots = _param_slots(module, graph) if module is not None else []
    return sf


_TRACED_FUNCTION_CLASS = []


def _traced_function_class():
    if not _TRACED_FUNCTION_CLASS:
        from ember.jit._module import ScriptFunction

        class TracedFunction(ScriptFunction):
            """A traced function: calling it replays the IR."""

            def __call__(self, *args):
                return self.graph.run(*args, params=_params_of(self._jit_slots))
        TracedFunction.__module__ = ScriptFunction.__module__
        _TRACED_FUNCTION_CLASS.append(TracedFunction)
    return _TRACED_FUNCTION_CLASS[0]


def make_traced_module(mod, graphs):
    """The traced module for ``mod``: a ``RecursiveScriptModule`` (jit-load's) running
    the generated TorchScript, so what runs before ``save`` is what runs after
    ``torch.jit.load``/``ember.jit.load``. When an op of the trace has no TorchScript
    spelling yet, a :class:`TracedModule` replaying the IR, whose ``code``/``save``
    raise ``NotImplementedError`` naming that op."""
    from ember.jit._codegen import module_sources
    from ember.jit._errors import ScriptError, ScriptSafetyError
    from ember.jit._module import create_script_module
    try:
        methods, constants, sub_graphs = module_sources(graphs)
        sm = create_script_module(mod, methods, constants=constants)
    except (NotImplementedError, ScriptError, ScriptSafetyError) as e:
        # (ScriptSafetyError: TorchScript ember's loader refuses to run, ``as_strided``)
        tm = TracedModule(mod, graphs)
        tm.__dict__["_why"] = e
        return tm
    for name, g in graphs.items():
        # .graph prints as PyTorch's; .inlined_graph is the flat IR, printed as it is
        sm._jit_graphs[name] = _printed(g, sm, None) if name == "forward" else g
        sm._jit_inlined_graphs[name] = g
    sub_class = _traced_submodule_class()
    kept = {id(m) for r in _reused(sm) for m in r.modules()}
    for path, sub in sm.named_modules():
        if path and sub.__class__ is sub_class.__base__ and id(sub) not in kept:
            sub.__class__ = sub_class
    for (path, method), g in sub_graphs.items():
        sub = sm.get_submodule(path)
        sub._jit_graphs[method] = _printed(g, sub, path, sm) if method == "forward" else g
        sub._jit_inlined_graphs[method] = g
    sm.__class__ = _traced_script_class()
    sm.__dict__["_jit_slots"] = _param_slots(sm, graphs["forward"])
    return sm


def _reused(sm):
    """The TorchScript modules a trace kept as they were (its scripted parts)."""
    ids = sm.__dict__.get("_jit_reused", ())
    return [m for m in sm.modules() if id(m) in ids]


def _traced_name(self):
    return self.original_name


def _printed(g, module, path, root=None):
    """The IR ``g`` of ``module``'s traced ``forward`` (a shallow copy: the same nodes)
    that prints as PyTorch prints a traced graph; ``path``: None for the traced module
    itself, else the submodule's path in ``root``."""
    import copy

    from ember.jit._graph_text import graph_text

    def calls():
        # the scope chain: the modules whose calls led to this one (a ModuleList holding
        # it is never called, so it is no link)
        parts = path.split(".")
        prefixes = [".".join(parts[:i + 1]) for i in range(len(parts))]
        return [p for p in prefixes[:-1] if "forward" in
                root.get_submodule(p)._jit_class.methods] + [path]
    pg = copy.copy(g)
    pg.printer = lambda: graph_text(module, g, module.code, path,
                                    calls() if path is not None else None)
    return pg


def _traced_repr(self):
    if self._modules:
        return Module.__repr__(self)
    return f"{self._get_name()}(original_name={self.original_name})"


_TRACED_SUB_CLASS = []


def _traced_submodule_class():
    """The submodules of a traced module: they print by their class name and have the
    ``.code``/``.graph`` of their calls in the trace; like PyTorch's, they cannot be
    called on their own (the root's code calls their methods)."""
    if not _TRACED_SUB_CLASS:
        from ember.jit._module import RecursiveScriptModule

        class TracedSubmodule(RecursiveScriptModule):
            def forward(self, *args, **kwargs):
                raise RuntimeError("Trace submodules cannot be called.")

            # a submodule the trace never called has no forward, as in PyTorch
            @property
            def code(self):
                if "forward" not in self._jit_class.methods:
                    raise AttributeError("'RecursiveScriptModule' object has no attribute "
                                         "'code' (the trace never called this submodule)")
                return RecursiveScriptModule.code.fget(self)

            @property
            def graph(self):
                if "forward" not in self._jit_class.methods:
                    raise RuntimeError("Method 'forward' is not defined.")
                return RecursiveScriptModule.graph.fget(self)

            _get_name = _traced_name
            __repr__ = _traced_repr
        TracedSubmodule.__module__ = RecursiveScriptModule.__module__
        _TRACED_SUB_CLASS.append(TracedSubmodule)
    return _TRACED_SUB_CLASS[0]


_TRACED_SCRIPT_CLASS = []


def _traced_script_class():
    """``RecursiveScriptModule`` whose ``forward`` replays the IR (measured faster than
    interpreting the same code: docs/jit.md), with ``code``/``save`` unchanged."""
    if not _TRACED_SCRIPT_CLASS:
        from ember.jit._module import RecursiveScriptModule

        class TracedScriptModule(RecursiveScriptModule):
            def forward(self, *args, **kwargs):
                if kwargs:
                    return super().forward(*args, **kwargs)
                return self._jit_graphs["forward"].run(
                    *args, params=_params_of(self.__dict__["_jit_slots"]))

            _get_name = _traced_name
            __repr__ = _traced_repr
        TracedScriptModule.__module__ = RecursiveScriptModule.__module__
        _TRACED_SCRIPT_CLASS.append(TracedScriptModule)
    return _TRACED_SCRIPT_CLASS[0]
