"""Atomic, durable replacement of files that ember writes to a path.

Every writer that takes a path (checkpoints, safetensors, TorchScript archives,
ONNX files, TensorBoard side files) goes through :func:`atomic_write`: the data
goes to a temporary file beside the target, is flushed and fsync'ed, and only
then replaces the target with ``os.replace``. A crash leaves the old file or the
new one, never a half-written target.
"""
import contextlib
import os
import tempfile

__all__ = ["atomic_write"]


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """Open a temporary file beside ``path``; on success it replaces ``path`` atomically.

    >>> with atomic_write("model.pt") as f:   # doctest: +SKIP
    ...     f.write(b"...")
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
