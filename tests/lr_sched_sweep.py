"""Every ``torch.optim.lr_scheduler`` class with two or three argument sets, run on ember
and torch for 30 epochs: the learning rates (and cycled momentum or beta1) of each
param group and ``get_last_lr()`` after every epoch, the scheduler's ``state_dict()``,
and both state dicts (optimizer and scheduler) saved halfway by one library, loaded
into the other's fresh objects and continued. ``run_case`` returns None when ember
and torch agree, else the first difference."""
import copy
import warnings

import numpy as np
import torch
from optim_db_harness import from_numpy_tree, to_numpy_tree
from test_lr_scheduler import S, _groups, sgd  # the same two param groups

import ember

EPOCHS = 30
HALF = EPOCHS // 2
METRICS = [float(v) for v in
           np.round(np.cumsum(np.random.default_rng(3).normal(0.0, 1.0, EPOCHS)) * 0.1, 6)]


def adam(m):
    return m.optim.Adam(_groups(m), lr=0.01)


def adam_tensor_lr(m):
    return m.optim.Adam([m.zeros(2, requires_grad=True)], lr=m.tensor(0.01))


class Halve:
    """A callable object: its ``__dict__`` goes into LambdaLR's state dict."""

    def __init__(self, every):
        self.every = every

    def __call__(self, epoch):
        return 0.5 ** (epoch // self.every)


# (scheduler class, label, optimizer, build(m, optimizer))
CASES = [
    ("LambdaLR", "power", sgd, lambda m, o: S(m).LambdaLR(o, lambda e: 0.9 ** e)),
    ("LambdaLR", "per group", adam, lambda m, o: S(m).LambdaLR(
        o, [lambda e: 1 / (e + 1), Halve(4)])),
    ("MultiplicativeLR", "constant", sgd, lambda m, o: S(m).MultiplicativeLR(
        o, lambda e: 0.95)),
    ("MultiplicativeLR", "every third", adam_tensor_lr, lambda m, o: S(m).MultiplicativeLR(
        o, lambda e: 1.0 if e % 3 else 0.5)),
    ("StepLR", "step 4", sgd, lambda m, o: S(m).StepLR(o, step_size=4, gamma=0.5)),
    ("StepLR", "tensor lr", adam_tensor_lr, lambda m, o: S(m).StepLR(o, 1, gamma=0.9)),
    ("MultiStepLR", "repeated milestone", sgd, lambda m, o: S(m).MultiStepLR(
        o, milestones=[3, 7, 7, 20], gamma=0.1)),
    ("MultiStepLR", "growth", adam, lambda m, o: S(m).MultiStepLR(o, [10], gamma=2.0)),
    ("ConstantLR", "quarter", sgd, lambda m, o: S(m).ConstantLR(o, factor=0.25,
                                                               total_iters=5)),
    ("ConstantLR", "defaults", adam_tensor_lr, lambda m, o: S(m).ConstantLR(o)),
    ("LinearLR", "warmup", sgd, lambda m, o: S(m).LinearLR(
        o, start_factor=0.1, end_factor=1.0, total_iters=10)),
    ("LinearLR", "to zero", adam, lambda m, o: S(m).LinearLR(
        o, start_factor=1.0, end_factor=0.0, total_iters=30)),
    ("ExponentialLR", "decay", sgd, lambda m, o: S(m).ExponentialLR(o, gamma=0.8)),
    ("ExponentialLR", "growth, tensor lr", adam_tensor_lr,
     lambda m, o: S(m).ExponentialLR(o, gamma=1.05)),
    ("PolynomialLR", "linear", sgd, lambda m, o: S(m).PolynomialLR(o, total_iters=12,
                                                                  power=1.0)),
    ("PolynomialLR", "square root", adam, lambda m, o: S(m).PolynomialLR(
        o, total_iters=40, power=0.5)),
    ("CosineAnnealingLR", "T_max 8", sgd, lambda m, o: S(m).CosineAnnealingLR(
        o, T_max=8, eta_min=1e-3)),
    ("CosineAnnealingLR", "T_max 30, tensor lr", adam_tensor_lr,
     lambda m, o: S(m).CosineAnnealingLR(o, T_max=30)),
    ("CosineAnnealingWarmRestarts", "T_mult 2", sgd,
     lambda m, o: S(m).CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-4)),
    ("CosineAnnealingWarmRestarts", "T_0 10", adam,
     lambda m, o: S(m).CosineAnnealingWarmRestarts(o, T_0=10)),
    ("CyclicLR", "triangular", sgd, lambda m, o: S(m).CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=5)),
    ("CyclicLR", "exp_range, momentum", sgd, lambda m, o: S(m).CyclicLR(
        o, base_lr=[0.01, 0.02], max_lr=[0.1, 0.2], step_size_up=3, step_size_down=4,
        mode="exp_range", gamma=0.9, base_momentum=0.8, max_momentum=0.95)),
    ("CyclicLR", "triangular2, betas", adam, lambda m, o: S(m).CyclicLR(
        o, base_lr=0.001, max_lr=0.01, step_size_up=4, mode="triangular2")),
    ("OneCycleLR", "cos", sgd, lambda m, o: S(m).OneCycleLR(o, max_lr=1.0,
                                                           total_steps=31)),
    ("OneCycleLR", "three phase, linear, betas", adam, lambda m, o: S(m).OneCycleLR(
        o, max_lr=[0.01, 0.02], epochs=3, steps_per_epoch=11, three_phase=True,
        anneal_strategy="linear")),
    ("OneCycleLR", "too few steps", sgd, lambda m, o: S(m).OneCycleLR(
        o, max_lr=0.5, total_steps=20)),
    ("ReduceLROnPlateau", "patience 2", sgd, lambda m, o: S(m).ReduceLROnPlateau(
        o, patience=2, factor=0.5)),
    ("ReduceLROnPlateau", "max, abs, cooldown", adam, lambda m, o: S(m).ReduceLROnPlateau(
        o, mode="max", patience=1, factor=0.7, threshold=0.05, threshold_mode="abs",
        cooldown=1, min_lr=[0.004, 0.02])),
    ("SequentialLR", "warmup then cosine", sgd, lambda m, o: S(m).SequentialLR(
        o, [S(m).LinearLR(o, start_factor=0.1, total_iters=5),
            S(m).CosineAnnealingLR(o, T_max=25)], milestones=[5])),
    ("SequentialLR", "three", adam, lambda m, o: S(m).SequentialLR(
        o, [S(m).ConstantLR(o, factor=0.5, total_iters=3), S(m).StepLR(o, 4, gamma=0.5),
            S(m).ExponentialLR(o, 0.9)], milestones=[6, 20])),
    ("ChainedScheduler", "constant and exponential", sgd,
     lambda m, o: S(m).ChainedScheduler([S(m).ConstantLR(o, factor=0.1, total_iters=2),
                                         S(m).ExponentialLR(o, gamma=0.9)])),
    ("ChainedScheduler", "with optimizer, tensor lr", adam_tensor_lr,
     lambda m, o: S(m).ChainedScheduler(
         [S(m).StepLR(o, 5, gamma=0.5), S(m).MultiplicativeLR(o, lambda e: 0.99)],
         optimizer=o)),
]


