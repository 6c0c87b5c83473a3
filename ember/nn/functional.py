"""ember.nn.functional: PyTorch's ``torch.nn.functional`` built from ember ops.

Composites only: no derivative code lives here. Every function follows PyTorch's
argument names, defaults, dtypes and errors. Activations live in
``ember.nn.functional_activations``, losses in ``ember.nn._functional_losses``; both are
re-exported here.
"""
import math
import warnings

from ember import _core as ember
from ember._random_layout import empty_like_layout
from ember._tensor import Tensor, _mode_active, _mode_recorder, _mode_stack
from ember.autograd._modes import routed
from ember.autograd.grad_mode import no_grad

# the activations (and the helpers they share with this module) live in
# functional_activations; every name stays importable from here
from ember.nn.functional_activations import (  # noqa: F401
    _SELU_ALPHA,
    _SELU_SCALE,
    _elu,
    _hardtanh,
    _inplace,
    _maybe_inplace,
    _nonpositive,
    _opmath,
    _softmax_dim,
    _softplus,
    _zero_like_scalar,
    celu,
    celu_,
    elu,
    elu_,
    gelu,
    glu,
    gumbel_softmax,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    hardtanh_,
    leaky_relu,
    leaky_relu_,
    log_softmax,
    logsigmoid,
    mish,
    prelu,
    relu,
    relu6,
    relu_,
    rrelu,
    rrelu_,
    selu,
    selu_,
    sigmoid,
    silu,
    softmax,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanh,
    tanhshrink,
    threshold,
    threshold_,
)
from ember.ops import matmul_graph as _mg
from ember.ops import nn_fused as _fused
from ember.ops._inplace import check_inplace, commit, source_for  # noqa: F401  (kept on F)
from ember.ops.composite_node import call, one_node
from ember.ops.embedding import Embedding, EmbeddingBag
from ember.ops.shape import pad  # noqa: F401  (torch.nn.functional.pad)
from ember.ops.unary import zero_curvature as _zero_curvature  # noqa: F401  (kept on F)

__all__ = [
    "relu", "relu_", "relu6", "elu", "elu_", "selu", "selu_", "celu", "celu_", "leaky_relu",
    "leaky_relu_", "prelu", "gelu", "silu", "mish", "softplus", "softsign", "hardtanh",
    "hardtanh_", "hardsigmoid", "hardswish", "sigmoid", "tanh", "tanhshrink", "softshrink",
    "hardshrink", "logsigmoid", "softmax", "log_softmax", "softmin", "threshold", "threshold_",
    "glu", "linear", "bilinear", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "alpha_dropout", "feature_alpha_dropout", "embedding", "embedding_bag", "one_hot",
    "normalize", "cosine_similarity", "pairwise_distance", "pdist", "rrelu", "rrelu_",
    "gumbel_softmax", "pad",
]


# ----- linear layers ---------------------------------------------------------------------
def _linear_shape_msg(input, weight):
    k, n = input.shape[-1], weight.shape[-1]
    rows = input.numel() // k if k else 0
    out = weight.shape[0] if weight.ndim == 2 else 1
    return (f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k} and {n}x{out}): input of "
            f"shape {list(input.shape)} has {k} features in its last dimension but weight of "
            f"shape {list(weight.shape)} expects {n}")


def _floating(dt):
    """Whether the NumPy dtype ``dt`` is a real floating type (bfloat16's kind is "V")."""
    return dt.kind == "f" or dt.name == "bfloat16"


