"""``ember.save`` / ``ember.load`` in PyTorch's own zip checkpoint format, both ways.

A checkpoint is a zip archive (stored, not compressed) holding ``data.pkl`` — a
pickle whose tensors refer to storages by key — and one record ``data/<key>`` of raw
little-endian bytes per storage, each aligned to 64 bytes, exactly as ``torch.save``
writes it. So a file either library wrote loads in the other, bit for bit.

Loading is safe by default: ``weights_only=True`` uses an unpickler that admits only
tensor rebuild functions, storages, dtypes and plain containers; any other global
raises ``pickle.UnpicklingError`` naming it, and nothing runs.
"""
import collections
import io
import os
import pickle
import struct
import uuid
import zipfile

import numpy as np

from ember._tensor import Tensor, _make
from ember.backend import dtypes as _dt
from ember.utils._atomic import atomic_write

__all__ = ["save", "load", "CheckpointError", "add_safe_globals", "safe_globals",
           "get_safe_globals", "clear_safe_globals"]

FORMAT_VERSION = 3  # the `version` record torch 2.x writes and reads
_ALIGN = 64

_STORAGE_OF = {"float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
               "int64": "LongStorage", "int32": "IntStorage", "int16": "ShortStorage",
               "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
               "complex64": "ComplexFloatStorage", "complex128": "ComplexDoubleStorage",
               "bfloat16": "BFloat16Storage"}
_DTYPE_OF_STORAGE = {v: _dt._BY_NAME[k] for k, v in _STORAGE_OF.items() if k in _dt._BY_NAME}
# dtypes torch 2.x writes as untyped (byte) storages rebuilt by _rebuild_tensor_v3
_UNTYPED = {"uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
            "float8_e5m2fnuz", "complex32"}


class CheckpointError(RuntimeError):
    """A checkpoint file is damaged; the message says which part."""


# ----- writing ---------------------------------------------------------------------------
class _Global:
    """A reference to a global by name, pickled as PyTorch's (no import of torch needed)."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle insists that a reduce function is callable
        raise TypeError(f"{self.module}.{self.name} is a placeholder for pickling")


class _StorageRef:
    __slots__ = ("key", "dtype", "numel")

    def __init__(self, key, dtype, numel):
        self.key, self.dtype, self.numel = key, dtype, numel


class _TorchPickler(pickle._Pickler):
    """Pickles ember objects as the torch objects they stand for."""

    def __init__(self, file, storages):
        super().__init__(file, protocol=2)
        self._storages = storages  # id(root array) -> (key, root array)

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            if obj.dtype.name in _UNTYPED:
                return ("storage", _Global("torch.storage", "UntypedStorage"), obj.key, "cpu",
                        obj.numel * obj.dtype.itemsize)
            return ("storage", _Global("torch", _STORAGE_OF[obj.dtype.name]), obj.key, "cpu",
                    obj.numel)
        return None

    def save_global(self, obj, name=None):
        if isinstance(obj, _Global):
            self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
            self.memoize(obj)
            return
        super().save_global(obj, name)

    dispatch = dict(pickle._Pickler.dispatch)

    def save(self, obj, save_persistent_id=True):
        if isinstance(obj, _Global):
            return self.save_global(obj)
        if isinstance(obj, Tensor):
            memo = self.memo.get(id(obj))
            if memo is not None:  # a tensor seen before (tied weights): refer to it
                return self.write(self.get(memo[0]))
            return self._save_reduce_tensor(obj)
        if isinstance(obj, _dt.dtype):
            return self.save_global(_Global("torch", obj.name))
        from ember.backend import device
        if isinstance(obj, device):
            return self.save_reduce(_Global("torch", "device"), (str(obj),), obj=obj)
        return super().save(obj, save_persistent_id)

    def _save_reduce_tensor(self, t):
        if getattr(t, "is_sparse", False) is True or getattr(t, "is_sparse_csr", False) is True:
            raise NotImplementedError("ember.save of a sparse tensor: ember writes dense tensors "
                                      "only; save tensor.to_dense() (or its indices and values)")
        # a tensor inside a graph is saved as PyTorch saves it: its values, with
        # requires_grad, loading as a leaf
        storage, offset, stride = self._storage_of(t._host())
        args = (storage, offset, tuple(t.shape), stride, t.requires_grad,
                collections.OrderedDict())
        if t.dtype.name in _UNTYPED:
            rebuild = (_Global("torch._utils", "_rebuild_tensor_v3"),
                       args + (_Global("torch", t.dtype.name),))
        else:
            rebuild = (_Global("torch._utils", "_rebuild_tensor_v2"), args)
        from ember.nn.parameter import Parameter
        if isinstance(t, Parameter):
            self.save_reduce(_Global("torch._utils", "_rebuild_parameter"),
                             (_TensorArgs(rebuild), t.requires_grad, collections.OrderedDict()),
                             obj=t)
        else:
            self.save_reduce(rebuild[0], rebuild[1], obj=t)

    def _storage_of(self, arr):
        """(storage ref, offset, stride) for an array, sharing storage with its base."""
        dt = _dt.FROM_NP[arr.dtype]
        isz = arr.itemsize
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        shareable = (root is not arr or True) and root.dtype == arr.dtype and \
            root.flags.c_contiguous and all(s >= 0 for s in arr.strides) and \
            all(s % isz == 0 for s in arr.strides)
        if shareable:
            off = arr.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            if off < 0 or off % isz:
                shareable = False
        if not shareable:
            root = np.ascontiguousarray(arr)
            off = 0
            stride = tuple(s // isz for s in root.strides) if root.ndim else ()
        else:
            stride = tuple(s // isz for s in arr.strides)
        entry = self._storages.get(id(root))
        if entry is None:
            entry = self._storages[id(root)] = (str(len(self._storages)), root)
        key = entry[0]
        return _StorageRef(key, dt, root.size), off // isz, stride


class _TensorArgs:
    """A nested tensor rebuild inside a Parameter's reduce."""

    def __init__(self, rebuild):
        self.rebuild = rebuild


