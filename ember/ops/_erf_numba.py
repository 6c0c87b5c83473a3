"""erf, erfc and the GELU (exact and tanh; forward and backward) as numba kernels (the
``ember[fast]`` extra), giving the same bits as the NumPy path of
:mod:`ember.ops._erf_kernels`; erfinv's are :mod:`ember.ops._erfinv_numba`, built on the
pieces here (the fits' evaluation, the exponential, the rounding check).

Imported lazily by ``_erf_kernels`` the first time a large enough float32 or float64
array needs one of them (numba's import takes about a second); without numba that
import fails and the NumPy path runs.

Each kernel performs the NumPy path's float64 (or float32) operations in the same
order on each element: the same fitted pieces, the same ``u = (v - c) * (1 / h)``
and Horner steps, each multiply and add rounded on its own (numba compiles without
``fastmath``, so nothing is contracted into a fused multiply-add; tests check the
machine code). What the float64 kernels do not compute themselves is ``exp`` and
``log``: NumPy's own (SIMD) ``exp``/``log`` differ from the C library's in the last bit
of a few percent of float64 values, so each kernel is split around them, and NumPy's run
on a cache-sized buffer of arguments in between (``exp`` of erfc's 4-bit head takes 437
values only: NumPy computes them once, into a table). Everything else — the pieces,
selects, sign handling and rounding to the result's dtype — is fused into one pass per
side, instead of the NumPy path's twenty-odd passes.

float32 erf (and with it the exact GELU's forward) is float32 arithmetic in both paths
(``_k._ERF32_PIECES``): one loop of the NumPy path's float32 operations, each rounded on
its own. float32 erfc and erfinv run in a single pass with an exponential (and for
erfinv a logarithm) of their own: a float32 result needs only to round the same way,
and the few elements too close to a rounding midpoint to be sure of that are recomputed
by the NumPy path (see "float32 results in one pass" below). There, and only there, the
large-argument pieces of erfc and their exponential are evaluated by Estrin's scheme
with multiply-adds (``_mul_add``): their values are not the NumPy path's anyway; the
small-argument piece ``x A(x^2)``, whose values must be, keeps the NumPy path's
operations in a kernel of its own.

The exact GELU's float32 gradient takes ``exp(-x*x/2)`` from an exponential in float32
arithmetic (``_k.exp32_neg``, the same operations in ``_exp32_neg``), so it is one loop.
The tanh GELU's forward is two loops around NumPy's ``tanh`` (its bits), its first-order
gradient one loop from the kept ``tanh``: the composite's operations either way.

Every arithmetic loop vectorizes on AVX2 (4 float64 lanes) as well as on AVX-512: no
calls, no float-to-integer conversions (``np.floor``, not ``math.floor``, whose int64
result AVX2 converts lane by lane), no data-dependent branches (both sides and a
select); float32 erfc packs a block's large arguments first (``_pack_numba``: a
masked compress-store, and an expand-load to put their results back), so that each
element runs only its own piece.
"""
import math

import numba  # noqa: F401  (first: without numba this module fails to import at once)
import numpy as np
from llvmlite import ir as _ir
from numba.core import types as _types
from numba.core.extending import intrinsic as _intrinsic

from ember._random_numba import _bits as _f32_bits  # (float32 <-> int32 bit casts)
from ember._random_numba import _float as _bits_f32
from ember.backend.numba_jit import njit as _jit
from ember.ops import _erf_kernels as _k
from ember.ops._pack_numba import pack16, unpack16

__all__ = ["erf_erfc", "gelu", "gelu_backward", "gelu_tanh", "gelu_tanh_backward"]

_CHUNK = 16384  # elements per piece: the float64 buffers stay in the L2 cache


def _fit(fit):
    """``(c, 1/h, coefficients from the highest power)`` of one of ``_k``'s fits."""
    c, h, p = fit
    return c, 1.0 / h, np.array(p[::-1])


_A32_C, _A32_I, _A32_P = _fit(_k._A32)
_B32_C, _B32_I, _B32_P = _fit(_k._B32)
_C32_C, _C32_I, _C32_P = _fit(_k._C32)
_A64_C, _A64_I, _A64_P = _fit(_k._A64)
_B64_C, _B64_I, _B64_P = _fit(_k._B64)
_C64_C, _C64_I, _C64_P = _fit(_k._C64)
_CAP32, _CAP64 = _k._FITS[32][3], _k._FITS[64][3]
_MAX_HEAD = float(int(_CAP64 * 16.0))
_TWO_OVER_SQRT_PI = _k._TWO_OVER_SQRT_PI
_F32_SQRT_HALF = np.float32(1.0 / math.sqrt(2.0))
_F64_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)  # as ``activation_nodes``


