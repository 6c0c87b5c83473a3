"""``F.fractional_max_pool2d``/``3d`` (Graham's fractional max pooling: the random draw
is made here; the windows follow from it inside the op
``ops.adaptive_pooling.FractionalMaxPool``, PyTorch's node, so a trace keeps the draw
and the windows follow the input's size) and ``F.linear_cross_entropy`` (a composite
of tensordot and cross_entropy).

Fractional pooling draws one number in [0, 1) per (batch, channel, dim) from ember's
generator, in the order and dtype PyTorch draws them (``rand(N, C, dims)``), so a
seeded run picks the same windows as PyTorch; ``_random_samples`` fixes them.
"""
import dataclasses
import math
import warnings

from ember.ops.adaptive_pooling import FractionalMaxPool, FractionalMaxPool3D

__all__ = ["fractional_max_pool2d", "fractional_max_pool3d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices",
           "linear_cross_entropy", "LinearCrossEntropyOptions"]


def _tuple(v, n, name):
    if v is None:
        return None
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
    if len(t) != n:
        raise RuntimeError(f"{name} must be an int or a tuple of {n} ints")
    return t


def _fractional(input, kernel_size, output_size, output_ratio, return_indices,
                _random_samples, nd):
    import ember
    name = f"fractional_max_pool{nd}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an "
                         "output_ratio")
    k = _tuple(kernel_size, nd, "kernel_size")
    batched = input.dim() == nd + 2
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: "
                           f"{list(input.shape)}")
    spatial = tuple(input.shape[-nd:])
    if output_size is None:
        ratio = _tuple(output_ratio, nd, "output_ratio")
        from ember._graph.symint import sizes_frozen
        sizes_frozen(spatial)  # the output size is a number of the trace from here on
        out = tuple(int(s * r) for s, r in zip(spatial, ratio))
    else:
        out = _tuple(output_size, nd, "output_size")
    for s, o, kk in zip(spatial, out, k):
        if o + kk - 1 > s:
            raise RuntimeError(f"{name}(): pool size {kk} too large relative to input size "
                               f"{s} for output size {o}")
    n, c = (input.shape[0] if batched else 1), input.shape[-nd - 1]
    if _random_samples is None:
        _random_samples = ember.rand(n, c, nd, dtype=input.dtype)
    if _random_samples.dtype != input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if _random_samples.dim() != 3:
        raise RuntimeError("Expect _random_samples to have 3 dimensions, got "
                           f"{_random_samples.dim()}")
    rows, chans, dims = _random_samples.shape
    if rows < n:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if chans != c:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if dims != nd:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got {dims}.")
    # one node, PyTorch's, on the input as given (an unbatched input is not unsqueezed);
    # the windows follow from the draw inside it (PyTorch reads the first N rows)
    op = FractionalMaxPool3D if nd == 3 else FractionalMaxPool
    values, indices = op.apply(input, _random_samples, k, out)
    return (values, indices) if return_indices else values


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """2-D fractional max pooling of ``(N, C, H, W)`` (or ``(C, H, W)``): windows of
    ``kernel_size`` at pseudo-random starts giving ``output_size`` (or
    ``output_ratio`` of the input size); with ``return_indices`` also the flat
    ``H * W`` positions of the maxima."""
    return _fractional(input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples, 2)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """3-D fractional max pooling of ``(N, C, T, H, W)`` (see ``fractional_max_pool2d``)."""
    return _fractional(input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples, 3)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None,
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """``fractional_max_pool2d`` returning ``(values, indices)``."""
    return _fractional(input, kernel_size, output_size, output_ratio, True, _random_samples, 2)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None,
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """``fractional_max_pool3d`` returning ``(values, indices)``."""
    return _fractional(input, kernel_size, output_size, output_ratio, True, _random_samples, 3)


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """PyTorch's chunking options for ``linear_cross_entropy`` (its fields and defaults).
    ember accepts and ignores them: it computes the logits in one piece (the same values
    and gradients, without the memory saving)."""
    allow_retain_graph: bool = False
    batch_chunk_size: int = None
    chunking_method: str = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``.

    ``linear_weight`` is ``(C, in)`` or ``(C, d_1, ..., d_K, in)`` for a K-dimensional
    loss (the logits are ``(N, C, d_1, ...)``). PyTorch's reference path: the linear map,
    the logits viewed to that shape, the cross entropy. ``options`` (PyTorch's chunking,
    a memory saving) is accepted and ignored: the values and gradients are the same.
    """
    import ember
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError("expected linear_weight with dimensionality at least 2, got "
                           f"{linear_weight.dim()}")
    num_batches = tuple(input.shape[:-1])
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError("expected equal input and linear_weight last dimensions "
                           f"(in_features), got {input.shape[-1]} and "
                           f"{linear_weight.shape[-1]}, respectively")
    num_classes = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not num_batches:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape "
                           f"{tuple(linear_weight.shape)} requires batched input, (N, "
                           f"{in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    logits_shape = (*num_batches, num_classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains "
                           "probabilities")
    if ignore_index is None:
        ignore_index = -100
    if options is not None and (out_features or reduction not in ("mean", "sum", "none") or
                                label_smoothing != 0.0 or target.dtype != ember.int64):
        # PyTorch's warning where its chunked path cannot run
        warnings.warn("linear_cross_entropy: ``options`` ignored; chunked path needs "
                      "reduction in {'mean','sum','none'}, label_smoothing == 0, target.dtype"
                      " == int64, out_features == (). Got "
                      f"reduction={reduction!r}, label_smoothing={label_smoothing}, "
                      f"target.dtype={str(target.dtype).replace('ember', 'torch')}, "
                      f"out_features={out_features}, tracing=False, linear_bias.shape="
                      f"{tuple(linear_bias.shape) if linear_bias is not None else None}.",
                      stacklevel=2)
    if out_features:
        rows = math.prod(out_features, start=num_classes)
        linear_weight = linear_weight.reshape((rows, in_features))
        if linear_bias is not None:
            linear_bias = linear_bias.reshape(rows)
    logits = ember.nn.functional.linear(input, linear_weight, linear_bias)
    logits = logits.reshape(logits_shape)
    return ember.nn.functional.cross_entropy(logits, target, weight=weight,
                                             ignore_index=ignore_index, reduction=reduction,
                                             label_smoothing=label_smoothing)
