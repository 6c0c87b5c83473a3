"""PyTorch's CPU sampling kernels, re-done on NumPy arrays (see docs/random.md).

Every function here takes a :class:`ember._random.Generator` (its Mersenne Twister
stream) and returns a flat NumPy array in the order PyTorch's kernels fill memory.
The float arithmetic follows PyTorch's C++ step by step, including the places where
its compiler fuses ``a * b + c`` into one FMA (emulated exactly in float64), the
AVX2 Box-Muller it uses for float32, and glibc's ``log``/``log1p``/``exp``/``tan``
(called through :mod:`math`, which uses the same C library).
"""
import math
import os
import platform

import numpy as np

f32, f64 = np.float32, np.float64
_PI = math.pi


def _cpu_has_avx2():
    """Whether PyTorch's CPU kernels on this machine are its AVX2 (or AVX-512) builds."""
    cap = os.environ.get("ATEN_CPU_CAPABILITY", "").lower()
    if cap == "default":
        return False
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return " avx2" in line and " fma" in line
    except OSError:
        pass
    return True


HAS_AVX2 = _cpu_has_avx2()


# ----- exact arithmetic helpers ---------------------------------------------------------
def libm(fn, x):
    """``fn`` from the C math library (through :mod:`math`) on every element of ``x``.

    NumPy's SIMD ``log``/``log1p``/``exp``/``tan`` differ from glibc in the last bit
    for a few percent of inputs; PyTorch's CPU kernels call glibc, so we do too.
    """
    x = np.asarray(x, dtype=f64)
    return np.fromiter(map(fn, x.ravel().tolist()), f64, x.size).reshape(x.shape)


def _is_pow2(v):
    v = abs(float(v))
    return v != 0.0 and math.isfinite(v) and math.frexp(v)[0] == 0.5


def fma32(a, b, c):
    """``a * b + c`` rounded once to float32, for float32 operands (IEEE fused multiply-add).

    The product is exact in float64 and the sum rounds once there; rounding that to
    float32 is correct unless the float64 sum landed exactly halfway between two
    floats, where the sum's rounding error decides the direction.
    """
    a64 = np.asarray(a, f64)
    b64 = np.asarray(b, f64)
    c64 = np.asarray(c, f64)
    p = a64 * b64
    s = np.asarray(p + c64)
    half = (s.view(np.int64) & 0x1FFFFFFF) == 0x10000000
    if half.any():
        s = s.copy()
        p_t, c_t = np.broadcast_to(p, s.shape)[half], np.broadcast_to(c64, s.shape)[half]
        st = s[half]
        bb = st - p_t
        err = (p_t - (st - bb)) + (c_t - bb)
        s[half] = np.where(err == 0, st, np.nextafter(st, np.where(err > 0, np.inf, -np.inf)))
    return s.astype(f32)


def _split(a):
    c = 134217729.0 * a
    h = c - (c - a)
    return h, a - h


def fma64(a, b, c):
    """``a * b + c`` rounded once in float64 (Boldo and Melquiond's emulation: an exact
    product and sum, then rounding to odd before the final rounding)."""
    if np.ndim(b) == 0 and _is_pow2(b) or np.ndim(c) == 0 and float(c) == 0.0:
        return np.asarray(np.asarray(a, f64) * b + c, f64)  # the product is exact
    a, b, c = np.broadcast_arrays(np.asarray(a, f64), np.asarray(b, f64), np.asarray(c, f64))
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    pl = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    th = c + p
    bb = th - c
    tl = (c - (th - bb)) + (p - bb)
    w = tl + pl
    bb = w - tl
    err = (tl - (w - bb)) + (pl - bb)
    even = (err != 0) & ((w.view(np.int64) & 1) == 0)
    if even.any():
        w = w.copy()
        w[even] = np.nextafter(w[even], np.where(err[even] > 0, np.inf, -np.inf))
    return th + w


# ----- PyTorch's AVX2 Box-Muller for float32 (avx_mathfun.h, compiled with FMA) --------
_LOG_P = [f32(v) for v in (7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1,
                           -1.2420140846E-1, 1.4249322787E-1, -1.6668057665E-1,
                           2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1)]
