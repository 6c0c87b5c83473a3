"""Resampling: ``interpolate`` (nearest, linear, bicubic, area), pixel (un)shuffle and
channel shuffle's node.

Composites over one primitive pair: :class:`Take` (a gather along one axis) and its
adjoint :class:`TakeAdjoint` (a scatter-add), each the other's derivative. Linear and
cubic modes are separable: each spatial dim is resampled in turn as a weighted sum of
a few gathers.
"""
import math

import numpy as np

from ember._tensor import Tensor, _mode_active, _mode_recorder
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._util import reduced_float, scalar_type_name, traced_ints
from ember.ops.composite_node import CompositeNode, call, named_nodes

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


class Take(Primitive):
    """``x`` indexed by the int array ``idx`` (host NumPy) along ``axis`` (``np.take``)."""
    _node_name = "IndexSelectBackward0"

    def forward(self, x, idx, axis):
        self.idx, self.axis, self.n = idx, axis, x.shape[axis]
        xm = array_module(x)
        return xm.take(x, xm.asarray(idx), axis=axis)

    def backward(self, gy):
        return TakeAdjoint.apply(gy, self.idx, self.axis, self.n), None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(2)


class TakeAdjoint(Primitive):
    """Zeros of length ``n`` along ``axis`` with the slices of ``g`` added at ``idx``."""
    _node_name = "IndexAddBackward0"

    def forward(self, g, idx, axis, n):
        self.idx, self.axis = idx, axis
        xm = array_module(g)
        shape = list(g.shape)
        shape[axis] = n
        out = xm.zeros(shape, g.dtype)
        lead = (slice(None),) * axis
        if len(idx) and bool((idx[1:] >= idx[:-1]).all()):
            # sorted (every resampling here): a few collision-free strided adds
            for src, dst in _phases(idx):
                out[lead + (_on(xm, dst),)] += g[lead + (_on(xm, src),)]
        elif len(idx):
            moved = xm.moveaxis(out, axis, 0)
            xm.add.at(moved, xm.asarray(idx), xm.moveaxis(g, axis, 0))
        return out

    def backward(self, gx):
        return Take.apply(gx, self.idx, self.axis), None, None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(2)


def _phases(idx):
    """Split a sorted index array into collision-free (positions, targets) pieces: the
    k-th element of every run of equal indices forms group k, and each group is cut
    into arithmetic progressions (slices) where that takes few pieces."""
    n = len(idx)
    pos = np.arange(n)
    new = np.ones(n, bool)
    new[1:] = idx[1:] != idx[:-1]
    rank = pos - np.maximum.accumulate(np.where(new, pos, 0))
    out = []
    for r in range(int(rank.max()) + 1):
        j = np.nonzero(rank == r)[0]
        t = idx[j]
        pieces = _progressions(j, t)
        if len(pieces) <= 8:
            out += pieces
        else:
            out.append((j, t))
    return out


def _progressions(j, t):
    """``(j, t)`` cut greedily into runs where both step evenly, as slice pairs."""
    out = []
    i, n = 0, len(j)
    while i < n:
        e = i + 1
        if e < n:
            dj, dt = j[e] - j[i], t[e] - t[i]
            while e + 1 < n and j[e + 1] - j[e] == dj and t[e + 1] - t[e] == dt:
                e += 1
            if dj <= 0 or dt <= 0:
                e = i
            e += 1
        out.append((_slice(j[i:e]), _slice(t[i:e])))
        i = e
        if len(out) > 8:
            break
    return out


def _slice(a):
    if len(a) == 1:
        return slice(int(a[0]), int(a[0]) + 1)
    return slice(int(a[0]), int(a[-1]) + 1, int(a[1] - a[0]))


def _on(xm, ix):
    return ix if isinstance(ix, slice) else xm.asarray(ix)


def take(x, idx, axis):
    """Differentiable ``np.take(x, idx, axis)`` for an int array ``idx``."""
    return Take.apply(x, np.asarray(idx, dtype=np.int64), axis)


# ----- interpolate ---------------------------------------------------------------------

_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "lanczos", "area",
          "nearest-exact")
_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3, "lanczos": 2}


def _scale(a, o, scale, align_corners):
    """PyTorch's ``area_pixel_compute_scale``."""
    if align_corners:
        return (a - 1) / (o - 1) if o > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else a / o


