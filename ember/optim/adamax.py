"""Adamax: Adam with the infinity norm."""
import numpy as np

from ember.optim.adam import _check_betas
from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _grad_of,
    _lerp_,
    _scalar_tensor,
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
        foreach, capturable: accepted for compatibility; ember has one implementation.
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        _check_betas(betas, eps, weight_decay)
        _check_flags(differentiable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)

    def step(self, closure=None):
        """Perform a single optimization step; ``closure`` re-evaluates the loss."""
        return self._run_step(closure)

    def _step_group(self, group):
        lr = _value(group["lr"])
        beta1, beta2 = group["betas"]
        eps, wd, maximize = group["eps"], group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p._grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _scalar_tensor(0.0)
                state["exp_avg"] = _zeros_like(p)
                state["exp_inf"] = _zeros_like(p)
            step_t, exp_avg, exp_inf = state["step"], state["exp_avg"], state["exp_inf"]
            step_t._data += 1
            step = step_t._data.item()
            pd, g = p._data, _grad_of(p, maximize)
            if wd != 0:
                g = g + wd * pd
            m, u = exp_avg._data, exp_inf._data
            _lerp_(m, g, 1 - beta1)
            u *= beta2
            tmp = np.abs(g)
            tmp += eps
            np.maximum(u, tmp, out=u)
            clr = lr / (1 - beta1 ** step)
            np.divide(m, u, out=tmp)
            tmp *= clr
            pd -= tmp
            for t in (step_t, exp_avg, exp_inf, p):
                t._vc[0] += 1