@_jit(inline="always")
def _poly(v, c, ih, p):
    """``_k._poly``: ``u = (v - c) * ih``, then Horner from the highest power."""
    u = v - c
    u *= ih
    r = p[0]
    for j in range(1, p.size):
        r *= u
        r += p[j]
    return r


@_jit(inline="always")
def _horner(p, v):
    """``_k._horner`` (coefficients from the highest power)."""
    r = p[0]
    for j in range(1, p.size):
        r *= v
        r += p[j]
    return r


@_jit(inline="always")
def _cap(a, cap):
    """``np.minimum(a, cap)``: NaN stays NaN."""
    return a if (a < cap or a != a) else cap


# ----- float32 results in one pass, checked against rounding ---------------------------
# A float32 result only needs its float64 value to round to the same float32 as the
# NumPy path's float64 value. So the one-pass kernels compute ``exp`` themselves (not
# NumPy's bits: within a few float64 ulps of them), and flag each element whose float64
# value lies within ``_TOL`` float64 ulps of a point halfway between two float32 values:
# only there could the two values round apart. Flagged elements (about 2 * _TOL / 2**29
# of them: one in 260,000) are recomputed by the NumPy path. tools/check_erf32.py
# compares every float32 input with the NumPy path and measures the largest distance
# between the two values before rounding (79 ulps, far below _TOL); the small-argument
# piece ``x A(x^2)`` is computed with the NumPy path's own operations, so it needs none.
_TOL = 1 << 10
_HALF_BITS = 1 << 28  # the 29 bits a float64 drops when rounded to float32: the midpoint
_DROPPED = (1 << 29) - 1
_INV_LN2 = 1.4426950408889634
_LN2_HI = 0.6931471803691238  # (fdlibm's split: k * _LN2_HI is exact for |k| < 2**20)
_LN2_LO = 1.9082149292705877e-10
_SHIFT = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer, kept in the bits
_EXP_P = np.array([1.0 / math.factorial(k) for k in range(11, -1, -1)])
_F32_TINY = 2.0 ** -125  # below: float32 values 2**-149 apart (the bit check does not hold)
_F32_SUB_SCALE = 2.0 ** 149
_REL_TOL = _TOL * 2.0 ** -52  # relative: at least _TOL float64 ulps of any value


@_intrinsic
def _as_float64(typingctx, bits):
    """The float64 whose bit pattern is the int64 ``bits``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.DoubleType())
    return _types.float64(_types.int64), codegen


@_intrinsic
def _as_int64(typingctx, v):
    """The bit pattern of the float64 ``v`` as an int64."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.IntType(64))
    return _types.int64(_types.float64), codegen


@_intrinsic
def _mul_add(typingctx, a, b, c):
    """``a * b + c``, fused into one rounding where the processor has a fused multiply-add
    (LLVM's ``fmuladd``: either way, vectorized). Only in the float32 passes' own pieces,
    whose float64 values are checked against rounding, never in the NumPy path's steps."""
    def codegen(context, builder, signature, args):
        d = _ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fmuladd", [d], _ir.FunctionType(d, [d] * 3))
        return builder.call(fn, args)
    return _types.float64(_types.float64, _types.float64, _types.float64), codegen


def _lowest_first(p):
    """Coefficients from the highest power (``_fit``'s) as ``_estrin`` takes them."""
    q = np.ascontiguousarray(np.asarray(p)[::-1])
    assert q.size in (8, 11, 12, 14), q.size  # the sizes ``_estrin`` spells out
    return q


