"""First-order gradients made with ``create_graph=True`` have the bits of those made
without it, as in PyTorch (where one kernel computes both).

The sweep runs every oracle table (``test_node_names``' walk of the ``Case`` lists) and
the layers real models use, and compares ``backward()`` and ``autograd.grad`` without a
graph with ``autograd.grad(..., create_graph=True)`` bit for bit: in the table's dtype
on contiguous inputs, and (for float64 tables) in float32 on non-contiguous copies.
Where torch's own two gradients differ (PyTorch computes the recorded one by another
formula: group norm, ``prod`` and ``cumprod`` over zeros, some LSTM weights) nothing is
asked of ember. The cases where ember's differ and torch's do not are listed in
``create_graph_bit_gaps.txt`` (with their reason after a ``#``); the test fails when a
listed case starts to agree (remove it) and when an unlisted one stops agreeing.
``python tests/test_create_graph_bits.py`` rewrites the list, keeping the reasons.

The ops whose recorded gradient runs the plain pass's kernel (layer norm, batch norm,
GELU) are also checked against torch: second-order graph (names, edges) and values,
and third-order values against finite differences.
"""
import functools
import os
import sys
import warnings

import numpy as np
import pytest
import torch

import ember

HERE = os.path.dirname(os.path.abspath(__file__))
GAPS = os.path.join(HERE, "create_graph_bit_gaps.txt")
sys.path.insert(0, HERE)
from oracle import _noncontig, _outputs, make_inputs  # noqa: E402
from test_node_names import _tables, graph, read_gaps, write_gaps  # noqa: E402


def _bits(a):
    """The bytes of a gradient (None for None), in C order."""
    if a is None:
        return None
    a = a.detach().numpy()
    return (a.shape, str(a.dtype), np.ascontiguousarray(a).tobytes())


