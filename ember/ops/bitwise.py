"""Bitwise ops on integer and bool tensors: and/or/xor/not and the shifts, with their
operators (``&``, ``|``, ``^``, ``~``, ``<<``, ``>>``) and in-place forms. None has a
gradient."""
import numpy as np

from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.ops import _batch
from ember.ops._util import promote_arrays, refuse_dtype, tensor_operands, with_out
from ember.ops._variants import Variants
from ember.ops._variants import bind as bind_variants
from ember.ops.elementwise import _checked

# PyTorch's bitwise kernels: loops for the integer types and bool only ("V": bfloat16,
# complex32); the dtype checked is the one they compute in, after promotion
_NOT_INTEGRAL = "fcV"


class _Bitwise(Primitive):
    batch = _batch.elementwise
    refuses = _NOT_INTEGRAL

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
        refuse_dtype(self, a, b)
        return self.fn(a, b)


def _bitwise(name, fn):
    cls = type(name, (_Bitwise,), {"fn": staticmethod(fn), "kernel": f"{name}_cpu",
                                   "torchscript": name})

    @with_out
    def op(input, other, *, out=None):
        if not (isinstance(input, Tensor) or isinstance(other, Tensor)):
            tensor_operands(name, input, other, "either")
        return cls.apply(input, other)
    op.__name__ = name
    op.__doc__ = f"Elementwise ``{name}`` of integer or bool tensors."
    op.primitive = cls
    return op


bitwise_and = _bitwise("bitwise_and", np.bitwise_and)
bitwise_or = _bitwise("bitwise_or", np.bitwise_or)
bitwise_xor = _bitwise("bitwise_xor", np.bitwise_xor)


class BitwiseNot(Primitive):
    batch = _batch.elementwise
    torchscript = "bitwise_not"
    kernel, refuses = "bitwise_not_cpu", _NOT_INTEGRAL

    def forward(self, x):
        refuse_dtype(self, x)
        return np.invert(x)


class _Shift(Primitive):
    batch = _batch.elementwise
    refuses = "b" + _NOT_INTEGRAL  # (a bool shifted by a Python int promotes to int64)

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
        refuse_dtype(self, a, b)
        return self.fn(a, b)


class LeftShift(_Shift):
    kernel = "lshift_cpu"
    fn = staticmethod(np.left_shift)
    torchscript = "bitwise_left_shift"


class RightShift(_Shift):
    kernel = "rshift_cpu"
    fn = staticmethod(np.right_shift)
    torchscript = "bitwise_right_shift"


@with_out
def bitwise_left_shift(input, other, *, out=None):
    """``input << other`` for integer tensors."""
    if not (isinstance(input, Tensor) or isinstance(other, Tensor)):
        tensor_operands("bitwise_left_shift", input, other, "either")
    return LeftShift.apply(input, other)


@with_out
def bitwise_right_shift(input, other, *, out=None):
    """``input >> other`` (arithmetic shift) for integer tensors."""
    if not (isinstance(input, Tensor) or isinstance(other, Tensor)):
        tensor_operands("bitwise_right_shift", input, other, "either")
    return RightShift.apply(input, other)


@with_out
def bitwise_not(input, *, out=None):
    """Elementwise bitwise not (logical not for bool tensors)."""
    return BitwiseNot.apply(input)


def _invert(self):
    if self._data.dtype.kind in _NOT_INTEGRAL:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return bitwise_not(self)


# the public ops, each named once: function, Tensor method, in-place method
_VARIANTS = [
    Variants("bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift "
             "bitwise_right_shift", inplace=True, copies=False),
]


def _bind():
    T = Tensor
    names = bind_variants(globals(), _VARIANTS)
    T.__and__ = T.__rand__ = lambda self, other: bitwise_and(self, other)
    T.__or__ = T.__ror__ = lambda self, other: bitwise_or(self, other)
    T.__xor__ = T.__rxor__ = lambda self, other: bitwise_xor(self, other)
    T.__invert__ = _invert
    T.__lshift__ = _checked(bitwise_left_shift, "<<")
    T.__rshift__ = _checked(bitwise_right_shift, ">>")
    T.__rlshift__ = _checked(lambda self, other: LeftShift.apply(other, self), "<<")
    T.__rrshift__ = _checked(lambda self, other: RightShift.apply(other, self), ">>")
    T.__iand__ = T.bitwise_and_
    T.__ior__ = T.bitwise_or_
    T.__ixor__ = T.bitwise_xor_
    T.__ilshift__ = T.bitwise_left_shift_
    T.__irshift__ = T.bitwise_right_shift_
    return names


__all__ = _bind()
