"""Elementwise ops of three operands: where, lerp, addcmul and addcdiv."""

import warnings

import numpy as np

from ember._tensor import Tensor
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.autograd.saved import hook_saves_of
from ember.backend import array_module
from ember.backend import dtypes as _dt
from ember.ops import _batch, _jvp
from ember.ops._util import (
    cj,
    default_float_np,
    not_implemented_for,
    promote_arrays,
    reduced_float,
    scalar_type_name,
    with_out,
    write_out,
)
from ember.ops.arithmetic import Add, Div, Mul, _div, _kind, _ndarray


class Where(Primitive):
    broadcasts = True
    _hook_saves = hook_saves_of(0)  # PyTorch's node saves the condition

    def forward(self, cond, a, b):
        if cond.dtype != np.bool_:
            if cond.dtype != np.uint8:
                raise RuntimeError(f"where expected condition to be a boolean tensor, but got "
                                   f"a tensor with dtype {scalar_type_name(cond.dtype)}")
            warnings.warn("where received a uint8 condition tensor. This behavior is "
                          "deprecated and will be removed in a future version of PyTorch. "
                          "Use a boolean condition instead.", UserWarning, stacklevel=3)
            cond = cond.astype(np.bool_)
        a, b = promote_arrays(a, b)
        self.cond = cond
        if not hasattr(a, "dtype") and not hasattr(b, "dtype"):
            # two Python numbers: the result has PyTorch's dtype for them
            ka, kb = _kind(a), _kind(b)
            if type(a) is complex or type(b) is complex:
                dt = _dt._default[0].to_complex().np
            elif ka == "f" or kb == "f":
                dt = default_float_np()
            else:
                dt = np.bool_ if ka == "b" and kb == "b" else np.int64
            return np.where(cond, a, b).astype(dt)
        return np.where(cond, a, b)

    def backward(self, gy):
        from ember._tensor import _make
        cond, = self._saved_and_hooked(self.cond)[1]  # as the hooks' unpack gives it
        c = _make(cond)
        e = self._edges
        if gy._requires_grad and _grad_state.grad_enabled:
            # recorded (create_graph): PyTorch's formula, ``where(cond, grad, 0)``
            return (None, where(c, gy, 0.0) if e[1] is not None else None,
                    where(c, 0.0, gy) if e[2] is not None else None)
        return (None,
                gy.masked_fill(~c, 0.0) if e[1] is not None else None,
                gy.masked_fill(c, 0.0) if e[2] is not None else None)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    complex32_math = True
    torchscript = "where"
    _edge_inputs = (1, 2)  # PyTorch's node lists the two values, not the condition


class Lerp(Primitive):
    broadcasts = True
    save_inputs = (0, 1, 2)

    def forward(self, start, end, weight):
        if start.dtype.kind not in "fc" and not reduced_float(start.dtype):
            raise not_implemented_for("lerp_kernel_scalar", start.dtype)
        for name, t in (("end", end), ("weight", weight)):
            if hasattr(t, "dtype") and t.dtype != start.dtype and (name == "end" or t.ndim):
                raise RuntimeError(f"expected dtype {_C_NAMES[start.dtype.name]} for `{name}` "
                                   f"but got dtype {_C_NAMES[t.dtype.name]}")
        if hasattr(weight, "dtype") and weight.dtype != start.dtype:
            weight = weight.astype(start.dtype)  # a 0-d weight does not change the dtype
        start, end = promote_arrays(start, end)
        if reduced_float(start.dtype) and type(end) is _ndarray and \
                (type(weight) in (float, int, bool) or type(weight) is _ndarray):
            return _lerp_opmath(start, end, weight)
        # from the nearer end, as PyTorch's kernel: lerp(-inf, -0.0, 0.8) is -inf (not
        # -inf + 0.8 * inf = NaN) and lerp(-0.0, -0.0, w) keeps -0.0
        with np.errstate(invalid="ignore", over="ignore"):
            d = end - start
            if not hasattr(weight, "shape") or weight.ndim == 0:
                return start + weight * d if abs(weight) < 0.5 else end - d * (1 - weight)
            return array_module(d).where(abs(weight) < 0.5, start + weight * d,
                                         end - d * (1 - weight))

    def backward(self, gy):
        start, end, w = self.saved_tensors
        gw = gy * cj(end - start) if self._edges[2] is not None else None
        return gy * cj(1 - w), gy * cj(w), gw

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "lerp"



