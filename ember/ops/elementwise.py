"""Elementwise arithmetic ops (binary and ternary), with the Tensor methods and operators
of these and of the comparison and logic ops (which live in ``comparison``).

Each primitive's forward works on arrays and its backward on Tensors; gradients
of broadcast inputs are summed back to shape by the engine, never here.
"""
import math

import numpy as np

from ember._tensor import Tensor
from ember.autograd.node import Primitive, _read_saved
from ember.ops import _batch, _jvp
from ember.ops._util import (
    check_number_fits,
    cj,
    default_float_np,
    not_implemented_for,
    number_operand,
    opmath_number,
    promote_arrays,
    reduced_float,
    with_out,
    write_out,
)
from ember.ops._variants import Variants
from ember.ops._variants import bind as bind_variants

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
from ember.ops.composite_node import one_node

_ndarray = np.ndarray


def _float_result(a, b):
    """Operands of true division: integers divide as the default float dtype."""
    a, b = promote_arrays(a, b)
    ka = a.dtype.kind if type(a) is np.ndarray or hasattr(a, "dtype") else \
        ("f" if type(a) is float or type(a) is complex else "i")
    kb = b.dtype.kind if type(b) is np.ndarray or hasattr(b, "dtype") else \
        ("f" if type(b) is float or type(b) is complex else "i")
    if ka not in "fcV" and kb not in "fcV":
        f = default_float_np()
        a = a.astype(f) if hasattr(a, "astype") else float(a)
        b = b.astype(f) if hasattr(b, "astype") else float(b)
    return a, b


def _reduced_scalar(a, b):
    """``b`` as the number PyTorch's CPU kernels compute ``op(a, b)`` with in float32,
    where ``a`` is a float16/bfloat16 array and ``b`` a Python number or a 0-d array
    (whose own dtype does not change the result's); None otherwise."""
    if type(a) is not _ndarray or not reduced_float(a.dtype):
        return None
    tb = type(b)
    if tb is float or tb is int:
        return b
    if tb is _ndarray and not b.ndim and a.ndim and \
            (b.dtype.kind in "biuf" or reduced_float(b.dtype)):
        return b[()]
    return None


def _is_bool(x):
    return x.dtype.kind == "b" if hasattr(x, "dtype") else type(x) is bool


def _kind(x):
    if hasattr(x, "dtype"):
        return x.dtype.kind
    return "b" if type(x) is bool else "f" if isinstance(x, float) else \
        "c" if isinstance(x, complex) else "i"


def _check_divisor(kernel, a, b):
    """Integer division by zero raises (PyTorch's ZeroDivisionError); bool has no kernel."""
    k = _kind(a) if hasattr(a, "dtype") or not hasattr(b, "dtype") else _kind(b)
    if k == "b" and _kind(b) == "b" and _kind(a) == "b":
        raise not_implemented_for(kernel, np.bool_)
    if k in "iu":
        zero = b == 0  # no np.asarray: CuPy arrays stay on their device
        if zero.any() if hasattr(zero, "any") else zero:
            raise RuntimeError("ZeroDivisionError")



def _operand(x):
    return isinstance(x, (Tensor, int, float, bool, complex, np.generic, np.ndarray)) or \
        hasattr(x, "__cuda_array_interface__")


def _checked(op, symbol):
    """A dunder that raises Python's TypeError for operands that are not numbers or arrays."""
    def f(self, other):
        if not _operand(other):
            raise TypeError(f"unsupported operand type(s) for {symbol}: 'Tensor' and "
                            f"'{type(other).__name__}'")
        return op(self, other)
    return f