def _fusable_linear(input, weight, bias):
    """Whether ``linear(input, weight, bias)`` is one fused node (the common case)."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor)):
        return False
    x, w = input._data, weight._data
    dt = x.dtype
    if x.ndim == 1:
        # a vector: PyTorch's nodes when recorded, matmul and add otherwise
        return w.ndim == 2 and x.shape[0] == w.shape[1] and w.dtype == dt and _floating(dt) \
            and (bias is None or (isinstance(bias, Tensor) and bias._data.dtype == dt
                                  and bias._data.shape == (w.shape[0],))) \
            and _mg.records_graph(input, weight, bias)
    return x.ndim >= 2 and w.ndim == 2 and x.shape[-1] == w.shape[1] and w.dtype == dt \
        and _floating(dt) and (bias is None or (
            isinstance(bias, Tensor) and bias._data.dtype == dt
            and bias._data.shape == (w.shape[0],)))


def linear(input, weight, bias=None, *, out=None):
    """``input @ weight.T + bias``: ``(*, in_features) -> (*, out_features)``.

    The common case (an input of 2 or more dims, a 2-D weight, a bias of shape
    (out_features,) or None, one floating dtype) is one node whose gradient needs no
    transposed copies; every other case is built from ``matmul`` and ``add``.
    """
    if out is not None:
        from ember.ops._util import resize_warning, write_out
        result = linear(input, weight, bias)
        if input.ndim == 1 and weight.ndim == 2 and out.numel():
            # torch's kernel writes a vector input's product as a (1, out_features) row
            # first, so it warns of a resize even when ``out`` had the final shape
            resize_warning(out.shape, (1, weight.shape[0]), stacklevel=3)
            return write_out(result, out, "quiet_resize")
        return write_out(result, out, "linear")
    if _fusable_linear(input, weight, bias):
        if _mg.records_graph(input, weight, bias):
            # PyTorch's nodes (AddmmBackward0 over TBackward0...), as the user sees them
            return _mg.linear_graph(input, weight, bias)
        return _fused.fused_linear(input, weight, bias)
    if input.ndim == 0 or weight.ndim == 0:
        raise RuntimeError("both arguments to linear need to be at least 1D, but they are "
                           f"{input.ndim}D and {weight.ndim}D")
    if weight.ndim > 2:
        raise RuntimeError(f"linear(): weight must be 1-D or 2-D, got {weight.ndim}-D")
    if input.shape[-1] != weight.shape[-1]:
        raise RuntimeError(_linear_shape_msg(input, weight))
    if bias is not None and (input.ndim <= 2 or input.is_contiguous()):
        # PyTorch's addmm(bias, input, weight.t()): the two matrices are compared first
        if input.dtype != weight.dtype:
            raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                               f"{_tname(input.dtype)} and {_tname(weight.dtype)}")
        if bias.dtype != input.dtype:
            raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                               f"{_tname(bias.dtype)} and {_tname(input.dtype)}")
    if bias is not None and input.ndim == 2 and weight.ndim == 2 and isinstance(bias, Tensor) \
            and input.dtype == weight.dtype == bias.dtype and input.is_floating_point() \
            and bias.ndim <= 2 and _mg.records_graph(input, weight, bias):
        # any bias that broadcasts to the result: still PyTorch's one addmm node
        shape = (input.shape[0], weight.shape[0])
        if ember.broadcast_shapes(tuple(bias.shape), shape) == shape:
            return _mg.linear_graph(input, weight, bias)
    out = ember.matmul(input, weight.t())  # t() of a vector is itself (TBackward0 too)
    return out if bias is None else out + bias


def _tname(dtype):
    """PyTorch's capitalised scalar type name (Float, Double, Long, ...)."""
    return {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "float16": "Half", "float32": "Float", "float64": "Double"}.get(
                dtype.name, dtype.name.capitalize())


