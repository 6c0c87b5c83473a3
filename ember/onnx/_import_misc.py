"""ONNX converters: the training-preview optimizers, sequence maps and a few ai.onnx.ml
ops. The optimizer ops are ONNX's update rules written with ember ops (so an imported
training graph computes the same step as onnxruntime-training would)."""
import numpy as np

from ember import _core as E
from ember.onnx._import import UnsupportedOnnxOp, run_graph
from ember.onnx._import_ops import const
from ember.onnx._registry import importer

_TRAINING = "ai.onnx.preview.training"


def _groups(data, per):
    n = (len(data) - 2) // per
    return data[0], data[1], [data[2 + k * n:2 + (k + 1) * n] for k in range(per)], n


@importer("Adagrad", domain=_TRAINING)
def _adagrad(cx, *data, decay_factor=0.0, epsilon=0.0, norm_coefficient=0.0):
    r, t, (xs, gs, hs), n = _groups(data, 3)
    lr = r / (1 + t * decay_factor)
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        g = norm_coefficient * x + g
        h2 = h + g * g
        new_x.append((x - lr * g / (E.sqrt(h2) + epsilon)).to(x.dtype))
        new_h.append(h2.to(h.dtype))
    return tuple(new_x + new_h)


@importer("Adam", domain=_TRAINING)
def _adam(cx, *data, alpha=0.9, beta=0.999, epsilon=0.0, norm_coefficient=0.0,
          norm_coefficient_post=0.0):
    r, t, (xs, gs, vs, hs), n = _groups(data, 4)
    step = float(t.item())
    lr = r * np.sqrt(1 - beta ** step) / (1 - alpha ** step) if step > 0 else r
    out_x, out_v, out_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        g = norm_coefficient * x + g
        v2 = alpha * v + (1 - alpha) * g
        h2 = beta * h + (1 - beta) * g * g
        x2 = (1 - norm_coefficient_post) * (x - lr * (v2 / (E.sqrt(h2) + epsilon)))
        out_x.append(x2.to(x.dtype))
        out_v.append(v2.to(v.dtype))
        out_h.append(h2.to(h.dtype))
    return tuple(out_x + out_v + out_h)


@importer("Momentum", domain=_TRAINING)
def _momentum(cx, *data, alpha, beta, mode, norm_coefficient):
    r, t, (xs, gs, vs), n = _groups(data, 3)
    b = beta if float(t.item()) > 0 else 1.0
    out_x, out_v = [], []
    for x, g, v in zip(xs, gs, vs):
        g = norm_coefficient * x + g
        v2 = alpha * v + b * g
        x2 = x - r * v2 if mode == "standard" else x - r * (g + alpha * v2)
        out_x.append(x2.to(x.dtype))
        out_v.append(v2.to(v.dtype))
    return tuple(out_x + out_v)


@importer("SequenceMap")
def _sequence_map(cx, seq, *extra, body):
    names = [v.name for v in body.input]
    n = len(seq)
    results = []
    for i in range(n):
        env = dict(cx.runner)
        env[names[0]] = seq[i]
        for name, e in zip(names[1:], extra):
            env[name] = e[i] if isinstance(e, list) else e
        results.append(run_graph(body, env, cx.opset, cx.training))
    return tuple([r[j] for r in results] for j in range(len(body.output)))


@importer("Binarizer", domain="ai.onnx.ml")
def _binarizer(cx, x, threshold=0.0):
    return (x > threshold).to(x.dtype)


@importer("ArrayFeatureExtractor", domain="ai.onnx.ml")
def _array_feature_extractor(cx, x, idx):
    return E.index_select(x, x.dim() - 1, idx.reshape(-1)).reshape(
        list(x.shape[:-1]) + [idx.numel()] if x.dim() > 1 else [1, idx.numel()])


@importer("LabelEncoder", domain="ai.onnx.ml")
def _label_encoder(cx, x, **attrs):
    keys = attrs.get("keys_int64s") or attrs.get("keys_floats")
    values = attrs.get("values_int64s") or attrs.get("values_floats")
    if keys is None or values is None:
        raise UnsupportedOnnxOp("ember.onnx: LabelEncoder over strings or tensors")
    default = attrs.get("default_int64", attrs.get("default_float", -1))
    table = dict(zip(keys, values))
    arr = x.numpy()
    out = np.vectorize(lambda k: table.get(k, default), otypes=[np.asarray(values).dtype])(arr)
    return const(out)


def _unique_axis(x, axis, sorted_):
    arr = x.numpy()
    axis %= arr.ndim
    moved = np.moveaxis(arr, axis, 0).reshape(arr.shape[axis], -1)
    rows = [tuple(r) for r in moved.tolist()]
    first = {}
    for i, r in enumerate(rows):
        first.setdefault(r, i)
    uniq = sorted(first) if sorted_ else list(first)
    pos = {r: k for k, r in enumerate(uniq)}
    idx = np.asarray([first[r] for r in uniq], np.int64)
    inverse = np.asarray([pos[r] for r in rows], np.int64)
    counts = np.bincount(inverse, minlength=len(uniq)).astype(np.int64)
    vals = np.take(arr, idx, axis=axis)
    return const(vals), const(idx), const(inverse), const(counts)


def unique(cx, x, axis=None, sorted=1):  # noqa: A002 - ONNX's name
    """Unique (with or without an axis); outputs hold no gradient."""
    if axis is not None:
        return _unique_axis(x, axis, bool(sorted))
    arr = x.numpy().reshape(-1)
    vals, first, inverse, counts = np.unique(arr, return_index=True, return_inverse=True,
                                             return_counts=True)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        vals, first, counts, inverse = vals[order], first[order], counts[order], \
            rank[inverse.reshape(-1)]
    return (const(vals), const(first.astype(np.int64)),
            const(inverse.reshape(-1).astype(np.int64)), const(counts.astype(np.int64)))


importer("Unique")(unique)
