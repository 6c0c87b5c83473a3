"""A CPU test double of CuPy, for checking that ember's ``cuda`` device is device-generic.

Putting ``tests/fake_cupy`` first on ``sys.path`` makes ``import cupy`` find this module.
Its :class:`ndarray` holds a NumPy array but is a distinct type that behaves as CuPy's
does where it matters to a framework written on NumPy:

- implicit conversion to NumPy is refused (``np.asarray(x)``, ``x.__array__()``,
  ``x.tolist`` aside) with CuPy's ``TypeError``; ``x.get()``/``cupy.asnumpy(x)`` are the
  explicit copies to the host and are counted in :data:`transfers`;
- NumPy functions and ufuncs called on it dispatch to this module
  (``__array_function__``/``__array_ufunc__``), as CuPy's do, and refuse host arrays
  among their arguments (CuPy's ``Unsupported type`` error);
- reductions give 0-d arrays, never NumPy scalars;
- functions CuPy does not have (:data:`MISSING`) raise as ``cupy`` would.

The arithmetic itself is NumPy's, so results can be compared with the CPU bit for bit.
"""
import contextlib
import threading
import types
import weakref

import numpy as _np

__version__ = "13.0.0-fake"
FAKE = True

# explicit device<->host copies, by direction; ``trace`` records the stacks of host
# copies while a list is installed there (see :func:`record_host_copies`)
transfers = {"to_host": 0, "to_device": 0, "scalar_reads": 0}
_trace = threading.local()

# NumPy names that the ``cupy`` namespace lacks (the ones a NumPy framework might reach)
MISSING = frozenset({
    "frompyfunc", "nditer", "ndindex", "ndenumerate", "busday_count", "datetime_data",
    "char", "rec", "ma", "polynomial", "memmap", "fromstring", "genfromtxt", "loadtxt",
    "object_", "str_", "bytes_", "void", "longdouble", "clongdouble", "float128",
    "complex256", "nested_iters", "shares_memory", "may_share_memory", "setbufsize",
    "ndarray_subclass", "asmatrix", "matrix", "recarray", "chararray", "lib_npyio",
    "emath", "format_float_positional", "format_float_scientific", "frombuffer",
    "from_dlpack_numpy", "iterable", "put_along_axis_numpy", "vecdot", "matvec", "vecmat",
})
_HOST_OK = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray", "copy",
                      "asfortranarray", "array_equal"})
_LIVE = weakref.WeakValueDictionary()  # id(numpy array) -> its wrapper (identity kept)


def _host_copy(direction):
    transfers[direction] += 1
    log = getattr(_trace, "log", None)
    if log is not None and direction == "to_host":
        import traceback
        log.append("".join(traceback.format_stack(limit=12)[:-2]))


@contextlib.contextmanager
def record_host_copies():
    """Collect a stack for every device-to-host copy made inside the block."""
    prev = getattr(_trace, "log", None)
    _trace.log = []
    try:
        yield _trace.log
    finally:
        _trace.log = prev