class Add(Primitive):
    broadcasts = True
    batch = _batch.elementwise
    onnx = "Add"
    complex32_math = True

    def forward(self, a, b):
        if type(a) is not _ndarray or type(b) is not _ndarray or a.dtype != b.dtype:
            # (two arrays of one dtype, the common case, need no promotion)
            a, b = promote_arrays(a, b)
            if type(b) is float or type(b) is int:
                b = number_operand(a, b)
        return a + b

    def backward(self, gy):
        return gy, gy

    def jvp(self, ta, tb):
        return ta if tb is None else tb if ta is None else ta + tb

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``; before broadcast reduction)."""
        g = grads[0]
        return [g, g]

    def forward_out(self, a, b, out):
        """``forward`` written into ``out(0, shape, dtype)`` (the compile plan's buffers;
        two floating arrays of one dtype, or one and a Python number)."""
        return _binary_out(np.add, a, b, out)

    fused = "{0} + {1}"  # one element, for the compile plan's fused loops


class AddScalar(Add):
    """``add.Scalar``: a tensor plus a Python number, the node PyTorch's own composites
    record (``AddBackward1``, one edge); ``x + 1.0`` from Python stays :class:`Add`."""
    _node_name = "AddBackward1"
    _op_name = "Add"   # the same op: Add's spellings write it
    broadcasts = False


class AddScaled(Primitive):
    """``a + alpha * b``."""
    broadcasts = True
    _node_name = "AddBackward0"
    batch = _batch.elementwise
    complex32_math = True

    def forward(self, a, b, alpha):
        a, b = promote_arrays(a, b)
        self.alpha = alpha
        k = _kind(a) if hasattr(a, "dtype") else _kind(b)
        if isinstance(alpha, bool) and k != "b":
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
        if isinstance(alpha, float) and k in "iub":
            raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                               "point number.")
        if k == "b":
            return np.logical_or(a, np.logical_and(b, bool(alpha)))
        dt = getattr(a, "dtype", None)
        wider = _WIDER.get(dt)
        if reduced_float(dt):
            check_number_fits(alpha, dt)
            wider = np.float32  # bfloat16 as float16
            if type(b) in (float, int):
                b = _to_reduced(b, dt)  # a number other is the dtype's value, like alpha
        if wider is not None and isinstance(alpha, (int, float)) and hasattr(b, "dtype"):
            # PyTorch casts alpha to the result dtype and, for float32, computes a fused
            # multiply-add (one rounding; the same bits as float64 arithmetic rounded
            # once), for float16 and bfloat16 in float32
            if wider is np.float32:
                return _add_scaled_reduced(a, b, float(_to_reduced(alpha, dt)))
            al = float(dt.type(alpha))
            return (a.astype(wider) + al * b.astype(wider)).astype(a.dtype)
        return a + alpha * b

    def backward(self, gy):
        return gy, gy * self.alpha, None

    def jvp(self, ta, tb, _):
        tb = None if tb is None else tb * self.alpha
        return ta if tb is None else tb if ta is None else ta + tb


_WIDER = {np.dtype(np.float32): np.float64, np.dtype(np.float16): np.float32}


def _to_reduced(x, dt):
    """The Python number ``x`` as a 0-d array of the float16/bfloat16 dtype ``dt``,
    converted through float32 as PyTorch converts it."""
    with np.errstate(over="ignore"):
        return np.asarray(np.float32(x)).astype(dt)


def _add_scaled_reduced(a, b, alpha):
    """``a + alpha * b`` for float16/bfloat16 arrays (``alpha`` already the dtype's
    value), as PyTorch's CPU loop computes it: in float32, rounded once, by its vector
    kernel; the elements its scalar loop takes (past the last whole vector step of each
    inner run or thread's chunk, or all where the operands cannot be vectorised) round
    ``alpha * b`` to the dtype before the sum."""
    dt, f = a.dtype, np.float32
    if type(a) is not _ndarray or type(b) is not _ndarray:  # CuPy: one rounding throughout
        return (a.astype(f) + f(alpha) * b.astype(f)).astype(dt)
    from ember.ops._pow_kernels import _BLOCK, _flat, _iteration, _threads, vector_mask
    shape = np.broadcast_shapes(a.shape, b.shape)
    perm, inner, vec = _iteration([a, b], shape)
    n = int(np.prod(shape, dtype=np.int64))
    # the loop runs on float32 vectors: as many elements per step as float32's
    mask = vector_mask(n, inner, vec, _BLOCK[4], _threads())
    af = _flat(a, shape, perm).astype(f)
    p = f(alpha) * _flat(b, shape, perm).astype(f)
    out = af + p
    if not mask.all():
        out = np.where(mask, out, af + p.astype(dt).astype(f))
    out = out.astype(dt)
    return out.reshape([shape[d] for d in perm]).transpose(np.argsort(perm))


class Sub(Primitive):
    broadcasts = True
    batch = _batch.elementwise
    onnx = "Sub"
    complex32_math = True

    def forward(self, a, b):
        if type(a) is _ndarray and type(b) is _ndarray and a.dtype == b.dtype and \
                a.dtype.kind != "b":
            return a - b  # the common case: nothing to promote, no bool to refuse
        # checked before promotion, which would turn a bool tensor into the other's dtype
        if _is_bool(a) or _is_bool(b):
            raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not "
                               "supported. If you are trying to invert a mask, use the `~` or "
                               "`logical_not()` operator instead.")
        a, b = promote_arrays(a, b)
        if type(b) is float or type(b) is int:
            b = number_operand(a, b)
        return a - b

    def backward(self, gy):
        return gy, -gy if self._edges[1] is not None else None

    def jvp(self, ta, tb):
        if tb is None:
            return ta
        return -tb if ta is None else ta - tb

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``; before broadcast reduction)."""
        g = grads[0]
        if self._edges[1] is None:
            return [g, None]
        return [g, np.negative(g, out=None if out is None else out(1, g.shape, g.dtype))]

    def forward_out(self, a, b, out):
        """``forward`` written into ``out(0, shape, dtype)`` (the compile plan's buffers;
        two floating arrays of one dtype, or one and a Python number)."""
        return _binary_out(np.subtract, a, b, out)

    fused = "{0} - {1}"  # one element, for the compile plan's fused loops


class Mul(Primitive):
    broadcasts = True
    save_inputs = (0, 1)

    def forward(self, a, b):
        if type(a) is not _ndarray or type(b) is not _ndarray or a.dtype != b.dtype:
            # (two arrays of one dtype, the common case, need no promotion)
            if type(b) is _ndarray and not b.ndim:
                z = _reduced_scalar(a, b)  # a 0-d array beside float16: computed as a number
                if z is not None:
                    return opmath_number(np.multiply, a, z)
            a, b = promote_arrays(a, b)
            if type(b) is float or type(b) is int:
                b = number_operand(a, b)
                if type(b) is not _ndarray and reduced_float(getattr(a, "dtype", None)):
                    return opmath_number(np.multiply, a, b)
            elif (type(a) is float or type(a) is int) and \
                    reduced_float(getattr(b, "dtype", None)):
                return opmath_number(np.multiply, b, a)  # ``2.5 * x`` in a formula
        return a * b

    def backward(self, gy):
        a, b = _read_saved(self)  # (``saved_tensors``, read by the node itself)
        e = self._edges
        return (gy * cj(b) if e[0] is not None else None), \
            (gy * cj(a) if e[1] is not None else None)

    jvp = _jvp.multilinear(0, 1)
    batch = _batch.elementwise
    complex32_math = True
    onnx = "Mul"

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``; real operands, before broadcast reduction)."""
        g = grads[0]
        a, b = inputs
        res = [None, None]
        for i, other in ((0, b), (1, a)):
            if self._edges[i] is None:
                continue
            if out is None:
                res[i] = g * other
                continue
            o = getattr(other, "shape", g.shape)  # a Python number: g's shape
            shape = g.shape if g.shape == o else np.broadcast_shapes(g.shape, o)
            res[i] = np.multiply(g, other, out=out(i, shape, g.dtype))
        return res

    def forward_out(self, a, b, out):
        """``forward`` written into ``out(0, shape, dtype)`` (the compile plan's buffers;
        two floating arrays of one dtype, or one and a Python number)."""
        if type(a) is not _ndarray or type(b) is not _ndarray:
            r = _reduced_number_out(self, a, b, out)
            if r is not None:
                return r
        return _binary_out(np.multiply, a, b, out)

    fused = "{0} * {1}"  # one element, for the compile plan's fused loops


class MulScalar(Mul):
    """``mul.Scalar``: a tensor times a Python number, the node PyTorch's own composites
    record (``MulBackward1``, one edge); ``x * 2.0`` from Python stays :class:`Mul`."""
    _node_name = "MulBackward1"
    _op_name = "Mul"   # the same op: Mul's spellings write it
    broadcasts = False


class SubScalar(Sub):
    """``sub.Scalar``: a tensor minus a Python number, as PyTorch's own composites record
    it (``SubBackward1``, one edge); ``x - 2.0`` from Python stays :class:`Sub`."""
    _node_name = "SubBackward1"
    _op_name = "Sub"
    broadcasts = False


class Div(Primitive):
    broadcasts = True
    save_inputs = (0, 1)

    def forward(self, a, b):
        if type(a) is _ndarray and a.dtype.kind == "f":
            # the common cases: nothing to promote
            if type(b) is float:
                z = number_operand(a, b)
                if type(z) is _ndarray or not reduced_float(a.dtype):
                    return a / z
                return opmath_number(np.divide, a, b)
            if type(b) is _ndarray and b.dtype == a.dtype:
                return a / b
        if type(b) is _ndarray and not b.ndim:
            z = _reduced_scalar(a, b)  # a 0-d array beside float16: computed as a number
            if z is not None:
                return opmath_number(np.divide, a, z)
        a, b = _float_result(a, b)
        if type(b) is float or type(b) is int:
            b = number_operand(a, b)
            if type(b) is not _ndarray and reduced_float(getattr(a, "dtype", None)):
                return opmath_number(np.divide, a, b)
        return a / b

    def backward(self, gy):
        a, b = _read_saved(self)  # (``saved_tensors``, read by the node itself)
        e = self._edges
        ga = gy / cj(b) if e[0] is not None else None
        # -gy * (a / b) / b, in torch's order: a / b first, so that b * b never overflows
        # and the two parts of x / f(x)'s gradient cancel exactly where they should
        gb = -gy * cj(a / b / b) if e[1] is not None else None
        return ga, gb

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    onnx = "Div"

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``; real operands, before broadcast reduction)."""
        g = grads[0]
        a, b = inputs
        e = self._edges
        ga = g / b if e[0] is not None else None
        gb = -g * (a / b / b) if e[1] is not None else None  # backward's order
        return [ga, gb]

    def forward_out(self, a, b, out):
        """``forward`` written into ``out(0, shape, dtype)`` (the compile plan's buffers;
        two floating arrays of one dtype, or one and a Python number)."""
        if type(a) is not _ndarray or type(b) is not _ndarray:
            r = _reduced_number_out(self, a, b, out)
            if r is not None:
                return r
        return _binary_out(np.divide, a, b, out)

    fused = "{0} / {1}"  # one element, for the compile plan's fused loops


