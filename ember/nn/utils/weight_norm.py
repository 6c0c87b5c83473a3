"""Legacy ``torch.nn.utils.weight_norm`` / ``remove_weight_norm``: ``<name>_g`` and
``<name>_v`` parameters and a forward pre-hook that recomputes ``<name>`` (PyTorch
deprecates this in favour of ``parametrizations.weight_norm``; both exist here)."""
import warnings

from ember import _core as ember
from ember.nn.parameter import Parameter
from ember.nn.utils._lazy import refuse_uninitialized

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


class WeightNorm:
    """The forward pre-hook that rebuilds ``module.<name>`` from ``g`` and ``v``."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return ember._weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module, name, dim):
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning,
                      stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        refuse_uninitialized([weight], "weight_norm")
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(ember.norm_except_dim(weight, 2, fn.dim)
                                                         .detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Split ``module.<name>`` into a magnitude ``<name>_g`` and a direction
    ``<name>_v``; ``<name>`` is recomputed as ``g * v / ||v||`` before every forward."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo ``weight_norm``: ``<name>`` becomes one parameter again."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
