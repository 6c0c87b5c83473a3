"""Window functions (torch.*_window and torch.signal.windows) and stft/istft against torch,
values and gradients."""
import warnings

import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 40))
SIGNAL = ["cosine", "exponential", "gaussian", "general_hamming", "hann", "hamming", "blackman",
          "bartlett", "kaiser", "nuttall"]
TOP = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


@pytest.mark.parametrize("name", SIGNAL)
def test_signal_windows(name):
    for M in (0, 1, 2, 5, 8):
        for sym in (True, False):
            for dt in ("float32", "float64"):
                e = getattr(ember.signal.windows, name)(M, sym=sym, dtype=getattr(ember, dt))
                t = getattr(torch.signal.windows, name)(M, sym=sym, dtype=getattr(torch, dt))
                assert e.dtype.name == dt
                np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-7)
    kw = {"exponential": {"tau": 2.5, "center": 1.0, "sym": False}, "gaussian": {"std": 0.7},
          "kaiser": {"beta": 3.0}, "general_hamming": {"alpha": 0.6}}.get(name)
    if kw:
        np.testing.assert_allclose(getattr(ember.signal.windows, name)(7, **kw).numpy(),
                                   getattr(torch.signal.windows, name)(7, **kw).numpy(),
                                   rtol=1e-6)
    for m in (ember, torch):
        with pytest.raises(ValueError):
            getattr(m.signal.windows, name)(-1)


def test_general_cosine():
    for a in ([0.5, 0.5], [0.3, 0.2, 0.1, 0.05]):
        np.testing.assert_allclose(ember.signal.windows.general_cosine(9, a=a).numpy(),
                                   torch.signal.windows.general_cosine(9, a=a).numpy(),
                                   rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", TOP)
def test_top_level_windows(name):
    for M in (0, 1, 2, 5, 8):
        for periodic in (True, False):
            e = getattr(ember, name)(M, periodic, dtype=ember.float64)
            t = getattr(torch, name)(M, periodic, dtype=torch.float64)
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
            assert getattr(ember, name)(M).dtype is ember.float32
    for m in (ember, torch):
        with pytest.raises(RuntimeError):
            getattr(m, name)(-1)
        with pytest.raises(RuntimeError):
            getattr(m, name)(4, dtype=m.int64)
    np.testing.assert_allclose(ember.hamming_window(6, True, 0.5, 0.3).numpy(),
                               torch.hamming_window(6, True, 0.5, 0.3).numpy(), rtol=1e-6)


def _both(f, x):
    res = {}
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = f(m, t)
        rng = np.random.default_rng(3)
        go = rng.standard_normal(tuple(y.shape))
        if y.is_complex():
            go = go + 1j * rng.standard_normal(tuple(y.shape))
        g, = m.autograd.grad(y, t, m.tensor(go.astype(y.detach().numpy().dtype)))
        res[m] = (y, g)
    (a, ga), (b, gb) = res[ember], res[torch]
    assert tuple(a.shape) == tuple(b.shape)
    assert a.dtype.name == str(b.dtype).replace("torch.", "")
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ga.numpy(), gb.numpy(), rtol=1e-7, atol=1e-9)


STFT = [{}, {"hop_length": 3}, {"win_length": 6, "window": 6}, {"center": False},
        {"normalized": True}, {"onesided": False}, {"pad_mode": "constant"},
        {"pad_mode": "replicate"}, {"window": 8, "return_complex": False}]


@pytest.mark.parametrize("kw", STFT, ids=str)
def test_stft(kw):
    def f(m, t):
        k = dict(kw)
        if "window" in k:
            k["window"] = m.hann_window(k["window"], dtype=m.float64)
        k.setdefault("return_complex", True)
        return m.stft(t, 8, **k)
    _both(f, X)
    _both(f, X[0])


def test_stft_complex_input_and_errors():
    # torch warns once per process; ember on every call
    with pytest.warns(UserWarning, match="window was not provided"):
        ember.stft(ember.tensor(X), 8, return_complex=True)
    _both(lambda m, t: m.stft(t, 8, return_complex=True), X + 1j * X[::-1])
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="return_complex"):
            m.stft(m.tensor(X), 8)
        with pytest.raises(RuntimeError):
            m.istft(m.tensor(X), 8)


ISTFT = [{}, {"hop_length": 3}, {"win_length": 6}, {"normalized": True}, {"length": 35},
         {"length": 45}, {"onesided": False}]


@pytest.mark.parametrize("kw", ISTFT, ids=str)
def test_istft(kw):
    def f(m, t):
        k = dict(kw)
        win = k.pop("win_length", 8)
        hop = k.pop("hop_length", 2)
        w = m.hann_window(win, dtype=m.float64)
        s = m.stft(t, 8, hop_length=hop, win_length=win, window=w, return_complex=True,
                   normalized=k.get("normalized", False), onesided=k.get("onesided"))
        return m.istft(s, 8, hop_length=hop, win_length=win, window=w, **k)
    _both(f, X)


def test_istft_round_trip_and_nola():
    t = ember.tensor(X)
    w = ember.hann_window(8, dtype=ember.float64)
    back = ember.istft(ember.stft(t, 8, 2, window=w, return_complex=True), 8, 2, window=w,
                       length=40)
    np.testing.assert_allclose(back.numpy(), X, atol=1e-12)
    for m in (ember, torch):
        w = m.hann_window(8, dtype=m.float64)
        s = m.stft(m.tensor(X), 8, 2, window=w, return_complex=True, center=False)
        with pytest.raises(RuntimeError):
            m.istft(s, 8, 2, window=w, center=False)
