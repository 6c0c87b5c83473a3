"""The ``ember[fast]`` extra's kernel modules (numba), imported on first use.

Each op family that has compiled kernels (``ember.ops._lstm_numba``, ``_norm_numba``,
``_pool_numba`` ...) asks for its module here the first time an array qualifies; the
answer is cached in the family's own dictionary (tests replace an entry with None to run
the NumPy path), and ``import ember`` never imports numba.
"""
import importlib

__all__ = ["load"]


def load(cache, key, module):
    """The kernel module named ``module``, or None where numba is missing or unusable,
    remembered as ``cache[key]`` (looked up there first)."""
    kernels = cache.get(key, False)
    if kernels is False:
        try:
            kernels = importlib.import_module(module)
        except ImportError:  # numba missing (or unusable with this NumPy)
            kernels = None
        cache[key] = kernels
        if kernels is not None:
            from ember.backend.threads import refresh_blas
            refresh_blas()  # importing numba imports SciPy, with its own OpenBLAS
    return kernels
