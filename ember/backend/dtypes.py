"""ember's dtypes, their NumPy twins, and PyTorch's type-promotion rules."""
import numpy as np

from ember.backend._frozen import Frozen

__all__ = [
    "dtype", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
    "bool", "half", "float", "double", "short", "int", "long", "result_type", "promote_types",
    "get_default_dtype", "set_default_dtype", "can_cast", "finfo", "iinfo",
    "complex64", "complex128", "cfloat", "cdouble", "bfloat16", "uint16", "uint32", "uint64",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "complex32", "chalf",
]

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class dtype(Frozen):
    """The data type of a tensor's elements, e.g. ``ember.float32``. Immutable: one
    object per dtype is shared by the whole process."""

    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "_category")

    def __init__(self, name, np_dtype, category, is_signed=None):
        np_dtype = np.dtype(np_dtype)
        if is_signed is None:
            is_signed = np_dtype.kind in "fic" or category == _FLOAT
        self._set(name=name, np=np_dtype, _category=category,
                  is_floating_point=category == _FLOAT, is_signed=is_signed,
                  itemsize=np_dtype.itemsize)

    @property
    def is_complex(self):
        return self._category == _COMPLEX

    def to_real(self):
        """The real dtype of a complex one's parts (complex64 -> float32); else itself."""
        return _TO_REAL.get(self, self)

    def to_complex(self):
        """The complex dtype with this float dtype's parts (float64 -> complex128)."""
        if self._category == _COMPLEX:
            return self
        c = _TO_COMPLEX.get(self)
        if c is None:
            raise NotImplementedError(f"ember has no complex dtype with {self.name} parts "
                                      "(NumPy has no complex32)")
        return c

    def __repr__(self):
        return "ember." + self.name

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


float16 = half = dtype("float16", np.float16, _FLOAT)
float32 = dtype("float32", np.float32, _FLOAT)
float64 = double = dtype("float64", np.float64, _FLOAT)
int8 = dtype("int8", np.int8, _INT)
int16 = short = dtype("int16", np.int16, _INT)
int32 = dtype("int32", np.int32, _INT)
int64 = long = dtype("int64", np.int64, _INT)
uint8 = dtype("uint8", np.uint8, _INT)
bool = dtype("bool", np.bool_, _BOOL)  # noqa: A001 - PyTorch's public name
complex64 = cfloat = dtype("complex64", np.complex64, _COMPLEX)
complex128 = cdouble = dtype("complex128", np.complex128, _COMPLEX)
float = float32  # noqa: A001
int = int32  # noqa: A001

# complex32: two float16 parts in a NumPy structured element (see backend/complex32.py)
from ember.backend import complex32 as _c32  # noqa: E402

complex32 = chalf = dtype("complex32", _c32.NP, _COMPLEX, is_signed=True)

_TO_REAL = {complex64: float32, complex128: float64, complex32: float16}
_TO_COMPLEX = {float32: complex64, float64: complex128, float16: complex32}

# Storage dtypes PyTorch has few kernels for: the wide unsigned integers (NumPy's own)
# and, from ml_dtypes (`pip install -e '.[numerics]'`), bfloat16 and the float8 family
uint16 = dtype("uint16", np.uint16, _INT)
uint32 = dtype("uint32", np.uint32, _INT)
uint64 = dtype("uint64", np.uint64, _INT)
_FEW_OPS = {uint16, uint32, uint64}
_ml = None  # the ml_dtypes module once loaded (it costs ~1 s of CPU: not at import)


class _NeedsExtra(Frozen):
    """A dtype whose NumPy twin comes from ml_dtypes, which is not installed."""

    __slots__ = ("name", "is_floating_point", "is_complex", "is_signed", "itemsize")

    def __init__(self, name, itemsize):
        self._set(name=name, itemsize=itemsize, is_floating_point=True, is_complex=False,
                  is_signed=name not in _UNSIGNED_ML)

    @property
    def np(self):
        raise ImportError(f"ember.{self.name} needs the ml_dtypes package: "
                          "pip install -e '.[numerics]'")

    dtype = np

    def __repr__(self):
        return "ember." + self.name


