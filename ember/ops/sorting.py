"""Sorting: ``sort``, ``argsort``, ``msort``, ``topk``, ``kthvalue``, ``unique``,
``unique_consecutive``.

The order is found on arrays (NaN sorts as the largest value; ties keep their index
order where PyTorch's CPU sort is stable, else land where its std::sort puts them); the
values are then read at the indices by one node of PyTorch's name (``SortBackward0``,
``TopkBackward0``, ...) whose backward writes the gradient back at the indices (a
``scatter``), as PyTorch's does.
"""
import numpy as np

from ember import backend
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd._modes import routed
from ember.autograd.node import Primitive
from ember.backend import fast_kernels as _fast_kernels
from ember.ops import _batch, _cpu_order, _jvp
from ember.ops._util import int_arg, refuse_kinds, with_out, with_out_apart, wrap_dim
from ember.ops.gather_scatter import scatter_picked
from ember.ops.indexing import transforming
from ember.ops.reduction import return_types

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "unique", "unique_consecutive"]


def _check_tensor(name, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")


def _order(a, axis, descending, stable=True):
    """Argsort along ``axis`` as PyTorch's CPU ``sort``: stable (descending keeps ties in
    ascending index order) when asked, else with equal values where ``std::sort`` puts
    them (:func:`_unstable`)."""
    xp = backend.array_module(a)
    integers = a.dtype.kind in "iu"  # (bool is none, for the radix sort below)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    if not stable and xp is np and a.size and a.strides[axis] != 0 and not (
            a.ndim == 1 and not descending and integers and a.size >= _RADIX_MIN):
        if not descending and a.dtype.kind == "f" and _AVX512:
            return np.argsort(a, axis=axis)
        return _unstable(a, axis, descending)
    # stable; also PyTorch's order for a dim of stride 0 (an expanded tensor: kept as it
    # is) and for fbgemm's radix sort (below)
    if not descending:
        return xp.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    rev = xp.flip(a, axis=axis)
    return (n - 1) - xp.flip(xp.argsort(rev, axis=axis, kind="stable"), axis=axis)


# PyTorch's CPU kernel takes fbgemm's (stable) radix sort for a 1-D ascending sort of an
# integer tensor of at least at::internal::GRAIN_SIZE elements
_RADIX_MIN = 32768
# On AVX-512 machines an unstable ascending float sort is NumPy's vectorised quicksort
# (x86-simd-sort), the library PyTorch's kernel takes there; elsewhere PyTorch's kernel is
# std::sort. (Only the AVX2 case is checked against torch on ember's test machines.)
try:
    from numpy._core._multiarray_umath import __cpu_features__ as _cpu_features
except ImportError:  # NumPy 1.x
    from numpy.core._multiarray_umath import __cpu_features__ as _cpu_features
_AVX512 = bool(_cpu_features.get("AVX512_SKX"))
_SORT_NUMBA = {}
_REPLAY_ALL = 1024  # up to this many elements, the kernel sorts every row


def _sort_keys(rows):
    """The rows as int64 or float64 keys in the same order (uint64 shifted)."""
    if rows.dtype.kind == "f" or rows.dtype.name == "bfloat16":
        return np.ascontiguousarray(rows, dtype=np.float64)
    if rows.dtype == np.uint64:
        return (rows ^ np.uint64(1 << 63)).view(np.int64)
    return np.ascontiguousarray(rows, dtype=np.int64)


def _unstable(a, axis, descending):
    """The argsort of ``a`` along ``axis`` that PyTorch's unstable CPU sort gives:
    ``std::sort`` of each row's ``(value, index)`` pairs, by numba's kernel
    (``ember.ops._sort_numba``), else by the same swaps in Python (``_cpu_order.sort``),
    for the rows that hold equal values; any sort serves the rows of distinct values
    (NumPy's fastest, flipped for a descending order: NaN first)."""
    last = a.ndim - 1
    moved = a if axis == last else a.swapaxes(axis, last)  # (np.moveaxis costs 10 us)
    vals = moved.reshape(-1, a.shape[axis])
    # the kernels once loaded (numba's import takes a second: a sort loads them only
    # when it finds tied rows)
    kernels = _SORT_NUMBA.get("sort")
    if kernels is not None and vals.size <= _REPLAY_ALL:
        # few elements: std::sort on every row costs less than finding the tied ones
        out = np.empty(vals.shape, np.int64)
        kernels.sort_rows(_sort_keys(vals), out, np.arange(len(vals)), bool(descending))
        out = out.reshape(moved.shape)
        return out if axis == last else out.swapaxes(axis, last)
    ordered = np.sort(vals, axis=1)  # (values alone: quicker than an argsort)
    tied = (ordered[:, 1:] == ordered[:, :-1]).any(1)
    if vals.dtype.kind not in "biu" and vals.shape[1] > 1:
        nan = ordered[:, -2]  # two NaNs (sorted last) are equal to std::sort too
        tied |= nan != nan
    rows = np.nonzero(tied)[0]
    if rows.size < len(vals):
        out = np.argsort(vals, axis=1)
        if descending:
            out = out[:, ::-1].copy()
    else:
        out = np.empty(vals.shape, np.int64)
    if rows.size:
        keys = _sort_keys(vals)
        kernels = _fast_kernels.load(_SORT_NUMBA, "sort", "ember.ops._sort_numba")
        if kernels is not None:
            kernels.sort_rows(keys, out, rows.astype(np.int64), bool(descending))
        else:
            comp = _cpu_order._greater if descending else _cpu_order._less
            for r in rows.tolist():
                pairs = [(v, i) for i, v in enumerate(keys[r].tolist())]
                _cpu_order.sort(pairs, 0, len(pairs), comp)
                out[r] = [i for _, i in pairs]
    out = out.reshape(moved.shape)
    return out if axis == last else out.swapaxes(axis, last)


