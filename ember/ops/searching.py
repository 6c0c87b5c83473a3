"""Counting and searching, as composites of ember ops (no derivative code of their own):
``bincount``, ``histc``, ``bucketize``, ``searchsorted``, ``isin``, ``unravel_index``."""
import math

import numpy as np

from ember._factory import tensor
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.backend.dtypes import bool as ember_bool
from ember.backend.dtypes import int64
from ember.ops._util import (
    int_arg,
    not_implemented_for,
    reduced_float,
    scalar_type_name,
    traced_ints,
    type_name,
    with_out,
)
from ember.ops.gather_scatter import take_along_dim

__all__ = ["bincount", "histc", "bucketize", "searchsorted", "isin", "unravel_index"]


def _arr(t):
    if isinstance(t, Tensor):
        if _mode_active[0]:  # what is computed from the array is no node of a trace
            from ember._graph.capture import values_read
            values_read(t)
        return t._data
    return np.asarray(t)


def bincount(input, weights=None, minlength=0):
    """Count of each value of a 1-D non-negative integer tensor (weighted sums with
    ``weights``)."""
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        # a whole call in a capture: its length is the largest value (or minlength)
        return m.composite_locals("bincount", bincount, locals())
    x = _arr(input)
    if x.dtype.kind not in "iu":  # PyTorch's kernel: loops for the integer types only
        raise not_implemented_for("bincount_cpu", x.dtype)
    if x.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if x.size and x.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return _make(np.bincount(x, minlength=minlength).astype(np.int64))
    w = _arr(weights)
    out = np.bincount(x, weights=w.astype(np.float64), minlength=minlength)
    # float and double weights keep their dtype; the others (half ones too) sum in double
    return _make(out.astype(w.dtype if w.dtype in (np.float32, np.float64) else np.float64))


@with_out
def histc(input, bins=100, min=0, max=0):
    """Histogram of ``bins`` equal bins between ``min`` and ``max`` (the data's range
    when both are 0); values outside are ignored."""
    if _mode_active[0] and (r := traced_ints(bins, min, max)) is not None:
        # a traced count or range: the bins' edges are computed in Python, so one node
        return r[0].composite("histc", histc, (input,) + r[1], {})
    bins = int_arg(bins)
    x = _arr(input)
    if x.dtype.kind != "f" and not reduced_float(x.dtype):
        raise not_implemented_for("histogram_cpu", x.dtype)
    out_dtype = x.dtype
    if reduced_float(x.dtype):  # bfloat16 (and float16) binned in float32
        x = x.astype(np.float32)
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):  # (data holding NaN or +-inf too)
        raise RuntimeError(f"torch.histc: range of [{lo:g}, {hi:g}] is not finite")
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    xs = x.reshape(-1)
    xs = xs[(xs >= lo) & (xs <= hi)]
    idx = ((xs - lo) * bins / (hi - lo)).astype(np.int64)
    idx[idx == bins] = bins - 1
    return _make(np.bincount(idx, minlength=bins).astype(out_dtype))


def _search(sorted_seq, values, right):
    side = "right" if right else "left"
    s, v = _arr(sorted_seq), _arr(values)
    if s.shape[-1:] == (0,):
        return np.zeros(v.shape, dtype=np.int64)
    if s.ndim == 1:
        return np.searchsorted(s, v, side=side)
    flat_s = s.reshape(-1, s.shape[-1])
    flat_v = v.reshape(-1, v.shape[-1])
    out = np.stack([np.searchsorted(a, b, side=side) for a, b in zip(flat_s, flat_v)])
    return out.reshape(v.shape)


