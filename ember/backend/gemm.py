"""Matrix products on Intel MKL when ``ember[mkl]`` is installed; ``np.matmul`` otherwise.

Every floating matrix product of ember's kernels (``matmul``/``mm``/``bmm``, the linear
layer, convolution's column products, the recurrent layers' gate products, attention)
goes through :func:`matmul`. NumPy's BLAS (OpenBLAS) takes 1.1-1.6x MKL's time on the
medium products of training steps; MKL (the BLAS PyTorch uses on CPU) pays a few
microseconds more per call through ctypes and is slower on small matrices, so only
products of at least :data:`THRESHOLD` floating operations (``2*m*n*k``, for each matrix
of a batch) go to it: below that ``np.matmul`` is faster (the crossover, measured by
``benchmarks/gemm.py --sweep``), or of :data:`NARROW_THRESHOLD` for products with fewer
than 16 output columns, where OpenBLAS's kernels are slow. :func:`addmm` (``linear``'s
``bias + x @ w.T``) writes the bias first and adds MKL's product to it, as PyTorch does.

What goes to MKL: float32 or float64 operands of one dtype (native byte order,
aligned), each matrix either row-major or the transpose of a row-major one with any
leading dimension (a transposed or row-sliced operand is passed with a transpose flag
and its leading dimension, never copied), batch dims that broadcast and collapse to one
stride per operand (``cblas_?gemm_batch_strided``), and a C-ordered ``out`` that does
not overlap the operands. Everything else -- other dtypes, 1-D operands, other strides,
CuPy arrays -- runs ``np.matmul`` exactly as without MKL.

Loading is lazy: ``import ember`` never loads MKL; the first product large enough does.
The environment variable ``EMBER_MKL`` chooses: ``0`` never uses MKL, ``1`` requires it
(a product raises an error naming the extra when libmkl_rt cannot be loaded), unset uses
it when the ``mkl`` package is installed. MKL's thread count follows
``ember.set_num_threads`` (:mod:`ember.backend.threads`). Its threading layer matches
the OpenMP runtime already in the process: GNU's (``libgomp``, which PyTorch loads)
when its functions come first in the global symbol scope, else Intel's; an MKL already
on Intel's layer beside GNU OpenMP is refused (its threaded products would be wrong).
An Intel OpenMP runtime that loading MKL brings into the process gets a block time of
1 ms while the machine has a core to spare, else 0 (its workers stay awake between the
products of a step, then sleep instead of spinning 200 ms on the core ember's own
threads need), unless ``KMP_BLOCKTIME``,
``OMP_WAIT_POLICY`` or ``KMP_LIBRARY`` is set; a runtime loaded before (by another
library) is left as it is. Before each ``os.fork`` MKL's buffer pools are emptied, so
that a child never starts with MKL's allocator locked (:mod:`ember.backend.blas_openmp`).
"""
import contextlib
import os
import sys
import threading

import numpy as np

from ember.backend import blas_openmp as _openmp
from ember.backend import thread_products as _products
from ember.backend import threads as _threads
from ember.backend.blas_kernels import MKL_ROW_GRAIN as _MKL_ROW_GRAIN

__all__ = ["matmul", "addmm", "sum_rows", "THRESHOLD", "NARROW_THRESHOLD", "mkl_available",
           "mkl_row_grain", "library_path", "numpy_only"]

# floating operations (2*m*n*k) of one product from which MKL is faster than NumPy's
# OpenBLAS on a Sapphire-Rapids core at one thread, the ctypes call (~5 us) included:
# square products cross over at 3-4 MFLOP, 16- to 32-row ones by 2 MFLOP, and batches of
# matrices under ~1 MFLOP each stay slower on MKL (benchmarks/gemm.py --sweep)
THRESHOLD = 3 << 20
# a product whose output has fewer than _NARROW columns leaves most of OpenBLAS's 16-wide
# kernel idle: (1024, 128) @ (128, 10) takes 1.3-1.6x MKL's time, and MKL is faster from
# about 1 MFLOP (benchmarks/gemm.py --sweep; a short inner dimension does not do this)
NARROW_THRESHOLD = 1 << 20
_NARROW = 16

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_INT_MAX = (1 << 31) - 1  # MKL's LP64 interface: 32-bit sizes and leading dimensions

# None: not tried yet; False: not used (disabled, absent or failed); else the _Mkl
_lib = [None]
_load_lock = threading.Lock()
_EXTRA = "pip install 'ember[mkl]'"


