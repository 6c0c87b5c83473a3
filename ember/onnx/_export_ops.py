"""ember IR op -> ONNX nodes: elementwise ops, fake quantization, linear algebra,
reductions and orderings.

A primitive's ONNX spelling is its class's ``onnx`` attribute: a string is one ONNX
node of that type over the op's operands (:func:`one_node`), a callable is a converter
``f(g, node, *args, **kwargs)``. The converters here are attached to their classes with
``@exports(SomeOpClass)``. Calls the capture records above the primitives (``view``,
``x[key]``, factories, sizes: ``ember._graph.names.RECORDED_CALLS``) have no class, so
their converters stay in :data:`EXPORTERS`, keyed by those names.

``args``/``kwargs`` are the recorded call's arguments (``Ref`` where a traced tensor or
size was), ``g`` the :class:`~ember.onnx._export.GraphBuilder`. A converter returns the
ONNX name of each output.

The registry and the shared helpers are in :mod:`ember.onnx._export_registry`; the
converters of shapes, joins, indexing and factories in :mod:`ember.onnx._export_shape`,
of the losses in :mod:`ember.onnx._export_losses` and of the network layers
(convolution, pooling, normalization, attention, recurrent layers, random ops) in
:mod:`ember.onnx._export_nn`, which this module imports so that importing it
registers every converter.
"""
import math

import numpy as np

from ember._graph.ir import Ref
from ember.onnx import (
    _export_losses,  # noqa: F401  (registers the losses' converters)
    _export_nn,  # noqa: F401  (registers the network layers' converters)
    _export_shape,  # noqa: F401  (registers the shapes', indexing's and factories' converters)
    _export_value_ops,  # noqa: F401  (and the data-shaped calls')
)
from ember.onnx._export import UnsupportedOnnxExport
from ember.onnx._export_registry import (
    EXPORTERS,
    _axes,
    _cast_to,
    _rank,
    _reduce_axes,
    converter,
    custom_symbolic,
    exportable_ops,
    exports,
    one_node,
)
from ember.ops import (
    activations,
    bitwise,
    conversion,
    division,
    elementwise,
    extrema,
    linalg,
    masking,
    nn_fused,
    power,
    quantization,
    reduction,
    reorder,
    scan,
    softmaxes,
    unary,
    vector_norms,
)

__all__ = ["EXPORTERS", "exports", "converter", "one_node", "custom_symbolic",
           "exportable_ops"]


# ---- elementwise -------------------------------------------------------------------------

@exports(unary.rsqrt.primitive)
def _rsqrt(g, node, x):
    return g.op("Reciprocal", [g.op("Sqrt", [g.tensor(x)])])


@exports(unary.square.primitive)
def _square(g, node, x):
    t = g.tensor(x)
    return g.op("Mul", [t, t])


@exports(unary.log1p.primitive)
def _log1p(g, node, x):
    return g.op("Log", [g.op("Add", [g.tensor(x), g.tensor(1.0, like=x)])])


@exports(unary.expm1.primitive)
def _expm1(g, node, x):
    return g.op("Sub", [g.op("Exp", [g.tensor(x)]), g.tensor(1.0, like=x)])


def _operands(g, node, a, b, compare=False):
    """Both operands as ONNX names of the node's result dtype (ONNX does not promote);
    a comparison's operands keep a tensor operand's dtype."""
    out_dt = np.dtype(node.outputs[0].dtype.np) if node.outputs[0].dtype is not None else None
    names = []
    for x in (a, b):
        if isinstance(x, Ref):
            name = g.tensor(x)
            if out_dt is not None and x.value.type == "Tensor" and g.np_dtype(x) != out_dt \
                    and not compare:
                name = g.op("Cast", [name], to=g.elem_type(out_dt))
            elif x.value.type == "int" and out_dt is not None and out_dt != np.int64 and \
                    not compare:
                name = g.op("Cast", [name], to=g.elem_type(out_dt))
            names.append(name)
        else:
            other = b if x is a else a
            dt = out_dt if not compare else \
                (g.np_dtype(other) if isinstance(other, Ref) else None)
            names.append(g.tensor(x, dtype=dt))
    return names


