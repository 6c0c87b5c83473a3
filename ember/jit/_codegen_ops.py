"""The TorchScript emitters of ember's ops: a function per op (or family of ops) writing
its expression in PyTorch's spelling, attached to its class with ``@emits(SomeOpClass)``
or, for a call the capture records by name (``view``, ``size``, factories...), put in
``EMIT`` (see :mod:`ember.jit._codegen_emitter`). ``ember.jit._codegen`` imports this
module, so importing it registers every emitter.
"""
import numpy as np

from ember._graph.ir import Ref
from ember._graph.symint import TensorInt
from ember.jit._codegen_emitter import emits, literal
from ember.ops import (
    attention,
    conv,
    conversion,
    elementwise,
    extrema,
    gather_scatter,
    index_along,
    indexing,
    join,
    losses,
    masking,
    nn_fused,
    normalization,
    power,
    reduction,
    rnn,
    scan,
    shape,
    softmaxes,
    sorting,
    special,
    unary,
    vector_norms,
)


def _is_tensor_arg(x):
    return isinstance(x, Ref) and x.value.type == "Tensor"


def _commutative(aten):
    def emit(em, node, a, b):
        if not _is_tensor_arg(a):
            a, b = b, a
        return f"{aten}({em.e(a)}, {em.e(b)})"
    return emit


emits(elementwise.Add)(_commutative("torch.add"))
emits(elementwise.Mul)(_commutative("torch.mul"))


@emits(conversion.Fill)
def _fill(em, node, x, value):
    """Every fill overload (``fill_``, ``zero_``, ``nn.init.constant_``): ``torch.fill``."""
    return f"torch.fill({em.e(x)}, {em.e(value)})"


@emits(unary.Round)
def _round(em, node, x, decimals=0):
    if not decimals:
        return f"torch.round({em.e(x)})"
    return f"torch.round({em.e(x)}, decimals={em.e(decimals)})"


@emits(special.Polygamma)
def _polygamma(em, node, x, n):
    return f"torch.polygamma({em.e(n)}, {em.e(x)})"


@emits(elementwise.Sub)
def _sub(em, node, a, b):
    if not _is_tensor_arg(a):
        return f"torch.rsub({em.e(b)}, {em.e(a)})"
    return f"torch.sub({em.e(a)}, {em.e(b)})"


@emits(elementwise.Div)
def _div(em, node, a, b):
    if not _is_tensor_arg(a):
        return f"torch.mul(torch.reciprocal({em.e(b)}), {em.e(a)})"
    return f"torch.div({em.e(a)}, {em.e(b)})"


@emits(power.Pow, power.PowScalar)
def _pow(em, node, a, b):
    if not _is_tensor_arg(a):
        return f"torch.pow({em.e(a)}, {em.e(b)})"
    return f"torch.pow({em.e(a)}, {em.e(b)})"


@emits(elementwise.AddScaled)
def _add_scaled(em, node, a, b, alpha):
    return f"torch.add({em.e(a)}, {em.e(b)}, alpha={em.e(alpha)})"


@emits(nn_fused._Linear)
def _linear(em, node, x, w, b=None):
    return f"torch.linear({em.e(x)}, {em.e(w)}, {em.e(b)})"


@emits(nn_fused._LinearRelu)
def _linear_relu(em, node, x, w, b=None):
    return f"torch.relu(torch.linear({em.e(x)}, {em.e(w)}, {em.e(b)}))"


def _softmax(aten):
    # a 0-d input has no axis (None) in ember's op; aten's dim 0 wraps on it
    return lambda em, node, x, axis: \
        f"{aten}({em.e(x)}, {em.e(0 if axis is None else axis)}, None)"


emits(softmaxes.Softmax)(_softmax("torch.softmax"))
emits(softmaxes.LogSoftmax)(_softmax("torch.log_softmax"))


def _reduce(aten):
    def emit(em, node, x, axes, keepdim, np_dtype):
        # (a dtype that is the input's own is the one the reduction keeps anyway)
        own = node.inputs[0].dtype
        if np_dtype is not None and (own is None or np.dtype(np_dtype) != own.np):
            raise NotImplementedError(f"jit codegen: {node.op} with dtype={np_dtype}")
        if axes is None:
            return f"{aten}({em.e(x)})"
        return f"{aten}({em.e(x)}, {em.ints(tuple(axes))}, {em.e(bool(keepdim))})"
    return emit