def _mode():
    v = os.environ.get("EMBER_MKL", "").strip().lower()
    if v in ("0", "off", "false", "no"):
        return "off"
    if v in ("1", "on", "true", "yes"):
        return "on"
    return "auto"


def library_path():
    """The path of the ``mkl`` package's ``libmkl_rt``, or None when it is not installed."""
    try:
        from importlib import metadata
        dist = metadata.distribution("mkl")
    except Exception:  # PackageNotFoundError, or broken metadata: not installed for us
        return None
    for f in dist.files or ():
        name = f.name
        if name.startswith("libmkl_rt.so") or name.startswith("libmkl_rt.") and \
                name.endswith(".dylib") or name.startswith("mkl_rt") and name.endswith(".dll"):
            path = os.path.abspath(str(dist.locate_file(f)))
            if os.path.exists(path):
                return path
    return None


class _Mkl:
    """The ctypes handle of libmkl_rt: the four product routines and thread control."""

    def __init__(self, path):
        import ctypes
        runtime_before = _openmp.intel_openmp(ctypes) is not None  # (someone else's)
        lib = ctypes.CDLL(path)
        i, p = ctypes.c_int, ctypes.c_void_p
        # the 32-bit-integer interface whatever MKL_INTERFACE_LAYER says (0 = LP64)
        if lib.MKL_Set_Interface_Layer(0) != 0:
            raise OSError("libmkl_rt refused its LP64 interface")
        gnu_omp = _global_openmp_is_gnu()
        if "MKL_THREADING_LAYER" not in os.environ:
            lib.MKL_Set_Threading_Layer(_threading_layer(path, gnu_omp))
        self.gemm, self.batch = {}, {}
        for dt, ch, real in ((np.dtype(np.float32), "s", ctypes.c_float),
                             (np.dtype(np.float64), "d", ctypes.c_double)):
            f = getattr(lib, f"cblas_{ch}gemm")
            f.argtypes = [i] * 6 + [real, p, i, p, i, real, p, i]
            f.restype = None
            g = getattr(lib, f"cblas_{ch}gemm_batch_strided")
            g.argtypes = [i] * 6 + [real, p, i, i, p, i, i, real, p, i, i, i]
            g.restype = None
            self.gemm[dt], self.batch[dt] = f, g
        lib.MKL_Set_Num_Threads.argtypes = [i]
        lib.MKL_Get_Max_Threads.restype = i
        lib.MKL_Get_Max_Threads()  # loads the threading layer, so that it can be read
        # -1 changes nothing and returns the layer in effect: the one chosen above, the
        # environment's, or one set by whoever loaded libmkl_rt before ember
        self.layer = lib.MKL_Set_Threading_Layer(-1)
        if self.layer == _LAYER_INTEL and gnu_omp:
            # Intel's layer calls omp_get_num_threads & co. by name: with GNU OpenMP first
            # in the process's symbol scope those are libgomp's, which know nothing of
            # Intel OpenMP's threads; every thread computes as if alone (wrong products
            # at more than one thread) and MKL's own thread count is libgomp's to read
            raise _LayerConflict(
                f"libmkl_rt ({path}) runs Intel OpenMP's threading layer (chosen by "
                "MKL_THREADING_LAYER or before ember loaded it) in a process whose "
                "OpenMP functions are GNU's (libgomp, as PyTorch loads): its products "
                "would be wrong at more than one thread. "
                "Set MKL_THREADING_LAYER=GNU before MKL is loaded, or EMBER_MKL=0")
        self.lib = lib
        self.path = path
        self.ptr = _pointer_reader(ctypes)
        # Intel OpenMP's block time set here (None: left as it was; blas_openmp)
        self.blocktime = None
        if self.layer == _LAYER_INTEL and (not runtime_before or _openmp.set_by_ember()):
            # (set_by_ember: the runtime is the one ember loaded and set before a _reset)
            self.blocktime = _openmp.quiet_workers(ctypes)

    @property
    def num_threads(self):
        return self.lib.MKL_Get_Max_Threads()

    @property
    def branch(self):
        """The code branch MKL runs on this CPU (``mkl_cbwr_get_auto_branch``)."""
        return self.lib.MKL_CBWR_Get_Auto_Branch()

    def set_num_threads(self, n):
        self.lib.MKL_Set_Num_Threads(int(n))


