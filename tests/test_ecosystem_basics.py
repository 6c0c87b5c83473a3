"""Small PyTorch behaviours that libraries built on torch rely on, compared with torch 2.13.

Optimizers on 0-d parameters (CLIP's ``logit_scale``), bare ``@no_grad`` decorators,
``x in tensor``, NumPy's ``axis=``/``keepdims=`` spellings, device strings, the legacy
``FloatTensor(...)`` constructors, generic ``Dataset[int]`` classes, ``copy_`` into
expanded buffers and the version ``torch.__version__`` reports under ``ember run``.
"""
import copy
import warnings

import numpy as np
import pytest
import torch
from oracle import check_raises
from test_optim import CONFIGS, LBFGS_CONFIGS, assert_same_state_dict, make_opt

import ember

# ----- optimizers on 0-d, 1-d and non-contiguous parameters ------------------------------
_orng = np.random.default_rng(7)
_SCALAR, _VECTOR = 1.3, _orng.standard_normal(4)
_MATRIX = _orng.standard_normal((3, 4))  # the parameter is its (4, 3) transpose
_TARGET = _orng.standard_normal((4, 3))


def _shaped_params(m):
    """A 0-d, a 1-d and a transposed (non-contiguous) 2-d leaf parameter."""
    a = m.tensor(_SCALAR, dtype=m.float64, requires_grad=True)
    b = m.tensor(_VECTOR, dtype=m.float64, requires_grad=True)
    c = m.tensor(_MATRIX, dtype=m.float64).t().requires_grad_()
    return [a, b, c]


def _shaped_loss(m, params):
    a, b, c = params
    t = m.tensor(_TARGET)
    return (a * b - 0.5).pow(2).sum() + (m.tanh(c) * a - t).pow(2).mean() + (a - 2) ** 2


def _train_shaped(m, opt, params, steps, closure=False):
    for _ in range(steps):
        def step_closure():
            opt.zero_grad()
            loss = _shaped_loss(m, params)
            loss.backward()
            return loss
        if closure:
            opt.step(step_closure)
        else:
            step_closure()
            opt.step()


def _assert_shaped_params(ep, tp, rtol=1e-5):
    for i, (e, t) in enumerate(zip(ep, tp)):
        assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride(), f"param {i}"
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol,
                                   atol=1e-8, err_msg=f"param {i}")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c[0] + "-" + "-".join(
    f"{k}={'tensor' if callable(v) else v}" for k, v in c[1].items()) + ("+group" if c[2]
                                                                          else ""))
def test_optimizers_on_0d_1d_and_noncontiguous_params(config):
    name, kwargs, groups = config
    tp, ep = _shaped_params(torch), _shaped_params(ember)
    topt = make_opt(torch, name, kwargs, tp, groups)
    eopt = make_opt(ember, name, kwargs, ep, groups)
    _train_shaped(torch, topt, tp, 6)
    _train_shaped(ember, eopt, ep, 6)
    _assert_shaped_params(ep, tp)
    assert_same_state_dict(eopt.state_dict(), topt.state_dict(), rtol=1e-6)
    # the state tensors keep the shape and strides of their parameter
    for (es, ts) in zip(eopt.state_dict()["state"].values(),
                        topt.state_dict()["state"].values()):
        for key, t in ts.items():
            if isinstance(t, torch.Tensor):
                assert es[key].stride() == t.stride(), key
    # a round trip through the state dict continues as torch does
    saved = copy.deepcopy(eopt.state_dict())
    ep2 = _shaped_params(ember)
    for p2, p in zip(ep2, ep):
        p2.data.copy_(p.data)
    eopt2 = make_opt(ember, name, kwargs, ep2, groups)
    eopt2.load_state_dict(saved)
    _train_shaped(ember, eopt2, ep2, 3)
    _train_shaped(torch, topt, tp, 3)
    _assert_shaped_params(ep2, tp)


