"""Atomic, durable replacement of files that ember writes to a path.

Every writer that takes a path (checkpoints, safetensors, TorchScript archives,
ONNX files, TensorBoard side files, dataset caches) goes through
:func:`atomic_write`:

1. the data goes to a temporary file in the target's own directory (so the
   final rename never crosses filesystems), named
   ``.<target name>.<host>.<pid>.<random>.ember-tmp`` so that anyone who finds
   one knows what it is;
2. the file is flushed and ``fsync``'ed, so its bytes are on disk;
3. ``os.replace`` puts it over the target in one step: a reader sees the old
   file or the new one, never a half-written one;
4. on POSIX the directory is ``fsync``'ed, so the rename itself survives a
   power cut.

A crash (even SIGKILL) leaves the old file or the new one plus at most one
temporary file; the next save of the same target removes temporaries whose
writer is gone. Two processes saving the same path at once each write their own
temporary file, and the target ends up as one of the two complete files.

Permissions: a new target gets ``0o666`` less the umask, exactly as
``open(path, "wb")`` would give (the temporary file is created with that mode,
so the kernel applies the umask and any default ACL); a replaced target keeps
its permission bits (and, when the process may set them, its owner and group),
as truncating it in place would. A symlinked target is resolved: the file it
points to is replaced and the link stays a link.
"""
import contextlib
import errno
import os
import secrets
import socket
import stat

__all__ = ["atomic_write", "io_error", "makedirs", "plain_words"]

_SUFFIX = ".ember-tmp"
_MODES = {"wb", "w", "wt"}
# NAME_MAX is 255 bytes on the usual filesystems; leave room for host, pid and token
_MAX_BASE = 120


def _host():
    # dots would blur the name's fields; a host name only tells machines apart here
    return (socket.gethostname() or "host").replace(".", "_")[:32]


def _temp_prefix(target):
    base = os.path.basename(target)
    if len(base.encode()) > _MAX_BASE:
        base = base.encode()[:_MAX_BASE].decode(errors="ignore")
    return os.path.join(os.path.dirname(target), f".{base}.")


def _alive(pid):
    if os.name != "posix":
        return True   # os.kill would terminate it on Windows: never judge, keep the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:   # EPERM: it exists but belongs to someone else
        return True
    return True


def _remove_stale(target):
    """Delete temporaries of ``target`` left by writers on this host that have died."""
    prefix = _temp_prefix(target)
    directory, start = os.path.split(prefix)
    host = _host()
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not (name.startswith(start) and name.endswith(_SUFFIX)):
            continue
        fields = name[len(start):-len(_SUFFIX)].split(".")
        # only our own host's dead writers: a pid means nothing on another machine
        if len(fields) != 3 or fields[0] != host or not fields[1].isdigit():
            continue
        if _alive(int(fields[1])):
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, name))


