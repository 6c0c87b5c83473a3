"""Sequential's run where nothing records or watches it (grad mode off, no mode on the
stack -- profiler, TorchFunctionMode, graph capture -- and no hooks): a Linear is run
straight on its arrays, and a ReLU right after it rectifies the Linear's fresh product
in place. The values are those of the module calls (the same product, bias add and
``max(x, 0)``); what is saved is the Python of two module calls and a second
activation-sized array, which nothing but the ReLU could have seen."""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active
from ember.autograd.grad_mode import state as _grad_state

_types = []  # (Linear, ReLU, the linear kernel, relu's array kernel), on first use


def _load():
    from ember.nn.modules.activation import ReLU
    from ember.nn.modules.linear import Linear
    from ember.ops.activations import _relu_array
    from ember.ops.nn_fused import _Linear
    _types[:] = [Linear, ReLU, _Linear.forward, _relu_array]


def _plain(module, cls):
    """Whether ``module`` is exactly ``cls``, unwatched and with the class's forward."""
    return type(module) is cls and not (
        module._forward_pre_hooks or module._forward_hooks or module._backward_hooks
        or module._backward_pre_hooks or "forward" in module.__dict__)


def _linear_array(module, input, kernel):
    """The Linear's output array for ``input``, or None where the module call must run
    (any case but a floating NumPy input of 2 or more dims and parameters of its dtype:
    the module call raises the errors and covers the rest)."""
    x = input._data
    w = module.weight
    b = module.bias
    if type(x) is not np.ndarray or x.ndim < 2 or not isinstance(w, Tensor):
        return None
    wd = w._data
    dt = x.dtype
    if type(wd) is not np.ndarray or wd.ndim != 2 or wd.dtype != dt or dt.kind != "f" \
            or x.shape[-1] != wd.shape[1] or x.shape[-1] != module.in_features:
        return None
    if b is not None:
        if not isinstance(b, Tensor):
            return None
        b = b._data
        if type(b) is not np.ndarray or b.dtype != dt or b.shape != (wd.shape[0],):
            return None
    return kernel(None, x, wd, b)


def linear(module, input):
    """``Linear.forward``'s output where nothing records or watches, else None."""
    if type(input) is not Tensor or _grad_state.grad_enabled or _mode_active[0]:
        return None
    if not _types:
        _load()
    y = _linear_array(module, input, _types[2])
    return None if y is None else _make(y)


def run(modules, input):
    """``input`` through ``modules`` (Sequential's ``_modules``) in turn."""
    from ember.nn.modules.module import _any_global_hook
    if not _types:
        _load()
    linear, relu, kernel, relu_array = _types
    mods = list(modules.values())
    n = len(mods)
    i = 0
    while i < n:
        module = mods[i]
        i += 1
        # checked at each step: a module's forward may turn grad mode or a mode on
        if type(input) is Tensor and _plain(module, linear) and not _grad_state.grad_enabled \
                and not _mode_active[0] and not _any_global_hook():
            y = _linear_array(module, input, kernel)
            if y is not None:
                if i < n and _plain(mods[i], relu):
                    relu_array(y, y)  # the product is fresh: no one else holds it
                    i += 1
                input = _make(y)
                continue
        input = module(input)
    return input