class DivScalar(Div):
    """``div.Scalar``: a tensor divided by a Python number, the node PyTorch's own
    composites record (``DivBackward1``, one edge); ``x / 2.0`` from Python stays
    :class:`Div`."""
    _node_name = "DivBackward1"
    _op_name = "Div"   # the same op: Div's spellings write it
    broadcasts = False


# PyTorch's nodes for subtraction with a scale or reversed operands: the same arithmetic
# as ``AddScaled``/``Sub`` on (other, input), listing the inputs in PyTorch's order
class SubScaled(AddScaled):
    _node_name = "SubBackward0"
    _op_name = "AddScaled"


class RsubScaled(AddScaled):
    _node_name = "RsubBackward0"
    _op_name = "AddScaled"
    _edge_inputs = (1, 0)


class Rsub(Sub):
    _node_name = "RsubBackward0"
    _op_name = "Sub"
    _edge_inputs = (1, 0)


class RsubScalar(Sub):
    _node_name = "RsubBackward1"  # ``number - tensor``: PyTorch's Scalar overload
    _op_name = "Sub"
    _edge_inputs = (1,)


def _rdiv(self, other):
    """``other / self`` for a number ``other``: the reciprocal times ``other``, as
    PyTorch computes it (its node is a ``MulBackward0``)."""
    from ember.ops.unary import reciprocal
    return _mul(reciprocal(self), other)


