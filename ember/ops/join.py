"""Joins and splits: ``cat``/``stack`` and their h/v/d/column variants, ``split``/
``chunk``/``tensor_split``/``unbind`` (views), and the repeats ``repeat``/``tile``/
``repeat_interleave``."""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd.node import Primitive
from ember.backend import dtypes as _dt
from ember.ops import _batch, _jvp
from ember.ops._util import (
    check_same_device,
    follows_int_reads,
    refuse_out_overlap,
    traced_ints,
    wrap_dim,
    write_out,
)
from ember.ops._views import ViewPrimitive
from ember.ops.indexing import GetItem
from ember.ops.shape import _sizes, atleast_1d, atleast_2d, atleast_3d

__all__ = ["cat", "concat", "concatenate", "stack", "hstack", "vstack", "row_stack", "dstack",
           "column_stack", "split", "chunk", "tensor_split", "hsplit", "vsplit", "dsplit",
           "unbind", "tile", "repeat_interleave", "split_with_sizes", "meshgrid"]


def _xp(a):
    from ember.backend import array_module
    return array_module(a)


def _skipped(shape):
    # PyTorch's legacy rule: 1-D empty tensors are left out of a cat whatever their shape
    return len(shape) == 1 and shape[0] == 0


def _slice_dim(t, dim, start, stop, step=1):
    return GetItem.apply(t, (slice(None),) * dim + (slice(start, stop, step), Ellipsis))


class Cat(Primitive):
    def forward(self, *arrays, dim, np_dtype):
        self.meta = ([(a.shape, a.dtype) for a in arrays], dim)
        parts = [a if a.dtype == np_dtype else a.astype(np_dtype)
                 for a in arrays if not _skipped(a.shape)]
        if not parts:
            return _xp(arrays[0]).zeros((0,), np_dtype)
        if len(parts) == 1:
            return parts[0].copy()
        return np.concatenate(parts, axis=dim)  # CuPy arrays dispatch to cupy.concatenate

    def backward(self, gy):
        metas, dim = self.meta
        grads = []
        off = 0
        for i, (shape, dt) in enumerate(metas):
            if _skipped(shape) or self._edges[i] is None:
                grads.append(None)
                if not _skipped(shape):
                    off += shape[dim]
                continue
            n = shape[dim]
            g = _slice_dim(gy, dim, off, off + n)
            off += n
            if g._data.dtype != dt:
                g = g.to(_dt.FROM_NP[dt])
            grads.append(g)
        return tuple(grads)

    jvp = _jvp.linear()
    batch = _batch.cat
    complex32_math = True


def _tensor_list(op, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f"{type(tensors).__name__}")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    return list(tensors)


def cat(tensors, dim=0, *, out=None):
    """Join tensors along an existing dim ``dim``.

    All tensors need the same shape outside ``dim``; their dtypes are promoted
    (``float32`` with ``float64`` gives ``float64``), and 1-D empty tensors are
    skipped, as in PyTorch.

        >>> ember.cat([ember.zeros(2, 3), ember.ones(1, 3)]).shape
        ember.Size([3, 3])
    """
    tensors = _tensor_list("cat", tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    first = tensors[0]._data
    if type(first) is not np.ndarray or any(type(t._data) is not np.ndarray for t in tensors):
        check_same_device("cat", *tensors)
    np_dtype = first.dtype
    if any(t._data.dtype != np_dtype for t in tensors):
        dtype = tensors[0].dtype
        for t in tensors[1:]:
            dtype = _dt.promote_types(dtype, t.dtype)
        np_dtype = dtype.np
    ref = None
    for i, t in enumerate(tensors):
        shape = t._data.shape
        if not shape:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                               "concatenated")
        if _skipped(shape):
            continue
        if ref is None:
            ref = shape
            d = wrap_dim(dim, len(ref))
            continue
        if len(shape) != len(ref):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} "
                               f"and {len(shape)}")
        for k in range(len(ref)):
            if k != d and shape[k] != ref[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. "
                                   f"Expected size {ref[k]} but got size {shape[k]} for tensor "
                                   f"number {i} in the list.")
    if ref is None:
        d = 0
    if out is not None:
        refuse_out_overlap(out, tensors)
    return write_out(Cat.apply(*tensors, dim=d, np_dtype=np_dtype), out)