_LOG_Q1, _LOG_Q2 = f32(-2.12194440e-4), f32(0.693359375)
_SQRTHF = f32(0.707106781186547524)
_DP = [f32(-0.78515625), f32(-2.4187564849853515625e-4), f32(-3.77489497744594108e-8)]
_SINCOF = [f32(-1.9515295891E-4), f32(8.3321608736E-3), f32(-1.6666654611E-1)]
_COSCOF = [f32(2.443315711809948E-005), f32(-1.388731625493765E-003),
           f32(4.166664568298827E-002)]
_FOPI = f32(1.27323954473516)


def _log256(x):
    """``log256_ps`` for positive normal float32 inputs."""
    bits = x.view(np.int32)
    e = ((bits >> 23) - 0x7f).astype(f32) + f32(1)
    m = ((bits & ~0x7f800000) | 0x3f000000).view(f32)  # mantissa in [0.5, 1)
    small = m < _SQRTHF
    x = (m - f32(1)) + np.where(small, m, f32(0))
    e = e - small.astype(f32)
    z = x * x
    y = np.full_like(x, _LOG_P[0])
    for p in _LOG_P[1:]:
        y = fma32(y, x, p)
    y = y * x
    y = fma32(y, z, e * _LOG_Q1)
    y = y - z * f32(0.5)  # z * 0.5 is exact, so the fused and plain forms agree
    return (x + y) + e * _LOG_Q2  # e * q2 is exact too


def _sincos256(x):
    """``sincos256_ps`` for non-negative float32 inputs below 2**24."""
    j = (x * _FOPI).astype(np.int32)
    j = (j + 1) & ~1
    y = j.astype(f32)
    sign_sin = (j & 4) << 29
    poly = (j & 2) == 0
    for d in _DP:
        x = fma32(y, d, x)
    sign_cos = (~(j - 2) & 4) << 29
    z = x * x
    yc = fma32(np.full_like(z, _COSCOF[0]), z, _COSCOF[1])
    yc = fma32(yc, z, _COSCOF[2])
    yc = fma32(yc * z, z, -(z * f32(0.5))) + f32(1)
    ys = fma32(np.full_like(z, _SINCOF[0]), z, _SINCOF[1])
    ys = fma32(ys, z, _SINCOF[2])
    ys = fma32(ys * z, x, x)
    s = np.where(poly, f32(0), yc) + np.where(poly, ys, f32(0))
    c = (yc - np.where(poly, f32(0), yc)) + (ys - np.where(poly, ys, f32(0)))
    s = (s.view(np.int32) ^ sign_sin).view(f32)
    c = (c.view(np.int32) ^ sign_cos).view(f32)
    return s, c


def _box_muller16_f32(d, mean, std):
    """``normal_fill_16_AVX2`` on rows of 16 float32 uniforms (in place)."""
    u1 = f32(1) - d[:, :8]
    radius = np.sqrt(f32(-2) * _log256(u1))
    s, c = _sincos256(f32(2 * _PI) * d[:, 8:])
    n1, n2 = radius * c, radius * s
    mean, std = f32(mean), f32(std)
    if _is_pow2(std) or mean == 0:
        # exact products, or fma(n, std, 0): the product rounded once, as the float32
        # multiply rounds it; adding +0.0 turns its -0.0 into +0.0 as the FMA does
        d[:, :8], d[:, 8:] = n1 * std + mean, n2 * std + mean
    else:
        d[:, :8], d[:, 8:] = fma32(n1, std, mean), fma32(n2, std, mean)


def _box_muller16_scalar(d, mean, std):
    """``normal_fill_16<scalar_t>`` on rows of 16 uniforms (in place)."""
    if d.dtype == f64:
        radius = np.sqrt(-2.0 * libm(math.log, 1.0 - d[:, :8]))
        theta = 2.0 * _PI * d[:, 8:]
        d[:, :8] = fma64(radius * np.cos(theta), std, mean)
        d[:, 8:] = fma64(radius * np.sin(theta), std, mean)
    else:  # float32 without AVX2: std::log/cos/sin in float (NumPy's, not bit-exact)
        radius = np.sqrt(f32(-2) * np.log(f32(1) - d[:, :8]))
        theta = (2.0 * _PI * d[:, 8:].astype(f64)).astype(f32)
        d[:, :8] = fma32(radius * np.cos(theta), f32(std), f32(mean))
        d[:, 8:] = fma32(radius * np.sin(theta), f32(std), f32(mean))