def _reduced_number_out(op, a, b, out):
    """``op.forward(a, b)`` written into ``out(0, shape, dtype)`` where a float16/bfloat16
    array meets a Python number (computed in float32, as ``forward`` does); else None."""
    arr = a if type(a) is _ndarray else b
    if not reduced_float(getattr(arr, "dtype", None)):
        return None
    r = op.forward(a, b)
    o = out(0, r.shape, r.dtype)
    o[...] = r
    return o


def _binary_out(ufunc, a, b, out):
    """``ufunc(a, b)`` written into ``out(0, shape, dtype)``: two floating arrays of one
    dtype, or one and a Python number (NumPy casts the number to the array's dtype, as
    the operators do)."""
    if type(b) is not np.ndarray:
        t = a
    elif type(a) is not np.ndarray:
        t = b
    else:
        t = a if a.shape == b.shape else None
    shape = t.shape if t is not None else np.broadcast_shapes(a.shape, b.shape)
    return ufunc(a, b, out=out(0, shape, (a if t is None else t).dtype))


class FloorDivide(Primitive):
    broadcasts = True
    _node_name = "DivBackward1"

    def forward(self, a, b):
        z = _reduced_scalar(a, b)
        if z is not None:
            return opmath_number(np.floor_divide, a, z)
        a, b = promote_arrays(a, b)
        _check_divisor("div_floor_cpu", a, b)
        return np.floor_divide(a, b)

    def backward(self, gy):
        return gy * 0, gy * 0

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "floor_divide"


