"""Helpers shared by the op families: binding to Tensor, dtype promotion, dims."""
import functools
import weakref

import numpy as np

from ember._tensor import Tensor, _make
from ember.backend import dtypes as _dt
from ember.backend import threads as _threads
from ember.ops._int_args import (  # noqa: F401 - the int readers, imported from here too
    _zero_d_int,
    follows_int_reads,
    int_arg,
    int_args,
    int_or_traced,
    traced_ints,
    wrap_dim,
    wrap_dims,
)
from ember.ops._overlap import (  # noqa: F401 - out='s checks, imported from here too
    APART_OUT,
    _refuse_internal_overlap,
    refuse_out_overlap,
    refuse_partial_overlap,
)

_ndarray = np.ndarray
_FROM_NP = _dt.FROM_NP


def _narrow(a, r):
    """``a`` as dtype ``r`` (a 0-d float64 operand meeting a float16 tensor rounds through
    float32, as PyTorch's conversion does)."""
    return _dt.through_float32(a, r).astype(r)


def tensor_method(*names):
    """Decorator: bind the function as ``Tensor.<name>`` for each name (default: its own)."""
    def deco(fn):
        for n in names or (fn.__name__,):
            setattr(Tensor, n, fn)
        return fn
    return deco


def default_float_np():
    return _dt._default[0].np


def is_scalar(x):
    return isinstance(x, (int, float, bool, np.generic))


def _kind_rank(k):
    return 2 if k == "f" else 0 if k == "b" else 1


def promote_arrays(a, b):
    """Cast two operands (arrays or Python numbers) to PyTorch's result dtype.

    Fast paths first: equal dtypes, or a Python number that does not lift the
    array's category. The general case goes through ``dtypes.result_type_of``.
    """
    ta = type(a)
    tb = type(b)
    if ta is _ndarray and tb is _ndarray:
        da, db = a.dtype, b.dtype
        if da == db:
            return a, b
        r = _promote_np(da, a.ndim == 0, db, b.ndim == 0)
        return (a if da == r else _narrow(a, r)), (b if db == r else _narrow(b, r))
    if tb is float or tb is int or tb is bool or tb is complex:
        if ta is _ndarray:
            return _scalar_pair(a, b)
        return _promote_general(a, b)
    if ta is float or ta is int or ta is bool or ta is complex:
        bb, aa = _scalar_pair(b, a)
        return aa, bb
    return _promote_general(a, b)


# per floating dtype, Python numbers already made 0-d arrays (``number_operand``), and the
# largest magnitude that converts without overflow
_NUMBER_ARRAYS = {np.dtype(np.float32): ({}, float(np.finfo(np.float32).max)),
                  np.dtype(np.float64): ({}, float(np.finfo(np.float64).max))}


def number_operand(arr, s):
    """``s`` (a Python number beside the NumPy array ``arr``) as a NumPy ufunc takes it
    fastest: a read-only 0-d array of ``arr``'s dtype (float32 or float64), kept for reuse.

    NumPy converts a Python number to the array's floating dtype anyway (NEP 50), with the
    same rounding; from a ready 0-d array it skips that step, half the cost of ``x / 3.0``
    on a small tensor. Anything else (other dtypes, zeros, whose sign a cache keyed by
    value would lose, NaN, integers past 2**24, values that would overflow) is returned
    as it is."""
    entry = _NUMBER_ARRAYS.get(arr.dtype) if type(arr) is _ndarray else None
    if entry is None:
        return s
    cache, limit = entry
    z = cache.get(s)
    if z is None:
        ts = type(s)
        if not (ts is float and 0 < abs(s) <= limit or ts is int and 0 < abs(s) <= 1 << 24):
            return s
        if len(cache) >= 256:
            cache.clear()  # a few constants recur in a program; a sweep of values does not
        z = np.array(s, arr.dtype)
        z.flags.writeable = False
        cache[s] = z
    return z


# largest finite value of the float types narrower than float32, by name
_REDUCED_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38}
_REDUCED = {}


def reduced_float(dt):
    """Whether the dtype ``dt`` is float16 or bfloat16: the types PyTorch's CPU kernels
    compute in float32 (their "opmath" type) when they meet a Python number."""
    r = _REDUCED.get(dt)
    if r is None:
        r = _REDUCED[dt] = getattr(dt, "name", None) in _REDUCED_MAX
    return r


