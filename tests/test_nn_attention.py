"""Attention and transformers against torch: F.scaled_dot_product_attention (values, first
and second gradients, every mask kind), nn.MultiheadAttention in every configuration,
Transformer encoder/decoder layers and stacks, nn.Transformer, state_dict names and
torch checkpoints, eval mode (torch's fused fast path) and a training curve.

Modules are built in torch, their ``state_dict`` loaded into ember, and both run on the
same inputs; outputs, input gradients and every parameter gradient are compared.
"""
import io

import numpy as np
import pytest
import torch
from oracle import Case, assert_close, cases, check, check_raises
from torch.nn.attention import SDPBackend, sdpa_kernel

import ember

# ----- scaled_dot_product_attention ----------------------------------------------------------


def _mask_array(shape, seed, kind):
    """A deterministic mask: bool (True = attend; column 0 always allowed) or float."""
    rng = np.random.default_rng(seed)
    if kind == "bool":
        a = rng.random(shape) < 0.6
        a[..., 0] = True
        return a
    return rng.standard_normal(shape)


def sdpa(m, q, k, v, mask=None, *, math=True, seed=None, **kw):
    """sdpa in ember or torch, in the math kernel unless ``math=False`` (torch's fused CPU
    kernel has no double backward)."""
    if isinstance(mask, tuple):      # (shape, kind[, dtype]): built here for each library
        shape, kind = mask[:2]
        arr = _mask_array(shape, 7, kind)
        dtype = getattr(m, mask[2]) if len(mask) == 3 else q.dtype if kind == "float" else None
        mask = m.tensor(arr, dtype=dtype)
    if seed is not None:
        m.manual_seed(seed)
    f = m.nn.functional.scaled_dot_product_attention
    if math:
        with m.nn.attention.sdpa_kernel([m.nn.attention.SDPBackend.MATH]):
            return f(q, k, v, mask, **kw)
    return f(q, k, v, mask, **kw)


def _qkv(L=5, S=6, E=8, Ev=None, batch=(2, 3)):
    return [batch + (L, E), batch + (S, E), batch + (S, Ev or E)]


def _fully_masked(rng):
    q, k, v = (rng.standard_normal(s) for s in _qkv(L=4, S=5))
    return [q, k, v]


def _masked_row(m, q, k, v, safe_float=False):
    mask = np.ones((4, 5), dtype=bool)
    mask[1] = False
    mask[3, 2:] = False
    t = m.tensor(mask)
    if safe_float:
        t = m.zeros(4, 5, dtype=q.dtype).masked_fill(~t, float("-inf"))
    return sdpa(m, q, k, v, t, math=False)


SDPA = [
    Case("plain_4d", lambda m, q, k, v: sdpa(m, q, k, v), _qkv()),
    Case("plain_3d", lambda m, q, k, v: sdpa(m, q, k, v), _qkv(batch=(3,))),
    Case("plain_2d", lambda m, q, k, v: sdpa(m, q, k, v), _qkv(batch=())),
    Case("plain_5d", lambda m, q, k, v: sdpa(m, q, k, v), _qkv(batch=(2, 2, 2), L=3, S=4)),
    Case("value_dim", lambda m, q, k, v: sdpa(m, q, k, v), _qkv(Ev=3)),
    Case("batch_broadcast", lambda m, q, k, v: sdpa(m, q, k, v),
         [(2, 1, 4, 8), (1, 3, 5, 8), (1, 3, 5, 8)]),
    Case("bool_mask_2d", lambda m, q, k, v: sdpa(m, q, k, v, ((5, 6), "bool")), _qkv()),
    Case("bool_mask_4d", lambda m, q, k, v: sdpa(m, q, k, v, ((2, 3, 5, 6), "bool")), _qkv()),
    Case("bool_mask_bcast", lambda m, q, k, v: sdpa(m, q, k, v, ((2, 1, 1, 6), "bool")),
         _qkv()),
    Case("float_mask", lambda m, q, k, v: sdpa(m, q, k, v, ((5, 6), "float")), _qkv()),
    Case("float_mask_bcast", lambda m, q, k, v: sdpa(m, q, k, v, ((3, 1, 6), "float")),
         _qkv()),
    Case("float32_mask_float64_query",
         lambda m, q, k, v: sdpa(m, q, k, v, ((5, 6), "float", "float32")), _qkv()),
    Case("mask_is_input", lambda m, q, k, v, a: sdpa(m, q, k, v, a),
         _qkv() + [(2, 1, 5, 6)]),
    Case("causal", lambda m, q, k, v: sdpa(m, q, k, v, is_causal=True), _qkv(L=6)),
    Case("causal_L_lt_S", lambda m, q, k, v: sdpa(m, q, k, v, is_causal=True), _qkv(L=3)),
    Case("causal_L_gt_S", lambda m, q, k, v: sdpa(m, q, k, v, is_causal=True), _qkv(L=7, S=4)),
    Case("scale", lambda m, q, k, v: sdpa(m, q, k, v, scale=0.3), _qkv()),
    Case("scale_negative", lambda m, q, k, v: sdpa(m, q, k, v, scale=-1.2), _qkv()),
    Case("scale_mask_causal_3d", lambda m, q, k, v: sdpa(m, q, k, v, is_causal=True, scale=2.0),
         _qkv(batch=(2,), L=6)),
    Case("gqa", lambda m, q, k, v: sdpa(m, q, k, v, enable_gqa=True),
         [(2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8)]),
    Case("dropout", lambda m, q, k, v: sdpa(m, q, k, v, dropout_p=0.3, seed=3), _qkv()),
    Case("dropout_mask", lambda m, q, k, v: sdpa(m, q, k, v, ((5, 6), "bool"), dropout_p=0.5,
                                                  seed=4), _qkv()),
    Case("empty_L", lambda m, q, k, v: sdpa(m, q, k, v), _qkv(L=0)),
    Case("empty_batch", lambda m, q, k, v: sdpa(m, q, k, v), _qkv(batch=(0, 2))),
    # torch's fused CPU kernel (the default path): first derivatives only
    Case("fused_plain", lambda m, q, k, v: sdpa(m, q, k, v, math=False), _qkv(), gradgrad=False),
    Case("fused_bool_mask", lambda m, q, k, v: sdpa(m, q, k, v, ((5, 6), "bool"), math=False),
         _qkv(), gradgrad=False),
    Case("fused_causal", lambda m, q, k, v: sdpa(m, q, k, v, is_causal=True, math=False),
         _qkv(L=6), gradgrad=False),
    Case("fully_masked_rows_bool", lambda m, q, k, v: _masked_row(m, q, k, v), _fully_masked,
         gradgrad=False),
    Case("fully_masked_rows_float", lambda m, q, k, v: _masked_row(m, q, k, v, True),
         _fully_masked, gradgrad=False),
]
SDPA += [Case(c.name + "_f32", c.fn, c.inputs, gradgrad=c.gradgrad, dtype=np.float32,
              rtol=1e-4, atol=1e-5)
         for c in SDPA if c.name in ("plain_4d", "bool_mask_2d", "float_mask", "causal",
                                     "fused_plain", "dropout")]