def _mod(python_remainder):
    def f(g, node, a, b):
        ins = _operands(g, node, a, b)
        fmod = int(not python_remainder or np.dtype(node.outputs[0].dtype.np).kind == "f")
        if python_remainder and fmod:
            # Python's remainder on floats: a - floor(a / b) * b
            q = g.op("Floor", [g.op("Div", ins)])
            return g.op("Sub", [ins[0], g.op("Mul", [q, ins[1]])])
        return g.op("Mod", ins, fmod=fmod)
    return f


exports(elementwise.Remainder)(_mod(True))
exports(elementwise.Fmod)(_mod(False))


@exports(division.FloorDivide)
def _floor_divide(g, node, a, b):
    """Integers: ``(a - a mod b) / b`` with Python's mod, an exact quotient (ONNX's Div
    rounds toward zero). Floats are refused: ``Floor(Div)`` differs from PyTorch's
    rounding of the quotient at some values."""
    if np.dtype(node.outputs[0].dtype.np).kind not in "iu":
        raise UnsupportedOnnxExport("floor_divide of floating-point tensors")
    ins = _operands(g, node, a, b)
    return g.op("Div", [g.op("Sub", [ins[0], g.op("Mod", ins, fmod=0)]), ins[1]])


@exports(power.Pow, power.PowScalar)
def _pow(g, node, a, b):
    ins = _operands(g, node, a, b)
    if isinstance(b, (int, float)) and b == 2:
        return g.op("Mul", [ins[0], ins[0]])
    return g.op("Pow", ins)


def _bitwise(bool_op, int_op):
    def f(g, node, *args):
        ins = [g.tensor(args[0])] if len(args) == 1 else _operands(g, node, *args)
        if np.dtype(node.outputs[0].dtype.np) == np.bool_:
            return g.op(bool_op, ins)
        if g.opset < 18:
            raise UnsupportedOnnxExport(f"{node.op} of integers (ONNX has it from opset 18)")
        return g.op(int_op, ins)
    return f


exports(bitwise.bitwise_and.primitive)(_bitwise("And", "BitwiseAnd"))
exports(bitwise.bitwise_or.primitive)(_bitwise("Or", "BitwiseOr"))
exports(bitwise.bitwise_xor.primitive)(_bitwise("Xor", "BitwiseXor"))
exports(bitwise.BitwiseNot)(_bitwise("Not", "BitwiseNot"))


@exports(elementwise.ne.primitive)
def _ne(g, node, a, b):
    return g.op("Not", [g.op("Equal", _operands(g, node, a, b, compare=True))])


@exports(elementwise.AddScaled)
def _add_scaled(g, node, a, b, alpha):
    a_, b_ = _operands(g, node, a, b)
    if alpha != 1:
        b_ = g.op("Mul", [b_, g.tensor(alpha, dtype=node.outputs[0].dtype.np)])
    return g.op("Add", [a_, b_])


@exports(elementwise.Where)
def _where(g, node, cond, a, b):
    dt = node.outputs[0].dtype.np
    return g.op("Where", [g.tensor(cond), g.tensor(a, dtype=dt) if not isinstance(a, Ref)
                          else g.tensor(a),
                          g.tensor(b, dtype=dt) if not isinstance(b, Ref) else g.tensor(b)])


@exports(masking.MaskedFill)
def _masked_fill(g, node, x, mask, value):
    return g.op("Where", [g.tensor(mask), g.tensor(value, like=x), g.tensor(x)])


@exports(unary.Clamp, unary.ClampTensor)
def _clamp(g, node, x, lo=None, hi=None, *rest):
    """Clamp and its family (``ClampMin``, ``ClampMax``, ``Hardtanh``): one ``Clip``."""
    if issubclass(node.target, unary.ClampMax):
        lo, hi = None, lo
    lo_n = g.tensor(lo, like=x) if lo is not None else ""
    hi_n = g.tensor(hi, like=x) if hi is not None else ""
    if any(isinstance(b, Ref) and b.value.type == "Tensor" and len(b.value.shape)
           for b in (lo, hi)):
        # tensor bounds broadcast elementwise; Clip takes scalars only
        out = g.tensor(x)
        if lo is not None:
            out = g.op("Max", [out, _cast_to(g, lo_n, g.np_dtype(x), lo)])
        if hi is not None:
            out = g.op("Min", [out, _cast_to(g, hi_n, g.np_dtype(x), hi)])
        return out
    return g.op("Clip", [g.tensor(x), lo_n, hi_n])