def case_id(case):
    return f"{case[0]}-{case[1]}"


def _record(opt, sched):
    lrs = [float(g["lr"]) for g in opt.param_groups]
    last = [float(v) for v in sched.get_last_lr()]
    moms = [float(g["betas"][0]) if "betas" in g else float(g.get("momentum", 0))
            for g in opt.param_groups]
    return lrs + last + moms


def run_side(m, case, start, stop, state=None):
    """Records of epochs ``start..stop-1`` (after each step) and the final state dicts,
    or ``(epoch, error class, message)``."""
    _, _, make_opt, make_sched = case
    records = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = make_opt(m)
            sched = make_sched(m, opt)
            if state is not None:
                opt.load_state_dict(from_numpy_tree(m, copy.deepcopy(state[0])))
                sched.load_state_dict(from_numpy_tree(m, copy.deepcopy(state[1])))
            for epoch in range(start, stop):
                opt.step()
                if isinstance(sched, S(m).ReduceLROnPlateau):
                    sched.step(METRICS[epoch])
                else:
                    sched.step()
                records.append(_record(opt, sched))
            return records, (to_numpy_tree(opt.state_dict()),
                             to_numpy_tree(sched.state_dict()))
    except Exception as e:  # noqa: BLE001 (an error is an outcome to compare)
        return records, (len(records) + start, type(e).__name__, str(e).split("\n")[0])