class _LayerConflict(RuntimeError):
    """MKL's threading layer cannot run right beside the process's OpenMP runtime."""


# MKL's threading layers (mkl_service.h's MKL_THREADING_*)
_LAYER_INTEL, _LAYER_SEQUENTIAL, _LAYER_GNU = 0, 1, 3


def _threading_layer(path, gnu_omp):
    """The threading layer for libmkl_rt at ``path``: Intel OpenMP (``libiomp5``, shipped
    with the wheel), unless GNU OpenMP's functions come first in the process's symbol
    scope (PyTorch's ``libgomp``, imported before MKL loads); then MKL's GNU layer, which
    runs on that same ``libgomp``, or, without that layer beside libmkl_rt, the
    sequential one (one thread, but right)."""
    if not gnu_omp:
        return _LAYER_INTEL
    folder = os.path.dirname(path)
    try:
        names = os.listdir(folder)
    except OSError:
        names = ()
    if any(n.startswith("libmkl_gnu_thread.") for n in names):
        return _LAYER_GNU
    import warnings
    warnings.warn(f"GNU OpenMP (libgomp) is loaded and MKL's GNU threading layer is not "
                  f"in {folder}: MKL's products run at one thread (its sequential layer)",
                  RuntimeWarning, stacklevel=7)
    return _LAYER_SEQUENTIAL


def _global_openmp_is_gnu():
    """True when the OpenMP functions that a library loaded now would call by name
    (``omp_get_num_threads`` in the process's global symbol scope) are GNU OpenMP's:
    a runtime without Intel's ``__kmpc_*`` entry points beside them. False when there
    are none (they then come from the runtime the library brings) or they are Intel's
    or LLVM's (``libiomp5``, ``libomp``), and where this cannot be looked up."""
    import ctypes

    class _DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    try:
        scope = ctypes.CDLL(None)  # dlopen(NULL): the global scope (not on Windows)
        fn = scope.omp_get_num_threads
    except (OSError, TypeError, AttributeError):
        return False
    info = _DlInfo()
    try:
        found = scope.dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info))
    except AttributeError:
        found = 0
    if not found or not info.dli_fname:
        return False
    try:
        runtime = ctypes.CDLL(info.dli_fname.decode())  # loaded already: a new handle
    except OSError:
        return False
    return not hasattr(runtime, "__kmpc_fork_call")


def _pointer_reader(ctypes):
    """A fast ``x.ctypes.data``: ``x.ctypes`` builds an object per call (about 3 us, as
    long as a small product); in CPython an ndarray's data pointer is the field right
    after the object header, read here directly once a check on a few arrays agrees."""
    slow = lambda x: x.ctypes.data
    if sys.implementation.name != "cpython":
        return slow
    at = ctypes.c_void_p.from_address
    off = object.__basicsize__
    fast = lambda x: at(id(x) + off).value or 0
    probe = np.arange(24.0).reshape(4, 6)
    for x in (probe, probe[1:, 2:], probe.T, probe[::2, 1::3], np.empty(0)):
        if fast(x) != x.ctypes.data:
            return slow
    return fast


def _load():
    """Load MKL on the first product that could use it; False when it is not used."""
    with _load_lock:  # the first products may come from several of ember's threads
        if _lib[0] is None:
            _lib[0] = _find()
        return _lib[0]


def _find():
    """The loaded ``_Mkl``, or False (EMBER_MKL=0, the package absent or unloadable)."""
    mode = _mode()
    if mode == "off":
        return False
    path = library_path()
    if path is None:
        if mode == "on":
            raise RuntimeError("EMBER_MKL=1 asks for MKL's matrix products, but the mkl "
                               f"package is not installed: {_EXTRA}")
        return False
    try:
        mkl = _Mkl(path)
    except _LayerConflict as err:
        if mode == "on":
            raise RuntimeError(str(err)) from None
        import warnings
        warnings.warn(f"{err}. Using NumPy's matmul.", RuntimeWarning, stacklevel=5)
        return False
    except (OSError, AttributeError) as err:
        msg = (f"MKL's matrix products are unavailable: libmkl_rt ({path}) could not be "
               f"loaded ({err}); reinstall the extra ({_EXTRA}) or set EMBER_MKL=0")
        if mode == "on":
            raise RuntimeError(msg) from err
        import warnings
        warnings.warn(msg + ". Using NumPy's matmul.", RuntimeWarning, stacklevel=5)
        return False
    mkl.set_num_threads(_threads.get_num_threads())
    _threads.add_blas(mkl)
    _openmp.adopt(mkl)
    _openmp.guard_fork(mkl.lib)  # (a fork must not copy MKL's allocator mid-update)
    return mkl


