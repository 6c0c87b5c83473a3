"""The LSTM's per-step elementwise work as two numba kernels (the ``ember[fast]`` extra).

Imported lazily by ``ember.ops.rnn`` the first time a float32 LSTM layer runs on NumPy
arrays (numba's import takes about a second, so never at ``import ember``); without
numba that import fails and the NumPy loop runs unchanged.

Each time step of ``_lstm_forward_np`` is one BLAS product (``h @ W_hh^T``, NumPy)
followed by :func:`forward_step`: the four gate nonlinearities, the cell update,
``tanh(c)`` and ``o * tanh(c)`` row by row (a loop per quantity), writing the same
whole-sequence buffers the NumPy loop writes. Each step of ``_lstm_backward_np`` is
:func:`backward_step` (the gate derivatives and the carried cell gradient in one pass)
followed by one BLAS product (``dG @ W_hh``).

Over a padded batch without projection, :func:`forward_seq` and :func:`backward_seq` run
every time step in one call: the same per-step arithmetic, with each step's product
called from numba on the BLAS ``ember.backend.gemm`` would use (``ember.ops._rnn_blas``),
so the loop's Python (dispatch, slicing, ~10 us a step) is gone; the bias is added in the
forward kernel and the previous cell states are a view of the states' buffer.

The backward kernel performs the NumPy loop's float32 operations in the same order, so
given the same activations its gradients are the NumPy loop's to the bit. The forward
needs ``exp`` and ``tanh``: numba would call the C library's scalar ``expf``/``tanhf``
for each element (measured 4x and 50x slower than NumPy's SIMD loops on a (32, 512)
block), so they are written here as polynomials LLVM vectorizes. ``exp`` reduces its
argument to ``r`` in [-ln2/2, ln2/2] (``x = n ln2 + r``, ln2 split in two parts so that
``n * hi`` is exact), evaluates a degree-6 polynomial fitted to ``exp`` on that interval
(Chebyshev nodes) and scales by ``2**n`` built in the exponent bits; its relative error
is under 2 float32 ulps. ``tanh`` is ``(1 - e) / (1 + e)`` with ``e = exp(-2|x|)`` for
``|x| >= 0.5`` and an odd polynomial (degree 9, fitted the same way) below, where the
quotient would cancel. Sigmoid is ``1 / (1 + exp(-x))``. The results differ from
NumPy's by an ulp or two, well inside PyTorch's float32 tolerances.
"""
import numba  # noqa: F401  (first: without numba this module fails to import at once)
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.core.extending import intrinsic

from ember.backend.numba_jit import njit as _jit
from ember.ops._rnn_blas import sgemm, transpose  # noqa: F401  (the kernels' BLAS)

try:  # numba loads SciPy's own OpenBLAS at its first compile or cache load; loading it
    # now lets ember's thread control (refresh_blas, single_blas) find and set it
    import scipy.linalg.cython_blas  # noqa: F401
except ImportError:
    pass

__all__ = ["forward_step", "backward_step", "forward_seq", "backward_seq", "sgemm", "transpose",
           "CACHED"]

_F = np.float32
_ROW_MAJOR, _NO_TRANS = 101, 111  # CBLAS's enums
_ONE, _HALF, _MTWO = _F(1.0), _F(0.5), _F(-2.0)
# exp: inputs clamped so that 2**n stays a normal float32 (n in [-126, 127])
_EXP_LO, _EXP_HI = _F(-87.0), _F(88.0)
_LOG2E = _F(1.4426950408889634)
_LN2_HI = _F(0.693359375)  # 355/512: 9 significant bits, so n * _LN2_HI is exact
_LN2_LO = _F(np.log(2.0) - 0.693359375)
_E2, _E3, _E4, _E5, _E6 = (_F(0.5), _F(0.16666415), _F(0.041666217), _F(0.008375129),
                           _F(0.0013948581))
# tanh(x) = x + x u P(u), u = x**2, for |x| < 0.5
_T0, _T1, _T2, _T3, _T4 = (_F(-0.3333333), _F(0.13333227), _F(-0.053933788),
                           _F(0.02147272), _F(-0.006947004))




# the forward's polynomials may fuse a multiply and an add into one FMA (more accurate,
# and half the instructions); the backward keeps NumPy's separate roundings
_fwd_jit = _jit(fastmath={"contract"})


@intrinsic
def _pow2(typingctx, k):
    """``2.0 ** k`` as float32 for an int32 ``k`` in [-126, 127]: the biased exponent
    written into the bits (a shift and a bit cast, which vectorize)."""
    def codegen(context, builder, signature, args):
        i32 = ir.IntType(32)
        bits = builder.shl(builder.add(args[0], ir.Constant(i32, 127)), ir.Constant(i32, 23))
        return builder.bitcast(bits, ir.FloatType())
    return types.float32(types.int32), codegen


