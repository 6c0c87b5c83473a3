"""NAdam: Adam with Nesterov momentum."""
import numpy as np

from ember.optim.optimizer import (
    Optimizer,
    _check_betas,
    _check_flags,
    _check_lr,
    _check_nonnegative,
    _lerp_,
    _mul_addcmul_,
    _scalar_tensor,
    _value,
    _zeros_like,
)

__all__ = ["NAdam"]


class NAdam(Optimizer):
    r"""NAdam, as ``torch.optim.NAdam``.

    For each parameter, at step :math:`t`, with gradient :math:`g` (negated when
    ``maximize``)::

        g = g + weight_decay * p          (or p = p * (1 - lr * weight_decay) if decoupled)
        mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))
        mu_product = mu_product * mu_t
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        d = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - mu_product) * g / d
              - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / d

    State: ``step`` and ``mu_product`` (0-d tensors of the scalar dtype, so
    ``mu_product`` is accumulated in float32 unless float64 is the default, as in
    PyTorch), ``exp_avg`` and ``exp_avg_sq``.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 2e-3).
        betas (tuple[float, float]): running average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): weight decay (default: 0).
        momentum_decay (float): momentum decay psi (default: 4e-3).
        decoupled_weight_decay (bool): decay the weights directly, as AdamW (default: False).
        maximize (bool): maximize the objective (default: False).
        foreach, capturable: accepted for compatibility; ember has one implementation
            (``capturable=True`` needs parameters on an accelerator, as in PyTorch).
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step", "mu_product")
    _capturable_tensors = "params, mu_products and state_steps"
    _decay_as_real = True
    _setstate_defaults = {"maximize": False, "foreach": None, "capturable": False,
                          "differentiable": False, "decoupled_weight_decay": False}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_lr(lr)
        _check_betas(betas, eps, weight_decay)
        _check_nonnegative(momentum_decay=momentum_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["mu_product"] = _scalar_tensor(1.0)
        state["exp_avg"] = _zeros_like(p)
        state["exp_avg_sq"] = _zeros_like(p)

    def _step_group(self, group):
        lr = _value(group["lr"])
        beta1, beta2 = group["betas"]
        eps, momentum_decay = group["eps"], group["momentum_decay"]
        for p, g, state in self._grads(group):
            mu_product = state["mu_product"]._data
            step = state["step"]._data.item()
            bias_correction2 = 1 - beta2 ** step
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product *= mu
            mu_prod = mu_product.item()
            m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
            _lerp_(m, g, 1 - beta1)
            denom = _mul_addcmul_(v, g, beta2)
            np.divide(v, bias_correction2, out=denom)
            np.sqrt(denom, out=denom)
            denom += eps
            upd = np.divide(g, denom)
            upd *= -lr * (1.0 - mu) / (1.0 - mu_prod)
            p._data += upd
            np.divide(m, denom, out=upd)
            upd *= (-lr * mu_next) / (1.0 - mu_prod * mu_next)
            p._data += upd
