"""Tensor methods (and their top-level in-place twins) that bind functions declared
elsewhere: ``x.gcd(y)``, ``x.renorm_(...)``, ``torch.gcd_(x, y)``, ``x.dim_order()``,
the sparse accessors on dense tensors (which raise as torch's do), ``map2_``, ``set_``,
and the functions torch removed in 1.9 (``torch.solve``, ``torch.eig`` ...), which raise
torch's own message pointing to their replacements.
"""
import warnings

import numpy as np

from ember import _core as ember
from ember import ops as _ops
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.nn import functional as _F
from ember.ops._inplace import check_inplace, commit, inplace_method, source_for
from ember.ops._views import as_strided  # noqa: F401  (torch.as_strided)

__all__ = ["adjoint", "as_strided", "as_strided_", "conj_physical_", "gcd_", "lcm_",
           "ldexp_", "i0_", "unsafe_split_with_sizes", "eig", "lstsq", "matrix_rank", "solve",
           "symeig", "is_distributed"]


def adjoint(input):
    """The conjugate transpose of the last two dimensions (a view)."""
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {input.ndim}-D tensor.")
    out = input.transpose(-2, -1)
    return out.conj() if input.is_complex() else out


def as_strided_(input, size, stride, storage_offset=None):
    """Make ``input`` the strided view ``as_strided(size, stride, storage_offset)``; its
    graph continues from the view's node (PyTorch's ``AsStridedBackward1``)."""
    from ember.ops._views import StorageAsStridedInplace
    from ember.ops.shape import _retarget
    return _retarget(input, as_strided(input, size, stride, storage_offset,
                                       StorageAsStridedInplace))


def conj_physical_(input):
    """Conjugate in place (nothing to write for real tensors, but a graph being recorded
    gets PyTorch's in-place node, ``ConjPhysicalBackward1``, as torch's does)."""
    from ember.autograd.grad_mode import is_grad_enabled
    if input.is_complex() or input.requires_grad and is_grad_enabled():
        from ember.ops.complex_numbers import ConjPhysicalInplace
        check_inplace(input)
        return commit(input, ConjPhysicalInplace.apply(input))
    return input


def _float_power_(self, exponent):
    # the backward reads the base: it gets the old values, kept aside when recording
    result = ember.float_power(source_for(self, True, (exponent,)), exponent)
    if result.dtype != self.dtype:
        raise RuntimeError(f"the base given to float_power_ has dtype "
                           f"{_dtype_word(self.dtype)} but the operation's result requires "
                           f"dtype {_dtype_word(result.dtype)}")
    check_inplace(self)
    return commit(self, result)


def _dtype_word(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half",
            "complex128": "ComplexDouble", "complex64": "ComplexFloat"}.get(dtype.name,
                                                                           dtype.name)


gcd_ = inplace_method(_ops.gcd)
lcm_ = inplace_method(_ops.lcm)
ldexp_ = inplace_method(_ops.ldexp)
i0_ = inplace_method(ember.i0)


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    """:func:`split_with_sizes` whose pieces are not views tracked for in-place use."""
    return tuple(p.clone() for p in input.split(list(split_sizes), dim))


def is_distributed(input):
    """False: ember tensors live in one process."""
    return False


# ----- removed in torch 1.9: raise torch's message ---------------------------------------
_REMOVED = "This function was deprecated since version 1.9 and is now removed. "


def eig(input, eigenvectors=False, *, e=None, v=None):
    """Removed from torch: raises torch's message (use ``torch.linalg.eig``)."""
    raise RuntimeError(
        _REMOVED + "`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` "
        "rather than real tensors mimicking complex tensors.\n\nL, _ = torch.eig(A) should be "
        "replaced with:\nL_complex = torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, "
        "eigenvectors=True) should be replaced with:\nL_complex, V_complex = "
        "torch.linalg.eig(A)")


def lstsq(input, A, *, out=None):
    """Removed from torch: raises torch's message (use ``torch.linalg.lstsq``)."""
    raise RuntimeError(
        _REMOVED + "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n"
        "`torch.linalg.lstsq` has reversed arguments and does not return the QR "
        "decomposition in the returned tuple (although it returns other information about "
        "the problem).\n\nTo get the QR decomposition consider using `torch.linalg.qr`.")


def matrix_rank(input, tol=None, symmetric=False, *, out=None):
    """Removed from torch: raises torch's message (use ``torch.linalg.matrix_rank``)."""
    raise RuntimeError(
        _REMOVED.rstrip() + "\nPlease use the `torch.linalg.matrix_rank` function instead. The "
        "parameter 'symmetric' was renamed in `torch.linalg.matrix_rank()` to 'hermitian'.")


