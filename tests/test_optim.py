"""ember.optim against torch.optim: 50 steps on the same model and data, every option.

The model is built from plain tensors (``tanh(x @ W1 + b1) @ W2 + b2``, mean squared
error) so these tests do not depend on ember.nn. A fifth parameter takes no part in the
loss: optimizers must skip it (its grad stays None).
"""
import copy
import warnings

import numpy as np
import pytest
import torch
from oracle import check_raises

import ember

_rng = np.random.default_rng(0)
X = _rng.standard_normal((8, 4))
Y = _rng.standard_normal((8, 3))
SHAPES = [(4, 5), (5,), (5, 3), (3,), (2,)]
INIT = [_rng.standard_normal(s) * 0.5 for s in SHAPES]
STEPS = 50


def make_params(m, values=INIT, dtype=np.float64):
    return [m.tensor(np.array(v, dtype=dtype), requires_grad=True) for v in values]


def loss_fn(m, params, x, y):
    w1, b1, w2, b2, _ = params
    out = m.tanh(x @ w1 + b1) @ w2 + b2 - y
    return (out * out).mean()


def spec(params, groups):
    """The ``params`` argument: a plain list, or two groups with options for the second."""
    if groups is None:
        return params
    return [{"params": params[:2]}, dict({"params": params[2:]}, **groups)]


def resolve(m, kwargs):
    return {k: (v(m) if callable(v) else v) for k, v in kwargs.items()}


def make_opt(m, name, kwargs, params, groups=None):
    return getattr(m.optim, name)(spec(params, groups), **resolve(m, kwargs))


def train(m, opt, params, steps, dtype=np.float64, use_closure=False):
    x, y = m.tensor(X.astype(dtype)), m.tensor(Y.astype(dtype))
    losses = []
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = loss_fn(m, params, x, y)
            loss.backward()
            return loss
        if use_closure:
            losses.append(opt.step(closure).item())
        else:
            closure()
            assert opt.step() is None
    return losses


def values(params):
    return [p.detach().numpy().copy() for p in params]


def assert_params_close(e_params, t_params, rtol=1e-5, atol=1e-9):
    for i, (e, t) in enumerate(zip(values(e_params), values(t_params))):
        np.testing.assert_allclose(e, t, rtol=rtol, atol=atol, err_msg=f"parameter {i}")


def _dtype_name(dt):
    return str(dt).split(".")[-1]


def assert_same_value(e, t, where, rtol=1e-5, atol=1e-9):
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{where}: expected a Tensor, got {type(e)}"
        assert tuple(e.shape) == tuple(t.shape), where
        assert _dtype_name(e.dtype) == _dtype_name(t.dtype), where
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=rtol, atol=atol, err_msg=where)
    elif isinstance(t, (list, tuple)):
        assert type(e) is type(t) and len(e) == len(t), where
        for i, (a, b) in enumerate(zip(e, t)):
            assert_same_value(a, b, f"{where}[{i}]", rtol, atol)
    elif isinstance(t, float):
        assert e == pytest.approx(t, rel=rtol, abs=atol), where
    else:
        assert e == t, f"{where}: {e!r} != {t!r}"


def assert_same_state_dict(esd, tsd, rtol=1e-5):
    assert set(esd) == set(tsd) == {"state", "param_groups"}
    assert set(esd["state"]) == set(tsd["state"])
    for k, ts in tsd["state"].items():
        es = esd["state"][k]
        assert list(es) == list(ts), f"state[{k}] keys"
        for name in ts:
            assert_same_value(es[name], ts[name], f"state[{k}][{name!r}]", rtol)
    assert len(esd["param_groups"]) == len(tsd["param_groups"])
    for i, (eg, tg) in enumerate(zip(esd["param_groups"], tsd["param_groups"])):
        assert list(eg) == list(tg), f"param_groups[{i}] keys"
        for key in tg:
            assert_same_value(eg[key], tg[key], f"param_groups[{i}][{key!r}]")