def _trunc_divide(a, b):
    return np.trunc(a / b)


class TruncDivide(Primitive):
    broadcasts = True
    _node_name = "DivBackward2"

    def forward(self, a, b):
        z = _reduced_scalar(a, b)
        if z is not None:
            return opmath_number(_trunc_divide, a, z)
        a, b = promote_arrays(a, b)
        _check_divisor("div_trunc_cpu", a, b)
        if a.dtype.kind == "f" if hasattr(a, "dtype") else isinstance(a, float):
            return np.trunc(a / b)
        q = np.abs(a) // np.abs(b)
        return np.where((a < 0) != (b < 0), -q, q).astype(q.dtype)

    def backward(self, gy):
        return gy * 0, gy * 0

    jvp = _jvp.diagonal
    batch = _batch.elementwise


class Remainder(Primitive):
    broadcasts = True
    _node_name = "RemainderBackward1"  # PyTorch's Tensor overload; a number: RemainderScalar
    save_inputs = (0, 1)

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
        _check_divisor("remainder_cpu", a, b)
        return np.remainder(a, b)

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

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
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


class Atan2(Primitive):
    broadcasts = True
    save_inputs = (0, 1)

    def forward(self, a, b):
        a, b = _float_result(a, b)
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

    def forward(self, a, b):
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
    """The next float after ``a`` towards ``b`` (``b`` in ``a``'s dtype)."""
    broadcasts = True

    def forward(self, a, b):
        b = b.astype(a.dtype, copy=False) if hasattr(b, "astype") else b
        return np.nextafter(a, b)

    def backward(self, gy):
        # a step of one ulp is locally constant: gradient 1 for a (also at +-inf, where
        # the step lands on the largest finite float), none for b
        return gy, None

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "nextafter"


class Hypot(Primitive):
    broadcasts = True
    save_inputs = (0, 1)
    save_output = True

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
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

    def forward(self, a, b):
        a, b = _float_result(a, b)
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


class Where(Primitive):
    broadcasts = True

    def forward(self, cond, a, b):
        if cond.dtype != np.bool_:
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a "
                               f"tensor with dtype {cond.dtype}")
        a, b = promote_arrays(a, b)
        self.cond = cond
        if not hasattr(a, "dtype") and not hasattr(b, "dtype"):
            # two Python numbers: the result has PyTorch's dtype for them
            k = "f" if _kind(a) == "f" or _kind(b) == "f" else \
                "b" if _kind(a) == "b" and _kind(b) == "b" else "i"
            dt = default_float_np() if k == "f" else np.bool_ if k == "b" else np.int64
            return np.where(cond, a, b).astype(dt)
        return np.where(cond, a, b)

    def backward(self, gy):
        from ember._tensor import _make
        c = _make(self.cond)
        e = self._edges
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
                type(weight) in (float, int, bool):
            return _lerp_opmath(start, end, weight)
        return start + weight * (end - start)

    def backward(self, gy):
        start, end, w = self.saved_tensors
        gw = gy * (end - start) if self._edges[2] is not None else None
        return gy * (1 - w), gy * w, gw

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "lerp"



