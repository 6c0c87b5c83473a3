"""Sparse COO tensors (``torch.sparse_coo_tensor``, ``Tensor.to_sparse``) and the
``torch.sparse`` namespace.

An ember sparse tensor keeps PyTorch's COO description (``indices`` of shape
``(sparse_dim, nnz)``, ``values`` of shape ``(nnz, *dense_dims)``, coalesced or not)
*and* the dense array it stands for. Every operation that is not sparse-specific
computes on the dense array, so ``sparse @ dense``, ``dense + sparse``,
``torch.sum(sparse, 1)`` give PyTorch's numbers as dense tensors (PyTorch returns
some of them sparse). Memory is that of the dense tensor: this is for programs with
graphs of thousands of nodes, not millions.

Left out (``NotImplementedError``): gradients through the values of a sparse tensor
(``requires_grad=True``), the compressed layouts (CSR/CSC/BSR/BSC), saving sparse
tensors with ``torch.save``.
"""
import numpy as np

from ember import backend
from ember._tensor import Tensor, _make
from ember.backend import dtypes as _dt

__all__ = ["mm", "sum", "addmm", "layout", "strided", "sparse_coo", "sparse_coo_tensor",
           "spmm"]


class layout:
    """A tensor memory layout: ``torch.strided`` (dense) or ``torch.sparse_coo``."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        return (_layout_by_name, (self.name,))


strided = layout("strided")
sparse_coo = layout("sparse_coo")


def _layout_by_name(name):
    return {"strided": strided, "sparse_coo": sparse_coo}[name]


class SparseTensor(Tensor):
    """A COO sparse tensor: ``_indices`` (int64 array, ``(sparse_dim, nnz)``),
    ``_values`` (array, ``(nnz, *dense_dims)``), ``_coalesced``; ``_data`` holds the
    dense array, on which all non-sparse ops compute."""

    __slots__ = ("_sp_indices", "_sp_values", "_coalesced")

    # ----- what makes it sparse ------------------------------------------------------
    @property
    def is_sparse(self):
        return True

    @property
    def layout(self):
        return sparse_coo

    def sparse_dim(self):
        return self._sp_indices.shape[0]

    def dense_dim(self):
        return self._sp_values.ndim - 1

    def _nnz(self):
        return self._sp_indices.shape[1]

    def _indices(self):
        """The indices as stored (duplicates and order kept)."""
        return _make(self._sp_indices)

    def _values(self):
        """The values as stored (duplicates and order kept)."""
        return _make(self._sp_values)

    def indices(self):
        """The indices of a coalesced tensor."""
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._indices()

    def values(self):
        """The values of a coalesced tensor."""
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._values()

    def is_coalesced(self):
        return self._coalesced

    def coalesce(self):
        """Indices sorted (row-major) and duplicates summed; ``self`` if already so."""
        if self._coalesced:
            return self
        idx, vals = _coalesce(self._sp_indices, self._sp_values, self._data.shape)
        return _sparse(idx, vals, self._data, True)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense tensor (a copy)."""
        out = _make(self._data.copy())
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        _check_layout(layout)
        return self

    def to(self, *args, **kwargs):
        """Another dtype and/or device; the result stays sparse."""
        dense = _make(self._data).to(*args, **kwargs)
        if dense._data is self._data:
            return self
        xp = backend.array_module(dense._data)
        idx = backend.to_device(self._sp_indices, backend.device_of(dense._data)) \
            if backend.array_module(self._sp_indices) is not xp else self._sp_indices
        vals = xp.asarray(backend.to_device(self._sp_values, backend.device_of(dense._data))
                          if backend.array_module(self._sp_values) is not xp
                          else self._sp_values).astype(dense._data.dtype)
        return _sparse(idx, vals, dense._data, self._coalesced)

    def cpu(self, memory_format=None):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        return self.to("cuda" if device is None else device)

    def double(self, memory_format=None):
        return self.to(_dt.float64)

    def float(self, memory_format=None):
        return self.to(_dt.float32)

    def requires_grad_(self, requires_grad=True):
        if requires_grad:
            raise NotImplementedError("gradients through sparse tensors are not implemented "
                                      "in ember")
        return self

    def __repr__(self):
        from ember._tensor_str import tensor_repr
        ind = "\n" + " " * 7
        i = tensor_repr(_make(self._sp_indices)).replace("\n", "\n" + " " * 15)
        v = tensor_repr(_make(self._sp_values)).replace("\n", "\n" + " " * 14)
        v = v.replace(f", dtype={self.dtype}", "")  # the dtype is shown once, at the end
        size = tuple(self._data.shape)
        plain = (_dt.get_default_dtype(), _dt.int64, _dt.bool)
        extra = "" if self.dtype in plain else f", dtype={self.dtype}"
        return (f"tensor(indices={i},{ind}values={v},{ind}size={size}, nnz={self._nnz()}"
                f"{extra}, layout=torch.sparse_coo)")

    def __reduce_ex__(self, proto):
        raise NotImplementedError("saving sparse tensors is not implemented in ember; save "
                                  "t.coalesce().indices() and .values() instead")


def _check_layout(layout_):
    if layout_ not in (None, sparse_coo):
        raise NotImplementedError(f"to_sparse(layout={layout_}) is not implemented in ember "
                                  "(only torch.sparse_coo)")


def _coalesce(indices, values, shape):
    """Sort by row-major position and sum duplicates."""
    xp = backend.array_module(values)
    sparse_shape = shape[:indices.shape[0]]
    if indices.shape[1] == 0:
        return indices, values
    flat = xp.ravel_multi_index(tuple(indices), sparse_shape) if len(sparse_shape) else \
        xp.zeros(indices.shape[1], dtype=np.int64)
    uniq, inverse = xp.unique(flat, return_inverse=True)
    summed = xp.zeros((len(uniq),) + values.shape[1:], dtype=values.dtype)
    xp.add.at(summed, inverse.reshape(-1), values)
    new_idx = xp.stack(xp.unravel_index(uniq, sparse_shape)).astype(np.int64) \
        if len(sparse_shape) else xp.zeros((0, len(uniq)), dtype=np.int64)
    return new_idx, summed


