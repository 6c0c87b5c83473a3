"""ember.fft against torch.fft: every transform with n=/s=/dim=/norm=, dtypes, and
gradients for complex grad_outputs; gradcheck; the frequency helpers; errors."""
import numpy as np
import pytest
import torch

import ember
from ember.autograd import gradcheck

RNG = np.random.default_rng(0)
XR = RNG.standard_normal((4, 6, 5))
XC = XR + 1j * RNG.standard_normal((4, 6, 5))


def _compare(name, x, seed=0, tol=1e-9, **kw):
    res = {}
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        y = getattr(m.fft, name)(t, **kw)
        rng = np.random.default_rng(seed)
        shape = tuple(y.shape)
        go = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if y.is_complex()
                                           else 0)
        go = np.asarray(go).astype(y.detach().resolve_conj().numpy().dtype)
        g, = m.autograd.grad(y, t, m.tensor(go))
        res[m] = (y, g)
    (a, ga), (b, gb) = res[ember], res[torch]
    assert a.dtype.name == str(b.dtype).replace("torch.", ""), (name, kw)
    assert tuple(a.shape) == tuple(b.shape), (name, kw)
    assert ga.dtype.name == str(gb.dtype).replace("torch.", ""), (name, kw)
    for e, t in ((a, b), (ga, gb)):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().resolve_conj().numpy(),
                                   rtol=tol, atol=tol, err_msg=f"{name} {kw}")


ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
MULTI = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn", "ifftn", "rfftn",
         "irfftn", "hfftn", "ihfftn"]


def _input(name):
    return XR if name.startswith(("rfft", "ihfft")) else XC


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("name", ONE_D)
def test_one_dimensional(name, norm):
    x = _input(name)
    for kw in ({}, {"n": 7}, {"n": 3, "dim": 1}, {"n": 8, "dim": 0}):
        _compare(name, x, norm=norm, **kw)
        low = x.astype(np.complex64 if x.dtype.kind == "c" else np.float32)
        _compare(name, low, norm=norm, tol=2e-4, **kw)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name", MULTI)
def test_multi_dimensional(name, norm):
    x = _input(name)
    kws = [{}, {"s": (3, 7)}, {"dim": (0, 2)}, {"s": (5, 4), "dim": (2, 0)}]
    if name.endswith("n"):
        kws += [{"dim": 1}, {"s": (4, 4, 4)}, {"s": (3, -1)}]
    for kw in kws:
        _compare(name, x, norm=norm, **kw)


def test_real_and_integer_inputs():
    for m in (ember, torch):
        assert str(m.fft.fft(m.arange(4)).dtype).endswith("complex64")
        assert str(m.fft.fft(m.ones(4)).dtype).endswith("complex64")
        assert str(m.fft.irfft(m.ones(4, dtype=m.float64)).dtype).endswith("float64")
    _compare("fft", XR[0])  # a real input's gradient is real
    _compare("irfft", XR[0])


def test_gradcheck():
    x = ember.tensor(XC[0, :3], requires_grad=True)
    r = ember.tensor(XR[0, :3], requires_grad=True)
    assert gradcheck(lambda t: ember.fft.fft(t, n=4, norm="ortho"), (x,))
    assert gradcheck(lambda t: ember.fft.rfft2(t), (r,))
    assert gradcheck(lambda t: ember.fft.irfftn(t, s=(4, 6)), (x,))
    assert gradcheck(lambda t: ember.fft.hfft(t, n=7, norm="forward"), (x,))
    assert gradcheck(lambda t: ember.fft.ihfft2(t), (r,))


def test_frequencies_and_shifts():
    for n, d in ((8, 1.0), (7, 0.1), (1, 2.0)):
        for fn in ("fftfreq", "rfftfreq"):
            e = getattr(ember.fft, fn)(n, d)
            t = getattr(torch.fft, fn)(n, d)
            assert e.dtype.name == str(t.dtype).replace("torch.", "")
            np.testing.assert_array_equal(e.numpy(), t.numpy())
            e = getattr(ember.fft, fn)(n, d, dtype=ember.float64)
            np.testing.assert_array_equal(e.numpy(), getattr(torch.fft, fn)(
                n, d, dtype=torch.float64).numpy())
    x = RNG.standard_normal((4, 5))
    for fn in ("fftshift", "ifftshift"):
        for kw in ({}, {"dim": 1}, {"dim": (0,)}, {"dim": (1, 0)}):
            e = getattr(ember.fft, fn)(ember.tensor(x), **kw)
            t = getattr(torch.fft, fn)(torch.tensor(x), **kw)
            np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("call", [
    lambda m: m.fft.rfft(m.ones(4, dtype=m.complex64)),
    lambda m: m.fft.fft(m.ones(4), norm="bogus"),
    lambda m: m.fft.fft(m.ones(4), n=0),
    lambda m: m.fft.fftn(m.ones(4, 4), s=(2, 2), dim=(0,)),
    lambda m: m.fft.fft(m.ones(4), dim=2),
])
def test_errors_like_torch(call):
    with pytest.raises(Exception) as t_err:
        call(torch)
    with pytest.raises(Exception) as e_err:
        call(ember)
    assert isinstance(e_err.value, type(t_err.value)) or \
        issubclass(type(t_err.value), type(e_err.value)), (e_err.value, t_err.value)