def _save_tensor_args(pickler, obj):
    func, args = obj.rebuild
    pickler.save_reduce(func, args, obj=obj)


_TorchPickler.dispatch[_TensorArgs] = _save_tensor_args


def _aligned_write(zf, name, data):
    """Write a stored record whose data starts at a multiple of 64 bytes, as torch does."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    header_start = zf.fp.tell() if zf.fp.seekable() else zf.start_dir
    base = header_start + 30 + len(name.encode("utf-8"))
    pad = (-(base + 4)) % _ALIGN
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
    zf.writestr(info, data)


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save ``obj`` (tensors, state_dicts, nested containers) in PyTorch's zip format.

    ``f`` is a path or a writable binary file. The file loads in ``torch.load`` with
    ``weights_only=True``. A path is replaced atomically and durably (unlike
    ``torch.save``): a crash or a full disk leaves the old file, never a broken one.
    """
    if not _use_new_zipfile_serialization:
        raise NotImplementedError("ember writes only PyTorch's zip checkpoint format")
    storages = {}
    buf = io.BytesIO()
    _TorchPickler(buf, storages).dump(obj)
    if isinstance(f, (str, os.PathLike)):
        archive = os.path.splitext(os.path.basename(os.fspath(f)))[0] or "archive"
        # a temporary file renamed over the target: a crash never destroys the old file
        with atomic_write(f, "wb") as fh:
            _write_zip(fh, archive, buf.getvalue(), storages)
    else:
        _write_zip(f, "archive", buf.getvalue(), storages)


def _write_zip(fh, archive, pickled, storages):
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        _aligned_write(zf, f"{archive}/data.pkl", pickled)
        _aligned_write(zf, f"{archive}/.format_version", b"1")
        _aligned_write(zf, f"{archive}/.storage_alignment", str(_ALIGN).encode())
        _aligned_write(zf, f"{archive}/byteorder", b"little")
        for key, root in storages.values():
            little = root.astype(root.dtype.newbyteorder("<"), copy=False)
            # a byte view of the array, not a copy: checkpoints can be large
            data = memoryview(np.ascontiguousarray(little).reshape(-1).view(np.uint8)) \
                if little.size else b""
            _aligned_write(zf, f"{archive}/data/{key}", data)
        _aligned_write(zf, f"{archive}/version", f"{FORMAT_VERSION}\n".encode())
        _aligned_write(zf, f"{archive}/.data/serialization_id",
                       str(uuid.uuid4().int).encode())


# ----- reading ---------------------------------------------------------------------------
_SAFE_BUILTINS = {"set", "frozenset", "complex", "slice", "range", "bytearray", "int",
                  "float", "bool", "tuple", "list", "dict", "str", "bytes"}