SDPA += [Case(c.name + "_f16", c.fn, c.inputs, gradgrad=False, dtype=np.float16)
         for c in SDPA if c.name in ("bool_mask_2d", "fused_causal")]


@cases(SDPA)
def test_sdpa(case):
    check(case)


SDPA_FIRST_ORDER = [Case(c.name, c.fn, c.inputs, gradgrad=False, dtype=c.dtype, rtol=c.rtol,
                         atol=c.atol, noncontig=False) for c in SDPA if c.gradgrad]


@cases(SDPA_FIRST_ORDER)
def test_sdpa_first_order(case):
    """Plain backward (no create_graph): ember's array kernel rather than its recorded
    formulas."""
    check(case)


def test_sdpa_retain_graph_and_in_place_check():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in _qkv()]
    e = [ember.tensor(a, requires_grad=True) for a in arrays]
    t = [torch.tensor(a, requires_grad=True) for a in arrays]
    e_out, t_out = sdpa(ember, *e, ((5, 6), "bool")), sdpa(torch, *t, ((5, 6), "bool"))
    for _ in range(2):   # the second pass recomputes the weights it released
        e_out.sum().backward(retain_graph=True)
        t_out.sum().backward(retain_graph=True)
        for a, b in zip(e, t):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-7, atol=1e-9)
    q = ember.tensor(arrays[0], requires_grad=True) * 1
    out = sdpa(ember, q, e[1], e[2])
    q.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_sdpa_masked_rows_second_derivative():
    """A fully masked query row gives zeros and zero gradients, to second order."""
    rng = np.random.default_rng(0)
    arrays = _fully_masked(rng)
    q, k, v = (ember.tensor(a, requires_grad=True) for a in arrays)
    out = _masked_row(ember, q, k, v)
    assert not out[:, :, 1].detach().numpy().any()
    gq, = ember.autograd.grad(out.sum(), q, create_graph=True)
    assert not gq[:, :, 1].detach().numpy().any()
    ggk, = ember.autograd.grad((gq * gq).sum(), k)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in arrays)
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[1] = False
    mask[3, 2:] = False
    with sdpa_kernel([SDPBackend.MATH]):
        t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, mask)
    t_gq, = torch.autograd.grad(t_out.sum(), tq, create_graph=True)
    t_ggk, = torch.autograd.grad((t_gq * t_gq).sum(), tk)
    np.testing.assert_allclose(ggk.numpy(), t_ggk.numpy(), rtol=1e-7, atol=1e-9)


SDPA_ERRORS = [
    ("dtype_mismatch", lambda m, q, k, v: sdpa(m, q, k.float(), v), _qkv()),
    ("one_dim", lambda m, q, k, v: sdpa(m, q[0, 0, 0], k[0, 0, 0], v[0, 0, 0]), _qkv()),
    ("int_inputs", lambda m, q, k, v: sdpa(m, q.long(), k.long(), v.long()), _qkv()),
    ("int_mask", lambda m, q, k, v: sdpa(m, q, k, v, m.ones(5, 6, dtype=m.int64)), _qkv()),
    ("double_mask_float_query",
     lambda m, q, k, v: sdpa(m, q.float(), k.float(), v.float(), m.zeros(5, 6, dtype=m.float64)),
     _qkv()),
    ("causal_and_mask", lambda m, q, k, v: sdpa(m, q, k, v, m.ones(5, 6, dtype=m.bool),
                                                is_causal=True), _qkv()),
    ("mask_not_broadcastable", lambda m, q, k, v: sdpa(m, q, k, v, m.ones(4, 6, dtype=m.bool)),
     _qkv()),
    ("mask_grows_output", lambda m, q, k, v: sdpa(m, q, k, v, m.zeros(7, 2, 3, 5, 6,
                                                                      dtype=q.dtype)), _qkv()),
    ("batch_mismatch", lambda m, q, k, v: sdpa(m, q, k, v), [(2, 5, 8), (3, 6, 8), (3, 6, 8)]),
    ("embed_mismatch", lambda m, q, k, v: sdpa(m, q, k, v), [(2, 5, 8), (2, 6, 7), (2, 6, 8)]),
    ("kv_len_mismatch", lambda m, q, k, v: sdpa(m, q, k, v), [(2, 5, 8), (2, 6, 8), (2, 4, 8)]),
    ("dropout_range", lambda m, q, k, v: sdpa(m, q, k, v, dropout_p=1.5), _qkv()),
    ("heads_without_gqa", lambda m, q, k, v: sdpa(m, q, k, v),
     [(1, 4, 3, 8), (1, 2, 5, 8), (1, 2, 5, 8)]),
    ("gqa_not_divisible", lambda m, q, k, v: sdpa(m, q, k, v, enable_gqa=True),
     [(1, 4, 3, 8), (1, 3, 5, 8), (1, 3, 5, 8)]),
]


@pytest.mark.parametrize("name,fn,shapes", SDPA_ERRORS, ids=[e[0] for e in SDPA_ERRORS])
def test_sdpa_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    check_raises(fn, *[rng.standard_normal(s) for s in shapes])


# ----- modules: build in torch, load into ember, compare ------------------------------------
_DT = {np.float64: (torch.float64, ember.float64), np.float32: (torch.float32, ember.float32)}


