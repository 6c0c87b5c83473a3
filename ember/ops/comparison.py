"""Comparisons and their kin: eq/ne/lt/le/gt/ge, the logical ops, minimum/maximum and
the NaN-ignoring fmin/fmax, and isclose/allclose/equal. Re-exported by
:mod:`ember.ops.elementwise`, which binds their Tensor methods and operators."""
import numpy as np

from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.ops import _batch, _jvp
from ember.ops._util import promote_arrays, tensor_operands, type_name, with_out


class _Compare(Primitive):
    """Comparisons: bool results, no gradient."""
    batch = _batch.elementwise

    ordered = False  # lt/le/gt/ge: no order on complex numbers (PyTorch raises)

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
        if self.ordered and getattr(a, "dtype", None) is not None and a.dtype.kind == "c":
            raise NotImplementedError(f'"{self.kernel}_cpu" not implemented '
                                      f"for '{type_name(a.dtype)}'")
        return self.fn(a, b)


def _compare(name, fn, **rules):
    cls = type(name, (_Compare,), {"fn": staticmethod(fn), "onnx": None, "torchscript": None,
                                   "ordered": fn in (np.less, np.less_equal, np.greater,
                                                     np.greater_equal),
                                   "kernel": name.lower(), **rules})

    @with_out
    def op(input, other, *, out=None):
        if not isinstance(input, Tensor):
            tensor_operands(name.lower(), input, other, "other")
        return cls.apply(input, other)
    op.__name__ = name.lower()
    op.__doc__ = f"Elementwise ``{fn.__name__}`` of ``input`` and ``other``; a bool tensor."
    op.primitive = cls
    return op


eq = _compare("Eq", np.equal, onnx="Equal", torchscript="eq", complex32_math=True)
ne = not_equal = _compare("Ne", np.not_equal, torchscript="ne", complex32_math=True)
lt = less = _compare("Lt", np.less, onnx="Less", torchscript="lt")
le = less_equal = _compare("Le", np.less_equal, onnx="LessOrEqual", torchscript="le")
gt = greater = _compare("Gt", np.greater, onnx="Greater", torchscript="gt")
ge = greater_equal = _compare("Ge", np.greater_equal, onnx="GreaterOrEqual", torchscript="ge")


def _logical(name, fn, onnx=None):
    cls = type(name, (_Compare,), {"forward": lambda self, a, b: fn(a, b), "onnx": onnx,
                                   "torchscript": name})

    @with_out
    def op(input, other, *, out=None):
        if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
            tensor_operands(name, input, other)
        return cls.apply(input, other)
    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}``; a bool tensor."
    op.primitive = cls
    return op


logical_and = _logical("logical_and", np.logical_and, "And")
logical_or = _logical("logical_or", np.logical_or, "Or")
logical_xor = _logical("logical_xor", np.logical_xor, "Xor")


class LogicalNot(Primitive):
    batch = _batch.elementwise
    onnx = "Not"
    torchscript = "logical_not"

    def forward(self, x):
        return np.logical_not(x)


@with_out
def logical_not(input, *, out=None):
    """Elementwise logical not; a bool tensor."""
    return LogicalNot.apply(input)


class _MinMax(Primitive):
    broadcasts = True
    save_inputs = (0, 1)

    def backward(self, gy):
        # (lazily: elementwise imports this module)
        from ember.ops.arithmetic import DivScalar
        from ember.ops.elementwise import where
        a, b = self.saved_tensors
        tie = a == b
        half = DivScalar.apply(gy, 2)
        # each side's gradient is zeroed only where it strictly loses: where either is
        # NaN (no order) both sides get the whole gradient, as PyTorch's formula does
        ga = where(tie, half, gy.masked_fill(self._loses(a, b), 0.0))
        gb = where(tie, half, gy.masked_fill(self._loses(b, a), 0.0))
        return ga, gb

    jvp = _jvp.diagonal
    batch = _batch.elementwise


