"""float32 and float64 erfinv as numba kernels (the ``ember[fast]`` extra), giving the same
bits as the NumPy path of :mod:`ember.ops._erf_kernels`, on the pieces they share with
erf and erfc (:mod:`ember.ops._erf_numba`: the fits' evaluation, the exponential, the
check against a float32 rounding midpoint).

float32 takes its value from polynomial fits of erfinv itself (good to 5e-13), checked
against a float32 rounding midpoint; the few it flags take the NumPy path's own
algorithm (Giles' start and a Halley step, here with a logarithm and exponential of
its own, checked in turn), and the fewer flagged again the NumPy path itself.

Imported lazily by ``_erf_kernels`` the first time a large enough float32 or float64
array needs erfinv (numba's import takes about a second); without numba that import
fails and the NumPy path runs.
"""
import math

import numba  # noqa: F401  (first: without numba this module fails to import at once)
import numpy as np

from ember.backend.numba_jit import njit as _jit
from ember.ops import _erf_kernels as _k
from ember.ops._erf_numba import (  # the pieces erf and erfc share with erfinv
    _A32_C,
    _A32_I,
    _A32_P,
    _A64_C,
    _A64_I,
    _A64_P,
    _B32_C,
    _B32_I,
    _B32_P,
    _BLOCK,
    _CHUNK,
    _DROPPED,
    _EXP_P,
    _F32_TINY,
    _HALF_BITS,
    _INV_LN2,
    _LN2_HI,
    _LN2_LO,
    _SHIFT,
    _TWO_OVER_SQRT_PI,
    _as_float64,
    _as_int64,
    _erf_erfc_finish,
    _erfc64_a,
    _horner,
    _mul_add,
    _near_midpoint,
    _poly,
    _reaches,
)
from ember.ops._pack_numba import pack16, unpack16

__all__ = ["erfinv32", "erfinv64"]

_GC = np.array(_k._GILES_CENTRAL)
_GT = np.array(_k._GILES_TAIL)


# ----- float32 erfinv's Halley value (``_k._erfinv`` with one float32-fit Halley step) ---
# Taken by the elements the fits below flag (one in 8,000). As float32 erfc
# (``_erf_numba``): a float32 result needs only its float64 value to round the same way,
# so the value computes ``log`` and ``exp`` itself (NumPy's float64
# ``log``/``exp`` are the C library's scalar ones on AVX2 machines: half the time of the
# split kernels was theirs)
# and lists the elements within ``_TOL`` float64 ulps of a float32 rounding midpoint for
# the NumPy path. The logarithm only moves Giles' start (good to 1e-7 relative): the
# Halley step takes that error to its cube, so the value after it depends on the start
# only through its rounding; the exponential enters ``erfc(y)`` at its own precision.
# tools/check_erf32.py measures the distance between the two paths over every float32
# input of [0, 1).
_LOG_LG = np.array([0.1479819860511658591, 0.1531383769920937332, 0.1818357216161805012,
                    0.2222219843214978396, 0.2857142874366239149, 0.3999999999940941908,
                    0.6666666666666735130])  # fdlibm's log (e_log.c), highest power first
_SQRT2 = math.sqrt(2.0)


def _even_odd(p):
    """A polynomial's coefficients (highest power first) as ``(E, O)`` with ``p(v) =
    E(v*v) + v O(v*v)``: two Horner chains of half the length, which the processor
    overlaps (the float32 pass's rounding check covers the few ulps this moves)."""
    c = np.asarray(p)[::-1]
    return np.ascontiguousarray(c[0::2][::-1]), np.ascontiguousarray(c[1::2][::-1])


_LOG_E, _LOG_O = _even_odd(_LOG_LG)
_GC_E, _GC_O = _even_odd(_GC)
_GT_E, _GT_O = _even_odd(_GT)
_A32_E, _A32_O = _even_odd(_A32_P)
_B32_E, _B32_O = _even_odd(_B32_P)
_EXP_E, _EXP_O = _even_odd(_EXP_P)


@_jit(inline="always")
def _horner2(p_even, p_odd, v):
    """``p(v)`` from ``_even_odd(p)``."""
    v2 = v * v
    return _horner(p_even, v2) + v * _horner(p_odd, v2)
_TWO52 = 4503599627370496.0  # 2**52: its bits OR a small integer, minus it, is that integer
_MANTISSA = (1 << 52) - 1


