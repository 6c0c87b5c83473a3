"""Attention in ``torch.nn.functional``: ``scaled_dot_product_attention`` and
``multi_head_attention_forward`` (the math of ``nn.MultiheadAttention``).

Composites only: the scores ``q @ k^T``, one fused softmax over the last dim and
``weights @ v`` are ember ops, so first and second derivatives come from them.
Heads live in one ``(N, H, L, D)`` layout taken from the projections by a single
reshape and permute; ``matmul`` runs the ``N * H`` products in one batched call.

Re-exported from ``ember.nn.functional``.
"""
import math
import warnings

import numpy as np

from ember import _core as ember
from ember._tensor import Tensor, _mode_active
from ember.autograd.grad_mode import no_grad
from ember.ops.attention import FlashAttentionForCpu
from ember.ops.attention import scaled_dot_product_attention as _attention_op
from ember.ops.elementwise import MulScalar as _MulScalar

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")
_ndarray = np.ndarray


# ----- masks -------------------------------------------------------------------------------
def _dtype_label(dtype):
    """PyTorch's C++ type names, as its sdpa errors print them."""
    return {"float32": "float", "float64": "double", "float16": "c10::Half",
            "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
            "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool"}.get(dtype.name, dtype.name)


_fused_attention = FlashAttentionForCpu.apply


def _bool_to_bias(mask, dtype, allowed):
    """0 where ``mask == allowed``, -inf elsewhere, in ``dtype``."""
    zero = ember.zeros((), dtype=dtype, device=mask.device)
    ninf = ember.full((), _NEG_INF, dtype=dtype, device=mask.device)
    return ember.where(mask, zero, ninf) if allowed else ember.where(mask, ninf, zero)


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """PyTorch's ``F._canonical_mask``: a bool mask (True = masked out) becomes an additive
    float mask in ``target_type`` (-inf where True); a float mask is returned as is."""
    if mask is None:
        return None
    if mask.dtype != ember.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                      "Use same type for both instead.", stacklevel=3)
    if mask.dtype == ember.bool:
        # as PyTorch builds it (its traced graph: ``zeros_like``, ``masked_fill_``)
        mask = ember.zeros_like(mask, dtype=target_type).masked_fill_(mask, _NEG_INF)
    return mask


def _none_or_dtype(input):
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _causal_bias(L, S, dtype, device):
    """-inf above the diagonal of an ``(L, S)`` matrix (upper-left aligned), 0 elsewhere."""
    return ember.triu(ember.full((L, S), _NEG_INF, dtype=dtype, device=device), 1)


def _scores_bias(attn_mask, is_causal, L, S, dtype, device):
    """The additive bias on the scores: the mask's (:func:`_bias_of`), the causal one,
    or, with both (PyTorch's fused CPU kernel accepts both), their sum: the mask where
    the causal mask keeps a position and -inf elsewhere."""
    if not is_causal:
        return _bias_of(attn_mask, dtype)
    causal = _causal_bias(L, S, dtype, device)
    return causal if attn_mask is None else _bias_of(attn_mask, dtype) + causal


# ----- the attention core ------------------------------------------------------------------
def _dropout_mask(shape, p, like):
    """The scaled keep-mask ``F.dropout`` would draw for weights of ``shape`` (same random
    stream: ``bernoulli_(1 - p)`` in the weights' dtype, divided by ``1 - p``)."""
    with no_grad():
        if p == 1.0:
            return ember.zeros(shape, dtype=like.dtype, device=like.device)
        keep = ember.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(1 - p)
        return keep / (1 - p)


def _attend(q, k, v, bias, scale, dropout_p, safe, need_weights=False):
    """``dropout(softmax(q @ k^T * scale + bias)) @ v`` over the last two dims.

    ``safe``: rows whose scores are all -inf give zero weights (PyTorch's sdpa, through
    ``_safe_softmax``) instead of NaN (its ``need_weights`` path and fused kernels).
    Returns the output and, with ``need_weights``, also the weights (after dropout, as
    PyTorch returns them).
    """
    if not need_weights:
        shape = tuple(ember.broadcast_shapes(q.shape[:-2], k.shape[:-2])) + (q.shape[-2],
                                                                              k.shape[-2])
        dm = None
        if dropout_p > 0.0 and math.prod(shape):
            dm = _dropout_mask(shape, dropout_p, q)
        return _attention_op(q, k, v, bias, dm, scale, safe)
    s = ember.matmul(q * scale if scale != 1 else q, k.transpose(-2, -1))
    if bias is not None:
        s = (s + bias).to(s.dtype) if bias.dtype != s.dtype else s + bias
    a = ember.softmax(s, -1)
    if dropout_p > 0.0:
        from ember.nn.functional import dropout  # nn.functional imports this module
        a = dropout(a, dropout_p, True)
    return ember.matmul(a, v), a


