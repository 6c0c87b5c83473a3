"""Ops that gained an ONNX spelling: each exports, and onnxruntime runs it with the
values of torch at the example's batch size and, through a dynamic axis, at another."""
import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from opdb_trace import Call

import ember

CASES = {
    # name: (the call, given the library, and the operands' shapes at batch 2)
    "addcmul": (lambda m, x, a, b: m.addcmul(x, a, b), [(2, 3), (2, 3), (1, 3)]),
    "addcmul_value": (lambda m, x, a, b: m.addcmul(x, a, b, value=0.5), [(2, 3)] * 3),
    "addcdiv": (lambda m, x, a, b: m.addcdiv(x, a, b, value=-2.0), [(2, 3)] * 3),
    "roll_dims": (lambda m, x: m.roll(x, (1, -4), (0, 2)), [(2, 3, 3)]),
    "roll_flat": (lambda m, x: x.roll(5), [(2, 3)]),
    "roll_empty_dim": (lambda m, x: m.roll(x, 2, 1), [(2, 0, 3)]),  # (no Mod by 0)
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_exports_and_follows_the_batch(name):
    fn, shapes = CASES[name]
    model = Call(lambda *xs: fn(ember, *xs))
    args = tuple(ember.rand(*s) + 0.5 for s in shapes)
    names = [f"x{i}" for i in range(len(shapes))]
    dyn = {n: {0: "b"} for n, s in zip(names, shapes) if s[0] != 1}
    f = io.BytesIO()
    ember.onnx.export(model, args, f, input_names=names, dynamic_axes=dyn)
    onnx.checker.check_model(onnx.load_from_string(f.getvalue()), full_check=True)
    sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    for b in (2, 5):
        xs = tuple(ember.rand(*((b,) + s[1:] if s[0] != 1 else s)) + 0.5 for s in shapes)
        got = sess.run(None, {n: x.numpy() for n, x in zip(names, xs)})[0]
        want = fn(torch, *(torch.from_numpy(x.numpy()) for x in xs)).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_mixed_dtypes_raise():
    model = Call(ember.addcmul)
    args = (ember.rand(2, 3), ember.rand(2, 3, dtype=ember.float64), ember.rand(2, 3))
    with pytest.raises(ember.onnx.UnsupportedOnnxExport, match="mixed dtypes"):
        ember.onnx.export(model, args, io.BytesIO())
