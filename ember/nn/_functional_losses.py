"""Loss functions of ``ember.nn.functional`` (re-exported there), built from ember ops.

Each takes PyTorch's arguments, including the legacy ``size_average``/``reduce``
pair, and reduces with ``reduction='none' | 'mean' | 'sum'``.
"""
import math
import warnings

from ember import _core as ember
from ember._tensor import Tensor, _mode_active, _mode_recorder
from ember.autograd._modes import routed
from ember.ops import losses as _losses
from ember.ops.elementwise import AddScalar as _AddScalar
from ember.ops.elementwise import DivScalar as _DivScalar
from ember.ops.elementwise import MulScalar as _MulScalar
from ember.ops.elementwise import SubScalar as _SubScalar

__all__ = ["l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div", "nll_loss", "cross_entropy",
           "poisson_nll_loss", "gaussian_nll_loss", "cosine_embedding_loss",
           "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
           "triplet_margin_loss",
           "triplet_margin_with_distance_loss", "ctc_loss"]


def legacy_get_string(size_average, reduce, emit_warning=True):
    """The ``reduction`` string for the deprecated ``size_average``/``reduce`` pair."""
    if size_average is None:
        size_average = True
    if reduce is None:
        reduce = True
    if size_average and reduce:
        ret = "mean"
    elif reduce:
        ret = "sum"
    else:
        ret = "none"
    if emit_warning:
        warnings.warn(f"size_average and reduce args will be deprecated, please use "
                      f"reduction='{ret}' instead.", stacklevel=3)
    return ret


