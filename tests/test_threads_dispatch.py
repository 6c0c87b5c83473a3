"""The pool's dispatch and BLAS at two threads: the least work for a split scaled to the
pool's measured round trip (``threads.scale_bounds``), and NumPy's BLAS held at one
thread for a backward pass or an optimizer step (``blas_hold.hold_blas``). Neither may
change a value: every result is compared bit for bit with one thread's, and with torch."""
import threading

import numpy as np
import pytest
import torch

import ember
from ember.backend import blas_hold as H
from ember.backend import threads as T


@pytest.fixture
def two_threads(monkeypatch):
    """Two ember threads on a machine with a core to spare; the thread count, the
    bounds' scale and the pool restored after."""
    before, scale, pinned = ember.get_num_threads(), T._state["scale"], T._state["scale_pinned"]
    monkeypatch.setattr(T, "cores_to_spare", lambda: True)
    ember.set_num_threads(2)
    yield
    ember.set_num_threads(before)
    T._state["scale_pinned"] = pinned
    T._set_scale(scale)


@pytest.fixture
def numpy_products():
    """Products on NumPy's BLAS, as without ``ember[mkl]``: the one-thread bits at two
    threads are ember's promise on NumPy's BLAS; MKL's products, as PyTorch's, may change
    in the last bits with the thread count (on an AVX-512 Xeon its 37-row products do)."""
    from ember.backend import gemm
    with gemm.numpy_only():
        yield


def _blas_counts():
    """The thread counts of NumPy's OpenBLAS libraries (the ones a hold sets; MKL, with
    ``ember[mkl]``, keeps its own)."""
    return [lib.num_threads for lib in T._blas_libs()
            if getattr(lib, "internal_api", "openblas") == "openblas"]


# ----- the bounds, scaled to the round trip -------------------------------------------
@pytest.mark.parametrize("scale,expected", [(0.2, 1.0), (1, 1.0), (3.5, 3.5), (100, 32.0)])
def test_scale_bounds_sets_every_bound_from_its_nominal(two_threads, scale, expected):
    assert T.scale_bounds(scale) == expected
    assert T._state["scale_pinned"]
    for name, nominal in T._NOMINAL.items():
        assert getattr(T, name) == int(nominal * expected), name
    assert T.scale_bounds(None) == expected  # unpinned, kept until a new pool measures
    assert not T._state["scale_pinned"]


def test_a_new_pool_measures_its_round_trip_and_scales_the_bounds(two_threads, monkeypatch):
    T.scale_bounds(None)
    monkeypatch.setattr(T, "_pool", [None])
    T.parallel_rows(lambda lo, hi: None, 8, 1 << 40)
    trip = T._state["round_trip"]
    assert 0 < trip < 1.0
    assert T._state["scale"] == min(max(trip / T._REFERENCE_ROUND_TRIP, 1.0), T._MAX_SCALE)
    assert T.SPLIT_ELEMENTS == int(T._NOMINAL["SPLIT_ELEMENTS"] * T._state["scale"])


def test_a_pinned_scale_is_kept_by_a_new_pool(two_threads, monkeypatch):
    T.scale_bounds(7)
    monkeypatch.setattr(T, "_pool", [None])
    T.parallel_rows(lambda lo, hi: None, 8, 1 << 40)
    assert T._state["scale"] == 7.0 and T._SPLIT_MNK == 7 << 21


def test_the_first_split_is_decided_by_the_measured_bounds(two_threads, monkeypatch):
    """The call that makes the pool decides with the scaled bound: work between the
    nominal and the scaled least runs as one block."""
    T.scale_bounds(None)
    monkeypatch.setattr(T, "_pool", [None])
    monkeypatch.setattr(T, "_REFERENCE_ROUND_TRIP", 1e-9)  # any trip: the largest scale
    blocks = []
    T.parallel_rows(lambda lo, hi: blocks.append((lo, hi)), 64, 4 * T._NOMINAL[
        "_MIN_COST_PER_THREAD"])
    assert T._state["scale"] == T._MAX_SCALE
    assert blocks == [(0, 64)]
    blocks.clear()
    T.parallel_rows(lambda lo, hi: blocks.append((lo, hi)), 64, 1 << 40)
    assert sorted(blocks) == [(0, 32), (32, 64)]
    # and a pair below its scaled bound runs in sequence, on the caller
    where = []
    T.pair(lambda: where.append(threading.current_thread()),
           lambda: where.append(threading.current_thread()), 2 * T._NOMINAL["_MIN_PAIR_COST"])
    assert where == [threading.current_thread()] * 2