def _check_float32(value):
    if abs(value) > 3.4028234663852886e38 and abs(value) != float("inf"):
        raise RuntimeError("value cannot be converted to type float without overflow")


def _lerp_opmath(start, end, weight):
    """lerp of float16/bfloat16 arrays with a Python number (or an array) weight, as
    PyTorch's CPU kernel computes it: in float32, from the nearer end (``start + w * d`` for
    ``|w| < 0.5``, ``end - d * (1 - w)`` otherwise), each a fused multiply-add, rounded
    to the dtype once."""
    from ember.ops._pow_kernels import _fma32
    f = np.float32
    if type(weight) is _ndarray:  # (a tensor weight, of the operands' dtype)
        w = weight.astype(f)
    else:
        _check_float32(weight)
        w = f(weight)
    s = start.astype(f)
    e = end.astype(f)
    with np.errstate(all="ignore"):
        d = e - s
        if w.ndim:
            s, e, d, w = np.broadcast_arrays(s, e, d, w)
            r = np.where(np.abs(w) < 0.5, _fma32(d, w, s), _fma32(-d, f(1) - w, e))
        else:
            r = _fma32(d, w, s) if abs(w) < 0.5 else _fma32(-d, f(1) - w, e)
    return r.astype(start.dtype)


class LerpTensor(Lerp):
    _node_name = "LerpBackward1"  # a Tensor weight: PyTorch's second overload
    _op_name = "Lerp"


_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
            "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool", "complex64": "c10::complex<float>",
            "complex128": "c10::complex<double>", "bfloat16": "c10::BFloat16"}



def where(condition, input=None, other=None, *, out=None):
    """``input`` where ``condition`` holds, else ``other``; with one argument, ``nonzero``.

    ``input`` and ``other`` are tensors or Python numbers (tensors only with ``out=``,
    as in PyTorch); a uint8 condition is read as bool, with PyTorch's deprecation
    warning."""
    if input is None and other is None:
        if out is not None:
            raise TypeError("where() got an unexpected keyword argument 'out'")
        return condition.nonzero(as_tuple=True)
    if input is None or other is None:
        got = ", ".join(type(v).__name__
                        for v in (condition, input, other))
        raise TypeError(f"where() received an invalid combination of arguments - got ({got})")
    result = Where.apply(condition, input, other)
    if out is None:
        return result
    for pos, name, v in ((2, "input", input), (3, "other", other)):
        if not isinstance(v, Tensor):
            raise TypeError(f"where(): argument '{name}' (position {pos}) must be Tensor, not "
                            f"{type(v).__name__}")
    return write_out(result, out, "where", (condition, input, other))


@with_out
def lerp(input, end, weight, *, out=None):
    """``input + weight * (end - input)``."""
    if not isinstance(end, Tensor):
        raise TypeError(f"lerp(): argument 'end' (position 1) must be Tensor, not "
                        f"{type(end).__name__}")
    return (LerpTensor if isinstance(weight, Tensor) else Lerp).apply(input, end, weight)



def _check_tensors(op, tensor1, tensor2):
    for i, (name, t) in enumerate((("tensor1", tensor1), ("tensor2", tensor2))):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): argument '{name}' (position {i + 1}) must be Tensor, "
                            f"not {type(t).__name__}")


def _in_common_dtype(x, t1, t2):
    """The three operands in their PyTorch result dtype, in which addcmul and addcdiv
    compute: a bfloat16 factor times a float32 one is a float32 product, and a float32
    quotient added to float64 is a float64 one, not rounded to float32 first."""
    if x.dtype == t1.dtype == t2.dtype:
        return x, t1, t2
    from ember._tensor import _make
    dt = _dt.result_type_of(_make(x, False), _make(t1, False), _make(t2, False)).np
    return tuple(a if a.dtype == dt else a.astype(dt) for a in (x, t1, t2))


