"""nn.utils.parametrize, parametrizations (weight_norm, spectral_norm, orthogonal) and the
legacy weight_norm / spectral_norm hooks, against torch."""
import numpy as np
import pytest
import torch

import ember

LIBS = (ember, torch)


def _np(t):
    return t.detach().numpy()


def _close(e, t, tol=1e-6, scaled=False):
    """Within ``tol``, relative and absolute; ``scaled``: the absolute tolerance ``tol``
    times the largest magnitude of torch's values (float32 sums of large terms)."""
    t = _np(t)
    atol = tol * max(1.0, float(np.abs(t).max(initial=0.0))) if scaled else tol
    np.testing.assert_allclose(_np(e), t, rtol=tol, atol=atol)


def _symmetric(m):
    class Symmetric(m.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(-1, -2)

        def right_inverse(self, a):
            return a.triu()
    return Symmetric()


def _run_both(build, steps=2, train=True, x_shape=(3, 4)):
    """Build a module per library with the same seed, run forward/backward ``steps``
    times, and return per library: outputs, gradients, state_dict."""
    out = []
    for m in LIBS:
        m.manual_seed(0)
        mod = build(m)
        mod.train(train)
        x = m.randn(*x_shape)
        ys, grads = [], []
        for _ in range(steps):
            y = mod(x)
            y.pow(2).sum().backward()
            ys.append(y)
        grads = {k: p.grad for k, p in mod.named_parameters()}
        out.append((mod, ys, grads, mod.state_dict()))
    return out


def _compare(res, tol=1e-6, scaled=False):
    (em, eys, eg, esd), (tm, tys, tg, tsd) = res
    for a, b in zip(eys, tys):
        _close(a, b, tol, scaled)
    assert sorted(eg) == sorted(tg)
    for k in tg:
        _close(eg[k], tg[k], tol, scaled)
    assert list(esd) == list(tsd)
    for k in tsd:
        _close(esd[k], tsd[k], tol)


def test_register_parametrization_symmetric():
    res = _run_both(lambda m: m.nn.utils.parametrize.register_parametrization(
        m.nn.Linear(4, 4), "weight", _symmetric(m)))
    _compare(res)
    (em, *_), (tm, *_) = res
    assert type(em).__name__ == type(tm).__name__ == "ParametrizedLinear"
    assert ember.nn.utils.parametrize.is_parametrized(em, "weight")
    assert ember.nn.utils.parametrize.type_before_parametrizations(em) is ember.nn.Linear
    # assignment goes through right_inverse
    for mod, m in ((em, ember), (tm, torch)):
        mod.weight = m.arange(16.0).reshape(4, 4)
    _close(em.weight, tm.weight)
    _close(em.parametrizations.weight.original, tm.parametrizations.weight.original)


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations(leave):
    mods = []
    for m in LIBS:
        m.manual_seed(0)
        lin = m.nn.utils.parametrize.register_parametrization(m.nn.Linear(3, 3), "weight",
                                                              _symmetric(m))
        p = lin.parametrizations.weight.original
        m.nn.utils.parametrize.remove_parametrizations(lin, "weight", leave_parametrized=leave)
        assert type(lin) is m.nn.Linear and lin.weight is p
        mods.append(lin)
    _close(mods[0].weight, mods[1].weight)
    assert list(mods[0].state_dict()) == list(mods[1].state_dict())


def test_cached_and_chained():
    for m in LIBS:
        lin = m.nn.Linear(3, 3)
        P = m.nn.utils.parametrize
        P.register_parametrization(lin, "weight", _symmetric(m))
        P.register_parametrization(lin, "weight", _symmetric(m))
        assert len(lin.parametrizations.weight) == 2
        with P.cached():
            assert lin.weight is lin.weight
        assert lin.weight is not lin.weight
    with pytest.raises(ValueError, match="does not have a parameter, a buffer"):
        ember.nn.utils.parametrize.register_parametrization(ember.nn.Linear(2, 2), "nope",
                                                            _symmetric(ember))


def test_parametrization_shape_check_matches_torch():
    msgs = []
    for m in LIBS:
        class Bad(m.nn.Module):
            def forward(self, x):
                return x[:1]
        with pytest.raises(ValueError) as info:
            m.nn.utils.parametrize.register_parametrization(m.nn.Linear(2, 2), "weight", Bad())
        msgs.append(str(info.value).replace("torch.", "").replace("ember.", ""))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization(dim):
    _compare(_run_both(lambda m: m.nn.utils.parametrizations.weight_norm(
        m.nn.Linear(4, 5), dim=dim)))


def test_weight_norm_conv_and_legacy():
    _compare(_run_both(lambda m: m.nn.utils.parametrizations.weight_norm(
        m.nn.Conv2d(2, 3, 3)), x_shape=(2, 2, 5, 5)))
    with pytest.warns(FutureWarning):
        _compare(_run_both(lambda m: m.nn.utils.weight_norm(m.nn.Conv1d(2, 3, 2), dim=1),
                           x_shape=(2, 2, 5)))
    for m in LIBS:
        with pytest.warns(FutureWarning):
            lin = m.nn.utils.weight_norm(m.nn.Linear(3, 2))
        assert sorted(lin.state_dict()) == ["bias", "weight_g", "weight_v"]
        w = lin.weight.detach().clone()
        m.nn.utils.remove_weight_norm(lin)
        assert isinstance(lin.weight, m.nn.Parameter)
        np.testing.assert_allclose(lin.weight.detach().numpy(), w.numpy(), rtol=1e-6)
        with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
            m.nn.utils.remove_weight_norm(lin)


@pytest.mark.parametrize("train", [True, False])
def test_spectral_norm_parametrization(train):
    # u and v come from 17 float32 power iterations whose matrix-vector products round
    # differently on each BLAS kernel (ember's as close to float64's as torch's); three
    # accumulated gradients of size 20 then differ by ~1e-6 of their size: the absolute
    # tolerance is scaled to the values
    _compare(_run_both(lambda m: m.nn.utils.parametrizations.spectral_norm(
        m.nn.Linear(4, 6), n_power_iterations=2), steps=3, train=train), 1e-5, scaled=True)
    _compare(_run_both(lambda m: m.nn.utils.parametrizations.spectral_norm(
        m.nn.ConvTranspose2d(2, 3, 2)), train=train, x_shape=(1, 2, 3, 3)), 1e-5, scaled=True)


@pytest.mark.parametrize("train", [True, False])
def test_legacy_spectral_norm(train):
    res = _run_both(lambda m: m.nn.utils.spectral_norm(m.nn.Linear(4, 6)), steps=3, train=train)
    _compare(res, 1e-5)
    for (mod, *_), m in zip(res, LIBS):
        m.nn.utils.remove_spectral_norm(mod)
        assert sorted(mod.state_dict()) == ["bias", "weight"]
    _close(res[0][0].weight, res[1][0].weight, 1e-5)


@pytest.mark.parametrize("shape,omap", [((4, 4), None), ((5, 3), None), ((3, 5), None),
                                        ((4, 4), "cayley"), ((5, 3), "matrix_exp")])
def test_orthogonal(shape, omap):
    res = _run_both(lambda m: m.nn.utils.parametrizations.orthogonal(
        m.nn.Linear(shape[1], shape[0]), orthogonal_map=omap), x_shape=(2, shape[1]))
    _compare(res, 1e-5)
    w = res[0][0].weight
    q = w if w.shape[0] >= w.shape[1] else w.T
    _close(q.T @ q, ember.eye(q.shape[1]), 1e-5)