emits(reduction.Mean)(_reduce("torch.mean"))
emits(reduction.Sum)(_reduce("torch.sum"))


@emits(shape.Permute)
def _permute(em, node, x, dims):
    return f"torch.permute({em.e(x)}, {em.ints(dims)})"


@emits(shape.Transpose)
def _transpose(em, node, x, d0, d1):
    return f"torch.transpose({em.e(x)}, {em.e(d0)}, {em.e(d1)})"


@emits(shape.Unsqueeze)
def _unsqueeze(em, node, x, dim):
    return f"torch.unsqueeze({em.e(x)}, {em.e(dim)})"


@emits(shape.Squeeze)
def _squeeze(em, node, x, dims):
    if dims is None:
        return f"torch.squeeze({em.e(x)})"
    return f"torch.squeeze({em.e(x)}, {em.ints(tuple(dims))})"


@emits(join.Unbind)
def _unbind(em, node, x, dim):
    return f"torch.unbind({em.e(x)}, {em.e(dim)})"


def _cat(aten):
    def emit(em, node, *tensors, dim, np_dtype=None):
        return f"{aten}([{', '.join(em.e(t) for t in tensors)}], {em.e(dim)})"
    return emit


emits(join.Cat)(_cat("torch.cat"))
emits(join.Stack)(_cat("torch.stack"))


@emits(unary.ZeroCurvature)
def _zero_curvature(em, node, y, x):
    """``y`` itself (the node only shapes ember's second derivatives)."""
    return em.e(y)


@emits(conversion.Contiguous)
def _contiguous(em, node, x, fmt=None):
    return f"torch.contiguous({em.e(x)})"


@emits(shape.Expand)
def _expand_prim(em, node, x, shape):
    return f"torch.expand({em.e(x)}, {em.ints(shape)}, implicit=False)"


def _max_dim(aten):
    def emit(em, node, x, axis, keepdim):
        if axis is None:
            raise NotImplementedError(f"jit codegen: {node.op} of a 0-d tensor")
        return f"{aten}({em.e(x)}, {em.e(axis)}, {literal(bool(keepdim))})"
    return emit


emits(extrema._MaxDim)(_max_dim("torch.max"))
emits(extrema._MinDim)(_max_dim("torch.min"))


def _amax(aten):
    def emit(em, node, x, axes, keepdim):
        dims = "[]" if axes is None else em.ints(tuple(axes))
        return f"{aten}({em.e(x)}, {dims}, {literal(bool(keepdim))})"
    return emit


emits(extrema._Amax)(_amax("torch.amax"))
emits(extrema._Amin)(_amax("torch.amin"))


def _argmax(aten):
    return lambda em, node, x, axis, keepdim: \
        f"{aten}({em.e(x)}, {em.e(axis)}, {literal(bool(keepdim))})"


emits(extrema._Argmax)(_argmax("torch.argmax"))
emits(extrema._Argmin)(_argmax("torch.argmin"))


@emits(unary.Clamp, unary.ClampTensor)
def _clamp(em, node, x, lo, hi):
    return f"torch.clamp({em.e(x)}, {em.e(lo)}, {em.e(hi)})"


@emits(conversion.ToCopy)
def _to_copy(em, node, x, np_dtype, device):
    from ember.backend import dtypes
    if np_dtype is None:
        return f"torch.clone({em.e(x)})"
    code = literal(dtypes.from_numpy_dtype(np.dtype(np_dtype)))
    return f"torch.to({em.e(x)}, {code}, False, False, None)"


@emits(masking.MaskedFill)
def _masked_fill(em, node, x, mask, value):
    return f"torch.masked_fill({em.e(x)}, {em.e(mask)}, {em.e(value)})"


@emits(join.Repeat)
def _repeat(em, node, x, reps):
    return f"torch.repeat({em.e(x)}, {em.ints(tuple(reps))})"


@emits(shape.ConstantPad)
def _constant_pad(em, node, x, pads, value):
    return f"torch.constant_pad_nd({em.e(x)}, {em.ints(tuple(pads))}, {em.e(value)})"


