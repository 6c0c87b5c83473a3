"""The element loops of PyTorch's per-element samplers and of their reparameterised
gradients, written once in plain Python on scalars (see :mod:`ember._random_samplers`
and :mod:`ember._sampler_grads`, which drive them).

This file is imported twice: as ``ember._sampler_loops`` the functions run as Python
with the scalar math of :mod:`ember._sampler_env` (C semantics, glibc's functions); and,
where numba is installed, :func:`ember._sampler_env.load_compiled` executes it again
with ``jit`` being ``numba.njit`` (cached on disk) and the compiled math of
:mod:`ember._sampler_numba_env`. Both give the same bits.
"""
import math

import numpy as np

from ember import _sampler_env as _env

if _env.COMPILING:
    from ember import _sampler_numba_env as _math
else:
    _math = _env
jit, f32, log, sqrt, pow_, floor, ceil, exp = (
    _math.jit, _math.f32, _math.log, _math.sqrt, _math.pow_, _math.floor, _math.ceil,
    _math.exp)
div, int64, lgamma, log1pf, logf, powf, tanf = (
    _math.div, _math.int64, _math.lgamma, _math.log1pf, _math.logf, _math.powf, _math.tanf)

_U53 = 2.0 ** -53
_TWO_PI = 2.0 * math.pi
_THIRD_F = float(np.float32(1.0) / np.float32(3.0))  # C's 1.0f / 3.0f
_C0331_F = float(np.float32(0.0331))  # C's 0.0331f
_INT64_MIN = -(2 ** 63)
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)

_F08 = float(np.float32(0.8))  # C's 0.8f, 0.9f, 1.1f
_F09 = float(np.float32(0.9))
_F11 = float(np.float32(1.1))
_F1E17 = float(np.float32(1e17))
_PI_F = float(np.float32(math.pi))
_PSI_10 = 2.25175258906672110764
_DIGAMMA_A = (8.33333333333333333333E-2, -2.10927960927960927961E-2,
              7.57575757575757575758E-3, -4.16666666666666666667E-3,
              3.96825396825396825397E-3, -8.33333333333333333333E-3,
              8.33333333333333333333E-2)