def _refuse_unordered(sorted_sequence, values):
    # PyTorch's kernel compares in the promoted dtype: none for bool or complex numbers
    # (no values to place: no kernel runs)
    if isinstance(values, Tensor) and not values.numel():
        return
    from ember.backend.dtypes import result_type
    dt = result_type(sorted_sequence, values)
    if dt.is_complex or dt.name == "bool":
        raise NotImplementedError(f"\"searchsorted_out_cpu\" not implemented for "
                                  f"'{scalar_type_name(dt)}'")


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """Index of the bucket of ``boundaries`` (1-D, sorted) each value falls in."""
    if _mode_active[0] and out is None and (m := _mode_recorder()) is not None:
        # a whole call in a capture: the positions found are values of both inputs
        return m.composite_locals("bucketize", bucketize, locals())
    if isinstance(boundaries, Tensor) and boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.dim()})")
    _refuse_unordered(boundaries, input)
    scalar = not isinstance(input, Tensor)
    res = _search(boundaries, input, right)
    res = _make(np.asarray(res, dtype=np.int32 if out_int32 else np.int64))
    if out is not None:
        from ember.ops._util import write_out
        return write_out(res, out)
    return res if not scalar else res.reshape(())


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None, out=None):
    """Insertion points of ``input`` into the innermost dimension of
    ``sorted_sequence``."""
    if _mode_active[0] and out is None and (m := _mode_recorder()) is not None:
        # a whole call in a capture: the positions found are values of both inputs
        return m.composite_locals("searchsorted", searchsorted, locals())
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites,"
                               " got side of left while right was True")
        right = side == "right"
    _refuse_unordered(sorted_sequence, input)
    seq = sorted_sequence
    if sorter is not None:
        seq = take_along_dim(sorted_sequence, sorter, dim=-1)
    scalar = not isinstance(input, Tensor)
    values = np.asarray(input) if scalar else input
    res = _make(np.asarray(_search(seq, values, right),
                           dtype=np.int32 if out_int32 else np.int64))
    if out is not None:
        from ember.ops._util import write_out
        return write_out(res, out)
    return res


@with_out
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` is in ``test_elements``."""
    for x in (elements, test_elements):  # (PyTorch's kernels sort or compare them)
        # a Python number as a double-precision scalar, as PyTorch (a tensor's dtype is
        # no read of its values)
        dt = x._data.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
        if dt.kind in "bc":
            raise RuntimeError(f"Unsupported input type encountered for isin(): {type_name(dt)}")
    if _mode_active[0] and (m := _mode_recorder((elements, test_elements))) is not None:
        # one node: the elements are compared outside the ops (a capture would keep the
        # example's answer)
        return m.composite_locals("isin", isin, locals())
    e, t = _arr(elements), _arr(test_elements)
    return _make(np.isin(e, t, invert=invert))


def unravel_index(indices, shape):
    """The coordinates (one tensor per dimension) of flat ``indices`` in ``shape``."""
    if _mode_active[0] and isinstance(indices, Tensor) and \
            _mode_recorder((indices,)) is not None and math.prod(_sizes(shape)):
        return _unravel_recorded(indices, shape)
    idx = _arr(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError("expected 'indices' to be integer dtype, but got "
                        f"{tensor(idx).dtype}")
    idx = idx.astype(np.int64)  # compared with the shape's product, which may pass int32's
    shape = _sizes(shape)
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got "
                         f"{tuple(shape)}")
    total = math.prod(shape)
    if idx.size and (idx.min() < -total or idx.max() >= total):
        raise RuntimeError(f"'indices' must be in range [-{total}, {total})")
    idx = np.where(idx < 0, idx + total, idx)
    return tuple(_make(c.astype(np.int64)) for c in np.unravel_index(idx, shape))


def _sizes(shape):
    if not isinstance(shape, int) and any(isinstance(s, Tensor) for s in shape):
        # (torch's shape argument is a list of Python ints only)
        bad = next(s for s in shape if isinstance(s, Tensor))
        raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(bad)}")
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _unravel_recorded(indices, shape):
    """``unravel_index`` in ember ops, as a trace records it (PyTorch's trace records its
    ``floor_divide`` and ``remainder``): each coordinate ``indices // stride % size``,
    which wraps a negative index from the end. The range is not checked: that would read
    the values."""
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype == ember_bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = _sizes(shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {tuple(shape)}")
    idx = indices.to(int64)
    coords, stride = [], 1
    for size in reversed(shape):
        coords.append((idx // stride) % size)
        stride *= size
    return tuple(reversed(coords))
