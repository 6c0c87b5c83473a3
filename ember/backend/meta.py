"""The ``meta`` device: tensors with a shape, dtype and strides but no data.

A meta tensor's array is a :class:`MetaArray`, a read-only NumPy array over a
zero-filled allocation that is never written (``calloc``'d pages the OS does not back
with memory until touched), so shapes, strides and views behave as on ``cpu``.

Ops run their ordinary NumPy forward on these placeholders: shape inference is the op's
own code, so every op that works on ``cpu`` gives the right shape, dtype and broadcasting
on ``meta``. What the op produces is swapped for a fresh placeholder (elementwise ufuncs
are evaluated on one element only and broadcast, so they cost nothing). In-place writes
into a meta array are dropped, as in PyTorch, where ``normal_`` or ``copy_`` on a meta
tensor do nothing. Anything that would read values raises PyTorch's error: ``item()``,
``tolist()``, ``bool()``, copying to another device, and the ops whose output shape
depends on the data (``nonzero``, ``unique``, boolean masks, ``bincount``...).
"""
import numpy as np

__all__ = ["MetaArray", "empty", "as_meta", "is_meta", "NO_DATA", "namespace"]

NO_DATA = "Cannot copy out of meta tensor; no data!"


def _data_dependent(what):
    return NotImplementedError(
        f"{what} on a meta tensor: its output shape depends on the tensor's values, "
        "which a meta tensor does not have")


def empty(shape, dtype, order="C"):
    """A read-only placeholder of ``shape`` and ``dtype`` (no memory is touched)."""
    a = np.zeros(shape, dtype, order=order).view(MetaArray)
    a.flags.writeable = False
    return a


def as_meta(arr):
    """A placeholder shaped, typed and laid out like array (or scalar) ``arr``."""
    if isinstance(arr, MetaArray):
        return arr
    arr = np.asarray(arr)
    if arr.ndim > 1 and not arr.flags.c_contiguous:
        # keep the layout (a transposed result reports transposed strides)
        a = np.zeros_like(arr, order="K").view(MetaArray)
        a.flags.writeable = False
        return a
    return empty(arr.shape, arr.dtype)


def is_meta(arr):
    """True for a meta placeholder array."""
    return isinstance(arr, MetaArray)


def _plain(x):
    """Meta arrays (also inside lists, tuples and dicts) as plain read-only ndarrays."""
    if isinstance(x, MetaArray):
        return x.view(np.ndarray)
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _wrap(r, views_of=()):
    """Results of a NumPy call on placeholders as placeholders.

    A result that is a view of an input placeholder stays that view (so the view
    relations the tensor layer relies on hold); a fresh array becomes a placeholder."""
    if isinstance(r, np.ndarray):
        if not r.flags.owndata and r.base is not None and any(
                np.shares_memory(r, v) for v in views_of if v.size and r.size):
            w = r.view(MetaArray)
            w.flags.writeable = False
            return w
        return as_meta(r)
    if isinstance(r, np.generic):
        return empty((), r.dtype)
    if isinstance(r, tuple):
        return tuple(_wrap(v, views_of) for v in r)
    if isinstance(r, list):
        return [_wrap(v, views_of) for v in r]
    return r


def _any_meta(xs):
    return any(isinstance(x, MetaArray) or isinstance(x, (list, tuple)) and _any_meta(x)
               for x in xs)


def _first_element(x):
    """A 1-element (per dimension) slice of an operand: enough to learn a ufunc's dtype."""
    if isinstance(x, np.ndarray):
        x = x.view(np.ndarray)
        if x.size == 0:
            return np.zeros((1,) * x.ndim, x.dtype)
        return x[(slice(0, 1),) * x.ndim]
    return x


def _identities(args):
    """Meta arrays among ``args`` as stacks of identity matrices of their shape."""
    out = []
    for a in args:
        if isinstance(a, MetaArray) and a.ndim >= 2:
            eye = np.eye(a.shape[-2], a.shape[-1], dtype=a.dtype)
            a = np.broadcast_to(eye, a.shape).copy()
        out.append(_plain(a))
    return out


# NumPy functions whose output shape or Python result depends on the values
_DATA_DEPENDENT = {np.nonzero, np.argwhere, np.flatnonzero, np.unique, np.compress,
                   np.extract, np.bincount, np.array_equal, np.array_equiv, np.allclose,
                   np.trim_zeros, np.setdiff1d, np.intersect1d, np.union1d, np.setxor1d}
# NumPy functions that write into their first argument
_WRITERS = {np.copyto, np.put, np.place, np.put_along_axis, np.fill_diagonal, np.putmask}


