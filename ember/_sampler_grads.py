"""PyTorch's reparameterised gradients of gamma and Dirichlet draws, element by
element with PyTorch's approximations and its C++ types (``_standard_gamma_grad``,
``_dirichlet_grad``), so the gradients of ``rsample`` are torch's bits.

The standard gamma's gradient is computed in double for both dtypes. The Dirichlet's
keeps some steps in the tensor's dtype, as PyTorch's template does: for float32 the
small-``x`` series, the digammas and their ``logf``/``powf``/``tanf`` are float (glibc's,
through ctypes). Written once in plain Python on scalars and compiled by numba where
it is installed, like :mod:`ember._random_samplers`.
"""
import ctypes
import math

import numpy as np

from ember import _random_samplers as _rs

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

_libm = _rs._libm


def _cfun(name, ctype):
    f = getattr(_libm, name)
    f.restype = ctype
    f.argtypes = [ctype] * (2 if name.startswith("pow") else 1)
    return f


_c_logf = _cfun("logf", ctypes.c_float)
_c_powf = _cfun("powf", ctypes.c_float)
_c_tanf = _cfun("tanf", ctypes.c_float)


def _py_logf(x):
    return _c_logf(x) if x == x else x


def _build(jit, f32, log, sqrt, pow_, floor, exp, div, logf, powf, tanf):
    """The gradient kernels, with ``jit`` applied (the identity for Python)."""
    tan = math.tan

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
                extra = div(-math.pi, tan(math.pi * x))
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
        cv = [0.0] * 8
        for i in range(8):
            cv[i] = _GAMMA_UV[0][i] + u * (_GAMMA_UV[1][i] + u * _GAMMA_UV[2][i])
        cv0, cv1, cv2, cv3, cv4, cv5, cv6, cv7 = cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], \
            cv[6], cv[7]
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

    return {"gamma_grad": gamma_grad_fill, "dirichlet_grad": dirichlet_grad_fill}


_PYTHON = _build(lambda f: f, _rs._py_f32, _rs._py_log, _rs._py_sqrt, _rs._py_pow,
                 _rs._py_floor, _rs._py_exp, _rs._py_div, _py_logf, _c_powf, _c_tanf)
_COMPILED = {}


def _compile():
    try:
        import numba
    except ImportError:
        return None
    jit = numba.njit(nogil=True, error_model="numpy")
    f32, div = _rs._numba_helpers(jit)
    return _build(jit, f32, math.log, math.sqrt, math.pow, np.floor, math.exp, div,
                  _c_logf, _c_powf, _c_tanf)


def _kernels(n):
    if "grads" not in _COMPILED:
        if n < _rs._NUMBA_MIN:
            return _PYTHON
        _COMPILED["grads"] = _compile()
    return _COMPILED["grads"] or _PYTHON


def standard_gamma_grad(alpha, x):
    """``_standard_gamma_grad`` on flat float64 ``alpha`` and draws ``x`` (float64)."""
    out = np.zeros(alpha.size)
    ks = _kernels(alpha.size)
    if ks is _PYTHON:
        ks["gamma_grad"](alpha.tolist(), x.tolist(), out)
    else:
        ks["gamma_grad"](alpha, x, out)
    return out


def dirichlet_grad(x, alpha, total, single):
    """``_dirichlet_grad`` on flat float64 arrays (float32 values where ``single``)."""
    out = np.zeros(x.size)
    ks = _kernels(x.size)
    if ks is _PYTHON:
        ks["dirichlet_grad"](x.tolist(), alpha.tolist(), total.tolist(), single, out)
    else:
        ks["dirichlet_grad"](x, alpha, total, single, out)
    return out
