"""Sparse CSR tensors: ``torch.sparse_csr``, ``torch.sparse_csr_tensor``,
``Tensor.to_sparse_csr``, ``crow_indices``/``col_indices``/``values``.

A CSR tensor of shape ``(*batch, rows, cols)`` keeps PyTorch's description
(``crow_indices`` of shape ``(*batch, rows + 1)``, ``col_indices`` and ``values`` of
shape ``(*batch, nnz)``) *and* the dense array it stands for, like ember's COO tensors
(``ember/sparse/__init__.py``): ``torch.mm``/``matmul``/``addmm`` of CSR @ dense compute on it.
Gradients flow through the values (``ember/ops/sparse_ops.py``).

Methods that are not written for the CSR layout raise NotImplementedError naming
themselves when a program calls them; ember's own code (backward formulas that read a
saved CSR operand) still sees the dense array.
"""
import os
import sys

import numpy as np

from ember import backend
from ember._tensor import Tensor, _make
from ember.backend import dtypes as _dt
from ember.ops import sparse_ops as _sp
from ember.sparse import sparse_coo, sparse_csr, strided

__all__ = ["sparse_csr_tensor", "crow_indices_copy", "col_indices_copy"]

# ember's own directory (this file is ember/sparse/_csr.py)
_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class SparseCsrTensor(Tensor):
    """A CSR tensor: ``_crow`` and ``_col`` (integer arrays), ``_csr_values`` (the
    stored values) and ``_pattern`` (their positions); ``_data`` is the dense array."""

    __slots__ = ("_crow", "_col", "_csr_values", "_pattern")

    @property
    def layout(self):
        return sparse_csr

    @property
    def is_sparse_csr(self):
        return True

    @property
    def is_sparse(self):
        return False  # PyTorch's is_sparse means the COO layout

    def crow_indices(self):
        """The compressed row indices, ``(*batch, rows + 1)``."""
        return _make(self._crow)

    def col_indices(self):
        """The column of each stored element, ``(*batch, nnz)``."""
        return _make(self._col)

    def values(self):
        """The stored elements, ``(*batch, nnz)``; differentiable (the gradient of the
        CSR tensor is a CSR tensor of the same pattern). A read-only view when no
        gradient is recorded: write through ``to_dense()`` instead."""
        if self._requires_grad:
            return _sp.gather_values(self, self._pattern)
        v = self._csr_values.view()
        v.flags.writeable = False
        return _make(v)

    def _nnz(self):
        return self._col.shape[-1]

    def sparse_dim(self):
        return 2

    def dense_dim(self):
        return 0

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The dense tensor (a copy). Its gradient keeps only the stored elements unless
        ``masked_grad=False``, as in PyTorch."""
        out = _sp.to_dense(self, self._pattern, masked_grad is None or masked_grad) \
            if self._requires_grad else _make(self._data.copy())
        return out if dtype is None else out.to(dtype)

    def to_sparse_csr(self, dense_dim=None):
        _no_dense_dims(dense_dim)
        return self

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        """``to_sparse()``: the COO tensor of the same elements; ``layout=`` converts."""
        if layout in (None, sparse_coo):
            if sparse_dim not in (None, self.ndim):
                raise NotImplementedError(f"to_sparse({sparse_dim}) of a CSR tensor is not "
                                          "implemented in ember (only all dims sparse)")
            return _to_coo(self)
        if layout is sparse_csr:
            return self.to_sparse_csr(dense_dim)
        _unsupported_layout(layout)

    def to_sparse_coo(self):
        return self.to_sparse()

    def to(self, *args, **kwargs):
        """Another dtype and/or device; the result stays CSR."""
        vals = self.values() if self._requires_grad else _make(self._csr_values)
        moved = vals.to(*args, **kwargs)
        if moved is vals:
            return self
        xp = backend.array_module(moved._data)
        dev = backend.device_of(moved._data)
        crow, col = (a if backend.array_module(a) is xp else backend.to_device(a, dev)
                     for a in (self._crow, self._col))
        pattern = _pattern(crow, col, tuple(self.shape))
        if moved._requires_grad:
            return _sp.pack_values(moved, pattern)
        return _build(crow, col, moved._data, _make(pattern.scatter(moved._data)))

    def double(self, memory_format=None):
        return self.to(_dt.float64)

    def float(self, memory_format=None):
        return self.to(_dt.float32)

    def cpu(self, memory_format=None):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        return self.to("cuda" if device is None else device)

    def detach(self):
        """The same CSR tensor outside the graph (sharing its arrays)."""
        return _build(self._crow, self._col, self._csr_values, _make(self._data))

    def clone(self, *, memory_format=None):
        """A copy (differentiable)."""
        if self._requires_grad:
            return _sp.pack_values(self.values().clone(), self._pattern)
        return _build(self._crow.copy(), self._col.copy(), self._csr_values.copy(),
                      _make(self._data.copy()))

    @property
    def data(self):
        return self.detach()

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.")
        out = _build(self._crow.copy(), self._col.copy(), self._csr_values.copy(),
                     _make(self._data.copy(), self._requires_grad))
        memo[id(self)] = out
        return out

    def numpy(self, *, force=False):
        raise TypeError("can't convert SparseCsr layout tensor to numpy. Use "
                        "Tensor.to_dense() first.")

    def __add__(self, other):
        return _add(self, other, sys._getframe(1))

    def __radd__(self, other):
        return _add(self, other, sys._getframe(1))

    def sum(self, *args, **kwargs):
        """The sum of all elements (a dense 0-d tensor); ``dim=`` is not implemented."""
        if args or kwargs:
            raise NotImplementedError("Tensor.sum(dim=...) of a sparse CSR tensor is not "
                                      "implemented in ember; call .to_dense() first")
        from ember.ops.reduction import sum as _sum
        return _sum(self)

    def mm(self, mat2):
        """``self @ mat2`` for a dense ``mat2`` (a dense result)."""
        return _dense_product("mm", self, mat2)

    def matmul(self, other):
        """``self @ other`` for a dense ``other`` (a dense result)."""
        return _dense_product("matmul", self, other)

    def __matmul__(self, other):
        return _dense_product("matmul", self, other)

    def __rmatmul__(self, other):
        return _dense_product("matmul", other, self)

    def __repr__(self):
        from ember._tensor_str import tensor_repr
        ind = "\n" + " " * 7
        crow = tensor_repr(_make(self._crow)).replace("\n", "\n" + " " * 19)
        col = tensor_repr(_make(self._col)).replace("\n", "\n" + " " * 17)
        v = tensor_repr(_make(self._csr_values)).replace("\n", "\n" + " " * 14)
        v = v.replace(f", dtype={self.dtype}", "")
        plain = (_dt.get_default_dtype(), _dt.int64, _dt.bool)
        extra = "" if self.dtype in plain else f", dtype={self.dtype}"
        grad = f", grad_fn=<{self.grad_fn.name()}>" if self.grad_fn is not None else \
            (", requires_grad=True" if self._requires_grad else "")
        return (f"tensor(crow_indices={crow},{ind}col_indices={col},{ind}values={v}, "
                f"size={tuple(self.shape)}, nnz={self._nnz()}{extra}, "
                f"layout=torch.sparse_csr{grad})")

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        raise NotImplementedError("saving sparse CSR tensors is not implemented in ember; "
                                  "save t.crow_indices(), t.col_indices() and t.values()")


# ----- the pattern: where the stored elements are ---------------------------------------
def _csr_index(crow, col, shape):
    """The positions (batch..., row, col) of a CSR tensor's elements, in storage order."""
    xp = backend.array_module(col)
    batch, n_rows = shape[:-2], shape[-2]
    nb = int(np.prod(batch, dtype=np.int64))
    nnz = col.shape[-1]
    counts = xp.diff(crow.reshape(nb, n_rows + 1).astype(np.int64), axis=1)
    rows = xp.repeat(xp.tile(xp.arange(n_rows, dtype=np.int64), nb), counts.reshape(-1))
    cols = col.reshape(-1).astype(np.int64)
    if not batch:
        return (rows, cols)
    flat_b = xp.repeat(xp.arange(nb, dtype=np.int64), nnz)
    return tuple(xp.unravel_index(flat_b, batch)) + (rows, cols)


