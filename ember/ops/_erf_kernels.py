"""erf and erfc on NumPy arrays: piecewise polynomial fits, evaluated in float64.

Three pieces of ``|x|`` (coefficients fitted for this module by tools/fit_erf.py: least squares
in Chebyshev form against 40-digit values, then written as powers of the piece's
variable ``u``, which maps the piece onto [-1, 1]):

- ``|x| < 0.5``: ``erf(x) = x * A(x**2)``;
- ``0.5 <= |x| < 4.5``: ``erfc(|x|) = exp(-x**2) * B(1 / (1 + |x|))`` (``B`` is erfcx);
- ``4.5 <= |x|`` (up to where erfc underflows): ``erfc(|x|) = exp(-x**2) * C(1/x**2) / |x|``.

Float64 inputs use the float64 fits (at most 3 ulp of relative error against exact
values over each piece, checked on dense grids); float32 and narrower inputs use
shorter fits good to 3e-12, far below half a float32 ulp, so the result rounds to the
same float32 as the exact value except within 3e-12 of a halfway point. float32 erf
(alone or beside erfc) is the exception: it is computed in float32 arithmetic
(``_ERF32_PIECES``), faithfully rounded (within 0.83 ulp of the exact value), as
PyTorch's own float32 erf is. ``exp(-x**2)``
for float64 splits ``x`` into a 4-bit head and a tail so that the square's rounding
does not reach the result (``erfc(26)`` keeps its relative precision).

With numba installed (``ember[fast]``), float32 and float64 arrays of 4096 or more
values (any size once loaded) run as compiled loops in ``_erf_numba`` (see
:func:`numba_kernels`), giving the same bits: the same operations, or for float32 erf,
erfc and erfinv a float64 value checked to round to the same float32.
"""
import numpy as np

from ember import backend as _backend
from ember.backend import fast_kernels as _fast_kernels
from ember.backend import meta as _meta

_A64 = (0.125, 0.1249995716319981, (
    1.0830752376761712, -0.04364190932780537, 0.0016130606122680509, -4.76228797388653e-05,
    1.1515879934537522e-06, -2.3471887997766104e-08, 4.126945746850039e-10,
    -6.376458618226803e-12, 8.746800367272551e-14,))
_B64 = (0.4242410144507012, 0.24242260605742613, (
    0.34661465575504535, 0.2526352162988333, 0.02266411869834562, -0.006382707325920977,
    -0.00012320778744369577, 0.00035392251593489426, -7.69417516818712e-05,
    -3.4316462371702445e-06, 7.165556795655591e-06, -2.2311957215746296e-06,
    1.939422924157927e-07, 1.3691912325129816e-07, -7.804148077359492e-08,
    2.044289953547282e-08, -1.0753540824386844e-09, -1.914042716358052e-09,
    1.2699272930212057e-09, -1.954441031289924e-10, -2.3621342188073677e-10,
    -1.1919970624018294e-10, 1.766430718025282e-10, 1.1578476678784096e-10,
    -8.000569448058255e-11, -4.7975630200716044e-11, 1.4318779779968466e-11,
    8.79723372679576e-12,))
_C64 = (0.02535208446888452, 0.024029766629310938, (
    0.5572939967016198, -0.00630703773235651, 0.00020482119238946782, -1.0631953408175135e-05,
    7.42732308408301e-07, -6.42609194662294e-08, 6.558032862176036e-09, -7.646375441553665e-10,
    9.932710352479792e-11, -1.4137416211468496e-11, 2.422120807933588e-12,
    -4.3281817897929196e-13,))
_A32 = (0.125, 0.1249995716319981, (
    1.0830752376761745, -0.043641909328502246, 0.001613060612217771, -4.762287416164798e-05,
    1.1515880765291555e-06, -2.348304506142103e-08, 4.1274120086268815e-10,))
_B32 = (0.4242410144507012, 0.24242260605742613, (
    0.34661465575515676, 0.2526352162892865, 0.022664118681886683, -0.00638270703159657,
    -0.00012320746609988543, 0.00035391988137272313, -7.694387650598758e-05,
    -3.4212506596057417e-06, 7.171739677029666e-06, -2.2521329520209277e-06,
    1.8565497186436986e-07, 1.5914587351032137e-07, -7.40485679496643e-08,
    8.955064494936651e-09,))
