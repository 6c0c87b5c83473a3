"""Intra-op threads: set/get_num_threads honoured (ember's pool and NumPy's BLAS), and
every kernel split over the pool gives bit-identical results to one thread, which
match torch's."""
import threading
import warnings

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

import ember
from ember.backend import threads as T
from ember.optim import optimizer


@pytest.fixture
def threads(monkeypatch):
    """A function running ``fn()`` at 1 and at 2 threads (every kernel split, however
    small), returning both results; the pool is checked to have been used."""
    before = ember.get_num_threads()
    monkeypatch.setattr(T, "_MIN_COST_PER_THREAD", 1)
    monkeypatch.setattr(optimizer, "_SPLIT_MIN", 1)
    # the optimizers' NumPy updates, which split (the one-pass numba loops, where numba
    # is installed, run on one thread: tests/test_optim_one_pass.py)
    from ember.optim import _one_pass
    monkeypatch.setattr(_one_pass, "wanted", lambda opt: opt.__dict__.get("_one_pass", False))
    calls = []
    run = T.Pool.run

    def counting(self, fn, bounds):
        calls.append(len(bounds) - 1)
        return run(self, fn, bounds)
    monkeypatch.setattr(T.Pool, "run", counting)

    def both(fn):
        ember.set_num_threads(1)
        one = fn()
        assert not calls
        ember.set_num_threads(2)
        two = fn()
        assert calls and max(calls) == 2, "the kernel did not split"
        calls.clear()
        return one, two
    yield both
    ember.set_num_threads(before)


def _blas_threads():
    # the BLAS libraries ember's products run on: NumPy's OpenBLAS, and MKL while
    # ember.backend.gemm has it loaded (not SciPy's own OpenBLAS, which other tests of the
    # process may load, nor an MKL that ``gemm._reset`` made ember forget)
    from ember.backend import gemm
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"
            and ("numpy.libs" in i["filepath"] if i["internal_api"] == "openblas"
                 else i["internal_api"] == "mkl" and gemm._lib[0])}


def _numpy_blas_threads():
    return {i["num_threads"] for i in threadpool_info()
            if i["internal_api"] == "openblas" and "numpy.libs" in i["filepath"]}


def test_set_num_threads_is_honoured_and_sets_blas():
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        assert ember.get_num_threads() == 1 and _blas_threads() == {1}
        ember.set_num_threads(2)
        assert ember.get_num_threads() == 2 and _blas_threads() == {2}
        assert T.blas_threads() == 2
    finally:
        ember.set_num_threads(before)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_set_num_threads_rejects_like_torch(bad):
    with pytest.raises(RuntimeError) as te:
        torch.set_num_threads(bad)
    with pytest.raises(RuntimeError) as ee:
        ember.set_num_threads(bad)
    assert str(ee.value).split(",")[0] == str(te.value).split(",")[0]


def test_default_follows_the_environment(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert T._default_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert T._default_threads() == 1
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    assert T._default_threads() >= 1


def test_parallel_rows_covers_each_row_once_and_raises(monkeypatch):
    monkeypatch.setattr(T, "_MIN_COST_PER_THREAD", 1)
    before = ember.get_num_threads()
    ember.set_num_threads(3)
    try:
        hits = np.zeros(10, int)
        names = set()

        def fn(lo, hi):
            hits[lo:hi] += 1
            names.add(threading.current_thread().name)
        T.parallel_rows(fn, 10, 10)
        assert hits.tolist() == [1] * 10 and len(names) == 3

        def bad(lo, hi):
            if lo:
                raise ValueError("block failed")
        with pytest.raises(ValueError, match="block failed"):
            T.parallel_rows(bad, 10, 10)
        # a nested split (a kernel inside a block) runs in its block's thread
        inner = []
        T.parallel_rows(lambda lo, hi: T.parallel_rows(
            lambda a, b: inner.append(threading.current_thread().name), 4, 4), 4, 4)
        assert len(inner) >= 3
        hits[:] = 0
        T.parallel_rows(fn, 10, 10)  # the pool still works after the error
        assert hits.tolist() == [1] * 10
    finally:
        ember.set_num_threads(before)


def _cnn_steps(m, weights, x, y, steps=2):
    nn = m.nn
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3),
                        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(6, 5))
    net.load_state_dict({k: m.tensor(v) for k, v in weights.items()})
    opt = m.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = m.nn.functional.cross_entropy(net(m.tensor(x)), m.tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}