def opmath(forward):
    """``forward`` (an op's, on arrays) run in float32 when its first array operand is
    float16/bfloat16: every operand of that dtype converted to float32, each floating
    result rounded once back. PyTorch's CPU reductions and normalizations accumulate
    reduced precision in float32 ("opmath"): in float16 a layer norm of values near 300
    overflows its variance to NaN, a standard deviation to inf."""
    @functools.wraps(forward)
    def run(self, *args, **kwargs):
        low = next((a.dtype for a in args if type(a) is _ndarray), None)
        if low is None or not reduced_float(low):
            return forward(self, *args, **kwargs)
        args = [a.astype(np.float32) if type(a) is _ndarray and a.dtype == low else a
                for a in args]
        out = forward(self, *args, **kwargs)
        if isinstance(out, tuple):
            return tuple(o.astype(low) if type(o) is _ndarray and o.dtype == np.float32
                         else o for o in out)
        return out.astype(low)
    return run


def opmath_number(ufunc, arr, s):
    """``ufunc(arr, s)`` for a float16/bfloat16 array and a Python number ``s``, as
    PyTorch computes it: the number converted to float32 (not to the array's dtype, as
    NumPy would), the arithmetic done in float32, the result rounded once to the array's
    dtype (``x / 0.1`` on float16 30.0 is 300.0, not 299.8)."""
    with np.errstate(over="ignore"):
        z = np.float32(s)
    return ufunc(arr.astype(np.float32), z).astype(arr.dtype)


def check_number_fits(value, dt):
    """Raise PyTorch's RuntimeError when the Python number ``value`` (an alpha, a bound, a
    fill value) is finite but beyond the largest value of the float32, float16, bfloat16
    or complex64 dtype ``dt``: PyTorch refuses to convert it rather than make it
    infinite."""
    name = getattr(dt, "name", None)
    if name == "complex64" and type(value) in (int, float, complex):
        _check_complex64(value)
        return
    hi = _FLOAT32_MAX if name == "float32" else _REDUCED_MAX.get(name)
    if hi is not None and type(value) in (int, float) and abs(value) > hi and \
            abs(value) != float("inf"):
        c_name = _C_TYPE_NAMES[name]
        raise RuntimeError(f"value cannot be converted to type {c_name} without overflow")


# the C++ type names PyTorch's conversion errors print
_C_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
                 "bfloat16": "c10::BFloat16", "int64": "int64_t", "int32": "int",
                 "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t", "uint16": "uint16_t",
                 "uint32": "uint32_t", "uint64": "uint64_t"}


_FLOAT_MAX = {}  # largest finite value of the NumPy floating dtypes met, by dtype


