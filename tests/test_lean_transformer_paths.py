"""The Transformer layer's lean paths on the default install's NumPy code: layer norm's
one block of rows called directly (forward and backward), attention without the
threads' dispatch at one thread, linear on 3-d input with its nodes made directly.
Each is checked where it starts and stops (the one-block bound), against the general
path's bits and against torch (values, node names), with masks, dropout, need_weights,
float64 and special values."""
import numpy as np
import pytest
import torch

import ember
from ember.autograd import anomaly
from ember.ops import attention as attn
from ember.ops import norm_layouts

F = ember.nn.functional


@pytest.fixture
def no_numba(monkeypatch):
    """The default install: numba's row and softmax kernels absent."""
    monkeypatch.setitem(norm_layouts._NUMBA, "rows", None)
    monkeypatch.setitem(attn._NUMBA, "softmax", None)


def _ln(m, x, ns, w, b, g):
    x = m.tensor(x, requires_grad=True)
    w = None if w is None else m.tensor(w, requires_grad=True)
    b = None if b is None else m.tensor(b, requires_grad=True)
    y = m.nn.functional.layer_norm(x, ns, w, b)
    y.backward(m.tensor(g))
    return [y.detach().numpy()] + [None if t is None else t.grad.numpy() for t in (x, w, b)]