def _reduction(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return legacy_get_string(size_average, reduce)
    return reduction


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_reduction(reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_size(input, target):
    if target.shape != input.shape:
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", stacklevel=3)


def _broadcast(input, target):
    """``input`` and ``target`` expanded to their common shape, as PyTorch's
    ``broadcast_tensors`` does before its loss kernels (an operand already of that
    shape is passed as it is)."""
    a, b = tuple(input.shape), tuple(target.shape)
    if a == b:
        return input, target
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    for d in range(n - 1, -1, -1):
        if pa[d] != pb[d] and pa[d] != 1 and pb[d] != 1:
            raise RuntimeError(f"The size of tensor a ({pa[d]}) must match the size of "
                               f"tensor b ({pb[d]}) at non-singleton dimension {d}")
    if _mode_active[0]:   # a capture: sizes read from the traced tensors, not frozen
        return tuple(ember.broadcast_tensors(input, target))
    shape = tuple(ember.broadcast_shapes(a, b))
    return tuple(t if tuple(t.shape) == shape else t.expand(shape) for t in (input, target))


def _not_differentiable(fn, name, t):
    """PyTorch's error for an argument its kernel ``fn`` does not differentiate."""
    if isinstance(t, Tensor) and t.requires_grad and ember.is_grad_enabled():
        raise RuntimeError(f"The function '{fn}' is not differentiable with respect to "
                           f"argument '{name}'. This input cannot have requires_grad True.")


def _same_dtype(weight, input):
    """PyTorch's check that class weights have the input's dtype."""
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {_tname(input.dtype)} but found "
                           f"{_tname(weight.dtype)}")


def _weighted(loss, weight, reduction, mean_by_weight):
    """``loss * weight`` reduced; 'mean' divides by the weights' sum where PyTorch's
    weighted regression losses do (``mean_by_weight``)."""
    if weight.shape != loss.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / weight.sum() if mean_by_weight else loss.mean()


def _zero(x):
    return ember.zeros((), dtype=x.dtype, device=x.device)


def _tname(dtype):
    """PyTorch's scalar type name of ``dtype`` (Float, Double, Long, Bool ...)."""
    from ember.ops._util import _TYPE_NAMES
    return _TYPE_NAMES.get(dtype.name, dtype.name.capitalize())


# the C++ names PyTorch's in-place kernels print for an integral output type
_CPP_NAMES = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool"}


def _check_into_input(input, target):
    """PyTorch computes these losses into a tensor of the input's type: the operands'
    result type must cast to it (its in-place rule)."""
    from ember.backend.dtypes import result_type_of
    from ember.ops._inplace import _check_cast
    _check_cast(result_type_of(input, target).np, input._data.dtype)


def _bool_as(target, input):
    # a bool target takes part as 0/1 in the input's type, as PyTorch promotes it
    if isinstance(target, Tensor) and target.dtype is ember.bool and input.is_floating_point():
        return target.to(input.dtype)
    return target


def _in_dtype_of(target, input):
    # kernels whose output has the input's type compute with a floating target cast to it
    if isinstance(target, Tensor) and target.dtype != input.dtype \
            and target.is_floating_point() and input.is_floating_point():
        return target.to(input.dtype)
    return target


# ----- regression losses ---------------------------------------------------------------
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error ``|input - target|``."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_size(input, target)
    x, t = _broadcast(input, target)
    loss = (x - t).abs()
    if weight is not None:
        return _weighted(loss, weight, reduction, True)
    return _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error ``(input - target)**2``."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_size(input, target)
    target = _bool_as(target, input)
    x, t = _broadcast(input, target)
    if weight is not None:
        return _weighted((x - t).pow(2), weight, reduction, True)
    return _losses.MseLoss.apply(x, t, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _warn_size(input, target)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    target = _bool_as(target, input)
    x, t = _broadcast(input, target)
    if beta == 0:   # PyTorch runs l1_loss, a composite
        return _reduce((x - t).abs(), reduction)
    return _losses.SmoothL1Loss.apply(x, t, reduction, beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 delta)``."""
    _check_reduction(reduction)
    _warn_size(input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _check_into_input(input, target)
    target = _in_dtype_of(_bool_as(target, input), input)   # the output has input's type
    x, t = _broadcast(input, target)
    if weight is not None:
        return _weighted(_losses.HuberLoss.apply(x, t, "none", delta), weight, reduction,
                         False)
    return _losses.HuberLoss.apply(x, t, reduction, delta)


# ----- binary classification -------------------------------------------------------------
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """``-(t log x + (1 - t) log(1 - x))`` with the logs clamped at -100, as PyTorch."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the same "
                         "size.")
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {_tname(target.dtype)} but expected "
                           f"{_tname(input.dtype)}")
    _not_differentiable("binary_cross_entropy", "weight", weight)
    return _losses.BinaryCrossEntropy.apply(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """``binary_cross_entropy(sigmoid(input), target)`` computed stably from logits.

    ``pos_weight`` weighs the positive term (one weight per class, broadcast).
    """
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    # PyTorch computes into a tensor of the target's type: that type is the output's
    if target.dtype is ember.bool:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if not target.is_floating_point():
        raise RuntimeError(f"result type {_tname(input.dtype)} can't be cast to the desired "
                           f"output type {_tname(target.dtype)}")
    if input.is_floating_point() and target.dtype != input.dtype:
        return binary_cross_entropy_with_logits(
            input, target.to(input.dtype), weight, reduction=reduction,
            pos_weight=pos_weight).to(target.dtype)
    _not_differentiable("binary_cross_entropy_with_logits", "weight", weight)
    _not_differentiable("binary_cross_entropy_with_logits", "pos_weight", pos_weight)
    return _losses.BinaryCrossEntropyWithLogits.apply(input, target, weight, pos_weight,
                                                      reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-target * input))``."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    # PyTorch writes into a tensor of the input's shape and type, and does not warn
    if isinstance(target, Tensor) and target.shape != input.shape:
        try:
            shape = tuple(ember.broadcast_shapes(input.shape, target.shape))
        except RuntimeError:   # the product below says it in torch's words
            shape = tuple(input.shape)
        if shape != tuple(input.shape):
            raise RuntimeError(f"output with shape {list(input.shape)} doesn't match the "
                               f"broadcast shape {list(shape)}")
    # PyTorch's composite: (-input).mul_(target).exp_().log1p_(), in the input's type
    if input.dtype is ember.bool:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If "
                           "you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    _check_into_input(input, target)
    if not input.is_floating_point() and not input.is_complex():  # (its exp_)
        from ember.ops._inplace import _check_cast
        _check_cast(ember.get_default_dtype().np, input._data.dtype)
    target = _in_dtype_of(target, input)
    _not_differentiable("soft_margin_loss", "target", target)
    return _losses.SoftMarginLoss.apply(input, target, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per-class logistic loss averaged over classes: ``(N, C) -> (N)`` before reduction."""
    from ember.nn.functional import logsigmoid
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    loss = loss.sum(dim=class_dim) / input.shape[class_dim]
    return _reduce(loss, reduction)


# ----- distributions ---------------------------------------------------------------------
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence with ``input`` given as log-probabilities.

    ``reduction='batchmean'`` divides the sum by the batch size (the math definition).
    """
    if size_average is not None or reduce is not None:
        reduction = legacy_get_string(size_average, reduce)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=2)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if any(isinstance(t, Tensor) and not (t.is_floating_point() or t.is_complex())
           for t in (input, target)):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = ember.xlogy(target, target) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Negative log likelihood of ``target ~ Poisson(input)`` (``exp(input)`` if log_input)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    # the nodes of PyTorch's kernel: a number joins a tensor as its Scalar overload
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * _AddScalar.apply(input, eps).log()
    if full:
        stirling = target * target.log() - target + _MulScalar.apply(
            _MulScalar.apply(target, 2 * math.pi).log(), 0.5)
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def _var_negative(var):
    # a check on the values, as PyTorch's (a graph break under its compile too): a
    # compiled graph would skip it for other values, so the call runs eagerly
    if _mode_active[0]:
        from ember._graph.capture import branch_on_values
        branch_on_values(var, "gaussian_nll_loss's var (is an entry negative?)")
    return bool((var < 0).any())


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Negative log likelihood of ``target ~ N(input, var)``; ``var`` is clamped at ``eps``
    in value only (its gradient is the unclamped one, as PyTorch's)."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * ember.ones_like(input)
    elif _var_negative(var):
        raise ValueError("var has negative entry/entries")
    elif not var.is_floating_point():
        # PyTorch clamps var in place: a float result cannot be stored in it
        raise RuntimeError(f"result type {_tname(input.dtype)} can't be cast to the desired "
                           f"output type {_CPP_NAMES.get(var.dtype.name, var.dtype.name)}")
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif input.ndim == var.ndim and sum(
                y for x, y in zip(input.shape, var.shape) if x != y) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # clamped in value only: PyTorch clones var and clamps the copy without recording
    var = var.clone()
    with ember.no_grad():
        var.clamp_(min=eps)
    loss = (var.log() + (input - target).pow(2) / var) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ----- classification --------------------------------------------------------------------
def _dtype_error(target):
    dt = target.dtype.name.capitalize() if isinstance(target, Tensor) else "?"
    dt = {"Int64": "Long", "Int32": "Int", "Float32": "Float", "Float64": "Double",
          "Int16": "Short", "Int8": "Char", "Float16": "Half"}.get(dt, dt)
    return RuntimeError(f"expected target dtype to be Long or Byte, but got {dt}")


def _check_nll(input, target, weight):
    # PyTorch's order (nll_loss_nd, then the kernel's checks): the dimensions, the batch
    # sizes, the target's shape, and only then its dtype
    if not isinstance(target, Tensor):
        raise _dtype_error(target)
    if input.ndim < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.ndim})")
    if input.ndim >= 2 and (target.ndim == 0 or input.shape[0] != target.shape[0]):
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 0}).")
    if input.ndim <= 2 and target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input.ndim <= 2 and target.dtype not in (ember.int64, ember.uint8):
        raise _dtype_error(target)
    if input.ndim == 1 and target.ndim == 1 and target.shape[0] != 1:
        raise ValueError("For 1D input, 1D target must have size 1, but got target size: "
                         f"{target.shape[0]}")
    if input.ndim == 4:  # PyTorch's nll_loss2d kernel, with its own messages
        if target.ndim != 3:
            raise RuntimeError("only batches of spatial targets supported (3D tensors) but got "
                               f"targets of dimension: {target.ndim}")
        if tuple(input.shape[2:]) != tuple(target.shape[1:]):
            raise RuntimeError(f"size mismatch (got input: {list(input.shape)} , target: "
                               f"{list(target.shape)}")
    elif input.ndim > 2:
        expected = [input.shape[0], *input.shape[2:]]
        if list(target.shape) != expected:
            raise RuntimeError(f"Expected target size {expected}, got {list(target.shape)}")
    if target.dtype not in (ember.int64, ember.uint8):
        raise _dtype_error(target)
    n_classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
    if weight is not None and weight.numel() != n_classes:
        raise RuntimeError(f"weight tensor should be defined either for all {n_classes} classes "
                           f"or no classes but got weight tensor of shape: "
                           f"{list(weight.shape)}")
    return n_classes