# (optimizer, kwargs, second param group's options or None); a callable value is called
# with the library module (for tensor-valued hyperparameters)
CONFIGS = [
    ("SGD", {"lr": 0.1}, None),
    ("SGD", {"lr": 0.1, "momentum": 0.9}, None),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.5}, None),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}, None),
    ("SGD", {"lr": 0.1, "weight_decay": 0.1}, None),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "maximize": True}, None),
    ("SGD", {"lr": 0.01, "momentum": 0.5, "nesterov": True, "weight_decay": 0.01,
             "maximize": True}, None),
    ("SGD", {"lr": lambda m: m.tensor(0.1), "momentum": 0.9}, None),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "foreach": True}, {"lr": 0.02, "momentum": 0.5}),
    ("SGD", {"lr": 0.1}, {"lr": 0.3, "weight_decay": 0.1, "nesterov": True, "momentum": 0.8}),
    ("Adam", {"lr": 0.01}, None),
    ("Adam", {"lr": 0.01, "amsgrad": True}, None),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1}, None),
    ("Adam", {"lr": 0.01, "maximize": True}, None),
    ("Adam", {"lr": 0.01, "betas": (0.5, 0.9), "eps": 1e-3, "amsgrad": True,
              "weight_decay": 0.05, "maximize": True}, None),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}, None),
    ("Adam", {"lr": lambda m: m.tensor(0.01)}, None),
    ("Adam", {"lr": 0.01, "foreach": False, "fused": None}, {"lr": 0.03, "amsgrad": True}),
    ("AdamW", {"lr": 0.01}, None),
    ("AdamW", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.5}, None),
    ("AdamW", {"lr": 0.01, "maximize": True}, {"weight_decay": 0.0}),
    ("RMSprop", {"lr": 0.01}, None),
    ("RMSprop", {"lr": 0.01, "centered": True}, None),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}, None),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "centered": True, "momentum": 0.5,
                 "weight_decay": 0.1, "eps": 1e-4}, None),
    ("RMSprop", {"lr": 0.01, "maximize": True}, {"centered": True}),
    ("Adagrad", {"lr": 0.1}, None),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01}, None),
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.5}, None),
    ("Adagrad", {"lr": 0.1, "weight_decay": 0.1, "eps": 1e-3, "maximize": True}, None),
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.1}, {"lr_decay": 0.1}),
    ("Adadelta", {}, None),
    ("Adadelta", {"lr": 0.5, "rho": 0.5}, None),
    ("Adadelta", {"weight_decay": 0.1, "eps": 1e-4, "maximize": True}, None),
    ("Adamax", {"lr": 0.01}, None),
    ("Adamax", {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.1}, None),
    ("Adamax", {"lr": 0.01, "maximize": True}, None),
    ("NAdam", {"lr": 0.01}, None),
    ("NAdam", {"lr": 0.01, "momentum_decay": 0.01}, None),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1}, None),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}, None),
    ("NAdam", {"lr": 0.01, "maximize": True}, {"betas": (0.8, 0.9)}),
    ("RAdam", {"lr": 0.01}, None),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1}, None),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}, None),
    ("RAdam", {"lr": 0.01, "betas": (0.9, 0.9), "maximize": True}, None),
    ("ASGD", {"lr": 0.1}, None),
    ("ASGD", {"lr": 0.1, "t0": 10, "lambd": 1e-2, "alpha": 0.5}, None),
    ("ASGD", {"lr": 0.1, "t0": 5, "weight_decay": 0.1, "maximize": True}, None),
    ("Rprop", {"lr": 0.01}, None),
    ("Rprop", {"lr": lambda m: m.tensor(0.01)}, None),
    ("Adam", {"lr": 0.01, "betas": lambda m: (m.tensor(0.8), m.tensor(0.99))}, None),
    ("AdamW", {"lr": lambda m: m.tensor(0.01), "amsgrad": True}, None),
    ("NAdam", {"lr": lambda m: m.tensor(0.01), "weight_decay": 0.1,
               "decoupled_weight_decay": True}, None),
    ("RAdam", {"lr": lambda m: m.tensor(0.01), "weight_decay": 0.1,
               "decoupled_weight_decay": True}, None),
    ("RMSprop", {"lr": lambda m: m.tensor(0.01), "momentum": 0.5}, None),
    ("Adagrad", {"lr": lambda m: m.tensor(0.1), "lr_decay": 0.01}, None),
    ("ASGD", {"lr": lambda m: m.tensor(0.05)}, None),
    ("Adadelta", {"lr": lambda m: m.tensor(0.5)}, None),
    ("Adamax", {"lr": lambda m: m.tensor(0.01)}, None),
    ("Rprop", {"lr": 0.01, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.05)}, None),
    ("Rprop", {"lr": 0.01, "maximize": True, "step_sizes": (1e-6, 0.02)}, None),
]