def _grads(lib, fn, arrays, rg, mode):
    """``fn``'s gradients with respect to the inputs flagged in ``rg`` for one seeded
    output gradient: by ``backward()`` (``mode="backward"``), ``autograd.grad`` without a
    graph (``"plain"``) or with one (``"graph"``); None where nothing is differentiable."""
    ins = []
    for a, r in zip(arrays, rg):
        if isinstance(a, np.ndarray):
            t = lib.from_numpy(a.copy() if a.flags.c_contiguous else a)
            ins.append(t.requires_grad_(True) if r else t)
        else:
            ins.append(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.manual_seed(0)
        outs = [o for o in _outputs(fn(lib, *ins))
                if isinstance(o, lib.Tensor) and o.requires_grad]
    if not outs:
        return None
    rng = np.random.default_rng(1)
    gos = [lib.from_numpy(np.asarray(rng.standard_normal(tuple(o.shape)),
                                     dtype=o.detach().numpy().dtype)) for o in outs]
    leaves = [x for x, r in zip(ins, rg) if r]
    if mode == "backward":
        lib.autograd.backward(outs, gos)
        return [x.grad for x in leaves]
    return lib.autograd.grad(outs, leaves, gos, create_graph=mode == "graph",
                             allow_unused=True)


def _differs(lib, fn, arrays, rg):
    """The positions whose gradient with a graph differs from one without (by either
    ``backward()`` or ``autograd.grad``)."""
    cg = _grads(lib, fn, arrays, rg, "graph")
    if cg is None:
        return set()
    out = set()
    for mode in ("plain", "backward") if lib is ember else ("plain",):
        for i, (a, b) in enumerate(zip(_grads(lib, fn, arrays, rg, mode), cg)):
            if a is not None and b is not None and _bits(a) != _bits(b):
                out.add(i)
    return out


def _variants(arrays):
    """(label, arrays): as given, and float64 inputs as non-contiguous float32."""
    yield "", arrays
    if any(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in arrays):
        yield "f32nc", [_noncontig(a.astype(np.float32))
                        if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
                        for a in arrays]


def _survey_case(fn, arrays, rg):
    """The variants whose ember gradients differ where torch's agree."""
    bad = []
    for label, arr in _variants(arrays):
        flags = rg if rg is not None else [
            isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in arr]
        try:
            diff = _differs(ember, fn, arr, flags)
        except Exception:  # noqa: BLE001 - a case made to raise, or not for this dtype
            continue
        if diff:
            try:
                diff -= _differs(torch, fn, arr, flags)
            except Exception:  # noqa: BLE001 - torch lacks it in this dtype: ember's own
                pass
        if diff:
            bad.append(label or "as given")
    return bad


@functools.lru_cache(maxsize=1)
def survey():
    """{case id: [the variants that differ]} over the oracle tables."""
    out = {}
    for key, case in _tables():
        if not case.grad:
            continue
        try:
            arrays = make_inputs(case)
        except Exception:  # noqa: BLE001 - inputs for another library only
            continue
        bad = _survey_case(case.fn, arrays, case.requires_grad)
        if bad:
            out[key] = bad
    return out


def test_oracle_tables_create_graph_gradients_have_the_plain_bits():
    result = survey()
    gaps = read_gaps(GAPS)
    found = {k for k in result if not k.startswith("layers::")}
    known_tables = {k for k in gaps if not k.startswith("layers::")}
    # a gap whose bits follow the CPU's BLAS kernels may also agree
    some_cpus = {k for k in known_tables if ", on some CPUs:" in gaps[k]}
    assert not found - known_tables, f"new differences: {sorted(found - known_tables)}"
    assert not known_tables - some_cpus - found, \
        f"now bit-equal, remove from {os.path.basename(GAPS)}: " \
        f"{sorted(known_tables - some_cpus - found)}"


# ----- the layers real models use -------------------------------------------------------
def _module_grads(lib, make, arrays, dtype, mode, train=True):
    lib.manual_seed(0)
    mod = make(lib).to(getattr(lib, np.dtype(dtype).name))
    mod.train(train)
    x = lib.from_numpy(arrays[0].copy() if arrays[0].flags.c_contiguous else arrays[0])
    x.requires_grad_(arrays[0].dtype.kind == "f")
    rest = [lib.from_numpy(a) for a in arrays[1:]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib.manual_seed(1)
        out = [o for o in _outputs(mod(x, *rest)) if isinstance(o, lib.Tensor)]
    out = [o for o in out if o.requires_grad]
    rng = np.random.default_rng(2)
    gos = [lib.from_numpy(np.asarray(rng.standard_normal(tuple(o.shape)),
                                     dtype=o.detach().numpy().dtype)) for o in out]
    leaves = ([x] if x.requires_grad else []) + [p for p in mod.parameters()]
    if mode == "backward":
        lib.autograd.backward(out, gos)
        return [t.grad for t in leaves]
    return lib.autograd.grad(out, leaves, gos, create_graph=mode == "graph",
                             allow_unused=True)


def _fn_module(lib, fn, sub=None):
    """A module calling ``fn(lib, x)``, or ``fn(lib, sub, x)`` over the module ``sub``
    (whose parameters are the module's)."""
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = sub

        def forward(self, x):
            return fn(lib, x) if sub is None else fn(lib, self.sub, x)
    return M()


LAYERS = {
    "Linear": (lambda m: m.nn.Linear(6, 4), [(5, 6)]),
    "Conv1d": (lambda m: m.nn.Conv1d(3, 4, 3, padding=1), [(2, 3, 7)]),
    "Conv2d": (lambda m: m.nn.Conv2d(3, 4, 3, stride=2), [(2, 3, 7, 6)]),
    "BatchNorm1d_train": (lambda m: m.nn.BatchNorm1d(4), [(6, 4, 3)]),
    "BatchNorm2d_train": (lambda m: m.nn.BatchNorm2d(3), [(2, 3, 4, 5)]),
    "BatchNorm2d_eval": (lambda m: m.nn.BatchNorm2d(3), [(2, 3, 4, 5)], False),
    "LayerNorm": (lambda m: m.nn.LayerNorm(8), [(3, 5, 8)]),
    "LayerNorm_2d": (lambda m: m.nn.LayerNorm((4, 5), elementwise_affine=True), [(3, 4, 5)]),
    "LayerNorm_no_affine": (lambda m: m.nn.LayerNorm(6, elementwise_affine=False), [(4, 6)]),
    "GroupNorm": (lambda m: m.nn.GroupNorm(2, 4), [(3, 4, 5)]),
    "InstanceNorm1d": (lambda m: m.nn.InstanceNorm1d(3, affine=True), [(2, 3, 6)]),
    "Embedding": (lambda m: m.nn.Embedding(10, 4), [lambda rng: rng.integers(0, 10, (3, 5))]),
    "LSTM": (lambda m: m.nn.LSTM(4, 5, batch_first=True), [(2, 3, 4)]),
    "GRU": (lambda m: m.nn.GRU(4, 5, num_layers=2), [(3, 2, 4)]),
    "RNN": (lambda m: m.nn.RNN(4, 5), [(3, 2, 4)]),
    "MultiheadAttention": (lambda m: _fn_module(
        m, lambda lib, a, x: a(x, x, x)[0], m.nn.MultiheadAttention(8, 2, batch_first=True)),
        [(2, 5, 8)]),
    "TransformerEncoderLayer": (lambda m: m.nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0, batch_first=True), [(2, 5, 8)], False),
    "softmax": (lambda m: _fn_module(m, lambda lib, x: lib.softmax(x, -1)), [(4, 7)]),
    "log_softmax": (lambda m: _fn_module(m, lambda lib, x: lib.log_softmax(x, 1)), [(4, 7)]),
    "cross_entropy": (lambda m: _fn_module(
        m, lambda lib, x: lib.nn.functional.cross_entropy(x, lib.arange(x.shape[0]) * 3 % 7)),
        [(4, 7)]),
    "mse_loss": (lambda m: _fn_module(
        m, lambda lib, x: lib.nn.functional.mse_loss(x, x.detach() * 0.5 + 1)), [(4, 7)]),
    "nll_loss": (lambda m: _fn_module(
        m, lambda lib, x: lib.nn.functional.nll_loss(x, lib.arange(x.shape[0]) * 3 % 7)), [(4, 7)]),
    "GELU": (lambda m: m.nn.GELU(), [(5, 6)]),
    "GELU_tanh": (lambda m: m.nn.GELU(approximate="tanh"), [(5, 6)]),
    "SiLU": (lambda m: m.nn.SiLU(), [(5, 6)]),
    "Dropout": (lambda m: m.nn.Dropout(0.3), [(6, 7)]),
    "MaxPool2d": (lambda m: m.nn.MaxPool2d(2), [(2, 3, 6, 6)]),
    "AvgPool2d": (lambda m: m.nn.AvgPool2d(3, stride=2, padding=1), [(2, 3, 7, 6)]),
    "AdaptiveAvgPool2d": (lambda m: m.nn.AdaptiveAvgPool2d((2, 3)), [(2, 3, 5, 7)]),
    "interpolate_bilinear": (lambda m: _fn_module(m, lambda lib, x: lib.nn.functional.interpolate(
        x, scale_factor=2, mode="bilinear", align_corners=False)), [(2, 3, 4, 5)]),
    "interpolate_nearest": (lambda m: _fn_module(m, lambda lib, x: lib.nn.functional.interpolate(
        x, size=(7, 9), mode="nearest")), [(2, 3, 4, 5)]),
}


def _layer_arrays(spec, dtype, batch, noncontig):
    rng = np.random.default_rng(batch)
    arrays = []
    for s in spec:
        if callable(s):
            arrays.append(np.asarray(s(rng)))
            continue
        a = rng.standard_normal((s[0] + batch - 1,) + tuple(s[1:])).astype(dtype)
        arrays.append(_noncontig(a) if noncontig else a)
    return arrays


def _layer_differs(lib, make, arrays, dtype, train):
    cg = _module_grads(lib, make, arrays, dtype, "graph", train)
    out = set()
    for mode in ("plain", "backward"):
        for i, (a, b) in enumerate(zip(_module_grads(lib, make, arrays, dtype, mode, train),
                                       cg)):
            if a is not None and b is not None and _bits(a) != _bits(b):
                out.add(i)
    return out


@functools.lru_cache(maxsize=1)
def layer_survey():
    """{"layers::<name>": [variants that differ where torch's agree]}."""
    out = {}
    for name, spec in LAYERS.items():
        make, shapes = spec[:2]
        train = spec[2] if len(spec) > 2 else True
        bad = []
        for dtype, batch, nc in ((np.float64, 1, False), (np.float32, 3, True),
                                 (np.float32, 1, False)):
            arrays = _layer_arrays(shapes, dtype, batch, nc)
            diff = _layer_differs(ember, make, arrays, dtype, train)
            if diff:
                diff -= _layer_differs(torch, make, arrays, dtype, train)
            if diff:
                bad.append(f"{np.dtype(dtype).name} batch+{batch - 1}" + (" nc" if nc else ""))
        if bad:
            out[f"layers::{name}"] = bad
    return out


def test_model_layers_create_graph_gradients_have_the_plain_bits():
    found = set(layer_survey())
    known = {k for k in read_gaps(GAPS) if k.startswith("layers::")}
    assert not found - known, f"new differences: {sorted(found - known)}"
    assert not known - found, \
        f"now bit-equal, remove from {os.path.basename(GAPS)}: {sorted(known - found)}"


# ----- the kernels recorded as one op: PyTorch's graph and values ------------------------
def _norm_cases():
    F = "nn.functional"
    return {
        "layer_norm": (lambda m, x, w, b: _f(m, F).layer_norm(x, x.shape[-1:], w, b),
                       [(3, 5), (5,), (5,)]),
        "layer_norm_2d_w": (lambda m, x, w: _f(m, F).layer_norm(x, (4, 5), w), [(2, 4, 5), (4, 5)]),
        "layer_norm_plain": (lambda m, x: _f(m, F).layer_norm(x, (6,)), [(1, 6)]),
        "layer_norm_empty": (lambda m, x, w: _f(m, F).layer_norm(x, (5,), w), [(0, 5), (5,)]),
        "layer_norm_wide": (lambda m, x, w, b: _f(m, F).layer_norm(x, (64,), w, b),
                            [(4, 64), (64,), (64,)]),
        "batch_norm": (lambda m, x, w, b: _f(m, F).batch_norm(x, None, None, w, b, True),
                       [(4, 3, 5), (3,), (3,)]),
        "batch_norm_2d": (lambda m, x, w, b: _f(m, F).batch_norm(x, None, None, w, b, True),
                          [(5, 3), (3,), (3,)]),
        "batch_norm_running": (lambda m, x, w, b: _f(m, F).batch_norm(
            x, m.zeros(3, dtype=x.dtype), m.ones(3, dtype=x.dtype), w, b, True),
            [(2, 3, 4, 5), (3,), (3,)]),
        "batch_norm_no_affine": (lambda m, x: _f(m, F).batch_norm(x, None, None, training=True),
                                 [(4, 3, 2)]),
        "batch_norm_eval": (lambda m, x, w, b: _f(m, F).batch_norm(
            x, m.arange(3, dtype=x.dtype) * 0.3 - 0.2, m.arange(3, dtype=x.dtype) * 0.5 + 0.4,
            w, b, False), [(4, 3, 5), (3,), (3,)]),
        "batch_norm_eval_4d_w": (lambda m, x, w: _f(m, F).batch_norm(
            x, m.zeros(3, dtype=x.dtype), m.ones(3, dtype=x.dtype) * 2, w, None, False),
            [(2, 3, 2, 4), (3,)]),
        "gelu": (lambda m, x: _f(m, F).gelu(x), [(4, 6)]),
        "gelu_0d": (lambda m, x: _f(m, F).gelu(x), [()]),
        "gelu_empty": (lambda m, x: _f(m, F).gelu(x), [(0, 3)]),
    }


def _f(m, path):
    for p in path.split("."):
        m = getattr(m, p)
    return m


def _second_order(lib, fn, arrays, go, vs):
    ins = [lib.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    gy = lib.from_numpy(go.copy()).requires_grad_(True)
    g1 = lib.autograd.grad(fn(lib, *ins), ins, gy, create_graph=True)
    pen = sum((g * lib.from_numpy(v)).sum() for g, v in zip(g1, vs))
    g2 = lib.autograd.grad(pen, ins + [gy], allow_unused=True)
    return g1, g2


@pytest.mark.parametrize("name", list(_norm_cases()))
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_recorded_kernel_graph_and_second_order_values_are_torchs(name, dtype):
    fn, shapes = _norm_cases()[name]
    rng = np.random.default_rng(3)
    arrays = [np.asarray(rng.standard_normal(s) * 2, dtype=dtype) for s in shapes]
    go = np.asarray(rng.standard_normal(tuple(fn(torch, *map(torch.from_numpy, arrays)).shape)),
                    dtype=dtype)
    vs = [np.asarray(rng.standard_normal(s), dtype=dtype) for s in shapes]
    (e1, e2), (t1, t2) = [_second_order(lib, fn, arrays, go, vs) for lib in (ember, torch)]
    for a, b in zip(e1, t1):
        # the recorded node is PyTorch's, with its edges, down to the leaves
        assert graph(a.grad_fn) == graph(b.grad_fn), (name, a.grad_fn, b.grad_fn)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-5)
    for a, b in zip(e2, t2):
        assert (a is None) == (b is None) or not (a if b is None else b).detach().numpy().any()
        if a is not None and b is not None:
            np.testing.assert_allclose(a.numpy(), b.numpy(), **tol)
    # and the plain pass has the same bits (its own check, on these inputs too)
    ins = [ember.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    plain = ember.autograd.grad(fn(ember, *ins), ins, ember.from_numpy(go.copy()))
    assert [_bits(g) for g in plain] == [_bits(g) for g in e1]


@pytest.mark.parametrize("name", ["layer_norm", "layer_norm_2d_w", "batch_norm",
                                  "batch_norm_no_affine", "batch_norm_eval", "gelu"])
def test_recorded_kernels_second_and_third_order_against_finite_differences(name):
    """gradcheck of the gradients (the recorded op's backward) and gradgradcheck (its
    backward's graph), in float64, with the output gradient an input too."""
    fn, shapes = _norm_cases()[name]
    rng = np.random.default_rng(4)
    ins = [ember.from_numpy(np.asarray(rng.standard_normal(s), dtype=np.float64))
           .requires_grad_(True) for s in shapes]
    gy = ember.from_numpy(np.asarray(rng.standard_normal(tuple(fn(ember, *ins).shape))))
    gy.requires_grad_(True)

    def first(*args):
        *xs, g = args
        return ember.autograd.grad(fn(ember, *xs), xs, g, create_graph=True)
    assert ember.autograd.gradcheck(first, (*ins, gy))
    assert ember.autograd.gradgradcheck(first, (*ins, gy))


@pytest.mark.parametrize("kind", ["plain", "causal", "bool_mask", "scale"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_fused_attention_gradient_bits_and_higher_orders(kind, dtype):
    """Fused attention's recorded gradients are the plain pass's kernel's; PyTorch's
    node there is NotImplemented (no second derivative), so the second and third
    derivatives are checked against torch's attention written as a formula."""
    rng = np.random.default_rng(6)
    arrays = [np.asarray(rng.standard_normal((2, 3, 5, 4)), dtype=dtype) for _ in range(3)]
    go = np.asarray(rng.standard_normal((2, 3, 5, 4)), dtype=dtype)
    mask = rng.standard_normal((5, 5)) > -0.5
    mask[:, 0] = True
    vs = [np.asarray(rng.standard_normal((2, 3, 5, 4)), dtype=dtype) for _ in range(3)]
    kw = {"plain": {}, "causal": {"is_causal": True}, "scale": {"scale": 0.3},
          "bool_mask": {"attn_mask": mask}}[kind]

    def fused(m, q, k, v):
        args = {n: m.from_numpy(a) if isinstance(a, np.ndarray) else a for n, a in kw.items()}
        return m.nn.functional.scaled_dot_product_attention(q, k, v, **args)

    def formula(m, q, k, v):
        s = q @ k.transpose(-2, -1) * kw.get("scale", q.shape[-1] ** -0.5)
        if kind == "causal":
            s = s.masked_fill(~m.ones(5, 5, dtype=m.bool).tril(), float("-inf"))
        if kind == "bool_mask":
            s = s.masked_fill(~m.from_numpy(mask), float("-inf"))
        return m.softmax(s, -1) @ v

    def orders(m, fn):
        ins = [m.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
        gy = m.from_numpy(go.copy()).requires_grad_(True)
        g1 = m.autograd.grad(fn(m, *ins), ins, gy, create_graph=True)
        pen = sum((g * m.from_numpy(v)).sum() for g, v in zip(g1, vs))
        g2 = m.autograd.grad(pen, ins + [gy], create_graph=True)
        g3 = m.autograd.grad(sum((g * g).sum() for g in g2), ins + [gy])
        plain = m.autograd.grad(fn(m, *ins), ins, m.from_numpy(go.copy()))
        return g1, g2, g3, plain
    e1, e2, e3, ep = orders(ember, fused)
    assert [_bits(g) for g in e1] == [_bits(g) for g in ep]
    assert e1[0].grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackwardBackward0"
    _, t2, t3, _ = orders(torch, formula)
    tol = dict(rtol=1e-9, atol=1e-11) if dtype == np.float64 else dict(rtol=1e-3, atol=1e-4)
    for a, b in zip(e2 + e3, t2 + t3):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **tol)


def test_transforms_still_differentiate_the_norms():
    """Under vmap and forward AD the formula path runs (its ops have the rules): per-sample
    gradients of a layer-norm model and a Hessian-vector product agree with torch."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 6))
    w = rng.standard_normal(6)
    out = []
    for lib in (ember, torch):
        F = lib.nn.functional

        def loss(wt, xt, F=F):
            return (F.gelu(F.layer_norm(xt, (6,), wt)) ** 2).sum()
        per = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0))(
            lib.from_numpy(w), lib.from_numpy(x))
        hess = lib.func.hessian(loss)(lib.from_numpy(w), lib.from_numpy(x))
        out.append((per.numpy(), hess.numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_under_the_profiler_the_recorded_kernels_run_and_show_torchs_rows():
    """The profiler observes: a gradient made with a graph under it is still the kernel's
    (same bits, same node), and its rows name PyTorch's backward kernels."""
    rows = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        x = lib.from_numpy(np.random.default_rng(7).standard_normal((4, 8))).requires_grad_(True)
        ln = lib.nn.LayerNorm(8).double()
        plain, = lib.autograd.grad(lib.nn.functional.gelu(ln(x)).pow(2).sum(), x)
        with lib.profiler.profile() as prof:
            g, = lib.autograd.grad(lib.nn.functional.gelu(ln(x)).pow(2).sum(), x,
                                   create_graph=True)
        assert _bits(g) == _bits(plain)
        assert g.grad_fn.name() == "NativeLayerNormBackwardBackward0"
        rows.append({e.name for e in prof.events()} & {
            "aten::native_layer_norm_backward", "aten::gelu_backward"})
    assert rows[0] == rows[1] == {"aten::native_layer_norm_backward", "aten::gelu_backward"}


if __name__ == "__main__":
    res = dict(survey())
    res.update(layer_survey())
    write_gaps(GAPS, sorted(res))
    for k, v in sorted(res.items()):
        print(k, v)
    print(f"{len(res)} cases differ; wrote {GAPS}")
