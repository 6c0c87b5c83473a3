"""Optimizer updates inside a compiled training step.

A compiled step that calls ``optimizer.step()`` runs the optimizer's own ``step``
(its hooks, step counters and state stay the optimizer's), with, for the update rules
given here, the per-group update swapped for one that keeps its scratch memory across
steps. The values are eager ember's to the bit: SGD's ``p - lr * g`` is rounded once,
as PyTorch's fused multiply-add, through a float64 scratch buffer allocated once
instead of three fresh float64 copies per parameter per step.
"""
import numpy as np

from ember._tensor import _make
from ember.optim.optimizer import _axpy, _value
from ember.optim.sgd import SGD

__all__ = ["fused_step"]


class _Scratch:
    """One float64 buffer, grown to the largest parameter and reused for each."""

    def __init__(self):
        self.buf = np.empty(0, np.float64)

    def like(self, a):
        if self.buf.size < a.size:
            self.buf = np.empty(a.size, np.float64)
        return self.buf[:a.size].reshape(a.shape)


def _sgd_group(opt, group, scratch):
    lr = _value(group["lr"])
    momentum, dampening, nesterov = group["momentum"], group["dampening"], group["nesterov"]
    if dampening != 0 or nesterov:
        return SGD._step_group(opt, group)
    for p, g, state in opt._grads(group, with_state=momentum != 0):
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                g = g.copy()
                state["momentum_buffer"] = _make(g)
            else:
                b = buf._data
                b *= momentum
                b += g
                g = b
        d = p._data
        if d.dtype == np.float32 and g.dtype == np.float32:
            # d - lr * g with one rounding: the float32 product is exact in float64
            s = scratch.like(d)
            np.multiply(g, float(np.float32(-lr)), out=s, dtype=np.float64)
            s += d
            np.copyto(d, s, casting="same_kind")
        else:
            d[...] = _axpy(d, -lr, g)


_FUSED = {SGD: _sgd_group}


def fused_step(opt, scratch_of):
    """Run ``opt.step()`` with its group update swapped for the scratch-keeping one
    when its type has one (``scratch_of``: a dict kept by the compiled function)."""
    update = _FUSED.get(type(opt))
    if update is None or "_step_group" in opt.__dict__:
        return opt.step()
    scratch = scratch_of.get(id(opt))
    if scratch is None:
        scratch = scratch_of[id(opt)] = _Scratch()
    opt._step_group = lambda group: update(opt, group, scratch)
    try:
        return opt.step()
    finally:
        del opt._step_group