# the bivariate rational approximation of the standard gamma's gradient: rows of
# coefficients in u = log(x / alpha), each polynomial's 4 numerator then 4 denominator
# coefficients in v = log(alpha)
_GAMMA_UV = ((0.16009398, -0.094634809, 0.025146376, -0.0030648343,
              1.0, 0.32668115, 0.10406089, 0.0014179084),
             (0.53487893, 0.1298071, 0.065735949, -0.0015649758,
              0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
             (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777,
              0.017050642, -0.0021309326, 0.00085092367, -1.5247877e-07))
# the rational correction of the Dirichlet's gradient: [numerator, denominator][power
# of u][power of a] -> cubic in b
_DIRICHLET_C = (
    (((1.003668233, -0.01061107488, -0.0657888334, 0.01201642863),
      (0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033),
      (-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013)),
     ((0.221950385, -0.3187676331, 0.01799915743, 0.01074823814),
      (-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057),
      (0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05)),
     ((-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565),
      (0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181),
      (0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05))),
    (((1, -0.02924021934, -0.04438342661, 0.007285809825),
      (0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521),
      (-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149)),
     ((0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273),
      (0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956),
      (-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05)),
     ((0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05),
      (0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05),
      (-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06))))
_DIRICHLET_C_FLAT = tuple(float(v) for half in _DIRICHLET_C for row in half for col in row
                          for v in col)


# ----- samplers ----------------------------------------------------------------------
@jit
def uniform(buf, pos):
    """The double uniform at ``buf[pos:pos + 2]``, or -1.0 past the buffer's end."""
    if pos + 2 > len(buf):
        return -1.0
    return ((buf[pos] & 0x1FFFFF) * 4294967296.0 + buf[pos + 1]) * _U53


@jit
def normal(buf, pos, cache):
    """One ``normal_distribution<double>`` value and the next position (-1 past
    the buffer's end); ``cache`` holds [valid, value] of the second Box-Muller value."""
    if cache[0] != 0.0:
        cache[0] = 0.0
        return cache[1], pos
    u1 = uniform(buf, pos)
    u2 = uniform(buf, pos + 2)
    if u2 < 0.0:
        return 0.0, -1
    r = sqrt(-2.0 * math.log1p(-u2))
    theta = _TWO_PI * u1
    cache[0] = 1.0
    cache[1] = r * math.sin(theta)
    return r * math.cos(theta), pos + 4


@jit
def gamma_one(alpha, single, buf, pos, cache):
    """One standard gamma draw (before the cast to the result's dtype)."""
    scale = 1.0
    if alpha < 1.0:
        if alpha == 0.0:
            return 0.0, pos
        u = uniform(buf, pos)
        if u < 0.0:
            return 0.0, -1
        pos += 2
        inv = f32(1.0 / alpha) if single else div(1.0, alpha)
        scale = pow_(1.0 - u, inv)
        alpha = f32(alpha + 1.0) if single else alpha + 1.0
    d = f32(alpha - _THIRD_F) if single else alpha - _THIRD_F
    c = div(1.0, sqrt(9.0 * d))
    while True:
        while True:
            x, pos = normal(buf, pos, cache)
            if pos < 0:
                return 0.0, -1
            y = 1.0 + c * x
            if not y <= 0.0:
                break
        v = y * y * y
        u = uniform(buf, pos)
        if u < 0.0:
            return 0.0, -1
        pos += 2
        u = 1.0 - u
        xx = x * x
        if u < 1.0 - _C0331_F * xx * xx:
            return scale * d * v, pos
        if log(u) < 0.5 * xx + d * (1.0 - v + log(v)):
            return scale * d * v, pos


@jit
def gamma_fill(alpha, single, out, start, buf, cache):
    """Gamma draws for ``alpha[start:]`` into ``out`` until the buffer runs short;
    returns (next element, raw outputs used)."""
    pos = 0
    for i in range(start, len(alpha)):
        valid, value = cache[0], cache[1]
        s, p = gamma_one(alpha[i], single, buf, pos, cache)
        if p < 0:
            cache[0], cache[1] = valid, value
            return i, pos
        out[i] = s
        pos = p
    return len(alpha), pos


@jit
def stirling_tail(k):
    if k < 10.0:
        return _STIRLING_TAIL[int(k)]
    kp1sq = (k + 1.0) * (k + 1.0)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1.0)


@jit
def btrs(count, prob, single, buf, pos):
    """Hormann's BTRS for ``count * prob >= 10`` (``prob <= 0.5``)."""
    cp = f32(count * prob) if single else count * prob
    if single:
        stddev = f32(sqrt(f32(cp * f32(1.0 - prob))))
        r = f32(prob / f32(1.0 - prob))
        m = floor(f32(f32(count + 1.0) * prob))
    else:
        stddev = sqrt(cp * (1.0 - prob))
        r = prob / (1.0 - prob)
        m = floor((count + 1.0) * prob)
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = cp + 0.5
    v_r = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * stddev
    while True:
        u = uniform(buf, pos)
        v = uniform(buf, pos + 2)
        if v < 0.0:
            return 0.0, -1
        pos += 4
        u = u - 0.5
        us = 0.5 - abs(u)
        if us == 0.0:  # 2a/us is inf: k is -inf, rejected
            continue
        k = floor((2 * a / us + b) * u + c)
        if single:
            k = f32(k)
        if k < 0 or k > count:
            continue
        if us >= 0.07 and v <= v_r:
            return k, pos
        v = log(v * alpha / (a / (us * us) + b))
        if single:
            cmk1 = f32(f32(count - k) + 1.0)
            cmk = f32(count - k)
            cp1 = f32(count + 1.0)
            kp1 = f32(k + 1.0)
        else:
            cmk1 = count - k + 1.0
            cmk = count - k
            cp1 = count + 1.0
            kp1 = k + 1.0
        bound = ((m + 0.5) * log((m + 1) / (r * (count - m + 1)))
                 + cp1 * log((count - m + 1) / cmk1)
                 + (k + 0.5) * log(r * cmk1 / kp1)
                 + stirling_tail(m) + stirling_tail(count - m)
                 - stirling_tail(k) - stirling_tail(cmk))
        if v <= bound:
            return k, pos