@_jit(inline="always")
def _log_unit(t):
    """``log(t)`` for a normal ``0 < t <= 1`` to about 1 float64 ulp (fdlibm's reduction to
    ``[sqrt(1/2), sqrt(2))`` and its polynomial in ``s = f / (2 + f)``), with no call and
    no integer-to-float conversion (neither vectorizes on AVX2)."""
    bits = _as_int64(t)
    e = _as_float64((bits >> 52) | _as_int64(_TWO52)) - _TWO52  # the biased exponent
    m = _as_float64((bits & _MANTISSA) | (1023 << 52))  # in [1, 2)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    k = e - (1022.0 if big else 1023.0)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    r = z * _horner2(_LOG_E, _LOG_O, z)
    hfsq = 0.5 * f * f
    return k * _LN2_HI - ((hfsq - (s * (hfsq + r) + k * _LN2_LO)) - f)


@_jit(inline="always")
def _erfinv32_value(xd):
    """float32 erfinv of ``xd`` (a float32 widened) before its rounding, and whether the
    rounding must be checked (``_k._erfinv``'s steps, ``log`` and ``exp`` our own)."""
    a = abs(xd)
    ai = a if a < 1.0 else 0.0
    w = -_log_unit((1.0 - ai) * (1.0 + ai))
    central = _horner2(_GC_E, _GC_O, w - 2.5)
    tail = _horner2(_GT_E, _GT_O, math.sqrt(w) - 3.0)
    yy = central if w < 5.0 else tail
    yy *= ai
    # one Halley step with the float32 fits (``_k._halley(y, ai, 32)``); float32 starts
    # stay below 4, short of erfc's far piece (flagged if ever reached)
    s = _horner2(_A32_E, _A32_O, (yy * yy - _A32_C) * _A32_I)
    s *= yy
    ay = abs(yy)
    e = _horner2(_B32_E, _B32_O, (1.0 / (1.0 + ay) - _B32_C) * _B32_I)
    z = -ay * ay  # exp(-y*y): the same argument as erfc's (``_exp_neg``, split Horner)
    t = z * _INV_LN2 + _SHIFT
    k = t - _SHIFT
    r = z - k * _LN2_HI
    r -= k * _LN2_LO
    ex = _horner2(_EXP_E, _EXP_O, r) * _as_float64((_as_int64(t) + 1023) << 52)
    erf_y, erfc_y = _erf_erfc_finish(yy, e * ex, s)
    f = erf_y - ai if ai < 0.5 else (1.0 - ai) - erfc_y
    fp = ex * _TWO_OVER_SQRT_PI
    step = f / fp
    step /= 1.0 + yy * step
    yy = yy - (step if fp > 0 else 0.0)
    # (erfinv below 2**-125, from inputs below about 2**-125, is left to NumPy: rare, and
    # cheaper than ``_erfc32_unsure`` on every element)
    y1 = abs(yy)
    return yy, _near_midpoint(y1) | ((y1 < _F32_TINY) & (y1 > 0)) | (ay >= 4.5)


# ----- float32 erfinv without a Halley step -------------------------------------------
# The one-pass kernel's value: ``erfinv(x) = x P``, ``P`` a fit good to 5e-13 relative
# (tools/fit_erf.py), Estrin's scheme with multiply-adds: for ``|x| < 0.75`` 16 terms in
# ``t = x*x`` (no logarithm), beyond 16 terms in ``w = -log(1 - x*x)`` for ``w < 5`` and 16
# in ``sqrt(w)`` past it: instead of the Halley step's erf, erfc, exponential and two
# divisions on every element, a polynomial, and a logarithm on a quarter of uniform
# inputs. Its value is not the NumPy path's: that one is itself within about 2e-12 of
# erfinv (its float32 fits' error), so the two lie up to about 2**14 float64 ulps apart
# (tools/check_erf32.py measures the largest gap over every float32 input) and the check
# against a rounding midpoint takes ``_INV_TOL = 2**15`` ulps: one element in 8,000 is
# flagged, and recomputed by the Halley value above (``_erfinv32_value``, within ``_TOL``
# of the NumPy path's), which lists the few it flags in turn for NumPy.
_INV_TOL = 1 << 15
_ERFINV_T = (
    0.9640216376235797, 0.09346781082829828, 0.01969115627295208, 0.005173013438423891,
    0.0015097222324290263, 0.0004685487039869639, 0.0001514009548241137,
    5.0331682862518934e-05, 1.7068401529686955e-05, 5.888475778651678e-06,
    2.1028890470048065e-06, 7.456565016886127e-07, 2.1358251312411724e-07,
    7.491592631933042e-08, 5.916764321124271e-08, 2.1970176858249967e-08,)