@routed  # vmap has a function-level rule for it (ember.func._function_rules)
def _nll(input, target, weight, ignore_index, reduction, host_of=None):
    """nll_loss on checked inputs; returns the loss: PyTorch's one ``nll_loss`` node for
    (C) and (N, C) inputs, its ``nll_loss2d`` for (N, C, H, W), other ranks viewed as
    (N, C, 1, -1) for it (and the 'none' result viewed back), as PyTorch's
    ``nll_loss_nd``. ``host_of`` is vmap's (see :func:`_nll_batched`)."""
    n_classes = _check_nll(input, target, weight)
    target = target.to(ember.int64)
    if host_of is not None:
        return _nll_batched(input, target, weight, ignore_index, reduction, n_classes,
                            host_of)
    _not_differentiable("nll_loss_forward", "weight", weight)
    _same_dtype(weight, input)
    if input.ndim <= 2:
        return _losses.NllLoss.apply(input, target, weight, ignore_index, reduction)
    if input.ndim == 4:
        return _losses.NllLoss2d.apply(input, target, weight, ignore_index, reduction)
    n = input.shape[0]
    rest = math.prod(input.shape[2:])
    out = _losses.NllLoss2d.apply(input.reshape(n, n_classes, 1, rest),
                                  target.reshape(n, 1, rest), weight, ignore_index, reduction)
    return out.view(target.shape) if reduction == "none" else out