@_fwd_jit
def _exp(x):
    x = _EXP_HI if x > _EXP_HI else x  # NaN passes both comparisons unchanged
    x = _EXP_LO if x < _EXP_LO else x
    n = np.floor(x * _LOG2E + _HALF)
    r = x - n * _LN2_HI
    r = r - n * _LN2_LO
    p = ((((_E6 * r + _E5) * r + _E4) * r + _E3) * r + _E2) * r
    p = (p + _ONE) * r + _ONE
    k = np.int32(n) if n == n else np.int32(0)  # NaN: p is NaN already
    return p * _pow2(k)


@_fwd_jit
def _sigmoid(x):
    return _ONE / (_ONE + _exp(-x))


@_fwd_jit
def _tanh(x):
    a = abs(x)
    e = _exp(_MTWO * a)
    big = (_ONE - e) / (_ONE + e)
    big = big if x >= 0 else -big
    u = x * x
    small = x + x * u * ((((_T4 * u + _T3) * u + _T2) * u + _T1) * u + _T0)
    return small if a < _HALF else big


@_fwd_jit
def forward_step(S, P, h, c, C, TC, Cp, Hp, M, o):
    """One LSTM step over rows ``o:o+n`` of the sequence buffers, ``n = len(h)``.

    ``S`` holds the input projections (bias added) and receives the activations
    ``i, f, g, o``; ``P`` is ``h @ W_hh^T``; ``h``, ``c`` are the previous state (copied
    into ``Hp``, ``Cp``); ``C``, ``TC``, ``M`` receive ``c'``, ``tanh(c')`` and
    ``o * tanh(c')`` (``M`` is the output unless there is a projection)."""
    _forward_rows(S, P, h, 0, c, 0, C, TC, Cp, Hp, M, o, c.shape[0])


@_fwd_jit
def _forward_rows(S, P, h, hr, c, cr, C, TC, Cp, Hp, M, o, n):
    """:func:`forward_step` with the previous state read from rows ``hr:hr+n`` of ``h``
    and ``cr:cr+n`` of ``c`` (the sequence buffers themselves, after the first step)."""
    H = C.shape[1]
    # one loop per quantity: a loop that reads the state while writing the new one (a
    # view of the same buffer one step on) does not vectorize
    for r in range(n):
        row = o + r
        for j in range(h.shape[1]):
            Hp[row, j] = h[hr + r, j]
        for j in range(H):
            S[row, j] = _sigmoid(S[row, j] + P[r, j])
        for j in range(H):
            S[row, H + j] = _sigmoid(S[row, H + j] + P[r, H + j])
        for j in range(H):
            S[row, 2 * H + j] = _tanh(S[row, 2 * H + j] + P[r, 2 * H + j])
        for j in range(H):
            S[row, 3 * H + j] = _sigmoid(S[row, 3 * H + j] + P[r, 3 * H + j])
        for j in range(H):
            Cp[row, j] = c[cr + r, j]
        for j in range(H):
            C[row, j] = S[row, H + j] * Cp[row, j] + S[row, 2 * H + j] * S[row, j]
        for j in range(H):
            TC[row, j] = _tanh(C[row, j])
        for j in range(H):
            M[row, j] = S[row, 3 * H + j] * TC[row, j]


@_jit
def _product(gemm, nc, m, n, k, a, lda, b, ldb, c, ldc):
    """``C = A @ B`` (row-major, addresses and leading dimensions) by ``gemm`` in column
    blocks of ``nc`` (:func:`sgemm` says why)."""
    one, zero = np.float32(1.0), np.float32(0.0)
    for j in range(0, n, nc):
        w = min(nc, n - j)
        gemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, w, k, one, a, lda, b + 4 * j, ldb, zero,
             c + 4 * j, ldc)