def _config_id(c):
    name, kwargs, groups = c
    opts = ",".join(f"{k}={'tensor' if callable(v) else v}" for k, v in kwargs.items())
    return f"{name}({opts})" + ("+group" if groups else "")


configs = pytest.mark.parametrize("config", CONFIGS, ids=[_config_id(c) for c in CONFIGS])


@configs
def test_matches_torch(config):
    name, kwargs, groups = config
    tp = make_params(torch)
    topt = make_opt(torch, name, kwargs, tp, groups)
    train(torch, topt, tp, STEPS)
    ep = make_params(ember)
    eopt = make_opt(ember, name, kwargs, ep, groups)
    train(ember, eopt, ep, STEPS)
    assert_params_close(ep, tp)
    assert ep[4].grad is None and (ep[4].detach().numpy() == INIT[4]).all()
    assert_same_state_dict(eopt.state_dict(), topt.state_dict())


def _round_trip(m, name, kwargs, groups):
    params = make_params(m)
    opt = make_opt(m, name, kwargs, params, groups)
    train(m, opt, params, STEPS // 2)
    saved = copy.deepcopy(opt.state_dict())
    params2 = make_params(m, values(params))
    opt2 = make_opt(m, name, kwargs, params2, groups)
    opt2.load_state_dict(saved)
    train(m, opt2, params2, STEPS - STEPS // 2)
    return params2, opt2


@configs
def test_state_dict_round_trip(config):
    # 25 steps, save (a deep copy, as torch.save would), load into a fresh optimizer on
    # fresh parameters holding the same values, 25 more: the parameters equal those of 50
    # uninterrupted torch steps, and the state equals torch's after the same round trip
    # (loading casts state tensors other than 'step' to the parameter's dtype)
    name, kwargs, groups = config
    tp = make_params(torch)
    topt = make_opt(torch, name, kwargs, tp, groups)
    train(torch, topt, tp, STEPS)
    ep, eopt = _round_trip(ember, name, kwargs, groups)
    assert_params_close(ep, tp)
    tp2, topt2 = _round_trip(torch, name, kwargs, groups)
    assert_same_state_dict(eopt.state_dict(), topt2.state_dict())


def test_float32_params():
    for name, kwargs in [("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {"lr": 0.01}),
                         ("NAdam", {"lr": 0.01}), ("ASGD", {"lr": 0.1})]:
        tp = make_params(torch, dtype=np.float32)
        topt = make_opt(torch, name, kwargs, tp)
        train(torch, topt, tp, 20, dtype=np.float32)
        ep = make_params(ember, dtype=np.float32)
        eopt = make_opt(ember, name, kwargs, ep)
        train(ember, eopt, ep, 20, dtype=np.float32)
        assert all(p.dtype is ember.float32 for p in ep)
        assert_params_close(ep, tp, rtol=1e-4, atol=1e-6)
        assert_same_state_dict(eopt.state_dict(), topt.state_dict(), rtol=1e-4)


def test_step_with_closure_returns_loss():
    for name in ["SGD", "Adam", "RMSprop"]:
        tp, ep = make_params(torch), make_params(ember)
        topt = make_opt(torch, name, {"lr": 0.01}, tp)
        eopt = make_opt(ember, name, {"lr": 0.01}, ep)
        tl = train(torch, topt, tp, 10, use_closure=True)
        el = train(ember, eopt, ep, 10, use_closure=True)
        np.testing.assert_allclose(el, tl, rtol=1e-10)
        assert_params_close(ep, tp)


def test_scalar_step_dtype_follows_default_dtype():
    prev = ember.get_default_dtype()
    try:
        ember.set_default_dtype(ember.float64)
        p = ember.zeros(2, requires_grad=True)
        opt = ember.optim.Adam([p])
        p.grad = ember.ones(2)
        opt.step()
        assert opt.state[p]["step"].dtype is ember.float64
    finally:
        ember.set_default_dtype(prev)
    p = ember.zeros(2, requires_grad=True)
    opt = ember.optim.Adam([p])
    p.grad = ember.ones(2)
    opt.step()
    step = opt.state[p]["step"]
    assert step.dtype is ember.float32 and step.dim() == 0 and step.item() == 1.0


def test_version_counter_bumped():
    p = ember.tensor([1.0, 2.0], requires_grad=True)
    y = p * p  # saves p for backward
    opt = ember.optim.SGD([p], lr=0.1)
    p.grad = ember.ones(2)
    v = p._version
    opt.step()
    assert p._version > v
    with pytest.raises(RuntimeError):
        y.sum().backward()


OPTIMIZERS = ["SGD", "Adam", "AdamW", "Adamax", "Adadelta", "Adagrad", "ASGD", "NAdam", "RAdam",
              "RMSprop", "Rprop"]
FLAGS = ["foreach", "maximize", "differentiable", "capturable", "fused", "nesterov", "amsgrad",
         "decoupled_weight_decay", "momentum", "centered"]


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_load_state_dict_fills_missing_flags(name):
    # a checkpoint from an older PyTorch lacks the newer flags: loading fills PyTorch's
    # values (which may differ from the constructor's), and training goes on identically
    kwargs = {"lr": 0.01} if name != "SGD" else {"lr": 0.01, "momentum": 0.9}
    results = []
    for m in (torch, ember):
        params = make_params(m)
        opt = make_opt(m, name, kwargs, params, {"lr": 0.02})
        train(m, opt, params, 3)
        sd = copy.deepcopy(opt.state_dict())
        for group in sd["param_groups"]:
            for flag in FLAGS:
                if flag != "momentum" or name == "RMSprop":
                    group.pop(flag, None)
        opt.load_state_dict(sd)
        train(m, opt, params, 3)
        results.append((params, opt.state_dict()))
    (tp, tsd), (ep, esd) = results
    assert_params_close(ep, tp)
    assert_same_state_dict(esd, tsd)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_step_bumps_state_versions(name):
    # a state tensor saved for backward and then updated by step(): backward must raise
    def fn(m):
        params = make_params(m)
        opt = make_opt(m, name, {"lr": 0.01, "momentum": 0.9} if name == "SGD" else {},
                       params)
        train(m, opt, params, 1)
        state = next(t for t in opt.state[params[0]].values()
                     if isinstance(t, m.Tensor) and t.dim() > 0)
        w = m.ones(state.shape, dtype=state.dtype, requires_grad=True)
        y = (w * state).sum()
        train(m, opt, params, 1)
        y.backward()
    check_raises(fn)


def test_zero_grad():
    for m in (torch, ember):
        p = m.tensor([1.0, 2.0], requires_grad=True)
        opt = m.optim.SGD([p], lr=0.1)
        (p * 3).sum().backward()
        opt.zero_grad(set_to_none=False)
        assert p.grad is not None and p.grad.tolist() == [0.0, 0.0]
        assert not p.grad.requires_grad
        opt.zero_grad()
        assert p.grad is None


def test_add_param_group_and_named_params():
    results = {}
    for m in (torch, ember):
        params = make_params(m)
        named = [(f"p{i}", p) for i, p in enumerate(params[:2])]
        opt = m.optim.Adam(named, lr=0.01)
        train(m, opt, params, 5)
        opt.add_param_group({"params": [("p2", params[2]), ("p3", params[3])], "lr": 0.02})
        train(m, opt, params, 10)
        results[m] = (params, opt.state_dict())
        assert opt.param_groups[0]["param_names"] == ["p0", "p1"]
    assert_params_close(results[ember][0], results[torch][0])
    assert_same_state_dict(results[ember][1], results[torch][1])


def test_repr_matches_torch():
    for name, kwargs, groups in [("SGD", {"lr": 0.1, "momentum": 0.9}, {"lr": 0.5}),
                                 ("Adam", {"lr": 0.01, "betas": (0.8, 0.9)}, None),
                                 ("LBFGS", {"history_size": 5}, None)]:
        t = make_opt(torch, name, kwargs, make_params(torch), groups)
        e = make_opt(ember, name, kwargs, make_params(ember), groups)
        assert repr(e) == repr(t)


def test_step_hooks():
    calls = []
    p = ember.tensor([1.0], requires_grad=True)
    opt = ember.optim.SGD([p], lr=0.5)
    h1 = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", args)))
    h2 = opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", args)))
    h3 = ember.optim.optimizer.register_optimizer_step_pre_hook(
        lambda o, args, kwargs: calls.append(("global", args)))
    p.grad = ember.tensor([1.0])
    opt.step()
    assert [c[0] for c in calls] == ["global", "pre", "post"]
    assert p.tolist() == [0.5]
    for h in (h1, h2, h3):
        h.remove()
    calls.clear()
    opt.step()
    assert calls == []

    # a pre hook may replace the arguments
    def closure():
        return ember.tensor(7.0)
    opt.register_step_pre_hook(lambda o, args, kwargs: ((), {"closure": closure}))
    assert opt.step().item() == 7.0


def test_state_dict_hooks():
    p = ember.tensor([1.0], requires_grad=True)
    opt = ember.optim.SGD([p], lr=0.5, momentum=0.9)
    seen = []
    opt.register_state_dict_pre_hook(lambda o: seen.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: dict(sd, extra=1))
    opt.register_load_state_dict_pre_hook(lambda o, sd: seen.append("load_pre"))
    opt.register_load_state_dict_post_hook(lambda o: seen.append("load_post"))
    sd = opt.state_dict()
    assert sd["extra"] == 1
    opt.load_state_dict(sd)
    assert seen == ["pre", "load_pre", "load_post"]


def test_differentiable_not_supported():
    p = ember.zeros(2, requires_grad=True)
    with pytest.raises(NotImplementedError, match="differentiable"):
        ember.optim.SGD([p], lr=0.1, differentiable=True)
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        p.grad = ember.ones(2)
        ember.optim.SparseAdam([p]).step()


def _p(m):
    return m.zeros(2, requires_grad=True)


ERRORS = [
    lambda m: m.optim.SGD([_p(m)], lr=-1.0),
    lambda m: m.optim.SGD([_p(m)], lr=0.1, momentum=-0.5),
    lambda m: m.optim.SGD([_p(m)], lr=0.1, weight_decay=-0.5),
    lambda m: m.optim.SGD([_p(m)], lr=0.1, nesterov=True),
    lambda m: m.optim.SGD([_p(m)], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True),
    lambda m: m.optim.SGD([_p(m)], lr=0.1, foreach=True, fused=True),
    lambda m: m.optim.SGD([_p(m)], lr=m.tensor([0.1, 0.2])),
    lambda m: m.optim.SGD(_p(m), lr=0.1),
    lambda m: m.optim.SGD([], lr=0.1),
    lambda m: m.optim.SGD([1.0], lr=0.1),
    lambda m: m.optim.SGD([_p(m) * 2], lr=0.1),
    lambda m: (lambda p: m.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1))(_p(m)),
    lambda m: (lambda p: m.optim.SGD([("a", p), _p(m)], lr=0.1))(_p(m)),
    lambda m: m.optim.Adam([_p(m)], betas=(1.0, 0.999)),
    lambda m: m.optim.Adam([_p(m)], betas=(0.9, -0.1)),
    lambda m: m.optim.Adam([_p(m)], betas=(0.9, 1)),
    lambda m: m.optim.Adam([_p(m)], eps=-1.0),
    lambda m: m.optim.Adam([_p(m)], weight_decay=-1.0),
    lambda m: m.optim.AdamW([_p(m)], lr=-0.1),
    lambda m: m.optim.RMSprop([_p(m)], alpha=-0.1),
    lambda m: m.optim.RMSprop([_p(m)], momentum=-0.1),
    lambda m: m.optim.Adagrad([_p(m)], lr_decay=-0.1),
    lambda m: m.optim.Adagrad([_p(m)], initial_accumulator_value=-0.1),
    lambda m: m.optim.Adadelta([_p(m)], rho=1.5),
    lambda m: m.optim.Adamax([_p(m)], betas=(0.9, 1.5)),
    lambda m: m.optim.NAdam([_p(m)], momentum_decay=-1.0),
    lambda m: m.optim.RAdam([_p(m)], eps=-1.0),
    lambda m: m.optim.ASGD([_p(m)], weight_decay=-1.0),
    lambda m: m.optim.Rprop([_p(m)], etas=(1.5, 1.2)),
    lambda m: m.optim.LBFGS([{"params": [_p(m)]}, {"params": [_p(m)]}]),
    lambda m: m.optim.Optimizer([_p(m)], {}).step(),
    lambda m: m.optim.SGD([_p(m)], lr=0.1).add_param_group([_p(m)]),
    lambda m: m.optim.SGD([_p(m)], lr=0.1).load_state_dict(
        m.optim.SGD([{"params": [_p(m)]}, {"params": [_p(m)]}], lr=0.1).state_dict()),
    lambda m: m.optim.SGD([_p(m)], lr=0.1).load_state_dict(
        m.optim.SGD([_p(m), _p(m)], lr=0.1).state_dict()),
]


@pytest.mark.parametrize("fn", ERRORS, ids=[f"error{i}" for i in range(len(ERRORS))])
def test_errors(fn):
    check_raises(fn)


def test_duplicate_params_warn():
    for m in (torch, ember):
        p = _p(m)
        with pytest.warns(UserWarning, match="duplicate parameters"):
            m.optim.SGD([p, p], lr=0.1)


# ----- LBFGS --------------------------------------------------------------------------
def rosenbrock(m, a, b):
    return ((1 - a) ** 2 + 100 * (b - a * a) ** 2).sum()


def run_lbfgs(m, kwargs, steps, start=(-1.5, 2.0)):
    a = m.tensor([start[0]], dtype=m.float64, requires_grad=True)
    b = m.tensor([start[1]], dtype=m.float64, requires_grad=True)
    opt = m.optim.LBFGS([a, b], **kwargs)
    losses = []

    def closure():
        opt.zero_grad()
        loss = rosenbrock(m, a, b)
        loss.backward()
        return loss
    for _ in range(steps):
        losses.append(opt.step(closure).item())
    return [a, b], opt, losses


# (kwargs, steps): Rosenbrock amplifies rounding differences (about 10x per ten
# iterations in its curved valley), so each run stays within about 40 iterations
LBFGS_CONFIGS = [
    ({}, 2),
    ({"lr": 0.5, "max_iter": 5}, 6),
    ({"history_size": 3, "max_iter": 10}, 3),
    ({"line_search_fn": "strong_wolfe"}, 6),
    ({"line_search_fn": "strong_wolfe", "history_size": 4, "max_iter": 7, "max_eval": 9}, 4),
    ({"lr": 0.1, "tolerance_change": 1e-5, "tolerance_grad": 1e-4}, 2),
]


@pytest.mark.parametrize("kwargs,steps", LBFGS_CONFIGS, ids=str)
def test_lbfgs_rosenbrock(kwargs, steps):
    tp, topt, tl = run_lbfgs(torch, kwargs, steps)
    ep, eopt, el = run_lbfgs(ember, kwargs, steps)
    np.testing.assert_allclose(el, tl, rtol=1e-6)
    assert_params_close(ep, tp, rtol=1e-6)
    ts, es = topt.state_dict()["state"][0], eopt.state_dict()["state"][0]
    assert set(es) == set(ts)
    assert es["func_evals"] == ts["func_evals"] and es["n_iter"] == ts["n_iter"]
    assert len(es["old_dirs"]) == len(ts["old_dirs"])
    np.testing.assert_allclose(es["d"].numpy(), ts["d"].numpy(), rtol=1e-6, atol=1e-12)


def test_lbfgs_model_and_round_trip():
    kwargs = {"lr": 0.5, "max_iter": 4, "history_size": 5, "line_search_fn": "strong_wolfe"}
    tp = make_params(torch)
    topt = torch.optim.LBFGS(tp, **kwargs)
    tl = train(torch, topt, tp, 6, use_closure=True)
    ep = make_params(ember)
    eopt = ember.optim.LBFGS(ep, **kwargs)
    el = train(ember, eopt, ep, 3, use_closure=True)
    saved = copy.deepcopy(eopt.state_dict())
    ep2 = make_params(ember, values(ep))
    eopt2 = ember.optim.LBFGS(ep2, **kwargs)
    eopt2.load_state_dict(saved)
    el += train(ember, eopt2, ep2, 3, use_closure=True)
    np.testing.assert_allclose(el, tl, rtol=1e-6)
    assert_params_close(ep2, tp, rtol=1e-5)


def test_lbfgs_converges_and_bad_line_search():
    ep, _, el = run_lbfgs(ember, {"line_search_fn": "strong_wolfe"}, 10)
    np.testing.assert_allclose([p.item() for p in ep], [1.0, 1.0], atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_raises(lambda m: run_lbfgs(m, {"line_search_fn": "armijo"}, 1))


# ----- swa_utils: AveragedModel ------------------------------------------------------------
def _tiny(m):
    class Tiny(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = m.nn.Parameter(m.tensor(INIT[0].copy()))
            self.register_buffer("b", m.tensor(INIT[1].copy()))
            self.register_buffer("count", m.tensor(3))

        def forward(self, x):
            return x @ self.w + self.b[0]
    return Tiny()


SWA_CONFIGS = {
    "swa": lambda m: {},
    "swa-buffers": lambda m: {"use_buffers": True},
    "ema-multi": lambda m: {"multi_avg_fn": m.optim.swa_utils.get_ema_multi_avg_fn(0.9)},
    "ema-multi-buffers": lambda m: {"multi_avg_fn": m.optim.swa_utils.get_ema_multi_avg_fn(0.3),
                                    "use_buffers": True},
    "ema-fn": lambda m: {"avg_fn": m.optim.swa_utils.get_ema_avg_fn(0.8)},
    "swa-fn": lambda m: {"avg_fn": m.optim.swa_utils.get_swa_avg_fn()},
    "swa-multi": lambda m: {"multi_avg_fn": m.optim.swa_utils.get_swa_multi_avg_fn()},
}


@pytest.mark.parametrize("name", list(SWA_CONFIGS))
def test_averaged_model(name):
    results = []
    for m in (torch, ember):
        model = _tiny(m)
        avg = m.optim.swa_utils.AveragedModel(model, **SWA_CONFIGS[name](m))
        rng = np.random.default_rng(1)
        for _ in range(6):
            model.w.data = m.tensor(rng.standard_normal(SHAPES[0]))
            model.b.data = m.tensor(rng.standard_normal(SHAPES[1]))
            model.count.data = model.count.data + 2
            avg.update_parameters(model)
        x = m.tensor(X)
        results.append([avg.module.w.detach().numpy().copy(), avg.module.b.numpy().copy(),
                        avg.module.count.numpy().copy(), avg.n_averaged.numpy().copy(),
                        avg(x).detach().numpy().copy()])
    for i, (t, e) in enumerate(zip(*results)):
        assert e.dtype == t.dtype, i
        np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-14, err_msg=f"item {i}")


def test_swa_errors():
    check_raises(lambda m: m.optim.swa_utils.get_ema_avg_fn(1.5))
    check_raises(lambda m: m.optim.swa_utils.get_ema_multi_avg_fn(-0.1))
    check_raises(lambda m: m.optim.swa_utils.AveragedModel(
        _tiny(m), avg_fn=m.optim.swa_utils.get_swa_avg_fn(),
        multi_avg_fn=m.optim.swa_utils.get_swa_multi_avg_fn()))


def test_update_bn_without_batchnorm_is_a_no_op():
    model = _tiny(ember)
    model.eval()
    ember.optim.swa_utils.update_bn([ember.tensor(X)], model)
    assert not model.training


@pytest.mark.parametrize("name,kwargs", [("SGD", {"lr": 0.1, "momentum": 0.9}),
                                         ("Adam", {"lr": 0.01, "amsgrad": True}),
                                         ("NAdam", {"lr": 0.01}), ("Adagrad", {"lr": 0.1})])
def test_checkpoint_from_torch(name, kwargs):
    # torch trains 25 steps and saves a checkpoint; ember and torch each load it into a
    # fresh optimizer and train 25 more
    import io
    tp = make_params(torch)
    topt = make_opt(torch, name, kwargs, tp)
    train(torch, topt, tp, STEPS // 2)
    buf = io.BytesIO()
    torch.save({"params": [p.detach() for p in tp], "opt": topt.state_dict()}, buf)
    train(torch, topt, tp, STEPS - STEPS // 2)
    finals = []
    for m in (torch, ember):
        buf.seek(0)
        ckpt = m.load(buf)
        params = [p.clone().requires_grad_(True) for p in ckpt["params"]]
        opt = make_opt(m, name, kwargs, params)
        opt.load_state_dict(ckpt["opt"])
        train(m, opt, params, STEPS - STEPS // 2)
        finals.append((params, opt.state_dict()))
    (tp2, tsd), (ep, esd) = finals
    assert_params_close(ep, tp)
    assert_params_close(ep, tp2)
    assert_same_state_dict(esd, tsd)


def test_update_bn_matches_torch():
    results = []
    batches = [np.random.default_rng(i).standard_normal((6, 4)) for i in range(3)]
    for m in (torch, ember):
        model = m.nn.Sequential(m.nn.BatchNorm1d(4).double())
        bn = model[0]
        with m.no_grad():
            bn(m.tensor(batches[0] * 5 + 3))  # stale statistics, to be recomputed
        model.eval()
        loader = [(m.tensor(b), None) for b in batches]
        m.optim.swa_utils.update_bn(loader, model)
        assert not model.training and bn.momentum == 0.1
        results.append([bn.running_mean.numpy().copy(), bn.running_var.numpy().copy(),
                        bn.num_batches_tracked.item()])
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-12)
    assert results[1][2] == results[0][2]


def test_wrapping_optimizer_without_optimizer_init_steps_as_torch():
    # accelerate's AcceleratedOptimizer subclasses Optimizer, never calls its __init__ and
    # forwards step to the optimizer it wraps: no hooks of its own run, the inner ones do
    import importlib

    def run(m):
        class Wrapper(m.optim.Optimizer):
            def __init__(self, inner):
                self.inner = inner

            @property
            def param_groups(self):
                return self.inner.param_groups

            def step(self, closure=None):
                return self.inner.step(closure)

        w = m.nn.Parameter(m.tensor([1.0, -2.0]))
        inner = m.optim.SGD([w], lr=0.1, momentum=0.9)
        calls = []
        inner.register_step_pre_hook(lambda o, a, k: calls.append("inner"))
        optimizer_module = importlib.import_module(m.__name__ + ".optim.optimizer")
        handle = optimizer_module.register_optimizer_step_pre_hook(
            lambda o, a, k: calls.append(type(o).__name__))
        try:
            wrapper = Wrapper(inner)
            for _ in range(2):
                (w * w).sum().backward()
                wrapper.step()
                w.grad = None
        finally:
            handle.remove()
        return w.detach().numpy(), calls

    (want, want_calls), (got, got_calls) = run(torch), run(ember)
    np.testing.assert_array_equal(got, want)
    assert got_calls == want_calls == ["SGD", "inner"] * 2
