"""Muon: momentum steps orthogonalized by a Newton-Schulz iteration (2-D parameters)."""
import math

import numpy as np

from ember._tensor import Tensor
from ember.optim.optimizer import (
    Optimizer,
    _axpy,
    _decay_factor,
    _lerp_,
    _value,
    _zeros_like,
)

__all__ = ["Muon"]

# PyTorch's defaults: the quintic's coefficients, its number of steps, the norm's floor
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NS_STEPS = 5
EPS = 1e-7


class Muon(Optimizer):
    r"""Muon, as ``torch.optim.Muon``: for the 2-D parameters of hidden layers (other
    parameters belong with another optimizer, AdamW for example).

    For each parameter, with gradient :math:`g`::

        B = lerp(B, g, 1 - momentum)                  (B = momentum * B + (1 - momentum) * g)
        U = lerp(g, B, momentum)  if nesterov  else B
        O = NS(U)                                     (Newton-Schulz, in bfloat16)
        p = p * (1 - lr * weight_decay)
        p = p - adjust(lr, shape) * O

    ``NS`` works on the wider-than-tall orientation of ``U`` (transposed when it has more
    rows than columns): ``X = U / max(|U|, eps)``, then ``ns_steps`` times
    ``A = X @ X.T;  X = a * X + (b * A + c * A @ A) @ X`` with ``(a, b, c) =
    ns_coefficients``. As in PyTorch every result is rounded to bfloat16 (``U`` from a
    float64 parameter through float32), each product accumulated in float32; ember
    computes in float32 and rounds each result to bfloat16's nearest even value, so it
    needs no bfloat16 dtype.

    ``adjust_lr_fn``: ``None`` or ``"original"`` scales lr by ``sqrt(max(1, rows / cols))``;
    ``"match_rms_adamw"`` by ``0.2 * sqrt(max(rows, cols))``.

    The state of each parameter is ``momentum_buffer``.

    Args:
        params (iterable): 2-D parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-3).
        weight_decay (float): decoupled weight decay, scaled by lr (default: 0.1).
        momentum (float): momentum factor (default: 0.95).
        nesterov (bool): Nesterov momentum (default: True).
        ns_coefficients (tuple of three floats): the quintic's coefficients
            (default: (3.4445, -4.775, 2.0315)).
        eps (float): the floor of the norm that scales the update (default: 1e-7).
        ns_steps (int): Newton-Schulz iterations, fewer than 100 (default: 5).
        adjust_lr_fn (str or None): ``"original"`` or ``"match_rms_adamw"`` (default: None,
            which is ``"original"``).
    """

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=NS_COEFFICIENTS, eps=EPS, ns_steps=NS_STEPS,
                 adjust_lr_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= _value(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = {"lr": lr, "weight_decay": weight_decay, "momentum": momentum,
                    "nesterov": nesterov, "ns_coefficients": ns_coefficients, "eps": eps,
                    "ns_steps": ns_steps, "adjust_lr_fn": adjust_lr_fn}
        super().__init__(params, defaults)
        # (as in PyTorch, checked here only: not for groups added later)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    def _init_state(self, p, state, group):
        state["momentum_buffer"] = _zeros_like(p._grad)

    def _step_group(self, group):
        for p in group["params"]:
            if p._grad is not None and p.is_complex():
                raise RuntimeError("Muon does not support complex parameters")
        lr, wd = group["lr"], group["weight_decay"]
        momentum, nesterov = group["momentum"], group["nesterov"]
        coefficients, steps, eps = group["ns_coefficients"], group["ns_steps"], group["eps"]
        # Muon has neither maximize nor coupled weight decay: _grads passes g as it is
        plain = dict(group, maximize=False, weight_decay=0)
        for p, g, state in self._grads(plain):
            if g.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            buf = state["momentum_buffer"]._data
            _lerp_(buf, g, 1 - momentum)
            if nesterov:
                update = np.array(g, copy=True)
                _lerp_(update, buf, momentum)
            else:
                update = buf
            update = _orthogonalize(update, coefficients, steps, eps)
            pa = p._data
            if wd != 0:
                pa *= _decay_factor(lr, wd)
            _axpy(pa, -_adjusted_lr(lr, group["adjust_lr_fn"], pa.shape), update, out=pa)


def _orthogonalize(update, coefficients, steps, eps):
    """PyTorch's Newton-Schulz iteration on the 2-D array ``update``: a float32 array
    of bfloat16 values, close to ``U V^T`` of ``update``'s SVD ``U S V^T`` (each singular
    value lands somewhere around 0.5 to 1.5, which is all Muon needs)."""
    if steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if update.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = coefficients
    x = _bfloat16(update)
    tall = update.shape[0] > update.shape[1]
    if tall:
        x = x.T
    norm = _bfloat16(np.sqrt(np.vdot(x.ravel(), x.ravel())))
    x = _bfloat16(x / np.maximum(norm, _bfloat16(np.float32(eps))))
    for _ in range(steps):
        gram = _bfloat16(x @ x.T)
        gram_update = _bfloat16(b * gram + c * (gram @ gram))
        x = _bfloat16(a * x + gram_update @ x)
    return x.T if tall else x


def _bfloat16(a):
    """``a`` (cast to float32) rounded to the nearest bfloat16 value, ties to even, as a
    float32 array (0-d for a scalar); NaN stays NaN, overflow becomes inf. (A float64 array is
    rounded through float32, as PyTorch converts it.)"""
    a = np.asarray(a, dtype=np.float32)
    shape = a.shape
    a = a.reshape(-1)  # (a 0-d array's arithmetic gives NumPy scalars, not arrays)
    bits = a.view(np.uint32)
    # only a NaN's bits can wrap around here: those are put back below
    rounded = (bits >> 16) & 1
    rounded += 0x7FFF
    rounded += bits
    rounded &= 0xFFFF0000
    out = rounded.view(np.float32)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = a[nan]
    return out.reshape(shape)


def _adjusted_lr(lr, adjust_lr_fn, shape):
    """lr scaled for a ``shape`` parameter (see Muon); a tensor lr scales in its dtype."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    if isinstance(lr, Tensor):
        dt = lr._data.dtype.type
        return float(dt(lr._data.reshape(()).item()) * dt(ratio))
    return lr * ratio
