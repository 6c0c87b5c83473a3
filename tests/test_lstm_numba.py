"""The LSTM's numba kernels (ember/ops/_lstm_numba.py, the ember[fast] extra): float32
layers against torch on both paths (numba and the NumPy loop), the kernels against the
NumPy loop they replace, a short training run, the compiled step, and numba staying
optional and imported only when an LSTM first runs."""
import dataclasses
import os
import subprocess
import sys
import types

import numpy as np
import pytest
import torch
from oracle import Case, cases, check
from test_nn_rnn import packed_case, rnn_case

import ember
from ember.ops import rnn

F32 = np.float32


@pytest.fixture(params=["numba", "numpy"])
def path(request, monkeypatch):
    """Each test runs on the numba kernels and on the NumPy loop."""
    if request.param == "numba":  # numba is a test dependency: the kernels must load
        assert rnn._lstm_kernels(np, np.zeros(1, F32)) is not None
    else:
        monkeypatch.setitem(rnn._FUSED, "lstm", None)
    return request.param


def _f32(case):
    # second derivatives replay the layer in Tensor ops, never in the kernels (the float64
    # tables of test_nn_rnn.py check them); in float32 they only add rounding noise
    return dataclasses.replace(case, dtype=F32, gradgrad=False)


def _saturating(rng):
    """Inputs and weights large enough to drive every gate far into saturation, plus a
    NaN and infinities in the input (they must propagate as in torch)."""
    x = rng.uniform(-30, 30, (4, 2, 3))
    x[1, 0, 1], x[2, 1, 0], x[3, 0, 2] = np.nan, np.inf, -np.inf
    params = [rng.uniform(-30, 30, s) for s in ((16, 3), (16, 4), (16,), (16,))]
    return [a.astype(F32) for a in [x] + params]


def _lstm_fn(m, x, *params):
    mod = m.nn.LSTM(3, 4)
    for name, t in zip([n for n, _ in mod.named_parameters()], params):
        delattr(mod, name)
        setattr(mod, name, t)
    out, (h, c) = mod(x)
    return out, h, c


FLOAT32 = [
    _f32(rnn_case("LSTM_f32_odd_width", "LSTM", I=5, H=13, T=6, B=7, state=True)),
    _f32(rnn_case("LSTM_f32_bidir_2layers_bf", "LSTM", I=3, H=9, T=5, B=4, state=True,
                  num_layers=2, bidirectional=True, batch_first=True)),
    _f32(rnn_case("LSTM_f32_proj", "LSTM", I=4, H=9, T=5, B=3, state=True, proj_size=5)),
    _f32(rnn_case("LSTM_f32_unbatched_nobias", "LSTM", unbatched=True, bias=False)),
    _f32(packed_case("LSTM_f32_packed_unsorted_bidir", "LSTM", [2, 6, 1, 4, 4],
                     enforce_sorted=False, state=True, bidirectional=True, H=11)),
    _f32(packed_case("LSTM_f32_proj_packed", "LSTM", [3, 5, 2], enforce_sorted=False,
                     state=True, proj_size=3, H=7)),
    Case("LSTM_f32_saturated_nan_inf", _lstm_fn, _saturating, dtype=F32, grad=False),
]


@cases(FLOAT32)
def test_float32_lstm_matches_torch(case, path):
    check(case)


def _loop_inputs(rng, H=13, Hout=None, bs=(5, 5, 4, 2, 2, 1)):
    I, B, N = 6, bs[0], sum(bs)
    Hout = Hout or H
    a = [rng.standard_normal(s).astype(F32) for s in
         ((N, I), (B, Hout), (B, H), (4 * H, I), (4 * H, Hout), (4 * H,), (4 * H,))]
    w_hr = rng.standard_normal((Hout, H)).astype(F32) if Hout != H else None
    return a + [w_hr, bs]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("proj", [False, True])