def solve(input, A, *, out=None):
    """Removed from torch: raises torch's message (use ``torch.linalg.solve``)."""
    raise RuntimeError(
        _REMOVED + "`torch.solve` is deprecated in favor of `torch.linalg.solve`. "
        "`torch.linalg.solve` has its arguments reversed and does not return the LU "
        "factorization.\n\nTo get the LU factorization see `torch.lu`, which can be used "
        "with `torch.lu_solve` or `torch.lu_unpack`.\nX = torch.solve(B, A).solution should "
        "be replaced with:\nX = torch.linalg.solve(A, B)")


def symeig(input, eigenvectors=False, upper=True, *, out=None):
    """Removed from torch: raises torch's message (use ``torch.linalg.eigh``)."""
    raise RuntimeError(
        _REMOVED + "The default behavior has changed from using the upper triangular portion "
        "of the matrix by default to using the lower triangular portion.\n\nL, _ = "
        "torch.symeig(A, upper=upper) should be replaced with:\nL = torch.linalg.eigvalsh(A, "
        "UPLO='U' if upper else 'L')\n\nand\n\nL, V = torch.symeig(A, eigenvectors=True) "
        "should be replaced with:\nL, V = torch.linalg.eigh(A, UPLO='U' if upper else 'L')")


def _reinforce(self, reward):
    raise RuntimeError(
        "reinforce() was removed.\nUse torch.distributions instead.\nSee "
        "https://pytorch.org/docs/main/distributions.html")


# ----- memory --------------------------------------------------------------------------
def _dim_order(self, *, ambiguity_check=False):
    """The dimensions from outermost to innermost in memory (by decreasing stride)."""
    strides, sizes = self.stride(), tuple(self.shape)
    if ambiguity_check is True or isinstance(ambiguity_check, list):
        if isinstance(ambiguity_check, list):
            raise NotImplementedError("Tensor.dim_order(ambiguity_check=[memory formats]) is "
                                      "not implemented in ember")
        if any(a == b for a, b in zip(strides, strides[1:])) or 1 in sizes:
            raise RuntimeError("The tensor does not have unique dim order, or cannot map to "
                               "exact one of the given memory formats.")
    return tuple(sorted(range(self.ndim), key=lambda d: -strides[d]))


def _is_set_to(self, tensor):
    """True when both tensors are the same view of the same memory."""
    a, b = self._data, tensor._data
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype)


def _set_(self, source=None, storage_offset=0, size=None, stride=None):
    """Make ``self`` share ``source``'s memory (a tensor or an untyped storage), or
    become empty."""
    check_inplace(self)
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        if isinstance(source, Tensor):
            m.alias(self, source)  # a capture: ``self`` is ``source``'s graph value
        else:
            m.unrecordable("set_ to a storage or to nothing")
    if source is None:
        self._data = self._data[:0].reshape(0).copy()
    elif isinstance(source, Tensor):
        if source.dtype != self.dtype:
            raise RuntimeError(f"Could not set tensor of type {source.dtype} to a tensor of "
                               f"type {self.dtype}")
        self._data = source._data
    else:
        from ember.storage import UntypedStorage
        if not isinstance(source, UntypedStorage):
            raise TypeError(f"set_(): expected a Tensor or UntypedStorage, got "
                            f"{type(source).__name__}")
        itemsize = self._data.itemsize
        size = tuple(size) if size is not None else (source.nbytes() // itemsize,)
        if stride is None:
            stride = tuple(int(np.prod(size[i + 1:])) for i in range(len(size)))
        flat = source._bytes.view(self._data.dtype)
        self._data = np.lib.stride_tricks.as_strided(
            flat[storage_offset:], size, tuple(s * itemsize for s in stride))
    self._vc[0] += 1
    return self


def _map2_(self, x, y, callable):
    """``self[i] = callable(self[i], x[i], y[i])`` elementwise, with ``x`` and ``y``
    broadcast to ``self`` (CPU tensors, a Python callable)."""
    a = self._data
    xs = np.broadcast_to(x._data, a.shape)
    ys = np.broadcast_to(y._data, a.shape)
    for idx in np.ndindex(a.shape):
        a[idx] = callable(a[idx].item(), xs[idx].item(), ys[idx].item())
    self._vc[0] += 1
    return self


def _module_load(self, other, assign=False):
    """How ``load_state_dict`` turns ``other`` into the value swapped in for ``self``:
    ``other.detach()`` with ``assign``, else ``self.copy_(other).detach()``."""
    if assign:
        return other.detach()
    return self.copy_(other).detach()


def _resize(self, *sizes):
    warnings.warn("non-inplace resize is deprecated", stacklevel=2)
    if len(sizes) == 1 and not isinstance(sizes[0], int):
        sizes = tuple(sizes[0])
    return self.reshape(sizes)


def _resize_as(self, tensor):
    warnings.warn("non-inplace resize_as is deprecated", stacklevel=2)
    return self.reshape(tensor.shape)


def _chalf(self, memory_format=None):
    """``self.to(torch.complex32)``: complex numbers with float16 parts."""
    return self.to(ember.complex32, memory_format=memory_format)


def _const_data_ptr(self):
    return self.data_ptr()


def _untyped_storage(self):
    from ember.storage import UntypedStorage
    return UntypedStorage._of(self)


def _grad_dtype(self):
    """The dtype a gradient of this tensor has (its own: ember does not let a leaf
    accumulate gradients of another dtype)."""
    return self.dtype


# ----- sparse accessors on a dense tensor ------------------------------------------------
def _needs_sparse(name, what="sparse coordinate tensor layout"):
    def method(self, *args, **kwargs):
        raise RuntimeError(f"{name} expected {what} but got Strided")
    method.__name__ = name
    method.__doc__ = f"Sparse tensors only: a dense tensor raises, as in torch ({name})."
    return method


def _sparse_dim(self):
    return 0


def _dense_dim(self):
    return self.ndim


def _to_sparse_coo(self):
    return self.to_sparse()


def _sparse_mask(self, mask):
    """The values of ``self`` at the indices of the sparse ``mask``, as a sparse tensor."""
    if not mask.is_sparse:
        raise RuntimeError("sparse_mask expects mask to be sparse")
    if tuple(mask.shape) != tuple(self.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask.shape)}")
    if mask.device != self.device:
        raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                           f"two devices, {self.device} and {mask.device}!")
    m = mask.coalesce()
    idx = m.indices()
    if self.requires_grad:  # differentiable: the gradient is read at the mask's elements
        from ember.ops import sparse_ops
        return sparse_ops.pack_values(sparse_ops.gather_values(self, m._pattern), m._pattern)
    values = _make(self._data[tuple(idx._data)].copy())
    return ember.sparse_coo_tensor(idx, values, tuple(self.shape), is_coalesced=True)