def _rows_at_bound(dt):
    return norm_layouts._BLOCK_BYTES // (128 * np.dtype(dt).itemsize)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_layer_norm_one_block_skips_the_threads_dispatch(no_numba, monkeypatch, dt):
    calls = []
    real = norm_layouts.parallel_rows
    monkeypatch.setattr(norm_layouts, "parallel_rows",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = np.random.default_rng(0)
    M = _rows_at_bound(dt)
    for rows, dispatched in ((1, False), (M, False), (M + 1, True)):
        calls.clear()
        x = rng.standard_normal((rows, 128)).astype(dt)
        w, b = rng.standard_normal(128).astype(dt), rng.standard_normal(128).astype(dt)
        _ln(ember, x, (128,), w, b, np.ones_like(x))
        assert bool(calls) == dispatched, (rows, calls)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("affine", ["wb", "w", "b", ""])
def test_layer_norm_lean_path_against_torch(no_numba, dt, affine):
    rng = np.random.default_rng(1)
    M = _rows_at_bound(dt)
    for shape, ns in (((1, 2, 128), (128,)), ((M, 128), (128,)), ((M + 1, 128), (128,)),
                      ((3, 4, 5), (4, 5)), ((2, 0, 6), (6,)), ((7,), (7,))):
        x = (rng.standard_normal(shape) * 3 + 1).astype(dt)
        if x.size > 260:  # rows holding inf, NaN and a huge value
            x.reshape(-1)[[0, 130, 260]] = [np.inf, np.nan, 1e18]
        w = rng.standard_normal(ns).astype(dt) if "w" in affine else None
        b = rng.standard_normal(ns).astype(dt) if "b" in affine else None
        g = rng.standard_normal(shape).astype(dt)
        got, want = _ln(ember, x, ns, w, b, g), _ln(torch, x, ns, w, b, g)
        tol = 1e-4 if dt == np.float32 else 1e-10
        for e, t in zip(got, want):
            if t is None:
                assert e is None
                continue
            assert e.dtype == t.dtype and e.shape == t.shape
            np.testing.assert_allclose(e, t, rtol=tol, atol=tol * max(1, M / 64),
                                       equal_nan=True)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_layer_norm_direct_forward_has_the_blocks_bits(no_numba, dt):
    rng = np.random.default_rng(2)
    for rows in (1, 3, 300, _rows_at_bound(dt)):
        x = rng.standard_normal((rows, 128)).astype(dt)
        w, b = rng.standard_normal(128).astype(dt), rng.standard_normal(128).astype(dt)
        for wi, bi in ((w, b), (w, None), (None, b)):
            keep_a, keep_b = [], []
            M, D, out, mean, var, invstd = norm_layouts.fwd_rows_direct(x, wi, bi, 1e-5,
                                                                        keep_a)
            ref, rmean, rvar = norm_layouts._fwd_rows(x, wi, bi, 1e-5, ("rows", M, D),
                                                      keep_b)
            for a, r in ((out, ref), (mean, rmean), (var, rvar), (keep_a[0], keep_b[0]),
                         (invstd, 1.0 / np.sqrt(rvar + 1e-5))):
                assert a.dtype == r.dtype and a.tobytes() == r.tobytes()


def test_layer_norm_direct_path_declines(no_numba):
    x = np.ones((_rows_at_bound(np.float32) + 1, 128), np.float32)
    assert norm_layouts.fwd_rows_direct(x, np.ones(128, np.float32), None, 1e-5, []) is None
    assert norm_layouts.fwd_rows_direct(np.ones((0, 4), np.float32), None,
                                        np.ones(4, np.float32), 1e-5, []) is None


def test_layer_norm_zero_gradients_keep_their_sign(no_numba):
    # a sum of -0.0 gradients is +0.0, as the blocks' sums into zeros give it
    x = ember.randn(3, 4, requires_grad=True)
    w, b = ember.ones(4, requires_grad=True), ember.zeros(4, requires_grad=True)
    F.layer_norm(x, (4,), w, b).backward(ember.full((3, 4), -0.0))
    assert not np.signbit(b.grad.numpy()).any() and not np.signbit(w.grad.numpy()).any()


def test_layer_norm_half_and_mixed_dtypes_take_the_general_path(no_numba):
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float16)
    for wdt in (np.float16, np.float32):
        w, b = np.ones(8, wdt), np.zeros(8, wdt)
        e = F.layer_norm(ember.tensor(x), (8,), ember.tensor(w), ember.tensor(b))
        t = torch.nn.functional.layer_norm(torch.tensor(x), (8,), torch.tensor(w),
                                           torch.tensor(b))
        assert e.dtype == ember.float16
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=2e-3, atol=2e-3)
    with pytest.raises(RuntimeError, match="mixed dtype"):
        F.layer_norm(ember.ones(2, 8), (8,), ember.ones(8, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="normalized_shape"):
        F.layer_norm(ember.ones(2, 8), (4,))


def _sdpa_run(m, q, k, v, **kw):
    ts = [m.tensor(a, requires_grad=True) for a in (q, k, v)]
    y = m.nn.functional.scaled_dot_product_attention(*ts, **kw)
    y.backward(m.ones_like(y))
    return [y.detach().numpy()] + [t.grad.numpy() for t in ts], type(y.grad_fn).__name__


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_attention_one_thread_and_two_give_the_same_bits(no_numba, dt):
    rng = np.random.default_rng(4)
    for shape in ((1, 4, 2, 32), (16, 4, 64, 32), (3, 2, 5, 8)):
        q, k, v = (rng.standard_normal(shape).astype(dt) for _ in range(3))
        mask = np.tril(np.ones((shape[2], shape[2]), bool))
        for kw in ({}, {"is_causal": True}, {"attn_mask": ember.tensor(mask)}):
            n = ember.get_num_threads()
            try:
                ember.set_num_threads(1)
                one, name = _sdpa_run(ember, q, k, v, **kw)
                ember.set_num_threads(2)
                two, _ = _sdpa_run(ember, q, k, v, **kw)
            finally:
                ember.set_num_threads(n)
            assert all(a.tobytes() == b.tobytes() for a, b in zip(one, two))
            tkw = {key: torch.tensor(mask) if key == "attn_mask" else val
                   for key, val in kw.items()}
            want, tname = _sdpa_run(torch, q, k, v, **tkw)
            assert name == tname
            tol = 1e-4 if dt == np.float32 else 1e-10
            for a, b in zip(one, want):
                np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_attention_dropout_and_need_weights(no_numba):
    ember.manual_seed(0)
    mha = ember.nn.MultiheadAttention(16, 2, batch_first=True)
    x = ember.randn(2, 5, 16, requires_grad=True)
    out, w = mha(x, x, x, need_weights=True)
    assert w.shape == (2, 5, 5)
    np.testing.assert_allclose(w.detach().numpy().sum(-1), 1, rtol=1e-5)
    out2, none = mha(x, x, x, need_weights=False)
    assert none is None
    np.testing.assert_allclose(out.detach().numpy(), out2.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    out2.sum().backward()
    y = F.scaled_dot_product_attention(x.unsqueeze(1), x.unsqueeze(1), x.unsqueeze(1),
                                       dropout_p=0.5)
    assert y.shape == (2, 1, 5, 16) and np.isfinite(y.detach().numpy()).all()


def _node_names(t):
    names, stack = [], [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        names.append(type(n).__name__)
        stack.extend(f for f, _ in n.next_functions)
    return names


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_linear_on_3d_input_nodes_and_bits(no_numba, dt):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 8)).astype(dt)
    w, b = rng.standard_normal((4, 8)).astype(dt), rng.standard_normal(4).astype(dt)
    g = rng.standard_normal((2, 3, 4)).astype(dt)
    runs = {}
    for label, x_grad, watched in (("lean", True, False), ("lean_x_const", False, False),
                                   ("general", True, True)):
        res = {}
        for m in (ember, torch):
            xt = m.tensor(x, requires_grad=x_grad)
            wt, bt = m.tensor(w, requires_grad=True), m.tensor(b, requires_grad=True)
            if watched and m is ember:
                with anomaly.detect_anomaly():  # anomaly mode: the generic nodes
                    y = m.nn.functional.linear(xt, wt, bt)
            else:
                y = m.nn.functional.linear(xt, wt, bt)
            names = _node_names(y)
            y.backward(m.tensor(g))
            res[m.__name__] = (names, [y.detach().numpy(), wt.grad.numpy(), bt.grad.numpy()]
                               + ([xt.grad.numpy()] if x_grad else []))
        assert res["ember"][0] == res["torch"][0], label
        for a, t in zip(res["ember"][1], res["torch"][1]):
            np.testing.assert_allclose(a, t, rtol=1e-5, atol=1e-5)
        runs[label] = res["ember"][1]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(runs["lean"], runs["general"]))


