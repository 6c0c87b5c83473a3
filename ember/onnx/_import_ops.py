"""ONNX converters: constants, casts, elementwise math and logic, reductions."""
import math

import numpy as np

from ember import _core as E
from ember.onnx import _proto
from ember.onnx._import import UnsupportedOnnxOp, _tensor_of
from ember.onnx._registry import importer


def ints(v):
    """An ONNX int list given as an attribute (list) or an input (int64 Tensor)."""
    if v is None:
        return None
    if isinstance(v, E.Tensor):
        return [int(i) for i in v.reshape(-1).tolist()]
    return [int(i) for i in v]


def ember_dtype(elem_type, what="Cast"):
    np_dt = _proto.np_dtype_of(elem_type)
    try:
        return E.backend.dtypes.from_numpy_dtype(np_dt)
    except TypeError:
        onnx = _proto.require_onnx()
        raise UnsupportedOnnxOp(f"ember.onnx: {what} to ONNX type "
                                f"{onnx.TensorProto.DataType.Name(elem_type)}, which ember "
                                "tensors do not have") from None


def const(value, like=None):
    """A constant Tensor (on ``like``'s device when given)."""
    t = _tensor_of(np.asarray(value), "constant")
    return t if like is None else t.to(like.device)


# ---- constants, identity, casts -------------------------------------------------------

@importer("Constant")
def _constant(cx, value=None, value_float=None, value_floats=None, value_int=None,
              value_ints=None, value_string=None, value_strings=None, sparse_value=None):
    if value is not None:
        return _tensor_of(value, "Constant")
    if value_float is not None:
        return const(np.float32(value_float))
    if value_floats is not None:
        return const(np.asarray(value_floats, np.float32))
    if value_int is not None:
        return const(np.int64(value_int))
    if value_ints is not None:
        return const(np.asarray(value_ints, np.int64))
    raise UnsupportedOnnxOp("ember.onnx: Constant of strings or sparse values")


@importer("Identity")
def _identity(cx, x):
    return x


_FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


def _to(x, target, saturate):
    """``x.to(target)``, with ONNX's rules for float8 targets: ``saturate`` clamps values
    beyond the type's range (infinities included) to its largest finite value; without
    it they become NaN (or infinity where the type has one)."""
    if target.name not in _FLOAT8 or not x.is_floating_point():
        return x.to(target)
    import ml_dtypes
    big = float(ml_dtypes.finfo(target.np).max)
    xf = x.to(E.float32)
    if saturate:
        return E.where(E.isnan(xf), xf, E.clamp(xf, -big, big)).to(target)
    over = E.abs(xf) > big
    if target.name == "float8_e5m2":
        special = E.where(xf > 0, E.tensor(math.inf), E.tensor(-math.inf))
    else:
        special = E.full_like(xf, math.nan)
    return E.where(over, special, xf).to(target)


def _to_e8m0(x, saturate, round_mode):
    """ONNX's cast to FLOAT8E8M0 (a power of two, no sign): the float32 value's exponent
    field, moved up by one when ``round_mode`` says so: "up" whenever the mantissa is not
    zero, "nearest" when its top bit is set and the rest or the exponent's parity does
    not make it a tie kept down, "down" never. With ``saturate`` the largest exponent
    is not rounded past; NaN and infinities become NaN (torch's conversion differs:
    it rounds to nearest, so ONNX's rule is its own)."""
    if round_mode not in ("up", "down", "nearest"):
        raise UnsupportedOnnxOp(f"ember.onnx: Cast to FLOAT8E8M0 with round_mode "
                                f"{round_mode!r}")
    bits = np.ascontiguousarray(x.detach().to(E.float32).numpy()).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    mantissa = bits & 0x7FFFFF
    if round_mode == "up":
        up = mantissa > 0
    elif round_mode == "nearest":
        up = ((bits & 0x400000) > 0) & (((bits & 0x3FFFFF) > 0) | (exponent > 0))
    else:
        up = np.zeros(bits.shape, bool)
    up &= ~special
    if saturate:
        up &= exponent != 0xFE
    out = np.where(special, 0xFF, exponent + up).astype(np.uint8)
    return E.from_numpy(out.view(E.float8_e8m0fnu.np).copy())


@importer("Cast")
def _cast(cx, x, to, saturate=1, round_mode="up"):
    target = ember_dtype(to)
    if target.name == "float8_e8m0fnu" and x.is_floating_point():
        return _to_e8m0(x, saturate, round_mode)
    return _to(x, target, saturate)