_METHODS = {
    "adjoint": adjoint, "as_strided_": as_strided_, "conj_physical_": conj_physical_,
    "bincount": _ops.bincount, "corrcoef": _ops.corrcoef, "cov": _ops.cov,
    "diagflat": _ops.diagflat, "dist": _ops.dist, "frexp": _ops.frexp, "gcd": _ops.gcd,
    "gcd_": gcd_, "lcm": _ops.lcm, "lcm_": lcm_, "heaviside": _ops.heaviside,
    "heaviside_": inplace_method(_ops.heaviside), "histc": _ops.histc, "ldexp": _ops.ldexp,
    "ldexp_": ldexp_, "nextafter": _ops.nextafter, "nextafter_": inplace_method(_ops.nextafter),
    "renorm": _ops.renorm, "renorm_": inplace_method(_ops.renorm),
    "float_power_": _float_power_, "hardshrink": _F.hardshrink, "prelu": _F.prelu,
    "unsafe_chunk": _ops.unsafe_chunk, "unsafe_split": _ops.unsafe_split,
    "unsafe_split_with_sizes": unsafe_split_with_sizes, "is_distributed": is_distributed,
    "eig": eig, "lstsq": lstsq, "solve": solve, "symeig": symeig, "reinforce": _reinforce,
    "dim_order": _dim_order, "is_set_to": _is_set_to, "set_": _set_, "map2_": _map2_,
    "module_load": _module_load, "resize": _resize, "resize_as": _resize_as,
    "const_data_ptr": _const_data_ptr, "chalf": _chalf, "untyped_storage": _untyped_storage,
    "indices": _needs_sparse("indices"), "values": _needs_sparse("values",
                                                                 "sparse tensor layout"),
    "coalesce": _needs_sparse("coalesce"), "is_coalesced": _needs_sparse("is_coalesced"),
    "sparse_dim": _sparse_dim, "dense_dim": _dense_dim, "to_sparse_coo": _to_sparse_coo,
    "sparse_mask": _sparse_mask,
}
for _name, _fn in _METHODS.items():
    if not hasattr(Tensor, _name):  # a sparse subclass or another family may define it
        setattr(Tensor, _name, _fn)


def _dlpack(self, **kwargs):
    if self._requires_grad:
        raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
    return self._data.__dlpack__(**kwargs)


def _dlpack_device(self):
    return self._data.__dlpack_device__()


if not hasattr(Tensor, "__dlpack__"):  # DLPack export: torch.from_dlpack(ember_tensor)
    Tensor.__dlpack__ = _dlpack
    Tensor.__dlpack_device__ = _dlpack_device
if not hasattr(Tensor, "grad_dtype"):
    Tensor.grad_dtype = property(_grad_dtype)
