"""A trace gives eager's answer at every other shape, or says loudly why not.

The sweep (``tests/trace_sweep.py``) traces every module case of the nn oracle tables
and the jit/ONNX zoos at the example's shapes and replays it with each dimension the
layer allows grown; recurrent layers are checked to be one node in the IR, and their
TorchScript (run by real ``torch.jit.load``) and ONNX (run by onnxruntime) at other
sequence lengths and batch sizes.
"""
import io
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
import trace_sweep

import ember
import ember.onnx

# Entries that still fail the sweep, with the reason. Each is checked to fail still, so
# the list shrinks as they are fixed.
KNOWN = {
    # the case's own code marks ignored targets with t.view(-1)[::3] = -100 (a write
    # through a view of a traced tensor), which the tracer refuses (NotImplementedError)
    **{f"losses.LOSSES:CE_{n}_{r}": "trace refuses (the case writes through a view)"
       for n in ("weight_ignore", "smoothing", "smoothing_weight")
       for r in ("none", "mean", "sum")},
    # a Python loop over range(x.size(0)) in user code is unrolled (PyTorch's tracer
    # unrolls it silently too)
    "jit_zoo:dynamic_rnn": "user loop over a size is unrolled",
}


@pytest.fixture(scope="module")
def results():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {item.name: trace_sweep.sweep(item) for item in trace_sweep.items()}


def test_sweep(results):
    counts = trace_sweep.figures(results)
    print(f"\ntrace sweep: {len(results)} cases; " +
          ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    assert len(results) > 350
    bad = {n: d for n, (s, d) in results.items() if s == "FAIL" and n not in KNOWN}
    assert not bad, bad
    fixed = sorted(n for n in KNOWN if results[n][0] != "FAIL")
    assert not fixed, f"these pass now: remove them from KNOWN: {fixed}"
    assert counts.get("equal", 0) > 350


# ----- recurrent layers: one node, torch's spelling, ONNX at other lengths ---------------
RNNS = [("LSTM", {"num_layers": 2}), ("LSTM", {"batch_first": True}),
        ("LSTM", {"bidirectional": True, "num_layers": 2, "batch_first": True}),
        ("LSTM", {"proj_size": 3, "bias": False}), ("GRU", {}),
        ("GRU", {"bidirectional": True, "batch_first": True}),
        ("RNN", {"num_layers": 3}), ("RNN", {"nonlinearity": "relu", "bidirectional": True})]
_OP = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn_tanh"}


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _ids(cases):
    return [c + "".join(f"_{k}={v}" for k, v in kw.items()) for c, kw in cases]


@pytest.mark.parametrize("cls,kw", RNNS, ids=_ids(RNNS))
def test_rnn_is_one_node_and_replays_in_torch(cls, kw):
    ember.manual_seed(0)
    m = getattr(ember.nn, cls)(4, 8, **kw)
    traced = ember.jit.trace(m, ember.randn(3, 5, 4))
    op = "rnn_relu" if kw.get("nonlinearity") == "relu" else _OP[cls]
    ops = [n.op for n in traced.graph.nodes]
    assert ops.count(op) == 1 and not any("Layer" in o for o in ops), ops
    assert f"torch.{op}(" in traced.code
    buf = io.BytesIO()
    ember.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    for shape in ((6, 9, 4), (1, 2, 4)):
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        want = _flat(m(ember.tensor(x)))
        for got in (_flat(traced(ember.tensor(x))), _flat(loaded(torch.tensor(x)))):
            for a, b in zip(want, got):
                np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(),
                                           rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,kw", [c for c in RNNS if "proj_size" not in c[1]],
                         ids=_ids([c for c in RNNS if "proj_size" not in c[1]]))
def test_rnn_onnx_runs_at_other_lengths(cls, kw):
    ember.manual_seed(0)
    m = getattr(ember.nn, cls)(4, 8, **kw).eval()
    buf = io.BytesIO()
    ember.onnx.export(m, (ember.randn(3, 5, 4),), buf, input_names=["x"],
                      dynamic_axes={"x": {0: "a", 1: "b"}})
    sess = ort.InferenceSession(buf.getvalue())
    import onnx
    kinds = {n.op_type for n in onnx.load_from_string(buf.getvalue()).graph.node}
    assert {"LSTM": "LSTM", "GRU": "GRU", "RNN": "RNN"}[cls] in kinds
    x = np.random.default_rng(2).standard_normal((6, 9, 4)).astype(np.float32)
    for a, b in zip(_flat(m(ember.tensor(x))), sess.run(None, {"x": x})):
        np.testing.assert_allclose(b, a.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_rnn_projection_onnx_raises():
    m = ember.nn.LSTM(4, 8, proj_size=3)
    with pytest.raises(ember.onnx.UnsupportedOnnxExport, match="proj_size"):
        ember.onnx.export(m, (ember.randn(3, 5, 4),), io.BytesIO())


def test_packed_lstm_is_one_node_and_replays():
    from ember.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    class Model(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = ember.nn.LSTM(4, 8, bidirectional=True)

        def forward(self, x, lengths):
            out, (h, c) = self.rnn(pack_padded_sequence(x, lengths, enforce_sorted=False))
            return pad_packed_sequence(out, total_length=x.shape[0])[0], h

    ember.manual_seed(0)
    m = Model()
    traced = ember.jit.trace(m, (ember.randn(5, 3, 4), ember.tensor([5, 2, 3])))
    assert [n.op for n in traced.graph.nodes].count("lstm") == 1
    x, lengths = ember.randn(7, 4, 4), ember.tensor([3, 7, 1, 5])
    for a, b in zip(m(x, lengths), traced(x, lengths)):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_adaptive_pool_cnn_replays_at_other_sizes():
    """The issue's CNN: traced at 8x8, run at 12x16; also in torch.jit.load."""
    nn = ember.nn
    ember.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(4, 2))
    traced = ember.jit.trace(m, ember.randn(2, 3, 8, 8))
    assert "adaptive_avg_pool2d" in [n.op for n in traced.graph.nodes]
    buf = io.BytesIO()
    ember.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    x = ember.randn(3, 3, 12, 16)
    want = m(x).detach().numpy()
    np.testing.assert_allclose(traced(x).detach().numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loaded(torch.tensor(x.numpy())).detach().numpy(), want,
                               rtol=1e-5, atol=1e-6)
