"""``torch._dynamo.config``: reads and writes go to ``ember.compile``'s settings
(``cache_size_limit`` is honoured); the knobs of dynamo's own tracer that ember has no
counterpart for (``suppress_errors``, ``verbose``...) are kept as plain values."""
import sys
import types

from ember._compile import config as _config

# dynamo's defaults, for programs that read them before setting them
suppress_errors = False
verbose = False
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
optimize_ddp = True
automatic_dynamic_shapes = True
recompile_limit = 8
accumulated_recompile_limit = 256


class _ConfigModule(types.ModuleType):
    def __getattr__(self, name):
        return getattr(_config, name)

    def __setattr__(self, name, value):
        if hasattr(type(_config), name) or name in _config.__dict__:
            setattr(_config, name, value)
        else:
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _ConfigModule
