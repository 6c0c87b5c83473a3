"""Array kernels of the gamma family and the normal distribution, in NumPy alone.

Every kernel takes a float array, computes in float64 and returns float64; the
callers in ``ember.ops.special`` cast back to the input's dtype. The methods are the
textbook ones, written vectorised: Stirling's series after an upward shift for
lgamma and digamma (with Taylor series around 1 and 2, where lgamma vanishes and a
shifted Stirling sum would lose its relative precision), Euler-Maclaurin for the
Hurwitz zeta (hence polygamma), the power series and Legendre's continued fraction
for the incomplete gamma, and Newton steps on erfc for the normal quantile.
"""
import math

import numpy as np

from ember.ops.unary import _erf_parts

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_EULER = 0.57721566490153286061
_SQRT_PI = math.sqrt(math.pi)
_SQRT2 = math.sqrt(2.0)

# B_2k for k = 1..12
_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798, -174611 / 330, 854513 / 138, -236364091 / 2730]
# Stirling's series for lgamma: B_2k / (2k (2k - 1) x^(2k-1)), k = 1..7
_STIRLING = [b / (2 * k * (2 * k - 1)) for k, b in enumerate(_BERNOULLI[:7], 1)]


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def _half_turns(x):
    """x reduced exactly into [-1, 1] modulo 2 (no error growth in |x|)."""
    return x - 2.0 * np.round(x / 2.0)


def _sin_reduced(r):
    """sin(pi r) for r in [-1, 1], folded exactly into [-1/2, 1/2] (sin(pi - t) = sin t):
    near r = +-1, where the zero is, pi r's rounding would otherwise cost the whole
    relative precision of the small result."""
    r = np.where(r > 0.5, 1.0 - r, np.where(r < -0.5, -1.0 - r, r))
    return np.sin(np.pi * r)


def sinpi(x):
    """``sin(pi x)``, exact reduction first, accurate relatively near its zeros."""
    return _sin_reduced(_half_turns(x))


def cospi(x):
    """``cos(pi x) = sin(pi (1/2 - |r|))``: 1/2 - |r| is exact where the result is small."""
    return _sin_reduced(0.5 - np.abs(_half_turns(x)))


def _stirling_remainder(x):
    """lgamma(x) - ((x - 1/2) log x - x + log(2 pi)/2) for x >= 10: the series' tail."""
    inv = 1.0 / x
    inv2 = inv * inv
    s = np.zeros_like(x)
    for c in reversed(_STIRLING):
        s = s * inv2 + c
    return s * inv


def _stirling_lgamma(x):
    """lgamma for x >= 10: the asymptotic series, 7 terms reach 1 ulp."""
    return (x - 0.5) * np.log(x) - x + _HALF_LOG_2PI + _stirling_remainder(x)


def _taylor_coeffs():
    # lgamma(1 + e) = -gamma e + sum_k (-1)^k zeta(k) / k e^k; zeta(k) from our own kernel
    ks = np.arange(2, 40, dtype=np.float64)
    z = hurwitz_zeta(ks, np.ones_like(ks))
    return [-_EULER] + [(-1) ** int(k) * zk / k for k, zk in zip(ks, z)]


_LGAMMA_TAYLOR = None


def _lgamma1p_small(e):
    """lgamma(1 + e) for |e| <= 0.25 from its Taylor series: exact zeros at 1 and 2."""
    global _LGAMMA_TAYLOR
    if _LGAMMA_TAYLOR is None:
        _LGAMMA_TAYLOR = _taylor_coeffs()
    s = np.zeros_like(e)
    for c in reversed(_LGAMMA_TAYLOR):
        s = s * e + c
    return s * e + 0.0  # +0.0, not -0.0, at e = 0: lgamma(1) and lgamma(2) are +0


