"""The LSTM's NumPy loop over a padded batch (ember/ops/rnn_lstm_padded.py, the default
install's path): the general per-step loop's values bit for bit where both split the
recurrent products alike and there is no bias, within rounding otherwise, and torch's."""
import numpy as np
import pytest
import torch

import ember
from ember.ops import rnn, rnn_lstm_padded


def _inputs(rng, dt, T=5, B=3, I=6, H=16, bias=True):
    a = [rng.standard_normal(s).astype(dt) for s in
         ((T * B, I), (B, H), (B, H), (4 * H, I), (4 * H, H), (4 * H,), (4 * H,))]
    if not bias:
        a[5] = a[6] = None
    return a, (B,) * T


def _run(monkeypatch, padded, args, bs, reverse, grads):
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = args
    monkeypatch.setitem(rnn._FUSED, "lstm", None)  # the NumPy loops (no numba kernels)
    if not padded:
        monkeypatch.setattr(rnn, "_padded_case", lambda *a: False)
    calls = []
    fwd = rnn_lstm_padded.forward
    monkeypatch.setattr(rnn_lstm_padded, "forward", lambda *a: calls.append(1) or fwd(*a))
    y, hn, cn, acts = rnn._lstm_forward_np(np, x, h0, c0, w_ih, w_hh, b_ih, b_hh, None, bs,
                                           reverse)
    gy, ghn, gcn = grads
    needs = [True, True, True, True, True, b_ih is not None, b_hh is not None, False]
    g = rnn._lstm_backward_np(np, gy, ghn, gcn, acts, x, w_ih, w_hh, None, bs, reverse,
                              needs)
    monkeypatch.undo()
    assert calls == ([1] if padded else [])
    return [y, hn, cn] + [a for a in g if a is not None]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("blocks", ["gates", "half gates", "whole"])
