"""The neural-network kernels torch exposes at its top level (``torch.dropout``,
``torch.batch_norm``, ``torch.lstm``, ``torch.kl_div`` ...), with ATen's signatures:
positional ``train`` flags, reductions as integers (0 none, 1 mean, 2 sum), modes as
integers, weight before indices in ``embedding``.

Each is a thin adapter over ``ember.nn.functional`` or the recurrent layers of
``ember.ops.rnn``: no math is declared here.
"""
from ember import _core as ember
from ember._tensor import _mode_active
from ember.nn import _rnn_unrolled
from ember.nn import functional as F
from ember.nn._functional_aten import conv_tbc, native_channel_shuffle  # noqa: F401

# the multi-layer recurrent functions (one node each in a graph capture)
from ember.nn.functional_rnn import gru, lstm, rnn_relu, rnn_tanh
from ember.ops._util import traced_ints
from ember.ops.composite_node import call
from ember.ops.dropout import NativeDropout
from ember.ops.norms import norm_except_dim  # noqa: F401  (with weight norm, in ops)
from ember.ops.reduction import _axes
from ember.ops.vector_norms import NormScalarOpt

__all__ = [
    "dropout", "dropout_", "alpha_dropout", "alpha_dropout_", "feature_dropout",
    "feature_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_", "native_dropout",
    "celu", "celu_", "selu", "selu_", "rrelu", "rrelu_", "threshold", "threshold_",
    "hardshrink", "prelu", "bilinear", "embedding", "embedding_renorm_", "embedding_bag",
    "batch_norm",
    "instance_norm", "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
    "hinge_embedding_loss", "margin_ranking_loss", "poisson_nll_loss",
    "triplet_margin_loss", "ctc_loss", "cosine_similarity", "pairwise_distance", "pdist",
    "channel_shuffle", "native_channel_shuffle", "adaptive_max_pool1d",
    "max_pool1d_with_indices", "affine_grid_generator", "grid_sampler", "grid_sampler_2d",
    "grid_sampler_3d", "conv_tbc", "convolution", "native_norm", "norm_except_dim",
    "frobenius_norm", "nuclear_norm", "lstm_cell", "gru_cell", "rnn_tanh_cell",
    "rnn_relu_cell", "lstm", "gru", "rnn_tanh", "rnn_relu",
]

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
# torch's Python bindings of these kernels default to 0 (no reduction), not to the
# schema's 1: `torch.kl_div(x, t)` is elementwise, and so is ember's


def _reduction(r):
    if isinstance(r, str):  # the functional spelling is accepted too
        return r
    try:
        return _REDUCTIONS[r]
    except (KeyError, TypeError):
        raise ValueError(f"{r} is not a valid value for reduction (0 none, 1 mean, "
                         "2 sum)") from None


# ----- dropout family: (input, p, train) ----------------------------------------------
def dropout(input, p, train):
    """``torch.dropout(input, p, train)``: :func:`ember.nn.functional.dropout`."""
    return F.dropout(input, p, train)


def dropout_(input, p, train):
    """In-place :func:`dropout`."""
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input, p, train):
    """``torch.alpha_dropout(input, p, train)``."""
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    """In-place :func:`alpha_dropout`."""
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input, p, train):
    """Dropout of whole channels (dim 1) of an input with at least 2 dimensions."""
    return F._dropout_impl(input, p, train, False, feature=True)


def feature_dropout_(input, p, train):
    """In-place :func:`feature_dropout`."""
    return F._dropout_impl(input, p, train, True, feature=True)


def feature_alpha_dropout(input, p, train):
    """``torch.feature_alpha_dropout(input, p, train)``."""
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):
    """In-place :func:`feature_alpha_dropout`."""
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def native_dropout(input, p, train):
    """``(output, mask)``: the dropout result and the boolean mask of kept elements
    (all True, and the output a copy, when ``train`` is False)."""
    if train is False or input.numel() == 0:
        keep, scale = None, None
    else:
        F._check_p(p)
        with ember.no_grad():
            keep = F._noise(input, tuple(input.shape), 1 - p)
        scale = 0.0 if p == 1 else 1.0 / (1 - p)
    # torch's one kernel, with its own node, in training and in eval alike
    out = call(NativeDropout, input, keep, scale)
    return out, ember.ones_like(input, dtype=ember.bool) if keep is None else keep.bool()