def _pattern(crow, col, shape):
    def build(values, t):
        return _build(crow, col, values._data if isinstance(values, Tensor) else values, t)
    return _sp.Pattern(shape, _csr_index(crow, col, shape), col.shape, build)


def _build(crow, col, values, t):
    """The CSR tensor of arrays ``crow``/``col``/``values`` whose dense tensor (graph
    state included) is ``t``."""
    if not _sealed[0]:
        _seal()
    out = t.as_subclass(SparseCsrTensor)
    out._crow, out._col, out._csr_values = crow, col, values
    out._pattern = _pattern(crow, col, tuple(t._data.shape))
    return out


def _no_dense_dims(dense_dim):
    if dense_dim not in (None, 0):
        raise NotImplementedError(f"CSR tensors with dense dims (dense_dim={dense_dim}) are "
                                  "not implemented in ember")


def _unsupported_layout(layout_):
    raise NotImplementedError(f"the {layout_} layout is not implemented in ember (only "
                              "torch.sparse_coo and torch.sparse_csr)")


# ----- construction ----------------------------------------------------------------------
def _int_array(x, name):
    from ember import _factory
    t = x if isinstance(x, Tensor) else _factory.tensor(x, dtype=_dt.int64)
    if t.dtype not in (_dt.int32, _dt.int64):
        raise RuntimeError(f"{name} must be an int32 or int64 type, but got: {t.dtype}")
    return t._data


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None,
                      device=None, pin_memory=False, requires_grad=False,
                      check_invariants=None):
    """``torch.sparse_csr_tensor``: a CSR tensor whose row ``i`` holds
    ``values[crow_indices[i]:crow_indices[i + 1]]`` at columns
    ``col_indices[crow_indices[i]:crow_indices[i + 1]]``; leading dims batch.

    Example::

        s = torch.sparse_csr_tensor(torch.tensor([0, 2, 3]), torch.tensor([0, 2, 1]),
                                    torch.tensor([1., 2., 3.]), (2, 3))
        s.to_dense()  # tensor([[1., 0., 2.], [0., 3., 0.]])
    """
    from ember import _factory
    crow = _int_array(crow_indices, "crow_indices")
    col = _int_array(col_indices, "col_indices")
    if crow.dtype != col.dtype:
        raise RuntimeError("crow_indices and col_indices must have the same dtype, but got "
                           f"{_dt.FROM_NP[crow.dtype]} and {_dt.FROM_NP[col.dtype]}")
    vals = values if isinstance(values, Tensor) else _factory.tensor(values)
    if device is not None:
        vals = vals.to(device)
    if dtype is not None:
        vals = vals.to(dtype)
    if crow.ndim < 1 or crow.ndim != col.ndim:
        raise RuntimeError("crow_indices and col_indices must have the same number of "
                           f"dimensions, but got {crow.ndim} and {col.ndim}")
    if vals.dim() != col.ndim:
        raise NotImplementedError("CSR tensors with dense dims (values with more dims than "
                                  "col_indices) are not implemented in ember")
    if tuple(vals.shape) != col.shape:
        raise RuntimeError(f"col_indices and values must have the same shape, but got "
                           f"{list(col.shape)} and {list(vals.shape)}")
    if crow.shape[:-1] != col.shape[:-1]:
        raise RuntimeError("batch dims of crow_indices and col_indices must agree, but got "
                           f"{list(crow.shape[:-1])} and {list(col.shape[:-1])}")
    if size is None:
        n_cols = int(col.max()) + 1 if col.size else 0
        size = tuple(crow.shape[:-1]) + (crow.shape[-1] - 1, n_cols)
    size = tuple(int(s) for s in size)
    _check_csr(crow, col, size)
    pattern = _pattern(crow, col, size)
    if vals.requires_grad:
        out = _sp.pack_values(vals, pattern)
    else:
        out = _build(crow, col, vals._data, _make(pattern.scatter(vals._data)))
    if requires_grad:
        out.requires_grad_(True)
    return out