@pytest.mark.parametrize("steps", [5, 1, 19])  # 19: chunks of the backward's factors
def test_padded_loop_against_the_general_loop(dt, reverse, bias, blocks, steps,
                                              monkeypatch):
    rng = np.random.default_rng(7)
    args, bs = _inputs(rng, dt, T=steps, bias=bias)
    H = args[1].shape[1]
    grads = [rng.standard_normal(s).astype(dt) for s in ((len(bs) * bs[0], H),
                                                          (bs[0], H), (bs[0], H))]
    # column blocks of the products: the gates' width, half of it, or none (one product,
    # which the padded loop still splits by gate: then only rounding may differ)
    nc = {"gates": H, "half gates": H // 2, "whole": None}[blocks]
    results = []
    for padded in (True, False):
        monkeypatch.setattr(rnn, "_blocks", lambda *a, nc=nc: nc)
        # the backward's product in column blocks, as the general loop's (not by gate)
        monkeypatch.setattr(rnn_lstm_padded, "_split_by_gate", lambda *a: False)
        results.append(_run(monkeypatch, padded, args, bs, reverse, grads))
    got, want = results
    assert len(got) == len(want)
    # with a bias the padded loop adds it inside the input projection's product (as its
    # last term: the same bits for most widths, not all) and sums dG's rows for the
    # biases' gradients by a product with ones: within rounding then
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if nc is None or bias:
            np.testing.assert_allclose(g, w, rtol=1e-5 if dt == np.float32 else 1e-12,
                                       atol=1e-5 if dt == np.float32 else 1e-12)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("weights", ["finite", "inf", "nan"])
def test_zero_first_state_against_the_general_loop(dt, reverse, weights, monkeypatch):
    """A zero first state (the module's default; +0.0 and -0.0 rows), whose first product
    the padded loop does not compute where the weights are finite: the general loop's
    values bit for bit, signed zeros and NaNs included; with an inf or a NaN in W_hh
    (0 * inf is NaN) the product is computed."""
    rng = np.random.default_rng(11)
    args, bs = _inputs(rng, dt, T=6, bias=False)
    args[1] = np.zeros_like(args[1])
    args[1][::2] = -0.0
    if weights != "finite":
        args[4] = args[4].copy()
        args[4][3, 1] = np.inf if weights == "inf" else np.nan
    H = args[1].shape[1]
    grads = [rng.standard_normal(s).astype(dt) for s in ((len(bs) * bs[0], H),
                                                          (bs[0], H), (bs[0], H))]
    results = []
    for padded in (True, False):
        monkeypatch.setattr(rnn, "_blocks", lambda *a: H)
        monkeypatch.setattr(rnn_lstm_padded, "_split_by_gate", lambda *a: False)
        results.append(_run(monkeypatch, padded, args, bs, reverse, grads))
    got, want = results
    assert len(got) == len(want)
    if weights != "finite":
        assert np.isnan(got[0]).any()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        num = ~np.isnan(w)  # (a NaN's sign bit is no value's)
        np.testing.assert_array_equal(np.signbit(g[num]), np.signbit(w[num]))


def test_first_state_gradients_only_when_asked(monkeypatch):
    rng = np.random.default_rng(1)
    (x, h0, c0, w_ih, w_hh, b_ih, b_hh), bs = _inputs(rng, np.float32)
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    y, hn, cn, acts = rnn._lstm_forward_np(np, x, h0, c0, w_ih, w_hh, b_ih, b_hh, None, bs,
                                           False)
    assert isinstance(acts, rnn_lstm_padded.Acts)
    gy = np.ones_like(y)
    g = rnn._lstm_backward_np(np, gy, np.zeros_like(hn), None, acts, x, w_ih, w_hh, None,
                              bs, False, [False, False, False, True, True, True, True,
                                          False])
    assert g[:3] == (None, None, None) and all(a is not None for a in g[3:7])


@pytest.mark.parametrize("batch_first", [False, True])
def test_module_on_the_padded_loop_matches_torch(batch_first, monkeypatch):
    """nn.LSTM (two layers, bidirectional) with numba hidden, against torch: outputs,
    states and every gradient."""
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    calls = []
    fwd = rnn_lstm_padded.forward
    monkeypatch.setattr(rnn_lstm_padded, "forward", lambda *a: calls.append(1) or fwd(*a))
    torch.manual_seed(0)
    ref = torch.nn.LSTM(5, 12, num_layers=2, bidirectional=True, batch_first=batch_first)
    mod = ember.nn.LSTM(5, 12, num_layers=2, bidirectional=True, batch_first=batch_first)
    mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in
                         ref.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((7, 4, 5)).astype(np.float32)
    if batch_first:
        x = np.ascontiguousarray(x.transpose(1, 0, 2))
    h0 = np.random.default_rng(3).standard_normal((4, 4, 12)).astype(np.float32)
    xt, xe = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    ht, he = torch.tensor(h0, requires_grad=True), ember.tensor(h0, requires_grad=True)
    outs = []
    for lstm, xx, hh in ((ref, xt, ht), (mod, xe, he)):
        y, (hn, cn) = lstm(xx, (hh, hh * 0.5))
        (y.pow(2).sum() + hn.sum() + cn.pow(2).sum()).backward()
        outs.append([y, hn, cn, xx.grad, hh.grad] + [p.grad for p in lstm.parameters()])
    assert len(calls) == 4
    for t, e in zip(*outs):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


def test_projection_with_its_bias_in_the_product():
    """The input projection with the bias as the product's last term: each gate's slot
    (the sigmoid gates' negated) against x @ w.T + b in float64, for widths where the
    bits do and do not equal the separate addition's."""
    rng = np.random.default_rng(5)
    for n, i, h in ((1024, 64, 128), (35, 100, 50), (8, 1, 3)):
        x = rng.standard_normal((n, i)).astype(np.float32)
        w = rng.standard_normal((4 * h, i)).astype(np.float32)
        b = rng.standard_normal(4 * h).astype(np.float32)
        S2 = np.empty((5, n, h), np.float32)
        rnn_lstm_padded._projection_with_bias(x, w, b, S2, np.float32)
        ref = x.astype(np.float64) @ w.T.astype(np.float64) + b
        scale = np.abs(x).astype(np.float64) @ np.abs(w.T).astype(np.float64) + np.abs(b)
        for k, slot in enumerate(rnn_lstm_padded._SLOT):
            want = ref[:, k * h:(k + 1) * h] * (1 if k == 2 else -1)
            err = np.abs(S2[slot] - want) / scale[:, k * h:(k + 1) * h]
            assert err.max() < 1e-6 * (i + 1)


# (batch, steps, input, hidden, options): batch 1, one step, odd lengths across the
# backward's chunks of 8 steps, the recurrent gates on either side of _SMALL_GATE (NumPy's
# copies up to 64 x 64, BLAS's transposition above), float64, bidirectional layers, and
# what the padded loop does not take (a projection, packed batches of unequal lengths)
_MODULE_CASES = [
    ("batch1_one_step", 1, 1, 3, 5, {}),
    ("batch1_odd_blas_gates", 1, 17, 3, 65, {}),
    ("numpy_gates_bidir_2layers", 3, 9, 4, 64, dict(bidirectional=True, num_layers=2)),
    ("float64", 2, 11, 3, 70, dict(dtype=np.float64)),
    ("no_bias_reverse", 4, 3, 2, 7, dict(bias=False, bidirectional=True)),
    ("packed_equal_lengths", 3, 6, 4, 9, dict(lengths=[6, 6, 6])),
    ("packed_unequal_lengths", 3, 6, 4, 9, dict(lengths=[6, 4, 1])),
    ("proj_size", 2, 5, 3, 6, dict(proj_size=3, bidirectional=True)),
]


@pytest.mark.parametrize("case", _MODULE_CASES, ids=[c[0] for c in _MODULE_CASES])
def test_module_cases_on_the_padded_loop_match_torch(case, monkeypatch):
    """nn.LSTM with numba hidden against torch, forward and backward, where the padded
    loop runs (counted) and where the general loop does."""
    name, B, T, I, H, kw = case
    kw = dict(kw)
    dt = kw.pop("dtype", np.float32)
    lengths = kw.pop("lengths", None)
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    calls = []
    fwd = rnn_lstm_padded.forward
    monkeypatch.setattr(rnn_lstm_padded, "forward", lambda *a: calls.append(1) or fwd(*a))
    torch.manual_seed(0)
    ref = torch.nn.LSTM(I, H, **kw).to(torch.float64 if dt == np.float64 else torch.float32)
    mod = ember.nn.LSTM(I, H, dtype=ember.float64 if dt == np.float64 else None, **kw)
    mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in
                         ref.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((T, B, I)).astype(dt)
    outs = []
    for m, lstm in ((torch, ref), (ember, mod)):
        xx = m.tensor(x, requires_grad=True)
        inp = xx if lengths is None else m.nn.utils.rnn.pack_padded_sequence(
            xx, lengths, enforce_sorted=False)
        y, (hn, cn) = lstm(inp)
        if lengths is not None:
            y = m.nn.utils.rnn.pad_packed_sequence(y)[0]
        (y.pow(2).sum() + hn.sum() + cn.pow(2).sum()).backward()
        outs.append([y, hn, cn, xx.grad] + [p.grad for p in lstm.parameters()])
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    padded = "proj_size" not in kw and (lengths is None or len(set(lengths)) == 1)
    assert len(calls) == (layers if padded else 0)
    tol = dict(rtol=1e-4, atol=1e-5) if dt == np.float32 else dict(rtol=1e-10, atol=1e-12)
    for t, e in zip(*outs):
        assert e.dtype == ember.float64 if dt == np.float64 else e.dtype == ember.float32
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), **tol)


