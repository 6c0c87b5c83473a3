"""NumPy's LAPACK routines with results that do not change with ember's thread count.

LAPACK runs its blocked steps on BLAS's threads, and OpenBLAS's threads sum a long inner
dimension in another order than its one thread does (``threads.same_bits_k``), so a
factorization's last bits would depend on ``set_num_threads`` (and, through the load
rule of ``threads.cores_to_spare``, on the machine's load). :data:`linalg` is
``numpy.linalg`` whose routines run at one BLAS thread when ember has more than one (at
one ember thread BLAS already has one): the one-thread bits at any count. The cost at two
threads is in docs/performance/threads-products.md, "Ops beyond the product routes"."""
import numpy as np

from ember.backend import threads as _threads


class _OneBlasThread:
    """``numpy.linalg``'s names; its functions wrapped to run inside
    ``threads.single_blas()`` at more than one ember thread, anything else (the
    ``LinAlgError`` class) as it is."""

    def __getattr__(self, name):
        fn = getattr(np.linalg, name)
        if isinstance(fn, type) or not callable(fn):
            return fn

        def call(*args, **kwargs):
            if not _threads.MANY:
                return fn(*args, **kwargs)
            with _threads.single_blas():
                return fn(*args, **kwargs)
        call.__name__ = call.__qualname__ = name
        call.__doc__ = f"``numpy.linalg.{name}`` at one BLAS thread (see the module)."
        setattr(self, name, call)  # looked up once
        return call


linalg = _OneBlasThread()


def one_thread():
    """A block whose BLAS calls run at one BLAS thread when ember has more than one (for
    NumPy calls other than ``numpy.linalg``'s, e.g. a product on arrays outside
    ``gemm.matmul``); nothing to do at one thread."""
    return _threads.single_blas() if _threads.MANY else _NULL


class _Null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NULL = _Null()