def _sparse(indices, values, dense, coalesced):
    t = _make(dense).as_subclass(SparseTensor)
    t._sp_indices, t._sp_values, t._coalesced = indices, values, coalesced
    return t


def _densify(indices, values, shape, dtype):
    xp = backend.array_module(values)
    dense = xp.zeros(shape, dtype=dtype)
    if indices.shape[1]:
        xp.add.at(dense, tuple(indices), values.astype(dtype, copy=False))
    return dense


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """``torch.sparse_coo_tensor(indices, values, size=None)``: a sparse tensor with
    ``values[k]`` at ``indices[:, k]`` (duplicates add up when densified or coalesced).

    Example::

        i = torch.tensor([[0, 1, 1], [2, 0, 2]])
        s = torch.sparse_coo_tensor(i, torch.tensor([3., 4., 5.]), (2, 3))
        s.to_dense()  # tensor([[0., 0., 3.], [4., 0., 5.]])
    """
    from ember import _factory
    if requires_grad or (isinstance(values, Tensor) and values.requires_grad):
        raise NotImplementedError("sparse_coo_tensor with values that require grad is not "
                                  "implemented in ember")
    idx = indices if isinstance(indices, Tensor) else _factory.tensor(
        np.asarray(indices).astype(np.int64) if not isinstance(indices, list) else indices,
        dtype=_dt.int64)
    vals = values if isinstance(values, Tensor) else _factory.tensor(values)
    if device is not None:
        idx, vals = idx.to(device), vals.to(device)
    if dtype is not None:
        vals = vals.to(dtype)
    if idx.dim() != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if vals.dim() == 0 or vals.shape[0] != idx.shape[1]:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: "
                           f"{idx.shape[1]}, nnz from values: "
                           f"{vals.shape[0] if vals.dim() else 0}")
    ia = idx._data.astype(np.int64)
    va = vals._data
    sdim = ia.shape[0]
    if size is None:
        sparse_size = tuple(int(m) + 1 for m in ia.max(axis=1)) if ia.shape[1] else (0,) * sdim
        size = sparse_size + tuple(va.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sdim + va.ndim - 1:
        raise RuntimeError(f"number of dimensions must be sparse_dim ({sdim}) + dense_dim "
                           f"({va.ndim - 1}), but got {len(size)}")
    if tuple(va.shape[1:]) != size[sdim:]:
        raise RuntimeError(f"values has incorrect size, expected {[va.shape[0], *size[sdim:]]}, "
                           f"got {list(va.shape)}")
    if ia.shape[1]:
        for d in range(sdim):
            low = int(ia[d].min())
            if low < 0:
                raise RuntimeError(f"found negative index {low} for dim {d}")
            top = int(ia[d].max())
            if top >= size[d]:
                raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is "
                                   f"{size[d]} but found index {top}")
    dense = _densify(ia, va, size, va.dtype)
    return _sparse(ia, va, dense, bool(is_coalesced) or ia.shape[1] <= 1)


def _to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse()``: the nonzero elements as a coalesced COO tensor (with
    ``sparse_dim``, the leading dims are sparse and the rest dense)."""
    _check_layout(layout)
    if self._requires_grad:
        raise NotImplementedError("to_sparse() of a tensor that requires grad is not "
                                  "implemented in ember (no gradients through sparse tensors)")
    a = self._data
    sd = a.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 <= sd <= a.ndim:
        raise RuntimeError(f"sparse_dim must be in [0, {a.ndim}], got {sd}")
    xp = backend.array_module(a)
    mask = a != 0 if sd == a.ndim else (a != 0).reshape(a.shape[:sd] + (-1,)).any(-1)
    idx = xp.stack(xp.nonzero(mask)).astype(np.int64) if sd else xp.zeros((0, 1), np.int64)
    vals = a[tuple(idx)] if sd else a[None]
    return _sparse(idx.reshape(sd, -1), vals.copy(), a.copy(), True)


def _to_dense(self, dtype=None, *, masked_grad=None):
    """``self`` for a dense tensor (``dtype`` converts)."""
    return self if dtype is None else self.to(dtype)


def mm(mat1, mat2, reduce="sum"):
    """``torch.sparse.mm``: the matrix product (sparse or dense operands)."""
    if reduce != "sum":
        raise NotImplementedError(f"torch.sparse.mm(reduce={reduce!r}) is not implemented in "
                                  "ember")
    from ember.ops.linalg import mm as _mm
    return _mm(mat1, mat2)


def spmm(input, mat2):
    """``torch.spmm``: ``input @ mat2`` for a sparse ``input``."""
    return mm(input, mat2)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``torch.sparse.addmm``: ``beta * mat + alpha * (mat1 @ mat2)``."""
    from ember.ops.linalg import addmm as _addmm
    return _addmm(mat, mat1, mat2, beta=beta, alpha=alpha)


def sum(input, dim=None, dtype=None):
    """``torch.sparse.sum``: the sum over all elements or over ``dim`` (a dense result)."""
    from ember.ops.reduction import sum as _sum
    if dim is None:
        return _sum(input, dtype=dtype)
    return _sum(input, dim, dtype=dtype)


Tensor.to_sparse = _to_sparse
Tensor.to_dense = _to_dense
Tensor.layout = property(lambda self: strided, doc="``torch.strided`` for dense tensors.")