def checked_scalar(value, np_dtype, complex_error=None):
    """The Python number ``value`` (a fill, a scattered or assigned value) converted for a
    tensor of NumPy dtype ``np_dtype`` as PyTorch's ``Scalar::to`` converts it
    (``c10::checked_convert``), raising its RuntimeError where that refuses: a complex
    number with a nonzero imaginary part for a real tensor (any complex number, where the
    op has its own ``complex_error``), a float outside an integer type's range (NaN, inf, -1.5 for
    uint8), a finite value past a floating type's largest; an integer into an unsigned
    type wraps from as low as minus its largest value (-1 is 255 for uint8). Bool tensors
    take any number's truth."""
    kind = np_dtype.kind
    tv = type(value)
    if tv is float and kind == "f":  # the common case first
        hi = _FLOAT_MAX.get(np_dtype)
        if hi is None:
            hi = _FLOAT_MAX[np_dtype] = float(np.finfo(np_dtype).max)
        if -hi <= value <= hi or value != value or abs(value) == float("inf"):
            return value
    if kind == "c" and np_dtype.itemsize == 8 and tv is not bool and \
            isinstance(value, (int, float, complex)):
        _check_complex64(value)
    if kind == "c" or tv is bool or not isinstance(value, (int, float, complex)):
        return value
    if tv is complex or isinstance(value, complex):
        if complex_error is not None:
            raise RuntimeError(complex_error)
        if kind == "b":
            return bool(value)
        bad = value.imag != 0
        value = value.real
        tv = float
    else:
        bad = False
    if kind == "b":
        return value
    name = _C_TYPE_NAMES.get(np_dtype.name, np_dtype.name)
    if kind in "iu":
        info = np.iinfo(np_dtype)
        if isinstance(value, float):
            bad = bad or value != value or not info.min <= value <= info.max
            if not bad:
                value = int(value)  # C++ truncates toward zero
        else:
            lo = -info.max if kind == "u" else info.min
            bad = bad or not lo <= value <= info.max
            if not bad and value < 0 and kind == "u":
                value += info.max + 1
    elif kind == "f" or np_dtype.name in _REDUCED_MAX:
        hi = _REDUCED_MAX.get(np_dtype.name) or float(np.finfo(np_dtype).max)
        bad = bad or (value == value and abs(value) != float("inf") and abs(value) > hi)
    if bad:
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    return value


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _check_complex64(value):
    """PyTorch's conversion of a number to ``complex<float>``: a finite real or imaginary
    part beyond float32's largest raises (NaN and the infinities pass)."""
    try:
        z = complex(value)
    except OverflowError:  # an int past float64's range
        raise RuntimeError("value cannot be converted to type c10::complex<float> without "
                           "overflow") from None
    for part in (z.real, z.imag):
        if part == part and abs(part) != float("inf") and abs(part) > _FLOAT32_MAX:
            raise RuntimeError("value cannot be converted to type c10::complex<float> "
                               "without overflow")


def checked_fill(value, np_dtype, numel):
    """A fill value (``full``, ``full_like``, ``new_full``, ``fill_``) for ``numel``
    elements of NumPy dtype ``np_dtype``, as PyTorch converts it: a Python int outside
    int64's and uint64's range is an OverflowError, then :func:`checked_scalar`'s rules
    (-9 is 247 for uint8; 300, NaN or 1.5 for uint8 raise), except that one float16 or
    bfloat16 element takes a finite overflow as inf."""
    if type(value) is int and not -2 ** 63 <= value < 2 ** 64:
        raise OverflowError("can't convert negative int to unsigned" if value < 0
                            else "int too big to convert")
    if numel == 1 and np_dtype.name in _REDUCED_MAX:  # (through double, unchecked after)
        return checked_scalar(value, np.dtype(np.float64))
    if np_dtype.kind == "b" and isinstance(value, (int, float, complex)):
        return bool(value)  # (NumPy refuses 2**63 for bool)
    return checked_scalar(value, np_dtype)


def _scalar_pair(arr, s):
    if type(arr) is not _ndarray and not hasattr(arr, "dtype"):
        return _promote_general(arr, s)
    k = arr.dtype.kind
    ts = type(s)
    if ts is float and k not in "fcV":
        return arr.astype(default_float_np()), s
    if ts is complex and k != "c":
        # float32 + 1j is complex64, float64 + 1j complex128, ints the default complex
        r = _dt._combine(_FROM_NP[arr.dtype], _dt._default[0].to_complex())
        if r is _dt.complex32:
            raise NotImplementedError("a float16 tensor with a complex Python number (a "
                                      "complex32 result) is not implemented in ember; convert "
                                      "the tensor with .chalf() first")
        return arr.astype(r.np), s
    if ts is int and k == "b":
        return arr.astype(np.int64), s
    if ts is int and k in "iu":
        lo, hi, span = _int_bounds(arr.dtype)
        if not lo <= s <= hi and -2 ** 63 <= s < 2 ** 63:
            # PyTorch converts the number to the tensor's dtype first, wrapping around
            # (uint8 + 1000 adds 232); NumPy would raise OverflowError
            s = (s - lo) % span + lo
    return arr, s


_BOUNDS = {}


def _int_bounds(dt):
    b = _BOUNDS.get(dt)
    if b is None:
        info = np.iinfo(dt)
        b = _BOUNDS[dt] = (int(info.min), int(info.max), int(info.max) - int(info.min) + 1)
    return b


_PROMO_CACHE = {}


