"""RAdam: Adam with a rectified adaptive learning rate."""
import numpy as np

from ember.optim.adam import _check_betas
from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _decay_factor,
    _grad_of,
    _lerp_,
    _scalar_tensor,
    _value,
    _zeros_like,
)

__all__ = ["RAdam"]


class RAdam(Optimizer):
    r"""RAdam, as ``torch.optim.RAdam``.

    For each parameter, at step :math:`t`, with gradient :math:`g` (negated when
    ``maximize``)::

        g = g + weight_decay * p          (or p = p * (1 - lr * weight_decay) if decoupled)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        if rho_t > 5:
            r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
            p = p - lr * m / (1 - beta1**t) * r * sqrt(1 - beta2**t) / (sqrt(v) + eps)
        else:
            p = p - lr * m / (1 - beta1**t)

    State: ``step``, ``exp_avg`` and ``exp_avg_sq``.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-3).
        betas (tuple[float, float]): running average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): weight decay (default: 0).
        decoupled_weight_decay (bool): decay the weights directly, as AdamW (default: False).
        maximize (bool): maximize the objective (default: False).
        foreach, capturable: accepted for compatibility; ember has one implementation.
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_lr(lr)
        _check_betas(betas, eps, weight_decay)
        _check_flags(differentiable)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)
            group.setdefault("decoupled_weight_decay", False)

    def step(self, closure=None):
        """Perform a single optimization step; ``closure`` re-evaluates the loss."""
        return self._run_step(closure)

    def _step_group(self, group):
        lr = _value(group["lr"])
        beta1, beta2 = group["betas"]
        eps, wd, maximize = group["eps"], group["weight_decay"], group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        rho_inf = 2 / (1 - beta2) - 1
        for p in group["params"]:
            if p._grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _scalar_tensor(0.0)
                state["exp_avg"] = _zeros_like(p)
                state["exp_avg_sq"] = _zeros_like(p)
            step_t, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
            step_t._data += 1
            step = step_t._data.item()
            pd, g = p._data, _grad_of(p, maximize)
            if wd != 0:
                if decoupled:
                    pd *= _decay_factor(group["lr"], wd)
                else:
                    g = g + wd * pd
            m, v = exp_avg._data, exp_avg_sq._data
            _lerp_(m, g, 1 - beta1)
            v *= beta2
            tmp = np.multiply(g, g)
            tmp *= 1 - beta2
            v += tmp
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            upd = np.divide(m, bias_correction1)
            upd *= lr
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
            if rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                        / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                np.sqrt(v, out=tmp)
                tmp += eps
                np.divide(bias_correction2 ** 0.5, tmp, out=tmp)
                upd *= tmp
                upd *= rect
            pd -= upd
            for t in (step_t, exp_avg, exp_avg_sq, p):
                t._vc[0] += 1