# ----- activations ----------------------------------------------------------------------
def celu(input, alpha=1.0):
    """``torch.celu``: :func:`ember.nn.functional.celu`."""
    return F.celu(input, alpha)


def celu_(input, alpha=1.0):
    """In-place :func:`celu`."""
    return F.celu_(input, alpha)


def selu(input):
    """``torch.selu``: :func:`ember.nn.functional.selu`."""
    return F.selu(input)


def selu_(input):
    """In-place :func:`selu`."""
    return F.selu_(input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``torch.rrelu``: :func:`ember.nn.functional.rrelu`."""
    if generator is not None:
        raise NotImplementedError("torch.rrelu(generator=...): ember's rrelu draws from the "
                                  "default generator")
    return F.rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """In-place :func:`rrelu`."""
    if generator is not None:
        raise NotImplementedError("torch.rrelu_(generator=...): ember's rrelu draws from the "
                                  "default generator")
    return F.rrelu_(input, lower, upper, training)


def threshold(input, threshold, value):
    """``torch.threshold``: ``value`` where ``input <= threshold``."""
    return F.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    """In-place :func:`threshold`."""
    return F.threshold_(input, threshold, value)


def hardshrink(input, lambd=0.5):
    """``torch.hardshrink``: :func:`ember.nn.functional.hardshrink`."""
    return F.hardshrink(input, lambd)


def prelu(input, weight):
    """``torch.prelu``: :func:`ember.nn.functional.prelu`."""
    return F.prelu(input, weight)


# ----- layers ------------------------------------------------------------------------
def bilinear(input1, input2, weight, bias=None):
    """``torch.bilinear``: :func:`ember.nn.functional.bilinear`."""
    return F.bilinear(input1, input2, weight, bias)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """ATen's ``embedding(weight, indices, ...)``: rows of ``weight``; a ``padding_idx``
    of -1 means none (the gradient skips that row otherwise)."""
    return F.embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def embedding_renorm_(weight, indices, max_norm, norm_type):
    """Rescale, in place and outside autograd, the rows of ``weight`` that ``indices``
    uses whose ``norm_type``-norm exceeds ``max_norm``; returns ``weight``."""
    F._renorm_(weight, indices, max_norm, norm_type)
    return weight


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """ATen's ``embedding_bag``: ``(output, offset2bag, bag_size, max_indices)``, the
    reduced bags (``mode`` 0 sum, 1 mean, 2 max) and the bookkeeping torch's backward
    uses, with torch's CPU values: ``offset2bag`` is each index's bag (empty for sum),
    ``bag_size`` the non-padding count per bag (zeros for sum), ``max_indices`` the row
    chosen per bag and column for max (``bag_size`` for mean, zeros for sum). For sum,
    ``offset2bag`` is filled, except for float32 weights without a ``padding_idx``
    (torch's fast path), where it is empty."""
    import numpy as np
    names = {0: "sum", 1: "mean", 2: "max"}
    if mode not in names:
        raise ValueError(f"embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), "
                         f"got {mode}")
    pad = None if padding_idx is None or padding_idx < 0 else padding_idx
    out = F.embedding_bag(indices, weight, offsets, scale_grad_by_freq=scale_grad_by_freq,
                          mode=names[mode], sparse=sparse,
                          per_sample_weights=per_sample_weights,
                          include_last_offset=include_last_offset, padding_idx=pad)
    idx = np.asarray(indices.tolist(), dtype=np.int64)
    if idx.ndim == 2:
        bags, width = idx.shape
        starts = np.arange(bags) * width
        idx = idx.reshape(-1)
    else:
        starts = np.asarray(offsets.tolist(), dtype=np.int64)
        if include_last_offset:
            starts = starts[:-1]
        bags = len(starts)
    bag_of = (np.searchsorted(starts, np.arange(idx.size), side="right") - 1).astype(np.int64)
    keep = idx != pad if pad is not None else np.ones(idx.size, bool)
    sizes = np.bincount(bag_of[keep], minlength=bags).astype(np.int64)[:bags]
    dev = weight.device

    def t(a):
        return ember.tensor(a, dtype=ember.int64, device=dev)
    if mode == 0:
        zeros = np.zeros(bags, np.int64)
        # torch's float32 sum has a fast path that leaves offset2bag empty
        filled = weight.dtype != ember.float32 or pad is not None
        return out, t(bag_of if filled else np.zeros(0, np.int64)), t(zeros), t(zeros)
    if mode == 1:
        return out, t(bag_of), t(sizes), t(sizes)
    w = weight.detach().numpy() if dev.type == "cpu" else weight.detach().cpu().numpy()
    chosen = np.zeros((bags, w.shape[1]), np.int64)
    for b in range(bags):
        rows = idx[(bag_of == b) & keep]
        if rows.size:
            chosen[b] = rows[np.argmax(w[rows], axis=0)]
    return out, t(bag_of), t(sizes), t(chosen)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    """ATen's argument order for :func:`ember.nn.functional.batch_norm`."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum,
                        eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                  momentum, eps, cudnn_enabled):
    """ATen's argument order for :func:`ember.nn.functional.instance_norm`."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


# ----- losses (reduction as 0/1/2) -------------------------------------------------------
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction=0):
    """``torch.binary_cross_entropy_with_logits`` (``reduction`` 0 none, 1 mean, 2 sum)."""
    return F.binary_cross_entropy_with_logits(input, target, weight,
                                              reduction=_reduction(reduction),
                                              pos_weight=pos_weight)


def kl_div(input, target, reduction=0, *, log_target=False):
    """``torch.kl_div``; reduction 1 is the elementwise mean, as ATen computes it."""
    return F.kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """``torch.cosine_embedding_loss``."""
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    """``torch.hinge_embedding_loss``."""
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """``torch.margin_ranking_loss``."""
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    """``torch.poisson_nll_loss`` (all arguments positional, as in ATen)."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6,
                        swap=False, reduction=0):
    """``torch.triplet_margin_loss``."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction(reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    """``torch.ctc_loss``."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      _reduction(reduction), zero_infinity)


# ----- distances, shuffles, pooling, sampling -----------------------------------------
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``torch.cosine_similarity``."""
    return F.cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``torch.pairwise_distance``."""
    return F.pairwise_distance(x1, x2, p, eps, keepdim)


def pdist(input, p=2):
    """``torch.pdist``."""
    return F.pdist(input, p)


def channel_shuffle(input, groups):
    """``torch.channel_shuffle``."""
    return F.channel_shuffle(input, groups)



def adaptive_max_pool1d(input, output_size):
    """``(values, indices)`` of :func:`ember.nn.functional.adaptive_max_pool1d`."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,
                            ceil_mode=False):
    """``(values, indices)`` of :func:`ember.nn.functional.max_pool1d`; an empty
    ``stride`` means the kernel size."""
    stride = None if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else stride
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode,
                        return_indices=True)


def affine_grid_generator(theta, size, align_corners):
    """``torch.affine_grid_generator``: :func:`ember.nn.functional.affine_grid`."""
    return F.affine_grid(theta, list(size), align_corners=align_corners)


_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """``torch.grid_sampler``: modes as integers (0 bilinear, 1 nearest, 2 bicubic;
    padding 0 zeros, 1 border, 2 reflection)."""
    from ember.ops._util import int_arg
    return F.grid_sample(input, grid, _MODES[int_arg(interpolation_mode)],
                         _PADDINGS[int_arg(padding_mode)], align_corners)


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """:func:`grid_sampler` for 4-D input."""
    if _mode_active[0] and \
            (r := traced_ints(interpolation_mode, padding_mode, align_corners)) is not None:
        # a traced mode picks the sampling in Python: one node
        return r[0].composite("grid_sampler_2d", grid_sampler_2d, (input, grid) + r[1], {})
    if input.ndim != 4:
        raise RuntimeError(f"grid_sampler_2d(): expected 4D input, got {input.ndim}D")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """:func:`grid_sampler` for 5-D input."""
    if _mode_active[0] and \
            (r := traced_ints(interpolation_mode, padding_mode, align_corners)) is not None:
        # a traced mode picks the sampling in Python: one node
        return r[0].composite("grid_sampler_3d", grid_sampler_3d, (input, grid) + r[1], {})
    if input.ndim != 5:
        raise RuntimeError(f"grid_sampler_3d(): expected 5D input, got {input.ndim}D")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


# ----- convolution -------------------------------------------------------------------
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """ATen's generic convolution: ``conv{1,2,3}d`` or, ``transposed``,
    ``conv_transpose{1,2,3}d``, chosen by the input's number of spatial dimensions."""
    n = weight.ndim - 2
    if n not in (1, 2, 3):
        raise RuntimeError(f"convolution: expected a 3-D, 4-D or 5-D weight, got "
                           f"{weight.ndim}-D")
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1]
        return fn(input, weight, bias, tuple(stride), tuple(padding), tuple(output_padding),
                  groups, tuple(dilation))
    fn = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return fn(input, weight, bias, tuple(stride), tuple(padding), tuple(dilation), groups)


