"""``numba.njit`` as ember's compiled kernels use it (the ``ember[fast]`` extra).

Imported only by the modules holding numba kernels (``ember.ops._lstm_numba``,
``ember._random_numba``), which are themselves imported on first use, never at
``import ember``.
"""
import numba

__all__ = ["njit"]


def njit(fn=None, **flags):
    """``numba.njit`` with the on-disk cache where one can be written (a read-only
    install falls back to numba's per-user cache directory), else without it.

    ``error_model="numpy"``: a float division follows IEEE instead of raising, which
    is what lets the loops vectorize."""
    if fn is None:
        return lambda f: njit(f, **flags)
    opts = dict(nogil=True, error_model="numpy", **flags)
    try:
        return numba.njit(cache=True, **opts)(fn)
    except RuntimeError:  # no cache locator: numba found no writable directory
        return numba.njit(**opts)(fn)
