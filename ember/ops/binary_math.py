"""Elementwise functions of two tensors: atan2, copysign, nextafter, hypot, xlogy,
logaddexp and logaddexp2."""
import math

import numpy as np

from ember._factory import zeros_like
from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.ops import _batch, _jvp
from ember.ops._util import (
    not_implemented_for,
    promote_arrays,
    reduced_float,
    refuse_dtype,
    tensor_operands,
    with_out,
)
from ember.ops.arithmetic import _float_result
from ember.ops.composite_node import one_node
from ember.ops.ternary import where


class Atan2(Primitive):
    broadcasts = True
    save_inputs = (0, 1)
    kernel, refuses = "atan2_cpu", "c"  # (complex numbers have no quadrant to choose)

    def forward(self, a, b):
        a, b = _float_result(a, b)
        refuse_dtype(self, a, b)
        return np.arctan2(a, b)

    def backward(self, gy):
        a, b = self.saved_tensors
        r = (a * a + b * b).reciprocal()
        r = r.masked_fill(r.isinf(), 0.0)  # zero gradient at the origin, as PyTorch
        return gy * b * r, gy * -a * r

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "atan2"


class Copysign(Primitive):
    """``|a|`` with the sign bit of ``b``; ``a`` is already of the floating result dtype."""
    broadcasts = True
    save_inputs = (0,)
    save_output = True
    kernel, refuses = "copysign_cpu", "c"

    def forward(self, a, b):
        refuse_dtype(self, a, b)
        b = b if hasattr(b, "dtype") else np.asarray(b, a.dtype)
        return np.copysign(a, b).astype(a.dtype, copy=False)

    def backward(self, gy):
        a, y = self.saved_tensors
        # the factor +-1 applied to a, read off as y / a: NaN at a NaN input (as torch),
        # 0 at a = 0, and at a = +-inf the sign it applies (where y / a is inf / inf)
        r = where(a.isinf(), y.sign() * a.sign(), y / a).masked_fill(a == 0, 0.0)
        return gy * r, (gy.new_zeros(gy.shape) if self._edges[1] is not None else None)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "copysign"


class Nextafter(Primitive):
    """The next float after ``a`` towards ``b``, in their promoted dtype."""
    broadcasts = True
    kernel, refuses = "nextafter_cpu", "biuc"  # floating types only
    save_inputs = (0, 1)

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
        refuse_dtype(self, a, b)
        return np.nextafter(a, b)

    def backward(self, gy):
        # a step of one ulp is locally constant: gradient 1 for a (also at +-inf, where
        # the step lands on the largest finite float) except where a == b (the result
        # is b itself: PyTorch gives 0 there), zeros for b (PyTorch's ``zeros_like``: a
        # tensor, with no graph)
        a, b = self.saved_tensors
        return gy.masked_fill(a == b, 0), zeros_like(gy)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "nextafter"


class Hypot(Primitive):
    broadcasts = True
    save_inputs = (0, 1)
    save_output = True
    kernel, refuses = "hypot_cpu", "biuc"  # floating types only: no promotion of integers

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
        refuse_dtype(self, a, b)
        return np.hypot(a, b)

    def backward(self, gy):
        a, b, y = self.saved_tensors
        return gy * a / y, gy * b / y

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "hypot"


