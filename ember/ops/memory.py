"""Allocation and storage ops OpInfo lists: ``empty_permuted``,
``Tensor.new_empty_strided``, ``Tensor.resize_``/``resize_as_`` and ``hash_tensor``.
None of them is differentiable (nor in PyTorch)."""
import numpy as np

from ember._factory import _new_like, empty, empty_strided
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.backend import array_module
from ember.ops._util import wrap_dims

__all__ = ["empty_permuted", "hash_tensor", "resize_as_"]


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """An uninitialised tensor of ``size`` whose memory is laid out in the dim order
    ``physical_layout`` (outermost first): ``empty_permuted((2, 3, 4), (0, 2, 1))``
    has strides ``(12, 1, 3)``."""
    size = tuple(size)
    order = tuple(physical_layout)
    if sorted(order) != list(range(len(size))):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(size)} is not equal to "
                           f"len(physical_layout) = {len(order)}"
                           if len(order) != len(size) else
                           f"physical_layout {list(order)} is not a permutation of the dims")
    phys = empty(tuple(size[d] for d in order), dtype=dtype, device=device)
    inverse = tuple(int(i) for i in np.argsort(order))
    res = _make(phys._data.transpose(inverse), False)
    return res.requires_grad_() if requires_grad else res


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None,
                       requires_grad=False, pin_memory=False):
    """An uninitialised tensor of ``size`` with this tensor's dtype and device (ember
    allocates it contiguously, as its ``empty_strided`` does)."""
    if len(tuple(size)) != len(tuple(stride)):
        raise RuntimeError("mismatch in length of strides and shape")
    dt, dev = _new_like(self, dtype, device)
    return empty_strided(tuple(size), tuple(stride), dtype=dt, device=dev,
                         requires_grad=requires_grad)


def _resize_(self, *sizes, memory_format=None):
    """Give this tensor the shape ``sizes`` in place, keeping its first elements (in
    memory order); new elements are uninitialised."""
    size = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else \
        tuple(sizes)
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: "
                           f"{list(size)}")
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if tuple(self.shape) == size:
        return self
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        m.unrecordable("resize_ (a new shape and new memory in place)")
    xp = array_module(self._data)
    new = xp.empty(size, dtype=self._data.dtype)
    k = min(new.size, self._data.size)
    new.reshape(-1)[:k] = self._data.reshape(-1)[:k]
    self._data = new
    self._vc[0] += 1
    return self


def resize_as_(input, the_template, *, memory_format=None):
    """Resize ``input`` in place to ``the_template``'s shape (see ``Tensor.resize_``)."""
    return _resize_(input, tuple(the_template.shape))


def hash_tensor(input, dim=None, *, keepdim=False, mode=0, out=None):
    """A uint64 hash of ``input``'s elements over ``dim`` (all when None): the bitwise
    xor of the elements upcast to 64 bits (float64 or int64) and read as uint64."""
    if mode != 0:
        raise RuntimeError(f"hash_tensor only supports mode=0 (xor reduction), got {mode}")
    if out is None and _mode_active[0] and (m := _mode_recorder()) is not None:
        # a whole call in a capture: NumPy computes it on the bits, not through ops
        return m.composite("hash_tensor", hash_tensor, (input, dim),
                           {"keepdim": keepdim, "mode": mode})
    x = input._data
    xp = array_module(x)
    # (bfloat16, NumPy kind "V", is a float too: it widens to float64, not int64)
    wide = x.astype(np.float64 if x.dtype.kind == "f" or x.dtype.name == "bfloat16"
                    else np.int64)
    bits = wide.view(np.uint64)
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        axes = tuple(range(x.ndim))
    else:
        axes = wrap_dims(dim, max(x.ndim, 1)) if x.ndim else ()
    res = xp.bitwise_xor.reduce(bits, axis=axes, keepdims=keepdim) if axes else \
        (bits.reshape((1,) * x.ndim) if keepdim and not x.ndim else bits.copy())
    res = _make(xp.asarray(res, dtype=np.uint64), False)
    if out is not None:
        from ember.ops._util import write_out
        return write_out(res, out)
    return res


def _bind():
    Tensor.new_empty_strided = _new_empty_strided
    Tensor.resize_ = _resize_
    Tensor.resize_as_ = resize_as_
    Tensor.hash_tensor = hash_tensor


_bind()