def _check_float32(value):
    if abs(value) > 3.4028234663852886e38 and abs(value) != float("inf"):
        raise RuntimeError("value cannot be converted to type float without overflow")


def _lerp_opmath(start, end, weight):
    """lerp of float16/bfloat16 arrays with a Python number weight, as PyTorch's CPU
    kernel computes it: in float32, from the nearer end (``start + w * d`` for
    ``|w| < 0.5``, ``end - d * (1 - w)`` otherwise), each a fused multiply-add, rounded
    to the dtype once."""
    from ember.ops._pow_kernels import _fma32
    _check_float32(weight)
    f = np.float32
    w = f(weight)
    s = start.astype(f)
    e = end.astype(f)
    with np.errstate(all="ignore"):
        d = e - s
        r = _fma32(d, w, s) if abs(w) < 0.5 else _fma32(-d, f(1) - w, e)
    return r.astype(start.dtype)


class LerpTensor(Lerp):
    _node_name = "LerpBackward1"  # a Tensor weight: PyTorch's second overload
    _op_name = "Lerp"


_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
            "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool", "complex64": "c10::complex<float>",
            "complex128": "c10::complex<double>", "bfloat16": "c10::BFloat16"}


# ----- public functions ------------------------------------------------------------------
_add = Add.binary_function()
_sub = Sub.binary_function()
_mul = Mul.binary_function()
_div = Div.binary_function()


# add/sub/mul/div write out= themselves: with_out's extra call costs 10-20% of a small op
def add(input, other, *, alpha=1, out=None):
    """``input + alpha * other``, broadcasting, with PyTorch's type promotion."""
    if type(alpha) is int and alpha == 1:
        result = _add(input, other)
    else:
        result = AddScaled.apply(input, other, alpha)
    return result if out is None else write_out(result, out, "add")


def sub(input, other, *, alpha=1, out=None):
    """``input - alpha * other``."""
    if type(alpha) is int and alpha == 1:
        result = _sub(input, other)
    else:
        result = SubScaled.apply(input, other, -alpha)
    return result if out is None else write_out(result, out, "sub")


subtract = sub


def mul(input, other, *, out=None):
    """Elementwise product."""
    result = _mul(input, other)
    return result if out is None else write_out(result, out, "mul")


multiply = mul


def div(input, other, *, rounding_mode=None, out=None):
    """True division (integers give floats), or rounded with ``'trunc'`` or ``'floor'``."""
    if rounding_mode is None:
        result = _div(input, other)
    elif rounding_mode == "floor":
        result = DivFloor.apply(input, other)
    elif rounding_mode == "trunc":
        result = TruncDivide.apply(input, other)
    else:
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    return result if out is None else write_out(result, out, "div")


divide = div


@with_out
def true_divide(dividend, divisor, *, out=None):
    """True division."""
    return Div.apply(dividend, divisor)


@with_out
def floor_divide(input, other, *, out=None):
    """Division rounded toward negative infinity (Python's ``//``)."""
    return FloorDivide.apply(input, other)


@with_out
def remainder(input, other, *, out=None):
    """Python-style modulus: the result has the sign of the divisor."""
    return _remainder(input, other)


@with_out
def fmod(input, other, *, out=None):
    """C-style modulus: the result has the sign of the dividend."""
    op = FmodScalar if isinstance(input, Tensor) and not isinstance(other, Tensor) else Fmod
    return op.apply(input, other)


@with_out
def atan2(input, other, *, out=None):
    """Elementwise arctangent of ``input / other`` choosing the quadrant."""
    return Atan2.apply(input, other)


arctan2 = atan2


@with_out
def hypot(input, other, *, out=None):
    """``sqrt(input**2 + other**2)`` without overflow."""
    return Hypot.apply(input, other)


@with_out
def xlogy(input, other, *, out=None):
    """``input * log(other)``, 0 where ``input`` is 0."""
    return Xlogy.apply(input, other)


