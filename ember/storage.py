"""``torch.UntypedStorage``: the bytes under a tensor (``x.untyped_storage()``).

An ember tensor's memory is a NumPy array; its storage is the bytes of the array at
the root of its views, seen as a flat ``uint8`` array that shares that memory. So
``x.untyped_storage().data_ptr()`` is the same for a tensor and its views, as in torch,
and writing through the storage changes the tensor.

The typed storages (``torch.FloatStorage``, ``TypedStorage``, ``x.storage()``) are
deprecated in torch and not provided.
"""
import numpy as np

from ember.backend._frozen import FrozenClass

__all__ = ["UntypedStorage", "is_storage"]


def _memory_root(arr):
    """The array that owns the memory under ``arr``: NumPy's view chain, followed through
    the wrapper that ``stride_tricks.as_strided`` puts in it."""
    while True:
        b = arr.base
        if b is not None and not hasattr(b, "shape"):  # stride_tricks' DummyArray
            b = getattr(b, "base", None)
        if b is None or type(b) is not type(arr):
            return arr
        arr = b


class UntypedStorage(metaclass=FrozenClass):
    """A flat, byte-addressed block of memory. (The class takes no new attributes; a
    storage's bytes are of course writable.)

    ``UntypedStorage(n)`` allocates ``n`` zero bytes; ``x.untyped_storage()`` is the
    memory under the tensor ``x``.
    """

    def __init__(self, size=0, *, device=None):
        if device is not None and str(device) != "cpu":
            raise NotImplementedError(f"UntypedStorage(device={device!r}) is not implemented "
                                      "in ember (CPU storages only)")
        self._bytes = np.zeros(int(size), dtype=np.uint8)

    @classmethod
    def _of(cls, tensor):
        root = _memory_root(tensor._data)
        if not isinstance(root, np.ndarray):
            raise NotImplementedError("untyped_storage() of a tensor that is not on the CPU "
                                      "is not implemented in ember")
        s = cls.__new__(cls)
        if root.flags.c_contiguous or root.flags.f_contiguous:  # its memory, in place
            s._bytes = root.reshape(-1, order="A").view(np.uint8)
        else:
            s._bytes = np.frombuffer(root.tobytes(), np.uint8)
        return s

    @classmethod
    def from_file(cls, filename, shared=False, nbytes=0):
        """A CPU storage of ``nbytes`` bytes mapped from ``filename``: with ``shared``,
        writes reach the file (which is created or grown as needed); without, the mapping
        is private (copy-on-write) and the file must hold ``nbytes`` bytes."""
        import os
        nbytes = int(nbytes)
        filename = os.fspath(filename)
        if shared:
            if not os.path.exists(filename) or os.path.getsize(filename) < nbytes:
                with open(filename, "ab") as f:
                    f.truncate(max(nbytes, os.path.getsize(filename)))
        elif not os.path.exists(filename):
            raise RuntimeError(f"unable to open file <{filename}> in read-only mode: No such "
                               "file or directory (2)")
        else:
            have = os.path.getsize(filename)
            if have < nbytes:
                raise RuntimeError(f"file <{filename}> size <{have}> is smaller than the "
                                   f"required mapping size <{nbytes}>")
        if nbytes == 0:
            return cls._wrap(np.zeros(0, np.uint8))
        mapped = np.memmap(filename, dtype=np.uint8, mode="r+" if shared else "c",
                           shape=(nbytes,))
        return cls._wrap(mapped)

    def untyped(self):
        """The storage itself (it is untyped already)."""
        return self

    def nbytes(self):
        """The number of bytes."""
        return int(self._bytes.size)

    def size(self):
        """The number of bytes (an untyped storage counts bytes)."""
        return self.nbytes()

    __len__ = size

    def element_size(self):
        return 1

    def data_ptr(self):
        """The address of the first byte."""
        return self._bytes.__array_interface__["data"][0]

    @property
    def device(self):
        from ember.backend import device
        return device("cpu")

    @property
    def is_cuda(self):
        return False

    def __getitem__(self, idx):
        out = self._bytes[idx]
        # a slice shares the bytes, as PyTorch's does
        return int(out) if np.ndim(out) == 0 else UntypedStorage._wrap(out)

    def __setitem__(self, idx, value):
        self._bytes[idx] = value

    @classmethod
    def _wrap(cls, arr):
        s = cls.__new__(cls)
        s._bytes = arr
        return s

    def tolist(self):
        return self._bytes.tolist()

    def clone(self):
        """A copy in new memory."""
        return UntypedStorage._wrap(self._bytes.copy())

    def copy_(self, source):
        self._bytes[...] = source._bytes
        return self

    def fill_(self, value):
        self._bytes[...] = value
        return self

    def cpu(self):
        return self

    def is_shared(self):
        """True for a storage mapped from a file."""
        return isinstance(self._bytes, np.memmap)

    def is_pinned(self, device="cuda"):
        return False

    def __repr__(self):
        head = " ".join(str(b) for b in self._bytes[:8].tolist())
        more = " ..." if self._bytes.size > 8 else ""
        return f"[ember.storage.UntypedStorage(device=cpu) of size {self.nbytes()}] {head}{more}"


def is_storage(obj):
    """True if ``obj`` is a storage."""
    return isinstance(obj, UntypedStorage)
