"""Every module of PyTorch's ModuleInfo table traced and exported at one shape, run at
others (tests/module_db_trace.py): ``ember.jit.trace`` gives eager ember's result at
every other batch size, length and spatial size the module allows, or warns; where
``torch.jit.trace`` of torch's module generalises, ember's does too, and where torch's
warns and freezes, ember's warns; ``ember.jit.save`` is read by the real
``torch.jit.load`` and gives torch's eager results there; ``ember.onnx.export`` with a
dynamic leading axis runs in onnxruntime at another size. An op ember has no ONNX or
TorchScript spelling for raises a clear error naming it: counted, not failed.

What still differs is in :data:`KNOWN` (exact: an entry that passes fails the test) and
in docs/differences.md ("ModuleInfo modules traced and exported at other shapes").
``python tests/module_db_trace.py`` prints every case.
"""
import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from module_db_harness import infos
from module_db_trace import run_all

import ember
import ember.onnx

# (case, stage) -> why it still differs; each must keep differing
KNOWN = {}


def _bad(stage, outcome):
    """Whether a stage's outcome is a failure (a silent difference, or a file that the
    real client cannot run)."""
    if stage == "trace":
        return outcome not in ("equal", "warned")
    if stage == "load":
        return outcome != "equal" and not outcome.startswith("unspelled")
    if stage == "onnx":
        return not outcome.startswith(("equal", "unsupported"))
    return False


@pytest.fixture(scope="module")
def results():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_all()


def _count(results, stage, prefix):
    return sum(1 for r in results.values() if str(r.get(stage, "")).startswith(prefix))


def test_every_module_is_traced(results):
    modules = {case.split("/")[0] for case in results}
    assert modules == set(infos()), sorted(set(infos()) - modules)
    assert len(results) >= 240
    counts = {
        "cases": len(results),
        "other shapes replayed": sum(r.get("variants", 0) for r in results.values()),
        "trace equal": _count(results, "trace", "equal"),
        "trace warned": _count(results, "trace", "warned"),
        "torch trace warned": _count(results, "torch_trace", "warned"),
        "torch.jit.load equal": _count(results, "load", "equal"),
        "no TorchScript spelling": _count(results, "load", "unspelled"),
        "onnxruntime equal": _count(results, "onnx", "equal"),
        "no ONNX spelling": _count(results, "onnx", "unsupported"),
    }
    print("\n" + "; ".join(f"{k} {v}" for k, v in counts.items()))
    # the figures docs/differences.md gives, as floors
    assert counts["trace equal"] + counts["trace warned"] == len(results) - len(
        [k for k in KNOWN if k[1] == "trace"])
    assert counts["torch.jit.load equal"] == len(results)
    assert counts["onnxruntime equal"] >= 204


def test_no_silent_difference(results):
    bad = {(case, stage): out[stage] for case, out in results.items()
           for stage in ("trace", "load", "onnx")
           if stage in out and _bad(stage, out[stage]) and (case, stage) not in KNOWN}
    assert not bad, "\n".join(f"{c} [{s}]: {o}" for (c, s), o in bad.items())


def test_known_is_exact(results):
    fixed = [k for k in KNOWN if k[0] in results and not _bad(k[1], results[k[0]].get(
        k[1], "equal"))]
    assert not fixed, f"these pass now: remove them from KNOWN: {fixed}"


def test_ember_warns_where_torch_freezes(results):
    """torch's trace warns and differs at another shape (an output ratio turned into an
    int): ember's warns too; ember warns nowhere torch's trace is silent."""
    for case, out in results.items():
        if out.get("torch_trace") == "warned":
            assert out["trace"] == "warned", case
        if "warns" in out:
            ember_warns, torch_warns = out["warns"]
            assert torch_warns or not ember_warns, f"{case}: ember warns, torch does not"
    assert _count(results, "trace", "warned") >= 2


# ----- the fixes, one by one (each failed on the tree before them) -------------------------
def _seeded(fn, *args):
    ember.manual_seed(3)
    return fn(*args)