def _close(e, t, case, what):
    if t is None:
        assert e is None, f"{case}: {what} should be None"
        return
    assert_close(e, t, case, what)


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run_module(name, make, shapes, call, train=True, grad=True, no_grad=False,
               dtype=np.float64, seed=0, check_state_dict=True):
    """``make(m)`` builds the module, ``call(m, mod, *inputs)`` runs it; torch's weights are
    loaded into ember. Compares outputs (None included), input and parameter gradients."""
    case = Case(name, None, None, dtype=dtype, rtol=1e-4 if dtype == np.float32 else None,
                atol=1e-5 if dtype == np.float32 else None)
    tdt, edt = _DT[dtype]
    torch.manual_seed(seed)
    t_mod = make(torch).to(tdt).train(train)
    e_mod = make(ember).to(edt).train(train)
    sd = t_mod.state_dict()
    if check_state_dict:
        assert list(e_mod.state_dict()) == list(sd), (list(e_mod.state_dict()), list(sd))
    e_mod.load_state_dict({k: ember.tensor(v.numpy()) for k, v in sd.items()})
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    rg = grad and not no_grad
    t_in = [torch.tensor(a, requires_grad=rg) for a in arrays]
    e_in = [ember.tensor(a, requires_grad=rg) for a in arrays]
    if no_grad:
        with torch.no_grad():
            t_out = call(torch, t_mod, *t_in)
        with ember.no_grad():
            e_out = call(ember, e_mod, *e_in)
    else:
        t_out, e_out = call(torch, t_mod, *t_in), call(ember, e_mod, *e_in)
    t_outs, e_outs = _outputs(t_out), _outputs(e_out)
    assert len(t_outs) == len(e_outs)
    for i, (e, t) in enumerate(zip(e_outs, t_outs)):
        _close(e, t, case, f"output[{i}]")
    if not rg:
        return e_out, t_out
    t_diff = [o for o in t_outs if o is not None and o.requires_grad]
    e_diff = [o for o in e_outs if o is not None and o.requires_grad]
    gos = [rng.standard_normal(tuple(o.shape)).astype(dtype) for o in t_diff]
    t_params = [p for _, p in t_mod.named_parameters()]
    e_params = [p for _, p in e_mod.named_parameters()]
    names = [n for n, _ in t_mod.named_parameters()]
    t_g = torch.autograd.grad(t_diff, t_in + t_params, [torch.tensor(g) for g in gos],
                              allow_unused=True)
    e_g = ember.autograd.grad(e_diff, e_in + e_params, [ember.tensor(g) for g in gos],
                              allow_unused=True)
    labels = [f"grad input {i}" for i in range(len(t_in))] + [f"grad {n}" for n in names]
    for e, t, label in zip(e_g, t_g, labels):
        if t is None or e is None:
            for g in (e, t):
                assert g is None or not g.detach().numpy().any(), f"{name}: {label}"
            continue
        _close(e, t, case, label)
    return e_out, t_out


def _bool_array(shape, seed=1, p=0.3, col0=False):
    a = np.random.default_rng(seed).random(shape) < p
    if col0:
        a[..., 0] = False
    return a


def bmask(m, shape, seed=1, p=0.3, col0=False):
    """A bool mask with True (= masked out, torch.nn's convention) w.p. ``p``."""
    return m.tensor(_bool_array(shape, seed, p, col0))


def fmask(m, shape, seed=2):
    return m.tensor(np.random.default_rng(seed).standard_normal(shape))


def causal(m, n):
    return m.nn.Transformer.generate_square_subsequent_mask(n, dtype=m.float64)


def mha(**kw):
    return lambda m: m.nn.MultiheadAttention(8, 2, **kw)


L, S, N, E = 4, 5, 3, 8
SELF = [(L, N, E)]
SELF_BF = [(N, L, E)]
CROSS = [(L, N, E), (S, N, E)]
CROSS_BF = [(N, L, E), (N, S, E)]

MHA = [
    ("self", mha(), SELF, lambda m, mod, x: mod(x, x, x)),
    ("self_batch_first", mha(batch_first=True), SELF_BF, lambda m, mod, x: mod(x, x, x)),
    ("no_weights", mha(), SELF, lambda m, mod, x: mod(x, x, x, need_weights=False)),
    ("per_head_weights", mha(), SELF,
     lambda m, mod, x: mod(x, x, x, average_attn_weights=False)),
    ("cross", mha(), CROSS, lambda m, mod, q, k: mod(q, k, k)),
    ("cross_batch_first", mha(batch_first=True), CROSS_BF, lambda m, mod, q, k: mod(q, k, k)),
    ("qkv_distinct", mha(), [(L, N, E), (S, N, E), (S, N, E)],
     lambda m, mod, q, k, v: mod(q, k, v)),
    ("kdim_vdim", mha(kdim=5, vdim=3), [(L, N, E), (S, N, 5), (S, N, 3)],
     lambda m, mod, q, k, v: mod(q, k, v)),
    ("kdim_vdim_batch_first_per_head", mha(kdim=5, vdim=3, batch_first=True),
     [(N, L, E), (N, S, 5), (N, S, 3)],
     lambda m, mod, q, k, v: mod(q, k, v, average_attn_weights=False)),
    ("kdim_vdim_no_weights_masks", mha(kdim=6, vdim=6), [(L, N, E), (S, N, 6)],
     lambda m, mod, q, k: mod(q, k, k, key_padding_mask=bmask(m, (N, S), col0=True),
                              attn_mask=bmask(m, (L, S), 3), need_weights=False)),
    ("no_bias", mha(bias=False), SELF, lambda m, mod, x: mod(x, x, x)),
    ("bias_kv", mha(add_bias_kv=True), CROSS, lambda m, mod, q, k: mod(q, k, k)),
    ("zero_attn", mha(add_zero_attn=True), CROSS, lambda m, mod, q, k: mod(q, k, k)),
    ("bias_kv_zero_attn_masks", mha(add_bias_kv=True, add_zero_attn=True), CROSS,
     lambda m, mod, q, k: mod(q, k, k, key_padding_mask=bmask(m, (N, S)),
                              attn_mask=bmask(m, (L, S), 3))),
    ("bias_kv_zero_attn_masks_no_weights", mha(add_bias_kv=True, add_zero_attn=True), CROSS,
     lambda m, mod, q, k: mod(q, k, k, key_padding_mask=bmask(m, (N, S)),
                              attn_mask=bmask(m, (N * 2, L, S), 3), need_weights=False)),
    ("kpm_bool", mha(), CROSS,
     lambda m, mod, q, k: mod(q, k, k, key_padding_mask=bmask(m, (N, S), col0=True))),
    ("kpm_float", mha(), CROSS,
     lambda m, mod, q, k: mod(q, k, k, key_padding_mask=fmask(m, (N, S)))),
    ("kpm_bool_no_weights", mha(batch_first=True), CROSS_BF,
     lambda m, mod, q, k: mod(q, k, k, key_padding_mask=bmask(m, (N, S), col0=True),
                              need_weights=False)),
    ("attn_mask_2d_bool", mha(), CROSS,
     lambda m, mod, q, k: mod(q, k, k, attn_mask=bmask(m, (L, S), col0=True))),
    ("attn_mask_2d_float", mha(), CROSS,
     lambda m, mod, q, k: mod(q, k, k, attn_mask=fmask(m, (L, S)))),
    ("attn_mask_3d_bool", mha(), CROSS,
     lambda m, mod, q, k: mod(q, k, k, attn_mask=bmask(m, (N * 2, L, S), col0=True))),
    ("attn_mask_3d_float_no_weights", mha(), CROSS,
     lambda m, mod, q, k: mod(q, k, k, attn_mask=fmask(m, (N * 2, L, S)),
                              need_weights=False)),
    ("both_masks_float", mha(), CROSS,
     lambda m, mod, q, k: mod(q, k, k, attn_mask=fmask(m, (L, S)),
                              key_padding_mask=fmask(m, (N, S), 5))),
    ("both_masks_bool_per_head", mha(batch_first=True), SELF_BF,
     lambda m, mod, x: mod(x, x, x, attn_mask=bmask(m, (L, L), col0=True),
                           key_padding_mask=bmask(m, (N, L), 4),
                           average_attn_weights=False)),
    ("is_causal_hint", mha(), SELF,
     lambda m, mod, x: mod(x, x, x, attn_mask=causal(m, L), is_causal=True,
                           need_weights=False)),
    ("is_causal_with_weights", mha(), SELF,
     lambda m, mod, x: mod(x, x, x, attn_mask=causal(m, L), is_causal=True)),
    ("is_causal_with_kpm", mha(), SELF,
     lambda m, mod, x: mod(x, x, x, attn_mask=causal(m, L), is_causal=True,
                           key_padding_mask=bmask(m, (N, L), col0=True), need_weights=False)),
    ("unbatched", mha(batch_first=True), [(L, E), (S, E)],
     lambda m, mod, q, k: mod(q, k, k, key_padding_mask=bmask(m, (S,), col0=True))),
    ("unbatched_3d_mask", mha(), [(L, E), (S, E)],
     lambda m, mod, q, k: mod(q, k, k, attn_mask=bmask(m, (2, L, S), col0=True),
                              average_attn_weights=False)),
    ("unbatched_no_weights", mha(), [(L, E)],
     lambda m, mod, x: mod(x, x, x, attn_mask=fmask(m, (L, L)), need_weights=False)),
    ("fully_masked_row_no_weights", mha(batch_first=True), SELF_BF,
     lambda m, mod, x: mod(x, x, x, key_padding_mask=m.tensor([[False] * L, [True] * L,
                                                                [False, True, True, False]]),
                           need_weights=False)),
]


