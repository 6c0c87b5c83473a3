"""Independent products computed at once at more than one thread (``threads.pair``): a
linear layer's input and weight gradients, a recurrent layer's whole-sequence weight
gradients. Each runs whole at one BLAS thread, so every result has its one-thread bits;
checked at 1 and 2 threads, and against torch. Also: products are split in row blocks
only on BLAS kernels where the blocks keep the whole product's bits."""
import threading

import numpy as np
import pytest
import torch

import ember
from ember.backend import gemm
from ember.backend import threads as T


@pytest.fixture
def calls(monkeypatch):
    """The bounds of every split the pool runs (a pair's are (0, 1, 2)), on a machine
    with a core to spare; ember's thread count restored after the test."""
    before = ember.get_num_threads()
    monkeypatch.setattr(T, "cores_to_spare", lambda: True)
    seen = []
    run = T.Pool.run

    def counting(self, fn, bounds):
        if fn is not T._nothing:  # (not a new pool's timed round trips)
            seen.append(tuple(bounds))
        return run(self, fn, bounds)
    monkeypatch.setattr(T.Pool, "run", counting)
    yield seen
    ember.set_num_threads(before)


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _blas_threads():
    return [lib.num_threads for lib in T._all_blas()]


# ----- the primitive ------------------------------------------------------------------
def test_pair_runs_the_second_on_a_pool_thread_at_one_blas_thread(calls):
    ember.set_num_threads(2)
    seen = {}

    def side(key):
        def run():
            seen[key] = (threading.current_thread(), _blas_threads(),
                         getattr(T.local, "in_worker", False))
            return key
        return run
    before = _blas_threads()
    assert T.pair(side("a"), side("b"), T._MIN_PAIR_COST) == ("a", "b")
    assert calls == [(0, 1, 2)]
    assert seen["a"][0] is threading.current_thread()
    assert seen["b"][0] is not threading.current_thread()
    assert seen["b"][0].name.startswith("ember-intraop")
    # both sides at one BLAS thread and unsplit; the caller's count restored after
    assert all(k == 1 for k in seen["a"][1] + seen["b"][1])
    assert seen["a"][2] and seen["b"][2]
    assert _blas_threads() == before
    assert not getattr(T.local, "in_worker", False)


@pytest.mark.parametrize("case", ["one thread", "small", "switched off", "nested",
                                  "pool taken", "busy machine"])
def test_pair_runs_in_sequence_where_it_does_not_pay(calls, monkeypatch, case):
    ember.set_num_threads(1 if case == "one thread" else 2)
    cost = T._MIN_PAIR_COST - 1 if case == "small" else T._MIN_PAIR_COST
    if case == "switched off":
        monkeypatch.setitem(T._state, "pairs", False)
    if case == "busy machine":  # the worker would wait for the scheduler
        monkeypatch.setattr(T, "cores_to_spare", lambda: False)
    order = []

    def first():
        order.append(("first", threading.current_thread()))
        return 1

    def second():
        order.append(("second", threading.current_thread()))
        return 2
    if case == "nested":
        r = T.pair(lambda: T.pair(first, second, cost), lambda: 0, cost)[0]
        assert calls == [(0, 1, 2)]  # the outer pair only
    elif case == "pool taken":
        T._pool[0] = T._pool[0] or T.Pool()
        with T._pool[0].lock:
            r = T.pair(first, second, cost)
        assert not calls
    else:
        r = T.pair(first, second, cost)
        assert not calls
    assert r == (1, 2)
    me = threading.current_thread()
    assert order == [("first", me), ("second", me)]


@pytest.mark.parametrize("which", ["first", "second"])
def test_an_error_in_either_side_is_raised_and_the_pool_stays_usable(calls, which):
    ember.set_num_threads(2)
    before = _blas_threads()

    def fail():
        raise ValueError(f"{which} failed")
    sides = (fail, lambda: 2) if which == "first" else (lambda: 1, fail)
    with pytest.raises(ValueError, match=f"{which} failed"):
        T.pair(*sides, T._MIN_PAIR_COST)
    assert _blas_threads() == before
    assert not getattr(T.local, "in_worker", False)
    assert T.pair(lambda: 1, lambda: 2, T._MIN_PAIR_COST) == (1, 2)
    assert len(calls) == 2