# ----- the samplers ------------------------------------------------------------------------
def cast(x, np_dtype):
    """A double or int64 result in the tensor's dtype as PyTorch's ``static_cast`` makes it:
    into half or bfloat16 through float (two roundings), as their constructors take a
    float."""
    dt = np.dtype(np_dtype)
    if dt.itemsize == 2 and dt.kind != "i" and dt.kind != "u":
        x = x.astype(f32)
    return x.astype(dt, copy=False)


def uniform01(g, n, np_dtype):
    """``uniform_real_distribution<T>(0, 1)``: 24 random bits for float/half, 53 for double."""
    if np_dtype == f64:
        return (g._u64(n) & np.uint64((1 << 53) - 1)).astype(f64) * 2.0 ** -53
    return (g._u32(n) & np.uint32((1 << 24) - 1)).astype(f32) * f32(2.0 ** -24)


def uniform(g, n, low, high, np_dtype):
    """``uniform_(low, high)``: ``x * (high - low) + low``, fused, in the tensor's precision
    (float for half); a value that lands on ``high`` once in the tensor's dtype becomes
    ``low``, as PyTorch keeps the interval half-open."""
    if low == 0.0 and high == 1.0:
        x = uniform01(g, n, np_dtype).astype(np_dtype, copy=False)
        if np.dtype(np_dtype).itemsize > 2:  # [0, 1) stays below 1 in float and double
            return x
    else:
        x = _uniform_numba(g, n, low, high, np_dtype) if np_dtype != f64 else None
    if x is None:
        x = uniform01(g, n, np_dtype)
        if np_dtype == f64:
            x = fma64(x, float(high) - float(low), float(low))
        else:
            lo, hi = f32(low), f32(high)
            x = fma32(x, hi - lo, lo).astype(np_dtype, copy=False)
    top = np.dtype(np_dtype).type(high)
    at_top = x == top
    if at_top.any():
        x[at_top] = np.dtype(np_dtype).type(low)
    return x


def _uniform_numba(g, n, low, high, np_dtype):
    """``uniform`` for float32 and half through the compiled kernel (same draws, same
    values), or None where numba is missing."""
    kernels = _numba_kernels(n)
    if kernels is None:
        return None
    lo, hi = f32(low), f32(high)
    out = np.empty(n, f32)
    kernels.uniform24(_raw(g, n, kernels), out, lo, hi - lo)
    return out.astype(np_dtype, copy=False)


def normal_serial(g, n, mean, std):
    """``at::normal_distribution<double>`` drawn ``n`` times, using and refilling the
    generator's cached second Box-Muller value; float64 results."""
    out = np.empty(n, f64)
    start = 0
    if n and g._next_double is not None:
        out[0] = g._next_double
        g._next_double = None
        start = 1
    pairs = (n - start + 1) // 2
    if pairs:
        u = uniform01(g, 2 * pairs, f64)
        r = np.sqrt(-2.0 * libm(math.log1p, -u[1::2]))
        theta = 2.0 * _PI * u[0::2]
        z = np.empty(2 * pairs, f64)
        z[0::2] = r * np.cos(theta)
        z[1::2] = r * np.sin(theta)
        out[start:] = z[:n - start]
        if (n - start) % 2:
            g._next_double = float(z[-1])
    return fma64(out, float(std), float(mean))


def normal(g, n, mean, std, np_dtype, contiguous=True):
    """``normal_(mean, std)`` on a tensor of ``n`` elements, as PyTorch's CPU kernel does:
    blocks of 16 Box-Muller values for contiguous tensors of 16 or more elements (the last
    block recomputed from 16 fresh uniforms), else the scalar sampler with its cache."""
    if n < 16 or not contiguous:
        # PyTorch converts the double to float, then to half or bfloat16 (two roundings)
        return cast(normal_serial(g, n, mean, std), np_dtype)
    work = f64 if np_dtype == f64 else f32
    full = n - n % 16
    if work == f32 and HAS_AVX2:
        kernels = _numba_kernels(n)
        if kernels is not None:
            return _normal_numba(kernels, g, n, full, mean, std, np_dtype)
    # float and double draw a uniform for every element first; half and bfloat16 only for
    # whole blocks
    d = uniform01(g, full if np.dtype(np_dtype).itemsize == 2 else n, work)
    if d.size < n:
        d = np.concatenate([d, np.empty(n - d.size, work)])
    fill = _box_muller16_f32 if work == f32 and HAS_AVX2 else _box_muller16_scalar
    blocks = d[:full].reshape(-1, 16)
    for i in range(0, len(blocks), _CHUNK):  # cache-sized pieces: far fewer page faults
        fill(blocks[i:i + _CHUNK], mean, std)
    if n % 16:
        tail = uniform01(g, 16, work).reshape(1, 16)
        fill(tail, mean, std)
        d[n - 16:] = tail.ravel()
    return d.astype(np_dtype, copy=False)