def _nll_batched(input, target, weight, ignore_index, reduction, n_classes, host_of):
    """nll_loss under vmap, in batched ember ops: ``host_of(t)`` reads the whole batch's
    targets for the bounds check, and the all-ignored mean is a ``where``, so no value
    is read on the way."""
    if input.ndim == 1:
        scores = input.unsqueeze(0)
        t = target.reshape(1)
    else:
        scores = input.movedim(1, -1).reshape(target.numel(), n_classes)  # C may be 0
        t = target.reshape(-1)
    valid = t != ignore_index
    safe = ember.where(valid, t, ember.zeros((), dtype=ember.int64, device=t.device))
    th = host_of(t)
    bad = (th != ignore_index) & ((th < 0) | (th >= n_classes))
    if bad.any():
        raise IndexError(f"Target {int(th[bad][0])} is out of bounds.")
    picked = scores[ember.arange(t.shape[0], device=t.device), safe]
    w = valid.to(input.dtype)
    if weight is not None:
        w = w * weight[safe]
    loss = -picked * w
    if reduction == "none":
        return loss.reshape(target.shape)
    if reduction == "sum":
        return loss.sum()
    total = w.sum()
    empty = total == 0   # every target ignored: a NaN value and a zero gradient
    return ember.where(empty, float("nan"),
                       loss.sum() / ember.where(empty, ember.ones_like(total), total))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log likelihood: ``-input[n, target[n]] * weight[target[n]]``.

    ``input`` is ``(C)``, ``(N, C)`` or ``(N, C, d1, ...)`` log-probabilities and
    ``target`` the class indices; ``'mean'`` divides by the total weight of the
    targets that are not ``ignore_index``.
    """
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _nll(input, target, weight, ignore_index, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """``nll_loss(log_softmax(input, 1), target)`` for class indices, or the soft-label
    cross entropy when ``target`` holds class probabilities (same shape as input)."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing}")
    if input.ndim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    if weight is None and label_smoothing == 0 and not _mode_active[0] \
            and isinstance(target, Tensor) and target.dtype is ember.int64 \
            and target.ndim == 1 and input.ndim == 2 and input.shape[0] == target.shape[0]:
        # the common classification call, with nothing left to check: PyTorch's two
        # nodes, log_softmax then nll_loss, without the general route's checks
        return _losses.log_softmax_nll(input, target, ignore_index, reduction)
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    logp = ember.log_softmax(input, class_dim)
    if weight is not None:
        wshape = [1] * input.ndim
        wshape[class_dim] = n_classes
    if input.shape == target.shape:
        if not target.is_floating_point():
            raise RuntimeError(f"Expected floating point type for target with class "
                               f"probabilities, got {_tname(target.dtype)}")
        if ignore_index >= 0:
            raise RuntimeError("ignore_index is not supported for floating point target")
        if label_smoothing > 0:
            target = _AddScalar.apply(_MulScalar.apply(target, 1 - label_smoothing),
                                      label_smoothing / n_classes)
        prod = logp * target
        if weight is not None:
            prod = prod * weight.reshape(wshape)
        if reduction == "mean":
            if not input.numel():  # torch divides by numel / C: NaN with no elements
                return -prod.sum() / 0.0
            # the sum over the samples divided by their count as a number, PyTorch's
            # DivBackward1 node (a traced count stays a computation)
            return _DivScalar.apply(-prod.sum(), input.numel() // n_classes)
        if reduction == "sum":
            return -prod.sum()
        return -prod.sum(class_dim)
    nll = _nll(logp, target, weight, ignore_index, reduction)
    if label_smoothing <= 0:
        return nll
    ignore = target == ignore_index
    if weight is not None:
        smooth = -(logp * weight.reshape(wshape)).sum(class_dim)
    else:
        smooth = -logp.sum(class_dim)
    smooth = smooth.masked_fill(ignore, 0.0)
    if reduction == "mean":
        if weight is not None:
            # the weights of the kept targets, without a boolean-mask selection (whose
            # length depends on the values, which vmap refuses): ignored ones count 0
            kept = target.masked_fill(ignore, 0).reshape(-1).to(ember.int64)
            ret = smooth.sum() / weight[kept].masked_fill(ignore.reshape(-1), 0.0).sum()
        else:
            ret = smooth.sum() / (~ignore).sum()
    elif reduction == "sum":
        ret = smooth.sum()
    else:
        ret = smooth
    return _MulScalar.apply(nll, 1 - label_smoothing) + \
        _MulScalar.apply(ret, label_smoothing / n_classes)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Multi-class hinge loss: ``sum_{j != y} max(0, margin - x[y] + x[j])**p / C``."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    n, c = x.shape
    if (target.ndim != 1 or target.shape[0] != n) if input.ndim == 2 else \
            (target.ndim > 1 or target.numel() != 1):
        raise RuntimeError("multi_margin_loss: target tensor should be 1-D with size equal to "
                           "the number of input samples (batch size). Expected target size "
                           f"[{n}], but got {list(target.shape)}. Input has shape "
                           f"{list(input.shape)}.")
    if target.dtype is not ember.int64:
        raise RuntimeError(f"expected scalar type Long but found {_tname(target.dtype)}")
    _not_differentiable("multi_margin_loss", "weight", weight)
    _same_dtype(weight, input)
    return _losses.MultiMarginLoss.apply(input, target, weight, p, margin, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: for each target class ``y`` (``target`` lists them, ended
    by the first -1) and each non-target class ``i``: ``max(0, 1 - (x[y] - x[i])) / C``."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if _mode_active[0] and (m := _mode_recorder((input, target))) is not None:
        # one node: which classes are targets is read from the traced target
        return m.composite("multilabel_margin_loss", multilabel_margin_loss, (input, target),
                           {"reduction": reduction})
    if target.shape != input.shape or input.ndim > 2:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    if target.dtype is not ember.int64:
        raise RuntimeError(f"expected scalar type Long but found {_tname(target.dtype)}")
    if input.numel() == 0 and (input.ndim < 2 or input.shape[1] == 0):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(input.shape)}")
    t = target._host()
    c = input.shape[-1] if input.ndim else 1
    if t.size and (t.min() < -1 or t.max() >= c):
        raise RuntimeError("argument #2 'target' is out of range")
    return _losses.MultilabelMarginLoss.apply(input, target, reduction)


# ----- embeddings and ranking ------------------------------------------------------------
def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(x1, x2)`` for ``target == 1``, ``max(0, cos(x1, x2) - margin)`` for -1."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != target.ndim + 1 or input2.ndim != target.ndim + 1:
        raise RuntimeError(f"{target.ndim}D target tensor expects {target.ndim + 1}D input "
                           f"tensors, but found inputs with sizes {list(input1.shape)} and "
                           f"{list(input2.shape)}.")
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"cosine_embedding_loss: expected input1 and input2 to have the "
                           f"same number of dimensions, but got {input1.ndim} and {input2.ndim}")
    if target.ndim != input1.ndim - 1:
        raise RuntimeError(f"{input1.ndim}D target tensor expects {input1.ndim - 1}D input "
                           f"tensors, but found inputs with sizes {list(input1.shape)} and "
                           f"{list(input2.shape)}.")
    dim = input1.ndim - 1
    eps = 1e-12
    prod = (input1 * input2).sum(dim)
    mag1 = _AddScalar.apply((input1 * input1).sum(dim), eps)
    mag2 = _AddScalar.apply((input2 * input2).sum(dim), eps)
    cos = prod / (mag1 * mag2).sqrt()
    zero = _zero(cos)
    # ``1 - cos`` as PyTorch's kernel writes a number minus a tensor: the number filled
    # into a tensor, then a subtraction
    pos = ember.where(target == 1, ember.full_like(cos, 1) - cos, zero)
    neg = ember.where(target == -1, _SubScalar.apply(cos, margin).clamp_min(0), zero)
    return _reduce(pos + neg, reduction)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {input1.shape}, input2: {input2.shape}, "
                           f"target: {target.shape} ")
    # the margin is a float, as in ATen's schema: integer inputs give a float loss
    return _reduce(_AddScalar.apply(-target * (input1 - input2), float(margin)).clamp_min(0),
                   reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``x`` for ``target == 1`` and ``max(0, margin - x)`` for ``target == -1``."""
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    zero = _zero(input)
    margin_clamp = (ember.full_like(input, margin) - input).clamp_min(0)
    out = ember.where(target != 1, margin_clamp, zero) + ember.where(target != -1, input, zero)
    return _reduce(out, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with the p-norm pairwise distance."""
    from ember.nn.functional import pairwise_distance
    reduction = _reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    a, pd, nd = anchor.ndim, positive.ndim, negative.ndim
    if not (a == pd == nd):
        raise RuntimeError("The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {a}D, positive {pd}D, "
                           f"and negative {nd}D inputs")
    if margin <= 0:
        raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                         f"{margin} instead")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ember.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((_AddScalar.apply(d_pos, margin) - d_neg).clamp_min(0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """:func:`triplet_margin_loss` with any ``distance_function`` (default pairwise L2)."""
    from ember.nn.functional import pairwise_distance
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, "
                         f"got {margin} instead")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = ember.minimum(d_neg, dist(positive, negative))
    return _reduce((d_pos + margin - d_neg).clamp_min(0), reduction)


def _lengths(x, name):
    import numpy as np
    if isinstance(x, Tensor):
        if x.is_floating_point() or x.is_complex():
            raise RuntimeError(f"{name} must be integral")
        return np.asarray(x.detach().cpu().numpy(), dtype=np.int64).reshape(-1)
    return np.asarray(x, dtype=np.int64).reshape(-1)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist temporal classification loss.

    ``log_probs`` (T, N, C) (or (T, C) unbatched) are log-probabilities, usually from
    ``log_softmax``; ``targets`` are padded (N, S) or concatenated (sum of
    ``target_lengths``,); ``input_lengths`` and ``target_lengths`` are per sample.
    ``'mean'`` divides each loss by its target length, then averages over the batch.
    """
    import numpy as np

    from ember.ops.ctc import ctc_nll
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        # a whole call in a capture: the targets' values choose the paths it sums over
        return m.composite_locals("ctc_loss", ctc_loss, locals())
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        if isinstance(targets, Tensor):
            targets = targets.unsqueeze(0)
    if log_probs.dim() != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2-D or 3-D, got "
                           f"{log_probs.dim()}-D")
    T, N, C = log_probs.shape
    if log_probs.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    il, tl = _lengths(input_lengths, "input_lengths"), _lengths(target_lengths, "target_lengths")
    if il.shape[0] != N:
        raise RuntimeError("input_lengths must be of size batch_size")
    if tl.shape[0] != N:
        raise RuntimeError("target_lengths must be of size batch_size")
    if isinstance(targets, Tensor) and not 1 <= targets.ndim <= 2:
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {targets.ndim}-dimensional "
                           "tensor for argument #2 'targets' (while checking arguments for "
                           "ctc_loss_allocate_outputs)")
    if isinstance(targets, Tensor) and targets.ndim == 2 and targets.shape[0] != N:
        raise RuntimeError(f"Expected tensor to have size {N} at dimension 0, but got size "
                           f"{targets.shape[0]} for argument #2 'targets' (while checking "
                           "arguments for ctc_loss_allocate_outputs)")
    if (il > T).any():
        bad = int(il[il > T][0])
        raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value "
                           f"{bad} (while checking arguments for ctc_loss_cpu)")
    tg = np.asarray(targets.detach().cpu().numpy() if isinstance(targets, Tensor) else targets,
                    dtype=np.int64)
    if tg.ndim == 1 and tg.shape[0] != tl.sum():
        raise RuntimeError(f"Expected tensor to have size {tl.sum()} at dimension 0, but got "
                           f"size {tg.shape[0]} for argument #2 'targets' (while checking "
                           "arguments for ctc_loss_allocate_outputs)")
    max_len = int(tl.max()) if N else 0
    ext = np.full((N, 2 * max_len + 1), blank, dtype=np.int64)
    offset = 0
    for n in range(N):
        if tg.ndim == 2:
            if tl[n] > tg.shape[1]:
                raise RuntimeError(f"Expected tensor to have size at least {tl[n]} at dimension "
                                   f"1, but got size {tg.shape[1]} for argument #2 'targets' "
                                   "(while checking arguments for ctc_loss_cpu)")
            seq = tg[n, :tl[n]]
        else:
            seq = tg[offset:offset + tl[n]]
            offset += tl[n]
        ext[n, 1:2 * tl[n]:2] = seq
    dev = log_probs.device
    if dev.type == "cuda":
        # the recursion runs on NumPy: a GPU input makes a round trip, its gradient too
        losses = ctc_nll(log_probs.cpu(), ext, tl, il, blank, zero_infinity).to(dev)
    else:
        losses = ctc_nll(log_probs, ext, tl, il, blank, zero_infinity)
    if reduction == "mean":
        div = ember.tensor(np.maximum(tl, 1), dtype=losses.dtype, device=losses.device)
        return (losses / div).mean()
    if reduction == "sum":
        return losses.sum()
    return losses.squeeze(0) if unbatched else losses
