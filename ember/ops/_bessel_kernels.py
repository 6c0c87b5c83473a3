"""Array kernels of the Bessel family, the Airy function and the orthogonal polynomials.

Bessel functions are computed from three textbook tools, written vectorised:

- the integral J_n(x) = (1/2pi) int cos(n t - x sin t) dt over a period, by the
  trapezoid rule, which is spectrally accurate for a periodic integrand: 128 nodes
  give every order up to 60 for |x| <= 25 to rounding. Y0 and Y1 follow from the
  J_n by Neumann's series (no cancellation, unlike their power series);
- K_nu(x) e^x = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt, also by the trapezoid
  rule (the integrand is analytic and decays double-exponentially);
- Hankel's asymptotic series for |x| > 25 (J, Y), > 20 (I, K), whose smallest term
  there is below the float64 rounding.

The power series serve where they have no cancellation (I_nu everywhere below 20,
K_nu below 1). The Airy function's Maclaurin series runs in long double over the
interval where it cancels mildly. Results are float64; callers cast back.
"""
import math

import numpy as np

_EULER = 0.57721566490153286061
_M = 128
_TAU = 2 * np.pi * np.arange(_M) / _M
_SIN_TAU = np.sin(_TAU)
_CHUNK = 4096


def _chunked(fn, x, width=1):
    """Apply ``fn`` to 1-D ``x`` in chunks (the kernels make (chunk, nodes) temporaries)."""
    if x.size <= _CHUNK:
        return fn(x)
    parts = [fn(x[i:i + _CHUNK]) for i in range(0, x.size, _CHUNK)]
    return np.concatenate(parts, axis=0)


def _j_orders(x, orders):
    """J_n(x) for |x| <= 25 and each n in ``orders``: shape (len(x), len(orders))."""
    orders = np.asarray(orders, dtype=np.float64)
    cosn = np.cos(np.outer(_TAU, orders))
    sinn = np.sin(np.outer(_TAU, orders))

    def one(xc):
        arg = np.outer(xc, _SIN_TAU)
        return (np.cos(arg) @ cosn + np.sin(arg) @ sinn) / _M
    return _chunked(one, x)


def _asym_coeff_series(nu, z, n_terms, alternate):
    """sum_k s^k a_k(nu) / z^k with a_k = prod_{i<=k} (4nu^2 - (2i-1)^2) / (k! 8^k);
    s = -1 when ``alternate``. Returns the even and odd parts separately."""
    mu = 4.0 * nu * nu
    even = np.zeros_like(z)
    odd = np.zeros_like(z)
    term = np.ones_like(z)
    for k in range(n_terms):
        if k % 2 == 0:
            even += term
        else:
            odd += term
        term = term * (mu - (2 * k + 1) ** 2) / ((k + 1) * 8.0 * z)
        if alternate:
            term = -term
    return even, odd