@jit
def inversion(count, prob, single, buf, pos):
    """Counts geometric waiting times until they pass ``count``."""
    logprob = log1pf(-prob) if single else math.log1p(-prob)
    geom_sum = 0.0
    num = 0.0
    while True:
        u = uniform(buf, pos)
        if u < 0.0:
            return 0.0, -1
        pos += 2
        geom_sum += ceil(log(u) / logprob)
        if geom_sum > count:
            return num, pos
        num = num + 1.0


@jit
def binomial_one(count, prob, single, buf, pos):
    if count <= 0.0 or prob <= 0.0:
        return 0.0, pos
    if prob >= 1.0:
        return count, pos
    if count != count:  # PyTorch's inversion loop would never end
        return math.nan, pos
    if prob <= 0.5:
        cp = f32(count * prob) if single else count * prob
        if cp >= 10.0:
            return btrs(count, prob, single, buf, pos)
        return inversion(count, prob, single, buf, pos)
    if prob > 0.5:
        q = f32(1.0 - prob) if single else 1.0 - prob
        cq = f32(count * q) if single else count * q
        if cq >= 10.0:
            k, pos = btrs(count, q, single, buf, pos)
        else:
            k, pos = inversion(count, q, single, buf, pos)
        return (f32(count - k) if single else count - k), pos
    return math.nan, pos


@jit
def binomial_fill(count, prob, single, out, start, buf):
    pos = 0
    for i in range(start, len(count)):
        s, p = binomial_one(count[i], prob[i], single, buf, pos)
        if p < 0:
            return i, pos
        out[i] = s
        pos = p
    return len(count), pos


@jit
def poisson_one(lam, buf, pos):
    """One Poisson draw, as the int64 PyTorch's sampler returns (as a float)."""
    if lam >= 10.0:
        slam = sqrt(lam)
        loglam = log(lam)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        while True:
            u = uniform(buf, pos)
            v = uniform(buf, pos + 2)
            if v < 0.0:
                return 0.0, -1
            pos += 4
            u = u - 0.5
            us = 0.5 - abs(u)
            k = int64(floor((div(2 * a, us) + b) * u + lam + 0.43))
            if us >= 0.07 and v <= vr:
                return float(k), pos
            if k < 0 or (us < 0.013 and v > us):
                continue
            if (log(v) + log(invalpha) - log(div(a, us * us) + b)
                    <= -lam + k * loglam - lgamma(k + 1.0)):
                return float(k), pos
    if lam == 0.0:
        return 0.0, pos
    enlam = exp(-lam)
    x = 0
    prod = 1.0
    while True:
        u = uniform(buf, pos)
        if u < 0.0:
            return 0.0, -1
        pos += 2
        prod *= u
        if prod > enlam:
            x += 1
        else:
            return float(x), pos


@jit
def poisson_fill(lam, out, start, buf):
    pos = 0
    for i in range(start, len(lam)):
        s, p = poisson_one(lam[i], buf, pos)
        if p < 0:
            return i, pos
        out[i] = s
        pos = p
    return len(lam), pos


# ----- gradients ---------------------------------------------------------------------
@jit
def digamma(x, single):
    """PyTorch's ``digamma_one<scalar_t, double>``: ``x`` and the loop in the
    tensor's dtype (float32 where ``single``), the sum in double."""
    if x == 0.0:
        return math.inf
    extra = 0.0
    is_int = x == floor(x)
    if x < 0.0:
        if is_int:
            return math.inf
        if single:
            extra = f32(div(-_PI_F, tanf(f32(_PI_F * x))))
        else:
            extra = div(-math.pi, math.tan(math.pi * x))
        x = f32(1.0 - x) if single else 1.0 - x
    result = 0.0
    while x < 10.0:
        if single:
            result -= f32(1.0 / x)
            x = f32(x + 1.0)
        else:
            result -= 1.0 / x
            x += 1.0
    if x == 10.0:
        r = result + _PSI_10 + extra
        return f32(r) if single else r
    y = 0.0
    if x < _F1E17:
        z = 1.0 / (f32(x * x) if single else x * x)
        poly = 0.0
        for c in _DIGAMMA_A:
            poly = poly * z + c
        y = z * poly
    if single:
        return f32(result + logf(x) - f32(0.5 / x) - y + extra)
    return result + log(x) - (0.5 / x) - y + extra