@_fwd_jit
def forward_seq(gemm, nc, S, bias, P, w_hhT, h0, CC, TC, Hp, M, B, reverse, r0, nb):
    """Every step of a padded batch (``B`` rows a step, no projection) in one call, for
    the rows ``r0:r0+nb`` of each step (the whole batch, or one block of it: rows are
    independent, so blocks run at once on two threads, ``ember.ops.rnn_lstm_seq``).

    ``S`` holds the input projections without their bias (``bias``, added here as the
    per-step loop adds it before the step) and receives the activations; ``CC`` holds
    the cell state of every step and the first one -- ``c0`` in its first ``B`` rows
    (last, ``reverse``), step ``t``'s ``c`` in the block after (before) it --, so the
    previous state is a view of it, not a copy; ``TC``, ``Hp``, ``M`` as in
    :func:`forward_step`. The recurrent product ``h @ W_hh^T`` of the block's rows runs
    by ``gemm`` (a BLAS ``cblas_sgemm``, ``ember.ops._rnn_blas.sgemm``) in column blocks
    of ``nc`` into ``P`` (``nb`` rows): the per-step loop's float32 operations in the same
    order, without its Python."""
    T = S.shape[0] // B
    G = S.shape[1]
    H = TC.shape[1]
    Hs = M.shape[1]
    # the blocks of CC that step t reads (prev) and writes (cur)
    prev_off, cur_off = (B, 0) if reverse else (0, B)
    for k in range(T):
        t = T - 1 - k if reverse else k
        o = t * B + r0
        if k == 0:
            h, hr = h0, r0
        else:
            h, hr = M, o + B if reverse else o - B
        _product(gemm, nc, nb, G, Hs, h.ctypes.data + hr * h.strides[0], Hs,
                 w_hhT.ctypes.data, G, P.ctypes.data, G)
        for r in range(nb):
            row = o + r
            for j in range(Hs):
                Hp[row, j] = h[hr + r, j]
            for j in range(H):
                S[row, j] = _sigmoid(S[row, j] + bias[j] + P[r, j])
            for j in range(H):
                S[row, H + j] = _sigmoid(S[row, H + j] + bias[H + j] + P[r, H + j])
            for j in range(H):
                S[row, 2 * H + j] = _tanh(S[row, 2 * H + j] + bias[2 * H + j] + P[r, 2 * H + j])
            for j in range(H):
                S[row, 3 * H + j] = _sigmoid(S[row, 3 * H + j] + bias[3 * H + j] + P[r, 3 * H + j])
            cp, cc = row + prev_off, row + cur_off
            for j in range(H):
                CC[cc, j] = S[row, H + j] * CC[cp, j] + S[row, 2 * H + j] * S[row, j]
            for j in range(H):
                TC[row, j] = _tanh(CC[cc, j])
            for j in range(H):
                M[row, j] = S[row, 3 * H + j] * TC[row, j]


@_jit
def backward_step(dG, S, TC, Cp, dh, gy, add_gy, dc, dc_out, o):
    """The gate gradients of rows ``o:o+n`` into ``dG`` and the cell gradient carried to
    the previous step into ``dc_out``, from ``dh`` (plus ``gy``'s rows when ``add_gy``)
    and ``dc``; the same float32 operations in the same order as ``_lstm_backward_np``."""
    n, H = dc_out.shape
    for r in range(n):
        row = o + r
        for j in range(H):
            d = dh[r, j] + gy[row, j] if add_gy else dh[r, j]
            i = S[row, j]
            f = S[row, H + j]
            g = S[row, 2 * H + j]
            og = S[row, 3 * H + j]
            tc = TC[row, j]
            dct = (_ONE - tc * tc) * og * d + dc[r, j]
            dG[row, j] = dct * g * ((_ONE - i) * i)
            dG[row, H + j] = dct * Cp[row, j] * ((_ONE - f) * f)
            dG[row, 2 * H + j] = dct * i * (_ONE - g * g)
            dG[row, 3 * H + j] = d * tc * ((_ONE - og) * og)
            dc_out[r, j] = dct * f


@_jit
def backward_seq(gemm, nc, dG, S, TC, Cp, w_hh, gy, ghn, gcn, dh, dc, dc2, B, reverse, dh0,
                 r0):
    """Every step of :func:`forward_seq`'s backward in one call, for the rows
    ``r0:r0+nb`` of each step, ``nb = len(dh)``: :func:`backward_step`, then ``dh = dG_t
    @ W_hh`` by ``gemm``. ``ghn``/``gcn`` are the block's rows of the last state's
    gradients; ``dh`` receives the first state's, and ``dc`` or ``dc2`` (the two take
    turns) the first cell's: the returned one. Without ``dh0`` the first state's
    gradient is not needed and its product is skipped (``dh`` is left undefined)."""
    T = S.shape[0] // B
    G = S.shape[1]
    H = TC.shape[1]
    nb = dh.shape[0]
    for k in range(T):
        t = k if reverse else T - 1 - k
        o = t * B + r0
        d_in = ghn if k == 0 else dh
        c_in = gcn if k == 0 else (dc2 if k % 2 == 0 else dc)
        c_out = dc if k % 2 == 0 else dc2
        backward_step(dG, S, TC, Cp, d_in, gy, True, c_in, c_out, o)
        if k == T - 1 and not dh0:
            break
        _product(gemm, nc, nb, H, G, dG.ctypes.data + o * dG.strides[0], G, w_hh.ctypes.data,
                 H, dh.ctypes.data, H)
    return dc if (T - 1) % 2 == 0 else dc2


CACHED = forward_step._cache.__class__.__name__ != "NullCache"
