"""Attention on heads split from one packed projection (rows a token apart, as
MultiheadAttention makes them): results and gradients against torch, output strides as
torch's, the gradients laid out as the inputs, and a retained graph's second pass."""
import numpy as np
import pytest
import torch

import ember
from ember.ops import attention as attn

B, L, H, D = 4, 16, 2, 8


def _heads(m, p):
    """q, k, v of shape (B, H, L, D) split from a (3, L, B, H * D) projection."""
    return [p[i].view(L, B * H, D).transpose(0, 1).view(B, H, L, D) for i in range(3)]


@pytest.fixture
def transposed_layout(monkeypatch):
    """The scores stored transposed whatever the BLAS kernel (where that does not keep
    ``q @ k^T``'s bits, attention stores them row-major): the layout's kernels tested."""
    monkeypatch.setattr(attn, "transposed_scores_keep_bits", lambda: True)


def _run(m, pb, gb, twice=False, causal=False):
    p = m.tensor(pb, requires_grad=True)
    q, k, v = _heads(m, p)
    y = m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    y.backward(m.tensor(gb), retain_graph=twice)
    if twice:
        y.backward(m.tensor(gb))
    return y, p.grad


@pytest.mark.parametrize("twice", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_split_heads_against_torch(twice, causal):
    rng = np.random.default_rng(0)
    pb = rng.standard_normal((3, L, B, H * D)).astype(np.float32)
    gb = rng.standard_normal((B, H, L, D)).astype(np.float32)
    ye, ge = _run(ember, pb, gb, twice, causal)
    yt, gt = _run(torch, pb, gb, twice, causal)
    assert ye.stride() == yt.stride()
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-4, atol=1e-5)


def test_gradients_laid_out_as_the_inputs(monkeypatch):
    """The node's q, k, v gradients have their inputs' strides, so the views back to
    the projection need no copy."""
    seen = []
    backward = attn.ScaledDotProductAttention.backward

    def spy(self, gy):
        out = backward(self, gy)
        seen.append([t._data.strides for t in out[:3]])
        return out
    monkeypatch.setattr(attn.ScaledDotProductAttention, "backward", spy)
    rng = np.random.default_rng(1)
    p = ember.tensor(rng.standard_normal((3, L, B, H * D)).astype(np.float32),
                     requires_grad=True)
    q, k, v = _heads(ember, p)
    y = ember.nn.functional.scaled_dot_product_attention(q, k, v)
    y.sum().backward()
    assert seen == [[q._data.strides, k._data.strides, v._data.strides]]
    assert not q.is_contiguous()


def test_in_rows_copies_only_strided_arrays():
    a = np.zeros((2, 3, 4), np.float32)
    assert attn._in_rows(a) is a
    t = a.transpose(1, 0, 2)
    c = attn._in_rows(t)
    assert c is not t and c.flags.c_contiguous and np.array_equal(c, t)


def test_multihead_attention_batch_first_against_torch():
    torch.manual_seed(0)
    mt = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    me = ember.nn.MultiheadAttention(32, 4, batch_first=True)
    me.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in
                        mt.state_dict().items()})
    rng = np.random.default_rng(2)
    xb = rng.standard_normal((5, 12, 32)).astype(np.float32)
    outs = []
    for m, mod in ((ember, me), (torch, mt)):
        x = m.tensor(xb, requires_grad=True)
        y = mod(x, x, x, need_weights=False)[0]
        y.backward(m.ones_like(y))
        outs.append([y.detach().numpy(), x.grad.numpy(), mod.in_proj_weight.grad.numpy()])
    for a, e in zip(*outs):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("path", ["numba", "numpy"])
def test_softmax_kernels_against_numpy_and_torch(path, masked, monkeypatch, transposed_layout):
    """The scores' softmax (numba kernels down the transposed matrices, the scaling
    folded in where there is no mask, or NumPy's passes): weights within float32
    rounding of torch's, masked keys exactly 0, rows with a NaN or only -inf as torch's
    (the kernels hand those to NumPy)."""
    if path == "numba":
        assert attn._columns(attn._scores_layout((3, 2), np.float32)) is not None
    else:
        monkeypatch.setitem(attn._NUMBA, "softmax", None)
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 3, 40, 16)).astype(np.float32) * 4
    k = rng.standard_normal((2, 3, 24, 16)).astype(np.float32) * 4
    v = rng.standard_normal((2, 3, 24, 16)).astype(np.float32)
    mask = rng.random((40, 24)) < 0.3
    mask[5] = True                                  # a fully masked row: zeros (safe)
    q[1, 2, 7, 3] = np.nan                          # a NaN row
    g = rng.standard_normal((2, 3, 40, 16)).astype(np.float32)
    res = []
    for m in (ember, torch):
        ts = [m.tensor(a, requires_grad=True) for a in (q, k, v)]
        y = m.nn.functional.scaled_dot_product_attention(
            *ts, attn_mask=~m.tensor(mask) if masked else None)
        y.backward(m.tensor(g))
        res.append([y.detach().numpy()] + [t.grad.numpy() for t in ts])
    for a, e in zip(*res):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("d", [4, 32, 64, 256])