def test_cnn_training_is_bit_identical_across_threads_and_matches_torch(threads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 1, 12, 12)).astype(np.float32)
    y = rng.integers(0, 5, 6)
    torch.manual_seed(0)
    weights = {k: v.detach().numpy() for k, v in torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(4, 6, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(6, 5)).state_dict().items()}
    (l1, w1), (l2, w2) = threads(lambda: _cnn_steps(ember, weights, x, y))
    assert l1 == l2
    for k in w1:
        np.testing.assert_array_equal(w1[k], w2[k], err_msg=k)
    lt, wt = _cnn_steps(torch, weights, x, y)
    np.testing.assert_allclose(l2, lt, rtol=1e-5)
    for k in w2:
        np.testing.assert_allclose(w2[k], wt[k], rtol=1e-4, atol=1e-5, err_msg=k)


def _grads(fn, arrays):
    ts = [ember.tensor(a, requires_grad=True) for a in arrays]
    out = fn(ember, *ts)
    g = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    out.backward(ember.tensor(g))
    return [out.detach().numpy().copy()] + [t.grad.numpy().copy() for t in ts]


def _same(one, two):
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_relu_large_is_bit_identical(threads):
    x = np.random.default_rng(0).standard_normal((3, 65536 + 17)).astype(np.float32)
    _same(*threads(lambda: _grads(lambda m, t: m.relu(t), [x])))


@pytest.mark.parametrize("with_mask", [False, True])
def test_attention_is_bit_identical_and_matches_torch(threads, with_mask):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((3, 2, 5, 4)).astype(np.float32) for _ in range(3))
    mask = rng.standard_normal((5, 5)).astype(np.float32) if with_mask else None

    def fn(m, q, k, v):
        return m.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None if mask is None else m.tensor(mask))
    one, two = threads(lambda: _grads(fn, [q, k, v]))
    _same(one, two)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    out = fn(torch, tq, tk, tv)
    out.backward(torch.tensor(np.random.default_rng(1).standard_normal(out.shape)
                              .astype(np.float32)))
    for e, t in zip(two, [out, tq.grad, tk.grad, tv.grad]):
        np.testing.assert_allclose(e, t.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("numba", [True, False])
@pytest.mark.parametrize("case", ["wide_scores", "inf_score", "small_blocks", "masked_row"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_attention_split_takes_one_calls_softmax_route(threads, monkeypatch, case, dtype,
                                                       numba):
    # the softmax's route (numba's rows, exp without the maxima, the maxima subtracted)
    # depends on the scores and their number: a block of rows must take the route of
    # one call over all rows, not its own (scores beyond +-64, or an infinite one, in
    # one block only; blocks under the direct route's size bound, the call over it)
    from ember.ops import attention
    if not numba:
        monkeypatch.setitem(attention._NUMBA, "softmax", None)
    rng = np.random.default_rng(0)
    n = 12 if case == "small_blocks" else 24
    q, k, v = (rng.standard_normal((4, 2, n, 8)).astype(dtype) for _ in range(3))
    mask = None
    if case == "wide_scores":
        q[-1] *= 30.0
    elif case == "inf_score":
        q[-1, 0, 0, 0] = np.inf
    elif case == "masked_row":  # a row of -inf only in the last sample (safe softmax: 0)
        mask = np.zeros((4, 2, n, n), dtype)
        mask[-1, 1, 3] = -np.inf

    def fn(m, q, k, v):
        return m.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None if mask is None else m.tensor(mask))
    one, two = threads(lambda: _grads(fn, [q, k, v]))
    _same(one, two)


def test_layer_norm_is_bit_identical(threads, monkeypatch):
    from ember.ops import norm_layouts
    monkeypatch.setattr(norm_layouts, "_BLOCK_BYTES", 64)  # several blocks to split
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 7, 16)).astype(np.float32)
    w, b = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    one, two = threads(lambda: _grads(lambda m, x, w, b: m.nn.functional.layer_norm(
        x, (16,), w, b), [x, w, b]))
    _same(one, two)


