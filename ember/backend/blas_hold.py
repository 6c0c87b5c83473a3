"""NumPy's BLAS held at one thread for a whole pass of ember kernels (a backward pass, an
optimizer step) at more than one ember thread: see :func:`hold_blas`.
"""
from ember.backend import threads as _threads

__all__ = ["hold_blas", "release_blas"]


# A backward pass or an optimizer step at more than one ember thread runs many products,
# each of which (where ember does not split it) would set NumPy's BLAS to one thread and
# back around itself -- two calls into the library, a few microseconds, and a longer
# Python route than at one thread. Holding BLAS at one thread for the whole pass makes
# those products run as at one thread (the same calls, so the same bits) and leaves the
# pool's splits and pairs as they were. The count is process-wide, so holds from several
# Python threads are counted (under ``_hold_lock``): the first sets it, the last gives
# it back.


def hold_blas():
    """Hold NumPy's BLAS at one thread until :func:`release_blas` (passes of many kernels
    at more than one ember thread, see above). Returns the token to release; None at one
    ember thread (nothing held)."""
    if not _threads.MANY:
        return None
    with _threads._hold_lock:
        if not _threads._state["held"]:
            saved = []
            for lib in _held_libs():
                k = lib.num_threads
                if k > 1:
                    lib.set_num_threads(1)
                    saved.append((lib, k))
            _threads._state["held_saved"] = saved
        _threads._state["held"] += 1
    return True


def _held_libs():
    """The libraries a hold sets: NumPy's OpenBLAS (ember computes its products at one
    thread for their bits); not MKL, whose products are ember's own calls on its threads
    (``ember[mkl]``), nor another BLAS threadpoolctl finds beside it."""
    return [lib for lib in _threads._blas_libs() if _threads._openblas(lib)]


def release_blas(token):
    """End a :func:`hold_blas`; the last hold gives BLAS its count back."""
    if token is None:
        return
    with _threads._hold_lock:
        _threads._state["held"] -= 1
        if not _threads._state["held"]:
            _threads.blas_back(_threads._state.pop("held_saved", ()))