@emits(vector_norms._VectorNorm)
def _vector_norm(em, node, x, p, axes, keepdim):
    dims = "None" if axes is None else em.ints(tuple(axes))
    return (f"torch.linalg_vector_norm({em.e(x)}, {literal(float(p))}, {dims}, "
            f"{literal(bool(keepdim))})")


@emits(join.SplitWithSizes)
def _split(em, node, x, sizes, dim):
    if isinstance(sizes, (tuple, list)):
        res = em.tmp(f"torch.split_with_sizes({em.e(x)}, {em.ints(tuple(sizes))}, "
                     f"{em.e(dim)})")
    else:  # one piece size (a traced int where the trace read it from a size)
        res = em.tmp(f"torch.split({em.e(x)}, {em.e(sizes)}, {em.e(dim)})")
    return [f"{res}[{i}]" for i in range(len(node.outputs))]


@emits(shape.Flip, scan.Flip)
def _flip(em, node, x, axis):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return f"torch.flip({em.e(x)}, {em.ints(tuple(axes))})"


@emits(scan.Cumsum)
def _cumsum(em, node, x, axis, np_dtype):
    if np_dtype is not None:
        raise NotImplementedError("jit codegen: cumsum with dtype=")
    # a 0-d input's node has no axis (None): aten's dim is 0 there
    return f"torch.cumsum({em.e(x)}, {em.e(0 if axis is None else axis)})"


@emits(gather_scatter.Gather)
def _gather(em, node, x, idx, dim):
    return f"torch.gather({em.e(x)}, {em.e(dim)}, {em.e(idx)})"


@emits(sorting.Picked)
def _picked(em, node, x, idx, dim, keepdim=True):
    i = em.e(idx) if keepdim else f"{em.e(idx)}.unsqueeze({em.e(dim)})"
    out = f"torch.gather({em.e(x)}, {em.e(dim)}, {i})"
    return out if keepdim else f"{out}.squeeze({em.e(dim)})"


@emits(index_along.IndexSelect)
def _index_select(em, node, x, idx, dim):
    return f"torch.index_select({em.e(x)}, {em.e(dim)}, {em.e(idx)})"


@emits(conv.Conv)
def _conv(em, node, x, w, b, g):
    nd = g.nd
    x_src = em.e(x)
    lo, hi = tuple(int(v) for v in g.lo), tuple(int(v) for v in g.hi)
    if lo != hi:
        pads = []
        for a, c in zip(reversed(lo), reversed(hi)):
            pads += [a, c]
        x_src = f"torch.constant_pad_nd({x_src}, {literal(pads)}, 0.)"
        lo = (0,) * nd
    return (f"torch._convolution({x_src}, {em.e(w)}, {em.e(b)}, {literal(tuple(g.s))}, "
            f"{literal(lo)}, {literal(tuple(g.d))}, False, {literal((0,) * nd)}, {g.G}, "
            "False, False, True, True)")


@emits(normalization.Normalize)
def _batch_norm_train(em, node, x, w, b, axes, eps, stats):
    """Batch norm in training mode: ``torch.batch_norm(..., training=True, ...)``, which
    updates the running statistics as ember's node does."""
    nd = len(node.inputs[0].shape)
    if tuple(axes) == tuple(range(2, nd)) and stats is None and nd > 2:
        # each (sample, dim 1) slice over the rest (group norm's groups): aten's group
        # norm with one channel per group, its size read at run time
        x_src = em.e(x)
        out = f"torch.group_norm({x_src}, {x_src}.size(1), None, None, {literal(float(eps))}, " \
            "True)"
        out = out if w is None else f"torch.mul({out}, {em.e(w)})"
        return out if b is None else f"torch.add({out}, {em.e(b)})"
    if tuple(axes) != (0,) + tuple(range(2, nd)) or (stats is not None and
                                                    stats.per_instance):
        raise NotImplementedError("jit codegen: a normalization other than batch norm")
    running = ["None", "None"]
    momentum = 0.1
    if stats is not None:
        momentum = stats.momentum
        for i, t in enumerate(stats.tensors):
            if t is None:
                continue
            owner = [v for v in em.graph.params.values() if v.data is t]
            if not owner:
                raise NotImplementedError("jit codegen: batch norm statistics that are not "
                                          "buffers of the traced module")
            running[i] = em.name(owner[0])
    flat = (lambda t: "None" if t is None else f"torch.reshape({em.e(t)}, [-1])")
    return (f"torch.batch_norm({em.e(x)}, {flat(w)}, {flat(b)}, {running[0]}, {running[1]}, "
            f"True, {literal(float(momentum if momentum is not None else 0.0))}, "
            f"{literal(float(eps))}, True)")


