"""The order PyTorch's samplers fill memory in (TensorIterator's walk: the largest
stride outermost) and ``empty_like``'s layout, so that a draw into a strided or
permuted tensor puts each value where PyTorch puts it."""
import numpy as np

from ember import _factory
from ember._tensor import _make

__all__ = ["empty_like_layout"]


def _perm(a):
    """Axes ordered as TensorIterator walks ``a`` (largest stride outermost); None for C order."""
    if a.flags.c_contiguous:
        return None
    return sorted(range(a.ndim), key=lambda i: -abs(a.strides[i]))


def _arrange(flat, shape, perm):
    """Values drawn in memory order, placed at their logical positions."""
    if perm is None:
        return flat.reshape(shape)
    return flat.reshape([shape[i] for i in perm]).transpose(np.argsort(perm))


def _like_perm(a):
    """Memory order of ``empty_like(a)`` (outermost axis first; None for C order): ``a``'s
    own when it is dense, else ``a``'s axes ordered by stride, PyTorch's
    ``infer_dense_strides`` (a zero stride keeps its place, equal strides put the larger
    size outside)."""
    perm = _perm(a)
    if perm is None:
        return None
    expect = a.itemsize
    for i in reversed(perm):
        if a.shape[i] != 1 and a.strides[i] != expect:
            return _dense_perm(a)
        expect *= a.shape[i]
    return perm


def _dense_perm(a):
    """PyTorch's ``infer_dense_strides`` order for a non-dense ``a``: an insertion sort of
    the axes, innermost first, that moves an axis inward past one of larger stride (or of
    equal stride and larger size) and stops at one of smaller stride; zero strides compare
    as equal to anything."""
    inner = list(range(a.ndim))[::-1]
    for i in range(1, len(inner)):
        j = i
        for k in range(i - 1, -1, -1):
            s0, s1 = a.strides[inner[k]], a.strides[inner[j]]
            if s0 == 0 or s1 == 0:
                continue
            if s0 > s1 or s0 == s1 and a.shape[inner[k]] > a.shape[inner[j]]:
                inner[k], inner[j] = inner[j], inner[k]
                j = k
            elif s0 < s1:
                break
    perm = inner[::-1]
    return None if perm == list(range(a.ndim)) else perm


def empty_like_layout(t):
    """An uninitialised tensor laid out as PyTorch's ``empty_like(t)`` lays it out (same
    shape, dtype and device), so that a sampler filling it draws in PyTorch's order."""
    d = t._data
    if type(d) is not np.ndarray:  # another device's array: its own empty_like
        return _factory.empty_like(t)
    perm = _like_perm(d)
    buf = np.empty(d.shape if perm is None else [d.shape[i] for i in perm], d.dtype)
    return _make(buf if perm is None else buf.transpose(np.argsort(perm)), False)
