"""ember IR op -> ONNX nodes.

A primitive's ONNX spelling is its class's ``onnx`` attribute: a string is one ONNX
node of that type over the op's operands (:func:`one_node`), a callable is a converter
``f(g, node, *args, **kwargs)``. The converters here are attached to their classes with
``@exports(SomeOpClass)``. Calls the capture records above the primitives (``view``,
``x[key]``, factories, sizes: ``ember._graph.names.RECORDED_CALLS``) have no class, so
their converters stay in :data:`EXPORTERS`, keyed by those names.

``args``/``kwargs`` are the recorded call's arguments (``Ref`` where a traced tensor or
size was), ``g`` the :class:`~ember.onnx._export.GraphBuilder`. A converter returns the
ONNX name of each output.
"""
import math

import numpy as np

from ember._graph.ir import Ref
from ember._graph.names import RECORDED_CALLS, spelling
from ember.onnx._export import UnsupportedOnnxExport
from ember.ops import (
    attention,
    bitwise,
    conv,
    conversion,
    diagonals,
    elementwise,
    extrema,
    gather_scatter,
    indexing,
    join,
    linalg,
    nn_fused,
    normalization,
    pooling,
    power,
    quantization,
    reduction,
    rnn,
    scan,
    shape,
    unary,
)

__all__ = ["EXPORTERS", "exports", "converter", "one_node", "custom_symbolic",
           "exportable_ops"]

# converters of the recorded calls that are not primitives, by the name the capture
# records them under
EXPORTERS = {}


def exports(*targets):
    """Attach one converter to each target: a primitive class gets it as its ``onnx``
    spelling; a string names a call the capture records by name (``"view"``)."""
    def deco(fn):
        for t in targets:
            if isinstance(t, str):
                if t not in RECORDED_CALLS:
                    raise ValueError(f"ember.onnx: {t!r} is not a call the capture records")
                EXPORTERS[t] = fn
            else:
                if t.__dict__.get("onnx") is not None:
                    raise TypeError(f"ember.onnx: {t._op_name} already has an ONNX spelling")
                t.onnx = fn
        return fn
    return deco


def converter(node):
    """The converter for a graph node, or None: its primitive's ``onnx`` spelling, the
    row of a call recorded by name, or a custom ``autograd.Function``'s ``symbolic``."""
    target = node.target
    if not isinstance(target, type):  # a call recorded by name
        return EXPORTERS.get(node.op)
    spell = spelling(target, "onnx")
    if isinstance(spell, str):
        return lambda g, node, *args, **kwargs: one_node(g, node, spell, args, kwargs)
    if spell is None and getattr(target, "symbolic", None) is not None:
        return custom_symbolic
    return spell


def exportable_ops():
    """Sorted names of the ops ``export`` can write: primitives with an ONNX spelling
    and the calls recorded by name that have a converter."""
    from ember.autograd.node import Primitive
    names, stack, seen = set(EXPORTERS), [Primitive], set()
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                if spelling(sub, "onnx") is not None:
                    names.add(sub._op_name)
    return sorted(names)


def _input_types(g, op_type):
    """The element types ONNX's schema of ``op_type`` accepts for its first input."""
    schema = g.onnx.defs.get_schema(op_type, g.opset)
    name = schema.inputs[0].type_str
    for c in schema.type_constraints:
        if c.type_param_str == name:
            return set(c.allowed_type_strs)
    return {name}


def one_node(g, node, op_type, args, kwargs):
    """One ONNX node of ``op_type`` over the call's operands (traced tensors and sizes,
    Python numbers as constants). ONNX does not promote, so the operands are brought to
    one dtype first: the result's (``x + 1.5`` on an int tensor, ``exp`` of one), or for
    a bool result of non-bool operands (a comparison) their own, unless the operator
    takes only the result's type (``And`` of float tensors casts them to bool)."""
    if kwargs or any(not isinstance(a, (Ref, bool, int, float)) for a in args):
        raise UnsupportedOnnxExport(f"{node.op} with these arguments (its ONNX spelling "
                                    f"{op_type} takes tensors and numbers only)")
    refs = [a for a in args if isinstance(a, Ref)]
    out_dt = np.dtype(node.outputs[0].dtype.np)
    target = out_dt
    if out_dt == np.bool_ and refs:
        own = np.result_type(*[g.np_dtype(r) for r in refs])
        if any(isinstance(a, float) for a in args) and own.kind in "iub":
            own = np.dtype(np.float32)
        if f"tensor({_proto_name(own)})" in _input_types(g, op_type):
            target = own
    names = []
    for a in args:
        if isinstance(a, Ref):
            name = g.tensor(a)
            if g.np_dtype(a) != target:
                name = g.op("Cast", [name], to=g.elem_type(target))
            names.append(name)
        else:
            names.append(g.tensor(a, dtype=target))
    return g.op(op_type, names, n_outputs=len(node.outputs))


