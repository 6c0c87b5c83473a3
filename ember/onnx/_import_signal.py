"""ONNX converters: spectral ops (DFT, STFT, windows), quantization and detection.

DFT and STFT are computed as products with cosine/sine matrices built on the host, so
they stay ember ops with gradients; ONNX carries complex numbers as a trailing axis of
size 2 (real, imaginary), and so do these converters.
"""
import math

import numpy as np

import ember.nn.functional as F
from ember import _core as E
from ember.onnx._import import UnsupportedOnnxOp
from ember.onnx._import_ops import const, ember_dtype, ints
from ember.onnx._registry import importer

# ---- windows ---------------------------------------------------------------------------


def _window(coeffs):
    def f(cx, size, output_datatype=1, periodic=1):
        n = int(size.item())
        denom = n if periodic else n - 1
        k = np.arange(n, dtype=np.float64)
        w = np.zeros(n)
        for j, c in enumerate(coeffs):
            w += c * np.cos(2 * math.pi * j * k / denom) * (-1) ** j
        return const(w).to(ember_dtype(output_datatype, "window"))
    return f


importer("HannWindow")(_window([0.5, 0.5]))
importer("HammingWindow")(_window([25 / 46, 21 / 46]))
importer("BlackmanWindow")(_window([0.42, 0.5, 0.08]))


# ---- DFT and STFT ------------------------------------------------------------------------

def _dft_along(x_re, x_im, axis, n, inverse, onesided):
    """(real, imaginary) of the DFT of length ``n`` along ``axis``."""
    length = x_re.shape[axis]
    if length < n:
        pad = [0, 0] * (x_re.dim() - 1 - axis) + [0, n - length]
        x_re = F.pad(x_re, pad)
        x_im = F.pad(x_im, pad) if x_im is not None else None
    elif length > n:
        x_re = E.narrow(x_re, axis, 0, n)
        x_im = E.narrow(x_im, axis, 0, n) if x_im is not None else None
    bins = n // 2 + 1 if onesided else n
    k = np.arange(bins).reshape(-1, 1)
    j = np.arange(n).reshape(1, -1)
    theta = 2 * math.pi * k * j / n
    sign = 1.0 if inverse else -1.0
    cos = const(np.cos(theta)).to(x_re.dtype)
    sin = const(sign * np.sin(theta)).to(x_re.dtype)

    def apply(m, v):
        return E.movedim(E.movedim(v, axis, -1) @ m.t(), -1, axis)

    re = apply(cos, x_re)
    im = apply(sin, x_re)
    if x_im is not None:
        re = re - apply(sin, x_im)
        im = im + apply(cos, x_im)
    if inverse:
        re, im = re / n, im / n
    return re, im


@importer("DFT")
def _dft(cx, x, dft_length=None, axis_in=None, axis=1, inverse=0, onesided=0):
    if axis_in is not None:
        axis = int(axis_in.item())
    if axis < 0:
        axis += x.dim()
    # float64 inside: the products round less than a float32 FFT would
    re = x[..., 0].to(E.float64)
    im = x[..., 1].to(E.float64) if x.shape[-1] == 2 else None
    real_out = bool(onesided and inverse)
    n = int(dft_length.item()) if dft_length is not None else \
        2 * (re.shape[axis] - 1) if real_out else re.shape[axis]
    if onesided and inverse and im is not None:
        # the inverse of a one-sided spectrum: rebuild the other half by symmetry
        half = re.shape[axis]
        tail = E.flip(E.narrow(re, axis, 1, n - half), [axis]), \
            -E.flip(E.narrow(im, axis, 1, n - half), [axis])
        re, im = E.cat([re, tail[0]], axis), E.cat([im, tail[1]], axis)
        onesided = 0
    elif onesided and im is not None:
        raise UnsupportedOnnxOp("ember.onnx: a one-sided forward DFT of a complex signal")
    y_re, y_im = _dft_along(re, im, axis, n, bool(inverse), bool(onesided))
    if real_out:  # the inverse of a one-sided spectrum is a real signal
        return y_re.unsqueeze(-1).to(x.dtype)
    return E.stack([y_re, y_im], -1).to(x.dtype)


@importer("STFT")
def _stft(cx, signal, frame_step, window=None, frame_length=None, onesided=1):
    step = int(frame_step.item())
    n = int(frame_length.item()) if frame_length is not None else window.shape[0]
    re = signal[..., 0].to(E.float64)
    im = signal[..., 1].to(E.float64) if signal.shape[-1] == 2 else None
    frames = 1 + (re.shape[1] - n) // step
    idx = E.from_numpy(np.arange(frames)[:, None] * step + np.arange(n)[None, :])
    fr = re[:, idx]
    fi = im[:, idx] if im is not None else None
    if window is not None:
        fr = fr * window.to(E.float64)
        fi = fi * window.to(E.float64) if fi is not None else None
    y_re, y_im = _dft_along(fr, fi, 2, n, False, bool(onesided) and fi is None)
    return E.stack([y_re, y_im], -1).to(signal.dtype)


# ---- quantization --------------------------------------------------------------------------

