"""A compiled plan's ``log_softmax`` -> ``nll_loss`` pair (``cross_entropy``): lean
forwards and one joined backward give eager ember's losses and gradients to the bit
(and torch's to rounding), on the fast path and on every fallback."""
import copy

import numpy as np
import pytest
import torch

import ember
from ember._compile import _xent


def _net(m, dtype):
    nn = m.nn
    net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10))
    return net.to(dtype)


def _run(m, net, x, loss_of, compiled, steps=4):
    opt = m.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = loss_of(net(x))
        loss.backward()
        opt.step()
        return loss
    run = m.compile(step) if compiled else step
    losses = [run(x).item() for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in net.parameters()], run


def _plan_of(run):
    return run._cache[0].plan


CASES = {
    "mean": lambda F, y: (lambda out: F.cross_entropy(out, y)),
    "sum": lambda F, y: (lambda out: F.cross_entropy(out, y, reduction="sum")),
    "scaled": lambda F, y: (lambda out: F.cross_entropy(out, y) * 3.0),
    "zero_grad": lambda F, y: (lambda out: F.cross_entropy(out, y) * 0.0),
    "negative": lambda F, y: (lambda out: -F.cross_entropy(out, y)),
    "log_softmax_nll": lambda F, y: (lambda out: F.nll_loss(F.log_softmax(out, 1), y)),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("rows", [64, 5])
def test_pair_equals_eager_bitwise_and_torch(case, dtype, rows):
    ember.manual_seed(0)
    net = _net(ember, getattr(ember, dtype))
    ref = copy.deepcopy(net)
    tnet = _net(torch, getattr(torch, dtype))
    tnet.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                          for k, v in net.state_dict().items()})
    rng = np.random.default_rng(1)
    xa = rng.standard_normal((rows, 20)).astype(dtype)
    ya = rng.integers(0, 10, rows)
    got, params, run = _run(ember, net, ember.tensor(xa),
                            CASES[case](ember.nn.functional, ember.tensor(ya)), True)
    want, ref_params, _ = _run(ember, ref, ember.tensor(xa),
                               CASES[case](ember.nn.functional, ember.tensor(ya)), False)
    assert run.stats["replays"] == 3 and run.stats["eager"] == 0
    assert got == want
    for a, b in zip(params, ref_params):
        assert np.array_equal(a, b)
    tgot, tparams, _ = _run(torch, tnet, torch.from_numpy(xa),
                            CASES[case](torch.nn.functional, torch.from_numpy(ya)), False)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, tgot, rtol=tol, atol=tol)
    for a, b in zip(params, tparams):
        np.testing.assert_allclose(a, b, rtol=10 * tol, atol=10 * tol)
    plan = _plan_of(run)
    kinds = {type(st.op) for st in plan.steps}
    # the pair is fused in every case (each case's pair is the recorded one)
    assert _xent._LogSoftmaxStep in kinds and _xent._NllLossStep in kinds


def _tape_states(run, x):
    """The loss step's tape state of one more forward of the compiled step's plan."""
    plan = _plan_of(run)
    e = run._cache[0]
    env, tape = plan.forward([x._data], [p._data for p in e.param_tensors], True)
    st = next(s for s in plan.steps if type(s.op) is _xent._NllLossStep)
    return tape[st.index][1]


def test_fast_path_taken_on_a_classifier_batch():
    ember.manual_seed(0)
    net = _net(ember, ember.float32)
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((64, 20)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 10, 64))
    _, _, run = _run(ember, net, x, lambda out: ember.nn.functional.cross_entropy(out, y),
                     True, steps=2)
    assert "t" in _tape_states(run, x)


@pytest.mark.parametrize("kind", ["ignore_index", "weight", "smoothing"])
def test_fallbacks_equal_eager_bitwise(kind):
    """Targets holding the ignore_index (the class's forward and formulas), class
    weights and label smoothing (no pair fused, or another graph) as eagerly."""
    F = ember.nn.functional
    rng = np.random.default_rng(3)
    xa = rng.standard_normal((48, 20)).astype(np.float32)
    ya = rng.integers(0, 10, 48)
    ya[::7] = -100
    wa = rng.random(10).astype(np.float32)
    y = ember.tensor(ya if kind == "ignore_index" else np.abs(ya) % 10)
    w = ember.tensor(wa)
    loss_of = {"ignore_index": lambda out: F.cross_entropy(out, y),
               "weight": lambda out: F.cross_entropy(out, y, weight=w),
               "smoothing": lambda out: F.cross_entropy(out, y, label_smoothing=0.1)}[kind]
    ember.manual_seed(0)
    net = _net(ember, ember.float32)
    ref = copy.deepcopy(net)
    got, params, run = _run(ember, net, ember.tensor(xa), loss_of, True)
    want, ref_params, _ = _run(ember, ref, ember.tensor(xa), loss_of, False)
    assert run.stats["eager"] == 0
    assert got == want
    for a, b in zip(params, ref_params):
        assert np.array_equal(a, b)
    if kind == "ignore_index":
        assert "t" not in _tape_states(run, ember.tensor(xa))


