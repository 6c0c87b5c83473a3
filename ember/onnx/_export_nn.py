"""ONNX converters of the network layers: convolution, pooling, normalization, attention,
recurrent layers, adaptive pooling, interpolation, padding and the random ops (exported in
training mode, e.g. dropout).

Each is attached to its op class with ``@exports(SomeOpClass)`` or, for a call the capture
records by name, put in ``EXPORTERS`` (see :mod:`ember.onnx._export_registry`).
``ember.onnx._export_ops`` imports this module, so importing it registers these too.
"""
import numpy as np

from ember._graph.ir import Ref
from ember.onnx._export import UnsupportedOnnxExport
from ember.onnx._export_registry import _axes, _rank, _reduce_axes, exports
from ember.ops import attention, conv, normalization, pooling, rnn

# ---- convolution, pooling, normalization ---------------------------------------------------

def _conv_pads(geom):
    return [int(v) for v in geom.lo] + [int(v) for v in geom.hi]


@exports(conv.Conv)
def _conv(g, node, x, w, b, geom):
    ins = [g.tensor(x), g.tensor(w)] + ([g.tensor(b)] if b is not None else [])
    return g.op("Conv", ins, kernel_shape=[int(k) for k in geom.K],
                strides=[int(s) for s in geom.s], dilations=[int(d) for d in geom.d],
                pads=_conv_pads(geom), group=int(geom.G))


@exports(conv.ConvInput)
def _conv_transpose(g, node, y, w, b, geom):
    """A transposed convolution (the adjoint of ``Conv`` in its input): ONNX
    ``ConvTranspose`` with the forward convolution's pads, and the output_padding that
    makes the spatial size the one recorded."""
    ins = [g.tensor(y), g.tensor(w)] + ([g.tensor(b)] if b is not None else [])
    O = node.inputs[0].shape[2:]
    extra = [int(S) - ((int(o) - 1) * int(s) - int(lo) - int(hi) + int(d) * (int(k) - 1) + 1)
             for S, o, s, lo, hi, d, k in zip(node.outputs[0].shape[2:], O, geom.s, geom.lo,
                                              geom.hi, geom.d, geom.K)]
    return g.op("ConvTranspose", ins, kernel_shape=[int(k) for k in geom.K],
                strides=[int(s) for s in geom.s], dilations=[int(d) for d in geom.d],
                pads=_conv_pads(geom), output_padding=extra, group=int(geom.G))


@exports(pooling.MaxPool)
def _max_pool(g, node, x, geom, *rest):
    if len(node.outputs) > 1:
        # ONNX numbers the indices over the whole tensor, PyTorch within each plane
        raise UnsupportedOnnxExport("max pooling with return_indices=True")
    # PyTorch's padding on both sides and the layer's own ceil_mode, which ONNX's MaxPool
    # reads as PyTorch does (a last window starting in the right padding is dropped), so
    # that other spatial sizes (dynamic axes) pool as eager does; not the padding and
    # rounding the example's size needed
    lo = [int(v) for v in geom.lo]
    t = g.tensor(x)
    # ONNX pools (N, C, *spatial): an unbatched input gets its batch axis and loses it
    unbatched = _rank(x) == len(geom.K) + 1
    if unbatched:
        t = g.op("Unsqueeze", [t, _axes(g, [0])])
    y = g.op("MaxPool", [t], kernel_shape=[int(k) for k in geom.K],
             strides=[int(s) for s in geom.s], pads=lo + lo,
             dilations=[int(d) for d in geom.d], ceil_mode=int(bool(geom.ceil)))
    return g.op("Squeeze", [y, _axes(g, [0])]) if unbatched else y


@exports(pooling.AvgPool, pooling.AvgPool3D)
def _avg_pool(g, node, x, geom, div):
    """ONNX ``AveragePool`` with PyTorch's padding on both sides and ``ceil_mode``; an
    unbatched input gets its batch axis around it (1-d pooling is 2-d in the graph)."""
    count_include_pad, divisor_override = geom.extra
    if divisor_override is not None:
        raise UnsupportedOnnxExport("average pooling with divisor_override")
    lo = [int(v) for v in geom.lo]
    t = g.tensor(x)
    unbatched = _rank(x) == len(geom.K) + 1
    if unbatched:
        t = g.op("Unsqueeze", [t, _axes(g, [0])])
    y = g.op("AveragePool", [t], kernel_shape=[int(k) for k in geom.K],
             strides=[int(s) for s in geom.s], pads=lo + lo,
             ceil_mode=int(bool(geom.ceil)),  # the layer's (other sizes: dynamic axes)
             count_include_pad=int(bool(count_include_pad)))
    return g.op("Squeeze", [y, _axes(g, [0])]) if unbatched else y