@with_out
def where(condition, input=None, other=None, *, out=None):
    """``input`` where ``condition`` holds, else ``other``; with one argument, ``nonzero``."""
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    return Where.apply(condition, input, other)


@with_out
def lerp(input, end, weight, *, out=None):
    """``input + weight * (end - input)``."""
    if not isinstance(end, Tensor):
        raise TypeError(f"lerp(): argument 'end' (position 1) must be Tensor, not "
                        f"{type(end).__name__}")
    return (LerpTensor if isinstance(weight, Tensor) else Lerp).apply(input, end, weight)


@with_out
def copysign(input, other, *, out=None):
    """``|input|`` with the sign of ``other`` (a floating result, as PyTorch)."""
    from ember.backend import dtypes
    dt = dtypes.result_type(input, other)
    if not dt.is_floating_point:
        dt = dtypes.get_default_dtype()
    return Copysign.apply(input.to(dt), other)


def rsub(input, other, *, alpha=1):
    """``other - alpha * input`` (subtraction with the operands reversed)."""
    if isinstance(other, Tensor):
        if type(alpha) is int and alpha == 1:
            return Rsub.apply(other, input)
        return RsubScaled.apply(other, input, -alpha)
    if alpha != 1:
        return other - input * alpha
    return RsubScalar.apply(other, input)


def _rsub_scalar(self, other):
    """``other - self`` for a number ``other`` (the reflected ``-``)."""
    return RsubScalar.apply(other, self)


@one_node("LogaddexpBackward0", 2)
@with_out
def logaddexp(input, other, *, out=None):
    """``log(exp(input) + exp(other))`` without overflow."""
    return _logaddexp(input, other, base2=False)


@one_node("Logaddexp2Backward0", 2)
@with_out
def logaddexp2(input, other, *, out=None):
    """``log2(2 ** input + 2 ** other)`` without overflow."""
    return _logaddexp(input, other, base2=True)


def _logaddexp(a, b, base2):
    if not base2 and any(isinstance(x, Tensor) and x.is_complex() for x in (a, b)):
        # complex: factor out the operand of larger real part, so exp cannot overflow
        a = a if isinstance(a, Tensor) else b * 0 + a
        b = b if isinstance(b, Tensor) else a * 0 + b
        first = a.real >= b.real
        big, small = where(first, a, b), where(first, b, a)
        # equal arguments (infinities included) give a + log(2) without inf - inf = nan,
        # the gradient shared between them as in PyTorch
        return where(a == b, (a + b) * 0.5 + math.log(2), big + (small - big).exp().log1p())
    for x in (a, b):
        if isinstance(x, Tensor) and not x.is_floating_point():
            raise not_implemented_for("logaddexp2_cpu" if base2 else "logaddexp_cpu",
                                      x._data.dtype)
    d = (a - b).abs()
    mid = (a + b) * 0.5  # equal arguments share the gradient, as in PyTorch
    if base2:
        rest = (-d).exp2().log1p() / math.log(2)
        same = mid + 1.0
    else:
        rest = (-d).exp().log1p()
        same = mid + math.log(2)
    # equal arguments (infinities included) give a + log(2) without inf - inf = nan
    return where(a == b, same, maximum(a, b) + rest)


def _check_tensors(op, tensor1, tensor2):
    for i, (name, t) in enumerate((("tensor1", tensor1), ("tensor2", tensor2))):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): argument '{name}' (position {i + 1}) must be Tensor, "
                            f"not {type(t).__name__}")


class Addcmul(Primitive):
    """``x + value * t1 * t2`` in one node, as PyTorch's; computed as the products and
    the sum would be, one rounding each."""
    broadcasts = True
    save_inputs = (1, 2)
    jvp = _jvp.diagonal
    batch = _batch.elementwise

    def forward(self, x, t1, t2, value):
        self.value = value
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


# ----- the public ops, each named once: function, Tensor method, in-place method ------------
_VARIANTS = [
    # arithmetic: the in-place result takes the promoted dtype, checked against self
    Variants("add sub subtract true_divide floor_divide addcmul addcdiv copysign",
             inplace=True, copies=False, promotes=True),
    Variants("mul multiply div divide remainder fmod atan2 lerp hypot xlogy", inplace=True,
             copies=True, promotes=True),
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
