"""ONNX converters: shapes, indexing, creation, sequences and control flow."""
import math

import numpy as np

from ember import _core as E
from ember.nn import functional as F
from ember.onnx._import import UnsupportedOnnxOp, run_graph
from ember.onnx._import_ops import const, ember_dtype, ints
from ember.onnx._registry import importer

_i64 = E.int64


@importer("Shape")
def _shape(cx, x, start=0, end=None):
    shape = list(x.shape)[slice(start, end)]
    return const(np.asarray(shape, np.int64))


@importer("Size")
def _size(cx, x):
    return const(np.int64(x.numel()))


@importer("Reshape")
def _reshape(cx, x, shape, allowzero=0):
    s = ints(shape)
    if not allowzero:
        s = [x.shape[i] if d == 0 else d for i, d in enumerate(s)]
    return x.reshape(s)


@importer("Flatten")
def _flatten(cx, x, axis=1):
    axis %= max(x.dim(), 1) if axis < 0 else x.dim() + 1
    lead = int(np.prod(x.shape[:axis], dtype=np.int64))
    return x.reshape(lead, -1) if x.numel() else x.reshape(lead, int(np.prod(x.shape[axis:])))


@importer("Transpose")
def _transpose(cx, x, perm=None):
    perm = perm if perm is not None else list(range(x.dim()))[::-1]
    return x.permute(*perm)


@importer("Squeeze")
def _squeeze(cx, x, axes_in=None, axes=None):
    dims = ints(axes_in) if axes_in is not None else axes
    if dims is None:
        return E.squeeze(x)
    for d in sorted((d % x.dim() for d in dims), reverse=True):
        x = x.squeeze(d)
    return x


@importer("Unsqueeze")
def _unsqueeze(cx, x, axes_in=None, axes=None):
    dims = ints(axes_in) if axes_in is not None else axes
    n = x.dim() + len(dims)
    for d in sorted(d % n for d in dims):
        x = x.unsqueeze(d)
    return x


@importer("Concat")
def _concat(cx, *xs, axis):
    return E.cat(list(xs), axis)


@importer("Split")
def _split(cx, x, split_in=None, axis=0, split=None, num_outputs=None):
    sizes = ints(split_in) if split_in is not None else split
    if sizes is None:
        n = num_outputs or cx.n_outputs
        size = -(-x.shape[axis] // n)
        return tuple(E.split(x, size, axis))
    return tuple(E.split(x, sizes, axis))


@importer("Slice")
def _slice(cx, x, starts=None, ends=None, axes=None, steps=None, **attrs):
    if not isinstance(starts, E.Tensor):  # opset < 10: attributes
        starts, ends, axes = attrs.get("starts"), attrs.get("ends"), attrs.get("axes")
    starts, ends = ints(starts), ints(ends)
    axes = ints(axes) if axes is not None else list(range(len(starts)))
    steps = ints(steps) if steps is not None else [1] * len(starts)
    index = [slice(None)] * x.dim()
    flips = []
    for s, e, a, st in zip(starts, ends, axes, steps):
        a %= x.dim()
        n = x.shape[a]
        if st > 0:
            s = min(max(s + n if s < 0 else s, 0), n)
            e = min(max(e + n if e < 0 else e, 0), n)
            index[a] = slice(s, max(e, s), st)
        else:
            # a negative step: slice the flipped axis with a positive step
            s = min(max(s + n if s < 0 else s, -1), n - 1)
            e = min(max(e + n if e < 0 else e, -1), n - 1)
            fs, fe = n - 1 - s, n - 1 - e
            index[a] = slice(fs, max(fe, fs), -st)
            flips.append(a)
    if flips:
        x = E.flip(x, flips)
    return x[tuple(index)]


@importer("Expand")
def _expand(cx, x, shape):
    s = ints(shape)
    nd = max(len(s), x.dim())
    s = [1] * (nd - len(s)) + s
    xs = [1] * (nd - x.dim()) + list(x.shape)
    target = [a if b == 1 else b for a, b in zip(xs, s)]
    cx.reserve(target, x.dtype.itemsize)
    return x.reshape(xs).expand(*target)


@importer("Tile")
def _tile(cx, x, repeats):
    r = ints(repeats)
    cx.reserve([a * b for a, b in zip(x.shape, r)], x.dtype.itemsize)
    return x.repeat(*r)


@importer("Gather")
def _gather(cx, x, idx, axis=0):
    axis %= x.dim()
    idx = E.where(idx < 0, idx + x.shape[axis], idx)
    out = E.index_select(x, axis, idx.reshape(-1))
    return out.reshape(list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:]))


