"""The fidelity gaps found by running real programs, each against torch."""
import io
import pickle
import warnings

import numpy as np
import pytest
import torch

import ember


class Thing:  # a non-tensor object: only weights_only=False may load it
    def __init__(self):
        self.x = 3


def _saved(m):
    buf = io.BytesIO()
    m.save({"t": m.ones(2), "obj": Thing()}, buf)
    return buf.getvalue()


@pytest.mark.parametrize("env,kw", [({}, {}), ({"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1"}, {}),
                                    ({"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "yes"},
                                     {"weights_only": False}),
                                    ({"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "true"}, {}),
                                    ({"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
                                     {"weights_only": True}),
                                    ({"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
                                      "TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1"}, {})])
def test_load_environment_switches(monkeypatch, env, kw):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    outcomes = []
    for m in (ember, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = m.load(io.BytesIO(_saved(m)), **kw)
                outcome = ("ok", out["obj"].x)
            except pickle.UnpicklingError:
                outcome = ("refused",)
            except RuntimeError as e:
                outcome = ("RuntimeError", str(e)[:40])
        warned = any("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected" in str(w.message)
                     for w in caught)
        outcomes.append((outcome, warned))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("p", [2, 3, -1, -2, 0.5, -0.5, 0, 1])
def test_pow_special_exponents_bit_exact(dtype, p):
    a = np.random.default_rng(0).standard_normal(20000).astype(dtype)
    a = np.abs(a) if p in (0.5, -0.5) else a
    e = (ember.tensor(a) ** p).numpy()
    t = (torch.tensor(a) ** p).numpy()
    if p == 0.5:  # PyTorch's sqrt kernel is not correctly rounded on every CPU
        np.testing.assert_allclose(e, t, rtol=2e-7 if dtype != "float16" else 1e-3)
    else:
        np.testing.assert_array_equal(e, t)


def test_pow_other_exponents_close():
    a = np.random.default_rng(1).standard_normal(20000).astype(np.float32)
    for p in (4, 5, 1.5, -3):
        e = (ember.tensor(a) ** p).numpy()
        t = (torch.tensor(a) ** p).numpy()
        np.testing.assert_allclose(e, t, rtol=3e-7, equal_nan=True)


@pytest.mark.parametrize("kw", [dict(lr=0.1), dict(lr=0.01, momentum=0.9),
                                dict(lr=0.01, momentum=0.9, nesterov=True),
                                dict(lr=0.03, weight_decay=1e-4),
                                dict(lr=0.01, momentum=0.9, dampening=0.1, weight_decay=1e-2),
                                dict(lr=0.05, maximize=True, momentum=0.5)])
def test_sgd_step_bit_exact(kw):
    rng = np.random.default_rng(0)
    w = rng.standard_normal(5000).astype(np.float32)
    g = rng.standard_normal(5000).astype(np.float32)
    res = []
    for m in (ember, torch):
        p = m.nn.Parameter(m.tensor(w.copy()))
        opt = m.optim.SGD([p], **kw)
        for i in range(4):
            p.grad = m.tensor(g * (i + 1))
            opt.step()
        res.append(p.detach().numpy().copy())
    np.testing.assert_array_equal(res[0], res[1])


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32"])
@pytest.mark.parametrize("value", [1000, -1, -300, 70000])
def test_integer_scalar_wraps_like_torch(dtype, value):
    for op in (lambda x: x + value, lambda x: x * value, lambda x: value - x,
               lambda x: x == value):
        e = op(ember.tensor([1, 2, 100], dtype=getattr(ember, dtype)))
        t = op(torch.tensor([1, 2, 100], dtype=getattr(torch, dtype)))
        assert e.tolist() == t.tolist()
        assert e.dtype.name == str(t.dtype).split(".")[1]


SECOND_ORDER = {
    "threshold": lambda m, x: m.nn.functional.threshold(x, 0.1, 0.0),
    "hardshrink": lambda m, x: m.nn.functional.hardshrink(x),
    "softshrink": lambda m, x: m.nn.functional.softshrink(x),
    "prelu": lambda m, x: m.nn.functional.prelu(x, m.tensor([0.25], dtype=m.float64)),
    "rrelu": lambda m, x: m.nn.functional.rrelu(x, training=False),
    "max_pool": lambda m, x: m.nn.functional.max_pool1d(x.reshape(1, 1, -1), 2),
    "max_pool_indices": lambda m, x: m.nn.functional.max_pool1d(x.reshape(1, 1, -1), 2,
                                                                return_indices=True)[0],
    "avg_pool": lambda m, x: m.nn.functional.avg_pool2d(x.reshape(1, 2, 4), 2),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_derivative_is_zeros_not_none(name):
    a = np.random.default_rng(2).standard_normal(8)
    res = []
    for m in (ember, torch):
        x = m.tensor(a, requires_grad=True)
        g, = m.autograd.grad(SECOND_ORDER[name](m, x).pow(1).sum(), x, create_graph=True)
        h, = m.autograd.grad(g.sum(), x)
        res.append((g.requires_grad, g.detach().numpy(), h.numpy()))
    assert res[0][0] and res[1][0]
    np.testing.assert_allclose(res[0][1], res[1][1])
    np.testing.assert_array_equal(res[0][2], res[1][2])


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_factories_need_a_size(name):
    """No size at all is a TypeError in PyTorch (a 0-d tensor needs ``()``); ember made a
    0-d tensor."""
    with pytest.raises(TypeError):
        getattr(torch, name)()
    with pytest.raises(TypeError, match="size"):
        getattr(ember, name)()
    assert getattr(ember, name)(()).shape == getattr(torch, name)(()).shape == ()
    assert getattr(ember, name)(size=(2,)).shape == (2,)


def test_legacy_constructors_without_sizes_are_empty_1d():
    """``Tensor()`` and ``x.new()`` give an empty 1-D tensor in PyTorch (ember gave 0-d);
    ``empty_permuted`` of a 0-d size stays 0-d."""
    assert ember.Tensor().shape == torch.Tensor().shape == (0,)
    assert ember.tensor([1.0]).new().shape == torch.tensor([1.0]).new().shape == (0,)
    assert ember.tensor([1.0]).new().dtype == ember.float32
    assert ember.empty_permuted((), ()).shape == torch.empty_permuted((), ()).shape == ()
    assert ember.Tensor(2, 3).shape == torch.Tensor(2, 3).shape
