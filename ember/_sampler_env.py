"""The scalar math of :mod:`ember._sampler_loops` when its loops run as Python: C's
semantics (IEEE results where Python raises on a zero divisor, an overflow or a domain
error), float32 rounding, and glibc's ``lgamma``, ``log1pf``, ``logf``, ``powf`` and
``tanf`` through ctypes (Python's ``math.lgamma`` is its own, and ``math`` has no float
functions). Also loads the numba-compiled copy of the loops.
"""
import ctypes
import ctypes.util
import importlib.util
import math
import struct
import sys

__all__ = ["load_compiled"]

COMPILING = False  # True while load_compiled executes the loops' file for numba

def _libm():
    """The C math library: the process's own symbols (Python links it) where they
    hold it, which costs nothing at import, else the library found by name."""
    own = ctypes.CDLL(None)
    if hasattr(own, "lgamma") and hasattr(own, "log1pf"):
        return own
    return ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


_LIBM = _libm()


def _cfun(name, ctype, nargs=1):
    f = getattr(_LIBM, name)
    f.restype = ctype
    f.argtypes = [ctype] * nargs
    return f


lgamma = _cfun("lgamma", ctypes.c_double)
log1pf = _cfun("log1pf", ctypes.c_float)
powf = _cfun("powf", ctypes.c_float, 2)
tanf = _cfun("tanf", ctypes.c_float)
_logf = _cfun("logf", ctypes.c_float)
_pack_f = struct.Struct("f")
_INT64_MIN = -(2 ** 63)


def jit(fn):
    """The identity: the loops run as Python."""
    return fn


def f32(x):
    """``x`` rounded to float32 (overflow to inf), as a Python float."""
    try:
        return _pack_f.unpack(_pack_f.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def logf(x):
    return _logf(x) if x == x else x


def log(x):
    return math.log(x) if x > 0.0 else (-math.inf if x == 0.0 else math.nan)


def sqrt(x):
    return math.sqrt(x) if x >= 0.0 else math.nan


def pow_(x, y):
    try:
        return math.pow(x, y)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


def floor(x):
    return float(math.floor(x)) if math.isfinite(x) else x


def ceil(x):
    return float(math.ceil(x)) if math.isfinite(x) else x


def exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def div(a, b):
    """IEEE division (C's ``a / b``), where Python would raise on a zero divisor."""
    if b != 0.0:
        return a / b
    if a != a or a == 0.0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def int64(x):
    """C's ``(int64_t)x`` on x86-64: truncation, and INT64_MIN out of range or NaN."""
    if x != x or not (-9.223372036854775808e18 <= x < 9.223372036854775808e18):
        return _INT64_MIN
    return int(x)


def load_compiled():
    """The loops' module compiled by numba (a second copy of its file, executed with
    ``COMPILING`` set), or None where numba is not installed."""
    global COMPILING
    try:
        import numba  # noqa: F401
    except ImportError:
        return None
    name = "ember._sampler_loops_compiled"
    if name in sys.modules:
        return sys.modules[name]
    from ember import _sampler_loops
    spec = importlib.util.spec_from_file_location(name, _sampler_loops.__file__)
    module = importlib.util.module_from_spec(spec)
    COMPILING = True
    try:
        spec.loader.exec_module(module)
    finally:
        COMPILING = False
    sys.modules[name] = module
    return module
