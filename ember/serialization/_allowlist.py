"""What the restricted unpickler may build: the allowlist of globals, each callable's
builder (argument types checked, allocation charged to the load's budget), the tensor
rebuild functions, and the registry that ``add_safe_globals`` extends."""
import codecs
import collections
import pickle

import numpy as np

from ember.backend._frozen import Frozen
from ember.serialization._format import DTYPE_OF_STORAGE, CheckpointError

_TEXT_ENCODINGS = {"latin1", "latin-1", "iso-8859-1", "iso8859-1", "utf-8", "utf8", "ascii"}
_MAX_DIMS = 64


class _StorageType(Frozen):
    """``torch.FloatStorage`` and friends as a checkpoint names them: just a dtype.
    Immutable: one object per storage type serves every load."""

    __slots__ = ("dtype", "name")

    def __init__(self, name, dtype):
        self._set(name=name, dtype=dtype)

    def __repr__(self):
        return f"torch.{self.name}"


class _LoadedStorage:
    """A storage read from the archive: its array and its saved location."""

    __slots__ = ("array", "location")

    def __init__(self, array, location):
        self.array, self.location = array, location


def _refuse(msg):
    return pickle.UnpicklingError("Weights only load failed: " + msg)


# ----- tensor rebuilds ---------------------------------------------------------------------
def _ints(v, what):
    if not isinstance(v, (tuple, list)):
        raise CheckpointError(f"checkpoint damaged: a tensor's {what} is a "
                              f"{type(v).__name__}, not a sequence of ints")
    out = tuple(v)
    if len(out) > _MAX_DIMS or any(type(x) is not int for x in out):
        raise CheckpointError(f"checkpoint damaged: a tensor's {what} {out!r:.80} is not a "
                              f"sequence of at most {_MAX_DIMS} ints")
    return out


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    from ember._tensor import _make
    if type(storage) is not _LoadedStorage:
        raise CheckpointError(f"checkpoint damaged: a tensor's storage is a "
                              f"{type(storage).__name__}, not a storage record")
    arr = storage.array
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if type(storage_offset) is not int or len(size) != len(stride) or \
            type(requires_grad) not in (bool, int):
        raise CheckpointError("checkpoint damaged: a tensor's offset, size, stride or "
                              "requires_grad has the wrong type")
    isz = arr.itemsize
    empty = any(s == 0 for s in size)
    extent = storage_offset + sum((s - 1) * st for s, st in zip(size, stride)) + 1 \
        if not empty else storage_offset
    if storage_offset < 0 or extent > arr.size or any(st < 0 for st in stride) or \
            any(s < 0 for s in size):
        raise CheckpointError(f"checkpoint damaged: a tensor of size {list(size)} at offset "
                              f"{storage_offset} does not fit its storage of {arr.size} "
                              "elements")
    src = arr[storage_offset:] if arr.size else arr
    plain = arr.dtype.kind in "biufc" and arr.dtype.itemsize > 1 or arr.dtype.kind in "biu"
    # as_strided goes through __array_interface__, which loses ml_dtypes' dtypes: stride
    # unsigned integers of the same width and view the result back
    from ember.backend import array_module  # the storage may be on a GPU (a cuda location)
    view = array_module(arr).lib.stride_tricks.as_strided(
        src if plain else src.view(f"u{isz}"), size, tuple(st * isz for st in stride))
    if not plain:
        view = view.view(arr.dtype)
    t = _make(view, False)
    if requires_grad and (t.is_floating_point() or t.is_complex()):
        t.requires_grad_(True)
    return t


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       dtype, metadata=None):
    from ember.backend import dtypes as _dt
    if type(storage) is not _LoadedStorage:
        raise CheckpointError("checkpoint damaged: a tensor's storage is not a storage record")
    if type(dtype) is not _dt.dtype:
        raise CheckpointError(f"checkpoint names an unsupported dtype {dtype!r:.80}")
    arr = storage.array
    typed = arr.view(dtype.np) if arr.size else np.zeros(0, dtype.np)
    return _rebuild_tensor_v2(_LoadedStorage(typed, storage.location), storage_offset, size,
                              stride, requires_grad)


