"""ONNX converters of the loss kernels (:mod:`ember.ops.losses`): ``nll_loss`` as ONNX's
``NegativeLogLikelihoodLoss``, the elementwise losses written out in ONNX arithmetic and
reduced with ``ReduceMean``/``ReduceSum``, as PyTorch's exporter writes them.

``ember.onnx._export_ops`` imports this module, so importing it registers these too.
"""
import numpy as np

from ember.onnx._export_registry import _axes, _rank, exports
from ember.ops import losses


def _num(g, x, value):
    """A scalar constant of ``x``'s dtype."""
    return g.const(np.asarray(value, dtype=g.np_dtype(x)))


def _reduced(g, t, x, reduction):
    """The loss ``t`` (of ``x``'s shape) reduced as ``reduction`` says."""
    if reduction == "none" or _rank(x) == 0:
        return t
    op = "ReduceMean" if reduction == "mean" else "ReduceSum"
    axes = list(range(_rank(x)))
    if op == "ReduceSum" or g.opset >= 18:
        return g.op(op, [t, _axes(g, axes)], keepdims=0)
    return g.op(op, [t], axes=axes, keepdims=0)


def _weighted(g, loss, x, w):
    return loss if w is None else g.op("Mul", [loss, g.tensor(w)])


@exports(losses.MseLoss)
def _mse(g, node, x, t, reduction):
    d = g.op("Sub", [g.tensor(x), g.tensor(t)])
    return _reduced(g, g.op("Mul", [d, d]), x, reduction)


def _huber_type(g, x, t, bound, quad_scale, lin):
    """``quad_scale * d**2`` where ``|d| < bound``, else ``lin(|d|)``."""
    d = g.op("Sub", [g.tensor(x), g.tensor(t)])
    z = g.op("Abs", [d])
    quad = g.op("Mul", [g.op("Mul", [d, d]), _num(g, x, quad_scale)])
    return g.op("Where", [g.op("Less", [z, _num(g, x, bound)]), quad, lin(z)])


@exports(losses.SmoothL1Loss)
def _smooth_l1(g, node, x, t, reduction, beta):
    loss = _huber_type(g, x, t, beta, 0.5 / beta,
                       lambda z: g.op("Sub", [z, _num(g, x, 0.5 * beta)]))
    return _reduced(g, loss, x, reduction)


@exports(losses.HuberLoss)
def _huber(g, node, x, t, reduction, delta):
    loss = _huber_type(g, x, t, delta, 0.5, lambda z: g.op(
        "Mul", [g.op("Sub", [z, _num(g, x, 0.5 * delta)]), _num(g, x, delta)]))
    return _reduced(g, loss, x, reduction)


def _log1p_exp(g, x, v):
    """``log(1 + exp(v))`` without overflow: ``max(v, 0) + log(1 + exp(-|v|))``."""
    e = g.op("Exp", [g.op("Neg", [g.op("Abs", [v])])])
    return g.op("Add", [g.op("Max", [v, _num(g, x, 0)]),
                        g.op("Log", [g.op("Add", [e, _num(g, x, 1)])])])


@exports(losses.SoftMarginLoss)
def _soft_margin(g, node, x, t, reduction):
    v = g.op("Neg", [g.op("Mul", [g.tensor(x), g.tensor(t)])])
    return _reduced(g, _log1p_exp(g, x, v), x, reduction)


@exports(losses.BinaryCrossEntropy)
def _bce(g, node, x, t, w, reduction):
    xs, ts = g.tensor(x), g.tensor(t)
    one, floor = _num(g, x, 1), _num(g, x, -100)
    log_x = g.op("Max", [g.op("Log", [xs]), floor])
    log_1mx = g.op("Max", [g.op("Log", [g.op("Sub", [one, xs])]), floor])
    loss = g.op("Neg", [g.op("Add", [g.op("Mul", [ts, log_x]),
                                     g.op("Mul", [g.op("Sub", [one, ts]), log_1mx])])])
    return _reduced(g, _weighted(g, loss, x, w), x, reduction)


@exports(losses.BinaryCrossEntropyWithLogits)
def _bce_logits(g, node, x, t, w, pw, reduction):
    xs, ts = g.tensor(x), g.tensor(t)
    one = _num(g, x, 1)
    # -log(sigmoid(x)) = log(1 + exp(-x))
    nls = _log1p_exp(g, x, g.op("Neg", [xs]))
    if pw is not None:
        lw = g.op("Add", [g.op("Mul", [g.op("Sub", [g.tensor(pw), one]), ts]), one])
        nls = g.op("Mul", [nls, lw])
    loss = g.op("Add", [g.op("Mul", [g.op("Sub", [one, ts]), xs]), nls])
    return _reduced(g, _weighted(g, loss, x, w), x, reduction)


@exports(losses.NllLoss, losses.NllLoss2d)
def _nll(g, node, x, t, w, ignore_index, reduction):
    xs, ts = g.tensor(x), g.tensor(t)
    one_d = _rank(x) == 1
    if one_d:   # ONNX's op takes (N, C): one sample
        xs = g.op("Unsqueeze", [xs, _axes(g, [0])])
        ts = g.op("Reshape", [ts, g.const(np.asarray([1], np.int64))])
    ins = [xs, ts] + ([g.tensor(w)] if w is not None else [])
    out = g.op("NegativeLogLikelihoodLoss", ins, reduction=reduction,
               ignore_index=int(ignore_index))
    if one_d and reduction == "none":
        out = g.op("Reshape", [out, g.const(np.asarray(node.outputs[0].shape, np.int64))])
    return out