@pytest.mark.parametrize("padded", [True, False])
def test_dropout_between_layers_on_the_padded_loop(padded, monkeypatch):
    """Two layers with dropout between them in training mode: the padded loop and the
    general one give the same values under the same seed (the same masks), and the
    masks act (the output differs from the one without dropout)."""
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    torch.manual_seed(0)
    ref = torch.nn.LSTM(4, 10, num_layers=2, dropout=0.5)
    x = np.random.default_rng(4).standard_normal((9, 3, 4)).astype(np.float32)
    results = []
    for route in ("padded", "general", "eval"):
        if route == "general":
            monkeypatch.setattr(rnn, "_padded_case", lambda *a: False)
        mod = ember.nn.LSTM(4, 10, num_layers=2, dropout=0.5)
        mod.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in
                             ref.state_dict().items()})
        mod.train(route != "eval")
        ember.manual_seed(7)
        xe = ember.tensor(x, requires_grad=True)
        y, _ = mod(xe)
        y.pow(2).sum().backward()
        results.append([y.detach().numpy(), xe.grad.numpy()] +
                       [p.grad.numpy() for p in mod.parameters()])
    got, want, plain = results if padded else (results[1], results[0], results[2])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[0], plain[0])


def test_blas_transposition_of_read_only_and_aligned_arrays():
    """``_rnn_blas.transpose`` of a read-only weight (its pointer taken without a
    writable buffer) and of a writable one, and ``aligned``'s 64-byte boundary."""
    from ember.ops import _rnn_blas
    a = np.arange(35, dtype=np.float32).reshape(5, 7)
    ro = a.copy()
    ro.flags.writeable = False
    for w in (a, ro):
        np.testing.assert_array_equal(_rnn_blas.transpose(w), a.T)
        out = _rnn_blas.aligned((7, 5), np.float32)
        assert out.ctypes.data % 64 == 0
        assert _rnn_blas.transpose(w, out) is out
        np.testing.assert_array_equal(out, a.T)


