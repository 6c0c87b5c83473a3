"""Adam (and, with ``decoupled_weight_decay``, AdamW)."""
import functools

import numpy as np

from ember._tensor import Tensor
from ember.optim import _one_pass
from ember.optim.optimizer import (
    Optimizer,
    _check_betas,
    _check_flags,
    _check_lr,
    _lerp_,
    _mul_addcmul_,
    _split_update,
    _to_scalar,
    _value,
    _zeros_like,
)

__all__ = ["Adam"]


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
        foreach, capturable, fused: accepted for compatibility; ember has one implementation
            (``capturable=True`` needs parameters on an accelerator, as in PyTorch).
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)
    _setstate_defaults = {"amsgrad": False, "maximize": False, "foreach": None,
                          "capturable": False, "differentiable": False,
                          "decoupled_weight_decay": False, "fused": None}

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
            if isinstance(b, Tensor) and not capturable and foreach:
                raise ValueError(f"betas[{i}] as a Tensor is not supported for capturable=False "
                                 "and foreach=True")
            if isinstance(b, Tensor) and b.numel() != 1:
                raise ValueError(f"Tensor betas[{i}] must be 1-element")
        betas = tuple(map(_to_scalar, betas))
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _init_state(self, p, state, group):
        state["exp_avg"] = _zeros_like(p)
        state["exp_avg_sq"] = _zeros_like(p)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = _zeros_like(p)

    def _step_group(self, group):
        if _one_pass.wanted(self) and type(self).apply_single is Adam.apply_single:
            beta1, beta2 = group["betas"]
            if _one_pass.adam_group(self, group, _value(group["lr"]), _value(beta1),
                                    _value(beta2)):
                return  # (a compiled step: the plain case's loop, bookkeeping once per group)
        for p, g, state in self._grads(group):
            self.apply_single(g, p._data, state, group)

    def apply_single(self, gradient, parameter, state, group):
        """Update one parameter in place, on arrays (MLX's ``apply_single``): ``gradient``
        after ``maximize`` and weight decay (as ``_grads`` yields it, with the step
        counter already advanced), ``parameter`` the parameter's array, ``state`` its
        state dict, ``group`` its param group. ``step`` runs it for each parameter (so
        does a compiled training step); where numba is importable it runs the one-pass
        loop (``_one_pass.wanted``): the same values in one pass over memory, where it
        covers the case (no amsgrad)."""
        lr = _value(group["lr"])
        beta1, beta2 = group["betas"]
        beta1, beta2 = _value(beta1), _value(beta2)
        eps, amsgrad = group["eps"], group["amsgrad"]
        step = state["step"]._data.item()
        step_size = lr / (1 - beta1 ** step)
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
        if _one_pass.wanted(self) and not amsgrad and \
                _one_pass.adam(parameter, gradient, m, v, beta1, beta2, eps, step_size,
                               bias_correction2_sqrt):
            return
        arrays = [parameter, gradient, m, v]
        if amsgrad:
            arrays.append(state["max_exp_avg_sq"]._data)
        _split_update(functools.partial(_update, beta1, beta2, eps, step_size,
                                        bias_correction2_sqrt), 12, *arrays)


_CHUNK = 1 << 15  # elements: the block's arrays and two scratch pieces stay in cache


def _update(beta1, beta2, eps, step_size, bias_correction2_sqrt, p, g, m, v, vmax=None):
    """One Adam update of the arrays ``p``, ``m``, ``v`` (and ``vmax``), in place.

    Large contiguous arrays of one dtype are updated block by block through two small
    scratch arrays instead of two whole-array temporaries: each element goes through
    the same operations in the same order, so the values are the same to the bit, with
    less memory traffic (and no fresh pages for the temporaries on every step)."""
    arrays = (p, g, m, v) if vmax is None else (p, g, m, v, vmax)
    n = p.size
    if n <= 2 * _CHUNK or not all(type(a) is np.ndarray and a.shape == p.shape and
                                  a.dtype == p.dtype and a.flags.c_contiguous
                                  for a in arrays):
        _update_block(beta1, beta2, eps, step_size, bias_correction2_sqrt, arrays, None)
        return
    flat = [a.reshape(-1) for a in arrays]
    scratch = np.empty((2, _CHUNK), p.dtype)
    for i in range(0, n, _CHUNK):
        j = min(i + _CHUNK, n)
        _update_block(beta1, beta2, eps, step_size, bias_correction2_sqrt,
                      [f[i:j] for f in flat], scratch[:, :j - i])


def _update_block(beta1, beta2, eps, step_size, bias_correction2_sqrt, arrays, scratch):
    """``_update`` on one block: ``arrays`` is ``(p, g, m, v[, vmax])``, ``scratch`` two
    arrays shaped like them (or None: new temporaries)."""
    p, g, m, v = arrays[:4]
    s1, s2 = (None, None) if scratch is None else scratch
    _lerp_(m, g, 1 - beta1, out=s1)
    gg = _mul_addcmul_(v, g, beta2, out=s2)
    if len(arrays) > 4:
        vmax = arrays[4]
        np.maximum(vmax, v, out=vmax)
        v = vmax
    denom = np.sqrt(v, out=gg)
    denom /= bias_correction2_sqrt
    denom += eps
    np.divide(m, denom, out=denom)
    denom *= step_size
    p -= denom