@emits("batch_norm")
def _batch_norm_eval(em, node, input, running_mean, running_var, weight=None, bias=None,
                     training=False, momentum=0.1, eps=1e-05):
    """Eval-mode batch norm, recorded as one call: PyTorch's traced spelling."""
    return (f"torch.batch_norm({em.e(input)}, {em.e(weight)}, {em.e(bias)}, "
            f"{em.e(running_mean)}, {em.e(running_var)}, False, "
            f"{literal(float(momentum if momentum is not None else 0.0))}, "
            f"{literal(float(eps))}, True)")


@emits(normalization._LayerNorm)
def _layer_norm(em, node, x, w, b, axes, eps, stats=None):
    shape = [node.inputs[0].shape[a] for a in axes]
    return (f"torch.layer_norm({em.e(x)}, {literal(shape)}, {em.e(w)}, {em.e(b)}, "
            f"{literal(eps)}, True)")


@emits(attention.ScaledDotProductAttention)
def _sdpa(em, node, q, k, v, bias, dmask, scale, safe):
    if dmask is not None:
        raise NotImplementedError("jit codegen: attention with dropout while tracing (call "
                                  ".eval() before tracing)")
    return (f"torch.scaled_dot_product_attention({em.e(q)}, {em.e(k)}, {em.e(v)}, "
            f"{em.e(bias)}, 0., False, scale={literal(float(scale))})")


_RNN_ATEN = {rnn.LSTMLayer: "torch.lstm", rnn.GRULayer: "torch.gru",
             rnn.RNNTanhLayer: "torch.rnn_tanh", rnn.RNNReluLayer: "torch.rnn_relu"}


@emits(*_RNN_ATEN)
def _rnn_layer(em, node, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, batch_sizes, reverse):
    """One layer of one direction over (steps * batch, I) rows, as torch's fused op on
    (steps, batch, I): the op torch records for an ``nn.LSTM``/``GRU``/``RNN``."""
    b0 = batch_sizes[0]
    key = (lambda b: ("ref", id(b.value)) if isinstance(b, Ref) else ("int", int(b)))
    if any(key(b) != key(b0) for b in batch_sizes):
        raise NotImplementedError("jit codegen: a recurrent layer over a packed sequence of "
                                  "varying batch sizes")
    n_in = node.inputs[0].shape[-1]
    seq = f"torch.view({em.e(x)}, [-1, {em.e(b0)}, {n_in}])"
    if reverse:
        seq = f"torch.flip({seq}, [0])"
    params = [w_ih, w_hh] + ([b_ih, b_hh] if b_ih is not None else []) + \
        ([w_hr] if w_hr is not None else [])
    plist = "[" + ", ".join(em.e(p) for p in params) + "]"
    has_b = literal(b_ih is not None)
    aten = _RNN_ATEN[node.target]
    h = f"torch.unsqueeze({em.e(h0)}, 0)"
    if node.target is rnn.LSTMLayer:
        hx = f"[{h}, torch.unsqueeze({em.e(c0)}, 0)]"
    else:
        hx = h
    res = em.tmp(f"{aten}({seq}, {hx}, {plist}, {has_b}, 1, 0., False, False, False)")
    y = f"{res}[0]"
    if reverse:
        y = f"torch.flip({y}, [0])"
    h_out = node.outputs[0].shape[-1]
    outs = [f"torch.reshape({y}, [-1, {h_out}])", f"torch.select({res}[1], 0, 0)"]
    if node.target is rnn.LSTMLayer:
        outs.append(f"torch.select({res}[2], 0, 0)")
    return outs