def test_target_out_of_range_raises_as_eager():
    F = ember.nn.functional
    ember.manual_seed(0)
    net = _net(ember, ember.float32)
    opt = ember.optim.SGD(net.parameters(), lr=0.1)

    @ember.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((40, 20)).astype(np.float32))
    for _ in range(2):
        step(x, ember.tensor(rng.integers(0, 10, 40)))
    ya = rng.integers(0, 10, 40)
    ya[5] = 10
    with pytest.raises(IndexError, match="Target 10 is out of bounds"):
        step(x, ember.tensor(ya))
    assert step.stats["eager"] == 0
    with pytest.raises(IndexError):
        torch.nn.functional.cross_entropy(torch.zeros(40, 10), torch.from_numpy(ya))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lean_log_softmax_infinite_and_nan_scores_equal_eager_without_warnings(dtype):
    # the lean forward subtracts the row maxima without ``errstate`` where all are
    # finite: a row holding +inf (inf - inf), a row of -inf only, a NaN, the largest
    # finite scores and a row of -0.0 give eager's bits and no warning either way
    import warnings
    rng = np.random.default_rng(2)
    big = np.finfo(dtype).max
    cases = []
    for special in ("finite", "posinf", "neginf_row", "nan", "huge", "negzero"):
        x = rng.standard_normal((64, 10)).astype(dtype)
        if special == "posinf":
            x[3, 4] = np.inf
        elif special == "neginf_row":
            x[5, :] = -np.inf
        elif special == "nan":
            x[7, 1] = np.nan
        elif special == "huge":
            x[9, :] = [big, -big] * 5
        elif special == "negzero":
            x[11, :] = -0.0
        cases.append((special, x))
    y = rng.integers(0, 10, 64)
    step = _xent._LogSoftmaxStep()
    for special, x in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = step.forward(x, 1)
            want = ember.nn.functional.log_softmax(ember.tensor(x), 1).numpy()
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), special
        # and in the compiled pair, losses and the scores' gradient as eagerly
        xs = [ember.tensor(x, requires_grad=True) for _ in range(2)]

        def loss(t):
            return ember.nn.functional.cross_entropy(t * 1.0, ember.tensor(y))
        run = ember.compile(loss)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            outs = [run(xs[0]), run(xs[0]), loss(xs[1])]
        assert outs[0].detach().numpy().tobytes() == outs[2].detach().numpy().tobytes(), \
            special
        outs[1].backward()
        outs[2].backward()
        assert xs[0].grad.numpy().tobytes() == xs[1].grad.numpy().tobytes(), special


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_joined_backward_loop_equals_the_numpy_branch_bitwise(dtype):
    # ``_pair_kernel``: ``r * v`` then ``v - p`` at the target, ``0 * g - p`` elsewhere,
    # against the NumPy calls it replaces, on products that overflow, underflow, are
    # NaN, subnormal or signed zeros, for several ``v`` and signs of ``g``
    kernel = _xent._pair_kernel()
    if kernel is None:  # numba not installed: the NumPy branch runs
        from ember._compile import _fused
        assert not _fused.available()
        return
    rng = np.random.default_rng(3)
    dt = np.dtype(dtype).type
    tiny = np.finfo(dtype).smallest_subnormal
    big = np.finfo(dtype).max
    base = np.exp(rng.standard_normal((64, 10)) * 3).astype(dtype)
    base[0, :6] = [np.inf, 0.0, -0.0, np.nan, tiny, big]
    t = rng.integers(0, 10, 64)
    t[0] = 3  # the NaN's column is a target
    for v, g in [(-1 / 64, 1.0), (-3.0, 3.0), (1 / 64, -1.0), (-tiny, tiny), (-big, big)]:
        v, g = dt(v), np.asarray(g, dtype)
        want = base.copy()
        rows = np.arange(64)
        np.multiply(want, v, out=want)
        on = want[rows, t]
        np.subtract(dt(0) * g, want, out=want)
        want[rows, t] = v - on
        got = base.copy()
        kernel(got, t, v, dt(0) * g)
        assert got.tobytes() == want.tobytes(), (v, g)