concat = concatenate = cat


def stack(tensors, dim=0, *, out=None):
    """Join same-shaped tensors along a new dim ``dim``."""
    tensors = _tensor_list("stack", tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tensors[0]._data.shape
    for i, t in enumerate(tensors[1:], 1):
        if t._data.shape != shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(shape)} at entry 0 and {list(t._data.shape)} at entry {i}")
    d = wrap_dim(dim, len(shape) + 1)
    first = tensors[0]._data
    if type(first) is not np.ndarray or any(type(t._data) is not np.ndarray for t in tensors):
        check_same_device("stack", *tensors)
    np_dtype = first.dtype
    if any(t._data.dtype != np_dtype for t in tensors):
        dtype = tensors[0].dtype
        for t in tensors[1:]:
            dtype = _dt.promote_types(dtype, t.dtype)
        np_dtype = dtype.np
    return write_out(Stack.apply(*tensors, dim=d, np_dtype=np_dtype), out)


class Stack(Primitive):
    """Same-shaped tensors joined along a new dim (one node, one copy: batches of
    samples are stacked this way by every DataLoader)."""

    def forward(self, *arrays, dim, np_dtype):
        self.meta = ([a.dtype for a in arrays], dim)
        return np.stack([a if a.dtype == np_dtype else a.astype(np_dtype) for a in arrays],
                        axis=dim)  # CuPy arrays dispatch to cupy.stack

    def backward(self, gy):
        dtypes, dim = self.meta
        grads = []
        for i, dt in enumerate(dtypes):
            if self._edges[i] is None:
                grads.append(None)
                continue
            g = gy.select(dim, i)
            grads.append(g if g._data.dtype == dt else g.to(_dt.FROM_NP[dt]))
        return tuple(grads)

    jvp = _jvp.linear()
    batch = _batch.stack
    complex32_math = True


def _nonempty(name, tensors):
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


def hstack(tensors, *, out=None):
    """Join along dim 1 (dim 0 for 1-D tensors)."""
    ts = _nonempty("hstack", _tensor_list("hstack", tensors))
    ts = atleast_1d(*ts)
    ts = [ts] if isinstance(ts, Tensor) else list(ts)
    return cat(ts, 0 if ts[0]._data.ndim == 1 else 1, out=out)


def vstack(tensors, *, out=None):
    """Join along dim 0, after making 1-D tensors rows."""
    ts = _nonempty("vstack", _tensor_list("vstack", tensors))
    ts = atleast_2d(*ts)
    return cat([ts] if isinstance(ts, Tensor) else list(ts), 0, out=out)


row_stack = vstack


def dstack(tensors, *, out=None):
    """Join along dim 2, after giving each tensor at least 3 dims."""
    ts = _nonempty("dstack", _tensor_list("dstack", tensors))
    ts = atleast_3d(*ts)
    return cat([ts] if isinstance(ts, Tensor) else list(ts), 2, out=out)


def column_stack(tensors, *, out=None):
    """Join along dim 1, after making 0-d and 1-D tensors columns."""
    ts = [t.reshape(-1, 1) if t._data.ndim <= 1 else t
          for t in _tensor_list("column_stack", tensors)]
    return hstack(ts, out=out)


# ----- splits -------------------------------------------------------------------------

def _piece_sizes(n, s):
    """The sizes ``split`` cuts a length ``n`` into, pieces of ``s``."""
    return ([s] * (n // s) + ([n % s] if n % s else [])) or [0] if s else [0]


class SplitWithSizes(ViewPrimitive):
    """Consecutive pieces of ``x`` along ``dim`` (views), one output per size."""
    n_outputs = 2  # several outputs; the instance holds the real count
    batch = _batch.split

    def forward(self, x, sizes, dim):
        # ``sizes``: the pieces' sizes, or one int (``split``'s: pieces of that size, the
        # last shorter), so that a trace replayed at another length cuts it as eager does
        self.dim = dim
        n = x.shape[dim]
        if not isinstance(sizes, (tuple, list)):
            sizes = _piece_sizes(n, int(sizes))
        elif sum(sizes) != n:  # (a trace replayed at another length: loud, as eager)
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {dim}), but got "
                               f"split_sizes={list(sizes)}")
        self.n_outputs = len(sizes)
        pre = (slice(None),) * dim
        outs = []
        off = 0
        for s in sizes:
            outs.append(x[pre + (slice(off, off + s), Ellipsis)])
            off += s
        return outs

    def backward(self, *grads):
        return Cat.apply(*grads, dim=self.dim, np_dtype=grads[0]._data.dtype), None, None