@emits("lstm", "gru", "rnn_tanh", "rnn_relu")
def _rnn_call(em, node, *args):
    """A whole ``nn.LSTM``/``GRU``/``RNN`` call: ``torch.lstm(...)`` with ATen's layout,
    the one op PyTorch's tracer records for the module."""
    from ember.nn.functional_rnn import per_layer, split_args
    (x, bs, hx, params, has_b, layers, p, train, bidir,
     batch_first) = split_args(args, node.op)
    lstm = node.op == "lstm"
    if hx is None:  # packed, no state given: zeros of the largest batch
        D = 2 if bidir else 1
        per = per_layer(node.op.upper(), len(params), has_b, layers, D, node.op)
        ins = {id(v): v for v in node.inputs}
        shape = (lambda r: ins[id(r.value)].shape)
        size = shape(params[per - 1])[0] if per in (3, 5) else shape(params[1])[1]
        dt = _factory_kwargs(em, {"dtype": node.outputs[0].dtype, "device": None})
        b = f"int(torch.select({em.e(bs)}, 0, 0))"
        zs = [f"torch.zeros([{layers * D}, {b}, {size}], {dt})"]
        if lstm:
            zs.append(f"torch.zeros([{layers * D}, {b}, {shape(params[1])[1]}], {dt})")
        hx = zs if lstm else zs[0]
        hx = "[" + ", ".join(hx) + "]" if lstm else hx
    else:
        hx = literal(hx, em) if lstm else em.e(hx)
    head = [em.e(x)] + ([em.e(bs)] if bs is not None else []) + [hx]
    tail = [literal(params, em), literal(bool(has_b)), literal(int(layers)),
            literal(float(p)), literal(bool(train)), literal(bool(bidir))]
    if bs is None:
        tail.append(literal(bool(batch_first)))
    res = em.tmp(f"torch.{node.op}({', '.join(head + tail)})")
    return [f"{res}[{i}]" for i in range(len(node.outputs))]


_UPSAMPLE = {"nearest": "upsample_nearest", "nearest-exact": "_upsample_nearest_exact",
             "linear": "upsample_linear", "bilinear": "upsample_bilinear",
             "bicubic": "upsample_bicubic", "trilinear": "upsample_trilinear"}


@emits("interpolate")
def _interpolate(em, node, input, size=None, scale_factor=None, mode="nearest",
                 align_corners=None, recompute_scale_factor=None, antialias=False):
    """``F.interpolate`` as the ``aten::upsample_*`` call PyTorch's tracer records."""
    if mode not in _UPSAMPLE or antialias or recompute_scale_factor:
        raise NotImplementedError(f"jit codegen: interpolate(mode={mode!r}, antialias="
                                  f"{antialias}, recompute_scale_factor="
                                  f"{recompute_scale_factor})")
    nd = len(node.inputs[0].shape) - 2
    fn = f"torch.{_UPSAMPLE[mode]}{nd}d"
    out = "None" if size is None else em.ints(size if isinstance(size, (tuple, list))
                                              else [size] * nd)
    if scale_factor is None:
        scales = "None"
    else:
        sf = scale_factor if isinstance(scale_factor, (tuple, list)) else [scale_factor] * nd
        scales = "[" + ", ".join(literal(float(v)) for v in sf) + "]"
    if mode.startswith("nearest"):
        return f"{fn}({em.e(input)}, {out}, {scales})"
    return f"{fn}({em.e(input)}, {out}, {literal(bool(align_corners))}, {scales})"


@emits("pad")
def _pad(em, node, x, pad, mode):
    return f"torch.pad({em.e(x)}, {em.ints(pad)}, {literal(mode)})"


@emits("multilabel_margin_loss")
def _multilabel_margin(em, node, input, target, reduction="mean"):
    r = {"none": 0, "mean": 1, "sum": 2}[reduction]
    return f"torch.multilabel_margin_loss({em.e(input)}, {em.e(target)}, {r})"


# ----- calls recorded above the primitives -----------------------------------------------
def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


@emits("size")
def _size(em, node, t, dim):
    return f"{em.e(t)}.size({em.e(dim)})"


_INT_OPS = {"int.add": "+", "int.sub": "-", "int.mul": "*", "int.floordiv": "//",
            "int.mod": "%"}