def _lgamma_pos(x):
    """lgamma for x >= 0.5 (finite)."""
    out = np.empty_like(x)
    near1 = np.abs(x - 1) <= 0.25
    near2 = np.abs(x - 2) <= 0.25
    big = x >= 10
    mid = ~(near1 | near2 | big)
    if near1.any():
        out[near1] = _lgamma1p_small(x[near1] - 1)
    if near2.any():
        e = x[near2] - 2
        out[near2] = _lgamma1p_small(e) + np.log1p(e)
    if big.any():
        out[big] = _stirling_lgamma(x[big])
    if mid.any():
        xm = x[mid]
        prod = np.ones_like(xm)
        z = xm.copy()
        for _ in range(10):
            step = z < 10
            prod = np.where(step, prod * z, prod)
            z = np.where(step, z + 1, z)
        out[mid] = _stirling_lgamma(z) - np.log(prod)
    return out


def lgamma(x):
    """log|Gamma(x)|: +inf at the poles 0, -1, -2, ... and at +-inf."""
    x = _f64(x)
    out = np.full(x.shape, np.nan)
    fin = np.isfinite(x)
    out[np.isinf(x)] = np.inf
    pole = fin & (x <= 0) & (x == np.floor(x))
    out[pole] = np.inf
    pos = fin & (x >= 0.5)
    if pos.any():
        out[pos] = _lgamma_pos(x[pos])
    neg = fin & (x < 0.5) & ~pole
    if neg.any():
        xn = x[neg]
        with np.errstate(divide="ignore"):
            vals = np.log(np.pi / np.abs(sinpi(xn))) - _lgamma_pos(1 - xn)
        # pi / sin(pi x) overflows at subnormal x, where lgamma(x) = -log|x| to the last bit
        tiny = np.abs(xn) < 1e-300
        vals[tiny] = -np.log(np.abs(xn[tiny]))
        out[neg] = vals
    return out


def _digamma_asym(x):
    inv2 = 1.0 / (x * x)
    coef = [b / (2 * k) for k, b in enumerate(_BERNOULLI[:7], 1)]
    s = np.zeros_like(x)
    for c in reversed(coef):
        s = s * inv2 + c
    return np.log(x) - 0.5 / x - s * inv2


def _digamma_pos(x):
    acc = np.zeros_like(x)
    z = x.copy()
    for _ in range(10):
        step = z < 10
        acc = np.where(step, acc + 1 / np.where(step, z, 1.0), acc)
        z = np.where(step, z + 1, z)
    return _digamma_asym(z) - acc


def digamma(x):
    """psi(x) = d/dx lgamma(x): -inf at 0, NaN at the negative integers (as PyTorch)."""
    x = _f64(x)
    out = np.full(x.shape, np.nan)
    out[x == np.inf] = np.inf
    fin = np.isfinite(x)
    out[x == 0] = np.copysign(np.inf, -np.copysign(1.0, x[x == 0]))
    pos = fin & (x > 0)
    if pos.any():
        out[pos] = _digamma_pos(x[pos])
    neg = fin & (x < 0) & (x != np.floor(x))
    if neg.any():
        xn = x[neg]
        out[neg] = _digamma_pos(1 - xn) - np.pi * cospi(xn) / sinpi(xn)
    return out


# below this q the upward shift of the summation would cost |q| steps
_FAR_NEGATIVE = 16.0


def _hurwitz_far_negative(s, q):
    """zeta(s, q) for an integer s > 1 and a non-integer q < -16, in O(1) whatever |q|.

    The terms (q + k)^-s split at the sign change: K = ceil(-q) negative bases
    -(r + j), j = 0..K-1, with r = 1 - (q + K) in (0, 1), then the positive bases of
    zeta(s, q + K). So zeta(s, q) = zeta(s, q + K) + (-1)^s (zeta(s, r) - zeta(s, r + K)),
    three sums at positive arguments; q + K and r are exact (|q| < 2^52). The two O(1)
    sums are added first: at a half-integer q they cancel exactly (odd s), leaving the
    small tail to full relative precision."""
    k = np.ceil(-q)
    frac = q + k
    r = 1.0 - frac
    sign = np.where(np.mod(s, 2) == 0, 1.0, -1.0)
    tail = hurwitz_zeta(s, r + k)
    with np.errstate(over="ignore", invalid="ignore"):
        out = (hurwitz_zeta(s, frac) + sign * hurwitz_zeta(s, r)) - sign * tail
    # a large s overflows both O(1) sums: the base nearer 0 decides the infinity
    clash = np.isnan(out)
    out[clash] = np.where(frac[clash] < r[clash], np.inf,
                          np.where(frac[clash] > r[clash], sign[clash] * np.inf,
                                   -sign[clash] * tail[clash]))
    return out