@jit
def gamma_grad_one(alpha, x):
    """``standard_gamma_grad_one<scalar_t, double>`` (all in double)."""
    if x < _F08:
        numer = 1.0
        denom = alpha
        series1 = div(numer, denom)
        series2 = div(numer, denom * denom)
        for i in range(1, 6):
            numer *= -x / i
            denom += 1.0
            series1 += div(numer, denom)
            series2 += div(numer, denom * denom)
        pow_x_alpha = pow_(x, alpha)
        gamma_pdf = pow_(x, alpha - 1.0) * exp(-x)
        gamma_cdf = pow_x_alpha * series1
        gamma_cdf_alpha = (log(x) - digamma(alpha, False)) * gamma_cdf \
            - pow_x_alpha * series2
        result = div(-gamma_cdf_alpha, gamma_pdf)
        return 0.0 if result != result else result
    if alpha > 8.0:
        if _F09 * alpha <= x and x <= _F11 * alpha:
            numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
            numer_2 = (1440 * (alpha * alpha) + 6 * x * (53 - 120 * x)
                       - div(65 * x * x, alpha) + alpha * (107 + 3600 * x))
            denom = 1244160 * (alpha * alpha) * (alpha * alpha)
            return div(numer_1 * numer_2, denom)
        denom = sqrt(8 * alpha)
        term2 = div(denom, alpha - x)
        term3 = pow_(x - alpha - alpha * log(div(x, alpha)), -1.5)
        term23 = term2 - term3 if x < alpha else term2 + term3
        term1 = log(div(x, alpha)) * term23 - div(
            sqrt(div(2.0, alpha)) * (alpha + x), (alpha - x) * (alpha - x))
        stirling = 1 + div(1.0, 12 * alpha) * (1 + div(1.0, 24 * alpha))
        numer = x * term1
        return div(-stirling * numer, denom)
    u = log(div(x, alpha))
    v = log(alpha)
    c0, c1, c2 = _GAMMA_UV
    cv0 = c0[0] + u * (c1[0] + u * c2[0])
    cv1 = c0[1] + u * (c1[1] + u * c2[1])
    cv2 = c0[2] + u * (c1[2] + u * c2[2])
    cv3 = c0[3] + u * (c1[3] + u * c2[3])
    cv4 = c0[4] + u * (c1[4] + u * c2[4])
    cv5 = c0[5] + u * (c1[5] + u * c2[5])
    cv6 = c0[6] + u * (c1[6] + u * c2[6])
    cv7 = c0[7] + u * (c1[7] + u * c2[7])
    p = cv0 + v * (cv1 + v * (cv2 + v * cv3))
    q = cv4 + v * (cv5 + v * (cv6 + v * cv7))
    return exp(div(p, q))


@jit
def gamma_grad_fill(alpha, x, out):
    for i in range(len(alpha)):
        out[i] = gamma_grad_one(alpha[i], x[i])


@jit
def rs(v, single):
    return f32(v) if single else v


@jit
def beta_grad_alpha_small(x, alpha, beta, single):
    factor = rs(rs(digamma(alpha, single) - digamma(rs(alpha + beta, single), single),
                   single) - (logf(x) if single else log(x)), single)
    numer = 1.0
    series = rs(rs(div(numer, alpha), single)
                * rs(factor + rs(div(1.0, alpha), single), single), single)
    for i in range(1, 11):
        ci = float(i)
        numer = rs(numer * rs(rs(rs(ci - beta, single) * x, single) / ci, single), single)
        denom = rs(alpha + ci, single)
        series = rs(series + rs(rs(div(numer, denom), single)
                                * rs(factor + rs(div(1.0, denom), single), single),
                                single), single)
    pw = powf(rs(1.0 - x, single), -beta) if single else pow_(1.0 - x, -beta)
    result = rs(rs(x * pw, single) * series, single)
    return 0.0 if result != result else result


