"""ember.optim.lr_scheduler against torch.optim.lr_scheduler.

Each scenario builds the same optimizer (two param groups) and scheduler in both
libraries, steps 40 times and compares the learning rates (and cycled momentum or
beta1) after every step to 1e-12; a second run saves the optimizer's and scheduler's
state dicts halfway, loads them into fresh ones and continues.
"""
import copy
import math
import warnings

import numpy as np
import pytest
import torch
from oracle import check_raises

import ember

N = 40
METRICS = list(np.round(np.cumsum(np.random.default_rng(0).normal(0.0, 1.0, N)) * 0.1, 6))


def _groups(m):
    return [{"params": [m.zeros(2, requires_grad=True)]},
            {"params": [m.zeros(3, requires_grad=True)], "lr": 0.05}]


def sgd(m):
    return m.optim.SGD(_groups(m), lr=0.1, momentum=0.9)


def adam(m):
    return m.optim.Adam(_groups(m), lr=0.1)


def sgd_tensor_lr(m):
    return m.optim.SGD([m.zeros(2, requires_grad=True)], lr=m.tensor(0.1))


def S(m):
    return m.optim.lr_scheduler


class MulBy:
    """A callable object (its __dict__ goes into the state dict, unlike a function's)."""

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, epoch):
        return self.factor ** epoch


SCENARIOS = {
    "StepLR": (sgd, lambda m, o: S(m).StepLR(o, step_size=3, gamma=0.5)),
    "MultiStepLR": (sgd, lambda m, o: S(m).MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3)),
    "ExponentialLR": (sgd, lambda m, o: S(m).ExponentialLR(o, gamma=0.9)),
    "CosineAnnealingLR": (sgd, lambda m, o: S(m).CosineAnnealingLR(o, T_max=10, eta_min=1e-3)),
    "CosineAnnealingLR-T7": (sgd, lambda m, o: S(m).CosineAnnealingLR(o, T_max=7)),
    "CosineAnnealingWarmRestarts": (
        sgd, lambda m, o: S(m).CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2, eta_min=0.01)),
    "CosineAnnealingWarmRestarts-T4": (
        sgd, lambda m, o: S(m).CosineAnnealingWarmRestarts(o, T_0=4)),
    "LambdaLR": (sgd, lambda m, o: S(m).LambdaLR(o, lambda e: 0.95 ** e)),
    "LambdaLR-list": (sgd, lambda m, o: S(m).LambdaLR(o, [lambda e: 1 / (e + 1), MulBy(0.8)])),
    "MultiplicativeLR": (sgd, lambda m, o: S(m).MultiplicativeLR(o, lambda e: 0.9)),
    "LinearLR": (sgd, lambda m, o: S(m).LinearLR(o, start_factor=0.25, end_factor=0.9,
                                                 total_iters=8)),
    "LinearLR-default": (sgd, lambda m, o: S(m).LinearLR(o)),
    "ConstantLR": (sgd, lambda m, o: S(m).ConstantLR(o, factor=0.5, total_iters=4)),
    "PolynomialLR": (sgd, lambda m, o: S(m).PolynomialLR(o, total_iters=20, power=2.0)),
    "OneCycleLR-cos": (sgd, lambda m, o: S(m).OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=41)),
    "OneCycleLR-linear": (sgd, lambda m, o: S(m).OneCycleLR(
        o, max_lr=0.8, epochs=4, steps_per_epoch=11, anneal_strategy="linear", pct_start=0.25,
        div_factor=10.0, final_div_factor=100.0)),
    "OneCycleLR-three_phase": (sgd, lambda m, o: S(m).OneCycleLR(
        o, max_lr=1.0, total_steps=45, three_phase=True, base_momentum=[0.8, 0.7],
        max_momentum=0.9)),
    "OneCycleLR-adam": (adam, lambda m, o: S(m).OneCycleLR(o, max_lr=0.01, total_steps=41)),
    "OneCycleLR-no_momentum": (adam, lambda m, o: S(m).OneCycleLR(
        o, max_lr=0.01, total_steps=50, cycle_momentum=False)),
    "CyclicLR-triangular": (sgd, lambda m, o: S(m).CyclicLR(o, base_lr=0.01, max_lr=0.1,
                                                            step_size_up=4)),
    "CyclicLR-triangular2": (sgd, lambda m, o: S(m).CyclicLR(
        o, base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3, step_size_down=6,
        mode="triangular2")),
    "CyclicLR-exp_range": (sgd, lambda m, o: S(m).CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=5, mode="exp_range", gamma=0.95,
        base_momentum=0.7, max_momentum=0.95)),
    "CyclicLR-adam": (adam, lambda m, o: S(m).CyclicLR(o, base_lr=0.001, max_lr=0.01,
                                                       step_size_up=6)),
    "CyclicLR-scale_fn": (sgd, lambda m, o: S(m).CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=4, scale_fn=MulBy(0.7),
        scale_mode="iterations", cycle_momentum=False)),
    "ReduceLROnPlateau": (sgd, lambda m, o: S(m).ReduceLROnPlateau(o, patience=2, factor=0.5)),
    "ReduceLROnPlateau-max-abs": (sgd, lambda m, o: S(m).ReduceLROnPlateau(
        o, mode="max", patience=1, factor=0.7, threshold=0.05, threshold_mode="abs",
        cooldown=2, min_lr=[0.01, 0.02])),
    "ReduceLROnPlateau-min_lr": (sgd, lambda m, o: S(m).ReduceLROnPlateau(
        o, patience=0, factor=0.3, min_lr=0.004, eps=1e-4)),
    "SequentialLR": (sgd, lambda m, o: S(m).SequentialLR(
        o, [S(m).LinearLR(o, start_factor=0.1, total_iters=5), S(m).ExponentialLR(o, 0.9)],
        milestones=[5])),
    "SequentialLR-three": (sgd, lambda m, o: S(m).SequentialLR(
        o, [S(m).ConstantLR(o, factor=0.5, total_iters=3), S(m).StepLR(o, 4, gamma=0.5),
            S(m).CosineAnnealingLR(o, T_max=8)], milestones=[6, 20])),
    "ChainedScheduler": (sgd, lambda m, o: S(m).ChainedScheduler(
        [S(m).ConstantLR(o, factor=0.1, total_iters=2), S(m).ExponentialLR(o, gamma=0.9)])),
    "ChainedScheduler-optimizer": (sgd, lambda m, o: S(m).ChainedScheduler(
        [S(m).StepLR(o, 5, gamma=0.5), S(m).MultiplicativeLR(o, lambda e: 0.99)], optimizer=o)),
    "SWALR-cos": (sgd, lambda m, o: m.optim.swa_utils.SWALR(o, swa_lr=0.01, anneal_epochs=5)),
    "SWALR-linear": (sgd, lambda m, o: m.optim.swa_utils.SWALR(
        o, swa_lr=[0.01, 0.2], anneal_epochs=7, anneal_strategy="linear")),
    "SWALR-no_anneal": (sgd, lambda m, o: m.optim.swa_utils.SWALR(o, 0.02, anneal_epochs=0)),
    "StepLR-tensor_lr": (sgd_tensor_lr, lambda m, o: S(m).StepLR(o, step_size=2, gamma=0.5)),
    "CosineAnnealingLR-tensor_lr": (sgd_tensor_lr, lambda m, o: S(m).CosineAnnealingLR(o, 6)),
}