def _check_csr(crow, col, size):
    """PyTorch's CSR invariants (it checks them when asked; ember always does, since a
    broken one would give a silently wrong dense array)."""
    if len(size) != crow.ndim + 1:
        raise RuntimeError(f"tensor dimensionality must be sum of batch, base, and dense "
                           f"dimensionalities (={crow.ndim - 1} + 2 + 0) but got {len(size)}")
    if tuple(size[:-2]) != crow.shape[:-1]:
        raise RuntimeError(f"batch dims of size {list(size[:-2])} and crow_indices "
                           f"{list(crow.shape[:-1])} differ")
    rows, cols = size[-2:]
    if crow.shape[-1] != rows + 1:
        raise RuntimeError(f"crow_indices.size(-1) must be equal to size[-2] + 1 (that is "
                           f"{rows + 1}), but got: {crow.shape[-1]}")
    if crow.size and (crow[..., 0] != 0).any():
        raise RuntimeError("`crow_indices[..., 0] == 0` is not satisfied.")
    if crow.size and (crow[..., -1] != col.shape[-1]).any():
        raise RuntimeError("`crow_indices[..., -1] == nnz` is not satisfied.")
    if (np.diff(crow, axis=-1) < 0).any():
        raise RuntimeError("`0 <= crow_indices[..., 1:] - crow_indices[..., :-1] <= ncols` "
                           "is not satisfied.")
    if col.size and (col.min() < 0 or col.max() >= cols):
        raise RuntimeError("`0 <= col_indices < ncols` is not satisfied.")
    index = _csr_index(crow, col, size)
    flat = np.ravel_multi_index(index, size) if col.size else col.reshape(-1)
    if len(np.unique(flat)) != flat.size:
        raise RuntimeError("`col_indices[..., crow_indices[..., i - 1]:crow_indices[..., i]] "
                           "for all i = 1, ..., nrows are sorted and distinct along the last "
                           "dimension values` is not satisfied.")