def _ordered(pair, name):
    """``pair`` (promoted operands), refused as PyTorch's kernel refuses complex ones."""
    if getattr(pair[0], "dtype", None) is not None and pair[0].dtype.kind == "c":
        raise RuntimeError(f"{name} not implemented for complex tensors.")
    return pair


class Minimum(_MinMax):
    onnx = "Min"
    torchscript = "minimum"

    def forward(self, a, b):
        a, b = _ordered(promote_arrays(a, b), "minimum")
        return np.minimum(a, b)

    @staticmethod
    def _loses(a, b):
        return a > b


class Maximum(_MinMax):
    onnx = "Max"
    torchscript = "maximum"

    def forward(self, a, b):
        a, b = _ordered(promote_arrays(a, b), "maximum")
        return np.maximum(a, b)

    @staticmethod
    def _loses(a, b):
        return a < b


class _FMinMax(_MinMax):
    def backward(self, gy):
        # the NaN-ignoring forms give a tie, or a NaN on both sides, wholly to the first
        # operand, and each gradient to the operand the result came from (PyTorch's rule)
        a, b = self.saved_tensors
        first = self._first_wins(a, b) | b.isnan()
        return gy.masked_fill(~first, 0.0), gy.masked_fill(first, 0.0)


class Fmin(_FMinMax):
    torchscript = "fmin"

    def forward(self, a, b):
        a, b = _ordered(promote_arrays(a, b), "fmin")
        return np.fmin(a, b)

    @staticmethod
    def _first_wins(a, b):
        return a <= b


class Fmax(_FMinMax):
    torchscript = "fmax"

    def forward(self, a, b):
        a, b = _ordered(promote_arrays(a, b), "fmax")
        return np.fmax(a, b)

    @staticmethod
    def _first_wins(a, b):
        return a >= b


@with_out
def minimum(input, other, *, out=None):
    """Elementwise minimum (NaN propagates); ties split the gradient evenly."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("minimum", input, other)
    return Minimum.apply(input, other)


@with_out
def maximum(input, other, *, out=None):
    """Elementwise maximum (NaN propagates); ties split the gradient evenly."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("maximum", input, other)
    return Maximum.apply(input, other)


@with_out
def fmin(input, other, *, out=None):
    """Elementwise minimum ignoring NaN."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("fmin", input, other)
    return Fmin.apply(input, other)


@with_out
def fmax(input, other, *, out=None):
    """Elementwise maximum ignoring NaN."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("fmax", input, other)
    return Fmax.apply(input, other)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|``; a bool tensor."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("isclose", input, other)
    for tol, value in (("rtol", rtol), ("atol", atol)):
        if value < 0:
            raise RuntimeError(f"{tol} must be greater than or equal to zero, but got {value}")
    from ember._tensor import _make, _mode_active, _mode_recorder
    if _mode_active[0] and _mode_recorder((input, other)) is not None:
        return _isclose_ops(input, other, rtol, atol, equal_nan)
    from ember.backend import complex32 as c32
    a, b = (c32.to_c64(v) if c32.is_c32(v) else v  # complex32 compares in complex64
            for v in (input._data, other._data if isinstance(other, Tensor) else other))
    a, b = promote_arrays(a, b)
    return _make(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _isclose_ops(input, other, rtol, atol, equal_nan):
    """isclose in tensor ops, for a graph capture (one NumPy call would be a constant of
    the example): equal, or both finite and within the tolerance, or both NaN."""
    import ember
    if not isinstance(other, Tensor):
        other = ember.tensor(other, dtype=input.dtype)
    if input.dtype == ember.bool or other.dtype == ember.bool:
        return input == other
    close = input == other
    if input.is_floating_point() or input.is_complex() or other.is_floating_point():
        near = (input - other).abs() <= atol + rtol * other.abs()
        close = close | (near & ember.isfinite(input) & ember.isfinite(other))
        if equal_nan:
            close = close | (ember.isnan(input) & ember.isnan(other))
    else:
        close = close | ((input - other).abs() <= atol + rtol * other.abs())
    return close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True if every element of ``input`` is close to ``other``."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other):
    """True if both tensors have the same shape and elements."""
    return input.shape == other.shape and bool((input == other).all())
