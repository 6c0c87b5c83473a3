"""``stft`` and ``istft`` (PyTorch's defaults), composed from ember ops: framing by
``unfold``, the transform from ``ember.fft``, and overlap-add by ``fold``, so gradients
reach the signal (and the window) without derivative code here."""
import warnings

import numpy as np

from ember import fft as _fft
from ember._tensor import Tensor, _make
from ember.ops._util import tensor_method

__all__ = ["stft", "istft"]


def _infinite_frames(frames, spec, onesided, norm):
    """Bins of real frames holding NaN or +-inf as the transform in extended reals gives
    them, written into ``spec`` (the frames' transforms, last dim the bins).

    An FFT's butterflies meet ``inf - inf`` where the sum itself has a sign, and spread a
    NaN to every bin (NumPy's pocketfft gives NaN there); torch's gives the extended-real
    sum: each component of bin k is the finite frame's value plus, over the non-finite
    x_n, x_n times that component of the twiddle: nothing where the twiddle is exactly 0
    (quarter turns), NaN for a NaN x_n, +-inf by the sign of the product, and NaN where
    those signs disagree.
    """
    frames = np.asarray(frames)
    if np.isfinite(frames).all():
        return
    n = frames.shape[-1]
    flat, out = frames.reshape(-1, n), spec.reshape(-1, spec.shape[-1])
    assert np.shares_memory(out, spec)  # written in place
    for f in np.flatnonzero(~np.isfinite(flat).all(-1)):
        frame = flat[f]
        finite = np.where(np.isfinite(frame), frame, 0).astype(np.float64)
        bins = (np.fft.rfft if onesided else np.fft.fft)(finite, norm=norm)
        where = np.flatnonzero(~np.isfinite(frame))
        for k in range(len(bins)):
            r = (k * where) % n
            parts = []
            for comp, zero, tw in ((0, (4 * r == n) | (4 * r == 3 * n), np.cos),
                                   (1, (r == 0) | (2 * r == n), lambda t: -np.sin(t))):
                s = np.sign(tw(2 * np.pi * r / n)) * np.sign(frame[where])
                s = s[~zero]
                part = bins[k].imag if comp else bins[k].real
                if len(s):
                    part = s[0] * np.inf if (s == s[0]).all() else np.nan
                parts.append(part)
            v = np.zeros((), out.dtype)
            v.real, v.imag = parts
            out[f, k] = v


def _padded_window(window, win_length, n_fft, like):
    """The window (ones when None) zero-padded on both sides to ``n_fft``, centred."""
    if window is None:
        w = _make(np.ones(win_length, dtype=like._data.real.dtype))
    else:
        if window.dim() != 1 or window.shape[0] != win_length:
            raise RuntimeError(f"stft: expected a 1D window tensor of size equal to "
                               f"win_length={win_length}, but got window with size "
                               f"{list(window.shape)}")
        w = window
    if win_length == n_fft:
        return w
    left = (n_fft - win_length) // 2
    from ember.nn.functional import pad
    return pad(w, (left, n_fft - win_length - left))


def _lengths(n_fft, hop_length, win_length, op):
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if hop <= 0:
        raise RuntimeError(f"{op}: expected hop_length > 0, but got hop_length={hop}")
    if win <= 0 or win > n_fft:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win}")
    return hop, win


