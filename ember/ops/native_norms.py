"""ATen's fused normalization entry points as PyTorch exposes them (``torch.
native_batch_norm``, ``native_layer_norm``, ``native_group_norm``) and
``native_dropout``: composites of ember ops returning the extra statistics PyTorch's
kernels return (the mean and the reciprocal standard deviation; differentiable only
for group norm, as in PyTorch)."""
from ember.autograd.grad_mode import no_grad
from ember.ops._batch_nn import BATCHED_STATS
from ember.ops._inplace import check_writes

__all__ = ["native_batch_norm", "native_layer_norm", "native_group_norm", "native_dropout"]


def _reduced_dtypes(input, *params):
    """``(low, stats)`` for a float16/bfloat16 ``input``: its dtype, and the dtype of the
    mean and rstd PyTorch returns (float32 where a parameter is float32, else ``low``);
    ``(None, None)`` for other inputs. PyTorch's CPU kernels compute these in float32
    and round once."""
    import ember
    if input.dtype not in (ember.float16, ember.bfloat16):
        return None, None
    mixed = any(p is not None and p.dtype == ember.float32 for p in params)
    return input.dtype, ember.float32 if mixed else input.dtype


def _stats(x, dims, eps):
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    return mean, (var + eps).rsqrt()


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
                      eps, *, out=None):
    """``(output, save_mean, save_invstd)`` of batch normalization over every dim but 1.

    In training the batch statistics normalize and update ``running_mean``/``running_var``
    in place (``momentum``, unbiased variance); ``save_mean``/``save_invstd`` are
    per-channel. In evaluation the running statistics normalize and the two are empty.
    """
    import ember
    if input.dim() < 2:
        raise RuntimeError(f"native_batch_norm: Expected input to have at least 2 dimensions, "
                           f"got {input.dim()}")
    if training and input.numel() == 0:  # torch refuses (no batch statistics)
        raise RuntimeError("input tensor must have at least one element, but got "
                           f"input_sizes = {list(input.shape)}")
    c = input.shape[1]
    dims = (0,) + tuple(range(2, input.dim()))
    shape = (1, c) + (1,) * (input.dim() - 2)
    if training:
        check_writes((running_mean, running_var), (input,), BATCHED_STATS)
        mean, rstd = _stats(input, dims, eps)
        if input.dtype in (ember.float32, ember.float64) and not (
                mean.isfinite().all() and rstd.isfinite().all() and rstd.all()):
            # PyTorch's moments where they overflow: in double, summed in memory order
            # (rstd in the input's dtype); the output below comes from batch_norm's
            # kernel, which does the same
            from ember._tensor import _make
            from ember.ops.normalization import seq_moments
            m, v = seq_moments(input._data, dims)
            mean = _make(m.astype(input._data.dtype))
            rstd = (_make(v.astype(input._data.dtype)) + eps).rsqrt()
        n = input.numel() // max(c, 1)
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean.reshape(c) * momentum)
            if running_var is not None:
                unbiased = ((input - mean) ** 2).sum(dims) / max(n - 1, 1)
                running_var.mul_(1 - momentum).add_(unbiased * momentum)
        save_mean, save_invstd = mean.reshape(c).detach(), rstd.reshape(c).detach()
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        mean = running_mean.reshape(shape)
        var = running_var.reshape(shape)
        if input.dtype in (ember.float16, ember.bfloat16):  # (in float32, see below)
            mean, var = mean.float(), var.float()
        rstd = (var + eps).rsqrt()
        save_mean = save_invstd = ember.empty(0, dtype=input.dtype)
    if training and input.numel() > c:  # (batch_norm refuses one value per channel)
        # the output from batch_norm's kernel, which follows PyTorch's where the
        # statistics overflow
        from ember.ops.normalization import batch_norm
        y = batch_norm(input, None, None, weight, bias, True, momentum, eps)
    else:
        # x * alpha + beta, as PyTorch's kernel: a huge x times a tiny alpha stays finite
        low, _ = _reduced_dtypes(input)
        if low is not None:  # float16/bfloat16: computed in float32, rounded once
            mean, rstd, weight, bias = (None if t is None else t.float()
                                        for t in (mean, rstd, weight, bias))
        alpha = rstd if weight is None else rstd * weight.reshape(shape)
        beta = -mean * alpha if bias is None else bias.reshape(shape) - mean * alpha
        y = input * alpha + beta if low is None else (input.float() * alpha + beta).to(low)
    return _out((y, save_mean, save_invstd), out)


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """``(output, mean, rstd)`` of layer normalization over the trailing
    ``normalized_shape`` dims; ``mean``/``rstd`` keep those dims as size 1."""
    shape = tuple(normalized_shape)
    k = len(shape)
    if k == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    if tuple(input.shape[input.dim() - k:]) != shape or k > input.dim():
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    dims = tuple(range(input.dim() - k, input.dim()))
    low, stats_dtype = _reduced_dtypes(input, weight, bias)
    if low is not None:  # float16/bfloat16: computed in float32, rounded once
        input, weight, bias = (None if t is None else t.float() for t in (input, weight, bias))
    if not dims:
        mean = input * 0
        rstd = (mean + eps).rsqrt()
    else:
        mean, rstd = _stats(input, dims, eps)
    y = (input - mean) * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    if low is not None:
        y, mean, rstd = y.to(low), mean.to(stats_dtype), rstd.to(stats_dtype)
    return y, mean.detach(), rstd.detach()


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """``(output, mean, rstd)`` of group normalization of an ``(N, C, *)`` input with
    ``HxW`` elements per channel in ``group`` groups; ``mean``/``rstd`` are
    ``(N, group)``."""
    if C % group:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={group}")
    if input.numel() != N * C * HxW:
        raise RuntimeError(f"Expected input to have {N * C * HxW} elements, got "
                           f"{input.numel()}")
    from ember.ops.normalization import group_norm
    x = input.reshape(N, group, (C // group) * HxW)
    mean, rstd = _stats(x, (2,), eps)
    # the output from group_norm's kernel, which follows PyTorch's where moments overflow
    y = group_norm(input.reshape(N, C, HxW), group, weight, bias, eps).reshape(input.shape)
    # unlike the other two, PyTorch differentiates group norm's statistics too
    return y, mean.reshape(N, group), rstd.reshape(N, group)


def native_dropout(input, p, train):
    """``(output, mask)``: dropout with keep-probability ``1 - p`` and the boolean mask
    of kept elements (all kept when not ``train``)."""
    import ember
    if not train or p == 0:
        return input.clone(), ember.ones(input.shape, dtype=ember.bool)
    if p == 1:
        return input * 0, ember.zeros(input.shape, dtype=ember.bool)
    mask = ember.empty(input.shape, dtype=input.dtype).bernoulli_(1 - p).to(ember.bool)
    return input * mask * (1.0 / (1 - p)), mask


def _out(res, out):
    if out is None:
        return res
    from ember.ops._util import write_out
    return tuple(write_out(r, o) for r, o in zip(res, out))

