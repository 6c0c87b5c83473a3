"""``ember.save`` / ``ember.load`` in PyTorch's own zip checkpoint format, both ways.

A checkpoint is a zip archive (stored, not compressed) holding ``data.pkl`` — a
pickle whose tensors refer to storages by key — and one record ``data/<key>`` of raw
little-endian bytes per storage, each aligned to 64 bytes, exactly as ``torch.save``
writes it. So a file either library wrote loads in the other, bit for bit.

Loading is safe by default (see docs/checkpoints.md, "Loading untrusted files"):
``weights_only=True`` reads the pickle with ember's own restricted unpickler
(:mod:`ember.serialization._unpickler`), which admits only tensor rebuilds, storages,
dtypes and plain containers, changes no object it did not create, and builds nothing
larger than the file justifies; the zip itself is validated entry by entry
(:mod:`ember.serialization._zip`). An unsupported global raises
``pickle.UnpicklingError`` naming it, and nothing runs; a damaged file raises
:class:`CheckpointError` naming the damaged part.
"""
import os
import warnings

from ember._tensor import Tensor
from ember.serialization import _format
from ember.serialization._allowlist import (  # noqa: F401 - names other modules use
    _USER_SAFE,
    _rebuild_parameter,
    _rebuild_tensor_v2,
    _rebuild_tensor_v3,
    _StorageType,
    _user_key,
)
from ember.serialization._format import FORMAT_VERSION, CheckpointError  # noqa: F401
from ember.serialization._unpickler import _map_location, _TrustedUnpickler, _Unpickler  # noqa: F401
from ember.serialization._write import (  # noqa: F401 - the jit's archive writer uses them
    _aligned_write,
    _Global,
    _TorchPickler,
    _write_zip,
)
from ember.serialization._zip import _Archive
from ember.utils._atomic import atomic_write

# the format tables under the names they had before this module became a package
_ALIGN, _STORAGE_OF, _DTYPE_OF_STORAGE, _UNTYPED = (
    _format.ALIGN, _format.STORAGE_OF, _format.DTYPE_OF_STORAGE, _format.UNTYPED)

__all__ = ["save", "load", "CheckpointError", "add_safe_globals", "safe_globals",
           "get_safe_globals", "clear_safe_globals"]

UNSAFE_MESSAGE = ("Re-running `ember.load` with `weights_only` set to `False` will likely "
                  "succeed, but it can result in arbitrary code execution. Do it only if you "
                  "got the file from a trusted source.")


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save ``obj`` (tensors, state_dicts, nested containers) in PyTorch's zip format.

    ``f`` is a path or a writable binary file. The file loads in ``torch.load`` with
    ``weights_only=True``. A path is replaced atomically and durably (unlike
    ``torch.save``): a crash or a full disk leaves the old file, never a broken one.
    """
    import io
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


# ----- the weights-only allowlist the user extends ---------------------------------------
def add_safe_globals(safe_globals):
    """Allow these classes or functions in ``load(..., weights_only=True)`` files.

    Each item is an object (matched by ``module.qualname``) or a pair
    ``(object, "module.name")`` for an object the file names differently. Only add
    what you trust: the unpickler will construct or call them, and set state on the
    instances it creates. Globals from ``os``, ``sys``, ``posix`` and ``nt`` stay refused.
    """
    for obj in safe_globals:
        key, value = _user_key(obj)
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


# ----- loading -----------------------------------------------------------------------------
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
    plain containers, and is safe on files from anyone; ``weights_only=False``
    unpickles arbitrary objects (it can run any code the file names) and must only be
    used on files you trust. ``map_location`` may be a device, a string, a dict from
    saved to target locations, or ``callable(tensor, location)``. ``mmap=True`` backs
    tensors by the file (copy-on-write) instead of reading them into memory (needs a
    path and stored records). A TorchScript archive is refused with
    ``weights_only=True`` and handed to ``ember.jit.load`` otherwise, as in PyTorch.
    The environment switches ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` and
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` act as in PyTorch.
    """
    weights_only = _weights_only_from_env(weights_only, pickle_module)
    if mmap and not isinstance(f, (str, os.PathLike)):
        raise ValueError("mmap=True needs the checkpoint's path, not a file object")
    if isinstance(f, (str, os.PathLike)) and not os.path.exists(f):
        raise FileNotFoundError(f"No such checkpoint file: '{os.fspath(f)}'")
    start = None if isinstance(f, (str, os.PathLike)) else f.tell()
    with _Archive(f) as archive:
        if archive.is_torchscript:
            warnings.warn("'ember.load' received a zip file that looks like a TorchScript "
                          "archive dispatching to 'ember.jit.load' (call 'ember.jit.load' "
                          "directly to silence this warning)", UserWarning, stacklevel=2)
            if weights_only:
                raise RuntimeError("Cannot use ``weights_only=True`` with TorchScript "
                                   "archives passed to ``ember.load``. " + UNSAFE_MESSAGE)
        else:
            data = archive.read("data.pkl")
            mmap_file = os.fspath(f) if mmap else None
            if weights_only:
                unpickler = _Unpickler(data, archive, map_location, mmap_file,
                                       encoding=pickle_load_args.get("encoding", "utf-8"))
            else:
                unpickler = _TrustedUnpickler(data, archive, map_location, mmap_file,
                                              **pickle_load_args)
            result = _unpickle(unpickler)
    if archive.is_torchscript:
        from ember import jit
        if start is not None:
            f.seek(start)
        return jit.load(f, map_location=map_location)
    if callable(map_location) and not isinstance(map_location, (str, dict)):
        try:
            result = _apply_callable(result, map_location, {})
        except RecursionError:
            raise CheckpointError("checkpoint damaged: its pickle nests containers too deeply "
                                  "to walk for map_location") from None
    return result


def _unpickle(unpickler):
    import pickle
    import struct
    if isinstance(unpickler, _Unpickler):
        return unpickler.load()  # its errors are already CheckpointError or refusals
    try:
        return unpickler.load()
    except (pickle.UnpicklingError, CheckpointError):
        raise
    except (EOFError, ValueError, IndexError, KeyError, TypeError, struct.error) as e:
        raise CheckpointError(f"checkpoint damaged: its pickle (data.pkl) cannot be read "
                              f"({type(e).__name__}: {e})") from None


def _apply_callable(obj, fn, seen):
    """``map_location(tensor, 'cpu')`` applied to every tensor in the loaded object."""
    if isinstance(obj, Tensor):
        out = fn(obj, "cpu")
        return obj if out is None else out
    if id(obj) in seen:  # a container that holds itself
        return seen[id(obj)]
    if isinstance(obj, dict):
        seen[id(obj)] = obj
        for k in list(obj):
            obj[k] = _apply_callable(obj[k], fn, seen)
        return obj
    if isinstance(obj, list):
        out = seen[id(obj)] = []
        out.extend(_apply_callable(v, fn, seen) for v in obj)
        return out
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_apply_callable(v, fn, seen) for v in obj)
    return obj
