"""Adafactor: Adam-like steps with a factored (row/column) second moment."""
import math

import numpy as np

from ember._tensor import Tensor, _make
from ember.optim.optimizer import (
    Optimizer,
    _axpy,
    _decay_factor,
    _lerp_,
    _value,
)

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    r"""Adafactor, as ``torch.optim.Adafactor`` (Shazeer and Stern, 2018, as PyTorch
    states it: relative step sizes, no first moment).

    For each parameter, at step :math:`t`, with gradient :math:`g` (negated when
    ``maximize``)::

        w     = t ** beta2_decay                   (the weight of the new square)
        rho   = min(lr, 1 / sqrt(t))
        alpha = max(eps2, rms(p)) * rho            (rms of p before the decay below)
        p     = p * (1 - lr * weight_decay)
        >= 2-D: R = lerp(R, mean(g * g, last dim), w);  C = lerp(C, mean(g * g, dim -2), w)
                v = R @ C / max(mean(R, dim -2), eps1)
        0/1-D:  v = lerp(v, g * g, w)
        u = g / sqrt(max(v, eps1 * eps1))
        p = p - alpha / max(1, rms(u) / d) * u

    ``R`` and ``C`` keep the parameter's shape with the last (``R``) or second to last
    (``C``) dimension reduced to 1, so a parameter of more than two dimensions is
    factored over its last two, batched over the rest. ``eps1=None`` means the machine
    epsilon of the dtype of the first parameter updated in each group (PyTorch's choice,
    kept for the rest of that group).

    The state of each parameter is ``step`` (a 0-d float32 tensor, float64 when that is
    the default dtype) and either ``row_var``/``col_var`` (>= 2-D) or ``variance``.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): upper bound of the relative step size (default: 1e-2).
        beta2_decay (float): exponent of the second moment's decay, <= 0 (default: -0.8).
        eps (tuple[float or None, float]): (eps1, added to the second moment; eps2, the
            least parameter scale) (default: (None, 1e-3)).
        d (float): clipping threshold of the update's rms, >= 1 (default: 1.0).
        weight_decay (float): decoupled weight decay, scaled by lr (default: 0.0).
        foreach: accepted for compatibility; ember has one implementation.
        maximize (bool): maximize the objective (default: False).
    """

    _scalar_state = ("step",)
    _setstate_defaults = {"foreach": None}

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= _value(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = {"lr": lr, "beta2_decay": beta2_decay, "eps": eps, "d": d,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize}
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        a = p._grad._data
        if a.ndim > 1:
            state["row_var"] = _make(np.zeros(a.shape[:-1] + (1,), a.dtype))
            state["col_var"] = _make(np.zeros(a.shape[:-2] + (1, a.shape[-1]), a.dtype))
        else:
            state["variance"] = _make(np.zeros_like(a))

    def _step_group(self, group):
        for p in group["params"]:
            if p._grad is not None and p.is_complex():
                raise RuntimeError("Adafactor does not support complex parameters")
        lr, wd, d = group["lr"], group["weight_decay"], group["d"]
        beta2_decay = group["beta2_decay"]
        eps1, eps2 = group["eps"]
        # the decay is applied here, after alpha has read the parameter's scale
        undecayed = dict(group, weight_decay=0)
        for p, g, state in self._grads(undecayed):
            pa = p._data
            if eps1 is None:
                eps1 = float(np.finfo(pa.dtype).eps)
            step = state["step"]._data.item()
            weight = step ** beta2_decay
            alpha = max(eps2, _norm(pa) / math.sqrt(pa.size))
            alpha = _times_lr(alpha, lr, 1 / step ** 0.5)
            if wd != 0:
                pa *= _decay_factor(lr, wd)
            if "row_var" in state:
                row, col = state["row_var"]._data, state["col_var"]._data
                _lerp_(row, _mean_square(g, -1), weight)
                _lerp_(col, _mean_square(g, -2), weight)
                v = np.matmul(row, col)
                v /= np.maximum(row.mean(axis=-2, keepdims=True), eps1)
            else:
                variance = state["variance"]._data
                _lerp_(variance, np.multiply(g, g), weight)
                v = variance.copy()
            np.maximum(v, eps1 * eps1, out=v)
            update = np.sqrt(v, out=v)
            np.divide(1, update, out=update)
            update *= g
            denom = max(1.0, _norm(update) / (math.sqrt(update.size) * d))
            if isinstance(alpha, np.generic):
                step_size = float(-alpha / alpha.dtype.type(denom))
            else:
                step_size = -alpha / denom
            _axpy(pa, step_size, update, out=pa)


def _norm(a):
    """The 2-norm of all of ``a``'s elements, as a Python float."""
    return float(np.sqrt(np.vdot(a.ravel(), a.ravel())))


def _mean_square(g, axis):
    """``(g * g).mean(axis, keepdims=True)``, as PyTorch forms it (a norm, squared)."""
    n = np.sqrt(np.multiply(g, g).sum(axis=axis, keepdims=True))
    n *= n
    n /= g.shape[axis]
    return n


def _times_lr(scale, lr, cap):
    """``scale * min(lr, cap)``: a Python float, or, when ``lr`` is a tensor that is the
    smaller, a scalar of its dtype (PyTorch then computes in that precision)."""
    if isinstance(lr, Tensor):
        lr_value = lr._data.reshape(()).item()
        if not cap < lr_value:
            dt = lr._data.dtype.type
            return dt(scale) * dt(lr_value)
        return scale * cap
    return scale * min(lr, cap)