def test_transformer_layer_step_is_bit_identical(threads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6, 8)).astype(np.float32)

    def run():
        ember.manual_seed(0)
        layer = ember.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        opt = ember.optim.Adam(layer.parameters(), lr=1e-2)
        for _ in range(2):
            opt.zero_grad()
            layer(ember.tensor(x)).pow(2).mean().backward()
            opt.step()
        return [p.detach().numpy().copy() for p in layer.parameters()]
    _same(*threads(run))


def test_lstm_step_is_bit_identical(threads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)

    def run():
        ember.manual_seed(0)
        lstm = ember.nn.LSTM(4, 6, batch_first=True)
        opt = ember.optim.Adam(lstm.parameters(), lr=1e-2)
        for _ in range(2):
            opt.zero_grad()
            lstm(ember.tensor(x))[0].pow(2).mean().backward()
            opt.step()
        return [p.detach().numpy().copy() for p in lstm.parameters()]
    _same(*threads(run))


@pytest.mark.parametrize("shape,k", [((20, 8, 7, 7), 3), ((4, 3, 9, 9), 3),
                                     ((48, 16, 10, 10), 3)])
def test_conv_layers_are_bit_identical_and_match_torch(threads, shape, k):
    """Wide small maps (the batch-last input gradient), narrow ones (per-sample
    weight products) and more than 128 columns a window (row columns in blocks of
    samples: 48 samples of 100 positions make 2 blocks)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((6, shape[1], k, k)).astype(np.float32)

    def fn(m, x, w):
        return m.nn.functional.max_pool2d(m.nn.functional.conv2d(x, w, padding=1), 2)
    from ember.ops import _conv_kernels
    if shape[1] * k * k > _conv_kernels._PER_SAMPLE_CK:  # the row-column case
        assert _conv_kernels._rows(shape[1] * k * k, shape[2] * shape[3])
        assert len(_conv_kernels._row_blocks(shape[0], shape[2] * shape[3])) == 2
    one, two = threads(lambda: _grads(fn, [x, w]))
    _same(one, two)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    out = fn(torch, tx, tw)
    out.backward(torch.tensor(np.random.default_rng(1).standard_normal(out.shape)
                              .astype(np.float32)))
    for e, t in zip(two, [out, tx.grad, tw.grad]):
        np.testing.assert_allclose(e, t.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_contiguous_copy_in_blocks(monkeypatch):
    monkeypatch.setattr(T, "_MIN_COST_PER_THREAD", 1)
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        a = np.arange(60, dtype=np.float32).reshape(3, 4, 5).transpose(2, 0, 1)
        c = T.contiguous(a)
        assert c.flags.c_contiguous and np.array_equal(c, a)
    finally:
        ember.set_num_threads(before)


def test_blas_runs_one_thread_inside_a_split_region_and_is_restored(monkeypatch):
    monkeypatch.setattr(T, "_MIN_COST_PER_THREAD", 1)
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        seen = []
        T.parallel_rows(lambda lo, hi: seen.append(_blas_threads()), 4, 4, blas=True)
        assert seen == [{1}, {1}]
        assert _blas_threads() == {2}
        T.parallel_rows(lambda lo, hi: seen.append(_blas_threads()), 4, 4)
        assert seen[2:] == [{2}, {2}]
    finally:
        ember.set_num_threads(before)


def test_single_blas_for_step_loops():
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        with T.single_blas():
            assert _blas_threads() == {1}
        assert _blas_threads() == {2}
    finally:
        ember.set_num_threads(before)


class _CountingBlas:
    """A BLAS controller (``add_blas``) recording the counts it is set to."""

    def __init__(self, n):
        self.num_threads, self.seen = n, []

    def set_num_threads(self, n):
        self.num_threads = n
        self.seen.append(n)


def test_small_products_at_two_threads_hold_blas_at_one_thread_each(monkeypatch):
    """A product ember neither splits nor leaves to BLAS's threads runs at one BLAS
    thread (``blas_to_one``/``blas_back``, ``single_blas`` called per product; also the
    bias gradient's row sum): each library with more threads is set to one around it
    and given its count back, also when the product raises; one at one thread is left
    alone. The values are the one-thread product's."""
    from ember.backend import gemm
    monkeypatch.setattr(T, "_blas_may_thread", lambda k, char: False)
    # the product through np.matmul itself (on SkylakeX kernels gemm would take the
    # transposed product, which runs np.matmul on its own, unheld: same bits there)
    monkeypatch.setattr(T, "layouts_keep_bits", lambda: False)
    two, one = _CountingBlas(3), _CountingBlas(1)
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    for lib in (two, one):
        T.add_blas(lib)
    rng = np.random.default_rng(3)
    g = rng.standard_normal((32, 128)).astype(np.float32)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    try:
        two.seen.clear()
        one.seen.clear()
        seen = []
        real = gemm._numpy_matmul  # the one-thread route gemm runs for T.WHOLE
        monkeypatch.setattr(gemm, "_numpy_matmul", lambda *a: (
            seen.append((_blas_threads(), two.num_threads)), real(*a))[1])
        got = gemm.matmul(g.T, x)
        monkeypatch.setattr(gemm, "_numpy_matmul", real)
        assert seen == [({1}, 1)] and two.seen == [1, 3] and one.seen == []
        assert _blas_threads() == {2} and two.num_threads == 3
        with T.single_blas():
            want = np.matmul(g.T, x)
        np.testing.assert_array_equal(got, want)
        two.seen.clear()
        gemm.sum_rows(g)
        # held where BLAS's threads would change its sums (an inner dimension past the
        # kernel's bound); below it they keep the bits and take it
        assert two.seen == ([1, 3] if g.shape[0] > T.same_bits_k("f") else [])
        two.seen.clear()
        with pytest.raises(ValueError):
            gemm.matmul(g.T, rng.standard_normal((32, 64)).astype(np.float32), out=np.empty(
                (128, 64), np.float32)[:, ::2])
        assert two.seen == [1, 3] and _blas_threads() == {2}
    finally:
        T.remove_blas(two)
        T.remove_blas(one)
        ember.set_num_threads(before)


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum_is_bit_identical_and_matches_torch(threads, nesterov):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((40, 30)).astype(np.float32)
    grads = [rng.standard_normal((40, 30)).astype(np.float32) for _ in range(3)]

    def run(m):
        p = m.nn.Parameter(m.tensor(w0.copy()))
        opt = m.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=nesterov)
        for g in grads:
            p.grad = m.tensor(g)
            opt.step()
        return p.detach().numpy().copy()
    one, two = threads(lambda: run(ember))
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(two, run(torch), rtol=1e-6, atol=1e-6)


