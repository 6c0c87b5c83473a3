"""ember.onnx.export: files checked by the onnx package and run by onnxruntime."""
import io
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx_zoo import zoo

import ember
import ember.onnx

ort.set_default_logger_severity(3)


def _flat(out):
    out = out if isinstance(out, tuple) else (out,)
    flat = []
    for o in out:
        flat += list(o.values()) if isinstance(o, dict) else [o]
    return [o.detach().numpy() for o in flat]


def _export(model, args, **kw):
    f = io.BytesIO()
    ember.onnx.export(model, args, f, **kw)
    data = f.getvalue()
    onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    return data


def _run(data, names, args):
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return sess.run(None, {n: a.numpy() for n, a in zip(names, args)})


@pytest.mark.parametrize("name", list(zoo()))
def test_zoo_runs_in_onnxruntime_with_embers_numbers(name):
    model, make, dyn = zoo()[name]
    model.eval()
    args = make(2, 5)
    names = [f"in{i}" for i in range(len(args))]
    data = _export(model, args, input_names=names, dynamic_axes=dict(zip(names, dyn)))
    seq_dynamic = any(1 in d for d in dyn)
    for b, t in [(2, 5), (3, 5)] + ([(3, 9)] if seq_dynamic else []):
        a = make(b, t)
        with ember.no_grad():
            want = _flat(model(*a))
        got = _run(data, names, a)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_graphs_are_lean():
    """No Identity tails or needless Casts: an MLP is Gemm, Tanh, Gemm, as torch's."""
    model, make, _ = zoo()["mlp"]
    m = onnx.load_from_string(_export(model.eval(), make(2, 0)))
    assert [n.op_type for n in m.graph.node] == ["Gemm", "Tanh", "Gemm"]
    assert sorted(i.name for i in m.graph.initializer) == sorted(model.state_dict())
    cnn = onnx.load_from_string(_export(zoo()["cnn"][0].eval(), zoo()["cnn"][1](2, 0)))
    # BatchNorm in eval mode folds into constants; dropout disappears
    assert "Dropout" not in {n.op_type for n in cnn.graph.node}
    assert not any(n.op_type in ("Identity", "Cast") for n in cnn.graph.node)


def test_names_outputs_and_dict_outputs():
    model, make, _ = zoo()["tuple_dict"]
    data = _export(model.eval(), make(2, 0), input_names=["x"], output_names=["total", "p"])
    m = onnx.load_from_string(data)
    assert [i.name for i in m.graph.input] == ["x"]
    assert [o.name for o in m.graph.output] == ["total", "p"]


@pytest.mark.parametrize("opset", [13, 17, 21])
def test_opsets(opset):
    model, make, dyn = zoo()["transformer"]
    model.eval()
    args = make(2, 4)
    data = _export(model, args, opset_version=opset, input_names=["x", "m"])
    m = onnx.load_from_string(data)
    assert m.opset_import[0].version == opset
    np.testing.assert_allclose(_run(data, ["x", "m"], args)[0], _flat(model(*args))[0],
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="opset_version 12"):
        ember.onnx.export(model, args, io.BytesIO(), opset_version=12)


def test_params_as_inputs():
    model, make, _ = zoo()["mlp"]
    model.eval()
    args = make(2, 0)
    m = onnx.load_from_string(_export(model, args, export_params=False, input_names=["x"]))
    assert not m.graph.initializer
    assert [i.name for i in m.graph.input] == ["x"] + [k for k in model.state_dict()]
    m2 = onnx.load_from_string(_export(model, args, keep_initializers_as_inputs=True))
    assert {i.name for i in m2.graph.initializer} <= {i.name for i in m2.graph.input}


def test_path_and_external_data(tmp_path):
    model, make, _ = zoo()["cnn"]
    model.eval()
    args = make(2, 0)
    path = tmp_path / "cnn.onnx"
    ember.onnx.export(model, args, str(path), input_names=["x"],
                      _external_data_threshold=100)
    data_file = tmp_path / "cnn.onnx.data"
    assert data_file.exists() and data_file.stat().st_size > 0
    m = onnx.load(str(path))
    onnx.checker.check_model(str(path))
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in
               onnx.load(str(path), load_external_data=False).graph.initializer)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"x": args[0].numpy()})[0]
    np.testing.assert_allclose(got, _flat(model(*args))[0], rtol=1e-4, atol=1e-5)
    assert m.graph.node


def test_unsupported_op_names_op_opset_and_line():
    class Inv(ember.nn.Module):
        def forward(self, x):
            return ember.linalg.inv(x)  # the line the error names
    with pytest.raises(ember.onnx.UnsupportedOnnxExport) as e:
        ember.onnx.export(Inv(), (ember.randn(3, 3),), io.BytesIO())
    msg = str(e.value)
    assert "'Inv'" in msg and "opset 18" in msg and "test_onnx_export.py" in msg
    assert "Conv" in msg and "Inv" not in ember.onnx.EXPORTABLE_OPS
    assert "Det" in ember.onnx.EXPORTABLE_OPS and "logical_and" in ember.onnx.EXPORTABLE_OPS


