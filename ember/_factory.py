"""Tensor creation: from data, filled, ranges, and ``*_like`` twins."""
import builtins
import math
import warnings

import numpy as np

from ember import backend
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd._modes import routed
from ember.backend import dtypes as _dt

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "zeros", "ones", "full", "empty",
           "zeros_like", "ones_like", "full_like", "empty_like", "arange", "linspace",
           "logspace", "eye", "set_default_device", "get_default_device", "scalar_tensor",
           "is_tensor", "numel", "empty_strided", "tril_indices", "triu_indices"]

_default_device = [None]


def set_default_device(device):
    """Set the device that factories use when none is given."""
    _default_device[0] = backend.as_device(device)


def get_default_device():
    """The device factories use when none is given."""
    return _default_device[0] or backend.CPU


def _xp(device):
    device = backend.as_device(device) or _default_device[0]
    if device is None or device.type == "cpu":
        return np, None
    return backend.module_for(device), device


def _finish(arr, device, requires_grad):
    if device is not None and device.type != "cpu":
        arr = backend.to_device(arr, device)
    t = _make(arr, False)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _shape(size, kw=None, name="size"):
    """The shape from ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))``: ints only, as PyTorch."""
    if kw is not None:
        if size:
            raise TypeError(f"argument '{name}' given by name and position")
        size = (kw,)
    if len(size) == 1 and not isinstance(size[0], (int, np.integer)):
        size = size[0]
    if isinstance(size, Tensor):
        size = size.tolist() if size.dim() else (size,)
    if isinstance(size, (str, bytes)) or not hasattr(size, "__iter__"):
        raise TypeError(f"argument '{name}' must be tuple of ints, not {type(size).__name__}")
    shape = []
    for i, s in enumerate(size):
        if isinstance(s, builtins.bool) or not isinstance(s, (int, np.integer, Tensor)):
            raise TypeError(f"argument '{name}' must be tuple of ints, but found element of type "
                            f"{type(s).__name__} at pos {i}")
        shape.append(s.__index__())
    shape = tuple(shape)
    for s in shape:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(shape)}")
    return shape


def _infer_dtype(data, arr):
    """PyTorch's dtype for data given without one: Python floats are the default dtype."""
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        return _dt.from_numpy_dtype(arr.dtype)
    k = arr.dtype.kind
    if k == "f":
        return _dt.get_default_dtype()
    if k in "iu":
        return _dt.int64
    if k == "b":
        return _dt.bool
    if k == "c":
        return _dt.get_default_dtype().to_complex()
    raise TypeError(f"Could not infer dtype of {type(data).__name__}")


def _to_array(data):
    if isinstance(data, Tensor):
        return data._host()
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in data):
        return np.array([_to_array(x) for x in data])
    if hasattr(data, "__cuda_array_interface__"):
        return data.get()
    try:
        return np.asarray(data)
    except ValueError as e:
        raise ValueError(f"could not build a tensor from the data: {e}") from None