@importer("GatherElements")
def _gather_elements(cx, x, idx, axis=0):
    idx = E.where(idx < 0, idx + x.shape[axis], idx)
    return E.gather(x, axis, idx)


@importer("GatherND")
def _gather_nd(cx, x, idx, batch_dims=0):
    b = batch_dims
    k = idx.shape[-1]
    batch_shape = list(x.shape[:b])
    xb = x.reshape([-1] + list(x.shape[b:]))
    ib = idx.reshape([xb.shape[0], -1, k])
    ib = E.where(ib < 0, ib + const(np.asarray(x.shape[b:b + k], np.int64)), ib)
    rows = E.arange(xb.shape[0]).reshape(-1, 1).expand(ib.shape[0], ib.shape[1])
    out = xb[(rows,) + tuple(ib[..., j] for j in range(k))]
    return out.reshape(batch_shape + list(idx.shape[b:-1]) + list(x.shape[b + k:]))


def _scatter_reduce(x, axis, idx, upd, reduction):
    if reduction == "none":
        return E.scatter(x, axis, idx, upd)
    if reduction == "add":
        return E.scatter_add(x, axis, idx, upd)
    mode = {"mul": "prod", "max": "amax", "min": "amin"}[reduction]
    return E.scatter_reduce(x, axis, idx, upd, mode, include_self=True)


@importer("ScatterElements", "Scatter")
def _scatter_elements(cx, x, idx, upd, axis=0, reduction="none"):
    idx = E.where(idx < 0, idx + x.shape[axis], idx)
    return _scatter_reduce(x, axis % x.dim(), idx, upd, reduction)


@importer("ScatterND")
def _scatter_nd(cx, x, idx, upd, reduction="none"):
    k = idx.shape[-1]
    flat_idx = idx.reshape(-1, k)
    strides = np.cumprod([1] + list(x.shape[:k])[::-1][:-1])[::-1].copy()
    lin = (flat_idx * const(strides.astype(np.int64))).sum(-1)
    tail = list(x.shape[k:])
    xf = x.reshape([-1] + tail)
    uf = upd.reshape([-1] + tail)
    index = lin.reshape([-1] + [1] * len(tail)).expand(*([lin.shape[0]] + tail))
    return _scatter_reduce(xf, 0, index, uf, reduction).reshape(x.shape)


@importer("Range")
def _range(cx, start, limit, delta):
    a, b, d = start.item(), limit.item(), delta.item()
    if d:
        cx.reserve([math.ceil((b - a) / d)], start.dtype.itemsize)
    return E.arange(a, b, d, dtype=start.dtype)


@importer("ConstantOfShape")
def _constant_of_shape(cx, shape, value=None):
    v = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    cx.reserve(ints(shape), v.dtype.itemsize)
    return E.full(ints(shape), v[0].item(), dtype=E.backend.dtypes.from_numpy_dtype(v.dtype))


@importer("EyeLike")
def _eye_like(cx, x, dtype=None, k=0):
    dt = ember_dtype(dtype, "EyeLike") if dtype is not None else x.dtype
    n, m = x.shape
    return E.from_numpy(np.eye(n, m, k)).to(dt)


@importer("Trilu")
def _trilu(cx, x, k=None, upper=1):
    k = int(k.item()) if k is not None else 0
    return E.triu(x, k) if upper else E.tril(x, k)


@importer("OneHot")
def _one_hot(cx, idx, depth, values, axis=-1):
    d = int(depth.reshape(-1)[0].item())
    cx.reserve(list(idx.shape) + [d + 1], 8, "one-hot table")
    idx = idx.to(_i64)
    idx = E.where(idx < 0, idx + d, idx)
    hot = F.one_hot(E.where((idx >= 0) & (idx < d), idx, d), d + 1)[..., :d]
    hot = E.movedim(hot, -1, axis % (idx.dim() + 1))
    return E.where(hot.bool(), values[1], values[0])


@importer("NonZero")
def _nonzero(cx, x):
    return E.nonzero(x).transpose(0, 1).contiguous()


