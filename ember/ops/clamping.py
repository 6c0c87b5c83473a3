"""Clamping to bounds: ``clamp``/``clip``, ``clamp_min``, ``clamp_max`` with number or
tensor bounds, each bound's kind its own op (PyTorch's ``ClampBackward1`` for numbers,
``ClampBackward0`` for tensors, and the one-sided nodes). ``F.hardtanh``, a clamp with
its own gradient, is in ``unary`` beside the other piecewise-linear activations; the
Tensor methods are bound there too."""
import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.ops import _batch, _jvp
from ember.ops._util import (
    check_number_fits,
    not_implemented_for,
    promote_arrays,
    reduced_float,
    tensor_operands,
    to_float,
    with_out,
)
from ember.ops.elementwise import where

__all__ = ["clamp", "clip", "clamp_min", "clamp_max"]


def _keeping(extremum, bound, x):
    """``np.maximum``/``np.minimum`` of ``x`` and ``bound`` returning ``x`` where they
    are equal (-0.0 against a bound of +0.0): NumPy's float16 loops return the first of
    equal operands, the others the second."""
    return extremum(x, bound) if x.dtype == np.float16 else extremum(bound, x)


class Clamp(Primitive):
    """Clamp to Python-number bounds."""
    save_inputs = (0,)
    _node_name = "ClampBackward1"

    def forward(self, x, lo, hi):
        self.lo, self.hi = lo, hi
        if x.dtype.kind != "f" and not reduced_float(x.dtype) and \
                (isinstance(lo, float) or isinstance(hi, float)):
            x = to_float(x)  # (bfloat16, NumPy kind "V", is a float already)
        elif x.dtype == np.bool_:
            # an integer bound promotes a bool tensor to int64, as PyTorch (both bounds
            # bool: refused by ``_check_clampable``)
            x = x.astype(np.int64)
        if x.dtype.kind == "f" and (lo == 0 or hi == 0):
            # a zero bound: an element equal to it is kept, as PyTorch's min(max(x, lo),
            # hi) keeps it (relu6(-0.0) is -0.0); np.clip's SIMD loops return the
            # bound's zero in some dtypes
            r = x if lo is None else _keeping(np.maximum, x.dtype.type(lo), x)
            return r if hi is None else _keeping(np.minimum, x.dtype.type(hi), r)
        r = np.clip(x, lo, hi)
        if r.dtype != x.dtype and reduced_float(x.dtype):
            # NumPy clips bfloat16 between two Python numbers in float32; the result
            # keeps the tensor's dtype (the bounds are exact there, the values too)
            r = r.astype(x.dtype)
        return r

    def backward(self, gy):
        # a plain mask product: PyTorch's clamp gradient is not connected to x either
        x, = self.saved_tensors
        mask = None
        if self.lo is not None:
            mask = x >= self.lo
        if self.hi is not None:
            m = x <= self.hi
            mask = m if mask is None else mask & m
        return gy * mask, None, None

    jvp = _jvp.diagonal
    batch = _batch.elementwise


class ClampMin(Clamp):
    _node_name = "ClampMinBackward0"


class ClampMax(Clamp):
    _node_name = "ClampMaxBackward0"


class ClampTensor(Primitive):
    """Clamp to tensor bounds; either bound may be None."""
    broadcasts = True
    save_inputs = (0, 1, 2)
    _node_name = "ClampBackward0"
    _edge_inputs = (0, 1, 2)  # a missing bound is an empty edge in PyTorch's node too

    def forward(self, x, lo, hi):
        out = x
        if lo is not None:
            out, lo = promote_arrays(out, lo)
            out = np.maximum(out, lo)
        if hi is not None:
            out, hi = promote_arrays(out, hi)
            out = np.minimum(out, hi)
        return out

    def backward(self, gy):
        x, lo, hi = self.saved_tensors
        # PyTorch's clamp_backward and clamp_backward_min_max: each gradient goes where its
        # comparison holds, so a NaN (in x or in a bound) sends none to a bound
        zero = gy.new_zeros(())
        keep = g_lo = g_hi = None
        if lo is not None:
            keep = x >= lo
            below_lo = x < lo
        if hi is not None:
            below = x <= hi
            keep = below if keep is None else keep & below
            above_hi = x > hi
        if lo is not None and hi is not None:
            below_lo = below_lo & (lo < hi)
            above_hi = above_hi | (hi < lo)  # where lo > hi the forward returns hi
        if lo is not None:
            g_lo = where(below_lo, gy, zero)
        if hi is not None:
            g_hi = where(above_hi, gy, zero)
        return where(keep, gy, zero), g_lo, g_hi

    jvp = _jvp.diagonal
    batch = _batch.elementwise


@with_out
def clamp(input, min=None, max=None, *, out=None):
    """Clamp every element into ``[min, max]``; bounds may be numbers or tensors."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    _check_clampable(input, min, max)
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        dt = input._data.dtype
        lo = min if isinstance(min, Tensor) or min is None else _make(np.asarray(min, dt))
        hi = max if isinstance(max, Tensor) or max is None else _make(np.asarray(max, dt))
        return ClampTensor.apply(input, lo, hi)
    for b in (min, max):
        if b is not None and not isinstance(b, (int, float, np.number, np.bool_)):
            raise TypeError(f"clamp(): argument 'min' and 'max' must be Number or Tensor, not "
                            f"{type(b).__name__}")
    return Clamp.apply(input, min, max)


clip = clamp


def _check_clampable(input, min=None, max=None):
    if input.is_complex():
        raise NotImplementedError("clamp is not supported for complex types")
    bounds = (min, max)
    if input.dtype.name == "bool" and \
            all(b is None or isinstance(b, (bool, np.bool_)) for b in bounds):
        # bool bounds keep a bool result, which PyTorch's kernels have no loop for (a
        # number bound promotes it instead)
        kernel = "clamp_scalar_cpu" if min is not None and max is not None else \
            "clamp_min_scalar_cpu" if min is not None else "clamp_max_scalar_cpu"
        raise not_implemented_for(kernel, np.bool_)
    for b in bounds:
        check_number_fits(b, input._data.dtype)  # float16 beyond 65504 raises, as torch


# PyTorch's clamp_min/clamp_max with a tensor bound: their own nodes, listing that bound
class ClampMinTensor(ClampTensor):
    _node_name = "ClampMinBackward1"
    _op_name = "ClampTensor"
    _edge_inputs = (0, 1)


class ClampMaxTensor(ClampTensor):
    _node_name = "ClampMaxBackward1"
    _op_name = "ClampTensor"
    _edge_inputs = (0, 2)


@with_out
def clamp_min(input, min):
    """``clamp(input, min=min)``."""
    if not isinstance(input, Tensor):
        tensor_operands("clamp_min", input, min, "other", ("input", "min"))
    _check_clampable(input, min=min)
    if isinstance(min, (int, float, np.number)):
        return ClampMin.apply(input, min, None)
    if isinstance(min, Tensor):
        return ClampMinTensor.apply(input, min, None)
    return clamp(input, min=min)


@with_out
def clamp_max(input, max):
    """``clamp(input, max=max)``."""
    if not isinstance(input, Tensor):
        tensor_operands("clamp_max", input, max, "other", ("input", "max"))
    _check_clampable(input, max=max)
    if isinstance(max, (int, float, np.number)):
        return ClampMax.apply(input, None, max)
    if isinstance(max, Tensor):
        return ClampMaxTensor.apply(input, None, max)
    return clamp(input, max=max)