def _nearest_index(a, o, scale, exact):
    if o == a and not exact:
        return np.arange(o)
    if o == 2 * a and not exact:
        return np.arange(o) >> 1
    sc = np.float32(1.0 / scale if scale is not None and scale > 0 else a / o)
    pos = np.arange(o, dtype=np.float32)
    if exact:
        pos = pos + np.float32(0.5)
    return np.minimum(np.floor(pos * sc).astype(np.int64), a - 1)


def _source(a, o, scale, align_corners, dtype, cubic=False):
    sc = dtype.type(_scale(a, o, scale, align_corners))
    dst = np.arange(o, dtype=dtype)
    if align_corners:
        return sc * dst
    src = sc * (dst + dtype.type(0.5)) - dtype.type(0.5)
    return src if cubic else np.maximum(src, dtype.type(0))


def _linear_taps(a, o, scale, align_corners, dtype):
    src = _source(a, o, scale, align_corners, dtype)
    i0 = src.astype(np.int64)
    i1 = i0 + (i0 < a - 1)
    l1 = np.clip(src - i0, 0, 1).astype(dtype)
    return [(i0, 1 - l1), (i1, l1)]


def _cubic_taps(a, o, scale, align_corners, dtype):
    A = -0.75
    src = _source(a, o, scale, align_corners, dtype, cubic=True)
    i = np.floor(src).astype(np.int64)
    t = (src - i).astype(np.float64)

    def c1(x):
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def c2(x):
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    ws = [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]
    return [(np.clip(i + j - 1, 0, a - 1), w.astype(dtype)) for j, w in enumerate(ws)]


class Resample(Primitive):
    """``sum_t take(x, idx_t, axis) * w_t``: linear resampling along one axis with a few
    taps (host index and weight arrays), fused."""
    _node_name = "UpsampleLinearBackward0"

    def forward(self, x, axis, taps):
        self.axis, self.taps, self.n = axis, taps, x.shape[axis]
        xm = array_module(x)
        shape = (-1,) + (1,) * (x.ndim - axis - 1)
        out = tmp = None
        for idx, w in taps:
            v = xm.take(x, xm.asarray(idx), axis=axis)
            wv = xm.asarray(w.reshape(shape), dtype=x.dtype)
            if out is None:
                out = v
                out *= wv
                tmp = xm.empty_like(out)
            else:
                xm.multiply(v, wv, out=tmp)
                out += tmp
        return out

    def backward(self, gy):
        return ResampleAdjoint.apply(gy, self.axis, self.taps, self.n), None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(1)


class ResampleAdjoint(Primitive):
    """The adjoint of :class:`Resample`: each tap's weighted gradient added back at its
    indices."""
    _node_name = "UpsampleLinearBackwardBackward0"

    def forward(self, g, axis, taps, n):
        self.axis, self.taps = axis, taps
        xm = array_module(g)
        shape = list(g.shape)
        shape[axis] = n
        out = xm.zeros(shape, g.dtype)
        lead = (slice(None),) * axis
        wshape = (-1,) + (1,) * (g.ndim - axis - 1)
        for idx, w in taps:
            gw = g * xm.asarray(w.reshape(wshape), dtype=g.dtype)
            for src, dst in _phases(idx):
                out[lead + (_on(xm, dst),)] += gw[lead + (_on(xm, src),)]
        return out

    def backward(self, gx):
        return Resample.apply(gx, self.axis, self.taps), None, None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(1)


def _resample_dim(x, axis, taps):
    return Resample.apply(x, axis, [(np.asarray(i, dtype=np.int64), w) for i, w in taps])



class _Upsample(CompositeNode):
    """Interpolation: PyTorch's one upsample node for the mode and rank over the input
    (ember resamples one axis at a time underneath)."""
    save_inputs = (0,)

    @staticmethod
    def composite(input, S, out, scales, mode, align_corners):
        return _upsample(input, S, out, scales, mode, align_corners)