def _check_fits(data, arr, dt):
    """Python numbers that do not fit the requested integer dtype raise, as in PyTorch."""
    if isinstance(data, (np.ndarray, np.generic, Tensor)) or dt.is_floating_point or \
            dt.is_complex or dt is _dt.bool or arr.size == 0:
        return
    info = np.iinfo(dt.np)
    lo = -info.max if info.min == 0 else info.min  # unsigned types wrap negative numbers
    if arr.dtype.kind == "f" and not np.isfinite(arr).all() or \
            arr.dtype.kind in "fiu" and (arr.min() < lo or arr.max() > info.max):
        raise RuntimeError(f"value cannot be converted to type {dt.name} without overflow")


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor copying ``data`` (a number, nested lists, or an array)."""
    if data is None:
        raise RuntimeError("Could not infer dtype of NoneType")
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.clone().detach() or sourceTensor.clone().detach()."
                      "requires_grad_(True), rather than ember.tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
    arr = _to_array(data)
    if arr.dtype == object:
        if isinstance(data, builtins.int) or any(isinstance(x, builtins.int) and abs(x) >= 2 ** 63
                                                 for x in np.ravel(arr)):
            raise ValueError("Overflow when unpacking long long")
        raise TypeError(f"Could not infer dtype of {type(data).__name__}: the data holds "
                        "values of mixed types or ragged nested sequences")
    if arr.dtype == np.uint64 and not isinstance(data, (np.ndarray, np.generic)):
        raise ValueError("Overflow when unpacking long long")  # a Python int >= 2**63
    dt = _dt.to_dtype(dtype) if dtype is not None else _infer_dtype(data, arr)
    _check_fits(data, arr, dt)
    if dt in _dt._FEW_OPS or dt is _dt.bfloat16 or dt is _dt.complex32:
        from ember.ops.conversion import cast
        arr = np.ascontiguousarray(cast(arr, dt.np)).reshape(arr.shape)  # keeps 0-d 0-d
    else:
        arr = np.array(_dt.through_float32(arr, dt.np), dtype=dt.np, copy=True, order="C")
    if device is None and isinstance(data, Tensor):
        device = data.device
    return _finish(arr, backend.as_device(device) or _default_device[0], requires_grad)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False):
    """A 0-d tensor holding ``s`` (default float dtype)."""
    return tensor(float(s) if dtype is None else s, dtype=dtype, device=device,
                  requires_grad=requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like ``tensor`` but shares memory with ``data`` when it can (same dtype and device)."""
    dtype = _dt.to_dtype(dtype)
    device = backend.as_device(device)
    if isinstance(data, Tensor):
        t = data
        if dtype is not None and t.dtype is not dtype:
            t = t.to(dtype)
        if device is not None and t.device != device:
            t = t.to(device)
        return t
    if isinstance(data, np.ndarray) and (device is None or device.type == "cpu"):
        t = from_numpy(data)
        return t if dtype is None or dtype is t.dtype else t.to(dtype)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


def from_numpy(ndarray):
    """A tensor sharing memory with a NumPy array (changes to one show in the other)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    _dt.from_numpy_dtype(ndarray.dtype)
    return _make(ndarray, False)


def _negative_zero(v):
    """Whether the number ``v`` has a -0.0 part: ``full(..., -0.0)`` fills -0.0, as
    PyTorch's (``zeros`` would not)."""
    if not isinstance(v, (float, complex, np.floating, np.complexfloating)):
        return False
    c = complex(v)
    return math.copysign(1.0, c.real) < 0 or math.copysign(1.0, c.imag) < 0


def _filled(fill, size, dtype, device, requires_grad, default=None):
    shape = _shape(size)
    dt = _dt.to_dtype(dtype) or default or _dt.get_default_dtype()
    xp, device = _xp(device)
    if fill is None:
        arr = xp.empty(shape, dtype=dt.np)
    elif fill == 0 and not _negative_zero(fill):
        arr = xp.zeros(shape, dtype=dt.np)
    elif dt is _dt.complex32:
        from ember.backend.complex32 import from_complex
        arr = from_complex(xp.full(shape, fill, dtype=np.complex64))
    else:
        if not isinstance(fill, Tensor):
            from ember.ops._util import checked_fill
            fill = checked_fill(fill, np.dtype(dt.np), int(np.prod(shape)))
        arr = xp.full(shape, _dt.through_float32(fill, dt.np), dtype=dt.np)
    t = _make(arr, False)
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None, layout=None,
          **kw):
    """A tensor of zeros: ``zeros(2, 3)``, ``zeros((2, 3))`` or ``zeros(size=(2, 3))``."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("zeros", zeros, locals())
    return _into(_filled(0, _sized(size, kw, "zeros"), _out_dtype(dtype, out), device,
                         requires_grad), out)


def ones(*size, dtype=None, device=None, requires_grad=False, out=None, layout=None, **kw):
    """A tensor of ones."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("ones", ones, locals())
    return _into(_filled(1, _sized(size, kw, "ones"), _out_dtype(dtype, out), device,
                         requires_grad), out)


def empty(*size, dtype=None, device=None, requires_grad=False, out=None, layout=None,
          pin_memory=False, memory_format=None, **kw):
    """An uninitialised tensor."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("empty", empty, locals())
    return _into(_filled(None, _sized(size, kw, "empty"), _out_dtype(dtype, out), device,
                         requires_grad), out)


def _out_dtype(dtype, out):
    """With ``out=`` and no ``dtype``, the result takes ``out``'s dtype, as in PyTorch."""
    return out.dtype if dtype is None and out is not None else dtype