@exports(unary.LeakyRelu)
def _leaky_relu(g, node, x, slope):
    return g.op("LeakyRelu", [g.tensor(x)], alpha=float(slope))


@exports(activations.Elu)
def _elu(g, node, x, alpha, scale=1.0, input_scale=1.0):
    """``Elu`` or ``Selu`` where they fit, else the pieces (``Where`` of the two branches)."""
    t = g.tensor(x)
    if scale == 1.0 and input_scale == 1.0:
        return g.op("Elu", [t], alpha=float(alpha))
    if input_scale == 1.0:
        return g.op("Selu", [t], alpha=float(alpha), gamma=float(scale))
    zero = g.tensor(0.0, like=x)
    neg = g.op("Exp", [g.op("Mul", [g.op("Min", [t, zero]), g.tensor(float(input_scale),
                                                                        like=x)])])
    neg = g.op("Mul", [g.op("Sub", [neg, g.tensor(1.0, like=x)]),
                       g.tensor(float(alpha * scale), like=x)])
    pos = g.op("Mul", [t, g.tensor(float(scale), like=x)])
    return g.op("Where", [g.op("Greater", [t, zero]), pos, neg])


@exports(activations.Celu)
def _celu(g, node, x, alpha):
    return _elu(g, node, x, alpha, 1.0, 1.0 / alpha)


@exports(activations.Threshold)
def _threshold(g, node, x, threshold, value):
    """``Where(x <= threshold, value, x)``: NaN stays NaN, as in ember and PyTorch."""
    t = g.tensor(x)
    low = g.op("LessOrEqual", [t, g.tensor(float(threshold), like=x)])
    return g.op("Where", [low, g.tensor(float(value), like=x), t])


@exports(unary.Round)
def _round(g, node, x, decimals=0):
    if decimals:
        raise UnsupportedOnnxExport("round with decimals (ONNX's Round has no such attribute)")
    return g.op("Round", [g.tensor(x)])


@exports(unary.Softplus)
def _softplus(g, node, x, beta=1.0, threshold=20.0):
    """One ``Softplus`` (between a Mul and a Div when ``beta != 1``), as PyTorch writes it.
    ONNX's Softplus has no threshold: past PyTorch's default (20) the two agree to
    float32 precision; a lower threshold keeps ember's values with a ``Where``."""
    t = g.tensor(x)
    z = t if beta == 1 else g.op("Mul", [t, g.tensor(float(beta), like=x)])
    y = g.op("Softplus", [z])
    if beta != 1:
        y = g.op("Div", [y, g.tensor(float(beta), like=x)])
    if threshold < 20:
        y = g.op("Where", [g.op("Greater", [z, g.tensor(float(threshold), like=x)]), t, y])
    return y


@exports(unary.hardsigmoid.primitive)
def _hardsigmoid(g, node, x):
    # ONNX's HardSigmoid is max(0, min(1, alpha * x + beta)); PyTorch's is alpha 1/6
    return g.op("HardSigmoid", [g.tensor(x)], alpha=1.0 / 6.0, beta=0.5)


@exports(unary.silu.primitive)
def _silu(g, node, x):
    t = g.tensor(x)
    return g.op("Mul", [t, g.op("Sigmoid", [t])])


@exports(elementwise.Copysign)
def _copysign(g, node, a, b):
    mag = g.op("Abs", [g.tensor(a)])
    if not isinstance(b, Ref):
        return g.op("Neg", [mag]) if math.copysign(1.0, float(b)) < 0 else mag
    # the sign bit of b, -0.0 included: 1 / b is then -inf
    neg = g.op("Less", [g.op("Reciprocal", [g.tensor(b)]), g.tensor(0.0, like=b)])
    return g.op("Where", [neg, g.op("Neg", [mag]), mag])