@pytest.mark.parametrize("kwargs,steps", LBFGS_CONFIGS, ids=str)
def test_lbfgs_on_0d_and_1d_params(kwargs, steps):
    tp, ep = _shaped_params(torch)[:2], _shaped_params(ember)[:2]

    def run(m, params):
        opt = m.optim.LBFGS(params, **kwargs)
        losses = []
        for _ in range(steps):
            def closure():
                opt.zero_grad()
                a, b = params
                loss = (a * b - 0.5).pow(2).sum() + (a - 2) ** 2
                loss.backward()
                return loss
            losses.append(opt.step(closure).item())
        return opt, losses
    topt, tl = run(torch, tp)
    eopt, el = run(ember, ep)
    np.testing.assert_allclose(el, tl, rtol=1e-6)
    _assert_shaped_params(ep, tp)
    ts, es = topt.state_dict()["state"][0], eopt.state_dict()["state"][0]
    assert es["n_iter"] == ts["n_iter"] and es["func_evals"] == ts["func_evals"]


def test_lbfgs_on_noncontiguous_param():
    # torch's LBFGS flattens each gradient with view(-1), which refuses the transposed
    # gradient torch gives a transposed parameter; ember's works on it, and its steps
    # equal torch's on a contiguous parameter holding the same values
    tp, ep = _shaped_params(torch), _shaped_params(ember)
    tp[2] = torch.tensor(_MATRIX.T.copy(), requires_grad=True)
    for m, params in ((torch, tp), (ember, ep)):
        opt = m.optim.LBFGS(params, line_search_fn="strong_wolfe", max_iter=5)
        _train_shaped(m, opt, params, 2, closure=True)
    for e, t in zip(ep, tp):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-6)
    assert ep[2].stride() == (1, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            params = _shaped_params(torch)
            _train_shaped(torch, torch.optim.LBFGS(params), params, 1, closure=True)


# ----- grad modes as bare decorators -------------------------------------------------------
@pytest.mark.parametrize("mode", ["no_grad", "enable_grad", "inference_mode"])
def test_grad_modes_decorate_without_parentheses(mode):
    def observe(m):
        @getattr(m, mode)
        def f(x):
            """doc"""
            return x * 2, m.is_grad_enabled(), m.is_inference_mode_enabled()

        @getattr(m, mode)
        def gen():
            yield m.is_grad_enabled()
            yield m.is_inference_mode_enabled()

        class A:
            @getattr(m, mode)
            def method(self, x):
                return (x * 3).requires_grad

        x = m.ones(2, requires_grad=True)
        results = []
        for outer in (m.enable_grad, m.no_grad):
            with outer():
                y, grad_on, inference = f(x)
                results += [y.requires_grad, grad_on, inference, list(gen()), A().method(x),
                            m.is_grad_enabled()]
        return results + [f.__name__, f.__doc__, type(getattr(m, mode)()).__name__]
    assert observe(ember) == observe(torch)


def test_inference_mode_bool_and_call_forms():
    def observe(m):
        @m.inference_mode(False)
        def f():
            return m.is_inference_mode_enabled(), m.is_grad_enabled()

        @m.inference_mode()
        def g():
            return m.is_inference_mode_enabled(), m.is_grad_enabled()

        @m.no_grad()
        def h():
            return m.is_grad_enabled()
        with m.inference_mode(mode=True):
            inside = m.is_inference_mode_enabled()
        return [f(), g(), h(), inside, m.is_inference_mode_enabled()]
    assert observe(ember) == observe(torch)


# ----- `x in tensor` ------------------------------------------------------------------------
@pytest.mark.parametrize("element", [0, 1, 2.0, 2.5, True, 1 + 0j, np.int64(4), np.float32(3),
                                     "t3", "t34", "t54", "t12_2d", "t99"], ids=str)
def test_contains(element):
    def check(m):
        t = m.tensor([[1, 2], [3, 4]])
        e = element
        if isinstance(e, str):
            e = {"t3": m.tensor(3), "t34": m.tensor([3, 4]), "t54": m.tensor([5, 4]),
                 "t12_2d": m.tensor([[1, 2]]), "t99": m.tensor([9, 9.5])}[e]
        return [e in t, e in t.float(), e in t.t(), e in m.zeros(0, 2), e in t[0, 0]]
    assert check(ember) == check(torch)


def test_contains_nan_and_unsupported():
    for m in (ember, torch):
        assert float("nan") not in m.tensor([float("nan"), 1.0])
        assert 1.0 in m.tensor([float("nan"), 1.0])
    for bad in ["a", None, [1, 2], (1,), {1}]:
        err = check_raises(lambda m, bad=bad: bad in m.tensor([1, 2]))
        assert "only supports Tensor or scalar" in str(err)
    check_raises(lambda m: m.tensor([1, 2, 3]) in m.tensor([[1, 2], [3, 4]]))