def _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad=False):
    """A tensor saved from the meta device: dtype, size and strides, no data."""
    from ember._tensor import _make
    from ember.backend import dtypes as _dt
    from ember.backend.meta import MetaArray
    if type(dtype) is not _dt.dtype:
        raise CheckpointError(f"checkpoint names an unsupported dtype {dtype!r:.80}")
    dims = [size, stride]
    if any(type(d) not in (tuple, list) or len(d) > _MAX_DIMS or
           any(type(v) is not int or v < 0 for v in d) for d in dims) or \
            len(size) != len(stride):
        raise CheckpointError("checkpoint damaged: a meta tensor's size or stride is invalid")
    extent = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    isz = np.dtype(dtype.np).itemsize
    arr = np.lib.stride_tricks.as_strided(np.zeros(max(extent, 1), dtype.np), tuple(size),
                                          tuple(s * isz for s in stride)).view(MetaArray)
    arr.flags.writeable = False
    t = _make(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad, backward_hooks, *state):
    from ember._tensor import Tensor
    from ember.nn.parameter import Parameter
    if not isinstance(data, Tensor) or type(requires_grad) not in (bool, int):
        raise CheckpointError("checkpoint damaged: a Parameter's data is not a tensor")
    return Parameter(data, bool(requires_grad) and (data.is_floating_point() or
                                                    data.is_complex()))


# ----- builders: allowlisted callables with checked arguments and charged sizes ------------
def _seq_len(v, what):
    if type(v) not in (list, tuple, set, frozenset, dict, collections.OrderedDict,
                       collections.Counter, bytes, bytearray, str):
        raise _refuse(f"{what} of a {type(v).__name__} (only built-in containers and "
                      "strings are read)")
    return len(v)


def _b_bytearray(u, args):
    if not args:
        return bytearray()
    src = args[0]
    if type(src) is int:
        if src < 0:
            raise CheckpointError("checkpoint damaged: bytearray of a negative size")
        u.charge(src, f"bytearray({src})")
        return bytearray(src)
    if type(src) is str:
        if len(args) != 2 or type(args[1]) is not str or args[1].lower() not in _TEXT_ENCODINGS:
            raise _refuse("bytearray of a string needs a text encoding (latin1 or utf-8)")
        u.charge(len(src), "bytearray")
        return bytearray(src, args[1])
    u.charge(_seq_len(src, "bytearray"), "bytearray")
    return bytearray(src)


def _b_container(kind):
    def build(u, args):
        if len(args) > 1:
            raise CheckpointError(f"checkpoint damaged: {kind.__name__} with {len(args)} "
                                  "arguments")
        if not args:
            return kind()
        u.charge(_seq_len(args[0], kind.__name__), kind.__name__)
        return kind(args[0])
    return build


def _b_complex(u, args):
    if len(args) > 2 or any(type(a) not in (int, float, str, complex) for a in args):
        raise CheckpointError("checkpoint damaged: complex() of non-numbers")
    return complex(*args)


def _b_encode(u, args):
    if not 1 <= len(args) <= 2 or type(args[0]) is not str or \
            (len(args) == 2 and (type(args[1]) is not str or
                                 args[1].lower() not in _TEXT_ENCODINGS)):
        raise _refuse("_codecs.encode is read only for a string in a text encoding "
                      "(latin1, utf-8)")
    u.charge(len(args[0]), "_codecs.encode")
    return codecs.encode(args[0], *args[1:])


def _b_size(u, args):
    from ember._tensor import Size
    if len(args) > 1:
        raise CheckpointError("checkpoint damaged: Size() with several arguments")
    dims = args[0] if args else ()
    u.charge(_seq_len(dims, "Size"), "Size")
    if type(dims) not in (list, tuple) or any(type(d) is not int for d in dims):
        raise CheckpointError("checkpoint damaged: Size() of something other than ints")
    return Size(dims)


