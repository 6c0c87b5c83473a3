"""``Tensor.view(dtype)``: the same bytes read as another dtype.

The result shares memory and the version counter with the input (a write through
either shows in the other), as PyTorch's: it is not a differentiable view, so it has
no ``grad_fn``, does not require grad and has no ``_base``. When the element sizes
differ the last dim is scaled by their ratio, under PyTorch's conditions (a dim
to scale, unit stride along it, and for a wider dtype a size, storage offset and
strides that the ratio divides).
"""
import builtins

import numpy as np

from ember._tensor import _make
from ember.backend import dtypes as _dt
from ember.ops._util import type_name


def _target(dtype):
    """The ember dtype ``view`` was given (Python ``float``/``int`` are float64/int64 there,
    whatever the default dtype, as in PyTorch's argument parsing)."""
    if dtype is builtins.float:
        return _dt.float64
    if dtype is builtins.int:
        return _dt.int64
    # isinstance: the ml_dtypes dtypes are a subclass until their first use loads ml_dtypes
    if isinstance(dtype, _dt.dtype) or dtype in (builtins.bool, builtins.complex) or \
            isinstance(dtype, np.dtype):
        return _dt.to_dtype(dtype)
    raise TypeError(f"view() received an invalid combination of arguments - got "
                    f"({type(dtype).__name__}), but expected one of:\n * (torch.dtype dtype)\n"
                    f" * (tuple of ints size)")


def _byte_offset(arr):
    """Bytes from the start of the memory block under ``arr`` to its first element."""
    if type(arr) is not np.ndarray:
        return 0  # a device array: its own allocation (CuPy views keep their pointer)
    from ember.storage import _memory_root
    root = _memory_root(arr)
    return arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]


def _strides(arr):
    """Strides in elements as PyTorch reports them: an empty array's are the row-major ones
    (NumPy's may be 0 there)."""
    if arr.size == 0 and arr.flags.c_contiguous:
        out, step = [], 1
        for n in reversed(arr.shape):
            out.append(step)
            step *= max(n, 1)
        return tuple(reversed(out))
    return tuple(s // arr.itemsize for s in arr.strides)


def _check(x, new):
    """PyTorch's conditions for reading ``x`` as ``new`` when the element sizes differ,
    checked in PyTorch's order (so that the same message is given first)."""
    arr = x._data
    old_size, new_size = arr.itemsize, new.itemsize
    what = f"to view {type_name(arr.dtype)} as {type_name(new.np)} (different element sizes)"
    if arr.ndim == 0:
        raise RuntimeError(f"self.dim() cannot be 0 {what}")
    strides = _strides(arr)

    def unit_last():
        if strides[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")

    if new_size < old_size:
        unit_last()
        return
    ratio = new_size // old_size
    if arr.shape[-1] % ratio:
        raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {what}, but got "
                           f"{arr.shape[-1]}")
    offset = _byte_offset(arr) // old_size
    if offset % ratio:
        raise RuntimeError(f"self.storage_offset() must be divisible by {ratio} {what}, "
                           f"but got {offset}")
    unit_last()
    for d, s in enumerate(strides[:-1]):
        if s % ratio:
            raise RuntimeError(f"self.stride({d}) must be divisible by {ratio} {what}, "
                               f"but got {s}")


def view_dtype(x, dtype):
    """``x.view(dtype)``: ``x``'s bytes read as ``dtype``, sharing memory with ``x``.

    Example: ``ember.tensor([1.0]).view(ember.int32)`` is ``tensor([1065353216])``.
    """
    new = _target(dtype)
    arr = x._data
    if new.np == arr.dtype:
        data = arr.view()
    else:
        if arr.itemsize != new.itemsize:
            _check(x, new)
        # NumPy (and CuPy) rescale the last dim when it is contiguous, which _check
        # made sure of; the other byte strides stay as they are
        data = arr.view(new.np)
    t = _make(data, False)
    t._vc = x._vc  # writes through either tensor bump the same version
    return t