def _rows(a, axis):
    """``a`` with ``axis`` last, as a 2-D array of rows (a view where possible)."""
    m = np.moveaxis(a, axis, -1)
    return m.reshape(-1, m.shape[-1])


def _same(a, b):
    """Equal, or both NaN (``x != x``: bfloat16's NaN too)."""
    return (a == b) | ((a != a) & (b != b)) if a.dtype.kind not in "biu" else a == b


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def _cpu_choice(input, dim, idx, k, fix_row, needs, ref):
    """``idx`` (positions along ``dim``, ``k`` per row) with the rows where equal values
    make the choice ambiguous redone as PyTorch's CPU kernel does (see _cpu_order).
    ``needs(value_rows, ref_rows)`` says which rows may be ambiguous, from the values and
    the rows of the index tensor ``ref`` (arrays only, so vmap can batch this function)."""
    a = input._data
    if backend.array_module(a) is not np or a.size == 0:
        return idx
    axis = wrap_dim(dim, a.ndim)
    vals = _rows(a.astype(np.uint8) if a.dtype == np.bool_ else a, axis)
    rows = np.nonzero(needs(vals, _rows(ref._data, axis)))[0]
    if rows.size == 0:
        return idx
    out = _rows(idx._data, axis).copy()
    for r in rows.tolist():
        out[r] = fix_row(vals[r].tolist())
    shape = np.moveaxis(idx._data, axis, -1).shape
    return _make(np.ascontiguousarray(np.moveaxis(out.reshape(shape), -1, axis)))


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def _indices(input, dim, descending, stable=True):
    a = input._data
    if a.ndim == 0:
        return _make(backend.array_module(a).zeros((), dtype=np.int64))
    order = _order(a, wrap_dim(dim, a.ndim), descending, stable)
    return _make(order.astype(np.int64, copy=False))


class Picked(Primitive):
    """The values a sort chose: ``x`` read at the indices ``idx`` along ``dim`` (``idx``
    has the indices output's shape: without ``dim`` when ``keepdim`` is False). PyTorch's
    node saves the indices (an output there): saved-tensor hooks see them, and backward
    writes the gradient into zeros at what their unpack gives back.

    ``indices`` is the Tensor returned to the user (``idx`` its array), kept with its
    version as PyTorch keeps its saved output: a write into it fails backward, as there.
    Without it (under a transform) the node keeps a copy of ``idx``."""
    n_inputs = 1  # the indices are no input of PyTorch's node
    jvp = _jvp.linear(0)
    batch = _batch.gather

    def forward(self, x, idx, dim, keepdim=True, indices=None):
        if indices is None:
            idx = idx.copy()
        self.idx, self.indices = idx, indices
        self.version = None if indices is None else indices._vc[0]
        self.meta = (x.shape, dim, keepdim)
        if x.ndim == 0:
            return x.copy()
        xp = backend.array_module(x)
        if not keepdim:
            out = xp.take_along_axis(x, xp.expand_dims(idx, dim), dim)
            return out.squeeze(dim)
        return xp.take_along_axis(x, idx, dim)

    def _hook_saves(self, args, out):
        """PyTorch's node saves the indices (``Primitive._hook_saves``)."""
        if self.indices is not None:
            return [(self.indices, self.version)]
        return [(_make(self.idx, False), None)]

    def backward(self, gy):
        shape, dim, keepdim = self.meta
        if self._hook_at is None and self.indices is not None and \
                self.indices._vc[0] != self.version:
            t = self.indices
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by "
                f"an inplace operation: [{t._type_name()} {list(t.shape)}] is at version "
                f"{t._vc[0]}; expected version {self.version} instead. Hint: enable anomaly "
                "detection to find the operation that failed to compute its gradient, with "
                "torch.autograd.set_detect_anomaly(True, check_nan=False).")
        idx, = self._saved_and_hooked(self.idx)[1]
        return scatter_picked(gy, shape, idx, dim, keepdim), None, None


