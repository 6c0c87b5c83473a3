"""Adamax: Adam with the infinity norm."""
import numpy as np

from ember.optim.optimizer import (
    Optimizer,
    _check_betas,
    _check_flags,
    _check_lr,
    _lerp_,
    _value,
    _zeros_like,
)

__all__ = ["Adamax"]


class Adamax(Optimizer):
    r"""Adamax, as ``torch.optim.Adamax``.

    For each parameter, at step :math:`t`, with gradient :math:`g` (negated when
    ``maximize``)::

        g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1**t) * m / u

    State: ``step``, ``exp_avg`` (m) and ``exp_inf`` (u).

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 2e-3).
        betas (tuple[float, float]): running average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): L2 penalty (default: 0).
        maximize (bool): maximize the objective (default: False).
        foreach, capturable: accepted for compatibility; ember has one implementation
            (``capturable=True`` needs parameters on an accelerator, as in PyTorch).
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)
    _setstate_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                          "capturable": False}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        _check_betas(betas, eps, weight_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["exp_avg"] = _zeros_like(p)
        state["exp_inf"] = _zeros_like(p)

    def _step_group(self, group):
        lr = _value(group["lr"])
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        for p, g, state in self._grads(group):
            step = state["step"]._data.item()
            m, u = state["exp_avg"]._data, state["exp_inf"]._data
            _lerp_(m, g, 1 - beta1)
            u *= beta2
            tmp = np.abs(g)
            tmp += eps
            np.maximum(u, tmp, out=u)
            clr = lr / (1 - beta1 ** step)
            np.divide(m, u, out=tmp)
            tmp *= clr
            p._data -= tmp
