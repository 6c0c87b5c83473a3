"""Attention's softmax over the key axis as numba kernels (the ``ember[fast]`` extra),
beside the NumPy passes of ``ember.ops.attention``.

The attention weights are stored with each matrix transposed (``[..., S, L]``, see
``attention._scores_layout``), so as a 3-D ``(B, S, L)`` array each softmax runs down a
column of one matrix: the kernels sweep rows of ``L`` contiguous elements, the running
maxima, sums and dot products held in one vector of ``L``. Forward is three passes over
the scores (maxima of the scaled scores; ``exp`` and the sums; the division); backward ``a * (gs -
sum(gs * a))`` is two. (Without numba, ``ember.ops.attention`` scales q instead of the
scores and, where every score lies within +-64, takes ``exp`` without the maxima, the sums
as BLAS products.)

``exp`` is the LSTM kernels' polynomial (``ember.ops._lstm_numba``: under 2 float32 ulps
from NumPy's), exactly 0 below -87.3 (where NumPy's gives at most a subnormal), so masked
keys keep weight 0. Everything else is NumPy's float32 operations in NumPy's order; the
sums run in the same column order as NumPy's reduction over the outer axis.
"""
import numba  # noqa: F401  (first: without numba this module fails to import at once)
import numpy as np

from ember.backend.numba_jit import njit as _jit
from ember.ops._lstm_numba import _EXP_LO, _exp

__all__ = ["softmax_columns", "softmax_backward_columns"]

_ZERO = np.float32(0.0)


@_jit
def softmax_columns(s, scale, m, z):
    """Softmax of ``s * scale`` (float32, rounded as NumPy's product) down each column of
    each matrix of the float32 (B, S, n) array ``s``, in place, with ``m`` (B, n) and
    ``z`` (n,) scratch. Returns False, having changed nothing, when a column's maximum is
    not finite (the caller's NumPy code has the rules for those)."""
    B, S, n = s.shape
    ok = True
    for b in range(B):
        for j in range(n):
            m[b, j] = s[b, 0, j] * scale
        for i in range(1, S):
            for j in range(n):
                v = s[b, i, j] * scale
                m[b, j] = v if v > m[b, j] else m[b, j]
        for j in range(n):
            ok &= np.isfinite(m[b, j])
    if not ok:
        return False
    for b in range(B):
        for j in range(n):
            z[j] = _ZERO
        for i in range(S):
            for j in range(n):
                d = s[b, i, j] * scale - m[b, j]
                e = _ZERO if d < _EXP_LO else _exp(d)
                s[b, i, j] = e
                z[j] += e
        for i in range(S):
            for j in range(n):
                s[b, i, j] /= z[j]
    return True


@_jit
def softmax_backward_columns(gs, a, t):
    """``gs = a * (gs - sum(gs * a))`` down each column of each matrix of the float32
    (B, S, n) arrays, in place, with ``t`` (n,) scratch."""
    B, S, n = gs.shape
    for b in range(B):
        for j in range(n):
            t[j] = _ZERO
        for i in range(S):
            for j in range(n):
                t[j] += gs[b, i, j] * a[b, i, j]
        for i in range(S):
            for j in range(n):
                gs[b, i, j] = (gs[b, i, j] - t[j]) * a[b, i, j]
