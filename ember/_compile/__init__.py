"""``ember.compile``: the forward captured once by jit's capture layer and replayed
from the IR while guards hold (see docs/compile.md)."""
from ember._compile._capture import Unsupported
from ember._compile._compiled import CompiledFunction, OptimizedModule, compile, config

__all__ = ["compile", "CompiledFunction", "OptimizedModule", "Unsupported", "config"]