class Split(SplitWithSizes):
    _node_name = "SplitBackward0"


class UnsafeSplit(Split):
    """:class:`Split` whose pieces autograd does not track as views (PyTorch's
    ``unsafe_split``/``unsafe_chunk``, which its recurrent cells use to cut the gates):
    the pieces share the input's memory, and an in-place change of one is not seen by
    the input's graph."""
    _node_name = "UnsafeSplitBackward0"

    @classmethod
    def apply(cls, x, *args, **params):
        return Primitive.apply.__func__(cls, x, *args, **params)

    def jvp(self, t, *rest):
        return None if t is None else type(self).apply(t, *self.fw_inputs[1:],
                                                       **self.fw_params)


def unsafe_pieces(input, chunks, dim):
    """``input.unsafe_chunk(chunks, dim)`` as one :class:`UnsafeSplit` node (``dim``
    already wrapped, its size not zero)."""
    # the piece size from the size as read (a trace records the arithmetic on it)
    out = UnsafeSplit.apply(input, -(-input.shape[dim] // chunks), dim)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class Unbind(ViewPrimitive):
    n_outputs = 2
    batch = _batch.unbind

    def forward(self, x, dim):
        self.dim = dim
        n = x.shape[dim]
        self.n_outputs = n
        pre = (slice(None),) * dim
        return [x[pre + (i, Ellipsis)] for i in range(n)]

    def backward(self, *grads):
        return stack(list(grads), self.dim), None

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``): the pieces' gradients stacked (zeros for
        the pieces without one)."""
        return [np.stack([np.zeros_like(y) if g is None else g
                          for g, y in zip(grads, outputs)], self.dim), None]


@follows_int_reads
def split(tensor, split_size_or_sections, dim=0):
    """Split into pieces of ``split_size_or_sections`` (an int: equal pieces, the last
    maybe smaller; a list: those sizes) along ``dim``; the pieces are views."""
    nd = tensor._data.ndim
    if nd == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, nd)
    n = tensor._data.shape[d]
    s = split_size_or_sections
    if isinstance(s, (int, np.integer)) or (isinstance(s, Tensor) and s._data.ndim == 0):
        s = int(s)
        if s < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got "
                               f"split_size={s}")
        if s == 0 and n:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}")
        # the size itself (a traced int stays one), cut in the node
        return Split.apply(tensor, split_size_or_sections if isinstance(
            split_size_or_sections, int) else s, d)
    sizes = [int(v) for v in s]
    if sum(sizes) != n or any(v < 0 for v in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {d}), but got split_sizes={sizes}")
    return SplitWithSizes.apply(tensor, tuple(sizes), d)


@follows_int_reads
def chunk(input, chunks, dim=0):
    """Split into ``chunks`` pieces of ``ceil(size / chunks)`` (there may be fewer)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    nd = input._data.ndim
    if nd == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, nd)
    n = input._data.shape[d]
    if n == 0:  # PyTorch's split_with_sizes, and its node
        return SplitWithSizes.apply(input, (0,) * chunks, d)
    # the piece size from the size as read (a trace records the arithmetic on it)
    return split(input, -(-input.shape[d] // chunks), d)


def tensor_split(input, indices_or_sections, dim=0):
    """Split into ``n`` nearly equal pieces (an int), or at the given indices (a list or
    1-D int tensor); pieces are views."""
    nd = input._data.ndim
    if nd == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    d = wrap_dim(dim, nd)
    n = input._data.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor) and _mode_active[0] and (m := _mode_recorder()) is not None:
        # a whole call in a capture: the split points are values of the tensor
        return m.composite_locals("tensor_split", tensor_split, locals())
    if isinstance(ios, Tensor):
        if ios._data.dtype != np.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype "
                               f"of long, but got {ios.dtype.name.capitalize()}")
        if ios._data.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {ios._data.ndim} dims")
        ios = int(ios.item()) if ios._data.ndim == 0 else ios.tolist()
    if isinstance(ios, (int, np.integer)):
        k = int(ios)
        if k <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {k}")
        q, r = divmod(n, k)
        bounds = []
        start = 0
        for i in range(k):
            stop = start + q + (1 if i < r else 0)
            bounds.append((start, stop))
            start = stop
    else:
        # Python slicing between consecutive indices (they may decrease or be negative)
        idx = [None] + [int(i) for i in ios] + [None]
        bounds = list(zip(idx[:-1], idx[1:]))
    return tuple(_slice_dim(input, d, a, b) for a, b in bounds)


