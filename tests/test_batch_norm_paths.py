"""Batch norm's paths, and the dtype rules of every normalization. Eval-mode batch norm
where nothing observes its ops (no mode on the stack) runs as one
pass over the input (``normalization_nodes.batch_norm_eval_array``): the same values,
bit for bit, as the composite it replaces (``_batch_norm_eval``: per-channel scale and
shift, then ``input * scale + shift``), which still runs under the profiler, captures
and transforms. Checked against the composite and torch across shapes, dtypes, special
values, layouts, thread counts, with and without a graph."""
import itertools

import numpy as np
import pytest
import torch

import ember
from ember.ops import normalization_nodes as nodes

_SHAPES = [(64, 128), (7, 3), (1, 4), (4, 3, 5), (8, 16, 8, 8), (2, 5, 3, 4, 6),
           (1, 4, 1, 1), (3, 1, 7, 2), (33, 64, 5, 5)]


def _case(shape, dtype, affine, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 3e38, -1e-42, 1e-30],
                        dtype=dtype)
    flat[::13][:len(specials)] = specials[:len(flat[::13])]
    w = rng.standard_normal(c).astype(dtype) if affine else None
    b = rng.standard_normal(c).astype(dtype) if affine else None
    if affine and c > 1:
        w[0], b[-1] = -0.0, np.inf
    mean = rng.standard_normal(c).astype(dtype)
    var = (rng.random(c) + 0.01).astype(dtype)
    if c > 2:
        var[1] = 0.0  # rsqrt(eps)
    return x, w, b, mean, var


def _wrap(m, arrays, grad=False):
    x, w, b, mean, var = arrays
    t = [None if a is None else m.tensor(a) for a in (x, w, b, mean, var)]
    if grad:
        t[0].requires_grad_(True)
    return t


def _composite(arrays, eps=1e-5):
    with ember.no_grad():
        return nodes._batch_norm_eval(*_wrap(ember, arrays), eps).numpy()