class _StorageType:
    def __init__(self, dtype):
        self.dtype = dtype


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    arr, _ = storage
    size = tuple(size)
    stride = tuple(stride)
    isz = arr.itemsize
    extent = storage_offset + sum((s - 1) * st for s, st in zip(size, stride)) + 1 \
        if all(s > 0 for s in size) else storage_offset
    if storage_offset < 0 or extent > arr.size or any(st < 0 for st in stride):
        raise CheckpointError(f"checkpoint damaged: a tensor of size {list(size)} at offset "
                              f"{storage_offset} does not fit its storage of {arr.size} "
                              "elements")
    src = arr[storage_offset:] if arr.size else arr
    plain = arr.dtype.kind in "biufc" and arr.dtype.itemsize > 1 or arr.dtype.kind in "biu"
    # as_strided goes through __array_interface__, which loses ml_dtypes' dtypes: stride
    # unsigned integers of the same width and view the result back
    view = np.lib.stride_tricks.as_strided(src if plain else src.view(f"u{isz}"), size,
                                           tuple(st * isz for st in stride))
    if not plain:
        view = view.view(arr.dtype)
    t = _make(view, False)
    if requires_grad and (t.is_floating_point() or t.is_complex()):
        t.requires_grad_(True)
    return t


def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       dtype, metadata=None):
    arr, location = storage
    if not isinstance(dtype, _dt.dtype):
        raise CheckpointError(f"checkpoint names an unsupported dtype {dtype!r}")
    typed = arr.view(dtype.np) if arr.size else np.zeros(0, dtype.np)
    return _rebuild_tensor_v2((typed, location), storage_offset, size, stride, requires_grad)


def _rebuild_tensor(storage, storage_offset, size, stride):
    return _rebuild_tensor_v2(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad, backward_hooks, *state):
    from ember.nn.parameter import Parameter
    return Parameter(data, requires_grad)


def _torch_device(spec):
    from ember.backend import device
    d = device(spec)
    return d


_TORCH_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch.storage", "UntypedStorage"): _StorageType(_dt.uint8),
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch", "device"): _torch_device,
    ("torch", "Size"): tuple,
}
for _name, _d in _dt._BY_NAME.items():
    _TORCH_GLOBALS[("torch", _name)] = _d
for _name, _d in _DTYPE_OF_STORAGE.items():
    _TORCH_GLOBALS[("torch", _name)] = _StorageType(_d)


_USER_SAFE = {}  # (module, name) -> object, allowed by the user for weights_only loads


def _key(obj):
    if isinstance(obj, tuple):
        obj, name = obj
        return (obj.__module__, name), obj
    return (obj.__module__, obj.__qualname__), obj


def add_safe_globals(safe_globals):
    """Allow these classes or functions in ``load(..., weights_only=True)`` files.

    Only add what you trust: the unpickler will construct or call them.
    """
    for obj in safe_globals:
        key, value = _key(obj)
        _USER_SAFE[key] = value


def get_safe_globals():
    """The globals added with ``add_safe_globals``."""
    return list(_USER_SAFE.values())


def clear_safe_globals():
    """Forget every global added with ``add_safe_globals``."""
    _USER_SAFE.clear()


class safe_globals:
    """``with safe_globals([...]):`` allows those globals for weights-only loads inside."""

    def __init__(self, safe_globals):
        self.safe_globals = safe_globals

    def __enter__(self):
        self._saved = dict(_USER_SAFE)
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        _USER_SAFE.clear()
        _USER_SAFE.update(self._saved)
        return False


def _codecs_encode(s, encoding="latin1"):
    import codecs
    return codecs.encode(s, encoding)


