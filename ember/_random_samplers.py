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

The element loops are written once, in plain Python on scalars
(:mod:`ember._sampler_loops`); the default install runs them as Python, and with numba
(``ember[fast]``) :func:`kernels` returns the same source compiled. Both give the same
bits.

Draws are made ahead: a buffer of raw outputs is drawn from a copy of the state, the
loop consumes what it needs (stopping before an element the buffer cannot finish), and
the generator is then advanced by exactly the outputs consumed.
"""
import math

import numpy as np

from ember import _random_kernels, _sampler_env
from ember import _sampler_loops as _loops

_COMPILED = {}  # "loops": the numba-compiled loops, or None without numba (tried once)
_NUMBA_MIN = 256  # smaller calls run as Python until numba is loaded


def kernels(n):
    """The element loops for a call of ``n`` elements: numba-compiled where numba is
    installed (loaded by the first call of ``_NUMBA_MIN`` or more elements), else the
    same loops as Python."""
    if "loops" not in _COMPILED:
        if n < _NUMBA_MIN:
            return _loops
        _COMPILED["loops"] = _sampler_env.load_compiled()
    return _COMPILED["loops"] or _loops


_MAX_DRAWS = 1 << 26  # an element needing more raw outputs than this is a runaway loop
_CHUNK = 1 << 20  # raw outputs drawn ahead at a time (a Python list of them: ~40 MB)


def _compiled_twister(n):
    """The compiled Mersenne Twister of ``ember._random_numba`` (about 3x NumPy's
    ``random_raw``) for draws of ``n`` raw outputs or more, else None."""
    if n < _random_kernels._MT_MIN:
        return None
    kernels = _random_kernels._numba_kernels(n)
    return None if kernels is None else kernels.mt19937_fill


def _run(g, fill, n, args_at, raws_per_element, python):
    """Drives ``fill`` over ``n`` elements with raw outputs drawn ahead from ``g``;
    ``args_at(i)`` describes element ``i`` for the error of a runaway loop."""
    twister = None if python else _compiled_twister(raws_per_element * n)
    i = 0
    while i < n:
        size = min(raws_per_element * (n - i) + 64, _CHUNK)
        while True:
            saved = g._bg.state
            if twister is not None:  # (as int64: the loops compile for one buffer type)
                buf = g._raw_compiled(size, twister).astype(np.int64)
            else:
                raw = g._bg.random_raw(size)
                buf = raw.tolist() if python else raw.astype(np.int64)
            j, used = fill(i, buf)
            g._bg.state = saved
            if twister is not None:
                g._raw_compiled(used, twister)
            else:
                g._raw(used)
            if j > i:
                break
            if size > _MAX_DRAWS:
                raise RuntimeError(f"sampler: element {i} needed more than {_MAX_DRAWS} "
                                   f"random draws (parameters {args_at(i)})")
            size *= 4  # one element needed more draws than the whole buffer held
        i = j


def standard_gamma(g, alpha, single):
    """Standard gamma draws for the float64 values ``alpha`` (flat, C order) as PyTorch's
    ``_standard_gamma`` makes them; ``single``: the tensor is float32. Returns float64
    values before the cast to the result's dtype (and before its clamp to ``tiny``)."""
    n = alpha.size
    out = np.zeros(n, np.float64)
    ks = kernels(n)
    python = ks is _loops
    cache = [0.0, 0.0] if python else np.zeros(2)
    if g._next_double is not None:
        cache[0], cache[1] = 1.0, g._next_double
    values = alpha.tolist() if python else alpha
    _run(g, lambda *a: ks.gamma_fill(values, single, out, *a, cache), n,
         lambda i: f"alpha={alpha[i]}", 8, python)
    g._next_double = float(cache[1]) if cache[0] else None
    return out


def binomial(g, count, prob, single):
    """Binomial draws for flat float64 ``count``/``prob`` (C order), as float64."""
    n = count.size
    out = np.zeros(n, np.float64)
    ks = kernels(n)
    python = ks is _loops
    c, p = (count.tolist(), prob.tolist()) if python else (count, prob)
    _run(g, lambda *a: ks.binomial_fill(c, p, single, out, *a), n,
         lambda i: f"count={count[i]}, prob={prob[i]}", 12, python)
    return out


def poisson(g, lam):
    """Poisson draws for the flat float64 rates ``lam`` (C order), as float64."""
    n = lam.size
    out = np.zeros(n, np.float64)
    ks = kernels(n)
    python = ks is _loops
    values = lam.tolist() if python else lam
    _run(g, lambda *a: ks.poisson_fill(values, out, *a), n, lambda i: f"rate={lam[i]}", 12,
         python)
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