def _same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("shape", _SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_one_pass_gives_the_composites_bits(shape, dtype, affine):
    arrays = _case(shape, dtype, affine)
    x, w, b, mean, var = _wrap(ember, arrays)
    out = nodes.batch_norm_eval_array(x, w, b, mean, var, 1e-5)
    assert out is not None
    ref = _composite(arrays)
    # NaN payloads aside, every bit (the sign of zero included)
    nan = np.isnan(ref)
    assert (np.isnan(out) == nan).all()
    assert _same_bits(np.where(nan, 0, out).astype(dtype), np.where(nan, 0, ref).astype(dtype))
    got = ember.nn.functional.batch_norm(x, mean, var, w, b, training=False).numpy()
    assert _same_bits(np.nan_to_num(got), np.nan_to_num(ref))
    tx, tw, tb, tm, tv = _wrap(torch, arrays)
    expect = torch.nn.functional.batch_norm(tx, tm, tv, tw, tb, training=False).numpy()
    np.testing.assert_allclose(got, expect, rtol=2e-6 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("affine", [True, False])
def test_with_a_graph_the_node_runs_the_pass_and_keeps_its_gradients(affine):
    arrays = _case((6, 4, 3, 3), np.float32, affine, seed=1)
    x, w, b, mean, var = _wrap(ember, arrays, grad=True)
    if affine:
        w.requires_grad_(True)
        b.requires_grad_(True)
    out = ember.nn.functional.batch_norm(x, mean, var, w, b, training=False)
    assert out.grad_fn.name() == "NativeBatchNormBackward0"
    assert _same_bits(np.nan_to_num(out.detach().numpy()), np.nan_to_num(_composite(arrays)))
    gy = np.random.default_rng(2).standard_normal(out.shape).astype(np.float32)
    out.backward(ember.tensor(gy))
    tx, tw, tb, tm, tv = _wrap(torch, arrays, grad=True)
    if affine:
        tw.requires_grad_(True)
        tb.requires_grad_(True)
    torch.nn.functional.batch_norm(tx, tm, tv, tw, tb, training=False).backward(
        torch.tensor(gy))
    pairs = [(x, tx)] + ([(w, tw), (b, tb)] if affine else [])
    for e, t in pairs:
        np.testing.assert_allclose(np.nan_to_num(e.grad.numpy()),
                                   np.nan_to_num(t.grad.numpy()), rtol=1e-5, atol=1e-4)


def test_the_composite_runs_where_the_pass_does_not_apply():
    # a channels-last input keeps its layout, an empty one its shape: the composite's
    arrays = _case((4, 6, 5, 5), np.float32, True)
    x, w, b, mean, var = _wrap(ember, arrays)
    cl = x.contiguous(memory_format=ember.channels_last)
    assert nodes.batch_norm_eval_array(cl, w, b, mean, var, 1e-5) is None
    got = ember.nn.functional.batch_norm(cl, mean, var, w, b, training=False)
    assert got.is_contiguous(memory_format=ember.channels_last)
    assert _same_bits(np.nan_to_num(got.numpy()), np.nan_to_num(_composite(arrays)))
    empty = ember.zeros(0, 6, 2, 2)
    assert nodes.batch_norm_eval_array(empty, w, b, mean, var, 1e-5) is None
    assert ember.nn.functional.batch_norm(empty, mean, var, w, b).shape == (0, 6, 2, 2)


_DTYPES = ["float32", "float64", "bfloat16", "float16", None]


def _outcome(m, x_dt, w_dt, b_dt, stats_dt, training):
    def vec(dt, v):
        return None if dt is None else m.full((3,), v, dtype=getattr(m, dt))
    x = m.randn(4, 3, 2).to(getattr(m, x_dt))
    try:
        out = m.nn.functional.batch_norm(x, vec(stats_dt, 0.0), vec(stats_dt, 1.0),
                                         vec(w_dt, 1.0), vec(b_dt, 0.0), training=training)
        return str(out.dtype).split(".")[-1]
    except (RuntimeError, ValueError) as e:
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("x_dt", _DTYPES[:4])
def test_dtypes_follow_pytorchs_rules(training, x_dt):
    # every combination of the input's, weight's, bias's and statistics' dtypes: the
    # result's dtype (a float16/bfloat16 input with float32 parameters keeps its dtype)
    # or PyTorch's error and message (mismatched dtypes were silently promoted)
    for w_dt, b_dt, stats_dt in itertools.product(_DTYPES, repeat=3):
        if not training and stats_dt is None:
            continue
        args = (x_dt, w_dt, b_dt, stats_dt, training)
        assert _outcome(ember, *args) == _outcome(torch, *args), args
    # the statistics by themselves: one of the two given is PyTorch's ValueError
    for stats in ((ember.zeros(3), None), (None, ember.ones(3))):
        with pytest.raises(ValueError, match="both be None or neither"):
            ember.nn.functional.batch_norm(ember.randn(4, 3), *stats, training=True)


@pytest.mark.parametrize("low", ["bfloat16", "float16"])
@pytest.mark.parametrize("param", ["float32", "low"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("grad", [True, False])
def test_reduced_precision_inputs_compute_in_float32(low, param, training, grad):
    # PyTorch computes a float16/bfloat16 batch norm in float32 and rounds the result
    # (training mode crashed in ember before, eval gave a float32 result)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4, 3, 3)).astype(np.float32) * 3 + 1
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    gy = rng.standard_normal(x.shape).astype(np.float32)
    results = []
    for m in (ember, torch):
        dt = getattr(m, low)
        pdt = dt if param == "low" else m.float32
        X = m.tensor(x).to(dt).requires_grad_(grad)
        W, B = m.tensor(w).to(pdt).requires_grad_(grad), m.tensor(b).to(pdt).requires_grad_(grad)
        rm, rv = m.zeros(4, dtype=pdt), m.ones(4, dtype=pdt) * 2
        out = m.nn.functional.batch_norm(X, rm, rv, W, B, training=training)
        grads = []
        if grad:
            out.backward(m.tensor(gy).to(dt))
            grads = [t.grad for t in (X, W, B)]
            assert out.grad_fn.name() == "NativeBatchNormBackward0"
        results.append([out, rm, rv] + grads)
    for e, t in zip(*results):
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        tol = 2e-2 if low == "bfloat16" else 2e-3
        np.testing.assert_allclose(e.detach().float().numpy(), t.detach().float().numpy(),
                                   rtol=tol, atol=tol * 4)


def test_observed_calls_run_the_composites_ops(monkeypatch):
    # the profiler sees the same rows as before the pass existed
    arrays = _case((4, 6, 5, 5), np.float32, True)

    def rows():
        with ember.profiler.profile() as prof:
            ember.nn.functional.batch_norm(*_wrap(ember, arrays)[:1],
                                           *_wrap(ember, arrays)[3:],
                                           *_wrap(ember, arrays)[1:3], training=False)
        return sorted(e.key for e in prof.key_averages())
    seen = rows()
    monkeypatch.setattr(nodes, "batch_norm_eval_array", lambda *a, **k: None)
    assert rows() == seen


def test_two_threads_give_one_threads_bits(monkeypatch):
    from ember.backend import threads as T
    monkeypatch.setattr(T, "_MIN_COST_PER_THREAD", 1)
    before = ember.get_num_threads()
    calls = []
    run = T.Pool.run
    monkeypatch.setattr(T.Pool, "run", lambda self, fn, bounds: (
        calls.append(len(bounds) - 1), run(self, fn, bounds))[1])
    try:
        for shape, dtype in itertools.product([(9, 8, 4, 4), (64, 128)],
                                              [np.float32, np.float64]):
            arrays = _case(shape, dtype, True)
            ember.set_num_threads(1)
            one = nodes.batch_norm_eval_array(*_wrap(ember, arrays), 1e-5)
            ember.set_num_threads(2)
            two = nodes.batch_norm_eval_array(*_wrap(ember, arrays), 1e-5)
            assert _same_bits(np.nan_to_num(one), np.nan_to_num(two))
    finally:
        ember.set_num_threads(before)
    assert calls and max(calls) == 2


def test_the_module_in_eval_mode():
    for dims, shape in ((1, (16, 32)), (2, (4, 32, 6, 6)), (3, (2, 32, 3, 4, 5))):
        layers = [getattr(m.nn, f"BatchNorm{dims}d")(32) for m in (ember, torch)]
        rng = np.random.default_rng(dims)
        for layer in layers:
            with (ember if isinstance(layer, ember.nn.Module) else torch).no_grad():
                layer.weight.copy_(layer.weight * 0 + 0.5)
                layer.running_mean.fill_(0.25)
                layer.running_var.fill_(2.0)
            layer.eval()
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(layers[0](ember.tensor(x)).detach().numpy(),
                                   layers[1](torch.tensor(x)).detach().numpy(),
                                   rtol=1e-6, atol=1e-6)


def _norm_outcome(m, kind, x_dt, w_dt, b_dt):
    def vec(dt, n, v):
        return None if dt is None else m.full((n,), v, dtype=getattr(m, dt))
    x = m.randn(4, 6, 3).to(getattr(m, x_dt))
    n = 3 if kind == "layer" else 6
    w, b = vec(w_dt, n, 1.0), vec(b_dt, n, 0.0)
    F = m.nn.functional
    try:
        if kind == "layer":
            out = F.layer_norm(x, (3,), w, b)
        elif kind == "group":
            out = F.group_norm(x, 2, w, b)
        else:
            out = F.instance_norm(x, weight=w, bias=b)
        return str(out.dtype).split(".")[-1]
    except (RuntimeError, ValueError) as e:
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("kind", ["layer", "group", "instance"])
def test_other_norms_follow_pytorchs_dtype_rules(kind):
    # layer, group and instance norm promoted mismatched dtypes silently, and group and
    # instance norm failed on bfloat16 inputs
    for x_dt in _DTYPES[:4]:
        for w_dt, b_dt in itertools.product(_DTYPES, repeat=2):
            args = (kind, x_dt, w_dt, b_dt)
            assert _norm_outcome(ember, *args) == _norm_outcome(torch, *args), args


@pytest.mark.parametrize("kind", ["layer", "group", "instance", "instance_stats"])
@pytest.mark.parametrize("low", ["bfloat16", "float16"])
@pytest.mark.parametrize("param", ["float32", "low"])
@pytest.mark.parametrize("grad", [True, False])
def test_reduced_precision_norms_compute_in_float32(kind, low, param, grad):
    # against the exact values (torch in float64 on the same rounded inputs): torch's own
    # bfloat16 layer norm gradient is less accurate than ember's (it rounds ``g * w``;
    # 0.16 off an input gradient of -0.65 in this draw), so torch gives the dtypes and
    # the node's name, float64 the values
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 6, 4, 3)).astype(np.float32) * 2 - 1
    c = 3 if kind == "layer" else 6
    w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    gy = rng.standard_normal(x.shape).astype(np.float32)

    def run(m, dt, pdt):
        X = m.tensor(x).to(dt).requires_grad_(grad)
        W, B = m.tensor(w).to(pdt).requires_grad_(grad), m.tensor(b).to(pdt).requires_grad_(grad)
        F = m.nn.functional
        extra = []
        if kind == "layer":
            out = F.layer_norm(X, (3,), W, B)
        elif kind == "group":
            out = F.group_norm(X, 3, W, B)
        elif kind == "instance":
            out = F.instance_norm(X, weight=W, bias=B)
        else:
            extra = [m.zeros(6, dtype=pdt), m.ones(6, dtype=pdt)]
            out = F.instance_norm(X, *extra, weight=W, bias=B)
        grads = []
        if grad:
            out.backward(m.tensor(gy).to(dt))
            grads = [t.grad for t in (X, W, B)]
        return ([out.grad_fn.name()] if grad else []), [out] + extra + grads
    e_names, e_res = run(ember, getattr(ember, low),
                         getattr(ember, low) if param == "low" else ember.float32)
    t_names, t_res = run(torch, getattr(torch, low),
                         getattr(torch, low) if param == "low" else torch.float32)
    assert e_names == t_names
    # the inputs rounded to their dtypes, then everything in float64
    x = torch.tensor(x).to(getattr(torch, low)).double().numpy()
    if param == "low":
        w, b = (torch.tensor(v).to(getattr(torch, low)).double().numpy() for v in (w, b))
    gy = torch.tensor(gy).to(getattr(torch, low)).double().numpy()
    _, exact = run(torch, torch.float64, torch.float64)
    tol = 2e-2 if low == "bfloat16" else 3e-3
    for e, t, r in zip(e_res, t_res, exact):
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(e.detach().double().numpy(), r.detach().numpy(),
                                   rtol=tol, atol=tol)
