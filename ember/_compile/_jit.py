"""numba's compilation of the compiled plans' loops, cached on disk across processes.

The loops of :mod:`ember._compile._fused` are written as Python source from each op's
``fused`` expression (one small function per expression or chain) and those of
:mod:`ember._compile._xent` and :mod:`ember.optim._one_pass` are fixed; compiling each
costs numba ~0.1 s, which every process paid again on its first compiled step.
numba caches a function on disk only when it comes from a real source file (the cache
is keyed by the file's contents and the function's bytecode, not its constants or the
names it calls, so two generated functions must not share a file). :func:`njit_source`
therefore writes each generated source to a file of its own, named by a hash of the
text, in the first writable directory of: numba's ``NUMBA_CACHE_DIR``, the
``__pycache__`` beside this module (a writable install, where ember's other numba
kernels cache theirs) and numba's per-user cache directory; numba then caches the
compiled loop beside that file. Where no directory can be written (a read-only install
and home), the loop is compiled in memory as before: the same code, paid per process.
"""
import hashlib
import os
import tempfile

__all__ = ["njit", "njit_source"]

_source_dir = []  # [the directory generated sources go to, or None], found once


def njit(fn, **flags):
    """``numba.njit(**flags)`` with numba's on-disk cache where it finds a writable
    directory for ``fn``'s file, else without it."""
    import numba
    try:
        return numba.njit(cache=True, **flags)(fn)
    except RuntimeError:  # no cache locator: numba found no writable directory
        return numba.njit(**flags)(fn)


def _writable(path):
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _generated_dir():
    """The directory for generated loop sources (see the module docstring), or None."""
    if _source_dir:
        return _source_dir[0]
    from numba.core import config
    from numba.misc.appdirs import AppDirs
    candidates = []
    if config.CACHE_DIR:
        candidates.append(os.path.join(config.CACHE_DIR, "ember_generated"))
    candidates.append(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   "__pycache__", "generated"))
    candidates.append(os.path.join(AppDirs(appname="numba", appauthor=False).user_cache_dir,
                                   "ember_generated"))
    found = next((d for d in candidates if _writable(d)), None)
    _source_dir.append(found)
    return found


def _source_file(src, stem):
    """The path of a file holding exactly ``src`` (written if absent), or None."""
    folder = _generated_dir()
    if folder is None:
        return None
    digest = hashlib.sha256(src.encode()).hexdigest()[:24]
    path = os.path.join(folder, f"{stem}_{digest}.py")
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == src:
                return path
    except OSError:
        pass
    tmp = None
    try:  # (a temporary file renamed: a process reading it never sees half of it)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(src)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None and os.path.exists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return None
    return path


def njit_source(src, name, stem, label, **flags):
    """The function ``name`` defined by the Python source ``src``, compiled by
    ``numba.njit(**flags)`` and cached on disk (see the module docstring); ``stem``
    names its file, ``label`` the code's filename where nothing can be written."""
    path = _source_file(src, stem)
    # (a module name numba can import again when it loads the cached loop: the loops
    # read no global, so this module's namespace serves)
    scope = {"__name__": __name__}
    exec(compile(src, path or label, "exec"), scope)
    if path is None:
        import numba
        return numba.njit(**flags)(scope[name])
    return njit(scope[name], **flags)