_C32 = (0.0292264014771484, 0.02015608893060328, (
    0.5562823938807792, -0.005235607968682341, 0.00014056952968252785, -6.001418610140784e-06,
    3.432134038260623e-07, -2.4203334063596215e-08, 2.0478772532672965e-09,
    -1.9776810366815587e-10,))

# float32 erf (the result of float32 and narrower inputs) in float32 arithmetic, faithfully
# rounded (at most 0.83 ulp from the true value over every float32: tools/check_erf32.py),
# as PyTorch's own float32 erf is (which reaches 1.0 ulp): five pieces of ``a = |x|``,
# each ``A + B P(v)`` with an 8-term P (least squares on Chebyshev nodes against float64
# erf, each coefficient rounded to float32 in turn and the rest refitted):
# ``a < 0.75``: ``a + a q(a*a)``; beyond, ``K + P(a - c)`` around a center ``c`` (``a - c``
# is exact: Sterbenz) with ``K`` erf(c) in float32 (1 in the last piece). Each multiply and
# add rounds on its own (no fused multiply-add): NumPy's float32 ufuncs and the numba
# kernel give the same bits. Beyond 3.92 erf rounds to +-1 in float32.
_ERF32_EDGES = (0.75, 1.25, 2.0, 3.0)  # the pieces' lower bounds after the first
_ERF32_CAP = 3.92
_ERF32_PIECES = (  # (center c, K, coefficients from the highest power)
    (0.0, 0.0, (
      5.7409648434259e-05, -2.7524692995939404e-05, -0.0007315132534131408, 0.005171540658921003,
      -0.026854246854782104, 0.11283653229475021, -0.37612631916999817, 0.12837916612625122)),
    (1.0, 0.8427007794380188, (
      0.015103155747056007, 0.004024836700409651, -0.06919786334037781, 0.0692075565457344,
      0.13836988806724548, -0.415107786655426, 0.41510748863220215, 1.4060921316172426e-08)),
    (1.625, 0.9784437417984009, (
      -0.005743186455219984, 0.014233160763978958, -0.00218170415610075, -0.049702294170856476,
      0.1148424819111824, -0.13076789677143097, 0.08047223836183548, -6.4707670333064016e-09)),
    (2.5, 0.9995930194854736, (
      0.0004030161944683641, -0.0026550572365522385, 0.0061433943919837475, -0.008645448833703995,
      0.008348283357918262, -0.0054445406422019005, 0.0021783181000500917, 1.928116333260732e-08)),
    (3.453125, 1.0, (
      7.828743400750682e-05, -0.0001169845781987533, 0.00010630222095642239, -8.736835297895595e-05,
      5.697891901945695e-05, -2.592983582871966e-05, 7.48007323636557e-06, -1.0417570592835546e-06,
    )),
)
# the same as float32 tables: [piece] centers and K, [piece, term] coefficients
_ERF32_C = np.array([c for c, _, _ in _ERF32_PIECES], np.float32)
_ERF32_K = np.array([k for _, k, _ in _ERF32_PIECES], np.float32)
_ERF32_P = np.array([p for _, _, p in _ERF32_PIECES], np.float32)

_FITS = {64: (_A64, _B64, _C64, 27.3), 32: (_A32, _B32, _C32, 10.5)}


def _poly(fit, v):
    c, h, p = fit
    u = v - c
    u *= 1.0 / h
    r = u * p[-1]  # the first Horner step without filling an array with p[-1]
    r += p[-2]
    for cf in p[-3::-1]:
        r *= u
        r += cf
    return r


def _erfc_positive(ax, fits, split):
    """erfc on ``0.5 <= ax``, ax finite and below the underflow bound; float64."""
    _, fit_b, fit_c, _ = fits
    mid = ax < 4.5
    e = np.empty_like(ax)
    if mid.all():
        e = _poly(fit_b, 1.0 / (1.0 + ax))
    else:
        a = ax[mid]
        e[mid] = _poly(fit_b, 1.0 / (1.0 + a))
        far = ~mid
        a = ax[far]
        e[far] = _poly(fit_c, 1.0 / (a * a)) / a
    if split:
        head = np.floor(ax * 16.0) * 0.0625  # x * x of the head is exact
        e *= np.exp(-head * head)
        e *= np.exp(-(ax - head) * (ax + head))
    else:
        e *= np.exp(-ax * ax)
    return e