def mkl_row_grain(char, m, k, n):
    """The rows at which row blocks of a plain (m, k) @ (k, n) product on MKL (at one MKL
    thread each) keep the whole product's bits, for the dtype ``char``; 0 where not
    measured for the code branch MKL runs here or that shape (``blas_kernels.
    MKL_ROW_GRAIN``), or MKL is not loaded."""
    lib = _lib[0]
    if not lib:
        return 0
    grain = getattr(lib, "_row_grain", None)
    if grain is None:
        try:
            branch = lib.branch
        except (AttributeError, OSError):
            branch = None
        grain = lib._row_grain = _MKL_ROW_GRAIN.get(branch, {})
    if m > grain.get("rows", 0) or k > grain.get("inner", 0) or n > grain.get("cols", 0):
        return 0
    return grain.get(char, 0)


def mkl_available():
    """True when products of at least :data:`THRESHOLD` operations run on MKL (loads it)."""
    lib = _lib[0]
    if lib is None:
        lib = _load()
    return lib is not False


@contextlib.contextmanager
def numpy_only():
    """Every product runs ``np.matmul`` inside the block, as without the extra (to
    compare the two in one process; the switch is process-wide); MKL stays loaded."""
    saved = _lib[0]
    _lib[0] = False
    try:
        yield
    finally:
        _lib[0] = saved


def _reset():
    """Forget the loaded state so that the next product looks again (for tests)."""
    lib = _lib[0]
    if lib:
        _threads.remove_blas(lib)
    _openmp.adopt(None)
    _lib[0] = None


def _layout(strides, rows, cols, isz):
    """(transpose flag, leading dimension) of a rows x cols matrix with these byte
    strides as BLAS takes it in row-major order, or None when it cannot."""
    s0, s1 = strides
    if cols == 1:
        s1 = isz
    if rows == 1:  # any row stride will do: the one each case below accepts
        s0 = max(cols, 1) * isz if s1 == isz else isz
    if s1 == isz and s0 % isz == 0 and s0 >= max(cols, 1) * isz:
        ld = s0 // isz
        return (_NO_TRANS, ld) if ld <= _INT_MAX else None
    if s0 == isz and s1 % isz == 0 and s1 >= max(rows, 1) * isz:
        ld = s1 // isz
        return (_TRANS, ld) if ld <= _INT_MAX else None
    return None


def _batch_stride(shape, strides, isz):
    """The one element stride that walks all of a batch's (broadcast) dims in C order, or
    None when they do not collapse to one."""
    stride = None
    for size, st in zip(reversed(shape), reversed(strides)):
        if stride is None:
            stride, span = st, size
        elif st != stride * span:
            return None
        else:
            span *= size
    if stride is None:
        return 0
    if stride < 0 or stride % isz:
        return None
    return stride // isz


def matmul(a, b, out=None):
    """``a @ b`` (``np.matmul``, into ``out`` when given), on MKL for NumPy float32/float64
    products of at least :data:`THRESHOLD` operations when ``ember[mkl]`` is installed.

    Anything else -- a Tensor, a CuPy array, another dtype -- is ``a @ b`` as before.
    float16 and bfloat16 products are summed in float32 and rounded once, as PyTorch's
    CPU kernels (NumPy's float16 product rounds every partial sum)."""
    if type(a) is np.ndarray and a.itemsize == 2 and _reduced_float(a.dtype):
        return _opmath_matmul(a, b, out)
    if _lib[0] is not False and _maybe_large(a.shape, b.shape):
        r = _mkl_matmul(a, b, out)
        if r is not None:
            return r
    if type(a) is np.ndarray and type(b) is np.ndarray and _threads.get_num_threads() > 1:
        # on ember's threads, BLAS's or one, as measured fastest at this product's site
        r = _products.matmul(a, b, out, whole=lambda: _numpy_matmul(a, b, out))
        if r is not None:
            if r is _products.WHOLE:  # the one-thread route, at one BLAS thread
                saved = _threads.blas_to_one()  # (``single_blas``, called per product)
                try:
                    return _numpy_matmul(a, b, out)
                finally:
                    _threads.blas_back(saved)
            return r
    return _numpy_matmul(a, b, out)


