"""PyTorch's per-element rejection samplers on the CPU, replayed draw for draw: the
standard gamma (Marsaglia and Tsang, boosted below alpha 1), the Dirichlet through
double-precision gammas, the binomial (BTRS, or inversion by counting geometric
waiting times) and Poisson (Hoermann's transformed rejection, or products of
uniforms). See docs/random.md.

Each element draws a value-dependent number of double uniforms (two raw 32-bit outputs
each: the low 53 bits of ``random64()``) and scalar Box-Muller normals (with the
generator's cached second value), in the C order of the output, as PyTorch's
``cpu_serial_kernel`` does. The arithmetic follows PyTorch's C++ types step by step:
for float32 tensors some intermediates are float (rounded here with ``f32``), and the
constants ``1.0f / 3.0f`` and ``0.0331f`` are float constants even in double code.
These kernels are compiled without FMA contraction, so no product and sum fuse.

The element loops are written once, in plain Python on scalars, inside
:func:`_build`; the default install runs them as Python, and with numba
(``ember[fast]``) :func:`kernels` compiles the same source. Both give the same bits.

Draws are made ahead: a buffer of raw outputs is drawn from a copy of the state, the
loop consumes what it needs (stopping before an element the buffer cannot finish), and
the generator is then advanced by exactly the outputs consumed.
"""
import ctypes
import ctypes.util
import math
import struct

import numpy as np

_U53 = 2.0 ** -53
_TWO_PI = 2.0 * math.pi
_THIRD_F = float(np.float32(1.0) / np.float32(3.0))  # C's 1.0f / 3.0f
_C0331_F = float(np.float32(0.0331))  # C's 0.0331f
_INT64_MIN = -(2 ** 63)
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
# glibc's lgamma (Python's math.lgamma is its own) and the float log1pf PyTorch's float
# binomial calls through std::log1p(float)
_c_lgamma = _libm.lgamma
_c_lgamma.restype, _c_lgamma.argtypes = ctypes.c_double, [ctypes.c_double]
_c_log1pf = _libm.log1pf
_c_log1pf.restype, _c_log1pf.argtypes = ctypes.c_float, [ctypes.c_float]

_pack_f = struct.Struct("f")