_CHUNK = 16384  # elements per piece: its float64 temporaries stay in the L2 cache
_FUSED = {}  # "erf": the numba kernels' module, or None without numba (tried once)
# numba is imported (about a second) by the first call of at least this many values; a
# few small tensors are not worth it, and give the same values through NumPy
_NUMBA_MIN = 4096


def numba_kernels(x, kind="erf"):
    """The compiled kernels of ``ember/ops/_erf_numba.py`` (``kind`` "erf": erf, erfc, the
    GELU) or ``_erfinv_numba.py`` ("erfinv"), the ``ember[fast]`` extra, for the NumPy
    array ``x``, or None where numba is missing, ``x`` is not float32/float64, or numba
    is not imported yet and ``x`` is small: the NumPy path runs. Both give the same
    values."""
    if x.dtype != np.float32 and x.dtype != np.float64:
        return None
    if kind not in _FUSED and x.size < _NUMBA_MIN:
        return None
    return _fast_kernels.load(_FUSED, kind, f"ember.ops._{kind}_numba")


def _erf32(x, dt):
    """float32 erf of ``x`` (any float dtype narrower than float64, rounded to ``dt`` at
    the end) in float32 arithmetic: ``_ERF32_PIECES``. The numba kernel
    ``_erf_numba._erf32_pass`` performs the same operations."""
    xp = _backend.array_module(x)  # (NumPy, or CuPy for a cuda tensor)
    f32 = np.float32
    x = x.astype(f32, copy=False)
    a = xp.minimum(xp.abs(x), f32(_ERF32_CAP))  # NaN stays NaN (and takes the first piece)
    j = xp.zeros(a.shape, np.intp)
    for edge in _ERF32_EDGES:
        j += a >= f32(edge)
    small = j == 0

    def piece(table):
        return xp.take(xp.asarray(table), j)
    v = xp.where(small, a * a, a - piece(_ERF32_C))
    r = piece(_ERF32_P[:, 0])
    for k in range(1, _ERF32_P.shape[1]):
        r *= v
        r += piece(_ERF32_P[:, k])
    r = xp.where(small, r * a, r)
    r += xp.where(small, a, piece(_ERF32_K))
    return xp.copysign(r, x).astype(dt, copy=False)


# float32 exp(z) of z <= 0 in float32 arithmetic (the exact GELU's gradient takes its
# exp(-x*x/2) so: one pass with numba, ``_erf_numba._exp32_neg``, the same operations):
# ``2**k exp(r)``, ``k`` by adding 1.5 * 2**23 (the float32 sum rounds to an integer, kept
# in its low bits), ``r = (z - k LN2_HI) - k LN2_LO`` (``k LN2_HI`` exact: LN2_HI has 9
# bits; the difference exact, Sterbenz), ``exp(r) = 1 + (r + r*r Q(r))`` with Q Taylor's
# terms to r**8 (|r| <= 0.35: 0.003 ulp left out), then two exact scalings by 2**(k/2)
# built in the exponent bits (``k`` goes down to -150, below float32's least exponent; the
# second rounds once into the subnormals). Each operation rounds on its own: at most
# 0.957 ulp from the exact value over every float32 z <= 0 (tools/check_erf32.py --only
# exp32: faithfully rounded), where NumPy's own float32 exp reaches 2.54 (differences.md).
_EXP32_SHIFT = np.float32(12582912.0)  # 1.5 * 2**23
_EXP32_SHIFT_BITS = 0x4B400000  # its bit pattern: + k in the low bits for |k| < 2**22
_EXP32_INV_LN2 = np.float32(1.4426950408889634)
_EXP32_LN2_HI = np.float32(0.693359375)  # 355 / 512
_EXP32_LN2_LO = np.float32(0.6931471805599453 - 0.693359375)
_EXP32_FLOOR = np.float32(-104.0)  # exp below rounds to 0 in float32
_EXP32_Q = np.array([1 / 40320, 1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5],
                    np.float32)  # from the highest power