def _b_device(u, args):
    from ember.backend import device
    if not 1 <= len(args) <= 2 or type(args[0]) not in (str, int) or \
            (len(args) == 2 and args[1] is not None and type(args[1]) is not int):
        raise CheckpointError("checkpoint damaged: device() of unexpected arguments")
    return device(*args)


def _b_dtype_by_name(u, args):
    from ember.backend import dtypes as _dt
    if len(args) != 1 or type(args[0]) is not str or args[0] not in _dt._BY_NAME:
        raise CheckpointError(f"checkpoint damaged: unknown dtype {args!r:.80}")
    return _dt._BY_NAME[args[0]]


def _b_parameter(u, args):
    from ember._tensor import Tensor
    from ember.nn.parameter import Parameter
    if not 1 <= len(args) <= 2 or not isinstance(args[0], Tensor):
        raise CheckpointError("checkpoint damaged: Parameter() of a non-tensor")
    return Parameter(*args)


def _b_function(fn):
    def build(u, args):
        return fn(*args)
    return build


# (module, name) -> (object, builder or None, creates) for the default allowlist
def _allowlist():
    from ember._tensor import Size
    from ember.backend import device
    from ember.backend import dtypes as _dt
    from ember.nn.parameter import Parameter
    od, ctr = collections.OrderedDict, collections.Counter
    rebuild = {"_rebuild_tensor_v2": _rebuild_tensor_v2, "_rebuild_tensor_v3": _rebuild_tensor_v3,
               "_rebuild_tensor": _rebuild_tensor, "_rebuild_parameter": _rebuild_parameter,
               "_rebuild_parameter_with_state": _rebuild_parameter,
               "_rebuild_meta_tensor_no_storage": _rebuild_meta_tensor_no_storage}
    table = {
        ("builtins", "bytearray"): (bytearray, _b_bytearray, True),
        ("builtins", "set"): (set, _b_container(set), True),
        # immutable, so harmless; torch refuses it, ember has always read it
        ("builtins", "frozenset"): (frozenset, _b_container(frozenset), False),
        ("builtins", "complex"): (complex, _b_complex, False),
        ("_codecs", "encode"): (codecs.encode, _b_encode, False),
        ("collections", "OrderedDict"): (od, _b_container(od), True),
        ("collections", "Counter"): (ctr, _b_container(ctr), True),
        ("torch", "Size"): (Size, _b_size, False),
        ("ember._tensor", "Size"): (Size, _b_size, False),
        ("torch", "device"): (device, _b_device, False),
        ("ember.backend", "device"): (device, _b_device, False),
        ("ember.backend.dtypes", "_dtype_by_name"): (_dt._dtype_by_name, _b_dtype_by_name,
                                                     False),
        ("torch.nn.parameter", "Parameter"): (Parameter, _b_parameter, False),
        ("torch.storage", "UntypedStorage"): (_STORAGE_TYPES["UntypedStorage"], None, False),
    }
    for name, fn in rebuild.items():
        table[("torch._utils", name)] = (fn, _b_function(fn), False)
    for name, d in _dt._BY_NAME.items():
        table[("torch", name)] = (d, None, False)
    for name in DTYPE_OF_STORAGE:
        table[("torch", name)] = (_STORAGE_TYPES[name], None, False)
    return table


_STORAGE_TYPES = {name: _StorageType(name, d) for name, d in DTYPE_OF_STORAGE.items()}
_STORAGE_TYPES["UntypedStorage"] = _StorageType("UntypedStorage", DTYPE_OF_STORAGE["ByteStorage"])
_ALLOWED = {}  # filled on first use (it needs ember's tensor modules)
_USER_SAFE = {}  # "module.name" -> object, allowed by the user for weights-only loads


def _default_allowlist():
    if not _ALLOWED:
        _ALLOWED.update(_allowlist())
    return _ALLOWED


def _user_key(obj):
    if isinstance(obj, tuple):
        if len(obj) != 2 or type(obj[1]) is not str:
            raise TypeError("add_safe_globals takes objects or (object, 'module.name') pairs")
        return obj[1], obj[0]
    return f"{obj.__module__}.{obj.__qualname__}", obj
