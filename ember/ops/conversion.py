"""Copies and conversions: ``to`` (dtype and device), ``clone``, ``contiguous``, and the
writes ``copy_``, ``fill_``, ``zero_``."""
import numpy as np

from ember import backend
from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.backend import complex32 as _c32
from ember.backend import dtypes as _dt
from ember.backend._frozen import Frozen
from ember.ops import _batch, _jvp
from ember.ops._overlap import refuse_partial_overlap
from ember.ops._util import checked_fill

__all__ = ["clone", "fill", "fill_", "zero_", "memory_format", "contiguous_format",
           "preserve_format", "channels_last", "channels_last_3d"]


class memory_format(Frozen):
    """How a tensor's elements are laid out in memory (``ember.contiguous_format``,
    ``channels_last``, ...). Values never depend on it; ``contiguous``, ``to`` and
    ``clone`` accept it and ``is_contiguous`` checks it. Immutable."""

    __slots__ = ("name",)

    def __init__(self, name):
        self._set(name=name)

    def __repr__(self):
        return "ember." + self.name

    def __reduce__(self):
        return self.name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
_CHANNELS_LAST = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def _channels_last_perm(fmt, ndim):
    rank, perm = _CHANNELS_LAST[fmt]
    if ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    return perm


def _in_layout(a, fmt):
    """``a`` copied into the layout ``fmt`` (a NumPy/CuPy view with those strides)."""
    xp = backend.array_module(a)
    if fmt in _CHANNELS_LAST:
        perm = _channels_last_perm(fmt, a.ndim)
        inv = tuple(int(i) for i in np.argsort(perm))
        return xp.ascontiguousarray(a.transpose(perm)).transpose(inv)
    return xp.ascontiguousarray(a)


def _has_layout(a, fmt):
    if fmt in _CHANNELS_LAST:
        rank, perm = _CHANNELS_LAST[fmt]
        return a.ndim == rank and a.transpose(perm).flags.c_contiguous
    return a.flags.c_contiguous


def cast(x, np_dtype, copy=True):
    """``x.astype(np_dtype)`` with PyTorch's warning when complex values lose their
    imaginary parts (NumPy's ComplexWarning is not one a PyTorch program filters)."""
    np_dtype = np.dtype(np_dtype)
    if _c32.is_c32(x):
        if np_dtype == x.dtype:
            return x.copy() if copy else x
        x = _c32.to_c64(x)  # exact; then as from complex64
    if np_dtype.names:  # to complex32: each part rounded once to float16
        return _c32.from_complex(x)
    if x.dtype.kind == "c" and np_dtype.kind != "c":
        import warnings
        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=4)
        x = x.real
    x = _dt.through_float32(x, np_dtype)  # float64 rounds twice, as in PyTorch
    if _dt._E4M3FN is not None and np_dtype == _dt._E4M3FN and x.dtype.kind in "fV":
        # PyTorch saturates to the largest finite value (+-448), ml_dtypes gives NaN
        with np.errstate(invalid="ignore"):
            x = np.clip(x if x.dtype.kind == "f" else x.astype(np.float32), -448, 448)
    elif _dt._E8M0 is not None and np_dtype == _dt._E8M0 and x.dtype.kind in "fiubV":
        # PyTorch keeps the rounded exponent of |x| (the format has no sign) and writes
        # zero as the smallest power, 2**-127 (the format has no zero)
        mag = np.abs(np.asarray(x, dtype=np.float32))
        out = np.array(mag.astype(np_dtype), copy=True)
        out.view(np.uint8)[mag == 0] = 0
        return out
    elif np_dtype.kind == "V" and x.dtype.kind in "iub" or x.dtype.kind == "V" and \
            np_dtype.kind in "iub":
        x = x.astype(np.float64)  # ml_dtypes converts integers through float
    return x.astype(np_dtype, copy=copy)



class ToCopy(Primitive):
    """A copy with another dtype and/or device; the gradient goes back to the input's."""

    def forward(self, x, np_dtype, device):
        self.src = (x.dtype, backend.device_of(x))
        if device is not None:
            x = backend.to_device(x, device)
        if np_dtype is not None and x.dtype != np_dtype:
            return cast(x, np_dtype)
        return x.copy() if device is None else x

    def backward(self, gy):
        dt, dev = self.src
        if gy.is_complex() and dt.kind != "c" and not dt.names:
            gy = gy.real  # the gradient of a real input is real
        return gy.to(dtype=_dt.FROM_NP[dt], device=dev), None, None

    jvp = _jvp.linear(0)
    batch = _batch.elementwise
    complex32_math = True