_INT_RANGES = {np.dtype(t): (np.iinfo(t).min, np.iinfo(t).max)
               for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32)}
# the largest finite values of the float8 types (a saturating QuantizeLinear clamps there)
_FLOAT8_MAX = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0, "float8_e5m2": 57344.0,
               "float8_e5m2fnuz": 57344.0}


def _per_axis(scale, x, axis, block_size):
    if scale.dim() == 0 or scale.numel() == 1 and not block_size:
        return scale
    axis %= x.dim()
    if block_size:
        scale = scale.repeat_interleave(block_size, axis)
        return E.narrow(scale, axis, 0, x.shape[axis])
    return scale.reshape([-1 if d == axis else 1 for d in range(x.dim())])


def _saturate(y, np_dtype):
    lo, hi = _INT_RANGES[np.dtype(np_dtype)]
    return E.clamp(y, lo, hi)


@importer("QuantizeLinear")
def _quantize(cx, x, scale, zero_point=None, axis=1, block_size=0, output_dtype=0,
              saturate=1, precision=0):
    if zero_point is not None:
        out = zero_point.dtype
    elif output_dtype:
        out = ember_dtype(output_dtype, "QuantizeLinear")
    else:
        out = E.uint8
    # the division happens in the input's float type, as ONNX specifies: rounding of
    # halves depends on it
    ft = x.dtype if x.is_floating_point() else E.float32
    name = str(out).rsplit(".", 1)[-1]
    if name in _FLOAT8_MAX:
        # float8: no rounding to integers; the cast rounds to the nearest float8, and
        # saturate clamps to the largest finite value (infinities included)
        y = x.to(ft) / _per_axis(scale, x, axis, block_size).to(ft)
        if zero_point is not None:
            y = y + _per_axis(zero_point, x, axis, block_size).to(ft)
        if saturate:
            y = E.clamp(y.to(E.float32), -_FLOAT8_MAX[name], _FLOAT8_MAX[name])
        return y.to(out)
    if out.np not in _INT_RANGES:
        raise UnsupportedOnnxOp(f"ember.onnx: QuantizeLinear to {out}")
    y = E.round(x.to(ft) / _per_axis(scale, x, axis, block_size).to(ft)).to(E.float64)
    if zero_point is not None:
        y = y + _per_axis(zero_point, x, axis, block_size).to(E.float64)
    return _saturate(y, out.np).to(out)


@importer("DequantizeLinear")
def _dequantize(cx, x, scale, zero_point=None, axis=1, block_size=0, output_dtype=0):
    xf = x.to(E.float64)
    if zero_point is not None:
        xf = xf - _per_axis(zero_point, x, axis, block_size).to(E.float64)
    y = xf * _per_axis(scale, x, axis, block_size).to(E.float64)
    out = ember_dtype(output_dtype, "DequantizeLinear") if output_dtype else scale.dtype
    return y.to(out)


@importer("DynamicQuantizeLinear")
def _dynamic_quantize(cx, x):
    lo = min(float(x.min().item()), 0.0)
    hi = max(float(x.max().item()), 0.0)
    scale = np.float32((hi - lo) / 255.0)
    zp = np.clip(np.round(-lo / scale), 0, 255) if scale else 0.0
    y = _saturate(E.round(x / float(scale)) + zp if scale else E.zeros_like(x) + zp, np.uint8)
    return y.to(E.uint8), const(scale), const(np.uint8(zp))


def _centered(v, zp):
    v = v.to(E.int32)
    return v - zp.to(E.int32) if zp is not None else v


@importer("MatMulInteger")
def _matmul_integer(cx, a, b, a_zero_point=None, b_zero_point=None):
    az = a_zero_point.reshape(-1, 1) if a_zero_point is not None and \
        a_zero_point.numel() > 1 else a_zero_point
    return (_centered(a, az).to(E.int64) @ _centered(b, b_zero_point).to(E.int64)).to(E.int32)


@importer("QLinearMatMul")
def _qlinear_matmul(cx, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp):
    real = ((a.to(E.float64) - a_zp.to(E.float64)) * a_scale.to(E.float64)) @ \
        ((b.to(E.float64) - b_zp.to(E.float64)) * b_scale.to(E.float64))
    y = E.round(real / y_scale.to(E.float64)) + y_zp.to(E.float64)
    return _saturate(y, y_zp.dtype.np).to(y_zp.dtype)


@importer("ConvInteger")
def _conv_integer(cx, x, w, x_zero_point=None, w_zero_point=None, **conv_attrs):
    from ember.onnx._import_nn import _conv
    xf = x.to(E.float64) - (x_zero_point.to(E.float64) if x_zero_point is not None else 0)
    wz = w_zero_point.to(E.float64) if w_zero_point is not None else 0
    if isinstance(wz, E.Tensor) and wz.numel() > 1:
        wz = wz.reshape(-1, *([1] * (w.dim() - 1)))
    y = _conv(cx, xf, w.to(E.float64) - wz, None, **conv_attrs)
    return E.round(y).to(E.int32)