def exp32_neg(z):
    """float32 ``exp(z)`` of a float32 array ``z`` (meant for z <= 0; NaN stays NaN) in
    float32 arithmetic: the operations of ``_erf_numba._exp32_neg``, the same bits."""
    f32, i32 = np.float32, np.int32
    z = np.asarray(z, f32)
    shape = z.shape
    z = np.maximum(z.reshape(-1), _EXP32_FLOOR)  # (NaN stays NaN)
    t = z * _EXP32_INV_LN2
    t += _EXP32_SHIFT
    k = t - _EXP32_SHIFT
    r = z - k * _EXP32_LN2_HI
    r -= k * _EXP32_LN2_LO
    q = r * _EXP32_Q[0]
    q += _EXP32_Q[1]
    for c in _EXP32_Q[2:]:
        q *= r
        q += c
    q *= r * r
    q += r
    q += f32(1)
    ki = t.view(i32) - i32(_EXP32_SHIFT_BITS)
    k1 = ki >> 1
    q *= ((k1 + i32(127)) << 23).view(f32)
    q *= ((ki - k1 + i32(127)) << 23).view(f32)
    return q.reshape(shape)


def erf_erfc(x, want_erf=True, want_erfc=True):
    """``(erf(x), erfc(x))`` in ``x``'s float dtype (either may be skipped: None)."""
    if _meta.is_meta(x):  # a meta tensor's placeholder: shapes only, no values to read
        return tuple(_meta.as_meta(x) if w else None for w in (want_erf, want_erfc))
    if _backend.is_gpu_array(x):  # the same formulas on the GPU, unchunked
        return _erf_erfc(x, want_erf, want_erfc)
    x = np.asarray(x)
    fused = numba_kernels(x)
    if fused is not None:
        return fused.erf_erfc(x, want_erf, want_erfc)
    if x.ndim == 0:
        return tuple(r.reshape(()) if r is not None else None
                     for r in _erf_erfc(x.reshape(1), want_erf, want_erfc))
    if x.size <= 2 * _CHUNK:
        return _erf_erfc(x, want_erf, want_erfc)
    flat = x.reshape(-1)
    outs = [np.empty(flat.shape, x.dtype) if w else None for w in (want_erf, want_erfc)]
    for i in range(0, flat.size, _CHUNK):
        parts = _erf_erfc(flat[i:i + _CHUNK], want_erf, want_erfc)
        for o, r in zip(outs, parts):
            if o is not None:
                o[i:i + _CHUNK] = r
    return tuple(o.reshape(x.shape) if o is not None else None for o in outs)


def _erf_erfc(x, want_erf, want_erfc, bits=None):
    dt = x.dtype
    if bits is None:
        bits = 64 if dt == np.float64 else 32
    fit_a, fit_b, fit_c, cap = _FITS[bits]
    if bits == 32 and dt != np.float64 and want_erf:  # float32 erf: its own arithmetic
        return _erf32(x, dt), (_erf_erfc(x, False, True)[1] if want_erfc else None)
    xd = x.astype(np.float64, copy=False)
    # every piece on every element, then selects: gathering the elements of each piece
    # costs more than the arithmetic it saves (the far piece, rare, is gathered)
    x2 = xd * xd
    small = x2 < 0.25
    ea = _poly(fit_a, x2)
    ea *= xd  # erf where |x| < 0.5
    # erfc(|x|) for |x| >= 0.5; past ``cap`` it underflows to 0 (NaN stays NaN)
    a = np.minimum(np.abs(xd), cap)
    e = _poly(fit_b, 1.0 / (1.0 + a))
    far = a >= 4.5
    if far.any():
        af = a[far]
        e[far] = _poly(fit_c, 1.0 / (af * af)) / af
    if bits == 64:
        head = np.floor(a * 16.0) * 0.0625  # x * x of the head is exact
        e *= np.exp(-head * head)
        e *= np.exp(-(a - head) * (a + head))
    else:
        e *= np.exp(-a * a)
    erf = erfc = None
    if want_erf:
        erf = np.where(small, ea, np.copysign(1.0 - e, xd)).astype(dt, copy=False)
    if want_erfc:
        erfc = np.where(small, 1.0 - ea, np.where(xd < 0, 2.0 - e, e)).astype(dt, copy=False)
    return erf, erfc


