"""Scaled dot-product attention as one primitive (the kernel behind
``ember.nn.functional.scaled_dot_product_attention``).

``out = dropout(softmax(q @ k^T * scale + bias)) @ v`` over the last two dims, batch
dims broadcasting. Forward is two batched BLAS products around an in-place softmax on
the ``(..., L, S)`` scores: no separately scaled copy of ``q``, no per-op temporaries.
The node keeps the attention weights, so a first-order backward is four batched
products and one fused softmax-gradient pass on arrays. When a graph of the gradient is
recorded (``create_graph``) backward is written in ember Tensor ops from the saved
inputs, so second derivatives are exact (the house rule of ``ember.ops.normalization``).
"""
import numpy as np

from ember._tensor import _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module

__all__ = []


def _softmax_rows_(s, safe):
    """Softmax over the last dim of the float array ``s``, in place.

    An infinite row maximum is not subtracted (``inf - inf`` is NaN), so rows holding
    +inf, or only -inf, come out NaN as PyTorch's ``softmax`` does; with ``safe`` rows
    that are all -inf give zeros instead (PyTorch's ``_safe_softmax``, used by sdpa).
    """
    xp = array_module(s)
    m = s.max(axis=-1, keepdims=True)
    finite = xp.isfinite(m)
    all_finite = bool(finite.all())
    s -= m if all_finite else xp.where(finite, m, 0).astype(s.dtype)
    xp.exp(s, out=s)
    z = s.sum(axis=-1, keepdims=True)
    if safe and not all_finite:
        z[m == -np.inf] = 1        # their exps are all 0: the row becomes 0
    s /= z
    return s


class ScaledDotProductAttention(Primitive):
    """``apply(q, k, v, bias, dropout_mask, scale, safe)``.

    ``bias`` (broadcasting to the scores, or None) is added after scaling;
    ``dropout_mask`` (scores-shaped, already divided by ``1 - p``, or None) multiplies
    the weights. Gradients flow to q, k, v and a floating ``bias``.
    """
    _node_name = "ScaledDotProductFlashAttentionForCpuBackward0"
    broadcasts = True
    save_inputs = (0, 1, 2, 3)

    def forward(self, q, k, v, bias, dmask, scale, safe):
        self.scale, self.safe, self.dmask = scale, safe, dmask
        a = self._weights(q, k, bias)
        self.a = a
        return np.matmul(a if dmask is None else a * dmask, v)

    def _weights(self, q, k, bias):
        s = np.matmul(q, k.swapaxes(-1, -2))
        if self.scale != 1:
            s *= self.scale
        if bias is not None:
            s += bias
        if s.size:
            _softmax_rows_(s, self.safe)
        return s

    def backward(self, gy):
        q, k, v, bias = self.saved_tensors
        if _grad_state.grad_enabled:
            return self._backward_recorded(gy, q, k, v, bias)
        a = self.a
        if a is None:    # a second pass through a retained graph
            a = self._weights(q._data, k._data, None if bias is None else bias._data)
        self.a = None
        eq, ek, ev, eb = self._edges[:4]
        g, dm, scale = gy._data, self.dmask, self.scale
        gq = gk = gv = gb = None
        if ev is not None:
            gv = _make(np.matmul((a if dm is None else a * dm).swapaxes(-1, -2), g))
        if eq is None and ek is None and eb is None:
            return gq, gk, gv, gb, None, None, None
        gs = np.matmul(g, v._data.swapaxes(-1, -2))      # d loss / d weights
        if dm is not None:
            gs *= dm
        # softmax backward: a * (gs - sum(gs * a)), in place on gs
        gs -= np.einsum("...ij,...ij->...i", gs, a)[..., None]
        gs *= a
        if eq is not None:
            gq = np.matmul(gs, k._data)
            gq *= scale
            gq = _make(gq)
        if ek is not None:
            gk = np.matmul(gs.swapaxes(-1, -2), q._data)
            gk *= scale
            gk = _make(gk)
        if eb is not None:
            gb = _make(gs)
        return gq, gk, gv, gb, None, None, None

    def _backward_recorded(self, gy, q, k, v, bias):
        """The same formulas in differentiable ember ops, from the saved inputs."""
        import ember
        s = ember.matmul(q, k.transpose(-2, -1)) * self.scale
        if bias is not None:
            s = s + bias
        a = s
        if s.numel():
            rows = None
            if self.safe:
                rows = (s.detach() == float("-inf")).all(-1, keepdim=True)
                rows = rows if bool(rows.any()) else None
            if rows is None:
                a = ember.softmax(s, -1)
            else:
                zero = ember.zeros((), dtype=s.dtype, device=s.device)
                a = ember.where(rows, zero, ember.softmax(ember.where(rows, zero, s), -1))
        dm = None if self.dmask is None else _make(self.dmask)
        ad = a if dm is None else a * dm
        eq, ek, ev, eb = self._edges[:4]
        gv = ad.transpose(-2, -1).matmul(gy) if ev is not None else None
        ga = gy.matmul(v.transpose(-2, -1))
        if dm is not None:
            ga = ga * dm
        gs = a * (ga - (ga * a).sum(-1, keepdim=True))
        gq = gs.matmul(k) * self.scale if eq is not None else None
        gk = gs.transpose(-2, -1).matmul(q) * self.scale if ek is not None else None
        gb = gs if eb is not None else None
        return gq, gk, gv, gb, None, None, None


def scaled_dot_product_attention(q, k, v, bias, dropout_mask, scale, safe):
    """The attention output as one node (arguments as :class:`ScaledDotProductAttention`)."""
    return ScaledDotProductAttention.apply(q, k, v, bias, dropout_mask, scale, safe)