# ----- norms -------------------------------------------------------------------------
def native_norm(input, p=2, dim=None, keepdim=False, dtype=None):
    """``torch.native_norm``: the ``p``-norm of all elements of a sparse tensor (torch
    has this kernel for sparse tensors only, and only full reductions)."""
    if not input.is_sparse:
        raise NotImplementedError("Could not run 'aten::native_norm' with arguments from "
                                  "the 'CPU' backend: it takes sparse tensors only "
                                  "(use torch.linalg.vector_norm)")
    if dim is not None and sorted(d % input.ndim for d in dim) != list(range(input.ndim)):
        raise RuntimeError("norm_sparse currently only supports full reductions, so 'dim' "
                           "must either be empty or contain all dimensions of the input")
    if keepdim:
        raise RuntimeError("norm_sparse currently does not support keepdim=True")
    if dtype is not None:
        raise RuntimeError("norm_sparse currently does not support 'dtype' argument")
    values = input.coalesce().values()
    return ember.linalg.vector_norm(values, p)


def frobenius_norm(input, dim, keepdim=False):
    """``sqrt(sum(input ** 2))`` over ``dim``."""
    # torch's deprecated kernel records norm.ScalarOpt_dim's node (NormBackward1)
    return NormScalarOpt.apply(input, 2.0, _axes(input, dim), bool(keepdim))