def _reduced_float(dt):
    """Whether the NumPy dtype ``dt`` is float16 or bfloat16 (ml_dtypes')."""
    return dt.itemsize == 2 and (dt.char == "e" or dt.name == "bfloat16")


def _opmath_matmul(a, b, out, bias=None):
    """``a @ b`` (plus ``bias``) of float16/bfloat16 arrays computed in float32 and
    rounded once to ``a``'s dtype, into ``out`` when given."""
    r = matmul(a.astype(np.float32), b.astype(np.float32))
    if bias is not None:
        r += bias.astype(np.float32)
    if out is None:
        return r.astype(a.dtype)
    np.copyto(out, r, casting="unsafe")
    return out


def _maybe_large(sa, sb):
    """False for two matrices too small for MKL: the size test ``_mkl_matmul`` would end
    with, made first (its type, dtype and layout checks cost more than a small product's
    saving; until MKL is loaded or refused, EMBER_MKL=0 included, every product asks)."""
    if len(sa) != 2 or len(sb) != 2:
        return True
    n = sb[1]
    limit = THRESHOLD
    if n < _NARROW and NARROW_THRESHOLD < limit:
        limit = NARROW_THRESHOLD
    return 2 * sa[0] * sa[1] * n >= limit


def _numpy_matmul(a, b, out):
    if out is None:
        if type(b) is np.ndarray and type(a) is np.ndarray and \
                len(b.shape) == 2 == len(a.shape) and \
                _TRANS_MIN <= a.shape[0] <= _TRANS_ROWS and b.flags.f_contiguous:
            r = _by_transpose(a, b)
            if r is not None:
                return r
        elif type(b) is np.ndarray and type(a) is np.ndarray and len(b.shape) == 2 == \
                len(a.shape) and _NARROW_MIN <= b.shape[1] < _NARROW and \
                a.shape[0] % _NARROW_ROWS == 0 and a.shape[0] and b.flags.f_contiguous:
            r = _narrow_by_rows(a, b)
            if r is not None:
                return r
        return a @ b  # np.matmul for arrays; Tensors and CuPy arrays take their own
    if type(a) is np.ndarray:
        return np.matmul(a, b, out=out)
    from ember.backend import array_module  # CuPy's, or the meta placeholders' matmul
    return array_module(a).matmul(a, b, out=out)


# OpenBLAS runs ``x @ w.T`` (a few rows times a transposed row-major weight) about
# 1.1-1.5x slower than ``(w @ x.T).T`` copied back to C order, with identical bits:
# 32x128x128 0.94 of the time, 32x256x256 0.72, 16x128x128 0.65, 32x1024x256 0.64,
# while 32x64x128 gains nothing and 64 or more rows lose (64x128x128 1.46, 128x128x128
# 1.25) (benchmarks/gemm.py --transposed). The bits agree for float32 with k <= 256 and
# n <= 512 (every m of 2-32, several draws); past that they differ in places (k >= 512;
# 8 rows with n >= 777), and float64 differs already at k = 128, so only those float32
# products take this way (tests/test_mkl_gemm.py checks the bits)
_TRANS_ROWS = 32
_TRANS_MIN = 2  # one row is a matrix-vector product either way
_TRANS_K = _TRANS_N = 128
_TRANS_K_MAX, _TRANS_N_MAX = 256, 512


def _by_transpose(a, b):
    """``a @ b`` for a C-ordered ``a`` of a few rows and a ``b`` that is the transpose
    of a row-major matrix, computed as ``(b.T @ a.T).T`` and copied to C order (the same
    bits, see above), or None where that is not faster."""
    k, n = b.shape
    if not (_TRANS_K <= k <= _TRANS_K_MAX and _TRANS_N <= n <= _TRANS_N_MAX) or \
            a.shape[1] != k or not a.flags.c_contiguous or b.flags.c_contiguous or \
            a.dtype != b.dtype or a.dtype.char != "f" or not a.dtype.isnative or \
            not _threads.layouts_keep_bits():  # (other kernels: other bits, threads.py)
        return None
    return np.matmul(b.T, a.T).T.copy()