# PyTorch's upsample kernel for the mode and rank ('area' is adaptive average pooling
# there; the antialiased modes are resample_aa's)
_UPSAMPLE_NODES = named_nodes(_Upsample, {
    **{("nearest", d): f"UpsampleNearest{d}DBackward0" for d in (1, 2, 3)},
    **{("nearest-exact", d): f"UpsampleNearestExact{d}DBackward0" for d in (1, 2, 3)},
    ("linear", 1): "UpsampleLinear1DBackward0", ("bilinear", 2): "UpsampleBilinear2DBackward0",
    ("bicubic", 2): "UpsampleBicubic2DBackward0",
    ("trilinear", 3): "UpsampleTrilinear3DBackward0"}, __name__,
    aten=lambda k: f"aten::_upsample_nearest_exact{k[1]}d" if k[0] == "nearest-exact" else None)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, *spatial) to ``size`` or by ``scale_factor``. Modes: 'nearest',
    'nearest-exact', 'linear' (3-D input), 'bilinear' and 'bicubic' (4-D), 'trilinear'
    (5-D) with ``align_corners``, 'lanczos' (4-D, ``antialias=True``) and 'area'
    (adaptive average pooling). ``antialias`` and uint8 images follow PyTorch's kernels
    (:mod:`ember.ops.resample_aa`).

    >>> interpolate(ember.ones(1, 1, 2, 2), scale_factor=2).shape
    ember.Size([1, 1, 4, 4])
    """
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node: the sampling positions depend on the input's size
        return m.composite_locals("interpolate", interpolate, locals())
    if mode not in _MODES:
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for "
            f"the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area "
            f"| nearest-exact (got {mode})")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.dim() == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                         "modes and requires a 4-D tensor as input")
    nd = input.dim() - 2
    if nd < 1 or nd > 3 or mode == "lanczos" and nd != 2:
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for "
            f"the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area "
            f"| nearest-exact (got {mode})")
    if mode in _DIMS and _DIMS[mode] != nd:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs "
                                  f"{_DIMS[mode] + 2}D input")
    S = tuple(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out = tuple(int(v) for v in size) if isinstance(size, (list, tuple)) else \
            (int(size),) * nd
        if len(out) != nd:
            raise ValueError(f"Input and output must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(S)} and output size of {list(out)}. Please provide "
                             f"input tensor in (N, C, d1, d2, ...,dK) format and output size "
                             f"in (o1, o2, ...,oK) format.")
        scales = (None,) * nd
    elif scale_factor is not None:
        scales = tuple(float(v) for v in scale_factor) \
            if isinstance(scale_factor, (list, tuple)) else (float(scale_factor),) * nd
        if len(scales) != nd:
            raise ValueError(f"Input and scale_factor must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(S)} and scale_factor of shape {list(scales)}. Please "
                             f"provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             f"scale_factor in (s1, s2, ...,sK) format.")
        out = tuple(int(math.floor(a * s)) for a, s in zip(S, scales))
        if recompute_scale_factor:
            scales = (None,) * nd
    else:
        raise ValueError("either size or scale_factor should be defined")
    if mode == "area":
        if any(o <= 0 for o in out):
            raise RuntimeError(f"Input and output sizes should be greater than 0, but got "
                               f"input ({', '.join(map(str, S))}) and output "
                               f"({', '.join(map(str, out))})")
    elif any(v <= 0 for v in S + out):
        names = ("D", "H", "W")[3 - nd:]
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({', '.join(f'{k}: {v}' for k, v in zip(names, S))})"
                           f"{' and' if nd == 1 else ''} output "
                           f"({', '.join(f'{k}: {v}' for k, v in zip(names, out))})")
    elif input.shape[1] == 0:
        raise RuntimeError(f"Non-empty {nd + 2}D data tensor expected but got a tensor with "
                           f"sizes {list(input.shape)}")
    if mode == "area":
        from ember.ops.adaptive_pooling import _adaptive_avg
        return _adaptive_avg(f"adaptive_avg_pool{nd}d", nd, input, out)
    if mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    dtype = np.dtype(input._data.dtype)
    if mode in ("bilinear", "bicubic", "lanczos") and dtype == np.uint8:
        from ember.ops.resample_aa import interpolate_uint8
        return interpolate_uint8(input, out, scales, mode, align_corners, antialias)
    if antialias and reduced_float(input._data.dtype):
        # PyTorch's antialiased kernels take float32/float64 only (bfloat16 fell
        # through to the plain interpolation here: other values, silently)
        raise NotImplementedError('"compute_index_ranges_weights" not implemented for '
                                  f"'{scalar_type_name(input.dtype)}'")
    if antialias and dtype.kind == "f":
        from ember.ops.resample_aa import interpolate_aa
        return interpolate_aa(input, out, scales, mode, align_corners)
    if mode in ("linear", "bilinear", "trilinear", "bicubic") and \
            not input.dtype.is_floating_point:
        # (the PyTorch kernel that refuses the dtype first, as its message names it)
        kernel = "upsample_bilinear2d_channels_last" if mode == "bilinear" else \
            "compute_indices_weights_cubic" if mode == "bicubic" else \
            "compute_indices_weights_linear"
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{scalar_type_name(input.dtype)}'")
    return call(_UPSAMPLE_NODES[(mode, nd)], input, S, out, scales, mode, align_corners)


def _upsample(input, S, out, scales, mode, align_corners):
    nd = len(S)
    if mode not in ("nearest", "nearest-exact") and reduced_float(input._data.dtype):
        # float16/bfloat16: the taps and sums in float32, the result rounded once, as
        # PyTorch's kernels compute them (taps in float16 were 10-20x less accurate)
        return _upsample(input.float(), S, out, scales, mode, align_corners).to(
            input.dtype)
    dtype = np.dtype(input._data.dtype)
    x = input
    # the last dim first: PyTorch's linear kernels nest the interpolation that way (the
    # outermost dim's weights applied last), which decides how huge values cancel
    for i in (reversed(range(nd)) if mode in ("linear", "bilinear", "trilinear") else range(nd)):
        a, o, sc = S[i], out[i], scales[i]
        axis = 2 + i
        if mode in ("nearest", "nearest-exact"):
            if a == o:
                continue
            x = take(x, _nearest_index(a, o, sc, mode == "nearest-exact"), axis)
        elif mode == "bicubic":
            x = _resample_dim(x, axis, _cubic_taps(a, o, sc, align_corners, dtype))
        else:
            x = _resample_dim(x, axis, _linear_taps(a, o, sc, align_corners, dtype))
    return x if x is not input else x * 1


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode='nearest')``."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ----- pixel and channel shuffle -------------------------------------------------------

def _pixel_shuffle(input, r):
    if r == 1:  # (the reshapes would give a view; PyTorch's result is always new memory)
        return input.contiguous().clone()
    *lead, c, h, w = input.shape
    nl = len(lead)
    x = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    x = x.permute(tuple(range(nl)) + tuple(nl + i for i in (0, 3, 1, 4, 2)))
    return x.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def _pixel_unshuffle(input, r):
    if r == 1:  # (as in ``_pixel_shuffle``)
        return input.contiguous().clone()
    *lead, c, h, w = input.shape
    nl = len(lead)
    x = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    x = x.permute(tuple(range(nl)) + tuple(nl + i for i in (0, 2, 4, 1, 3)))
    return x.reshape(tuple(lead) + (c * r * r, h // r, w // r))


class PixelShuffle(CompositeNode):
    """``F.pixel_shuffle``: PyTorch's one node over the input."""
    save_inputs = (0,)
    composite = staticmethod(_pixel_shuffle)