@exports(conversion.ToCopy)
def _to_copy(g, node, x, np_dtype=None, device=None, *rest, **kw):
    out = np.dtype(node.outputs[0].dtype.np)
    if g.np_dtype(x) == out:
        return g.op("Identity", [g.tensor(x)])
    return g.op("Cast", [g.tensor(x)], to=g.elem_type(out))


@exports(unary.ZeroCurvature)
def _zero_curvature(g, node, y, x):
    """Only an autograd marker (a zero second derivative): the value is ``y``, no node."""
    return g.tensor(y)


@exports(conversion.Contiguous, conversion.Clone, "detach")
def _identity(g, node, x, *rest, **kw):
    return g.op("Identity", [g.tensor(x)])


# ---- fake quantization: QuantizeLinear + DequantizeLinear, as PyTorch writes it ----------
_QUANT_TYPES = {(0, 255): np.uint8, (-128, 127): np.int8, (0, 127): np.uint8}


def _quantize_dequantize(g, node, x, scale, zero_point, quant_min, quant_max, axis=None):
    zp_type = _QUANT_TYPES.get((quant_min, quant_max))
    if zp_type is None:
        raise UnsupportedOnnxExport(
            f"with (quant_min, quant_max) = ({quant_min}, {quant_max}): ONNX's QuantizeLinear "
            "allows only (0, 127), (0, 255) and (-128, 127)")
    scalar = g.const(np.zeros(0, np.int64), "scalar_shape")

    def operand(v, dt):
        if not isinstance(v, Ref):
            return g.const(np.asarray(v, dt), "qparam")
        name = g.tensor(v)
        if g.np_dtype(v) != dt:
            name = g.op("Cast", [name], to=g.elem_type(np.dtype(dt)))
        # one quantization for the tensor: ONNX wants 0-d parameters
        return name if axis is not None else g.op("Reshape", [name, scalar])

    s, z = operand(scale, np.float32), operand(zero_point, zp_type)
    t, x_dt = g.tensor(x), g.np_dtype(x)
    if x_dt != np.float32:  # QuantizeLinear's input has the scale's dtype, float32 here
        t = g.op("Cast", [t], to=g.elem_type(np.dtype(np.float32)))
    q = g.op("QuantizeLinear", [t, s, z], axis=axis)
    if (quant_min, quant_max) == (0, 127):  # uint8 saturates at 255: clip to 127
        q = g.op("Clip", [q, "", g.const(np.asarray(127, np.uint8), "quant_max")])
    y = g.op("DequantizeLinear", [q, s, z], axis=axis)
    return y if x_dt == np.float32 else g.op("Cast", [y], to=g.elem_type(x_dt))


@exports(quantization.FakeQuantizePerTensorAffine)   # the TensorQparams node inherits it
def _fake_quantize_per_tensor(g, node, x, scale, zero_point, quant_min, quant_max):
    return _quantize_dequantize(g, node, x, scale, zero_point, quant_min, quant_max)


@exports(quantization.FakeQuantizePerChannelAffine)
def _fake_quantize_per_channel(g, node, x, scale, zero_point, axis, quant_min, quant_max):
    if isinstance(zero_point, Ref) and np.dtype(g.np_dtype(zero_point)).kind == "f":
        # ember adds a float zero point before rounding; ONNX's are integers
        raise UnsupportedOnnxExport("with a floating zero_point (ONNX's QuantizeLinear takes "
                                    "uint8/int8 zero points)")
    return _quantize_dequantize(g, node, x, scale, zero_point, quant_min, quant_max, axis)


# ---- linear algebra ------------------------------------------------------------------------

@exports(nn_fused._Linear)
def _linear(g, node, x, w, b=None):
    if _rank(x) == 2 and b is not None:
        return g.op("Gemm", [g.tensor(x), g.tensor(w), g.tensor(b)], transB=1)
    y = g.op("MatMul", [g.tensor(x), g.op("Transpose", [g.tensor(w)], perm=[1, 0])])
    return g.op("Add", [y, g.tensor(b)]) if b is not None else y


