"""The differentiable steps between sparse and dense tensors, and the sparse products
that have their own derivatives (``torch.sparse.mm(..., reduce=)``).

An ember sparse tensor (COO or CSR) carries the dense array it stands for, plus a
*pattern*: where its stored elements sit. Every derivative through a sparse tensor is
built from two primitives that are each other's derivative:

- :class:`SparseGather`: the stored values of a tensor (``values()``), read from its
  dense array at the pattern's positions;
- :class:`SparsePack`: values scattered at the pattern's positions, as a sparse tensor
  of that pattern (``sparse_csr_tensor(crow, col, values)``).

So the gradient of a sparse leaf is masked to its pattern (and sparse) exactly where
PyTorch's is: through ``values()``, ``to_dense()`` and ``torch.sparse.mm``; ops that
PyTorch differentiates densely (``torch.mm`` of a sparse operand) stay dense.
"""
import numpy as np

from ember import backend
from ember._tensor import _make
from ember.autograd.node import Primitive

__all__ = ["Pattern", "gather_values", "pack_values", "masked_grad", "to_dense", "from_dense",
           "mm_reduce", "scale"]


class Pattern:
    """Where a sparse tensor's elements are stored.

    ``index`` is a tuple of integer arrays into the dense array (``dense[index]`` are
    the stored values, flattened to ``flat_shape``); ``vshape`` is the shape of
    ``values()``; ``build(values_array, dense_array)`` makes the sparse tensor of this
    layout (set by the layout's module)."""

    __slots__ = ("shape", "index", "vshape", "build")

    def __init__(self, shape, index, vshape, build):
        self.shape, self.index, self.vshape, self.build = tuple(shape), index, tuple(vshape), \
            build

    def scatter(self, values):
        """The dense array holding ``values`` at the pattern (duplicates add up)."""
        xp = backend.array_module(values)
        dense = xp.zeros(self.shape, dtype=values.dtype)
        flat = values.reshape((len(self.index[0]) if self.index else 1,) +
                              self.shape[len(self.index):])
        if self.index:
            xp.add.at(dense, self.index, flat)
        else:
            dense[...] = flat[0]
        return dense

    def gather(self, dense):
        """The stored values read from ``dense`` (a new array of shape ``vshape``)."""
        return dense[self.index].reshape(self.vshape) if self.index else dense[None].copy()


def _as_sparse(t, pattern, values):
    """``t`` (an op's output, graph state included) as the sparse tensor of ``pattern``."""
    return pattern.build(values, t)


class SparseGather(Primitive):
    """``values()``: the stored elements of a sparse tensor, read at its pattern."""
    _node_name = "ValuesBackward0"

    def forward(self, x, *, pattern, stored=None, sparse_grad=True):
        self.pattern, self.sparse_grad = pattern, sparse_grad
        # an uncoalesced COO tensor's stored values differ from its dense array's
        return pattern.gather(x) if stored is None else stored.copy()

    def backward(self, gv):
        if self.sparse_grad:
            return pack_values(gv, self.pattern)
        return SparsePack.apply(gv, pattern=self.pattern)  # a dense op's gradient stays dense


class SparsePack(Primitive):
    """Values placed at a pattern: the sparse tensor they make (its dense array)."""
    _node_name = "SparseCompressedTensorBackward0"

    def forward(self, v, *, pattern):
        self.pattern = pattern
        return pattern.scatter(v)

    def backward(self, gy):
        return gather_values(gy, self.pattern)


class ToDense(Primitive):
    """``to_dense()``; with ``masked_grad`` the gradient keeps only the stored elements
    (a sparse tensor of the input's pattern), as PyTorch's default."""
    _node_name = "ToDenseBackward0"

    def forward(self, x, *, pattern, masked):
        self.pattern, self.masked = pattern, masked
        return x.copy()

    def backward(self, gy):
        if not self.masked:
            return _dense_of(gy)
        return pack_values(gather_values(gy, self.pattern), self.pattern)


class FromDense(Primitive):
    """``to_sparse()``/``to_sparse_csr()`` of a dense tensor: the same numbers, so the
    gradient is the output's, made dense."""
    _node_name = "ToSparseBackward0"

    def forward(self, x):
        return x.copy()

    def backward(self, gy):
        return _dense_of(gy)


class Scale(Primitive):
    """``x * factor`` whose gradient keeps the layout of the incoming gradient
    (``beta * input`` in ``sampled_addmm``: a sparse gradient stays sparse, as torch's)."""
    _node_name = "MulBackward0"

    def forward(self, x, *, factor):
        self.factor = factor
        return x * factor

    def backward(self, gy):
        # (a complex factor passes back conjugated: PyTorch's grad * conj(dy/dx))
        f = self.factor.conjugate() if isinstance(self.factor, complex) else self.factor
        if gy.layout.name == "strided":
            return gy * f
        pattern = gy._pattern
        return pack_values(gather_values(gy, pattern) * f, pattern)


def scale(x, factor):
    """``x * factor`` (a dense result) whose gradient keeps the incoming layout."""
    return Scale.apply(x, factor=factor)


