"""Adadelta."""
import numpy as np

from ember.optim.optimizer import (
    Optimizer,
    _axpy,
    _check_flags,
    _check_lr,
    _check_nonnegative,
    _complex_of,
    _mul_addcmul_,
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
        foreach, capturable: accepted for compatibility; ember has one implementation
            (``capturable=True`` needs parameters on an accelerator, as in PyTorch).
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)
    _capturable_xla = False
    _setstate_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                          "capturable": False}

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _check_nonnegative(eps=eps, weight_decay=weight_decay)
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize, "capturable": capturable, "foreach": foreach,
                    "differentiable": differentiable}
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["square_avg"] = _zeros_like(p)
        state["acc_delta"] = _zeros_like(p)

    def _step_group(self, group):
        lr = _value(group["lr"])
        rho, eps = group["rho"], group["eps"]
        for p, g, state in self._grads(group):
            v, u = state["square_avg"]._data, state["acc_delta"]._data
            std = _mul_addcmul_(v, g, rho)
            np.add(v, eps, out=std)
            np.sqrt(std, out=std)
            delta = np.add(u, eps)
            np.sqrt(delta, out=delta)
            delta /= std
            delta *= g
            _mul_addcmul_(u, delta, rho, out=std)
            pa = p._data
            if self._complex_step:
                # PyTorch adds delta to the complex parameter (a product with an
                # infinite part makes a NaN of the other part)
                pa, delta = _complex_of(pa), _complex_of(np.ascontiguousarray(delta))
            # one rounding, as PyTorch's param.add_(delta, alpha=-lr)
            _axpy(pa, -lr, delta, out=pa)