def test_splits_at_a_larger_scale_keep_the_values(two_threads):
    """An elementwise op and a product above and below the scaled bounds: the same bits
    at one thread, at two with the nominal bounds and with 8 times them."""
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((1200, 700), dtype=np.float32), requires_grad=True)
    w = ember.tensor(rng.standard_normal((700, 300), dtype=np.float32), requires_grad=True)
    results = []
    for threads, scale in ((1, 1), (2, 1), (2, 8)):
        ember.set_num_threads(threads)
        T.scale_bounds(scale)
        x.grad = w.grad = None
        y = (x.tanh() * x).matmul(w).exp()
        y.sum().backward()
        results.append([y.detach().numpy(), x.grad.numpy(), w.grad.numpy()])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    tw = torch.tensor(w.detach().numpy(), requires_grad=True)
    ty = (tx.tanh() * tx).matmul(tw).exp()
    ty.sum().backward()
    np.testing.assert_allclose(results[0][0], ty.detach().numpy(), rtol=2e-4)
    np.testing.assert_allclose(results[0][2], tw.grad.numpy(), rtol=2e-3, atol=1e-2)


# ----- BLAS held at one thread -----------------------------------------------------
def test_hold_nests_and_gives_the_count_back(two_threads):
    if not T._blas_libs():
        pytest.fail("no BLAS library reachable: NumPy's OpenBLAS expected")
    T._set_blas_threads(2)
    outer = H.hold_blas()
    assert _blas_counts() == [1] * len(_blas_counts()) and T.blas_held()
    inner = H.hold_blas()
    H.release_blas(inner)
    assert _blas_counts() == [1] * len(_blas_counts()) and T.blas_held()
    saved = T.blas_to_one()  # nothing of NumPy's to set: its BLAS is held
    T.blas_back(saved)
    assert all(getattr(lib, "internal_api", "") != "openblas" for lib, _ in saved)
    H.release_blas(outer)
    assert _blas_counts() == [2] * len(_blas_counts())
    assert T._state["held"] == 0 and not T.blas_held()


def test_set_num_threads_during_a_hold_takes_effect_at_its_end(two_threads):
    T._set_blas_threads(2)
    held = H.hold_blas()
    ember.set_num_threads(3)
    assert _blas_counts() == [1] * len(_blas_counts())
    H.release_blas(held)
    assert _blas_counts() == [3] * len(_blas_counts())


def test_no_hold_at_one_thread():
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        counts = _blas_counts()
        assert H.hold_blas() is None
        H.release_blas(None)
        assert _blas_counts() == counts and T._state["held"] == 0
        assert T.blas_held()  # (one thread: products run as at one thread anyway)
    finally:
        ember.set_num_threads(before)


def test_holds_from_two_python_threads_are_counted(two_threads):
    T._set_blas_threads(2)
    first = H.hold_blas()
    entered, leave = threading.Event(), threading.Event()
    seen = []

    def other():
        h = H.hold_blas()
        entered.set()
        leave.wait(10)
        seen.append(_blas_counts())
        H.release_blas(h)
    t = threading.Thread(target=other)
    t.start()
    entered.wait(10)
    H.release_blas(first)  # the other thread still holds: the count stays at one
    assert _blas_counts() == [1] * len(_blas_counts())
    leave.set()
    t.join(10)
    assert seen == [[1] * len(seen[0])]
    assert _blas_counts() == [2] * len(_blas_counts()) and T._state["held"] == 0


def _mlp(seed=0):
    g = np.random.default_rng(seed)
    sizes = [(784, 256), (256, 128), (128, 10)]
    params = []
    for fan_in, fan_out in sizes:
        params.append(g.standard_normal((fan_out, fan_in)).astype(np.float32) / fan_in ** 0.5)
        params.append(g.standard_normal(fan_out).astype(np.float32) * 0.1)
    return params


def _ember_mlp(params):
    nn = ember.nn
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    with ember.no_grad():
        for p, v in zip(model.parameters(), params):
            p.copy_(ember.tensor(v))
    return model


