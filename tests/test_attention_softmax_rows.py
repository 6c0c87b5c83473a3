"""Attention's softmax along row-major scores as numba kernels (``ember[fast]``): where
the scores are stored row-major (OpenBLAS's Haswell kernels), forward and backward run
one pass per row. Against torch and NumPy's passes, with masks, NaN, infinities, rows past
the direct bound, and float32 accuracy against float64 at least NumPy's direct route's."""
import numpy as np
import pytest
import torch

import ember
from ember.ops import _softmax_numba as kernels
from ember.ops import attention as attn


@pytest.fixture
def row_major(monkeypatch):
    """The scores stored row-major whatever the BLAS kernel (where writing through the
    transpose keeps the bits, attention stores them transposed)."""
    monkeypatch.setattr(attn, "transposed_scores_keep_bits", lambda: False)


def _reference(s, scale):
    s = s.astype(np.float64) * np.float64(np.float32(scale))
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("n", [1, 7, 33, 64, 100])
@pytest.mark.parametrize("spread", [1.0, 30.0])
def test_forward_rows_against_float64(n, spread):
    """Rows within +-64 (``exp`` as they are) and past it (the maximum subtracted): within
    float32 rounding of float64's softmax, a row summing to 1."""
    rng = np.random.default_rng(n)
    s = (rng.standard_normal((50, n)) * spread).astype(np.float32)
    scale = np.float32(0.37)
    a = s.copy()
    assert kernels.softmax_rows(a, scale, np.empty(50, np.float32))
    np.testing.assert_allclose(a, _reference(s, scale), rtol=5e-6, atol=1e-30)
    np.testing.assert_allclose(a.sum(-1), 1, rtol=1e-5)


def test_forward_rows_as_accurate_as_numpy_direct():
    """The kernel's weights are at least as close to float64's as NumPy's direct route
    (``exp`` over BLAS row sums, times their reciprocals), on attention-like scores."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((64, 64, 32)).astype(np.float32)
    k = rng.standard_normal((64, 64, 32)).astype(np.float32)
    s = np.matmul(q, k.swapaxes(-1, -2))
    scale = np.float32(32 ** -0.5)
    ref = _reference(s, scale)
    a = s.reshape(-1, 64).copy()
    assert kernels.softmax_rows(a, scale, np.empty(a.shape[0], np.float32))
    e = np.exp(s * scale)  # NumPy's direct route, written out
    r = attn._row_sums(e)
    np.divide(1, r, out=r)
    e *= r[..., None]
    err_k = np.abs(a.reshape(s.shape) - ref) / ref
    err_n = np.abs(e - ref) / ref
    assert err_k.max() <= err_n.max() and err_k.mean() <= err_n.mean()


def test_forward_rows_special_values():
    """Masked keys exactly 0; a NaN after a row's first score makes the row NaN; a row
    whose maximum is +inf, -inf or NaN (a NaN first) leaves the whole array unchanged
    and says False (NumPy's rules apply)."""
    s = np.array([[0.0, -np.inf, 1.0, 2.0], [1.0, np.nan, 0.5, 0.0],
                  [-100.0, 3.0, -np.inf, 80.0]], np.float32)
    a = s.copy()
    assert kernels.softmax_rows(a, np.float32(1), np.empty(3, np.float32))
    assert a[0, 1] == 0 and a[2, 2] == 0 and np.isnan(a[1]).all()
    np.testing.assert_allclose(a[[0, 2]], _reference(np.where(np.isinf(s), -1e30, s),
                                                     1)[[0, 2]], rtol=2e-6, atol=1e-37)
    first = s.copy()
    first[1] = [np.nan, 1.0, 0.5, 0.0]  # a NaN first: the row's maximum is NaN
    u = first.copy()
    assert not kernels.softmax_rows(u, np.float32(1), np.empty(3, np.float32))
    assert u.tobytes() == first.tobytes()
    for bad in (np.inf, -np.inf, np.nan):
        t = s.copy()
        t[2] = bad
        t[1, 1] = 0
        u = t.copy()
        assert not kernels.softmax_rows(u, np.float32(1), np.empty(3, np.float32))
        assert u.tobytes() == t.tobytes()


@pytest.mark.parametrize("n", [1, 9, 64])
def test_backward_rows_as_numpy(n):
    """``(gs - sum(gs * a)) * a`` per row: NumPy's formula up to the row sums' order."""
    rng = np.random.default_rng(n)
    a = _reference(rng.standard_normal((40, n)).astype(np.float32), 1).astype(np.float32)
    g = rng.standard_normal((40, n)).astype(np.float32)
    got = g.copy()
    kernels.softmax_backward_rows(got, a)
    want = (g.astype(np.float64) - (g.astype(np.float64) * a).sum(-1, keepdims=True)) * a
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("lead", [(1, 3), (2, 3)])
def test_attention_runs_the_row_kernels(masked, lead, row_major, monkeypatch):
    """On row-major scores attention's forward and backward run the row kernels (once
    each per block), the results within float32 rounding of torch's; a mask's fully
    masked row hands the scores to NumPy's passes (zeros there)."""
    calls = []
    for name in ("softmax_rows", "softmax_backward_rows"):
        fn = getattr(kernels, name)
        monkeypatch.setattr(kernels, name,
                            lambda *a, _f=fn, _n=name: calls.append(_n) or _f(*a))
    rng = np.random.default_rng(5)
    q = rng.standard_normal(lead + (24, 16)).astype(np.float32)
    k = rng.standard_normal(lead + (20, 16)).astype(np.float32) * 3
    v = rng.standard_normal(lead + (20, 16)).astype(np.float32)
    g = rng.standard_normal(lead + (24, 16)).astype(np.float32)
    mask = rng.random((24, 20)) < 0.3
    mask[4] = True
    res = []
    for m in (ember, torch):
        ts = [m.tensor(np.ascontiguousarray(a), requires_grad=True) for a in (q, k, v)]
        y = m.nn.functional.scaled_dot_product_attention(
            *ts, attn_mask=~m.tensor(mask) if masked else None)
        if m is ember and not masked:
            assert y.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
        y.backward(m.tensor(g))
        res.append([y.detach().numpy()] + [t.grad.numpy() for t in ts])
    assert "softmax_backward_rows" in calls
    assert "softmax_rows" in calls  # tried; with the fully masked row it says False
    for a, e in zip(*res):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


def test_float64_and_without_numba_keep_numpy(row_major, monkeypatch):
    """float64 scores, and no numba, take NumPy's passes."""
    assert attn._rows(np.zeros((2, 3), np.float64)) is None
    assert attn._rows(np.zeros((3, 2), np.float32).T) is None
    monkeypatch.setitem(attn._NUMBA, "softmax", None)
    assert attn._rows(np.zeros((2, 3), np.float32)) is None
    s = np.zeros((2, 3), np.float32)
    assert attn._softmax_in_rows(s, 1.0) is False