@pytest.mark.parametrize("name,make,shapes,call", MHA, ids=[c[0] for c in MHA])
def test_multihead_attention(name, make, shapes, call):
    run_module(name, make, shapes, call)


def test_multihead_attention_float32():
    run_module("f32", mha(batch_first=True), SELF_BF,
               lambda m, mod, x: mod(x, x, x, key_padding_mask=bmask(m, (N, L), col0=True)),
               dtype=np.float32)


def test_multihead_attention_fully_masked_rows_with_weights_are_nan():
    run_module("nan_rows", mha(), SELF,
               lambda m, mod, x: mod(x, x, x, key_padding_mask=m.tensor(
                   [[False] * L, [True] * L, [False] * L])), grad=False)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_dropout_matches_torch_rng(need_weights):
    def call(m, mod, q, k):
        m.manual_seed(11)
        return mod(q, k, k, need_weights=need_weights,
                   key_padding_mask=bmask(m, (N, S), col0=True))
    run_module("dropout", mha(dropout=0.4), CROSS, call)


FAST = [
    ("plain", {}),
    ("per_head", {"average_attn_weights": False}),
    ("no_weights", {"need_weights": False}),
]


@pytest.mark.parametrize("mask", ["none", "kpm", "attn", "both"])
@pytest.mark.parametrize("name,kw", FAST, ids=[f[0] for f in FAST])
def test_multihead_attention_eval_fast_path(name, kw, mask):
    """eval + no_grad + batch_first self-attention: torch's fused kernel (fully masked rows
    come out NaN there, 0 in its slow path); ember matches either."""
    def call(m, mod, x):
        kpm = m.tensor([[False] * L, [True] * L, [False, True, True, False]])
        am = m.tensor(np.triu(np.ones((L, L), dtype=bool), 1))
        am[0] = True
        masks = {"none": {}, "kpm": {"key_padding_mask": kpm}, "attn": {"attn_mask": am},
                 "both": {"key_padding_mask": kpm, "attn_mask": am}}[mask]
        return mod(x, x, x, **masks, **kw)
    run_module(name, mha(batch_first=True), SELF_BF, call, train=False, no_grad=True)
    run_module(name, mha(batch_first=True), SELF_BF, call, train=False)


def test_fastpath_switch():
    assert ember.backends.mha.get_fastpath_enabled() is True
    ember.backends.mha.set_fastpath_enabled(False)
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        test_multihead_attention_eval_fast_path("no_weights", {"need_weights": False}, "kpm")
    finally:
        ember.backends.mha.set_fastpath_enabled(True)
        torch.backends.mha.set_fastpath_enabled(True)


# ----- transformer layers and stacks --------------------------------------------------------
def enc_layer(**kw):
    def make(m):
        kw2 = dict(kw)
        if kw2.get("activation") == "module_gelu":
            kw2["activation"] = m.nn.GELU()
        if kw2.get("activation") == "callable":
            kw2["activation"] = m.nn.functional.silu
        return m.nn.TransformerEncoderLayer(8, 2, 16, dropout=kw2.pop("dropout", 0.0), **kw2)
    return make


def dec_layer(**kw):
    return lambda m: m.nn.TransformerDecoderLayer(8, 2, 16, dropout=kw.pop("dropout", 0.0),
                                                  **kw)