@importer("TopK")
def _topk(cx, x, k, axis=-1, largest=1, sorted=1):  # noqa: A002 - ONNX's name
    # ONNX puts the lower index first among equal values (torch.topk follows its CPU
    # kernel's order instead): a stable sort gives ONNX's choice
    n = int(k.reshape(-1)[0].item())
    v, i = E.sort(x, dim=axis, descending=bool(largest), stable=True)
    return v.narrow(axis, 0, n), i.narrow(axis, 0, n)


@importer("Compress")
def _compress(cx, x, cond, axis=None):
    keep = E.nonzero(cond.bool()).reshape(-1)
    if axis is None:
        return x.reshape(-1)[keep]
    return E.index_select(x, axis % x.dim(), keep)


@importer("DepthToSpace")
def _depth_to_space(cx, x, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@importer("SpaceToDepth")
def _space_to_depth(cx, x, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = blocksize
    if mode == "CRD":
        y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 1, 3, 5, 2, 4)
        return y.reshape(n, c * b * b, h // b, w // b)
    y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


@importer("ReverseSequence")
def _reverse_sequence(cx, x, lens, batch_axis=1, time_axis=0):
    t = x.shape[time_axis]
    steps = E.arange(t).reshape([-1 if d == time_axis else 1 for d in range(x.dim())])
    lens_b = lens.reshape([-1 if d == batch_axis else 1 for d in range(x.dim())])
    src = E.where(steps < lens_b, lens_b - 1 - steps, steps)
    return E.gather(x, time_axis, src.expand(*x.shape))


@importer("Pad")
def _pad(cx, x, pads=None, value=None, axes=None, mode="constant", **attrs):
    if pads is None or not isinstance(pads, E.Tensor):  # opset < 11: attributes
        pads, value = attrs.get("pads", pads), attrs.get("value", 0.0)
    p = ints(pads)
    n = len(p) // 2
    dims = ints(axes) if axes is not None else list(range(n))
    dims = [d % x.dim() for d in dims]
    full = [(0, 0)] * x.dim()
    for i, d in enumerate(dims):
        full[d] = (p[i], p[i + n])
    torch_pad = []
    for lo, hi in reversed(full):
        torch_pad += [lo, hi]
    v = value.item() if isinstance(value, E.Tensor) and value.numel() else (value or 0)
    cx.reserve([s + lo + hi for s, (lo, hi) in zip(x.shape, full)], x.dtype.itemsize)
    if mode == "constant":
        return F.pad(x, torch_pad, "constant", v)
    # ember's reflect/replicate/circular pads work on the trailing dims only
    lead = next((i for i, pp in enumerate(full) if pp != (0, 0)), x.dim())
    k = x.dim() - lead
    torch_mode = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}[mode]
    if x.dim() - k < 2 or k > 3:
        y = x.unsqueeze(0).unsqueeze(0) if k >= x.dim() - 1 else x
        return _pad_any(y, torch_pad[:2 * k], torch_mode, k).reshape(
            [s + lo + hi for s, (lo, hi) in zip(x.shape, full)])
    return F.pad(x, torch_pad[:2 * k], torch_mode)


def _pad_any(y, pad, mode, k):
    lead = y.shape[:y.dim() - k]
    flat = y.reshape([1, int(np.prod(lead))] + list(y.shape[y.dim() - k:]))
    if k > 3:
        raise UnsupportedOnnxOp(f"ember.onnx: Pad mode {mode} over {k} axes")
    return F.pad(flat, pad, mode)


# ---- sequences and optionals ----------------------------------------------------------

@importer("SequenceEmpty")
def _sequence_empty(cx, dtype=None):
    return []


@importer("SequenceConstruct")
def _sequence_construct(cx, *xs):
    return list(xs)


@importer("SequenceInsert")
def _sequence_insert(cx, seq, x, pos=None):
    out = list(seq)
    out.insert(len(out) if pos is None else int(pos.item()), x)
    return out


@importer("SequenceAt")
def _sequence_at(cx, seq, pos):
    return seq[int(pos.item())]


@importer("SequenceErase")
def _sequence_erase(cx, seq, pos=None):
    out = list(seq)
    del out[-1 if pos is None else int(pos.item())]
    return out


@importer("SequenceLength")
def _sequence_length(cx, seq):
    return const(np.int64(len(seq)))


@importer("SplitToSequence")
def _split_to_sequence(cx, x, split=None, axis=0, keepdims=1):
    if split is None:
        parts = E.split(x, 1, axis)
        return [p.squeeze(axis) for p in parts] if not keepdims else list(parts)
    s = ints(split)
    return list(E.split(x, s[0] if split.dim() == 0 else s, axis))


@importer("ConcatFromSequence")
def _concat_from_sequence(cx, seq, axis, new_axis=0):
    return E.stack(seq, axis) if new_axis else E.cat(seq, axis)


@importer("Optional")
def _optional(cx, x=None, type=None):  # noqa: A002 - ONNX's name
    return x


@importer("OptionalHasElement")
def _optional_has_element(cx, x=None):
    return const(np.bool_(x is not None))


@importer("OptionalGetElement")
def _optional_get_element(cx, x):
    if x is None:
        raise RuntimeError("ember.onnx: OptionalGetElement of an empty optional")
    return x


# ---- control flow ----------------------------------------------------------------------

@importer("If")
def _if(cx, cond, then_branch, else_branch):
    branch = then_branch if bool(cond.reshape(-1)[0].item()) else else_branch
    return tuple(run_graph(branch, dict(cx.runner), cx.opset, cx.training))


@importer("Loop")
def _loop(cx, max_trip, cond, *carried, body):
    n = int(max_trip.item()) if max_trip is not None else None
    go = bool(cond.item()) if cond is not None else True
    state = list(carried)
    n_carried = len(state)
    scans = []
    i = 0
    names = [v.name for v in body.input]
    while go and (n is None or i < n):
        env = dict(cx.runner)
        env[names[0]] = const(np.int64(i))
        env[names[1]] = const(np.bool_(go))
        for name, v in zip(names[2:], state):
            env[name] = v
        outs = run_graph(body, env, cx.opset, cx.training)
        go = bool(outs[0].item())
        state = outs[1:1 + n_carried]
        scans.append(outs[1 + n_carried:])
        i += 1
    n_scan = cx.n_outputs - n_carried
    stacked = []
    for j in range(n_scan):
        col = [s[j] for s in scans]
        stacked.append(E.stack(col) if col else E.zeros(0))
    return tuple(state) + tuple(stacked)


class _Opset9:
    """The context of a Scan-8 node seen as Scan-9, for one batch entry."""

    def __init__(self, cx):
        self.opset, self.node, self.n_outputs = 9, cx.node, cx.n_outputs
        self.runner, self.training = cx.runner, cx.training


@importer("Scan")
def _scan_op(cx, *xs, body, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
             scan_output_axes=None, scan_output_directions=None, directions=None):
    if cx.opset < 9:
        # Scan-8: a leading sequence_lens input and a batch axis in front of everything
        seq_lens, xs = xs[0], xs[1:]
        if seq_lens is not None:
            raise UnsupportedOnnxOp("ember.onnx: Scan-8 with sequence_lens")
        per_batch = [_scan_op(_Opset9(cx), *[x[b] for x in xs], body=body,
                              num_scan_inputs=num_scan_inputs,
                              scan_input_directions=directions)
                     for b in range(xs[0].shape[0])]
        return tuple(E.stack(col) for col in zip(*per_batch))
    n_state = len(xs) - num_scan_inputs
    state = list(xs[:n_state])
    scan_in = list(xs[n_state:])
    in_axes = scan_input_axes or [0] * num_scan_inputs
    in_dirs = scan_input_directions or [0] * num_scan_inputs
    scan_in = [E.flip(s, [a % s.dim()]) if d else s
               for s, a, d in zip(scan_in, in_axes, in_dirs)]
    steps = scan_in[0].shape[in_axes[0] % scan_in[0].dim()] if scan_in else 0
    names = [v.name for v in body.input]
    outs_per_step = []
    for t in range(steps):
        env = dict(cx.runner)
        for name, v in zip(names, state):
            env[name] = v
        for name, s, a in zip(names[n_state:], scan_in, in_axes):
            env[name] = E.select(s, a % s.dim(), t)
        outs = run_graph(body, env, cx.opset, cx.training)
        state = outs[:n_state]
        outs_per_step.append(outs[n_state:])
    n_scan_out = cx.n_outputs - n_state
    out_axes = scan_output_axes or [0] * n_scan_out
    out_dirs = scan_output_directions or [0] * n_scan_out
    results = []
    for j in range(n_scan_out):
        col = [o[j] for o in outs_per_step]
        if out_dirs[j]:
            col = col[::-1]
        y = E.stack(col, 0)
        a = out_axes[j] % y.dim()
        results.append(E.movedim(y, 0, a) if a else y)
    return tuple(state) + tuple(results)
