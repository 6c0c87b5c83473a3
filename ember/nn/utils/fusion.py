"""Fold an eval-mode BatchNorm into the convolution or linear layer before it
(``torch.nn.utils.fuse_conv_bn_eval`` and friends): one layer computing what the pair
computed."""
import copy

from ember import _core as ember
from ember.nn.parameter import Parameter
from ember.nn.utils._lazy import refuse_uninitialized

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def _bn_defaults(bn_rm, bn_w, bn_b):
    if bn_w is None:
        bn_w = ember.ones_like(bn_rm)
    if bn_b is None:
        bn_b = ember.zeros_like(bn_rm)
    return bn_w, bn_b


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """``(weight, bias)`` Parameters of a convolution equal to the convolution
    ``(conv_w, conv_b)`` followed by a BatchNorm with these statistics and affine terms
    (``transpose`` for a transposed convolution, whose output channels are dim 1)."""
    dtype = conv_w.dtype
    # the fused bias keeps the convolution bias's dtype (the weight's when there is none)
    bias_dtype = dtype if conv_b is None else conv_b.dtype
    if conv_b is None:
        conv_b = ember.zeros_like(bn_rm)
    bn_w, bn_b = _bn_defaults(bn_rm, bn_w, bn_b)
    inv_std = ember.rsqrt(bn_rv + bn_eps)
    shape = [1, -1] if transpose else [-1, 1]
    shape += [1] * (conv_w.ndim - 2)
    w = (conv_w * (bn_w * inv_std).reshape(shape)).to(dtype)
    b = ((conv_b - bn_rm) * inv_std * bn_w + bn_b).to(bias_dtype)
    return Parameter(w, conv_w.requires_grad), Parameter(b, conv_b.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of ``conv`` whose weight and bias include the eval-mode ``bn`` after it."""
    assert not (conv.training or bn.training), "Fusion only for eval!"
    refuse_uninitialized([*conv.parameters(), *bn.parameters(), *bn.buffers()],
                         "fuse_conv_bn_eval", RuntimeError)
    fused = copy.deepcopy(conv)
    assert bn.running_mean is not None and bn.running_var is not None
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight,
        bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """``(weight, bias)`` Parameters of a linear layer equal to ``(linear_w,
    linear_b)`` followed by a BatchNorm1d with these statistics and affine terms."""
    # the fused tensors keep the linear layer's dtypes, whatever the statistics' dtype
    bias_dtype = linear_w.dtype if linear_b is None else linear_b.dtype
    if linear_b is None:
        linear_b = ember.zeros_like(bn_rm)
    bn_w, bn_b = _bn_defaults(bn_rm, bn_w, bn_b)
    scale = bn_w * ember.rsqrt(bn_rv + bn_eps)
    w = linear_w * scale.unsqueeze(-1).to(linear_w.dtype)
    b = ((linear_b - bn_rm) * scale + bn_b).to(bias_dtype)
    return Parameter(w, linear_w.requires_grad), Parameter(b, linear_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` whose weight and bias include the eval-mode ``bn`` after
    it."""
    assert not (linear.training or bn.training), "Fusion only for eval!"
    refuse_uninitialized([*linear.parameters(), *bn.parameters(), *bn.buffers()],
                         "fuse_linear_bn_eval")
    fused = copy.deepcopy(linear)
    assert linear.out_features == bn.num_features or bn.num_features == 1, \
        "To fuse, linear.out_features must equal bn.num_features or bn.num_features must be 1"
    assert bn.running_mean is not None and bn.running_var is not None
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused
