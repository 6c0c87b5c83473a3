"""Stochastic gradient descent, optionally with (Nesterov) momentum."""
import numpy as np

from ember._tensor import _make
from ember.optim.optimizer import Optimizer, _check_flags, _check_lr, _value

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

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        _check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_flags(differentiable, fused, foreach)
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    def step(self, closure=None):
        """Perform a single optimization step; ``closure`` re-evaluates the loss."""
        return self._run_step(closure)

    def _step_group(self, group):
        lr = _value(group["lr"])
        momentum = group["momentum"]
        dampening = group["dampening"]
        wd = _value(group["weight_decay"])
        nesterov = group["nesterov"]
        maximize = group["maximize"]
        state = self.state
        for p in group["params"]:
            grad = p._grad
            if grad is None:
                continue
            pd, g = p._data, grad._data
            if maximize:
                g = -g
            if wd != 0:
                g = g + wd * pd
            if momentum != 0:
                st = state[p]
                buf = st.get("momentum_buffer")
                if buf is None:
                    st["momentum_buffer"] = _make(g.copy())
                    b = st["momentum_buffer"]._data
                else:
                    b = buf._data
                    b *= momentum
                    b += g if dampening == 0 else (1 - dampening) * g
                    buf._vc[0] += 1
                g = g + momentum * b if nesterov else b
            pd -= np.multiply(g, lr)
            p._vc[0] += 1