# A classifier head's ``x @ w.T`` (10-15 output columns) runs 1.15-1.4x faster on
# OpenBLAS (2x at 15 columns) with the small weight copied to row-major order first (a
# microsecond) and the rows taken 128 at a time: 128x128x10 12.3 -> 10.5 us, 1024x128x10
# 80 -> 64, 1024x256x15 220 -> 111 (benchmarks/gemm.py --narrow). The bits agree with
# the transposed-flag product for float32, 10-15 columns, k of 128-256 and a multiple of
# 128 rows (every case of several draws over 128-2048 rows); with 5-9 columns, or rows in
# other numbers (where OpenBLAS picks its small-matrix kernels for the whole product),
# they differ in places, so only those products take this way (tests/test_mkl_gemm.py
# checks the bits)
_NARROW_ROWS = 128
_NARROW_MIN = 10


def _narrow_by_rows(a, b):
    """``a @ b`` for a C-ordered float32 ``a`` of a multiple of 128 rows and a narrow
    ``b`` that is the transpose of a row-major matrix: ``b`` copied to row-major order,
    then one product per block of 128 rows (the same bits, see above), or None where
    that is not faster."""
    k = b.shape[0]
    if not _TRANS_K <= k <= _TRANS_K_MAX or a.shape[1] != k or not a.flags.c_contiguous \
            or a.dtype != b.dtype or a.dtype.char != "f" or not a.dtype.isnative or \
            not _threads.layouts_keep_bits():  # (other kernels: other bits, threads.py)
        return None
    bc = b.copy()  # C order (the array's own copy() order is C)
    m = a.shape[0]
    out = np.empty((m, b.shape[1]), a.dtype)
    for i in range(0, m, _NARROW_ROWS):
        np.matmul(a[i:i + _NARROW_ROWS], bc, out=out[i:i + _NARROW_ROWS])
    return out


def addmm(bias, a, b, out=None):
    """``bias + a @ b`` for matrices ``a`` (m, k) and ``b`` (k, n) and a ``bias`` that
    broadcasts to (m, n) (``linear``'s ``x @ w.T + b``), into ``out`` when given.

    On MKL the bias is written into the result first and the product added to it
    (``beta = 1``), as PyTorch's ``addmm`` does: one pass less, and the same values as
    PyTorch's ``linear`` where the product sums over several of MKL's blocks of ``k``
    (there, rounding the product before adding the bias gives other last bits).
    Elsewhere it is :func:`matmul` followed by the bias added in place, as before (in
    each block of a product split over ember's threads, when it is)."""
    if out is not None and type(out) is np.ndarray and np.may_share_memory(out, bias):
        bias = bias.copy()  # the product must not overwrite the bias before it is added
    if type(a) is np.ndarray and _reduced_float(a.dtype):
        return _opmath_matmul(a, b, out, bias)
    if _lib[0] is not False and type(bias) is np.ndarray and type(a) is np.ndarray and \
            bias.dtype == a.dtype and a.ndim == 2 and bias.ndim <= 2 and \
            _maybe_large(a.shape, b.shape):
        r = _mkl_matmul(a, b, out, bias)
        if r is not None:
            return r
        r = _numpy_matmul(a, b, out)
    elif _threads.MANY and type(bias) is np.ndarray and type(a) is np.ndarray and \
            type(b) is np.ndarray and a.ndim == 2 and b.ndim == 2 and \
            bias.shape == b.shape[1:] and bias.dtype == a.dtype and \
            not (_lib[0] is not False and _maybe_large(a.shape, b.shape)):
        # at more than one thread, on NumPy: a split product adds the bias in each of its
        # blocks (the same sums, on the core that wrote them); else as below
        r = _products.matmul(a, b, out, bias, _add_rows, lambda: _numpy_matmul(a, b, out))
        if r is None:
            r = _numpy_matmul(a, b, out)
        elif r is _products.WHOLE:  # the one-thread route, at one BLAS thread
            saved = _threads.blas_to_one()
            try:
                r = _numpy_matmul(a, b, out)
            finally:
                _threads.blas_back(saved)
        else:
            return r
    else:
        r = matmul(a, b, out)
    _add_rows(r, bias)
    return r


