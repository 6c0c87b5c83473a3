"""ember.nn: neural network layers (PyTorch's ``torch.nn``)."""
from ember.nn import functional, init, parallel, utils  # noqa: F401
from ember.nn.modules import *  # noqa: F401,F403
from ember.nn.modules import __all__ as _modules_all
from ember.nn.modules.module import (  # noqa: F401
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from ember.nn.parallel import DataParallel  # noqa: F401
from ember.nn.parameter import Buffer, Parameter  # noqa: F401

__all__ = _modules_all + ["Parameter", "Buffer", "functional", "init", "utils", "parallel",
                          "DataParallel"]


def __getattr__(name):
    if name == "attention":  # torch.nn.attention, reachable after `import torch`
        import importlib
        return importlib.import_module("ember.nn.attention")
    # a PyTorch program asking for a layer ember lacks gets a message saying so
    from ember.compat import missing_attribute
    raise missing_attribute(__name__, name)
from ember.nn._factory_kwargs import factory_kwargs  # noqa: E402,F401
from ember.nn.parameter import UninitializedBuffer, UninitializedParameter  # noqa: E402,F401
