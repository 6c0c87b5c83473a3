"""The neural-network rows of the TorchScript builtin table (aten schemas -> ember).

Each entry adapts one aten schema (argument order as TorchScript prints it) to
ember's functional API. Imported by :mod:`ember.jit._builtins`.
"""
import ember.nn.functional as _functional
from ember.jit._builtins import TABLE, _ember, _is_t, register, scalar_type


@register("torch.linear")
def _linear(input, weight, bias=None):
    return _functional.linear(input, weight, bias)


@register("torch.relu")
def _relu(x):
    return _functional.relu(x)


@register("torch.relu_")
def _relu_(x):
    return _functional.relu(x, inplace=True)


@register("torch.gelu")
def _gelu(x, approximate="none"):
    return _functional.gelu(x, approximate=approximate)


@register("torch.softmax")
def _softmax(x, dim, dtype=None):
    return _functional.softmax(x, dim, dtype=scalar_type(dtype))


@register("torch.log_softmax")
def _log_softmax(x, dim, dtype=None):
    return _functional.log_softmax(x, dim, dtype=scalar_type(dtype))


@register("torch.dropout", "torch.feature_dropout", "torch.alpha_dropout")
def _dropout(x, p, train):
    return _functional.dropout(x, p, train)


@register("torch.dropout_")
def _dropout_(x, p, train):
    return _functional.dropout(x, p, train, inplace=True)


@register("torch.embedding")
def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return _functional.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                          scale_grad_by_freq=scale_grad_by_freq)


@register("torch.batch_norm")
def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                cudnn_enabled=True):
    return _functional.batch_norm(input, running_mean, running_var, weight, bias, training,
                           momentum, eps)


@register("torch.instance_norm")
def _instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                   momentum, eps, cudnn_enabled=True):
    return _functional.instance_norm(input, running_mean, running_var, weight, bias,
                                     use_input_stats, momentum, eps)


@register("torch.layer_norm")
def _layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5,
                cudnn_enable=True):
    return _functional.layer_norm(input, list(normalized_shape), weight, bias, eps)


@register("torch.group_norm")
def _group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return _functional.group_norm(input, num_groups, weight, bias, eps)


def _conv(nd):
    def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return getattr(_functional, f"conv{nd}d")(input, weight, bias, stride, padding, dilation,
                                           groups)
    return conv


for _nd in (1, 2, 3):
    TABLE[f"torch.conv{_nd}d"] = _conv(_nd)


@register("torch._convolution", "torch.convolution")
def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                 groups, *flags):
    nd = weight.dim() - 2
    F = _functional
    if transposed:
        return getattr(F, f"conv_transpose{nd}d")(input, weight, bias, stride, padding,
                                                  output_padding, groups, dilation)
    return getattr(F, f"conv{nd}d")(input, weight, bias, stride, padding, dilation, groups)


@register("torch.max_pool2d")
def _max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _functional.max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


@register("torch.max_pool1d")
def _max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _functional.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


@register("torch.avg_pool2d")
def _avg_pool2d(input, kernel_size, stride=(), padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    return _functional.avg_pool2d(input, kernel_size, stride or None, padding, ceil_mode,
                           count_include_pad, divisor_override)


@register("torch.adaptive_avg_pool2d")
def _adaptive_avg_pool2d(input, output_size):
    return _functional.adaptive_avg_pool2d(input, output_size)


@register("torch.adaptive_avg_pool1d")
def _adaptive_avg_pool1d(input, output_size):
    return _functional.adaptive_avg_pool1d(input, output_size)


@register("torch.adaptive_max_pool2d")
def _adaptive_max_pool2d(input, output_size):
    return _functional.adaptive_max_pool2d(input, output_size, return_indices=True)


@register("torch.pad")
def _pad(input, pad, mode="constant", value=None):
    return _functional.pad(input, list(pad), mode, value)


@register("torch.constant_pad_nd")
def _constant_pad_nd(input, pad, value=0):
    return _functional.pad(input, list(pad), "constant", value)


@register("torch.scaled_dot_product_attention")
def _sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    return _functional.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal,
                                             scale=scale, enable_gqa=enable_gqa)