def bilinear(input1, input2, weight, bias=None):
    """``y_k = x1^T W_k x2 + b_k``: ``(*, in1), (*, in2) -> (*, out)``."""
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-D, got {weight.ndim}-D")
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError("bilinear(): input batch dimensions do not match: got "
                           f"{list(input1.shape[:-1])} and {list(input2.shape[:-1])}")
    for i, (x, n) in enumerate(((input1, weight.shape[1]), (input2, weight.shape[2]))):
        if x.ndim == 0 or x.shape[-1] != n:
            raise RuntimeError(f"bilinear(): input{i + 1} size does not match weight size: got "
                               f"{x.shape[-1] if x.ndim else 0} but expected {n} (input{i + 1} "
                               f"shape {list(x.shape)}, weight shape {list(weight.shape)})")
    if input1.dtype == input2.dtype == weight.dtype and weight.is_floating_point() \
            and input1.numel() and _mg.runs_node(weight.dtype, input1, input2, weight, bias):
        # PyTorch's nodes; float16/bfloat16 also unrecorded: its one product, in float32
        return _mg.bilinear_graph(input1, input2, weight, bias)
    # (..., 1, 1, in1) @ (out, in1, in2) -> (..., out, 1, in2)
    t = ember.matmul(input1.unsqueeze(-2).unsqueeze(-2), weight).squeeze(-2)
    # sum in the operands' dtype: an integer sum would promote to int64, torch's bmm keeps it
    out = (t * input2.unsqueeze(-2)).sum(-1, dtype=t.dtype)
    return out if bias is None else out + bias


# ----- dropout ---------------------------------------------------------------------------
def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _recording_modes():
    """Whether a mode other than an observer (the profiler's) is on the stack: a graph
    capture, which sees only the ops it records."""
    n = _mode_active[0]
    return bool(n) and not all(getattr(_mode_stack[i], "observer", False) for i in range(n))


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def _noise(input, shape, q):
    """A 0/1 tensor of ``shape`` in input's dtype, 1 with probability ``q`` (ember's RNG,
    drawn as PyTorch draws its dropout masks: ``empty_like(input).bernoulli_(q)``, which
    fills a transposed input's mask in its memory order; a feature mask is
    ``empty(shape)``)."""
    if shape == tuple(input.shape) and not _recording_modes():
        # (under a capture the mask must be a recorded draw: ``empty_like_layout``'s
        # buffer is not recorded, so a trace would keep the example's mask as a constant)
        return empty_like_layout(input).bernoulli_(q)
    return ember.empty(shape, dtype=input.dtype, device=input.device).bernoulli_(q)