@exports(nn_fused._LinearRelu)
def _linear_relu(g, node, x, w, b=None):
    return g.op("Relu", [_linear(g, node, x, w, b)])


@exports(linalg.MatMul)
def _matmul(g, node, a, b):
    return g.op("MatMul", [g.tensor(a), g.tensor(b)])


# ---- reductions ----------------------------------------------------------------------------

@exports(reduction.Sum, reduction.Mean)
def _sum_mean(g, node, x, axes, keepdim, np_dtype=None):
    t = g.tensor(x)
    out_dt = np.dtype(node.outputs[0].dtype.np)
    sum_dt = np.dtype(np.int64) if out_dt == np.bool_ else out_dt  # ONNX sums no bools
    if g.np_dtype(x) != sum_dt:
        t = g.op("Cast", [t], to=g.elem_type(sum_dt))
    if sum_dt != out_dt:
        return g.op("Cast", [_sum_mean_op(g, node, x, t, axes, keepdim)],
                    to=g.elem_type(out_dt))
    return _sum_mean_op(g, node, x, t, axes, keepdim)


def _sum_mean_op(g, node, x, t, axes, keepdim):
    name = "ReduceSum" if issubclass(node.target, reduction.Sum) else "ReduceMean"
    axes = list(range(_rank(x))) if axes is None or axes == () and False else list(axes)
    return g.op(name, [t, _axes(g, axes)] if (name == "ReduceSum" or g.opset >= 18)
                else [t], keepdims=int(bool(keepdim)),
                **({} if name == "ReduceSum" or g.opset >= 18 else {"axes": axes}))


def _amax(reduce_op):
    def f(g, node, x, axes, keepdim):
        return _reduce_axes(g, reduce_op, x, axes, keepdim)
    return f


exports(extrema._Amax)(_amax("ReduceMax"))
exports(extrema._Amin)(_amax("ReduceMin"))


def _max_dim(reduce_op, arg_op):
    def f(g, node, x, axis, keepdim):
        values = _reduce_axes(g, reduce_op, x, [axis], keepdim)
        idx = g.op(arg_op, [g.tensor(x)], axis=axis, keepdims=int(bool(keepdim)))
        return [values, idx]
    return f


exports(extrema._MaxDim)(_max_dim("ReduceMax", "ArgMax"))
exports(extrema._MinDim)(_max_dim("ReduceMin", "ArgMin"))


def _argmax(op):
    return lambda g, node, x, axis, keepdim: _arg_extreme(g, op, x, axis, keepdim)


def _arg_extreme(g, op, x, axis, keepdim):
    if axis is None:
        flat = g.op("Reshape", [g.tensor(x), g.const(np.asarray([-1], np.int64))])
        if keepdim:  # every dim kept, of size 1
            return g.op("Reshape", [g.op(op, [flat], axis=0, keepdims=1),
                                    g.const(np.ones(_rank(x), np.int64), "ones")])
        return g.op(op, [flat], axis=0, keepdims=0)
    return g.op(op, [g.tensor(x)], axis=axis, keepdims=int(bool(keepdim)))


exports(extrema._Argmax)(_argmax("ArgMax"))
exports(extrema._Argmin)(_argmax("ArgMin"))


def _softmax(op):
    def convert(g, node, x, axis, *rest):
        if _rank(x) == 0:
            # ONNX's Softmax needs an axis: a 0-d input runs as one element of a vector
            v = g.op("Reshape", [g.tensor(x), g.const(np.asarray([1], np.int64))])
            return g.op("Reshape", [g.op(op, [v], axis=0),
                                    g.const(np.zeros(0, np.int64), "scalar_shape")])
        return g.op(op, [g.tensor(x)], axis=axis)
    return convert


exports(softmaxes.Softmax)(_softmax("Softmax"))
exports(softmaxes.LogSoftmax)(_softmax("LogSoftmax"))