def test_kernels_against_the_numpy_loop(reverse, proj, monkeypatch):
    """Forward within float32 rounding of the NumPy loop (exp and tanh are the kernel's
    own polynomials); backward from the same activations equal to it bit for bit."""
    rng = np.random.default_rng(3)
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs = _loop_inputs(rng, Hout=5 if proj else None)
    Hout = h0.shape[1]
    args = (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs, reverse)
    got = rnn._lstm_forward_np(np, *args)
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    want = rnn._lstm_forward_np(np, *args)
    for g, w in zip(got[:3] + got[3], want[:3] + want[3]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    gy, ghn, gcn = (rng.standard_normal(s).astype(F32) for s in
                    ((x.shape[0], Hout), h0.shape, c0.shape))
    needs = [True] * 8
    bwd = (gy, ghn, gcn, got[3], x, w_ih, w_hh, w_hr, bs, reverse, needs)
    want = rnn._lstm_backward_np(np, *bwd)
    monkeypatch.undo()
    got = rnn._lstm_backward_np(np, *bwd)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("blas", ["numpy", "blocks", "mkl"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("first_state", [False, True])
def test_sequence_kernels_against_the_step_kernels(reverse, first_state, blas, monkeypatch,
                                                   request):
    """A padded batch runs all its steps in one kernel call (the recurrent products
    called from numba on the BLAS ember.backend.gemm would pick: NumPy's, or MKL's for
    products large enough): the per-step kernels' results bit for bit, forward and
    backward, or within float32 rounding where the products run in column blocks (for
    OpenBLAS's small-matrix kernel); without the first state's gradient that one is not
    returned."""
    from ember.backend import gemm
    from ember.ops import _rnn_blas as kernels
    monkeypatch.setattr(kernels, "_SGEMM", {})
    if blas == "mkl":  # (mkl is a test dependency) products this size go to MKL
        monkeypatch.setattr(gemm, "THRESHOLD", 1)
        if not gemm.mkl_available():  # EMBER_MKL=0: MKL loaded for this test alone
            monkeypatch.setenv("EMBER_MKL", "1")
            gemm._reset()
            request.addfinalizer(gemm._reset)  # (then the restored EMBER_MKL=0 again)
        assert gemm.mkl_available()
    elif blas == "blocks":  # blocks of 16 columns, whatever this machine's BLAS
        monkeypatch.setattr(kernels, "_SMALL_MNK", 16 * 6 * 76)
        monkeypatch.setattr(kernels, "_SMALL_KERNEL_CORES", (kernels.sgemm(1, 1, 1) and
                                                            kernels._SGEMM["core"],))
        assert kernels.sgemm(6, 19, 76)[1] == 16 and kernels.sgemm(6, 76, 19)[1] == 64
    rng = np.random.default_rng(5)
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs = _loop_inputs(rng, H=19, bs=(6,) * 7)
    args = (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs, reverse)
    assert rnn._seq_gemm(rnn._lstm_kernels(np, x), bs, 6, None, 76, 19) is not None
    calls = []
    seq = rnn._FUSED["lstm"].forward_seq
    monkeypatch.setattr(rnn._FUSED["lstm"], "forward_seq",
                        lambda *a: calls.append(1) or seq(*a))
    got = rnn._lstm_forward_np(np, *args)
    gy, ghn, gcn = (rng.standard_normal(s).astype(F32) for s in
                    ((x.shape[0], 19), h0.shape, c0.shape))
    needs = [True, first_state, first_state] + [True] * 5
    got_g = rnn._lstm_backward_np(np, gy, ghn, gcn, got[3], x, w_ih, w_hh, None, bs, reverse,
                                  needs)
    assert calls == [1]
    monkeypatch.setattr(rnn, "_seq_gemm", lambda *a: None)  # the per-step kernels
    want = rnn._lstm_forward_np(np, *args)
    want_g = rnn._lstm_backward_np(np, gy, ghn, gcn, want[3], x, w_ih, w_hh, None, bs,
                                   reverse, needs)
    def same(g, w):
        assert (g is None) == (w is None)
        if g is not None and blas == "blocks":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        elif g is not None:
            np.testing.assert_array_equal(g, w)
    for g, w in zip(got[:3] + got[3], want[:3] + want[3]):
        same(g, w)
    for k, (g, w) in enumerate(zip(got_g, want_g)):
        if k in (1, 2) and not first_state:
            assert g is None
        else:
            same(g, w)


def test_float64_and_other_devices_keep_the_numpy_loop():
    assert rnn._lstm_kernels(np, np.zeros(1)) is None
    assert rnn._lstm_kernels(np, np.zeros(1, F32), np.zeros(1)) is None
    assert rnn._lstm_kernels(types.SimpleNamespace(), np.zeros(1, F32)) is None


def _train(m, init, steps=15):
    nn = m.nn
    lstm, head = nn.LSTM(6, 16, batch_first=True), nn.Linear(16, 3)
    params = list(lstm.parameters()) + list(head.parameters())
    with m.no_grad():
        for p, v in zip(params, init):
            p.copy_(m.tensor(v))
    opt = m.optim.Adam(params, lr=0.01)
    rng = np.random.default_rng(4)
    x = m.tensor(rng.standard_normal((10, 8, 6)).astype(F32))
    y = m.tensor(rng.integers(0, 3, 10))
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(head(lstm(x)[0][:, -1]), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), [p.detach().numpy() for p in params]


def test_training_steps_match_torch(path):
    torch.manual_seed(0)
    init = [p.detach().numpy().copy() for p in list(torch.nn.LSTM(6, 16).parameters())
            + list(torch.nn.Linear(16, 3).parameters())]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t_loss, t_params = _train(torch, init)
    finally:
        torch.set_num_threads(threads)
    e_loss, e_params = _train(ember, init)
    np.testing.assert_allclose(e_loss, t_loss, rtol=1e-5)
    assert e_loss[-1] < e_loss[0]
    for e, t in zip(e_params, t_params):
        np.testing.assert_allclose(e, t, rtol=1e-4, atol=1e-5)


def test_compiled_step_runs_the_kernels(monkeypatch):
    kernels = rnn._lstm_kernels(np, np.zeros(1, F32))
    names = ("forward_step", "backward_step", "forward_seq", "backward_seq")
    calls = dict.fromkeys(names, 0)

    def counted(name):
        def run(*args):
            calls[name] += 1
            return getattr(kernels, name)(*args)
        return run
    monkeypatch.setitem(rnn._FUSED, "lstm", types.SimpleNamespace(
        sgemm=kernels.sgemm, transpose=kernels.transpose, **{n: counted(n) for n in names}))
    ember.manual_seed(0)
    lstm, head = ember.nn.LSTM(5, 8), ember.nn.Linear(8, 2)
    opt = ember.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=0.01)
    x, y = ember.randn(4, 3, 5), ember.randint(0, 2, (3,))

    def step(x, y):
        opt.zero_grad()
        loss = ember.nn.functional.cross_entropy(head(lstm(x)[0][-1]), y)
        loss.backward()
        opt.step()
        return loss
    cstep = ember.compile(step, fullgraph=True)
    for _ in range(3):
        cstep(x, y)
    assert cstep.stats["replays"] == 2
    # a padded batch: each layer call is one kernel call over its 4 time steps
    assert calls == {"forward_step": 0, "backward_step": 0, "forward_seq": 3,
                     "backward_seq": 3}


def test_without_numba_the_numpy_loop_runs(monkeypatch):
    import ember.ops
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    monkeypatch.delitem(sys.modules, "ember.ops._lstm_numba", raising=False)
    monkeypatch.delattr(ember.ops, "_lstm_numba", raising=False)
    monkeypatch.delitem(rnn._FUSED, "lstm", raising=False)
    assert rnn._lstm_kernels(np, np.zeros(1, F32)) is None
    check(FLOAT32[0])


def test_uncachable_kernels_still_compile(monkeypatch):
    """Where numba finds no writable cache directory, the kernels compile in memory."""
    from numba.core import caching

    from ember.ops import _lstm_numba
    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])

    def plus_one(x):
        return x + 1
    f = _lstm_numba._jit(plus_one)
    assert f(1) == 2
    assert type(f._cache).__name__ == "NullCache"


