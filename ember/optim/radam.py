"""RAdam: Adam with a rectified adaptive learning rate."""
import numpy as np

from ember.optim.optimizer import (
    Optimizer,
    _check_betas,
    _check_flags,
    _check_lr,
    _lerp_,
    _mul_addcmul_,
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
        foreach, capturable: accepted for compatibility; ember has one implementation
            (``capturable=True`` needs parameters on an accelerator, as in PyTorch).
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)
    _decay_as_real = True
    _setstate_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                          "decoupled_weight_decay": False, "capturable": False}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_lr(lr)
        _check_betas(betas, eps, weight_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["exp_avg"] = _zeros_like(p)
        state["exp_avg_sq"] = _zeros_like(p)

    def _step_group(self, group):
        lr = _value(group["lr"])
        beta1, beta2 = group["betas"]
        eps = group["eps"]
        rho_inf = 2 / (1 - beta2) - 1
        for p, g, state in self._grads(group):
            step = state["step"]._data.item()
            m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
            _lerp_(m, g, 1 - beta1)
            tmp = _mul_addcmul_(v, g, beta2)
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
            p._data -= upd