def _wrap(x):
    if type(x) is _np.ndarray:
        w = _LIVE.get(id(x))
        if w is not None and w._a is x:
            return w
        w = ndarray.__new__(ndarray)
        w._a = x
        _LIVE[id(x)] = w
        return w
    if isinstance(x, _np.generic):
        return _wrap(_np.asarray(x))
    if isinstance(x, tuple):
        items = [_wrap(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


def _unwrap(x, host_ok=False):
    if type(x) is ndarray:
        return x._a
    if isinstance(x, _np.ndarray) and not host_ok:
        raise TypeError(f"Unsupported type {type(x)}")
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_unwrap(v, host_ok) for v in x)
    if isinstance(x, ndarray):
        return x._a
    return x


def _call(fn, name, args, kwargs):
    ok = name in _HOST_OK
    a = [_unwrap(v, ok) for v in args]
    k = {key: _unwrap(v, ok) for key, v in kwargs.items()}
    return _wrap(fn(*a, **k))


class Device:
    """``cupy.cuda.Device``: one (fake) GPU, usable as a context manager."""

    def __init__(self, device=None):
        self.id = 0 if device is None else int(device)
        if not 0 <= self.id < runtime.getDeviceCount():
            raise RuntimeError("cudaErrorInvalidDevice: invalid device ordinal")

    def use(self):
        """Make this the current device."""
        _current[0] = self.id

    def synchronize(self):
        """Wait for the device (nothing to wait for here)."""

    def __enter__(self):
        self._prev = _current[0]
        _current[0] = self.id
        return self

    def __exit__(self, *exc):
        _current[0] = self._prev
        return False

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return self.id

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


_current = [0]


class _Memory:
    def __init__(self, arr):
        self.ptr = arr.__array_interface__["data"][0]


class ndarray:
    """A fake device array: NumPy data behind a type NumPy will not convert implicitly."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        self._a = _np.empty(shape, dtype, order=order)
        _LIVE[id(self._a)] = self

    # --- what CuPy refuses -------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use "
                        "`.get()` to construct a NumPy array explicitly.")

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self)))

    # --- explicit copies ---------------------------------------------------------------
    def get(self, stream=None, order="C", out=None, blocking=True):
        """A NumPy copy of the data (device to host; one value counts as a scalar read)."""
        _host_copy("to_host" if self._a.size > 1 else "scalar_reads")
        if out is not None:
            out[...] = self._a
            return out
        return _np.array(self._a, order=order)

    def tolist(self):
        """Python lists of the values (through the host)."""
        _host_copy("to_host")
        return self._a.tolist()

    def item(self, *args):
        """One value as a Python number (through the host)."""
        _host_copy("scalar_reads")
        return self._a.item(*args)

    def set(self, arr, stream=None):
        """Copy host array ``arr`` in."""
        _host_copy("to_device")
        self._a[...] = arr

    # --- attributes ----------------------------------------------------------------------
    @property
    def device(self):
        return Device(0)

    @property
    def data(self):
        return _Memory(self._a)

    @property
    def __cuda_array_interface__(self):
        d = dict(self._a.__array_interface__)
        d["version"] = 3
        return d

    @property
    def base(self):
        return _wrap(self._a.base) if isinstance(self._a.base, _np.ndarray) else None

    @property
    def T(self):
        return _wrap(self._a.T)

    @property
    def real(self):
        return _wrap(self._a.real)

    @property
    def imag(self):
        return _wrap(self._a.imag)

    @property
    def shape(self):
        return self._a.shape

    @shape.setter
    def shape(self, value):
        self._a.shape = value

    @property
    def strides(self):
        return self._a.strides

    @property
    def flat(self):
        raise NotImplementedError("cupy.ndarray.flat is not an iterator in ember's tests")

    def __getattr__(self, name):
        if name.startswith("__") or name in ("ctypes", "tobytes", "tofile", "dumps", "dump"):
            # the buffer protocols would hand NumPy the data behind CuPy's back
            raise AttributeError(f"'cupy.ndarray' object has no attribute '{name}'")
        attr = getattr(self._a, name)
        if callable(attr):
            def method(*args, **kwargs):
                return _call(attr, name, args, kwargs)
            return method
        return _wrap(attr)

    def __setattr__(self, name, value):
        if name in ("_a",):
            object.__setattr__(self, name, value)
        else:
            setattr(self._a, name, value)

    # --- scalars -------------------------------------------------------------------------
    def __bool__(self):
        _host_copy("scalar_reads")
        return bool(self._a)

    def __float__(self):
        _host_copy("scalar_reads")
        return float(self._a)

    def __int__(self):
        _host_copy("scalar_reads")
        return int(self._a)

    def __complex__(self):
        _host_copy("scalar_reads")
        return complex(self._a)

    def __index__(self):
        raise TypeError("only integer scalar arrays can be converted to a scalar index")

    def __len__(self):
        return len(self._a)

    def __repr__(self):
        return "fake_cupy." + repr(self._a)

    __str__ = __repr__

    def __copy__(self):
        return _wrap(self._a.copy())

    def __deepcopy__(self, memo):
        return _wrap(self._a.copy())

    def __reduce__(self):
        raise TypeError("pickling a cupy.ndarray copies it to the host; call .get() first")

    # --- indexing ------------------------------------------------------------------------
    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key)])

    def __setitem__(self, key, value):
        self._a[_unwrap(key)] = _unwrap(value)

    # --- NumPy dispatch ------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if "out" in kwargs:
            kwargs["out"] = tuple(_unwrap(o) for o in kwargs["out"])
        if "where" in kwargs:
            raise TypeError("Wrong arguments {'where': ...}")  # CuPy's ufuncs take no where=
        fn = getattr(ufunc, method)
        # a NumPy scalar on the other side of an operator reaches here as a 0-d array
        return _wrap(fn(*[i if type(i) is _np.ndarray and i.ndim == 0 else _unwrap(i)
                          for i in inputs], **kwargs))

    def __array_function__(self, func, types_, args, kwargs):
        name = func.__name__
        if name in MISSING or func.__module__.startswith(("numpy.ma", "numpy.char")):
            return NotImplemented
        if name in ("shares_memory", "may_share_memory"):
            return NotImplemented
        return _call(func, name, args, kwargs)


def _binop(name):
    def op(self, other):
        if isinstance(other, _np.ndarray):
            raise TypeError(f"Unsupported type {type(other)}")
        r = getattr(self._a, name)(_unwrap(other))
        return self if r is self._a else _wrap(r)
    op.__name__ = name
    return op


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
              "or", "xor", "lshift", "rshift", "lt", "le", "gt", "ge", "eq", "ne", "divmod"):
    for _fmt in ("__%s__", "__r%s__", "__i%s__"):
        _dunder = _fmt % _name
        if hasattr(_np.ndarray, _dunder):
            setattr(ndarray, _dunder, _binop(_dunder))
for _dunder in ("__neg__", "__pos__", "__abs__", "__invert__"):
    setattr(ndarray, _dunder, (lambda d: lambda self: _wrap(getattr(self._a, d)()))(_dunder))


class _Ufunc:
    """A CuPy ufunc: calls and the reduce/accumulate/outer/at methods, on device arrays."""

    def __init__(self, uf):
        self._uf = uf
        self.__name__ = uf.__name__
        self.nin, self.nout, self.types = uf.nin, uf.nout, uf.types

    def __call__(self, *args, **kwargs):
        return _call(self._uf, self.__name__, args, kwargs)

    def __getattr__(self, method):
        fn = getattr(self._uf, method)
        if not callable(fn):
            return fn
        return lambda *a, **k: _call(fn, method, a, k)


def _function(name, fn):
    def f(*args, **kwargs):
        return _call(fn, name, args, kwargs)
    f.__name__ = name
    f.__doc__ = getattr(fn, "__doc__", None)
    return f


class _Namespace(types.ModuleType):
    """A NumPy submodule (``linalg``, ``fft``) seen through the device array type."""

    def __init__(self, name, src):
        super().__init__(name)
        self._src = src

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _lookup(self._src, name, self)


def _lookup(src, name, owner):
    if name in MISSING:
        raise AttributeError(f"module 'cupy' has no attribute '{name}'")
    obj = getattr(src, name)
    if isinstance(obj, _np.ufunc):
        out = _Ufunc(obj)
    elif isinstance(obj, types.ModuleType):
        out = _Namespace(f"{owner.__name__}.{name}", obj)
    elif isinstance(obj, type) or not callable(obj):
        out = obj  # dtypes, constants, finfo/iinfo: CuPy borrows NumPy's
    else:
        out = _function(name, obj)
    setattr(owner, name, out)
    return out


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _lookup(_np, name, _MODULE)


import sys as _sys  # noqa: E402

_MODULE = _sys.modules[__name__]


def asarray(a, dtype=None, order=None, *, blocking=False):
    """A device array of ``a`` (copied from the host when it is a NumPy array)."""
    if type(a) is ndarray:
        return a if dtype is None or a.dtype == dtype else a.astype(dtype)
    if isinstance(a, _np.ndarray) or isinstance(a, (list, tuple)):
        _host_copy("to_device")
    return _wrap(_np.array(_unwrap(a, True), dtype=dtype, order=order or "K", copy=True)
                 if isinstance(a, _np.ndarray) else _np.asarray(_unwrap(a, True), dtype=dtype))


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    """A device array copied from ``obj``."""
    if type(obj) is not ndarray:
        _host_copy("to_device")
    return _wrap(_np.array(_unwrap(obj, True), dtype=dtype, copy=True, order=order,
                           ndmin=ndmin))


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    """A host copy of ``a`` (device to host)."""
    if type(a) is ndarray:
        return a.get(order=order, out=out)
    return _np.asarray(a, order=order)


def get_array_module(*args):
    """This module when any argument is a device array, else NumPy."""
    return _MODULE if any(type(a) is ndarray for a in args) else _np


class _Pool:
    def free_all_blocks(self):
        """Return cached memory (none is cached here)."""

    def used_bytes(self):
        return 0

    def total_bytes(self):
        return 0


_pool = _Pool()


def get_default_memory_pool():
    """The (fake) device memory pool."""
    return _pool


def get_default_pinned_memory_pool():
    """The (fake) pinned host memory pool."""
    return _pool


from cupy import cuda, random  # noqa: E402,F401
from cupy.cuda import runtime  # noqa: E402

lib = _Namespace("cupy.lib", _np.lib)
linalg = _Namespace("cupy.linalg", _np.linalg)
fft = _Namespace("cupy.fft", _np.fft)