class PixelUnshuffle(CompositeNode):
    """``F.pixel_unshuffle``: PyTorch's one node over the input."""
    save_inputs = (0,)
    composite = staticmethod(_pixel_unshuffle)


def _channel_shuffle(input, groups):
    n, c, rest = input.shape[0], input.shape[1], tuple(input.shape[2:])
    return (input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
            .reshape(n, c, *rest))


class ChannelShuffle(CompositeNode):
    """``F.channel_shuffle``: PyTorch's one node over the input (the arguments are
    checked by ``ember.nn.functional.channel_shuffle``)."""
    save_inputs = (0,)
    composite = staticmethod(_channel_shuffle)


def pixel_shuffle(input, upscale_factor):
    """Rearrange (*, C*r*r, H, W) into (*, C, H*r, W*r) (sub-pixel convolution)."""
    if _mode_active[0] and (r := traced_ints(upscale_factor)) is not None:
        # a traced factor shapes the rearrangement in Python: one node
        return r[0].composite("pixel_shuffle", pixel_shuffle, (input,) + r[1], {})
    if not isinstance(input, Tensor):
        raise TypeError(f"pixel_shuffle(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    r = int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c}"
                           f" is not divisible by {r * r}")
    return call(PixelShuffle, input, r)


def pixel_unshuffle(input, downscale_factor):
    """Rearrange (*, C, H*r, W*r) into (*, C*r*r, H, W): the inverse of pixel_shuffle."""
    if _mode_active[0] and (r := traced_ints(downscale_factor)) is not None:
        return r[0].composite("pixel_unshuffle", pixel_unshuffle, (input,) + r[1], {})
    if not isinstance(input, Tensor):
        raise TypeError(f"pixel_unshuffle(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    r = int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        which = ("height", -2, h) if h % r else ("width", -1, w)
        raise RuntimeError(f"pixel_unshuffle expects {which[0]} to be divisible by "
                           f"downscale_factor, but input.size({which[1]})={which[2]} is not "
                           f"divisible by {r}")
    return call(PixelUnshuffle, input, r)