def _py_f32(x):
    """``x`` rounded to float32 (overflow to inf), as a Python float."""
    try:
        return _pack_f.unpack(_pack_f.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _py_log(x):
    return math.log(x) if x > 0.0 else (-math.inf if x == 0.0 else math.nan)


def _py_sqrt(x):
    return math.sqrt(x) if x >= 0.0 else math.nan


def _py_pow(x, y):
    try:
        return math.pow(x, y)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


def _py_floor(x):
    return float(math.floor(x)) if math.isfinite(x) else x


def _py_ceil(x):
    return float(math.ceil(x)) if math.isfinite(x) else x


def _py_exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _py_div(a, b):
    """IEEE division (C's ``a / b``), where Python would raise on a zero divisor."""
    if b != 0.0:
        return a / b
    if a != a or a == 0.0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _py_int64(x):
    """C's ``(int64_t)x`` on x86-64: truncation, and INT64_MIN out of range or NaN."""
    if x != x or not (-9.223372036854775808e18 <= x < 9.223372036854775808e18):
        return _INT64_MIN
    return int(x)


def _build(jit, f32, log, sqrt, pow_, floor, ceil, exp, div, int64, lgamma, log1pf):
    """The samplers, with ``jit`` applied to each function (the identity for Python)
    and the scalar math passed in (C semantics: no exceptions)."""
    log1p, sin, cos, fabs = math.log1p, math.sin, math.cos, abs

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
        r = sqrt(-2.0 * log1p(-u2))
        theta = _TWO_PI * u1
        cache[0] = 1.0
        cache[1] = r * sin(theta)
        return r * cos(theta), pos + 4

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
            us = 0.5 - fabs(u)
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
        logprob = log1pf(-prob) if single else log1p(-prob)
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
                us = 0.5 - fabs(u)
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

    return {"gamma": gamma_fill, "binomial": binomial_fill, "poisson": poisson_fill}


_PYTHON = _build(lambda f: f, _py_f32, _py_log, _py_sqrt, _py_pow, _py_floor, _py_ceil,
                 _py_exp, _py_div, _py_int64, _c_lgamma, _c_log1pf)
_COMPILED = {}  # "samplers": the numba-compiled kernels, or None without numba (tried once)
_NUMBA_MIN = 256  # smaller calls run as Python until numba is loaded


def kernels(n):
    """The element loops for a call of ``n`` elements: numba-compiled where numba is
    installed (compiled on the first call of ``_NUMBA_MIN`` or more elements), else
    the same loops in Python."""
    if "samplers" not in _COMPILED:
        if n < _NUMBA_MIN:
            return _PYTHON
        _COMPILED["samplers"] = _compile()
    return _COMPILED["samplers"] or _PYTHON


def _compile():
    try:
        import numba
    except ImportError:
        return None
    jit = numba.njit(nogil=True, error_model="numpy")
    f32, div = _numba_helpers(jit)

    @jit
    def int64(x):
        if x != x or not (-9.223372036854775808e18 <= x < 9.223372036854775808e18):
            return np.int64(_INT64_MIN)
        return np.int64(x)

    lgamma, log1pf = _c_lgamma, _c_log1pf  # ctypes functions: callable from numba
    return _build(jit, f32, math.log, math.sqrt, math.pow, np.floor, np.ceil, math.exp,
                  div, int64, lgamma, log1pf)


def _numba_helpers(jit):
    """Compiled float32 rounding and IEEE division for the kernels' ``f32``/``div``."""

    @jit
    def f32(x):
        return np.float64(np.float32(x))

    @jit
    def div(a, b):
        return a / b

    return f32, div


def _run(g, fill, n, args, raws_per_element, python):
    """Drives ``fill`` over ``n`` elements with raw outputs drawn ahead from ``g``."""
    i = 0
    while i < n:
        size = raws_per_element * (n - i) + 64
        while True:
            saved = g._bg.state
            raw = g._bg.random_raw(size)
            buf = raw.tolist() if python else raw.astype(np.int64)
            j, used = fill(*args, i, buf)
            g._bg.state = saved
            g._raw(used)
            if j > i:
                break
            size *= 4  # one element needed more draws than the whole buffer held
        i = j


def standard_gamma(g, alpha, single):
    """Standard gamma draws for the float64 values ``alpha`` (flat, C order) as PyTorch's
    ``_standard_gamma`` makes them; ``single``: the tensor is float32. Returns float64
    values before the cast to the result's dtype (and before its clamp to ``tiny``)."""
    n = alpha.size
    out = np.zeros(n, np.float64)
    ks = kernels(n)
    python = ks is _PYTHON
    cache = [0.0, 0.0] if python else np.zeros(2)
    if g._next_double is not None:
        cache[0], cache[1] = 1.0, g._next_double
    values = alpha.tolist() if python else alpha
    _run(g, lambda *a: ks["gamma"](values, single, out, *a, cache), n, (), 8, python)
    g._next_double = float(cache[1]) if cache[0] else None
    return out


def binomial(g, count, prob, single):
    """Binomial draws for flat float64 ``count``/``prob`` (C order), as float64."""
    n = count.size
    out = np.zeros(n, np.float64)
    ks = kernels(n)
    python = ks is _PYTHON
    c, p = (count.tolist(), prob.tolist()) if python else (count, prob)
    _run(g, lambda *a: ks["binomial"](c, p, single, out, *a), n, (), 12, python)
    return out


def poisson(g, lam):
    """Poisson draws for the flat float64 rates ``lam`` (C order), as float64."""
    n = lam.size
    out = np.zeros(n, np.float64)
    ks = kernels(n)
    python = ks is _PYTHON
    values = lam.tolist() if python else lam
    _run(g, lambda *a: ks["poisson"](values, out, *a), n, (), 12, python)
    return out


# PyTorch's sum kernel runs in its AVX2 build even on AVX-512 CPUs (and its default
# build's vectors are 32 bytes too): four doubles per vector
_LANES = 4


def _multi_row_sum(x):
    """PyTorch's ``multi_row_sum``: ``x`` is (rows, size, nrows, ...) and the result
    (rows, nrows, ...) sums axis 1 through four levels of accumulators, each level
    folded into the next every ``2**level_power`` steps."""
    size = x.shape[1]
    power = max(4, (int(size - 1).bit_length() if size > 1 else 0) // 4)
    step, mask = 1 << power, (1 << power) - 1
    acc = np.zeros((4,) + x.shape[:1] + x.shape[2:])
    i = 0
    while i + step <= size:
        for _ in range(step):
            acc[0] += x[:, i]
            i += 1
        for j in range(1, 4):
            acc[j] += acc[j - 1]
            acc[j - 1] = 0.0
            if i & (mask << (j * power)):
                break
    for rest in range(i, size):
        acc[0] += x[:, rest]
    for j in range(1, 4):
        acc[0] += acc[j]
    return acc[0]


def _row_sum(x):
    """PyTorch's ``row_sum`` over axis 1 of ``x`` (rows, size, ...): four interleaved
    accumulators, the leftover elements added to the first, then folded in order."""
    size = x.shape[1]
    full = size // 4
    parts = _multi_row_sum(x[:, :full * 4].reshape((x.shape[0], full, 4) + x.shape[2:]))
    for i in range(full * 4, size):
        parts[:, 0] += x[:, i]
    total = parts[:, 0].copy()
    for k in range(1, 4):
        total += parts[:, k]
    return total


def torch_sum_lastdim(x):
    """``x.sum(-1)`` for a C-contiguous float64 array, added in the order of PyTorch's
    CPU cascade sum (its vectorized inner reduction), so the bits are PyTorch's."""
    rows = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
    k, lanes = rows.shape[1], _LANES
    if k < lanes:
        total = _row_sum(rows) if k else np.zeros(rows.shape[0])
    else:
        nvec = k // lanes
        vec = _row_sum(rows[:, :nvec * lanes].reshape(rows.shape[0], nvec, lanes))
        total = np.zeros(rows.shape[0])
        for i in range(nvec * lanes, k):
            total += rows[:, i]
        for lane in range(lanes):
            total += vec[:, lane]
    return total.reshape(x.shape[:-1])