class Sort(Picked):
    """``sort``'s values (no ``stable`` given)."""
    _node_name = "SortBackward0"


class SortStable(Picked):
    """``sort``'s values with ``stable`` given (PyTorch's ``sort.stable`` overload)."""
    _node_name = "SortBackward1"
    _op_name = "Sort"  # the same op (``aten::sort`` in the profiler)


class Topk(Picked):
    """``topk``'s values."""
    _node_name = "TopkBackward0"


class Kthvalue(Picked):
    """``kthvalue``'s value."""
    _node_name = "KthvalueBackward0"


def _picked(cls, input, idx, dim, keepdim=True):
    """``cls``'s node on ``input`` and the indices Tensor ``idx`` (as an array eagerly;
    under a mode as the tensor, so that a capture or vmap sees it)."""
    if input.dim() == 0 and transforming():
        # vmap's rules see a 0-d sample as one element along a dim of size 1
        return cls.apply(input.reshape(1), idx.reshape(1), 0).reshape(())
    d = wrap_dim(dim, input.dim()) if input.dim() else 0
    if _mode_active[0]:
        return cls.apply(input, idx, d) if keepdim else cls.apply(input, idx, d, keepdim=False)
    return cls.apply(input, idx._data, d, keepdim=keepdim, indices=idx)


@with_out
def sort(input, dim=-1, descending=False, stable=None, *, out=None):
    """Sort ``input`` along ``dim``; returns ``(values, indices)`` (a
    ``torch.return_types.sort``). Ties keep their original order; NaN is the largest.

    Example: ``torch.sort(torch.tensor([3., 1., 2.]))`` gives values ``[1., 2., 3.]``
    and indices ``[1, 2, 0]``.
    """
    _check_tensor("sort", input)
    refuse_kinds(input, "c", " Sort does not support complex dtypes on CPU")
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        return m.composite_locals("sort", sort, locals())
    dim = int_arg(dim)
    if not isinstance(dim, int):
        raise TypeError(f"sort(): argument 'dim' must be int, not {type(dim).__name__}")
    idx = _indices(input, dim, descending, bool(stable))
    return return_types.sort(_picked(Sort if stable is None else SortStable, input, idx, dim),
                             idx)


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort ``input`` along ``dim`` (``sort(...).indices``)."""
    _check_tensor("argsort", input)
    refuse_kinds(input, "c", " Sort does not support complex dtypes on CPU")
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        return m.composite_locals("argsort", argsort, locals())
    return _indices(input, dim, descending, bool(stable))


@with_out
def msort(input):
    """``sort(input, dim=0).values``."""
    return sort(input, dim=0).values


@with_out
def topk(input, k, dim=None, largest=True, sorted=True, *, out=None):
    """The ``k`` largest (``largest=False``: smallest) elements of ``input`` along ``dim``
    (default: the last), as ``(values, indices)`` (a ``torch.return_types.topk``)."""
    _check_tensor("topk", input)
    refuse_kinds(input, "c", " topk does not support complex dtypes on CPU")
    refuse_kinds(input, "b", "topk does not support bool dtypes on CPU")
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        return m.composite_locals("topk", topk, locals())
    dim = -1 if dim is None else dim
    k = int_arg(k)  # (a 0-d integer tensor, as torch takes one)
    size = input.shape[wrap_dim(dim, input.dim())] if input.dim() else 1
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise TypeError(f"topk(): argument 'k' must be int, not {type(k).__name__}")
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    idx = _indices(input, dim, largest)
    if input.dim() == 0:
        return return_types.topk(_picked(Topk, input, idx, dim), idx)
    full, idx = idx, idx.narrow(dim, 0, k).contiguous()
    if k:
        def needs(v, full_rows):  # equal values among the k chosen and the next, or an
            head = np.take_along_axis(v, full_rows[:, :k + 1], 1)  # unsorted pick
            return _same(head[:, 1:], head[:, :-1]).any(1) | (not sorted and k * 64 > v.shape[1])
        idx = _cpu_choice(input, dim, idx, k,
                          lambda r: _cpu_order.topk_row(r, k, largest, sorted), needs, full)
    return return_types.topk(_picked(Topk, input, idx, dim), idx)


@with_out_apart
def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The ``k``-th smallest element of ``input`` along ``dim`` (``k`` counts from 1)
    and its index, as a ``torch.return_types.kthvalue``."""
    _check_tensor("kthvalue", input)
    refuse_kinds(input, "cb", "\"kthvalue_cpu\" not implemented for '{type}'",
                 NotImplementedError)
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # a whole call in a capture: the index is chosen on the values, outside the ops
        return m.composite_locals("kthvalue", kthvalue, locals())
    d = wrap_dim(dim, input.dim())
    size = input.shape[d] if input.dim() else 1
    if size == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {d} to have non-zero size.")
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if input.dim() == 0:
        idx = _indices(input, dim, False)
        return return_types.kthvalue(_picked(Kthvalue, input, idx, dim), idx)
    idx = _indices(input, dim, False).narrow(dim, k - 1, 1).contiguous()

    def needs(v, idx_rows):  # the k-th value occurs more than once
        return _same(v, np.take_along_axis(v, idx_rows, 1)).sum(1) > 1
    idx = _cpu_choice(input, dim, idx, 1, lambda r: [_cpu_order.kthvalue_row(r, k - 1)], needs,
                      idx)
    if not keepdim:
        idx = idx.squeeze(dim)
    return return_types.kthvalue(_picked(Kthvalue, input, idx, dim, keepdim), idx)