@importer("CastLike")
def _cast_like(cx, x, like, saturate=1, round_mode="up"):
    if like.dtype.name == "float8_e8m0fnu" and x.is_floating_point():
        return _to_e8m0(x, saturate, round_mode)
    return _to(x, like.dtype, saturate)


# ---- elementwise arithmetic -----------------------------------------------------------

def _same_type(fn):
    """ONNX arithmetic keeps its operands' type (no promotion): int stays int."""
    def f(cx, a, b):
        return fn(a, b)
    return f


importer("Add")(_same_type(E.add))
importer("Sub")(_same_type(E.sub))
importer("Mul")(_same_type(E.mul))


@importer("Div")
def _div(cx, a, b):
    if not a.is_floating_point():
        return E.div(a, b, rounding_mode="trunc")
    return E.div(a, b)


@importer("Mod")
def _mod(cx, a, b, fmod=0):
    return E.fmod(a, b) if fmod else E.remainder(a, b)


@importer("Pow")
def _pow(cx, a, b):
    y = E.pow(a, b.to(a.dtype) if a.is_floating_point() else b)
    return y.to(a.dtype) if y.dtype != a.dtype else y


def _variadic(fn):
    def f(cx, *xs):
        y = xs[0]
        for x in xs[1:]:
            y = fn(y, x)
        return y
    return f


importer("Sum")(_variadic(E.add))
importer("Max")(_variadic(E.maximum))
importer("Min")(_variadic(E.minimum))


@importer("Mean")
def _mean(cx, *xs):
    return _variadic(E.add)(cx, *xs) / len(xs)


_UNARY = {
    "Abs": E.abs, "Neg": E.neg, "Exp": E.exp, "Log": E.log, "Sqrt": E.sqrt,
    "Reciprocal": E.reciprocal, "Floor": E.floor, "Ceil": E.ceil, "Sign": E.sign,
    "Sin": E.sin, "Cos": E.cos, "Tan": E.tan, "Asin": E.asin, "Acos": E.acos, "Atan": E.atan,
    "Sinh": E.sinh, "Cosh": E.cosh, "Asinh": E.asinh, "Acosh": E.acosh, "Atanh": E.atanh,
    "Erf": E.erf, "Round": E.round, "Not": E.logical_not, "Sigmoid": E.sigmoid,
    "Tanh": E.tanh, "Relu": E.relu, "IsNaN": E.isnan, "BitwiseNot": E.bitwise_not,
}
for _name, _fn in _UNARY.items():
    importer(_name)((lambda fn: lambda cx, x: fn(x))(_fn))


@importer("IsInf")
def _isinf(cx, x, detect_negative=1, detect_positive=1):
    if detect_negative and detect_positive:
        return E.isinf(x)
    if detect_negative:
        return E.isneginf(x)
    if detect_positive:
        return E.isposinf(x)
    return E.zeros_like(x, dtype=E.bool)


@importer("Clip")
def _clip(cx, x, lo=None, hi=None, min=None, max=None):  # noqa: A002 - ONNX's names
    lo = min if lo is None else lo
    hi = max if hi is None else hi
    if lo is not None:
        x = E.maximum(x, lo if isinstance(lo, E.Tensor) else const(lo, x).to(x.dtype))
    if hi is not None:
        x = E.minimum(x, hi if isinstance(hi, E.Tensor) else const(hi, x).to(x.dtype))
    return x


# ---- comparison and logic -------------------------------------------------------------

for _name, _fn in {"Equal": E.eq, "Less": E.lt, "LessOrEqual": E.le, "Greater": E.gt,
                   "GreaterOrEqual": E.ge, "And": E.logical_and, "Or": E.logical_or,
                   "Xor": E.logical_xor, "BitwiseAnd": E.bitwise_and,
                   "BitwiseOr": E.bitwise_or, "BitwiseXor": E.bitwise_xor}.items():
    importer(_name)(_same_type(_fn))


@importer("Where")
def _where(cx, cond, a, b):
    return E.where(cond, a, b)


@importer("BitShift")
def _bitshift(cx, a, b, direction):
    # uint8 shifts as unsigned; wider unsigned types are not ember dtypes
    if direction == "LEFT":
        return E.bitwise_left_shift(a, b)
    return E.bitwise_right_shift(a, b)


# ---- reductions ------------------------------------------------------------------------

def _axes(cx, axes_input, axes_attr, ndim, noop_with_empty_axes):
    axes = ints(axes_input) if axes_input is not None else ints(axes_attr)
    if not axes:
        return None if not noop_with_empty_axes else ()
    return tuple(a % ndim if ndim else 0 for a in axes)