def crow_indices_copy(input, *, out=None):
    """``torch.crow_indices_copy``: a copy of a CSR tensor's ``crow_indices()``."""
    if out is not None:
        raise NotImplementedError("crow_indices_copy(out=...) is not implemented in ember")
    return input.crow_indices().clone()


def col_indices_copy(input, *, out=None):
    """``torch.col_indices_copy``: a copy of a CSR tensor's ``col_indices()``."""
    if out is not None:
        raise NotImplementedError("col_indices_copy(out=...) is not implemented in ember")
    return input.col_indices().clone()


# ----- conversions -----------------------------------------------------------------------
def _dense_to_csr(self, dense_dim=None):
    """``Tensor.to_sparse_csr()``: the nonzero elements of a dense tensor (2-D, or
    batched with the same count in every batch) in CSR form."""
    _no_dense_dims(dense_dim)
    if getattr(self, "is_sparse", False):
        return _coo_to_csr(self)
    _sp.refuse_complex_grad(self, "_to_sparse_csr")
    a = self._data
    if a.ndim < 2:
        raise RuntimeError(f"to_sparse_csr: expected a tensor of at least 2 dims, got {a.ndim}")
    xp = backend.array_module(a)
    batch, (n_rows, _) = a.shape[:-2], a.shape[-2:]
    nb = int(np.prod(batch, dtype=np.int64))
    mask = (a != 0).reshape((nb,) + a.shape[-2:])
    counts = mask.sum(axis=2)  # (nb, rows)
    nnz = counts.sum(axis=1)
    if nb and (nnz != nnz[0]).any():
        raise RuntimeError("Expect the same number of specified elements per batch.")
    b, r, c = xp.nonzero(mask)
    crow = xp.zeros((nb, n_rows + 1), dtype=np.int64)
    crow[:, 1:] = xp.cumsum(counts, axis=1)
    per = int(nnz[0]) if nb else 0
    col = c.astype(np.int64).reshape(batch + (per,))
    vals = a.reshape((nb,) + a.shape[-2:])[b, r, c].reshape(batch + (per,))
    crow = crow.reshape(batch + (n_rows + 1,))
    data = _sp.from_dense(self) if self._requires_grad else _make(a.copy())
    return _build(crow, col, vals, data)