@importer("QLinearConv")
def _qlinear_conv(cx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, b=None,
                  **conv_attrs):
    from ember.onnx._import_nn import _conv
    xf = (x.to(E.float64) - x_zp.to(E.float64)) * x_scale.to(E.float64)
    shape = [-1] + [1] * (w.dim() - 1)
    wf = (w.to(E.float64) - w_zp.to(E.float64).reshape(shape if w_zp.numel() > 1 else [])) * \
        w_scale.to(E.float64).reshape(shape if w_scale.numel() > 1 else [])
    bias = b.to(E.float64) * (x_scale.to(E.float64) * w_scale.to(E.float64)).reshape(-1) \
        if b is not None else None
    y = _conv(cx, xf, wf, bias, **conv_attrs)
    q = E.round(y / y_scale.to(E.float64)) + y_zp.to(E.float64)
    return _saturate(q, y_zp.dtype.np).to(y_zp.dtype)


# ---- bit casts, cropping, caches -----------------------------------------------------------

@importer("BitCast")
def _bitcast(cx, x, to):
    target = ember_dtype(to, "BitCast")
    return E.from_numpy(np.array(x.numpy(), order="C").view(target.np).copy())


@importer("CenterCropPad")
def _center_crop_pad(cx, x, shape, axes=None):
    want = ints(shape)
    axes = [a % x.dim() for a in axes] if axes is not None else list(range(x.dim()))
    for a, size in zip(axes, want):
        n = x.shape[a]
        if size < n:
            x = E.narrow(x, a, (n - size) // 2, size)
        elif size > n:
            lo = (size - n) // 2
            pad = [0, 0] * (x.dim() - 1 - a) + [lo, size - n - lo]
            x = F.pad(x, pad)
    return x


@importer("TensorScatter")
def _tensor_scatter(cx, cache, update, write_indices=None, axis=-2, mode="linear"):
    axis %= cache.dim()
    total, n = cache.shape[axis], update.shape[axis]
    starts = ints(write_indices) if write_indices is not None else [0] * cache.shape[0]
    rows = []
    for b, start in enumerate(starts):
        pos = np.arange(start, start + n)
        if mode == "circular":
            pos %= total
        idx = E.from_numpy(pos).reshape([-1 if d == axis - 1 else 1
                                         for d in range(cache.dim() - 1)])
        idx = idx.expand(*[n if d == axis - 1 else s
                           for d, s in enumerate(update.shape[1:])])
        rows.append(E.scatter(cache[b], axis - 1, idx, update[b]))
    return E.stack(rows)


@importer("CausalConvWithState")
def _causal_conv(cx, x, w, b=None, past_state=None, activation="none"):
    k = w.shape[2]
    past = past_state if past_state is not None else \
        E.zeros(x.shape[0], x.shape[1], k - 1, dtype=x.dtype)
    padded = E.cat([past, x], 2)
    y = F.conv1d(padded, w, b, groups=x.shape[1])
    if activation in ("silu", "swish"):
        yf = y.float()
        y = (yf * E.sigmoid(yf)).to(x.dtype)
    return y, padded[:, :, padded.shape[2] - (k - 1):]


# ---- detection -----------------------------------------------------------------------------

@importer("NonMaxSuppression")
def _nms(cx, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
         score_threshold=None, center_point_box=0):
    limit = int(max_output_boxes_per_class.item()) if max_output_boxes_per_class is not None \
        and max_output_boxes_per_class.numel() else 0
    iou_t = float(iou_threshold.item()) if iou_threshold is not None else 0.0
    score_t = float(score_threshold.item()) if score_threshold is not None else -math.inf
    bx = boxes.detach().numpy().astype(np.float64)
    sc = scores.detach().numpy()
    if center_point_box:
        c, half = bx[..., :2], bx[..., 2:] / 2
        bx = np.concatenate([c - half, c + half], -1)[..., [1, 0, 3, 2]]
    y1, x1 = np.minimum(bx[..., 0], bx[..., 2]), np.minimum(bx[..., 1], bx[..., 3])
    y2, x2 = np.maximum(bx[..., 0], bx[..., 2]), np.maximum(bx[..., 1], bx[..., 3])
    area = (y2 - y1) * (x2 - x1)
    picked = []
    for b in range(sc.shape[0]):
        for c in range(sc.shape[1]):
            order = [i for i in np.argsort(-sc[b, c], kind="stable") if sc[b, c, i] > score_t]
            kept = []
            for i in order:
                if len(kept) >= limit:
                    break
                ok = True
                for j in kept:
                    ih = min(y2[b, i], y2[b, j]) - max(y1[b, i], y1[b, j])
                    iw = min(x2[b, i], x2[b, j]) - max(x1[b, i], x1[b, j])
                    inter = max(ih, 0) * max(iw, 0)
                    union = area[b, i] + area[b, j] - inter
                    if union > 0 and inter / union > iou_t:
                        ok = False
                        break
                if ok:
                    kept.append(i)
            picked += [(b, c, i) for i in kept]
    return const(np.asarray(picked, np.int64).reshape(-1, 3))