def _reduction(kernel):
    def f(cx, x, axes_in=None, axes=None, keepdims=1, noop_with_empty_axes=0):
        dims = _axes(cx, axes_in, axes, x.dim(), noop_with_empty_axes)
        if dims == ():
            return x
        if dims is None:
            dims = tuple(range(x.dim()))
        return kernel(x, dims, bool(keepdims))
    return f


def _empty_extreme(x, dims, keep, value):
    shape = [1 if i in dims else s for i, s in enumerate(x.shape)] if keep else \
        [s for i, s in enumerate(x.shape) if i not in dims]
    return E.full(shape, value, dtype=x.dtype)


def _lowest(x):
    if x.is_floating_point():
        return -math.inf
    return False if x.dtype == E.bool else int(np.iinfo(x.numpy().dtype).min)


def _highest(x):
    if x.is_floating_point():
        return math.inf
    return True if x.dtype == E.bool else int(np.iinfo(x.numpy().dtype).max)


def _amax(x, dims, keep):
    if x.numel() == 0:
        lo = _lowest(x)
        return _empty_extreme(x, dims, keep, lo)
    return E.amax(x, dims, keepdim=keep)


def _amin(x, dims, keep):
    if x.numel() == 0:
        hi = _highest(x)
        return _empty_extreme(x, dims, keep, hi)
    return E.amin(x, dims, keepdim=keep)


def _sum(x, dims, keep):
    y = E.sum(x, dims, keepdim=keep)
    return y.to(x.dtype) if y.dtype != x.dtype else y


def _prod(x, dims, keep):
    y = x
    for d in sorted(dims, reverse=True):
        y = E.prod(y, d, keepdim=keep)
    return y.to(x.dtype) if y.dtype != x.dtype else y


def _logsumexp(x, dims, keep):
    if x.numel() == 0:
        return _empty_extreme(x, dims, keep, -math.inf)
    return E.logsumexp(x, dims, keepdim=keep)


_REDUCTIONS = {
    "ReduceSum": _sum,
    "ReduceMean": lambda x, d, k: E.mean(x, d, keepdim=k),
    "ReduceMax": _amax,
    "ReduceMin": _amin,
    "ReduceProd": _prod,
    "ReduceL1": lambda x, d, k: _sum(E.abs(x), d, k),
    "ReduceL2": lambda x, d, k: E.sqrt(_sum(x * x, d, k)).to(x.dtype),
    "ReduceSumSquare": lambda x, d, k: _sum(x * x, d, k),
    "ReduceLogSum": lambda x, d, k: E.log(_sum(x, d, k)),
    "ReduceLogSumExp": _logsumexp,
}
for _name, _kernel in _REDUCTIONS.items():
    importer(_name)(_reduction(_kernel))


def _arg(kernel):
    def f(cx, x, axis=0, keepdims=1, select_last_index=0):
        if select_last_index:
            n = x.shape[axis]
            y = kernel(E.flip(x, [axis]), axis, keepdim=bool(keepdims))
            return (n - 1) - y
        return kernel(x, axis, keepdim=bool(keepdims))
    return f


importer("ArgMax")(_arg(E.argmax))
importer("ArgMin")(_arg(E.argmin))


@importer("CumSum")
def _cumsum(cx, x, axis, exclusive=0, reverse=0):
    return _scan(E.cumsum, 0, x, axis, exclusive, reverse)


@importer("CumProd")
def _cumprod(cx, x, axis, exclusive=0, reverse=0):
    return _scan(E.cumprod, 1, x, axis, exclusive, reverse)


def _scan(kernel, identity, x, axis, exclusive, reverse):
    d = int(axis.item()) if isinstance(axis, E.Tensor) else int(axis)
    d %= x.dim()
    if reverse:
        x = E.flip(x, [d])
    y = kernel(x, d)
    if y.dtype != x.dtype:
        y = y.to(x.dtype)
    if exclusive:
        pad = E.full_like(E.narrow(y, d, 0, 1), identity)
        y = E.cat([pad, E.narrow(y, d, 0, y.shape[d] - 1)], d)
    if reverse:
        y = E.flip(y, [d])
    return y


@importer("Det")
def _det(cx, x):
    return E.linalg.det(x)


@importer("MatMul")
def _matmul(cx, a, b):
    return E.matmul(a, b)


@importer("Gemm")
def _gemm(cx, a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    a = a.transpose(0, 1) if transA else a
    b = b.transpose(0, 1) if transB else b
    y = E.matmul(a, b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        y = y + (c * beta if beta != 1.0 else c)
    return y


@importer("Einsum")
def _einsum(cx, *xs, equation):
    return E.einsum(equation, *xs)