class _OnFirstUse(dtype):
    """An ml_dtypes dtype before ml_dtypes is imported: the first read of ``.np`` imports
    it and turns every such object into a plain :class:`dtype` (same object, same
    identity), so later reads cost nothing."""

    __slots__ = ()

    def __init__(self, name, itemsize):
        self._set(name=name, _category=_FLOAT, is_floating_point=True,
                  is_signed=name not in _UNSIGNED_ML, itemsize=itemsize)

    @property
    def np(self):
        load_ml_dtypes()
        return dtype.np.__get__(self)


class _Packed(dtype):
    """A dtype of sub-byte values packed in bytes (``float4_e2m1fn_x2``: two 4-bit floats
    a byte): the object, its attributes and comparisons exist, so code that names it
    loads; a tensor of it raises (reading ``.np``), naming it."""

    __slots__ = ()

    def __init__(self, name, itemsize):
        self._set(name=name, _category=_FLOAT, is_floating_point=True, is_signed=True,
                  itemsize=itemsize)

    @property
    def np(self):
        raise NotImplementedError(
            f"ember.{self.name} (two 4-bit floats packed in each byte) has no tensors in "
            "ember: NumPy and ml_dtypes hold one value per byte, and torch itself only "
            "allocates and reinterprets such tensors (its kernels raise \"copy_kernel\" "
            f"not implemented for '{self.name.capitalize()}')")

    def __repr__(self):
        return "ember." + self.name


float4_e2m1fn_x2 = _Packed("float4_e2m1fn_x2", 1)

_ML_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
             "float8_e8m0fnu")
# float8_e8m0fnu is a bare exponent (a power of two, no sign, no zero): MX formats' scale
_UNSIGNED_ML = ("float8_e8m0fnu",)
try:
    import importlib.util as _iu
    _HAVE_ML = _iu.find_spec("ml_dtypes") is not None
except (ImportError, ValueError):  # pragma: no cover
    _HAVE_ML = False
if _HAVE_ML:
    bfloat16, float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu = (
        _OnFirstUse(n, 2 if n == "bfloat16" else 1) for n in _ML_NAMES)
    _FLOAT8 = {float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu}
    _ML = (bfloat16,) + tuple(_FLOAT8)
else:  # pragma: no cover
    bfloat16, float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu = (
        _NeedsExtra(n, 2 if n == "bfloat16" else 1) for n in _ML_NAMES)
    _FLOAT8 = set()
    _ML = ()
_FEW_OPS |= _FLOAT8


def load_ml_dtypes():
    """Import ml_dtypes and give bfloat16 and the float8 dtypes their NumPy twins (once).

    Called on the first use of one of them, or when an array of theirs reaches ember
    (``FROM_NP`` asks when a NumPy dtype is unknown and ml_dtypes is already imported)."""
    global _ml, _NARROW, _E4M3FN, _E8M0
    if _ml is not None or not _HAVE_ML:
        return
    import ml_dtypes
    set_np = dtype.np.__set__
    for d in _ML:
        set_np(d, np.dtype(getattr(ml_dtypes, d.name)))
        object.__setattr__(d, "__class__", dtype)
        FROM_NP[d.np] = d
        FROM_NP[d.np.type] = d
    _NARROW = _NARROW | frozenset(d.np for d in _ML)
    _E4M3FN = float8_e4m3fn.np
    _E8M0 = float8_e8m0fnu.np
    _ml = ml_dtypes


class _FromNumpy(dict):
    """NumPy dtype -> ember dtype; a miss on an ml_dtypes dtype (its package imported by
    someone else) loads ember's side of them and answers."""

    def __missing__(self, key):
        import sys
        if _ml is None and "ml_dtypes" in sys.modules:
            load_ml_dtypes()
            if dict.__contains__(self, key):
                return dict.__getitem__(self, key)
        raise KeyError(key)


ALL = (float16, float32, float64, int8, int16, int32, int64, uint8, bool, complex64,
       complex128, uint16, uint32, uint64, complex32) + _ML
_BY_NAME = {d.name: d for d in ALL}
# Keyed by numpy dtype; used on every tensor's `.dtype`, so it stays a plain dict.
FROM_NP = _FromNumpy((d.np, d) for d in ALL if d not in _ML)
for _d in ALL:
    if _d is not complex32 and _d not in _ML:  # complex32's scalar type is NumPy's void
        FROM_NP[_d.np.type] = _d


