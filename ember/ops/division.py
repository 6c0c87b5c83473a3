"""Rounded division and modulus: floor_divide, div's ``'trunc'``/``'floor'`` modes,
remainder (Python's sign rule) and fmod (C's), elementwise with broadcasting."""

import numpy as np

from ember._factory import zeros_like
from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.ops import _batch, _jvp
from ember.ops._util import (
    opmath_number,
    promote_arrays,
    refuse_dtype,
    tensor_operands,
    with_out,
)
from ember.ops.arithmetic import _check_divisor, _numbers_wrapped, _reduced_scalar


class FloorDivide(Primitive):
    broadcasts = True
    _node_name = "DivBackward1"
    kernel, refuses = "div_floor_cpu", "c"  # (complex numbers have no floor)

    def forward(self, a, b):
        z = _reduced_scalar(a, b)
        if z is not None:
            return opmath_number(np.floor_divide, a, z)
        a, b = promote_arrays(a, b)
        refuse_dtype(self, a, b)
        _check_divisor("div_floor_cpu", a, b)
        return np.floor_divide(a, b)

    def backward(self, gy):
        return zeros_like(gy), zeros_like(gy)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "floor_divide"


def _trunc_divide(a, b):
    return np.trunc(a / b)


class TruncDivide(Primitive):
    broadcasts = True
    _node_name = "DivBackward2"
    kernel, refuses = "div_trunc_cpu", "c"

    def forward(self, a, b):
        z = _reduced_scalar(a, b)
        if z is not None:
            return opmath_number(_trunc_divide, a, z)
        a, b = promote_arrays(a, b)
        refuse_dtype(self, a, b)
        _check_divisor("div_trunc_cpu", a, b)
        if a.dtype.kind == "f" if hasattr(a, "dtype") else isinstance(a, float):
            return np.trunc(a / b)
        q = np.abs(a) // np.abs(b)
        # (the operands' dtype: ``np.abs`` of a Python int divisor is an int64 scalar)
        return np.where((a < 0) != (b < 0), -q, q).astype(np.result_type(a, b))

    def backward(self, gy):
        return zeros_like(gy), zeros_like(gy)

    jvp = _jvp.diagonal
    batch = _batch.elementwise


class Remainder(Primitive):
    broadcasts = True
    _node_name = "RemainderBackward1"  # PyTorch's Tensor overload; a number: RemainderScalar
    save_inputs = (0, 1)
    kernel, refuses = "remainder_cpu", "c"

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
        refuse_dtype(self, a, b)
        _check_divisor("remainder_cpu", a, b)
        r = np.remainder(a, b)
        if type(r) is np.ndarray and r.dtype.kind == "f" and r.size:
            # a zero remainder keeps the dividend's sign, as PyTorch's (fmod's zero, which
            # it corrects only when nonzero); NumPy's and Python's take the divisor's
            zero = r == 0
            if zero.any():
                r = np.where(zero, np.copysign(r, a), r).astype(r.dtype, copy=False)
        return r

    def backward(self, gy):
        a, b = self.saved_tensors
        # the quotient as floor division computes it (Python's //), not floor(a / b):
        # they differ where a / b rounds, e.g. -3 // inf is -1 while floor(-3 / inf) is -0
        return gy, (-gy * floor_divide(a, b) if self._edges[1] is not None else None)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "remainder"


class Fmod(Primitive):
    broadcasts = True
    _node_name = "FmodBackward1"  # PyTorch's Tensor overload; a number: FmodScalar
    save_inputs = (0, 1)
    kernel, refuses = "fmod_cpu", "c"

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
        refuse_dtype(self, a, b)
        _check_divisor("fmod_cpu", a, b)
        return np.fmod(a, b)

    def backward(self, gy):
        a, b = self.saved_tensors
        return gy, (-gy * (a / b).trunc() if self._edges[1] is not None else None)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "fmod"


class RemainderScalar(Remainder):
    """``remainder`` by a Python number: PyTorch's Scalar overload, one edge."""
    _node_name = "RemainderBackward0"
    _op_name = "Remainder"
    _edge_inputs = (0,)


class FmodScalar(Fmod):
    """``fmod`` by a Python number: PyTorch's Scalar overload, one edge."""
    _node_name = "FmodBackward0"
    _op_name = "Fmod"
    _edge_inputs = (0,)


def _remainder(a, b):
    op = RemainderScalar if isinstance(a, Tensor) and not isinstance(b, Tensor) else Remainder
    return op.apply(a, b)


class DivFloor(FloorDivide):
    """``div(..., rounding_mode='floor')``: PyTorch's ``div.Tensor_mode`` node."""
    _node_name = "DivBackward2"
    _op_name = "FloorDivide"



@with_out
def floor_divide(input, other, *, out=None):
    """Division rounded toward negative infinity (Python's ``//``)."""
    return FloorDivide.apply(_numbers_wrapped(input, other), other)


@with_out
def remainder(input, other, *, out=None):
    """Python-style modulus: the result has the sign of the divisor."""
    if not (isinstance(input, Tensor) or isinstance(other, Tensor)):
        tensor_operands("remainder", input, other, "either")
    return _remainder(input, other)


@with_out
def fmod(input, other, *, out=None):
    """C-style modulus: the result has the sign of the dividend."""
    if not isinstance(input, Tensor):
        tensor_operands("fmod", input, other, "other")
    op = FmodScalar if isinstance(input, Tensor) and not isinstance(other, Tensor) else Fmod
    return op.apply(input, other)