def hurwitz_zeta(s, q):
    """zeta(s, q) = sum_k (q + k)^-s, for s > 1 (PyTorch/Cephes conventions elsewhere)."""
    s, q = np.broadcast_arrays(_f64(s), _f64(q))
    out = np.full(s.shape, np.nan)
    out[s == 1] = np.inf
    pole = (s > 1) & (q <= 0) & (q == np.floor(q))
    out[pole] = np.inf
    ok = (s > 1) & ~pole & ~np.isnan(q) & ((q > 0) | (s == np.floor(s)))
    inf_s = (s == np.inf) & ~np.isnan(q)
    # PyTorch's values at s = inf: 1 at q = 1, inf below, NaN above
    out[inf_s] = np.where(q[inf_s] == 1, 1.0, np.where(q[inf_s] > 1, np.nan, np.inf))
    ok &= np.isfinite(q) & np.isfinite(s)
    far = ok & (q < -_FAR_NEGATIVE)
    if far.any():
        out[far] = _hurwitz_far_negative(s[far], q[far])
        ok &= ~far
    if not ok.any():
        return out
    sv, qv = s[ok], q[ok]
    # shift q up to a = q + N >= max(12, s + 2), then Euler-Maclaurin on the tail
    lo = np.maximum(12.0, np.minimum(sv, 1e4) + 2)
    total = np.zeros_like(sv)
    a = qv.copy()
    for _ in range(int(np.max(np.ceil(lo - qv)).clip(0, 1e6)) + 1):
        step = a < lo
        if not step.any():
            break
        total = np.where(step, total + np.power(np.where(step, a, 1.0), -sv), total)
        a = np.where(step, a + 1, a)
    with np.errstate(over="ignore", under="ignore"):
        a_s = np.power(a, -sv)
        total += np.power(a, 1 - sv) / (sv - 1) + 0.5 * a_s
        fact = 1.0
        rising = sv.copy()  # s (s+1) ... (s + 2j - 2)
        term_pow = a_s / a  # a^(-s-1)
        inv2 = 1.0 / (a * a)
        for j, b in enumerate(_BERNOULLI, 1):
            fact *= (2 * j - 1) * (2 * j)
            total += b / fact * rising * term_pow
            rising = rising * (sv + 2 * j - 1) * (sv + 2 * j)
            term_pow = term_pow * inv2
    out[ok] = total
    return out