@pytest.fixture
def no_threadpoolctl(monkeypatch):
    """ember as installed without threadpoolctl: its BLAS controllers looked up anew."""
    monkeypatch.setitem(__import__("sys").modules, "threadpoolctl", None)
    monkeypatch.setitem(T._state, "libs", None)
    before = ember.get_num_threads()
    yield
    T._state["libs"] = None  # the next lookup finds threadpoolctl again
    ember.set_num_threads(before)


def test_openblas_threads_are_set_without_threadpoolctl(no_threadpoolctl):
    from ember.backend import openblas
    libs = T._blas_libs()
    assert libs and all(isinstance(lib, openblas.OpenBLAS) for lib in libs)
    assert {lib.filepath for lib in libs} >= {
        i["filepath"] for i in threadpool_info() if i["internal_api"] == "openblas"}
    ember.set_num_threads(1)
    assert _numpy_blas_threads() == {1} and T.blas_threads() == 1
    ember.set_num_threads(2)
    assert _numpy_blas_threads() == {2} and libs[0].num_threads == 2
    with T.single_blas():
        assert _numpy_blas_threads() == {1}
    assert _numpy_blas_threads() == {2}


def test_split_regions_run_blas_at_one_thread_without_threadpoolctl(no_threadpoolctl,
                                                                   monkeypatch):
    monkeypatch.setattr(T, "_MIN_COST_PER_THREAD", 1)
    ember.set_num_threads(2)
    seen = []
    T.parallel_rows(lambda lo, hi: seen.append(_numpy_blas_threads()), 4, 4, blas=True)
    assert seen == [{1}, {1}] and _numpy_blas_threads() == {2}