@_jit(inline="always")
def _estrin(q, u):
    """``q[0] + q[1] u + ... `` (8, 11, 12 or 14 coefficients, lowest power first) by
    Estrin's scheme: pairs ``q[k] + q[k+1] u`` combined with ``u**2``, ``u**4``,
    ``u**8``, a tree four multiply-adds deep instead of Horner's chain of 10-13 (with the
    exponential's the longest path through the loop: docs/performance/elementwise.md,
    "(tenth pass)")."""
    n = q.size
    u2 = u * u
    u4 = u2 * u2
    lo = _mul_add(_mul_add(q[3], u, q[2]), u2, _mul_add(q[1], u, q[0]))
    mid = _mul_add(_mul_add(q[7], u, q[6]), u2, _mul_add(q[5], u, q[4]))
    if n == 8:
        return _mul_add(mid, u4, lo)
    lo = _mul_add(mid, u4, lo)
    if n == 11:
        hi = _mul_add(q[10], u2, _mul_add(q[9], u, q[8]))
    elif n == 12:
        hi = _mul_add(_mul_add(q[11], u, q[10]), u2, _mul_add(q[9], u, q[8]))
    else:
        hi = _mul_add(_mul_add(q[13], u, q[12]), u4,
                      _mul_add(_mul_add(q[11], u, q[10]), u2, _mul_add(q[9], u, q[8])))
    return _mul_add(hi, u4 * u4, lo)


_EXP_Q = _lowest_first(_EXP_P)
_B32_Q = _lowest_first(_B32_P)
_C32_Q = _lowest_first(_C32_P)


@_jit(inline="always")
def _exp_neg(z):
    """``exp(z)`` for ``-700 < z <= 0`` (NaN stays NaN) to about 1e-15 relative:
    ``2**k exp(r)``, ``|r| <= ln(2) / 2``, ``exp(r)`` by its Taylor series to ``r**11``
    (Estrin's scheme); ``2**k`` is built in the exponent bits of ``t`` (a loop with no
    calls vectorizes)."""
    t = _mul_add(z, _INV_LN2, _SHIFT)
    k = t - _SHIFT
    r = _mul_add(k, -_LN2_HI, z)  # (k * _LN2_HI is exact: one rounding either way)
    r = _mul_add(k, -_LN2_LO, r)
    return _estrin(_EXP_Q, r) * _as_float64((_as_int64(t) + 1023) << 52)


@_jit(inline="always")
def _near_midpoint(v):
    """True where the float64 ``v`` (the size of a normal float32) lies within ``_TOL``
    float64 ulps of a value halfway between two float32 values."""
    return abs((_as_int64(v) & _DROPPED) - _HALF_BITS) <= _TOL


@_jit(inline="always")
def _erfc32_unsure(v):
    """``_near_midpoint`` for a float32 erfc ``v >= 0``, also below ``2**-125``: there the
    float32 values are ``2**-149`` apart (subnormals, then the first normal binade), so
    ``v * 2**149`` rounds to an integer, and the check is on its fraction."""
    w = v * _F32_SUB_SCALE
    d = abs((w - np.floor(w)) - 0.5)
    return _near_midpoint(v) if v >= _F32_TINY else d <= w * _REL_TOL


@_jit(inline="always")
def _erf32_small(xd):
    """``x A(x^2)``, erf for ``|x| < 0.5``: the NumPy path's own operations (its bits)."""
    s = _poly(xd * xd, _A32_C, _A32_I, _A32_P)
    s *= xd
    return s


# The one-pass kernels go through their input in blocks of _BLOCK elements, each block
# a call on slices (a loop over ``range(start, stop)`` writing two arrays does not
# vectorize), which says whether any element is flagged (an OR: a per-element flag array
# or a count makes LLVM halve its vector width, a float sum does not vectorize); a block
# with any is gone through again, element by element, to list them in ``idx``. Each
# returns how many it listed.
#
# float32 erfc computes each element's piece only: a block's elements with ``|x| >=
# 0.5`` are packed sixteen at a time (``_pack_numba.pack16``: a compress-store), the large
# piece runs over them alone and its results are put back in their places
# (``unpack16``), the small piece (7 terms) runs over the whole block.
_BLOCK = 512
_LARGE, _FAR = np.float32(0.5), np.float32(4.5)
# ----- float32 erf in float32 arithmetic (``_k._erf32``) ---------------------------------
# Five pieces of ``a = |x|``, each ``A + B P(v)``; every element takes its piece's center,
# K and coefficients by selects (no gathers, no branches: the loop vectorizes), then the
# NumPy path's operations in its order, each rounded on its own: the same bits. The
# Horner steps are written out: a loop over the terms, each a five-way select, is not
# unrolled by LLVM and keeps the element loop scalar (5-8x slower).
_E1, _E2, _E3, _E4 = (np.float32(e) for e in _k._ERF32_EDGES)
_F32_CAP = np.float32(_k._ERF32_CAP)
_F32_ONE = np.float32(1.0)
_ERF32_CK = np.stack([_k._ERF32_C, _k._ERF32_K])  # [0: center, 1: K; piece]
_ERF32_T = np.ascontiguousarray(_k._ERF32_P.T)  # [term from the highest power, piece]
assert _ERF32_T.shape == (8, 5), _ERF32_T.shape  # the terms and pieces written out below