@emits(*_INT_OPS)
def _int_op(em, node, a, b):
    return f"({em.e(a)} {_INT_OPS[node.op]} {em.e(b)})"


@emits(TensorInt)
def _tensor_int(em, node, v, ndim=None):
    """``aten::Int`` of the tensor; a dim read so stays unwrapped, as the aten ops that
    take it wrap a negative dim themselves."""
    return f"int({em.e(v)})" if _is_tensor_arg(v) else em.e(v)


@emits("int.neg")
def _int_neg(em, node, a):
    return f"(-{em.e(a)})"


@emits("view", "reshape", "expand")
def _view(em, node, x, *shape, dtype=None):
    if node.op == "view" and (dtype is not None or len(shape) == 1 and _is_dtype(shape[0])):
        # TorchScript reads torch.view(x, <dtype code>) as a shape and has no spelling
        # for view(dtype) (PyTorch's tracer and script reject it too)
        raise NotImplementedError("jit codegen: view(dtype) (TorchScript has no spelling for "
                                  "reading the bytes as another dtype)")
    if node.op == "expand":
        return f"torch.expand({em.e(x)}, {em.ints(_shape_args(shape))}, implicit=False)"
    return f"torch.{node.op}({em.e(x)}, {em.ints(_shape_args(shape))})"


def _is_dtype(a):
    from ember.backend import dtypes
    return isinstance(a, (dtypes.dtype, type, np.dtype))


@emits("view_as", "reshape_as", "expand_as")
def _view_as(em, node, x, other):
    return f"torch.{node.op}({em.e(x)}, {em.e(other)})"


@emits("flatten")
def _flatten(em, node, x, start_dim=0, end_dim=-1):
    return f"torch.flatten({em.e(x)}, {em.e(start_dim)}, {em.e(end_dim)})"


@emits("unflatten")
def _unflatten(em, node, x, dim, sizes):
    return f"torch.unflatten({em.e(x)}, {em.e(dim)}, {em.ints(tuple(sizes))})"


@emits("detach")
def _detach(em, node, x):
    return f"torch.detach({em.e(x)})"


@emits("topk")
def _topk(em, node, input, k, dim=None, largest=True, sorted=True, out=None):
    d = -1 if dim is None else dim
    res = em.tmp(f"torch.topk({em.e(input)}, {em.e(k)}, {em.e(d)}, "
                 f"{literal(bool(largest))}, {literal(bool(sorted))})")
    return [f"{res}[0]", f"{res}[1]"]


@emits("sort")
def _sort(em, node, input, dim=-1, descending=False, stable=False, out=None):
    res = em.tmp(f"torch.sort({em.e(input)}, stable={literal(bool(stable))}, "
                 f"dim={em.e(dim)}, descending={literal(bool(descending))})")
    return [f"{res}[0]", f"{res}[1]"]


@emits("argsort")
def _argsort(em, node, input, dim=-1, descending=False, stable=False):
    return (f"torch.argsort({em.e(input)}, stable={literal(bool(stable))}, "
            f"dim={em.e(dim)}, descending={literal(bool(descending))})")


@emits("nonzero")
def _nonzero(em, node, input, out=None, as_tuple=False):
    if as_tuple:
        res = em.tmp(f"torch.unbind(torch.nonzero({em.e(input)}), 1)")
        return [f"{res}[{i}]" for i in range(len(node.outputs))]
    return f"torch.nonzero({em.e(input)})"


@emits("repeat_interleave")
def _repeat_interleave(em, node, input, repeats=None, dim=None, output_size=None):
    if repeats is None:
        return f"torch.repeat_interleave({em.e(input)})"
    return f"torch.repeat_interleave({em.e(input)}, {em.e(repeats)}, {em.e(dim)})"


@emits("bucketize")
def _bucketize(em, node, input, boundaries, *, out_int32=False, right=False):
    return (f"torch.bucketize({em.e(input)}, {em.e(boundaries)}, out_int32={em.e(out_int32)}, "
            f"right={em.e(right)})")


@emits("searchsorted")
def _searchsorted(em, node, sorted_sequence, input, *, out_int32=False, right=False,
                  side=None, sorter=None):
    return (f"torch.searchsorted({em.e(sorted_sequence)}, {em.e(input)}, "
            f"out_int32={em.e(out_int32)}, right={em.e(right)}, side={em.e(side)}, "
            f"sorter={em.e(sorter)})")