_ERFINV_W = (
    1.501409351111118, 0.6166006918561352, -0.026108235819485928, -0.0195735608794891,
    0.008525401839124178, -0.00048790063984566705, -0.0008341427592325107,
    0.00029220338545267113, 2.0500291225836737e-05, -4.147076429595697e-05,
    8.593843367090557e-06, 2.9196427628058933e-06, -1.786004231456356e-06,
    6.608135882544504e-08, 1.6065877123393218e-07, -3.09744866069159e-08,)
_ERFINV_S = (
    2.9513285783445578, 0.8851584844765812, 0.0055693340248327795,
    -0.003710135569020741, 0.0023495664576596875, -0.001373042966606622,
    0.0006008033559252474, -0.00013424701433040906, -3.5826419691061044e-05,
    4.524093013065085e-05, -1.7087200954870095e-05, 3.5279798187175463e-07,
    3.012866895456773e-06, -1.289071113353013e-06, -1.0228813293038316e-07,
    1.5468870408873046e-07,)
_T_Q, _W_Q, _S_Q = np.array(_ERFINV_T), np.array(_ERFINV_W), np.array(_ERFINV_S)
_X_CENTRAL = np.float32(0.75)  # below: the piece in t = x*x
_T_SCALE = 1.0 / 0.28125  # u = t / 0.28125 - 1 over [0, 0.5625]
_W_EDGE = 5.0
_S_LO, _S_HI = math.sqrt(_W_EDGE), 4.0  # sqrt(w) of the tail piece (w <= 15.95 in float32)
_S_SCALE = 2.0 / (_S_HI - _S_LO)
_S_SHIFT = -(_S_HI + _S_LO) / (_S_HI - _S_LO)
# |x| from which w >= 5 may hold (a float32 a shade below sqrt(1 - exp(-5))): a block
# without one skips the tail piece
_X_TAIL = np.float32(np.nextafter(np.float32(math.sqrt(-math.expm1(-_W_EDGE))), np.float32(0)))


@_jit(inline="always")
def _estrin16(q, u):
    """``q[0] + q[1] u + ... + q[15] u**15`` by Estrin's scheme (a tree four multiply-adds
    deep)."""
    u2 = u * u
    u4 = u2 * u2
    a0 = _mul_add(_mul_add(q[3], u, q[2]), u2, _mul_add(q[1], u, q[0]))
    a1 = _mul_add(_mul_add(q[7], u, q[6]), u2, _mul_add(q[5], u, q[4]))
    a2 = _mul_add(_mul_add(q[11], u, q[10]), u2, _mul_add(q[9], u, q[8]))
    a3 = _mul_add(_mul_add(q[15], u, q[14]), u2, _mul_add(q[13], u, q[12]))
    return _mul_add(_mul_add(a3, u4, a2), u4 * u4, _mul_add(a1, u4, a0))


@_jit(inline="always")
def _erfinv32_central(xd):
    """float32 erfinv of ``|xd|`` for ``|x| < 0.75`` before its rounding (the piece in ``t =
    x*x``; meaningless elsewhere)."""
    a = abs(xd)
    return a * _estrin16(_T_Q, _mul_add(a * a, _T_SCALE, -1.0))


@_jit(inline="always")
def _erfinv32_fits(xd):
    """The fits' value of ``|xd|`` (``|x| < 1``) whichever piece applies: what the one-pass
    kernel computes, element by element (tools/check_erf32.py)."""
    return _erfinv32_central(xd) if abs(xd) < 0.75 else _erfinv32_fast(xd, True)


@_jit
def _erfinv32_fits_pass(x, out):
    """``_erfinv32_fits`` of each float32 in ``x`` (the checks' kernel, not erfinv's)."""
    for i in range(x.size):
        out[i] = _erfinv32_fits(np.float64(x[i]))


@_jit(inline="always")
def _erfinv32_fast(xd, tail):
    """float32 erfinv of ``|xd|`` (``|x| < 1``; 0 elsewhere) before its rounding, by the fits
    (the tail piece only if ``tail``: a block with no ``|x| >= _X_TAIL`` has no ``w >=
    5``, its ``log`` being far more precise than the gap between ``_X_TAIL`` and the
    edge)."""
    a = abs(xd)
    ai = a if a < 1.0 else 0.0
    w = -_log_unit((1.0 - ai) * (1.0 + ai))
    p = _estrin16(_W_Q, _mul_add(w, 0.4, -1.0))
    if tail:
        pt = _estrin16(_S_Q, _mul_add(math.sqrt(w), _S_SCALE, _S_SHIFT))
        p = pt if w >= _W_EDGE else p
    return ai * p


