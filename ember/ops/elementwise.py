"""The binary and ternary elementwise ops, gathered: their Tensor methods, in-place
methods and operators are bound here, and every name stays importable from here
(``elementwise.Add``, ``elementwise.where`` ...).

The ops live by family: :mod:`~ember.ops.arithmetic` (add, sub, mul, div),
:mod:`~ember.ops.division` (floor_divide, remainder, fmod), :mod:`~ember.ops.binary_math`
(atan2, copysign, hypot, xlogy, logaddexp ...), :mod:`~ember.ops.ternary` (where, lerp,
addcmul, addcdiv) and :mod:`~ember.ops.comparison` (comparisons, logical ops, minimum and
maximum, isclose).
"""
from ember._tensor import Tensor
from ember.ops._variants import Variants
from ember.ops._variants import bind as bind_variants
from ember.ops.arithmetic import (  # noqa: F401
    _WIDER,
    Add,
    AddScalar,
    AddScaled,
    Div,
    DivScalar,
    Mul,
    MulScalar,
    Rsub,
    RsubScalar,
    RsubScaled,
    Sub,
    SubScalar,
    SubScaled,
    _add,
    _add_scaled_reduced,
    _binary_out,
    _check_divisor,
    _checked,
    _div,
    _float_result,
    _is_bool,
    _kind,
    _mul,
    _ndarray,
    _operand,
    _rdiv,
    _reduced_number_out,
    _reduced_scalar,
    _rsub_scalar,
    _sub,
    _to_reduced,
    add,
    div,
    divide,
    mul,
    multiply,
    rsub,
    sub,
    subtract,
    true_divide,
)
from ember.ops.binary_math import (  # noqa: F401
    Atan2,
    Copysign,
    Hypot,
    Nextafter,
    Xlogy,
    _logaddexp,
    arctan2,
    atan2,
    copysign,
    hypot,
    logaddexp,
    logaddexp2,
    xlogy,
)

# comparisons, logical ops, minimum/maximum/fmin/fmax and isclose/allclose/equal live in
# ``comparison``; their names stay importable from here (``elementwise.Maximum`` ...), and
# the Variants rows and operators below bind their Tensor methods
from ember.ops.comparison import (  # noqa: F401
    Fmax,
    Fmin,
    LogicalNot,
    Maximum,
    Minimum,
    _Compare,
    _compare,
    _FMinMax,
    _logical,
    _MinMax,
    allclose,
    eq,
    equal,
    fmax,
    fmin,
    ge,
    greater,
    greater_equal,
    gt,
    isclose,
    le,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    maximum,
    minimum,
    ne,
    not_equal,
)
from ember.ops.division import (  # noqa: F401
    DivFloor,
    FloorDivide,
    Fmod,
    FmodScalar,
    Remainder,
    RemainderScalar,
    TruncDivide,
    _remainder,
    _trunc_divide,
    floor_divide,
    fmod,
    remainder,
)
from ember.ops.ternary import (  # noqa: F401
    _C_NAMES,
    Addcdiv,
    Addcmul,
    Lerp,
    LerpTensor,
    Where,
    _check_float32,
    _check_tensors,
    _lerp_opmath,
    addcdiv,
    addcmul,
    lerp,
    where,
)

# ----- the public ops, each named once: function, Tensor method, in-place method ------------
_VARIANTS = [
    # arithmetic: the in-place result takes the promoted dtype, checked against self
    Variants("add sub subtract floor_divide addcmul addcdiv", inplace=True, copies=False,
             promotes=True),
    # (their backward reads self: the in-place form keeps the old values)
    Variants("mul multiply div divide true_divide copysign remainder fmod atan2 lerp hypot "
             "xlogy", inplace=True, copies=True, promotes=True),
    # comparisons and logical ops give bool, which any dtype may hold
    Variants("eq ne lt le gt ge logical_and logical_or logical_xor logical_not",
             inplace=True, copies=False),
    # (the in-place forms of arctan2, greater, less_equal... are ember._legacy's aliases)
    Variants("arctan2 minimum maximum fmin fmax greater greater_equal less less_equal "
             "not_equal isclose allclose equal logaddexp logaddexp2"),
    Variants("where rsub", method=False),  # Tensor.where takes (condition, other)
]


# ----- Tensor methods and operators ------------------------------------------------------
def _bind():
    T = Tensor
    names = bind_variants(globals(), _VARIANTS)

    def where_method(self, condition, y):
        return Where.apply(condition, self, y)
    T.where = where_method

    T.__add__ = _add
    # ``2 + x`` is ``x.add(2)`` in PyTorch (the tensor's edge first); + and * commute
    T.__radd__ = Add.binary_function()
    T.__sub__ = _sub
    T.__rsub__ = _checked(_rsub_scalar, "-")
    T.__mul__ = _mul
    T.__rmul__ = Mul.binary_function()
    T.__truediv__ = _div
    T.__rtruediv__ = _checked(_rdiv, "/")
    T.__rdiv__ = T.__rtruediv__  # PyTorch keeps Python 2's name too
    T.__floordiv__ = _checked(lambda self, other: FloorDivide.apply(self, other), "//")
    T.__rfloordiv__ = _checked(lambda self, other: FloorDivide.apply(other, self), "//")
    T.__mod__ = _checked(_remainder, "%")
    T.__rmod__ = _checked(lambda self, other: Remainder.apply(other, self), "%")
    T.__eq__ = lambda self, other: eq(self, other) if _operand(other) else NotImplemented
    T.__ne__ = lambda self, other: ne(self, other) if _operand(other) else NotImplemented
    T.__lt__ = lambda self, other: lt(self, other)
    T.__le__ = lambda self, other: le(self, other)
    T.__gt__ = lambda self, other: gt(self, other)
    T.__ge__ = lambda self, other: ge(self, other)
    T.__iadd__ = T.add_
    T.__isub__ = T.sub_
    T.__imul__ = T.mul_
    T.__itruediv__ = T.div_
    T.__ifloordiv__ = T.floor_divide_
    T.__imod__ = T.remainder_
    return names


__all__ = _bind()
