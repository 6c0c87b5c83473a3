"""Transformer layers (PyTorch's ``torch.nn.Transformer`` family).

Each layer is PyTorch's: self-attention (and cross-attention in the decoder) and a
feed-forward block, each with a residual connection and a LayerNorm after it (or
before it with ``norm_first``). In eval mode without gradients PyTorch runs fused
kernels; ember computes the same math and reproduces where their numbers differ
(see ``MultiheadAttention._uses_fastpath`` and ``TransformerEncoder.forward``).
"""
import copy

from ember import _core as ember
from ember.nn import functional as F
from ember.nn import functional_attention as FA
from ember.nn import init
from ember.nn.modules.activation import GELU, ReLU
from ember.nn.modules.attention import MultiheadAttention, _fastpath_enabled, _grad_blocks_fastpath
from ember.nn.modules.container import ModuleList
from ember.nn.modules.dropout import Dropout
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module
from ember.nn.modules.normalization import LayerNorm

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder",
           "TransformerEncoderLayer", "TransformerDecoderLayer"]


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """``(sz, sz)`` float mask: -inf above the diagonal, 0 on and below it."""
    return ember.triu(ember.full((sz, sz), float("-inf"), dtype=dtype, device=device),
                      diagonal=1)


def _get_seq_len(src, batch_first):
    if src.dim() == 2:
        return src.shape[0]
    return src.shape[1 if batch_first else 0]


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """``is_causal`` if given; otherwise whether ``mask`` is exactly the causal mask."""
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.size(-2)
        causal = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
        if mask.size() == causal.size():
            make_causal = bool((mask == causal).all())
        else:
            make_causal = False
    return make_causal


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _get_activation_fn(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _left_aligned(padding_mask):
    """True when every row of the (N, S) bool padding mask is False then True (PyTorch's
    ``_nested_tensor_from_mask_left_aligned`` on its negation)."""
    from ember._graph.capture import branch_on_values
    branch_on_values(padding_mask, "src_key_padding_mask (is it left-aligned?)")
    m = padding_mask._data
    xp = ember.backend.array_module(m)
    return bool(xp.all(m[:, 1:] >= m[:, :-1])) if m.shape[1] > 1 else True


class Transformer(Module):
    """An encoder-decoder transformer ("Attention Is All You Need"), PyTorch's
    ``torch.nn.Transformer``: ``num_encoder_layers`` :class:`TransformerEncoderLayer`
    and ``num_decoder_layers`` :class:`TransformerDecoderLayer`, each stack followed by
    a LayerNorm; every parameter with more than one dim is re-drawn by xavier_uniform_.

        >>> model = ember.nn.Transformer(d_model=16, nhead=4, num_encoder_layers=1,
        ...                              num_decoder_layers=1, dim_feedforward=32)
        >>> model(ember.randn(10, 2, 16), ember.randn(7, 2, 16)).shape
        ember.Size([7, 2, 16])
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation=F.relu, custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False,
                 norm_first=False, bias=True, device=None, dtype=None):
        fk = {"device": device, "dtype": dtype}
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **fk)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias, **fk)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        """Encode ``src`` and decode ``tgt`` against it: ``(S, N, E), (T, N, E) -> (T, N, E)``
        (batch first with ``batch_first``; unbatched ``(S, E), (T, E)`` too)."""
        is_batched = src.dim() == 3
        if not self.batch_first and src.size(1) != tgt.size(1) and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if self.batch_first and src.size(0) != tgt.size(0) and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The causal mask for a sequence of ``sz``: -inf above the diagonal, else 0."""
        return _generate_square_subsequent_mask(sz, dtype=dtype, device=device)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)