@_jit(inline="always")
def _piece(m1, m2, m3, m4, t, k):
    """``t[k, piece]``, the piece chosen by the masks ``a >= edge`` (a select chain)."""
    r = t[k, 0]
    r = t[k, 1] if m1 else r
    r = t[k, 2] if m2 else r
    r = t[k, 3] if m3 else r
    return t[k, 4] if m4 else r


@_jit(inline="always")
def _erf32_f32(x):
    """float32 erf of the float32 ``x``: ``_k._erf32``'s operations."""
    a = abs(x)
    a = a if (a < _F32_CAP or a != a) else _F32_CAP
    m1, m2, m3, m4 = a >= _E1, a >= _E2, a >= _E3, a >= _E4
    s = a * a
    u = a - _piece(m1, m2, m3, m4, _ERF32_CK, 0)
    v = u if m1 else s
    t = _ERF32_T
    r = _piece(m1, m2, m3, m4, t, 0)
    r = r * v + _piece(m1, m2, m3, m4, t, 1)
    r = r * v + _piece(m1, m2, m3, m4, t, 2)
    r = r * v + _piece(m1, m2, m3, m4, t, 3)
    r = r * v + _piece(m1, m2, m3, m4, t, 4)
    r = r * v + _piece(m1, m2, m3, m4, t, 5)
    r = r * v + _piece(m1, m2, m3, m4, t, 6)
    r = r * v + _piece(m1, m2, m3, m4, t, 7)
    r = r * (_F32_ONE if m1 else a)
    r = r + (_piece(m1, m2, m3, m4, _ERF32_CK, 1) if m1 else a)
    return math.copysign(r, x)


@_jit
def _erf32_pass(x, out):
    """float32 erf."""
    for i in range(x.size):
        out[i] = _erf32_f32(x[i])


@_jit(inline="always")
def _erfc32_large(xd, far):
    """float32 ``erfc(|x|)`` of ``|x| >= 0.5`` before rounding (``_k._erf_erfc``'s piece
    with the float32 fits, the far piece ``|x| >= 4.5`` only if ``far``; the exponential
    and the evaluation order our own: checked against rounding). Without ``far`` every
    ``|x|`` is below 4.5 (or NaN), under the cap: ``_cap`` would return it unchanged."""
    a = _cap(abs(xd), _CAP32) if far else abs(xd)
    e = _estrin(_B32_Q, (1.0 / (1.0 + a) - _B32_C) * _B32_I)
    if far:
        ef = _estrin(_C32_Q, (1.0 / (a * a) - _C32_C) * _C32_I) / a
        e = ef if a >= 4.5 else e
    return e * _exp_neg(-a * a)


@_jit(inline="always")
def _erfc32_finish(xd, e, want_erf, far):
    """(erf, erfc) of ``|x| >= 0.5`` from ``e = erfc(|x|)``, and whether to check them.
    Without ``far`` (``|x| < 4.5``) erfc is above ``2e-10``: ``_near_midpoint`` alone."""
    b = 1.0 - e
    c = 2.0 - e if xd < 0 else e
    f = _erfc32_unsure(c) if far else _near_midpoint(c)
    if want_erf:
        f |= _near_midpoint(b)
    return math.copysign(b, xd), c, f


@_jit(inline="always")
def _erfc32_value(xd, want_erf, far):
    """float32 ``(erf, erfc)`` of ``xd`` before rounding and whether to check them: what
    the passes below compute, element by element."""
    v, c, f = _erfc32_finish(xd, _erfc32_large(xd, far), want_erf, far)
    s = _erf32_small(xd)
    big = xd * xd >= 0.25
    return (v if big else s), (c if big else 1.0 - s), big & f


# erfc (alone or with the erf of its own pieces, for the rounding check of
# ``_erfc32_value``): the large piece over a block's packed ``|x| >= 0.5``, with the far
# piece or without, the small piece over the whole block
@_jit
def _erfc32_small_part(x, erfc):
    for i in range(x.size):
        erfc[i] = np.float32(1.0 - _erf32_small(np.float64(x[i])))


@_jit
def _erf_erfc32_small_part(x, erf, erfc):
    for i in range(x.size):
        s = _erf32_small(np.float64(x[i]))
        erf[i] = np.float32(s)
        erfc[i] = np.float32(1.0 - s)