def test_projection_routes_give_the_same_bits(monkeypatch):
    """The input projection as one stacked product (one thread, no MKL) and gate by gate
    through ``gemm.matmul`` (taken with more threads): the same bits, float32 and
    float64."""
    import types
    rng = np.random.default_rng(6)
    for dt in (np.float32, np.float64):
        x = rng.standard_normal((40, 9)).astype(dt)
        w = rng.standard_normal((4 * 11, 9)).astype(dt)
        b = rng.standard_normal(4 * 11).astype(dt)
        got = []
        for threads in (1, 2):
            monkeypatch.setattr(rnn_lstm_padded, "_threads",
                                types.SimpleNamespace(get_num_threads=lambda n=threads: n))
            S2 = np.full((5, 40, 11), np.nan, dt)
            rnn_lstm_padded._projection_with_bias(x, w, b, S2, np.dtype(dt))
            got.append(S2)
        np.testing.assert_array_equal(got[0][1:], got[1][1:])
        assert not np.isnan(got[0][1:]).any()


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("steps, batch", [(1, 1), (19, 3), (6, 32)])
@pytest.mark.parametrize("need_h0", [False, True])
def test_backward_product_by_gate(reverse, steps, batch, need_h0, monkeypatch):
    """The backward's recurrent product as the sum of its four gates' products (taken
    where OpenBLAS's kernel for small matrices runs a gate's product but not the whole):
    within rounding of the column blocks' values, and each step's product -- the first
    state's gradient of a one-step sequence -- within float32 rounding of float64."""
    rng = np.random.default_rng(9)
    T, B, I, H = steps, batch, 5, 32
    x = rng.standard_normal((T * B, I)).astype(np.float32)
    # (weights of a trained layer's size: unit ones would make 19 steps amplify rounding)
    w_ih = (rng.standard_normal((4 * H, I)) * 0.2).astype(np.float32)
    w_hh = (rng.standard_normal((4 * H, H)) * 0.2).astype(np.float32)
    bias = rng.standard_normal(4 * H).astype(np.float32)
    h0, c0 = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    gy = rng.standard_normal((T * B, H)).astype(np.float32)
    ghn, gcn = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    out = []
    for split in (True, False):
        monkeypatch.setattr(rnn_lstm_padded, "_split_by_gate", lambda *a, s=split: s)
        y, hn, cn, acts = rnn_lstm_padded.forward(x, w_ih, bias, h0, c0, w_hh, T, reverse,
                                                  16)
        out.append(rnn_lstm_padded.backward(gy, ghn, gcn, acts, w_hh, 16, need_h0))
    for got, want in zip(*out):
        if want is None:
            assert got is None
            continue
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if need_h0 and T == 1:
        dG, dh0 = out[0][0], out[0][1]
        ref = dG.astype(np.float64) @ w_hh.astype(np.float64)
        scale = np.abs(dG).astype(np.float64) @ np.abs(w_hh).astype(np.float64)
        assert (np.abs(dh0 - ref) / scale).max() < 1e-7 * 4 * H


