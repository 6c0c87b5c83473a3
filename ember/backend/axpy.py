"""``y += alpha * x`` on float32 arrays rounded once, through the BLAS NumPy links.

PyTorch's CPU ``add_(x, alpha=alpha)`` computes each element as one fused multiply-add
(a single rounding). NumPy has no such ufunc; ember's exact NumPy formula goes through
float64 (:func:`ember.optim.optimizer._axpy`), whose casts cost 5-10 times a float32
pass -- the largest part of an SGD step. OpenBLAS's ``saxpy`` kernels for CPUs with FMA
instructions compute the same single-rounded values at memory speed, so :func:`saxpy`
calls it through ctypes where it can.

It is used only where it is known to agree: on first use the library is located (the
OpenBLAS bundled with NumPy's wheels, or a BLAS already loaded into the process), and
its ``saxpy`` is checked against the float64 formula on inputs where a multiply-add
with two roundings differs from one with a single rounding, at every length up to a few
SIMD blocks (the kernels' vector bodies and scalar tails). A library that is missing,
has no FMA kernel, or disagrees anywhere leaves :func:`saxpy` returning False, and the
caller runs NumPy. Where only the kernel's vector body agrees (OpenBLAS's Haswell
``saxpy``, which AMD's Zen cores run too, rounds twice in its scalar loop over the last
``n % 32`` elements), BLAS takes the whole blocks of that body's width and NumPy's exact
formula the few elements after them. ``EMBER_BLAS_AXPY=0`` switches it off.

:func:`scale_add` is SGD's momentum update ``b = momentum * b + g`` with the product
rounded and then the sum, as NumPy's ``b *= momentum; b += g`` and PyTorch's ``mul_`` then
``add_``, in one pass instead of two, through the same library's ``saxpby``; it is
checked the same way (against the twice-rounded values, on inputs where one rounding
would differ) and used only where it agrees.
"""
import glob
import os
import threading

import numpy as np

from ember.backend import threads as _threads

__all__ = ["saxpy", "scale_add", "available"]

# None: not looked for yet; False: not used; else (function, largest n, pointer reader,
# grain: BLAS takes the largest multiple of it of the elements, NumPy the rest)
_fn = [None]
_fn_by = [None]  # the same for saxpby
_lock = threading.Lock()
_MIN_SIZE = 256  # below this the ctypes call costs more than NumPy's float64 passes
_BLAS_THREADED = 10000  # OpenBLAS's axpy runs its threads above this many elements
# the widths of a kernel's vector body tried, smallest first, when not every length agrees
# (1: every length; OpenBLAS's Haswell saxpy: 32)
_GRAINS = (1, 8, 16, 32, 64)

# (symbol, 64-bit integers) as the BLAS builds NumPy ships spell cblas_saxpy
_SYMBOLS = (("scipy_cblas_saxpy64_", True), ("cblas_saxpy64_", True), ("cblas_saxpy", False))
_BY_SYMBOLS = tuple((name.replace("axpy", "axpby"), wide) for name, wide in _SYMBOLS)


def _candidates():
    """Library paths to try: NumPy's bundled OpenBLAS first, then the process itself."""
    base = os.path.dirname(os.path.abspath(np.__file__))
    paths = []
    for folder in (base + ".libs", os.path.join(base, ".dylibs")):
        paths += sorted(glob.glob(os.path.join(folder, "*openblas*")))
    return paths + [None]


def _bind(ctypes, path, symbols=_SYMBOLS):
    """(function, max n, pointer reader) for the first of ``symbols`` (cblas saxpy, or
    saxpby with ``_BY_SYMBOLS``) in ``path``, or None."""
    try:
        lib = ctypes.CDLL(path)
    except (OSError, TypeError):  # TypeError: no process handle (CDLL(None) on Windows)
        return None
    for symbol, wide in symbols:
        f = getattr(lib, symbol, None)
        if f is None:
            continue
        i, p, real = ctypes.c_int64 if wide else ctypes.c_int, ctypes.c_void_p, ctypes.c_float
        # saxpy(n, alpha, x, incx, y, incy); saxpby(n, alpha, x, incx, beta, y, incy)
        f.argtypes = [i, real, p, i, p, i] if symbols is _SYMBOLS else \
            [i, real, p, i, real, p, i]
        f.restype = None
        from ember.backend.gemm import _pointer_reader
        return f, (1 << 63) - 1 if wide else (1 << 31) - 1, _pointer_reader(ctypes)
    return None