def _promote_np(da, za, db, zb):
    key = (da, za, db, zb, _dt._default[0])
    r = _PROMO_CACHE.get(key)
    if r is None:
        ea, eb = _FROM_NP[da], _FROM_NP[db]
        res = [None, None]
        res[1 if za else 0] = ea
        k = 1 if zb else 0
        res[k] = eb if res[k] is None else _dt.promote_types(res[k], eb)
        r = _dt._combine(res[0], res[1]).np
        _PROMO_CACHE[key] = r
    return r


def _promote_general(a, b):
    if hasattr(a, "dtype") and hasattr(b, "dtype") and a.ndim and b.ndim and type(a) is not type(b):
        from ember.backend import device_of
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                           f"devices, {device_of(a)} and {device_of(b)}!")
    if not hasattr(a, "dtype"):
        a = np.asarray(a) if not isinstance(a, (int, float, bool, complex)) else a
    if not hasattr(b, "dtype"):
        b = np.asarray(b) if not isinstance(b, (int, float, bool, complex)) else b
    if isinstance(a, np.generic):
        a = a.item()
    if isinstance(b, np.generic):
        b = b.item()
    if hasattr(a, "dtype") and hasattr(b, "dtype"):
        r = _promote_np(a.dtype, a.ndim == 0, b.dtype, b.ndim == 0)
        return (a if a.dtype == r else _narrow(a, r)), (b if b.dtype == r else _narrow(b, r))
    if hasattr(a, "dtype"):
        return _scalar_pair(a, b)
    if hasattr(b, "dtype"):
        bb, aa = _scalar_pair(b, a)
        return aa, bb
    return a, b


_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
               "float32": "Float", "float64": "Double", "float16": "Half", "bool": "Bool",
               "complex64": "ComplexFloat", "complex128": "ComplexDouble",
               "bfloat16": "BFloat16", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
               "float8_e4m3fn": "Float8_e4m3fn", "float8_e5m2": "Float8_e5m2",
               "float8_e4m3fnuz": "Float8_e4m3fnuz", "float8_e5m2fnuz": "Float8_e5m2fnuz",
               "float8_e8m0fnu": "Float8_e8m0fnu"}


def tensor_operands(name, input, other, numbers="none", names=("input", "other")):
    """Refuse the operands torch's argument parser refuses for a two-operand function:
    ``numbers`` says which may be a Python number, ``"none"`` (both must be tensors:
    ``atan2``, ``maximum``), ``"other"`` (``eq``, ``fmod``: a number second operand) or
    ``"either"`` (``bitwise_and``, ``pow``: a number on one side, a tensor on the other).
    A TypeError, as torch's (a silent result on numbers would hide the mistake). Callers
    on hot paths call it only when an operand is not a Tensor (the two isinstance tests
    inline cost a third of the call)."""
    a, b = isinstance(input, Tensor), isinstance(other, Tensor)
    if a and b:
        return
    if numbers == "none":
        pos, arg, value = (1, names[0], input) if not a else (2, names[1], other)
        raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(value).__name__}")
    if a or (b and numbers == "either"):
        return
    raise TypeError(f"{name}() received an invalid combination of arguments - got "
                    f"({type(input).__name__}, {type(other).__name__}): "
                    f"'{names[0]}' must be a Tensor"
                    + (f" or '{names[1]}' a Tensor" if numbers == "either" else ""))


def type_name(np_dtype):
    """PyTorch's capitalised scalar type name (Float, Double, Long, Bool, ...)."""
    d = np.dtype(np_dtype)
    return "ComplexHalf" if d.names else _TYPE_NAMES.get(d.name, d.name)


def not_implemented_for(kernel, np_dtype):
    """PyTorch's error for a kernel without a loop for this dtype."""
    return NotImplementedError(f'"{kernel}" not implemented for \'{type_name(np_dtype)}\'')


def split_or(ufunc, x):
    """``ufunc(x)``, in blocks on the intra-op threads when ``x`` is large."""
    if _threads.MANY and x.size >= _threads.SPLIT_ELEMENTS:
        r = _threads.unary(ufunc, x)
        if r is not None:
            return r
    return ufunc(x)


def to_float(x):
    """Integer and bool inputs of float-valued ops compute in the default float dtype."""
    if x.dtype.kind not in "fcV":
        return x.astype(default_float_np())
    return x