def _repeat_heads(x, r):
    """``x.repeat_interleave(r, -3)`` as one expand and reshape."""
    shape = tuple(x.shape)
    x = x.unsqueeze(-3).expand(*shape[:-2], r, *shape[-2:])
    return x.reshape(*shape[:-3], shape[-3] * r, *shape[-2:])


def _check_sdpa(query, key, value, attn_mask, dropout_p, is_causal):
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{name}' must be "
                            f"Tensor, not {type(t).__name__}")
    if attn_mask is not None and not isinstance(attn_mask, Tensor):
        raise TypeError("scaled_dot_product_attention(): argument 'attn_mask' must be Tensor, "
                        f"not {type(attn_mask).__name__}")
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {_dtype_label(query.dtype)} key.dtype: "
                           f"{_dtype_label(key.dtype)} and value.dtype: "
                           f"{_dtype_label(value.dtype)} instead.")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError("Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {query.ndim} key.dim: {key.ndim} and "
                           f"value.dim: {value.ndim} instead.")
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"expected scalar type Float but found "
                           f"{query._type_name().split('.')[-1].replace('Tensor', '')}")
    if attn_mask is not None:
        md = attn_mask.dtype
        if md not in (ember.bool, ember.float32, query.dtype):
            raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query "
                               f"dtype, but got attn_mask.dtype: {_dtype_label(md)} and  "
                               f"query.dtype: {_dtype_label(query.dtype)} instead.")
    if dropout_p < 0.0 or dropout_p > 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value`` (PyTorch's
    ``F.scaled_dot_product_attention`` on CPU).

    ``query`` is ``(N, ..., Hq, L, E)``, ``key`` ``(N, ..., H, S, E)``, ``value``
    ``(N, ..., H, S, Ev)``; batch dims broadcast. ``attn_mask`` broadcasts to
    ``(N, ..., Hq, L, S)``: a bool mask keeps the positions that are True, a float mask
    is added to the scores. ``is_causal`` masks key ``j > i`` for query ``i``
    (upper-left aligned when ``L != S``). ``scale`` defaults to ``1 / sqrt(E)``.
    ``dropout_p`` drops attention weights (always, whatever the module's mode).
    With ``enable_gqa``, key and value heads are repeated to the query's head count.
    Query rows that can attend to nothing give zeros, as in PyTorch.

    The kernel is chosen as PyTorch chooses on CPU (and within
    ``ember.nn.attention.sdpa_kernel``): the fused one, one node, for 4-d inputs of one
    batch size, equal head dims, non-empty sequences, no dropout and a mask that is 2-d
    or 4-d and needs no gradient; else the math one, PyTorch's ops one by one.

        >>> q = ember.randn(2, 4, 8, 16)
        >>> F.scaled_dot_product_attention(q, q, q, is_causal=True).shape
        ember.Size([2, 4, 8, 16])
    """
    fast = _common_fused(query, key, value, attn_mask, dropout_p, enable_gqa)
    if fast is not None:
        # what the checks and the kernel choice below come to for this common call
        E = fast
        bias = _causal_bias(query.shape[-2], key.shape[-2], query.dtype,
                            query.device) if is_causal else None
        scale_factor = (1.0 / math.sqrt(E)) if scale is None else float(scale)
        return _fused_attention(query, key, value, bias, None, scale_factor, True)
    from ember.nn.attention import SDPBackend, enabled
    _check_sdpa(query, key, value, attn_mask, dropout_p, is_causal)
    if enable_gqa and query.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hk != hv or hq % hk != 0:
            raise RuntimeError("Number of heads in key and value must divide the number of "
                               f"heads in query (query has {hq}, key {hk}, value {hv})")
    qs, ks, vs = tuple(query.shape), tuple(key.shape), tuple(value.shape)
    L, S, E = qs[-2], ks[-2], qs[-1]
    kv_batch = ks[:-2]
    if enable_gqa and query.ndim >= 3:
        kv_batch = kv_batch[:-1] + qs[-3:-2]
    v_batch = vs[:-3] + kv_batch[-1:]
    lead = qs[:-2] if qs[:-2] == kv_batch == v_batch else tuple(
        ember.broadcast_shapes(qs[:-2], kv_batch, v_batch))
    out_shape = lead + (L, vs[-1])
    if attn_mask is not None:
        score_shape = out_shape[:-1] + (S,)
        try:
            full = tuple(ember.broadcast_shapes(score_shape, tuple(attn_mask.shape)))
        except RuntimeError:
            full = None
        if full != score_shape:
            raise RuntimeError(f"output with shape {list(score_shape)} doesn't match the "
                               f"broadcast shape {list(full or attn_mask.shape)}")
    if value.numel() == 0 or 0 in out_shape:
        # nothing to attend to or nothing asked: zeros, still linked to the inputs (as
        # PyTorch: their sums times zero)
        zero = ember.zeros(out_shape, dtype=query.dtype, device=query.device)
        return zero + _MulScalar.apply(query.sum() + key.sum() + value.sum(), 0.0)
    # with E == 0 every score is an empty sum, 0 (torch scales the empty q and k by inf,
    # leaving them empty): any finite scale gives the same
    scale_factor = (1.0 / math.sqrt(E) if E else 1.0) if scale is None else float(scale)
    if enabled(SDPBackend.FLASH_ATTENTION) and _fused_fits(query, key, value, attn_mask,
                                                            dropout_p, enable_gqa):
        if query.shape[-3] != key.shape[-3]:
            r = query.shape[-3] // key.shape[-3]
            key, value = _repeat_heads(key, r), _repeat_heads(value, r)
        bias = _scores_bias(attn_mask, is_causal, L, S, query.dtype, query.device)
        return _fused_attention(query, key, value, bias, None, scale_factor, True)
    if not enabled(SDPBackend.MATH):
        raise RuntimeError("No available kernel. Aborting execution.")
    if attn_mask is not None and is_causal:
        # (PyTorch's fused CPU kernel takes both, its math kernel neither)
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not "
                           "be set when is_causal=True")
    return _math_attention(query, key, value, attn_mask, dropout_p, is_causal, scale_factor,
                           enable_gqa)


_FLASH = []  # (the enabled test and the backend, imported on first use)
_FUSED_DTYPES = frozenset("fd")  # float32, float64
_NUMBERS = (float, int)


def _common_fused(q, k, v, mask, dropout_p, enable_gqa):
    """The head size when a ``scaled_dot_product_attention`` call is the common one that
    every check passes and the fused kernel takes, outside any mode: plain Tensors on
    NumPy float32 or float64 arrays, 4-d, one batch and head count, no size 0, one head
    size, unit last strides, no mask, no dropout, no grouped heads, the kernel enabled.
    None otherwise (the full path then decides, and raises what it raises)."""
    if _mode_active[0]:
        return None  # (a capture reads sizes through the shapes: the full path)
    if mask is not None or type(dropout_p) not in _NUMBERS or dropout_p or enable_gqa or \
            type(q) is not Tensor or \
            type(k) is not Tensor or type(v) is not Tensor:
        return None
    qd, kd, vd = q._data, k._data, v._data
    if type(qd) is not _ndarray or type(kd) is not _ndarray or type(vd) is not _ndarray:
        return None
    dt = qd.dtype
    if kd.dtype != dt or vd.dtype != dt or dt.char not in _FUSED_DTYPES:
        return None
    qs, ks, vs = qd.shape, kd.shape, vd.shape
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4 or 0 in qs or 0 in ks or 0 in vs:
        return None
    if not qs[0] == ks[0] == vs[0] or not qs[1] == ks[1] == vs[1] or ks[2] != vs[2] or \
            not qs[3] == ks[3] == vs[3]:
        return None
    isz = dt.itemsize
    if qd.strides[3] // isz != 1 or kd.strides[3] // isz != 1 or vd.strides[3] // isz != 1:
        return None
    if not _FLASH:
        from ember.nn.attention import SDPBackend, enabled
        _FLASH[:] = [enabled, SDPBackend.FLASH_ATTENTION]
    if not _FLASH[0](_FLASH[1]):
        return None
    return qs[3]


def _bias_of(mask, dtype):
    """A mask as the additive bias on the scores (None for None)."""
    if mask is None or mask.dtype != ember.bool:
        return mask
    return _bool_to_bias(mask, dtype, allowed=True)


def _fused_fits(q, k, v, mask, dropout_p, enable_gqa):
    """PyTorch's conditions for its fused CPU attention kernel."""
    if dropout_p > 0.0 or not (q.ndim == k.ndim == v.ndim == 4):
        return False
    if q.dtype not in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
        return False
    # plain tuples: an ember.Size indexes in Python, and this runs on every call
    qs, ks, vs = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if not qs[0] == ks[0] == vs[0] or ks[1] != vs[1]:
        return False
    if qs[1] != ks[1] and not (enable_gqa and qs[1] % ks[1] == 0):
        return False
    if not qs[3] == ks[3] == vs[3] or 0 in (qs[2], ks[2]):
        return False
    if any(t.stride(-1) != 1 for t in (q, k, v)):
        return False
    if mask is None:
        return True
    ms = tuple(mask.shape)
    if mask.requires_grad or len(ms) not in (2, 4) or ms[-2] not in (1, qs[2]) \
            or ms[-1] not in (1, ks[2]):
        return False
    return len(ms) == 2 or (ms[0] in (1, qs[0]) and ms[1] in (1, qs[1]))


def _math_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """PyTorch's math kernel, op for op: q and k^T each scaled by ``sqrt(scale)``, the
    mask added in place to the scores, ``_safe_softmax``, dropout, the product with v.
    Half-precision inputs are computed in float32, as PyTorch does on CPU."""
    from ember.ops.softmaxes import _safe_softmax
    dtype = query.dtype
    bias = _scores_bias(attn_mask, is_causal, query.shape[-2], key.shape[-2], dtype,
                        query.device)
    if dtype in (ember.float16, ember.bfloat16):
        query, key, value = (t.to(ember.float32) for t in (query, key, value))
    root = math.sqrt(abs(scale))
    q = _MulScalar.apply(query, -root if scale < 0 else root)
    if enable_gqa and query.ndim >= 3 and query.shape[-3] != key.shape[-3]:
        r = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(r, -3), value.repeat_interleave(r, -3)
    attn = ember.matmul(q, _MulScalar.apply(key.transpose(-2, -1), root))
    if bias is not None:
        attn.add_(bias)
    attn = _safe_softmax(attn, -1)
    if dropout_p > 0.0:
        attn = attn * _dropout_mask(tuple(attn.shape), dropout_p, attn)
    out = ember.matmul(attn, value)
    return out.to(dtype) if out.dtype != dtype else out


# ----- multi-head attention ----------------------------------------------------------------
def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """PyTorch's ``F._mha_shape_check``: True for batched (3-D) input, False for 2-D."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be "
                                 f"3-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 "respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError("For batched (3-D) `query`, expected `key_padding_mask` to be "
                                 f"`None` or 2-D but found {key_padding_mask.dim()}-D tensor "
                                 "instead")
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError("For batched (3-D) `query`, expected `attn_mask` to be `None`, "
                                 f"2-D or 3-D but found {attn_mask.dim()}-D tensor instead")
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to be "
                                 f"2-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 "respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError("For unbatched (2-D) `query`, expected `key_padding_mask` to "
                                 f"be `None` or 1-D but found {key_padding_mask.dim()}-D tensor "
                                 "instead")
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError("For unbatched (2-D) `query`, expected `attn_mask` to be "
                                     f"`None`, 2-D or 3-D but found {attn_mask.dim()}-D tensor "
                                     "instead")
            if attn_mask.dim() == 3:
                expected = (num_heads, query.shape[0], key.shape[0])
                if tuple(attn_mask.shape) != expected:
                    raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                         f"{attn_mask.shape}")
        return False
    raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                         f"{query.dim()}-D query tensor")


def _in_projection_packed(q, k, v, w, b=None):
    """PyTorch's ``F._in_projection_packed``: q, k, v projected by the packed ``(3E, E)``
    weight, with its ops: one product when they are the same tensor (or k is v), its
    output split by unflatten/unsqueeze/transpose/squeeze, a copy and a select per part."""
    E = q.size(-1)
    if k is v:
        if q is k:
            proj = _linear(q, w, b)
            proj = proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2)
            proj = proj.contiguous()
            return proj[0], proj[1], proj[2]
        w_q, w_kv = w.split([E, E * 2])
        b_q, b_kv = (None, None) if b is None else b.split([E, E * 2])
        q_proj = _linear(q, w_q, b_q)
        kv = _linear(k, w_kv, b_kv)
        kv = kv.unflatten(-1, (2, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        return q_proj, kv[0], kv[1]
    w_q, w_k, w_v = w.chunk(3)
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return _linear(q, w_q, b_q), _linear(k, w_k, b_k), _linear(v, w_v, b_v)


def _in_projection(q, k, v, w_q, w_k, w_v, b_q=None, b_k=None, b_v=None):
    """PyTorch's ``F._in_projection``: three separate projections to ``Eq`` features."""
    Eq, Ek, Ev = q.size(-1), k.size(-1), v.size(-1)
    for name, w, shape in (("query", w_q, (Eq, Eq)), ("key", w_k, (Eq, Ek)),
                           ("value", w_v, (Eq, Ev))):
        if tuple(w.shape) != shape:
            raise AssertionError(f"expecting {name} weights shape of {shape}, but got "
                                 f"{w.shape}")
    for name, b in (("query", b_q), ("key", b_k), ("value", b_v)):
        if b is not None and tuple(b.shape) != (Eq,):
            raise AssertionError(f"expecting {name} bias shape of {(Eq,)}, but got {b.shape}")
    return _linear(q, w_q, b_q), _linear(k, w_k, b_k), _linear(v, w_v, b_v)


def _linear(x, w, b):
    from ember.nn.functional import linear  # nn.functional imports this module
    return linear(x, w, b)


def _heads(x, seq_dim, num_heads, head_dim):
    """``(L, N, E)`` (``seq_dim=0``) or ``(N, L, E)`` (``seq_dim=1``) -> ``(N, H, L, D)``."""
    x = x.unflatten(-1, (num_heads, head_dim))        # (., ., H, D): a view
    return x.permute(1, 2, 0, 3) if seq_dim == 0 else x.permute(0, 2, 1, 3)


def _heads_packed(proj, seq_dim, parts, num_heads, head_dim):
    """A packed projection ``(., ., parts * E)`` -> ``parts`` tensors ``(N, H, L, D)``,
    all views of ``proj`` taken by one reshape and one permute."""
    x = proj.unflatten(-1, (parts, num_heads, head_dim))
    x = x.permute(2, 1, 3, 0, 4) if seq_dim == 0 else x.permute(2, 0, 3, 1, 4)
    return x.unbind(0)


def _check_key_padding(key_padding_mask, bsz, src_len):
    if key_padding_mask.shape[0] != bsz:
        raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got "
                             f"{key_padding_mask.shape[0]}")
    if key_padding_mask.shape[1] != src_len:
        raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                             f"{key_padding_mask.shape[1]}")


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """The forward pass of :class:`~ember.nn.MultiheadAttention` (PyTorch's
    ``F.multi_head_attention_forward``).

    ``query`` is ``(L, N, E)`` or unbatched ``(L, E)``; ``key``/``value`` ``(S, N, E)``
    or ``(S, E)``. Returns ``(attn_output, attn_output_weights)``; the weights are
    None unless ``need_weights``, averaged over heads when ``average_attn_weights``.
    ``key_padding_mask`` ``(N, S)`` and ``attn_mask`` ``(L, S)`` or ``(N * H, L, S)``
    take True (bool) for masked positions, or float values added to the scores.
    """
    return _mha_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                        in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                        out_proj_weight, out_proj_bias, training, key_padding_mask,
                        need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
                        k_proj_weight, v_proj_weight, static_k, static_v,
                        average_attn_weights, is_causal)


def _mha_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                 in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight,
                 out_proj_bias, training=True, key_padding_mask=None, need_weights=True,
                 attn_mask=None, use_separate_proj_weight=False, q_proj_weight=None,
                 k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None,
                 average_attn_weights=True, is_causal=False, batch_first=False,
                 fast_path=False):
    """``multi_head_attention_forward`` with two ember-only switches:

    ``batch_first``: batched inputs are ``(N, L, E)`` and so is the output (the module's
    layout: transposed around the computation, as PyTorch's module does).
    ``fast_path``: compute as PyTorch's fused inference kernel does (masks merged,
    ``is_causal`` ignored, plain softmax: rows with nothing to attend to are NaN), in
    ember's own layout; otherwise the ops are PyTorch's, so the autograd graph, traces and
    profiles show its nodes.
    """
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
        batch_first = False
    transposed = batch_first and not fast_path
    if transposed:
        # PyTorch's module transposes batch-first inputs to (L, N, E), keeping which of
        # them are the same tensor, and transposes the output back
        if key is value:
            if query is key:
                query = key = value = query.transpose(1, 0)
            else:
                query, key = query.transpose(1, 0), key.transpose(1, 0)
                value = key
        else:
            query, key, value = (t.transpose(1, 0) for t in (query, key, value))
        batch_first = False
    seq_dim = 1 if batch_first else 0
    bsz = query.shape[1 - seq_dim]
    tgt_len, embed_dim = query.shape[seq_dim], query.shape[2]
    src_len = key.shape[seq_dim]

    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       _none_or_dtype(attn_mask), "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if fast_path:
        is_causal = False
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None     # the hint replaces the mask: sdpa's causal path
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if key_padding_mask is not None:
            is_causal = False

    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
    elif key.shape != value.shape:
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    if not fast_path:
        out, weights = _mha_unfused(
            query, key, value, num_heads, head_dim, in_proj_weight, in_proj_bias, bias_k,
            bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training,
            key_padding_mask, need_weights, attn_mask, use_separate_proj_weight,
            q_proj_weight, k_proj_weight, v_proj_weight, static_k, static_v,
            average_attn_weights, is_causal)
        if not is_batched:
            out = out.squeeze(1)
            if weights is not None:
                weights = weights.squeeze(0)
        return (out.transpose(1, 0) if transposed else out), weights

    # ----- PyTorch's fused inference kernel: the in-projection straight into (N, H, L, D)
    # views (no autograd graph to show here: the fast path runs without grad)
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        if query is key and key is value:
            q, k, v = _heads_packed(_linear(query, in_proj_weight, in_proj_bias), seq_dim, 3,
                                    num_heads, head_dim)
        elif key is value:
            E = embed_dim
            b = in_proj_bias
            q = _heads(_linear(query, in_proj_weight[:E], None if b is None else b[:E]),
                       seq_dim, num_heads, head_dim)
            k, v = _heads_packed(_linear(key, in_proj_weight[E:], None if b is None else b[E:]),
                                 seq_dim, 2, num_heads, head_dim)
        else:
            q, k, v = (_heads(t, seq_dim, num_heads, head_dim) for t in _in_projection_packed(
                query, key, value, in_proj_weight, in_proj_bias))
    else:
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight "
                                     "is None")
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = (_heads(t, seq_dim, num_heads, head_dim) for t in _in_projection(
            query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, b_q, b_k, b_v))

    # ----- masks as additive float biases, 4-D (N or 1, H or 1, L, S)
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0).unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(bsz * num_heads, tgt_len, src_len)}.")
            attn_mask = attn_mask.view(bsz, num_heads, tgt_len, src_len)
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    extra = []     # key/value columns appended after the source: bias_kv, zero attention
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        extra.append((bias_k, bias_v))
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")
    for static, name in ((static_k, "k"), (static_v, "v")):
        if static is not None:
            if static.size(0) != bsz * num_heads:
                raise AssertionError(f"expecting static_{name}.size(0) of {bsz * num_heads}, "
                                     f"but got {static.size(0)}")
            if static.size(2) != head_dim:
                raise AssertionError(f"expecting static_{name}.size(2) of {head_dim}, but got "
                                     f"{static.size(2)}")
    if static_k is not None:
        k = static_k.view(bsz, num_heads, static_k.shape[1], head_dim)
    if static_v is not None:
        v = static_v.view(bsz, num_heads, static_v.shape[1], head_dim)
    if extra:
        bk, bv = (b.reshape(1, 1, -1) for b in extra[0])  # (E,) or (1, 1, E): one column
        k = ember.cat([k, _heads(bk, 0, num_heads, head_dim).expand(bsz, -1, -1, -1)], 2)
        v = ember.cat([v, _heads(bv, 0, num_heads, head_dim).expand(bsz, -1, -1, -1)], 2)
    if add_zero_attn:
        z = ember.zeros((bsz, num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v = ember.cat([k, z], 2), ember.cat([v, z], 2)
    n_extra = len(extra) + bool(add_zero_attn)
    if n_extra:
        from ember.nn.functional import pad  # nn.functional imports this module
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, n_extra))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, n_extra))
    src_len = k.shape[2]

    if key_padding_mask is not None:
        _check_key_padding(key_padding_mask, bsz, src_len)
        kpm = key_padding_mask.view(bsz, 1, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if not training:
        dropout_p = 0.0
    if is_causal and attn_mask is None:
        attn_mask = _causal_bias(tgt_len, src_len, q.dtype, q.device)
    safe = not need_weights and not fast_path
    if q.numel() == 0 or src_len == 0:
        safe = True
    out = _attend(q, k, v, attn_mask, 1.0 / math.sqrt(head_dim), dropout_p, safe,
                  need_weights=need_weights)
    weights = None
    if need_weights:
        out, weights = out
        if average_attn_weights:
            weights = weights.mean(1)
        if not is_batched:
            weights = weights.squeeze(0)
    # (N, H, L, D) -> (L, N, E) or (N, L, E), then the output projection
    out = out.permute(2, 0, 1, 3) if seq_dim == 0 else out.permute(0, 2, 1, 3)
    out = _linear(out.reshape(out.shape[0], out.shape[1], embed_dim), out_proj_weight,
                  out_proj_bias)
    if not is_batched:
        out = out.squeeze(1)
    return out, weights


def _mha_unfused(query, key, value, num_heads, head_dim, in_proj_weight, in_proj_bias, bias_k,
                 bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training,
                 key_padding_mask, need_weights, attn_mask, use_separate_proj_weight,
                 q_proj_weight, k_proj_weight, v_proj_weight, static_k, static_v,
                 average_attn_weights, is_causal):
    """Multi-head attention on ``(L, N, E)`` inputs with PyTorch's ops, one for one, so
    that ``grad_fn`` chains, pictures and traces show its nodes: heads split by
    ``view``/``transpose`` to ``(N * H, L, D)``, ``bmm``/``baddbmm`` and ``softmax`` when
    the weights are asked for, ``scaled_dot_product_attention`` otherwise.

    ``attn_mask`` and ``key_padding_mask`` are float (already canonical). Returns the
    ``(L, N, E)`` output and the weights (or None)."""
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if not use_separate_proj_weight:
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    else:
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight "
                                     "is None")
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight,
                                 v_proj_weight, b_q, b_k, b_v)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                                   f"should be {(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    from ember.nn.functional import pad  # nn.functional imports this module
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = ember.cat([k, bias_k.repeat(1, bsz, 1)])
        v = ember.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")

    q = q.view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    kv = []
    for t, static, name in ((k, static_k, "k"), (v, static_v, "v")):
        if static is None:
            kv.append(t.view(t.shape[0], bsz * num_heads, head_dim).transpose(0, 1))
            continue
        if static.size(0) != bsz * num_heads:
            raise AssertionError(f"expecting static_{name}.size(0) of {bsz * num_heads}, but "
                                 f"got {static.size(0)}")
        if static.size(2) != head_dim:
            raise AssertionError(f"expecting static_{name}.size(2) of {head_dim}, but got "
                                 f"{static.size(2)}")
        kv.append(static)
    k, v = kv
    if add_zero_attn:
        zeros = (bsz * num_heads, 1, head_dim)
        k = ember.cat([k, ember.zeros(zeros, dtype=k.dtype, device=k.device)], dim=1)
        v = ember.cat([v, ember.zeros(zeros, dtype=v.dtype, device=v.device)], dim=1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.size(1)

    if key_padding_mask is not None:
        _check_key_padding(key_padding_mask, bsz, src_len)
        kpm = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0

    if need_weights:
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        q_scaled = q * math.sqrt(1.0 / float(q.shape[-1]))
        if attn_mask is not None:
            w = ember.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        else:
            w = ember.bmm(q_scaled, k.transpose(-2, -1))
        w = ember.softmax(w, -1)
        if dropout_p > 0.0:
            from ember.nn.functional import dropout  # nn.functional imports this module
            w = dropout(w, p=dropout_p)
        out = ember.bmm(w, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = _linear(out, out_proj_weight, out_proj_bias)
        out = out.view(tgt_len, bsz, out.size(1))
        w = w.view(bsz, num_heads, tgt_len, src_len)
        return out, (w.mean(dim=1) if average_attn_weights else w)

    if attn_mask is not None:
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = _linear(out, out_proj_weight, out_proj_bias)
    return out.view(tgt_len, bsz, out.size(1)), None
