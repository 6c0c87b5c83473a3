"""The thread count of NumPy's OpenBLAS, read and set through ctypes, for installs
without threadpoolctl (ember's default install is NumPy alone).

ember needs BLAS at one thread inside its split kernels and its recurrent step loops
(:mod:`ember.backend.threads`): OpenBLAS's threads woken for each of many small
products spend longer waiting on each other than the product takes. threadpoolctl
(the ``fast`` extra) does this for any BLAS; this module covers the BLAS NumPy's wheels
ship, OpenBLAS (``libscipy_openblas`` in NumPy 2 wheels, ``libopenblas`` in older wheels
and distributions), by calling its own ``openblas_get_num_threads`` and
``openblas_set_num_threads`` on the copy already loaded into the process.
"""
import ctypes
import glob
import os

__all__ = ["find", "process_wide"]

# how OpenBLAS builds name their exported functions: NumPy 2's wheels add "scipy_" and
# a suffix for the 64-bit integer interface
_PREFIXES = ("scipy_", "")
_SUFFIXES = ("64_", "_64", "")


class OpenBLAS:
    """One loaded OpenBLAS library: ``num_threads`` and ``set_num_threads(n)``, the
    interface of threadpoolctl's controllers that :mod:`ember.backend.threads` uses."""

    internal_api = "openblas"

    def __init__(self, path, get, set_, corename=None):
        self.filepath = path
        self._get = get
        self._set = set_
        self._corename = corename

    @property
    def architecture(self):
        """The name of the kernel set OpenBLAS chose for this CPU (``openblas_get_corename``,
        as threadpoolctl reports it); None when the library does not say."""
        if self._corename is None:
            return None
        name = self._corename()
        return name.decode("ascii", "replace") if name else None

    @property
    def num_threads(self):
        return self._get()

    def set_num_threads(self, n):
        self._set(int(n))

    def __repr__(self):
        return f"OpenBLAS({self.filepath!r}, num_threads={self.num_threads})"


def _loaded_paths():
    """Paths of the OpenBLAS libraries this process has loaded (Linux: its memory map),
    else of those shipped beside NumPy (its wheel's ``numpy.libs``/``.dylibs``)."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:  # address, perms, offset, device, inode, path
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if "openblas" in os.path.basename(path).lower() and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    if paths:
        return paths
    import numpy as np
    root = os.path.dirname(np.__file__)
    for pattern in ("../numpy.libs/*openblas*", ".dylibs/*openblas*", "../numpy.libs/*.dll"):
        paths += sorted(glob.glob(os.path.join(root, pattern)))
    return paths


def _symbol(lib, name):
    for prefix in _PREFIXES:
        for suffix in _SUFFIXES:
            fn = getattr(lib, f"{prefix}{name}{suffix}", None)
            if fn is not None:
                return fn
    return None


def find():
    """Controllers of the OpenBLAS libraries loaded with NumPy; () when there are none
    (NumPy built on another BLAS) or they cannot be reached."""
    import numpy  # noqa: F401  (loads NumPy's BLAS first, so that the map lists it)
    out = []
    for path in _loaded_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        get, set_ = _symbol(lib, "openblas_get_num_threads"), _symbol(
            lib, "openblas_set_num_threads")
        if get is None or set_ is None:
            continue
        get.restype, get.argtypes = ctypes.c_int, []
        set_.restype, set_.argtypes = None, [ctypes.c_int]
        corename = _symbol(lib, "openblas_get_corename")
        if corename is not None:
            corename.restype, corename.argtypes = ctypes.c_char_p, []
        out.append(OpenBLAS(path, get, set_, corename))
    return tuple(out)


def process_wide(controllers):
    """threadpoolctl's controllers, with each OpenBLAS on its own threads (pthreads, as
    NumPy's wheels build it) replaced by ember's own controller of the same library:
    its thread count is one for the process, and threadpoolctl lets only the first
    Python thread that set it set it again (others silently do nothing), so a model
    trained in another thread would run its products on BLAS's threads, with other bits
    than at one thread."""
    own = None
    out = []
    for c in controllers:
        if getattr(c, "internal_api", None) == "openblas" and \
                getattr(c, "threading_layer", None) == "pthreads":
            if own is None:
                own = {os.path.realpath(lib.filepath): lib for lib in find()}
            c = own.get(os.path.realpath(c.filepath), c)
        out.append(c)
    return tuple(out)
