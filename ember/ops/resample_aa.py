"""Window resampling: ``interpolate(antialias=True)`` in float, and uint8 ``interpolate``
(bilinear and bicubic, with or without antialias; lanczos) bit for bit as PyTorch's CPU
kernels.

Both resample separably, the width first, then the height, and leave an axis whose
size does not change untouched. Each output position reads a window of inputs with
weights normalised to sum to one; under antialias a downscaling stretches the filter
(triangle for bilinear, Keys' cubic with a=-0.5 for bicubic, Lanczos-3 for lanczos)
over ``scale`` inputs.

PyTorch does not resize uint8 images in floating point. On CPUs with AVX2 (and
AVX-512, which takes the same kernels) it resamples separably in fixed point, the way
Pillow-SIMD does, for every channel count and memory format and for all three modes;
ember follows it:

- each resized axis gets one window of weights per output position, computed in
  float64 and normalised to sum to one (for bicubic without antialias: PyTorch's
  float formula, a=-0.75 on four taps whose out-of-range indices clamp to the edge,
  merged into a window);
- the weights become int16 fixed point: the precision is the largest number of
  fraction bits (at most 22) for which twice the largest weight still fits in int16,
  and each weight is rounded half away from zero;
- a pass is a sum of pixel * weight in int32, plus half a unit, shifted right (a floor,
  also for negative sums) and clamped to 0..255; the width is resampled first, then
  the height, each pass rounding to uint8, and an axis whose size does not change is
  not touched (even when a scale_factor would move its samples).

The uint8 findings are ember's own, made by experiment against torch 2.13
(tests/test_interpolate_uint8.py sweeps them). Two corners where torch 2.13's kernels
misbehave are refused rather than imitated; see :func:`interpolate_uint8`.
"""
import numpy as np

from ember._tensor import _make
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops.composite_node import CompositeNode, call, named_nodes
from ember.ops.conversion import _has_layout, _in_layout, channels_last

_MAX_PRECISION = 22  # fraction bits of the int16 weights


def _scale(a, o, scale, align_corners):
    """PyTorch's ``area_pixel_compute_scale`` in float64."""
    if align_corners:
        return (a - 1) / (o - 1) if o > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else a / o


def _linear_filter(x):
    return np.maximum(0.0, 1.0 - np.abs(x))


def _cubic_filter(a):
    def f(x):
        x = np.abs(x)
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = (((x - 5) * x + 8) * x - 4) * a
        return np.where(x < 1, near, np.where(x < 2, far, 0.0))
    return f


def _lanczos3(x):
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


def _clamped_cubic_window(a, o, scale, align_corners):
    """Bicubic without antialias: four taps around ``floor(src)``, Keys' a=-0.75, indices
    clamped to the edge and their weights merged (as in PyTorch's float kernel)."""
    i = np.arange(o, dtype=np.float64)
    src = scale * i if align_corners else scale * (i + 0.5) - 0.5
    fl = np.floor(src)
    k = np.arange(-1, 3)
    idx = np.clip(fl.astype(np.int64)[:, None] + k, 0, a - 1)
    w = _cubic_filter(-0.75)(k - (src - fl)[:, None])
    start = idx[:, 0]
    width = int((idx[:, -1] - start).max()) + 1
    out = np.zeros((o, width))
    np.add.at(out, (np.repeat(np.arange(o), 4), (idx - start[:, None]).ravel()), w.ravel())
    return start, out


