"""ONNX converters: the attention family (Attention, RotaryEmbedding)."""
import math

import numpy as np

import ember.nn.functional as F
from ember import _core as E
from ember.onnx._import_ops import ember_dtype
from ember.onnx._registry import importer

_NEG_INF = -math.inf


def _heads(x, n):
    """(batch, seq, n * d) -> (batch, n, seq, d)."""
    b, s, _ = x.shape
    return x.reshape(b, s, n, -1).transpose(1, 2)


def _window_bias(q_len, kv_len, left, right, offset, dtype):
    """0 where key j is within [p - left, p + right] of query position p = i + offset."""
    i = E.arange(q_len).reshape(-1, 1)
    j = E.arange(kv_len).reshape(1, -1)
    if isinstance(offset, E.Tensor):  # per batch: (b, 1, 1, 1)
        i = i.reshape(1, 1, q_len, 1) + offset.reshape(-1, 1, 1, 1)
    else:
        i = i + offset
    diff = i - j
    allowed = E.ones_like(diff, dtype=E.bool)
    if left >= 0:
        allowed = allowed & (diff <= left)
    if right >= 0:
        allowed = allowed & (-diff <= right)
    return E.where(allowed, E.zeros((), dtype=dtype), E.full((), _NEG_INF, dtype=dtype))


def _causal_bias(base, q_len, kv_len, offset, dtype):
    i = E.arange(q_len).reshape(-1, 1)
    j = E.arange(kv_len).reshape(1, -1)
    if isinstance(offset, E.Tensor):
        allowed = j <= i.reshape(1, 1, q_len, 1) + offset.reshape(-1, 1, 1, 1)
    else:
        allowed = j <= i + offset
    return E.where(allowed, base, E.full((), _NEG_INF, dtype=dtype))


