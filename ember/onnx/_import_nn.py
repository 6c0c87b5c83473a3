"""ONNX converters: convolution, pooling, normalization, activations, recurrent layers,
resizing and losses."""
import math

import numpy as np

import ember.nn.functional as F
from ember import _core as E
from ember.onnx._import import UnsupportedOnnxOp
from ember.onnx._import_ops import ints
from ember.onnx._registry import importer

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _explicit_pads(x, k, strides, dilations, pads, auto_pad, n):
    """ONNX pads as (begin..., end...) per spatial dim, auto_pad resolved."""
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * n)
        for i in range(n):
            size = x.shape[2 + i]
            out = -(-size // strides[i])
            total = max((out - 1) * strides[i] + (k[i] - 1) * dilations[i] + 1 - size, 0)
            small, big = total // 2, total - total // 2
            pads[i], pads[i + n] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        return pads
    if auto_pad == "VALID":
        return [0] * (2 * n)
    return list(pads) if pads is not None else [0] * (2 * n)


def _pad_input(x, pads, n, value=0.0):
    """Symmetric pads go to the kernel; asymmetric ones are applied to the input first."""
    begin, end = pads[:n], pads[n:]
    if begin == end:
        return x, begin
    torch_pad = []
    for i in reversed(range(n)):
        torch_pad += [begin[i], end[i]]
    return F.pad(x, torch_pad, "constant", value), [0] * n


@importer("Conv")
def _conv(cx, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
          pads=None, strides=None):
    n = x.dim() - 2
    k = kernel_shape or list(w.shape[2:])
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    p = _explicit_pads(x, k, strides, dilations, pads, auto_pad, n)
    x, sym = _pad_input(x, p, n)
    return _CONV[n](x, w, b, strides, sym, dilations, group)


@importer("ConvTranspose")
def _conv_transpose(cx, x, w, b=None, auto_pad="NOTSET", dilations=None, group=1,
                    kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                    strides=None):
    n = x.dim() - 2
    k = kernel_shape or list(w.shape[2:])
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    out_pad = list(output_padding or [0] * n)
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = output_shape[-n:] if output_shape is not None else \
            [x.shape[2 + i] * strides[i] for i in range(n)]
        pads = [0] * (2 * n)
        for i in range(n):
            total = strides[i] * (x.shape[2 + i] - 1) + out_pad[i] + \
                ((k[i] - 1) * dilations[i] + 1) - target[i]
            if total < 0:  # the requested output is larger: extend the far side
                out_pad[i] -= total
                total = 0
            if auto_pad == "SAME_UPPER":
                pads[i], pads[i + n] = total // 2, total - total // 2
            else:
                pads[i], pads[i + n] = total - total // 2, total // 2
    pads = pads or [0] * (2 * n)
    begin, end = pads[:n], pads[n:]
    y = _CONV_T[n](x, w, b, strides, [0] * n, out_pad, group, dilations)
    index = [slice(None), slice(None)] + [slice(begin[i], y.shape[2 + i] - end[i])
                                          for i in range(n)]
    return y[tuple(index)]


def _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad):
    n = x.dim() - 2
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    return n, strides, dilations, _explicit_pads(x, kernel_shape, strides, dilations, pads,
                                                 auto_pad, n)


def _ceil_extra(x, k, strides, dilations, pads, n, ceil_mode):
    """ember pools take symmetric padding: extend the end side by hand when needed."""
    return pads