def _split_n(name, input, ios, dim, min_dim):
    nd = input._data.ndim
    if nd < min_dim:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dim} dimension, "
                           f"but got a tensor with {nd} dimensions!")
    if isinstance(ios, (str, bytes)) or not isinstance(ios, (int, np.integer, Tensor)) and \
            not hasattr(ios, "__iter__"):
        raise TypeError(f"{name}() received an invalid combination of arguments - got "
                        f"indices_or_sections of type {type(ios).__name__}, but expected an "
                        "int or a sequence of ints")
    if isinstance(ios, (int, np.integer)):
        n = input._data.shape[dim]
        if ios == 0 or n % ios:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the "
                               f"size of the dimension {n} is not divisible by the split_size "
                               f"{ios}!")
    return tensor_split(input, ios, dim)


def hsplit(input, indices_or_sections):
    if _mode_active[0] and (r := traced_ints(indices_or_sections)) is not None:
        # traced split points: the pieces' sizes are computed in Python, so one node
        return r[0].composite("hsplit", hsplit, (input,) + r[1], {})
    """``tensor_split`` along dim 1 (dim 0 for 1-D tensors); an int must divide evenly."""
    return _split_n("hsplit", input, indices_or_sections, 0 if input._data.ndim == 1 else 1, 1)


def vsplit(input, indices_or_sections):
    if _mode_active[0] and (r := traced_ints(indices_or_sections)) is not None:
        # traced split points: the pieces' sizes are computed in Python, so one node
        return r[0].composite("vsplit", vsplit, (input,) + r[1], {})
    """``tensor_split`` along dim 0; an int must divide evenly."""
    return _split_n("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    if _mode_active[0] and (r := traced_ints(indices_or_sections)) is not None:
        # traced split points: the pieces' sizes are computed in Python, so one node
        return r[0].composite("dsplit", dsplit, (input,) + r[1], {})
    """``tensor_split`` along dim 2; an int must divide evenly."""
    return _split_n("dsplit", input, indices_or_sections, 2, 3)


@follows_int_reads
def unbind(input, dim=0):
    """The slices of ``input`` along ``dim``, as a tuple of views without that dim."""
    nd = input._data.ndim
    if nd == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return Unbind.apply(input, wrap_dim(dim, nd))


# ----- repeats ------------------------------------------------------------------------

class Repeat(Primitive):
    def forward(self, x, reps):
        self.meta = (x.shape, reps)
        return _xp(x).tile(x, reps)

    def backward(self, gy):
        in_shape, reps = self.meta
        full = (1,) * (len(reps) - len(in_shape)) + tuple(in_shape)
        inter = []
        for r, s in zip(reps, full):
            inter += [r, s]
        g = gy.reshape(inter).sum(tuple(range(0, 2 * len(reps), 2)))
        return g.reshape(in_shape), None

    jvp = _jvp.linear(0)
    batch = _batch.repeat
    complex32_math = True


def repeat(self, *sizes):
    """``self`` repeated ``sizes[i]`` times along each dim (``sizes`` may add leading dims)."""
    if _mode_active[0] and (r := traced_ints(*sizes)) is not None:
        # traced counts: one node, its shape computed again at their values
        return r[0].composite("repeat", repeat, (self,) + r[1], {})
    reps = _sizes(sizes)
    if len(reps) < self._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    if any(r < 0 for r in reps):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(reps)}: "
                           f"{list(reps)}")
    return Repeat.apply(self, reps)