# ----- a linear layer's backward ------------------------------------------------------
def _linear_grads(lib, x, w, b, x_layout="c", create_graph=False, hooks=False):
    xt = lib.tensor(x, requires_grad=True)
    wt = lib.tensor(w, requires_grad=True)
    bt = None if b is None else lib.tensor(b, requires_grad=True)
    xin = xt.transpose(0, 1).contiguous().transpose(0, 1) if x_layout == "f" else xt
    g = lib.tensor(_rand(*x.shape[:-1], w.shape[0], seed=7))
    if hooks:  # saved tensors packed: the node's backward, not its array shortcut
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            y = lib.nn.functional.linear(xin, wt, bt)
    else:
        y = lib.nn.functional.linear(xin, wt, bt)
    if create_graph:
        grads = lib.autograd.grad(y, [xt, wt] + ([bt] if bt is not None else []), g,
                                  create_graph=True)
        return [y.detach().numpy()] + [t.detach().numpy() for t in grads]
    y.backward(g)
    return [y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()] + \
        ([bt.grad.numpy()] if bt is not None else [])


_LINEARS = {  # (rows, in, out) of the benchmark workloads' layers
    "mlp hidden": ((128, 256), 128),
    "transformer ff": ((1024, 256), 128),
    "transformer qkv": ((1024, 128), 384),
    "3-d input": ((16, 64, 128), 256),
    "odd sizes": ((333, 301), 257),
}


@pytest.mark.parametrize("variant", ["plain", "no bias", "f-ordered input",
                                     "saved hooks", "float64"])
@pytest.mark.parametrize("name", list(_LINEARS))
def test_linear_gradients_keep_their_bits_and_match_torch(calls, name, variant):
    xs, n = _LINEARS[name]
    dt = np.float64 if variant == "float64" else np.float32
    x, w = _rand(*xs, dtype=dt), _rand(n, xs[-1], dtype=dt, seed=1) * 0.05
    b = None if variant == "no bias" else _rand(n, dtype=dt, seed=2)
    layout = "f" if variant == "f-ordered input" and len(xs) == 2 else "c"
    hooks = variant == "saved hooks"

    def run():
        return _linear_grads(ember, x, w, b, layout, hooks=hooks)
    with gemm.numpy_only():
        ember.set_num_threads(1)
        one = run()
        assert not calls
        ember.set_num_threads(2)
        two = run()
    assert (0, 1, 2) in calls, "the gradients were not computed at once"
    ref = _linear_grads(torch, x, w, b, layout)
    assert len(one) == len(two) == len(ref)
    for a, c, r in zip(one, two, ref):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_allclose(c, r, rtol=1e-4, atol=2e-4)


def test_gradients_recorded_with_a_graph_are_unchanged(calls):
    # create_graph: the backward in Tensor ops, whose products are not paired; its
    # second derivative still exact
    x, w, b = _rand(128, 256), _rand(128, 256, seed=1) * 0.05, _rand(128, seed=2)
    with gemm.numpy_only():
        ember.set_num_threads(1)
        one = _linear_grads(ember, x, w, b, create_graph=True)
        ember.set_num_threads(2)
        two = _linear_grads(ember, x, w, b, create_graph=True)
    ref = _linear_grads(torch, x, w, b, create_graph=True)
    for a, c, r in zip(one, two, ref):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_allclose(c, r, rtol=1e-4, atol=2e-4)


def test_nodes_and_weight_gradient_layout_are_unchanged(calls):
    ember.set_num_threads(2)
    x = ember.tensor(_rand(128, 256), requires_grad=True)
    lin = ember.nn.Linear(256, 128)
    y = lin(x)
    assert type(y.grad_fn).__name__ == "AddmmBackward0"
    names = [type(f).__name__ for f, _ in y.grad_fn.next_functions if f is not None]
    assert names == ["AccumulateGrad", "AccumulateGrad", "TBackward0"]
    seen = []
    x.register_hook(lambda g: seen.append(g.shape))
    y.sum().backward()
    assert calls and seen == [(128, 256)]
    assert lin.weight.grad.shape == (128, 256) and lin.weight.grad.numpy().flags.c_contiguous
    assert x.grad.numpy().flags.c_contiguous


