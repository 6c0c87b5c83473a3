"""``ember.signal.windows``: PyTorch's ``torch.signal.windows`` (SciPy's definitions),
and the window functions PyTorch keeps at its top level (``hann_window``...).

Windows are constants (no gradient flows into their parameters), computed in float64
with NumPy and rounded once to the requested dtype. ``sym=False`` (or
``periodic=True`` for the top-level ones) gives the periodic window used for spectral
analysis: the symmetric window one sample longer, without its last sample.
"""
import math

import numpy as np

from ember import _factory
from ember.backend import dtypes as _dt

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _finish(w, dtype, device, requires_grad, name):
    dt = _dt.to_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if not dt.is_floating_point:
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dt}")
    return _factory.tensor(np.asarray(w, dtype=np.float64).astype(dt.np), dtype=dt,
                           device=device, requires_grad=requires_grad)


def _window(name, M, sym, dtype, device, requires_grad, make):
    """``make(n, M)`` over the sample positions ``n``, periodic when not ``sym``."""
    if not isinstance(M, int) or M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if dtype is not None and not _dt.to_dtype(dtype).is_floating_point:
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")
    if M == 0:
        return _finish(np.zeros(0), dtype, device, requires_grad, name)
    if M == 1:
        return _finish(np.ones(1), dtype, device, requires_grad, name)
    full = M if sym else M + 1
    w = make(np.arange(full, dtype=np.float64), full)
    return _finish(w[:M], dtype, device, requires_grad, name)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """``sum_k (-1)^k a_k cos(2 pi k n / (M - 1))``."""
    if not hasattr(a, "__iter__"):
        raise TypeError("Coefficients must be a list/tuple")
    if not len(a):
        raise ValueError("Coefficients cannot be empty")
    coeffs = list(a)

    def make(n, m):
        fac = -math.pi + 2 * math.pi * n / (m - 1)
        return sum(c * np.cos(k * fac) for k, c in enumerate(coeffs))
    return _window("general_cosine", M, sym, dtype, device, requires_grad, make)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """``alpha - (1 - alpha) cos(2 pi n / (M - 1))``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, device=device,
                           requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hamming window."""
    return general_hamming(M, sym=sym, dtype=dtype, device=device, requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window."""
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The minimum 4-term Blackman-Harris window (Nuttall's)."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, device=device, requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular window that is zero at both ends."""
    return _window("bartlett", M, sym, dtype, device, requires_grad,
                   lambda n, m: 1 - np.abs(2 * n / (m - 1) - 1))


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """``sin(pi (n + 1/2) / M)``."""
    return _window("cosine", M, sym, dtype, device, requires_grad,
                   lambda n, m: np.sin(math.pi * (n + 0.5) / m))


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """``exp(-|n - center| / tau)`` (``center`` defaults to the middle)."""
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")

    def make(n, m):
        c = (m - 1) / 2 if center is None else center
        return np.exp(-np.abs(n - c) / tau)
    return _window("exponential", M, sym, dtype, device, requires_grad, make)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None,
             requires_grad=False):
    """``exp(-(n - (M - 1) / 2)^2 / (2 std^2))``."""
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    return _window("gaussian", M, sym, dtype, device, requires_grad,
                   lambda n, m: np.exp(-((n - (m - 1) / 2) ** 2) / (2 * std * std)))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None,
           requires_grad=False):
    """``I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta)`` with ``a = (M - 1) / 2``."""
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")

    def make(n, m):
        a = (m - 1) / 2
        return np.i0(beta * np.sqrt(np.clip(1 - ((n - a) / a) ** 2, 0, None))) / np.i0(beta)
    return _window("kaiser", M, sym, dtype, device, requires_grad, make)


# ----- PyTorch's top-level window functions (periodic by default) ------------------------
def _top(name, window_length, dtype, device, requires_grad, make, periodic):
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    dt = _dt.to_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dt}")
    return _window(name, window_length, not periodic, dt, device, requires_grad, make)


def _cosines(*a):
    def make(n, m):
        fac = 2 * math.pi * n / (m - 1)
        return sum((-1) ** k * c * np.cos(k * fac) for k, c in enumerate(a))
    return make


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                pin_memory=False, requires_grad=False):
    """The Hann window (periodic by default), as ``torch.hann_window``."""
    return _top("hann_window", window_length, dtype, device, requires_grad,
                _cosines(0.5, 0.5), periodic)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, pin_memory=False, requires_grad=False):
    """``alpha - beta cos(2 pi n / (N - 1))`` (periodic by default)."""
    return _top("hamming_window", window_length, dtype, device, requires_grad,
                _cosines(alpha, beta), periodic)


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """The Blackman window (periodic by default)."""
    return _top("blackman_window", window_length, dtype, device, requires_grad,
                _cosines(0.42, 0.5, 0.08), periodic)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    pin_memory=False, requires_grad=False):
    """The triangular window (periodic by default)."""
    return _top("bartlett_window", window_length, dtype, device, requires_grad,
                lambda n, m: 1 - np.abs(2 * n / (m - 1) - 1), periodic)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, pin_memory=False, requires_grad=False):
    """The Kaiser window with shape parameter ``beta`` (periodic by default)."""
    def make(n, m):
        a = (m - 1) / 2
        return np.i0(beta * np.sqrt(np.clip(1 - ((n - a) / a) ** 2, 0, None))) / np.i0(beta)
    return _top("kaiser_window", window_length, dtype, device, requires_grad, make, periodic)
