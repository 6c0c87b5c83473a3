"""``cupy.random`` of the CPU test double: NumPy's legacy generator on device arrays."""
import numpy as _np

import cupy as _cp

_rs = [_np.random.RandomState(0)]


def seed(seed=None):
    """Seed the generator."""
    _rs[0] = _np.random.RandomState(None if seed is None else seed % (2 ** 32))


def _draw(name):
    def f(*args, **kwargs):
        dtype = kwargs.pop("dtype", None)
        out = getattr(_rs[0], name)(*args, **kwargs)
        out = _np.asarray(out)
        return _cp._wrap(out.astype(dtype) if dtype is not None else out)
    f.__name__ = name
    return f


for _n in ("standard_normal", "normal", "uniform", "randint", "random_sample", "rand", "randn",
           "random", "permutation", "bernoulli", "exponential", "poisson", "binomial",
           "gamma", "beta", "geometric", "multinomial", "choice", "standard_cauchy",
           "lognormal", "shuffle"):
    if hasattr(_rs[0], _n):
        globals()[_n] = _draw(_n)