def _reference(y, alpha, x):
    """The single-rounded values in float64 (the float32 product is exact there)."""
    t = np.multiply(x, alpha, dtype=np.float64)
    t += y
    return t.astype(np.float32)


def _lengths(grain):
    """The lengths checked for a grain: every multiple of it up to 160 (at least 8 of
    them: vector bodies, and their tails for a grain of 1) and a long one."""
    return list(range(grain, max(161, 8 * grain + 1), grain)) + [4099 - 4099 % grain]


def _agrees(f, grain=1):
    """True when ``f`` gives the single-rounded values on inputs where a second rounding
    would show: every length that is a multiple of ``grain`` up to 160 (vector bodies and
    tails), and a long one, at two offsets of the arrays' starts."""
    rng = np.random.default_rng(7)
    for n in _lengths(grain):
        for skip in (0, 3) if grain > 1 else (0,):  # (blocks start anywhere in an array)
            y = rng.standard_normal(n + skip).astype(np.float32)[skip:]
            x = (rng.standard_normal(n + skip) *
                 10.0 ** rng.integers(-3, 3, n + skip)).astype(np.float32)[skip:]
            alpha = float(np.float32(-0.0123))
            want = _reference(y, alpha, x)
            got = y.copy() if not skip else \
                np.concatenate([np.zeros(skip, np.float32), y])[skip:]
            f(n, alpha, x.ctypes.data, 1, got.ctypes.data, 1)
            if not np.array_equal(want.view(np.int32), got.view(np.int32)):
                return False
    # an input where two roundings differ from one, so that a kernel without FMA fails
    y = np.full(64, -1.0, np.float32)
    x = np.full(64, 1.0 + 2.0 ** -23, np.float32)
    alpha = 1.0 + 2.0 ** -23
    got = y.copy()
    f(64, alpha, x.ctypes.data, 1, got.ctypes.data, 1)
    return np.array_equal(_reference(y, alpha, x).view(np.int32), got.view(np.int32))


def _scale_add_reference(y, beta, x):
    """``beta * y`` rounded to float32, then ``+ x`` rounded: NumPy's two passes."""
    t = y * np.float32(beta)
    t += x
    return t


def _scale_add_agrees(f, grain=1):
    """True when ``f`` (saxpby with alpha 1) gives the twice-rounded values at every
    length that is a multiple of ``grain`` up to 160 and a long one, for a few momenta,
    and on inputs where a fused multiply-add (one rounding) would differ."""
    rng = np.random.default_rng(11)
    for beta in (0.9, 0.5, 0.99, 0.999):
        for n in _lengths(grain):
            y = rng.standard_normal(n).astype(np.float32)
            x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)).astype(np.float32)
            got = y.copy()
            f(n, 1.0, x.ctypes.data, 1, beta, got.ctypes.data, 1)
            want = _scale_add_reference(y, beta, x)
            if not np.array_equal(want.view(np.int32), got.view(np.int32)):
                return False
    beta = 1.0 + 2.0 ** -23
    y = np.full(64, 1.0 + 2.0 ** -23, np.float32)
    x = np.full(64, -1.0, np.float32)
    got = y.copy()
    f(64, 1.0, x.ctypes.data, 1, beta, got.ctypes.data, 1)
    return np.array_equal(_scale_add_reference(y, beta, x).view(np.int32),
                          got.view(np.int32))


def _find_by():
    if _fn[0] is None:
        _fn[0] = _find()
    if _fn[0] is False:  # switched off, or no agreeing saxpy: no saxpby either
        return False
    return _first_agreeing(_BY_SYMBOLS, _scale_add_agrees)


