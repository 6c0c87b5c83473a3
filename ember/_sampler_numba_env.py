"""The scalar math of :mod:`ember._sampler_loops` compiled by numba: ``jit`` is
ember's cached ``njit``; float functions are numba's ``math`` on float32 arguments,
which call the C library's ``logf``/``log1pf``/``powf``/``tanf``, as PyTorch does;
``math.lgamma`` calls the C library's ``lgamma``."""
import math

import numpy as np

from ember.backend.numba_jit import njit as jit

__all__ = ["jit"]

log, sqrt, pow_, exp, lgamma = math.log, math.sqrt, math.pow, math.exp, math.lgamma
floor, ceil = np.floor, np.ceil
_INT64_MIN = np.int64(-(2 ** 63))


@jit
def f32(x):
    return np.float64(np.float32(x))


@jit
def div(a, b):
    return a / b


@jit
def int64(x):
    if x != x or not (-9.223372036854775808e18 <= x < 9.223372036854775808e18):
        return _INT64_MIN
    return np.int64(x)


@jit
def logf(x):
    return np.float64(math.log(np.float32(x)))


@jit
def log1pf(x):
    return np.float64(math.log1p(np.float32(x)))


@jit
def powf(x, y):
    return np.float64(math.pow(np.float32(x), np.float32(y)))


@jit
def tanf(x):
    return np.float64(math.tan(np.float32(x)))