# the products of the benchmark workloads (MLP, Transformer, CNN head, LSTM input
# projection), each as NumPy gives it to ember's matmul: plain, or a transposed operand
_GEMM_SHAPES = [(128, 784, 256), (256, 128, 784), (128, 256, 128), (1024, 128, 384),
                (128, 1024, 256), (1024, 256, 128), (64, 1600, 128), (1024, 64, 512),
                (100, 300, 70), (70, 1000, 33)]


@pytest.mark.parametrize("m,k,n", _GEMM_SHAPES)
@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
def test_matmul_rows_are_bit_identical_to_the_whole_product(threads, m, k, n, layout):
    from ember.backend import gemm
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if layout == "tn" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if layout == "nt" else (k, n)).astype(np.float32)
    a = a.T if layout == "tn" else a
    b = b.T if layout == "nt" else b
    with gemm.numpy_only():
        if T.row_blocks_keep_bits():
            one, two = threads(lambda: gemm.matmul(a, b))
        else:  # a kernel whose row blocks change the bits: whole, at one BLAS thread
            before = ember.get_num_threads()
            try:
                ember.set_num_threads(1)
                one = gemm.matmul(a, b)
                ember.set_num_threads(2)
                # not split: at one BLAS thread, or BLAS's own threads up to the inner
                # dimension where they keep the one-thread bits
                got = T.matmul(a, b)
                assert got is T.WHOLE or got is None and k <= T.same_bits_k("f")
                two = gemm.matmul(a, b)
            finally:
                ember.set_num_threads(before)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(two, torch.tensor(a) @ torch.tensor(b), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("spare,pool_busy", [(True, False), (False, False), (True, True)])
def test_products_ember_does_not_split_follow_the_machines_load(monkeypatch, spare,
                                                                  pool_busy):
    # a product too small to split (a recurrent cell's) keeps BLAS's threads while the
    # machine has cores to spare and ember's pool is idle (no switch of BLAS's thread
    # count: it costs more than the product gains), else runs at one BLAS thread
    # (threaded products stall on a busy machine, and spin against the pool's blocks)
    import time

    from ember.backend import gemm
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    monkeypatch.setattr(T, "cores_to_spare", lambda: spare)
    monkeypatch.setitem(T._state, "pool_used",
                        time.monotonic() + 60 if pool_busy else float("-inf"))
    switches = []
    for lib in T._all_blas():
        real = lib.set_num_threads
        monkeypatch.setattr(lib, "set_num_threads",
                            lambda n, real=real: (switches.append(n), real(n)))
    # an inner dimension within the bound up to which this kernel's BLAS threads keep
    # their one-thread bits (SkylakeX: 128; Haswell: 7), rows enough for BLAS to thread
    # it and too few for ember to split it; past the bound (an unmeasured kernel) it
    # always runs at one BLAS thread
    bound = T.same_bits_k("f")
    k = min(128, bound) or 128
    m = max(32, -(-T._BLAS_THREADED_MNK // (k * 128)))
    a, b = np.ones((m, k), np.float32), np.ones((k, 128), np.float32)
    assert T._BLAS_THREADED_MNK <= m * k * 128 < T._SPLIT_MNK
    try:
        with gemm.numpy_only():
            r = gemm.matmul(a, b)
        # one switch down and one back per BLAS library ember reaches (MKL's too, once
        # loaded by an earlier product of the process; its two controllers, threadpoolctl's
        # and ember's, share one count, so the second finds it at one already)
        down = switches.count(1)
        keep = spare and not pool_busy and k <= bound
        assert switches == ([] if keep else [1] * down + [2] * down)
        assert keep or 1 <= down <= len(T._all_blas())
        assert _blas_threads() == {2}
        np.testing.assert_array_equal(r, np.full((m, 128), k, np.float32))
        del switches[:]
        big = np.ones((128, 784), np.float32), np.ones((784, 256), np.float32)
        with gemm.numpy_only():
            r = gemm.matmul(*big)
        np.testing.assert_array_equal(r, np.full((128, 256), 784, np.float32))
        # split: one BLAS thread per block (or, on a kernel whose row blocks change the
        # bits, whole at one BLAS thread)
        assert switches and set(switches) == {1, 2}
    finally:
        monkeypatch.undo()
        ember.set_num_threads(before)


def test_cores_to_spare_reads_the_load_average_once_a_second(monkeypatch):
    loads = []
    monkeypatch.setattr(T.os, "getloadavg", lambda: loads.append(1) or (load[0], 0, 0))
    monkeypatch.setitem(T._state, "threads", 2)
    monkeypatch.setitem(T._idle, "next", 0.0)
    load = [1.9]
    assert T.cores_to_spare() is True
    load[0] = 7.0
    assert T.cores_to_spare() is True and len(loads) == 1  # cached for a second
    monkeypatch.setitem(T._idle, "next", 0.0)
    assert T.cores_to_spare() is False and len(loads) == 2
    monkeypatch.setattr(T.os, "getloadavg", lambda: (_ for _ in ()).throw(OSError()))
    monkeypatch.setitem(T._idle, "next", 0.0)
    assert T.cores_to_spare() is False


def test_mlp_training_is_bit_identical_across_threads_and_matches_torch(threads):
    from ember.backend import gemm
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))
    weights = {k: v.detach().numpy().copy() for k, v in tnet.state_dict().items()}

    def run(m):
        nn = m.nn
        net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                            nn.Linear(128, 10))
        net.load_state_dict({k: m.tensor(v) for k, v in weights.items()})
        opt = m.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            m.nn.functional.cross_entropy(net(m.tensor(x)), m.tensor(y)).backward()
            opt.step()
        return [p.detach().numpy().copy() for p in net.parameters()]
    with gemm.numpy_only():
        one, two = threads(lambda: run(ember))
    _same(one, two)
    for e, t in zip(two, run(torch)):
        np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-5)