def _same_records(e, t, what):
    if len(e) != len(t):
        return f"{what}: {len(e)} epochs on ember, {len(t)} on torch"
    for epoch, (a, b) in enumerate(zip(e, t)):
        if not np.allclose(a, b, rtol=1e-12, atol=1e-15, equal_nan=True):
            return f"{what}: epoch {epoch}: ember {a}, torch {b}"
    return None


def _same_state(e, t, what):
    if isinstance(t, dict):
        if not isinstance(e, dict) or sorted(e) != sorted(t):
            return f"{what}: keys ember {sorted(e) if isinstance(e, dict) else e}, " \
                   f"torch {sorted(t)}"
        for k in t:
            msg = _same_state(e[k], t[k], f"{what}[{k!r}]")
            if msg:
                return msg
        return None
    if isinstance(t, (list, tuple)) and not (len(t) == 2 and t[0] == "T"):
        if not isinstance(e, (list, tuple)) or len(e) != len(t):
            return f"{what}: ember {e!r:.80}, torch {t!r:.80}"
        for i, (a, b) in enumerate(zip(e, t)):
            msg = _same_state(a, b, f"{what}[{i}]")
            if msg:
                return msg
        return None
    ev = e[1] if isinstance(e, tuple) and len(e) == 2 and e[0] == "T" else e
    tv = t[1] if isinstance(t, tuple) and len(t) == 2 and t[0] == "T" else t
    if isinstance(tv, (float, np.ndarray)) and isinstance(ev, (int, float, np.ndarray)):
        if np.allclose(ev, tv, rtol=1e-12, atol=1e-15, equal_nan=True):
            return None
    elif type(ev) is type(tv) and (ev == tv or ev is None):
        return None
    return f"{what}: ember {type(ev).__name__} {ev!r:.60}, torch {type(tv).__name__} {tv!r:.60}"


def run_case(case):
    """None when ember and torch agree on ``case``, else the first difference."""
    t_rec, t_end = run_side(torch, case, 0, EPOCHS)
    e_rec, e_end = run_side(ember, case, 0, EPOCHS)
    msg = _same_records(e_rec, t_rec, "run")
    if msg:
        return msg
    if not isinstance(t_end[0], dict) or not isinstance(e_end[0], dict):
        if t_end != e_end:
            return f"run: ember {e_end}, torch {t_end}"
        return None
    msg = _same_state(e_end[1], t_end[1], "scheduler state_dict")
    if msg:
        return msg
    # halfway state dicts of each library, continued in the other
    t_half = run_side(torch, case, 0, HALF)[1]
    e_half = run_side(ember, case, 0, HALF)[1]
    for state, who in ((t_half, "torch"), (e_half, "ember")):
        rest_e, _ = run_side(ember, case, HALF, EPOCHS, state)
        rest_t, _ = run_side(torch, case, HALF, EPOCHS, state)
        msg = _same_records(rest_e, rest_t, f"{who}'s state dicts loaded") or \
            _same_records(rest_t, t_rec[HALF:], f"{who}'s state dicts loaded into torch")
        if msg:
            return msg
    return None


def classes():
    """Every scheduler class torch exports (the base class aside)."""
    return set(torch.optim.lr_scheduler.__all__) - {"LRScheduler"}