def _coo_to_csr(coo):
    if coo.ndim != 2 or coo.sparse_dim() != 2:
        raise NotImplementedError("to_sparse_csr of a COO tensor is implemented in ember for "
                                  "2-D tensors with two sparse dims only")
    c = coo.coalesce()
    idx = c._sp_indices
    xp = backend.array_module(idx)
    n_rows = coo.shape[0]
    crow = xp.zeros(n_rows + 1, dtype=np.int64)
    crow[1:] = xp.cumsum(xp.bincount(idx[0], minlength=n_rows))
    col = idx[1].astype(np.int64)
    pattern = _pattern(crow, col, tuple(coo.shape))
    if coo._requires_grad:
        return _sp.pack_values(_sp.gather_values(c, c._pattern), pattern)
    return _build(crow, col, c._sp_values.copy(), _make(c._data.copy()))


def _to_coo(csr):
    from ember.sparse import _coo_pattern, _sparse
    idx = backend.array_module(csr._col).stack(csr._pattern.index).astype(np.int64)
    if csr._requires_grad:
        pattern = _coo_pattern(idx, tuple(csr.shape), (idx.shape[1],), True)
        # the same elements in the same order: the gradient keeps the CSR layout
        return _sp.pack_values(_sp.gather_values(csr, csr._pattern), pattern)
    return _sparse(idx, csr._csr_values.reshape(-1).copy(), csr._data.copy(), True)


def _add(csr, other, caller):
    """``csr + other``: a CSR tensor when ``other`` is CSR of the same pattern (how two
    gradients of one CSR leaf add up); inside ember (a leaf's gradients adding up) the
    dense sum; any other sum raises."""
    if isinstance(other, SparseCsrTensor) and other.shape == csr.shape and \
            np.array_equal(other._crow, csr._crow) and np.array_equal(other._col, csr._col):
        return _sp.pack_values(csr.values() + other.values(), csr._pattern)
    if not caller.f_code.co_filename.startswith(_EMBER_DIR):
        raise NotImplementedError("adding a sparse CSR tensor to anything but a CSR tensor "
                                  "of the same pattern is not implemented in ember; add its "
                                  ".to_dense()")
    from ember.ops.elementwise import add
    return add(csr, other)


def _dense_product(name, a, b):
    from ember.ops import linalg
    if all(isinstance(t, Tensor) and t.layout is not strided for t in (a, b)):
        raise NotImplementedError(f"{name} of two sparse tensors ({a.layout} and {b.layout}) "
                                  "is not implemented in ember (only CSR @ dense and "
                                  "dense @ CSR)")
    return getattr(linalg, name)(a, b)


# ----- everything else raises for a program, not for ember's own formulas ---------------
_CSR_METHODS = {
    "crow_indices", "col_indices", "values", "to_dense", "to_sparse", "to_sparse_csr",
    "to_sparse_coo", "to", "double", "float", "cpu", "cuda", "detach", "clone", "numpy",
    "mm", "matmul", "__matmul__", "__rmatmul__", "sparse_dim", "sum", "dense_dim",
    "_nnz", "__add__", "__radd__", "__repr__", "__str__", "__reduce_ex__",
    # metadata and autograd bookkeeping
    "size", "dim", "ndimension", "numel", "nelement", "element_size", "is_floating_point",
    "is_complex", "is_signed", "requires_grad_", "retain_grad", "register_hook",
    "backward", "type", "get_device", "is_contiguous", "data_ptr", "__len__", "__hash__",
    "__format__", "__eq__", "__ne__", "__bool__", "__init__", "__new__", "__getattribute__",
    "__setattr__", "__delattr__", "__init_subclass__", "__subclasshook__", "__sizeof__",
    "__reduce__", "__dir__", "__class__", "__getstate__", "__setstate__", "__deepcopy__",
    "__array__", "__array_wrap__", "__torch_function__", "as_subclass", "_get_extra",
    "_wrap_dim", "_type_name", "__copy__", "__weakref__",
}
_CSR_PROPERTIES = {"shape", "dtype", "device", "layout", "requires_grad", "grad", "grad_fn",
                   "is_leaf", "ndim", "is_cuda", "is_cpu", "is_sparse", "is_sparse_csr",
                   "retains_grad", "_version", "data", "name", "itemsize", "nbytes",
                   "output_nr", "is_meta"}