@jit
def beta_grad_beta_small(x, alpha, beta, single):
    factor = rs(digamma(rs(alpha + beta, single), single) - digamma(beta, single), single)
    numer = 1.0
    betas = 1.0
    dbetas = 0.0
    series = rs(div(factor, alpha), single)
    for i in range(1, 9):
        ci = float(i)
        numer = rs(numer * rs(-x / ci, single), single)
        bmc = rs(beta - ci, single)
        dbetas = rs(rs(dbetas * bmc, single) + betas, single)
        betas = rs(betas * bmc, single)
        series = rs(series + rs(rs(div(numer, rs(alpha + ci, single)), single)
                                * rs(dbetas + rs(factor * betas, single), single),
                                single), single)
    omx = rs(1.0 - x, single)
    pw = powf(omx, rs(1.0 - beta, single)) if single else pow_(omx, 1.0 - beta)
    result = rs(-pw * series, single)
    return 0.0 if result != result else result


@jit
def beta_grad_alpha_mid(x, alpha, beta):
    total = alpha + beta
    mean = alpha / total
    std = sqrt(alpha * beta / (total + 1)) / total
    if mean - 0.1 * std <= x and x <= mean + 0.1 * std:
        poly = (47 * x * (beta * beta) * (beta * beta) + alpha * (
            (43 + 20 * (16 + 27 * beta) * x) * (beta * beta) * beta + alpha * (
                3 * (59 + 180 * beta - 90 * x) * (beta * beta) + alpha * (
                    (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (
                        8 * (1 - x) * (135 * beta - 11))))))
        prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
        prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
        return div(div(prefactor_num, 1 - x) * poly, prefactor_den)
    prefactor = -x / sqrt(2 * alpha * beta / total)
    stirling = ((1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha))
                * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    term1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)
    axbx = alpha * (x - 1) + beta * x
    term1_den = sqrt(2 * alpha / beta) * pow_(total, 1.5) * axbx * axbx
    term1 = div(term1_num, term1_den)
    term2 = 0.5 * log(div(alpha, total * x))
    term3_num = sqrt(8 * alpha * beta / total)
    term3_den = beta * x + alpha * (x - 1)
    term3 = div(term3_num, term3_den)
    term4_base = (beta * log(div(beta, total * (1 - x)))
                  + alpha * log(div(alpha, total * x)))
    term4 = pow_(term4_base, -1.5)
    term1234 = term1 + term2 * (term3 + (term4 if x < mean else -term4))
    return stirling * prefactor * term1234


@jit
def dirichlet_grad_one(x, alpha, total, single):
    beta = rs(total - alpha, single)
    boundary = rs(rs(total * x, single) * rs(1.0 - x, single), single)
    if x <= 0.5 and boundary < 2.5:
        return beta_grad_alpha_small(x, alpha, beta, single)
    if x >= 0.5 and boundary < 0.75:
        return -beta_grad_beta_small(rs(1.0 - x, single), beta, alpha, single)
    beta_d = total - alpha
    if alpha > 6 and beta > 6:
        return beta_grad_alpha_mid(x, alpha, beta_d)
    u = log(x)
    a = log(alpha) - u
    b = log(total) - a
    p = 0.0
    q = 0.0
    for i in range(3):
        pu = 1.0 if i == 0 else (u if i == 1 else u * u)
        for j in range(3):
            pa = 1.0 if j == 0 else (a if j == 1 else a * a)
            ua = pu * pa
            k = 4 * (3 * i + j)
            p += ua * (_DIRICHLET_C_FLAT[k] + b * (_DIRICHLET_C_FLAT[k + 1] + b * (
                _DIRICHLET_C_FLAT[k + 2] + b * _DIRICHLET_C_FLAT[k + 3])))
            k += 36
            q += ua * (_DIRICHLET_C_FLAT[k] + b * (_DIRICHLET_C_FLAT[k + 1] + b * (
                _DIRICHLET_C_FLAT[k + 2] + b * _DIRICHLET_C_FLAT[k + 3])))
    dg = rs(digamma(total, single) - digamma(alpha, single), single)
    approx = div(x * dg, beta_d)
    return div(p, q) * approx


@jit
def dirichlet_grad_fill(x, alpha, total, single, out):
    for i in range(len(x)):
        out[i] = dirichlet_grad_one(x[i], alpha[i], total[i], single)
