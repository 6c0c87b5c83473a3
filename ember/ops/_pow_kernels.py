"""``pow`` rounded as PyTorch's CPU kernel rounds it, in NumPy alone.

PyTorch's CPU ``pow`` sends each full block of two vectors (AVX-512 or AVX2) through
SLEEF's 1-ulp vector ``powf``/``pow`` and the elements left over at the end of each
contiguous run through the C library's scalar ``pow``. SLEEF's result is within one
ulp but not correctly rounded, so about 2% of float32 (4% of float64) powers differ
from the correctly rounded value in the last bit, and which elements take which
path depends on their position. This module reproduces both paths:

* the vector path is an emulation of SLEEF's algorithm (double-float logarithm,
  scaled by the exponent, double-float exponential, with fused multiply-adds),
  written from its published description: float32 operations are NumPy float32
  operations (each correctly rounded, as the vector unit's), and a fused
  multiply-add is computed in float64, redone with the sum rounded to odd where
  the double rounding could mislead; float64 gets an exact fused multiply-add from
  Veltkamp splitting and rounding to odd;
* float32 first takes a fast path (:func:`_powf_fast`) that recomputes SLEEF's
  value in float64 and keeps the full emulation for elements near a rounding
  midpoint;
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
import os

import numpy as np

_F32 = np.float32
_F64 = np.float64


def _vector_bytes():
    """The width of PyTorch's CPU vectors here: 64 bytes where it dispatches to its
    AVX-512 kernels (``ATEN_CPU_CAPABILITY`` or the CPU's flags), else 32 (AVX2)."""
    cap = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
    if cap in ("avx2", "default"):
        return 32
    if cap == "avx512":
        return 64
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln for ln in f if ln.startswith("flags")), "").split()
    except OSError:  # not Linux: the AVX-512 layout, the one ember is tested on
        return 64
    return 64 if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= set(flags) else 32