@tensor_method()
def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None):
    """The short-time Fourier transform, as ``torch.stft``: ``(B?, freq, frames)``.

    Frames of ``n_fft`` samples, ``hop_length`` apart (default ``n_fft // 4``), are
    multiplied by ``window`` (zero-padded to ``n_fft``) and transformed; ``center``
    pads the signal by ``n_fft // 2`` on both sides with ``pad_mode`` first.
    """
    if return_complex is None:
        if not (input.is_complex() or (window is not None and window.is_complex())):
            raise RuntimeError("stft requires the return_complex parameter be given for real "
                               "inputs, and will further require that return_complex=True in "
                               "a future PyTorch release.")
        return_complex = True
    if input.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.dim()}D")
    hop, win = _lengths(n_fft, hop_length, win_length, "stft")
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied,which "
                      "is known to cause spectral leakage. Other windows such as "
                      "torch.hann_window or torch.hamming_window are recommended to reduce "
                      "spectral leakage.To suppress this warning and use a rectangular "
                      "window, explicitly set `window=torch.ones(n_fft, device=<device>)`.",
                      UserWarning, stacklevel=2)
    x = input if input.dim() == 2 else input.unsqueeze(0)
    if x._data.dtype.kind in "biu":
        x = x.float()
    if center:
        from ember.nn.functional import pad
        p = n_fft // 2
        x = pad(x.unsqueeze(1), (p, p), mode=pad_mode).squeeze(1)
    length = x.shape[-1]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"stft: expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop) * _padded_window(window, win, n_fft, x)
    complex_in = x.is_complex() or (window is not None and window.is_complex())
    if onesided is None:
        onesided = not complex_in
    elif onesided and complex_in:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = (_fft.rfft if onesided else _fft.fft)(frames, norm=norm)
    if not complex_in:
        _infinite_frames(frames._data, spec._data, onesided, norm)
    spec = spec.transpose(-1, -2)
    if input.dim() == 1:
        spec = spec.squeeze(0)
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch "
                      "release, stft will return complex tensors for all inputs, and "
                      "return_complex=False will raise an error.", UserWarning, stacklevel=2)
        from ember.ops.complex_numbers import view_as_real
        return view_as_real(spec)
    return spec


def _overlap_add(frames, hop, total):
    """Sum frames ``(B, n_frames, n_fft)`` placed ``hop`` apart into ``(B, total)``."""
    from ember.nn.functional import fold
    n_fft = frames.shape[-1]
    cols = frames.transpose(-1, -2)  # (B, n_fft, n_frames): fold's column layout
    out = fold(cols, (1, total), (1, n_fft), stride=(1, hop))
    return out.reshape(frames.shape[0], total)


@tensor_method()
def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """The inverse of :func:`stft` by weighted overlap-add, as ``torch.istft``."""
    if not isinstance(input, Tensor) or not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor matching the output "
                           "from stft with return_complex=True.")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex "
                           f"values, but got {input.dim()}D")
    hop, win = _lengths(n_fft, hop_length, win_length, "istft")
    spec = input if input.dim() == 3 else input.unsqueeze(0)
    n_freq, n_frames = spec.shape[-2], spec.shape[-1]
    if onesided is None:
        onesided = n_freq != n_fft
    if onesided:
        if n_fft // 2 + 1 != n_freq:
            raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of "
                               f"the input tensor to match n_fft / 2 + 1 when onesided=True, "
                               f"but got {n_freq}")
        if return_complex:
            raise RuntimeError("cannot have onesided output if window or input is complex")
    elif n_freq != n_fft:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft when onesided=False, but got {n_freq}")
    norm = "ortho" if normalized else "backward"
    cols = spec.transpose(-1, -2)  # (B, n_frames, freq)
    if onesided:
        frames = _fft.irfft(cols, n=n_fft, norm=norm)
    elif not return_complex:
        # a real signal from a two-sided spectrum: PyTorch reads only its first
        # n_fft // 2 + 1 rows as a one-sided (Hermitian) spectrum
        frames = _fft.irfft(cols[..., :n_fft // 2 + 1], n=n_fft, norm=norm)
    else:
        frames = _fft.ifft(cols, n=n_fft, norm=norm)
    w = _padded_window(window, win, n_fft, frames)
    total = n_fft + hop * (n_frames - 1)
    frames = frames * w
    if frames.is_complex():
        from ember.ops.complex_numbers import complex as _complex
        y = _complex(_overlap_add(frames.real, hop, total), _overlap_add(frames.imag, hop, total))
    else:
        y = _overlap_add(frames, hop, total)
    env = _overlap_add((w * w).reshape(1, 1, n_fft).expand(1, n_frames, n_fft), hop, total)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    elif center:
        end = total - n_fft // 2
    else:
        end = total
    end = min(end, total)
    y = y[:, start:end]
    env = env[:, start:end]
    if env.numel() and float(env.abs().min()) < 1e-11:
        raise RuntimeError("istft(...): window overlap add min: "
                           f"{float(env.abs().min()):.4g} (the window does not satisfy the "
                           "NOLA condition)")
    y = y / env
    if length is not None and y.shape[-1] < length:
        from ember.nn.functional import pad
        y = pad(y, (0, length - y.shape[-1]))
    return y if input.dim() == 3 else y.squeeze(0)
