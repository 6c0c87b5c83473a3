"""``torch.nn.attention.flex_attention`` against torch 2.13's eager flex_attention:
score and mask functions, block masks, GQA, log-sum-exp, fully masked rows and
gradients."""
import numpy as np
import pytest
import torch
from torch.nn.attention import flex_attention as tfa

import ember
from ember.nn.attention import flex_attention as efa

pytestmark = pytest.mark.filterwarnings("ignore:.*flex_attention:UserWarning",
                                        "ignore:return_lse is deprecated:FutureWarning")
rng = np.random.default_rng(0)
Q = rng.standard_normal((2, 4, 6, 8)).astype(np.float32)
K = rng.standard_normal((2, 2, 7, 8)).astype(np.float32)
V = rng.standard_normal((2, 2, 7, 5)).astype(np.float32)
LENGTHS = [7, 4]


def causal(b, h, q, kv):
    return q >= kv


def score_mods(m):
    lengths = m.tensor(LENGTHS)
    return {
        None: None,
        "relative": lambda s, b, h, q, kv: s + (q - kv) * 0.1,
        "alibi": lambda s, b, h, q, kv: s - (h + 1) * (q - kv).abs() * 0.05,
        "softcap": lambda s, b, h, q, kv: 3 * m.tanh(s / 3),
        "padding": lambda s, b, h, q, kv: m.where(kv < lengths[b], s, -float("inf")),
    }


def mask_mods(m):
    lengths = m.tensor(LENGTHS)
    return {
        None: None,
        "causal": causal,
        "padding": lambda b, h, q, kv: kv < lengths[b],
        "sliding": m.nn.attention.flex_attention.and_masks(
            causal, lambda b, h, q, kv: q - kv <= 2),
        "empty_rows": lambda b, h, q, kv: (q > 1) & (kv <= q),
        "or": m.nn.attention.flex_attention.or_masks(causal, lambda b, h, q, kv: kv == 6),
    }


def _run(m, score, mask, gqa_kwargs, grad=False):
    fa = tfa if m is torch else efa
    q = m.tensor(Q, requires_grad=grad)
    k, v = m.tensor(K, requires_grad=grad), m.tensor(V, requires_grad=grad)
    bm = None
    if mask is not None:
        bm = fa.create_block_mask(mask_mods(m)[mask], 2, None, 6, 7, device="cpu")
    out, lse = fa.flex_attention(q, k, v, score_mod=score_mods(m)[score], block_mask=bm,
                                 enable_gqa=True, return_lse=True, **gqa_kwargs)
    res = [out.detach().numpy(), lse.detach().numpy()]
    if grad:
        (out * m.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape),
                        dtype=m.float32)).sum().backward()
        res += [q.grad.numpy(), k.grad.numpy(), v.grad.numpy()]
    return res


@pytest.mark.parametrize("score", [None, "relative", "alibi", "softcap", "padding"])
@pytest.mark.parametrize("mask", [None, "causal", "padding", "sliding", "empty_rows", "or"])
def test_flex_attention_matches_torch(score, mask):
    for kw in ({}, {"scale": 0.3}):
        want, got = _run(torch, score, mask, kw), _run(ember, score, mask, kw)
        for w, g in zip(want, got):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


def _dense_torch(q, k, v, score, mask):
    """The attention flex_attention computes, written out in torch ops (torch's own
    flex_attention refuses backward on the CPU)."""
    k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    s = q @ k.transpose(-2, -1) / np.sqrt(q.shape[-1])
    b, h, qi, ki = (torch.arange(n).view(*[n if i == d else 1 for i in range(4)])
                    for d, n in enumerate(s.shape))
    s = score_mods(torch)[score](s, b, h, qi, ki)
    s = torch.where(mask_mods(torch)[mask](b, h, qi, ki), s, -float("inf"))
    return torch.nan_to_num(s.softmax(-1), nan=0.0) @ v


@pytest.mark.parametrize("mask", ["causal", "padding", "sliding", "empty_rows"])
def test_flex_attention_gradients_match_torch_autograd(mask):
    # torch 2.13 raises NotImplementedError for flex_attention's backward on the CPU;
    # ember differentiates it, and must agree with torch's autograd of the same math
    q = torch.tensor(Q, requires_grad=True)
    k, v = torch.tensor(K, requires_grad=True), torch.tensor(V, requires_grad=True)
    out = _dense_torch(q, k, v, "alibi", mask)
    (out * torch.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape),
                        dtype=torch.float32)).sum().backward()
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        _run(torch, "alibi", mask, {}, grad=True)
    got = _run(ember, "alibi", mask, {}, grad=True)
    np.testing.assert_allclose(got[0], out.detach().numpy(), rtol=1e-5, atol=1e-6)
    for w, g in zip((q.grad, k.grad, v.grad), got[2:]):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


def test_block_mask_shape_and_dense_blocks():
    for bs in (2, 3, 128):
        tb = tfa.create_block_mask(causal, 2, 3, 6, 7, device="cpu", BLOCK_SIZE=bs)
        eb = efa.create_block_mask(causal, 2, 3, 6, 7, device="cpu", BLOCK_SIZE=bs)
        assert eb.shape == tb.shape and eb.seq_lengths == tb.seq_lengths
        np.testing.assert_array_equal(eb.to_dense().numpy(), tb.to_dense().numpy())
        assert eb.to_dense().dtype == ember.int32
    np.testing.assert_array_equal(
        efa.create_mask(causal, 1, 1, 4, 5, "cpu").numpy(),
        tfa.create_mask(causal, 1, 1, 4, 5, "cpu").numpy())


def test_errors_and_aux_as_torch():
    q, k = ember.tensor(Q), ember.tensor(K)
    with pytest.raises(ValueError, match="enable_gqa=True"):
        efa.flex_attention(q, k, ember.tensor(V))
    with pytest.raises(ValueError, match="4D"):
        efa.flex_attention(q[0], k[0], ember.tensor(V)[0])
    out, aux = efa.flex_attention(q, k, ember.tensor(V), enable_gqa=True,
                                  return_aux=efa.AuxRequest(lse=True))
    tout, taux = tfa.flex_attention(torch.tensor(Q), torch.tensor(K), torch.tensor(V),
                                    enable_gqa=True, return_aux=tfa.AuxRequest(lse=True))
    np.testing.assert_allclose(aux.lse.numpy(), taux.lse.numpy(), rtol=1e-5)
    assert aux.max_scores is None and taux.max_scores is None