@pytest.mark.parametrize("n, i, h", [(1024, 64, 128), (40, 9, 16), (100, 384, 48)])
def test_projection_in_blocks_of_rows(n, i, h, monkeypatch):
    """The input projection in blocks of rows (OpenBLAS's kernel for small matrices takes
    them, not the whole), the rows left over in one more product: the whole product's
    bits, where ``_projection_rows`` takes it (float32, sums of at most 385 terms, gate
    widths a multiple of 16), and not otherwise."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, i)).astype(np.float32)
    w = rng.standard_normal((4 * h, i)).astype(np.float32)
    b = rng.standard_normal(4 * h).astype(np.float32)
    got = []
    for rows in (16, None):
        monkeypatch.setattr(rnn_lstm_padded, "_row_block", lambda *a, r=rows: r)
        assert rnn_lstm_padded._projection_rows(n, i + 1, h, np.float32) == rows
        S2 = np.full((5, n, h), np.nan, np.float32)
        rnn_lstm_padded._projection_with_bias(x, w, b, S2, np.float32)
        got.append(S2[1:])
    np.testing.assert_array_equal(got[0], got[1])
    monkeypatch.setattr(rnn_lstm_padded, "_row_block", lambda *a: 16)
    for args in ((n, 386, h, np.float32), (n, i + 1, 7, np.float32),
                 (n, i + 1, h, np.float64)):
        assert rnn_lstm_padded._projection_rows(*args) is None


# ----- two threads: the large products beside the step loop ---------------------------
def _layer(T, B, I, H, reverse, threads, seed=0):
    """Forward and first-order backward of one padded layer (NumPy's loops) at ``threads``
    ember threads; every result array."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T * B, I)).astype(np.float32)
    w_ih = (rng.standard_normal((4 * H, I)) * 0.1).astype(np.float32)
    w_hh = (rng.standard_normal((4 * H, H)) * 0.1).astype(np.float32)
    b = (rng.standard_normal(4 * H) * 0.1).astype(np.float32)
    h0, c0 = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    gy = rng.standard_normal((T * B, H)).astype(np.float32)
    ember.set_num_threads(threads)
    try:
        y, hn, cn, acts = rnn._lstm_forward_np(np, x, h0, c0, w_ih, w_hh, b, None, None,
                                               (B,) * T, reverse)
        g = rnn._lstm_backward_np(np, gy, hn * 0 + 1, cn * 0 + 1, acts, x, w_ih, w_hh, None,
                                  (B,) * T, reverse, (False,) + (True,) * 6)
    finally:
        ember.set_num_threads(1)
    return [y, hn, cn] + [a for a in g if a is not None]


@pytest.mark.parametrize("idle", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("T, B, I, H", [(16, 32, 64, 128), (7, 20, 100, 64), (20, 33, 40, 48)])
def test_two_threads_give_the_one_thread_bits(T, B, I, H, reverse, idle, monkeypatch):
    """At two threads the input projection's chunks of rows run ahead of the forward's loop
    on the second thread (each chunk once, whichever thread claims it), and the weight
    gradients in blocks beside the backward's: the one-thread bits, on an idle machine and
    on a busy one (no core to spare: the one-thread routes, the recurrent weight's
    gradient split in rows between ``pair``'s sides)."""
    import threading

    from ember.backend import gemm
    from ember.backend import threads as T_
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    monkeypatch.setattr(T_, "cores_to_spare", lambda: idle)
    ran = []
    chunk = rnn_lstm_padded._Projection.chunk
    monkeypatch.setattr(rnn_lstm_padded._Projection, "chunk", lambda self, k: ran.append(
        (k, threading.current_thread() is threading.main_thread())) or chunk(self, k))
    with gemm.numpy_only():
        one = _layer(T, B, I, H, reverse, 1)
        assert not ran  # one thread: the projection in one pass
        two = _layer(T, B, I, H, reverse, 2)
    r = rnn_lstm_padded._projection_rows(T * B, I + 1, H, np.float32)
    chunks = 0 if r is None else rnn_lstm_padded._Projection(
        np.empty((T * B, I + 1), np.float32), np.empty((4, I + 1, H), np.float32), None, r,
        B, T, reverse).count
    assert (chunks > 1) is (T * B > 400)  # (the shape without blocks of rows: none)
    # (no core to spare: the projection in one pass, as at one thread)
    assert sorted(k for k, _ in ran) == list(range(chunks if idle else 0))
    assert len(one) == len(two) == 9
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_recurrent_weight_rows_beside_the_input_side():
    """``rnn_seq_grads.recurrent_rows_beside``: the rows of ``dG.T @ h`` that balance
    ``pair``'s sides (the LSTM step's: 128 of 512 beside ``dG.T @ x``; none where the
    input side is as long already), at the kernel's grain, and none where a block would
    run in another kernel than the whole product (OpenBLAS's small-matrix one) or the
    grain is unknown."""
    from ember.backend import gemm
    from ember.backend import threads as T_
    from ember.ops import rnn_seq_grads
    rng = np.random.default_rng(2)

    def rows(N, G, I, n, x_grad):
        dG = rng.standard_normal((N, G)).astype(np.float32)
        hp = rng.standard_normal((N, n)).astype(np.float32)
        x = rng.standard_normal((N, I)).astype(np.float32)
        w = rng.standard_normal((G, I)).astype(np.float32)
        return rnn_seq_grads.recurrent_rows_beside(dG, dG, hp, x, w, (x_grad,) + (True,) * 6)
    with gemm.numpy_only():
        grain = T_.row_grain("f")
        if not grain:
            assert rows(1024, 512, 64, 128, False) == 0
            return
        a = rows(1024, 512, 64, 128, False)
        assert a % grain == 0 and abs(a - 128) < grain
        assert rows(1024, 512, 64, 128, True) == 0  # dx and dW_ih as long as dW_hh
        least = T_.small_kernel_mnk("f")
        if least:  # blocks of 8 rows x 1024 x 64 < 1e6: the small kernel would take one
            assert rows(1024, 16, 120, 64, False) == 0


def test_overlap_tasks_run_each_item_once():
    """``rnn_overlap.Tasks``: each item once, by the loop when it claims first; the
    helper's error raised where the loop takes that item; a helper waiting for an input
    released when the loop leaves."""
    import threading

    from ember.ops import rnn_overlap
    done = []
    tasks = rnn_overlap.Tasks(done.append, 3)
    tasks.take(1)
    tasks.help()  # items 0 and 2: not claimed yet
    tasks.take(0)  # claimed by the helper: waits for it (done)
    assert sorted(done) == [0, 1, 2]

    def fail(k):
        raise ValueError(f"item {k}")
    tasks = rnn_overlap.Tasks(fail, 2)
    tasks.help()
    with pytest.raises(ValueError, match="item 0"):
        tasks.take(0)
    ready = [threading.Event(), None]
    tasks = rnn_overlap.Tasks(done.append, 2, ready)
    helper = threading.Thread(target=tasks.help)
    helper.start()
    tasks.leave()
    helper.join(5)
    assert not helper.is_alive()


@pytest.mark.parametrize("k", [300, 450, 913, 1024, 2048])
def test_inner_blocks_added_in_order_give_the_whole_products_bits(k):
    """``rnn_seq_grads.k_blocks``: on the kernel it lists, the products of those blocks of
    the inner dimension (a weight gradient's rows of the sequence), added in order, are
    the whole product's bits, for ``dG.T`` against 48-256 columns; elsewhere None."""
    from ember.backend import gemm
    from ember.ops import rnn_seq_grads
    rng = np.random.default_rng(k)
    with gemm.numpy_only():
        blocks = rnn_seq_grads.k_blocks(k, "f")
        if blocks is None:
            return
        assert blocks[0][0] == 0 and blocks[-1][1] == k
        assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
        for G, n in ((512, 128), (512, 64), (200, 48), (1024, 256)):
            dG = rng.standard_normal((k, G)).astype(np.float32)
            h = rng.standard_normal((k, n)).astype(np.float32)
            acc = None
            for lo, hi in blocks:
                part = dG[lo:hi].T @ h[lo:hi]
                acc = part if acc is None else np.add(acc, part, out=acc)
            np.testing.assert_array_equal(acc, dG.T @ h)


@pytest.mark.parametrize("x_grad", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_sequence_gradients_beside_the_backward_loop(x_grad, reverse, monkeypatch):
    """At two threads the weight gradients (and the input's) of a sequence longer than one
    of the kernel's inner blocks are computed block by block beside the backward's loop
    (``rnn_seq_grads``), each block once (the last one's ``dW_hh`` in two row blocks where
    the input needs no gradient): the one-thread bits."""
    from ember.backend import gemm
    from ember.backend import threads as T_
    from ember.ops import rnn_seq_grads
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    monkeypatch.setattr(T_, "cores_to_spare", lambda: True)
    items = []
    item = rnn_seq_grads.SequenceGrads._item
    monkeypatch.setattr(rnn_seq_grads.SequenceGrads, "_item",
                        lambda self, k: items.append(self.items[k][:2]) or item(self, k))
    rng = np.random.default_rng(4)
    T, B, I, H = 30, 32, 32, 64
    x = rng.standard_normal((T * B, I)).astype(np.float32)
    w_ih = (rng.standard_normal((4 * H, I)) * 0.1).astype(np.float32)
    w_hh = (rng.standard_normal((4 * H, H)) * 0.1).astype(np.float32)
    b = (rng.standard_normal(4 * H) * 0.1).astype(np.float32)
    h0, c0 = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    gy = rng.standard_normal((T * B, H)).astype(np.float32)
    needs = (x_grad,) + (True,) * 6 + (False,)
    got = []
    with gemm.numpy_only():
        for threads in (1, 2):
            ember.set_num_threads(threads)
            try:
                y, hn, cn, acts = rnn._lstm_forward_np(np, x, h0, c0, w_ih, w_hh, b, None,
                                                       None, (B,) * T, reverse)
                got.append(rnn._lstm_backward_np(np, gy, hn * 0 + 1, cn * 0 + 1, acts, x,
                                                 w_ih, w_hh, None, (B,) * T, reverse,
                                                 needs))
            finally:
                ember.set_num_threads(1)
            blocks = rnn_seq_grads.k_blocks(T * B, "f")
            if threads == 1 or blocks is None:
                assert not items
    if blocks is not None:
        kinds = ["hh", "ih"] + ["x"] * x_grad
        # (without the input's gradient the last block's dW_hh runs as two row blocks)
        last = [("hh", len(blocks) - 1 if reverse else 0)] * (not x_grad)
        assert sorted(items) == sorted([(k, j) for k in kinds for j in range(len(blocks))] +
                                       last)
    for a, c in zip(*got):
        assert (a is None) is (c is None) is (a is None)
        if a is not None:
            np.testing.assert_array_equal(a, c)
    assert (got[1][0] is None) is not x_grad


def _layer_grads(rng, T, B, I, H, reverse, needs, monkeypatch, gate_major):
    """The padded layer's gradients with the gate-major backward taken where
    ``gate_major_case`` says (``gate_major`` True; the cases it answered are returned) or
    never."""
    x = rng.standard_normal((T * B, I)).astype(np.float32)
    w_ih = (rng.standard_normal((4 * H, I)) * 0.2).astype(np.float32)
    w_hh = (rng.standard_normal((4 * H, H)) * 0.2).astype(np.float32)
    b_ih, b_hh = (rng.standard_normal(4 * H).astype(np.float32) for _ in range(2))
    h0, c0 = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    gy = rng.standard_normal((T * B, H)).astype(np.float32)
    ghn, gcn = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(2))
    taken = []
    case = rnn_lstm_padded.gate_major_case
    monkeypatch.setattr(rnn_lstm_padded, "gate_major_case",
                        lambda *a: taken.append(case(*a)) or taken[-1] if gate_major
                        else False)
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    y, hn, cn, acts = rnn._lstm_forward_np(np, x, h0, c0, w_ih, w_hh, b_ih, b_hh, None,
                                           (B,) * T, reverse)
    g = rnn._lstm_backward_np(np, gy, ghn, gcn, acts, x, w_ih, w_hh, None, (B,) * T,
                              reverse, needs)
    return g, taken


@pytest.mark.parametrize("T, B, I, H", [(5, 3, 6, 16), (20, 33, 40, 48), (9, 64, 17, 80),
                                        (40, 50, 300, 64), (7, 20, 100, 20)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("needs", ["all but x", "weights", "w_hh and b_hh", "x too"])
def test_gate_major_backward_gives_the_layouts_bits(T, B, I, H, reverse, needs,
                                                    monkeypatch):
    """The backward with each step's gate gradients stored gate-major, the weights' and
    biases' gradients by gate (one thread, the step's product by gate): the (N, 4H)
    layout's bits for every gradient, where ``gate_major_case`` takes it -- not where a
    gate's weight product would run on the small-matrix kernel and the whole on the
    blocked one ((9, 64, 17, 80): another order of sums), gate widths off the grain
    (20), or the input's gradient is asked (``x too``)."""
    needs = {"all but x": [False, True, True, True, True, True, True, False],
             "weights": [False, False, False, True, True, False, False, False],
             "w_hh and b_hh": [False, False, False, False, True, False, True, False],
             "x too": [True, True, True, True, True, True, True, False]}[needs]
    monkeypatch.setattr(ember.backend.threads, "MANY", False)
    monkeypatch.setattr(rnn_lstm_padded, "_split_by_gate", lambda *a: True)
    monkeypatch.setattr(rnn, "_blocks", lambda *a: 16)
    out = []
    with ember.backend.gemm.numpy_only():  # (MKL's products: the (N, 4H) layout, below)
        for gate_major in (True, False):
            out.append(_layer_grads(np.random.default_rng(5), T, B, I, H, reverse, needs,
                                    monkeypatch, gate_major))
    (got, taken), (want, _) = out
    small = ember.backend.threads.small_kernel_mnk("f")
    widths = [k for k, need in ((I, needs[3]), (H, needs[4])) if need]
    keeps = all(not small or H * T * B * k > small for k in widths) and H % 16 == 0 and \
        not needs[0] and ember.backend.threads.row_grain("f") > 0
    assert taken == [keeps]
    assert len(got) == len(want) == 8
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if w is not None:
            assert g.dtype == w.dtype and g.shape == w.shape and g.flags.c_contiguous
            np.testing.assert_array_equal(g, w)


def test_gate_major_backward_on_the_training_steps_layer(monkeypatch):
    """The LSTM(64, 128) step of benchmarks/training_steps.py at one thread takes the
    gate-major backward where OpenBLAS's small-matrix kernel runs the step's product by
    gate (its gradients: the layout's bits, above)."""
    monkeypatch.setattr(ember.backend.threads, "MANY", False)
    needs = [False, False, False, True, True, True, True, False]
    _, taken = _layer_grads(np.random.default_rng(6), 4, 32, 64, 128, False, needs,
                            monkeypatch, True)
    # (with ``ember[mkl]`` MKL computes the weight gradients of the (N, 4H) layout)
    assert taken == [rnn_lstm_padded._small_kernel(32, 128, 128) and
                     not ember.backend.gemm.mkl_available()]


@pytest.mark.parametrize("batch_first", [True, False])
def test_padded_backward_reads_the_output_gradient_in_place(batch_first, monkeypatch):
    """The layer's node hands the padded loop the output's gradient as it arrives,
    (T, B, H) -- transposed for a batch-first LSTM -- without a copy to (N, H): the
    gradients are those of the copy (the steps read alike), and torch's."""
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    seen = []
    backward = rnn_lstm_padded.backward
    monkeypatch.setattr(rnn_lstm_padded, "backward",
                        lambda gy, *a, **k: seen.append(gy) or backward(gy, *a, **k))
    rng = np.random.default_rng(8)
    x = rng.standard_normal((6, 5, 7)).astype(np.float32)
    grads = []
    ember.manual_seed(0)
    layers = [ember.nn.LSTM(7, 16, batch_first=batch_first),
              torch.nn.LSTM(7, 16, batch_first=batch_first)]
    with torch.no_grad():
        for p, q in zip(layers[1].parameters(), layers[0].parameters()):
            p.copy_(torch.from_numpy(q.detach().numpy()))
    for lib, lstm in zip((ember, torch), layers):
        out = lstm(lib.tensor(x))[0]
        (out[:, -1] if batch_first else out[-1]).pow(2).sum().backward()
        grads.append([p.grad.numpy() for p in lstm.parameters()])
    (gy,) = seen
    assert gy.shape == ((5, 6, 16) if batch_first else (6, 5, 16))  # (T, B, H)
    if batch_first:
        assert not gy.flags.c_contiguous  # the transposed gradient, not a copy
    for g, w in zip(*grads):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_projection_weights_on_a_64_byte_boundary(monkeypatch):
    """The input projection's right operand (the gates' weights and bias, transposed) is
    made on a 64-byte boundary, each gate's block too where the gate width is a multiple
    of 16 (OpenBLAS's small-matrix kernel reads it in place: ~1.4x faster aligned), and
    the projection keeps the bits of the unaligned weights."""
    made = []
    transposed = rnn_lstm_padded._gates_transposed
    monkeypatch.setattr(rnn_lstm_padded, "_gates_transposed",
                        lambda w, H, out: made.append(out) or transposed(w, H, out))
    rng = np.random.default_rng(12)
    N, I, H = 256, 20, 48
    x = rng.standard_normal((N, I)).astype(np.float32)
    w = rng.standard_normal((4 * H, I)).astype(np.float32)
    b = rng.standard_normal(4 * H).astype(np.float32)
    S2 = np.zeros((5, N, H), np.float32)
    rnn_lstm_padded._projection_with_bias(x, w, b, S2, np.float32)
    wa = made[0]
    assert all(wa[j].ctypes.data % 64 == 0 for j in range(4))
    xa = np.concatenate([x, np.ones((N, 1), np.float32)], 1)
    wa_plain = np.empty((4, I + 1, H), np.float32)  # (NumPy's allocation: 16 bytes)
    transposed(w, H, wa_plain[:, :I])
    transposed(b.reshape(4 * H, 1), H, wa_plain[:, I:])
    want = np.zeros_like(S2)
    rows = rnn_lstm_padded._projection_rows(N, I + 1, H, np.float32)
    if rows is None:
        np.matmul(xa, wa_plain, out=want[1:])
    else:
        rnn_lstm_padded._projection_blocks(xa, wa_plain, want, rows, 0, N)
    np.testing.assert_array_equal(S2, want)