@pytest.mark.parametrize("batch", [128, 7])
def test_compiled_training_step_keeps_its_bits(calls, batch):
    # the compiled plan's linear vjps (``nn_fused.linear_vjp``) pair their products too
    def train():
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(784, 256), ember.nn.ReLU(),
                                    ember.nn.Linear(256, 256), ember.nn.ReLU(),
                                    ember.nn.Linear(256, 10))
        opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = ember.tensor(_rand(batch, 784))
        y = ember.tensor(np.random.default_rng(1).integers(0, 10, batch))

        @ember.compile
        def step(x, y):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        losses = [step(x, y).item() for _ in range(3)]
        return losses, [p.detach().numpy().copy() for p in model.parameters()]
    with gemm.numpy_only():
        ember.set_num_threads(1)
        one = train()
        ember.set_num_threads(2)
        two = train()
    if batch == 128:
        assert (0, 1, 2) in calls
    assert one[0] == two[0]
    for a, c in zip(one[1], two[1]):
        np.testing.assert_array_equal(a, c)


# ----- recurrent layers ---------------------------------------------------------------
def _rnn_grads(lib, kind, x, x_grad, weights):
    mod = getattr(lib.nn, kind)(64, 128, batch_first=True)
    with lib.no_grad():
        for p, v in zip(mod.parameters(), weights):
            p.copy_(lib.tensor(v))
    xt = lib.tensor(x, requires_grad=x_grad)
    out, _ = mod(xt)
    (out * out).sum().backward()
    grads = [p.grad.numpy().copy() for p in mod.parameters()]
    return [out.detach().numpy()] + grads + ([xt.grad.numpy()] if x_grad else [])


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("x_grad", [False, True])
@pytest.mark.parametrize("numba", [False, True])
def test_recurrent_weight_gradients_keep_their_bits(calls, monkeypatch, kind, x_grad,
                                                     numba):
    # the LSTM pairs its whole-sequence weight gradients (``rnn._param_grads``); the GRU
    # and RNN record their input projection as a linear layer, whose node pairs its
    # input's and weight's gradients where the input needs one
    from ember.ops import rnn
    x = _rand(32, 32, 64)
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind] * 128
    weights = [_rand(gates, 64, seed=1) * 0.1, _rand(gates, 128, seed=2) * 0.1,
               _rand(gates, seed=3) * 0.1, _rand(gates, seed=4) * 0.1]
    if not numba:  # the NumPy loops, where numba would take the LSTM
        monkeypatch.setitem(rnn._FUSED, "lstm", None)
    with gemm.numpy_only():
        ember.set_num_threads(1)
        one = _rnn_grads(ember, kind, x, x_grad, weights)
        assert not calls
        ember.set_num_threads(2)
        two = _rnn_grads(ember, kind, x, x_grad, weights)
    assert ((0, 1, 2) in calls) is (kind == "LSTM" or x_grad)
    ref = _rnn_grads(torch, kind, x, x_grad, weights)
    assert len(one) == len(two) == len(ref) == 5 + x_grad
    for a, c, r in zip(one, two, ref):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_allclose(c, r, rtol=1e-3, atol=1e-3)


# ----- products not split where row blocks change the bits ----------------------------
@pytest.mark.parametrize("m,k,n", [(128, 784, 256), (1024, 128, 384), (64, 300, 300),
                                   (32, 256, 512), (16, 128, 300)])