def sum_rows(g, ones=None):
    """``g.sum(0)`` of a matrix ``g`` (``linear``'s bias gradient). For a NumPy
    float32/float64 matrix of several rows it is the matrix-vector product ``ones @ g``
    on BLAS: NumPy's sum over the first axis adds the rows one after another, 2-4x the
    time at 1024 rows of 128-384 columns (39 -> 10, 83 -> 41 us at one thread) and with
    a rounding error that grows with the number of rows (1024 x 128 normal float32:
    1.1e-6 of the largest sum against BLAS's 3.9e-7, PyTorch's 1.3e-7; 100000 x 16:
    7.5e-6 against 3.3e-6). The same bits at any thread count: past the rows for which
    BLAS's threads give its one-thread sums (``threads.same_bits_k``), one BLAS thread.
    ``ones``: a vector of ones of ``g``'s rows and dtype kept by the caller, or None."""
    if type(g) is np.ndarray and g.ndim == 2 and g.shape[0] > 1 and \
            g.dtype.char in "fd" and g.dtype.isnative:
        if ones is None:
            ones = np.ones(g.shape[0], g.dtype)
        if _threads.MANY and g.shape[0] > _threads.same_bits_k(g.dtype.char):
            saved = _threads.blas_to_one()  # (``single_blas``, called per product)
            try:
                return np.matmul(ones, g)
            finally:
                _threads.blas_back(saved)
        return np.matmul(ones, g)
    if type(g) is np.ndarray and g.itemsize == 2 and _reduced_float(g.dtype):
        return g.sum(0, dtype=np.float32).astype(g.dtype)  # (float16/bfloat16: one rounding)
    return g.sum(0)


def _add_rows(r, bias):
    """``r += bias`` for a bias row broadcast down ``r``'s rows. NumPy runs its SIMD loop
    once per row of a broadcast add (1024 rows of 256: 1.2-1.4x the time of a tiled
    add); a large C-ordered ``r`` is added a few hundred rows of the bias at a time, the
    same sums."""
    if type(r) is np.ndarray and type(bias) is np.ndarray and r.ndim == 2 and \
            bias.shape == r.shape[1:] and bias.dtype == r.dtype and r.size >= ADD_ROWS_TILED and \
            r.flags.c_contiguous:
        m, n = r.shape
        rows = _TILE // n  # (long rows gain nothing: NumPy's per-row cost is small there)
        q = m // rows if rows >= 4 else 0
        if q > 1:
            tiled = r[:q * rows].reshape(q, rows * n)  # a view: r is C-ordered
            tiled += np.tile(bias, rows)
            if q * rows < m:
                r[q * rows:] += bias
            return
    r += bias


ADD_ROWS_TILED = 1 << 17  # results from this size have the bias added in tiles
_TILE = 16384  # elements of the tiled bias: 64 KiB of float32, cache-resident


