"""``torch._dynamo``: the names libraries import from dynamo, answered for
``ember.compile`` (see docs/compile.md).

ember captures programs by running them (``ember._compile``), not by rewriting
Python bytecode, so dynamo's decorators map onto it (``disable`` and
``allow_in_graph`` return the function, ``optimize`` is ``ember.compile``), and
``eval_frame.OptimizedModule`` is the class ``ember.compile`` returns for a module.
What only a bytecode tracer can do (``explain``, ``export``, graph-break reports)
raises RuntimeError as torch does where dynamo is unsupported.
"""
from ember._dynamo import config, eval_frame  # noqa: F401
from ember._dynamo.eval_frame import (  # noqa: F401
    OptimizedModule,
    explain,
    export,
    is_dynamo_supported,
    is_inductor_supported,
    optimize,
    optimize_assert,
)
from ember.compiler import (  # noqa: F401
    allow_in_graph,
    assume_constant_result,
    disable,
    is_compiling,
    list_backends,
    reset,
    set_stance,
    substitute_in_graph,
)

__all__ = ["allow_in_graph", "assume_constant_result", "disable", "is_compiling",
           "list_backends", "reset", "set_stance", "substitute_in_graph", "config",
           "eval_frame", "OptimizedModule", "explain", "export", "optimize",
           "optimize_assert", "is_dynamo_supported", "is_inductor_supported",
           "mark_dynamic", "maybe_mark_dynamic", "mark_static", "mark_static_address",
           "graph_break", "disallow_in_graph", "forbid_in_graph", "run"]


def _no_dynamo(what):
    return RuntimeError(f"torch._dynamo.{what} needs dynamo's bytecode tracer, which "
                        "ember does not have (ember.compile captures by running the "
                        "program; see docs/compile.md)")


def mark_dynamic(t, index, *, min=None, max=None, specialize_on=None):
    """Hint that dimension ``index`` of ``t`` varies between calls: ember's compiled
    plans guard on shapes and recapture when one changes, so the hint is not needed."""


maybe_mark_dynamic = mark_dynamic


def mark_static(t, index=None):
    """Hint that a dimension never changes; ember's plans specialize on every shape."""


def mark_static_address(t, guard=True):
    """Hint that ``t`` keeps its storage between calls (for CUDA graphs, which ember
    does not record)."""


def graph_break(msg=""):
    """Split the captured graph here: a dynamo-only instruction."""
    raise _no_dynamo("graph_break")


def disallow_in_graph(fn):
    """Keep ``fn`` out of captured graphs: a dynamo-only instruction."""
    raise _no_dynamo("disallow_in_graph")


forbid_in_graph = disallow_in_graph


def run(fn=None):
    """Run ``fn`` without compiling it (what ``disable`` does in ember)."""
    return disable(fn)