# The float types narrower than float32 (float16, bfloat16, float8): PyTorch converts to
# them from wider types through float32, so a float64 rounds twice, to float32 first.
_NARROW = frozenset([np.dtype(np.float16)])  # load_ml_dtypes adds its own
_E4M3FN = None  # float8_e4m3fn's NumPy dtype, once ml_dtypes is loaded
_E8M0 = None  # float8_e8m0fnu's, likewise


def through_float32(x, np_dtype):
    """``x`` (an array or a Python number) ready for conversion to ``np_dtype`` as PyTorch
    converts: into float16, bfloat16 or a float8 type, a float64 value or a 32/64-bit
    integer first becomes float32 (the double rounding of PyTorch's conversions, which
    differs from rounding once for values just past a halfway point), and values bound
    for float8_e4m3fn are clipped to +-448 (PyTorch saturates there). Otherwise ``x``
    itself.

    Example: ``through_float32(np.float64(1 + 2**-11 + 2**-40), np.dtype(np.float16))``
    is ``np.float32(1 + 2**-11)``, which then rounds to 1.0 (to even), as in PyTorch."""
    if np_dtype not in _NARROW:
        return x
    dt = getattr(x, "dtype", None)
    if not isinstance(dt, np.dtype):
        if not isinstance(x, (_builtins.float, _builtins.int)) or \
                isinstance(x, _builtins.bool):
            return x
        x = np.float32(x)
    elif dt.kind == "f" and dt.itemsize > 4 or dt.kind in "iu" and dt.itemsize >= 4:
        x = x.astype(np.float32)
    if _E4M3FN is not None and np_dtype == _E4M3FN and x.dtype.kind == "f":
        # PyTorch saturates to the largest finite value (+-448), ml_dtypes gives NaN
        with np.errstate(invalid="ignore"):
            x = np.clip(x, -448, 448).astype(x.dtype)
    return x