class Xlogy(Primitive):
    broadcasts = True
    save_inputs = (0, 1)
    kernel, refuses = "xlogy_cpu", "c"

    def forward(self, a, b):
        a, b = _float_result(a, b)
        refuse_dtype(self, a, b)
        # a Python number takes the tensor's dtype (np.log(1) alone would be float64)
        if not hasattr(b, "dtype"):
            b = np.asarray(b, a.dtype)
        elif not hasattr(a, "dtype"):
            a = np.asarray(a, b.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = a * np.log(b)
        return np.where(a == 0, np.where(np.isnan(b), np.nan, 0.0), out).astype(
            out.dtype)

    def backward(self, gy):
        a, b = self.saved_tensors
        ga = (gy * b.log()).masked_fill((a == 0) & (b <= 0), 0.0)
        return ga, gy * a / b

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "xlogy"


@with_out
def atan2(input, other, *, out=None):
    """Elementwise arctangent of ``input / other`` choosing the quadrant."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("atan2", input, other)
    return Atan2.apply(input, other)


arctan2 = atan2


@with_out
def hypot(input, other, *, out=None):
    """``sqrt(input**2 + other**2)`` without overflow."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("hypot", input, other)
    return Hypot.apply(input, other)


@with_out
def xlogy(input, other, *, out=None):
    """``input * log(other)``, 0 where ``input`` is 0."""
    if not (isinstance(input, Tensor) or isinstance(other, Tensor)):
        tensor_operands("xlogy", input, other, "either")
    return Xlogy.apply(input, other)



@with_out
def copysign(input, other, *, out=None):
    """``|input|`` with the sign of ``other`` (a floating result, as PyTorch)."""
    if not isinstance(input, Tensor):
        tensor_operands("copysign", input, other, "other")
    from ember.backend import dtypes
    dt = dtypes.result_type(input, other)
    if not dt.is_floating_point and not dt.is_complex:  # (complex: refused by the kernel)
        dt = dtypes.get_default_dtype()
    return Copysign.apply(input.to(dt), other)



@one_node("LogaddexpBackward0", 2)
@with_out
def logaddexp(input, other, *, out=None):
    """``log(exp(input) + exp(other))`` without overflow."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("logaddexp", input, other)
    return _logaddexp(input, other, base2=False)


@one_node("Logaddexp2Backward0", 2)
@with_out
def logaddexp2(input, other, *, out=None):
    """``log2(2 ** input + 2 ** other)`` without overflow."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("logaddexp2", input, other)
    return _logaddexp(input, other, base2=True)


def _logaddexp(a, b, base2):
    if not base2 and any(isinstance(x, Tensor) and x.is_complex() for x in (a, b)):
        # complex: factor out the operand of larger real part, so exp cannot overflow
        a = a if isinstance(a, Tensor) else b * 0 + a
        b = b if isinstance(b, Tensor) else a * 0 + b
        first = a.real >= b.real
        big, small = where(first, a, b), where(first, b, a)
        # equal infinite arguments give a + log(2) without inf - inf = nan; equal finite
        # ones take the general form, whose derivatives share the gradient between them
        # (1/2 each, as PyTorch's) and keep the curvature (1/4) a linear tie form drops
        return where((a == b) & ~a.isfinite(), (a + b) * 0.5 + math.log(2),
                     big + (small - big).exp().log1p())
    for x in (a, b):
        if isinstance(x, Tensor) and not x.is_floating_point():
            raise not_implemented_for("logaddexp2_cpu" if base2 else "logaddexp_cpu",
                                      x._data.dtype)
    dts = {x.dtype for x in (a, b) if isinstance(x, Tensor)}
    if len(dts) == 1 and reduced_float(next(iter(dts))):
        # float16/bfloat16: computed in float32 and rounded once, as PyTorch's kernel (the
        # difference of two close operands cancels)
        low = dts.pop()
        return _logaddexp(*(x.float() if isinstance(x, Tensor) else x for x in (a, b)),
                          base2).to(low)
    # the larger operand factored out, chosen by a comparison (not maximum and |a - b|,
    # whose derivatives are flat at a tie): at equal finite arguments the gradient is
    # shared (1/2 each, as PyTorch's) and the second derivative keeps its 1/4
    first = a >= b
    big, small = where(first, a, b), where(first, b, a)
    mid = (a + b) * 0.5
    if base2:
        rest = (small - big).exp2().log1p() / math.log(2)
        same = mid + 1.0
    else:
        rest = (small - big).exp().log1p()
        same = mid + math.log(2)
    # equal infinite arguments give a + log(2) without inf - inf = nan
    return where((a == b) & a.isinf(), same, big + rest)


