"""Lp pooling (a composite of average pooling: ``(sum over window of x**p) ** (1/p)``)
and max unpooling's functions (their op, ``MaxUnpool``, is pooling's scatter in
``ember.ops.pooling``)."""
import math

from ember.ops.conv import ntuple, refuse_tensor_sizes
from ember.ops.pooling import MaxUnpool, MaxUnpool3D, _as_2d, _avg_pool

__all__ = ["lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d"]


def _lp_pool(nd, input, norm_type, kernel_size, stride, ceil_mode):
    k = ntuple(kernel_size, nd, "kernel_size", "pooling")
    out = _avg_pool(f"lp_pool{nd}d", nd, input.pow(norm_type), kernel_size, stride, 0,
                    ceil_mode, True, None)
    return (out.sign() * out.abs().relu()).mul(math.prod(k)).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """1-D power-average pooling: ``(sum over window of x**p) ** (1/p)``."""
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """2-D power-average pooling: ``(sum over window of x**p) ** (1/p)``."""
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """3-D power-average pooling: ``(sum over window of x**p) ** (1/p)``."""
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


def _max_unpool(name, nd, input, indices, kernel_size, stride, padding, output_size):
    refuse_tensor_sizes(kernel_size, stride, padding)
    k = ntuple(kernel_size, nd, "kernel_size", "pooling")
    s = k if stride is None else ntuple(stride, nd, "stride", "pooling")
    p = ntuple(padding, nd, "padding", "pooling")
    S = tuple(input.shape[-nd:])
    default = tuple((a - 1) * si - 2 * pi + ki for a, si, pi, ki in zip(S, s, p, k))
    if output_size is None:
        out = default
    else:
        out = tuple(output_size)[-nd:]
        if len(out) != nd:
            raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} "
                             f"elements, but it has a length of '{len(tuple(output_size))}'")
        for o, dflt, si in zip(out, default, s):
            if not dflt - si < o < dflt + si:
                raise ValueError(f"invalid output_size \"{list(out)}\" (dim {len(out)} must be "
                                 f"between {[a - b for a, b in zip(default, s)]} and "
                                 f"{[a + b for a, b in zip(default, s)]})")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    idx = indices._data
    if idx.size and (idx.min() < 0 or idx.max() >= math.prod(out)):
        raise RuntimeError(f"Found an invalid max index: {int(idx.max())} (output volumes are "
                           f"of size {'x'.join(map(str, out))}")
    if nd == 1:  # PyTorch's 1-d unpooling is its 2-d kernel over a height of 1
        # (the indices' view made by a recorded unsqueeze: a trace keeps it an input)
        return _as_2d(MaxUnpool.apply, input, indices.unsqueeze(-2)._data, (1,) + out, False)
    return (MaxUnpool3D if nd == 3 else MaxUnpool).apply(input, idx, out, False)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool1d``: values put back at ``indices``, zeros elsewhere."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool2d``: values put back at ``indices``, zeros elsewhere."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool3d``: values put back at ``indices``, zeros elsewhere."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                       output_size)
