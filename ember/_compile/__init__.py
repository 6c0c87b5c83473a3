"""``ember.compile``: the forward (and a training step's backward and optimizer
update) captured once by jit's capture layer and run as a plan of array kernels while
guards hold (see docs/compile.md)."""
from ember._compile._capture import Unsupported
from ember._compile._compiled import CompiledFunction, OptimizedModule, compile, config

__all__ = ["compile", "CompiledFunction", "OptimizedModule", "Unsupported", "config"]