@pytest.mark.parametrize("layout", ["nn", "nt"])
def test_unsplit_products_take_the_one_thread_route(calls, monkeypatch, m, k, n, layout):
    # on a kernel whose row blocks change the bits (one not measured) a
    # product runs whole, by the one-thread route (``gemm``'s transposed product for a
    # few rows, which differs from ``np.matmul``'s own there), at one BLAS thread
    monkeypatch.setitem(T._state, "row_grain", (T._blas_libs(), {"f": 0, "d": 0}))
    monkeypatch.setitem(T._state, "column_grain", (T._blas_libs(), {"f": 0, "d": 0}))
    a = _rand(m, k)
    b = _rand(n, k, seed=1).T if layout == "nt" else _rand(k, n, seed=1)
    with gemm.numpy_only():
        ember.set_num_threads(1)
        one = gemm.matmul(a, b)
        ember.set_num_threads(2)
        assert T.matmul(a, b) in (T.WHOLE, None)
        two = gemm.matmul(a, b)
    assert not calls
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(two, torch.tensor(a) @ torch.tensor(b), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("batch", [16, 3])
def test_a_transformer_layers_training_keeps_its_bits(calls, batch):
    # every linear layer of the encoder layer pairs its products at two threads (the
    # input's projection where the input needs a gradient)
    def train():
        ember.manual_seed(0)
        layer = ember.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0,
                                                 batch_first=True)
        opt = ember.optim.Adam(layer.parameters(), lr=1e-3)
        x = ember.tensor(_rand(batch, 64, 128), requires_grad=True)
        target = ember.tensor(_rand(batch, 64, 128, seed=1))
        for _ in range(2):
            opt.zero_grad()
            ember.nn.functional.mse_loss(layer(x), target).backward()
            opt.step()
        return [x.grad.numpy().copy()] + [p.detach().numpy().copy()
                                          for p in layer.parameters()]
    with gemm.numpy_only():
        ember.set_num_threads(1)
        one = train()
        ember.set_num_threads(2)
        two = train()
    assert calls.count((0, 1, 2)) >= (8 if batch == 16 else 1)
    assert len(one) == len(two) > 10
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)


def test_profiler_rows_are_those_of_one_thread(calls):
    # under the profiler, matmul's backward keeps its Tensor ops (their aten::mm and
    # aten::transpose rows); the linear layers' and the LSTM's rows do not change
    def rows():
        rng = np.random.default_rng(0)
        x = ember.tensor(rng.standard_normal((128, 256), dtype=np.float32),
                         requires_grad=True)
        w = ember.tensor(rng.standard_normal((128, 256), dtype=np.float32),
                         requires_grad=True)
        lstm = ember.nn.LSTM(64, 128, batch_first=True)
        s = ember.tensor(rng.standard_normal((32, 32, 64), dtype=np.float32))
        with ember.profiler.profile() as prof:
            y = ember.nn.functional.linear(x, w)
            z = ember.nn.functional.linear(x, w, w[:, 0])
            q = x @ w.T
            (y.sum() + z.sum() + q.sum() + lstm(s)[0].sum()).backward()
        return sorted((e.key, e.count) for e in prof.key_averages())
    with gemm.numpy_only():
        ember.set_num_threads(1)
        one = rows()
        ember.set_num_threads(2)
        calls.clear()
        two = rows()
    assert (0, 1, 2) in calls  # the linear layer's and the LSTM's pairs ran
    assert one == two
    assert ("aten::mm", 6) in one and ("autograd::engine::evaluate_function: MmBackward0",
                                       2) in one


class _PerThreadBlas:
    """A BLAS controller whose count is per OS thread (as MKL's on GNU OpenMP): each
    thread starts at ``default``."""

    def __init__(self, default):
        self.default, self.local = default, threading.local()

    @property
    def num_threads(self):
        return getattr(self.local, "n", self.default)

    def set_num_threads(self, n):
        self.local.n = n


@pytest.mark.parametrize("how", ["pair", "row blocks"])
def test_a_per_thread_blas_runs_at_one_thread_on_the_workers(calls, how):
    """The caller's one-thread setting does not reach a per-thread BLAS on the pool's
    workers: each worker's side sets its own count to one, and gives it back after."""
    lib = _PerThreadBlas(2)
    ember.set_num_threads(2)
    T.add_blas(lib)
    seen = []
    try:
        def record(lo=0, hi=0):
            seen.append((threading.current_thread().name, lib.num_threads))
        if how == "pair":
            T.pair(record, record, T._MIN_PAIR_COST)
        else:
            T.parallel_rows(record, 2, 1 << 20, blas=True)
    finally:
        T.remove_blas(lib)
    assert len(seen) == 2 and {n for _, n in seen} == {1}
    assert any(name.startswith("ember-intraop") for name, _ in seen)
    assert lib.num_threads == 2  # the caller's count given back
    pool = T._pool[0]
    for i in range(len(pool.workers)):  # and each worker's
        got = []
        pool.run_on(i, lambda got=got: got.append(lib.num_threads))
        assert got == [2]