def test_transformer_layer_step_against_torch(no_numba):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    mask = np.triu(np.full((5, 5), -np.inf, np.float32), 1)
    res = []
    for m in (ember, torch):
        m.manual_seed(0)
        layer = m.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                             batch_first=True)
        with (torch.no_grad() if m is torch else ember.no_grad()):
            for p in layer.parameters():
                p.copy_(m.tensor(np.random.default_rng(p.numel()).standard_normal(
                    tuple(p.shape)).astype(np.float32) * 0.2))
        xt = m.tensor(x, requires_grad=True)
        y = layer(xt, src_mask=m.tensor(mask))
        y.pow(2).sum().backward()
        res.append([y.detach().numpy(), xt.grad.numpy()]
                   + [p.grad.numpy() for p in layer.parameters()])
    for a, t in zip(*res):
        np.testing.assert_allclose(a, t, rtol=2e-4, atol=2e-4)


def test_attention_at_one_thread_skips_the_threads_dispatch(no_numba, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("parallel_rows called at one thread")
    monkeypatch.setattr(attn, "parallel_rows", refuse)
    n = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        q = ember.randn(2, 4, 6, 8, requires_grad=True)
        F.scaled_dot_product_attention(q, q, q).sum().backward()
    finally:
        ember.set_num_threads(n)
    assert q.grad.shape == (2, 4, 6, 8)


def test_linear_on_3d_input_makes_its_nodes_directly(no_numba, monkeypatch):
    from ember.ops import matmul_graph

    def refuse(*args, **kwargs):
        raise AssertionError("WeightT.apply called")
    monkeypatch.setattr(matmul_graph.WeightT, "apply", refuse)
    lin = ember.nn.Linear(8, 4)
    y = lin(ember.randn(2, 3, 8))
    assert _node_names(y) == ["ViewBackward0", "AddmmBackward0", "TBackward0",
                              "AccumulateGrad", "AccumulateGrad"]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_mse_loss_mean_has_numpy_means_bits(dt):
    rng = np.random.default_rng(7)
    for shape in ((), (1,), (2, 128), (16, 64, 128), (3, 0)):
        x, t = (rng.standard_normal(shape).astype(dt) for _ in range(2))
        got = F.mse_loss(ember.tensor(x), ember.tensor(t))
        with np.errstate(invalid="ignore"):
            want = np.asarray(((x - t) ** 2).mean(), dtype=dt) if x.size else np.asarray(
                np.nan, dt)
        assert got.dtype == (ember.float32 if dt == np.float32 else ember.float64)
        assert got.shape == () and got.numpy().tobytes() == want.tobytes()
        tt = torch.nn.functional.mse_loss(torch.tensor(x), torch.tensor(t))
        np.testing.assert_allclose(got.numpy(), tt.numpy(), rtol=1e-5, equal_nan=True)
