"""ONNX converters: Resize (and the older Upsample), separable along each axis.

For each resized axis the source coordinate of every output position is computed
once on the host (it depends only on shapes), then turned into an index vector
(nearest) or a dense interpolation matrix (linear, cubic, antialiased), applied with
ember ops so gradients reach the input.
"""
import math

import numpy as np

from ember import _core as E
from ember.onnx._import import UnsupportedOnnxOp
from ember.onnx._import_ops import ints
from ember.onnx._registry import importer


def _source_coords(ctm, out_len, in_len, scale, roi):
    """Source coordinate of each output position, and where it lies outside (crop mode)."""
    y = np.arange(out_len, dtype=np.float64)
    out_f = scale * in_len
    outside = None
    if ctm == "align_corners":
        x = np.zeros_like(y) if out_f == 1 else y * (in_len - 1) / (out_f - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "pytorch_half_pixel":
        x = np.full_like(y, -0.5) if out_f == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        adjustment = out_len / out_f
        x = in_len / 2 * (1 - adjustment) + (y + 0.5) / scale - 0.5
    elif ctm == "tf_crop_and_resize":
        lo, hi = roi
        if out_f == 1:
            x = np.full_like(y, (hi - lo) * (in_len - 1) / 2)
        else:
            x = y * (hi - lo) * (in_len - 1) / (out_f - 1)
        x = x + lo * (in_len - 1)
        outside = (x < 0) | (x > in_len - 1)
    else:
        raise UnsupportedOnnxOp(f"ember.onnx: Resize coordinate_transformation_mode={ctm}")
    return x, outside


def _nearest_index(x, in_len, nearest_mode):
    if nearest_mode == "round_prefer_floor":
        i = np.ceil(x - 0.5)
    elif nearest_mode == "round_prefer_ceil":
        i = np.floor(x + 0.5)
    elif nearest_mode == "floor":
        i = np.floor(x)
    elif nearest_mode == "ceil":
        i = np.ceil(x)
    else:
        raise UnsupportedOnnxOp(f"ember.onnx: Resize nearest_mode={nearest_mode}")
    return np.clip(i, 0, in_len - 1).astype(np.int64)


def _kernel(mode, a):
    if mode == "linear":
        return 1.0, lambda t: np.clip(1 - np.abs(t), 0, None)

    def cubic(t):
        t = np.abs(t)
        near = ((a + 2) * t - (a + 3)) * t * t + 1
        far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return np.where(t <= 1, near, np.where(t < 2, far, 0.0))
    return 2.0, cubic


def _weights(x, in_len, mode, scale, a, exclude_outside, antialias):
    """(out_len, in_len) interpolation matrix: taps beyond the edges count as the edge
    pixel, unless ``exclude_outside`` drops them."""
    radius, k = _kernel(mode, a)
    s = min(scale, 1.0) if antialias else 1.0
    reach = int(math.ceil(radius / s)) + 1
    base = np.floor(x).astype(np.int64)
    taps = base[:, None] + np.arange(-reach, reach + 1)[None, :]
    w = k((taps - x[:, None]) * s)
    if exclude_outside:
        w = np.where((taps < 0) | (taps >= in_len), 0.0, w)
    total = w.sum(1, keepdims=True)
    w = w / np.where(total == 0, 1.0, total)
    mat = np.zeros((len(x), in_len))
    rows = np.repeat(np.arange(len(x)), taps.shape[1])
    np.add.at(mat, (rows, np.clip(taps, 0, in_len - 1).reshape(-1)), w.reshape(-1))
    return mat


@importer("Resize", "Upsample")
def _resize(cx, x, roi=None, scales=None, sizes=None, antialias=0, axes=None,
            coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75,
            exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
            mode="nearest", nearest_mode="round_prefer_floor"):
    ctm = coordinate_transformation_mode
    if cx.node.op_type == "Upsample" or cx.opset < 11:
        if cx.node.op_type == "Upsample" or (roi is not None and scales is None):
            scales, roi = roi if scales is None else scales, None
        ctm, nearest_mode = "asymmetric", "floor"
        if mode == "bilinear":
            mode = "linear"
    r = x.dim()
    axes = [a % r for a in axes] if axes is not None else list(range(r))
    roi_v = [float(v) for v in roi.tolist()] if roi is not None and roi.numel() else None
    if sizes is not None and sizes.numel():
        want = ints(sizes)
        scale = [want[i] / x.shape[a] for i, a in enumerate(axes)]
        if keep_aspect_ratio_policy != "stretch":
            pick = min if keep_aspect_ratio_policy == "not_larger" else max
            s = pick(scale)
            scale = [s] * len(axes)
            want = [int(s * x.shape[a] + 0.5) for a in axes]
    else:
        scale = [float(v) for v in scales.tolist()]
        if len(scale) == r and len(axes) != r:
            scale = [scale[a] for a in axes]
        want = [int(x.shape[a] * s) for a, s in zip(axes, scale)]
    out_shape = list(x.shape)
    for i, a in enumerate(axes):
        out_shape[a] = want[i]
    cx.reserve(out_shape, x.dtype.itemsize)
    y = x
    outside_all = None
    for i, a in enumerate(axes):
        in_len, out_len = x.shape[a], want[i]
        axis_roi = None
        if roi_v is not None:
            n = len(roi_v) // 2
            axis_roi = (roi_v[i], roi_v[n + i]) if n == len(axes) else (roi_v[a], roi_v[r + a])
        if out_len == in_len and math.isclose(scale[i], 1.0) and \
                (axis_roi is None or axis_roi == (0.0, 1.0)):
            continue
        src, outside = _source_coords(ctm, out_len, in_len, scale[i], axis_roi)
        if mode == "nearest":
            idx = _nearest_index(src, in_len, nearest_mode)
            y = E.index_select(y, a, E.from_numpy(idx))
        elif mode in ("linear", "cubic"):
            w = _weights(src, in_len, mode, scale[i], cubic_coeff_a, exclude_outside,
                         antialias)
            wt = E.from_numpy(w.T.copy()).to(y.dtype if y.is_floating_point() else E.float64)
            moved = E.movedim(y, a, -1)
            y = E.movedim((moved.to(wt.dtype) @ wt).to(y.dtype), -1, a)
        else:
            raise UnsupportedOnnxOp(f"ember.onnx: Resize mode={mode}")
        if outside is not None and outside.any():
            shape = [1] * r
            shape[a] = out_len
            m = E.from_numpy(outside.reshape(shape))
            outside_all = m if outside_all is None else (outside_all | m)
    if outside_all is not None:
        y = E.where(outside_all, E.full((), extrapolation_value, dtype=y.dtype), y)
    return y