def polygamma(n, x):
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x) for n >= 1."""
    x = _f64(x)
    if n == 0:
        return digamma(x)
    sign = -1.0 if n % 2 == 0 else 1.0
    z = hurwitz_zeta(np.full(x.shape, n + 1.0), x)
    if n == 1:
        # PyTorch's trigamma has its own kernel, which gives 0 at +inf and NaN at -inf
        z[x == np.inf] = 0.0
        z[x == -np.inf] = np.nan
    with np.errstate(over="ignore", invalid="ignore"):
        return sign * (math.gamma(n + 1) if n < 171 else np.inf) * z


def _log_prefactor(a, x):
    """log(x^a e^-x / Gamma(a)). For a >= 10 it is rewritten as
    a (log1p(t) - t) + log(a)/2 - log(2 pi)/2 - (Stirling's remainder), t = x/a - 1, so
    that the large terms a log x, x and lgamma(a) never cancel."""
    out = np.empty(np.broadcast(a, x).shape)
    big = a >= 10
    with np.errstate(divide="ignore", invalid="ignore"):
        small = ~big
        if small.any():
            out[small] = a[small] * np.log(x[small]) - x[small] - lgamma(a[small])
        if big.any():
            ab, ratio = a[big], x[big] / a[big]
            t = ratio - 1
            # log1p(t) near the diagonal; log(x / a) far below it, where t rounds to -1
            # and would lose x's digits (x = 1e-10, a = 10 lost 1e-6 of the value)
            log_ratio = np.where(np.abs(t) < 0.5, np.log1p(t), np.log(ratio))
            # the remainder summed directly: lgamma(a) minus Stirling's leading terms
            # cancels to a 1e-9 relative error at a = 1e6
            out[big] = (ab * (log_ratio - t) + 0.5 * np.log(ab) - _HALF_LOG_2PI
                        - _stirling_remainder(ab))
    return out


def _iterations(a):
    return int(20 * np.sqrt(np.max(a, initial=1.0))) + 200


def _igamma_series(a, x):
    """P(a, x) by its power series (x < a + 1)."""
    term = np.ones_like(a)
    total = np.ones_like(a)
    ap = a.copy()
    active = np.arange(a.size)
    # the terms fall like exp(-k^2 / 2a): about 9 sqrt(a) of them reach the rounding
    for _ in range(_iterations(a)):
        ap[active] += 1
        term[active] *= x[active] / ap[active]
        total[active] += term[active]
        done = np.abs(term[active]) <= np.abs(total[active]) * 1e-17
        active = active[~done]
        if active.size == 0:
            break
    return np.exp(_log_prefactor(a, x)) * total / a


def _lgamma1p(a):
    """lgamma(1 + a) for 0 < a <= 1.25, to full relative precision near a = 0."""
    out = np.empty_like(a)
    small = a <= 0.25
    out[small] = _lgamma1p_small(a[small])
    out[~small] = lgamma(1 + a[~small])
    return out


def _igammac_small_x(a, x):
    """Q(a, x) for x <= 1.1 and a small (see ``_small_x_region``), without forming 1 - P:
    Q = 1 - x^a / Gamma(a + 1) - x^a / Gamma(a) sum_{n >= 1} (-x)^n / (n! (a + n)), the
    head as an expm1, so a Q of 1e-298 (a = x = 1e-300) keeps its digits where 1 - P was
    -2e-14 (Gautschi's method, as in Cephes' igamc)."""
    fac = np.ones_like(a)
    total = np.zeros_like(a)
    for n in range(1, 40):  # x <= 1.1: 1.1^n / n! is below 1e-17 of the sum by n = 25
        fac = fac * (-x / n)
        total = total + fac / (a + n)
    log_x = np.log(x)
    head = -np.expm1(a * log_x - _lgamma1p(a))
    with np.errstate(under="ignore"):
        return head - np.exp(a * log_x - lgamma(a)) * total


def _small_x_region(a, x):
    """Where Q is computed by ``_igammac_small_x`` and P as 1 - Q: x <= 1.1 and a below
    -0.4 / log(x) (x <= 0.5) or 1.1 x (0.5 < x <= 1.1), where P >= 0.6, so 1 - Q keeps P's
    relative precision too (Cephes' igamc's regions)."""
    with np.errstate(divide="ignore"):
        bound = np.where(x <= 0.5, -0.4 / np.log(x), 1.1 * x)
    return (x <= 1.1) & (a <= bound)


def _igammac_cf(a, x):
    """Q(a, x) by Legendre's continued fraction, modified Lentz (x >= a + 1)."""
    tiny = 1e-300
    b = x + 1 - a
    c = np.full_like(a, 1 / tiny)
    d = 1 / b
    h = d.copy()
    active = np.arange(a.size)
    for i in range(1, _iterations(a)):
        an = -i * (i - a[active])
        b[active] += 2
        dd = an * d[active] + b[active]
        dd = np.where(np.abs(dd) < tiny, tiny, dd)
        cc = b[active] + an / c[active]
        cc = np.where(np.abs(cc) < tiny, tiny, cc)
        dd = 1 / dd
        delta = dd * cc
        d[active], c[active] = dd, cc
        h[active] *= delta
        done = np.abs(delta - 1) <= 1e-16
        active = active[~done]
        if active.size == 0:
            break
    return np.exp(_log_prefactor(a, x)) * h


# Temme's uniform expansion Q(a, x) = erfc(eta sqrt(a/2)) / 2 + e^(-a eta^2/2) /
# sqrt(2 pi a) * sum_k C_k(eta) a^-k: Taylor coefficients of C_1 and C_2 (Cephes' igam.h)
_TEMME_C1 = (-1.8518518518518519e-3, -3.4722222222222222e-3, 2.6455026455026455e-3)
_TEMME_C2 = 4.1335978835978836e-3
_TEMME_C0 = (-1 / 3, 1 / 12, -2 / 135, 1 / 864, 1 / 2835)
_TEMME_FROM = 1e8  # from here the series' and the fraction's sqrt(a) terms cost too much


def _log1pmx(s):
    """log(1 + s) - s, by its series where the difference would cancel."""
    out = np.empty_like(s)
    small = np.abs(s) < 0.01
    with np.errstate(divide="ignore", invalid="ignore"):
        out[~small] = np.log1p(s[~small]) - s[~small]
    ss = s[small]
    acc = np.zeros_like(ss)
    for k in range(12, 1, -1):
        acc = acc * ss + (-1) ** (k + 1) / k
    out[small] = acc * ss * ss
    return out


def _igamma_temme(a, x, upper):
    """P or Q for a >= 1e8 by Temme's expansion: C_0 exactly (1/mu - 1/eta, its Taylor
    series near eta = 0), C_1 and C_2 from their leading terms, whose omitted parts are
    below 1e-16 once divided by a and a^2."""
    mu = (x - a) / a
    eta = np.sign(mu) * np.sqrt(-2 * _log1pmx(mu))
    c0 = np.zeros_like(eta)
    near = np.abs(eta) < 1e-3
    for c in reversed(_TEMME_C0):
        c0[near] = c0[near] * eta[near] + c
    far = ~near
    c0[far] = 1 / mu[far] - 1 / eta[far]
    c1 = _TEMME_C1[0] + eta * (_TEMME_C1[1] + eta * _TEMME_C1[2])
    total = c0 + (c1 + _TEMME_C2 / a) / a
    erfc = np.frompyfunc(math.erfc, 1, 1)
    sign = 1.0 if upper else -1.0
    head = 0.5 * erfc(sign * eta * np.sqrt(a / 2)).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        weight = np.exp(-0.5 * a * eta * eta)
        # far from the diagonal the weight underflows to 0 while the truncated C_1 may be
        # infinite (x / a rounds to 0): the term is 0 there, not 0 * inf
        tail = np.where(weight == 0, 0.0, weight * total / np.sqrt(2 * np.pi * a))
    return head + sign * tail


def igamma(a, x, upper=False):
    """Regularised incomplete gamma: P(a, x) (``upper=False``) or Q(a, x)."""
    a, x = np.broadcast_arrays(_f64(a), _f64(x))
    out = np.full(a.shape, np.nan)
    lower = not upper
    valid = (a >= 0) & (x >= 0) & ~np.isnan(a) & ~np.isnan(x)
    zero_a = valid & (a == 0)
    out[zero_a & (x > 0)] = 1.0 if lower else 0.0
    zero_x = valid & (x == 0) & (a > 0)
    out[zero_x] = 0.0 if lower else 1.0
    inf_x = valid & (x == np.inf) & (a > 0) & (a < np.inf)
    out[inf_x] = 1.0 if lower else 0.0
    inf_a = valid & (a == np.inf) & (x < np.inf) & (x > 0)
    out[inf_a] = 0.0 if lower else 1.0
    body = valid & (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
    temme = body & (a >= _TEMME_FROM)
    if temme.any():
        out[temme] = _igamma_temme(a[temme], x[temme], upper)
        body &= ~temme
    small_x = body & _small_x_region(a, x)
    if small_x.any():
        q = _igammac_small_x(a[small_x], x[small_x])
        out[small_x] = 1 - q if lower else q
        body &= ~small_x
    ser = body & (x < a + 1)
    cf = body & ~ser
    if ser.any():
        p = _igamma_series(a[ser], x[ser])
        out[ser] = p if lower else 1 - p
    if cf.any():
        q = _igammac_cf(a[cf], x[cf])
        out[cf] = 1 - q if lower else q
    # a probability: a last rounding (of the prefactor's exp) never leaves [0, 1]
    np.clip(out, 0.0, 1.0, out=out)
    return out


def igamma_grad_x(a, x):
    """dP/dx = x^(a-1) e^-x / Gamma(a)."""
    a, x = np.broadcast_arrays(_f64(a), _f64(x))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.exp((a - 1) * np.log(x) - x - lgamma(a))


# ---------------------------------------------------------------- the normal distribution

def _erfc_cf(ax):
    """erfc(ax) e^(ax^2) for ax >= 1.5 by the continued fraction (120 terms reach 1 ulp there,
    where 1 - erf would already have lost a digit)."""
    f = ax.copy()
    for k in range(120, 0, -1):
        f = ax + (k / 2) / f
    return 1 / (_SQRT_PI * f)


def erfcx(x):
    """exp(x^2) erfc(x), without overflow for large positive x."""
    x = _f64(x)
    out = np.empty_like(x)
    big = x >= 1.5
    with np.errstate(over="ignore", invalid="ignore"):
        xs = np.where(big, 0.0, x)
        small = np.exp(xs * xs) * _erf_parts(xs)[1]
    out[:] = small
    if big.any():
        xb = x[big]
        out[big] = np.where(xb == np.inf, 0.0, _erfc_cf(np.where(xb == np.inf, 1.5, xb)))
    out[x == -np.inf] = np.inf
    return out


def ndtr(x):
    """The standard normal CDF, with relative accuracy in the lower tail."""
    z = -_f64(x) / _SQRT2
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        tail = np.exp(-z * z) * _erfc_cf(np.maximum(z, 1.5))
    near = _erf_parts(np.minimum(z, 1.5))[1]
    return 0.5 * np.where(z >= 1.5, np.where(z == np.inf, 0.0, tail), near)


def log_ndtr(x):
    """log of the normal CDF, accurate in both tails."""
    x = _f64(x)
    out = np.empty_like(x)
    low = x < -1
    if low.any():
        z = -x[low] / _SQRT2
        with np.errstate(over="ignore", invalid="ignore"):
            out[low] = np.log(erfcx(z) / 2) - z * z
        out[low & (x == -np.inf)] = -np.inf
    hi = ~low
    if hi.any():
        out[hi] = np.log1p(-ndtr(-x[hi]))
    return out


def ndtri(p):
    """The standard normal quantile: Abramowitz-Stegun 26.2.23 start, then Newton on erfc."""
    p = _f64(p)
    out = np.full(p.shape, np.nan)
    out[p == 0] = -np.inf
    out[p == 1] = np.inf
    body = (p > 0) & (p < 1)
    if not body.any():
        return out
    pv = p[body]
    upper = pv > 0.5
    q = np.where(upper, 1 - pv, pv)  # the smaller tail, where x <= 0
    t = np.sqrt(-2 * np.log(q))
    x = -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t)
          / (1 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t ** 3))
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for _ in range(4):
            # Halley on f(x) = ndtr(x) - q; ndtr(x) for x <= 0 is 0.5 erfc(-x / sqrt 2)
            z = -x / _SQRT2
            cdf = 0.5 * np.where(z >= 1.5, np.exp(-z * z) * _erfc_cf(np.maximum(z, 1.5)),
                                 _erf_parts(np.minimum(z, 1.5))[1])
            pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
            u = (cdf - q) / pdf
            x = x - u / (1 + 0.5 * x * u)
    out[body] = np.where(upper, -x, x)
    out[p == 0.5] = 0.0
    return out