def _dense_of(g):
    return g.to_dense() if g.layout.name != "strided" else g


def gather_values(x, pattern, stored=None):
    """The values of ``x`` at ``pattern`` (differentiable; a plain Tensor). The gradient
    of a sparse ``x`` is sparse (of ``pattern``), that of a dense one dense; ``stored``
    (an array) gives the forward values where they are not the dense array's."""
    return SparseGather.apply(x, pattern=pattern, stored=stored,
                              sparse_grad=x.layout.name != "strided")


def pack_values(values, pattern):
    """The sparse tensor of ``pattern`` holding ``values`` (differentiable)."""
    return _as_sparse(SparsePack.apply(values, pattern=pattern), pattern, values)


def masked_grad(x, pattern):
    """``x`` itself, but with a gradient masked to ``pattern`` and sparse (what
    ``torch.sparse.mm`` gives its sparse operand)."""
    if not x.requires_grad:
        return x
    return pack_values(gather_values(x, pattern), pattern)


def to_dense(x, pattern, masked=True):
    """The dense tensor of a sparse ``x`` (a copy, differentiable)."""
    return ToDense.apply(x, pattern=pattern, masked=bool(masked))


def from_dense(x):
    """A copy of the dense ``x`` that a sparse layout will wrap (differentiable)."""
    return FromDense.apply(x)


def refuse_complex_grad(x, kernel):
    """PyTorch's conversions to a sparse layout have no complex derivative: a complex
    ``x`` that would carry a graph raises, named after ``kernel``, as PyTorch's does."""
    from ember.autograd.grad_mode import state
    if x._requires_grad and state.grad_enabled and x._data.dtype.kind == "c":
        raise RuntimeError(f"{kernel} does not support automatic differentiation for outputs "
                           "with complex dtype.")


# ----- torch.sparse.mm(csr, dense, reduce=...) --------------------------------------------
class SparseMmReduce(Primitive):
    """``out[i] = reduce_k values[k] * dense[col[k]]`` over the stored elements ``k``
    of row ``i`` (an empty row gives 0). ``amax``/``amin`` send the gradient to the
    first element reaching the extreme, as PyTorch's CPU kernel does."""
    _node_name = "SparseMmReduceImplBackward0"
    save_inputs = (0, 1)

    def forward(self, values, dense, *, rows, cols, n_rows, reduce):
        xp = backend.array_module(dense)
        self.rows, self.cols, self.reduce = rows, cols, reduce
        prod = values[:, None] * dense[cols]
        n = dense.shape[1]
        counts = xp.bincount(rows, minlength=n_rows).astype(dense.dtype)
        self.scale = None
        self.winner = None
        if reduce in ("sum", "mean"):
            out = xp.zeros((n_rows, n), dtype=prod.dtype)
            xp.add.at(out, rows, prod)
            if reduce == "mean":
                self.scale = 1 / xp.maximum(counts, 1)
                out = out / xp.maximum(counts, 1)[:, None]
            return out.astype(dense.dtype, copy=False)
        better = xp.greater if reduce == "amax" else xp.less
        out = xp.zeros((n_rows, n), dtype=dense.dtype)
        best = xp.full((n_rows, n), -1, dtype=np.int64)
        # one pass per position within the rows (rows are short): the first element to
        # reach the extreme keeps it, as PyTorch's kernel
        starts = xp.concatenate([xp.zeros(1, np.int64), xp.cumsum(counts.astype(np.int64))])
        pos = xp.arange(len(rows)) - starts[rows]
        for p in range(int(pos.max()) + 1 if len(rows) else 0):
            k = xp.nonzero(pos == p)[0]
            r = rows[k]
            cur = prod[k]
            take = (best[r] < 0) | better(cur, out[r])
            out[r] = xp.where(take, cur, out[r])
            best[r] = xp.where(take, k[:, None], best[r])
        # 0/1 per (element, column): which element won each output
        self.winner = (best[rows] == xp.arange(len(rows))[:, None]).astype(dense.dtype)
        return out

    def backward(self, gy):
        values, dense = self.saved_tensors
        rows, cols = _make(self.rows), _make(self.cols)
        g = gy[rows]
        if self.scale is not None:
            g = g * _make(self.scale[self.rows, None].astype(gy._data.dtype))
        if self.winner is not None:
            g = g * _make(self.winner)
        e = self._edges
        gv = (g * dense[cols]).sum(1) if e[0] is not None else None
        gd = None
        if e[1] is not None:
            from ember.ops.index_along import index_add
            zeros = _make(backend.array_module(dense._data).zeros(dense.shape,
                                                                  dtype=dense._data.dtype))
            gd = index_add(zeros, 0, cols, g * values[:, None])
        return gv, gd


def mm_reduce(values, dense, rows, cols, n_rows, reduce):
    """The row-wise reduction of ``values[k] * dense[cols[k]]`` into ``n_rows`` rows."""
    return SparseMmReduce.apply(values, dense, rows=rows, cols=cols, n_rows=n_rows,
                                reduce=reduce)