@importer("Attention")
def _attention(cx, q, k, v, attn_mask=None, past_key=None, past_value=None,
               nonpad_kv_seqlen=None, is_causal=0, kv_num_heads=None, q_num_heads=None,
               qk_matmul_output_mode=0, scale=None, softcap=0.0, softmax_precision=None,
               left_window_size=-1, right_window_size=-1):
    three_d = q.dim() == 3
    batch = q.shape[0]
    if three_d:
        q, k, v = _heads(q, q_num_heads), _heads(k, kv_num_heads), _heads(v, kv_num_heads)
    dt = q.dtype
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = E.tensor(math.sqrt(s), dtype=dt)
    k = E.cat([past_key, k], 2) if past_key is not None else k
    v = E.cat([past_value, v], 2) if past_value is not None else v
    present_k, present_v = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    bias = E.zeros(q_len, kv_len, dtype=dt)
    if attn_mask is not None and attn_mask.shape[-1] < kv_len:
        pad_value = False if attn_mask.dtype == E.bool else _NEG_INF
        attn_mask = F.pad(attn_mask, [0, kv_len - attn_mask.shape[-1]], value=pad_value)
    if nonpad_kv_seqlen is not None and past_key is None:
        offset = nonpad_kv_seqlen.reshape(-1) - q_len
    else:
        offset = past_key.shape[2] if past_key is not None else 0
    if is_causal:
        base = bias
        if attn_mask is not None:
            base = E.where(attn_mask, E.zeros((), dtype=dt), E.full((), _NEG_INF, dtype=dt)) \
                if attn_mask.dtype == E.bool else attn_mask
        bias = _causal_bias(base + E.zeros(q_len, kv_len, dtype=dt), q_len, kv_len, offset,
                            dt)
    elif attn_mask is not None:
        if attn_mask.dtype == E.bool:
            attn_mask = E.where(attn_mask, E.zeros((), dtype=dt),
                                E.full((), _NEG_INF, dtype=dt))
        bias = bias + attn_mask
    if left_window_size >= 0 or right_window_size >= 0:
        bias = bias + _window_bias(q_len, kv_len, left_window_size, right_window_size,
                                   offset, dt)
    if nonpad_kv_seqlen is not None:
        keep = E.arange(kv_len).reshape(1, -1) < nonpad_kv_seqlen.reshape(-1, 1)
        bias = bias + E.where(keep, E.zeros((), dtype=dt),
                              E.full((), _NEG_INF, dtype=dt)).reshape(batch, 1, 1, kv_len)
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk and hq % hk == 0:
        k = k.repeat_interleave(hq // hk, 1)
        v = v.repeat_interleave(hq // hk, 1)
    qk = (q * s) @ (k * s).transpose(-1, -2)
    if softcap:
        qk = E.tanh(qk / softcap) * softcap
    scores = qk + bias
    qk_out = qk
    if qk_matmul_output_mode == 2:
        qk_out = scores
    if softmax_precision is not None:
        scores = scores.to(ember_dtype(softmax_precision, "Attention softmax_precision"))
    probs = F.softmax(scores, -1)
    probs = E.nan_to_num(probs, nan=0.0) if probs.isnan().any() else probs
    all_masked = E.isneginf(bias.amax(-1, keepdim=True))
    probs = E.where(all_masked, E.zeros((), dtype=probs.dtype), probs)
    if qk_matmul_output_mode == 3:
        qk_out = probs
    y = probs.to(dt) @ v
    if three_d:
        y = y.transpose(1, 2).reshape(batch, q_len, -1)
    return y, present_k, present_v, qk_out.to(dt)


@importer("RotaryEmbedding")
def _rotary(cx, x, cos_cache, sin_cache, position_ids=None, interleaved=0, num_heads=0,
            rotary_embedding_dim=0):
    four_d = x.dim() == 4
    if four_d:  # (batch, heads, seq, d) -> (batch, seq, heads, d)
        xs = x.transpose(1, 2)
    else:
        b, s, hidden = x.shape
        xs = x.reshape(b, s, num_heads, hidden // num_heads)
    d = xs.shape[-1]
    rd = rotary_embedding_dim or d
    rot, rest = xs[..., :rd], xs[..., rd:]
    if position_ids is not None:
        cos, sin = cos_cache[position_ids], sin_cache[position_ids]
    else:
        cos, sin = cos_cache, sin_cache
    cos = cos[..., :rd // 2].unsqueeze(2)
    sin = sin[..., :rd // 2].unsqueeze(2)
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., :rd // 2], rot[..., rd // 2:]
    r1 = x1 * cos - x2 * sin
    r2 = x2 * cos + x1 * sin
    if interleaved:
        out = E.stack([r1, r2], -1).reshape(rot.shape)
    else:
        out = E.cat([r1, r2], -1)
    y = E.cat([out, rest], -1)
    if four_d:
        return y.transpose(1, 2)
    return y.reshape(x.shape)


@importer("SwiGLU")
def _swiglu(cx, a, b, alpha=1.0):
    return a * E.sigmoid(alpha * a) * b


@importer("LinearAttention")
def _linear_attention(cx, q, k, v, past_state=None, decay=None, beta=None, chunk_size=None,
                      kv_num_heads=None, q_num_heads=None, scale=None,
                      update_rule="gated_delta"):
    """The recurrent (linear) attention family: a (d_k, d_v) state per KV head, decayed
    (gated rules), corrected toward the value (delta rules), written with k ⊗ v and read
    with q, computed in float32 step by step."""
    gating = update_rule in ("gated", "gated_delta")
    delta = update_rule in ("delta", "gated_delta")
    b, t, _ = q.shape
    out_dtype = q.dtype
    q4 = _heads(q, q_num_heads).float()
    k4 = _heads(k, kv_num_heads).float()
    v4 = _heads(v, kv_num_heads).float()
    d_k, d_v = q4.shape[-1], v4.shape[-1]
    group = q_num_heads // kv_num_heads
    if decay is not None:
        g4 = decay.reshape(b, t, kv_num_heads, -1).transpose(1, 2).float()
    if beta is not None:
        beta4 = beta.reshape(b, t, beta.shape[-1], 1).transpose(1, 2).float()
    state_dtype = past_state.dtype if past_state is not None else out_dtype
    state = past_state.float() if past_state is not None else \
        E.zeros(b, kv_num_heads, d_k, d_v)
    s = 1.0 / math.sqrt(d_k) if not scale else float(scale)
    outs = []
    for i in range(t):
        kt, vt = k4[:, :, i], v4[:, :, i]
        if gating:
            state = state * E.exp(g4[:, :, i]).unsqueeze(-1)
        if delta:
            retrieved = (state * kt.unsqueeze(-1)).sum(-2)
            vt = beta4[:, :, i] * (vt - retrieved)
        state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2)
        read = state.repeat_interleave(group, 1) if group > 1 else state
        outs.append(s * (q4[:, :, i].unsqueeze(-1) * read).sum(-2))
    y = E.stack(outs, 2).transpose(1, 2).reshape(b, t, -1)
    return y.to(out_dtype), state.to(state_dtype)


@importer("FlexAttention", domain="ai.onnx.preview")
def _flex_attention(cx, q, k, v, scale=None, score_mod=None, prob_mod=None,
                    softmax_precision=None):
    """Attention with optional ``score_mod``/``prob_mod`` subgraphs applied to the scores
    and to the probabilities."""
    hq, hkv = q.shape[1], k.shape[1]
    if hq != hkv:
        k = k.repeat_interleave(hq // hkv, 1)
        v = v.repeat_interleave(hq // hkv, 1)
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    root = E.tensor(math.sqrt(float(np.float32(s))), dtype=q.dtype)
    scores = (q * root) @ (k * root).transpose(-1, -2)
    compute = ember_dtype(softmax_precision, "FlexAttention") if softmax_precision else \
        (E.float32 if q.dtype == E.float16 else q.dtype)
    scores = scores.to(compute)
    if score_mod is not None:
        scores = _mod(cx, score_mod, scores).to(compute)
    probs = F.softmax(scores, -1)
    if prob_mod is not None:
        probs = _mod(cx, prob_mod, probs).to(compute)
    return (probs @ v.to(compute)).to(v.dtype)


def _mod(cx, graph, x):
    from ember.onnx._import import run_graph
    env = dict(cx.runner)
    env[graph.input[0].name] = x
    return run_graph(graph, env, cx.opset, cx.training)[0]