@pytest.mark.parametrize("nd", [2, 3])
def test_fractional_pool_trace_follows_the_input_size(nd):
    """The windows come from the draw inside the op: the trace keeps the draw as a node,
    so other batch and spatial sizes give eager's windows (they were frozen, silently),
    and torch.jit.load runs the saved trace."""
    cls = getattr(ember.nn, f"FractionalMaxPool{nd}d")
    m = cls(2, output_size=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = ember.jit.trace(m, ember.randn((2, 3) + (7,) * nd), check_trace=False)
    assert not [w for w in caught if issubclass(w.category, ember.jit.TracerWarning)]
    ops = [n.op for n in traced.graph.nodes]
    assert "rand" in ops, ops
    buf = io.BytesIO()
    ember.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    buf.seek(0)
    e_loaded = ember.jit.load(buf)
    for shape in ((2, 3) + (7,) * nd, (4, 3) + (9,) * nd, (1, 3) + (5,) * nd):
        x = ember.randn(shape)
        want = _seeded(m, x)
        np.testing.assert_array_equal(_seeded(traced, x).numpy(), want.numpy())
        np.testing.assert_array_equal(_seeded(e_loaded, x).numpy(), want.numpy())
        assert want.shape == shape[:2] + (3,) * nd
        xt = torch.from_numpy(x.numpy())
        assert tuple(loaded(xt).shape) == tuple(want.shape)
        torch.manual_seed(5)
        t_mod = getattr(torch.nn, f"FractionalMaxPool{nd}d")(2, output_size=3)
        torch.manual_seed(5)
        t_want = t_mod(xt)
        torch.manual_seed(5)
        np.testing.assert_array_equal(loaded(xt).numpy(), t_want.numpy())


def test_fractional_pool_ratio_trace_warns():
    m = ember.nn.FractionalMaxPool2d(2, output_ratio=0.5)
    with pytest.warns(ember.jit.TracerWarning, match="Python integer"):
        ember.jit.trace(m, ember.randn(2, 3, 8, 8), check_trace=False)


def test_fractional_pool_eager_is_torch():
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 8)).astype(np.float32)
    u = np.random.default_rng(1).random((3, 3, 2)).astype(np.float32)
    for unbatched in (False, True):
        xs = x[0] if unbatched else x
        e, ei = ember.nn.functional.fractional_max_pool2d(
            ember.tensor(xs), (2, 3), output_size=(4, 3), return_indices=True,
            _random_samples=ember.tensor(u))
        t, ti = torch.nn.functional.fractional_max_pool2d(
            torch.tensor(xs), (2, 3), output_size=(4, 3), return_indices=True,
            _random_samples=torch.tensor(u))
        np.testing.assert_array_equal(e.numpy(), t.numpy())
        np.testing.assert_array_equal(ei.numpy(), ti.numpy())


def _size_ratio(x):
    return x[:, :int(x.shape[1] * 0.5)]


def _size_half(x):
    return x[:, :int(x.shape[1] / 2)]


def _size_int(x):
    return x[:, :int(x.shape[1]) - 2]


@pytest.mark.parametrize("fn", [_size_ratio, _size_half, _size_int])
def test_traced_size_made_a_number_warns(fn):
    """A size times a float, or int() of a size, is a plain number: the trace keeps it,
    and says so as PyTorch's does (it was silent, and the slice stayed at the example's
    length)."""
    with pytest.warns(ember.jit.TracerWarning, match="Python (float|integer)"):
        traced = ember.jit.trace(fn, ember.randn(2, 4), check_trace=False)
    assert traced(ember.randn(2, 6)).shape == (2, 2)  # frozen, as torch's trace is


def test_traced_size_with_int_arithmetic_stays_silent_and_generalises():
    def f(x):
        return x[:, :x.shape[1] // 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ember.jit.TracerWarning)
        traced = ember.jit.trace(f, ember.randn(2, 4), check_trace=False)
    assert traced(ember.randn(2, 6)).shape == (2, 3)


def test_pooling_trace_does_not_warn():
    """ember's pooling recomputes its windows at each size: no warning for the float
    arithmetic on sizes inside it."""
    for m in (ember.nn.AvgPool2d(2, ceil_mode=True), ember.nn.LPPool1d(2, 3),
              ember.nn.LocalResponseNorm(3)):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ember.jit.TracerWarning)
            ember.jit.trace(m, ember.randn(2, 4, 6, 5) if not isinstance(m, ember.nn.LPPool1d)
                            else ember.randn(2, 4, 9), check_trace=False)


