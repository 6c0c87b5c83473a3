"""``ember.fft``: PyTorch's ``torch.fft`` namespace.

Every transform is one of three primitives in ``ember.ops.fft`` (complex-to-complex,
real-to-complex, complex-to-real) after the input is cut or zero-padded to the
requested sizes (``n=``/``s=``), so gradients flow through all of them. The Hermitian
transforms are conjugated real ones: ``hfft(x) = irfft(conj(x))`` and
``ihfft(x) = conj(rfft(x))``, each with the opposite normalization.
"""
import numpy as np

from ember import _factory
from ember._tensor import Tensor
from ember.backend import dtypes as _dt
from ember.ops._util import type_name
from ember.ops.fft import _DUAL, FftC2C, FftC2R, FftR2C, _zero_pad

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]


def _norm(norm):
    if norm is None:
        return "backward"
    if norm not in _DUAL:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    return norm


def _as_input(x, name, real=False, complex_=False):
    """``x`` as a float or complex tensor PyTorch's kernels accept (ints: default float)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"fft_{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    k = x._data.dtype.kind
    if k in "biu":
        x = x.to(_dt.get_default_dtype())
    elif x._data.dtype == np.float16:
        raise RuntimeError(f"fft_{name}: Unsupported dtype Half (ember computes FFTs in float32 "
                           "and float64; cast with .float())")
    if real and x._data.dtype.kind == "c":
        raise RuntimeError(f"{name} expects a real input tensor, but got "
                           f"{type_name(x._data.dtype)}")
    if complex_ and x._data.dtype.kind != "c":
        x = x.to(x.dtype.to_complex())
    return x


def _dims_and_sizes(x, s, dim, name, default_all=True):
    """The wrapped dims and the signal size along each (``None``: unchanged)."""
    nd = x._data.ndim
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [d + nd if d < 0 else d for d in dims]
        for d in dims:
            if not 0 <= d < max(nd, 1) or nd == 0:
                raise IndexError(f"Dimension out of range (expected to be in range of "
                                 f"[{-max(nd, 1)}, {max(nd, 1) - 1}], but got {d})")
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{name} dims must be unique")
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > nd:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {nd} "
                               "dimensions.")
        dims = list(range(nd - len(s), nd))
    else:
        dims = list(range(nd)) if default_all else [nd - 2, nd - 1]
    sizes = [None] * len(dims) if s is None else [None if n == -1 else int(n) for n in s]
    for n in sizes:
        if n is not None and n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return tuple(dims), sizes


def _resized(x, dims, sizes):
    for d, n in zip(dims, sizes):
        if n is not None:
            x = _zero_pad(x, d, n)
    return x


def _c2c(x, s, dim, norm, inverse, name, default_all=True):
    x = _as_input(x, name, complex_=True)
    dims, sizes = _dims_and_sizes(x, s, dim, name, default_all)
    return FftC2C.apply(_resized(x, dims, sizes), dims, _norm(norm), inverse)


def _r2c(x, s, dim, norm, name, default_all=True):
    x = _as_input(x, name, real=True)
    dims, sizes = _dims_and_sizes(x, s, dim, name, default_all)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    return FftR2C.apply(_resized(x, dims, sizes), dims, _norm(norm))


def _c2r(x, s, dim, norm, name, default_all=True):
    x = _as_input(x, name, complex_=True)
    dims, sizes = _dims_and_sizes(x, s, dim, name, default_all)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    last = sizes[-1] if sizes[-1] is not None else 2 * (x._data.shape[dims[-1]] - 1)
    if last < 1:
        raise RuntimeError(f"Invalid number of data points ({last}) specified")
    x = _resized(x, dims[:-1], sizes[:-1])
    x = _zero_pad(x, dims[-1], last // 2 + 1)
    return FftC2R.apply(x, dims, _norm(norm), last)


def _one(n, dim):
    return None if n is None else [n], [dim]


def fft(input, n=None, dim=-1, norm=None, *, out=None):
    """The 1-D discrete Fourier transform over ``dim`` (``n``: cut or zero-pad to it)."""
    s, d = _one(n, dim)
    return _out(_c2c(input, s, d, norm, False, "fft"), out)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of :func:`fft`."""
    s, d = _one(n, dim)
    return _out(_c2c(input, s, d, norm, True, "ifft"), out)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The FFT of a real signal: the ``n // 2 + 1`` non-negative frequencies."""
    s, d = _one(n, dim)
    return _out(_r2c(input, s, d, norm, "rfft"), out)


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of :func:`rfft`: a real signal of length ``n`` (default ``2 (m - 1)``)."""
    s, d = _one(n, dim)
    return _out(_c2r(input, s, d, norm, "irfft"), out)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The FFT of a Hermitian-symmetric signal given by its first half: a real result."""
    s, d = _one(n, dim)
    return _out(_c2r(_conj_in(input, "hfft"), s, d, _DUAL[_norm(norm)], "hfft"), out)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of :func:`hfft`: the one-sided inverse FFT of a real signal."""
    s, d = _one(n, dim)
    return _out(_r2c(input, s, d, _DUAL[_norm(norm)], "ihfft").conj_physical(), out)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The 2-D FFT (over the last two dims by default)."""
    return _out(_c2c(input, s, dim, norm, False, "fft2"), out)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The inverse of :func:`fft2`."""
    return _out(_c2c(input, s, dim, norm, True, "ifft2"), out)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The 2-D FFT of a real signal, one-sided in the last dim."""
    return _out(_r2c(input, s, dim, norm, "rfft2"), out)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The inverse of :func:`rfft2`."""
    return _out(_c2r(input, s, dim, norm, "irfft2"), out)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The 2-D FFT of a Hermitian-symmetric signal (real result)."""
    return _out(_c2r(_conj_in(input, "hfft2"), s, dim, _DUAL[_norm(norm)], "hfft2"), out)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The inverse of :func:`hfft2`."""
    return _out(_r2c(input, s, dim, _DUAL[_norm(norm)], "ihfft2").conj_physical(), out)


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    """The N-D FFT over ``dim`` (all dims, or the last ``len(s)``, by default)."""
    return _out(_c2c(input, s, dim, norm, False, "fftn"), out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of :func:`fftn`."""
    return _out(_c2c(input, s, dim, norm, True, "ifftn"), out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The N-D FFT of a real signal, one-sided in the last transformed dim."""
    return _out(_r2c(input, s, dim, norm, "rfftn"), out)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of :func:`rfftn`."""
    return _out(_c2r(input, s, dim, norm, "irfftn"), out)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The N-D FFT of a Hermitian-symmetric signal (real result)."""
    return _out(_c2r(_conj_in(input, "hfftn"), s, dim, _DUAL[_norm(norm)], "hfftn"), out)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of :func:`hfftn`."""
    return _out(_r2c(input, s, dim, _DUAL[_norm(norm)], "ihfftn").conj_physical(), out)


def _conj_in(x, name):
    return _as_input(x, name, complex_=True).conj_physical()


def _out(result, out):
    if out is None:
        return result
    from ember.ops._util import write_out
    return write_out(result, out)


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False,
            out=None):
    """The sample frequencies of an ``n``-point FFT: ``[0, 1, ..., -1] / (d n)``."""
    k = np.arange(n)
    vals = np.where(k < (n + 1) // 2, k, k - n)
    return _out(_freqs(vals, n, d, dtype, device, requires_grad), out)


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False,
             out=None):
    """The non-negative sample frequencies of an ``n``-point :func:`rfft`."""
    vals = np.arange(n // 2 + 1)
    return _out(_freqs(vals, n, d, dtype, device, requires_grad), out)


def _freqs(k, n, d, dtype, device, requires_grad):
    dt = _dt.to_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    # as PyTorch: the integer frequencies times 1 / (d n), in the result dtype
    vals = k.astype(dt.np) * dt.np.type(1.0 / (n * d))
    return _factory.tensor(vals, dtype=dt, device=device, requires_grad=requires_grad)


def fftshift(input, dim=None):
    """Move the zero frequency to the centre of each ``dim`` (all dims by default)."""
    return _shift(input, dim, lambda n: n // 2)


def ifftshift(input, dim=None):
    """The inverse of :func:`fftshift`."""
    return _shift(input, dim, lambda n: -(n // 2))


def _shift(x, dim, amount):
    nd = x._data.ndim
    dims = list(range(nd)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return x.clone()
    shifts = [amount(x._data.shape[d]) for d in dims]
    return x.roll(shifts, dims)