# Giles' single-precision erfinv ("Approximating the erfinv function", GPU Computing
# Gems, 2011) as the starting point: relative error ~1e-7, then one Halley step
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
_TWO_OVER_SQRT_PI = 1.1283791670955126


def _horner(coefs, v):
    r = v * coefs[0]
    r += coefs[1]
    for cf in coefs[2:]:
        r *= v
        r += cf
    return r


def erfinv(x):
    """The inverse error function in ``x``'s float dtype: ``±inf`` at ``±1``, NaN beyond."""
    if _meta.is_meta(x):
        return _meta.as_meta(x)
    if _backend.is_gpu_array(x):
        return _erfinv(x)
    x = np.asarray(x)
    fused = numba_kernels(x, "erfinv")
    if fused is not None:
        return fused.erfinv32(x) if x.dtype == np.float32 else fused.erfinv64(x)
    if x.ndim == 0:
        return _erfinv(x.reshape(1)).reshape(())
    if x.size <= 2 * _CHUNK:
        return _erfinv(x)
    flat = x.reshape(-1)
    out = np.empty(flat.shape, x.dtype)
    for i in range(0, flat.size, _CHUNK):
        out[i:i + _CHUNK] = _erfinv(flat[i:i + _CHUNK])
    return out.reshape(x.shape)


def _erfinv(x):
    dt = x.dtype
    xd = x.astype(np.float64, copy=False)
    a = np.abs(xd)
    inside = a < 1.0  # NaN, +-1 and beyond are set at the end
    if inside.all():
        ai = a
    else:
        ai = np.where(inside, a, 0.0)
    with np.errstate(divide="ignore"):
        w = -np.log((1.0 - ai) * (1.0 + ai))
    y = np.empty_like(ai)
    central = w < 5.0
    if central.all():
        y = _horner(_GILES_CENTRAL, w - 2.5)
    else:
        y[central] = _horner(_GILES_CENTRAL, w[central] - 2.5)
        tail = ~central
        y[tail] = _horner(_GILES_TAIL, np.sqrt(w[tail]) - 3.0)
    y *= ai
    # Halley steps on f(y) = erf(y) - a: one for float32 (~1e-7 to ~1e-20), two for
    # float64, more where 1 - |x| < 1e-7 (beyond the range Giles' fit was made for)
    if dt != np.float64:  # float32 needs erf to 3e-12 only
        y = _halley(y, ai, 32)
    else:
        y = _halley(y, ai)
        y = _halley(y, ai)
        far = w > 16.0
        if far.any():
            # start again from the tail's asymptote erfc(y) ~ exp(-y*y) / (y sqrt(pi))
            af = ai[far]
            lq = -np.log(1.0 - af)
            yf = np.sqrt(lq)
            for _ in range(3):
                yf = np.sqrt(lq - np.log(1.7724538509055159 * yf))
            for _ in range(3):
                yf = _halley(yf, af)
            y[far] = yf
    y = np.copysign(y, xd)
    if not inside.all():
        y = np.where(a == 1.0, np.copysign(np.inf, xd), y)
        y = np.where((a > 1.0) | np.isnan(a), np.nan, y)
    return y.astype(dt, copy=False)


def _halley(y, a, bits=64):
    """One Halley step of ``erf(y) = a`` (y, a >= 0), the residual written with erfc
    where ``a >= 0.5`` so that it keeps its relative precision in the tail (``1 - a``
    is exact there)."""
    erf_y, erfc_y = _erf_erfc(y, True, True, bits)
    f = np.where(a < 0.5, erf_y - a, (1.0 - a) - erfc_y)
    fp = np.exp(-y * y)
    fp *= _TWO_OVER_SQRT_PI
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        step = f / fp
        step /= 1.0 + y * step
    return y - np.where(fp > 0, step, 0.0)