def _dtype_by_name(name):
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype):
    """Map a NumPy dtype to ember's, raising TypeError for ones ember lacks."""
    try:
        return FROM_NP[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        raise TypeError(
            f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only supported types "
            "are: float64, float32, float16, complex64, complex128, int64, int32, int16, int8, "
            "uint64, uint32, uint16, uint8, and bool."
        ) from None


def to_dtype(d):
    """Accept an ember dtype, a NumPy dtype, a Python type or a name; return the ember dtype."""
    if type(d) is dtype:
        return d
    if d is None:
        return None
    if isinstance(d, dtype):  # an ml_dtypes dtype not used yet
        return d
    if d is None:
        return None
    import builtins
    if d is builtins.float:
        return _default[0]
    if d is builtins.int:
        return int64
    if d is builtins.bool:
        return bool
    if d is builtins.complex:
        return complex128  # as PyTorch: dtype=complex is complex128 whatever the default
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    return from_numpy_dtype(d)


_default = [float32]


def get_default_dtype():
    """Return the default floating point dtype (``ember.float32`` unless changed)."""
    return _default[0]


def set_default_dtype(d):
    """Set the dtype that Python floats and float factories produce (float32 or float64)."""
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default[0] = d
    _RESULT_CACHE.clear()


_PROMO = {}


def promote_types(a, b):
    """The smallest dtype both ``a`` and ``b`` can be cast to, by PyTorch's table."""
    key = (a, b)
    r = _PROMO.get(key)
    if r is None and (a is complex32 or b is complex32):
        # NumPy cannot promote it: promote the parts, then back to complex
        r = promote_types(a.to_real(), b.to_real())
        r = complex32 if r._category < _FLOAT else r.to_complex()
        _PROMO[key] = r
    if r is None:
        if a is not b and (a in _FEW_OPS or b in _FEW_OPS):
            # PyTorch refuses to promote these (a wide unsigned integer may still meet a
            # floating dtype)
            if a in _FLOAT8 or b in _FLOAT8 or a._category <= _INT and b._category <= _INT:
                _refuse_promotion(a, b)
        if a._category != b._category and (a._category < _FLOAT or b._category < _FLOAT):
            # Unlike NumPy, PyTorch keeps the higher category's type: int64 + float16 is float16.
            r = a if a._category > b._category else b
        else:
            r = FROM_NP[np.promote_types(a.np, b.np)]
        _PROMO[key] = r
    return r


def _refuse_promotion(a, b):
    from ember.ops._util import type_name
    kind = "Float8 Types" if a in _FLOAT8 or b in _FLOAT8 else "uint16, uint32, uint64 types"
    raise RuntimeError(f"Promotion for {kind} is not supported, attempted to promote "
                       f"{type_name(a.np)} and {type_name(b.np)}")


def _combine(higher, lower):
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher._category == _COMPLEX:
        return higher
    if lower._category == _COMPLEX:
        # a complex scalar (or 0-d tensor) keeps a float tensor's precision: float32 + 1j
        # is complex64, float64 + 1j complex128; an integer tensor takes the scalar's
        return higher.to_complex() if higher._category == _FLOAT else lower
    if higher.is_floating_point:
        return higher
    if higher is bool or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


_RESULT_CACHE = {}
_DIM, _ZERO, _SCALAR = 0, 1, 2


def _scalar_dtype(x):
    import builtins
    t = type(x)
    if t is builtins.bool or t is np.bool_:
        return bool
    if t is builtins.int:
        return int64
    if t is builtins.float:
        return _default[0]
    if isinstance(x, np.generic):
        # NumPy scalars behave as Python numbers of their kind.
        k = x.dtype.kind
        if k == "c":
            return _default[0].to_complex()
        return bool if k == "b" else int64 if k in "iu" else _default[0]
    if isinstance(x, complex):
        return _default[0].to_complex()
    raise TypeError(f"unsupported operand type: {t.__name__}")


def result_type_of(*operands):
    """dtype of an op on ``operands`` (Tensors and Python numbers) by PyTorch's rules.

    Tensors with dimensions outrank zero-dimensional tensors, which outrank Python
    numbers; a lower rank only matters if it belongs to a higher category (bool < int
    < float), so ``float32_tensor * 2.5`` stays float32 and ``int_tensor * 2.5`` is
    the default float dtype.
    """
    from ember._tensor import Tensor
    res = [None, None, None]
    for x in operands:
        if isinstance(x, Tensor):
            d = x.dtype
            k = _ZERO if x._data.ndim == 0 else _DIM
        else:
            d = _scalar_dtype(x)
            k = _SCALAR
        res[k] = d if res[k] is None else promote_types(res[k], d)
    return _combine(res[_DIM], _combine(res[_ZERO], res[_SCALAR]))


def result_type(tensor1, tensor2):
    """Return the dtype that an arithmetic op on the two operands would produce."""
    return result_type_of(tensor1, tensor2)


def can_cast(from_, to):
    """Whether PyTorch's casting rules allow an in-place op to write ``from_`` into ``to``."""
    return from_._category <= to._category


class finfo:
    """Machine limits of a floating point dtype, as ``torch.finfo``."""

    def __init__(self, type=None):
        type = to_dtype(type) or _default[0]
        type = type.to_real()
        if not type.is_floating_point:
            raise TypeError(f"finfo needs a floating point dtype, got {type}")
        fi = np.finfo(type.np)
        self.dtype = type.name
        self.bits = fi.bits
        self.eps = builtins_float(fi.eps)
        self.max = builtins_float(fi.max)
        self.min = builtins_float(fi.min)
        self.tiny = self.smallest_normal = builtins_float(fi.tiny)
        # a bare exponent has no decimal digits: torch's resolution is 10**-0
        self.resolution = 1.0 if type.name == "float8_e8m0fnu" else \
            builtins_float(fi.resolution)


class iinfo:
    """Machine limits of an integer dtype, as ``torch.iinfo``."""

    def __init__(self, type):
        type = to_dtype(type)
        if type.is_floating_point:
            raise TypeError(f"iinfo needs an integer dtype, got {type}")
        ii = np.iinfo(type.np) if type is not bool else np.iinfo(np.uint8)
        self.dtype = type.name
        self.bits = ii.bits
        self.max = builtins_int(ii.max)
        self.min = builtins_int(ii.min)


import builtins as _builtins  # noqa: E402

builtins_float = _builtins.float
builtins_int = _builtins.int