_CHUNK = 1024  # rows of 16 values transformed at a time
_FUSED = {}  # "random": the numba kernels' module, or None without numba (tried once)
# numba is imported (about a second) by the first call of at least this many values; a
# few small tensors are not worth it, and give the same values through NumPy
_NUMBA_MIN = 4096


def _numba_kernels(n):
    """The compiled kernels of ``ember/_random_numba.py`` (the ``ember[fast]`` extra) for
    ``n`` values, or None where numba is missing (or not imported yet and ``n`` is small):
    the NumPy replay runs. Both give the same values."""
    if "random" not in _FUSED and n < _NUMBA_MIN:
        return None
    from ember.backend import fast_kernels
    return fast_kernels.load(_FUSED, "random", "ember._random_numba")


def _raw(g, n, kernels):
    """``n`` raw outputs of ``g``: from the compiled Mersenne Twister for large ``n`` (about
    3x faster than ``random_raw``; copying the state in and out costs ~0.1 ms), else
    from NumPy's."""
    if n >= _MT_MIN:
        return g._raw_compiled(n, kernels.mt19937_fill)
    return g._raw(n)


def _normal_numba(kernels, g, n, full, mean, std, np_dtype):
    """``normal`` for float32 and half through the compiled kernel: the same raw outputs
    in the same order as the NumPy path (float: one per element, then 16 for a partial
    last block; half: one per element of the whole blocks, then 16)."""
    out = np.empty(n, f32)
    raw = _raw(g, full if np.dtype(np_dtype).itemsize == 2 else n, kernels)
    kernels.box_muller16(raw[:full], out[:full], f32(mean), f32(std))
    if n % 16:
        tail = np.empty(16, f32)
        kernels.box_muller16(g._raw(16), tail, f32(mean), f32(std))
        out[n - 16:] = tail
    return out.astype(np_dtype, copy=False)


_MT_MIN = 1 << 15
_INT_KINDS = {np.dtype(np.int64), np.dtype(f64), np.dtype(f32)}


def random_from_to(g, n, rng, base, np_dtype):
    """``random_(from, to)``: ``(draw % range) + from``; 64-bit draws when the range needs
    them (int64/float/double only), else 32-bit."""
    if rng >= 1 << 32 and np.dtype(np_dtype) in _INT_KINDS:
        v = g._u64(n)
    else:
        v = g._u32(n).astype(np.uint64)
    if rng < 1 << 64:
        v = v % np.uint64(rng)
    v = v + np.uint64(base % (1 << 64))
    return cast(v.view(np.int64), np_dtype)


def random_default(g, n, np_dtype):
    """``random_()``: ``[0, 2**mantissa]`` for floats, ``[0, max]`` for integers."""
    dt = np.dtype(np_dtype)
    if dt == np.bool_:
        return (g._u32(n) & np.uint32(1)).astype(np.bool_)
    v = g._u64(n) if dt in (np.dtype(np.int64), np.dtype(f64)) else g._u32(n).astype(np.uint64)
    if dt.name == "bfloat16":
        mod = (1 << 8) + 1
    elif dt.kind == "f":
        mod = (1 << {2: 11, 4: 24, 8: 53}[dt.itemsize]) + 1
    else:
        mod = int(np.iinfo(dt).max) + 1
    return (v % np.uint64(mod)).astype(dt)


def bernoulli_scalar(g, n, p, np_dtype):
    """``bernoulli_(p)`` for a Python float ``p``: 53-bit uniforms compared with ``p``."""
    return (uniform01(g, n, f64) < p).astype(np_dtype)


def bernoulli_tensor(g, p, np_dtype):
    """``bernoulli_(p_tensor)``: per element, a double uniform if ``p`` is float64, else a
    24-bit float uniform, compared with ``p``."""
    if p.dtype == f64:
        u = uniform01(g, p.size, f64)
    else:
        u = uniform01(g, p.size, f32)
        p = p.astype(f32)
    return (u < p.ravel()).astype(np_dtype)


