"""Averaged stochastic gradient descent."""
import numpy as np

from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _check_nonnegative,
    _scalar_tensor,
    _to_scalar,
    _value,
    _zeros_like,
)

__all__ = ["ASGD"]


class ASGD(Optimizer):
    r"""Averaged SGD, as ``torch.optim.ASGD``.

    For each parameter, at step :math:`t`, with gradient :math:`g` (negated when
    ``maximize``)::

        g = g + weight_decay * p
        p = p * (1 - lambd * eta) - eta * g
        ax = p  if mu == 1  else  ax + mu * (p - ax)
        eta = lr / (1 + lambd * lr * t)**alpha
        mu = 1 / max(1, t - t0)

    ``eta`` and ``mu`` are 0-d tensors of the scalar dtype (float32 unless float64 is
    the default), as in PyTorch; ``ax`` holds the running average of the parameter.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-2).
        lambd (float): decay term (default: 1e-4).
        alpha (float): power for the eta update (default: 0.75).
        t0 (float): point at which to start averaging (default: 1e6).
        weight_decay (float): L2 penalty (default: 0).
        maximize (bool): maximize the objective (default: False).
        foreach, capturable: accepted for compatibility; ember has one implementation
            (``capturable=True`` needs parameters on an accelerator, as in PyTorch).
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step", "eta", "mu")
    _capturable_tensors = "params, mus, etas, and state_steps"
    _decay_as_real = True
    _setstate_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                          "capturable": False}

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        _check_nonnegative(weight_decay=weight_decay)
        defaults = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["eta"] = _scalar_tensor(_value(_to_scalar(group["lr"])))
        state["mu"] = _scalar_tensor(1.0)
        state["ax"] = _zeros_like(p)

    def _step_group(self, group):
        lr = _value(group["lr"])
        lambd, alpha, t0 = group["lambd"], group["alpha"], group["t0"]
        for p, g, state in self._grads(group):
            eta, mu, ax = state["eta"], state["mu"], state["ax"]
            pd = p._data
            eta_value = eta._data.item()
            pd *= 1 - lambd * eta_value
            pd -= np.multiply(g, eta_value)
            mu_value = mu._data.item()
            if mu_value != 1:
                d = np.subtract(pd, ax._data)
                d *= mu_value
                ax._data += d
            else:
                ax._data[...] = pd
            step = state["step"]._data.item()
            eta._data[...] = lr / ((1 + lambd * lr * step) ** alpha)
            mu._data[...] = 1 / max(1, step - t0)
