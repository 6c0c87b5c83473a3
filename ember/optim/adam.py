"""Adam (and, with ``decoupled_weight_decay``, AdamW)."""
import numpy as np

from ember._tensor import Tensor
from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _decay_factor,
    _grad_of,
    _lerp_,
    _scalar_tensor,
    _to_scalar,
    _value,
    _zeros_like,
)

__all__ = ["Adam"]


def _check_betas(betas, eps, weight_decay):
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= _value(betas[0]) < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= _value(betas[1]) < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    r"""Adam, as ``torch.optim.Adam``.

    For each parameter, at step :math:`t`, with gradient :math:`g` (negated when
    ``maximize``)::

        g = g + weight_decay * p          (or p = p * (1 - lr * weight_decay) if decoupled)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)             (amsgrad; then v_max replaces v below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    The state of each parameter is ``step`` (a 0-d float32 tensor, float64 when that
    is the default dtype), ``exp_avg``, ``exp_avg_sq`` and, with amsgrad,
    ``max_exp_avg_sq``.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-3).
        betas (tuple[float, float]): running average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): weight decay (default: 0).
        amsgrad (bool): use the AMSGrad variant (default: False).
        maximize (bool): maximize the objective (default: False).
        decoupled_weight_decay (bool): decay the weights directly, as AdamW (default: False).
        foreach, capturable, fused: accepted for compatibility; ember has one implementation.
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if isinstance(lr, Tensor) and foreach and not capturable:
            raise ValueError("lr as a Tensor is not supported for capturable=False and "
                             "foreach=True")
        _check_lr(lr)
        _check_betas(betas, eps, weight_decay)
        if not ((isinstance(betas[0], float) and isinstance(betas[1], float))
                or (isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor))):
            raise ValueError("betas must be either both floats or both Tensors")
        for i, b in enumerate(betas):
            if isinstance(b, Tensor) and b.numel() != 1:
                raise ValueError(f"Tensor betas[{i}] must be 1-element")
        betas = tuple(map(_to_scalar, betas))
        _check_flags(differentiable, fused, foreach)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("decoupled_weight_decay", False)
            group.setdefault("fused", None)

    def step(self, closure=None):
        """Perform a single optimization step; ``closure`` re-evaluates the loss."""
        return self._run_step(closure)

    def _step_group(self, group):
        lr = _value(group["lr"])
        beta1, beta2 = (_value(b) for b in group["betas"])
        eps, wd = group["eps"], _value(group["weight_decay"])
        amsgrad, maximize = group["amsgrad"], group["maximize"]
        decoupled = group["decoupled_weight_decay"]
        for p in group["params"]:
            if p._grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _scalar_tensor(0.0)
                state["exp_avg"] = _zeros_like(p)
                state["exp_avg_sq"] = _zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = _zeros_like(p)
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
            gg = np.multiply(g, g)
            gg *= 1 - beta2
            v += gg
            step_size = lr / (1 - beta1 ** step)
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            if amsgrad:
                vmax = state["max_exp_avg_sq"]
                np.maximum(vmax._data, v, out=vmax._data)
                vmax._vc[0] += 1
                v = vmax._data
            denom = np.sqrt(v, out=gg)
            denom /= bias_correction2_sqrt
            denom += eps
            np.divide(m, denom, out=denom)
            denom *= step_size
            pd -= denom
            for t in (step_t, exp_avg, exp_avg_sq, p):
                t._vc[0] += 1
