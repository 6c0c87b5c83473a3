"""SGD's and Adam's one-pass numba loops (``ember.optim._one_pass``) run in eager steps
wherever numba is installed, as in compiled steps: the same parameters and state, bit
for bit, as the NumPy update they replace (``opt._one_pass = False``), and torch's to
rounding; the cases they do not cover (float64, non-contiguous, amsgrad, nesterov) take
the NumPy update."""
import numpy as np
import pytest
import torch

import ember
from ember.optim import _one_pass

_SHAPES = [(40, 30), (7,), (), (3, 1, 5), (257, 33)]


def _params(m, dtype, strided):
    rng = np.random.default_rng(0)
    out = []
    for shape in _SHAPES:
        a = rng.standard_normal(shape).astype(dtype)
        if strided and a.ndim == 2:
            a = np.ascontiguousarray(a.T).T  # a transposed (non-C-ordered) parameter
        out.append(m.nn.Parameter(m.from_numpy(a.copy())))
    return out


def _grads(step, dtype):
    rng = np.random.default_rng(step + 1)
    out = []
    for shape in _SHAPES:
        g = rng.standard_normal(shape).astype(dtype)
        if g.size > 3:  # a special value in each gradient
            g.reshape(-1)[0] = [np.nan, -0.0, np.inf, 1e30][step % 4]
        out.append(g)
    return out


_CONFIGS = [("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9)),
            ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
            ("SGD", dict(lr=0.1, momentum=0.5, weight_decay=0.01)),
            ("Adam", dict(lr=1e-2)), ("Adam", dict(lr=1e-2, betas=(0.8, 0.9), eps=1e-6)),
            ("Adam", dict(lr=1e-2, amsgrad=True)), ("AdamW", dict(lr=1e-2)),
            ("Adam", dict(lr=1e-2, maximize=True))]


def _run(m, name, kw, dtype, strided, one_pass):
    params = _params(m, dtype, strided)
    opt = getattr(m.optim, name)(params, **kw)
    if one_pass is not None:
        opt._one_pass = one_pass
    for step in range(4):
        for p, g in zip(params, _grads(step, dtype)):
            p.grad = m.from_numpy(np.array(g, order="C"))
        opt.step()
    state = [v.detach().numpy().copy() for st in opt.state.values() for v in st.values()
             if hasattr(v, "shape") and v.dim() > 0]
    return [p.detach().numpy().copy() for p in params], state


@pytest.mark.parametrize("name,kw", _CONFIGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("strided", [False, True])
def test_eager_one_pass_gives_the_numpy_updates_bits(monkeypatch, name, kw, dtype,
                                                     strided):
    assert _one_pass.available()  # numba is part of the test environment
    used = []
    for fn in ("sgd", "adam", "sgd_group", "adam_group"):
        real = getattr(_one_pass, fn)
        monkeypatch.setattr(_one_pass, fn, lambda *a, real=real, fn=fn: used.append(
            (fn, real(*a))) or used[-1][1])
    fast = _run(ember, name, kw, dtype, strided, None)
    monkeypatch.undo()
    plain = _run(ember, name, kw, dtype, strided, False)
    for a, b in zip(fast[0] + fast[1], plain[0] + plain[1]):
        np.testing.assert_array_equal(a, b)
    # the loops ran where they cover the case (float32, C-ordered; the per-parameter
    # loop takes the gradient after maximize and weight decay), and only there
    covered = dtype == np.float32 and not kw.get("nesterov") and not kw.get("amsgrad")
    assert any(ok for _, ok in used) is covered, used
    ref = _run(torch, name, kw, dtype, strided, None)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(fast[0], ref[0]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_the_numpy_update_is_kept_on_request():
    p = ember.nn.Parameter(ember.ones(64))
    opt = ember.optim.Adam([p], lr=0.1)
    assert _one_pass.wanted(opt)
    opt._one_pass = False
    assert not _one_pass.wanted(opt)
    del opt._one_pass
    assert _one_pass.wanted(opt)


@pytest.mark.parametrize("name,kw", [("Adam", dict(lr=1e-2)),
                                     ("SGD", dict(lr=0.1, momentum=0.9)), ("SGD", dict(lr=0.1))])
def test_group_loops_split_over_two_threads_keep_the_bits(monkeypatch, name, kw):
    """At two ember threads a group's loops run in pieces of parameters on the intra-op
    threads (one split per group, parameters cut mid-way): one thread's bits."""
    from ember.backend import threads as T
    saved = ember.get_num_threads(), T._state["scale_pinned"], T._state["scale"]
    T.scale_bounds(1)  # (every split taken: the bounds as on a quiet machine)
    monkeypatch.setitem(globals(), "_SHAPES", [(40, 30), (7,), (300, 129), (5000,), (257, 33)])
    splits = []
    real = _one_pass.parallel_rows
    monkeypatch.setattr(_one_pass, "parallel_rows",
                        lambda fn, rows, cost: splits.append(rows) or real(fn, rows, cost))
    try:
        res = {}
        for n in (1, 2):
            ember.set_num_threads(n)
            res[n] = _run(ember, name, kw, np.float32, False, None)
    finally:
        ember.set_num_threads(saved[0])
        T.scale_bounds(saved[2] if saved[1] else None)
    assert splits and all(r == 17 for r in splits), splits  # 1 + 1 + 10 + 2 + 3 pieces
    for a, b in zip(res[1][0] + res[1][1], res[2][0] + res[2][1]):
        np.testing.assert_array_equal(a, b)


def test_group_loops_at_one_thread_call_each_parameters_loop_whole(monkeypatch):
    """At one ember thread a group's update calls each parameter's loop once on its whole
    flat arrays (no block split), and keeps the NumPy update's bits."""
    saved = ember.get_num_threads()
    monkeypatch.setattr(_one_pass, "parallel_rows",
                        lambda *a, **k: pytest.fail("split at one thread"))
    calls = []
    real = _one_pass._numba_kernels()["sgd"]
    monkeypatch.setitem(_one_pass._kernels, "sgd",
                        lambda p, *rest: calls.append(p.size) or real(p, *rest))
    try:
        ember.set_num_threads(1)
        ps, bufs = _run(ember, "SGD", dict(lr=0.1, momentum=0.9), np.float32, False, None)
    finally:
        ember.set_num_threads(saved)
    sizes = sorted(int(np.prod(s)) for s in _SHAPES)
    assert calls and sorted(calls[-len(sizes):]) == sizes, calls
    monkeypatch.undo()
    ref = _run(ember, "SGD", dict(lr=0.1, momentum=0.9), np.float32, False, False)
    for a, b in zip(ps + bufs, ref[0] + ref[1]):
        np.testing.assert_array_equal(a, b)