class Addcmul(Primitive):
    """``x + value * t1 * t2`` in one node, as PyTorch's; computed as the products and
    the sum would be, one rounding each."""
    broadcasts = True
    save_inputs = (1, 2)
    jvp = _jvp.diagonal
    batch = _batch.elementwise

    def forward(self, x, t1, t2, value):
        self.value = value
        x, t1, t2 = _in_common_dtype(x, t1, t2)
        dt = x.dtype
        if reduced_float(dt) and t1.dtype == dt and t2.dtype == dt:
            # PyTorch's kernel: float32, value * t1 then a fused multiply-add with t2 and
            # x, rounded to the dtype once
            from ember.ops._pow_kernels import _fma32
            _check_float32(value)
            f = np.float32
            shape = np.broadcast_shapes(x.shape, t1.shape, t2.shape)
            with np.errstate(all="ignore"):
                p = np.broadcast_to(f(value) * t1.astype(f), shape)
                r = _fma32(p, t2.astype(f), x.astype(f))
            return r.astype(dt)
        p = t1 if value == 1 else Mul.forward(self, value, t1)
        return Add.forward(self, x, Mul.forward(self, p, t2))

    def backward(self, gy):
        t1, t2 = self.saved_tensors
        e, v = self._edges, self.value
        g1 = g2 = None
        if e[1] is not None:
            # torch's order: the number times the tensor first (in float16, a product
            # computed in float32 and rounded), then the incoming gradient
            g1 = gy * cj(t2 if v == 1 else t2 * v)
        if e[2] is not None:
            g2 = gy * cj(t1 if v == 1 else t1 * v)
        return gy, g1, g2, None


class Addcdiv(Primitive):
    """``x + value * (t1 / t2)`` in one node, as PyTorch's; computed as the quotient,
    product and sum would be, one rounding each."""
    broadcasts = True
    save_inputs = (1, 2)
    jvp = _jvp.diagonal
    batch = _batch.elementwise

    def forward(self, x, t1, t2, value):
        self.value = value
        x, t1, t2 = _in_common_dtype(x, t1, t2)
        dt = x.dtype
        if reduced_float(dt) and t1.dtype == dt and t2.dtype == dt:
            # PyTorch's kernel: x + value * t1 / t2 in float32, rounded to the dtype once
            _check_float32(value)
            f = np.float32
            with np.errstate(all="ignore"):
                r = x.astype(f) + f(value) * t1.astype(f) / t2.astype(f)
            return r.astype(dt)
        q = Div.forward(self, t1, t2)
        return Add.forward(self, x, Mul.forward(self, value, q))

    def backward(self, gy):
        t1, t2 = self.saved_tensors
        e = self._edges
        v = self.value
        # torch's formulas and order: gy * (v / t2), -gy * (v * t1 / (t2 * t2)), with
        # v / t2 a true division (not Python's reciprocal times v)
        g1 = g2 = None
        if e[1] is not None:
            g1 = gy * cj(_div(v, t2))
        if e[2] is not None:
            g2 = -gy * cj(t1 * v / (t2 * t2))
        return gy, g1, g2, None


@with_out
def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 * tensor2``."""
    _check_tensors("addcmul", tensor1, tensor2)
    if input.dtype.name == "bool":
        raise RuntimeError('"addcmul_cpu_out" not implemented for \'Bool\'')
    if "complex32" in (input.dtype.name, tensor1.dtype.name, tensor2.dtype.name):
        # PyTorch's ComplexHalf kernel rounds the product before the sum
        return input + value * tensor1 * tensor2 if value != 1 else input + tensor1 * tensor2
    return Addcmul.apply(input, tensor1, tensor2, value)


@with_out
def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    """``input + value * tensor1 / tensor2``."""
    _check_tensors("addcdiv", tensor1, tensor2)
    if "complex32" in (input.dtype.name, tensor1.dtype.name, tensor2.dtype.name):
        raise NotImplementedError('"addcdiv_cpu_out" not implemented for \'ComplexHalf\'')
    return Addcdiv.apply(input, tensor1, tensor2, value)


