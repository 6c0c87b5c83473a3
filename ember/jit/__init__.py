"""ember.jit: trace (and, with the sibling parts, script, save and load) models in
PyTorch's TorchScript terms."""
from ember.jit._capture import TracerWarning, is_tracing  # noqa: F401
from ember.jit._trace import TracingCheckError, trace, trace_module  # noqa: F401