def _proto_name(dt):
    return {"f": {2: "float16", 4: "float", 8: "double"}, "b": {1: "bool"},
            "u": {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"},
            "i": {1: "int8", 2: "int16", 4: "int32", 8: "int64"}}.get(
                dt.kind, {}).get(dt.itemsize, str(dt))


def _axes(g, axes, hint="axes"):
    return g.const(np.asarray(list(axes), np.int64), hint)


def _rank(ref):
    return len(ref.value.shape)


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


@exports(indexing.MaskedFill)
def _masked_fill(g, node, x, mask, value):
    return g.op("Where", [g.tensor(mask), g.tensor(value, like=x), g.tensor(x)])


@exports(unary.Clamp, unary.ClampTensor)
def _clamp(g, node, x, lo=None, hi=None, *rest):
    """Clamp and its family (``ClampMin``, ``ClampMax``, ``Hardtanh``): one ``Clip``."""
    if issubclass(node.target, unary.ClampMax):
        lo, hi = None, lo
    lo_n = g.tensor(lo, like=x) if lo is not None else ""
    hi_n = g.tensor(hi, like=x) if hi is not None else ""
    return g.op("Clip", [g.tensor(x), lo_n, hi_n])


@exports(unary.LeakyRelu)
def _leaky_relu(g, node, x, slope):
    return g.op("LeakyRelu", [g.tensor(x)], alpha=float(slope))


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

def _reduce_axes(g, onnx_op, x, axes, keepdim):
    axes = list(range(_rank(x))) if axes is None else list(axes)
    if onnx_op in ("ReduceSum",) or g.opset >= 18:
        return g.op(onnx_op, [g.tensor(x), _axes(g, axes)], keepdims=int(bool(keepdim)))
    return g.op(onnx_op, [g.tensor(x)], axes=axes, keepdims=int(bool(keepdim)))


@exports(reduction.Sum, reduction.Mean)
def _sum_mean(g, node, x, axes, keepdim, np_dtype=None):
    t = g.tensor(x)
    out_dt = np.dtype(node.outputs[0].dtype.np)
    if g.np_dtype(x) != out_dt:
        t = g.op("Cast", [t], to=g.elem_type(out_dt))
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
        return g.op(op, [flat], axis=0, keepdims=0)
    return g.op(op, [g.tensor(x)], axis=axis, keepdims=int(bool(keepdim)))


exports(extrema._Argmax)(_argmax("ArgMax"))
exports(extrema._Argmin)(_argmax("ArgMin"))


def _softmax(op):
    return lambda g, node, x, axis, *rest: g.op(op, [g.tensor(x)], axis=axis)


exports(reduction.Softmax)(_softmax("Softmax"))
exports(reduction.LogSoftmax)(_softmax("LogSoftmax"))


@exports(reduction._VectorNorm)
def _vector_norm(g, node, x, p, axes, keepdim):
    axes = list(range(_rank(x))) if axes is None else list(axes)
    if p == 2:
        return _reduce_axes(g, "ReduceL2", x, axes, keepdim)
    if p == 1:
        return _reduce_axes(g, "ReduceL1", x, axes, keepdim)
    raise UnsupportedOnnxExport(f"vector_norm with p={p}")


@exports(scan.Cumsum)
def _cumsum(g, node, x, axis, np_dtype=None):
    return g.op("CumSum", [g.tensor(x), g.const(np.asarray(axis, np.int64))])


# ---- shapes ----------------------------------------------------------------------------------

@exports("size")
def _size(g, node, t, dim):
    shape = g.op("Shape", [g.tensor(t)])
    return g.op("Gather", [shape, g.const(np.asarray(dim, np.int64))], axis=0)


_INT = {"int.add": "Add", "int.sub": "Sub", "int.mul": "Mul", "int.floordiv": "Div",
        "int.mod": "Mod"}


@exports(*_INT)
def _int_op(g, node, a, b):
    return g.op(_INT[node.op], [g.tensor(a, dtype=np.int64), g.tensor(b, dtype=np.int64)])


@exports("int.neg")
def _int_neg(g, node, a):
    return g.op("Neg", [g.tensor(a, dtype=np.int64)])


def _shape_list(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return list(args[0])
    return list(args)


@exports("view", "reshape")
def _view(g, node, x, *shape, dtype=None):
    from ember.backend.dtypes import dtype as _dtype
    if dtype is not None or len(shape) == 1 and isinstance(shape[0], (_dtype, type, np.dtype)):
        raise UnsupportedOnnxExport("view(dtype) (a reinterpretation of the bytes: ONNX has no "
                                    "such operator)")
    return g.op("Reshape", [g.tensor(x), g.ints(_shape_list(shape))])


@exports(shape.View, shape.ReshapeCopy)
def _view_prim(g, node, x, shape, *rest):
    return g.op("Reshape", [g.tensor(x), g.ints(list(shape))])


@exports("expand", shape.Expand)
def _expand(g, node, x, *shape):
    sizes = _shape_list(shape)
    # -1 keeps the input's size: Expand broadcasts, so a 1 there does the same
    sizes = [1 if (not isinstance(s, Ref) and s == -1) else s for s in sizes]
    return g.op("Expand", [g.tensor(x), g.ints(sizes)])


@exports("view_as", "reshape_as")
def _view_as(g, node, x, other):
    return g.op("Reshape", [g.tensor(x), g.op("Shape", [g.tensor(other)])])


@exports("expand_as")
def _expand_as(g, node, x, other):
    return g.op("Expand", [g.tensor(x), g.op("Shape", [g.tensor(other)])])


@exports("flatten")
def _flatten(g, node, x, start_dim=0, end_dim=-1):
    r = _rank(x)
    s, e = start_dim % max(r, 1), end_dim % max(r, 1)
    if e == r - 1 and s <= 1:
        if s == 1:
            return g.op("Flatten", [g.tensor(x)], axis=1)
        return g.op("Reshape", [g.tensor(x), g.const(np.asarray([-1], np.int64))])
    shape = g.op("Shape", [g.tensor(x)])
    parts = []
    if s > 0:
        parts.append(g.op("Slice", [shape, g.const(np.asarray([0], np.int64)),
                                    g.const(np.asarray([s], np.int64))]))
    parts.append(g.const(np.asarray([-1], np.int64)))
    if e < r - 1:
        parts.append(g.op("Slice", [shape, g.const(np.asarray([e + 1], np.int64)),
                                    g.const(np.asarray([r], np.int64))]))
    return g.op("Reshape", [g.tensor(x), g.op("Concat", parts, axis=0)])


@exports("unflatten")
def _unflatten(g, node, x, dim, sizes):
    r = _rank(x)
    dim %= r
    shape = g.op("Shape", [g.tensor(x)])
    parts = []
    if dim > 0:
        parts.append(g.op("Slice", [shape, g.const(np.asarray([0], np.int64)),
                                    g.const(np.asarray([dim], np.int64))]))
    parts.append(g.ints(list(sizes)))
    if dim < r - 1:
        parts.append(g.op("Slice", [shape, g.const(np.asarray([dim + 1], np.int64)),
                                    g.const(np.asarray([r], np.int64))]))
    return g.op("Reshape", [g.tensor(x), g.op("Concat", parts, axis=0)])


def _trilu(upper):
    def f(g, node, x, k=0):
        if g.opset < 14:
            raise UnsupportedOnnxExport(f"{node.op} (ONNX has Trilu from opset 14)")
        return g.op("Trilu", [g.tensor(x), g.const(np.asarray(int(k), np.int64), "k")],
                    upper=upper)
    return f


exports(diagonals.Tril)(_trilu(0))
exports(diagonals.Triu)(_trilu(1))


@exports(shape.Permute)
def _permute(g, node, x, dims):
    return g.op("Transpose", [g.tensor(x)], perm=[d % _rank(x) for d in dims])


@exports(shape.Transpose)
def _transpose(g, node, x, d0, d1):
    perm = list(range(_rank(x)))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return g.op("Transpose", [g.tensor(x)], perm=perm)


@exports(shape.Unsqueeze)
def _unsqueeze(g, node, x, dim):
    return g.op("Unsqueeze", [g.tensor(x), _axes(g, [dim])])


@exports(shape.Squeeze)
def _squeeze(g, node, x, dims=None):
    if dims is None:
        return g.op("Squeeze", [g.tensor(x)])
    dims = [dims] if isinstance(dims, int) else list(dims)
    dims = [d for d in dims if x.value.shape[d] == 1]
    if not dims:
        return g.op("Identity", [g.tensor(x)])
    return g.op("Squeeze", [g.tensor(x), _axes(g, dims)])


@exports(join.Cat)
def _cat(g, node, *tensors, dim=0, np_dtype=None):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return g.op("Concat", [g.tensor(t) for t in tensors], axis=dim)


@exports(join.Stack)
def _stack(g, node, *tensors, dim=0, np_dtype=None):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    axes = _axes(g, [dim])
    return g.op("Concat", [g.op("Unsqueeze", [g.tensor(t), axes]) for t in tensors], axis=dim)


@exports(join.Unbind)
def _unbind(g, node, x, dim=0):
    n = x.value.shape[dim]
    parts = g.op("Split", [g.tensor(x), g.const(np.ones(n, np.int64))], n_outputs=n,
                 axis=dim) if n > 1 else [g.tensor(x)]
    axes = _axes(g, [dim])
    return [g.op("Squeeze", [p, axes]) for p in parts]


@exports(join.SplitWithSizes)
def _split(g, node, x, sizes, dim=0):
    n = len(node.outputs)
    if isinstance(sizes, int):
        total = x.value.shape[dim]
        sizes = [min(sizes, total - i) for i in range(0, total, sizes)]
    return g.op("Split", [g.tensor(x), g.const(np.asarray(list(sizes), np.int64))],
                n_outputs=n, axis=dim) if n > 1 else [g.op("Identity", [g.tensor(x)])]


@exports(join.Repeat)
def _repeat(g, node, x, reps):
    reps = list(reps)
    r = _rank(x)
    t = g.tensor(x)
    if len(reps) > r:
        t = g.op("Reshape", [t, g.const(np.asarray([1] * (len(reps) - r) + list(
            x.value.shape), np.int64))])
    return g.op("Tile", [t, g.ints(reps)])


@exports(shape.Flip, scan.Flip)
def _flip(g, node, x, axis):
    axes = [axis] if isinstance(axis, int) else list(axis)
    n = len(axes)
    big = np.iinfo(np.int64)
    return g.op("Slice", [g.tensor(x), g.const(np.full(n, -1, np.int64)),
                          g.const(np.full(n, big.min, np.int64)), _axes(g, axes),
                          g.const(np.full(n, -1, np.int64))])


@exports(shape.ConstantPad)
def _constant_pad(g, node, x, pads, value=0.0):
    r = _rank(x)
    begin, end = [0] * r, [0] * r
    for i in range(len(pads) // 2):
        d = r - 1 - i
        begin[d], end[d] = pads[2 * i], pads[2 * i + 1]
    return g.op("Pad", [g.tensor(x), g.const(np.asarray(begin + end, np.int64)),
                        g.tensor(value, like=x)], mode="constant")


@exports(gather_scatter.Gather)
def _gather(g, node, x, idx, dim):
    return g.op("GatherElements", [g.tensor(x), g.tensor(idx)], axis=dim)


@exports(gather_scatter.IndexSelect)
def _index_select(g, node, x, idx, dim):
    return g.op("Gather", [g.tensor(x), g.tensor(idx)], axis=dim)


@exports("embedding")
def _embedding(g, node, input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
               scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise UnsupportedOnnxExport("embedding with max_norm (it renormalizes the weight)")
    return g.op("Gather", [g.tensor(weight), g.tensor(input)], axis=0)


@exports("getitem")
def _getitem(g, node, x, key):
    if not isinstance(key, tuple):
        key = (key,)
    ndim = _rank(x)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    cur = g.tensor(x)
    d = 0
    big = np.iinfo(np.int64).max
    for k in key:
        if k is Ellipsis:
            d += ndim - n_real
        elif k is None:
            cur = g.op("Unsqueeze", [cur, _axes(g, [d])])
            d += 1
        elif isinstance(k, slice):
            if not (k.start is None and k.stop is None and k.step in (None, 1)):
                start = [0] if k.start is None else [k.start]
                stop = [big] if k.stop is None else [k.stop]
                step = [1] if k.step is None else [k.step]
                cur = g.op("Slice", [cur, g.ints(start), g.ints(stop), _axes(g, [d]),
                                     g.ints(step)])
            d += 1
        elif isinstance(k, Ref) and k.value.type == "Tensor":
            if k.value.dtype is not None and k.value.dtype.name == "bool":
                raise UnsupportedOnnxExport("indexing with a boolean mask")
            cur = g.op("Gather", [cur, g.tensor(k)], axis=d)
            d += len(k.value.shape)
        elif isinstance(k, (int, Ref)):
            cur = g.op("Gather", [cur, g.tensor(k, dtype=np.int64)], axis=d)
        else:
            raise UnsupportedOnnxExport(f"indexing with {type(k).__name__}")
    return cur


# ---- creation ------------------------------------------------------------------------------

def _fill(g, node, sizes, value):
    dt = np.dtype(node.outputs[0].dtype.np)
    return g.op("ConstantOfShape", [g.ints(list(sizes))],
                value=g.onnx.numpy_helper.from_array(np.asarray([value], dt)))


@exports("zeros", "ones", "empty")
def _filled(g, node, *size, **kw):
    return _fill(g, node, _shape_list(size), 1 if node.op == "ones" else 0)


@exports("full")
def _full(g, node, size, fill_value, **kw):
    return _fill(g, node, _shape_list((size,)) if not isinstance(size, (tuple, list))
                 else list(size), fill_value)


@exports("narrow")
def _narrow(g, node, x, dim, start, length):
    """ONNX ``Slice`` of ``length`` elements from ``start`` (traced sizes stay inputs)."""
    dim %= _rank(x)
    starts = g.ints([start])
    return g.op("Slice", [g.tensor(x), starts, g.op("Add", [starts, g.ints([length])]),
                          g.ints([dim])])


@exports("eye")
def _eye(g, node, n, m=None, **kw):
    """ONNX ``EyeLike`` of a zero matrix of the (traced) size."""
    dt = np.dtype(node.outputs[0].dtype.np)
    square = _fill(g, node, [n, n if m is None else m], 0)
    return g.op("EyeLike", [square], dtype=g.elem_type(dt))


@exports("zeros_like", "ones_like", "empty_like")
def _like(g, node, input, **kw):
    dt = np.dtype(node.outputs[0].dtype.np)
    return g.op("ConstantOfShape", [g.op("Shape", [g.tensor(input)])],
                value=g.onnx.numpy_helper.from_array(np.asarray(
                    [1 if node.op == "ones_like" else 0], dt)))


@exports("arange")
def _arange(g, node, *args, **kw):
    nums = [a for a in args]
    if len(nums) == 1:
        start, end, step = 0, nums[0], 1
    elif len(nums) == 2:
        start, end, step = nums[0], nums[1], 1
    else:
        start, end, step = nums[:3]
    dt = np.dtype(node.outputs[0].dtype.np)
    return g.op("Range", [g.tensor(start, dtype=dt) if not isinstance(start, Ref) else
                          g.op("Cast", [g.tensor(start)], to=g.elem_type(dt)),
                          g.tensor(end, dtype=dt) if not isinstance(end, Ref) else
                          g.op("Cast", [g.tensor(end)], to=g.elem_type(dt)),
                          g.tensor(step, dtype=dt)])


# ---- convolution, pooling, normalization ---------------------------------------------------

def _conv_pads(geom):
    return [int(v) for v in geom.lo] + [int(v) for v in geom.hi]


@exports(conv.Conv)
def _conv(g, node, x, w, b, geom):
    ins = [g.tensor(x), g.tensor(w)] + ([g.tensor(b)] if b is not None else [])
    return g.op("Conv", ins, kernel_shape=[int(k) for k in geom.K],
                strides=[int(s) for s in geom.s], dilations=[int(d) for d in geom.d],
                pads=_conv_pads(geom), group=int(geom.G))


@exports(pooling.MaxPool)
def _max_pool(g, node, x, geom, *rest):
    if len(node.outputs) > 1:
        # ONNX numbers the indices over the whole tensor, PyTorch within each plane
        raise UnsupportedOnnxExport("max pooling with return_indices=True")
    floor = tuple((s + lo + hi - d * (k - 1) - 1) // st + 1 for s, lo, hi, d, k, st in
                  zip(geom.S, geom.lo, geom.hi, geom.d, geom.K, geom.s))
    ceil = int(tuple(int(o) for o in geom.O) != floor)
    return g.op("MaxPool", [g.tensor(x)], kernel_shape=[int(k) for k in geom.K],
                strides=[int(s) for s in geom.s], pads=_conv_pads(geom),
                dilations=[int(d) for d in geom.d], ceil_mode=ceil)


@exports(normalization._LayerNorm)
def _layer_norm(g, node, x, w, b, axes, eps, stats=None):
    first = min(axes)
    if g.opset >= 17:
        ins = [g.tensor(x), g.tensor(w) if w is not None else
               g.const(np.ones(x.value.shape[first:], g.np_dtype(x)))]
        if b is not None:
            ins.append(g.tensor(b))
        return g.op("LayerNormalization", ins, axis=first, epsilon=float(eps))
    t = g.tensor(x)
    ax = list(axes)
    mean = _reduce_axes(g, "ReduceMean", x, ax, True)
    d = g.op("Sub", [t, mean])
    var = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=ax, keepdims=1)
    y = g.op("Div", [d, g.op("Sqrt", [g.op("Add", [var, g.tensor(float(eps), like=x)])])])
    if w is not None:
        y = g.op("Mul", [y, g.tensor(w)])
    if b is not None:
        y = g.op("Add", [y, g.tensor(b)])
    return y


@exports(attention.ScaledDotProductAttention)
def _sdpa(g, node, q, k, v, bias, dmask, scale, safe):
    if dmask is not None:
        raise UnsupportedOnnxExport("attention with dropout (export in eval mode)")
    r = _rank(k)
    perm = list(range(r))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    s = g.op("MatMul", [g.tensor(q), g.op("Transpose", [g.tensor(k)], perm=perm)])
    s = g.op("Mul", [s, g.tensor(float(scale), like=q)])
    if bias is not None:
        s = g.op("Add", [s, g.tensor(bias)])
    w = g.op("Softmax", [s], axis=-1)
    if safe and bias is not None:
        # PyTorch's safe softmax: a row that is all -inf gives zeros, not NaN
        w = g.op("Where", [g.op("IsNaN", [w]), g.tensor(0.0, like=q), w])
    return g.op("MatMul", [w, g.tensor(v)])


# ONNX op, gates, and the order of ember's (PyTorch's) gate blocks in ONNX's layout
_RNN = {rnn.LSTMLayer: ("LSTM", 4, [0, 3, 1, 2]), rnn.GRULayer: ("GRU", 3, [1, 0, 2]),
        rnn.RNNTanhLayer: ("RNN", 1, [0]), rnn.RNNReluLayer: ("RNN", 1, [0])}


def _gates(g, w, n_gates, order, hint):
    """An ember/PyTorch gate-stacked weight reordered for ONNX, with a leading axis of 1."""
    if id(w.value) in g.folded or w.value.kind in ("param", "buffer", "constant"):
        arr = g.folded.get(id(w.value))
        if arr is None:
            arr = g.param_arrays[w.value.name] if w.value.kind != "constant" else \
                w.value.data.detach().numpy()
        parts = np.split(arr, n_gates, axis=0)
        return g.const(np.concatenate([parts[i] for i in order], 0)[None], hint)
    raise UnsupportedOnnxExport("a recurrent layer whose weights are computed in the graph")


@exports(*_RNN)
def _rnn_layer(g, node, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, batch_sizes, reverse):
    onnx_op, n_gates, order = _RNN[node.target]
    if w_hr is not None:
        raise UnsupportedOnnxExport("LSTM with proj_size (ONNX's LSTM has no projection)")
    b0 = batch_sizes[0]
    key = (lambda b: ("ref", id(b.value)) if isinstance(b, Ref) else ("int", int(b)))
    if any(key(b) != key(b0) for b in batch_sizes):
        raise UnsupportedOnnxExport("a recurrent layer over a packed sequence of varying "
                                    "batch sizes")
    hidden = node.outputs[1].shape[-1]
    n_in = x.value.shape[-1]
    seq = g.op("Reshape", [g.tensor(x), g.ints([-1, b0, n_in])])
    W = _gates(g, w_ih, n_gates, order, "W")
    R = _gates(g, w_hh, n_gates, order, "R")
    B = ""
    if b_ih is not None:
        bi = _gates(g, b_ih, n_gates, order, "Bi")
        bh = _gates(g, b_hh, n_gates, order, "Bh")
        B = g.op("Concat", [bi, bh], axis=1)
    axes0 = _axes(g, [0])
    ins = [seq, W, R, B, "", g.op("Unsqueeze", [g.tensor(h0), axes0])]
    attrs = {"hidden_size": int(hidden), "direction": "reverse" if reverse else "forward"}
    if onnx_op == "LSTM":
        ins.append(g.op("Unsqueeze", [g.tensor(c0), axes0]))
    if onnx_op == "GRU":
        attrs["linear_before_reset"] = 1
    if node.target is rnn.RNNReluLayer:
        attrs["activations"] = ["Relu"]
    n_out = 3 if onnx_op == "LSTM" else 2
    outs = g.op(onnx_op, ins, n_outputs=n_out, **attrs)
    y = g.op("Reshape", [g.op("Squeeze", [outs[0], g.const(np.asarray([1], np.int64))]),
                         g.const(np.asarray([-1, hidden], np.int64))])
    result = [y, g.op("Squeeze", [outs[1], axes0])]
    if onnx_op == "LSTM":
        result.append(g.op("Squeeze", [outs[2], axes0]))
    return result


def _gate_array(g, w, n_gates, order):
    """An ember/PyTorch gate-stacked weight as a NumPy array in ONNX's gate order."""
    if id(w.value) in g.folded or w.value.kind in ("param", "buffer", "constant"):
        arr = g.folded.get(id(w.value))
        if arr is None:
            arr = g.param_arrays[w.value.name] if w.value.kind != "constant" else \
                w.value.data.detach().numpy()
        parts = np.split(arr, n_gates, axis=0)
        return np.concatenate([parts[i] for i in order], 0)
    raise UnsupportedOnnxExport("a recurrent layer whose weights are computed in the graph")


_RNN_CALLS = {"lstm": ("LSTM", 4, [0, 3, 1, 2]), "gru": ("GRU", 3, [1, 0, 2]),
              "rnn_tanh": ("RNN", 1, [0]), "rnn_relu": ("RNN", 1, [0])}


@exports(*_RNN_CALLS)
def _rnn_call(g, node, *args):
    """A whole ``nn.LSTM``/``GRU``/``RNN`` call as PyTorch's exporter writes it: one ONNX
    ``LSTM``/``GRU``/``RNN`` node per layer (both directions in one), its initial states
    sliced from ``hx``, the directions' outputs joined by Transpose and Reshape."""
    from ember.nn.functional_rnn import per_layer, split_args
    (x, bs, hx, params, has_b, layers, p, train, bidir,
     batch_first) = split_args(args, node.op)
    onnx_op, n_gates, order = _RNN_CALLS[node.op]
    if bs is not None:
        raise UnsupportedOnnxExport(f"{node.op} over a packed sequence")
    if p and train and layers > 1:
        raise UnsupportedOnnxExport(f"{node.op} with dropout in training mode (export in "
                                    "eval mode)")
    D = 2 if bidir else 1
    per = per_layer(node.op.upper(), len(params), has_b, layers, D, node.op)
    if per in (3, 5):
        raise UnsupportedOnnxExport("LSTM with proj_size (ONNX's LSTM has no projection)")
    lstm = onnx_op == "LSTM"
    h0, c0 = (hx[0], hx[1]) if lstm else (hx, None)
    hidden = node.outputs[1].shape[-1]
    seq = g.tensor(x)
    if batch_first:
        seq = g.op("Transpose", [seq], perm=[1, 0, 2])
    axes0 = _axes(g, [0])
    hn, cn = [], []
    for layer in range(layers):
        ws = [params[(layer * D + d) * per:(layer * D + d + 1) * per] for d in range(D)]
        W = g.const(np.stack([_gate_array(g, w[0], n_gates, order) for w in ws]), "W")
        R = g.const(np.stack([_gate_array(g, w[1], n_gates, order) for w in ws]), "R")
        B = ""
        if has_b:
            B = g.const(np.stack([np.concatenate([_gate_array(g, w[2], n_gates, order),
                                                  _gate_array(g, w[3], n_gates, order)])
                                  for w in ws]), "B")
        lo, hi = g.ints([layer * D], "starts"), g.ints([(layer + 1) * D], "ends")
        ins = [seq, W, R, B, "", g.op("Slice", [g.tensor(h0), lo, hi, axes0])]
        if lstm:
            ins.append(g.op("Slice", [g.tensor(c0), lo, hi, axes0]))
        attrs = {"hidden_size": int(hidden),
                 "direction": "bidirectional" if bidir else "forward"}
        if onnx_op == "GRU":
            attrs["linear_before_reset"] = 1
        if node.op == "rnn_relu":
            attrs["activations"] = ["Relu"] * D
        outs = g.op(onnx_op, ins, n_outputs=3 if lstm else 2, **attrs)
        if D == 1:
            seq = g.op("Squeeze", [outs[0], g.const(np.asarray([1], np.int64), "axes1")])
        else:
            seq = g.op("Reshape", [g.op("Transpose", [outs[0]], perm=[0, 2, 1, 3]),
                                   g.const(np.asarray([0, 0, -1], np.int64), "shape")])
        hn.append(outs[1])
        if lstm:
            cn.append(outs[2])
    if batch_first:
        seq = g.op("Transpose", [seq], perm=[1, 0, 2])
    join = (lambda xs: xs[0] if len(xs) == 1 else g.op("Concat", xs, axis=0))
    return [seq, join(hn)] + ([join(cn)] if lstm else [])


@exports("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d")
def _adaptive_avg(g, node, x, output_size):
    """Output size 1: ``GlobalAveragePool`` (right at any input size). Otherwise, as
    PyTorch's exporter, ``AveragePool`` with the example's windows, only where they
    tile the input and no size is dynamic."""
    nd = int(node.op[-2])
    sizes = list(output_size) if isinstance(output_size, (tuple, list)) else \
        [output_size] * nd
    S = node.inputs[0].shape[-nd:]
    O = [s if o is None else g.number(o) for s, o in zip(S, sizes)]
    if all(o == 1 for o in O):
        return g.op("GlobalAveragePool", [g.tensor(x)])
    if g.dynamic or any(s % o for s, o in zip(S, O)):
        raise UnsupportedOnnxExport(f"{node.op} to output size {O} (ONNX has no adaptive "
                                    "pooling: only output size 1, or a static input that "
                                    "the output size divides)")
    k = [s // o for s, o in zip(S, O)]
    return g.op("AveragePool", [g.tensor(x)], kernel_shape=k, strides=k)


@exports("interpolate")
def _interpolate(g, node, input, size=None, scale_factor=None, mode="nearest",
                 align_corners=None, recompute_scale_factor=None, antialias=False):
    """``Resize`` as PyTorch's exporter writes it, for nearest and (bi/tri)linear."""
    if mode not in ("nearest", "linear", "bilinear", "trilinear") or antialias:
        raise UnsupportedOnnxExport(f"interpolate(mode={mode!r}, antialias={antialias})")
    nd = _rank(input) - 2
    attrs = {"mode": "nearest" if mode == "nearest" else "linear"}
    if mode == "nearest":
        attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        attrs["coordinate_transformation_mode"] = "align_corners" if align_corners else \
            "pytorch_half_pixel"
    x = g.tensor(input)
    if size is None and not recompute_scale_factor:
        sf = scale_factor if isinstance(scale_factor, (tuple, list)) else [scale_factor] * nd
        scales = g.const(np.asarray([1.0, 1.0] + [float(v) for v in sf], np.float32),
                         "scales")
        return g.op("Resize", [x, "", scales], **attrs)
    if size is None:
        raise UnsupportedOnnxExport("interpolate(recompute_scale_factor=True)")
    sz = list(size) if isinstance(size, (tuple, list)) else [size] * nd
    lead = g.op("Slice", [g.op("Shape", [x]), g.const(np.asarray([0], np.int64)),
                          g.const(np.asarray([2], np.int64))])
    sizes = g.op("Concat", [lead, g.ints(sz)], axis=0)
    return g.op("Resize", [x, "", "", sizes], **attrs)


@exports("pad")
def _pad(g, node, x, pad, mode):
    """Reflect and replicate padding: ONNX ``Pad`` (modes ``reflect``/``edge``)."""
    if mode not in ("reflect", "replicate") or any(p < 0 for p in pad):
        raise UnsupportedOnnxExport(f"pad(mode={mode!r}) with widths {list(pad)}")
    r = _rank(x)
    n = len(pad) // 2
    begins, ends = [0] * r, [0] * r
    for k in range(n):
        begins[r - 1 - k], ends[r - 1 - k] = pad[2 * k], pad[2 * k + 1]
    return g.op("Pad", [g.tensor(x), g.const(np.asarray(begins + ends, np.int64), "pads")],
                mode="reflect" if mode == "reflect" else "edge")


# ---- custom autograd.Function with symbolic() ---------------------------------------------

class _SymbolicGraph:
    """The ``g`` PyTorch passes to ``Function.symbolic``: ``g.op("Name", *inputs,
    attr_f=1.0, attr_i=2, attr_s="x", attr_t=tensor, outputs=n)``."""

    def __init__(self, builder):
        self._b = builder

    def op(self, name, *inputs, outputs=1, **attrs):
        domain = ""
        if "::" in name:
            domain, name = name.split("::", 1)
            domain = "" if domain == "onnx" else domain
        plain = {}
        for k, v in attrs.items():
            base = k.rsplit("_", 1)[0] if k[-2:] in ("_f", "_i", "_s", "_t") else k
            if k.endswith("_t"):
                v = self._b.onnx.numpy_helper.from_array(np.asarray(v.detach().numpy()
                                                                    if hasattr(v, "detach")
                                                                    else v))
            plain[base] = v
        ins = [self._b.tensor(i) if isinstance(i, Ref) else i for i in inputs]
        return self._b.op(name, ins, n_outputs=outputs, domain=domain, **plain)


def custom_symbolic(g, node, *args, **kwargs):
    fn = node.target.symbolic
    out = fn(_SymbolicGraph(g), *args, **kwargs)
    return out if isinstance(out, (list, tuple)) else [out]


# ---- random ops (exported in training mode, e.g. dropout) ---------------------------------

@exports("bernoulli_")
def _bernoulli(g, node, x, p=0.5, **kw):
    dt = g.np_dtype(x)
    probs = p if isinstance(p, Ref) else g.tensor(float(p), dtype=dt)
    probs = g.op("Expand", [g.tensor(probs) if isinstance(probs, Ref) else probs,
                            g.op("Shape", [g.tensor(x)])])
    return g.op("Bernoulli", [probs], dtype=g.elem_type(dt))


@exports("uniform_", "rand_like")
def _uniform(g, node, x, a=0.0, b=1.0, **kw):
    return g.op("RandomUniformLike", [g.tensor(x)], low=float(a), high=float(b),
                dtype=g.elem_type(np.dtype(node.outputs[0].dtype.np)))


@exports("normal_", "randn_like")
def _normal(g, node, x, mean=0.0, std=1.0, **kw):
    return g.op("RandomNormalLike", [g.tensor(x)], mean=float(mean), scale=float(std),
                dtype=g.elem_type(np.dtype(node.outputs[0].dtype.np)))