_TORCH_GLOBALS[("_codecs", "encode")] = _codecs_encode


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive, weights_only, map_location, mmap_file):
        super().__init__(file, encoding="utf-8")
        self._archive = archive
        self._weights_only = weights_only
        self._map_location = map_location
        self._mmap = mmap_file
        self._storages = {}

    def find_class(self, module, name):
        key = (module, name)
        if key in _TORCH_GLOBALS:
            return _TORCH_GLOBALS[key]
        if key in _USER_SAFE:
            return _USER_SAFE[key]
        if module.startswith("ember.") and (module, name) in _EMBER_SAFE:
            return _EMBER_SAFE[(module, name)]()
        if module in ("builtins", "__builtin__") and name in _SAFE_BUILTINS:
            return super().find_class(module, name)
        if self._weights_only:
            raise pickle.UnpicklingError(
                f"Weights only load failed: unsupported global {module}.{name} in the "
                "checkpoint's pickle. Nothing was executed. Load with weights_only=False only "
                "if you trust the file's source.")
        if module == "torch" or module.startswith("torch."):
            raise pickle.UnpicklingError(f"the checkpoint pickles {module}.{name}, a torch "
                                         "object ember cannot rebuild; save a state_dict "
                                         "instead of the whole object")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage":
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r} in checkpoint")
        _, stype, key, location, numel = pid
        if not isinstance(stype, _StorageType):
            raise pickle.UnpicklingError(f"unsupported storage type {stype!r} in checkpoint")
        if key in self._storages:
            return self._storages[key]
        arr = self._archive.read_storage(key, stype.dtype, numel, self._mmap)
        arr = _map_location(arr, location, self._map_location)
        self._storages[key] = (arr, location)
        return self._storages[key]


def _ember_safe():
    from ember._tensor import Size
    from ember.backend import device
    from ember.backend.dtypes import _dtype_by_name
    return {("ember.backend.dtypes", "_dtype_by_name"): lambda: _dtype_by_name,
            ("ember._tensor", "Size"): lambda: Size,
            ("ember.backend", "device"): lambda: device}


class _LazySafe(dict):
    def __missing__(self, key):
        self.update(_ember_safe())
        if key in self:
            return self[key]
        raise KeyError(key)

    def __contains__(self, key):
        if not dict.__len__(self):
            self.update(_ember_safe())
        return dict.__contains__(self, key)


_EMBER_SAFE = _LazySafe()


def _map_location(arr, location, map_location):
    if map_location is None:
        return arr
    target = map_location
    if callable(map_location) and not isinstance(map_location, str):
        return arr  # storages are already on the cpu; the callable sees tensors below
    if isinstance(map_location, dict):
        target = map_location.get(location, location)
    from ember.backend import as_device, to_device
    dev = as_device(str(target) if not isinstance(target, str) else target)
    if dev.type == "cpu":
        return arr
    return to_device(arr, dev)


class _Archive:
    """Read access to a checkpoint's records, with errors that name the damaged part."""

    storage_dir = "data"  # TorchScript archives keep constants' storages in constants/
    max_version = FORMAT_VERSION

    def __init__(self, f):
        self.path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else None
        try:
            self.zip = zipfile.ZipFile(f)
            names = self.zip.namelist()
        except zipfile.BadZipFile as e:
            raise CheckpointError(f"checkpoint damaged: its zip directory cannot be read ({e}); "
                                  "the file is truncated or not a checkpoint") from None
        pkl = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
        if not pkl:
            raise CheckpointError("checkpoint damaged: no data.pkl record in the archive")
        self.prefix = pkl[0][:-len("data.pkl")]
        self.names = set(names)
        if self.prefix + "version" in self.names:
            raw = self.read("version").decode("ascii", "replace").strip()
            try:
                version = int(raw)
            except ValueError:
                raise CheckpointError(f"checkpoint damaged: bad version record {raw!r}") \
                    from None
            if version > self.max_version:
                raise CheckpointError(f"checkpoint format version {version} is newer than "
                                      f"this ember reads (versions 1 to {self.max_version})")
        if self.prefix + "byteorder" in self.names:
            order = self.read("byteorder").decode("ascii", "replace")
            if order not in ("little", "big"):
                raise CheckpointError(f"checkpoint damaged: bad byteorder record {order!r}")
            self.byteorder = "<" if order == "little" else ">"
        else:
            self.byteorder = "<"

    def read(self, name):
        full = self.prefix + name
        try:
            return self.zip.read(full)
        except KeyError:
            raise CheckpointError(f"checkpoint damaged: record {full!r} is missing") from None
        except (zipfile.BadZipFile, EOFError, OSError, struct.error) as e:
            raise CheckpointError(f"checkpoint damaged: record {full!r} cannot be read "
                                  f"({e})") from None

    def read_storage(self, key, dtype, numel, mmap_file):
        name = f"{self.storage_dir}/{key}"
        np_dtype = dtype.np.newbyteorder(self.byteorder)
        nbytes = numel * np_dtype.itemsize
        if mmap_file is not None:
            info = self.zip.getinfo(self.prefix + name)
            if info.compress_type != zipfile.ZIP_STORED or info.file_size != nbytes:
                raise CheckpointError(f"checkpoint damaged: storage {name} has "
                                      f"{info.file_size} bytes, expected {nbytes}")
            offset = _data_offset(mmap_file, info)
            return np.memmap(mmap_file, dtype=np_dtype, mode="c", offset=offset,
                             shape=(numel,)) if numel else np.zeros(0, np_dtype)
        full = self.prefix + name
        try:
            info = self.zip.getinfo(full)
        except KeyError:
            raise CheckpointError(f"checkpoint damaged: record {full!r} is missing") from None
        if info.file_size != nbytes:
            raise CheckpointError(f"checkpoint damaged: storage {name} has {info.file_size} "
                                  f"bytes, expected {nbytes} ({numel} x {dtype})")
        arr = np.empty(numel, dtype=np_dtype)
        try:
            with self.zip.open(info) as fh:
                got = fh.readinto(memoryview(arr.view(np.uint8))) if nbytes else 0
        except (zipfile.BadZipFile, EOFError, OSError, struct.error) as e:
            raise CheckpointError(f"checkpoint damaged: record {full!r} cannot be read "
                                  f"({e})") from None
        if got != nbytes:
            raise CheckpointError(f"checkpoint damaged: storage {name} ended after {got} of "
                                  f"{nbytes} bytes")
        return arr.astype(dtype.np) if np_dtype != dtype.np else arr