def _dropout_impl(input, p, training, inplace, feature=False, alpha=False):
    _check_p(p)
    if p == 0 or not training or input.numel() == 0:
        return input
    if feature:
        if input.ndim < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    else:
        shape = tuple(input.shape)
    if p == 1:
        if alpha:
            raise NotImplementedError("alpha_dropout with p=1 (PyTorch returns NaNs)")
        return _maybe_inplace(input, inplace, lambda x: x * ember.zeros(
            (), dtype=x.dtype, device=x.device))
    with no_grad():
        noise = _noise(input, shape, 1 - p)
    if alpha:
        a_const = 1.7580993408473766
        a = 1.0 / math.sqrt((a_const * a_const * p + 1) * (1 - p))
        with no_grad():
            b = (noise - 1) * (a_const * a) + a_const * a * p
            noise = noise * a
        return _maybe_inplace(input, inplace, lambda x: x * noise + b)
    with no_grad():
        noise = noise / (1 - p)
    return _maybe_inplace(input, inplace, lambda x: x * noise)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (identity when not ``training``)."""
    return _dropout_impl(input, p, training, inplace)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps the self-normalising mean and variance (for SELU networks)."""
    return _dropout_impl(input, p, training, inplace, alpha=True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """:func:`alpha_dropout` on whole channels."""
    return _dropout_impl(input, p, training, inplace, feature=True, alpha=True)


def _feature_dropout(input, p, training, inplace, batched_dim):
    _check_p(p)
    batched = input.ndim == batched_dim
    if not batched:
        input = input.unsqueeze(0)
    out = _dropout_impl(input, p, training, inplace and batched, feature=True)
    return out if batched else out.squeeze(0)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` input with probability ``p``."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout on "
                           "inputs with 1 spatial dimension, a channel dimension, and an "
                           "optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``(N, C, H, W)`` input with probability ``p``."""
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).", stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape "
                      "(C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", stacklevel=2)
    return _dropout_impl(input, p, training, inplace, feature=True)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input."""
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 4D or 5D inputs).", stacklevel=2)
    return _feature_dropout(input, p, training, inplace, 5)


# ----- embeddings ------------------------------------------------------------------------
@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def _check_indices(input, num, bag=False):
    if not isinstance(input, Tensor) or input.dtype not in (ember.int64, ember.int32):
        dt = input._type_name() if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {dt} instead "
                           "(while checking arguments for embedding)")
    if input.numel() and not input.is_meta:
        lo, hi = int(input.min()), int(input.max())
        if bag and (lo < 0 or hi >= num):  # torch's bag kernel checks, as RuntimeError
            raise RuntimeError("embedding_bag: Expected idx >= 0 && idx < num_embeddings but "
                               f"found idx to be {lo if lo < 0 else hi}")
        if num == 0:  # torch's index_select refuses an empty table before any bound
            raise RuntimeError("index_select(): self indexing axis dim should be positive")
        if lo < 0 or hi >= num:
            raise IndexError("index out of range in self")


def _renorm_(weight, input, max_norm, norm_type):
    """PyTorch's ``embedding_renorm_``: rows used by ``input`` with norm above ``max_norm``
    are scaled (in place, outside autograd) to norm ``max_norm``."""
    with no_grad():
        rows = ember.tensor(sorted(set(input.reshape(-1).tolist())), dtype=ember.int64,
                            device=weight.device)
        if rows.numel() == 0:
            return
        sel = weight[rows]
        norms = ember.norm(sel, norm_type, dim=1, keepdim=True)
        scale = ember.where(norms > max_norm, max_norm / (norms + 1e-7),
                            ember.ones_like(norms))
        if (norms > max_norm).any():
            # torch scales each such row in place: a row whose elements share memory
            # (a stride-0 column) is refused, rows sharing memory with each other are not
            from ember.ops._inplace import refuse_overlap
            refuse_overlap(weight[0])
        weight._data[rows._data] = (sel * scale)._data
        weight._vc[0] += 1


def _padding_idx(padding_idx, num):
    if padding_idx is None:
        return None
    if padding_idx > 0:
        if padding_idx >= num:
            raise AssertionError("Padding_idx must be within num_embeddings")
    elif padding_idx < 0:
        if padding_idx < -num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = num + padding_idx
    return padding_idx


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Look up rows of ``weight`` (``num_embeddings x dim``) at the indices ``input``.

    Rows at ``padding_idx`` get no gradient; with ``max_norm`` the looked-up rows are
    first renormalised in place, as PyTorch does. ``sparse=True`` gives the same gradient
    values as a dense tensor (ember's autograd has no sparse gradients).
    """
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("embedding", embedding, locals())
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    num = weight.shape[0]
    padding_idx = _padding_idx(padding_idx, num)
    _check_indices(input, num)
    if max_norm is not None:
        _renorm_(weight, input, max_norm, norm_type)
    if scale_grad_by_freq and sparse and weight.requires_grad and ember.is_grad_enabled():
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with "
                           "sparse gradients")
    return call(Embedding, weight, indices=input, padding_idx=padding_idx,
                scale_grad_by_freq=scale_grad_by_freq)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxes of bags of embeddings, without materialising each lookup.

    ``input`` is 2-D ``(B, N)`` (B bags of N indices) or 1-D with ``offsets`` giving the
    start of each bag. Empty bags give zeros; ``padding_idx`` entries are skipped.
    ``sparse=True`` gives the same gradient values as a dense tensor.
    """
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        # one node: the bags' offsets and sizes are computed from the traced indices
        return m.composite_locals("embedding_bag", embedding_bag, locals())
    if isinstance(padding_idx, ember.Tensor):  # (a 0-d integer tensor, as torch takes one)
        padding_idx = padding_idx.__index__()
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError("embedding_bag: per_sample_weights was not None. "
                                      "per_sample_weights is only supported for mode='sum' "
                                      f"(got mode='{mode}'). Please open a feature request on "
                                      "GitHub.")
        if per_sample_weights.shape != input.shape:
            raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape})"
                             f" is not None, then it must have the same shape as the input "
                             f"({input.shape})")
    num = weight.shape[0]
    padding_idx = _padding_idx(padding_idx, num)
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type(offsets).__name__}")
        n_bags, bag = input.shape
        starts = list(range(0, n_bags * bag, bag))
        flat = input.reshape(-1)
        psw = None if per_sample_weights is None else per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        starts = [int(o) for o in offsets.tolist()]
        if include_last_offset:
            starts = starts[:-1]
        if starts and starts[0] != 0:
            raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the "
                               f"mini-batch has to start from position 0. However, got "
                               f"{starts[0]}")
        flat = input
        psw = per_sample_weights
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    _check_indices(flat, num, bag=True)
    if max_norm is not None:
        _renorm_(weight, flat, max_norm, norm_type)
    n = flat.shape[0]
    ends = starts[1:] + [n] if not (include_last_offset and input.ndim == 1) else \
        [int(o) for o in offsets.tolist()][1:]
    if scale_grad_by_freq and sparse and weight.requires_grad and ember.is_grad_enabled():
        # PyTorch refuses in backward; ember says so as soon as it would matter
        raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with "
                           "sparse gradients")
    return call(EmbeddingBag, weight, psw, flat=flat, starts=starts, ends=ends, mode=mode,
                padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)


def one_hot(tensor, num_classes=-1):
    """``(*) int64 -> (*, num_classes) int64`` with a 1 at each index."""
    if not isinstance(tensor, Tensor) or tensor.dtype != ember.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if _mode_active[0] and (m := _mode_recorder((tensor,))) is not None:
        # a whole call in a capture: without num_classes its width is the largest index
        return m.composite_locals("one_hot", one_hot, locals())
    if tensor.numel() == 0:
        if num_classes == -1:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
    else:
        # checks as booleans: a trace keeps only num_classes read from the values
        if bool((tensor < 0).any()):
            raise RuntimeError("Class values must be non-negative.")
        if num_classes == -1:
            from ember._graph.capture import values_read
            values_read(tensor)  # a trace keeps the number of classes
            num_classes = int(tensor.max()) + 1
        elif bool((tensor >= num_classes).any()):
            raise RuntimeError("Class values must be smaller than num_classes.")
    classes = ember.arange(num_classes, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).to(ember.int64)


# ----- distances -------------------------------------------------------------------------
def _clamp_min_forward(t, eps):
    """``t.clamp_min(eps)`` in value, with ``t``'s own gradient (PyTorch clamps under
    no_grad in cosine_similarity and gaussian_nll_loss). Only the elements below ``eps``
    are shifted, so an infinite one stays infinite (not inf - inf)."""
    return ember.where(t < eps, t + (eps - t).detach(), t)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    from ember.ops._util import write_out
    denom = ember.norm(input, p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return write_out(input / denom, out, "normalize", (input,))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (broadcasting)."""
    if _mode_active[0]:
        x1, x2 = ember.broadcast_tensors(x1, x2)
        n1 = _clamp_min_forward(ember.norm(x1, 2, dim, keepdim=True), eps)
        n2 = _clamp_min_forward(ember.norm(x2, 2, dim, keepdim=True), eps)
        return ((x1 / n1) * (x2 / n2)).sum(dim)
    # PyTorch's steps and nodes: both operands in their common dtype, expanded to one
    # shape when theirs differ, each divided by a copy of its norm clamped in place
    # without recording (the gradient is the unclamped norm's)
    from ember.ops.shape import Expand
    dt = ember.result_type(x1, x2)
    x1, x2 = x1.to(dt), x2.to(dt)
    if x1.shape != x2.shape:
        shape = ember.broadcast_shapes(x1.shape, x2.shape)
        x1, x2 = Expand.apply(x1, tuple(shape)), Expand.apply(x2, tuple(shape))
    n1 = ember.norm(x1, 2, dim, keepdim=True).clone()
    n2 = ember.norm(x2, 2, dim, keepdim=True).clone()
    with ember.no_grad():
        n1.clamp_min_(eps)
        n2.clamp_min_(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last dimension."""
    nd = max(x1.ndim, x2.ndim)
    dim = nd - 1 if nd else None
    diff = x1 - x2
    if diff._data.dtype.kind != "f" or _mode_active[0] or isinstance(p, str):
        return ember.norm(diff + eps, p, dim, keepdim=keepdim)
    # PyTorch's nodes: add.Scalar (AddBackward1) and norm.ScalarOpt_dim (NormBackward1)
    from ember.ops.elementwise import AddScalar
    from ember.ops.reduction import _axes
    from ember.ops.vector_norms import NormScalarOpt
    shifted = AddScalar.apply(diff, eps)
    return NormScalarOpt.apply(shifted, float(p), _axes(shifted, dim), bool(keepdim))


@one_node("PdistBackward0", 1)
def pdist(input, p=2):
    """Distances between every pair of rows of a 2-D input (upper triangle, row-major)."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one call in a capture: the pairs it picks follow the number of rows
        return m.composite_locals("pdist", pdist, locals())
    n = input.shape[0]
    if n < 2:  # no pairs: an empty result, still attached to the graph
        return input.reshape(-1)[:0]
    i, j = ember.triu_indices(n, n, 1, device=input.device)
    d = input[i] - input[j]
    if p == 0:
        # each differing coordinate counts 1 and a NaN difference stays NaN, as
        # PyTorch's pdist (and cdist) kernels: norm's count of nonzeros takes NaN as 1
        return d.abs().ceil().clamp(max=1).sum(1)
    return ember.norm(d, p, 1)


from ember.nn._functional_losses import *  # noqa: E402,F401,F403
from ember.nn._functional_losses import __all__ as _loss_all  # noqa: E402

__all__ += _loss_all


# convolution, pooling and normalization functions
from ember.ops.nn import *  # noqa: E402,F401,F403
from ember.ops.nn import __all__ as _nn_all  # noqa: E402

__all__ += _nn_all
from ember.nn.functional_attention import *  # noqa: E402,F401,F403
from ember.nn.functional_attention import __all__ as _attn_all  # noqa: E402,F401,E501
from ember.nn.functional_attention import _canonical_mask, _none_or_dtype  # noqa: E402,F401

__all__ += _attn_all
from ember.ops.grid_sample import affine_grid, grid_sample  # noqa: E402,F401
from ember.ops.resample import ChannelShuffle  # noqa: E402

__all__ += ["affine_grid", "grid_sample"]


def _check_shuffle(input, groups):
    if input.dim() <= 2:
        raise RuntimeError("channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError("Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")


def channel_shuffle(input, groups):
    """Split the channels (dim 1) into ``groups`` and interleave them:
    (N, g*k, *) -> view (N, g, k, *) -> transpose -> (N, k*g, *)."""
    _check_shuffle(input, groups)
    return call(ChannelShuffle, input, groups)


__all__ += ["channel_shuffle"]


from ember.nn._functional_aten import *  # noqa: E402,F401,F403  (constants, ATen aliases)

# fractional max pooling and linear_cross_entropy
from ember.nn.functional_fractional import *  # noqa: E402,F401,F403
from ember.nn.functional_fractional import __all__ as _frac_all  # noqa: E402

__all__ += _frac_all