def test_backward_and_step_run_with_blas_held_and_give_it_back(two_threads):
    T._set_blas_threads(2)
    model = _ember_mlp(_mlp())
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = ember.tensor(np.random.default_rng(1).standard_normal((128, 784), dtype=np.float32))
    y = ember.tensor(np.random.default_rng(2).integers(0, 10, 128))
    inside = []
    model[0].weight.register_hook(lambda g: inside.append(("backward", _blas_counts())))
    step_group = opt._step_group

    def spying(group):
        inside.append(("step", _blas_counts()))
        return step_group(group)
    opt._step_group = spying
    ember.nn.functional.cross_entropy(model(x), y).backward()
    assert _blas_counts() == [2] * len(_blas_counts())
    opt.step()
    assert _blas_counts() == [2] * len(_blas_counts())
    assert [k for k, _ in inside] == ["backward", "step"]
    assert all(c == [1] * len(c) for _, c in inside)


def test_an_error_in_backward_releases_the_hold(two_threads):
    T._set_blas_threads(2)
    x = ember.tensor(np.ones((4, 3), np.float32), requires_grad=True)

    def boom(g):
        raise ValueError("hook failed")
    y = x * 2
    y.register_hook(boom)
    with pytest.raises(ValueError, match="hook failed"):
        y.sum().backward()
    assert T._state["held"] == 0
    assert _blas_counts() == [2] * len(_blas_counts())


