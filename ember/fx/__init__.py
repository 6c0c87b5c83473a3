"""``torch.fx``: the names libraries use at import time.

``wrap`` (as a call with a function name or as a decorator) marks a function to be
kept as one call by fx's symbolic tracer; ember has no symbolic tracer, so the mark
changes nothing when the function runs and the function is returned. The tracer
itself and its graph classes (``symbolic_trace``, ``GraphModule``, ``Graph``,
``Tracer``, ``Proxy``...) exist as names (``isinstance`` checks work: nothing is ever
one of them) and raise NotImplementedError naming themselves when used; ember's own
graph capture is ``ember.jit.trace`` / ``ember.export.export``.
"""
import inspect

__all__ = ["wrap", "symbolic_trace", "GraphModule", "Graph", "Tracer", "Proxy", "Node",
           "Interpreter", "Transformer", "has_side_effect", "replace_pattern"]

_wrapped = set()  # the names fx's tracer would keep as leaf calls


def _missing(what):
    return NotImplementedError(f"torch.fx.{what} is not implemented in ember (ember has "
                               "no symbolic tracer; use ember.jit.trace or "
                               "ember.export.export to capture a graph)")


def wrap(fn_or_name):
    """Mark a global function (by name, or as a decorator, at the top level of a
    module) as a leaf for symbolic tracing; returns its argument."""
    caller = inspect.currentframe().f_back
    if caller.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    if callable(fn_or_name):
        _wrapped.add(getattr(fn_or_name, "__qualname__", repr(fn_or_name)))
        return fn_or_name
    if not isinstance(fn_or_name, str):
        raise RuntimeError("Unsupported type for global function! Must be either a "
                           "callable or string name")
    _wrapped.add(fn_or_name)
    return fn_or_name


def has_side_effect(fn):
    """Mark ``fn`` as having side effects (kept by fx's dead code elimination)."""
    return fn


def symbolic_trace(root, concrete_args=None):
    """fx's symbolic tracer: not in ember."""
    raise _missing("symbolic_trace")


def replace_pattern(gm, pattern, replacement):
    """fx's subgraph rewriter: not in ember."""
    raise _missing("replace_pattern")


def _placeholder(name):
    def __init__(self, *args, **kwargs):
        raise _missing(name)
    return type(name, (), {"__init__": __init__, "__module__": "ember.fx",
                           "__doc__": f"torch.fx.{name}: not in ember (raises when made)."})


Graph = _placeholder("Graph")
Tracer = _placeholder("Tracer")
Proxy = _placeholder("Proxy")
Node = _placeholder("Node")
Interpreter = _placeholder("Interpreter")
Transformer = _placeholder("Transformer")


def _graph_module_init(self, *args, **kwargs):
    raise _missing("GraphModule")


def __getattr__(name):
    if name == "GraphModule":  # a Module subclass, so subclassing it works
        from ember.nn.modules.module import Module
        cls = type("GraphModule", (Module,), {"__init__": _graph_module_init,
                                              "__module__": "ember.fx"})
        globals()["GraphModule"] = cls
        return cls
    from ember.compat import missing_attribute
    raise missing_attribute(__name__, name)