ENC_LAYER = [
    ("post_relu", {}, {}),
    ("pre_gelu", {"norm_first": True, "activation": "gelu"}, {}),
    ("post_gelu_module_batch_first", {"activation": "module_gelu", "batch_first": True}, {}),
    ("callable_activation", {"activation": "callable"}, {}),
    ("no_bias_eps", {"bias": False, "layer_norm_eps": 1e-3}, {}),
    ("src_mask_bool", {}, {"src_mask": "bool"}),
    ("src_mask_float_kpm_bool", {"norm_first": True}, {"src_mask": "float", "kpm": "bool"}),
    ("kpm_bool_batch_first", {"batch_first": True}, {"kpm": "bool"}),
    ("causal_hint", {"batch_first": True}, {"src_mask": "causal", "is_causal": True}),
    ("mask_3d", {}, {"src_mask": "3d"}),
    ("mask_3d_batch_first", {"batch_first": True}, {"src_mask": "3d"}),
    ("float_masks_batch_first", {"batch_first": True}, {"src_mask": "mixed", "kpm": "mixed"}),
]


def _enc_call(opts, mask_name="src_mask"):
    def call(m, mod, x):
        kw = {}
        sm = opts.get("src_mask")
        if sm == "bool":
            kw[mask_name] = bmask(m, (L, L), col0=True)
        elif sm == "float":
            kw[mask_name] = fmask(m, (L, L))
        elif sm == "causal":
            kw[mask_name] = causal(m, L)
        elif sm == "3d":
            kw[mask_name] = bmask(m, (N * 2, L, L), col0=True)
        elif sm == "mixed":     # zeros and other values: torch's fused kernel reads it as bool
            kw[mask_name] = m.tensor(np.where(_bool_array((L, L), col0=True), -0.5, 0.0))
        kpm = [[False] * L, [False, False, True, True], [False, True, True, True]]
        if opts.get("kpm") == "bool":
            kw["src_key_padding_mask"] = m.tensor(kpm)
        elif opts.get("kpm") == "mixed":
            kw["src_key_padding_mask"] = m.tensor(np.where(kpm, -2.0, 0.0))
        if opts.get("is_causal"):
            kw["is_causal"] = True
        return mod(x, **kw)
    return call


@pytest.mark.parametrize("mode", ["train", "eval_no_grad", "eval_grad"])
@pytest.mark.parametrize("name,ctor,opts", ENC_LAYER, ids=[c[0] for c in ENC_LAYER])
def test_encoder_layer(name, ctor, opts, mode):
    shape = [(N, L, E)] if ctor.get("batch_first") else [(L, N, E)]
    run_module(name, enc_layer(**ctor), shape, _enc_call(opts), train=mode == "train",
               no_grad=mode == "eval_no_grad")


def test_encoder_layer_causal_hint_without_mask():
    """torch's slow path refuses ``is_causal`` without a mask; its fused eval kernel
    ignores the hint."""
    check_raises(lambda m, x: enc_layer(batch_first=True)(m).double()(x, is_causal=True),
                 np.zeros((N, L, E)))
    run_module("causal_no_mask", enc_layer(batch_first=True), [(N, L, E)],
               lambda m, mod, x: mod(x, is_causal=True), train=False, no_grad=True)


def test_encoder_layer_unbatched_and_fully_masked_rows():
    run_module("unbatched", enc_layer(batch_first=True), [(L, E)],
               lambda m, mod, x: mod(x, src_key_padding_mask=m.tensor([False, False, True,
                                                                        False])))
    kpm = [[False] * L, [True] * L, [False, True, True, False]]
    for mode in ("train", "eval_no_grad"):    # 0 rows (slow path) or NaN (fused), as torch
        run_module("masked_rows", enc_layer(batch_first=True), [(N, L, E)],
                   lambda m, mod, x: mod(x, src_key_padding_mask=m.tensor(kpm)),
                   train=mode == "train", no_grad=mode != "train")


def test_encoder_layer_dropout_matches_torch_rng():
    """Same seed, same dropout masks. (Sequence-first only: with batch_first torch's
    attention output is a transposed view and its dropout draws in memory order.)"""
    def call(m, mod, x):
        m.manual_seed(5)
        return mod(x, src_key_padding_mask=bmask(m, (N, L), col0=True))
    run_module("dropout", enc_layer(dropout=0.3), [(L, N, E)], call)
    run_module("dropout_pre", enc_layer(dropout=0.3, norm_first=True), [(L, N, E)], call)


def encoder(layer_kw, num_layers=2, norm=True, **kw):
    def make(m):
        layer = enc_layer(**layer_kw)(m)
        return m.nn.TransformerEncoder(layer, num_layers,
                                       m.nn.LayerNorm(8) if norm else None, **kw)
    return make


ENCODER = [
    ("post_norm", {}, {}, {}),
    ("pre_norm_no_final_norm", {"norm_first": True}, {"norm": False}, {}),
    ("batch_first_kpm", {"batch_first": True}, {}, {"kpm": "bool"}),
    ("batch_first_kpm_no_nested", {"batch_first": True}, {"enable_nested_tensor": False},
     {"kpm": "bool"}),
    ("causal_detected", {"batch_first": True, "activation": "gelu"}, {},
     {"src_mask": "causal"}),
    ("causal_explicit", {}, {}, {"src_mask": "causal", "is_causal": True}),
    ("mask_and_kpm", {"batch_first": True}, {}, {"src_mask": "bool", "kpm": "bool"}),
    ("three_layers_float_mask", {}, {"num_layers": 3}, {"src_mask": "float"}),
]


@pytest.mark.parametrize("mode", ["train", "eval_no_grad"])
@pytest.mark.parametrize("name,layer_kw,kw,opts", ENCODER, ids=[c[0] for c in ENCODER])
def test_encoder(name, layer_kw, kw, opts, mode):
    shape = [(N, L, E)] if layer_kw.get("batch_first") else [(L, N, E)]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_module(name, encoder(layer_kw, **kw), shape, _enc_call(opts, "mask"),
                   train=mode == "train", no_grad=mode == "eval_no_grad")


def test_encoder_nested_path_zeroes_padding_and_warns_like_torch():
    """eval + no_grad + a left-aligned padding mask: torch packs a nested tensor and the
    padded outputs come back as 0 (before the final norm)."""
    e_out, _ = run_module("nested", encoder({"batch_first": True}, norm=False), [(N, L, E)],
                          _enc_call({"kpm": "bool"}), train=False, no_grad=True)
    assert not e_out[2, 1:].numpy().any()
    for m in (torch, ember):
        with pytest.warns(UserWarning, match="enable_nested_tensor is True"):
            m.nn.TransformerEncoder(m.nn.TransformerEncoderLayer(8, 2, 16), 1)