def cj(t):
    """``t``'s complex conjugate, ``t`` itself when real: backward formulas of holomorphic
    ops pass ``grad * conj(f'(z))`` back (PyTorch's convention for complex gradients)."""
    if type(t) is Tensor or isinstance(t, Tensor):
        k = t._data.dtype.kind
        return t.conj_physical() if k == "c" or k == "V" and t._data.dtype.names else t
    return t.conjugate() if isinstance(t, complex) else t




def as_tensor_like(x, ref):
    """Wrap a Python number or array as a Tensor on ``ref``'s device."""
    if isinstance(x, Tensor):
        return x
    from ember.backend import array_module
    return _make(array_module(ref._data).asarray(x), False)


def check_same_device(op, *tensors):
    devs = {str(t.device) for t in tensors if isinstance(t, Tensor)}
    if len(devs) > 1:
        a, b = sorted(devs)[:2]
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least "
                           f"two devices, {a} and {b}! (when checking arguments for {op})")


def check_out(op, out):
    """``out=`` is not supported: say so instead of silently ignoring it."""
    if out is not None:
        raise NotImplementedError(f"{op}(out=...): ember does not write into out= tensors; "
                                  "assign the result instead")


def with_out(fn):
    """Give ``fn`` PyTorch's ``out=``: the result is written into ``out`` (resized)."""
    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        if out is None:
            return result
        if isinstance(result, (tuple, list)):
            # (values, indices) results take a tuple of out tensors, as in PyTorch; each
            # must have its result's dtype (torch casts only single results)
            if not isinstance(out, (tuple, list)) or len(out) != len(result):
                raise TypeError(f"{fn.__name__}(): argument 'out' must be tuple of "
                                f"{len(result)} Tensors")
            if wrapper.__name__ in APART_OUT:
                refuse_partial_overlap(out, (*args, *kwargs.values()))
            written = [write_out(r, o) for r, o in zip(result, out)]
            return type(result)(*written) if hasattr(result, "_fields") else \
                type(result)(written)
        # (the name given after wrapping; a reduction to one element is not checked)
        if wrapper.__name__ in APART_OUT and result._data.ndim:
            refuse_partial_overlap(out, (*args, *kwargs.values()))
        return write_out(result, out, wrapper.__name__)
    return wrapper


# the arrays of ``conj()``'s results, made read-only: PyTorch's ``conj()`` is a view of its
# input, so a write into it reaches the input; ember's is a copy, and a write into it
# would silently miss the input, so it is refused (weak: the dict forgets freed arrays)
_CONJ_COPIES = weakref.WeakValueDictionary()


# those whose input was a partial view of a larger storage: as_strided on them would
# address the copy, where torch's addresses the input's storage
_CONJ_OF_PARTIAL = weakref.WeakValueDictionary()


def mark_conj_copy(arr, partial=False):
    """Make ``arr`` (a fresh ``conj()`` result) refuse writes, with :func:`write_error`'s
    message naming ``conj()``; ``partial``: its input was a partial view of a storage."""
    if type(arr) is np.ndarray:
        arr.flags.writeable = False
        _CONJ_COPIES[id(arr)] = arr
        if partial:
            _CONJ_OF_PARTIAL[id(arr)] = arr


def refuse_storage_of_conj(arr):
    """``as_strided`` reads the storage under ``arr``: refused where that is a ``conj()``
    copy of a partial view (torch's conj view shares the input's whole storage)."""
    a = arr
    while isinstance(a, np.ndarray):
        if _CONJ_OF_PARTIAL.get(id(a)) is a:
            raise NotImplementedError(
                "as_strided on the result of conj() of a partial view: PyTorch's conj() is "
                "a view of the input's whole storage; ember's is a copy of the input alone. "
                "Call as_strided on the input, then conj()")
        a = a.base


