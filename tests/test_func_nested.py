"""Nested function transforms (jacrev of jacrev, hessian, vmap of hessian, vmap of a vjp
over the one-hot basis) against torch.func, each run with warnings as errors and vmap's
record of fallbacks emptied first: a per-sample fallback loop anywhere inside (jacrev's
basis vmap, an op of a backward formula without a batching rule) fails the test."""
import warnings
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ember
import ember.nn.functional as EF
from ember.func import _vmap

RNG = np.random.default_rng(3)
DOUT, DIN, B = 5, 4, 3
ARRS = {"w": RNG.standard_normal((DOUT, DIN)), "b": RNG.standard_normal(DOUT),
        "x": RNG.standard_normal(DIN), "xb": RNG.standard_normal((B, DIN)),
        "img": RNG.standard_normal((1, 2, 4, 6))}


def strict(fn):
    """``fn()`` with no per-sample fallback allowed."""
    _vmap._warned.clear()  # a reason warns once per process: forget the earlier ones
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


def inputs(m):
    return {k: m.tensor(v) for k, v in ARRS.items()}


def predict(F, w, b, x):
    return F.linear(x, w, b).tanh()


def indexed(x):
    # basic and advanced indexing: their backward is IndexScatter
    return (x[1:3] ** 3).sum() * x[[0, 2, 0]] + x[..., 0]


CASES = {
    "jacrev": lambda m, F, a: m.func.jacrev(partial(predict, F), argnums=2)(a["w"], a["b"], a["x"]),
    "jacrev_params": lambda m, F, a: m.func.jacrev(partial(predict, F), argnums=(0, 1))(
        a["w"], a["b"], a["x"]),
    "jacrev_jacrev": lambda m, F, a: m.func.jacrev(m.func.jacrev(partial(predict, F), argnums=2),
                                                   argnums=2)(a["w"], a["b"], a["x"]),
    "jacfwd_jacrev": lambda m, F, a: m.func.jacfwd(m.func.jacrev(partial(predict, F), argnums=2),
                                                   argnums=2)(a["w"], a["b"], a["x"]),
    "jacrev_jacfwd": lambda m, F, a: m.func.jacrev(m.func.jacfwd(partial(predict, F), argnums=2),
                                                   argnums=2)(a["w"], a["b"], a["x"]),
    "hessian": lambda m, F, a: m.func.hessian(partial(predict, F), argnums=2)(
        a["w"], a["b"], a["x"]),
    "vmap_hessian": lambda m, F, a: m.func.vmap(m.func.hessian(partial(predict, F), argnums=2),
                                                in_dims=(None, None, 0))(a["w"], a["b"], a["xb"]),
    "vmap_jacrev": lambda m, F, a: m.func.vmap(m.func.jacrev(partial(predict, F), argnums=2),
                                               in_dims=(None, None, 0))(a["w"], a["b"], a["xb"]),
    "jacrev_summed": lambda m, F, a: m.func.jacrev(
        lambda w, b, x: predict(F, w, b, x).sum(0), argnums=2)(a["w"], a["b"], a["xb"]),
    "jacrev_indexed": lambda m, F, a: m.func.jacrev(indexed)(a["x"]),
    "jacrev_jacrev_indexed": lambda m, F, a: m.func.jacrev(m.func.jacrev(indexed))(a["x"]),
    "jacrev_jacrev_index_grid": lambda m, F, a: m.func.jacrev(m.func.jacrev(
        lambda w: (w[[0, 2]][:, [1, 3]] ** 3).sum() * w[1:4, ::2].tanh()))(a["w"]),
    # pooling's adjoints (max: the window's max positions; average: spread over it)
    "jacrev_max_pool": lambda m, F, a: m.func.jacrev(lambda x: F.max_pool2d(x, 2))(a["img"]),
    "jacrev_jacrev_max_pool": lambda m, F, a: m.func.jacrev(m.func.jacrev(
        lambda x: F.max_pool2d(x, 2, stride=1) ** 2))(a["img"]),
    "jacrev_avg_pool": lambda m, F, a: m.func.jacrev(
        lambda x: F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False))(a["img"]),
    "jacrev_jacrev_avg_pool": lambda m, F, a: m.func.jacrev(m.func.jacrev(
        lambda x: F.avg_pool2d(x, 2) ** 2))(a["img"]),
    "vmap_jacrev_max_pool": lambda m, F, a: m.func.vmap(m.func.jacrev(
        lambda x: F.max_pool2d(x, 2)))(a["img"]),
    "jacrev_two_outputs": lambda m, F, a: m.func.jacrev(
        lambda x, w: (x.sin() * 2, (w @ x).exp()), argnums=(0, 1))(a["x"], a["w"]),
}


def check(e, t):
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)) and len(e) == len(t)
        for a, b in zip(e, t):
            check(a, b)
        return
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", list(CASES))
def test_nested_transform_matches_torch_without_fallback(name):
    fn = CASES[name]
    expected = fn(torch, TF, inputs(torch))
    got = strict(lambda: fn(ember, EF, inputs(ember)))
    check(got, expected)


def test_vmap_of_vjp_over_the_basis():
    # the tutorial's way to the Jacobian: vmap of the vjp function over the unit vectors
    def jac(m, F):
        a = inputs(m)
        _, vjp_fn = m.func.vjp(partial(predict, F, a["w"], a["b"]), a["x"])
        return m.func.vmap(vjp_fn)(m.eye(DOUT, dtype=m.float64))
    check(strict(lambda: jac(ember, EF)), jac(torch, TF))


def test_fallback_still_warns_for_an_op_without_rule():
    # the strict helper is able to fail: a data-dependent read inside vmap falls back
    with pytest.raises(UserWarning, match="per-sample loop"):
        strict(lambda: ember.func.vmap(lambda v: v * v.sum().item())(ember.ones(2, 3)))


def test_index_arrays_apart_still_match_torch():
    # index arrays apart from each other: the adjoint of indexing has no batching rule
    # there (NumPy moves their dims in front), so vmap loops; the Jacobian is still torch's
    v = RNG.standard_normal((2, 3, 2))

    def f(x):
        return (x[[0, 1], :, [1, 0]] ** 3).sum() * x[0, [0, 2], 1]

    expected = torch.func.jacrev(torch.func.jacrev(f))(torch.tensor(v))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ember.func.jacrev(ember.func.jacrev(f))(ember.tensor(v))
    check(got, expected)
