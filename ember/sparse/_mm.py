"""torch's older sparse-times-dense products (``smm``, ``hsmm``, ``hspmm``, ``dsmm``,
``sspaddmm``, ``saddmm``) and the in-place resizes of sparse tensors.

The sparse results have torch's structure: the product keeps, for every row of the
sparse operand that has a stored element, the whole dense row of the result (``hsmm``
as one sparse dim with dense rows, ``smm`` as row x column entries, zeros included);
``sspaddmm`` appends those entries to the scaled entries of ``input`` (uncoalesced).
"""
import numpy as np

from ember import _core as ember
from ember._tensor import Tensor
from ember.backend import lapack as _lapack
from ember.sparse import _densify, _sparse

__all__ = ["smm", "hsmm", "hspmm", "dsmm", "sspaddmm", "saddmm", "resize_as_sparse_"]


def _need_sparse(t, what):
    if not getattr(t, "is_sparse", False):
        raise RuntimeError(f"{what} can only be called on sparse tensors")


def _product_rows(mat1, mat2):
    """(rows of mat1 with stored elements, the dense product) as arrays."""
    _need_sparse(mat1, "tensor.sspaddmm(...)")
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError("smm: expected 2-D matrices")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x"
                           f"{mat1.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
    if (mat1.requires_grad or mat2.requires_grad) and ember.is_grad_enabled():
        raise NotImplementedError("gradients through smm/hsmm/sspaddmm are not implemented in "
                                  "ember; use torch.sparse.mm")
    with _lapack.one_thread():  # the one-thread bits at any thread count
        prod = np.matmul(mat1._data, mat2._data)
    rows = np.unique(mat1._sp_indices[0]).astype(np.int64)
    return rows, prod


def hsmm(mat1, mat2):
    """Sparse ``mat1`` @ dense ``mat2`` as a hybrid sparse tensor: one sparse dim (the
    rows of ``mat1`` with stored elements), dense rows as values."""
    rows, prod = _product_rows(mat1, mat2)
    dense = np.zeros_like(prod)
    dense[rows] = prod[rows]
    return _sparse(rows[None, :], prod[rows].copy(), dense, True)


hspmm = hsmm


def smm(input, mat):
    """Sparse ``input`` @ dense ``mat`` as a sparse tensor holding every column of each
    row of ``input`` that has a stored element."""
    rows, prod = _product_rows(input, mat)
    p = prod.shape[1]
    idx = np.stack([np.repeat(rows, p), np.tile(np.arange(p, dtype=np.int64), len(rows))])
    dense = np.zeros_like(prod)
    dense[rows] = prod[rows]
    return _sparse(idx, prod[rows].reshape(-1).copy(), dense, True)


def dsmm(mat1, mat2):
    """Sparse ``mat1`` @ dense ``mat2`` as a dense tensor."""
    _need_sparse(mat1, "dsmm")
    return ember.mm(mat1, mat2)


def sspaddmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """``beta * input + alpha * (mat1 @ mat2)`` for sparse ``input`` and ``mat1``: a
    sparse tensor with ``input``'s entries followed by those of :func:`smm`."""
    if out is not None:
        raise NotImplementedError("sspaddmm(out=...) is not implemented in ember")
    _need_sparse(input, "tensor.sspaddmm(...)")
    prod = smm(mat1, mat2)
    if tuple(input.shape) != tuple(prod.shape):
        raise RuntimeError(f"sspaddmm: Argument #1: Expected dim 1 size {prod.shape[1]}, got "
                           f"{input.shape[1]}")
    dtype = np.result_type(input._sp_values, prod._sp_values)
    idx = np.concatenate([input._sp_indices, prod._sp_indices], axis=1)
    vals = np.concatenate([(beta * input._sp_values).astype(dtype),
                           (alpha * prod._sp_values).astype(dtype)])
    return _sparse(idx, vals, _densify(idx, vals, tuple(input.shape), dtype), False)


saddmm = sspaddmm


# ----- in-place resizes ---------------------------------------------------------------
def _no_dense_kernel(name):
    raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the 'CPU' "
                              "backend: it takes sparse tensors only")


def _sparse_resize_(self, size, sparse_dim, dense_dim):
    """Resize a sparse tensor in place, keeping its entries (its sparse sizes may only
    grow, and its dense sizes stay, while it has entries)."""
    if not self.is_sparse:
        _no_dense_kernel("sparse_resize_")
    size = tuple(int(s) for s in size)
    if sparse_dim + dense_dim != len(size):
        raise RuntimeError(f"number of dimensions must be sparse_dim ({sparse_dim}) + "
                           f"dense_dim ({dense_dim}), but got {len(size)}")
    nnz = self._sp_indices.shape[1]
    old = tuple(self.shape)
    if nnz:
        if sparse_dim != self.sparse_dim() or dense_dim != self.dense_dim():
            raise RuntimeError("changing the number of sparse or dense dimensions of a "
                               "non-empty sparse tensor is not supported")
        if any(n < o for n, o in zip(size[:sparse_dim], old[:sparse_dim])):
            raise RuntimeError(f"shrinking the size of sparse dimensions (from "
                               f"{list(old[:sparse_dim])} to {list(size[:sparse_dim])}) on a "
                               "non-empty sparse tensor is not supported.")
        if size[sparse_dim:] != old[sparse_dim:]:
            raise RuntimeError(f"resizing dense dimensions (from {list(old[sparse_dim:])} to "
                               f"{list(size[sparse_dim:])}) on a non-empty sparse tensor is "
                               "not supported.")
        idx, vals = self._sp_indices, self._sp_values
    else:
        idx = np.zeros((sparse_dim, 0), dtype=np.int64)
        vals = np.zeros((0,) + size[sparse_dim:], dtype=self._data.dtype)
    self._sp_indices, self._sp_values = idx, vals
    self._data = _densify(idx, vals, size, self._data.dtype)
    self._vc[0] += 1
    return self


def _sparse_resize_and_clear_(self, size, sparse_dim, dense_dim):
    """Make a sparse tensor empty, of ``size``."""
    if not self.is_sparse:
        _no_dense_kernel("sparse_resize_and_clear_")
    self._sp_indices = np.zeros((0, 0), dtype=np.int64)
    self._sp_values = np.zeros((0,), dtype=self._data.dtype)
    self._coalesced = True
    return _sparse_resize_(self, size, sparse_dim, dense_dim)


def resize_as_sparse_(input, the_template):
    """Resize sparse ``input`` to the size and sparse/dense dims of ``the_template``."""
    if not getattr(input, "is_sparse", False):
        raise RuntimeError("resize_as_sparse_: self must be a sparse tensor")
    return _sparse_resize_(input, tuple(the_template.shape), the_template.sparse_dim(),
                           the_template.dense_dim())


for _name, _fn in {"smm": smm, "sspaddmm": sspaddmm, "sparse_resize_": _sparse_resize_,
                   "sparse_resize_and_clear_": _sparse_resize_and_clear_,
                   "resize_as_sparse_": resize_as_sparse_}.items():
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _fn)
