"""Normalization: batch, layer, group and instance norm, and local response norm.

One fused primitive, :class:`Normalize`, computes ``(x - mean) / sqrt(var + eps) *
weight + bias`` over some axes in a single NumPy pass set, optionally updating running
statistics. Its backward is written in ember Tensor ops: on a first-order pass it
reuses the mean and inverse standard deviation from forward; when a graph of the
gradient is being recorded (``create_graph``) it recomputes them from the saved input
with differentiable ops, so second derivatives are exact.
"""
import numpy as np

from ember._tensor import _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module

# the names torch also has at top level, with the same signature
__all__ = ["layer_norm", "group_norm", "rms_norm"]


class Normalize(Primitive):
    """``(x - mean) * rsqrt(var + eps) * w + b`` with mean and (biased) var over ``axes``.

    ``w`` and ``b`` (or None) broadcast against ``x``. ``stats``, when given, is a
    :class:`_RunningStats` updated in place with the batch mean and unbiased variance.
    """
    save_inputs = (0, 1)
    broadcasts = True
    _node_name = "NativeBatchNormBackward0"

    def forward(self, x, w, b, axes, eps, stats=None):
        self.axes, self.eps = axes, eps
        self.b_shape = None if b is None else b.shape
        xm = array_module(x)
        n = _prod(x.shape[a] for a in axes)
        mean = x.mean(axis=axes, keepdims=True)
        out = x - mean
        var = _sum_prod(out, out, axes) / max(n, 1)
        invstd = 1.0 / xm.sqrt(var + eps)
        self.mean, self.invstd = mean, invstd
        out *= invstd
        if w is not None:
            out *= w
        if b is not None:
            out += b
        if stats is not None:
            stats.update(mean, var * (n / (n - 1)) if n > 1 else var * np.nan)
        return out

    def backward(self, gy):
        x, w = self.saved_tensors
        if not _grad_state.grad_enabled:
            return self._backward_arrays(gy._data, x._data, None if w is None else w._data)
        # recorded (create_graph): the statistics recomputed in differentiable ops
        axes = self.axes
        e = self._edges
        mean = x.mean(axes, keepdim=True)
        xc = x - mean
        invstd = ((xc * xc).mean(axes, keepdim=True) + self.eps).rsqrt()
        xhat = xc * invstd
        g = gy * w if w is not None else gy
        gx = gw = gb = None
        if e[0] is not None:
            gx = (g - g.mean(axes, keepdim=True)
                  - xhat * (g * xhat).mean(axes, keepdim=True)) * invstd
        if e[1] is not None:
            gw = gy * xhat
        if e[2] is not None:
            gb = gy
        return gx, gw, gb, None, None, None

    def _backward_arrays(self, gy, x, w):
        """The first-order gradients in fused array code (no graph is being recorded):
        two full-size temporaries, the reductions as einsum contractions."""
        axes = self.axes
        e = self._edges
        xm = array_module(x)
        n = max(_prod(x.shape[a] for a in axes), 1)
        xhat = x - self.mean
        xhat *= self.invstd
        gx = gw = gb = None
        if e[1] is not None:
            gw = _make(_sum_prod(gy, xhat, _reduced_axes(x.shape, w.shape)).reshape(w.shape))
        if e[2] is not None:
            gb = _make(_sum_to(gy, self.b_shape))
        if e[0] is not None:
            g = gy * w if w is not None else gy
            a = g.sum(axis=axes, keepdims=True)
            a /= n
            c = _sum_prod(g, xhat, axes)
            c /= n
            gx = xhat
            gx *= c
            gx += a
            xm.subtract(g, gx, out=gx)
            gx *= self.invstd
            gx = _make(gx)
        return gx, gw, gb, None, None, None


def _sum_prod(a, b, axes):
    """``(a * b).sum(axes, keepdims=True)`` without the temporary product."""
    nd = a.ndim
    letters = "abcdefghijklmnopqrstuvwxyz"[:nd]
    out = "".join(c for i, c in enumerate(letters) if i not in axes)
    r = array_module(a).einsum(f"{letters},{letters}->{out}", a, b)
    return r.reshape(tuple(1 if i in axes else s for i, s in enumerate(a.shape)))


def _reduced_axes(full, shape):
    """The axes of ``full`` that a tensor of ``shape`` is broadcast along."""
    lead = len(full) - len(shape)
    return tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                      if s == 1 and full[i + lead] != 1)


def _sum_to(g, shape):
    """``g`` summed down to ``shape``, which broadcasts to ``g.shape``."""
    axes = _reduced_axes(g.shape, shape)
    return g.sum(axis=axes).reshape(shape) if axes else g


class _LayerNorm(Normalize):
    _node_name = "NativeLayerNormBackward0"


class _GroupNorm(Normalize):
    _node_name = "NativeGroupNormBackward0"


def _prod(xs):
    n = 1
    for v in xs:
        n *= v
    return n


def _channel_view(t, nd):
    """A per-channel vector (C,) as (1, C, 1, ...) for an input of ``nd`` dims."""
    return None if t is None else t.reshape((1, -1) + (1,) * (nd - 2))