def _dec_call(opts):
    def call(m, mod, tgt, mem):
        kw = {}
        if opts.get("tgt_mask") == "causal":
            kw["tgt_mask"] = causal(m, L)
        if opts.get("tgt_mask") == "bool":
            kw["tgt_mask"] = bmask(m, (L, L), col0=True)
        if opts.get("memory_mask"):
            kw["memory_mask"] = bmask(m, (L, S), 6, col0=True)
        if opts.get("kpm"):
            kw["tgt_key_padding_mask"] = bmask(m, (N, L), 8, col0=True)
            kw["memory_key_padding_mask"] = bmask(m, (N, S), 9, col0=True)
        if opts.get("tgt_is_causal") is not None:
            kw["tgt_is_causal"] = opts["tgt_is_causal"]
        return mod(tgt, mem, **kw)
    return call


DECODER_LAYER = [
    ("post_relu", {}, {}),
    ("pre_gelu", {"norm_first": True, "activation": "gelu"}, {"tgt_mask": "causal",
                                                             "tgt_is_causal": True}),
    ("batch_first_masks", {"batch_first": True}, {"tgt_mask": "bool", "memory_mask": True,
                                                  "kpm": True}),
    ("no_bias", {"bias": False}, {"kpm": True}),
]


@pytest.mark.parametrize("mode", ["train", "eval_no_grad"])
@pytest.mark.parametrize("name,ctor,opts", DECODER_LAYER, ids=[c[0] for c in DECODER_LAYER])
def test_decoder_layer(name, ctor, opts, mode):
    shapes = [(N, L, E), (N, S, E)] if ctor.get("batch_first") else [(L, N, E), (S, N, E)]
    run_module(name, dec_layer(**ctor), shapes, _dec_call(opts), train=mode == "train",
               no_grad=mode == "eval_no_grad")


def decoder(layer_kw, num_layers=2, norm=True):
    return lambda m: m.nn.TransformerDecoder(dec_layer(**layer_kw)(m), num_layers,
                                             m.nn.LayerNorm(8) if norm else None)


@pytest.mark.parametrize("name,layer_kw,norm,opts", [
    ("post_causal_detected", {}, True, {"tgt_mask": "causal"}),
    ("pre_masks_no_norm", {"norm_first": True, "batch_first": True}, False,
     {"tgt_mask": "bool", "memory_mask": True, "kpm": True}),
])
def test_decoder(name, layer_kw, norm, opts):
    shapes = [(N, L, E), (N, S, E)] if layer_kw.get("batch_first") else [(L, N, E), (S, N, E)]
    run_module(name, decoder(layer_kw, norm=norm), shapes, _dec_call(opts))


def transformer(**kw):
    return lambda m: m.nn.Transformer(8, 2, 2, 2, 16, dropout=0.0, **kw)


@pytest.mark.parametrize("name,kw,masks", [
    ("default", {}, False),
    ("batch_first_masks", {"batch_first": True}, True),
    ("pre_norm_gelu_no_bias", {"norm_first": True, "activation": "gelu", "bias": False}, True),
])
def test_transformer(name, kw, masks):
    bf = kw.get("batch_first")
    shapes = [(N, S, E), (N, L, E)] if bf else [(S, N, E), (L, N, E)]

    def call(m, mod, src, tgt):
        if not masks:
            return mod(src, tgt)
        return mod(src, tgt, src_mask=bmask(m, (S, S), col0=True),
                   tgt_mask=mod.generate_square_subsequent_mask(L, dtype=m.float64),
                   memory_mask=fmask(m, (L, S)),
                   src_key_padding_mask=bmask(m, (N, S), 3, col0=True),
                   tgt_key_padding_mask=bmask(m, (N, L), 4, col0=True),
                   memory_key_padding_mask=bmask(m, (N, S), 3, col0=True))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_module(name, transformer(**kw), shapes, call)
        run_module(name, transformer(**kw), shapes, call, train=False, no_grad=True)


def test_transformer_unbatched():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_module("unbatched", transformer(), [(S, E), (L, E)],
                   lambda m, mod, s, t: mod(s, t, tgt_is_causal=True,
                                            tgt_mask=causal(m, L)))


def test_generate_square_subsequent_mask():
    for args in ((4,), (1,), (0,)):
        t = torch.nn.Transformer.generate_square_subsequent_mask(*args)
        e = ember.nn.Transformer.generate_square_subsequent_mask(*args)
        assert_close(e, t, Case("mask", None, None), "mask")
    e = ember.nn.Transformer.generate_square_subsequent_mask(3, dtype=ember.float64)
    assert e.dtype == ember.float64


# ----- state_dict, init, checkpoints ---------------------------------------------------------
MODULES = {
    "mha": mha(), "mha_kdim": mha(kdim=4, vdim=6), "mha_bias_kv": mha(add_bias_kv=True),
    "mha_no_bias": mha(bias=False), "enc_layer": enc_layer(),
    "dec_layer_no_bias": dec_layer(bias=False), "encoder": encoder({}),
    "decoder": decoder({}), "transformer": transformer(),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_state_dict_names_init_and_torch_checkpoint(name, tmp_path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(3)
        t = MODULES[name](torch)
        ember.manual_seed(3)
        e = MODULES[name](ember)
    t_sd, e_sd = t.state_dict(), e.state_dict()
    assert list(e_sd) == list(t_sd)
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    for k in t_sd:     # torch's initialisation, drawn from the same random stream
        np.testing.assert_array_equal(e_sd[k].numpy(), t_sd[k].numpy(), err_msg=k)
    path = tmp_path / "ckpt.pt"
    torch.save(t.state_dict(), path)
    fresh = MODULES[name](ember)
    fresh.load_state_dict(ember.load(path))
    for k, v in fresh.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), t_sd[k].numpy(), err_msg=k)


def test_repr_and_attributes():
    t = torch.nn.MultiheadAttention(8, 2, kdim=4, batch_first=True)
    e = ember.nn.MultiheadAttention(8, 2, kdim=4, batch_first=True)
    assert repr(e) == repr(t)
    for attr in ("embed_dim", "kdim", "vdim", "_qkv_same_embed_dim", "num_heads", "dropout",
                 "batch_first", "head_dim", "add_zero_attn"):
        assert getattr(e, attr) == getattr(t, attr), attr
    assert e.in_proj_weight is None and e.bias_k is None
    t = torch.nn.TransformerEncoderLayer(8, 2, 16, activation="gelu")
    e = ember.nn.TransformerEncoderLayer(8, 2, 16, activation="gelu")
    assert repr(e) == repr(t)
    assert e.activation_relu_or_gelu == t.activation_relu_or_gelu == 2
    assert ember.nn.TransformerEncoderLayer(8, 2, 16).activation_relu_or_gelu == 1
    assert ember.nn.TransformerEncoderLayer(8, 2, 16,
                                            activation=ember.tanh).activation_relu_or_gelu == 0


