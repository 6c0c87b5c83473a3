"""ember.optim.Adafactor and ember.optim.Muon against torch.optim's.

Each run sets the same gradients on the same parameters for many steps (fixed arrays,
so no model is involved), in float32 and float64, and compares the parameters and the
whole ``state_dict()`` (keys in order, shapes, dtypes, values). One parameter never gets
a gradient: the optimizers must leave it and its state alone.
"""
import copy
import io

import numpy as np
import pytest
import torch
from oracle import check_raises

import ember

STEPS = 30

# (shape, how the parameter is made): "plain", "t" (a transposed, non-contiguous leaf),
# "unused" (no gradient ever)
ADAFACTOR_PARAMS = [((4, 5), "plain"), ((5,), "plain"), ((), "plain"), ((2, 3, 4), "plain"),
                    ((6, 3), "t"), ((2,), "unused"), ((1, 7), "plain")]
MUON_PARAMS = [((4, 5), "plain"), ((7, 3), "plain"), ((1, 6), "plain"), ((6, 3), "t"),
               ((3, 3), "unused"), ((5, 1), "plain")]


def _array(rng, shape, scale=1.0):
    return np.asarray(rng.standard_normal(shape) * scale)


def make_params(m, layout, dtype, seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for shape, kind in layout:
        if kind == "t":
            a = _array(rng, shape[::-1], 0.5).astype(dtype)
            p = m.tensor(a).t().detach().requires_grad_(True)
            assert not p.is_contiguous() and p.is_leaf
        else:
            p = m.tensor(_array(rng, shape, 0.5).astype(dtype), requires_grad=True)
        params.append(p)
    return params


def gradients(layout, steps, seed=1, special=True):
    """Per step, per parameter, a gradient array (None for the unused parameter). With
    ``special``, step 3 has all-zero gradients and step 5 a huge and a tiny one."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(steps):
        row = []
        for shape, kind in layout:
            if kind == "unused":
                row.append(None)
                continue
            g = _array(rng, shape if kind != "t" else shape[::-1]).reshape(shape)
            if special and t == 3:
                g = np.zeros(shape)
            if special and t == 5 and g.size:
                g.flat[0] = 1e6
                g.flat[-1] = 1e-12
            row.append(g)
        out.append(row)
    return out


def spec(params, groups):
    if groups is None:
        return params
    return [{"params": params[:3]}, dict({"params": params[3:]}, **groups)]


def resolve(m, kwargs):
    return {k: (v(m) if callable(v) else v) for k, v in kwargs.items()}


def train(m, opt, params, grads, dtype):
    for row in grads:
        for p, g in zip(params, row):
            p.grad = None if g is None else m.tensor(g.astype(dtype))
        assert opt.step() is None


def run(m, name, layout, kwargs, dtype, groups=None, steps=STEPS, seed=0):
    params = make_params(m, layout, dtype, seed)
    opt = getattr(m.optim, name)(spec(params, groups), **resolve(m, kwargs))
    train(m, opt, params, gradients(layout, steps), dtype)
    return params, opt


def _dtype_name(dt):
    return str(dt).split(".")[-1]


def assert_same_value(e, t, where, rtol, atol):
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{where}: expected a Tensor, got {type(e)}"
        assert tuple(e.shape) == tuple(t.shape), where
        assert _dtype_name(e.dtype) == _dtype_name(t.dtype), where
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=where)
    elif isinstance(t, (list, tuple)):
        assert type(e) is type(t) and len(e) == len(t), where
        for i, (a, b) in enumerate(zip(e, t)):
            assert_same_value(a, b, f"{where}[{i}]", rtol, atol)
    else:
        assert type(e) is type(t) and e == t, f"{where}: {e!r} != {t!r}"


def assert_same(e_params, e_opt, t_params, t_opt, rtol, atol):
    for i, (e, t) in enumerate(zip(e_params, t_params)):
        assert_same_value(e, t, f"parameter {i}", rtol, atol)
    esd, tsd = e_opt.state_dict(), t_opt.state_dict()
    assert list(esd["state"]) == list(tsd["state"])
    for k, ts in tsd["state"].items():
        es = esd["state"][k]
        assert list(es) == list(ts), f"state[{k}] keys"
        for name in ts:
            assert_same_value(es[name], ts[name], f"state[{k}][{name!r}]", rtol, atol)
    assert len(esd["param_groups"]) == len(tsd["param_groups"])
    for i, (eg, tg) in enumerate(zip(esd["param_groups"], tsd["param_groups"])):
        assert list(eg) == list(tg), f"param_groups[{i}] keys"
        for key in tg:
            assert_same_value(eg[key], tg[key], f"param_groups[{i}][{key!r}]", 1e-7, 0)


# float64 follows torch to rounding; float32 to a few float32 ulps (reductions are
# summed in another order)
ADAFACTOR_TOL = {np.float64: (1e-12, 1e-14), np.float32: (1e-5, 1e-6)}

ADAFACTOR_CONFIGS = [
    ({}, None),
    ({"lr": 0.05, "weight_decay": 0.1}, None),
    ({"maximize": True, "weight_decay": 0.01}, None),
    ({"eps": (1e-20, 1e-2), "d": 2.0, "beta2_decay": -0.5}, None),
    ({"eps": (0.0, 0.0), "beta2_decay": 0.0}, None),
    ({"lr": lambda m: m.tensor(0.05), "weight_decay": 0.1}, None),
    ({"lr": lambda m: m.tensor(0.5)}, None),  # 1/sqrt(t) is the smaller from step 5
    ({"foreach": True, "lr": 0.02}, {"lr": 0.1, "eps": (1e-30, 1e-3), "maximize": True}),
    ({"foreach": False}, {"weight_decay": 0.2, "d": 1.5}),
]


def _ids(configs):
    return [",".join(f"{k}={'tensor' if callable(v) else v}" for k, v in kw.items())
            + ("+group" if g else "") for kw, g in configs]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("config", ADAFACTOR_CONFIGS, ids=_ids(ADAFACTOR_CONFIGS))
def test_adafactor_matches_torch(config, dtype):
    kwargs, groups = config
    tp, topt = run(torch, "Adafactor", ADAFACTOR_PARAMS, kwargs, dtype, groups)
    ep, eopt = run(ember, "Adafactor", ADAFACTOR_PARAMS, kwargs, dtype, groups)
    assert_same(ep, eopt, tp, topt, *ADAFACTOR_TOL[dtype])
    unused = [i for i, (_, kind) in enumerate(ADAFACTOR_PARAMS) if kind == "unused"]
    for i in unused:
        assert ep[i].grad is None and i not in eopt.state_dict()["state"]
    # the factored state of a 3-d parameter: its last two dimensions, batched
    state = eopt.state[ep[3]]
    assert list(state) == ["step", "row_var", "col_var"]
    assert tuple(state["row_var"].shape) == (2, 3, 1)
    assert tuple(state["col_var"].shape) == (2, 1, 4)
    assert list(eopt.state[ep[2]]) == ["step", "variance"]


def test_adafactor_eps1_from_the_first_parameter_of_the_group():
    # eps=(None, ...) takes the first updated parameter's machine epsilon for the whole
    # group (torch's choice): a float64 parameter after a float32 one gets float32's
    layouts = []
    for m in (torch, ember):
        a = m.ones(3, requires_grad=True)
        b = m.ones(3, dtype=m.float64, requires_grad=True)
        a.grad = m.full((3,), 1e-10)
        b.grad = m.full((3,), 1e-10, dtype=m.float64)
        m.optim.Adafactor([a, b]).step()
        layouts.append(b.detach().numpy().copy())
    np.testing.assert_allclose(layouts[1], layouts[0], rtol=1e-14)
    assert not np.allclose(layouts[1], 1 - 1e-2)  # not float64's epsilon


def test_adafactor_nan_and_inf_gradients():
    layout = [((3, 4), "plain"), ((4,), "plain")]
    for dtype in (np.float32, np.float64):
        res = []
        for m in (torch, ember):
            params = make_params(m, layout, dtype)
            opt = m.optim.Adafactor(params, lr=0.05)
            grads = gradients(layout, 4, special=False)
            grads[2][0][1, 2] = np.nan
            grads[2][1][0] = np.inf
            train(m, opt, params, grads, dtype)
            res.append([p.detach().numpy().copy() for p in params])
        for e, t in zip(*res[::-1]):
            np.testing.assert_array_equal(np.isnan(e), np.isnan(t))
            np.testing.assert_allclose(e, t, rtol=1e-5)


# Muon's update goes through bfloat16 products: ember rounds as torch does, but a sum
# accumulated in another order can land on the next bfloat16 value (2**-8 relative),
# moving a parameter by up to lr * that
MUON_TOL = {np.float64: (1e-5, 2e-4), np.float32: (1e-5, 2e-4)}

MUON_CONFIGS = [
    ({"lr": 0.02}, None),
    ({}, None),
    ({"lr": 0.02, "nesterov": False, "momentum": 0.9, "weight_decay": 0.0}, None),
    ({"lr": 0.02, "adjust_lr_fn": "match_rms_adamw"}, None),
    ({"lr": 0.02, "adjust_lr_fn": "original", "ns_steps": 3,
      "ns_coefficients": (2.0, -1.5, 0.5), "eps": 1e-5}, None),
    ({"lr": lambda m: m.tensor(0.02), "weight_decay": 0.05}, None),
    ({"lr": 0.01, "momentum": 0.3}, {"lr": 0.03, "weight_decay": 0.0, "nesterov": False}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("config", MUON_CONFIGS, ids=_ids(MUON_CONFIGS))
def test_muon_matches_torch(config, dtype):
    kwargs, groups = config
    tp, topt = run(torch, "Muon", MUON_PARAMS, kwargs, dtype, groups)
    ep, eopt = run(ember, "Muon", MUON_PARAMS, kwargs, dtype, groups)
    assert_same(ep, eopt, tp, topt, *MUON_TOL[dtype])
    assert ep[4].grad is None and 4 not in eopt.state_dict()["state"]
    assert list(eopt.state[ep[0]]) == ["momentum_buffer"]


def test_muon_orthogonalizes():
    # one step from zero momentum with nesterov off: the update is NS(g), whose singular
    # values lie near 1 (between 0.5 and 1.5, by the quintic's design)
    g = np.random.default_rng(3).standard_normal((6, 10))
    for m in (torch, ember):
        p = m.zeros(6, 10, requires_grad=True)
        p.grad = m.tensor(g, dtype=m.float32)
        m.optim.Muon([p], lr=1.0, momentum=0.0, nesterov=False, weight_decay=0).step()
        s = np.linalg.svd(-p.detach().numpy(), compute_uv=False)
        assert 0.5 < s.min() and s.max() < 1.5


def test_muon_bfloat16_rounding_matches_torch():
    from ember.optim.muon import _bfloat16
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.standard_normal(1000).astype(np.float32) * 10.0 ** rng.integers(
        -40, 38, 1000), np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.4e38, 1e-45,
                                  1.00390625, 1.01171875], np.float32)])
    expected = torch.tensor(x).bfloat16().float().numpy()
    got = _bfloat16(x)
    np.testing.assert_array_equal(got, expected)
    numbers = ~np.isnan(expected)  # (a NaN's sign bit is no promise of either)
    assert (np.signbit(got) == np.signbit(expected))[numbers].all()
    # float64 goes through float32, as torch converts it: 1 + 2**-8 + 2**-30 becomes
    # the tie 1 + 2**-8, rounded to even (1.0), not up
    x64 = np.array([1 + 2 ** -8 + 2 ** -30, -(1 + 2 ** -8 + 2 ** -30), 1e300, 1e-300])
    np.testing.assert_array_equal(_bfloat16(x64),
                                  torch.tensor(x64).bfloat16().float().numpy())
    assert _bfloat16(x64)[0] == 1.0


def _checkpoint_case(name, layout, kwargs):
    # torch trains 10 steps and saves a checkpoint; ember and torch each load it into a
    # fresh optimizer and train 10 more: both end where 20 uninterrupted torch steps do
    dtype = np.float64
    grads = gradients(layout, 20)
    tp = make_params(torch, layout, dtype)
    topt = torch.optim.__dict__[name](tp, **kwargs)
    train(torch, topt, tp, grads[:10], dtype)
    buf = io.BytesIO()
    torch.save({"params": [p.detach() for p in tp], "opt": topt.state_dict()}, buf)
    train(torch, topt, tp, grads[10:], dtype)
    finals = []
    for m in (torch, ember):
        buf.seek(0)
        ckpt = m.load(buf)
        params = [p.clone().requires_grad_(True) for p in ckpt["params"]]
        opt = getattr(m.optim, name)(params, **kwargs)
        opt.load_state_dict(ckpt["opt"])
        train(m, opt, params, grads[10:], dtype)
        finals.append((params, opt))
    (tp2, topt2), (ep, eopt) = finals
    return ep, eopt, tp, topt, tp2, topt2


@pytest.mark.parametrize("name,layout,kwargs,tol", [
    ("Adafactor", ADAFACTOR_PARAMS, {"weight_decay": 0.1}, ADAFACTOR_TOL[np.float64]),
    ("Muon", MUON_PARAMS, {"lr": 0.02}, MUON_TOL[np.float64])])
def test_checkpoint_from_torch(name, layout, kwargs, tol):
    ep, eopt, tp, topt, tp2, topt2 = _checkpoint_case(name, layout, kwargs)
    assert_same(ep, eopt, tp2, topt2, *tol)
    for e, t in zip(ep, tp):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol[0],
                                   atol=tol[1])


@pytest.mark.parametrize("name,layout,kwargs", [
    ("Adafactor", ADAFACTOR_PARAMS, {"maximize": True}), ("Muon", MUON_PARAMS, {"lr": 0.02})])
def test_checkpoint_to_torch(name, layout, kwargs, tmp_path):
    # ember's saved optimizer state loads into torch, which continues as ember does
    dtype = np.float64
    grads = gradients(layout, 16)
    ep = make_params(ember, layout, dtype)
    eopt = getattr(ember.optim, name)(ep, **kwargs)
    train(ember, eopt, ep, grads[:8], dtype)
    path = tmp_path / "ckpt.pt"
    ember.save({"params": [p.detach() for p in ep], "opt": eopt.state_dict()}, path)
    ckpt = torch.load(path, weights_only=True)
    tp = [p.clone().requires_grad_(True) for p in ckpt["params"]]
    topt = getattr(torch.optim, name)(tp, **kwargs)
    topt.load_state_dict(ckpt["opt"])
    train(torch, topt, tp, grads[8:], dtype)
    train(ember, eopt, ep, grads[8:], dtype)
    tol = ADAFACTOR_TOL[dtype] if name == "Adafactor" else MUON_TOL[dtype]
    assert_same(ep, eopt, tp, topt, *tol)


def test_round_trip_through_deepcopy():
    for name, layout, kwargs in [("Adafactor", ADAFACTOR_PARAMS, {}),
                                 ("Muon", MUON_PARAMS, {"lr": 0.02})]:
        grads = gradients(layout, 12)
        ep = make_params(ember, layout, np.float32)
        eopt = getattr(ember.optim, name)(ep, **kwargs)
        train(ember, eopt, ep, grads[:6], np.float32)
        saved = copy.deepcopy(eopt.state_dict())
        for g in saved["param_groups"]:
            g.pop("foreach", None)  # as saved by an older version: filled back in
        ep2 = [p.detach().clone().requires_grad_(True) for p in ep]
        eopt2 = getattr(ember.optim, name)(ep2, **kwargs)
        eopt2.load_state_dict(saved)
        if name == "Adafactor":
            assert eopt2.param_groups[0]["foreach"] is None
        train(ember, eopt, ep, grads[6:], np.float32)
        train(ember, eopt2, ep2, grads[6:], np.float32)
        for a, b in zip(ep, ep2):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def _p(m, *shape, dtype=None):
    return m.zeros(*shape, dtype=dtype, requires_grad=True)


@pytest.mark.parametrize("make", [
    lambda m: m.optim.Adafactor([_p(m, 3)], lr=-0.1),
    lambda m: m.optim.Adafactor([_p(m, 3)], lr=m.tensor([0.1, 0.2])),
    lambda m: m.optim.Adafactor([_p(m, 3)], beta2_decay=0.1),
    lambda m: m.optim.Adafactor([_p(m, 3)], eps=(-1e-3, 1e-3)),
    lambda m: m.optim.Adafactor([_p(m, 3)], eps=(None, -1e-3)),
    lambda m: m.optim.Adafactor([_p(m, 3)], d=0.5),
    lambda m: m.optim.Adafactor([_p(m, 3)], weight_decay=-0.1),
    lambda m: m.optim.Adafactor([_p(m, 3)], 0.1, -0.8, (None, 1e-3), 1.0, 0.0, None),
    lambda m: m.optim.Adafactor([_p(m, 3)], differentiable=False),
    lambda m: m.optim.Adafactor([]),
    lambda m: m.optim.Muon([_p(m, 3, 3)], lr=-1.0),
    lambda m: m.optim.Muon([_p(m, 3, 3)], lr=m.tensor([0.1, 0.2])),
    lambda m: m.optim.Muon([_p(m, 3, 3)], momentum=-0.5),
    lambda m: m.optim.Muon([_p(m, 3, 3)], weight_decay=-0.1),
    lambda m: m.optim.Muon([_p(m, 3, 3)], adjust_lr_fn="sqrt"),
    lambda m: m.optim.Muon([_p(m, 3)]),
    lambda m: m.optim.Muon([_p(m, 3, 3), _p(m, ())]),
    lambda m: m.optim.Muon([{"params": [_p(m, 3, 3)]}, {"params": [_p(m, 2, 2, 2)]}]),
    lambda m: m.optim.Muon([_p(m, 3, 3)], foreach=True),
    lambda m: m.optim.Muon([_p(m, 3, 3)], maximize=True),
])
def test_invalid_arguments_raise_as_torch(make):
    check_raises(make)


def _step_with(m, opt_of, p, g):
    p.grad = g
    opt_of([p]).step()


@pytest.mark.parametrize("case", [
    # complex parameters: refused at the step, as in torch
    lambda m: _step_with(m, m.optim.Adafactor, _p(m, 3, dtype=m.complex64),
                         m.ones(3, dtype=m.complex64)),
    lambda m: _step_with(m, m.optim.Muon, _p(m, 2, 2, dtype=m.complex64),
                         m.ones(2, 2, dtype=m.complex64)),
    # Newton-Schulz's arguments are checked when it runs
    lambda m: _step_with(m, lambda ps: m.optim.Muon(ps, ns_steps=100), _p(m, 2, 3),
                         m.ones(2, 3)),
    lambda m: _step_with(m, lambda ps: m.optim.Muon(ps, ns_coefficients=(1.0, 2.0)),
                         _p(m, 2, 3), m.ones(2, 3)),
    # an empty parameter: a division by its zero size
    lambda m: _step_with(m, m.optim.Adafactor, _p(m, 0, 3), m.zeros(0, 3)),
    lambda m: _step_with(m, m.optim.Muon, _p(m, 3, 0), m.zeros(3, 0)),
])
def test_step_errors_as_torch(case):
    check_raises(case)


def test_muon_group_added_later_is_checked_at_the_step():
    for m in (torch, ember):
        p = _p(m, 3, 3)
        p.grad = m.ones(3, 3)
        opt = m.optim.Muon([p])
        q = _p(m, 3)
        q.grad = m.ones(3)
        opt.add_param_group({"params": [q]})  # accepted: torch checks only at construction
        with pytest.raises(ValueError, match="Param gradient must be a 2D matrix"):
            opt.step()


def test_muon_empty_rows_and_adafactor_zero_d_and_versions():
    for m in (torch, ember):
        p = _p(m, 0, 3)
        p.grad = m.zeros(0, 3)
        m.optim.Muon([p]).step()
        assert tuple(p.shape) == (0, 3)
    q = ember.tensor(2.0, requires_grad=True)
    q.grad = ember.tensor(0.5)
    opt = ember.optim.Adafactor([q])
    v = q._version
    opt.step()
    assert q._version > v and q.dim() == 0
    assert opt.state[q]["variance"].dim() == 0
    assert opt.state[q]["step"].dim() == 0


def test_defaults_match_torch():
    for name, shape in [("Adafactor", (3,)), ("Muon", (3, 3))]:
        groups = [getattr(m.optim, name)([_p(m, *shape)]).state_dict()["param_groups"]
                  for m in (torch, ember)]
        assert groups[1] == groups[0]