@_jit
def _erfc32_large_part(x, erfc):
    m = False
    for i in range(x.size):
        xd = np.float64(x[i])
        c, f = _erfc32_finish(xd, _erfc32_large(xd, False), False, False)[1:]
        erfc[i] = np.float32(c)
        m |= f
    return m


@_jit
def _erfc32_far_large_part(x, erfc):
    m = False
    for i in range(x.size):
        xd = np.float64(x[i])
        c, f = _erfc32_finish(xd, _erfc32_large(xd, True), False, True)[1:]
        erfc[i] = np.float32(c)
        m |= f
    return m


@_jit
def _erf_erfc32_large_part(x, erf, erfc):
    m = False
    for i in range(x.size):
        xd = np.float64(x[i])
        v, c, f = _erfc32_finish(xd, _erfc32_large(xd, False), True, False)
        erf[i] = np.float32(v)
        erfc[i] = np.float32(c)
        m |= f
    return m


@_jit
def _erf_erfc32_far_large_part(x, erf, erfc):
    m = False
    for i in range(x.size):
        xd = np.float64(x[i])
        v, c, f = _erfc32_finish(xd, _erfc32_large(xd, True), True, True)
        erf[i] = np.float32(v)
        erfc[i] = np.float32(c)
        m |= f
    return m


@_jit
def _reaches(x, edge):
    """Whether some ``abs(x) >= edge``: a loop of its own (an OR over a slice vectorizes; the
    same loop over ``range(start, stop)`` inside the block loop ran scalar, a nanosecond
    per element)."""
    m = False
    for i in range(x.size):
        m |= abs(x[i]) >= edge
    return m


@_jit
def _erfc32_one_pass(x, erf, erfc, idx, want_erf):
    """float32 erfc, and erf with it if ``want_erf`` (``x`` C-contiguous); the far piece
    only in the blocks that reach it. A block's last ``size % 16`` elements (the last
    block's only) take ``_erfc32_value`` one by one."""
    xl = np.empty(_BLOCK + 16, np.float32)
    bige, bigc = np.empty(_BLOCK + 16, np.float32), np.empty(_BLOCK + 16, np.float32)
    n = 0
    for start in range(0, x.size, _BLOCK):
        stop = min(start + _BLOCK, x.size)
        whole = start + (stop - start) // 16 * 16
        xs, cs = x[start:stop], erfc[start:stop]
        far = _reaches(xs, _FAR)
        k = 0
        for g in range(start, whole, 16):
            k += pack16(x, g, xl, k, _LARGE)
        kv = k + (-k) % 8  # whole vectors: no scalar remainder loop
        xl[k:kv] = np.float32(1.0)
        xk, ck = xl[:kv], bigc[:kv]
        if want_erf:
            ek = bige[:kv]
            m = (_erf_erfc32_far_large_part(xk, ek, ck) if far
                 else _erf_erfc32_large_part(xk, ek, ck))
            _erf_erfc32_small_part(xs, erf[start:stop], cs)
            j = 0
            for g in range(start, whole, 16):
                j += unpack16(x, g, bige, j, erf, _LARGE)
        else:
            m = _erfc32_far_large_part(xk, ck) if far else _erfc32_large_part(xk, ck)
            _erfc32_small_part(xs, cs)
        j = 0
        for g in range(start, whole, 16):
            j += unpack16(x, g, bigc, j, erfc, _LARGE)
        for i in range(whole, stop):
            v, c, f = _erfc32_value(np.float64(x[i]), want_erf, True)
            erfc[i] = np.float32(c)
            if want_erf:
                erf[i] = np.float32(v)
            m |= f
        if m:
            for i in range(start, stop):
                if _erfc32_value(np.float64(x[i]), want_erf, True)[2]:
                    idx[n] = i
                    n += 1
    return n


def _redo(flat, idx, outs, want):
    """The NumPy path's values of the listed elements (``want`` as ``erf_erfc``'s)."""
    for o, r in zip(outs, _k._erf_erfc(flat[idx], *want)):
        if r is not None:
            o[idx] = r


# ----- erf and erfc together, float64 (``_k._erf_erfc``) ---------------------------------
@_jit(inline="always")
def _erf_erfc_finish(xd, e, small_erf):
    """(erf, erfc) from ``e = erfc(|x|)`` and ``small_erf = x A(x^2)``."""
    if xd * xd < 0.25:
        return small_erf, 1.0 - small_erf
    return math.copysign(1.0 - e, xd), (2.0 - e if xd < 0 else e)