def _blocked_method(name, dense):
    def method(self, *args, **kwargs):
        if not sys._getframe(1).f_code.co_filename.startswith(_EMBER_DIR):
            raise NotImplementedError(f"Tensor.{name} is not implemented for sparse CSR "
                                      "tensors in ember; call .to_dense() first")
        return dense(self, *args, **kwargs)
    method.__name__ = name
    return method


def _blocked_property(name, prop):
    def get(self):
        if not sys._getframe(1).f_code.co_filename.startswith(_EMBER_DIR):
            raise NotImplementedError(f"Tensor.{name} is not implemented for sparse CSR "
                                      "tensors in ember; call .to_dense() first")
        return prop.__get__(self)
    return property(get)


_sealed = [False]


def _seal():
    """Block every Tensor method and property not written for CSR (done once, at the
    first CSR tensor, when every family has bound its methods)."""
    if _sealed[0]:
        return
    _sealed[0] = True
    for name in dir(Tensor):
        if name in _CSR_METHODS or name in _CSR_PROPERTIES or name in SparseCsrTensor.__dict__:
            continue
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            continue  # ember's private helpers
        attr = getattr(Tensor, name)
        if isinstance(attr, property):
            setattr(SparseCsrTensor, name, _blocked_property(name, attr))
        elif callable(attr) and not isinstance(attr, type):
            setattr(SparseCsrTensor, name, _blocked_method(name, attr))


def _to_sparse_csr_method(self, dense_dim=None):
    """``Tensor.to_sparse_csr()``: see :func:`_dense_to_csr`."""
    return _dense_to_csr(self, dense_dim)


def _crow_indices(self):
    """CSR tensors only: any other layout raises, as in torch."""
    raise RuntimeError(f"crow_indices expected sparse row compressed tensor layout but got "
                       f"{_layout_word(self)}")


def _col_indices(self):
    """CSR tensors only: any other layout raises, as in torch."""
    raise RuntimeError(f"col_indices expected sparse row compressed tensor layout but got "
                       f"{_layout_word(self)}")


def _layout_word(t):
    return "Sparse" if getattr(t, "is_sparse", False) else "Strided"


def _no_layout(name, layout_name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"Tensor.{name}: the {layout_name} layout is not "
                                  "implemented in ember (only torch.sparse_coo and "
                                  "torch.sparse_csr)")
    method.__name__ = name
    method.__doc__ = f"Not implemented in ember: raises NotImplementedError ({name})."
    return method


def _needs_csc(name):
    def method(self):
        raise RuntimeError(f"{name} expected sparse column compressed tensor layout but got "
                           f"{'SparseCsr' if self.layout is sparse_csr else _layout_word(self)}")
    method.__name__ = name
    method.__doc__ = f"CSC/BSC tensors only (not in ember): raises, as torch ({name})."
    return method


for _name, _lay in (("to_sparse_csc", "sparse_csc"), ("to_sparse_bsr", "sparse_bsr"),
                    ("to_sparse_bsc", "sparse_bsc")):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _no_layout(_name, _lay))
for _name in ("ccol_indices", "row_indices"):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _needs_csc(_name))
Tensor.to_sparse_csr = _to_sparse_csr_method
Tensor.crow_indices = _crow_indices
Tensor.col_indices = _col_indices
