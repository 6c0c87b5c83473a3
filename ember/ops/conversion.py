"""Copies and conversions: ``to`` (dtype and device), ``clone``, ``contiguous``."""
import numpy as np

from ember import backend
from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.backend import dtypes as _dt

__all__ = ["clone"]


class ToCopy(Primitive):
    """A copy with another dtype and/or device; the gradient goes back to the input's."""

    def forward(self, x, np_dtype, device):
        self.src = (x.dtype, backend.device_of(x))
        if device is not None:
            x = backend.to_device(x, device)
        if np_dtype is not None and x.dtype != np_dtype:
            return x.astype(np_dtype)
        return x.copy() if device is None else x

    def backward(self, gy):
        dt, dev = self.src
        return gy.to(dtype=_dt.FROM_NP[dt], device=dev), None, None


class Clone(Primitive):
    def forward(self, x):
        return x.copy()

    def backward(self, gy):
        return gy


class Contiguous(Primitive):
    _node_name = "CloneBackward0"

    def forward(self, x):
        return np.ascontiguousarray(x) if type(x) is np.ndarray else x.copy()

    def backward(self, gy):
        return gy


def clone(input, *, memory_format=None):
    """A copy of ``input`` with its own memory; gradients flow back to ``input``."""
    return Clone.apply(input)


def _parse_to(args, kwargs):
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif isinstance(a, (_dt.dtype, type)) or (hasattr(a, "dtype") and not isinstance(
                a, (str, backend.device))) or isinstance(a, np.dtype):
            dtype = a
        elif isinstance(a, (str, backend.device, int)) and not isinstance(a, bool):
            device = a
        elif isinstance(a, bool):
            copy = a if dtype is not None or device is not None else copy
        else:
            raise TypeError(f"to() received an invalid argument {a!r}")
    return _dt.to_dtype(dtype), backend.as_device(device), copy


def to(self, *args, **kwargs):
    """Return the tensor with another dtype and/or device (``self`` if nothing changes)."""
    dtype, device, copy = _parse_to(args, kwargs)
    np_dtype = dtype.np if dtype is not None and dtype.np != self._data.dtype else None
    if device is not None:
        cur = self.device
        if device.type == cur.type and (device.index is None or device.index == (cur.index or 0)
                                        or cur.type == "cpu"):
            device = None
    if np_dtype is None and device is None and not copy:
        return self
    return ToCopy.apply(self, np_dtype, device)


def _cast(dt):
    def method(self, memory_format=None):
        return to(self, dt)
    method.__doc__ = f"``self.to({dt})``."
    return method


def cpu(self, memory_format=None):
    """A copy on the cpu (``self`` if already there)."""
    return to(self, "cpu")


def cuda(self, device=None, non_blocking=False, memory_format=None):
    """A copy on the GPU (CuPy); raises a clear error without CuPy or a GPU."""
    dev = backend.device("cuda", device if isinstance(device, int) else None) \
        if not isinstance(device, (str, backend.device)) else backend.as_device(device)
    backend.module_for(dev)
    return to(self, dev)


def contiguous(self, memory_format=None):
    """``self`` if row-major contiguous, else a contiguous copy."""
    d = self._data
    if d.flags.c_contiguous:
        return self
    return Contiguous.apply(self)


def type_as(self, other):
    """``self.to(other.dtype)``."""
    return to(self, other.dtype)


Tensor.to = to
Tensor.cpu = cpu
Tensor.cuda = cuda
Tensor.clone = clone
Tensor.contiguous = contiguous
Tensor.type_as = type_as
for _name, _d in (("float", _dt.float32), ("double", _dt.float64), ("half", _dt.float16),
                  ("long", _dt.int64), ("int", _dt.int32), ("short", _dt.int16),
                  ("char", _dt.int8), ("byte", _dt.uint8), ("bool", _dt.bool)):
    setattr(Tensor, _name, _cast(_d))