class MetaArray(np.ndarray):
    """A NumPy array standing for a meta tensor's memory: shape, dtype and strides only."""

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kw):
        if out is not None:
            outs = out if isinstance(out, tuple) else (out,)
            if all(isinstance(o, MetaArray) for o in outs if o is not None):
                # a write into meta memory: nothing to write (PyTorch's no-op)
                return out if isinstance(out, tuple) and len(out) > 1 else outs[0]
            raise NotImplementedError(NO_DATA)
        if method == "at":
            if isinstance(inputs[0], MetaArray):
                return None
            raise NotImplementedError(NO_DATA)
        with np.errstate(all="ignore"):
            if method == "__call__" and ufunc.signature is None and not (
                    set(kw) - {"dtype", "casting"}):
                small = ufunc(*[_first_element(x) for x in inputs], **kw)
                shape = np.broadcast_shapes(*[np.shape(x) for x in inputs])
                if isinstance(small, tuple):
                    return tuple(empty(shape, s.dtype) for s in small)
                return empty(shape, np.asarray(small).dtype)
            r = getattr(ufunc, method)(*_plain(inputs), **_plain(kw))
        return _wrap(r)

    def __array_function__(self, func, types, args, kwargs):
        if func in _DATA_DEPENDENT or func is np.count_nonzero and kwargs.get(
                "axis", args[1] if len(args) > 1 else None) is None:
            raise _data_dependent(f"numpy.{func.__name__}")
        if func is np.repeat:
            reps = args[1] if len(args) > 1 else kwargs.get("repeats")
            if isinstance(reps, MetaArray) and reps.size != 1:
                raise _data_dependent("repeat_interleave with tensor repeats")
        if func in _WRITERS:
            dst = args[0] if args else next(iter(kwargs.values()))
            if isinstance(dst, MetaArray):
                return None
            raise NotImplementedError(NO_DATA)
        views_of = [a.view(np.ndarray) for a in args if isinstance(a, MetaArray)]
        with np.errstate(all="ignore"):
            try:
                r = func(*_plain(args), **_plain(kwargs))
            except np.linalg.LinAlgError:
                # a factorization refuses the zeros: the shapes are those of any
                # well-conditioned input, so ask again with identity matrices
                r = func(*_identities(args), **_plain(kwargs))
        # a view of an input placeholder stays a view of it
        return _wrap(r, views_of)

    # ----- reading values: PyTorch's errors -------------------------------------------
    def get(self):
        raise NotImplementedError(NO_DATA)

    def item(self, *args):
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")

    def tolist(self):
        raise NotImplementedError(NO_DATA)

    def tobytes(self, order="C"):
        raise NotImplementedError(NO_DATA)

    def __float__(self):
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")

    __int__ = __index__ = __complex__ = __float__

    def __bool__(self):
        # Reached only from inside an op (Tensor.__bool__ raises PyTorch's error first):
        # a branch on values such as "all finite?" or "any negative index?" takes the
        # case without special values, the one whose result shape holds for any data.
        return False

    def nonzero(self):
        raise _data_dependent("nonzero")

    def __getitem__(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        for i in idx:
            if isinstance(i, MetaArray) and i.dtype == np.bool_ and i.ndim:
                raise _data_dependent("indexing with a boolean mask")
        return super().__getitem__(index)

    # ----- writes: dropped (meta memory holds nothing) ---------------------------------
    def __setitem__(self, index, value):
        return None  # a meta tensor keeps no values: any write is dropped

    def fill(self, value):
        return None

    def sort(self, *args, **kwargs):
        return None

    def partition(self, *args, **kwargs):
        return None

    def put(self, *args, **kwargs):
        return None

    def copy(self, order="C"):
        return empty(self.shape, self.dtype)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        if not np.can_cast(self.dtype, dtype, casting):
            np.zeros((), self.dtype).astype(dtype, casting=casting)  # NumPy's casting error
        return empty(self.shape, dtype)


class _Namespace:
    """``module_for(meta)``: NumPy's functions, with every array result a placeholder."""

    def __getattr__(self, name):
        fn = getattr(np, name)
        if not callable(fn) or isinstance(fn, type):
            return fn

        def call(*args, **kwargs):
            if _any_meta(args) or _any_meta(kwargs.values()):
                # NumPy dispatches to MetaArray.__array_function__ (checks and wrapping)
                return _wrap(fn(*args, **kwargs))
            with np.errstate(all="ignore"):
                return _wrap(fn(*args, **kwargs))
        call.__name__ = name
        return call

    def zeros(self, shape, dtype=float, order="C", **_):
        return empty(shape, dtype, order)

    def ones(self, shape, dtype=float, order="C", **_):
        return empty(shape, dtype, order)

    def empty(self, shape, dtype=float, order="C", **_):
        return empty(shape, dtype, order)

    def full(self, shape, fill_value, dtype=None, order="C", **_):
        dt = np.asarray(fill_value).dtype if dtype is None else dtype
        return empty(shape, dt, order)


namespace = _Namespace()
