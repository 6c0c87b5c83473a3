"""Diagonals and triangles: ``diagonal`` (a view), ``diag``, ``diag_embed``, ``tril``,
``triu``, and the embeddings ``diagonal_scatter``, ``select_scatter``, ``slice_scatter``."""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active
from ember.autograd.node import Primitive
from ember.ops import _batch, _jvp
from ember.ops._inplace import inplace_method
from ember.ops._util import (
    follows_int_reads,
    int_or_traced,
    traced_ints,
    with_out,
    wrap_dim,
    write_out,
)
from ember.ops._views import ViewPrimitive
from ember.ops.indexing import IndexPut, transforming

__all__ = ["diagonal", "diag", "diag_embed", "diagonal_scatter", "select_scatter",
           "slice_scatter", "tril", "triu"]


def _xp(a):
    from ember.backend import array_module
    return array_module(a)


def _scatter_check(src, view_shape):
    if tuple(src._data.shape) != tuple(view_shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src._data.shape)}, slice size = {list(view_shape)}")


class SelectScatter(IndexPut):
    """``select_scatter``'s node (``SelectScatterBackward0``): a write at one index."""
    _node_name = "SelectScatterBackward0"
    _op_name = "IndexPut"   # the same op: its spellings write it


class SliceScatter(IndexPut):
    """``slice_scatter``'s node (``SliceScatterBackward0``): a write into a slice."""
    _node_name = "SliceScatterBackward0"
    _op_name = "IndexPut"


def _scatter_into(input, src, basic, cls=IndexPut):
    if src._data.dtype != input._data.dtype:
        src = src.to(input.dtype)
    _scatter_check(src, input._data[basic].shape)
    return cls.apply(input, src, basic, None, False)


def select_scatter(input, src, dim, index):
    """``input`` with ``src`` embedded at ``index`` along ``dim`` (out of place)."""
    if _mode_active[0] and (r := traced_ints(dim, index)) is not None:
        # a traced dim or index picks the key: one node, run again at its value
        return r[0].composite("select_scatter", select_scatter, (input, src) + r[1], {})
    d = wrap_dim(dim, input._data.ndim)
    n = input._data.shape[d]
    if not -n <= int(index) < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input._data.shape)} at dimension {d}")
    return _scatter_into(input, src, (slice(None),) * d + (int(index), Ellipsis), SelectScatter)


@with_out
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``input`` with ``src`` embedded at ``start:end:step`` along ``dim`` (out of place)."""
    d = wrap_dim(dim, input._data.ndim)
    if step is None or step <= 0:
        raise RuntimeError("slice step must be positive")
    return _scatter_into(input, src, (slice(None),) * d + (slice(start, end, step), Ellipsis),
                         SliceScatter)


# ----- diagonals and triangles --------------------------------------------------------

def _diag_view(a, offset, d1, d2):
    """The diagonal of ``a`` over dims ``d1``, ``d2`` as a (writable) strided view, with
    the diagonal as the last dim."""
    n1, n2 = a.shape[d1], a.shape[d2]
    if offset >= 0:
        length, s1, s2 = max(min(n1, n2 - offset), 0), 0, offset
    else:
        length, s1, s2 = max(min(n1 + offset, n2), 0), -offset, 0
    if length == 0:
        s1 = s2 = 0
    idx = [slice(None)] * a.ndim
    idx[d1], idx[d2] = slice(s1, None), slice(s2, None)
    sub = a[tuple(idx)]
    other = [k for k in range(a.ndim) if k != d1 and k != d2]
    shape = tuple(a.shape[k] for k in other) + (length,)
    strides = tuple(a.strides[k] for k in other) + (a.strides[d1] + a.strides[d2],)
    return _xp(a).lib.stride_tricks.as_strided(sub, shape, strides)


class Diagonal(ViewPrimitive):
    batch = _batch.diagonal

    def forward(self, x, offset, d1, d2):
        self.meta = (x.shape, offset, d1, d2)
        return _diag_view(x, offset, d1, d2)

    def backward(self, gy):
        shape, offset, d1, d2 = self.meta
        base = _make(_xp(gy._data).zeros(shape, gy._data.dtype))
        return DiagonalScatter.apply(base, gy, offset, d1, d2), None, None, None


class DiagonalCopy(Primitive):
    """A copy of a diagonal (``diag`` of a matrix): PyTorch's ``diagonal_copy`` node."""
    _node_name = "DiagonalBackward0_copy"
    profiler_name = "aten::diagonal_copy"
    batch = _batch.diagonal

    def forward(self, x, offset, d1, d2):
        self.meta = (x.shape, offset, d1, d2)
        return _diag_view(x, offset, d1, d2).copy()

    backward = Diagonal.backward
    jvp = _jvp.linear(0)


class DiagonalScatter(Primitive):
    def forward(self, base, src, offset, d1, d2):
        self.meta = (offset, d1, d2)
        out = _xp(base).array(base, copy=True)
        _diag_view(out, offset, d1, d2)[...] = src
        return out

    def backward(self, gy):
        offset, d1, d2 = self.meta
        g_base = g_src = None
        if self._edges[0] is not None:
            g_base = DiagonalScatter.apply(gy, 0, offset, d1, d2)
        if self._edges[1] is not None:
            g_src = Diagonal.apply(gy, offset, d1, d2)
        return g_base, g_src, None, None, None

    jvp = _jvp.linear(0, 1)