@importer("MaxPool")
def _max_pool(cx, x, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, pads=None,
              storage_order=0, strides=None):
    n, strides, dilations, p = _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad)
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
    fill = -math.inf if x.is_floating_point() else int(np.iinfo(x.numpy().dtype).min)
    begin, end = p[:n], p[n:]
    if begin != end or any(b > k // 2 for b, k in zip(begin, kernel_shape)):
        # pads the kernel call cannot take: pad the input with the lowest value instead
        pad = []
        for i in reversed(range(n)):
            pad += [begin[i], end[i]]
        x = F.pad(x if x.is_floating_point() else x.to(E.float64), pad, "constant", fill)
        sym = [0] * n
    else:
        sym = begin
    want_idx = cx.n_outputs > 1
    xf = x if x.is_floating_point() else x.to(E.float64)
    out = pool(xf, kernel_shape, strides, sym, dilations, ceil_mode=bool(ceil_mode),
               return_indices=want_idx)
    if want_idx:
        y, idx = out
        # ONNX indices are flat over the whole (N, C, ...) tensor
        spatial = int(np.prod(x.shape[2:]))
        if storage_order:  # column-major positions within each (h, w) plane
            if n != 2:
                raise UnsupportedOnnxOp("ember.onnx: MaxPool storage_order=1 beyond 2-D")
            h, w = x.shape[2:]
            idx = (idx % w) * h + idx // w
        base = E.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1],
                                                          *([1] * n)) * spatial
        return y.to(x.dtype), idx + base
    return out.to(x.dtype)