def test_multi_head_attention_forward_functional():
    """F.multi_head_attention_forward with separate weights and static keys/values."""
    rng = np.random.default_rng(0)
    arrays = {"q": (L, N, E), "k": (S, N, E), "w": (3 * E, E), "b": (3 * E,), "ow": (E, E),
              "ob": (E,), "sk": (N * 2, S + 1, 4), "sv": (N * 2, S + 1, 4)}
    arrays = {k: rng.standard_normal(s) for k, s in arrays.items()}

    def run(m):
        t = {k: m.tensor(v, requires_grad=True) for k, v in arrays.items()}
        F = m.nn.functional
        out1, w1 = F.multi_head_attention_forward(
            t["q"], t["k"], t["k"], E, 2, t["w"], t["b"], None, None, False, 0.0, t["ow"],
            t["ob"], static_k=t["sk"], static_v=t["sv"])
        out2, _ = F.multi_head_attention_forward(
            t["q"], t["k"], t["k"], E, 2, None, t["b"], None, None, True, 0.0, t["ow"], t["ob"],
            use_separate_proj_weight=True, q_proj_weight=t["w"][:E], k_proj_weight=t["w"][E:2 * E],
            v_proj_weight=t["w"][2 * E:], training=False, need_weights=False)
        loss = (out1 * out1).sum() + w1.sum() + (out2 ** 3).sum()
        grads = m.autograd.grad(loss, list(t.values()))
        return [out1, w1, out2] + list(grads)
    assert_close(run(ember), run(torch), Case("mhaf", None, None), "mha_forward")


# ----- errors ----------------------------------------------------------------------------------
def _mha_err(call, **kw):
    def fn(m, *x):
        mod = m.nn.MultiheadAttention(8, 2, **kw).double()
        return call(m, mod, *x)
    return fn


ERRORS = [
    ("embed_dim_mismatch", _mha_err(lambda m, mod, x: mod(x, x, x)), [(L, N, 6)],
     AssertionError),
    ("attn_mask_2d_shape", _mha_err(lambda m, mod, q, k: mod(q, k, k, attn_mask=m.zeros(
        L, S + 1, dtype=m.float64))), CROSS, RuntimeError),
    ("attn_mask_3d_shape", _mha_err(lambda m, mod, q, k: mod(q, k, k, attn_mask=m.zeros(
        N, L, S, dtype=m.float64))), CROSS, RuntimeError),
    ("attn_mask_int", _mha_err(lambda m, mod, q, k: mod(q, k, k, attn_mask=m.zeros(
        L, S, dtype=m.int64))), CROSS, AssertionError),
    ("attn_mask_4d", _mha_err(lambda m, mod, q, k: mod(q, k, k, attn_mask=m.zeros(
        1, 1, L, S, dtype=m.float64))), CROSS, AssertionError),
    ("kpm_shape", _mha_err(lambda m, mod, q, k: mod(q, k, k, key_padding_mask=m.zeros(
        N, S + 1, dtype=m.bool))), CROSS, AssertionError),
    ("kpm_batch", _mha_err(lambda m, mod, q, k: mod(q, k, k, key_padding_mask=m.zeros(
        N + 1, S, dtype=m.bool))), CROSS, AssertionError),
    ("query_4d", _mha_err(lambda m, mod, x: mod(x, x, x)), [(1, L, N, E)], AssertionError),
    ("key_2d_query_3d", _mha_err(lambda m, mod, q, k: mod(q, k[0], k[0])), CROSS,
     AssertionError),
    ("key_value_shape", _mha_err(lambda m, mod, q, k: mod(q, k, k[:-1])), CROSS, AssertionError),
    ("is_causal_without_mask", _mha_err(lambda m, mod, x: mod(x, x, x, is_causal=True)), SELF,
     RuntimeError),
    ("kdim_wrong_key", _mha_err(lambda m, mod, q, k: mod(q, k, k), kdim=5), CROSS,
     AssertionError),
    ("heads_not_dividing", lambda m: m.nn.MultiheadAttention(8, 3), [], AssertionError),
    ("zero_heads", lambda m: m.nn.MultiheadAttention(8, 0), [], ValueError),
    ("bad_activation", lambda m: m.nn.TransformerEncoderLayer(8, 2, activation="tanh"), [],
     RuntimeError),
    ("transformer_batch", lambda m, s, t: transformer()(m).double()(s, t),
     [(S, N, E), (L, N + 1, E)], RuntimeError),
    ("transformer_d_model", lambda m, s, t: transformer()(m).double()(s, t),
     [(S, N, 6), (L, N, 6)], RuntimeError),
    ("encoder_layer_width", lambda m, x: enc_layer()(m).double()(x), [(L, N, 6)], AssertionError),
]


@pytest.mark.parametrize("name,fn,shapes,exc", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, shapes, exc):
    rng = np.random.default_rng(0)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        err = check_raises(fn, *[rng.standard_normal(s) for s in shapes])
    assert isinstance(err, exc)


def test_mismatched_mask_types_warn_like_torch():
    for m in (torch, ember):
        mod = m.nn.MultiheadAttention(8, 2).double()
        x = m.zeros(L, N, E, dtype=m.float64)
        with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and "
                                             "attn_mask is deprecated"):
            mod(x, x, x, key_padding_mask=m.zeros(N, L, dtype=m.bool),
                attn_mask=m.zeros(L, L, dtype=m.float64))


