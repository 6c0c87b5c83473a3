"""RMSprop."""
import numpy as np

from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _check_nonnegative,
    _lerp_,
    _mul_addcmul_,
    _value,
    _zeros_like,
)

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""RMSprop, as ``torch.optim.RMSprop``.

    For each parameter, with gradient :math:`g` (negated when ``maximize``)::

        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - ga * ga) + eps     with ga = alpha * ga + (1 - alpha) * g (centered)
        avg = sqrt(v) + eps               (otherwise)
        b = momentum * b + g / avg;  p = p - lr * b      (momentum > 0)
        p = p - lr * g / avg                              (otherwise)

    State: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0), ``grad_avg``
    (centered).

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-2).
        alpha (float): smoothing constant (default: 0.99).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): L2 penalty (default: 0).
        momentum (float): momentum factor (default: 0).
        centered (bool): normalize by the estimated variance of the gradient (default: False).
        maximize (bool): maximize the objective (default: False).
        capturable, foreach: accepted for compatibility; ember has one implementation
            (``capturable=True`` needs parameters on an accelerator, as in PyTorch).
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)
    _setstate_defaults = {"momentum": 0, "centered": False, "foreach": None,
                          "maximize": False, "differentiable": False, "capturable": False}

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check_lr(lr)
        _check_nonnegative(eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                    "centered": centered, "weight_decay": weight_decay,
                    "capturable": capturable, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable}
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["square_avg"] = _zeros_like(p)
        if group["momentum"] > 0:
            state["momentum_buffer"] = _zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = _zeros_like(p)

    def _step_group(self, group):
        lr = _value(group["lr"])
        alpha, eps = group["alpha"], group["eps"]
        momentum, centered = group["momentum"], group["centered"]
        for p, g, state in self._grads(group):
            v = state["square_avg"]._data
            avg = _mul_addcmul_(v, g, alpha)
            if centered:
                ga = state["grad_avg"]._data
                _lerp_(ga, g, 1 - alpha)
                np.multiply(ga, ga, out=avg)
                np.subtract(v, avg, out=avg)
                np.sqrt(avg, out=avg)
            else:
                np.sqrt(v, out=avg)
            avg += eps
            np.divide(g, avg, out=avg)
            if momentum > 0:
                buf = state["momentum_buffer"]._data
                buf *= momentum
                buf += avg
                np.multiply(buf, lr, out=avg)
            else:
                avg *= lr
            p._data -= avg