def scale_add(y, beta, x):
    """``y = beta * y + x`` in place for C-contiguous float32 NumPy arrays of one shape
    that do not overlap, the product rounded and then the sum (NumPy's ``y *= beta;
    y += x``) in one pass; False (``y`` untouched) where not covered: other arrays, small
    ones, ``beta`` 0 or 1 (BLAS may take shortcuts there), or no agreeing BLAS."""
    if type(y) is not np.ndarray or type(x) is not np.ndarray or y.dtype != np.float32 \
            or x.dtype != np.float32 or y.shape != x.shape or y.size < _MIN_SIZE \
            or beta == 0 or beta == 1 \
            or not (y.flags.c_contiguous and x.flags.c_contiguous and y.flags.writeable
                    and y.flags.aligned and x.flags.aligned):
        return False
    fn = _fn_by[0]
    if fn is None:
        with _lock:
            if _fn_by[0] is None:
                _fn_by[0] = _find_by()
            fn = _fn_by[0]
    if fn is False or y.size > fn[1] or np.may_share_memory(x, y):
        return False
    beta = float(np.float32(beta))
    body = _in_blocks(lambda n, px, py: fn[0](n, 1.0, px, 1, beta, py, 1), y, x, fn[2],
                      fn[3])
    if body < y.size:  # the elements after the kernel's whole vector blocks: NumPy's
        yt, xt = y.reshape(-1)[body:], x.reshape(-1)[body:]
        yt *= np.float32(beta)
        yt += xt
    return True


def _in_blocks(call, y, x, ptr, grain):
    """``call(n, x pointer, y pointer)`` over the float32 arrays ``x`` and ``y`` up to
    the largest multiple of ``grain`` of their elements, which it returns (the caller
    computes the rest): one call, or, where OpenBLAS would run its own threads (large,
    and more than one ember thread), calls over blocks of whole grains on ember's threads
    instead (threads.py says why); each element is computed alike in any block."""
    px, py = ptr(x), ptr(y)
    size = y.size - y.size % grain
    if size <= _BLAS_THREADED or _threads.get_num_threads() < 2:
        call(size, px, py)
        return size
    step = 4 * grain

    def block(lo, hi):
        call((hi - lo) * grain, px + step * lo, py + step * lo)
    _threads.blas_rows(block, size // grain, 2 * size)
    return size


def _find():
    if os.environ.get("EMBER_BLAS_AXPY", "").strip().lower() in ("0", "off", "false", "no"):
        return False
    return _first_agreeing(_SYMBOLS, _agrees)


def _first_agreeing(symbols, agrees):
    """The first library's binding of ``symbols`` (see ``_bind``) and the smallest grain
    of :data:`_GRAINS` for which ``agrees(function, grain)``, else False."""
    try:
        import ctypes
    except ImportError:
        return False
    for path in _candidates():
        bound = _bind(ctypes, path, symbols)
        if bound is not None:
            for grain in _GRAINS:
                try:
                    ok = agrees(bound[0], grain)
                except Exception:  # a foreign symbol of another signature: not ours
                    return False
                if ok:
                    return bound + (grain,)
            return False
    return False


def _load():
    with _lock:
        if _fn[0] is None:
            _fn[0] = _find()
        return _fn[0]


def available():
    """True when :func:`saxpy` runs BLAS (looks for it on first call)."""
    return bool(_fn[0] if _fn[0] is not None else _load())


def saxpy(y, alpha, x):
    """``y += alpha * x`` in place, each element rounded once, for C-contiguous float32
    NumPy arrays ``y`` and ``x`` of one shape that do not overlap; False (``y``
    untouched) where not covered: other arrays, small ones, or no agreeing BLAS."""
    if type(y) is not np.ndarray or type(x) is not np.ndarray or y.dtype != np.float32 \
            or x.dtype != np.float32 or y.shape != x.shape or y.size < _MIN_SIZE \
            or not (y.flags.c_contiguous and x.flags.c_contiguous and y.flags.writeable
                    and y.flags.aligned and x.flags.aligned):
        return False
    fn = _fn[0]
    if fn is None:
        fn = _load()
    if fn is False or y.size > fn[1] or np.may_share_memory(x, y):
        return False
    body = _in_blocks(lambda n, px, py: fn[0](n, alpha, px, 1, py, 1), y, x, fn[2], fn[3])
    if body < y.size:  # the elements after the kernel's whole vector blocks: NumPy's
        yt = y.reshape(-1)[body:]
        # (alpha rounded to float32, as the kernel's argument is)
        yt[...] = _reference(yt, float(np.float32(alpha)), x.reshape(-1)[body:])
    return True
