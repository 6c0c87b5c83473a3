"""Discrete Fourier transforms as primitives: complex-to-complex, real-to-complex
(one-sided) and complex-to-real, each over a set of dims.

Forward runs ``numpy.fft`` and casts back to the input's precision (float32 and
complex64 give complex64, as PyTorch). Backward is the adjoint transform, written in
these same primitives: the adjoint of a transform with norm ``"backward"`` is the
opposite transform with norm ``"forward"`` (and ``"ortho"`` is its own dual).
"""
import numpy as np

from ember.autograd.node import Primitive
from ember.ops import _batch, _jvp

_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
_COMPLEX_OF = {np.dtype(np.float32): np.complex64, np.dtype(np.complex64): np.complex64,
               np.dtype(np.float64): np.complex128, np.dtype(np.complex128): np.complex128}


def _complex_dtype(x):
    return _COMPLEX_OF[x.dtype]


class FftC2C(Primitive):
    """``fftn`` (or ``ifftn`` when ``inverse``) of a complex array over ``dims``."""

    def forward(self, x, dims, norm, inverse):
        self.args = (dims, norm, inverse)
        f = np.fft.ifftn if inverse else np.fft.fftn
        return f(x, axes=dims, norm=norm).astype(_complex_dtype(x), copy=False)

    def backward(self, gy):
        dims, norm, inverse = self.args
        return FftC2C.apply(gy, dims, _DUAL[norm], not inverse), None, None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(1)


class FftR2C(Primitive):
    """``rfftn`` of a real array: the last of ``dims`` keeps ``n // 2 + 1`` frequencies."""

    def forward(self, x, dims, norm):
        self.args = (dims, norm, x.shape[dims[-1]])
        return np.fft.rfftn(x, axes=dims, norm=norm).astype(_complex_dtype(x), copy=False)

    def backward(self, gy):
        dims, norm, n = self.args
        # the adjoint of keeping half the spectrum is padding it back with zeros; the
        # gradient of a real input is the real part
        full = _zero_pad(gy, dims[-1], n)
        return FftC2C.apply(full, dims, _DUAL[norm], True).real, None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(1)


class FftC2R(Primitive):
    """``irfftn`` of a one-sided spectrum: the last of ``dims`` grows to ``n``."""

    def forward(self, x, dims, norm, n):
        self.args = (dims, norm, n, x.shape[dims[-1]])
        s = [x.shape[d] for d in dims[:-1]] + [n]
        out = np.fft.irfftn(x, s=s, axes=dims, norm=norm)
        return out.astype(np.float32 if x.dtype == np.complex64 else np.float64, copy=False)

    def backward(self, gy):
        dims, norm, n, m = self.args
        g = FftR2C.apply(gy, dims, _DUAL[norm])
        # the frequencies that stand for two (themselves and their mirror image) in the
        # real signal receive twice the gradient
        doubled = n - m
        if doubled > 0:
            w = np.ones(m, dtype=gy._data.dtype)
            w[1:1 + doubled] = 2
            shape = [1] * g._data.ndim
            shape[dims[-1]] = m
            g = g * _array_tensor(w.reshape(shape))
        return g, None, None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(1)


def _array_tensor(a):
    from ember._tensor import _make
    return _make(a)


def _zero_pad(t, dim, n):
    """``t`` padded with zeros at the end of ``dim`` to length ``n`` (or cut to it)."""
    size = t._data.shape[dim]
    if size == n:
        return t
    if size > n:
        return t.narrow(dim, 0, n)
    from ember.ops.join import cat
    shape = list(t._data.shape)
    shape[dim] = n - size
    return cat([t, _array_tensor(np.zeros(shape, dtype=t._data.dtype))], dim)
