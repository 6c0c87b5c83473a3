"""SGD's updates of float32 parameters large enough for the BLAS multiply-add and the
one-pass momentum update (:mod:`ember.backend.axpy`): the same bits as torch step after
step, with the BLAS path and with NumPy's formulas alike (weight decay, dampening and
nesterov take the multiply-add too)."""
import numpy as np
import pytest
import torch

import ember
from ember.backend import axpy

SHAPES = [(37, 41), (300,), (7,), (3, 5, 20)]
STEPS = 6


def _grads(step):
    rng = np.random.default_rng(100 + step)
    return [(rng.standard_normal(s) * 10.0 ** rng.integers(-3, 2, s)).astype(np.float32)
            for s in SHAPES]


def _run(m, name, kwargs):
    rng = np.random.default_rng(0)
    params = [m.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
              for s in SHAPES]
    opt = getattr(m.optim, name)(params, **kwargs)
    for step in range(STEPS):
        for p, g in zip(params, _grads(step)):
            p.grad = m.tensor(g)
        opt.step()
    return [p.detach().numpy().copy() for p in params]


CONFIGS = [
    ("SGD", {"lr": 0.05}),
    ("SGD", {"lr": 0.05, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01, "maximize": True}),
]


@pytest.fixture(params=["blas", "numpy"])
def path(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setattr(axpy, "_fn", [False])
        monkeypatch.setattr(axpy, "_fn_by", [False])
    else:
        assert axpy.available(), "the BLAS multiply-add should load where NumPy ships OpenBLAS"
        y = np.ones(300, np.float32)
        assert axpy.scale_add(y, 0.9, y.copy()), "saxpby should load beside saxpy"
    return request.param


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=lambda c: str(c))
def test_float32_updates_bit_equal_to_torch(name, kwargs, path):
    got, want = _run(ember, name, kwargs), _run(torch, name, kwargs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.view(np.int32), w.view(np.int32))


@pytest.mark.parametrize("n", [255, 256, 257, 1000, 4096 + 13])
def test_saxpy_is_torch_add_with_alpha(n):
    rng = np.random.default_rng(n)
    y = rng.standard_normal(n).astype(np.float32)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)
    alpha = float(np.float32(-0.0371))
    want = torch.from_numpy(y.copy()).add_(torch.from_numpy(x), alpha=alpha).numpy()
    got = y.copy()
    assert axpy.saxpy(got, alpha, x) is (n >= 256)
    if n >= 256:
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


def test_saxpy_declines_what_it_does_not_cover():
    y = np.zeros(1000, np.float32)
    for x in (np.ones(1000, np.float64), np.ones(2000, np.float32)[::2], np.ones(999, np.float32)):
        assert axpy.saxpy(y, 1.0, x) is False
    assert axpy.saxpy(y, 1.0, y) is False  # overlapping
    assert axpy.saxpy(y.astype(np.float64), 1.0, y.astype(np.float64)) is False
    assert not y.any()


def test_switched_off_by_environment(monkeypatch):
    monkeypatch.setenv("EMBER_BLAS_AXPY", "0")
    assert axpy._find() is False


@pytest.mark.parametrize("n", [255, 256, 257, 1000, 4096 + 13])
@pytest.mark.parametrize("momentum", [0.9, 0.99, 0.37])
def test_scale_add_is_torch_mul_then_add(n, momentum):
    """SGD's ``buf.mul_(momentum).add_(grad)``: two roundings, in one BLAS pass."""
    rng = np.random.default_rng(n)
    y = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)
    want = torch.from_numpy(y.copy()).mul_(momentum).add_(torch.from_numpy(x)).numpy()
    fused = (y.astype(np.float64) * np.float32(momentum) + x).astype(np.float32)
    assert not np.array_equal(fused, want)  # one rounding would show on these inputs
    got = y.copy()
    assert axpy.scale_add(got, momentum, x) is (n >= 256)
    if n >= 256:
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


def test_scale_add_declines_what_it_does_not_cover():
    y = np.zeros(1000, np.float32)
    for x in (np.ones(1000, np.float64), np.ones(2000, np.float32)[::2], np.ones(999, np.float32)):
        assert axpy.scale_add(y, 0.9, x) is False
    assert axpy.scale_add(y, 0.9, y) is False  # overlapping
    assert axpy.scale_add(y, 1.0, np.ones(1000, np.float32)) is False  # BLAS's shortcuts
    assert axpy.scale_add(y, 0.0, np.ones(1000, np.float32)) is False
    assert not y.any()


def test_scale_add_switched_off_by_environment(monkeypatch):
    monkeypatch.setenv("EMBER_BLAS_AXPY", "0")
    monkeypatch.setattr(axpy, "_fn", [None])
    assert axpy._find_by() is False


def _kernel(body):
    """A saxpy as ctypes calls it: single-rounded over whole blocks of ``body`` elements,
    the rest rounded twice (a multiply, then an add: OpenBLAS's Haswell scalar loop)."""
    import ctypes

    def f(n, alpha, px, incx, py, incy):
        fp = ctypes.POINTER(ctypes.c_float)
        x = np.ctypeslib.as_array(ctypes.cast(px, fp), (n,))
        y = np.ctypeslib.as_array(ctypes.cast(py, fp), (n,))
        cut = n - n % body
        y[:cut] = (x[:cut].astype(np.float64) * np.float32(alpha) + y[:cut]).astype(np.float32)
        y[cut:] += np.float32(alpha) * x[cut:]
    return f


@pytest.mark.parametrize("body", [1, 32])
def test_a_kernel_agreeing_on_its_vector_body_takes_whole_blocks(body, monkeypatch):
    # the grain found is the body's width, and saxpy then gives torch's bits at every
    # length (the tail on NumPy), at one and two threads (blocks of whole grains)
    f = _kernel(body)
    assert axpy._agrees(f, 1) is (body == 1)
    assert axpy._agrees(f, body)
    if body > 1:
        assert not axpy._agrees(f, 16)
    reader = lambda a: a.ctypes.data
    monkeypatch.setattr(axpy, "_fn", [(f, (1 << 31) - 1, reader, body)])
    rng = np.random.default_rng(5)
    before = ember.get_num_threads()
    try:
        for threads in (1, 2):
            ember.set_num_threads(threads)
            for n in (256, 257, 1000, 4109, 20011, 20032):
                y = rng.standard_normal(n).astype(np.float32)
                x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)).astype(np.float32)
                got = y.copy()
                assert axpy.saxpy(got, -0.0123, x)
                want = torch.tensor(y).add_(torch.tensor(x), alpha=-0.0123).numpy()
                np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    finally:
        ember.set_num_threads(before)
