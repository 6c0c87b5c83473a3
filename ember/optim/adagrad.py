"""Adagrad."""
import numpy as np

from ember._tensor import _make
from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _grad_of,
    _scalar_tensor,
    _value,
)

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    r"""Adagrad, as ``torch.optim.Adagrad``.

    For each parameter, at step :math:`t`, with gradient :math:`g` (negated when
    ``maximize``)::

        g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (sqrt(s) + eps)

    The state (``step`` and ``sum``, which starts at ``initial_accumulator_value``) is
    created for every parameter when the optimizer is constructed, as in PyTorch.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-2).
        lr_decay (float): learning rate decay (default: 0).
        weight_decay (float): L2 penalty (default: 0).
        initial_accumulator_value (float): starting value of ``sum`` (default: 0).
        eps (float): added to the denominator (default: 1e-10).
        maximize (bool): maximize the objective (default: False).
        foreach, fused: accepted for compatibility; ember has one implementation.
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        _check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(
                f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        _check_flags(differentiable, fused, foreach)
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, initial_accumulator_value)

    def _init_state(self, p, init_value):
        state = self.state[p]
        state["step"] = _scalar_tensor(0.0)
        s = np.empty_like(p._data)
        s.fill(init_value)
        state["sum"] = _make(s)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)

    def share_memory(self):
        """No-op kept for API compatibility (NumPy state lives in this process)."""

    def step(self, closure=None):
        """Perform a single optimization step; ``closure`` re-evaluates the loss."""
        return self._run_step(closure)

    def _step_group(self, group):
        lr = _value(group["lr"])
        lr_decay, eps = group["lr_decay"], group["eps"]
        wd, maximize = group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p._grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                # PyTorch takes the accumulator's start from the optimizer's defaults here
                self._init_state(p, self.defaults["initial_accumulator_value"])
            step_t, sum_t = state["step"], state["sum"]
            step_t._data += 1
            step = step_t._data.item()
            pd, g = p._data, _grad_of(p, maximize)
            if wd != 0:
                g = g + wd * pd
            clr = lr / (1 + (step - 1) * lr_decay)
            s = sum_t._data
            std = np.multiply(g, g)
            s += std
            np.sqrt(s, out=std)
            std += eps
            np.divide(g, std, out=std)
            std *= clr
            pd -= std
            for t in (step_t, sum_t, p):
                t._vc[0] += 1
