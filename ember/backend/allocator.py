"""The C allocator's settings for steady training steps (glibc only).

A training step frees its activations at the end and allocates the same sizes again in
the next step. With glibc's defaults, whether that memory stays in the process depends
on the heap's history: freed blocks at the top of the heap are returned to the OS
(trimmed) once they exceed the trim threshold, and blocks above the mmap threshold are
unmapped on ``free``, so the next step takes a page fault for every 4 KiB page of them
again (hundreds to thousands per step, a fifth to nearly half of a small model's step).

:func:`tune` sets two ``mallopt`` parameters once: blocks up to ``mmap_threshold`` come
from the heap, and the heap keeps up to ``trim_threshold`` bytes of free memory instead
of returning it. ``import ember`` calls it unless the environment variable
``EMBER_MALLOPT`` is ``0``; the cost is memory the process keeps after a peak (up to
the trim threshold), which ``release()`` hands back on demand. See
docs/performance/models.md ("Page faults per step").
"""
import os

__all__ = ["tune", "release", "settings"]

M_TRIM_THRESHOLD = -1  # glibc's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20   # the ceiling of glibc's own dynamic threshold on 64-bit
TRIM_THRESHOLD = 1 << 30

_state = {"applied": None}  # the (mmap, trim) thresholds set, or None


def _libc():
    """The process's glibc (``None`` elsewhere: musl, macOS, Windows)."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (AttributeError, ValueError, OSError):
        return None
    import ctypes
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") else None
    except OSError:  # pragma: no cover
        return None


def tune(mmap_threshold=MMAP_THRESHOLD, trim_threshold=TRIM_THRESHOLD):
    """Keep freed step memory in the process: ``mallopt(M_MMAP_THRESHOLD, mmap_threshold)``
    and ``mallopt(M_TRIM_THRESHOLD, trim_threshold)``. Returns True where both were set
    (glibc), False where the C library is not glibc or refused a value."""
    libc = _libc()
    if libc is None:
        return False
    ok = libc.mallopt(M_MMAP_THRESHOLD, int(mmap_threshold)) == 1
    ok = libc.mallopt(M_TRIM_THRESHOLD, int(trim_threshold)) == 1 and ok
    if ok:
        _state["applied"] = (int(mmap_threshold), int(trim_threshold))
    return ok


def release():
    """Return the heap's free memory to the OS now (``malloc_trim(0)``); True if some was."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


def settings():
    """The (mmap threshold, trim threshold) that :func:`tune` set, or None."""
    return _state["applied"]


def tune_on_import():
    """What ``import ember`` does: :func:`tune` unless ``EMBER_MALLOPT=0``."""
    if os.environ.get("EMBER_MALLOPT", "1").strip() not in ("0", "off", "false", "no"):
        tune()