def test_scores_written_through_their_transpose_keep_the_bits(dt, d, monkeypatch):
    """The scores are stored with each matrix transposed and written as ``k @ q^T`` into
    those row-major matrices (BLAS), the bits of ``q @ k^T`` into column-major ones
    (NumPy's own loop, what the key-outermost layout got), only on the BLAS kernels where
    those are the bits of ``q @ k^T`` into a plain array (SkylakeX); on the others
    (Haswell's, which differ in the last bits) the scores are row-major, written by
    ``q @ k^T``, and an attention split over its batch gives the unsplit one's bits."""
    rng = np.random.default_rng(d)
    q = rng.standard_normal((2, 3, 33, d)).astype(dt)
    k = rng.standard_normal((2, 3, 17, d)).astype(dt)
    s = attn._scores_layout((2, 3, 33, 17), dt)
    assert s.shape == (2, 3, 33, 17) and s.swapaxes(-1, -2).flags.c_contiguous
    attn._product_into(k, q.swapaxes(-1, -2), s.swapaxes(-1, -2))
    f = np.empty((2, 3, 17, 33), dt).swapaxes(-1, -2)  # column-major matrices: NumPy's loop
    np.matmul(q, k.swapaxes(-1, -2), out=f)
    assert s.tobytes() == f.tobytes()
    plain = np.ascontiguousarray(q @ k.swapaxes(-1, -2)).tobytes()
    keeps = attn.transposed_scores_keep_bits()
    assert attn._transposed(attn._scores_array((2, 3, 33, 17), dt)) is keeps
    if keeps:
        assert s.tobytes() == plain
        return
    # row-major scores: the attention (values and gradients) of a batch split in blocks
    # is the unsplit one's (``q @ k^T`` whole, the formula's route) to the bit
    v = rng.standard_normal((2, 3, 17, d)).astype(dt)
    g = rng.standard_normal((2, 3, 33, d)).astype(dt)

    def run():
        ts = [ember.tensor(a, requires_grad=True) for a in (q, k, v)]
        y = ember.nn.functional.scaled_dot_product_attention(*ts)
        assert y.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
        y.backward(ember.tensor(g))
        return [y.detach().numpy()] + [t.grad.numpy() for t in ts]
    split = run()
    monkeypatch.setattr(attn, "_split_lead", lambda *a: None)
    for a, b in zip(split, run()):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("twice", [False, True])
@pytest.mark.parametrize("direct", [True, False])
def test_numpy_softmax_scale_on_q_and_without_the_maximum(direct, twice, dt, monkeypatch,
                                                          transposed_layout):
    """Without numba the scale multiplies the rows q is copied into (k's gradient then
    takes none) and, where every score lies within +-64, the softmax is ``exp(s)`` over
    its row sums (no maximum subtracted); otherwise the passes with the maximum. Both
    against torch, with a retained graph's second pass (the weights recomputed from the
    unscaled q)."""
    monkeypatch.setitem(attn._NUMBA, "softmax", None)
    sums = []
    row_sums = attn._row_sums
    monkeypatch.setattr(attn, "_row_sums", lambda s: sums.append(1) or row_sums(s))
    rng = np.random.default_rng(7)
    scale = 1.0 if direct else 5.0  # scores past the bound take the maximum's passes
    pb = (rng.standard_normal((3, L, B, H * D)) * scale).astype(dt)
    gb = rng.standard_normal((B, H, L, D)).astype(dt)
    ye, ge = _run(ember, pb, gb, twice)
    yt, gt = _run(torch, pb, gb, twice)
    # the row sums: backward's row dot products each pass, forward's softmax if direct
    assert len(sums) == (2 if direct else 1) * (2 if twice else 1)
    tol = 2e-5 if dt == np.float32 else 1e-11
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=10 * tol, atol=10 * tol)


@pytest.mark.parametrize("path", ["numba", "numpy"])
def test_products_take_q_and_g_transposed(path, monkeypatch, transposed_layout):
    """``k @ q^T`` forward and ``v @ g^T`` backward multiply copies of q's and g's
    matrices transposed (BLAS's kernel for untransposed operands): each made once, the
    results torch's."""
    if path == "numpy":
        monkeypatch.setitem(attn._NUMBA, "softmax", None)
    t = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    c = attn._transposed_copy(t)
    assert c.flags.c_contiguous and np.array_equal(c, t.swapaxes(-1, -2))
    assert attn._transposed_copy(t.swapaxes(-1, -2)) is None
    made = []
    copy = attn._transposed_copy
    monkeypatch.setattr(attn, "_transposed_copy", lambda a: made.append(a.shape) or copy(a))
    into = attn._transposed_into  # (forward's copy, made by the split's blocks)
    monkeypatch.setattr(attn, "_transposed_into",
                        lambda a, fills: made.append(a.shape) or into(a, fills))
    rng = np.random.default_rng(11)
    pb = rng.standard_normal((3, L, B, H * D)).astype(np.float32)
    gb = rng.standard_normal((B, H, L, D)).astype(np.float32)
    ye, ge = _run(ember, pb, gb)
    yt, gt = _run(torch, pb, gb)
    assert made == [(B, H, L, D), (B, H, L, D)]
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-4, atol=1e-5)
