"""Sparse COO tensors (``torch.sparse_coo_tensor``, ``Tensor.to_sparse``) and the
``torch.sparse`` namespace.

An ember sparse tensor keeps PyTorch's COO description (``indices`` of shape
``(sparse_dim, nnz)``, ``values`` of shape ``(nnz, *dense_dims)``, coalesced or not)
*and* the dense array it stands for. Every operation that is not sparse-specific
computes on the dense array, so ``sparse @ dense``, ``dense + sparse``,
``torch.sum(sparse, 1)`` give PyTorch's numbers as dense tensors (PyTorch returns
some of them sparse). Memory is that of the dense tensor: this is for programs with
graphs of thousands of nodes, not millions.

Gradients flow through the values as in PyTorch (``ember/ops/sparse_ops.py``): a
sparse leaf's gradient is sparse where PyTorch's is (``values()``, ``to_dense()``,
``torch.sparse.mm``) and dense where PyTorch's is (``torch.mm``). The CSR layout is in
``ember/sparse/_csr.py``. Left out (``NotImplementedError``): the CSC/BSR/BSC layouts,
saving sparse tensors with ``torch.save``.
"""
import numpy as np

from ember import backend
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.backend import dtypes as _dt
from ember.backend._frozen import Frozen
from ember.ops import sparse_ops as _sp