# elements per unrolled vector step (two vectors) by dtype itemsize
_BLOCK = {k: 2 * _vector_bytes() // k for k in (8, 4, 2)}
_GRAIN = 32768  # ATen's internal grain size: smaller loops run on one thread


# ---------------------------------------------------------------------------
# float32 building blocks: float32 arithmetic with fused multiply-adds

def _fma32(a, b, c):
    """``a * b + c`` rounded once to float32. The product is exact in float64 and the
    sum rounds there once more; that second rounding can only mislead the final one
    when it lands exactly on a float32 midpoint (or below float32's normal range), so
    only those elements are redone with the sum rounded to odd."""
    p = a.astype(_F64) * b
    s = p + c
    out = s.astype(_F32)
    bits = s.view(np.int64)
    hard = ((bits & 0x1FFFFFFF) == 0x10000000) | \
        ((bits & 0x7FF0000000000000) < 0x3810000000000000)  # |s| < 2**-126
    if hard.any():
        ph = np.broadcast_to(p, s.shape)[hard]
        sh = s[hard]
        ch = np.broadcast_to(np.asarray(c, _F64), s.shape)[hard]
        v = sh - ph
        e = (ph - (sh - v)) + (ch - v)
        sb = sh.view(np.int64)
        odd = (e != 0) & np.isfinite(e) & ((sb & 1) == 0)
        sb = np.where(odd, sb + np.where((e > 0) == (sh > 0), 1, -1), sb)
        out[hard] = sb.view(_F64).astype(_F32)
    return out


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


_MID_TOL = 1 << 17  # 2**-12 ulp of float32, in units of the float64 bits below it


def _near_mid32(v):
    """Where a float64 lies within 2**-12 ulp of a float32 rounding midpoint, or
    outside float32's normal range: there a small error could flip its rounding."""
    bits = v.view(np.int64)
    low = (bits & np.int64(0x1FFFFFFF)) - np.int64(0x10000000)
    expo = bits & np.int64(0x7FF0000000000000)
    return (np.abs(low) < _MID_TOL) | (expo < np.int64(0x3820000000000000)) | \
        (expo > np.int64(0x47D0000000000000))


def _powf_fast(x, y):
    """SLEEF's ``powf`` for most elements at a fraction of the emulation's cost, and
    the elements it cannot vouch for.

    SLEEF's result is its double-float value rounded once to float32. That value is
    recomputed here in float64 from the same formula, keeping exactly the float32
    quantities that steer it (the polynomial evaluations, the exponent ``q``, the
    reduced argument's leading part); the float64 value is then within about 2**-20
    ulp of SLEEF's, so its rounding is SLEEF's wherever it is farther than 2**-12 ulp
    from a rounding midpoint. Elements near a midpoint, and every special or extreme
    case, are returned as ``hard`` for the full emulation."""
    ax = np.abs(x)
    mant, _ = np.frexp(ax)
    m = np.where(mant >= _F32(0.75), mant, mant * _F32(2))
    _, e = np.frexp(ax * _F32(1.0 / 0.75))
    dx = _F32(1) + m
    xx = (m - _F32(1)) * (_F32(1) / dx)
    x2x = xx * xx
    t = _fma32(np.full_like(x2x, 0.240320354700088500976562), x2x,
               _F32(0.285112679004669189453125))
    t = _fma32(t, x2x, _F32(0.400007992982864379882812)).astype(_F64)
    m64 = m.astype(_F64)
    X = (m64 - 1.0) / (m64 + 1.0)
    X2 = X * X
    c = float(_F32(0.66666662693023681640625)) + float(_F32(3.69183861259614332084311e-09))
    ln2 = float(_F32(0.69314718246459960938)) + float(_F32(-1.904654323148236017e-09))
    L = (e - 1).astype(_F64) * ln2 + (2.0 * X + X * X2 * (c + X2 * t))
    D = L * y.astype(_F64)
    hard = _near_mid32(D) & (D != 0)
    u = D.astype(_F32) * _F32(1.442695040888963407359924681001892137426645954152985934135449406931)
    q = np.rint(np.clip(u, -300, 300))
    S = (D - q * float(_F32(0.693145751953125))) - q * float(_F32(1.428606765330187045e-06))
    hard |= _near_mid32(S) & (S != 0)
    sx = S.astype(_F32)
    p = _fma32(np.full_like(sx, 0.00136324646882712841033936), sx,
               _F32(0.00836596917361021041870117))
    p = _fma32(p, sx, _F32(0.0416710823774337768554688))
    p = _fma32(p, sx, _F32(0.166665524244308471679688))
    p = _fma32(p, sx, _F32(0.499999850988388061523438))
    T = 1.0 + (S + S * S * p.astype(_F64))
    R = np.ldexp(T, q.astype(np.int32))
    hard |= _near_mid32(R)
    hard |= ~(ax < _F32(2.0 ** 127)) | (x == 0) | ~np.isfinite(y) | ~(np.abs(D) < 80)
    yint = np.trunc(y) == y
    hard |= (x < 0) & ~yint
    odd = yint & (np.abs(y) < _F32(1 << 24)) & (np.fmod(y, _F32(2)) != 0)
    r = R.astype(_F32)
    r = np.where((x < 0) & odd, -r, r)
    r = np.where((y == 0) | (x == 1), _F32(1), r)
    return r, hard & (y != 0) & (x != 1)


def sleef_powf(x, y):
    """SLEEF's 1-ulp vector ``powf`` on a flat float32 array ``x`` and an exponent
    ``y`` of its shape or 0-d: the fast recomputation, then the full emulation where
    that cannot vouch for the rounding."""
    x = np.ascontiguousarray(x, _F32)
    y = np.ascontiguousarray(y, _F32)
    with np.errstate(all="ignore"):
        r, hard = _powf_fast(x, y)
    if hard.any():
        r[hard] = _sleef_powf_exact(x[hard], y if y.shape != x.shape else y[hard])
    return r


def _sleef_powf_exact(x, y):
    """SLEEF's ``powf``, every operation emulated."""
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


# ---------------------------------------------------------------------------
# float64 building blocks: a fused multiply-add from an exact product and a sum
# rounded to odd (Boldo and Melquiond's emulation), then double-double arithmetic

_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp's splitting constant


def _prod_err64(a, b, p):
    """The exact error ``a * b - p`` of a float64 product ``p = fl(a * b)``."""
    c = _SPLIT * a
    ah = c - (c - a)
    al = a - ah
    c = _SPLIT * b
    bh = c - (c - b)
    bl = b - bh
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _fma64(a, b, c):
    """``a * b + c`` rounded once to float64."""
    p = a * b
    pl = _prod_err64(a, b, p)
    th = c + p
    v = th - c
    tl = (c - (th - v)) + (p - v)
    # tl + pl rounded to odd, so that adding it to th rounds once
    s = tl + pl
    v = s - tl
    e = (tl - (s - v)) + (pl - v)
    bits = s.view(np.int64)
    odd = (e != 0) & np.isfinite(e) & ((bits & 1) == 0)
    if odd.any():
        step = np.where((e > 0) == (s > 0), 1, -1)
        s = np.where(odd, bits + step, bits).view(_F64)
    r = th + s
    return np.where(np.isfinite(r), r, p + c)


def _dd_add2_dd(xx, xy, y):
    s = xx + y
    v = s - xx
    return s, ((xx - (s - v)) + (y - v)) + xy


def _dd_add(xx, xy, yx, yy):
    s = xx + yx
    return s, (((xx - s) + yx) + xy) + yy


def _dd_mul_d(xx, xy, y):
    s = xx * y
    return s, _fma64(xy, y, _prod_err64(xx, y, s))


def _dd_mul(xx, xy, yx, yy):
    s = xx * yx
    return s, _fma64(xx, yy, _fma64(xy, yx, _prod_err64(xx, yx, s)))


def _dd_squ(xx, xy):
    s = xx * xx
    return s, _fma64(xx + xx, xy, _prod_err64(xx, xx, s))


def _dd_div(nx, ny, dx, dy):
    t = 1.0 / dx
    s = nx * t
    u = _prod_err64(t, nx, s)
    v = _fma64(-dy, t, _fma64(-dx, t, 1.0))
    return s, _fma64(s, v, _fma64(ny, t, u))


def _poly8(x, x2, x4, c):
    """SLEEF's Estrin scheme for degree 7 (coefficients highest first)."""
    def p2(c1, c0):
        return _fma64(x, c1, c0)

    def p4(c3, c2, c1, c0):
        return _fma64(x2, p2(c3, c2), p2(c1, c0))
    return _fma64(x4, p4(*c[:4]), p4(*c[4:]))


def _logk_d(d):
    mant, ex = np.frexp(d)
    m = np.where(mant >= 0.75, mant, mant * 2.0)
    scaled = d * (1.0 / 0.75)
    _, e = np.frexp(scaled)
    e = (e - 1).astype(_F64)
    e = np.where(d == 0, -np.inf, e)
    e = np.where(np.isinf(scaled), 1024.0, e)
    m = np.where(np.isinf(d), 1.0, m)
    ax, ay = _add2_ff(-1.0, m)
    bx, by = _add2_ff(1.0, m)
    xx, xy = _dd_div(ax, ay, bx, by)
    x2x, x2y = _dd_squ(xx, xy)
    x4 = x2x * x2x
    x8 = x4 * x4
    x16 = x8 * x8
    c = (0.116255524079935043668677, 0.103239680901072952701192, 0.117754809412463995466069,
         0.13332981086846273921509, 0.153846227114512262845736, 0.181818180850050775676507,
         0.222222222230083560345903, 0.285714285714249172087875, 0.400000000000000077715612)
    t = _fma64(x16, c[0], _poly8(x2x, x4, x8, c[1:]))
    sx, sy = _dd_mul_d(0.693147180559945286226764, 2.319046813846299558417771e-17, e)
    sx, sy = _dd_add(sx, sy, xx * 2.0, xy * 2.0)
    qx, qy = _dd_mul(x2x, x2y, xx, xy)
    px, py = _dd_mul(qx, qy, 0.666666666666666629659233, 3.80554962542412056336616e-17)
    sx, sy = _dd_add(sx, sy, px, py)
    qx, qy = _dd_mul(x2x, x2y, qx, qy)
    px, py = _dd_mul_d(qx, qy, t)
    return _dd_add(sx, sy, px, py)


def _pow2i(q):
    """2**q from the exponent field alone, with the vector unit's int32 wraparound."""
    hi = ((q + np.int32(0x3ff)) << 20).astype(np.uint32).astype(np.uint64) << np.uint64(32)
    return hi.view(_F64)


def _expk_d(dx, dy):
    u = (dx + dy) * 1.442695040888963407359924681001892137426645954152985934135449406931
    dq = np.rint(u)
    ok = np.abs(dq) < 2.0 ** 31
    q = np.where(ok, np.where(ok, dq, 0), -2.0 ** 31).astype(np.int32)
    sx, sy = _dd_add2_dd(dx, dy, dq * -.69314718055966295651160180568695068359375)
    sx, sy = _dd_add2_dd(sx, sy, dq * -.28235290563031577122588448175013436025525412068e-12)
    s = sx + sy
    sx, sy = s, (sx - s) + sy
    s2 = sx * sx
    s4 = s2 * s2
    s8 = s4 * s4
    c = (2.51069683420950419527139e-08, 2.76286166770270649116855e-07,
         2.75572496725023574143864e-06, 2.48014973989819794114153e-05,
         0.000198412698809069797676111, 0.0013888888939977128960529,
         0.00833333333332371417601081, 0.0416666666665409524128449,
         0.166666666666666740681535, 0.500000000000000999200722)
    u = _fma64(s8, _fma64(sx, c[0], c[1]), _poly8(sx, s2, s4, c[2:]))
    s = 1.0 + sx
    tx, ty = s, ((1.0 - s) + sx) + sy
    ax, ay = _dd_squ(sx, sy)
    ax, ay = _dd_mul_d(ax, ay, u)
    tx, ty = _dd_add(tx, ty, ax, ay)
    u = tx + ty
    h = q >> 1
    u = u * _pow2i(h) * _pow2i(q - h)
    return np.where(dx < -1000.0, 0.0, u)


def _mulsign64(x, y):
    return (x.view(np.uint64) ^ (y.view(np.uint64) & np.uint64(1 << 63))).view(_F64)


def _sleef_pow_f64(x, y):
    """SLEEF's 1-ulp vector ``pow`` on float64 arrays (``y`` may be 0-d)."""
    x = np.ascontiguousarray(x, _F64)
    y = np.ascontiguousarray(y, _F64)
    with np.errstate(all="ignore"):
        yint = np.rint(y) == y
        half = y * 0.5
        yodd = (np.rint(half) != half) & yint
        lx, ly = _logk_d(np.abs(x))
        dx, dy = _dd_mul_d(lx, ly, y)
        r = _expk_d(dx, dy)
        r = np.where(dx > float.fromhex("0x1.62e42fefa39efp+9"), np.inf, r)
        sign = np.where(x > 0, 1.0, np.where(yint, np.where(yodd, -1.0, 1.0), np.nan))
        r = r * sign
        efx = _mulsign64(np.abs(x) - 1.0, np.broadcast_to(y, x.shape))
        r = np.where(np.isinf(y), np.where(efx < 0, 0.0, np.where(efx == 0, 1.0, np.inf)), r)
        zero_or_inf = np.isinf(x) | (x == 0)
        big = np.where(np.signbit(y) ^ (x == 0), 0.0, np.inf)
        r = np.where(zero_or_inf, _mulsign64(big, np.where(yodd, x, 1.0)), r)
        nan = np.uint64(0xFFFFFFFFFFFFFFFF).view(_F64)
        r = np.where(np.isnan(x) | np.isnan(y), nan, r)
        return np.where((y == 0) | (x == 1), 1.0, r)


# ---------------------------------------------------------------------------
# the scalar path: the C library's pow, as PyTorch's scalar loop calls it

def _load_libm():
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        fns = []
        for name, t in (("pow", ctypes.c_double), ("powf", ctypes.c_float)):
            f = getattr(lib, name)
            f.restype = t
            f.argtypes = (t, t)
            fns.append(f)
        return tuple(fns)
    except (OSError, AttributeError):  # no C library to call: extended precision below
        return None


_LIBM = _load_libm()


def _c_pow(x, y, single):
    """The C library's ``pow`` (double) or ``powf`` (``single``) on flat arrays, one
    call per element (about 1.5 us each; only the scalar path's elements come here)."""
    out_t = _F32 if single else _F64
    if _LIBM is None:
        # powl and one rounding: the correctly rounded value, which glibc's pow gives
        # in all but rare cases (its powf in all but about 0.06%)
        with np.errstate(all="ignore"):
            r = np.power(x.astype(np.longdouble), y.astype(np.longdouble)).astype(out_t)
        # a domain error gives the x86 default NaN, whose sign bit is set
        return np.where(np.isnan(r) & ~np.isnan(x) & ~np.isnan(y), -np.abs(r), r)
    f = _LIBM[1] if single else _LIBM[0]
    return np.array([f(a, b) for a, b in zip(x.tolist(), y.tolist())], out_t)


# ---------------------------------------------------------------------------
# which elements PyTorch's loop sends to the vector path

def _iteration(arrays, shape):
    """PyTorch's iteration over broadcast operands: the axis order (outermost first),
    the length of the innermost coalesced run, and whether that run is vectorised
    (every operand contiguous, or one a broadcast scalar)."""
    if all(a.flags.c_contiguous and (a.shape == shape or a.size == 1) for a in arrays):
        return list(range(len(shape))), int(np.prod(shape, dtype=np.int64)), True
    ops = [np.broadcast_to(a, shape) for a in arrays]
    axes = [d for d in range(len(shape)) if shape[d] != 1]
    # order the axes as TensorIterator does: by the strides of the first operand that
    # is not broadcast along them, larger strides outside
    key = []
    for d in axes:
        st = next((abs(o.strides[d]) for o in ops if o.strides[d] != 0), 0)
        key.append(st)
    order = [d for _, d in sorted(zip(key, axes), key=lambda t: -t[0])] if axes else []
    perm = order + [d for d in range(len(shape)) if d not in order]
    if not order:
        return perm, int(np.prod(shape, dtype=np.int64)), True
    inner = shape[order[-1]]
    k = len(order) - 1
    while k > 0:
        outer, inn = order[k - 1], order[k]
        if all(o.strides[outer] == o.strides[inn] * shape[inn] for o in ops):
            inner *= shape[outer]
            k -= 1
        else:
            break
    item = ops[0].itemsize
    inn = order[-1]
    strides = [o.strides[inn] for o in ops]
    vec = all(s == item for s in strides) or (
        len(ops) > 1 and sum(s == 0 for s in strides) == 1 and
        all(s in (0, item) for s in strides))
    return perm, inner, vec


def vector_mask(n, inner, vec, block, threads):
    """Flat mask over ``n`` elements in iteration order: True where PyTorch's loop
    runs the vector kernel. Rows of ``inner`` elements; with at least 32768 elements
    and several threads, the range is first cut into one chunk per thread."""
    mask = np.zeros(n, bool)
    if not vec or n == 0:
        return mask
    chunk = n
    if n >= _GRAIN and threads > 1:
        nt = min(threads, -(-n // _GRAIN))
        chunk = -(-n // nt)
    cuts = sorted(set(range(0, n, inner)) | set(range(0, n, chunk)))
    if len(cuts) <= 256:
        cuts.append(n)
        for s, e in zip(cuts[:-1], cuts[1:]):
            mask[s:s + (e - s) // block * block] = True
        return mask
    i = np.arange(n, dtype=np.int64)
    s = np.maximum(i // inner * inner, i // chunk * chunk)
    e = np.minimum(np.minimum(i // inner * inner + inner, i // chunk * chunk + chunk), n)
    return i < s + (e - s) // block * block


# ---------------------------------------------------------------------------
# entry point

def _threads():
    from ember.backend.threads import get_num_threads
    return get_num_threads()


def _bf16_special(c):
    """PyTorch's bfloat16 kernels for the exponents it special-cases, on float32
    values, each product rounded to bfloat16 as its bfloat16 arithmetic does; and
    whether the kernel is a plain vectorised map (no scalar tail)."""
    def rnd(v):
        return v.astype(_BF16).astype(_F32)
    one = _F32(1)
    def rsqrt(f, vec):
        # the vector kernel divides by the float32 root, the scalar loop by the root
        # rounded to bfloat16
        r = np.sqrt(f)
        return np.where(vec, one / r, one / rnd(r))
    table = {0.5: (lambda f, vec: np.sqrt(f), True), -0.5: (rsqrt, False),
             -1: (lambda f, vec: one / f, False), 2: (lambda f, vec: f * f, False),
             3: (lambda f, vec: rnd(f * f) * f, False),
             -2: (lambda f, vec: one / rnd(f * f), False)}
    return table.get(c)


_BF16 = None


def _round_bf16(v, vec):
    """float32 to bfloat16 as PyTorch rounds: NaN becomes 0xFFFF in the vector
    conversion and 0x7FC0 in the scalar one."""
    r = v.astype(_BF16)
    nan = np.isnan(v)
    if nan.any():
        b = r.view(np.uint16)
        b[nan & vec] = 0xFFFF
        b[nan & ~vec] = 0x7FC0
    return r


_LIMITS = {"float16": (65504.0, "c10::Half"), "bfloat16": (3.3895313892515355e38, "c10::BFloat16")}


def _is_bf16(dt):
    """Whether ``dt`` is ml_dtypes' bfloat16 (kind 'V', two bytes; checked without
    ``dtype.name``, which is slow)."""
    return dt.kind == "V" and dt.itemsize == 2 and dt.name == "bfloat16"


def cpu_pow(x, y):
    """``x ** y`` as PyTorch's CPU kernel computes it, for a float ndarray ``x``
    (float16, bfloat16, float32 or float64) and ``y`` either a Python number (the
    tensor-scalar kernel: the exponent is cast to ``x``'s dtype, or kept in double
    on the scalar path of float32/float64) or an ndarray of ``x``'s dtype (the
    tensor-tensor kernel, broadcast). Of the exponents PyTorch special-cases, the
    float32/float64 ones (2, 3, -1, -2, 0.5, -0.5) are the caller's; bfloat16's are
    here, since their NaNs depend on the element's position."""
    global _BF16
    dt = x.dtype
    scalar = not isinstance(y, np.ndarray)
    bf16 = _is_bf16(dt)
    if scalar and dt.itemsize == 2 and np.isfinite(y):
        limit, name = _LIMITS["bfloat16" if bf16 else "float16"]
        if abs(y) > limit:
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    if bf16:
        _BF16 = dt
    shape = x.shape if scalar else np.broadcast_shapes(x.shape, y.shape)
    arrays = [x] if scalar else [x, y]
    perm, inner, vec = _iteration(arrays, shape)
    n = int(np.prod(shape, dtype=np.int64))
    special = _bf16_special(y) if scalar and bf16 else None
    if special is not None and special[1]:
        mask = np.ones(n, bool)
    else:
        mask = vector_mask(n, inner, vec, _BLOCK[dt.itemsize], _threads())
    wide = dt == _F64
    work = _F64 if wide else _F32
    xf = _flat(x, shape, perm).astype(work, copy=False)
    with np.errstate(all="ignore"):
        if special is not None:
            out = special[0](xf, mask)
        else:
            out = _pow_flat(xf, y, scalar, shape, perm, mask, dt, work)
    out = _round_bf16(out, mask) if bf16 else out.astype(dt, copy=False)
    return out.reshape([shape[d] for d in perm]).transpose(np.argsort(perm))


def _flat(a, shape, perm):
    """``a`` broadcast to ``shape``, flattened in the iteration order ``perm``."""
    if a.shape == shape and a.flags.c_contiguous and perm == sorted(perm):
        return a.reshape(-1)
    return np.broadcast_to(a, shape).transpose(perm).reshape(-1)


def _chunked(fn, x, y, size=1 << 16):
    """``fn`` over cache-sized pieces: a few hundred array passes stay in cache."""
    if x.size <= size:
        return fn(x, y)
    out = np.empty_like(x)
    whole = np.shape(y) != x.shape
    for i in range(0, x.size, size):
        out[i:i + size] = fn(x[i:i + size], y if whole else y[i:i + size])
    return out


def _pow_flat(xf, y, scalar, shape, perm, mask, dt, work):
    wide = work == _F64
    n = xf.size
    if scalar:
        yv = np.array(y, dt).astype(work)  # the vector kernel's exponent, in x's dtype
        ys = np.array(y, _F64) if dt.itemsize >= 4 else yv  # std::pow(float, double)
        yf = None
    else:
        yf = _flat(y, shape, perm).astype(work, copy=False)
    out = np.empty(n, work)
    vec_fn = _sleef_pow_f64 if wide else sleef_powf
    if mask.any():
        xm = xf if mask.all() else xf[mask]
        ym = yv if scalar else (yf if mask.all() else yf[mask])
        out[mask] = _chunked(vec_fn, xm, ym)
    rest = ~mask
    if rest.any():
        xr = xf[rest]
        if scalar:
            yr = np.broadcast_to(ys, xr.shape)
            single = dt.itemsize < 4  # Half and BFloat16 call powf, float32 calls pow
        else:
            yr = yf[rest]
            single = not wide
        if scalar and not single:
            out[rest] = _c_pow(xr.astype(_F64), yr, False).astype(work)
        else:
            out[rest] = _c_pow(xr, yr.astype(work), single)
    return out
