"""functorch's ``make_functional`` / ``make_functional_with_buffers`` (deprecated in torch
2.0 in favour of ``torch.func.functional_call``, still shipped): a model as a function of
its parameters (and buffers), built on ``ember.func.functional_call``."""
import copy
import warnings

from ember.nn.modules.module import Module

__all__ = ["make_functional", "make_functional_with_buffers", "FunctionalModule",
           "FunctionalModuleWithBuffers"]


def _deprecated(name):
    warnings.warn(
        f"We've integrated functorch into PyTorch. As the final step of the integration, "
        f"`functorch.{name}` is deprecated as of PyTorch 2.0 and will be deleted in a future "
        "version of PyTorch >= 2.3. Please use `torch.func.functional_call` instead; see the "
        "PyTorch 2.0 release notes and/or the `torch.func` migration guide for more details "
        "https://pytorch.org/docs/main/func.migrating.html", FutureWarning, stacklevel=3)


def _state(model, kind, detach):
    items = list(getattr(model, f"named_{kind}")())
    values = tuple(v.detach() if detach else v for _, v in items)
    return [n for n, _ in items], values


class FunctionalModule(Module):
    """``fmodel(params, *args, **kwargs)``: the copied model run with ``params``."""

    def __init__(self, stateless, param_names):
        super().__init__()
        self.stateless_model = stateless
        self.param_names = param_names

    def forward(self, params, *args, **kwargs):
        from ember.func import functional_call
        if len(params) != len(self.param_names):
            raise ValueError(f"Expected {len(self.param_names)} parameters, got "
                             f"{len(params)}")
        return functional_call(self.stateless_model, dict(zip(self.param_names, params)),
                               args, kwargs)


class FunctionalModuleWithBuffers(Module):
    """``fmodel(params, buffers, *args, **kwargs)``: the copied model run with them."""

    def __init__(self, stateless, param_names, buffer_names):
        super().__init__()
        self.stateless_model = stateless
        self.param_names = param_names
        self.buffer_names = buffer_names

    def forward(self, params, buffers, *args, **kwargs):
        from ember.func import functional_call
        state = dict(zip(self.param_names, params))
        state.update(zip(self.buffer_names, buffers))
        return functional_call(self.stateless_model, state, args, kwargs)


def make_functional(model, disable_autograd_tracking=False):
    """``(fmodel, params)``: ``fmodel(params, *args)`` is ``model(*args)`` with ``params``
    (a tuple of the model's parameters, detached with ``disable_autograd_tracking``)."""
    _deprecated("make_functional")
    if not isinstance(model, Module):
        raise RuntimeError(f"Expected an nn.Module, got {type(model)}")
    if len(list(model.buffers())) > 0:
        raise RuntimeError("make_functional(model): `model` has buffers. Please use "
                           "make_functional_with_buffers(model) instead.")
    names, params = _state(model, "parameters", disable_autograd_tracking)
    return FunctionalModule(copy.deepcopy(model), names), params


def make_functional_with_buffers(model, disable_autograd_tracking=False):
    """``(fmodel, params, buffers)``: ``fmodel(params, buffers, *args)`` is
    ``model(*args)`` with the given parameters and buffers."""
    _deprecated("make_functional_with_buffers")
    if not isinstance(model, Module):
        raise RuntimeError(f"Expected an nn.Module, got {type(model)}")
    names, params = _state(model, "parameters", disable_autograd_tracking)
    bnames, buffers = _state(model, "buffers", False)
    return FunctionalModuleWithBuffers(copy.deepcopy(model), names, bnames), params, buffers