# ``exp(-head * head)`` of every head ``j / 16`` below the float64 cap, by NumPy's own
# ``exp`` (an elementwise function: the same argument gives the same bits in any array):
# looked up instead of a second NumPy ``exp`` pass over the chunk
_HEADS = np.arange(int(_CAP64 * 16.0) + 1) * 0.0625
_EXP_HEAD = np.exp(-_HEADS * _HEADS)


@_jit
def _erfc64_a(x, e, ex1, arg2):
    """erfc's middle (or far) piece ``e`` of ``|x|``, ``exp(-head * head)`` of its 4-bit
    head ``ex1`` and the argument ``arg2`` of its tail's exponential (``_k._erf_erfc``)."""
    far = False
    for i in range(x.size):
        a = _cap(abs(x[i]), _CAP64)
        e[i] = _poly(1.0 / (1.0 + a), _B64_C, _B64_I, _B64_P)
        head = np.floor(a * 16.0) * 0.0625  # x * x of the head is exact
        j = head * 16.0
        ex1[i] = _EXP_HEAD[np.int32(j if j <= _MAX_HEAD else 0.0)]  # (NaN: e is NaN)
        arg2[i] = -(a - head) * (a + head)
        far |= a >= 4.5
    if far:  # the far piece where it applies (as ``_erfc32_a``)
        for i in range(x.size):
            a = _cap(abs(x[i]), _CAP64)
            if a >= 4.5:
                e[i] = _poly(1.0 / (a * a), _C64_C, _C64_I, _C64_P) / a


@_jit
def _erfc64_b(x, e, ex1, ex2, erf, erfc, want_erf, want_erfc):
    for i in range(x.size):
        xd = x[i]
        s = _poly(xd * xd, _A64_C, _A64_I, _A64_P)
        s *= xd
        ee = e[i] * ex1[i]
        ee *= ex2[i]
        f, c = _erf_erfc_finish(xd, ee, s)
        if want_erf:
            erf[i] = f
        if want_erfc:
            erfc[i] = c


def erf_erfc(x, want_erf, want_erfc):
    """``_k.erf_erfc`` of a float32 or float64 array (either result may be skipped:
    None), the same bits."""
    dt = x.dtype
    flat = x.reshape(-1)
    n = flat.size
    erf = np.empty(n, dt) if want_erf else np.empty(0, dt)
    erfc = np.empty(n, dt) if want_erfc else np.empty(0, dt)
    if dt == np.float32:
        if want_erf:  # float32 erf has its own float32 arithmetic, with erfc or without
            _erf32_pass(flat, erf)
        if want_erfc:
            flat = np.ascontiguousarray(flat)  # (``pack16`` reads sixteen at a time)
            idx = np.empty(n, np.int64)  # (its pages are touched only where elements are listed)
            k = _erfc32_one_pass(flat, erf, erfc, idx, False)
            if k:
                _redo(flat, idx[:k], (erf, erfc), (False, True))
        return (erf.reshape(x.shape) if want_erf else None,
                erfc.reshape(x.shape) if want_erfc else None)
    m = max(min(n, _CHUNK), 1)
    e, a1, a2 = np.empty(m), np.empty(m), np.empty(m)
    for i in range(0, n, _CHUNK):
        xs = flat[i:i + _CHUNK]
        k = xs.size
        ek, a1k, a2k = e[:k], a1[:k], a2[:k]
        _erfc64_a(xs, ek, a1k, a2k)
        np.exp(a2k, out=a2k)
        _erfc64_b(xs, ek, a1k, a2k, erf[i:i + k] if want_erf else erf,
                  erfc[i:i + k] if want_erfc else erfc, want_erf, want_erfc)
    return (erf.reshape(x.shape) if want_erf else None,
            erfc.reshape(x.shape) if want_erfc else None)



# ----- the exact GELU (``ember.ops.activation_nodes.Gelu``) ------------------------------
@_jit
def _gelu32_pass(x, y):
    """float32 ``gelu(x)``: ``(x * 0.5) * (1 + erf(x * (1 / sqrt 2)))``, each step in
    float32 as ``Gelu.forward``'s."""
    for i in range(x.size):
        xi = x[i]
        y[i] = (xi * np.float32(0.5)) * (_erf32_f32(xi * _F32_SQRT_HALF) + _F32_ONE)


