"""Layer norm's rows (normalized over the trailing dims, float32) as two numba kernels
(the ``ember[fast]`` extra), beside the NumPy blocks of ``ember.ops.norm_layouts``.

Imported lazily the first time a float32 layer norm runs on NumPy arrays (numba's import
takes about a second, so never at ``import ember``); without numba that import fails and
the NumPy blocks run unchanged.

NumPy makes one pass over memory per operation (six in forward, eight in backward);
these kernels make one pass per row while the row is in the L1 cache. They do the
NumPy blocks' float32 operations in the same order element by element -- ``(x - mean) *
rstd * w + b`` forward; ``(g * w) * rstd - xc * (rstd**3 * c / D) - rstd * a / D``
backward, with ``a = sum(g * w)`` and ``c = sum(g * w * xc)`` -- so the outputs differ
from the NumPy path's only through the row sums (BLAS's order there; here vector lanes,
the mean's sum in float64), by an ulp or two. The weight's and bias's gradients, sums
over the rows, are accumulated in float64 and rounded once per block.
"""
import numba  # noqa: F401  (first: without numba this module fails to import at once)
import numpy as np

from ember.backend.numba_jit import njit as _jit

try:  # numba loads SciPy's own OpenBLAS at its first compile or cache load; loading it
    # now lets ember's thread control (refresh_blas, single_blas) find and set it
    import scipy.linalg.cython_blas  # noqa: F401
except ImportError:
    pass

__all__ = ["forward_rows", "backward_rows"]

# the row sums may be reassociated (summed in vector lanes); nothing else is
_sum_jit = _jit(fastmath={"reassoc"})


@_sum_jit
def _sum(x, n):
    s = 0.0
    for j in range(n):
        s += np.float64(x[j])
    return s


@_sum_jit
def _sum_sq_centred(x, m, n):
    s = np.float32(0.0)
    for j in range(n):
        d = x[j] - m
        s += d * d
    return s


@_sum_jit
def _sum_prod(a, b, n):
    s = np.float32(0.0)
    for j in range(n):
        s += a[j] * b[j]
    return s


@_sum_jit
def _sum_prod_centred(g, w, x, m, n):
    s = np.float32(0.0)
    for j in range(n):
        s += (g[j] * (x[j] - m)) * w[j]
    return s


@_jit
def forward_rows(x, w, b, has_b, eps, out, mean, var):
    """Rows of ``x`` (M, D) normalized into ``out``, times ``w`` (ones when there is no
    weight) plus ``b`` (when ``has_b``); the row means and biased variances into
    ``mean`` and ``var``."""
    M, D = x.shape
    inv_d = np.float32(D)
    eps = np.float32(eps)
    for i in range(M):
        xi = x[i]
        oi = out[i]
        m = np.float32(_sum(xi, D)) / inv_d
        v = np.float32(_sum_sq_centred(xi, m, D)) / inv_d
        r = np.float32(1.0) / np.sqrt(v + eps)
        if has_b:
            for j in range(D):
                oi[j] = (xi[j] - m) * r * w[j] + b[j]
        else:
            for j in range(D):
                oi[j] = (xi[j] - m) * r * w[j]
        mean[i] = m
        var[i] = v


@_jit
def backward_rows(g, x, w, mean, rstd, gx, gw, gb, need_x, need_w, need_b):
    """Gradients of rows ``x`` (M, D) from ``g``: the input's into ``gx`` (when
    ``need_x``), the weight's and bias's sums over these rows into ``gw`` and ``gb``
    (when asked)."""
    M, D = x.shape
    fd = np.float32(D)
    aw = np.zeros(D, np.float64)
    ab = np.zeros(D, np.float64)
    for i in range(M):
        gi = g[i]
        xi = x[i]
        m = mean[i]
        r = rstd[i]
        if need_b:
            for j in range(D):
                ab[j] += gi[j]
        if need_w:
            for j in range(D):
                aw[j] += r * (gi[j] * (xi[j] - m))
        if need_x:
            a = np.float32(_sum_prod(gi, w, D))
            c = np.float32(_sum_prod_centred(gi, w, xi, m, D))
            k1 = r * r * r * c / fd
            k2 = r * a / fd
            oi = gx[i]
            for j in range(D):
                oi[j] = gi[j] * w[j] * r - (xi[j] - m) * k1 - k2
    if need_w:
        for j in range(D):
            gw[j] = aw[j]
    if need_b:
        for j in range(D):
            gb[j] = ab[j]