@exports(vector_norms._VectorNorm)
def _vector_norm(g, node, x, p, axes, keepdim):
    axes = list(range(_rank(x))) if axes is None else list(axes)
    if p == 2:
        return _reduce_axes(g, "ReduceL2", x, axes, keepdim)
    if p == 1:
        return _reduce_axes(g, "ReduceL1", x, axes, keepdim)
    raise UnsupportedOnnxExport(f"vector_norm with p={p}")


@exports(scan.Cumsum)
def _cumsum(g, node, x, axis, np_dtype=None):
    out_dt = np.dtype(node.outputs[0].dtype.np)
    if axis is None:  # a 0-d input (its node has no axis): the sum of one element
        return g.op("Identity", [_cast_to(g, g.tensor(x), out_dt, x)])
    return g.op("CumSum", [_cast_to(g, g.tensor(x), out_dt, x),
                           g.const(np.asarray(g.number(axis), np.int64))])


# ---- orderings -------------------------------------------------------------------------------

def _top(g, x, k, dim, largest):
    """ONNX TopK along ``dim`` (``k`` a number, or None for the whole axis, read from the
    input's runtime shape so that a dynamic axis stays dynamic): [values, indices].
    Among equal values ONNX puts the lower index first, as a stable sort does."""
    r = _rank(x)
    if r == 0:
        raise UnsupportedOnnxExport("sort/topk of a 0-d tensor")
    d = dim % r
    if k is None:
        size = g.op("Gather", [g.op("Shape", [g.tensor(x)]),
                               g.const(np.asarray([d], np.int64))], axis=0)
    elif isinstance(k, Ref):  # a tensor (or an int read from one): TopK's K is an input
        size = g.op("Reshape", [g.op("Cast", [g.tensor(k)], to=g.elem_type(np.dtype(np.int64))),
                                g.const(np.asarray([1], np.int64), "shape1")])
    else:
        size = g.const(np.asarray([k], np.int64), "k")
    return g.op("TopK", [g.tensor(x), size], n_outputs=2, axis=d, largest=int(bool(largest)),
                sorted=1)


@exports("topk")
def _topk(g, node, input, k, dim=None, largest=True, sorted=True, out=None):
    return _top(g, input, k if isinstance(k, Ref) else int(k), -1 if dim is None else dim,
                largest)


@exports("kthvalue")
def _kthvalue(g, node, input, k, dim=-1, keepdim=False, out=None):
    """The ``k`` smallest along ``dim`` by TopK, and the last of them. Among equal
    values TopK's index is the lowest; PyTorch's quickselect may pick another of them."""
    if _rank(input) == 0:
        raise UnsupportedOnnxExport("kthvalue of a 0-d tensor")
    d = dim % _rank(input)
    values, indices = _top(g, input, int(k), d, False)
    last = g.const(np.asarray([int(k) - 1], np.int64), "k_1")
    out = [g.op("Gather", [t, last], axis=d) for t in (values, indices)]
    if keepdim:
        return out
    return [g.op("Squeeze", [t, g.const(np.asarray([d], np.int64), "axes")]) for t in out]


@exports("sort")
def _sort(g, node, input, dim=-1, descending=False, stable=False, out=None):
    return _top(g, input, None, dim, descending)


@exports("argsort")
def _argsort(g, node, input, dim=-1, descending=False, stable=False):
    return _top(g, input, None, dim, descending)[1]


@exports("nonzero")
def _nonzero(g, node, input, out=None, as_tuple=False):
    if as_tuple or _rank(input) == 0:
        raise UnsupportedOnnxExport("nonzero with as_tuple=True or of a 0-d tensor")
    return g.op("Transpose", [g.op("NonZero", [g.tensor(input)])], perm=[1, 0])