@_jit
def _gelu32_keep_pass(x, y, one_plus_erf):
    """``_gelu32_pass`` keeping ``1 + erf(x / sqrt 2)`` for the backward."""
    for i in range(x.size):
        xi = x[i]
        p = _erf32_f32(xi * _F32_SQRT_HALF) + _F32_ONE
        one_plus_erf[i] = p
        y[i] = (xi * np.float32(0.5)) * p


def gelu(x, keep=True):
    """``(gelu(x), 1 + erf(x / sqrt 2))`` of a float32 or float64 array, the same bits as
    ``Gelu.forward``'s NumPy steps; the second is None unless ``keep`` (not writing it
    saves a third of the memory traffic of large arrays)."""
    if x.dtype == np.float64:
        e = erf_erfc(x * _F64_SQRT_HALF, True, False)[0]
        e += 1.0
        return (x * 0.5) * e, (e if keep else None)
    flat = x.reshape(-1)
    n = flat.size
    y = np.empty(n, np.float32)
    p = np.empty(n, np.float32) if keep else None
    if keep:
        _gelu32_keep_pass(flat, y, p)
    else:
        _gelu32_pass(flat, y)
    return y.reshape(x.shape), (p.reshape(x.shape) if keep else None)


_X_SHIFT, _X_SHIFT_BITS = _k._EXP32_SHIFT, np.int32(_k._EXP32_SHIFT_BITS)
_X_INV_LN2, _X_LN2_HI, _X_LN2_LO = _k._EXP32_INV_LN2, _k._EXP32_LN2_HI, _k._EXP32_LN2_LO
_X_FLOOR, _X_Q = _k._EXP32_FLOOR, _k._EXP32_Q
assert _X_Q.size == 7, _X_Q.size  # the terms written out below
_I32_127 = np.int32(127)


@_jit(inline="always")
def _exp32_neg(z):
    """float32 ``exp(z)`` for float32 ``z <= 0``: ``_k.exp32_neg``'s operations."""
    z = z if (z > _X_FLOOR or z != z) else _X_FLOOR
    t = z * _X_INV_LN2
    t += _X_SHIFT
    k = t - _X_SHIFT
    r = z - k * _X_LN2_HI
    r -= k * _X_LN2_LO
    q = r * _X_Q[0]
    q += _X_Q[1]
    q = q * r + _X_Q[2]
    q = q * r + _X_Q[3]
    q = q * r + _X_Q[4]
    q = q * r + _X_Q[5]
    q = q * r + _X_Q[6]
    q *= r * r
    q += r
    q += _F32_ONE
    ki = _f32_bits(t) - _X_SHIFT_BITS
    k1 = ki >> 1
    q *= _bits_f32((k1 + _I32_127) << 23)
    q *= _bits_f32((ki - k1 + _I32_127) << 23)
    return q


@_jit
def _exp32_pass(z, out):
    """float32 ``exp`` of ``z <= 0`` (``_k.exp32_neg``)."""
    for i in range(z.size):
        out[i] = _exp32_neg(z[i])


@_jit
def _gelu32_grad(x, one_plus_erf, gy, out, mhalf, half, inv):
    """float32 ``Gelu.backward``'s steps in one pass, its exponential ``_exp32_neg``."""
    for i in range(x.size):
        xi = x[i]
        d = one_plus_erf[i] * half
        d += (xi * _exp32_neg((xi * xi) * mhalf)) * inv
        out[i] = d * gy[i]


@_jit
def _gelu_grad_a(x, arg, mhalf):
    for i in range(x.size):
        arg[i] = (x[i] * x[i]) * mhalf


@_jit
def _gelu_grad_b(x, one_plus_erf, ex, gy, out, half, inv):
    for i in range(x.size):
        d = one_plus_erf[i] * half
        d += (x[i] * ex[i]) * inv
        d *= gy[i]
        out[i] = d