def test_custom_function_symbolic():
    class MyRelu(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def symbolic(g, x):
            return g.op("Relu", x)

    class M(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ember.nn.Linear(3, 3)

        def forward(self, x):
            return MyRelu.apply(self.lin(x))

    m = M()
    x = ember.randn(4, 3)
    data = _export(m, (x,), input_names=["x"])
    assert [n.op_type for n in onnx.load_from_string(data).graph.node] == ["Gemm", "Relu"]
    np.testing.assert_allclose(_run(data, ["x"], (x,))[0], _flat(m(x))[0], atol=1e-6)


def test_kwargs_inputs():
    model, make, _ = zoo()["transformer"]
    model.eval()
    x, mask = make(2, 4)
    data = _export(model, (x, {"mask": mask}), input_names=["x", "mask"])
    np.testing.assert_allclose(_run(data, ["x", "mask"], (x, mask))[0],
                               _flat(model(x, mask))[0], rtol=1e-4, atol=1e-5)


def test_round_trip_through_embers_importer():
    model, make, dyn = zoo()["lstm_lm"]
    model.eval()
    args = make(2, 6)
    data = _export(model, args, input_names=["tokens"], dynamic_axes={"tokens": dyn[0]})
    back = ember.onnx.load(data)
    a = make(3, 4)
    np.testing.assert_allclose(back(*a).detach().numpy(), _flat(model(*a))[0], rtol=1e-4,
                               atol=1e-5)


def test_training_mode_keeps_dropout():
    model = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.Dropout(0.5))
    m = onnx.load_from_string(_export(model, (ember.randn(2, 4),),
                                      training=ember.onnx.TrainingMode.TRAINING))
    assert model.training  # restored
    assert any(n.op_type in ("Dropout", "RandomUniformLike", "Bernoulli", "Mul")
               for n in m.graph.node)


def test_torch_program_exports_under_ember_run(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import torch
        import torch.onnx

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = torch.nn.LSTM(4, 8)
                self.out = torch.nn.Linear(8, 2)

            def forward(self, x, hidden):
                y, hidden = self.rnn(x, hidden)
                return self.out(y), hidden

        net = Net().eval()
        x = torch.randn(5, 1, 4)
        hidden = (torch.zeros(1, 1, 8), torch.zeros(1, 1, 8))
        torch.onnx.export(net, (x, hidden), "net.onnx")
        torch.save({"x": x, "y": net(x, hidden)[0]}, "ref.pt")
    """))
    r = subprocess.run([sys.executable, "-m", "ember", "run", str(prog)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    import torch
    ref = torch.load(tmp_path / "ref.pt")
    sess = ort.InferenceSession(str(tmp_path / "net.onnx"), providers=["CPUExecutionProvider"])
    feeds = dict(zip([i.name for i in sess.get_inputs()],
                     [ref["x"].numpy(), np.zeros((1, 1, 8), np.float32),
                      np.zeros((1, 1, 8), np.float32)]))
    np.testing.assert_allclose(sess.run(None, feeds)[0], ref["y"].detach().numpy(), rtol=1e-4,
                               atol=1e-5)


def test_same_outputs_as_torchs_own_export():
    """ember's file and torch's file of the same weights give the same outputs."""
    import torch
    model, make, _ = zoo()["resblock"]
    model.eval()
    args = make(2, 0)
    tm = torch.nn.Sequential()
    tm.conv1 = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False)
    tm.bn1 = torch.nn.BatchNorm2d(4)
    tm.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False)
    tm.bn2 = torch.nn.BatchNorm2d(4)
    tm.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in model.state_dict().items()})
    tm.eval()

    class TorchBlock(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            y = torch.relu(self.m.bn1(self.m.conv1(x)))
            return torch.relu(self.m.bn2(self.m.conv2(y)) + x)
    f = io.BytesIO()
    torch.onnx.export(TorchBlock(tm), (torch.from_numpy(args[0].numpy()),), f, dynamo=False,
                      input_names=["x"])
    theirs = _run(f.getvalue(), ["x"], args)[0]
    ours = _run(_export(model, args, input_names=["x"]), ["x"], args)[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_copysign_exports_with_the_sign_bit_of_zero():
    import torch

    class M(ember.nn.Module):
        def forward(self, a, b):
            return ember.copysign(a, b) + ember.copysign(a, -1.0)

    a, b = [1.0, -2.0, 3.0, 4.0], [-1.0, 1.0, -0.0, 0.0]
    args = (ember.tensor(a), ember.tensor(b))
    got = _run(_export(M(), args, input_names=["a", "b"]), ["a", "b"], args)[0]
    ta, tb = torch.tensor(a), torch.tensor(b)
    np.testing.assert_array_equal(got, (torch.copysign(ta, tb) + torch.copysign(ta, -1.0)).numpy())
