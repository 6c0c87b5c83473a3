"""``ember.jit``: TorchScript in PyTorch's own archive format, both ways.

``jit.load`` runs archives that ``torch.jit.save`` wrote (no torch needed) through
ember's safe TorchScript interpreter; ``jit.save`` / ``ScriptModule.save`` write
archives that ``torch.jit.load`` (and libtorch) read. See docs/jit.md.
"""
from ember.jit._errors import ArchiveError, ScriptError, ScriptSafetyError
from ember.jit._module import RecursiveScriptModule, ScriptFunction, ScriptModule
from ember.jit._serialize import freeze, load, optimize_for_inference, save

__all__ = ["ScriptModule", "RecursiveScriptModule", "ScriptFunction", "load", "save",
           "freeze", "optimize_for_inference", "ArchiveError", "ScriptError",
           "ScriptSafetyError"]
from ember._graph.capture import TracerWarning, is_tracing  # noqa: E402
from ember.jit._trace import TracingCheckError, trace, trace_module  # noqa: E402

__all__ += ["trace", "trace_module", "is_tracing", "TracerWarning", "TracingCheckError"]
from ember.jit._frontend import FrontendError, NotSupportedError  # noqa: E402
from ember.jit._script import (  # noqa: E402
    Final,
    annotate,
    export,
    ignore,
    is_scripting,
    script,
    unused,
)

__all__ += ["script", "ignore", "unused", "export", "is_scripting", "annotate", "Final",
            "FrontendError", "NotSupportedError"]
from ember.jit._eager_api import (  # noqa: E402
    Attribute,
    Future,
    enable_onednn_fusion,
    fork,
    interface,
    isinstance,  # noqa: F401  (not in __all__: a star import would shadow the builtin)
    onednn_fusion_enabled,
    script_if_tracing,
    set_fusion_strategy,
    strict_fusion,
    wait,
)

__all__ += ["Attribute", "Future", "fork", "wait", "interface",
            "script_if_tracing", "set_fusion_strategy", "enable_onednn_fusion",
            "onednn_fusion_enabled", "strict_fusion"]

# the aten function each captured node is written as (TensorBoard's add_graph names nodes so)
from ember.jit._codegen import aten_call_names  # noqa: E402,F401