def _float(x):
    return float(x)


def _step(sched, i):
    if type(sched).__name__ == "ReduceLROnPlateau":
        sched.step(METRICS[i])
    else:
        sched.step()


def _record(opt, sched):
    groups = opt.param_groups
    lrs = [_float(g["lr"]) for g in groups]
    last = [_float(v) for v in sched.get_last_lr()]
    moms = [g["betas"][0] if "betas" in g else g.get("momentum") for g in groups]
    return lrs, last, moms


def run(m, name, start=0, stop=N, state=None):
    make_opt, make_sched = SCENARIOS[name]
    opt = make_opt(m)
    sched = make_sched(m, opt)
    if state is not None:
        opt.load_state_dict(state[0])
        sched.load_state_dict(state[1])
    seq = [_record(opt, sched)] if state is None else []
    for i in range(start, stop):
        opt.step()
        _step(sched, i)
        seq.append(_record(opt, sched))
    return seq, opt, sched


def assert_same_sequence(e, t):
    assert len(e) == len(t)
    for i, (es, ts) in enumerate(zip(e, t)):
        for what, ev, tv in zip(("lr", "get_last_lr", "momentum"), es, ts):
            np.testing.assert_allclose(np.array(ev, dtype=float), np.array(tv, dtype=float),
                                       rtol=1e-12, atol=1e-15, err_msg=f"step {i}: {what}")


def _plain(v):
    return v if not isinstance(v, (ember.Tensor, torch.Tensor)) else float(v)


