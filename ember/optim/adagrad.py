"""Adagrad."""
import numpy as np

from ember._tensor import _make
from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _check_nonnegative,
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
    _setstate_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                          "fused": None}

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        _check_lr(lr)
        _check_nonnegative(lr_decay=lr_decay, weight_decay=weight_decay,
                           initial_accumulator_value=initial_accumulator_value, eps=eps)
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "fused": fused}
        _check_flags(defaults)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._new_state(p, self.state[p], group)

    def _init_state(self, p, state, group):
        # PyTorch starts the accumulator at the optimizer's default value, even for a
        # param group given its own initial_accumulator_value; a complex parameter's
        # two parts start at it each
        init = self.defaults["initial_accumulator_value"]
        s = np.empty_like(p._data)
        s.fill(complex(init, init) if s.dtype.kind == "c" else init)
        state["sum"] = _make(s)

    def share_memory(self):
        """No-op kept for API compatibility (NumPy state lives in this process)."""

    def _step_group(self, group):
        lr = _value(group["lr"])
        lr_decay, eps = group["lr_decay"], group["eps"]
        for p, g, state in self._grads(group):
            step = state["step"]._data.item()
            clr = lr / (1 + (step - 1) * lr_decay)
            s = state["sum"]._data
            std = np.multiply(g, g)
            s += std
            np.sqrt(s, out=std)
            std += eps
            np.divide(g, std, out=std)
            std *= clr
            p._data -= std
