"""``complex32`` (``chalf``): complex numbers with float16 parts.

NumPy has no complex32, so ember stores one as a NumPy structured element of two
float16 fields, ``real`` then ``imag``: 4 bytes, PyTorch's memory layout, so views,
indexing and copies work on it directly and ``view(float16)`` shows the parts. Math
runs in complex64 (exact for float16 parts) and rounds each part back to float16,
as PyTorch's CPU kernels for ComplexHalf do. Only the ops PyTorch's CPU build has for
ComplexHalf compute (those whose class says ``complex32_math = True``); the rest raise
PyTorch's NotImplementedError.
"""
import numpy as np

NP = np.dtype([("real", "<f2"), ("imag", "<f2")])
_C64 = np.dtype(np.complex64)



def is_c32(arr):
    """True for a complex32 array (host arrays only: CuPy has no structured dtypes)."""
    if type(arr) is not np.ndarray:
        return False
    dt = arr.dtype
    return dt.kind == "V" and dt == NP


def to_c64(arr):
    """complex32 values as complex64 (exact)."""
    xp = _xp(arr)
    out = xp.empty(arr.shape, _C64)
    out.real = arr["real"]
    out.imag = arr["imag"]
    return out


def from_complex(arr):
    """Numbers (complex or real, any precision) as complex32. Wider parts round to
    float32 first, then to float16, as PyTorch's conversion does (a double rounding)."""
    xp = _xp(arr)
    out = xp.empty(arr.shape, NP)
    if arr.dtype.kind in "fc" and arr.dtype.itemsize > (8 if arr.dtype.kind == "c" else 4):
        arr = arr.astype(np.complex64 if arr.dtype.kind == "c" else np.float32)
    if arr.dtype.kind == "c":
        out["real"] = arr.real
        out["imag"] = arr.imag
    else:
        out["real"] = arr.astype(np.float64) if arr.dtype.kind in "iub" else arr
        out["imag"] = 0
    return out


def _xp(arr):
    from ember.backend import array_module
    return array_module(arr)


def involved(arrays, params):
    """True when an array argument (or a dtype parameter) is complex32."""
    return any(is_c32(a) or a is NP for a in arrays) or \
        any(v is NP or is_c32(v) for v in params.values())


def refuse(cls):
    name = getattr(cls, "_op_name", cls.__name__).lower()
    return NotImplementedError(f'"{name}" not implemented for \'ComplexHalf\'')


def run(self, cls, args, arrays, params):
    """Run primitive ``cls`` on complex32 operands: in complex64 when PyTorch has the op
    for ComplexHalf (results whose dtype is complex32 by PyTorch's promotion are rounded
    back, real ones to float16), else PyTorch's NotImplementedError. Whether PyTorch has
    the op is the op's own record: its class attribute ``complex32_math``."""
    if not getattr(cls, "complex32_math", False):
        raise refuse(cls)
    from ember._tensor import Tensor
    from ember.backend import dtypes as _dt
    wide = [to_c64(a) if is_c32(a) else a for a in arrays]
    kw = {k: (_C64 if v is NP else to_c64(v) if is_c32(v) else v) for k, v in params.items()}
    target = [v for v in params.values() if isinstance(v, np.dtype)]
    out = self.forward(*wide, **kw)
    if target:  # an explicit dtype (a conversion): complex32 only where asked
        half = any(t is NP for t in target)
    else:
        flat = [v for a in args for v in (a if isinstance(a, (list, tuple)) else (a,))]
        operands = [a for a in flat if isinstance(a, (Tensor, int, float, complex, bool))]
        half = _dt.result_type_of(*operands) is _dt.complex32 if operands else True
    if not half:
        return out
    return tuple(_narrow(o) for o in out) if isinstance(out, tuple) else _narrow(out)


def _narrow(o):
    dt = getattr(o, "dtype", None)
    if dt is None:
        return o
    if dt.kind == "c":
        return from_complex(o)
    if dt == np.float32:
        return o.astype(np.float16)
    return o