# ----- training ----------------------------------------------------------------------------
def test_encoder_training_curve_matches_torch():
    """A 2-layer TransformerEncoder (float64, dropout 0) trained 300 Adam steps on synthetic
    data follows torch's loss curve."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((4, 6, 8))
    ys = np.tanh(xs[:, ::-1].cumsum(1))
    kpm = np.zeros((4, 6), dtype=bool)
    kpm[1, 4:] = True

    def train(m):
        m.manual_seed(0)
        layer = m.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                             norm_first=True)
        model = m.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).double()
        head = m.nn.Linear(8, 8).double()
        opt = m.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=3e-3)
        x, y, pad = m.tensor(xs), m.tensor(ys.copy()), m.tensor(kpm)
        mask = m.nn.Transformer.generate_square_subsequent_mask(6, dtype=m.float64)
        losses = []
        for _ in range(300):
            opt.zero_grad()
            loss = m.nn.functional.mse_loss(head(model(x, mask=mask, src_key_padding_mask=pad)),
                                            y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return np.array(losses)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)    # tiny ops: torch's thread pool only adds waiting on a busy box
    try:
        e, t = train(ember), train(torch)
    finally:
        torch.set_num_threads(threads)
    assert t[-1] < 0.5 * t[0]
    np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-9)


def test_torch_script_style_usage_through_ember_as_torch():
    """A typical model file: positional encoding + encoder + head, run end to end."""
    buf = io.StringIO()
    for m in (ember, torch):
        m.manual_seed(0)
        model = m.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                 dim_feedforward=16, dropout=0.1, batch_first=True)
        out = model(m.ones(2, 5, 8), m.ones(2, 3, 8))
        buf.write(str(tuple(out.shape)))
    assert buf.getvalue() == "(2, 3, 8)(2, 3, 8)"


def test_sdpa_kernel_context_is_accepted():
    from ember.nn.attention import SDPBackend as ESDPBackend
    from ember.nn.attention import sdpa_kernel as e_sdpa_kernel
    assert list(ESDPBackend.__members__) == list(SDPBackend.__members__)
    q = ember.ones(1, 2, 3, 4)
    with e_sdpa_kernel([ESDPBackend.MATH, ESDPBackend.FLASH_ATTENTION]):
        assert ember.nn.functional.scaled_dot_product_attention(q, q, q).shape == (1, 2, 3, 4)
    for k in (sdpa_kernel, e_sdpa_kernel):
        with pytest.raises(AssertionError):
            with k("math"):
                pass


def test_sdpa_kernel_choice_as_torch():
    """The kernel sdpa runs, seen in its node, is the one PyTorch's CPU build chooses:
    the fused node where its conditions hold (4-d, one batch size, equal head dims,
    non-empty sequences, no dropout, a 2-d or 4-d mask needing no gradient), else the math
    composite; ``sdpa_kernel`` restricts the choice."""
    rng = np.random.default_rng(0)

    def arr(*shape):
        return rng.standard_normal(shape)
    q4, k4, v3 = arr(2, 3, 5, 8), arr(2, 3, 6, 8), arr(2, 3, 6, 3)
    cases = [
        ((q4, k4, k4), {}), ((arr(3, 5, 8), arr(3, 6, 8), arr(3, 6, 8)), {}),
        ((q4, k4, v3), {}), ((q4, k4, k4), {"dropout_p": 0.2}),
        ((q4, k4, k4), {"is_causal": True}), ((arr(2, 1, 5, 8), arr(1, 3, 6, 8),
                                               arr(1, 3, 6, 8)), {}),
        ((arr(2, 4, 5, 8), arr(2, 2, 6, 8), arr(2, 2, 6, 8)), {"enable_gqa": True}),
        ((q4, k4, k4), {"attn_mask": ("bool", (5, 6))}),
        ((q4, k4, k4), {"attn_mask": ("bool", (2, 1, 1, 6))}),
        ((q4, k4, k4), {"attn_mask": ("float", (3, 5, 6))}),
        ((q4, k4, k4), {"attn_mask": ("grad", (5, 6))}),
    ]
    for arrays, kw in cases:
        names = []
        for m in (ember, torch):
            ts = [m.tensor(a, requires_grad=True) for a in arrays]
            kwm = dict(kw)
            if "attn_mask" in kw:
                kind, shape = kw["attn_mask"]
                a = arr(*shape)
                kwm["attn_mask"] = m.tensor(a > 0) if kind == "bool" else \
                    m.tensor(a, requires_grad=kind == "grad")
            if "dropout_p" in kw:
                m.manual_seed(0)
            out = m.nn.functional.scaled_dot_product_attention(*ts, **kwm)
            names.append(out.grad_fn.name())
        fused = "ScaledDotProductFlashAttentionForCpuBackward0"
        assert (names[0] == fused) == (names[1] == fused), (kw, names)
    q = ember.ones(2, 3, 5, 8, requires_grad=True)
    with ember.nn.attention.sdpa_kernel([ember.nn.attention.SDPBackend.FLASH_ATTENTION]):
        with pytest.raises(RuntimeError, match="No available kernel"):
            ember.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    with torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        with pytest.raises(RuntimeError, match="No available kernel"):
            t = torch.ones(2, 3, 5, 8, requires_grad=True)
            torch.nn.functional.scaled_dot_product_attention(t, t, t, dropout_p=0.5)



# (shape in memory, permutation to the (..., L, E) layout attention reads)
_LAYOUTS = {"contiguous": ((2, 3, 5, 4), (0, 1, 2, 3)),
            "heads_inner": ((2, 5, 3, 4), (0, 2, 1, 3)),
            "seq_outer": ((5, 2, 3, 4), (1, 2, 0, 3)),
            "3d": ((6, 5, 4), (0, 1, 2)),
            "batch_inner": ((5, 6, 4), (1, 0, 2))}


@pytest.mark.parametrize("layout", sorted(_LAYOUTS))
@pytest.mark.parametrize("v_width", [4, 7])
def test_attention_output_lies_in_memory_as_torchs(layout, v_width):
    """PyTorch's fused CPU attention allocates its output like the query, so heads split
    from one projection merge back with a view (a Transformer layer's graph then has no
    clone): ember's output has torch's strides, values and gradients, whatever the
    query's layout and the value's width."""
    shape, perm = _LAYOUTS[layout]
    rng = np.random.default_rng(0)
    q = rng.standard_normal(shape).astype(np.float32)
    vshape = tuple(shape[p] for p in perm)[:-1] + (v_width,)
    v = rng.standard_normal(vshape).astype(np.float32)
    res = {}
    for m in (ember, torch):
        base = m.tensor(q, requires_grad=True)
        tv = m.tensor(v, requires_grad=True)
        qq = base.permute(*perm)
        out = m.nn.functional.scaled_dot_product_attention(qq, qq, tv)
        (out * m.arange(out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
        res[m.__name__] = (tuple(out.stride()), out.detach().numpy(), base.grad.numpy(),
                           tv.grad.numpy())
    e, t = res["ember"], res["torch"]
    assert e[0] == t[0]
    for a, b in zip(e[1:], t[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