@emits("pdist")
def _pdist(em, node, input, p=2):
    return f"torch.pdist({em.e(input)}, {literal(float(p))})"


@emits("embedding")
def _embedding(em, node, input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
               scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise NotImplementedError("jit codegen: embedding with max_norm")
    pad = -1 if padding_idx is None else padding_idx
    return (f"torch.embedding({em.e(weight)}, {em.e(input)}, {em.e(pad)}, "
            f"{literal(bool(scale_grad_by_freq))}, False)")


def _factory_kwargs(em, kw):
    dtype = kw.get("dtype")
    device = kw.get("device")
    dev = "torch.device(\"cpu\")" if device is None else literal(_as_device(device))
    return (f"dtype={em.e(dtype) if dtype is not None else 'None'}, layout=None, "
            f"device={dev}, pin_memory=False")


def _as_device(d):
    from ember.backend import device as _device
    return _device(d) if isinstance(d, str) else d


@emits("zeros", "ones", "empty")
def _filled(em, node, *size, dtype=None, device=None, requires_grad=False, **kw):
    return (f"torch.{node.op}({em.ints(_shape_args(size))}, "
            f"{_factory_kwargs(em, {'dtype': dtype, 'device': device})})")


@emits("narrow")
def _narrow(em, node, x, dim, start, length):
    return f"torch.narrow({em.e(x)}, {em.e(dim)}, {em.e(start)}, {em.e(length)})"


@emits("eye")
def _eye(em, node, n, m=None, dtype=None, device=None, requires_grad=False, **kw):
    sizes = em.e(n) if m is None else f"{em.e(n)}, {em.e(m)}"
    return f"torch.eye({sizes}, {_factory_kwargs(em, {'dtype': dtype, 'device': device})})"


@emits("full")
def _full(em, node, size, fill_value, dtype=None, device=None, requires_grad=False, **kw):
    return (f"torch.full({em.ints(_shape_args((size,)))}, {em.e(fill_value)}, "
            f"{_factory_kwargs(em, {'dtype': dtype, 'device': device})})")


@emits("arange")
def _arange(em, node, *args, dtype=None, device=None, requires_grad=False, out=None,
            layout=None, start=None, end=None, step=None):
    if out is not None:
        raise NotImplementedError("jit codegen: arange(out=)")
    pos = [a for a in args]
    for k, v in (("start", start), ("end", end), ("step", step)):
        if v is not None:
            raise NotImplementedError(f"jit codegen: arange({k}=) by keyword")
    if len(pos) == 3 and not isinstance(pos[2], Ref) and pos[2] == 1:
        pos = pos[:2]
    nums = ", ".join(em.e(a) for a in pos)
    return f"torch.arange({nums}, {_factory_kwargs(em, {'dtype': dtype, 'device': device})})"


@emits("rand", "randn")
def _random_new(em, node, *size, generator=None, out=None, dtype=None, layout=None,
                device=None, requires_grad=False, pin_memory=False):
    if generator is not None or out is not None:
        raise NotImplementedError(f"jit codegen: {node.op} with a generator or out=")
    return (f"torch.{node.op}({em.ints(_shape_args(size))}, "
            f"{_factory_kwargs(em, {'dtype': dtype, 'device': device})})")


@emits("bernoulli_", "uniform_", "normal_")
def _random_fill(em, node, x, *args, generator=None, **kw):
    if generator is not None or kw:
        raise NotImplementedError(f"jit codegen: {node.op} with a generator or keywords")
    return f"torch.{node.op}({', '.join(em.e(a) for a in (x,) + args)})"


@emits("rand_like", "randn_like", "zeros_like", "ones_like", "empty_like", "full_like")
def _like(em, node, input, *fill, dtype=None, device=None, requires_grad=False, **kw):
    # as PyTorch's trace writes it: the device only when the call named one
    dev = "None" if device is None else literal(_as_device(device))
    head = ", ".join(em.e(a) for a in (input,) + fill)
    return f"torch.{node.op}({head}, dtype={em.e(dtype)}, layout=None, device={dev}, " \
        "pin_memory=False)"


@emits("getitem")
def _getitem(em, node, x, key):
    """``x[key]`` as torch's trace writes it: select/slice/unsqueeze per dim, then
    ``torch.index`` for tensor indices."""
    if not isinstance(key, tuple):
        key = (key,)
    ndim = len(node.inputs[0].shape)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    cur = em.e(x)
    d = 0
    tensors = []
    for k in key:
        if k is Ellipsis:
            d += ndim - n_real
        elif k is None:
            cur = f"torch.unsqueeze({cur}, {d})"
            d += 1
        elif isinstance(k, slice):
            if not (k.start is None and k.stop is None and k.step is None):
                start = "None" if k.start is None else em.e(k.start)
                stop = "None" if k.stop is None else em.e(k.stop)
                step = "1" if k.step is None else em.e(k.step)
                cur = f"torch.slice({cur}, {d}, {start}, {stop}, {step})"
            d += 1
        elif isinstance(k, Ref) and k.value.type == "Tensor":
            tensors.append((d, em.e(k)))
            d += 1
        elif isinstance(k, (int, Ref)):
            cur = f"torch.select({cur}, {d}, {em.e(k)})"
        else:
            raise NotImplementedError(f"jit codegen: indexing with {type(k).__name__}")
    if tensors:
        if [t[0] for t in tensors] != list(range(len(tensors))):
            raise NotImplementedError("jit codegen: tensor indices after other indices")
        idx = ", ".join(t[1] for t in tensors)
        cur = f"torch.index({cur}, annotate(List[Optional[Tensor]], [{idx}]))"
    return cur


@emits(indexing.GetItem)
def _getitem_primitive(em, node, x, idx):
    """Basic indexing called as a primitive (``torch.select`` in scripted code run by a
    trace, ``x.select(0, i)``): written as ``x[key]`` is (``Select`` too)."""
    return _getitem(em, node, x, idx)



# ----- losses: PyTorch's kernels, their reduction as its enum (none 0, mean 1, sum 2) ----
_REDUCTION = {"none": 0, "mean": 1, "sum": 2}


@emits(losses.MseLoss, losses.SoftMarginLoss, losses.MultilabelMarginLoss)
def _loss(em, node, x, t, reduction):
    aten = {"MseLoss": "mse_loss", "SoftMarginLoss": "soft_margin_loss",
            "MultilabelMarginLoss": "multilabel_margin_loss"}[node.target._op_name]
    return f"torch.{aten}({em.e(x)}, {em.e(t)}, {_REDUCTION[reduction]})"


@emits(losses.SmoothL1Loss, losses.HuberLoss)
def _loss_param(em, node, x, t, reduction, param):
    aten = "smooth_l1_loss" if node.target is losses.SmoothL1Loss else "huber_loss"
    return f"torch.{aten}({em.e(x)}, {em.e(t)}, {_REDUCTION[reduction]}, {em.e(param)})"


@emits(losses.BinaryCrossEntropy)
def _bce(em, node, x, t, w, reduction):
    return f"torch.binary_cross_entropy({em.e(x)}, {em.e(t)}, {em.e(w)}, " \
           f"{_REDUCTION[reduction]})"


@emits(losses.BinaryCrossEntropyWithLogits)
def _bce_logits(em, node, x, t, w, pw, reduction):
    return f"torch.binary_cross_entropy_with_logits({em.e(x)}, {em.e(t)}, {em.e(w)}, " \
           f"{em.e(pw)}, {_REDUCTION[reduction]})"


@emits(losses.NllLoss, losses.NllLoss2d)
def _nll(em, node, x, t, w, ignore_index, reduction):
    aten = "nll_loss2d" if node.target is losses.NllLoss2d else "nll_loss"
    return f"torch.{aten}({em.e(x)}, {em.e(t)}, {em.e(w)}, {_REDUCTION[reduction]}, " \
           f"{em.e(ignore_index)})"


@emits(losses.MultiMarginLoss)
def _multi_margin(em, node, x, t, w, p, margin, reduction):
    return f"torch.multi_margin_loss({em.e(x)}, {em.e(t)}, {em.e(p)}, {em.e(margin)}, " \
           f"{em.e(w)}, {_REDUCTION[reduction]})"