def write_error(arr):
    """The error for a write NumPy refused into the read-only ``arr``: into a ``conj()``
    result (or a view of one), ``NotImplementedError``; otherwise torch's refusal of a
    write into an expanded tensor."""
    a = arr
    while isinstance(a, np.ndarray):
        if _CONJ_COPIES.get(id(a)) is a:
            return NotImplementedError(
                "in-place write into the result of conj(): PyTorch's conj() is a view, so "
                "the write would reach the conjugated tensor; ember's conj() is a copy and "
                "cannot write through. Write into the tensor itself (x.copy_(y.conj())) or "
                "use conj_physical()")
        a = a.base
    return RuntimeError("unsupported operation: more than one element of the written-to "
                        "tensor refers to a single memory location. Please clone() the "
                        "tensor before performing the operation.")


def with_out_apart(fn):
    """``with_out`` for an op whose ``out=`` must not overlap its inputs
    (:func:`refuse_out_overlap`), checked before anything is written."""
    inner = with_out(fn)

    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        if out is not None:
            refuse_out_overlap(out, (*args, *kwargs.values()))
        return inner(*args, out=out, **kwargs)
    return wrapper


def with_out_unary(fn):
    """``with_out`` for a one-input function, without the ``*args``/``**kwargs`` repacking
    (the namespace's hot elementwise functions: ``torch.tanh(x)`` in a loop)."""
    def wrapper(input, *, out=None):
        if out is None:
            return fn(input)
        if wrapper.__name__ in APART_OUT:
            refuse_partial_overlap(out, (input,))
        return write_out(fn(input), out, wrapper.__name__)
    functools.update_wrapper(wrapper, fn)
    return wrapper


# the functions whose out= follows torch's elementwise rule: the result is cast to out's
# dtype unless that is a lower category (complex to real, float to integer, anything
# but bool to bool); every other out= wants the result's dtype exactly
CASTING_OUT = frozenset("""
    abs_ acos acosh add addcdiv addcmul addr angle asin asinh atan atan2 atanh
    bitwise_and bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor clamp
    clamp_max clamp_min copysign cos cosh cumprod cumsum deg2rad digamma div eq erf erfc
    erfinv exp exp2 expm1 floor_divide fmax fmin fmod gcd ge gt hypot i0 igamma igammac
    kron lcm ldexp le lerp max min lgamma log log10 log1p log2 logaddexp logaddexp2 logical_and
    logical_not logical_or logical_xor logit logsumexp lt maximum mean minimum mul
    multiply mvlgamma nanmean nansum ne nextafter normalize outer polygamma pow rad2deg
    reciprocal remainder rsqrt sigmoid sin sinc sinh sqrt square std sub subtract tan
    tanh true_divide var xlogy
    cholesky cholesky_inverse cholesky_solve cond geqrf householder_product linalg_lstsq lu
    matrix_power matrix_rank pinv tensorinv tensorsolve
""".split())
# torch.lu writes its factor into out of any dtype, and, like addbmm and narrow_copy,
# resizes a wrong out without a warning
_ANY_OUT = frozenset({"lu"})
_QUIET_RESIZE = frozenset({"lu", "addbmm", "narrow_copy", "tensor_range", "logsigmoid",
                           "quiet_resize"})
_KIND = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_SCALAR = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
           "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
           "float64": "Double", "complex32": "ComplexHalf", "complex64": "ComplexFloat",
           "complex128": "ComplexDouble"}


def scalar_type_name(dtype):
    """torch's C++ name of ``dtype`` (``Float`` for ``float32``), as its messages use."""
    short = str(dtype).split(".")[-1]
    return _SCALAR.get(short, short)


def _kind(dt):
    return 2 if dt.names else _KIND.get(dt.kind, 2)  # complex32 is a structured dtype


def can_cast(src, dst):
    """torch's ``can_cast`` for NumPy dtypes: not to a lower category (complex, float,
    integer, bool), and nothing but bool to bool."""
    a, b = _kind(src), _kind(dst)
    return not (a > b or (b == 0 and a != 0))


