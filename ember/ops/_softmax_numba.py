"""Attention's softmax over the key axis as numba kernels (the ``ember[fast]`` extra),
beside the NumPy passes of ``ember.ops.attention``, for either layout of the scores:
``softmax_columns`` / ``softmax_backward_columns`` where they are stored transposed,
``softmax_rows`` / ``softmax_backward_rows`` where they are row-major (OpenBLAS's
Haswell kernels, on which writing through the transpose does not keep the bits).

Where the attention weights are stored with each matrix transposed (``[..., S, L]``, see
``attention._scores_layout``), as a 3-D ``(B, S, L)`` array each softmax runs down a
column of one matrix: the kernels sweep rows of ``L`` contiguous elements, the running
maxima, sums and dot products held in one vector of ``L``. Forward is three passes over
the scores (maxima of the scaled scores; ``exp`` and the sums; the division); backward ``a * (gs -
sum(gs * a))`` is two. (Without numba, ``ember.ops.attention`` scales q instead of the
scores and, where every score lies within +-64, takes ``exp`` without the maxima, the sums
as BLAS products.)

``exp`` is the LSTM kernels' polynomial (``ember.ops._lstm_numba``: under 2 float32 ulps
from NumPy's), exactly 0 below -87.3 (where NumPy's gives at most a subnormal), so masked
keys keep weight 0. Everything else is NumPy's float32 operations in NumPy's order; the
column kernels' sums run in the same order as NumPy's reduction over the outer axis, the
row kernels' in vector lanes. Along rows, a row whose scaled scores all lie within +-64
takes ``exp`` of them without its maximum subtracted (NumPy's direct route: no rounding
of the subtraction, closer to float64's weights), and the division is a division.
"""
import numba  # noqa: F401  (first: without numba this module fails to import at once)
import numpy as np

from ember.backend.numba_jit import njit as _jit
from ember.ops._lstm_numba import _EXP_LO, _exp

__all__ = ["softmax_columns", "softmax_backward_columns", "softmax_rows",
           "softmax_backward_rows"]

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


# row-major scores (``attention._scores_array`` where writing through the transpose does
# not keep ``q @ k^T``'s bits: OpenBLAS's Haswell kernels, AMD's Zen): the softmax runs
# along contiguous rows. A row's sums may be reassociated (summed in vector lanes, as
# NumPy's own pairwise sum and BLAS's row sums are); nothing else is.
_sum_jit = _jit(fastmath={"reassoc"})
_DIRECT, _INF = np.float32(64.0), np.float32(np.inf)


# a row's extremes of the scaled scores. A NaN first stays (the row's maximum is then
# not finite: NumPy's passes); a NaN after it is passed over here and carried by the
# pass of ``exp`` into the row's sum, so the row comes out NaN either way, as torch's.
# (Letting LLVM assume no NaN would vectorize this loop: 4 % of the kernel, measured,
# for an answer that would depend on the compiler; not taken.)
@_jit
def _row_range(x, n, scale):
    hi = x[0] * scale
    lo = hi
    for j in range(1, n):
        v = x[j] * scale
        hi = v if v > hi else hi
        lo = v if v < lo else lo
    return hi, lo


@_sum_jit
def _row_sum(x, n):
    z = _ZERO
    for j in range(n):
        z += x[j]
    return z


@_sum_jit
def _row_dot(a, b, n):
    t = _ZERO
    for j in range(n):
        t += a[j] * b[j]
    return t


@_jit
def softmax_rows(s, scale, m):
    """Softmax of ``s * scale`` (float32, rounded as NumPy's product) along each row of
    the C-contiguous float32 (R, n) array ``s``, in place, with ``m`` (R,) scratch:
    ``exp``, the row's sum, a division. A row whose scaled scores all lie within +-64
    takes ``exp`` of them as they are (NumPy's direct softmax: neither overflow nor a
    subnormal, and no rounding of a subtraction); another has its maximum subtracted
    first (``m[i]``; 0 marks a direct row). Returns False, having changed nothing, when
    a row's maximum is not finite (the caller's NumPy code has the rules for those)."""
    R, n = s.shape
    ok = True
    for i in range(R):
        hi, lo = _row_range(s[i], n, scale)
        ok &= np.isfinite(hi)
        m[i] = _INF if hi <= _DIRECT and lo >= -_DIRECT else hi
    if not ok:
        return False
    for i in range(R):
        si = s[i]
        mi = m[i]
        if mi == _INF:
            for j in range(n):
                si[j] = _exp(si[j] * scale)
        else:
            for j in range(n):
                d = si[j] * scale - mi
                si[j] = _ZERO if d < _EXP_LO else _exp(d)
        z = _row_sum(si, n)
        for j in range(n):
            si[j] /= z
    return True


@_jit
def softmax_backward_rows(gs, a):
    """``gs = (gs - sum(gs * a)) * a`` along each row of the C-contiguous float32 (R, n)
    arrays, in place."""
    R, n = gs.shape
    for i in range(R):
        gi = gs[i]
        ai = a[i]
        t = _row_dot(gi, ai, n)
        for j in range(n):
            gi[j] = (gi[j] - t) * ai[j]