def _mkl_matmul(a, b, out, bias=None):
    """The product on MKL, or None when it should run on NumPy (then nothing is written).
    With ``bias`` (an array of the operands' dtype, for matrices ``a`` and ``b``), the
    result is ``bias`` plus the product, or None."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return None
    dt = a.dtype
    if dt != b.dtype or dt.char not in "fd" or not dt.isnative:
        return None
    sa, sb = a.shape, b.shape
    if len(sa) < 2 or len(sb) < 2:
        return None
    m, k = sa[-2:]
    k2, n = sb[-2:]
    flops = 2 * m * n * k
    if not flops:  # an empty product (or k = 0: zeros) is NumPy's at no cost
        return None
    limit = THRESHOLD if n >= _NARROW else min(THRESHOLD, NARROW_THRESHOLD)
    if flops < limit and len(sa) == 2 and len(sb) == 2 or k != k2:
        return None
    bsa, bsb = sa[:-2], sb[:-2]
    if bsa == bsb:
        batch = bsa
    else:
        try:
            batch = np.broadcast_shapes(bsa, bsb)
        except ValueError:
            return None
    nb = 1
    for s in batch:
        nb *= s
    if flops * nb < limit or max(m, n, k, nb) > _INT_MAX:
        return None
    if not (a.flags.aligned and b.flags.aligned):
        return None
    lib = _lib[0] or _load()
    if lib is False:
        return None
    if lib.blocktime is not None:  # ember's block time: the one for the load now
        _openmp.follow_load()
    isz = dt.itemsize
    if out is not None:
        if type(out) is not np.ndarray or out.dtype != dt or \
                out.shape != batch + (m, n) or not out.flags.aligned or \
                not out.flags.writeable or np.may_share_memory(out, a) or \
                np.may_share_memory(out, b):
            return None
    rows = la = None
    if nb == 1:
        rows, la = m, _layout(a.strides[-2:], m, k, isz)
    elif not bsb:
        # a stack of ``a`` times one matrix ``b`` is one taller product when ``a``'s
        # rows walk with one stride (else the batched call below, ``b``'s stride 0)
        la = _stacked_rows(a, k, isz)
        rows = None if la is None else m * nb
    if rows is not None:
        lb = _layout(b.strides[-2:], k, n, isz)
        if la is None or lb is None or rows > _INT_MAX:
            return None
        if out is None:
            c, ldc = np.empty(batch + (m, n), dt), n
        elif nb == 1:
            c, ldc = out, _layout(out.strides[-2:], m, n, isz)
            if ldc is None or ldc[0] != _NO_TRANS:
                return None
            ldc = ldc[1]
        elif out.flags.c_contiguous:
            c, ldc = out, n
        else:
            return None
        beta = 0.0
        if bias is not None:
            c[...] = bias  # the product is added to it (beta = 1), as PyTorch's addmm
            beta = 1.0
        ptr = lib.ptr
        lib.gemm[dt](_ROW_MAJOR, la[0], lb[0], rows, n, k, 1.0, ptr(a), la[1],
                     ptr(b), lb[1], beta, ptr(c), ldc)
        return c
    # a batch: each operand's batch dims broadcast to ``batch``; the trailing ones that
    # every operand walks with one stride are one strided-batch call, any others a loop.
    # MKL's kernels are slower than OpenBLAS's on small matrices however many there are:
    # the threshold holds for each product of the batch
    if flops < limit or bias is not None:
        return None
    la = _layout(a.strides[-2:], m, k, isz)
    lb = _layout(b.strides[-2:], k, n, isz)
    if la is None or lb is None or m * n > _INT_MAX:
        return None
    shape, ta = _broadcast_batch(a, batch)
    tb = _broadcast_batch(b, batch)[1]
    j = len(shape)
    while j > 0 and _batch_stride(shape[j - 1:], ta[j - 1:], isz) is not None and \
            _batch_stride(shape[j - 1:], tb[j - 1:], isz) is not None:
        j -= 1
    if j == len(shape):
        return None
    inner = 1
    for size in shape[j:]:
        inner *= size
    stra = _batch_stride(shape[j:], ta[j:], isz)
    strb = _batch_stride(shape[j:], tb[j:], isz)
    if max(stra, strb) > _INT_MAX:
        return None
    if out is None:
        c = np.empty(batch + (m, n), dt)
    elif out.flags.c_contiguous:
        c = out
    else:
        return None
    ptr, call = lib.ptr, lib.batch[dt]
    pa, pb, pc = ptr(a), ptr(b), ptr(c)
    if not j:
        call(_ROW_MAJOR, la[0], lb[0], m, n, k, 1.0, pa, la[1], stra,
             pb, lb[1], strb, 0.0, pc, n, m * n, inner)
        return c
    step_c = inner * m * n * isz
    for t, idx in enumerate(np.ndindex(*shape[:j])):
        oa = ob = 0
        for i, t_a, t_b in zip(idx, ta, tb):
            oa += i * t_a
            ob += i * t_b
        call(_ROW_MAJOR, la[0], lb[0], m, n, k, 1.0, pa + oa, la[1], stra,
             pb + ob, lb[1], strb, 0.0, pc + t * step_c, n, m * n, inner)
    return c


def _stacked_rows(a, k, isz):
    """(no transpose, leading dimension) when ``a``'s batch and row dims walk as one row
    dim of unit-stride rows, so that ``a @ b`` for a matrix ``b`` is one (batch * m, k)
    product; else None."""
    if k != 1 and a.strides[-1] != isz:
        return None
    sh, st = a.shape[:-1], a.strides[:-1]
    row = _batch_stride([s for s in sh if s != 1],
                        [t for s, t in zip(sh, st) if s != 1], isz)
    if row is None or row < max(k, 1) or row > _INT_MAX:
        return None
    return _NO_TRANS, row


def _broadcast_batch(x, batch):
    """``x``'s batch (shape, byte strides) broadcast to ``batch``, size-1 dims dropped."""
    nd = len(batch)
    xs, xt = x.shape[:-2], x.strides[:-2]
    pad = nd - len(xs)
    shape, strides = [], []
    for i, size in enumerate(batch):
        if size == 1:
            continue
        j = i - pad
        shape.append(size)
        strides.append(0 if j < 0 or xs[j] == 1 else xt[j])
    return shape, strides