def nuclear_norm(input, dim=None, keepdim=False):
    """The sum of the singular values of the matrices over ``dim`` (the last two
    dimensions of a 2-D input by default)."""
    if isinstance(dim, bool):  # torch.nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError(f"Expected a tensor with 2 dimensions, but got a tensor with "
                               f"{input.ndim} dimension{'s' if input.ndim != 1 else ''} "
                               f"instead.")
        dim = (0, 1)
    return ember.linalg.matrix_norm(input, "nuc", dim=tuple(dim), keepdim=keepdim)


# ----- recurrent cells -------------------------------------------------------------------
# Compositions of ember ops in the order PyTorch's CPU cells run them
# (``ember.nn._rnn_unrolled``): the same graph (``lstm_cell(x, hc)[0].grad_fn`` is
# MulBackward0 over the gates' UnsafeSplitBackward0, as in torch) and the same arithmetic.
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step: ``hx`` is ``(h, c)``; returns ``(h', c')``."""
    return _rnn_unrolled.cell("LSTM", input, tuple(hx), w_ih, w_hh, b_ih, b_hh)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step; returns ``h'``."""
    return _rnn_unrolled.cell("GRU", input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman step with tanh; returns ``h'``."""
    return _rnn_unrolled.cell("RNN_TANH", input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman step with ReLU; returns ``h'``."""
    return _rnn_unrolled.cell("RNN_RELU", input, hx, w_ih, w_hh, b_ih, b_hh)