def assert_same_sched_state(esd, tsd):
    assert set(esd) == set(tsd)
    for k, tv in tsd.items():
        ev = esd[k]
        if k in ("_schedulers",):
            for e_child, t_child in zip(ev, tv):
                assert_same_sched_state(e_child, t_child)
        elif isinstance(tv, (int, float, str, bool)) or tv is None:
            assert ev == pytest.approx(tv, rel=1e-12) if isinstance(tv, float) else ev == tv, k
        elif isinstance(tv, list) and all(isinstance(x, (int, float)) for x in tv):
            np.testing.assert_allclose([_plain(x) for x in ev], tv, rtol=1e-12, err_msg=k)


names = pytest.mark.parametrize("name", list(SCENARIOS))


@names
def test_matches_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_seq, _, t_sched = run(torch, name)
        e_seq, _, e_sched = run(ember, name)
    assert_same_sequence(e_seq, t_seq)
    assert_same_sched_state(e_sched.state_dict(), t_sched.state_dict())


@names
def test_state_dict_round_trip(name):
    half = N // 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_seq, _, _ = run(torch, name)
        e_seq, e_opt, e_sched = run(ember, name, 0, half)
        state = copy.deepcopy((e_opt.state_dict(), e_sched.state_dict()))
        e_rest, _, _ = run(ember, name, half, N, state=state)
    assert_same_sequence(e_seq + e_rest, t_seq)


def test_closed_form_with_epoch():
    # step(epoch) is deprecated and uses the closed form where there is one
    for make in [lambda m, o: S(m).StepLR(o, 3, gamma=0.5),
                 lambda m, o: S(m).MultiStepLR(o, [2, 4, 4], gamma=0.5),
                 lambda m, o: S(m).ExponentialLR(o, 0.8),
                 lambda m, o: S(m).CosineAnnealingLR(o, 5, eta_min=0.01),
                 lambda m, o: S(m).LinearLR(o, 0.5, total_iters=4),
                 lambda m, o: S(m).ConstantLR(o, 0.5, total_iters=3),
                 lambda m, o: S(m).PolynomialLR(o, 6, power=0.5),
                 lambda m, o: S(m).LambdaLR(o, lambda e: 1 / (1 + e))]:
        seqs = []
        for m in (torch, ember):
            opt = sgd(m)
            sched = make(m, opt)
            seq = []
            for epoch in [1, 2, 5, 3, 7, 7, 0, 9]:
                opt.step()
                with pytest.warns(UserWarning, match="epoch parameter"):
                    sched.step(epoch)
                seq.append([float(g["lr"]) for g in opt.param_groups] + [sched.last_epoch])
            seqs.append(seq)
        np.testing.assert_allclose(seqs[1], seqs[0], rtol=1e-12)


def test_warm_restarts_fractional_epochs():
    seqs = []
    for m in (torch, ember):
        opt = sgd(m)
        sched = S(m).CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.001)
        seq = []
        for epoch in range(12):
            for i in range(4):
                opt.step()
                sched.step(epoch + i / 4)
                seq.append((sched.get_last_lr(), sched.T_cur, sched.T_i, sched.last_epoch))
        seqs.append(seq)
    for e, t in zip(seqs[1], seqs[0]):
        assert e[0] == pytest.approx(t[0], rel=1e-12)
        assert e[1:] == pytest.approx(t[1:], rel=1e-12)


def test_resume_with_last_epoch():
    seqs = []
    for m in (torch, ember):
        opt = sgd(m)
        for g in opt.param_groups:
            g["initial_lr"] = g["lr"]
        sched = S(m).CosineAnnealingLR(opt, T_max=10, last_epoch=4)
        seq = [sched.get_last_lr()]
        for _ in range(8):
            opt.step()
            sched.step()
            seq.append(sched.get_last_lr())
        seqs.append(seq)
    np.testing.assert_allclose(seqs[1], seqs[0], rtol=1e-12)


def test_warnings():
    for m in (torch, ember):
        opt = sgd(m)
        sched = S(m).StepLR(opt, 2)
        with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
            sched.step()
        with pytest.warns(UserWarning, match="get_last_lr"):
            sched.get_lr()
        opt = sgd(m)
        sched = S(m).StepLR(opt, 2)
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched.step()


def test_tensor_lr_is_filled_in_place():
    opt = sgd_tensor_lr(ember)
    lr = opt.param_groups[0]["lr"]
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] is lr and math.isclose(lr.item(), 0.05, rel_tol=1e-6)
    assert isinstance(sched.get_last_lr()[0], ember.Tensor)
    assert sched.get_last_lr()[0] is not lr