def resize_warning(had, required, stacklevel=2):
    """torch's deprecation warning for an ``out=`` tensor with elements that is resized."""
    import warnings
    warnings.warn(f"An output with one or more elements was resized since it had shape "
                  f"{list(had)}, which does not match the required output shape "
                  f"{list(required)}. This behavior is deprecated, and in a future PyTorch "
                  "release outputs will not be resized unless they have zero elements. You can "
                  "explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                  "with t.resize_(0).", stacklevel=stacklevel)


def write_out(result, out, name=None, inputs=()):
    """PyTorch's ``out=``: the result is copied into ``out`` (resized if needed, with
    torch's warning when ``out`` had elements). ``name`` is the function's: for those
    in ``CASTING_OUT`` the result is cast to ``out``'s dtype where torch allows it.
    ``inputs``: the operands ``out`` must not share memory with in part
    (:func:`refuse_partial_overlap`), for an elementwise function."""
    if out is None:
        return result
    if inputs:
        refuse_partial_overlap(out, inputs)
    from ember.autograd.grad_mode import state
    if state.grad_enabled and (result._requires_grad or out._requires_grad):
        raise RuntimeError("out=... arguments don't support automatic differentiation, but one "
                           "of the arguments requires grad.")
    src = result._data
    if 0 in out._data.strides and out._data.shape == src.shape:
        _refuse_internal_overlap(out._data)
    if out._data.dtype != src.dtype:
        if name not in CASTING_OUT:
            raise RuntimeError(f"Expected out tensor to have dtype {result.dtype}, but got "
                               f"{out.dtype} instead")
        if not can_cast(src.dtype, out._data.dtype) and name not in _ANY_OUT:
            raise RuntimeError(f"result type {scalar_type_name(result.dtype)} can't be cast to "
                               f"the desired output type {scalar_type_name(out.dtype)}")
        src = result.to(out.dtype)._data  # torch's conversion (float16 through float32...)
    if out._data.shape == src.shape:
        try:
            out._data[...] = src
        except ValueError:
            raise write_error(out._data) from None
    else:
        if out._data.size and name not in _QUIET_RESIZE:
            resize_warning(out._data.shape, src.shape, stacklevel=4)
        out._data = src.copy()
    out._vc[0] += 1
    return out


# the sizes argument of ``view``/``reshape``/``expand``/``sum_to_size``/...: ints or one
# sequence of them
def _sizes(args, name="shape"):
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)) and \
            not (isinstance(args[0], Tensor) and args[0]._data.ndim == 0):
        args = args[0]
    if isinstance(args, (str, bytes)) or not hasattr(args, "__iter__"):
        raise TypeError(f"argument '{name}' must be tuple of ints, not {type(args).__name__}")
    out = []
    for i, s in enumerate(args):
        if type(s) is int:
            out.append(s)
        elif isinstance(s, (np.integer, Tensor)) or (isinstance(s, int) and
                                                      not isinstance(s, bool)):
            out.append(s.__index__())  # integer 0-d tensors too; floats raise TypeError
        else:
            raise TypeError(f"argument '{name}' must be tuple of ints, but found element of "
                            f"type {type(s).__name__} at pos {i}")
    return tuple(out)


def refuse_kinds(input, kinds, message, error=RuntimeError):
    """Raise ``error(message)`` when ``input``'s dtype is of one of the NumPy ``kinds``
    ("c" complex, "b" bool): the ops PyTorch's CPU kernels refuse for those dtypes
    (NumPy would order complex numbers lexicographically). ``message`` may name the
    dtype as ``{type}`` (PyTorch's scalar type name)."""
    dt = getattr(getattr(input, "_data", None), "dtype", None)
    if dt is not None and dt.kind in kinds:
        raise error(message.format(type=type_name(dt)))


def refuse_dtype(op, *arrays):
    """Raise PyTorch's ``"<kernel>" not implemented for '<Type>'`` when an array's dtype
    is one the op's kernel has no loop for: the op's record names both, ``kernel``
    (PyTorch's kernel) and ``refuses``, NumPy kinds ("b" bool, "iu" integers, "c"
    complex) and two classes of PyTorch's: "I" the integer types but int64 (kernels with a
    ``long`` loop alone), "h" float16 and bfloat16. Called on the arrays the kernel
    computes in (after promotion)."""
    refuses = op.refuses
    for a in arrays:
        dt = getattr(a, "dtype", None)
        if dt is None:
            continue
        if dt.kind in refuses or ("I" in refuses and dt.kind in "iu" and dt != np.int64) or \
                ("h" in refuses and (dt == np.float16 or reduced_float(dt))):
            raise not_implemented_for(op.kernel, dt)