def gelu_backward(x, one_plus_erf, gy):
    """``gy * (Phi(x) + x phi(x))`` from the forward's ``1 + erf(x / sqrt 2)``; the same
    bits as ``Gelu.backward``'s NumPy steps (all three arrays of one shape and dtype):
    float32 in one pass (the exponential ``_k.exp32_neg``'s), float64 in two loops around
    NumPy's ``exp``."""
    t = x.dtype.type
    mhalf, half, inv = t(-0.5), t(0.5), t(_INV_SQRT_2PI)
    fx, fe, fg = x.reshape(-1), one_plus_erf.reshape(-1), gy.reshape(-1)
    n = fx.size
    out = np.empty(n, x.dtype)
    if x.dtype == np.float32:
        _gelu32_grad(fx, fe, fg, out, mhalf, half, inv)
        return out.reshape(x.shape)
    buf = np.empty(max(min(n, _CHUNK), 1), x.dtype)
    for i in range(0, n, _CHUNK):
        xs = fx[i:i + _CHUNK]
        k = xs.size
        bk = buf[:k]
        _gelu_grad_a(xs, bk, mhalf)
        np.exp(bk, out=bk)
        _gelu_grad_b(xs, fe[i:i + k], bk, fg[i:i + k], out[i:i + k], half, inv)
    return out.reshape(x.shape)


# ----- the tanh GELU (``F.gelu(x, approximate="tanh")``) ---------------------------------
# ``(x * 0.5) * (1 + tanh((x + x * x * x * 0.044715) * sqrt(2 / pi)))``, the composite's
# steps in its order, each rounded in the input's dtype. ``tanh`` is NumPy's own (SIMD,
# with its bits) on a cache-sized buffer of arguments between the two loops: the same
# bits as the composite's ops, in three passes over each piece instead of eight over the
# whole array.
@_jit
def _gelu_tanh_arg(x, arg, kappa, beta):
    for i in range(x.size):
        xi = x[i]
        t = xi * xi
        t *= xi
        t *= kappa
        arg[i] = (xi + t) * beta


@_jit
def _gelu_tanh_finish(x, th, y, half, one):
    for i in range(x.size):
        y[i] = (x[i] * half) * (th[i] + one)


@_jit
def _gelu_tanh_keep_finish(x, th, y, keep, half, one):
    """``_gelu_tanh_finish`` copying ``tanh(inner)`` to ``keep`` for the backward."""
    for i in range(x.size):
        t = th[i]
        keep[i] = t
        y[i] = (x[i] * half) * (t + one)


def gelu_tanh(x, keep=False):
    """``F.gelu(x, approximate="tanh")`` of a float32 or float64 array: the same bits as
    the composite's steps (``activation_nodes.gelu_tanh_arrays``); with ``keep``,
    ``(y, tanh(inner))``."""
    from ember.ops.activation_nodes import _GELU_BETA, _GELU_KAPPA
    t = x.dtype.type
    kappa, beta, half, one = t(_GELU_KAPPA), t(_GELU_BETA), t(0.5), t(1)
    flat = x.reshape(-1)
    n = flat.size
    y = np.empty(n, x.dtype)
    th = np.empty(n, x.dtype) if keep else None
    buf = np.empty(max(min(n, _CHUNK), 1), x.dtype)
    for i in range(0, n, _CHUNK):
        xs = flat[i:i + _CHUNK]
        k = xs.size
        bk = buf[:k]
        _gelu_tanh_arg(xs, bk, kappa, beta)
        np.tanh(bk, out=bk)
        if keep:
            _gelu_tanh_keep_finish(xs, bk, y[i:i + k], th[i:i + k], half, one)
        else:
            _gelu_tanh_finish(xs, bk, y[i:i + k], half, one)
    y = y.reshape(x.shape)
    return (y, th.reshape(x.shape)) if keep else y


@_jit
def _gelu_tanh_grad(g, x, th, out, kappa, beta, half, one):
    """``activation_nodes.gelu_tanh_grad_arrays``'s operations, element by element."""
    for i in range(x.size):
        xi, ti, gi = x[i], th[i], g[i]
        g5 = gi * (xi * half)
        g5 *= one - ti * ti
        g4 = g5 * beta
        g2 = g4 * kappa
        g1 = g2 * xi
        s = g2 * (xi * xi)
        s += g4
        g1 *= xi
        s += g1
        s += g1
        a7 = ti + one
        a7 *= gi
        a7 *= half
        out[i] = s + a7


def gelu_tanh_backward(g, x, th):
    """The tanh GELU's first-order gradient (``activation_nodes.gelu_tanh_grad_arrays``,
    the same bits) in one pass."""
    from ember.ops.activation_nodes import _GELU_BETA, _GELU_KAPPA
    t = x.dtype.type
    out = np.empty(x.size, x.dtype)
    _gelu_tanh_grad(g.reshape(-1), x.reshape(-1), th.reshape(-1), out, t(_GELU_KAPPA),
                    t(_GELU_BETA), t(0.5), t(1))
    return out.reshape(x.shape)