def test_one_cycle_and_lambda_state():
    # a callable object's attributes travel in the state dict; functions are saved as None
    for m in (torch, ember):
        opt = sgd(m)
        fn = MulBy(0.5)
        sched = S(m).LambdaLR(opt, [lambda e: 1.0, fn])
        sd = sched.state_dict()
        assert sd["lr_lambdas"] == [None, {"factor": 0.5}]
        sd["lr_lambdas"][1] = {"factor": 0.25}
        sched.load_state_dict(sd)
        assert fn.factor == 0.25


ERRORS = [
    lambda m: S(m).StepLR(object(), 2),
    lambda m: S(m).StepLR(sgd(m), 2, last_epoch=3),
    lambda m: S(m).LambdaLR(sgd(m), [lambda e: 1.0]),
    lambda m: S(m).MultiplicativeLR(sgd(m), [1.0, 2.0]),
    lambda m: S(m).ConstantLR(sgd(m), factor=1.5),
    lambda m: S(m).LinearLR(sgd(m), start_factor=0.0),
    lambda m: S(m).LinearLR(sgd(m), end_factor=1.5),
    lambda m: S(m).CosineAnnealingWarmRestarts(sgd(m), T_0=0),
    lambda m: S(m).CosineAnnealingWarmRestarts(sgd(m), T_0=2, T_mult=0),
    lambda m: S(m).CosineAnnealingWarmRestarts(sgd(m), T_0=2, eta_min="x"),
    lambda m: S(m).CosineAnnealingWarmRestarts(sgd(m), T_0=2).step(-1),
    lambda m: S(m).OneCycleLR(sgd(m), max_lr=1.0),
    lambda m: S(m).OneCycleLR(sgd(m), max_lr=1.0, total_steps=0),
    lambda m: S(m).OneCycleLR(sgd(m), max_lr=1.0, epochs=0, steps_per_epoch=2),
    lambda m: S(m).OneCycleLR(sgd(m), max_lr=1.0, total_steps=10, pct_start=1.5),
    lambda m: S(m).OneCycleLR(sgd(m), max_lr=1.0, total_steps=10, anneal_strategy="exp"),
    lambda m: S(m).OneCycleLR(sgd(m), max_lr=[1.0], total_steps=10),
    lambda m: S(m).OneCycleLR(m.optim.Adagrad([m.zeros(1, requires_grad=True)]), max_lr=1.0,
                              total_steps=10),
    lambda m: [s.step() for s in [S(m).OneCycleLR(sgd(m), max_lr=1.0, total_steps=3)]
               for _ in range(4)],
    lambda m: S(m).CyclicLR(sgd(m), 0.01, 0.1, mode="sawtooth"),
    lambda m: S(m).CyclicLR(m.optim.Adagrad([m.zeros(1, requires_grad=True)]), 0.01, 0.1),
    lambda m: S(m).ReduceLROnPlateau(sgd(m), factor=1.0),
    lambda m: S(m).ReduceLROnPlateau(sgd(m), mode="avg"),
    lambda m: S(m).ReduceLROnPlateau(sgd(m), threshold_mode="pct"),
    lambda m: S(m).ReduceLROnPlateau(sgd(m), min_lr=[0.1]),
    lambda m: S(m).ReduceLROnPlateau(object()),
    lambda m: (lambda o: S(m).SequentialLR(o, [S(m).StepLR(o, 2)], milestones=[3]))(sgd(m)),
    lambda m: (lambda o: S(m).SequentialLR(o, [], milestones=[]))(sgd(m)),
    lambda m: (lambda o: S(m).SequentialLR(
        o, [S(m).StepLR(o, 2), S(m).ReduceLROnPlateau(o)], milestones=[3]))(sgd(m)),
    lambda m: (lambda o: S(m).SequentialLR(
        o, [S(m).StepLR(o, 2), S(m).StepLR(sgd(m), 2)], milestones=[3]))(sgd(m)),
    lambda m: S(m).ChainedScheduler([]),
    lambda m: (lambda o: S(m).ChainedScheduler([S(m).ReduceLROnPlateau(o)]))(sgd(m)),
    lambda m: S(m).LRScheduler(sgd(m)),
    lambda m: m.optim.swa_utils.SWALR(sgd(m), 0.1, anneal_strategy="exp"),
    lambda m: m.optim.swa_utils.SWALR(sgd(m), 0.1, anneal_epochs=-1),
    lambda m: m.optim.swa_utils.SWALR(sgd(m), [0.1]),
]


@pytest.mark.parametrize("fn", ERRORS, ids=[f"error{i}" for i in range(len(ERRORS))])
def test_errors(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_raises(fn)