def _window(a, o, scale, mode, align_corners, antialias):
    """Float64 weights of one axis: ``(start, w)`` with ``w`` of shape (o, K); output ``i``
    reads input ``start[i] + k`` with weight ``w[i, k]`` (zero past the window)."""
    scale = _scale(a, o, scale, align_corners)
    if mode == "bicubic" and not antialias:
        return _clamped_cubic_window(a, o, scale, align_corners)
    size, f = {"bilinear": (2, _linear_filter), "bicubic": (4, _cubic_filter(-0.5)),
               "lanczos": (6, _lanczos3)}[mode]
    if antialias and scale >= 1.0:
        support, inv = size * 0.5 * scale, 1.0 / scale  # the filter stretched to the scale
    else:
        support, inv = size * 0.5, 1.0
    # align_corners moves the sample centres by half a pixel, except under antialias
    delta = 0.5 if align_corners and not antialias else 0.0
    center = scale * (np.arange(o, dtype=np.float64) + 0.5 - delta)
    start = np.maximum(np.trunc(center - support + 0.5 + delta), 0).astype(np.int64)
    stop = np.minimum(np.trunc(center + support + 0.5 + delta).astype(np.int64), a)
    n = stop - start
    k = np.arange(int(n.max()))
    w = f((k + start[:, None] - center[:, None] + 0.5 - delta) * inv)
    w = np.where(k < n[:, None], w, 0.0)
    total = w.sum(1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1.0), 0.0)
    return start, w


def _fixed_point(w):
    """int16-range weights and their number of fraction bits."""
    top = float(w.max())
    prec = 0
    while prec < _MAX_PRECISION and int(0.5 + top * (1 << (prec + 1))) < (1 << 15):
        prec += 1
    wi = np.trunc(w * (1 << prec) + np.where(w < 0, -0.5, 0.5)).astype(np.int32)
    return wi, prec


def _pass(x, axis, a, o, scale, mode, align_corners, antialias):
    """Resample the uint8 array ``x`` along ``axis`` from ``a`` to ``o`` samples."""
    xm = array_module(x)
    start, w = _window(a, o, scale, mode, align_corners, antialias)
    wi, prec = _fixed_point(w)
    shape = (-1,) + (1,) * (x.ndim - axis - 1)
    acc = xm.full(x.shape[:axis] + (o,) + x.shape[axis + 1:], 1 << (prec - 1), xm.int32)
    for k in range(w.shape[1]):
        used = wi[:, k] != 0
        if not used.any():
            continue
        idx = xm.asarray(np.minimum(start + k, a - 1))
        tap = xm.take(x, idx, axis=axis).astype(xm.int32)
        tap *= xm.asarray(wi[:, k].reshape(shape))
        acc += tap
    acc >>= prec
    return xm.clip(acc, 0, 255).astype(xm.uint8)


def interpolate_uint8(input, out, scales, mode, align_corners, antialias):
    """``F.interpolate`` of a 4-D uint8 tensor in 'bilinear', 'bicubic' or 'lanczos' mode to the
    spatial size ``out`` (``scales``: the scale factors torch's kernel receives, or
    None per axis). A channels-last input gives a channels-last result, as in PyTorch.

    Two layouts where torch 2.13's CPU kernels go wrong raise instead of guessing:
    a 3-channel row-major input resized to 1x1 with its height changing (torch fails an
    internal assertion: RuntimeError here too), and more than 4 channels, not
    channels-last, to an output width of 1 with the height changing (torch repeats output
    row 0 down the image: NotImplementedError here).
    """
    x = input._data
    n, c, h, w = x.shape
    oh, ow = out
    cl = _has_layout(x, channels_last)
    if oh != h and not cl:
        if c == 3 and oh == 1 and ow == 1 and x.flags.c_contiguous:
            raise RuntimeError(
                f"interpolate(mode='{mode}') of a row-major uint8 (N, 3, H, W) input to a "
                f"1x1 output: PyTorch 2.13's CPU kernel fails an internal assertion "
                f"(num_channels == unpacked_output.size(0)) here; pass a channels-last "
                f"input or another channel count")
        if c > 4 and _torch_repeats_row0(x, oh, ow):
            raise NotImplementedError(
                f"interpolate(mode='{mode}') of a uint8 input with {c} (> 4) channels to "
                f"an output width of 1 while the height changes, from a non-channels-last "
                f"input: PyTorch 2.13's CPU kernel repeats output row 0 over the whole "
                f"height there, and ember neither copies that nor silently differs; use "
                f"x.contiguous(memory_format=torch.channels_last) (torch is right there)")
    if x.size:
        if ow != w:
            x = _pass(x, 3, w, ow, scales[1], mode, align_corners, antialias)
        if oh != h:
            x = _pass(x, 2, h, oh, scales[0], mode, align_corners, antialias)
    else:
        x = array_module(x).zeros((n, c, oh, ow), np.uint8)
    if x is input._data:
        x = x.copy()
    return _make(_in_layout(x, channels_last) if cl and c > 1 else x)