class Clone(Primitive):
    def forward(self, x):
        return x.copy()

    def backward(self, gy):
        return gy

    jvp = _jvp.linear(0)
    batch = _batch.elementwise
    torchscript = "clone"
    complex32_math = True


class Contiguous(Primitive):
    _node_name = "CloneBackward0"

    def forward(self, x, fmt=None):
        if fmt is not None:
            return _in_layout(x, fmt)
        return np.ascontiguousarray(x) if type(x) is np.ndarray else x.copy()

    def backward(self, gy):
        return (gy,) + (None,) * (len(self._edges) - 1)

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``): ``gy`` passed on."""
        return (gy,) + (None,) * (len(self._edges) - 1)

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``): the incoming gradient passed on."""
        return [grads[0]] + [None] * (len(inputs) - 1)

    jvp = _jvp.linear(0)
    batch = _batch.elementwise
    complex32_math = True


class Fill(Primitive):
    """Every element becomes ``value``; only a tensor ``value`` receives a gradient (the
    sum of the output's), the overwritten input gets none."""
    broadcasts = True  # the value's gradient is summed to its 0-d shape by the engine
    batch = _batch.elementwise
    complex32_math = True

    def forward(self, x, value):
        xp = backend.array_module(x)
        if hasattr(value, "shape") and backend.array_module(value) is not xp:
            value = backend.to_device(value, backend.device_of(x))
        return xp.full(x.shape, _dt.through_float32(value, x.dtype), dtype=x.dtype)

    def backward(self, gy):
        return _zeros_for(self, gy), gy

    def jvp(self, tx, tv):
        return tv  # the value fills every element; the overwritten input's tangent is lost


def _zeros_for(node, gy):
    """The overwritten input's gradient: zeros (not None), as in PyTorch, so that its
    leaves get a zero ``.grad``."""
    if node._edges[0] is None:
        return None
    return _make(backend.array_module(gy._data).zeros_like(gy._data))


# PyTorch names the node by the overload: fill(Scalar), fill(Tensor), fill_(Scalar),
# fill_(Tensor), zero_
_FILLS = {key: type(name, (Fill,), {"_node_name": name, "__doc__": Fill.__doc__})
          for key, name in (((False, False), "FillBackward0"), ((False, True), "FillBackward1"),
                            ((True, False), "FillBackward2"), ((True, True), "FillBackward3"),
                            ("zero", "ZeroBackward0"))}


class Copy(Primitive):
    """``self.copy_(src)``: src broadcast to self's shape and cast to its dtype and
    device; the gradient goes back to src (summed and cast back by the engine)."""
    _node_name = "torch::autograd::CopyBackwards"
    profiler_name = "aten::copy_"
    broadcasts = True
    batch = _batch.elementwise
    complex32_math = True

    def forward(self, x, src):
        xp = backend.array_module(x)
        self.src_device = None
        if backend.array_module(src) is not xp:
            self.src_device = backend.device_of(src)
            src = backend.to_device(src, backend.device_of(x))
        return cast(xp.broadcast_to(src, x.shape), x.dtype)

    def backward(self, gy):
        return _zeros_for(self, gy), gy if self.src_device is None else gy.to(self.src_device)

    def jvp(self, tx, tsrc):
        return tsrc  # broadcast and cast to the output by forward_ad


def _fill_value(name, value):
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"{name} only supports 0-dimension value tensor but got tensor "
                               f"with {value.dim()} dimensions.")
        return value
    if isinstance(value, (bool, int, float, complex)) or (hasattr(value, "dtype")
                                                  and np.ndim(value) == 0):
        return value
    raise TypeError(f"{name}(): argument 'value' must be Number, not {type(value).__name__}")


def fill_(input, value):
    """Fill ``input`` with ``value`` (a number or a 0-d tensor) in place and return it.

    Example: ``torch.empty(2, 3).fill_(0.5)``.
    """
    from ember.ops._inplace import check_inplace, commit, write_everywhere
    check_inplace(input)
    value = _fill_value("fill_", value)
    if not isinstance(value, Tensor):
        value = checked_fill(value, input._data.dtype, input.numel())
    # (torch writes fills into memory shared by several elements: one value for all)
    return commit(input, _FILLS[True, isinstance(value, Tensor)].apply(input, value),
                  write_everywhere)


