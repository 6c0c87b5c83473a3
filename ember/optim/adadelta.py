"""Adadelta."""
import numpy as np

from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _grad_of,
    _scalar_tensor,
    _value,
    _zeros_like,
)

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    r"""Adadelta, as ``torch.optim.Adadelta``.

    For each parameter, with gradient :math:`g` (negated when ``maximize``)::

        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta

    State: ``step``, ``square_avg`` (v) and ``acc_delta`` (u).

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): coefficient scaling delta (default: 1.0).
        rho (float): running average coefficient (default: 0.9).
        eps (float): added inside the square roots (default: 1e-6).
        weight_decay (float): L2 penalty (default: 0).
        maximize (bool): maximize the objective (default: False).
        foreach, capturable: accepted for compatibility; ember has one implementation.
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_flags(differentiable)
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
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
        rho, eps = group["rho"], group["eps"]
        wd, maximize = group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p._grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _scalar_tensor(0.0)
                state["square_avg"] = _zeros_like(p)
                state["acc_delta"] = _zeros_like(p)
            step_t, sq, acc = state["step"], state["square_avg"], state["acc_delta"]
            step_t._data += 1
            pd, g = p._data, _grad_of(p, maximize)
            if wd != 0:
                g = g + wd * pd
            v, u = sq._data, acc._data
            v *= rho
            std = np.multiply(g, g)
            std *= 1 - rho
            v += std
            np.add(v, eps, out=std)
            np.sqrt(std, out=std)
            delta = np.add(u, eps)
            np.sqrt(delta, out=delta)
            delta /= std
            delta *= g
            u *= rho
            np.multiply(delta, delta, out=std)
            std *= 1 - rho
            u += std
            delta *= lr
            pd -= delta
            for t in (step_t, sq, acc, p):
                t._vc[0] += 1
