"""The BLAS functions behind the recurrent layers' per-step products, found in the
libraries already loaded (ctypes only: no numba, nothing new to install).

- :func:`sgemm`: NumPy's own ``cblas_sgemm`` (or MKL's, where ``ember.backend.gemm`` runs
  products of that size on MKL) as a ctypes function the numba sequence kernels call
  (``ember/ops/_lstm_numba.py``), with the column block width its products run in;
- :func:`column_block`: that width for the NumPy per-step loop's own ``np.matmul``
  products;
- :func:`transpose`: a C-ordered transposed copy by BLAS's ``somatcopy``.

Column blocks: on OpenBLAS's SkylakeX-family cores a product of at most 1e6
multiply-adds runs a kernel for small matrices that reads its operands in place, where
the general kernel first copies them into blocks. A recurrent step's (32, 128) @
(128, 512) or (32, 512) @ (512, 128) product is larger, but computed as column blocks
within that size, on 64-byte aligned operands, it runs about 1.5x faster (measured
45 -> 29 us forward, 47 -> 29 us backward at one thread). The blocks' sums run in
another order, so results differ from one ``np.matmul`` in the last bits.
"""
import ctypes

import numpy as np

__all__ = ["sgemm", "column_block", "small_kernel", "row_block", "transpose", "aligned",
           "core_name"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112  # CBLAS's enums

# "numpy"/"mkl": the ctypes sgemm, "omatcopy" the transposition; None where not found
_SGEMM = {}


def _prototype(ctypes, int_t):
    i, f, p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
    return ctypes.CFUNCTYPE(None, i, i, i, int_t, int_t, int_t, f, p, int_t, p, int_t, f, p,
                            int_t)


def _numpy_blas():
    """(``cblas_sgemm``, ``cblas_somatcopy``, OpenBLAS's core name) of NumPy's own BLAS
    (the library ``np.matmul`` calls), None (or "") where not found. The product is taken
    only when a probe through it is ``np.matmul``'s to the bit (the same library), the
    transposition only when it transposes a probe."""
    import glob
    import os
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 96)).astype(np.float32)
    b = rng.standard_normal((96, 80)).astype(np.float32)
    want = a @ b
    found = [None, None, ""]
    for path in sorted(glob.glob(os.path.join(libs, "*blas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        # only the symbols of NumPy's wheels (scipy-openblas, ILP64 or LP64), whose
        # integer width the name states: a wrong width could not be probed safely
        for prefix, suffix, int_t in (("scipy_", "64_", ctypes.c_int64),
                                      ("scipy_", "", ctypes.c_int)):
            f = getattr(lib, f"{prefix}cblas_sgemm{suffix}", None)
            if found[0] is None and f is not None:
                fn = _prototype(ctypes, int_t)(ctypes.cast(f, ctypes.c_void_p).value)
                got = np.empty_like(want)
                fn(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, 32, 80, 96, 1.0, a.ctypes.data, 96,
                   b.ctypes.data, 80, 0.0, got.ctypes.data, 80)
                if np.array_equal(got, want):
                    found[0] = fn
            f = getattr(lib, f"{prefix}openblas_get_corename{suffix}", None)
            if not found[2] and f is not None:
                f.restype = ctypes.c_char_p
                found[2] = (f() or b"").decode("ascii", "replace").lower()
            f = getattr(lib, f"{prefix}cblas_somatcopy{suffix}", None)
            if found[1] is None and f is not None:
                f.argtypes = [ctypes.c_int, ctypes.c_int, int_t, int_t, ctypes.c_float,
                              ctypes.c_void_p, int_t, ctypes.c_void_p, int_t]
                f.restype = None
                got = np.empty((96, 32), np.float32)
                f(_ROW_MAJOR, _TRANS, 32, 96, 1.0, a.ctypes.data, 96, got.ctypes.data, 32)
                if np.array_equal(got, a.T):
                    found[1] = f
    return found


def transpose(a, out=None):
    """``np.ascontiguousarray(a.T)`` for a C-ordered float32 matrix (into the C-ordered
    ``out`` when given), by the BLAS transposition (``cblas_somatcopy``: about 4x NumPy's
    strided copy) where found."""
    if "numpy" not in _SGEMM:
        _SGEMM["numpy"], _SGEMM["omatcopy"], _SGEMM["core"] = _numpy_blas()
    f = _SGEMM["omatcopy"]
    if f is None or not a.flags.c_contiguous or a.dtype != np.float32 or \
            out is not None and (out.dtype != np.float32 or not out.flags.c_contiguous):
        if out is None:
            return np.ascontiguousarray(a.T)
        out[...] = a.T
        return out
    if out is None:
        out = np.empty((a.shape[1], a.shape[0]), a.dtype)
    if a.size:
        f(_ROW_MAJOR, _TRANS, a.shape[0], a.shape[1], 1.0, _address(a), a.shape[1],
          _address(out), a.shape[0])
    return out


def _address(a):
    """The data pointer of a C-contiguous array: through ctypes' view of a writable
    buffer (~0.4 us) rather than ``a.ctypes`` (~1.3 us: it builds a helper object)."""
    if a.flags.writeable:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return a.ctypes.data


# OpenBLAS's cores with the small-matrix kernel, and its size limit (m * n * k)
_SMALL_KERNEL_CORES = ("skylakex", "cooperlake", "sapphirerapids")
_SMALL_MNK = 1000000


def sgemm(m, n, k):
    """``(cblas_sgemm, nc)`` for the sequence kernels' (m, k) @ (k, n) float32 products,
    or None when no BLAS function is found (then the per-step loop runs). The function
    is a ctypes one numba calls: MKL's when ``ember.backend.gemm`` runs products of that
    size on MKL (``ember[mkl]``), else NumPy's BLAS. ``nc`` is the width of the column
    blocks the product is computed in: on OpenBLAS cores with a small-matrix kernel, the
    widest power of two that keeps a block within that kernel's size (the product then
    differs from ``np.matmul``'s in the last bits), else ``n``."""
    from ember.backend import gemm
    if 2 * m * n * k >= gemm.THRESHOLD and gemm.mkl_available():
        if "mkl" not in _SGEMM:
            import ctypes
            f = gemm._lib[0].gemm[np.dtype(np.float32)]
            _SGEMM["mkl"] = _prototype(ctypes, ctypes.c_int)(
                ctypes.cast(f, ctypes.c_void_p).value)
        return _SGEMM["mkl"], n
    if "numpy" not in _SGEMM:
        _SGEMM["numpy"], _SGEMM["omatcopy"], _SGEMM["core"] = _numpy_blas()
    fn = _SGEMM["numpy"]
    if fn is None:
        return None
    return fn, _width(m, n, k)


def _width(m, n, k):
    nc = n
    if _SGEMM["core"] in _SMALL_KERNEL_CORES and m * n * k > _SMALL_MNK:
        widest = _SMALL_MNK // max(m * k, 1)
        if widest >= 16:
            nc = 1 << (widest.bit_length() - 1)
    return nc


def column_block(m, n, k):
    """The column block width for the NumPy loop's (m, k) @ (k, n) float32 products
    through ``np.matmul``, or None where they run whole: MKL takes them (``ember[mkl]``),
    or NumPy's BLAS has no small-matrix kernel."""
    from ember.backend import gemm
    if 2 * m * n * k >= gemm.THRESHOLD and gemm.mkl_available():
        return None
    if "numpy" not in _SGEMM:
        _SGEMM["numpy"], _SGEMM["omatcopy"], _SGEMM["core"] = _numpy_blas()
    nc = _width(m, n, k)
    return nc if nc < n else None


def small_kernel(m, n, k):
    """Whether NumPy's BLAS runs a float32 (m, k) @ (k, n) product in its kernel for small
    matrices (OpenBLAS's SkylakeX-family cores, at most ``_SMALL_MNK`` multiply-adds),
    which reads its operands in place: the general kernel first copies them into blocks,
    which costs more than the product at a recurrent step's sizes, and on a loaded
    machine its calls were found to slow down far more (cause not found)."""
    if "numpy" not in _SGEMM:
        _SGEMM["numpy"], _SGEMM["omatcopy"], _SGEMM["core"] = _numpy_blas()
    return _SGEMM["core"] in _SMALL_KERNEL_CORES and m * n * k <= _SMALL_MNK


def row_block(m, n, k):
    """The rows per block in which a float32 (m, k) @ (k, n) product runs in the kernel
    for small matrices (``small_kernel``), the widest power of two of at least 16 rows,
    or None: the product is small enough whole, or no such kernel, or blocks of rows
    would be too thin to gain."""
    if "numpy" not in _SGEMM:
        _SGEMM["numpy"], _SGEMM["omatcopy"], _SGEMM["core"] = _numpy_blas()
    if _SGEMM["core"] not in _SMALL_KERNEL_CORES or m * n * k <= _SMALL_MNK:
        return None
    widest = _SMALL_MNK // max(n * k, 1)
    return 1 << (widest.bit_length() - 1) if widest >= 16 else None


def core_name():
    """OpenBLAS's name of the kernels NumPy's products run on (lowercased), "" where not
    found."""
    if "numpy" not in _SGEMM:
        _SGEMM["numpy"], _SGEMM["omatcopy"], _SGEMM["core"] = _numpy_blas()
    return _SGEMM["core"]


def aligned(shape, dt, like=None):
    """An empty C-ordered array (a copy of ``like``) on a 64-byte boundary."""
    n = 1
    for s in shape:
        n *= s
    isz = np.dtype(dt).itemsize
    buf = np.empty(n * isz + 64, np.uint8)
    a = -_address(buf) % 64
    out = buf[a:a + n * isz].view(dt).reshape(shape)
    if like is not None:
        out[...] = like
    return out
