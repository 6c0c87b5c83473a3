"""Reductions over dims: sums, means, extrema, statistics, norms, scans, softmax."""
import numpy as np

from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.ops._util import wrap_dims

__all__ = ["sum", "mean"]


def _restore(g, in_shape, axes, keepdim):
    """Broadcast a reduced gradient back over the reduced ``axes``."""
    if not keepdim and axes:
        shape = list(in_shape)
        for a in axes:
            shape[a] = 1
        g = g.reshape(shape)
    return g.expand(in_shape)


class Sum(Primitive):
    def forward(self, x, axes, keepdim, np_dtype):
        self.meta = (x.shape, axes, keepdim)
        if np_dtype is None and x.dtype.kind in "biu" and x.dtype != np.int64:
            np_dtype = np.int64  # integer sums accumulate in int64, as PyTorch's
        return x.sum(axis=axes, keepdims=keepdim, dtype=np_dtype)

    def backward(self, gy):
        in_shape, axes, keepdim = self.meta
        return _restore(gy, in_shape, axes, keepdim), None, None, None


class Mean(Primitive):
    def forward(self, x, axes, keepdim, np_dtype):
        if np_dtype is None and x.dtype.kind != "f":
            raise RuntimeError(
                f"mean(): could not infer output dtype. Input dtype must be either a floating "
                f"point or complex dtype. Got: {_dtype_name(x.dtype)}")
        self.meta = (x.shape, axes, keepdim)
        n = 1
        for a in axes:
            n *= x.shape[a]
        self.n = n
        return x.mean(axis=axes, keepdims=keepdim, dtype=np_dtype)

    def backward(self, gy):
        in_shape, axes, keepdim = self.meta
        return _restore(gy / self.n, in_shape, axes, keepdim), None, None, None


def _dtype_name(np_dtype):
    from ember.backend.dtypes import FROM_NP
    return FROM_NP[np_dtype].name.capitalize()


def _np_dtype(dtype):
    if dtype is None:
        return None
    from ember.backend.dtypes import to_dtype
    return to_dtype(dtype).np


def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Sum over ``dim`` (an int, a tuple, or all dims); integers sum as int64."""
    axes = wrap_dims(dim, input._data.ndim) if dim is not None and dim != () else tuple(
        range(input._data.ndim))
    if isinstance(input, Tensor) and input._data.ndim == 0:
        axes = ()
    return Sum.apply(input, axes, keepdim, _np_dtype(dtype))


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """Mean over ``dim`` (an int, a tuple, or all dims); floating inputs only."""
    axes = wrap_dims(dim, input._data.ndim) if dim is not None and dim != () else tuple(
        range(input._data.ndim))
    if input._data.ndim == 0:
        axes = ()
    return Mean.apply(input, axes, keepdim, _np_dtype(dtype))


Tensor.sum = sum
Tensor.mean = mean
