"""The backend layer: the only place that knows which array library backs a device.

``cpu`` tensors hold NumPy arrays and ``cuda`` tensors hold CuPy arrays; code above
this layer asks :func:`array_module` for the module of the array at hand and writes
its forward once for both (Chainer's ``get_array_module`` idea).
"""
import builtins

import numpy as np

from ember.backend import allocator as _allocator
from ember.backend import meta as _meta
from ember.backend._frozen import Frozen
from ember.backend.dtypes import FROM_NP, from_numpy_dtype, to_dtype  # noqa: F401

# keep a step's freed memory in the process (glibc mallopt, once; EMBER_MALLOPT=0: off)
_allocator.tune_on_import()

__all__ = ["device", "array_module", "module_for", "to_device", "cuda_available", "np",
           "is_gpu_array"]


class device(Frozen):
    """A device a tensor lives on: ``device('cpu')``, ``device('cuda')``, ``device('cuda', 1)``.

    Immutable, as in torch."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            self._set(type=type.type, index=type.index)
            return
        type, index = _parse_device(type, index)
        self._set(type=type, index=index)

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        # as torch: a device equals only a device (``device('cpu') == 'cpu'`` is False)
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __enter__(self):
        from ember import _factory
        _DEVICE_STACK.append(_factory._default_device[0])
        _factory._default_device[0] = self
        return self

    def __exit__(self, *exc):
        from ember import _factory
        _factory._default_device[0] = _DEVICE_STACK.pop()
        return False

    def __reduce__(self):
        return (device, (self.type, self.index))


# the device types torch's parser knows, in the order its error message lists them;
# ember computes on "cpu" and "cuda" and holds shapes without data on "meta"; the
# others name devices (for comparisons, state dicts, `map_location`) and raise when
# asked to hold data
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                "privateuseone")


def _parse_device(type, index):
    """``(type, index)`` of ``device(type, index)``, checked as torch checks them."""
    if isinstance(type, int) and not isinstance(type, bool):
        # a bare index names a device of the accelerator, ember's "cuda"
        type, index = "cuda", type
    elif not isinstance(type, str):
        raise TypeError("device() received an invalid combination of arguments - got "
                        f"({builtins.type(type).__name__}), but expected one of: "
                        "(torch.device device), (str type, int index = -1)")
    if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
        raise TypeError("device(): argument 'index' (position 2) must be int, not "
                        f"{builtins.type(index).__name__}")
    if not type:
        raise RuntimeError("Device string must not be empty")
    name, colon, idx = type.partition(":")
    if colon:
        # the index is plain decimal digits without a sign or leading zeros
        if not (idx.isdigit() and idx.isascii() and (idx == "0" or idx[0] != "0")):
            raise RuntimeError(f"Invalid device string: '{type}'")
        if index is not None:
            raise RuntimeError("type (string) must not include an index because index was "
                               f"passed explicitly: {type}")
        index = int(idx)
    elif not name.isalnum():
        raise RuntimeError(f"Invalid device string: '{type}'")
    if name not in DEVICE_TYPES:
        raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start "
                           f"of device string: {name}")
    if index is not None and index < 0:
        raise RuntimeError("Device index must not be negative")
    return name, index


CPU = device("cpu")
META = device("meta")
_DEVICE_STACK = []  # default devices saved by `with ember.device(...)` blocks
_cupy = [None]


def _load_cupy():
    if _cupy[0] is None:
        try:
            import cupy
        except ImportError:
            raise RuntimeError(
                "ember's 'cuda' device is backed by CuPy, which is not installed. "
                "Install it with `pip install -e '.[cuda]'` (or a cupy-cudaXXx wheel "
                "matching your CUDA toolkit).") from None
        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                raise RuntimeError
        except Exception:
            raise RuntimeError(
                "CuPy is installed but found no CUDA GPU; use device 'cpu'.") from None
        _cupy[0] = cupy
    return _cupy[0]


def cuda_available():
    """True if CuPy is installed and sees at least one GPU."""
    try:
        _load_cupy()
        return True
    except RuntimeError:
        return False


def cuda_device_count():
    """Number of GPUs CuPy sees (0 without CuPy)."""
    return _load_cupy().cuda.runtime.getDeviceCount() if cuda_available() else 0


def array_module(array):
    """NumPy or CuPy, whichever owns ``array`` (for a meta placeholder, NumPy's functions
    returning placeholders)."""
    if type(array) is np.ndarray:
        return np
    if type(array) is _meta.MetaArray:
        return _meta.namespace
    cp = _cupy[0]
    if cp is not None and isinstance(array, cp.ndarray):
        return cp
    return np


def is_gpu_array(array):
    """True for a CuPy array (a ``cuda`` tensor's data): code with a NumPy-only path
    (``where=`` arguments, host-built constants, compiled kernels) takes its portable
    path instead."""
    cp = _cupy[0]
    return cp is not None and isinstance(array, cp.ndarray)


def module_for(dev):
    """The array module that backs device ``dev``."""
    if dev is None or dev.type == "cpu":
        return np
    if dev.type == "cuda":
        return _load_cupy()
    if dev.type == "meta":
        return _meta.namespace
    raise RuntimeError(f"ember cannot allocate on device {dev}: it computes on 'cpu' "
                       "(NumPy) and 'cuda' (CuPy) tensors only")


def device_of(array):
    """The ember device an array lives on."""
    if type(array) is np.ndarray:
        return CPU
    if type(array) is _meta.MetaArray:
        return META
    cp = _cupy[0]
    if cp is not None and isinstance(array, cp.ndarray):
        return device("cuda", array.device.id)
    return CPU


def to_device(array, dev):
    """Copy ``array`` to device ``dev`` (a no-op when it is already there)."""
    if dev.type == "meta":
        return _meta.as_meta(array)
    if dev.type == "cpu":
        if type(array) is np.ndarray:
            return array
        return array.get()
    cp = module_for(dev)
    with cp.cuda.Device(dev.index or 0):
        return cp.asarray(array)


def as_device(d):
    """Normalise a device argument: None, a string, an int or a device."""
    if d is None or type(d) is device:
        return d
    return device(d)