def tile(input, dims):
    """``input`` repeated ``dims[i]`` times along each dim; a short ``dims`` is padded
    with leading ones."""
    dims = _sizes((dims,)) if not isinstance(dims, (int, np.integer)) else (int(dims),)
    nd = input._data.ndim
    if len(dims) < nd:
        dims = (1,) * (nd - len(dims)) + tuple(dims)
    return repeat(input, dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (or each slice along ``dim``) ``repeats`` times in place;
    ``repeats`` is an int or a tensor with one count per element. With only a 1-D
    int tensor of counts, the indices ``0, 0, 1, ...`` are returned."""
    from ember.ops.index_along import index_select
    if _mode_active[0] and not isinstance(repeats, bool) and \
            (m := _mode_recorder((input,))) is not None:
        # a whole call in a capture: the gather positions it makes would be constants
        return m.composite_locals("repeat_interleave", repeat_interleave, locals())
    if repeats is None:
        r = input._data
        if r.ndim > 1 or r.dtype.kind not in "iu":
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        r = r.reshape(-1)
        if r.size and int(r.min()) < 0:
            raise RuntimeError("repeats can not be negative")
        xp = _xp(r)
        return _make(xp.repeat(xp.arange(r.size, dtype=np.int64), r))
    if dim is None:
        input = input.reshape(-1)
        d = 0
    else:
        d = wrap_dim(dim, input._data.ndim)
        if input._data.ndim == 0:
            input = input.reshape(1)
    n = input._data.shape[d]
    xp = _xp(input._data)
    if isinstance(repeats, Tensor):
        r = repeats._data
        if r.ndim > 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        if r.dtype.kind not in "iu":
            raise RuntimeError("repeats has to be Long or Int tensor")
        r = r.reshape(-1)
        if r.size == 1:
            r = int(r[0])
        elif r.size != n:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {r.size} and input.size({d}) = {n}")
    else:
        r = int(repeats)
    if (int(r.min()) if hasattr(r, "min") and r.size else r if isinstance(r, int) else 0) < 0:
        raise RuntimeError("repeats can not be negative")
    total = n * r if isinstance(r, int) else int(r.sum())
    if output_size is not None and total != output_size:
        raise RuntimeError(f"allocated size does not match required size: {output_size} vs "
                           f"{total}")
    if not isinstance(repeats, Tensor):
        # an int count: PyTorch expands a new dim after ``d``, copies and flattens
        # (its graph ends in that view)
        shape = input._data.shape
        wide = input.unsqueeze(d + 1).expand(*shape[:d + 1], r, *shape[d + 1:])
        return wide.clone().flatten(d, d + 1)
    if not isinstance(r, int):
        r = xp.asarray(r)  # counts from a CPU tensor, for an input on a GPU
    idx = xp.repeat(xp.arange(n, dtype=np.int64), r)
    return index_select(input, d, _make(idx))



def split_with_sizes(input, split_sizes, dim=0):
    """Split along ``dim`` into pieces of the given sizes (they must add up to its length)."""
    if isinstance(split_sizes, (int, np.integer)):
        raise TypeError("split_with_sizes(): argument 'split_sizes' must be tuple of ints, "
                        "not int")
    return split(input, list(split_sizes), dim)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 1-D tensors: ``indexing='ij'`` (the default, matrix order) or
    ``'xy'`` (Cartesian: the first two dims of every grid are swapped). The outputs are
    views."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    if not tensors:
        raise RuntimeError("torch.meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t._data.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t}")
        if t._data.dtype != tensors[0]._data.dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    ts = list(tensors)   # each viewed once, to its place in the grid (PyTorch's nodes)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    # (sizes read through ``shape``: a trace records them, so it follows other lengths)
    shape = tuple(t.shape[0] if t._data.ndim else 1 for t in ts)
    n = len(ts)
    out = [t.reshape((1,) * i + (-1,) + (1,) * (n - i - 1)).expand(shape)
           for i, t in enumerate(ts)]
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def _bind():
    T = Tensor
    for fn in (split, chunk, tensor_split, hsplit, vsplit, dsplit, unbind, tile,
               repeat_interleave, repeat, split_with_sizes):
        setattr(T, fn.__name__, fn)


_bind()