class TransformerEncoder(Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer``, then ``norm`` if given.

    ``enable_nested_tensor`` is accepted: ember has no nested tensors, but in eval mode
    without gradients it gives PyTorch's numbers for that path (padded positions of the
    output are 0 before ``norm``).
    """

    __constants__ = ["norm"]

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = ""
        enc = "encoder_layer"
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            why_not = f"{enc} was not TransformerEncoderLayer"
        elif encoder_layer.norm_first:
            why_not = f"{enc}.norm_first was True"
        elif not encoder_layer.self_attn.batch_first:
            why_not = (f"{enc}.self_attn.batch_first was not True"
                       "(use batch_first for better inference performance)")
        elif not encoder_layer.self_attn._qkv_same_embed_dim:
            why_not = f"{enc}.self_attn._qkv_same_embed_dim was not True"
        elif encoder_layer.self_attn.in_proj_bias is None:
            why_not = f"{enc}.self_attn was passed bias=False"
        elif not encoder_layer.activation_relu_or_gelu:
            why_not = f"{enc}.activation_relu_or_gelu was not True"
        elif encoder_layer.norm1.eps != encoder_layer.norm2.eps:
            why_not = f"{enc}.norm1.eps was not equal to {enc}.norm2.eps"
        elif encoder_layer.self_attn.num_heads % 2 == 1:
            why_not = f"{enc}.self_attn.num_heads is odd"
        if enable_nested_tensor and why_not:
            import warnings
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False "
                          f"because {why_not}", stacklevel=2)
            self.use_nested_tensor = False

    def _nested_path(self, src, mask, padding_mask):
        """Whether PyTorch would pack ``src`` into a nested tensor (eval, no gradients, a
        left-aligned padding mask and no attention mask)."""
        first = self.layers[0]
        if (not _fastpath_enabled() or not getattr(self, "use_nested_tensor", False)
                or first.training or src.dim() != 3 or padding_mask is None
                or mask is not None):
            return False
        sa = first.self_attn
        if _grad_blocks_fastpath((
                src, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
                first.norm1.weight, first.norm1.bias, first.norm2.weight, first.norm2.bias,
                first.linear1.weight, first.linear1.bias, first.linear2.weight,
                first.linear2.bias)):
            return False
        # last: the mask's values (a compiled call breaks there) only where they decide
        return not getattr(self, "mask_check", True) or _left_aligned(padding_mask)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """Run ``src`` through every layer (``mask`` and ``src_key_padding_mask`` as in
        :class:`TransformerEncoderLayer`); ``is_causal`` None detects a causal ``mask``."""
        src_key_padding_mask = FA._canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                                  FA._none_or_dtype(mask), "mask", src.dtype)
        mask = FA._canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        pad_positions = None
        if src_key_padding_mask is not None:
            # PyTorch packs the tokens where the (canonical, float) padding mask is 0
            padding = src_key_padding_mask != 0
            if self._nested_path(src, mask, padding):
                pad_positions = padding
        batch_first = self.layers[0].self_attn.batch_first
        is_causal = _detect_is_causal_mask(mask, is_causal, _get_seq_len(src, batch_first))
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal,
                         src_key_padding_mask=src_key_padding_mask)
        if pad_positions is not None:
            # the nested tensor holds only the real tokens; padding comes back as zeros
            zero = ember.zeros((), dtype=output.dtype, device=output.device)
            output = ember.where(pad_positions.unsqueeze(-1), zero, output)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerDecoder(Module):
    """A stack of ``num_layers`` deep copies of ``decoder_layer``, then ``norm`` if given."""

    __constants__ = ["norm"]

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        """Run ``tgt`` through every layer, attending to ``memory`` (the encoder output)."""
        seq_len = _get_seq_len(tgt, self.layers[0].self_attn.batch_first)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block ``linear2(dropout(activation(linear1(x))))``,
    each added to its input and normalised (post-norm; pre-norm with ``norm_first``).

    ``activation`` is ``"relu"``, ``"gelu"`` or a callable. Parameter names and
    ``state_dict`` keys are PyTorch's.

        >>> layer = ember.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
        >>> layer(ember.randn(2, 5, 16)).shape
        ember.Size([2, 5, 16])
    """

    __constants__ = ["norm_first"]

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        fk = {"device": device, "dtype": dtype}
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **fk)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **fk)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **fk)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "activation"):
            self.activation = F.relu

    def _uses_fastpath(self, src):
        """Whether PyTorch would run its fused encoder-layer kernel here (same numbers,
        except that rows with nothing to attend to come out NaN there, a float mask is
        read as a bool one, and ``is_causal`` without a mask is ignored)."""
        if self.training:  # (the usual answer while training, asked first: all are reads)
            return False
        sa = self.self_attn
        if (not _fastpath_enabled() or src.dim() != 3 or self.training or not sa.batch_first
                or sa.in_proj_bias is None or not sa._qkv_same_embed_dim
                or not self.activation_relu_or_gelu or self.norm1.eps != self.norm2.eps
                or sa.num_heads % 2 == 1):
            return False
        if any(m._forward_hooks or m._forward_pre_hooks for m in self.modules()):
            return False
        return not _grad_blocks_fastpath((
            src, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
            self.norm1.weight, self.norm1.bias, self.norm2.weight, self.norm2.bias,
            self.linear1.weight, self.linear1.bias, self.linear2.weight, self.linear2.bias))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        """``src`` ``(S, N, E)`` (``(N, S, E)`` with ``batch_first``, or ``(S, E)``);
        ``src_mask`` ``(S, S)`` or ``(N * nhead, S, S)`` and ``src_key_padding_mask``
        ``(N, S)``, True (or -inf) where attention is not allowed."""
        src_key_padding_mask = FA._canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                                  FA._none_or_dtype(src_mask), "src_mask",
                                                  src.dtype)
        src_mask = FA._canonical_mask(src_mask, "src_mask", None, "", src.dtype,
                                      check_other=False)
        fast = self._uses_fastpath(src)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal,
                                   fast)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal,
                                              fast))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False, fast=False):
        sa = self.self_attn
        if fast:
            # PyTorch's fused kernel reads a float mask as a bool one: nonzero = masked out
            attn_mask, key_padding_mask = (
                None if mk is None else FA._bool_to_bias(mk != 0, x.dtype, allowed=False)
                for mk in (attn_mask, key_padding_mask))
            x = FA._mha_forward(x, x, x, sa.embed_dim, sa.num_heads, sa.in_proj_weight,
                                sa.in_proj_bias, None, None, False, 0.0, sa.out_proj.weight,
                                sa.out_proj.bias, training=False,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                attn_mask=attn_mask, batch_first=True, fast_path=True)[0]
        else:
            x = sa(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                   need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention to ``memory``, then a feed-forward block, each with
    a residual connection and LayerNorm (post-norm; pre-norm with ``norm_first``)."""

    __constants__ = ["norm_first"]

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        fk = {"device": device, "dtype": dtype}
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                            batch_first=batch_first, bias=bias, **fk)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                 batch_first=batch_first, bias=bias, **fk)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **fk)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **fk)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **fk)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        if isinstance(activation, str):
            self.activation = _get_activation_fn(activation)
        else:
            self.activation = activation

    def __setstate__(self, state):
        if "activation" not in state:
            state["activation"] = F.relu
        super().__setstate__(state)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        """``tgt`` ``(T, N, E)`` attends to itself (``tgt_mask``, ``tgt_key_padding_mask``)
        and to ``memory`` ``(S, N, E)`` (``memory_mask``, ``memory_key_padding_mask``)."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                              tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)
