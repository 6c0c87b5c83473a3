"""``pow`` rounded as PyTorch's CPU kernel rounds it, in NumPy alone.

PyTorch's CPU ``pow`` (AVX-512 build, the one the test machines run) sends each full
block of vector lanes through SLEEF's 1-ulp vector ``powf``/``pow`` and the elements
left over at the end of each contiguous run through the C library's scalar ``pow``.
SLEEF's result is within one ulp but not correctly rounded, so about 2% of float32
powers differ from the correctly rounded value in the last bit, and which elements
take which path depends on their position. This module reproduces both paths:

* the vector path is an emulation of SLEEF's algorithm (double-float logarithm,
  scaled by the exponent, double-float exponential, with fused multiply-adds),
  written from its published description: float32 operations are NumPy float32
  operations (each correctly rounded, as the vector unit's), and a fused
  multiply-add is computed in float64 and rounded to odd before the final rounding
  to float32, which makes the double rounding exact;
* the scalar path calls the C library's ``pow``/``powf`` through ctypes (the same
  function PyTorch's scalar loop calls), falling back to extended precision where
  the C library cannot be loaded;
* :func:`vector_mask` says which elements PyTorch's loop hands to the vector path:
  each contiguous run of the iteration is cut in blocks of two vectors, and the
  remainder of each run goes scalar; runs are the rows of the coalesced iteration
  space, split into one chunk per thread when there are at least 32768 elements.
"""
import ctypes
import ctypes.util

import numpy as np

_F32 = np.float32
_F64 = np.float64

# elements per unrolled vector step (two 512-bit vectors) by dtype itemsize
_BLOCK = {8: 16, 4: 32, 2: 64}
_GRAIN = 32768  # ATen's internal grain size: smaller loops run on one thread


# ---------------------------------------------------------------------------
# float32 building blocks: float32 arithmetic with fused multiply-adds

def _fma32(a, b, c):
    """``a * b + c`` rounded once to float32: the product is exact in float64, the sum
    is rounded to odd there (so the second rounding cannot double-round)."""
    p = a.astype(_F64) * b
    c = np.asarray(c, _F64)
    s = p + c
    v = s - p
    e = (p - (s - v)) + (c - v)
    bits = s.view(np.int64)
    inexact = (e != 0) & np.isfinite(s) & ((bits & 1) == 0)
    if inexact.any():
        step = np.where((e > 0) == (s > 0), 1, -1)
        bits = np.where(inexact, bits + step, bits)
        s = bits.view(_F64)
    return s.astype(_F32)


def _prod_err(a, b, s):
    """The exact error ``a * b - s`` of a float32 product ``s = fl(a * b)``."""
    return (a.astype(_F64) * b - s).astype(_F32)


def _add2_ff(x, y):
    s = x + y
    v = s - x
    return s, (x - (s - v)) + (y - v)


def _add2_f2f(xx, xy, y):
    s = xx + y
    v = s - xx
    return s, ((xx - (s - v)) + (y - v)) + xy


def _add2_f2f2(xx, xy, yx, yy):
    s = xx + yx
    v = s - xx
    return s, ((xx - (s - v)) + (yx - v)) + (xy + yy)


def _add_f2f2(xx, xy, yx, yy):
    """The fast double-float sum (``|x| >= |y|``)."""
    s = xx + yx
    return s, (((xx - s) + yx) + xy) + yy


def _mul_f2f(xx, xy, y):
    s = xx * y
    return s, _fma32(xy, y, _prod_err(xx, y, s))


def _mul_f2f2(xx, xy, yx, yy):
    s = xx * yx
    return s, _fma32(xx, yy, _fma32(xy, yx, _prod_err(xx, yx, s)))


def _squ_f2(xx, xy):
    s = xx * xx
    return s, _fma32(xx + xx, xy, _prod_err(xx, xx, s))


def _div_f2f2(nx, ny, dx, dy):
    t = _F32(1) / dx
    s = nx * t
    u = _prod_err(t, nx, s)
    v = _fma32(-dy, t, _fma32(-dx, t, _F32(1)))
    return s, _fma32(s, v, _fma32(ny, t, u))