@register("torch.contiguous")
def _contiguous(x, memory_format=0):
    return x.contiguous()


@register("torch.to")
def _to(x, *args, **kw):
    """aten::to's schemas: (dtype, ...), (device, dtype, ...), (other tensor, ...)."""
    device = dtype = None
    args = list(args)
    if args and _is_t(args[0]):
        return x.to(args[0])
    if args and not isinstance(args[0], (int, bool)) and args[0] is not None \
            and hasattr(args[0], "type") and not hasattr(args[0], "is_floating_point"):
        device = args.pop(0)
    if args and args[0] is not None and not isinstance(args[0], bool):
        dtype = scalar_type(args.pop(0))
    dtype = scalar_type(kw.get("dtype", dtype))
    device = kw.get("device", device)
    if device is not None:
        x = x.to(device)
    return x.to(dtype) if dtype is not None else x


@register("torch.type_as")
def _type_as(x, other):
    return x.to(other.dtype)


@register("torch.tensor")
def _tensor(data, dtype=None, device=None, requires_grad=False):
    return _ember().tensor(data, dtype=scalar_type(dtype), device=device,
                           requires_grad=requires_grad)


@register("torch.expand")
def _expand(x, size, implicit=False):
    return x.expand(*size)


@register("torch.view")
def _view(x, size):
    return x.view(*size) if isinstance(size, (list, tuple)) else x.view(scalar_type(size))


@register("torch.reshape")
def _reshape(x, size):
    return x.reshape(*size)


@register("torch.repeat")
def _repeat(x, sizes):
    return x.repeat(*sizes)


@register("torch.permute")
def _permute(x, dims):
    return x.permute(*dims)


@register("torch.sum")
def _sum(x, dim=None, keepdim=False, dtype=None):
    if isinstance(x, list):
        return sum(x)
    if dim is None:
        return x.sum(dtype=scalar_type(dtype))
    return x.sum(dim if not isinstance(dim, list) else tuple(dim), keepdim,
                 dtype=scalar_type(dtype))


@register("torch.mean")
def _mean(x, dim=None, keepdim=False, dtype=None):
    if dim is None:
        return x.mean(dtype=scalar_type(dtype))
    return x.mean(dim if not isinstance(dim, list) else tuple(dim), keepdim,
                  dtype=scalar_type(dtype))


@register("torch.matmul")
def _matmul(a, b):
    return a @ b


def _index_key(indices):
    return tuple(slice(None) if i is None else i for i in indices)


@register("torch.index")
def _index(x, indices):
    """aten::index: advanced indexing with a list of Optional[Tensor] (None = all)."""
    return x[_index_key(indices)]


@register("torch.index_put_")
def _index_put_(x, indices, values, accumulate=False):
    return x.index_put_(tuple(indices), values, accumulate)


@register("torch.index_put")
def _index_put(x, indices, values, accumulate=False):
    return x.index_put(tuple(indices), values, accumulate)


@register("torch.masked_fill_")
def _masked_fill_(x, mask, value):
    return x.masked_fill_(mask, value)


def _factory(name):
    def make(size, *args, dtype=None, layout=None, device=None, pin_memory=None,
             memory_format=None, requires_grad=False, names=None):
        if isinstance(size, int):  # torch.zeros(3) / torch.zeros(2, 3): int[] sizes
            size, args = (size,) + tuple(a for a in args if isinstance(a, int)), \
                tuple(a for a in args if not isinstance(a, int))
        if args:  # positional (dtype, layout, device, pin_memory) as aten prints them
            dtype = args[0]
            device = args[2] if len(args) > 2 else device
        return getattr(_ember(), name)(*size, dtype=scalar_type(dtype), device=device,
                                       requires_grad=requires_grad)
    return make


for _n in ("zeros", "ones", "empty", "rand", "randn"):
    TABLE["torch." + _n] = _factory(_n)


@register("torch.full")
def _full(size, fill_value, dtype=None, layout=None, device=None, pin_memory=None):
    return _ember().full(list(size), fill_value, dtype=scalar_type(dtype), device=device)