def _into(result, out, name=None):
    """PyTorch's ``out=``: write the result into ``out`` (resized if needed)."""
    if out is None:
        return result
    from ember.ops._util import write_out
    return write_out(result, out, name)


def _range_out_name(start, end):
    """torch's overloads of linspace/logspace that take a tensor ``start`` or ``end``
    resize a wrong-sized ``out`` without the resize warning the scalar ones give."""
    return "tensor_range" if isinstance(start, Tensor) or isinstance(end, Tensor) else None


def _sized(size, kw, fn):
    """``size`` given by keyword (``zeros(size=(2, 3))``) instead of by position; none
    at all is PyTorch's ``TypeError`` (a 0-d tensor is ``zeros(())``)."""
    if not kw:
        if not size:
            raise TypeError(f'{fn}() missing 1 required positional arguments: "size"')
        return size
    if set(kw) != {"size"}:
        raise TypeError(f"{fn}() got an unexpected keyword argument '{next(iter(kw))}'")
    if size:
        raise TypeError(f"{fn}(): argument 'size' given by name and position")
    return (kw["size"],)


def empty_strided(size, stride, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor (ember ignores ``stride`` and allocates contiguously)."""
    return _filled(None, (size,), dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False, out=None,
         layout=None):
    """A tensor filled with ``fill_value``; its dtype follows the value as PyTorch's does."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("full", full, locals())
    dtype = _out_dtype(dtype, out)
    if dtype is None:
        if isinstance(fill_value, Tensor):
            fill_value = fill_value.item()
        dtype = _dt._scalar_dtype(fill_value)
    return _into(_filled(fill_value, (size,) if isinstance(size, (int, np.integer)) else size,
                         dtype, device, requires_grad), out)


def _like(t, dtype, device):
    return (_dt.to_dtype(dtype) or t.dtype), (backend.as_device(device) or t.device)


@routed  # under vmap, batched as its input is (ember.func._function_rules)
def zeros_like(input, dtype=None, device=None, requires_grad=False, memory_format=None,
               layout=None):
    """Zeros with ``input``'s shape, dtype and device."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("zeros_like", zeros_like, locals())
    dt, dev = _like(input, dtype, device)
    return _filled(0, input.shape, dt, dev, requires_grad)


@routed  # under vmap, batched as its input is (ember.func._function_rules)
def ones_like(input, dtype=None, device=None, requires_grad=False, memory_format=None,
              layout=None):
    """Ones with ``input``'s shape, dtype and device."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("ones_like", ones_like, locals())
    dt, dev = _like(input, dtype, device)
    return _filled(1, input.shape, dt, dev, requires_grad)


@routed  # under vmap, batched as its input is (ember.func._function_rules)
def empty_like(input, dtype=None, device=None, requires_grad=False, memory_format=None,
               layout=None):
    """Uninitialised, with ``input``'s shape, dtype and device."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("empty_like", empty_like, locals())
    dt, dev = _like(input, dtype, device)
    return _filled(None, input.shape, dt, dev, requires_grad)


@routed  # under vmap, batched as its input is (ember.func._function_rules)
def full_like(input, fill_value, dtype=None, device=None, requires_grad=False,
              memory_format=None, layout=None):
    """Filled with ``fill_value``, with ``input``'s shape, dtype and device."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("full_like", full_like, locals())
    dt, dev = _like(input, dtype, device)
    return _filled(fill_value, input.shape, dt, dev, requires_grad)


def _num(x):
    return x.item() if isinstance(x, Tensor) else x


def arange(start=None, end=None, step=1, dtype=None, device=None, requires_grad=False,
           out=None, layout=None):
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 for int arguments:
    ``arange(end)``, ``arange(start, end, step)`` or ``arange(end=5)``."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("arange", arange, locals())
    start, end, step = _num(start), _num(end), _num(step)
    if end is None:
        start, end = 0, start
    elif start is None:
        start = 0
    for v in (start, end, step):
        if not isinstance(v, (int, float, np.number)):
            raise TypeError(f"arange() received an invalid combination of arguments - got "
                            f"{type(v).__name__}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not (np.isfinite(start) and np.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    dtype = _out_dtype(dtype, out)
    if dtype is None:
        floaty = any(isinstance(v, float) for v in (start, end, step))
        dtype = _dt.get_default_dtype() if floaty else _dt.int64
    dt = _dt.to_dtype(dtype)
    xp, device = _xp(device)
    if not (dt.is_floating_point or dt.is_complex or dt is _dt.bool):
        return _into(_finish(_int_arange(start, end, step, dt), device, requires_grad), out)
    n = builtins.max(0, int(np.ceil((end - start) / step)))
    # computed in float64 then cast, as PyTorch does, so float32 steps do not drift
    arr = (start + np.arange(n, dtype=np.float64) * step) if dt.is_floating_point or \
        any(isinstance(v, float) for v in (start, end, step)) else \
        np.arange(start, end, step, dtype=np.int64)
    arr = _dt.through_float32(arr, dt.np).astype(dt.np)  # PyTorch's double rounding
    return _into(_finish(arr, device, requires_grad), out)


def _int_arange(start, end, step, dt):
    """PyTorch's integer arange: start and step are truncated to integers first; the
    length is exact integer arithmetic for int64, from the float arguments otherwise."""
    xs, xe, xst = (builtins.int(np.trunc(v)) for v in (start, end, step))
    if dt is _dt.int64:
        if xst == 0:
            raise ValueError("step must be nonzero")
        q = xe - xs + xst - ((xst > 0) - (xst < 0))
        n = abs(q) // abs(xst) * (1 if (q >= 0) == (xst > 0) else -1)  # C's division
    else:
        n = int(np.ceil((float(end) - float(start)) / float(step)))
    return (xs + xst * np.arange(builtins.max(n, 0), dtype=np.int64)).astype(dt.np)


def _fma_line(start, end, step, steps, np_dt):
    """``start + step * i`` for the first half and ``end - step * (steps - 1 - i)`` for
    the rest, each rounded once (PyTorch's kernel compiles to fused multiply-adds)."""
    from fractions import Fraction
    s, e, d = Fraction(float(start)), Fraction(float(end)), Fraction(float(step))
    half = steps // 2
    vals = [float(s + d * i) if i < half else float(e - d * (steps - 1 - i))
            for i in range(steps)]
    return np.array(vals, dtype=np.float64).astype(np_dt)


def _check_steps(steps, name):
    """``steps`` as an int: torch's parser takes an int or a 0-d integer tensor only (a
    float or bool is refused, not truncated)."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer, Tensor)):
        raise TypeError(f"{name}() received an invalid combination of arguments - got steps "
                        f"of type {type(steps).__name__}, but expected an int")
    return steps.__index__() if isinstance(steps, Tensor) else steps


def _range_recorder(start, end, steps):
    """Under a capture, a range given a traced tensor (its ends, or its count as a 0-d
    integer tensor) is one node that runs again at their values: (capture, its args with
    a traced count read as a traced int); else None."""
    if not any(isinstance(v, Tensor) for v in (start, end, steps)):
        return None
    m = _mode_recorder((start, end, steps))
    if m is None:
        return None
    r = _traced_ints(steps)
    return m, (start, end, steps if r is None else r[1][0])


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False, out=None,
             layout=None):
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    if _mode_active[0] and out is None and (m := _range_recorder(start, end, steps)):
        return m[0].composite("linspace", linspace, m[1], {
            "dtype": dtype, "device": device, "requires_grad": requires_grad})
    out_name = _range_out_name(start, end)
    start, end = _num(start), _num(end)
    dt = _dt.to_dtype(_out_dtype(dtype, out)) or _dt.get_default_dtype()
    steps = _check_steps(steps, "linspace")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    integral = not (dt.is_floating_point or dt.is_complex)
    if integral and dt is not _dt.bool or dt in (_dt.float32, _dt.float64):
        # PyTorch converts start and end to the dtype first; an integer dtype steps in
        # float64, a float one in itself
        if integral:
            start, end = (builtins.int(np.trunc(v)) for v in (start, end))
        np_step = np.float64 if integral else np.dtype(dt.np).type
        step = (np_step(end) - np_step(start)) / np_step(steps - 1) if steps > 1 else 0.0
        if 1 < steps <= 4096:  # exact up to this size; beyond, rounded twice (rarely differs)
            arr = _fma_line(np_step(start), np_step(end), step, steps, np.float64)
            if integral:
                arr = np.trunc(arr)
            _, device = _xp(device)
            return _into(_finish(arr.astype(dt.np), device, requires_grad), out, out_name)
    if dt in (_dt.float16, _dt.bfloat16) and steps > 1:
        _, device = _xp(device)
        arr = _reduced_line(start, end, steps, dt.np)
        return _into(_finish(arr, device, requires_grad), out, out_name)
    # PyTorch fills the first half from start and the second half from end
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    idx = np.arange(steps, dtype=np.float64)
    half = steps // 2
    arr = np.where(idx < half, start + step * idx, end - step * (steps - 1 - idx))
    if steps == 1:
        arr = np.full(1, start, dtype=np.float64)
    if integral:  # complex values are kept as they are
        arr = np.trunc(arr)
    _, device = _xp(device)
    return _into(_finish(arr.astype(dt.np), device, requires_grad), out, out_name)


def _reduced_line(start, end, steps, np_dtype):
    """linspace's values in float16/bfloat16 (``np_dtype``) as PyTorch's CPU kernel
    computes them: start, end, the step and the indices in the dtype, each product and
    sum computed in float32 and rounded to the dtype, the first half from start and the
    second from end."""
    f = np.float32

    def rnd(a):
        return np.asarray(a, f).astype(np_dtype).astype(f)

    with np.errstate(over="ignore", invalid="ignore"):
        lo, hi = rnd(f(start)), rnd(f(end))
        step = rnd(rnd(hi - lo) / rnd(steps - 1))
        idx = np.arange(steps)
        from_start = rnd(lo + rnd(step * rnd(idx)))
        from_end = rnd(hi - rnd(step * rnd(steps - 1 - idx)))
    return np.where(idx < steps // 2, from_start, from_end).astype(np_dtype)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False,
             out=None, layout=None):
    """``base ** linspace(start, end, steps)``."""
    if _mode_active[0] and out is None and (m := _range_recorder(start, end, steps)):
        return m[0].composite("logspace", logspace, m[1] + (base,), {
            "dtype": dtype, "device": device, "requires_grad": requires_grad})
    dt = _dt.to_dtype(_out_dtype(dtype, out)) or _dt.get_default_dtype()
    out_name = _range_out_name(start, end)
    start, end = _num(start), _num(end)
    steps = _check_steps(steps, "logspace")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    if not (dt.is_floating_point or dt.is_complex or dt is _dt.bool):
        # PyTorch truncates start and end, and raises a float32 base to float64 powers
        start, end = (builtins.int(np.trunc(v)) for v in (start, end))
        base = float(np.float32(base))
    elif dt is _dt.float32:
        start, end = (float(np.float32(v)) for v in (start, end))
    if steps > 1:  # exponents in float64: the first half from start, the rest from end
        step = (float(end) - float(start)) / (steps - 1)
        i = np.arange(steps, dtype=np.float64)
        lin = np.where(i < steps // 2, float(start) + step * i,
                       float(end) - step * (steps - 1 - i))
    else:
        lin = np.full(builtins.max(steps, 0), float(start))
    _, device = _xp(device)
    # glibc's pow, as PyTorch's kernel calls, where NumPy's vectorised power may differ
    vals = np.array([math.pow(base, v) for v in lin.tolist()]) if lin.size <= 4096 else \
        np.power(base, lin)
    return _into(_finish(vals.astype(dt.np), device, requires_grad), out, out_name)


def eye(n, m=None, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    """A 2-D tensor with ones on the diagonal."""
    if _mode_active[0] and (rec := _mode_recorder(locals().values())) is not None:
        return rec.composite_locals("eye", eye, locals())
    dt = _dt.to_dtype(_out_dtype(dtype, out)) or _dt.get_default_dtype()
    xp, device = _xp(device)
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    t = _make(xp.eye(n, n if m is None else m, dtype=dt.np), False)
    if requires_grad:
        t.requires_grad_(True)
    return _into(t, out)


def _triangle_indices(name, row, col, dtype):
    """PyTorch's checks for ``tril_indices``/``triu_indices``: sizes, index dtypes."""
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    dt = _dt.to_dtype(dtype) or _dt.int64
    if dt not in (_dt.int64, _dt.int32):
        from ember.ops._util import scalar_type_name
        raise NotImplementedError(f'"{name}" not implemented for \'{scalar_type_name(dt)}\'')
    return dt


def tril_indices(row, col, offset=0, dtype=None, device=None):
    """Indices (2 x N, int64 or int32) of the lower triangle of a row x col matrix."""
    dt = _triangle_indices("tril_indices", row, col, dtype)
    r, c = np.tril_indices(row, offset, col)
    return _finish(np.stack([r, c]).astype(dt.np), backend.as_device(device), False)


def triu_indices(row, col, offset=0, dtype=None, device=None):
    """Indices (2 x N, int64 or int32) of the upper triangle of a row x col matrix."""
    dt = _triangle_indices("triu_indices", row, col, dtype)
    r, c = np.triu_indices(row, offset, col)
    return _finish(np.stack([r, c]).astype(dt.np), backend.as_device(device), False)


def is_tensor(obj):
    """True if ``obj`` is an ember Tensor."""
    return isinstance(obj, Tensor)


def numel(input):
    """Number of elements of ``input``."""
    return input.numel()


def _rebuild_tensor(array, requires_grad, device):
    t = _make(array, False)
    if device != "cpu":
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


# ----- Tensor.new_*: factories that default to the tensor's dtype and device ------------

def _new_like(self, dtype, device):
    return (_dt.to_dtype(dtype) or self.dtype), (backend.as_device(device) or self.device)


def _traced_ints(*values):
    from ember.ops._util import traced_ints  # (ember.ops imports this module)
    return traced_ints(*values)


def _size_arg(name, size, kwargs):
    """The size given positionally (``new_ones(2, 3)``, ``new_ones((2, 3))``) or as torch's
    keyword (``new_ones(size=(2, 3))``, a sequence), not both."""
    size_kw = kwargs.pop("size", None)
    if kwargs:
        raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if size_kw is None:
        return size
    if size:
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    if isinstance(size_kw, (int, np.integer)):
        raise TypeError(f"{name}(): argument 'size' must be tuple of ints, not int")
    return (size_kw,)


def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False, **size_kw):
    """Zeros of ``size`` with this tensor's dtype and device (unless given)."""
    size = _size_arg("new_zeros", size, size_kw)
    if _mode_active[0] and (r := _traced_ints(*size)) is not None:
        # a traced size: one node, its shape made again at the value
        return r[0].composite("new_zeros", _new_zeros, (self,) + r[1],
                              {"dtype": dtype, "device": device, "requires_grad": requires_grad})
    dt, dev = _new_like(self, dtype, device)
    return _filled(0, size, dt, dev, requires_grad)


def _new_ones(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False, **size_kw):
    """Ones of ``size`` with this tensor's dtype and device (unless given)."""
    size = _size_arg("new_ones", size, size_kw)
    if _mode_active[0] and (r := _traced_ints(*size)) is not None:
        # a traced size: one node, its shape made again at the value
        return r[0].composite("new_ones", _new_ones, (self,) + r[1],
                              {"dtype": dtype, "device": device, "requires_grad": requires_grad})
    dt, dev = _new_like(self, dtype, device)
    return _filled(1, size, dt, dev, requires_grad)


def _new_empty(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
               pin_memory=False, **size_kw):
    """An uninitialised tensor of ``size`` with this tensor's dtype and device."""
    dt, dev = _new_like(self, dtype, device)
    size = _size_arg("new_empty", size, size_kw)
    return _filled(None, size, dt, dev, requires_grad)


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
              layout=None, pin_memory=False):
    """``fill_value`` everywhere, with this tensor's dtype and device (unless given)."""
    if _mode_active[0] and (r := _traced_ints(size)) is not None:
        return r[0].composite("new_full", _new_full, (self, r[1][0], fill_value),
                              {"dtype": dtype, "device": device, "requires_grad": requires_grad})
    dt, dev = _new_like(self, dtype, device)
    size = (size,) if isinstance(size, (int, np.integer)) else size
    return _filled(fill_value, size, dt, dev, requires_grad)


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None,
                pin_memory=False):
    """A copy of ``data`` with this tensor's dtype and device (unless given)."""
    dt, dev = _new_like(self, dtype, device)
    return tensor(data, dtype=dt, device=dev, requires_grad=requires_grad)


Tensor.new_zeros = _new_zeros
Tensor.new_ones = _new_ones
Tensor.new_empty = _new_empty
Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor
