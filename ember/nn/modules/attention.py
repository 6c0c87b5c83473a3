"""MultiheadAttention (PyTorch's ``torch.nn.MultiheadAttention``)."""
from ember import _core as ember
from ember.nn import functional_attention as FA
from ember.nn import init
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = ["MultiheadAttention"]


class NonDynamicallyQuantizableLinear(Linear):
    """A :class:`Linear` under PyTorch's name for ``MultiheadAttention.out_proj``."""


def _fastpath_enabled():
    from ember.backends import mha  # torch.backends sits above nn
    return mha.get_fastpath_enabled()


def _grad_blocks_fastpath(tensors):
    """PyTorch's fused inference kernels run only when no argument needs a gradient."""
    return ember.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


class MultiheadAttention(Module):
    """Attention from ``query`` to ``key``/``value`` in ``num_heads`` parallel heads:
    ``out_proj(concat_h softmax(q_h k_h^T / sqrt(d)) v_h)`` with ``q, k, v`` projected by
    ``in_proj_weight`` (or ``q/k/v_proj_weight`` when ``kdim``/``vdim`` differ from
    ``embed_dim``).

    Parameters and their initialisation are PyTorch's (xavier_uniform_ projections, zero
    biases, xavier_normal_ ``bias_k``/``bias_v``), so ``state_dict`` keys and checkpoints
    match ``torch.nn.MultiheadAttention``. Inputs are ``(L, N, E)`` (``(N, L, E)`` with
    ``batch_first``) or unbatched ``(L, E)``.

        >>> mha = ember.nn.MultiheadAttention(16, 4, batch_first=True)
        >>> x = ember.randn(2, 5, 16)
        >>> out, weights = mha(x, x, x)
        >>> out.shape, weights.shape
        (ember.Size([2, 5, 16]), ember.Size([2, 5, 5]))
    """

    __constants__ = ["batch_first"]

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        fk = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(ember.empty((embed_dim, embed_dim), **fk))
            self.k_proj_weight = Parameter(ember.empty((embed_dim, self.kdim), **fk))
            self.v_proj_weight = Parameter(ember.empty((embed_dim, self.vdim), **fk))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(ember.empty((3 * embed_dim, embed_dim), **fk))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(ember.empty(3 * embed_dim, **fk))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **fk)
        if add_bias_kv:
            self.bias_k = Parameter(ember.empty((1, 1, embed_dim), **fk))
            self.bias_v = Parameter(ember.empty((1, 1, embed_dim), **fk))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def __setstate__(self, state):
        # checkpoints pickled before the attribute existed
        if "_qkv_same_embed_dim" not in state:
            state["_qkv_same_embed_dim"] = True
        super().__setstate__(state)

    def _uses_fastpath(self, query, key, value, attn_mask, key_padding_mask):
        """Whether PyTorch would run its fused inference kernel for this call (its numbers
        differ from the slow path only in rows with nothing to attend to: NaN, not 0)."""
        if self.training:  # (the usual answer while training, asked first: all are reads)
            return False
        if ((attn_mask is not None and attn_mask.dtype.is_floating_point)
                or (key_padding_mask is not None and key_padding_mask.dtype.is_floating_point)):
            return False
        if (not _fastpath_enabled() or query.dim() != 3 or query is not key
                or key is not value or self.in_proj_weight is None or self.in_proj_bias is None
                or query.dtype != self.in_proj_weight.dtype
                or query.dtype != self.in_proj_bias.dtype or self.training
                or self.num_heads % 2 != 0 or not self.batch_first or self.bias_k is not None
                or self.bias_v is not None or self.add_zero_attn
                or not self._qkv_same_embed_dim):
            return False
        return not _grad_blocks_fastpath((query, self.in_proj_weight, self.in_proj_bias,
                                          self.out_proj.weight, self.out_proj.bias))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        """Attend from ``query`` to ``key``/``value``; returns ``(attn_output,
        attn_output_weights)``.

        ``key_padding_mask`` ``(N, S)`` (or ``(S)`` unbatched): True (or -inf) marks keys
        to ignore. ``attn_mask`` ``(L, S)`` or ``(N * num_heads, L, S)``: True marks
        pairs not allowed to attend, a float mask is added to the scores. The weights
        are None unless ``need_weights``; ``(N, L, S)`` averaged over heads, or
        ``(N, num_heads, L, S)`` with ``average_attn_weights=False``. ``is_causal`` is a
        hint that ``attn_mask`` is the causal mask.
        """
        fast = self._uses_fastpath(query, key, value, attn_mask, key_padding_mask)
        key_padding_mask = FA._canonical_mask(key_padding_mask, "key_padding_mask",
                                              FA._none_or_dtype(attn_mask), "attn_mask",
                                              query.dtype)
        attn_mask = FA._canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                       check_other=False)
        kw = dict(training=self.training, key_padding_mask=key_padding_mask,
                  need_weights=need_weights, attn_mask=attn_mask,
                  average_attn_weights=average_attn_weights, is_causal=is_causal,
                  batch_first=self.batch_first, fast_path=fast)
        if not self._qkv_same_embed_dim:
            kw.update(use_separate_proj_weight=True, q_proj_weight=self.q_proj_weight,
                      k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight)
        return FA._mha_forward(query, key, value, self.embed_dim, self.num_heads,
                               self.in_proj_weight, self.in_proj_bias, self.bias_k,
                               self.bias_v, self.add_zero_attn, self.dropout,
                               self.out_proj.weight, self.out_proj.bias, **kw)

    def merge_masks(self, attn_mask, key_padding_mask, query):
        """PyTorch's ``merge_masks``: the one mask its fused kernel takes, and its type
        (0: attn_mask, 1: key_padding_mask, 2: both, expanded to ``(N, H, L, L)``)."""
        mask_type = merged = None
        if key_padding_mask is not None:
            mask_type, merged = 1, key_padding_mask
        if attn_mask is not None:
            batch_size, seq_len, _ = query.shape
            mask_type = 2
            if attn_mask.dim() == 3:
                expanded = attn_mask.view(batch_size, -1, seq_len, seq_len)
            else:
                expanded = attn_mask.view(1, 1, seq_len, seq_len).expand(
                    batch_size, self.num_heads, -1, -1)
            merged = expanded
            if key_padding_mask is not None:
                merged = expanded + key_padding_mask.view(batch_size, 1, 1, seq_len).expand(
                    -1, self.num_heads, -1, -1)
        return merged, mask_type
