"""``torch._C.PyTorchFileReader`` (also ``torch.PyTorchFileReader``): the records of a
checkpoint archive that ``torch.save`` wrote, read by name (Lightning's lazy checkpoint
loader reads ``data.pkl`` and the storages through it)."""

__all__ = ["PyTorchFileReader"]


class PyTorchFileReader:
    """Read the records of a ``torch.save`` zip archive: ``name`` is relative to the
    archive's top directory (``"data.pkl"``, ``"data/0"``, ``"version"``).

    ``file`` is a path or a readable, seekable binary file."""

    def __init__(self, file):
        from ember.serialization._zip import _Archive
        self._archive = _Archive(file)

    def get_record(self, name):
        """The bytes of record ``name``."""
        return self._archive.read(name)

    def has_record(self, name):
        """Whether the archive holds record ``name``."""
        return self._archive.prefix + name in self._archive.names

    def get_all_records(self):
        """The names of every record (relative to the top directory), sorted."""
        n = len(self._archive.prefix)
        return sorted(name[n:] for name in self._archive.names)

    def get_storage_from_record(self, name, numel, dtype):
        """Record ``name`` as a 1-D tensor of ``numel`` elements of ``dtype``. (torch
        returns a tensor of no elements over a storage of those bytes; ember's holds the
        elements, so its ``untyped_storage()`` is the same bytes.)"""
        import numpy as np

        from ember._tensor import _make
        data = self.get_record(name)
        np_dtype = np.dtype(dtype.np).newbyteorder(self._archive.byteorder)
        if len(data) != numel * np_dtype.itemsize:
            raise RuntimeError(f"record {name} holds {len(data)} bytes, not {numel} "
                               f"elements of {dtype}")
        return _make(np.frombuffer(data, dtype=np_dtype).astype(dtype.np))

    def serialization_id(self):
        """The archive's serialization id record (empty when it has none)."""
        if self.has_record(".data/serialization_id"):
            return self.get_record(".data/serialization_id").decode()
        return ""