def exponential(g, n, lambd, np_dtype):
    """``exponential_(lambd)``: ``-1/lambd * log1p(-u)`` in double."""
    u = uniform01(g, n, f64)
    return cast((-1.0 / lambd) * libm(math.log1p, -u), np_dtype)


def geometric(g, n, p, np_dtype):
    """``geometric_(p)``: ``ceil(log(u) / log1p(-p))`` in double."""
    u = uniform01(g, n, f64)
    with np.errstate(all="ignore"):
        return cast(np.ceil(libm(math.log, np.maximum(u, 5e-324)) / math.log1p(-p)), np_dtype)


def cauchy(g, n, median, sigma, np_dtype):
    """``cauchy_(median, sigma)``: ``median + sigma * tan(pi * (u - 0.5))``, fused."""
    u = uniform01(g, n, f64)
    return cast(fma64(float(sigma), libm(math.tan, _PI * (u - 0.5)), float(median)), np_dtype)


def log_normal(g, n, mean, std, np_dtype):
    """``log_normal_(mean, std)``: ``exp`` of the scalar normal sampler (with its cache)."""
    return cast(libm(math.exp, normal_serial(g, n, mean, std)), np_dtype)


def randperm(g, n):
    """``randperm(n)`` for ``n < 2**32 / 20``: PyTorch swaps ``a[i]`` with
    ``a[i + draw_i % (n - i)]`` for ``i = 0 .. n-2``. The swaps are replayed without a
    loop: position ``i`` ends up with the value that sat at ``j_i`` just before step
    ``i``, and that value is found by following, with pointer jumping, the chain of
    earlier steps that wrote to the same place."""
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    i = np.arange(n - 1, dtype=np.int64)
    j = g._u32(n - 1).astype(np.int64) % (n - i) + i
    keys = np.sort(j * n + i)  # by target, then by step (unique keys sort fast)
    order, js = keys % n, keys // n
    same = js[1:] == js[:-1]
    prev = np.full(n - 1, -1, np.int64)  # the previous step that wrote to j_i
    prev[order[1:][same]] = order[:-1][same]
    par = np.full(n, -1, np.int64)
    par[js] = order  # the last step writing to each place
    own = j == i
    par[:-1][own] = prev[own]  # before step i, place i holds what the last earlier write left
    root = np.where(par < 0, np.arange(n), par)
    active = np.flatnonzero(root[root] != root)
    while active.size:  # pointer jumping, only where the chain has not reached its start
        root[active] = root[root[active]]
        active = active[root[root[active]] != root[active]]
    out = np.empty(n, np.int64)
    out[:-1] = np.where(prev >= 0, root[np.maximum(prev, 0)], j)
    out[-1] = root[-1]
    return out


def _count_below(cum, u):
    """Per row, how many entries of ``cum`` are below each ``u`` (a row-wise searchsorted)."""
    rows, k = cum.shape
    m = u.shape[1]
    vals = np.concatenate([u, cum], axis=1).ravel()
    tag = np.concatenate([np.zeros((rows, m), np.int8), np.ones((rows, k), np.int8)], 1).ravel()
    row = np.repeat(np.arange(rows), m + k)
    order = np.lexsort((tag, vals, row))  # within a row: by value, a u before an equal cum
    is_cum = tag[order] == 1
    before = np.cumsum(is_cum) - is_cum  # cums strictly before each position
    per_row = np.bincount(row[order][is_cum], minlength=rows)
    row_start = np.concatenate([[0], np.cumsum(per_row)[:-1]])
    res = np.empty(rows * (m + k), np.int64)
    res[order] = before - row_start[row[order]]
    return res.reshape(rows, m + k)[:, :m]


def multinomial_with_replacement(g, p, n_sample):
    """Rows of ``p`` (2-d): cumulative sums normalised by their total (in ``p``'s dtype),
    then a binary search for each double uniform."""
    work = p.dtype if p.dtype in (f32, f64) else f32
    cum = np.cumsum(p, axis=1, dtype=work)
    cum = cum / cum[:, -1:]
    cum[:, -1] = 1
    u = uniform01(g, p.shape[0] * n_sample, f64).reshape(p.shape[0], n_sample)
    return _count_below(cum.astype(f64), u)