def _torch_repeats_row0(x, oh, ow):
    """torch 2.13's generic separable kernel (float antialias; uint8 with more than 4
    channels) writes output row 0 down the whole height when the output width is 1 and
    the height changes, unless the input is channels-last with more than one channel."""
    return ow == 1 and oh != x.shape[2] and not (x.shape[1] > 1 and
                                                 _has_layout(x, channels_last))


def interpolate_aa(input, out, scales, mode, align_corners):
    """``F.interpolate(antialias=True)`` of a 4-D float tensor in 'bilinear', 'bicubic' or
    'lanczos' mode: differentiable, one :class:`~ember.ops.resample.Resample` per resized
    axis, under PyTorch's one node for the mode."""
    if _torch_repeats_row0(input._data, *out):
        raise NotImplementedError(
            f"interpolate(mode='{mode}', antialias=True) to an output width of 1 while the "
            f"height changes: PyTorch 2.13's CPU kernel repeats output row 0 over the whole "
            f"height there (unless the input is channels-last with more than one channel), "
            f"and ember neither copies that nor silently differs")
    return call(_AA_NODES[mode], input, out, scales, mode, align_corners)


class _UpsampleAa(CompositeNode):
    """Antialiased interpolation: PyTorch's one node per mode over the input."""
    save_inputs = (0,)

    @staticmethod
    def composite(input, out, scales, mode, align_corners):
        return _interpolate_aa(input, out, scales, mode, align_corners)


_AA_NODES = named_nodes(_UpsampleAa, {m: f"Upsample{m.capitalize()}2DAaBackward0"
                                      for m in ("bilinear", "bicubic", "lanczos")}, __name__,
                       aten=lambda m: f"aten::_upsample_{m}2d_aa")


def _interpolate_aa(input, out, scales, mode, align_corners):
    from ember.ops.resample import _resample_dim
    x = input
    n, c, h, w = x.shape
    dtype = np.dtype(x._data.dtype)
    for axis, a, o, sc in ((3, w, out[1], scales[1]), (2, h, out[0], scales[0])):
        start, wt = _window(a, o, sc, mode, align_corners, True)
        if a != o:
            taps = [(np.minimum(start + k, a - 1), wt[:, k].astype(dtype))
                    for k in range(wt.shape[1])]
            x = _resample_dim(x, axis, taps)
        elif x.requires_grad and not _is_identity(start, wt):
            x = _SkippedAxis.apply(x, f"the gradient of interpolate(mode='{mode}', "
                                      f"antialias=True) along dim {axis}, whose size {a} "
                                      f"does not change under scale_factor={sc}: the forward "
                                      f"pass leaves that dim alone, but PyTorch 2.13's "
                                      f"backward applies the scale_factor's weights to it "
                                      f"(not the forward's adjoint); pass size= or "
                                      f"recompute_scale_factor=True")
    return x if x is not input else x * 1


def _is_identity(start, w):
    """True if the window maps each input to itself (up to sinc's rounding at integers,
    ~1e-17 for lanczos)."""
    cols = np.arange(len(start)) - start
    if (cols < 0).any() or (cols >= w.shape[1]).any():
        return False
    eye = np.zeros_like(w)
    eye[np.arange(len(start)), cols] = 1.0
    return bool(np.abs(w - eye).max() < 1e-12)


class _SkippedAxis(Primitive):
    """The identity, on an axis antialiased resampling leaves alone because its size does
    not change; its backward raises ``message`` (torch's gradient there is not the
    adjoint of its forward, and ember does not invent a third answer)."""
    _node_name = "UpsampleAaSkippedAxisBackward0"  # renamed to torch's by interpolate_aa

    def forward(self, x, message):
        self.message = message
        return x.copy()

    def backward(self, gy):
        raise NotImplementedError(self.message)

    jvp = _jvp.linear(0)
    batch = _batch.passthrough