@exports("repeat_interleave")
def _repeat_interleave(g, node, input, repeats=None, dim=None, output_size=None):
    """Each slice along ``dim`` ``repeats`` times: Unsqueeze, Expand, Reshape, with the
    sizes read from the runtime shape."""
    if not isinstance(repeats, int):
        raise UnsupportedOnnxExport("repeat_interleave with tensor repeats (the output size "
                                    "follows their values)")
    x = g.tensor(input)
    if dim is None:
        x, r, d = g.op("Reshape", [x, g.const(np.asarray([-1], np.int64))]), 1, 0
    else:
        r = _rank(input)
        d = dim % r
    shape = g.op("Shape", [x])

    def part(lo, hi):
        return g.op("Slice", [shape, g.ints([lo]), g.ints([hi])])
    big = g.op("Expand", [g.op("Unsqueeze", [x, _axes(g, [d + 1])]),
                          g.op("Concat", [part(0, d + 1), g.ints([int(repeats)]),
                                          part(d + 1, r)], axis=0)])
    return g.op("Reshape", [big, g.op("Concat", [part(0, d), g.ints([-1]), part(d + 1, r)],
                                      axis=0)])


@exports("pdist")
def _pdist(g, node, input, p=2):
    """The (n, n) distances, then the upper triangle's entries in row-major order
    (``Compress`` with a ``Trilu`` mask built at the runtime n)."""
    x = g.tensor(input)
    diff = g.op("Sub", [g.op("Unsqueeze", [x, _axes(g, [1])]),
                        g.op("Unsqueeze", [x, _axes(g, [0])])])
    last = _axes(g, [2])
    if p == 2:
        dist = g.op("ReduceL2", [diff, last], keepdims=0)
    elif p == 1:
        dist = g.op("ReduceL1", [diff, last], keepdims=0)
    else:
        raise UnsupportedOnnxExport(f"pdist with p={p}")
    n = g.op("Gather", [g.op("Shape", [x]), g.ints([0])], axis=0)
    ones = g.op("ConstantOfShape", [g.op("Concat", [n, n], axis=0)],
                value=g.onnx.numpy_helper.from_array(np.asarray([1], np.int64)))
    mask = g.op("Cast", [g.op("Trilu", [ones, g.const(np.asarray(1, np.int64), "k")],
                              upper=1)], to=9)
    flat = g.const(np.asarray([-1], np.int64))
    return g.op("Compress", [g.op("Reshape", [dist, flat]), g.op("Reshape", [mask, flat])],
                axis=0)



@exports(elementwise.Addcmul, elementwise.Addcdiv)
def _addc(g, node, x, t1, t2, value=1):
    """``x + value * t1 * t2`` (``addcmul``) or ``x + value * (t1 / t2)`` (``addcdiv``):
    Mul/Div, Mul by the number, Add, over operands of one dtype."""
    dts = {g.np_dtype(a) for a in (x, t1, t2)}
    if len(dts) != 1:
        raise UnsupportedOnnxExport(
            f"{node.target._op_name} of mixed dtypes {sorted(map(str, dts))}")
    a, b = g.tensor(t1), g.tensor(t2)
    if issubclass(node.target, elementwise.Addcdiv):
        p = g.op("Mul", [g.tensor(value, like=x), g.op("Div", [a, b])])
    else:
        p = g.op("Mul", [a if value == 1 else g.op("Mul", [g.tensor(value, like=x), a]), b])
    return g.op("Add", [g.tensor(x), p])


@exports(reorder.Roll)
def _roll(g, node, x, shifts, dims):
    """``roll``: per dim, a ``Gather`` at ``(arange(n) - shift) mod n`` with ``n`` read
    from the runtime shape, so a dynamic axis rolls at any size; no dims rolls the
    flattened elements and restores the shape."""
    i64 = lambda v, name: g.const(np.asarray(v, np.int64), name)  # noqa: E731
    t = g.tensor(x)
    shape = g.op("Shape", [t])
    flat = not dims
    if flat:
        t, dims = g.op("Reshape", [t, i64([-1], "flat")]), (0,)
    for s, d in zip(shifts, dims):
        n = g.op("Gather", [g.op("Shape", [t]), i64(d, "dim")])
        idx = g.op("Range", [i64(0, "zero"), n, i64(1, "one")])
        # (the divisor at least 1: an empty dim has no indices, and Mod by 0 raises)
        idx = g.op("Mod", [g.op("Sub", [idx, i64(s, "shift")]),
                           g.op("Max", [n, i64(1, "one")])])
        t = g.op("Gather", [t, idx], axis=d)
    return g.op("Reshape", [t, shape]) if flat else t