@_jit(inline="always")
def _erfinv32_unsure(y):
    """Whether the Halley value must be taken instead of the fits' ``y``: near a rounding
    midpoint (within ``_INV_TOL``) or below ``2**-125``."""
    near = abs((_as_int64(y) & _DROPPED) - _HALF_BITS) <= _INV_TOL
    return near | ((y < _F32_TINY) & (y > 0))


@_jit(inline="always")
def _erfinv32_round(yy, xd):
    """The float32 result from erfinv(|x|) ``yy``: the sign, +-inf at +-1, NaN beyond."""
    a = abs(xd)
    yy = math.copysign(yy, xd)
    yy = math.copysign(np.inf, xd) if a == 1.0 else yy
    yy = np.nan if (a > 1.0 or a != a) else yy
    return np.float32(yy)


# The one-pass kernel goes through its input in blocks of ``_BLOCK`` elements (as float32
# erfc's): the central piece over the whole block, then the elements with ``|x| >= 0.75``
# packed (``_pack_numba.pack16``), their piece computed over them alone and put back in
# their places (``unpack16``), the tail piece
# only in the blocks that reach it. A block's second look, only where some element is
# flagged (one block in 16), computes the flagged piece's values again one by one:
# keeping them (a float64 store beside the float32 one) made LLVM halve the outer
# piece's vector width, a quarter more time on every block.
@_jit
def _erfinv32_central_part(x, out):
    m = False
    for i in range(x.size):
        xd = np.float64(x[i])
        yy = _erfinv32_central(xd)
        out[i] = _erfinv32_round(yy, xd)
        m |= _erfinv32_unsure(yy) & (abs(xd) < 0.75)
    return m


@_jit
def _erfinv32_part(x, out):
    m = False
    for i in range(x.size):
        xd = np.float64(x[i])
        yy = _erfinv32_fast(xd, False)
        out[i] = _erfinv32_round(yy, xd)
        m |= _erfinv32_unsure(yy)
    return m


@_jit
def _erfinv32_tail_part(x, out):
    m = False
    for i in range(x.size):
        xd = np.float64(x[i])
        yy = _erfinv32_fast(xd, True)
        out[i] = _erfinv32_round(yy, xd)
        m |= _erfinv32_unsure(yy)
    return m


@_jit(inline="always")
def _halley_instead(x, out, idx, n, i):
    """``out[i]`` from the Halley value (``|x[i]| < 1``); lists ``i`` in ``idx`` if that one is
    flagged in turn; returns the new count."""
    xd = np.float64(x[i])
    yy, f = _erfinv32_value(xd)
    out[i] = np.float32(math.copysign(yy, xd))
    if f:
        idx[n] = i
        n += 1
    return n


@_jit
def _erfinv32_one_pass(x, out, idx):
    """float32 erfinv: the fits' values, the few flagged ones the Halley value's; lists in
    ``idx`` the elements that one flags in turn (for the NumPy path), returns how many."""
    xl = np.empty(_BLOCK + 16, np.float32)
    ol = np.empty(_BLOCK + 16, np.float32)
    n = 0
    for start in range(0, x.size, _BLOCK):
        stop = min(start + _BLOCK, x.size)
        whole = start + (stop - start) // 16 * 16
        xs, ys = x[start:stop], out[start:stop]
        central_unsure = _erfinv32_central_part(xs, ys)
        k = 0
        for g in range(start, whole, 16):
            k += pack16(x, g, xl, k, _X_CENTRAL)
        if k:
            kv = k + (-k) % 8  # whole vectors: no scalar remainder loop
            xl[k:kv] = _X_CENTRAL
            xk, ok = xl[:kv], ol[:kv]
            tail = _reaches(xk, _X_TAIL)
            unsure = _erfinv32_tail_part(xk, ok) if tail else _erfinv32_part(xk, ok)
            j = 0
            for g in range(start, whole, 16):
                j += unpack16(x, g, ol, j, out, _X_CENTRAL)
            if unsure:  # (|x| < 1 where flagged: elsewhere the value is 0)
                for i in range(start, whole):
                    xd = np.float64(x[i])
                    if abs(xd) >= 0.75 and _erfinv32_unsure(_erfinv32_fast(xd, True)):
                        n = _halley_instead(x, out, idx, n, i)
        for i in range(whole, stop):  # the last block's last ``size % 16``, one by one
            xd = np.float64(x[i])
            if abs(xd) >= 0.75:
                yy = _erfinv32_fast(xd, True)
                out[i] = _erfinv32_round(yy, xd)
                if _erfinv32_unsure(yy):
                    n = _halley_instead(x, out, idx, n, i)
        if central_unsure:
            for i in range(start, stop):
                xd = np.float64(x[i])
                if abs(xd) < 0.75 and _erfinv32_unsure(_erfinv32_central(xd)):
                    n = _halley_instead(x, out, idx, n, i)
    return n