def _data_offset(path, info):
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        header = fh.read(30)
        if header[:4] != b"PK\x03\x04":
            raise CheckpointError(f"checkpoint damaged: bad local header for {info.filename}")
        n, m = struct.unpack("<HH", header[26:30])
        return info.header_offset + 30 + n + m


def _weights_only_from_env(weights_only, pickle_module):
    """PyTorch's rule for ``weights_only``: unset means True (False when a
    ``pickle_module`` is given); ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` forces True, and
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` forces False when the caller did not choose."""
    unset = weights_only is None
    if unset:
        weights_only = pickle_module is None
    true_values = ("1", "y", "yes", "true")
    force = os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in true_values
    force_no = os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in true_values
    if force and force_no:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or "
                           "`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` should be set, but both were set.")
    if force:
        weights_only = True
    elif force_no and unset:
        import warnings
        warnings.warn("Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since "
                      "the`weights_only` argument was not explicitly passed to `torch.load`, "
                      "forcing weights_only=False.", UserWarning, stacklevel=3)
        weights_only = False
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is "
                           "specified")
    return weights_only


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=False,
         **pickle_load_args):
    """Load an object that ``ember.save`` or ``torch.save`` wrote.

    ``weights_only=True`` (the default) admits only tensors, storages, dtypes and
    plain containers; ``weights_only=False`` unpickles arbitrary objects and must only
    be used on files you trust. ``map_location`` may be a device, a string, a dict
    from saved to target locations, or ``callable(tensor, location)``. ``mmap=True``
    backs tensors by the file instead of reading them into memory (needs a path).
    The environment switches ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` and
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` act as in PyTorch.
    """
    weights_only = _weights_only_from_env(weights_only, pickle_module)
    if mmap and not isinstance(f, (str, os.PathLike)):
        raise ValueError("mmap=True needs the checkpoint's path, not a file object")
    if isinstance(f, (str, os.PathLike)) and not os.path.exists(f):
        raise FileNotFoundError(f"No such checkpoint file: '{os.fspath(f)}'")
    archive = _Archive(f)
    data = archive.read("data.pkl")
    unpickler = _Unpickler(io.BytesIO(data), archive, weights_only, map_location,
                           os.fspath(f) if mmap else None)
    try:
        result = unpickler.load()
    except pickle.UnpicklingError:
        raise
    except CheckpointError:
        raise
    except (EOFError, ValueError, IndexError, KeyError, TypeError, struct.error) as e:
        raise CheckpointError(f"checkpoint damaged: its pickle (data.pkl) cannot be read "
                              f"({type(e).__name__}: {e})") from None
    if callable(map_location) and not isinstance(map_location, (str, dict)):
        result = _apply_callable(result, map_location)
    return result


def _apply_callable(obj, fn):
    if isinstance(obj, Tensor):
        out = fn(obj, "cpu")
        return obj if out is None else out
    if isinstance(obj, dict):
        for k in list(obj):
            obj[k] = _apply_callable(obj[k], fn)
        return obj
    if isinstance(obj, list):
        return [_apply_callable(v, fn) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_apply_callable(v, fn) for v in obj)
    return obj