def _diag_dims(ndim, dim1, dim2):
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


@follows_int_reads
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal over dims ``dim1``, ``dim2`` (above it for ``offset > 0``) as a view,
    with the diagonal as the last dim."""
    d1, d2 = _diag_dims(input._data.ndim, dim1, dim2)
    return Diagonal.apply(input, int_or_traced(offset), d1, d2)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with its diagonal (as :func:`diagonal` picks it) replaced by ``src``."""
    d1, d2 = _diag_dims(input._data.ndim, dim1, dim2)
    _scatter_check(src, _diag_view(input._data, int(offset), d1, d2).shape)
    if src._data.dtype != input._data.dtype:
        src = src.to(input.dtype)
    return DiagonalScatter.apply(input, src, int(offset), d1, d2)


class DiagEmbed(Primitive):
    def forward(self, x, offset, d1, d2):
        self.meta = (offset, d1, d2)
        n = x.shape[-1] + abs(offset) if x.ndim else 1 + abs(offset)
        shape = list(x.shape[:-1])
        for d in sorted((d1, d2)):
            shape.insert(d, n)
        out = _xp(x).zeros(shape, x.dtype)
        _diag_view(out, offset, d1, d2)[...] = x
        return out

    def backward(self, gy):
        offset, d1, d2 = self.meta
        return Diagonal.apply(gy, offset, d1, d2), None, None, None

    jvp = _jvp.linear(0)
    batch = _batch.diag_embed


@follows_int_reads
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose diagonals over ``dim1``, ``dim2`` are the last dim of ``input``
    (zeros elsewhere)."""
    d1, d2 = _diag_dims(input._data.ndim + 1, dim1, dim2)
    return DiagEmbed.apply(input, int_or_traced(offset), d1, d2)


@follows_int_reads
def diag(input, diagonal=0, *, out=None):
    """A 1-D input becomes a 2-D matrix with it on diagonal ``diagonal``; a 2-D input
    gives a copy of that diagonal."""
    if out is not None and out.dtype != input.dtype:
        from ember.ops._util import can_cast, scalar_type_name
        if not can_cast(input._data.dtype, out._data.dtype):  # torch's wording for diag
            raise RuntimeError(f"diag: result type {scalar_type_name(input.dtype)} can't be "
                               f"cast to the desired out= type {scalar_type_name(out.dtype)}")
    nd = input._data.ndim
    if nd == 1:
        return write_out(diag_embed(input, diagonal, 0, 1), out)
    if nd == 2:
        if transforming():  # transforms and captures see the diagonal view and its clone
            return write_out(Diagonal.apply(input, int_or_traced(diagonal), 0, 1).clone(),
                             out)
        return write_out(DiagonalCopy.apply(input, int_or_traced(diagonal), 0, 1), out)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {nd}D")


class Tril(Primitive):
    def forward(self, x, k):
        self.k = k
        return _xp(x).tril(x, k)

    def backward(self, gy):
        return Tril.apply(gy, self.k), None

    jvp = _jvp.linear(0)
    batch = _batch.passthrough
    torchscript = "tril"
    complex32_math = True


class Triu(Primitive):
    def forward(self, x, k):
        self.k = k
        return _xp(x).triu(x, k)

    def backward(self, gy):
        return Triu.apply(gy, self.k), None

    jvp = _jvp.linear(0)
    batch = _batch.passthrough
    torchscript = "triu"
    complex32_math = True


def _tri(name, cls, input, diagonal, out):
    if input._data.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    return write_out(cls.apply(input, int_or_traced(diagonal)), out)


@follows_int_reads
def tril(input, diagonal=0, *, out=None):
    """The lower triangle of the last two dims (on and below diagonal ``diagonal``)."""
    return _tri("tril", Tril, input, diagonal, out)


@follows_int_reads
def triu(input, diagonal=0, *, out=None):
    """The upper triangle of the last two dims (on and above diagonal ``diagonal``)."""
    return _tri("triu", Triu, input, diagonal, out)



def _fill_diagonal(input, fill_value, wrap=False):
    shape = input.shape
    if input.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    if input.dim() > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(tuple(shape), dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return input.masked_fill(_make(_xp(input._data).asarray(mask)), fill_value)


_fill_diagonal.__name__ = "fill_diagonal"


def _bind():
    T = Tensor
    T.fill_diagonal_ = inplace_method(_fill_diagonal)
    T.fill_diagonal_.__doc__ = ("Fill the main diagonal with ``fill_value`` in place; with "
                                "``wrap`` a tall matrix restarts it every ``cols + 1`` rows.")
    for fn in (diagonal, diag, diag_embed, diagonal_scatter, select_scatter, slice_scatter,
               tril, triu):
        setattr(T, fn.__name__, fn)
    T.tril_, T.triu_ = inplace_method(tril), inplace_method(triu)


_bind()