def _like(name):
    def make(x, *args, dtype=None, layout=None, device=None, pin_memory=None,
             memory_format=None, requires_grad=False):
        return getattr(_ember(), name)(x, *args, dtype=scalar_type(dtype), device=device)
    return make


for _n in ("zeros_like", "ones_like", "empty_like", "rand_like", "randn_like", "full_like"):
    TABLE["torch." + _n] = _like(_n)


@register("torch.arange")
def _arange(*args, dtype=None, layout=None, device=None, pin_memory=None):
    return _ember().arange(*args, dtype=scalar_type(dtype), device=device)


# ----- recurrent layers: aten::lstm / aten::gru / aten::rnn_tanh ----------------------------
def _rnn(mode):
    def op(*args):
        from ember.nn import functional_rnn
        return functional_rnn.FUNCTIONS[mode](*args)
    return op


TABLE["torch.lstm"] = _rnn("LSTM")
TABLE["torch.gru"] = _rnn("GRU")
TABLE["torch.rnn_tanh"] = _rnn("RNN_TANH")
TABLE["torch.rnn_relu"] = _rnn("RNN_RELU")


# ----- attention fast paths that nn.MultiheadAttention / TransformerEncoderLayer take ------
@register("torch._native_multi_head_attention")
def _native_mha(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                proj_bias, mask=None, need_weights=True, average_attn_weights=True,
                mask_type=None):
    """Batch-first multi-head attention as PyTorch's fused kernel computes it.

    ``mask_type`` 0: ``(L, S)`` attention mask, 1: ``(N, S)`` key padding mask,
    2: merged ``(N, H, L, S)``. The kernel reads a float mask as a bool one (nonzero =
    masked out), and ember's attention in ``fast_path`` mode matches its numbers.
    """
    import ember.nn.functional_attention as FA
    key_padding_mask = attn_mask = None
    if mask is not None:
        n, length, s = query.shape[0], query.shape[1], key.shape[1]
        bias = FA._bool_to_bias(mask != 0, query.dtype, allowed=False)
        if mask_type == 1 or (mask_type is None and tuple(mask.shape) == (n, s)):
            key_padding_mask = bias
        elif mask.dim() == 4:
            attn_mask = bias.reshape(-1, length, s)
        else:
            attn_mask = bias
    return FA._mha_forward(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, None,
                           None, False, 0.0, proj_weight, proj_bias, training=False,
                           key_padding_mask=key_padding_mask, need_weights=need_weights,
                           attn_mask=attn_mask, average_attn_weights=average_attn_weights,
                           batch_first=True, fast_path=True)


@register("torch._transformer_encoder_layer_fwd")
def _encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                       proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1,
                       norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2,
                       ffn_bias_2, mask=None, mask_type=None):
    """One batch-first TransformerEncoderLayer in inference mode (PyTorch's fast path)."""
    F = _functional

    def attend(x):
        return _native_mha(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                           proj_bias, mask, False, True, mask_type)[0]

    def ffn(x):
        h = F.linear(x, ffn_weight_1, ffn_bias_1)
        h = F.gelu(h) if use_gelu else F.relu(h)
        return F.linear(h, ffn_weight_2, ffn_bias_2)
    shape = [embed_dim]
    x = src
    if norm_first:
        x = x + attend(F.layer_norm(x, shape, norm_weight_1, norm_bias_1, eps))
        x = x + ffn(F.layer_norm(x, shape, norm_weight_2, norm_bias_2, eps))
    else:
        x = F.layer_norm(x + attend(x), shape, norm_weight_1, norm_bias_1, eps)
        x = F.layer_norm(x + ffn(x), shape, norm_weight_2, norm_bias_2, eps)
    return x