def _hankel_pq(nu, x):
    """P and Q of Hankel's expansion: J = sqrt(2/(pi x)) (P cos chi - Q sin chi)."""
    mu = 4.0 * nu * nu
    p = np.zeros_like(x)
    q = np.zeros_like(x)
    term = np.ones_like(x)
    for k in range(40):
        sign = 1.0 if (k // 2) % 2 == 0 else -1.0
        if k % 2 == 0:
            p += sign * term
        else:
            q += sign * term
        term = term * (mu - (2 * k + 1) ** 2) / ((k + 1) * 8.0 * x)
    return p, q


def _bessel_jy(x, which):
    """J0, J1, Y0 or Y1 (``which`` in 'j0', 'j1', 'y0', 'y1') of a float64 array."""
    x = np.asarray(x, dtype=np.float64)
    order = int(which[1])
    ax = np.abs(x)
    out = np.full(x.shape, np.nan)  # PyTorch gives NaN at +-inf too
    fin = np.isfinite(x)
    if which[0] == "y":
        out[x == 0] = -np.inf
        fin &= x > 0
    tiny = fin & (ax < 1) & (which[0] == "j")
    if tiny.any():
        # the power series: exact signed zeros and relative accuracy near 0
        xt = x[tiny]
        h2 = -(xt / 2) ** 2
        term = np.ones_like(xt) if order == 0 else xt / 2
        total = term.copy()
        for k in range(1, 14):
            term = term * h2 / (k * (k + order))
            total += term
        out[tiny] = total
        fin &= ~tiny
    small = fin & (ax <= 25)
    large = fin & (ax > 25)
    if small.any():
        xs = ax[small]
        if which == "j0":
            out[small] = _j_orders(xs, [0])[:, 0]
        elif which == "j1":
            out[small] = _j_orders(xs, [1])[:, 0]
        else:
            ok = xs > 0
            xs = np.where(ok, xs, 1.0)
            js = _j_orders(xs, np.arange(62))
            lg = np.log(xs / 2) + _EULER
            k = np.arange(1, 31)
            if which == "y0":
                s = js[:, 2 * k] @ ((-1.0) ** k / k)
                val = (2 / np.pi) * (lg * js[:, 0] - 2 * s)
            else:
                s = js[:, 2 * k + 1] @ ((-1.0) ** k * (2 * k + 1) / (k * (k + 1)))
                val = (2 / np.pi) * (-js[:, 0] / xs + (lg - 1) * js[:, 1] - s)
            out[small] = np.where(ok, val, out[small])
    if large.any():
        xl = ax[large]
        p, q = _hankel_pq(order, xl)
        c, s = np.cos(xl), np.sin(xl)
        if order == 0:
            cchi, schi = (c + s) / math.sqrt(2), (s - c) / math.sqrt(2)
        else:
            cchi, schi = (s - c) / math.sqrt(2), -(s + c) / math.sqrt(2)
        amp = np.sqrt(2 / (np.pi * xl))
        out[large] = amp * (p * cchi - q * schi) if which[0] == "j" else \
            amp * (p * schi + q * cchi)
    if which == "j1":
        out = np.where((x < 0) & ~tiny, -out, out)
    return out


def bessel_j0(x):
    return _bessel_jy(x, "j0")


def bessel_j1(x):
    return _bessel_jy(x, "j1")


def bessel_y0(x):
    return _bessel_jy(x, "y0")


def bessel_y1(x):
    return _bessel_jy(x, "y1")


def _i_series(nu, ax):
    """I_nu(ax) by its power series (positive terms)."""
    h2 = (ax / 2) ** 2
    term = (ax / 2) ** nu / math.gamma(nu + 1)
    total = term.copy()
    for k in range(1, 80):
        term = term * h2 / (k * (k + nu))
        total += term
    return total


def bessel_i_scaled(x, nu):
    """I_nu(x) e^-|x| for nu in (0, 1)."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    out = np.full(x.shape, np.nan)
    out[np.isinf(x)] = 0.0  # PyTorch: i0e(+-inf) = 0 (and i0(+-inf) = 0 * inf = NaN)
    small = ax <= 20
    large = np.isfinite(x) & ~small
    if small.any():
        xs = ax[small]
        out[small] = _i_series(nu, xs) * np.exp(-xs)
    if large.any():
        xl = ax[large]
        even, odd = _asym_coeff_series(nu, xl, 40, alternate=True)
        out[large] = (even + odd) / np.sqrt(2 * np.pi * xl)
    if nu == 1:
        out = np.where(np.signbit(x), -out, out)
    return out


def bessel_i(x, nu):
    """I_nu(x) for nu in (0, 1)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return bessel_i_scaled(x, nu) * np.exp(np.abs(x))


_T_STEP = 0.025
_T_NODES = np.arange(0, 5.5, _T_STEP)
_T_WEIGHTS = np.full(_T_NODES.shape, _T_STEP)
_T_WEIGHTS[0] = _T_STEP / 2


def _k_scaled_mid(nu, z):
    """K_nu(z) e^z for 1 <= z < 20 by the trapezoid rule."""
    c = np.cosh(_T_NODES) - 1
    w = _T_WEIGHTS * np.cosh(nu * _T_NODES)
    return _chunked(lambda zc: np.exp(-np.outer(zc, c)) @ w, z)


def _k_scaled_large(nu, z):
    even, odd = _asym_coeff_series(nu, z, 40, alternate=False)
    return (even + odd) * np.sqrt(np.pi / (2 * z))


def _k_series(nu, x):
    """K0 or K1 for 0 < x < 1 by their power series."""
    h2 = (x / 2) ** 2
    lg = np.log(x / 2)
    if nu == 0:
        term = np.ones_like(x)
        harm = 0.0
        total = np.zeros_like(x)
        for k in range(1, 30):
            term = term * h2 / (k * k)
            harm += 1.0 / k
            total += harm * term
        return -(lg + _EULER) * _i_series(0, x) + total
    term = np.ones_like(x)
    harm_k, harm_k1 = 0.0, 1.0  # H_k and H_{k+1}
    total = (2 * -_EULER + harm_k + harm_k1) * term
    for k in range(1, 30):
        term = term * h2 / (k * (k + 1))
        harm_k += 1.0 / k
        harm_k1 += 1.0 / (k + 1)
        total += (2 * -_EULER + harm_k + harm_k1) * term
    return 1 / x + lg * _i_series(1, x) - (x / 4) * total


def bessel_k(x, nu, scaled=False):
    """K_nu(x) (or K_nu(x) e^x) for nu in (0, 1): inf at 0, NaN below."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, np.nan)
    out[x == 0] = np.inf
    out[x == np.inf] = 0.0
    small = (x > 0) & (x < 1)
    mid = (x >= 1) & (x < 20)
    large = (x >= 20) & (x < np.inf)
    if small.any():
        xs = x[small]
        v = _k_series(nu, xs)
        out[small] = v * np.exp(xs) if scaled else v
    for mask, fn in ((mid, _k_scaled_mid), (large, _k_scaled_large)):
        if mask.any():
            xm = x[mask]
            v = fn(nu, xm)
            out[mask] = v if scaled else v * np.exp(-xm)
    return out


_AI0 = 0.355028053887817239260
_AIP0 = 0.258819403792806798405


def _airy_maclaurin(x):
    """Ai(x) = Ai(0) f(x) - |Ai'(0)| g(x) in long double (|x| < 8.5)."""
    xl = x.astype(np.longdouble)
    x3 = xl ** 3
    f = np.ones_like(xl)
    g = xl.copy()
    tf = np.ones_like(xl)
    tg = xl.copy()
    for k in range(80):
        tf = tf * x3 / ((3 * k + 2) * (3 * k + 3))
        tg = tg * x3 / ((3 * k + 3) * (3 * k + 4))
        f += tf
        g += tg
    return (np.longdouble(_AI0) * f - np.longdouble(_AIP0) * g).astype(np.float64)


def _airy_oscillating(x):
    """Ai(-x) for x >= 8.5 from its asymptotic expansion."""
    zeta = 2.0 / 3.0 * x ** 1.5
    p = np.zeros_like(x)
    q = np.zeros_like(x)
    u = 1.0
    term = np.ones_like(x)
    for k in range(40):
        sign = 1.0 if (k // 2) % 2 == 0 else -1.0
        if k % 2 == 0:
            p += sign * term
        else:
            q += sign * term
        kk = k + 1
        u = (6 * kk - 5) * (6 * kk - 3) * (6 * kk - 1) / ((2 * kk - 1) * 216.0 * kk)
        term = term * u / zeta
    ph = zeta - np.pi / 4
    return (np.cos(ph) * p + np.sin(ph) * q) / (math.sqrt(math.pi) * x ** 0.25)


def airy_ai(x):
    """The Airy function Ai."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, np.nan)  # NaN at +-inf, as PyTorch
    mid = (x > -8.5) & (x < 2)
    pos = (x >= 2) & (x < np.inf)
    neg = (x <= -8.5) & (x > -np.inf)
    if mid.any():
        out[mid] = _airy_maclaurin(x[mid])
    if pos.any():
        xp = x[pos]
        zeta = 2.0 / 3.0 * xp ** 1.5
        k = np.where(zeta < 20, _k_scaled_mid(1 / 3, np.minimum(zeta, 20)),
                     _k_scaled_large(1 / 3, zeta))
        with np.errstate(under="ignore"):
            out[pos] = np.sqrt(xp / 3) / np.pi * k * np.exp(-zeta)
    if neg.any():
        out[neg] = _airy_oscillating(-x[neg])
    return out


def spherical_bessel_j0(x):
    """sin(x) / x, 1 at 0 and 0 at +-inf."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.sin(x) / x
    out[x == 0] = 1.0
    out[np.isinf(x)] = 0.0
    return out


# ---------------------------------------------------------------- orthogonal polynomials
#
# PyTorch's conventions, learned from its documentation and results: n is truncated to
# an integer (NaN and inf count as negative), every polynomial is 0 for n < 0, the
# Chebyshev kinds switch from the three-term recurrence to their trigonometric forms
# for large n inside (-1, 1), and the Hermite ones give NaN past n = 128 (float32) or
# 512 (float64). The arithmetic is done in the input's dtype, in PyTorch's order.

def _degree(n):
    n = np.asarray(n)
    if n.dtype.kind in "iub":
        return n.astype(np.int64)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(n), np.trunc(n), -1).astype(np.int64)


def _recurrence(kind, x, n, p1):
    """P_n(x) by the three-term recurrence, for elements with n >= 2."""
    one = x.dtype.type(1)
    p = np.ones_like(x)
    q = p1.copy()
    active = np.flatnonzero(n >= 2)
    xa = x[active]
    pa, qa, na = p[active], q[active], n[active]
    out = q.copy()
    k = 1
    while active.size:
        kt = x.dtype.type(k)
        if kind in "tuvw":
            r = (xa + xa) * qa - pa
        elif kind == "h":
            r = (xa + xa) * qa - (kt + kt) * pa
        elif kind == "e":
            r = xa * qa - kt * pa
        elif kind == "l":
            r = ((kt + kt) + (one - xa)) * qa - kt * pa
            r = r / (kt + one)
        else:
            r = ((kt + kt + one) * xa * qa - kt * pa) / (kt + one)
        pa, qa = qa, r
        k += 1
        done = (na <= k) | np.isnan(qa)
        if done.any():
            out[active[done]] = qa[done]
            keep = ~done
            active, xa, pa, qa, na = active[keep], xa[keep], pa[keep], qa[keep], na[keep]
    return out


def orthogonal_polynomial(kind, x, n, shifted=False):
    """Evaluate a polynomial family at ``x`` (a float array) for degrees ``n``.

    ``kind``: 't', 'u', 'v', 'w' (Chebyshev), 'h' (physicists' Hermite), 'e' (the
    probabilists' He), 'l' (Laguerre), 'p' (Legendre); ``shifted`` for the Chebyshev
    kinds on [0, 1].
    """
    x, n = np.broadcast_arrays(x, _degree(n))
    x = np.array(x)
    dt = x.dtype.type
    one = dt(1)
    y = x + x - one if shifted else x
    nf = n.astype(x.dtype)
    with np.errstate(all="ignore"):
        if kind == "t":
            p1 = y
        elif kind in "uh":
            p1 = y + y
        elif kind == "v":
            p1 = y + y - one
        elif kind == "w":
            p1 = y + y + one
        elif kind == "l":
            p1 = one - y
        else:
            p1 = y.copy()
        out = _recurrence(kind, y, n, p1)
        out = np.where(n == 1, p1, out)
        out = np.where(n == 0, one, out)
        even = n % 2 == 0
        if kind in "tuvw":
            thresh = (4 if kind == "w" else 6) if shifted else (6 if kind == "t" else 8)
            trig = (n > thresh) & (np.abs(y) < 1)
            th = np.arccos(y)
            if kind == "t":
                val = np.cos(nf * th)
            elif kind == "u":
                s = np.sin(th)
                val = np.where(s != 0, np.sin((nf + one) * th) / s,
                               (nf + one) * np.cos((nf + one) * th) / y)
            elif kind == "v":
                val = np.where(np.sin(th / 2) != 1, np.cos((nf + dt(0.5)) * th) / np.cos(th / 2),
                               np.where(even, 2 * nf + 1, -(2 * nf + 1)))
            else:
                val = np.where(np.cos(th / 2) != 1, np.sin((nf + dt(0.5)) * th) / np.sin(th / 2),
                               np.where(y > 0, 2 * nf + 1, np.where(even, one, -one)))
            out = np.where(trig, val, out)
            pos = (x == 1) if shifted else (y == 1)
            neg = (x == 0) if shifted else (y == -1)
            sgn = np.where(even, one, -one)
            top = {"t": one, "u": nf + 1, "v": one, "w": 2 * nf + 1}[kind]
            bottom = {"t": sgn, "u": sgn * (nf + 1), "v": sgn * (2 * nf + 1), "w": sgn}[kind]
            out = np.where(pos, top, np.where(neg, bottom, out))
        elif kind == "p":
            out = np.where(np.abs(y) == 1, np.where((y > 0) | even, one, -one), out)
        elif kind == "l":
            out = np.where(y == 0, one, out)
        elif kind in "he":
            limit = 128 if x.dtype == np.float32 else 512
            out = np.where(n > limit, dt(np.nan), out)
        out = np.where(n < 0, dt(0), out)
    return out.astype(x.dtype, copy=False)
