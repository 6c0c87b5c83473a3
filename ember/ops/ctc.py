"""Connectionist temporal classification loss (``F.ctc_loss``): the per-sample negative
log likelihood of the targets under all alignments, by the forward (alpha) recursion in
log space, and its gradient from the alpha and beta recursions.

The gradient is PyTorch's: ``exp(log_probs) - posterior`` per frame and class. That is
the gradient with respect to the logits of a ``log_softmax`` rather than with respect
to ``log_probs`` itself, and it gives the same result once it has gone back through a
``log_softmax`` (the usual producer of ``log_probs``). Frames past a sample's input
length get zero gradient. Like PyTorch's, the loss is differentiable once.
"""
import numpy as np

from ember._tensor import _make
from ember.autograd.node import Primitive

__all__ = ["ctc_nll"]


def _lse3(a, b, c):
    m = np.maximum(np.maximum(a, b), c)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(a - safe) + np.exp(b - safe) + np.exp(c - safe)) + safe


def _shift(x, k):
    """``x`` moved ``k`` places along the last axis (right for k > 0), -inf filled."""
    out = np.full_like(x, -np.inf)
    if k > 0:
        out[..., k:] = x[..., :-k]
    else:
        out[..., :k] = x[..., -k:]
    return out


class CtcNll(Primitive):
    """Per-sample CTC negative log likelihood of ``log_probs`` (T, N, C)."""

    _node_name = "CtcLossBackward0"

    def forward(self, lp, ext, target_lengths, input_lengths, blank, zero_infinity):
        T, N, C = lp.shape
        S = ext.shape[1]
        lp64 = lp.astype(np.float64)
        L = target_lengths
        n_idx = np.arange(N)[:, None]
        emit = lp64[:, n_idx, ext]  # (T, N, S): log prob of each extended label
        s_idx = np.arange(S)[None, :]
        valid = s_idx < (2 * L + 1)[:, None]
        # [:, :S]: with empty targets (S == 1) the padding alone is wider than ext
        prev2 = np.concatenate([np.full((N, 2), -1), ext[:, :-2]], axis=1)[:, :S]
        skip = (s_idx >= 2) & (ext != blank) & (ext != prev2)
        alpha = np.full((T, N, S), -np.inf)
        if T:
            alpha[0, :, 0] = emit[0, :, 0]
            if S > 1:
                alpha[0, :, 1] = np.where(L > 0, emit[0, :, 1], -np.inf)
            alpha[0][~valid] = -np.inf
        for t in range(1, T):
            a = alpha[t - 1]
            a2 = np.where(skip, _shift(a, 2), -np.inf)
            alpha[t] = np.where(valid, _lse3(a, _shift(a, 1), a2) + emit[t], -np.inf)
        last = np.maximum(input_lengths - 1, 0)
        end = alpha[last, np.arange(N), 2 * L]
        end1 = np.where(L > 0, alpha[last, np.arange(N), np.maximum(2 * L - 1, 0)], -np.inf)
        nll = -np.logaddexp(end, end1)
        if zero_infinity:
            self.inf = np.isinf(nll)
            nll = np.where(self.inf, 0.0, nll)
        else:
            self.inf = None
        self.dtype = lp.dtype
        self.state = (lp64, ext, emit, alpha, valid, skip, L, input_lengths, nll)
        return nll.astype(lp.dtype)

    def _posterior_grad(self):
        lp64, ext, emit, alpha, valid, skip, L, input_lengths, nll = self.state
        T, N, S = emit.shape
        C = lp64.shape[2]
        beta = np.full((T, N, S), -np.inf)
        skip_next = np.zeros_like(skip)  # whether s may jump to s + 2
        skip_next[:, :-2] = skip[:, 2:]
        rows = np.arange(N)
        for t in range(T - 1, -1, -1):
            if t + 1 < T:
                b = beta[t + 1]
                b2 = np.where(skip_next, _shift(b, -2), -np.inf)
                rec = _lse3(b, _shift(b, -1), b2) + emit[t]
            else:
                rec = np.full((N, S), -np.inf)
            start = np.full((N, S), -np.inf)
            start[rows, 2 * L] = emit[t, rows, 2 * L]
            has = L > 0
            start[rows[has], 2 * L[has] - 1] = emit[t, rows[has], 2 * L[has] - 1]
            init = (t == input_lengths - 1)[:, None]
            inside = (t < input_lengths - 1)[:, None]
            beta[t] = np.where(valid, np.where(init, start, np.where(inside, rec, -np.inf)),
                               -np.inf)
        ab = alpha + beta - emit  # log of the probability mass through (t, s)
        m = ab.max(axis=2, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        acc = np.zeros((T, N, C))
        t_idx = np.arange(T)[:, None, None]
        n_idx = rows[None, :, None]
        np.add.at(acc, (t_idx, n_idx, np.broadcast_to(ext, (T, N, S))), np.exp(ab - m))
        with np.errstate(divide="ignore"):
            lcab = np.log(acc) + m
        raw_nll = nll if self.inf is None else np.where(self.inf, np.inf, nll)
        grad = np.exp(lp64) - np.exp(lcab + raw_nll[None, :, None])
        grad[np.arange(T)[:, None] >= input_lengths[None, :]] = 0.0
        if self.inf is not None:
            grad[:, self.inf] = 0.0
        return grad

    def backward(self, gy):
        g = _make(self._posterior_grad().astype(self.dtype), False)
        return (g * gy.unsqueeze(0).unsqueeze(-1),) + (None,) * 5


def ctc_nll(log_probs, ext, target_lengths, input_lengths, blank, zero_infinity):
    """Per-sample CTC loss (N,) of ``log_probs`` (T, N, C); ``ext`` (N, 2*S+1) are the
    targets interleaved with blanks, lengths are int64 arrays."""
    return CtcNll.apply(log_probs, ext, target_lengths, input_lengths, blank, zero_infinity)