@pytest.mark.parametrize("batch", [128, 37])
def test_mlp_training_steps_are_bit_equal_at_one_and_two_threads(two_threads, numpy_products,
                                                                  batch):
    params = _mlp()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((batch, 784), dtype=np.float32)
    y = rng.integers(0, 10, batch)
    finals = []
    for threads in (1, 2):
        ember.set_num_threads(threads)
        model = _ember_mlp(params)
        opt = ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for _ in range(3):
            opt.zero_grad()
            ember.nn.functional.cross_entropy(model(ember.tensor(x)), ember.tensor(y)).backward()
            opt.step()
        finals.append([p.detach().numpy().copy() for p in model.parameters()])
    for a, b in zip(*finals):
        assert np.array_equal(a, b)
    tm = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                             torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    with torch.no_grad():
        for p, v in zip(tm.parameters(), params):
            p.copy_(torch.tensor(v))
    topt = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3):
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)).backward()
        topt.step()
    for a, p in zip(finals[0], tm.parameters()):
        np.testing.assert_allclose(a, p.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch,hidden", [(32, 128), (19, 64), (32, 300)])
def test_rnn_cell_loop_is_bit_equal_at_one_and_two_threads(two_threads, batch, hidden):
    """The cell's backward products (32 x 64 x 128 and up: held BLAS takes them the
    one-thread way) and its forward (still set to one BLAS thread per product)."""
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((6, batch, 64), dtype=np.float32)
    init = None
    grads = []
    for threads in (1, 2):
        ember.set_num_threads(threads)
        ember.manual_seed(0)
        cell = ember.nn.RNNCell(64, hidden)
        if init is None:
            init = [p.detach().numpy().copy() for p in cell.parameters()]
        h = ember.zeros(batch, hidden)
        for t in range(xs.shape[0]):
            h = cell(ember.tensor(xs[t]), h)
        h.pow(2).mean().backward()
        grads.append([p.grad.numpy().copy() for p in cell.parameters()])
    for a, b in zip(*grads):
        assert np.array_equal(a, b)
    tcell = torch.nn.RNNCell(64, hidden)
    with torch.no_grad():
        for p, v in zip(tcell.parameters(), init):
            p.copy_(torch.tensor(v))
    h = torch.zeros(batch, hidden)
    for t in range(xs.shape[0]):
        h = tcell(torch.tensor(xs[t]), h)
    h.pow(2).mean().backward()
    for a, p in zip(grads[0], tcell.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_blas_is_held_from_any_python_thread(two_threads):
    """A model trained in another Python thread: NumPy's OpenBLAS (one thread count for
    the process) is set from that thread too. threadpoolctl's own controller lets only
    the first thread that set the count set it again; ember controls that OpenBLAS
    itself."""
    T._set_blas_threads(2)  # (the main thread sets it first)
    seen = []

    def other():
        h = H.hold_blas()
        seen.append(_blas_counts())
        H.release_blas(h)
        seen.append(_blas_counts())
    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert seen == [[1] * len(seen[0]), [2] * len(seen[0])]
    import threadpoolctl
    for lib in T._blas_libs():
        assert not isinstance(lib, threadpoolctl.OpenBLASController) or \
            lib.threading_layer != "pthreads"


@pytest.mark.parametrize("batch", [32, 128])
def test_a_model_trained_in_another_thread_has_one_threads_bits(two_threads, numpy_products,
                                                                 batch):
    """(At batch 32 the first layer's 32 x 784 x 256 product is not split: it runs at
    one BLAS thread, which threadpoolctl's controller did not set from this thread.)"""
    params = _mlp()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((batch, 784), dtype=np.float32)
    y = rng.integers(0, 10, batch)
    T._set_blas_threads(2)

    def train(out):
        model = _ember_mlp(params)
        opt = ember.optim.SGD(model.parameters(), lr=0.05)
        for _ in range(2):
            opt.zero_grad()
            ember.nn.functional.cross_entropy(model(ember.tensor(x)), ember.tensor(y)).backward()
            opt.step()
        out.extend(p.detach().numpy().copy() for p in model.parameters())
    ember.set_num_threads(1)
    alone = []
    train(alone)
    ember.set_num_threads(2)
    threaded = []
    t = threading.Thread(target=train, args=(threaded,))
    t.start()
    t.join(60)
    for a, b in zip(alone, threaded):
        assert np.array_equal(a, b)


class _FakeLib:
    def __init__(self, api, n=2):
        self.internal_api, self.num_threads = api, n

    def set_num_threads(self, n):
        self.num_threads = n


def test_a_hold_sets_openblas_only(two_threads, monkeypatch):
    """MKL (``ember[mkl]``: ember's own products on its threads, which threadpoolctl
    also lists) keeps its count through a hold; a product under the hold still sets it
    to one where it asks for one BLAS thread."""
    openblas, mkl = _FakeLib("openblas"), _FakeLib("mkl")
    monkeypatch.setattr(T, "_blas_libs", lambda: (openblas, mkl))
    monkeypatch.setitem(T._state, "libs", (openblas, mkl))
    held = H.hold_blas()
    assert (openblas.num_threads, mkl.num_threads) == (1, 2)
    saved = T.blas_to_one()
    assert (openblas.num_threads, mkl.num_threads) == (1, 1)
    T.blas_back(saved)
    T._set_blas_threads(3)  # MKL takes it at once, OpenBLAS at the hold's end
    assert (openblas.num_threads, mkl.num_threads) == (1, 3)
    H.release_blas(held)
    assert (openblas.num_threads, mkl.num_threads) == (3, 3)


def test_a_child_forked_during_a_hold_starts_unheld(two_threads):
    import os
    if not hasattr(os, "fork"):
        pytest.fail("os.fork expected on this platform")
    T._set_blas_threads(2)
    held = H.hold_blas()
    try:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a new hold and release work, the count is back at 2
            try:
                h = H.hold_blas()
                H.release_blas(h)
                ok = T._state["held"] == 0 and _blas_counts() == [2] * len(_blas_counts())
                os.write(w, b"1" if ok else b"0")
            finally:
                os._exit(0)
        os.close(w)
        answer = os.read(r, 1)
        os.waitpid(pid, 0)
        assert answer == b"1"
    finally:
        H.release_blas(held)


def test_a_compiled_training_step_holds_blas_and_keeps_one_threads_bits(two_threads, numpy_products,
                                                                         monkeypatch):
    params = _mlp()
    rng = np.random.default_rng(6)
    x = ember.tensor(rng.standard_normal((64, 784), dtype=np.float32))
    y = ember.tensor(rng.integers(0, 10, 64))
    holds = []
    hold = H.hold_blas

    def counting():
        token = hold()
        holds.append(_blas_counts())
        return token
    monkeypatch.setattr(H, "hold_blas", counting)
    finals = []
    for threads in (1, 2):
        ember.set_num_threads(threads)
        T._set_blas_threads(threads)
        model = _ember_mlp(params)
        opt = ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        @ember.compile
        def step(model=model, opt=opt):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        for _ in range(4):
            step()
        finals.append([p.detach().numpy().copy() for p in model.parameters()])
        if threads == 2:
            assert holds and all(c == [1] * len(c) for c in holds)
            assert _blas_counts() == [2] * len(_blas_counts())
    for a, b in zip(*finals):
        assert np.array_equal(a, b)