def test_sgd_saxpy_in_blocks_is_bit_identical_and_matches_torch(threads):
    from ember.backend import axpy
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((300, 101)).astype(np.float32)  # over BLAS's threaded size
    grads = [rng.standard_normal(w0.shape).astype(np.float32) for _ in range(2)]

    def run(m):
        p = m.nn.Parameter(m.tensor(w0.copy()))
        opt = m.optim.SGD([p], lr=0.1)
        for g in grads:
            p.grad = m.tensor(g)
            opt.step()
        return p.detach().numpy().copy()
    assert axpy.available()
    one, two = threads(lambda: run(ember))
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(two, run(torch))


# ----- elementwise kernels split in flat blocks or rows -----------------------------
@pytest.fixture
def split_all(threads, monkeypatch):
    """``threads`` with every elementwise kernel large enough to split."""
    monkeypatch.setattr(T, "SPLIT_ELEMENTS", 1)
    return threads


_N = 3 * 4096 + 17  # several grains and a ragged end
_BINARY = {"add": lambda m, a, b: a + b, "sub": lambda m, a, b: a - b,
           "mul": lambda m, a, b: a * b, "div": lambda m, a, b: a / b}
_SHAPES = {"same": ((4, _N), (4, _N)), "bias": ((4, _N), (_N,)),
           "column": ((4, _N), (4, 1)), "bias first": ((_N,), (4, _N)),
           "scalar": ((4, _N), ())}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", list(_SHAPES))
