"""Ints an op reads from its arguments: dims wrapped into range, and 0-d integer tensors
taken where torch takes an int, which ``jit.trace`` records as read (``aten::Int``) when
the reading op declares it follows them (:func:`follows_int_reads`) or records its whole
call (:func:`traced_ints`)."""
import operator
import sys

import numpy as np

from ember._tensor import Tensor, _mode_active, _mode_recorder, _mode_with


def wrap_dim(dim, ndim):
    """``dim`` (an int, or a 0-d integer tensor as torch takes one) wrapped into
    ``[0, ndim)``; IndexError out of range."""
    if type(dim) is not int:
        if _mode_active[0] and (_zero_d_int(dim) or isinstance(dim, int)):
            traced = _traced_int(dim, ndim)
            if traced is not None:
                return traced
        dim = operator.index(dim)
    m = max(ndim, 1)
    if not -m <= dim < m:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-m}, {m - 1}], "
                         f"but got {dim})")
    return dim + ndim if dim < 0 else dim


def _zero_d_int(v):
    """A 0-d integer tensor: torch takes one wherever it takes an int (a dim, a size)."""
    return isinstance(v, Tensor) and v._data.ndim == 0 and v._data.dtype.kind in "iu"


# the code of the ember functions that hand an int read from a traced 0-d tensor only
# to recorded ops (``follows_int_reads``); any other function that reads one gets a plain
# int, and the trace warns that it keeps the example's value: a traced int used in a
# branch, a loop count or a shape computed in Python would be kept silently
_FOLLOWS = set()


def follows_int_reads(fn):
    """Decorator: ``fn`` passes the ints it reads from 0-d tensors (``int_arg``,
    ``wrap_dim``...) only to recorded ops, never into a branch or a Python computation,
    so under ``jit.trace`` those reads are recorded (``aten::Int``) and a replay follows
    them. tests/test_opinfo_trace_int_args.py checks each such op at other values."""
    _FOLLOWS.add(fn.__code__)
    return fn


def _reader_follows():
    """Whether the ember function reading an int now (the innermost public one on the
    stack, past these helpers and private ones) declared :func:`follows_int_reads`."""
    f = sys._getframe(3)
    while f is not None:
        co = f.f_code
        if co not in _READ_HELPERS and co.co_name[0] not in "_<":
            return co in _FOLLOWS
        f = f.f_back
    return False


def _traced_int(v, ndim=None):
    """Under ``jit.trace``, a traced 0-d integer tensor ``v`` (or a traced int) read as an
    int (a dim of a tensor of ``ndim`` dims when given) by a function that follows such
    reads: the traced int of the node the trace records for the read, so a replay takes
    the value of that call. Else None (a plain read, which the trace reports)."""
    m = _mode_with("int_read")
    if m is None or not _reader_follows():
        return None
    return m.int_read(v, ndim)


def int_arg(v):
    """``v`` as a Python int where it is a 0-d integer tensor (under ``jit.trace``, a
    traced int recorded as read from it; otherwise read through ``__index__``, so a
    graph capture sees the read), else ``v`` unchanged for the caller's checks."""
    if not _zero_d_int(v):
        return v
    if _mode_active[0]:
        traced = _traced_int(v)
        if traced is not None:
            return traced
    return operator.index(v)


def int_args(v):
    """:func:`int_arg` of ``v`` and of each element of a list or tuple ``v``."""
    if isinstance(v, (list, tuple)):
        return type(v)(int_arg(x) for x in v) if any(isinstance(x, Tensor) for x in v) else v
    return int_arg(v)


def int_or_traced(v):
    """``int(v)``; a 0-d integer tensor read under ``jit.trace`` by a function that
    follows such reads stays a traced int (:func:`int_arg`)."""
    v = int_arg(v)
    return v if type(v) is not bool and isinstance(v, int) else int(v)


def traced_ints(*values):
    """Under ``jit.trace``, where one of ``values`` (or an element of a list or tuple
    among them) is a traced 0-d integer tensor that the calling op uses in Python (a
    dim that picks a layout, a window, a count, a number): ``(capture, values)`` with
    each such tensor read as a traced int (PyTorch's ``aten::Int``), for the op to record
    its whole call as one node taking them (``capture.composite(...)``), so a replay
    runs the op again at the value then. Else None (a ``compile`` capture breaks its
    graph at the plain read instead)."""
    m = _mode_with("int_read")
    if m is None or m.breaks is not None or m._passes() or _mode_recorder() is not m:
        return None
    hit = []

    def read(v):
        if _zero_d_int(v):
            r = m.int_read(v)
            if r is not None:
                hit.append(r)
                return r
        return v
    out = tuple(type(v)(read(x) for x in v) if type(v) in (list, tuple) else read(v)
                for v in values)
    return (m, out) if hit else None


_READ_HELPERS = {int_arg.__code__, int_args.__code__, wrap_dim.__code__,
                 int_or_traced.__code__, traced_ints.__code__}


def wrap_dims(dim, ndim):
    """Normalise ``dim`` (None, int, or sequence) to a sorted tuple of axes."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)) or _zero_d_int(dim):
        return (wrap_dim(dim, ndim),)
    if isinstance(dim, str) or not hasattr(dim, "__iter__"):
        raise TypeError(f"argument 'dim' must be int or tuple of ints, not {type(dim).__name__}")
    try:
        dims = tuple(wrap_dim(d, ndim) for d in dim)
    except TypeError:
        raise TypeError("argument 'dim' must be tuple of ints, but found an element of type "
                        f"{type(next(d for d in dim if not isinstance(d, int))).__name__}"
                        ) from None
    seen = set()
    for d in dims:
        d %= max(ndim, 1)  # a 0-d tensor's -1 and 0 are the same dim
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return dims


_READ_HELPERS.add(wrap_dims.__code__)