__all__ = ["mm", "sum", "addmm", "layout", "strided", "sparse_coo", "sparse_coo_tensor",
           "spmm", "sampled_addmm", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc"]


class layout(Frozen):
    """A tensor memory layout: ``torch.strided`` (dense), ``torch.sparse_coo`` or
    ``torch.sparse_csr`` (``sparse_csc``/``bsr``/``bsc`` exist as names only). Immutable."""

    __slots__ = ("name",)

    def __init__(self, name):
        self._set(name=name)

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        return (_layout_by_name, (self.name,))


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
_LAYOUTS = {x.name: x for x in (strided, sparse_coo, sparse_csr, sparse_csc, sparse_bsr,
                                sparse_bsc)}


def _layout_by_name(name):
    return _LAYOUTS[name]


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
        """The values as stored (duplicates and order kept); differentiable."""
        if self._requires_grad:
            return _sp.gather_values(self, self._pattern, stored=self._sp_values)
        return _make(self._sp_values)

    @property
    def _pattern(self):
        """Where the stored elements are (computed: COO tensors change in place)."""
        return _coo_pattern(self._sp_indices, tuple(self._data.shape), self._sp_values.shape,
                            self._coalesced)

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
        if self._requires_grad:
            pattern = _coo_pattern(idx, tuple(self._data.shape), vals.shape, True)
            return _sp.pack_values(_sp.gather_values(self, pattern), pattern)
        return _sparse(idx, vals, self._data, True)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense tensor (a copy). Its gradient keeps only the stored elements unless
        ``masked_grad=False``, as in PyTorch."""
        out = _sp.to_dense(self, self._pattern, masked_grad is None or masked_grad) \
            if self._requires_grad else _make(self._data.copy())
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout is sparse_csr:
            return self.to_sparse_csr(dense_dim)
        _check_layout(layout)
        return self

    def to(self, *args, **kwargs):
        """Another dtype and/or device; the result stays sparse."""
        if self._requires_grad:
            vals = self._values()
            moved = vals.to(*args, **kwargs)
            if moved._data.dtype == vals._data.dtype and \
                    backend.device_of(moved._data) == backend.device_of(vals._data):
                return self
            return _sp.pack_values(moved, self._pattern)
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

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.")
        out = _sparse(self._sp_indices.copy(), self._sp_values.copy(),
                      _make(self._data.copy(), self._requires_grad), self._coalesced)
        memo[id(self)] = out
        return out

    def __add__(self, other):
        """A sparse sum for two tensors of the same indices (how the gradients of one
        sparse leaf add up); otherwise the dense sum."""
        if isinstance(other, SparseTensor) and other.shape == self.shape and \
                other._sp_indices.shape == self._sp_indices.shape and \
                (other._sp_indices == self._sp_indices).all():
            return _sp.pack_values(self._values() + other._values(), self._pattern)
        return Tensor.__add__(self, other)

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
                                  "(only torch.sparse_coo and torch.sparse_csr)")


def _coo_pattern(indices, shape, vshape, coalesced):
    def build(values, t):
        return _sparse(indices, values._data if isinstance(values, Tensor) else values, t,
                       coalesced)
    return _sp.Pattern(shape, tuple(indices), vshape, build)


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
    """The COO tensor of ``indices``/``values`` whose dense array is ``dense`` (or whose
    dense tensor, graph state included, is the Tensor ``dense``)."""
    t = (dense if isinstance(dense, Tensor) else _make(dense)).as_subclass(SparseTensor)
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
    coalesced = bool(is_coalesced) or ia.shape[1] <= 1
    if vals.requires_grad:
        out = _sp.pack_values(vals, _coo_pattern(ia, size, va.shape, coalesced))
    else:
        out = _sparse(ia, va, _densify(ia, va, size, va.dtype), coalesced)
    return out.requires_grad_(True) if requires_grad else out


def _to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse()``: the nonzero elements as a coalesced COO tensor (with
    ``sparse_dim``, the leading dims are sparse and the rest dense); with
    ``layout=torch.sparse_csr`` the CSR tensor (``to_sparse_csr``)."""
    _sp.refuse_complex_grad(self, "_to_sparse")
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        m.unrecordable("to_sparse (its indices are the input's nonzero positions)")
    if layout is sparse_csr:
        if sparse_dim is not None:
            raise RuntimeError("to_sparse: expected sparse_dim to be None when layout is "
                               "torch.sparse_csr")
        return self.to_sparse_csr(dense_dim)
    _check_layout(layout)
    a = self._data
    sd = a.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 <= sd <= a.ndim:
        raise RuntimeError(f"sparse_dim must be in [0, {a.ndim}], got {sd}")
    xp = backend.array_module(a)
    mask = a != 0 if sd == a.ndim else (a != 0).reshape(
        a.shape[:sd] + (int(np.prod(a.shape[sd:])),)).any(-1)
    idx = xp.stack(xp.nonzero(mask)).astype(np.int64) if sd else xp.zeros((0, 1), np.int64)
    vals = a[tuple(idx)] if sd else a[None]
    data = _sp.from_dense(self) if self._requires_grad else a.copy()
    if a.dtype.kind in "fc":
        # PyTorch's dense form adds the stored values to zeros: -0.0 reads back as +0.0
        (data._data if isinstance(data, Tensor) else data)[...] += 0
    return _sparse(idx.reshape(sd, -1), vals.copy(), data, True)


def _to_dense(self, dtype=None, *, masked_grad=None):
    """``self`` for a dense tensor (``dtype`` converts)."""
    return self if dtype is None else self.to(dtype)


def mm(mat1, mat2, reduce="sum"):
    """``torch.sparse.mm``: the matrix product of a sparse (COO or CSR) ``mat1`` and
    ``mat2``; the gradient of the sparse operand is sparse, of its pattern.

    With a CSR ``mat1``, ``reduce`` ("sum", "mean", "amax", "amin") reduces the products
    ``mat1[i, k] * mat2[k]`` over the stored elements of each row ``i`` (an empty row
    gives 0; explicit zeros count).

    Example::

        a = torch.tensor([[1., 0., 2.], [0., 3., 0.]]).to_sparse_csr()
        torch.sparse.mm(a, torch.ones(3, 2), "mean")  # tensor([[1.5, 1.5], [3., 3.]])
    """
    from ember.ops.linalg import mm as _mm
    if not isinstance(reduce, str):
        raise TypeError(f"_sparse_mm(): argument 'reduce' (position 3) must be str, not "
                        f"{type(reduce).__name__}")
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    csr = mat1.layout is sparse_csr
    if reduce == "sum" or not csr:
        if reduce != "sum":
            raise NotImplementedError(f"torch.sparse.mm(reduce={reduce!r}) takes a CSR mat1 "
                                      f"(got the {mat1.layout} layout), as in torch")
        sparse_in = csr or getattr(mat1, "is_sparse", False)
        return _mm(_sp.masked_grad(mat1, mat1._pattern) if sparse_in else mat1, mat2)
    if reduce == "prod":
        raise RuntimeError("sparse_mm_reduce: reduce type of prod has not been enabled.")
    return _mm_reduce(mat1, mat2, reduce)


def _mm_reduce(csr, other, reduce):
    if csr.ndim != 2:
        raise NotImplementedError("torch.sparse.mm(reduce=...) of a batched CSR tensor is not "
                                  "implemented in ember")
    if other.layout is not strided or other.ndim != 2 or other.shape[0] != csr.shape[1]:
        raise RuntimeError(f"Expected a tensor of dimension 2 and tensor.size[0] == "
                           f"{csr.shape[1]} but got: dimension {other.ndim} and "
                           f"tensor.size[0] = {other.shape[0] if other.ndim else 0}")
    if other.dtype != csr.dtype:
        raise RuntimeError(f"Expected tensor for argument #1 'other' to have scalar type "
                           f"{_tname(csr.dtype)}; but got torch.{_tname(other.dtype)}Tensor "
                           "instead (while checking arguments for sparse_mm_reduce)")
    rows, cols = csr._pattern.index
    return _sp.mm_reduce(csr.values(), other, rows, cols, csr.shape[0], reduce)


def _tname(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half",
            "bfloat16": "BFloat16"}.get(dtype.name, dtype.name.capitalize())


def sampled_addmm(input, mat1, mat2, *, beta=1.0, alpha=1.0, out=None):
    """``torch.sparse.sampled_addmm``: ``alpha * (mat1 @ mat2)`` at the stored elements
    of the CSR ``input``, plus ``beta * input``: a CSR tensor of ``input``'s pattern.
    Leading dims of all three batch.

    Example::

        c = torch.eye(3).to_sparse_csr()
        torch.sparse.sampled_addmm(c, torch.ones(3, 2), torch.ones(2, 3)).values()
        # tensor([3., 3., 3.])
    """
    from ember.ops.elementwise import add, mul, where
    from ember.ops.linalg import matmul
    if out is not None:
        raise NotImplementedError("torch.sparse.sampled_addmm(out=...) is not implemented "
                                  "in ember")
    if input.layout is not sparse_csr:
        raise NotImplementedError(f"torch.sparse.sampled_addmm takes a CSR input, got the "
                                  f"{input.layout} layout (as torch, which has no kernel "
                                  "for it)")
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if m.layout is not strided:
            raise NotImplementedError(f"torch.sparse.sampled_addmm with a sparse {name} is "
                                      "not implemented in ember")
        if m.dtype != input.dtype:
            raise RuntimeError(f"sampled_addmm: Expected {name} and self to have the same "
                               f"dtype, but got {_tname(m.dtype)} and {_tname(input.dtype)}")
        if m.ndim < 2:
            raise RuntimeError(f"sampled_addmm: Expected {name} to be a matrix, got "
                               f"{m.ndim}-D tensor")
    if mat1.shape[-1] != mat2.shape[-2]:
        raise RuntimeError(f"sampled_addmm: mat1 and mat2 shapes cannot be multiplied "
                           f"({mat1.shape[-2]}x{mat1.shape[-1]} and {mat2.shape[-2]}x"
                           f"{mat2.shape[-1]})")
    if (mat1.shape[-2], mat2.shape[-1]) != tuple(input.shape[-2:]) or \
            mat1.shape[:-2] != mat2.shape[:-2] or mat1.shape[:-2] != input.shape[:-2]:
        raise RuntimeError(f"sampled_addmm: input shape {list(input.shape)} does not match "
                           f"mat1 @ mat2 ({list(mat1.shape)} and {list(mat2.shape)})")
    pattern = input._pattern
    xp = backend.array_module(input._data)
    mask = _make(pattern.scatter(xp.ones(input._col.shape, dtype=input._data.dtype)))
    dense = mul(mul(matmul(mat1, mat2), mask), alpha)
    if beta != 0:
        # computed densely: input's gradient is beta * grad_output everywhere, as torch's
        dense = add(dense, _sp.scale(input, beta))
    elif input.requires_grad:
        # beta == 0 ignores input, its nan and inf included; its gradient is zeros
        dense = add(dense, where(_make(xp.zeros(input.shape, dtype=bool)), input, 0))
    return pattern.build(pattern.gather(dense._data), dense)


def spmm(input, mat2):
    """``torch.spmm``: ``input @ mat2`` for a sparse ``input``."""
    return mm(input, mat2)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``torch.sparse.addmm``: ``beta * mat + alpha * (mat1 @ mat2)``."""
    from ember.ops.linalg_add import addmm as _addmm
    if mat1.layout is not strided:  # the sparse operand's gradient is masked, as torch's
        mat1 = _sp.masked_grad(mat1, mat1._pattern)
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