def _logk_f(d):
    """log(d) as a double-float, d > 0 (SLEEF's AVX-512 argument reduction:
    exponent and a mantissa in [0.75, 1.5))."""
    mant, ex = np.frexp(d)  # d = mant * 2**ex, mant in [0.5, 1)
    big = mant >= _F32(0.75)
    m = np.where(big, mant, mant * _F32(2))  # getmant: [0.75, 1.5)
    scaled = d * _F32(1.0 / 0.75)
    _, e = np.frexp(scaled)
    e = (e - 1).astype(_F32)
    e = np.where(d == 0, _F32(-np.inf), e)
    e = np.where(np.isinf(scaled), _F32(128), e)
    m = np.where(np.isinf(d), _F32(1), m)
    ax, ay = _add2_ff(_F32(-1), m)
    bx, by = _add2_ff(_F32(1), m)
    xx, xy = _div_f2f2(ax, ay, bx, by)
    x2x, x2y = _squ_f2(xx, xy)
    t = _fma32(np.full_like(x2x, 0.240320354700088500976562), x2x,
               _F32(0.285112679004669189453125))
    t = _fma32(t, x2x, _F32(0.400007992982864379882812))
    sx, sy = _mul_f2f(_F32(0.69314718246459960938), _F32(-1.904654323148236017e-09), e)
    sx, sy = _add_f2f2(sx, sy, xx * _F32(2), xy * _F32(2))
    px, py = _mul_f2f(x2x, x2y, t)
    px, py = _add2_f2f2(px, py, _F32(0.66666662693023681640625),
                        _F32(3.69183861259614332084311e-09))
    qx, qy = _mul_f2f2(x2x, x2y, xx, xy)
    qx, qy = _mul_f2f2(qx, qy, px, py)
    return _add_f2f2(sx, sy, qx, qy)


def _rint_i32(u):
    """Round to nearest even into int32; NaN and out-of-range give INT_MIN (cvtps2dq)."""
    ok = np.abs(u) < _F32(2.0 ** 31)
    return np.where(ok, np.rint(np.where(ok, u, 0)), -2.0 ** 31).astype(np.int32)


def _ldexp_f(x, q):
    """x * 2**q in steps that keep every factor a normal float32 (SLEEF's vldexp)."""
    q = q.astype(np.int32)
    m = q >> 31
    m = (((m + q) >> 6) - m) << 4
    q = q - (m << 2)
    m = m + np.int32(0x7f)
    m = np.clip(m, 0, 0xff).astype(np.int32)
    u = (m << 23).view(_F32)
    x = x * u * u * u * u
    u = ((q + np.int32(0x7f)) << 23).view(_F32)
    return x * u


def _expk_f(dx, dy):
    """exp of a double-float, rounded to float32."""
    u = (dx + dy) * _F32(1.442695040888963407359924681001892137426645954152985934135449406931)
    q = _rint_i32(u)
    qf = q.astype(_F32)
    sx, sy = _add2_f2f(dx, dy, qf * _F32(-0.693145751953125))
    sx, sy = _add2_f2f(sx, sy, qf * _F32(-1.428606765330187045e-06))
    s = sx + sy
    sx, sy = s, (sx - s) + sy
    u = _fma32(np.full_like(sx, 0.00136324646882712841033936), sx,
               _F32(0.00836596917361021041870117))
    u = _fma32(u, sx, _F32(0.0416710823774337768554688))
    u = _fma32(u, sx, _F32(0.166665524244308471679688))
    u = _fma32(u, sx, _F32(0.499999850988388061523438))
    ax, ay = _squ_f2(sx, sy)
    ax, ay = _mul_f2f(ax, ay, u)
    tx, ty = _add_f2f2(sx, sy, ax, ay)
    s = _F32(1) + tx
    tx, ty = s, ((_F32(1) - s) + tx) + ty
    u = _ldexp_f(tx + ty, q)
    return np.where(dx < _F32(-104), _F32(0), u)


def _mulsign(x, y):
    """x with its sign bit flipped where y's sign bit is set."""
    return (x.view(np.uint32) ^ (y.view(np.uint32) & np.uint32(0x80000000))).view(_F32)


def sleef_powf(x, y):
    """SLEEF's 1-ulp vector ``powf`` on float32 arrays of one shape."""
    x = np.ascontiguousarray(x, _F32)
    y = np.ascontiguousarray(y, _F32)
    with np.errstate(all="ignore"):
        ay = np.abs(y)
        yint = (np.trunc(y) == y) | (ay > _F32(1 << 24))
        ti = np.where(ay < _F32(2.0 ** 31), np.trunc(np.where(np.isfinite(y), y, 0)), 0)
        yodd = ((ti.astype(np.int64) & 1) == 1) & yint & (ay < _F32(1 << 24))
        lx, ly = _logk_f(np.abs(x))
        dx, dy = _mul_f2f(lx, ly, y)
        r = _expk_f(dx, dy)
        r = np.where(np.isnan(r), _F32(np.inf), r)
        sign = np.where(x > 0, _F32(1), np.where(yint, np.where(yodd, _F32(-1), _F32(1)),
                                                  _F32(np.nan)))
        r = r * sign
        efx = _mulsign(np.abs(x) - _F32(1), y)
        r = np.where(np.isinf(y), np.where(efx < 0, _F32(0), np.where(
            efx == 0, _F32(1), _F32(np.inf))), r)
        zero_or_inf = np.isinf(x) | (x == 0)
        big = np.where(np.signbit(y) ^ (x == 0), _F32(0), _F32(np.inf))
        r = np.where(zero_or_inf, _mulsign(big, np.where(yodd, x, _F32(1))), r)
        r = np.where(np.isnan(x) | np.isnan(y), np.uint32(0xFFFFFFFF).view(_F32), r)
        return np.where((y == 0) | (x == 1), _F32(1), r)
