"""Rprop: resilient backpropagation."""
import numpy as np

from ember._tensor import _make
from ember.ops.unary import _sign_np as _sign
from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _to_scalar,
    _value,
    _zeros_like,
)

__all__ = ["Rprop"]


class Rprop(Optimizer):
    r"""Rprop, as ``torch.optim.Rprop``.

    Each element keeps its own step size, multiplied by ``etaplus`` when the gradient
    keeps its sign and by ``etaminus`` when it flips (then that element does not move
    this step), clamped to ``step_sizes``; the parameter moves by ``-sign(g) * step``.

    State: ``step``, ``prev`` (the last gradient used) and ``step_size``.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): initial step size (default: 1e-2).
        etas (tuple[float, float]): (etaminus, etaplus) (default: (0.5, 1.2)).
        step_sizes (tuple[float, float]): minimal and maximal step sizes
            (default: (1e-6, 50)).
        maximize (bool): maximize the objective (default: False).
        foreach, capturable: accepted for compatibility; ember has one implementation
            (``capturable=True`` needs parameters on an accelerator, as in PyTorch).
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)
    _setstate_defaults = {"foreach": None, "maximize": False, "differentiable": False,
                          "capturable": False}

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["prev"] = _zeros_like(p)
        # torch lays this out like the gradient, which torch gives the parameter's strides
        s = np.empty_like(p._data)
        lr = _value(_to_scalar(group["lr"]))
        # a complex parameter's two parts step as two real numbers: lr for each
        s.fill(complex(lr, lr) if s.dtype.kind == "c" else lr)
        state["step_size"] = _make(s)

    def _step_group(self, group):
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        for p, g, state in self._grads(group):
            prev = state["prev"]._data
            sign = _sign(np.multiply(g, prev))  # (PyTorch's sign of NaN is 0)
            sign[sign > 0] = etaplus
            sign[sign < 0] = etaminus
            sign[sign == 0] = 1
            ss = state["step_size"]._data
            ss *= sign
            np.clip(ss, step_size_min, step_size_max, out=ss)
            g = g.copy()
            g[sign == etaminus] = 0
            upd = _sign(g)
            upd *= ss
            p._data -= upd
            prev[...] = g