def fill(input, value):
    """A new tensor shaped and typed like ``input`` with every element ``value``."""
    value = _fill_value("fill", value)
    if not isinstance(value, Tensor):
        value = checked_fill(value, input._data.dtype, input.numel())
    return _FILLS[False, isinstance(value, Tensor)].apply(input, value)


def zero_(input):
    """Fill ``input`` with zeros in place and return it (``torch.zero_(t)``, ``t.zero_()``)."""
    from ember.ops._inplace import check_inplace, commit, write_everywhere
    check_inplace(input)
    return commit(input, _FILLS["zero"].apply(input, 0), write_everywhere)


def copy_(self, src, non_blocking=False):
    """Copy ``src`` into ``self`` in place (broadcast to ``self``'s shape, cast to its
    dtype and device) and return ``self``; gradients flow to ``src``.

    Example: ``w.data.copy_(torch.ones(3))`` or ``ema.copy_(param)`` under ``no_grad``.
    """
    from ember.ops._inplace import check_inplace, check_writes, commit
    if not isinstance(src, Tensor):
        if isinstance(src, (bool, int, float)):
            return fill_(self, src)  # torch accepts a Python number here too
        raise TypeError(f"copy_(): argument 'src' (position 1) must be Tensor, not "
                        f"{type(src).__name__}")
    check_inplace(self)
    check_writes((self,), (src,))
    if getattr(self._data, "base", None) is not None or \
            getattr(src._data, "base", None) is not None:
        # (two arrays that are no views share no memory, or are one array)
        refuse_partial_overlap(self, (src,))
    return commit(self, Copy.apply(self, src))


def clone(input, *, memory_format=None):
    """A copy of ``input`` with its own memory; gradients flow back to ``input``.
    ``memory_format=channels_last`` lays the copy out channels-last; otherwise ember's
    copies are row-major (PyTorch's preserve_format may keep a transposed layout)."""
    if memory_format in _CHANNELS_LAST:
        _channels_last_perm(memory_format, input._data.ndim)
        return Contiguous.apply(input, memory_format)
    return Clone.apply(input)


def _parse_to(args, kwargs):
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for i, a in enumerate(args):
        if a is None and i < 2:
            continue  # torch's to(device=None, dtype=None, ...) spelled positionally
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
    fmt = kwargs.pop("memory_format", None)
    if fmt in _CHANNELS_LAST:
        return contiguous(to(self, *args, **kwargs), memory_format=fmt)
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
    """``self`` if row-major contiguous, else a contiguous copy (with
    ``memory_format=channels_last``: laid out channels-last)."""
    d = self._data
    if memory_format in _CHANNELS_LAST:
        _channels_last_perm(memory_format, d.ndim)
        return self if _has_layout(d, memory_format) else Contiguous.apply(self, memory_format)
    if d.flags.c_contiguous:
        return self
    if memory_format is preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return Contiguous.apply(self)


def is_contiguous(self, memory_format=None):
    """True if the elements lie in row-major order without gaps (or in the order of
    ``memory_format``)."""
    return _has_layout(self._data, memory_format)


def type_as(self, other):
    """``self.to(other.dtype)``."""
    return to(self, other.dtype)


Tensor.to = to
Tensor.cpu = cpu
Tensor.cuda = cuda
Tensor.clone = clone
Tensor.contiguous = contiguous
Tensor.is_contiguous = is_contiguous
Tensor.type_as = type_as
Tensor.fill_ = fill_
Tensor.zero_ = zero_
Tensor.copy_ = copy_
for _name, _d in (("float", _dt.float32), ("double", _dt.float64), ("half", _dt.float16),
                  ("long", _dt.int64), ("int", _dt.int32), ("short", _dt.int16),
                  ("char", _dt.int8), ("byte", _dt.uint8), ("bool", _dt.bool),
                  ("bfloat16", _dt.bfloat16), ("cfloat", _dt.complex64),
                  ("cdouble", _dt.complex128)):
    setattr(Tensor, _name, _cast(_d))