# ----- resampling: aten::upsample_* (what F.interpolate lowers to) -------------------------
def _upsample(mode, nd, has_align, antialias=False):
    def op(input, output_size, *rest):
        """Both overloads: (input, output_size, [align_corners,] scale_factors) and the
        older (input, output_size, [align_corners,] scales...)."""
        rest = list(rest)
        align = rest.pop(0) if has_align and rest and isinstance(rest[0], bool) else None
        scales = None
        if rest:
            if isinstance(rest[0], (list, tuple)) or rest[0] is None and len(rest) == 1:
                scales = rest[0]
            elif any(r is not None for r in rest):
                scales = [r for r in rest[:nd]]
        if output_size is not None:
            return _functional.interpolate(input, size=list(output_size), mode=mode,
                                           align_corners=align, antialias=antialias)
        return _functional.interpolate(input, scale_factor=list(scales), mode=mode,
                                       align_corners=align, antialias=antialias)
    return op


for _name, _mode, _nd, _align in (
        ("upsample_nearest1d", "nearest", 1, False), ("upsample_nearest2d", "nearest", 2, False),
        ("upsample_nearest3d", "nearest", 3, False), ("upsample_linear1d", "linear", 1, True),
        ("upsample_bilinear2d", "bilinear", 2, True), ("upsample_bicubic2d", "bicubic", 2, True),
        ("upsample_trilinear3d", "trilinear", 3, True),
        ("_upsample_nearest_exact1d", "nearest-exact", 1, False),
        ("_upsample_nearest_exact2d", "nearest-exact", 2, False)):
    TABLE["torch." + _name] = _upsample(_mode, _nd, _align)
for _mode in ("bilinear", "bicubic", "lanczos"):  # F.interpolate(antialias=True)
    TABLE[f"torch._upsample_{_mode}2d_aa"] = _upsample(_mode, 2, True, antialias=True)


@register("torch.hardswish", "torch.hardswish_")
def _hardswish(x):
    return _functional.hardswish(x)


@register("torch.leaky_relu", "torch.leaky_relu_")
def _leaky_relu(x, negative_slope=0.01):
    return _functional.leaky_relu(x, negative_slope)


@register("torch.elu", "torch.elu_")
def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return _functional.elu(x, alpha)


@register("torch.hardtanh", "torch.hardtanh_")
def _hardtanh(x, min_val=-1.0, max_val=1.0):
    return _functional.hardtanh(x, min_val, max_val)


@register("torch.silu", "torch.silu_")
def _silu(x):
    return _functional.silu(x)


@register("torch.prelu")
def _prelu(x, weight):
    return _functional.prelu(x, weight)


# aten schemas that match ember.nn.functional's argument order one for one
for _name in ("adaptive_avg_pool3d", "pixel_shuffle", "pixel_unshuffle", "glu", "softplus",
              "relu6", "hardsigmoid", "mish", "celu", "selu", "softshrink", "hardshrink",
              "tanhshrink", "softsign", "logsigmoid", "local_response_norm",
              "cosine_similarity", "pairwise_distance", "one_hot", "normalize",
              "channel_shuffle"):
    if hasattr(_functional, _name):
        TABLE.setdefault("torch." + _name, getattr(_functional, _name))


def _adaptive_max(nd):
    def op(input, output_size):
        return getattr(_functional, f"adaptive_max_pool{nd}d")(input, output_size,
                                                              return_indices=True)
    return op


for _nd in (1, 3):
    TABLE[f"torch.adaptive_max_pool{_nd}d"] = _adaptive_max(_nd)


@register("torch.avg_pool1d")
def _avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False,
                count_include_pad=True):
    return _functional.avg_pool1d(input, kernel_size, stride or None, padding, ceil_mode,
                                  count_include_pad)


@register("torch.avg_pool3d")
def _avg_pool3d(input, kernel_size, stride=(), padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    return _functional.avg_pool3d(input, kernel_size, stride or None, padding, ceil_mode,
                                  count_include_pad, divisor_override)


@register("torch.max_pool3d")
def _max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _functional.max_pool3d(input, kernel_size, stride or None, padding, dilation,
                                  ceil_mode)


def _fractional_max(nd):
    def op(input, kernel_size, output_size, random_samples):
        # aten's order: the windows from the given draw, (values, indices)
        return getattr(_functional, f"fractional_max_pool{nd}d")(
            input, kernel_size, output_size, return_indices=True,
            _random_samples=random_samples)
    return op


for _nd in (2, 3):
    TABLE[f"torch.fractional_max_pool{_nd}d"] = _fractional_max(_nd)