@pytest.mark.parametrize("track", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_instance_norm_trace_is_aten_instance_norm(track, training):
    """PyTorch's trace shows aten::instance_norm in both modes (ember's showed
    aten::batch_norm in eval with running statistics, and could not save otherwise)."""
    torch.manual_seed(0)
    t_mod = torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=track)
    with torch.no_grad():
        t_mod.weight.uniform_()
        t_mod.bias.uniform_()
        if track:
            t_mod.running_mean.uniform_()
            t_mod.running_var.uniform_(1, 2)
    t_mod.train(training)
    e_mod = ember.nn.InstanceNorm2d(3, affine=True, track_running_stats=track)
    e_mod.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    e_mod.train(training)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = ember.jit.trace(e_mod, ember.randn(2, 3, 4, 4), check_trace=False)
        t_traced = torch.jit.trace(t_mod, torch.randn(2, 3, 4, 4), check_trace=False)
    assert "aten::instance_norm" in str(traced.graph)
    assert "aten::instance_norm" in str(t_traced.graph)
    assert "torch.instance_norm(" in traced.code
    buf = io.BytesIO()
    ember.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    x = np.random.default_rng(0).standard_normal((3, 3, 5, 6)).astype(np.float32)
    # the saved buffers are ember's after the trace's run: torch's module from them
    t_mod.load_state_dict({k: torch.tensor(v.numpy()) for k, v in e_mod.state_dict().items()})
    want = t_mod(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(loaded(torch.tensor(x)).detach().numpy(), want, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(traced(ember.tensor(x)).detach().numpy(), want, rtol=1e-5,
                               atol=1e-5)
    if track and training:  # the running statistics move as torch's do
        np.testing.assert_allclose(loaded.running_mean.numpy(), t_mod.running_mean.numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_torch_saved_instance_norm_loads_in_ember():
    """torch's archive calls torch.instance_norm in aten's argument order (ember's
    loader read it in F.instance_norm's, and raised)."""
    torch.manual_seed(0)
    m = torch.nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
    with torch.no_grad():
        m.weight.uniform_()
        m.bias.uniform_()
        m.running_mean.uniform_()
        m.running_var.uniform_(1, 2)
    m.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.jit.trace(m, torch.randn(2, 4, 5))
    buf = io.BytesIO()
    torch.jit.save(t, buf)
    buf.seek(0)
    loaded = ember.jit.load(buf)
    x = np.random.default_rng(0).standard_normal((3, 4, 7)).astype(np.float32)
    np.testing.assert_allclose(loaded(ember.tensor(x)).detach().numpy(),
                               m(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def _roundtrip(m, shape, others):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = ember.jit.trace(m, ember.randn(shape), check_trace=False)
    buf = io.BytesIO()
    ember.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    for s in (shape,) + others:
        x = np.random.default_rng(len(s)).standard_normal(s).astype(np.float32)
        with ember.no_grad():
            want = m(ember.tensor(x))
        want = want[0] if isinstance(want, tuple) else want
        got = loaded(torch.tensor(x))
        got = got[0] if isinstance(got, tuple) else got
        np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
        with ember.no_grad():  # and ember's own trace at that shape
            mine = traced(ember.tensor(x))
        mine = mine[0] if isinstance(mine, tuple) else mine
        np.testing.assert_allclose(mine.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    return traced


@pytest.mark.parametrize("make,shape,others", [
    (lambda nn: nn.AvgPool1d(3, 2, 1), (2, 3, 9), ((4, 3, 12),)),
    (lambda nn: nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 8, 9),
     ((1, 3, 11, 6),)),
    (lambda nn: nn.AvgPool2d(2, divisor_override=3), (2, 3, 6, 6), ((3, 3, 8, 4),)),
    (lambda nn: nn.AvgPool3d(2, 1), (2, 3, 4, 5, 3), ((1, 3, 5, 4, 6),)),
    (lambda nn: nn.LPPool2d(2, 2), (2, 3, 6, 6), ((3, 3, 8, 4),)),
    (lambda nn: nn.LocalResponseNorm(3), (2, 5, 4, 4), ((1, 7, 3, 6),)),
    (lambda nn: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
     (2, 3, 5, 5), ((1, 3, 7, 4),)),
    (lambda nn: nn.ConvTranspose1d(4, 2, 3, stride=3, groups=2, dilation=2), (2, 4, 5),
     ((3, 4, 8),)),
    (lambda nn: nn.ConvTranspose3d(2, 3, 2, stride=2), (1, 2, 3, 3, 2), ((2, 2, 2, 4, 3),)),
    (lambda nn: nn.AdaptiveMaxPool1d(3), (2, 3, 7), ((4, 3, 10),)),
    (lambda nn: nn.AdaptiveMaxPool2d((2, 3), return_indices=True), (2, 3, 7, 8),
     ((1, 3, 9, 5),)),
    (lambda nn: nn.AdaptiveMaxPool3d(2), (2, 3, 4, 5, 6), ((1, 3, 3, 3, 3),)),
    (lambda nn: nn.AdaptiveMaxPool2d((3, None)), (2, 3, 6, 8), ((1, 3, 7, 10), (2, 3, 5, 3))),
    (lambda nn: nn.AdaptiveMaxPool3d((None, 2, None)), (1, 2, 4, 5, 6), ((2, 2, 3, 7, 2),)),
    (lambda nn: nn.GroupNorm(2, 4), (2, 4, 5), ((3, 4, 7), (1, 4, 9))),
    (lambda nn: nn.Bilinear(3, 4, 2), None, ()),
    (lambda nn: nn.Softmax(0), (), ()),
], ids=["avg1d", "avg2d_ceil", "avg2d_divisor", "avg3d", "lp2d", "lrn", "convT2d",
        "convT1d_groups", "convT3d", "adamax1d", "adamax2d_indices", "adamax3d",
        "adamax2d_none", "adamax3d_none", "groupnorm",
        "bilinear", "softmax_0d"])
def test_saved_trace_runs_in_torch_at_other_shapes(make, shape, others):
    """These had no TorchScript spelling (jit.save raised) or wrote one torch.jit.load
    rejected (0-d softmax's dim None)."""
    ember.manual_seed(0)
    m = make(ember.nn)
    if shape is None:  # two inputs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = ember.jit.trace(m, (ember.randn(2, 3), ember.randn(2, 4)))
        buf = io.BytesIO()
        ember.jit.save(traced, buf)
        buf.seek(0)
        loaded = torch.jit.load(buf)
        a, b = ember.randn(5, 3), ember.randn(5, 4)
        np.testing.assert_allclose(
            loaded(torch.tensor(a.numpy()), torch.tensor(b.numpy())).detach().numpy(),
            m(a, b).detach().numpy(), rtol=1e-5, atol=1e-6)
        return
    _roundtrip(m, shape, others)


def test_unspelled_save_names_the_op():
    """jit.save of a trace with an op TorchScript lacks raises NotImplementedError naming
    it (it said 'expects a ScriptModule, got TracedModule')."""
    class Unfolding(ember.nn.Module):
        def forward(self, x):
            return ember.nn.functional.unfold(x, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = ember.jit.trace(Unfolding(), ember.randn(1, 2, 4, 4))
    with pytest.raises(NotImplementedError, match="Unfold"):
        ember.jit.save(traced, io.BytesIO())


def _ort(m, args, dyn):
    buf = io.BytesIO()
    names = [f"x{i}" for i in range(len(args))]
    ember.onnx.export(m, args, buf, input_names=names,
                      dynamic_axes={n: {0: "b"} for n in names} if dyn else None)
    onnx.checker.check_model(onnx.load_from_string(buf.getvalue()), full_check=True)
    return ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_unbatched_max_pool_runs_in_onnxruntime(nd):
    """An unbatched input gets its batch axis around ONNX's MaxPool (onnxruntime
    rejected the file: dilations of the wrong size)."""
    m = getattr(ember.nn, f"MaxPool{nd}d")(2, stride=1, padding=1, dilation=1)
    shape = (3,) + (5,) * nd
    sess = _ort(m, (ember.randn(shape),), True)
    for s in (shape, (4,) + (5,) * nd):
        x = np.random.default_rng(0).standard_normal(s).astype(np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x0": x})[0],
                                      m(ember.tensor(x)).numpy())


@pytest.mark.parametrize("cls", ["Softmax", "LogSoftmax", "Softmin"])
def test_zero_dim_softmax_runs_in_onnxruntime(cls):
    m = getattr(ember.nn, cls)(0)
    sess = _ort(m, (ember.tensor(1.5),), False)
    for v in (1.5, -2.0, float("inf"), float("nan")):
        x = np.array(v, np.float32)
        got = sess.run(None, {"x0": x})[0]
        assert got.shape == ()
        np.testing.assert_array_equal(got, m(ember.tensor(x)).numpy())


@pytest.mark.parametrize("track", [False, True])
def test_instance_norm_runs_in_onnxruntime(track):
    ember.manual_seed(0)
    m = ember.nn.InstanceNorm1d(3, affine=True, track_running_stats=track).eval()
    if track:
        m.running_mean.uniform_()
        m.running_var.uniform_(1, 2)
    sess = _ort(m, (ember.randn(2, 3, 5),), True)
    for s in ((2, 3, 5), (4, 3, 5)):
        x = np.random.default_rng(0).standard_normal(s).astype(np.float32)
        with ember.no_grad():
            want = m(ember.tensor(x)).numpy()
        np.testing.assert_allclose(sess.run(None, {"x0": x})[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make,shape", [
    (lambda nn: nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=True), (2, 3, 8, 7)),
    (lambda nn: nn.AvgPool1d(2, 1, 1, count_include_pad=False), (3, 9)),
    (lambda nn: nn.AvgPool3d(2, 2, ceil_mode=True), (2, 2, 5, 4, 3)),
    (lambda nn: nn.LPPool2d(3, 2), (2, 3, 6, 7)),
    (lambda nn: nn.GroupNorm(3, 6), (2, 6, 5)),
    (lambda nn: nn.GroupNorm(2, 4, affine=False), (2, 4, 3, 3)),
], ids=["avg2d_ceil_pad", "avg1d_unbatched", "avg3d_ceil", "lp2d", "groupnorm",
        "groupnorm_plain"])
def test_pooling_and_group_norm_run_in_onnxruntime(make, shape):
    """These raised UnsupportedOnnxExport: AveragePool with PyTorch's padding and
    ceil mode; group norm as InstanceNormalization with one channel per group."""
    ember.manual_seed(0)
    m = make(ember.nn)
    sess = _ort(m, (ember.randn(shape),), True)
    for b in (shape[0], shape[0] + 2):
        x = np.random.default_rng(b).standard_normal((b,) + shape[1:]).astype(np.float32)
        with ember.no_grad():
            want = m(ember.tensor(x)).numpy()
        got = sess.run(None, {"x0": x})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_full_like_runs_in_onnxruntime_and_torch():
    class Filled(ember.nn.Module):
        def forward(self, x):
            return x + ember.full_like(x, 2.5) + ember.full_like(x, x[0, 0].item() * 0)
    m = Filled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = _ort(m, (ember.randn(2, 3),), True)
        traced = ember.jit.trace(m, ember.randn(2, 3))
    buf = io.BytesIO()
    ember.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"x0": x})[0], x + 2.5, rtol=1e-6)
    np.testing.assert_allclose(loaded(torch.tensor(x)).numpy(), x + 2.5, rtol=1e-6)


@pytest.mark.parametrize("pad,shape", [((2, 1), (2, 3, 5)), ((1, 0, 2, 3), (2, 3, 4, 5)),
                                       ((1, 1, 0, 2, 2, 1), (1, 2, 3, 4, 5)),
                                       ((0, 3), (3, 4))],
                         ids=["1d", "2d_uneven", "3d", "unbatched"])
def test_circular_pad_runs_in_onnxruntime(pad, shape):
    """Circular padding as Slice and Concat per dim, corners included (it raised
    UnsupportedOnnxExport: ONNX's wrap mode is opset 19)."""
    class Circular(ember.nn.Module):
        def forward(self, x):
            return ember.nn.functional.pad(x, pad, mode="circular")
    m = Circular()
    sess = _ort(m, (ember.randn(shape),), True)
    for b in (shape[0], shape[0] + 2):
        x = np.random.default_rng(b).standard_normal((b,) + shape[1:]).astype(np.float32)
        want = torch.nn.functional.pad(torch.tensor(x), pad, mode="circular").numpy()
        np.testing.assert_array_equal(sess.run(None, {"x0": x})[0], want)
        np.testing.assert_array_equal(m(ember.tensor(x)).numpy(), want)


@pytest.mark.parametrize("make", [
    lambda nn: nn.MaxPool2d(3, stride=2, ceil_mode=True),
    lambda nn: nn.MaxPool1d(3, stride=2, padding=1, ceil_mode=True),
    lambda nn: nn.MaxPool3d(2, stride=2, dilation=2, ceil_mode=True),
    lambda nn: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True),
    lambda nn: nn.AvgPool1d(2, stride=2, ceil_mode=True, count_include_pad=False),
], ids=["max2d", "max1d_pad", "max3d_dil", "avg2d_pad", "avg1d"])
def test_ceil_mode_pooling_keeps_its_mode_at_other_sizes(make):
    """Saved and exported pooling takes the layer's ceil_mode, not whether the example's
    size rounded up: traced at a size where ceil and floor agree (9), other sizes gave
    one window fewer in torch.jit.load and onnxruntime."""
    m = make(ember.nn)
    nd = len(m.kernel_size) if isinstance(m.kernel_size, tuple) else \
        int(type(m).__name__[-2])
    shape = (1, 2) + (9,) * nd
    traced = _roundtrip(m, shape, tuple((2, 2) + (n,) * nd for n in (8, 10, 11)))
    buf = io.BytesIO()
    axes = {0: "n", **{2 + i: f"s{i}" for i in range(nd)}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.onnx.export(m, ember.randn(*shape), buf, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": axes})
    sess = ort.InferenceSession(buf.getvalue())
    for n in (8, 10, 11):
        x = np.random.default_rng(n).standard_normal((2, 2) + (n,) * nd).astype(np.float32)
        with ember.no_grad():
            want = m(ember.tensor(x)).numpy()
        got = sess.run(None, {"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert traced is not None
