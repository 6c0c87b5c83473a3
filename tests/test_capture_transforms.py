"""Graph capture composed with function transforms: ``jit.trace``, ``compile`` and
``onnx.export`` of code that calls ``vmap``/``grad``/``jacfwd`` record the ops the
transforms run on whole batches (the capture is a mode below the transform's levels),
so they replay on a second input of another batch size; what cannot be recorded fails
loudly. Checked against torch."""
import io
import threading
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import ember
import ember.onnx
from ember import func as efunc
from ember import jit
from ember.autograd import _modes
from ember.autograd import node as _node

RNG = np.random.default_rng(0)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _sin_sum(m):
    return lambda x: m.func.vmap(lambda r: (r.sin() * r).sum())(x)


def _batched_mm(m):
    return lambda x: m.func.vmap(lambda r: (r @ r.T).tanh().sum(0) + r.mean(1))(x)


def _grad_in_vmap(m):
    return lambda x: m.func.vmap(m.func.grad(lambda r: (r.sin() * r).sum()))(x)


def _in_dims(m):
    return lambda x, w: m.func.vmap(lambda r, v: (r * v).exp() - v, in_dims=(1, None))(x, w)


@pytest.mark.parametrize("make,first,second", [
    (_sin_sum, (3, 4), (5, 6)),
    (_batched_mm, (3, 2, 4), (5, 3, 6)),
])
def test_trace_of_vmap_replays_at_another_batch_and_feature_size(make, first, second):
    f, tf = make(ember), make(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no TracerWarning, no per-sample fallback
        t = jit.trace(f, ember.tensor(_x(*first)))
    tt = torch.jit.trace(tf, torch.tensor(_x(*first)))
    x = _x(*second)
    want = tt(torch.tensor(x)).numpy()
    np.testing.assert_allclose(t(ember.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(want, tf(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-5)


def test_trace_of_vmap_records_the_batched_ops_not_a_constant():
    t = jit.trace(_sin_sum(ember), ember.tensor(_x(3, 4)))
    assert [n.op for n in t.graph.nodes] == ["Sin", "Mul", "Sum"]
    assert not t.graph.constants


def test_trace_of_vmap_with_in_dims_and_an_unbatched_argument():
    f, tf = _in_dims(ember), _in_dims(torch)
    w = _x(4)
    t = jit.trace(f, (ember.tensor(_x(4, 3)), ember.tensor(w)))
    x, w2 = _x(4, 7), _x(4)
    np.testing.assert_allclose(t(ember.tensor(x), ember.tensor(w2)).numpy(),
                               tf(torch.tensor(x), torch.tensor(w2)).numpy(), rtol=1e-5)


def test_trace_of_grad_inside_vmap_replays_on_new_values():
    # torch.jit.trace cannot trace this program; ember records the batched backward
    f, tf = _grad_in_vmap(ember), _grad_in_vmap(torch)
    with pytest.warns(jit.TracerWarning, match="backward pass"):
        t = jit.trace(f, ember.tensor(_x(3, 4)))
    x = _x(3, 4)
    np.testing.assert_allclose(t(ember.tensor(x)).numpy(), tf(torch.tensor(x)).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_trace_of_jacfwd_replays_at_another_length():
    def f(x):
        return efunc.jacfwd(lambda r: r.sin() * r)(x)

    def tf(x):
        return torch.func.jacfwd(lambda r: r.sin() * r)(x)
    t = jit.trace(f, ember.tensor(_x(4)))
    # forward AD is a mode below which the capture records the tangent ops, and the basis
    # (eye, narrow) takes traced sizes: the trace replays at another length, as torch's
    x = _x(6)
    tt = torch.jit.trace(tf, torch.tensor(_x(4)))
    np.testing.assert_allclose(t(ember.tensor(x)).numpy(), tt(torch.tensor(x)).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_vmap_fallback_loop_fails_the_trace_loudly():
    def f(x):
        return efunc.vmap(lambda r: r.sum() * r.max().item())(x)
    with pytest.raises(NotImplementedError, match="per-sample fallback loop") as ei:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jit.trace(f, ember.tensor(_x(3, 4)))
    assert __file__ in str(ei.value) and "item" in str(ei.value)
    assert not _modes.stack


@pytest.mark.parametrize("make", [_sin_sum, _batched_mm, _grad_in_vmap])
def test_compile_of_vmap_code_gives_each_call_its_own_result(make):
    f, tf = ember.compile(make(ember)), make(torch)
    shapes = {_sin_sum: [(3, 4), (3, 4), (5, 6)], _batched_mm: [(3, 2, 4), (3, 2, 4), (5, 3, 6)],
              _grad_in_vmap: [(3, 4), (3, 4), (5, 4)]}[make]
    for s in shapes:
        x = _x(*s)
        np.testing.assert_allclose(f(ember.tensor(x)).numpy(), tf(torch.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_compile_of_a_vmap_fallback_runs_eagerly_and_stays_right():
    def f(x):
        return efunc.vmap(lambda r: r.sum() * r.max().item())(x)

    def tf(x):
        return torch.stack([r.sum() * r.max().item() for r in x])
    c = ember.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in ((3, 4), (3, 4), (5, 4)):
            x = _x(*s)
            np.testing.assert_allclose(c(ember.tensor(x)).numpy(), tf(torch.tensor(x)).numpy(),
                                       rtol=1e-5)


def _vmap_body(m, x):
    return m.func.vmap(lambda r: (r.sin() * r).sum() + r.exp().mean())(x)


class _VmapModule(ember.nn.Module):
    def forward(self, x):
        return _vmap_body(ember, x)


@pytest.mark.parametrize("second", [(5, 4), (7, 9)])
def test_onnx_export_of_vmap_runs_in_onnxruntime_at_another_batch_size(second):
    f = _VmapModule()
    buf = io.BytesIO()
    ember.onnx.export(f, (ember.tensor(_x(3, 4)),), buf, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "b", 1: "n"}, "y": {0: "b"}})
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load_from_string(buf.getvalue()).graph.node]
    assert {"Sin", "Mul", "Exp"} <= set(ops)
    x = _x(*second)
    (got,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, _vmap_body(torch, torch.tensor(x)).numpy(), rtol=1e-5,
                               atol=1e-6)


def test_capture_swaps_nothing_and_records_only_its_own_thread():
    seen = {}
    add, code = ember.Tensor.__add__, ember.Tensor.__add__.__code__
    size, apply = ember.Tensor.size, _node.Primitive.__dict__["apply"]

    def f(x):
        seen["same"] = (ember.Tensor.__add__ is add and add.__code__ is code
                        and ember.Tensor.size is size
                        and _node.Primitive.__dict__["apply"] is apply
                        and ember.Tensor.view.__name__ == "view")
        out = []
        th = threading.Thread(target=lambda: out.append(type(ember.ones(2, 3).size(0))))
        th.start()
        th.join()
        seen["other"] = out[0]
        return x * 2
    t = jit.trace(f, ember.tensor(_x(2)), check_trace=False)
    assert seen == {"same": True, "other": int}
    assert [n.op for n in t.graph.nodes] == ["Mul"]
    assert not _modes.stack and _modes.active[0] == 0


def test_trace_of_grad_replays_on_new_values_and_refuses_other_sizes():
    # torch.jit.trace cannot trace torch.func.grad; ember records the backward's ops,
    # whose saved sizes are the example's: another size raises instead of a wrong answer
    def f(x):
        return efunc.grad(lambda r: (r.sin() * r).sum())(x)

    def tf(x):
        return torch.func.grad(lambda r: (r.sin() * r).sum())(x)
    with pytest.warns(jit.TracerWarning, match="backward pass") as rec:
        t = jit.trace(f, ember.tensor(_x(3, 4)))
    assert rec[0].filename == __file__
    x = _x(3, 4)
    np.testing.assert_allclose(t(ember.tensor(x)).numpy(), tf(torch.tensor(x)).numpy(),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError):
        t(ember.tensor(_x(5, 4)))


class _Jacfwd(ember.nn.Module):
    def forward(self, x):
        return efunc.jacfwd(lambda r: r.sin() * r)(x)


def test_onnx_export_of_jacfwd_runs_at_another_length():
    buf = io.BytesIO()
    ember.onnx.export(_Jacfwd(), (ember.tensor(_x(4)),), buf, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "n"}})
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    x = _x(6)
    (got,) = sess.run(None, {"x": x})
    want = torch.func.jacfwd(lambda r: r.sin() * r)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_only_jit_imports_jits_private_modules():
    # the shared capture layer is ember._graph; jit's private modules are jit's own
    import ast
    import pathlib
    root = pathlib.Path(ember.__file__).parent
    bad = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root)
        if rel.parts[0] == "jit":
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n.startswith("ember.jit._") for n in names):
                bad.append(f"{rel}:{node.lineno}")
    assert not bad, bad


def test_export_of_vmap_with_a_dynamic_batch_runs_at_another_batch_size():
    from ember.export import Dim, export

    class M(ember.nn.Module):
        def forward(self, x):
            return _sin_sum(ember)(x)
    ep = export(M(), (ember.tensor(_x(3, 4)),), dynamic_shapes={"x": {0: Dim("b")}})
    x = _x(6, 4)
    np.testing.assert_allclose(ep.module()(ember.tensor(x)).numpy(),
                               _sin_sum(torch)(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_compile_of_jacfwd_code_gives_each_call_its_own_result():
    def f(x):
        return efunc.jacfwd(lambda r: r.sin() * r)(x)
    cf = ember.compile(f)
    for n in (4, 6, 6, 3):
        x = _x(n)
        want = torch.func.jacfwd(lambda r: r.sin() * r)(torch.tensor(x)).numpy()
        np.testing.assert_allclose(cf(ember.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)