@importer("AveragePool")
def _avg_pool(cx, x, kernel_shape, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0,
              dilations=None, pads=None, strides=None):
    n, strides, dilations, p = _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad)
    if any(d != 1 for d in dilations):
        return _avg_pool_dilated(x, kernel_shape, strides, dilations, p, n, count_include_pad,
                                 ceil_mode)
    begin, end = p[:n], p[n:]
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
    if begin == end and all(b <= k // 2 for b, k in zip(begin, kernel_shape)):
        return pool(x, kernel_shape, strides, begin, ceil_mode=bool(ceil_mode),
                    count_include_pad=bool(count_include_pad))
    return _avg_pool_dilated(x, kernel_shape, strides, dilations, p, n, count_include_pad,
                             ceil_mode)


def _avg_pool_dilated(x, k, strides, dilations, p, n, count_include_pad, ceil_mode):
    """Average pooling as sum-pool of values / sum-pool of ones (any pads, dilations)."""
    ones = E.ones([1, 1] + list(x.shape[2:]), dtype=x.dtype)
    torch_pad = []
    for i in reversed(range(n)):
        torch_pad += [p[i], p[i + n]]
    extra = [0] * n
    if ceil_mode:
        for i in range(n):
            span = x.shape[2 + i] + p[i] + p[i + n] - ((k[i] - 1) * dilations[i] + 1)
            out = -(-span // strides[i]) + 1
            if (out - 1) * strides[i] >= x.shape[2 + i] + p[i]:
                out -= 1
            extra[i] = max((out - 1) * strides[i] + (k[i] - 1) * dilations[i] + 1 -
                           (x.shape[2 + i] + p[i] + p[i + n]), 0)
    pad_c = list(torch_pad)
    pad_all = []
    for j, i in enumerate(reversed(range(n))):
        pad_all += [pad_c[2 * j], pad_c[2 * j + 1] + extra[i]]
    xs = F.pad(x, pad_all)
    weight = E.ones([1, 1] + list(k), dtype=x.dtype)
    conv = _CONV[n]
    c = x.shape[1]
    s = conv(xs.reshape([-1, 1] + list(xs.shape[2:])), weight, None, strides, 0, dilations)
    s = s.reshape([x.shape[0], c] + list(s.shape[2:]))
    if count_include_pad:
        mask = F.pad(F.pad(ones, torch_pad, value=1.0), [a for j, i in
                                                         enumerate(reversed(range(n)))
                                                         for a in (0, extra[i])])
    else:
        mask = F.pad(ones, pad_all)
    cnt = conv(mask, weight, None, strides, 0, dilations)
    return s / cnt


@importer("GlobalAveragePool")
def _gap(cx, x):
    return x.mean(tuple(range(2, x.dim())), keepdim=True)


@importer("GlobalMaxPool")
def _gmp(cx, x):
    return x.amax(tuple(range(2, x.dim())), keepdim=True)


@importer("LpPool")
def _lp_pool(cx, x, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, p=2,
             pads=None, strides=None):
    n, strides, dilations, pp = _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad)
    s = _avg_pool_dilated(E.abs(x) ** p, kernel_shape, strides, dilations, pp, n, 1, ceil_mode)
    return (s * float(np.prod(kernel_shape))) ** (1.0 / p)


# ---- normalization -------------------------------------------------------------------

@importer("BatchNormalization")
def _batch_norm(cx, x, scale, bias, mean, var, epsilon=1e-5, momentum=0.9, training_mode=0,
                spatial=1):
    if training_mode:
        dims = [0] + list(range(2, x.dim()))
        bm = x.mean(dims)
        bv = x.var(dims, unbiased=False)
        shape = [1, -1] + [1] * (x.dim() - 2)
        y = (x - bm.reshape(shape)) / E.sqrt(bv.reshape(shape) + epsilon) * \
            scale.reshape(shape) + bias.reshape(shape)
        return (y, mean * momentum + bm * (1 - momentum), var * momentum + bv * (1 - momentum))
    return F.batch_norm(x, mean, var, scale, bias, False, 0.0, epsilon)


@importer("InstanceNormalization")
def _instance_norm(cx, x, scale, bias, epsilon=1e-5):
    return F.instance_norm(x, weight=scale, bias=bias, eps=epsilon)


@importer("LayerNormalization")
def _layer_norm(cx, x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
    axis %= x.dim()
    dims = tuple(range(axis, x.dim()))
    xf = x.float() if x.dtype == E.float16 else x
    mean = xf.mean(dims, keepdim=True)
    d = xf - mean
    var = (d * d).mean(dims, keepdim=True)
    inv = 1.0 / E.sqrt(var + epsilon)
    y = (d * inv).to(x.dtype) * scale
    if bias is not None:
        y = y + bias
    return y, mean, inv


@importer("GroupNormalization")
def _group_norm(cx, x, scale, bias, num_groups, epsilon=1e-5, stash_type=1):
    n, c = x.shape[:2]
    g = x.reshape(n, num_groups, -1)
    mean = g.mean(-1, keepdim=True)
    var = g.var(-1, unbiased=False, keepdim=True)
    y = ((g - mean) / E.sqrt(var + epsilon)).reshape(x.shape)
    shape = [1, -1] + [1] * (x.dim() - 2)
    if scale.numel() == num_groups and num_groups != c:  # opset 18: per-group scale
        scale = scale.repeat_interleave(c // num_groups)
        bias = bias.repeat_interleave(c // num_groups)
    return y * scale.reshape(shape) + bias.reshape(shape)


@importer("RMSNormalization")
def _rms_norm(cx, x, scale, axis=-1, epsilon=1e-5, stash_type=1):
    dims = tuple(range(axis % x.dim(), x.dim()))
    xf = x.float() if x.dtype == E.float16 else x
    rms = E.sqrt((xf * xf).mean(dims, keepdim=True) + epsilon)
    return (xf / rms).to(x.dtype) * scale


@importer("LRN")
def _lrn(cx, x, size, alpha=1e-4, beta=0.75, bias=1.0):
    sq = (x * x).unsqueeze(1)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = F.pad(sq, [0, 0] * (x.dim() - 2) + [lo, hi])
    kernel = [size] + [1] * (x.dim() - 2)
    s = {3: F.avg_pool2d, 4: F.avg_pool3d}[x.dim()](sq, kernel, 1) * size
    return x / (bias + alpha / size * s.squeeze(1)) ** beta


@importer("LpNormalization")
def _lp_norm(cx, x, axis=-1, p=2):
    norm = E.linalg.vector_norm(x, p, axis, keepdim=True)
    return E.where(norm == 0, E.zeros_like(x), x / norm)


@importer("MeanVarianceNormalization")
def _mvn(cx, x, axes=None):
    axes = tuple(axes if axes is not None else [0, 2, 3])
    mean = x.mean(axes, keepdim=True)
    var = ((x - mean) ** 2).mean(axes, keepdim=True)
    return (x - mean) / E.sqrt(var + 1e-9)


# ---- activations ---------------------------------------------------------------------

def _flattened(fn):
    """Softmax-like ops before opset 13 work on the input flattened to 2-D at ``axis``."""
    def f(cx, x, axis=None):
        if cx.opset < 13:
            axis = 1 if axis is None else axis % max(x.dim(), 1)
            shape = x.shape
            y = fn(x.reshape(int(np.prod(shape[:axis])), -1), 1)
            return y.reshape(shape)
        return fn(x, -1 if axis is None else axis)
    return f


def _hardmax(x, axis):
    idx = x.argmax(axis, keepdim=True)
    return E.zeros_like(x).scatter(axis, idx, 1.0)


importer("Softmax")(_flattened(lambda x, a: F.softmax(x, a)))
importer("LogSoftmax")(_flattened(lambda x, a: F.log_softmax(x, a)))
importer("Hardmax")(_flattened(_hardmax))


@importer("LeakyRelu")
def _leaky_relu(cx, x, alpha=0.01):
    return F.leaky_relu(x, alpha)


@importer("PRelu")
def _prelu(cx, x, slope):
    return E.where(x < 0, x * slope, x)


@importer("Elu")
def _elu(cx, x, alpha=1.0):
    return F.elu(x, alpha)


@importer("Celu")
def _celu(cx, x, alpha=1.0):
    return F.celu(x, alpha)


@importer("Selu")
def _selu(cx, x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return gamma * E.where(x > 0, x, alpha * (E.exp(x) - 1))


@importer("Gelu")
def _gelu(cx, x, approximate="none"):
    return F.gelu(x, approximate=approximate)


@importer("HardSigmoid")
def _hard_sigmoid(cx, x, alpha=0.2, beta=0.5):
    return E.clamp(x * alpha + beta, 0, 1)


@importer("HardSwish")
def _hard_swish(cx, x):
    return F.hardswish(x)


@importer("Softplus")
def _softplus(cx, x):
    return F.softplus(x)


@importer("Softsign")
def _softsign(cx, x):
    return F.softsign(x)


@importer("ThresholdedRelu")
def _thresholded_relu(cx, x, alpha=1.0):
    return E.where(x > alpha, x, E.zeros_like(x))


@importer("Shrink")
def _shrink(cx, x, bias=0.0, lambd=0.5):
    return E.where(x < -lambd, x + bias, E.where(x > lambd, x - bias, E.zeros_like(x)))


@importer("Mish")
def _mish(cx, x):
    return F.mish(x)


@importer("Swish")
def _swish(cx, x, alpha=1.0):
    return x * E.sigmoid(alpha * x)


@importer("Dropout")
def _dropout(cx, x, ratio=None, training_mode=None, seed=None):
    train = training_mode is not None and bool(training_mode.item())
    r = float(ratio.item()) if isinstance(ratio, E.Tensor) else (ratio or 0.5)
    if train and r > 0:
        mask = (E.rand_like(x.float()) >= r)
        y = x * mask / (1 - r)
        return y, mask
    return x, E.ones_like(x, dtype=E.bool)


# ---- recurrent layers ----------------------------------------------------------------

_ACT = {"Sigmoid": E.sigmoid, "Tanh": E.tanh, "Relu": E.relu}


def _acts(names, default):
    return [_ACT[a] if a in _ACT else _unsupported_act(a) for a in (names or default)]


def _unsupported_act(a):
    raise UnsupportedOnnxOp(f"ember.onnx: recurrent activation {a}")


def _rnn_common(x, seq_lens, layout):
    if seq_lens is not None and len(set(seq_lens.tolist())) > 1:
        raise UnsupportedOnnxOp("ember.onnx: recurrent layers with per-sample sequence_lens")
    return x.transpose(0, 1) if layout else x


def _run_rnn(cx, x, W, R, B, h0, c0, step, n_gates, direction, hidden_size, layout):
    dirs = 2 if direction == "bidirectional" else 1
    hs = hidden_size
    b = x.shape[1]
    ys, hs_out, cs_out = [], [], []
    for d in range(dirs):
        w, r = W[d], R[d]
        bias = B[d][:n_gates * hs] + B[d][n_gates * hs:] if B is not None else None
        rb = B[d][n_gates * hs:] if B is not None else None
        h = h0[d] if h0 is not None else E.zeros(b, hs, dtype=x.dtype)
        c = c0[d] if c0 is not None else E.zeros(b, hs, dtype=x.dtype)
        reverse = direction == "reverse" or d == 1
        steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        outs = [None] * x.shape[0]
        for t in steps:
            h, c = step(x[t], w, r, bias, rb, h, c, d)
            outs[t] = h
        ys.append(E.stack(outs) if outs else E.zeros(0, b, hs))
        hs_out.append(h)
        cs_out.append(c)
    y = E.stack(ys, 1)
    if layout:
        return y.permute(2, 0, 1, 3), E.stack(hs_out).transpose(0, 1), \
            E.stack(cs_out).transpose(0, 1)
    return y, E.stack(hs_out), E.stack(cs_out)


@importer("LSTM")
def _lstm(cx, x, W, R, B=None, seq_lens=None, h0=None, c0=None, P=None, activation_alpha=None,
          activation_beta=None, activations=None, clip=None, direction="forward",
          hidden_size=None, input_forget=0, layout=0):
    x = _rnn_common(x, seq_lens, layout)
    if layout:
        h0 = h0.transpose(0, 1) if h0 is not None else None
        c0 = c0.transpose(0, 1) if c0 is not None else None
    f_, g_, h_ = _acts(activations, ["Sigmoid", "Tanh", "Tanh"])[:3]
    hs = hidden_size
    peep = [P[d] for d in range(P.shape[0])] if P is not None else None

    def clipped(z):
        return E.clamp(z, -clip, clip) if clip is not None else z

    def step(xt, w, r, bias, rb, h, c, d):
        z = xt @ w.t() + h @ r.t()
        if bias is not None:
            z = z + bias
        i, o, f, cc = z.chunk(4, 1)  # ONNX's gate order: i, o, f, c
        p = peep[d] if peep is not None else None
        if p is not None:
            i = i + p[:hs] * c
            f = f + p[2 * hs:] * c
        i = f_(clipped(i))
        f = 1 - i if input_forget else f_(clipped(f))
        c = f * c + i * g_(clipped(cc))
        if p is not None:
            o = o + p[hs:2 * hs] * c
        return f_(clipped(o)) * h_(c), c

    y, hn, cn = _run_rnn(cx, x, W, R, B, h0, c0, step, 4, direction, hidden_size, layout)
    return y, hn, cn


@importer("GRU")
def _gru(cx, x, W, R, B=None, seq_lens=None, h0=None, activation_alpha=None,
         activation_beta=None, activations=None, clip=None, direction="forward",
         hidden_size=None, layout=0, linear_before_reset=0):
    x = _rnn_common(x, seq_lens, layout)
    if layout and h0 is not None:
        h0 = h0.transpose(0, 1)
    f_, g_ = _acts(activations, ["Sigmoid", "Tanh"])[:2]
    hs = hidden_size

    def step(xt, w, r, bias, rb, h, c, d):
        wb = bias - rb if bias is not None else None
        gx = xt @ w.t() + (wb if wb is not None else 0)
        rz = gx[:, :2 * hs] + h @ r[:2 * hs].t() + (rb[:2 * hs] if rb is not None else 0)
        z, rr = f_(rz[:, :hs]), f_(rz[:, hs:])
        rh = r[2 * hs:]
        rbh = rb[2 * hs:] if rb is not None else 0
        if linear_before_reset:
            n = g_(gx[:, 2 * hs:] + rr * (h @ rh.t() + rbh))
        else:
            n = g_(gx[:, 2 * hs:] + (rr * h) @ rh.t() + rbh)
        return (1 - z) * n + z * h, c

    y, hn, _ = _run_rnn(cx, x, W, R, B, h0, None, step, 3, direction, hidden_size, layout)
    return y, hn


@importer("RNN")
def _rnn(cx, x, W, R, B=None, seq_lens=None, h0=None, activation_alpha=None,
         activation_beta=None, activations=None, clip=None, direction="forward",
         hidden_size=None, layout=0):
    x = _rnn_common(x, seq_lens, layout)
    if layout and h0 is not None:
        h0 = h0.transpose(0, 1)
    f_ = _acts(activations, ["Tanh"])[0]

    def step(xt, w, r, bias, rb, h, c, d):
        z = xt @ w.t() + h @ r.t()
        return f_(z + bias if bias is not None else z), c

    y, hn, _ = _run_rnn(cx, x, W, R, B, h0, None, step, 1, direction, hidden_size, layout)
    return y, hn


# ---- losses ----------------------------------------------------------------------------

@importer("NegativeLogLikelihoodLoss")
def _nll(cx, x, target, weight=None, ignore_index=None, reduction="mean"):
    return F.nll_loss(x, target, weight, ignore_index=-100 if ignore_index is None
                      else ignore_index, reduction=reduction)


@importer("SoftmaxCrossEntropyLoss")
def _softmax_ce(cx, x, target, weight=None, ignore_index=None, reduction="mean"):
    logp = F.log_softmax(x, 1)
    loss = F.nll_loss(logp, target, weight, ignore_index=-100 if ignore_index is None
                      else ignore_index, reduction=reduction)
    return loss, logp


@importer("MaxUnpool")
def _max_unpool(cx, x, idx, output_shape=None, kernel_shape=None, pads=None, strides=None):
    n = x.dim() - 2
    strides = strides or [1] * n
    pads = pads or [0] * (2 * n)
    size = list(x.shape[:2]) + [(x.shape[2 + i] - 1) * strides[i] + kernel_shape[i] -
                                pads[i] - pads[i + n] for i in range(n)]
    if output_shape is not None and ints(output_shape) != size:
        # indices count positions in the default output: move them into the requested one
        coords = np.unravel_index(idx.numpy().reshape(-1), size)
        size = ints(output_shape)
        idx = E.from_numpy(np.ravel_multi_index(coords, size).astype(np.int64))
    flat = E.zeros(size[0] * size[1] * int(np.prod(size[2:])), dtype=x.dtype)
    flat = flat.scatter(0, idx.reshape(-1), x.reshape(-1))
    return flat.reshape(size)


@importer("AffineGrid")
def _affine_grid(cx, theta, size, align_corners=0):
    if not hasattr(F, "affine_grid"):
        raise UnsupportedOnnxOp("ember.onnx: AffineGrid needs ember's F.affine_grid")
    return F.affine_grid(theta, ints(size), align_corners=bool(align_corners))


@importer("GridSample")
def _grid_sample(cx, x, grid, align_corners=0, mode="linear", padding_mode="zeros"):
    if not hasattr(F, "grid_sample"):
        raise UnsupportedOnnxOp("ember.onnx: GridSample needs ember's F.grid_sample")
    m = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest",
         "cubic": "bicubic", "bicubic": "bicubic"}[mode]
    return F.grid_sample(x, grid, mode=m, padding_mode=padding_mode,
                         align_corners=bool(align_corners))


@importer("Col2Im")
def _col2im(cx, x, image_shape, block_shape, dilations=None, pads=None, strides=None):
    size = ints(image_shape)
    k = ints(block_shape)
    n = len(size)
    if n != 2:
        raise UnsupportedOnnxOp("ember.onnx: Col2Im over other than 2 spatial dims")
    pads = pads or [0] * (2 * n)
    if pads[:n] != pads[n:]:
        raise UnsupportedOnnxOp("ember.onnx: Col2Im with asymmetric pads")
    return F.fold(x, size, k, dilation=dilations or 1, padding=pads[:n], stride=strides or 1)