def erfinv32(x):
    """``_k.erfinv`` of a float32 array, the same bits."""
    flat = np.ascontiguousarray(x).reshape(-1)  # (``pack16`` reads sixteen at a time)
    out = np.empty(flat.size, np.float32)
    idx = np.empty(flat.size, np.int64)
    k = _erfinv32_one_pass(flat, out, idx)
    if k:
        out[idx[:k]] = _k._erfinv(flat[idx[:k]])
    return out.reshape(x.shape)


# ----- float64 erfinv (``_k._erfinv``: two Halley steps on the float64 fits) -------------
@_jit
def _erfinv64_log_arg(x, t):
    """``(1 - a) * (1 + a)``, ``a = |x|`` inside (-1, 1) and 0 elsewhere: ``log``'s argument."""
    for i in range(x.size):
        a = abs(x[i])
        ai = a if a < 1.0 else 0.0
        t[i] = (1.0 - ai) * (1.0 + ai)


@_jit
def _erfinv64_start(x, logt, y):
    """Giles' start; True where some element needs the asymptotic restart (``w > 16``,
    ``1 - |x| < 6e-8``): the caller leaves that chunk to NumPy."""
    far = False
    for i in range(x.size):
        a = abs(x[i])
        ai = a if a < 1.0 else 0.0
        w = -logt[i]
        if w < 5.0:
            yy = _horner(_GC, w - 2.5)
        else:
            yy = _horner(_GT, math.sqrt(w) - 3.0)
        yy *= ai
        y[i] = yy
        far |= w > 16.0
    return far


@_jit
def _neg_square(y, out):
    for i in range(y.size):
        out[i] = -y[i] * y[i]


@_jit
def _erfinv64_step(x, y, e, ex1, ex2, ex3):
    """One Halley step of ``erf(y) = |x|`` in place (``_k._halley``), from erfc's piece
    ``e`` of ``y``, its two exponentials and ``exp(-y*y)``."""
    for i in range(x.size):
        a = abs(x[i])
        ai = a if a < 1.0 else 0.0
        yy = y[i]
        s = _poly(yy * yy, _A64_C, _A64_I, _A64_P)
        s *= yy
        ee = e[i] * ex1[i]
        ee *= ex2[i]
        erf_y, erfc_y = _erf_erfc_finish(yy, ee, s)
        f = erf_y - ai if ai < 0.5 else (1.0 - ai) - erfc_y
        fp = ex3[i] * _TWO_OVER_SQRT_PI
        step = f / fp
        step /= 1.0 + yy * step
        y[i] = yy - (step if fp > 0 else 0.0)


@_jit
def _erfinv_finish(x, y, out):
    for i in range(x.size):
        xd = x[i]
        a = abs(xd)
        yy = math.copysign(y[i], xd)
        if a == 1.0:
            yy = math.copysign(np.inf, xd)
        if a > 1.0 or a != a:
            yy = np.nan
        out[i] = yy


def erfinv64(x):
    """``_k.erfinv`` of a float64 array, the same bits."""
    flat = x.reshape(-1)
    n = flat.size
    m = max(min(n, _CHUNK), 1)
    out = np.empty(n, np.float64)
    t, y, e, a1, a2 = (np.empty(m) for _ in range(5))
    for i in range(0, n, _CHUNK):
        xs = flat[i:i + _CHUNK]
        k = xs.size
        tk, yk, ek, a1k, a2k = t[:k], y[:k], e[:k], a1[:k], a2[:k]
        _erfinv64_log_arg(xs, tk)
        np.log(tk, out=tk)
        if _erfinv64_start(xs, tk, yk):
            out[i:i + k] = _k._erfinv(xs)
            continue
        for _ in range(2):
            _erfc64_a(yk, ek, a1k, a2k)
            _neg_square(yk, tk)
            np.exp(a2k, out=a2k)
            np.exp(tk, out=tk)
            _erfinv64_step(xs, yk, ek, a1k, a2k, tk)
        _erfinv_finish(xs, yk, out[i:i + k])
    return out.reshape(x.shape)
