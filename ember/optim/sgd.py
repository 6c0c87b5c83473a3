"""Stochastic gradient descent, optionally with (Nesterov) momentum."""

import numpy as np

from ember._tensor import _make
from ember.optim.optimizer import Optimizer, _axpy, _check_flags, _check_lr, _value

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""Stochastic gradient descent (optionally with momentum), as ``torch.optim.SGD``.

    For each parameter, with gradient :math:`g` (negated when ``maximize``)::

        g = g + weight_decay * p
        b = g                                       (first step)
        b = momentum * b + (1 - dampening) * g      (later steps)
        g = g + momentum * b if nesterov else b
        p = p - lr * g

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-3).
        momentum (float): momentum factor (default: 0).
        dampening (float): dampening for momentum (default: 0).
        weight_decay (float): L2 penalty (default: 0).
        nesterov (bool): Nesterov momentum (default: False).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        foreach, fused: accepted for compatibility; ember has one implementation.
        differentiable (bool): must be False (NotImplementedError otherwise).

    Example::

        >>> opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        >>> opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
    """

    _setstate_defaults = {"nesterov": False, "maximize": False, "foreach": None,
                          "differentiable": False, "fused": False}

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        _check_lr(lr)
        # PyTorch's SGD checks `< 0` (a NaN passes), the other optimizers `not >= 0`
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group):
        lr = _value(group["lr"])
        momentum, dampening, nesterov = group["momentum"], group["dampening"], group["nesterov"]
        for p, g, state in self._grads(group, with_state=momentum != 0):
            if momentum != 0:
                buf = state.get("momentum_buffer")
                if buf is None:
                    # torch clones the gradient, which torch gives the parameter's strides
                    b = np.empty_like(p._data)
                    b[...] = g
                    state["momentum_buffer"] = _make(b)
                else:
                    b = buf._data
                    b *= momentum
                    if dampening == 0:
                        b += g
                    else:
                        b[...] = _axpy(b, 1 - dampening, g)
                g = _axpy(g, momentum, b) if nesterov else b
            # one rounding for p - lr * g, as PyTorch's param.add_(g, alpha=-lr)
            p._data[...] = _axpy(p._data, -lr, g)
