"""Exports with a dynamic batch keep it for every op: the op oracle's cases
(tests/onnx_batch_sweep.py) run in onnxruntime at two batch sizes against eager ember,
and the models whose export once froze the batch or failed."""
import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx_batch_sweep import cases, run_case

import ember
import ember.onnx

ort.set_default_logger_severity(3)

# what still differs, and why (each must keep differing: a fix shows up here)
KNOWN = {
    # onnxruntime's ReduceMax/ReduceMin/ArgMax skip NaN; PyTorch's propagate it
    "ops_reduction.EXTREMA:max_dim_nan": "NaN",
    "ops_reduction.EXTREMA:min_dim_nan": "NaN",
    "ops_reduction.EXTREMA:amax_nan": "NaN",
    "ops_reduction.EXTREMA:argmax_nan": "NaN",
    # splitting the batch axis itself: the number of outputs follows the batch size,
    # and an ONNX graph has a fixed number of outputs
    "ops_shape.SPLITS:split_int": "outputs",
    "ops_shape.SPLITS:split_partial_grad": "outputs",
    "ops_shape.SPLITS:chunk": "outputs",
    "ops_shape.SPLITS:unbind": "outputs",
    "ops_shape.SPLITS:iter_rows": "outputs",
}
CASES = cases()


@pytest.mark.parametrize("table,case", CASES, ids=[f"{t}:{c.name}" for t, c in CASES])
def test_dynamic_batch_sweep(table, case):
    outcome = run_case(case)
    key = f"{table}:{case.name}"
    if key in KNOWN:
        assert outcome not in ("equal", "skip", "unsupported"), f"{key} now {outcome}"
    else:
        assert outcome in ("equal", "skip", "unsupported"), outcome


def _export(model, args, names, dyn):
    f = io.BytesIO()
    ember.onnx.export(model, args, f, input_names=names, dynamic_axes=dyn)
    onnx.checker.check_model(onnx.load_from_string(f.getvalue()), full_check=True)
    return ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"]), f.getvalue()


class _TopkGather(ember.nn.Module):
    def forward(self, x, idx):
        v, i = x.topk(3, dim=1)
        return x.gather(1, i) + v, x.gather(1, idx), x.sort(1)[1], x.argsort(0)


def test_topk_and_gather_follow_the_batch():
    model = _TopkGather()
    sess, _ = _export(model, (ember.randn(2, 6), ember.randint(0, 6, (2, 4))), ["x", "idx"],
                      {"x": {0: "b"}, "idx": {0: "b"}})
    for b in (2, 5):
        x, idx = ember.randn(b, 6), ember.randint(0, 6, (b, 4))
        got = sess.run(None, {"x": x.numpy(), "idx": idx.numpy()})
        for g, w in zip(got, model(x, idx)):
            assert g.shape == tuple(w.shape)
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-6)


def test_conv_transpose_then_nearest_upsampling_exports():
    nn = ember.nn
    ember.manual_seed(0)
    model = nn.Sequential(nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
                          nn.Upsample(scale_factor=2, mode="nearest"), nn.ReLU()).eval()
    sess, _ = _export(model, (ember.randn(1, 3, 5, 5),), ["x"], {"x": {0: "b"}})
    for b in (1, 3):
        x = ember.randn(b, 3, 5, 5)
        with ember.no_grad():
            want = model(x).numpy()
        got = sess.run(None, {"x": x.numpy()})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


class _MLP(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = ember.nn.Linear(12, 20), ember.nn.Linear(20, 10)

    def forward(self, x):
        x = x.view(x.size(0), -1)
        return ember.log_softmax(self.fc2(ember.relu(self.fc1(x))), dim=1)


@pytest.mark.parametrize("dynamic", [False, True])
def test_initializers_hold_exactly_the_parameters(dynamic):
    """Shapes, axes and scalars are Constant nodes (as in torch's files), not initializers."""
    nn = ember.nn
    ember.manual_seed(0)
    for model in (nn.Sequential(nn.Flatten(), nn.Linear(12, 20), nn.Tanh(), nn.Linear(20, 10)),
                  _MLP()):
        _, data = _export(model.eval(), (ember.randn(3, 3, 4),), ["x"],
                          {"x": {0: "b"}} if dynamic else None)
        proto = onnx.load_from_string(data)
        n_init = sum(int(np.prod(i.dims)) for i in proto.graph.initializer)
        n_param = sum(p.numel() for p in model.parameters())
        assert n_init == n_param == 470
        sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        x = ember.randn(3, 3, 4)
        with ember.no_grad():
            np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], model(x).numpy(),
                                       rtol=1e-5, atol=1e-6)