def _unique_results(values, inverse, counts, return_inverse, return_counts):
    out = [_make(values)]
    if return_inverse:
        out.append(_make(inverse.astype(np.int64)))
    if return_counts:
        out.append(_make(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


@routed  # vmap refuses it: a result of each sample's own length (ember.func._function_rules)
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of ``input`` in ascending order (of the flattened tensor, or
    the distinct slices along ``dim``), optionally with the index of each input element in
    the result and the count of each value. NaNs are all distinct, as in PyTorch. The
    result is not differentiable."""
    _check_tensor("unique", input)
    # (complex numbers have no order to sort them in)
    refuse_kinds(input, "c", "\"unique\" not implemented for '{type}'" if dim is None
                 else "\"unique_dim\" not implemented for '{type}'", NotImplementedError)
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node: the distinct values are found on the input's values (a capture would
        # keep the example's as constants)
        return m.composite_locals("unique", unique, locals())
    xp = backend.array_module(input._data)
    a = input._data
    if dim is None:
        values, inverse, counts = xp.unique(a.reshape(-1), return_inverse=True,
                                            return_counts=True, equal_nan=False)
        inverse = inverse.reshape(a.shape)
    else:
        d = wrap_dim(dim, a.ndim)
        if a.shape[d] == 0:
            values = a
            inverse = counts = xp.zeros(0, dtype=np.int64)
        else:
            values, inverse, counts = xp.unique(a, return_inverse=True, return_counts=True,
                                                axis=d)
            inverse = inverse.reshape(-1)
    return _unique_results(values, inverse, counts, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse each run of equal consecutive elements (or slices along ``dim``) to one."""
    _check_tensor("unique_consecutive", input)
    # PyTorch's kernel refuses complex inputs too (a 1-D input along its dim takes the
    # flat kernel)
    flat = dim is None or input.ndim == 1
    refuse_kinds(input, "c", "\"unique\" not implemented for '{type}'" if flat
                 else "\"unique_dim\" not implemented for '{type}'", NotImplementedError)
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node: the runs are found on the input's values (see unique)
        return m.composite_locals("unique_consecutive", unique_consecutive, locals())
    xp = backend.array_module(input._data)
    a = input._data
    if dim is None:
        a = a.reshape(-1)
        d = 0
    else:
        d = wrap_dim(dim, a.ndim)
    n = a.shape[d]
    if n == 0:
        empty = xp.zeros(0, dtype=np.int64)
        return _unique_results(a, empty.reshape(input._data.shape if dim is None else 0), empty,
                               return_inverse, return_counts)
    moved = xp.moveaxis(a, d, 0).reshape(n, -1)
    starts = xp.ones(n, dtype=bool)
    starts[1:] = (moved[1:] != moved[:-1]).any(axis=1)
    first = xp.nonzero(starts)[0]
    values = xp.take(a, first, axis=d)
    inverse = xp.cumsum(starts) - 1
    if dim is None:
        inverse = inverse.reshape(input._data.shape)
    counts = xp.diff(xp.append(first, n))
    return _unique_results(values, inverse, counts, return_inverse, return_counts)


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    method._forwards_to = fn  # its parameters, for ops._numpy_names
    return method


for _fn in (sort, argsort, msort, topk, kthvalue, unique, unique_consecutive):
    setattr(Tensor, _fn.__name__, _method(_fn))