def _check_channel_vec(name, t, c):
    if t is not None and t.numel() != c:
        raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-05):
    """Batch normalization over dim 1 of (N, C, *): in training, normalize with the batch
    statistics and update ``running_mean`` / ``running_var`` in place (``momentum`` is the
    weight of the new batch; the running variance is unbiased); in eval, use the running
    statistics.

    >>> x = ember.randn(8, 3)
    >>> batch_norm(x, None, None, training=True).mean(0).abs().max() < 1e-6
    tensor(True)
    """
    if input.dim() < 2:
        raise ValueError(f"Expected 2D or higher input (got {input.dim()}D input)")
    c = input.shape[1]
    nd = input.dim()
    _check_channel_vec("running_mean", running_mean, c)
    _check_channel_vec("running_var", running_var, c)
    _check_channel_vec("weight", weight, c)
    _check_channel_vec("bias", bias, c)
    if training:
        size = input.numel() // c if c else 0
        if size == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {input.shape!r}".replace("ember.Size",
                                                                  "torch.Size"))
        axes = (0,) + tuple(range(2, nd))
        stats = None
        if running_mean is not None or running_var is not None:
            stats = _RunningStats(running_mean, running_var, momentum)
        return Normalize.apply(input, _channel_view(weight, nd), _channel_view(bias, nd),
                               axes, eps, stats)
    if running_mean is None:
        raise RuntimeError("running_mean must be defined in evaluation mode")
    if running_var is None:
        raise RuntimeError("running_var must be defined in evaluation mode")
    scale = (running_var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight
    shift = -running_mean * scale
    if bias is not None:
        shift = shift + bias
    return input * _channel_view(scale, nd) + _channel_view(shift, nd)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Layer normalization over the last ``len(normalized_shape)`` dims, with elementwise
    ``weight`` and ``bias`` of shape ``normalized_shape``.

    >>> layer_norm(ember.randn(2, 5), (5,)).mean(-1).abs().max() < 1e-6
    tensor(True)
    """
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    shape = tuple(int(s) for s in normalized_shape)
    n = len(shape)
    if n == 0 or tuple(input.shape[input.dim() - n:]) != shape or input.dim() < n:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {list(t.shape)} and normalized_shape = "
                               f"{list(shape)}")
    axes = tuple(range(input.dim() - n, input.dim()))
    return _LayerNorm.apply(input, weight, bias, axes, eps, None)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalization over the last ``len(normalized_shape)`` dims:
    ``x * rsqrt(mean(x**2) + eps) * weight``; ``eps`` defaults to the dtype's epsilon."""
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    shape = tuple(int(s) for s in normalized_shape)
    n = len(shape)
    if n == 0 or input.dim() < n or tuple(input.shape[input.dim() - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(weight.shape)} and normalized_shape = "
                           f"{list(shape)}")
    if eps is None:
        eps = float(np.finfo(input._data.dtype).eps) if input.is_floating_point() else 0.0
    dims = tuple(range(input.dim() - n, input.dim()))
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return out * weight if weight is not None else out


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    """Group normalization: the C channels of (N, C, *) split into ``num_groups`` groups,
    each normalized over its channels and spatial dims; per-channel ``weight``/``bias``."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    n, c = input.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    _check_channel_vec("weight", weight, c)
    _check_channel_vec("bias", bias, c)
    rest = tuple(input.shape[2:])
    x = input.reshape((n, num_groups, c // num_groups) + rest)
    nd = x.dim()
    wshape = (1, num_groups, c // num_groups) + (1,) * len(rest)
    w = None if weight is None else weight.reshape(wshape)
    b = None if bias is None else bias.reshape(wshape)
    out = _GroupNorm.apply(x, w, b, tuple(range(2, nd)), eps, None)
    return out.reshape(tuple(input.shape))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    """Instance normalization: each (sample, channel) plane normalized over its spatial
    dims; running statistics, if given, are updated with the mean over the batch."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher input (got {input.dim()}D input)")
    n, c = input.shape[:2]
    nd = input.dim()
    _check_channel_vec("weight", weight, c)
    _check_channel_vec("bias", bias, c)
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if _prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input "
                         f"size {list(input.shape)}")
    axes = tuple(range(2, nd))
    stats = None
    if running_mean is not None or running_var is not None:
        _check_channel_vec("running_mean", running_mean, c)
        _check_channel_vec("running_var", running_var, c)
        stats = _RunningStats(running_mean, running_var, momentum, per_instance=True)
    return Normalize.apply(input, _channel_view(weight, nd), _channel_view(bias, nd), axes,
                           eps, stats)


class _RunningStats:
    """Running-statistics buffers that :class:`Normalize` blends the batch statistics into.

    ``per_instance``: the statistics are per (sample, channel) and averaged over the
    batch first (instance norm).
    """

    def __init__(self, running_mean, running_var, momentum, per_instance=False):
        self.tensors = (running_mean, running_var)
        self.momentum = momentum
        self.per_instance = per_instance

    def update(self, mean, unbiased_var):
        m = self.momentum
        for t, v in zip(self.tensors, (mean, unbiased_var)):
            if t is None:
                continue
            c = t._data.shape[0]
            v = v.reshape(-1, c).mean(0) if self.per_instance else v.reshape(c)
            arr = t._data
            arr *= 1 - m
            arr += (m * v).astype(arr.dtype)
            t._vc[0] += 1


def local_response_norm(input, size, alpha=0.0001, beta=0.75, k=1.0):
    """Local response normalization across channels: ``x / (k + alpha/size * sum of x**2
    over ``size`` neighbouring channels) ** beta``."""
    from ember.ops.pooling import avg_pool3d
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
    if input.numel() == 0:
        return input * 1
    sizes = tuple(input.shape)
    c = sizes[1]
    div = (input * input).reshape((sizes[0], 1, c, sizes[2], -1))
    # zero padding of size//2 before and (size-1)//2 after the channels: a symmetric
    # pad of size//2 and, for even sizes, dropping the one extra window at the end
    div = avg_pool3d(div, (size, 1, 1), stride=1, padding=(size // 2, 0, 0))[:, :, :c]
    div = div.reshape(sizes)
    return input / (div * alpha + k) ** beta