@pytest.mark.parametrize("op", list(_BINARY))
def test_binary_ops_are_bit_identical_and_match_torch(split_all, op, shapes, dtype):
    rng = np.random.default_rng(0)
    arrays = [(rng.standard_normal(s) + 3).astype(dtype) for s in _SHAPES[shapes]]
    f = _BINARY[op]
    one, two = split_all(lambda: _grads(f, arrays))
    _same(one, two)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = f(torch, *ts)
    np.testing.assert_array_equal(two[0], out.detach().numpy())  # exact ops: equal
    assert two[0].flags.c_contiguous


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sin", "sqrt", "neg", "square"])
def test_unary_ufuncs_are_bit_identical_and_match_torch(split_all, name, dtype):
    x = np.random.default_rng(0).uniform(0.1, 4, (5, _N)).astype(dtype)
    f = lambda m, t: getattr(m, name)(t)  # noqa: E731
    one, two = split_all(lambda: _grads(f, [x]))
    _same(one, two)
    tx = torch.tensor(x, requires_grad=True)
    np.testing.assert_allclose(two[0], f(torch, tx).detach().numpy(), rtol=2e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_is_bit_identical_and_matches_torch(split_all, reduction):
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((6, _N)).astype(np.float32) for _ in range(2))

    def run(m, a, b):
        out = m.nn.functional.mse_loss(a, b, reduction=reduction)
        return out if reduction == "none" else out.reshape(1)
    one, two = split_all(lambda: _grads(run, [x, y]))
    _same(one, two)
    tt = [torch.tensor(a, requires_grad=True) for a in (x, y)]
    np.testing.assert_allclose(two[0], run(torch, *tt).detach().numpy(), rtol=1e-5)


def test_split_blocks_keep_errors_quiet_and_layouts(split_all):
    big = np.full((4, _N), 3e38, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow in a worker thread must not warn
        one, two = split_all(lambda: [(ember.tensor(big) * ember.tensor(big)).numpy(),
                                      ember.tensor(big).exp().numpy()])
    _same(one, two)
    assert np.isinf(two[0]).all() and np.isinf(two[1]).all()
    # transposed operands are not split: NumPy's own result, in its own layout
    a = np.random.default_rng(0).standard_normal((_N, 4)).astype(np.float32)
    ember.set_num_threads(2)
    r = (ember.tensor(a).t() + ember.tensor(a).t()).numpy()
    np.testing.assert_array_equal(r, a.T + a.T)
    assert r.strides == (a.T + a.T).strides


def test_elementwise_split_is_gated_by_size(monkeypatch):
    """At the default thresholds, a small op runs on the calling thread alone and a
    large one on the pool."""
    calls = []
    run = T.Pool.run
    monkeypatch.setattr(T.Pool, "run",
                        lambda self, fn, b: calls.append(len(b) - 1) or run(self, fn, b))
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        small = ember.ones(T.SPLIT_ELEMENTS - 1)
        (small + small).exp()
        assert not calls
        large = ember.ones(T.SPLIT_ELEMENTS)
        (large + large).exp()
        assert calls == [2, 2]
    finally:
        ember.set_num_threads(before)


def test_gradients_summed_in_blocks_are_bit_identical_and_match_torch(split_all):
    """A tensor used several times (a residual connection): the gradients arriving at
    it are summed into one buffer, in blocks when large."""
    x = np.random.default_rng(0).uniform(0.1, 2, (4, _N)).astype(np.float32)

    def f(m, t):
        y = t * 3
        return (y.exp() + y.sin()) * 0.5 + t.tanh() + t.sqrt() + t.log()
    one, two = split_all(lambda: _grads(f, [x]))
    _same(one, two)
    tt = torch.tensor(x, requires_grad=True)
    out = f(torch, tt)
    out.backward(torch.tensor(np.random.default_rng(1).standard_normal(out.shape)
                              .astype(np.float32)))
    np.testing.assert_allclose(two[1], tt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_add_into_splits_in_place(monkeypatch):
    monkeypatch.setattr(T, "SPLIT_ELEMENTS", 1)
    monkeypatch.setattr(T, "_MIN_COST_PER_THREAD", 1)
    before = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((2, _N)), rng.standard_normal((2, _N))
        want = a + b
        T.add_into(a, b)
        np.testing.assert_array_equal(a, want)
    finally:
        ember.set_num_threads(before)