def _create_temp(target):
    prefix = _temp_prefix(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = f"{prefix}{_host()}.{os.getpid()}.{secrets.token_hex(4)}{_SUFFIX}"
        try:
            # 0o666 as open() uses: the kernel applies the umask and default ACLs
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def _match_existing(fd, target):
    """Give the new file the old one's mode (and owner where allowed), as truncation would."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return
    if hasattr(os, "fchmod"):
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
    else:
        os.chmod(fd, stat.S_IMODE(st.st_mode))
    if hasattr(os, "fchown"):
        with contextlib.suppress(OSError):   # only root (or the owner, for the group) may
            os.fchown(fd, st.st_uid, st.st_gid)


def _fsync_dir(directory):
    if os.name != "posix":
        return   # Windows cannot open a directory for fsync; its rename is journaled
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        # some filesystems (and FUSE mounts) cannot sync a directory: nothing more to do
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


# what each filesystem failure means, in the words a user would use
_PLAIN = {
    errno.ENOSPC: "the disk is full",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied (the operation is not permitted)",
    errno.EFBIG: "the file is too large for the file system (or the process's file size "
                 "limit)",
    errno.EIO: "the device reported an input/output error",
    errno.ENOENT: "the file or directory does not exist",
    errno.ENOTDIR: "a part of the path is not a directory",
    errno.EISDIR: "the path is a directory",
    errno.ENAMETOOLONG: "the file name is too long",
    errno.EMFILE: "too many files are open",
}
if hasattr(errno, "EDQUOT"):
    _PLAIN[errno.EDQUOT] = "the disk quota is exceeded"


def plain_words(e):
    """What the ``OSError`` ``e`` means, in plain words, with the OS's own words after them:
    ``"the disk is full (No space left on device)"``."""
    os_text = e.strerror or str(e)
    plain = _PLAIN.get(e.errno)
    if plain is None:
        return os_text
    if plain.lower().startswith(os_text.lower()):
        return plain
    return f"{plain} ({os_text})"


def io_error(e, path, doing, after=""):
    """An ``OSError`` of ``e``'s kind (``PermissionError`` stays one) whose message reads
    ``<doing>: <what happened, in plain words> (<the OS's words>); <after>`` and whose
    ``filename`` is ``path``, so its text ends with the path.

    >>> str(io_error(OSError(28, "No space left on device"), "/x", "cannot save"))
    "[Errno 28] cannot save: the disk is full (No space left on device): '/x'"
    """
    if getattr(e, "_ember_described", False):
        return e   # already says what happened and names its file
    text = f"{doing}: {plain_words(e)}" + (f"; {after}" if after else "")
    if e.errno is None:
        err = OSError(f"{text}: {os.fspath(path)!r}")
    else:
        err = type(e)(e.errno, text, os.fspath(path))
    return _described(err)


def _described(err):
    # marks an error whose message already speaks plainly, so no caller wraps it again
    err._ember_described = True
    return err


def _failed(e, target, doing, after=None):
    # the caller raises it "from None": the message carries the cause, so one traceback
    # tells the whole story
    if after is None:
        after = "the old file was left as it was" if os.path.lexists(target) else \
            "no file was written"
    return io_error(e, target, doing, after)


def makedirs(path, what="cannot create the directory"):
    """``os.makedirs(path, exist_ok=True)`` whose failure says in plain words why."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise io_error(e, e.filename if e.filename is not None else path, what) from None


def _read_only(path):
    """True when ``path`` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):   # no statvfs on Windows
        return False


def _check_target(target):
    if os.path.isdir(target):
        raise _described(IsADirectoryError(errno.EISDIR, "cannot save the file: the path is "
                                           "a directory", target))
    # open(path, "wb") refuses a file the user may not write; so does ember, though a
    # rename in a writable directory would succeed
    if os.path.exists(target) and not os.access(target, os.W_OK):
        # access() also says "no" on a read-only mount: tell the two apart
        if _read_only(target):
            raise _described(OSError(errno.EROFS, "cannot save the file: the file system is "
                                     "read-only (Read-only file system); the old file was "
                                     "left as it was", target))
        raise _described(PermissionError(errno.EACCES, "cannot save the file: permission "
                                         "denied (the file is not writable); the old file "
                                         "was left as it was", target))


class _Passed(Exception):
    """Carries an unrelated OSError from the caller's block through the cleanup unchanged."""

    def __init__(self, error):
        super().__init__(error)
        self.error = error


@contextlib.contextmanager
def atomic_write(path, mode="wb", *, encoding=None, newline=None):
    """Write a file that replaces ``path`` atomically and durably when the block succeeds.

    Yields a writable file object on a temporary file beside ``path``. When the
    ``with`` block ends normally, the file is flushed, fsync'ed and renamed over
    ``path`` (and the directory fsync'ed on POSIX). When it raises, the temporary
    file is removed and ``path`` is untouched. Failures of the filesystem
    (``ENOSPC``, ``EACCES``, ``EFBIG`` ...) raise an ``OSError`` of the same kind
    whose message names ``path``, the cause, and that the old file was kept.

    ``mode`` is ``"wb"`` (bytes) or ``"w"``/``"wt"`` (text, with ``encoding`` and
    ``newline`` as for ``open``). A symlink ``path`` is resolved: its target file
    is replaced and the link kept. Permissions follow ``open(path, "wb")``.

    >>> with atomic_write("model.pt") as f:   # doctest: +SKIP
    ...     f.write(b"...")
    """
    if mode not in _MODES:
        raise ValueError(f"atomic_write: mode must be 'wb', 'w' or 'wt', got {mode!r}")
    target = os.path.realpath(os.fspath(path))
    _check_target(target)
    directory = os.path.dirname(target)
    _remove_stale(target)
    try:
        fd, tmp = _create_temp(target)
    except OSError as e:
        raise _failed(e, target, "cannot save the file: cannot create a temporary file "
                      f"in {directory!r}") from None
    try:
        try:
            _match_existing(fd, target)
            f = os.fdopen(fd, mode, **({} if "b" in mode else
                                        {"encoding": encoding, "newline": newline}))
        except BaseException:
            os.close(fd)
            raise
        with f:
            try:
                yield f
            except OSError as e:
                # a failed write names no file; an error that names one came from elsewhere
                if e.filename is None and e.errno is not None:
                    raise _failed(e, target, "cannot write the file") from None
                raise _Passed(e) from None
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, _Passed):
            raise e.error from None
        if isinstance(e, OSError) and e.filename != target:
            raise _failed(e, target, "cannot save the file") from None
        raise
    try:
        _fsync_dir(directory)
    except OSError as e:
        raise _failed(e, target, "the new file is in place, but syncing its directory "
                      "failed", "the rename may not survive a crash") from None