def test_numba_is_imported_when_an_lstm_first_runs():
    code = ("import sys, ember\n"
            "assert 'numba' not in sys.modules\n"
            "ember.nn.RNN(2, 3)(ember.randn(2, 1, 2))\n"
            "ember.nn.GRU(2, 3).double()(ember.randn(2, 1, 2).double())\n"
            "ember.nn.LSTM(2, 3).double()(ember.randn(2, 1, 2).double())\n"
            "assert 'numba' not in sys.modules\n"
            "ember.nn.LSTM(2, 3)(ember.randn(2, 1, 2))\n"
            "assert 'numba' in sys.modules\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(ember.__file__)))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr


@pytest.fixture
def two_threads(monkeypatch):
    """Two ember threads for the test (the thread count restored after), the products of
    the sequence kernels on NumPy's BLAS (MKL's row blocks were not measured)."""
    from ember.backend import gemm
    from ember.backend import threads as T
    from ember.ops import _rnn_blas
    monkeypatch.setattr(gemm, "THRESHOLD", float("inf"))
    monkeypatch.setattr(_rnn_blas, "_SGEMM", {})
    monkeypatch.setattr(T, "cores_to_spare", lambda: True)
    before = ember.get_num_threads()
    yield
    ember.set_num_threads(before)


@pytest.mark.parametrize("B,H", [(24, 40), (32, 40), (33, 40), (64, 40), (100, 40),
                                 (32, 128), (20000, 4)])
@pytest.mark.parametrize("T", [1, 5])
@pytest.mark.parametrize("reverse", [False, True])
def test_sequence_kernels_in_row_blocks_keep_the_bits(B, H, T, reverse, two_threads,
                                                      monkeypatch):
    """At two threads a padded batch runs the sequence kernels over two blocks of its rows
    at once, each block from a multiple of the BLAS kernel's grain of rows and on the
    whole product's kernel: the outputs, the gate gradients and the first state's
    gradients are the one-thread ones bit for bit (a batch too small for two blocks runs
    whole)."""
    from ember.backend import threads as T_
    # the grain of NumPy's OpenBLAS kernel here (blas_kernels.ROW_GRAIN); 0 where its row
    # blocks change the bits: then the batch runs whole. 32 x 128: each step's product
    # in column blocks of OpenBLAS's small-matrix kernel (SkylakeX), its row blocks too.
    # 20000 x 4: the step's product (20000 x 16 x 4) past that kernel's size, blocks of
    # 10000 rows within it, which would give other bits: whole there
    grain = T_.row_grain("f")
    split = grain and not (T_.small_kernel_mnk("f") and B == 20000)
    rng = np.random.default_rng(B * 10 + T)
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs = _loop_inputs(rng, H=H, bs=(B,) * T)
    h0, c0 = (rng.standard_normal(a.shape).astype(F32) for a in (h0, c0))
    args = (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs, reverse)
    gy, ghn, gcn = (rng.standard_normal(s).astype(F32) for s in
                    ((x.shape[0], H), h0.shape, c0.shape))
    needs = [True] * 8
    fused = rnn._lstm_kernels(np, x)
    starts = []  # the first row of each block each kernel call ran
    def spy(kernel, at):
        return lambda *a: starts.append(a[at]) or kernel(*a)
    for name, at in (("forward_seq", -2), ("backward_seq", -1)):
        monkeypatch.setattr(fused, name, spy(getattr(fused, name), at))
    results = []
    for threads in (1, 2):
        ember.set_num_threads(threads)
        del starts[:]
        y = rnn._lstm_forward_np(np, *args)
        g = rnn._lstm_backward_np(np, gy, ghn, gcn, y[3], x, w_ih, w_hh, None, bs, reverse,
                                  needs)
        results.append([a for a in y[:3] + y[3] + g if a is not None])
        if threads == 2 and split:
            assert len(starts) == 4 and all(r % grain == 0 for r in starts)
        else:
            assert starts == [0, 0]
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("B,T", [(100, 1), (32, 3), (13, 2)])
def test_lstm_module_same_bits_at_two_threads(B, T, two_threads):
    """nn.LSTM (two layers, both directions, a given first state) gives the same outputs
    and gradients at two threads as at one: with one time step too, whose product the
    kernel calls itself (it once ran on BLAS's two threads, which sum otherwise)."""
    def run():
        ember.manual_seed(0)
        m = ember.nn.LSTM(24, 40, num_layers=2, bidirectional=True, batch_first=True)
        rng = np.random.default_rng(1)
        x, h0, c0 = (ember.tensor(rng.standard_normal(s, dtype=F32), requires_grad=True)
                     for s in ((B, T, 24), (4, B, 40), (4, B, 40)))
        y, (hn, cn) = m(x, (h0, c0))
        (y.square().sum() + hn.sum() + (cn * cn).sum()).backward()
        return [t.detach().numpy().copy() for t in
                [y, hn, cn, x.grad, h0.grad, c0.grad] + [p.grad for p in m.parameters()]]
    ember.set_num_threads(1)
    one = run()
    ember.set_num_threads(2)
    two = run()
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("B", [32, 37])
def test_sequence_kernels_on_mkl_in_row_blocks_keep_the_bits(B, monkeypatch):
    """With ``ember[mkl]`` the kernels' per-step products (B x 128 x 512) are MKL's: at two
    threads the batch runs in two row blocks at once, each at one MKL thread, where MKL's
    code branch was measured to keep a row block's bits (``blas_kernels.MKL_ROW_GRAIN``);
    nn.LSTM's outputs and gradients equal one thread's bit for bit and torch's within
    float32 rounding. (Without MKL: NumPy's BLAS, at its own grain.)"""
    from ember.backend import gemm
    from ember.backend import threads as T_
    from ember.ops import _rnn_blas
    monkeypatch.setattr(_rnn_blas, "_SGEMM", {})
    monkeypatch.setattr(T_, "cores_to_spare", lambda: True)
    fused = rnn._lstm_kernels(np, np.zeros(1, F32))
    starts = []
    for name, at in (("forward_seq", -2), ("backward_seq", -1)):
        kernel = getattr(fused, name)
        monkeypatch.setattr(fused, name, lambda *a, k=kernel, at=at: starts.append(a[at])
                            or k(*a))
    rng = np.random.default_rng(B)
    x = rng.standard_normal((B, 6, 64), dtype=F32)
    sd = None

    def run(lib):
        nonlocal sd
        m = lib.nn.LSTM(64, 128, batch_first=True)
        if sd is None:
            sd = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
        m.load_state_dict({k: lib.tensor(v) for k, v in sd.items()})
        xt = lib.tensor(x, requires_grad=True)
        y, (hn, cn) = m(xt)
        (y.square().sum() + (cn * hn).sum()).backward()
        return [t.detach().numpy().copy() for t in
                [y, hn, cn, xt.grad] + [p.grad for p in m.parameters()]]
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = run(ember)
        assert starts == [0, 0]
        ember.set_num_threads(2)
        del starts[:]
        two = run(ember)
    finally:
        ember.set_num_threads(before)
    on_mkl = "mkl" in _rnn_blas._SGEMM
    assert on_mkl == gemm.mkl_available()
    grain = gemm.mkl_row_grain("f", B, 512, 512) if on_mkl else T_.row_grain("f")
    if grain:
        assert len(starts) == 4 and sorted(starts)[0] == 0 and all(
            r % grain == 0 and r > 0 for r in sorted(starts)[2:])
    else:
        assert starts == [0, 0]
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(two, run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    if on_mkl and grain:
        # within the measured shapes only: 256 rows by an inner 1024 (an LSTM of 256
        # hidden units' backward product) runs whole, its halves differ on MKL
        from ember.ops import rnn_lstm_seq
        mkl = (_rnn_blas._SGEMM["mkl"], 256)
        ember.set_num_threads(2)
        try:
            assert rnn_lstm_seq._row_blocks(mkl, 256, 256, 1024) == (1, 256, 1)
            assert rnn_lstm_seq._row_blocks(mkl, 128, 256, 1024)[0] == 64
        finally:
            ember.set_num_threads(before)


def test_mkls_measured_row_grains():
    from ember.backend import blas_kernels
    assert blas_kernels.MKL_ROW_GRAIN == {
        14: {"f": 2, "rows": 128, "inner": 2048, "cols": 2048}}