@exports(normalization._GroupNorm)
def _group_norm(g, node, x, w, b, axes, eps, stats=None):
    """Group norm's node normalizes each (sample, group) slice of ``(N, G, C/G, *)``:
    ``InstanceNormalization`` with one channel per group, then the affine."""
    if tuple(axes) != tuple(range(2, _rank(x))) or stats is not None:
        raise UnsupportedOnnxExport("a normalization other than group norm's")
    groups = x.value.shape[1]
    dt = g.np_dtype(x)
    y = g.op("InstanceNormalization", [g.tensor(x), g.const(np.ones(groups, dt), "ones"),
                                       g.const(np.zeros(groups, dt), "zeros")],
             epsilon=float(eps))
    if w is not None:
        y = g.op("Mul", [y, g.tensor(w)])
    return y if b is None else g.op("Add", [y, g.tensor(b)])


@exports("batch_norm")
def _batch_norm_eval(g, node, input, running_mean, running_var, weight=None, bias=None,
                     training=False, momentum=0.1, eps=1e-05):
    """Eval-mode batch norm (the capture records it as one call): BatchNormalization with
    the running statistics, ones and zeros standing in for a missing weight and bias."""
    c = input.value.shape[1]
    dt = g.np_dtype(input)
    w = g.tensor(weight) if weight is not None else g.const(np.ones(c, dt), "ones")
    b = g.tensor(bias) if bias is not None else g.const(np.zeros(c, dt), "zeros")
    return g.op("BatchNormalization", [g.tensor(input), w, b, g.tensor(running_mean),
                                       g.tensor(running_var)], epsilon=float(eps))


@exports("instance_norm")
def _instance_norm(g, node, input, running_mean=None, running_var=None, weight=None,
                   bias=None, use_input_stats=True, momentum=0.1, eps=1e-05):
    """Instance norm, recorded as one call: with the running statistics it is eval batch
    norm over them; else InstanceNormalization (ones and zeros for a missing weight and
    bias; running statistics are not updated by an exported model)."""
    if not use_input_stats:
        return _batch_norm_eval(g, node, input, running_mean, running_var, weight, bias,
                                False, momentum, eps)
    c = input.value.shape[1]
    dt = g.np_dtype(input)
    w = g.tensor(weight) if weight is not None else g.const(np.ones(c, dt), "ones")
    b = g.tensor(bias) if bias is not None else g.const(np.zeros(c, dt), "zeros")
    return g.op("InstanceNormalization", [g.tensor(input), w, b], epsilon=float(eps))


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
    """Reflect and replicate padding: ONNX ``Pad`` (modes ``reflect``/``edge``); circular
    padding: each dim in turn, its last ``lo`` and first ``hi`` entries concatenated
    around it (ONNX's ``wrap`` mode is opset 19), so the corners wrap too."""
    if mode not in ("reflect", "replicate", "circular") or any(p < 0 for p in pad):
        raise UnsupportedOnnxExport(f"pad(mode={mode!r}) with widths {list(pad)}")
    r = _rank(x)
    if mode == "circular":
        y = g.tensor(x)
        for k in range(len(pad) // 2):
            lo, hi, axis = int(pad[2 * k]), int(pad[2 * k + 1]), _axes(g, [r - 1 - k])
            parts = [y]
            if lo:
                parts.insert(0, g.op("Slice", [y, _axes(g, [-lo]),
                                               _axes(g, [np.iinfo(np.int64).max]), axis]))
            if hi:
                parts.append(g.op("Slice", [y, _axes(g, [0]), _axes(g, [hi]), axis]))
            if len(parts) > 1:
                y = g.op("Concat", parts, axis=r - 1 - k)
        return y
    n = len(pad) // 2
    begins, ends = [0] * r, [0] * r
    for k in range(n):
        begins[r - 1 - k], ends[r - 1 - k] = pad[2 * k], pad[2 * k + 1]
    return g.op("Pad", [g.tensor(x), g.const(np.asarray(begins + ends, np.int64), "pads")],
                mode="reflect" if mode == "reflect" else "edge")


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
