"""Writing checkpoints: ember objects pickled as the torch objects they stand for, in a
zip of stored records aligned as ``torch.save`` aligns them."""
import collections
import pickle
import struct
import uuid
import zipfile

import numpy as np

from ember._tensor import Tensor
from ember.backend import dtypes as _dt
from ember.serialization._format import ALIGN, FORMAT_VERSION, STORAGE_OF, UNTYPED


class _Global:
    """A reference to a global by name, pickled as PyTorch's (no import of torch needed)."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle insists that a reduce function is callable
        raise TypeError(f"{self.module}.{self.name} is a placeholder for pickling")


class _StorageRef:
    __slots__ = ("key", "dtype", "numel", "location")

    def __init__(self, key, dtype, numel, location="cpu"):
        self.key, self.dtype, self.numel, self.location = key, dtype, numel, location


class _TorchPickler(pickle._Pickler):
    """Pickles ember objects as the torch objects they stand for."""

    def __init__(self, file, storages):
        super().__init__(file, protocol=2)
        self._storages = storages  # id(root array) -> (key, root array)

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            if obj.dtype.name in UNTYPED:
                return ("storage", _Global("torch.storage", "UntypedStorage"), obj.key,
                        obj.location, obj.numel * obj.dtype.itemsize)
            return ("storage", _Global("torch", STORAGE_OF[obj.dtype.name]), obj.key,
                    obj.location, obj.numel)
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
        if t.is_meta:
            # no data: torch's record of a meta tensor, its dtype, size and strides
            rebuild = (_Global("torch._utils", "_rebuild_meta_tensor_no_storage"),
                       (_Global("torch", t.dtype.name), tuple(t.shape), tuple(t.stride()),
                        t.requires_grad))
        else:
            storage, offset, stride = self._storage_of(t._host())
            if t.device.type == "cuda":
                # the location torch writes ("cuda:0"): loading restores the device
                storage.location = f"cuda:{t.device.index or 0}"
            args = (storage, offset, tuple(t.shape), stride, t.requires_grad,
                    collections.OrderedDict())
            if t.dtype.name in UNTYPED:
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
        shareable = root.dtype == arr.dtype and root.flags.c_contiguous and \
            all(s >= 0 for s in arr.strides) and all(s % isz == 0 for s in arr.strides)
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
    pad = (-(base + 4)) % ALIGN
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
    zf.writestr(info, data)


def _write_zip(fh, archive, pickled, storages):
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        _aligned_write(zf, f"{archive}/data.pkl", pickled)
        _aligned_write(zf, f"{archive}/.format_version", b"1")
        _aligned_write(zf, f"{archive}/.storage_alignment", str(ALIGN).encode())
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
