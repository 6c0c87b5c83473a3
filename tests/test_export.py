"""ember.export: strict capture into an ExportedProgram; Dim constraints checked at
export (a second capture) and on every call of ``.module()``; compared with
torch.export on the same weights."""
import numpy as np
import pytest
import torch

import ember
import ember.nn as nn
from ember._compile import Unsupported
from ember.export import ConstraintViolationError, Dim, ExportedProgram, export


def _net_class(m):
    class Net(m.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = m.Linear(6, 16)
            self.bn = m.BatchNorm1d(16)
            self.fc2 = m.Linear(16, 3)

        def forward(self, x):
            return self.fc2(self.bn(self.fc1(x)).relu()).view(x.size(0), -1)
    return Net


def _pair():
    e = _net_class(nn)().eval()
    t = _net_class(torch.nn)().eval()
    t.load_state_dict({k: torch.tensor(v.numpy()) for k, v in e.state_dict().items()})
    return e, t


def test_export_matches_torch_export():
    e, t = _pair()
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    batch_e, batch_t = Dim("batch", min=2, max=32), torch.export.Dim("batch", min=2, max=32)
    ep = export(e, (ember.tensor(x),), dynamic_shapes={"x": {0: batch_e}})
    tp = torch.export.export(t, (torch.tensor(x),), dynamic_shapes={"x": {0: batch_t}})
    assert isinstance(ep, ExportedProgram)
    for b in (2, 4, 9, 32):
        xb = np.random.default_rng(b).standard_normal((b, 6)).astype(np.float32)
        got = ep.module()(ember.tensor(xb)).detach().numpy()
        want = tp.module()(torch.tensor(xb)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (rng,) = [(int(v.lower), int(v.upper)) for v in tp.range_constraints.values()]
    assert ep.range_constraints["batch"] == rng == (2, 32)
    sig = ep.graph_signature
    assert sig.parameters == ["fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight",
                              "fc2.bias"]
    assert "bn.running_mean" in sig.buffers and len(sig.user_inputs) == 1
    assert "_Linear" in str(ep.graph) and "Range constraints: {batch: VR[2, 32]}" in str(ep)
    assert set(ep.module().state_dict()) == set(e.state_dict())
    with pytest.raises(RuntimeError, match="module()"):
        ep(ember.tensor(x))


def test_call_outside_constraints_raises():
    e, _ = _pair()
    ep = export(e, (ember.randn(4, 6),), dynamic_shapes=({0: Dim("batch", min=2, max=8)},))
    m = ep.module()
    with pytest.raises(RuntimeError, match=r"shape\[0\] to be <= 8, but got 9"):
        m(ember.randn(9, 6))
    with pytest.raises(RuntimeError, match=r"shape\[0\] to be >= 2, but got 1"):
        m(ember.randn(1, 6))
    with pytest.raises(RuntimeError, match=r"shape\[1\] to be equal to 6, but got 5"):
        m(ember.randn(4, 5))
    with pytest.raises(RuntimeError, match="dtype"):
        m(ember.randn(4, 6, dtype=ember.float64))
    static = export(e, (ember.randn(4, 6),)).module()
    with pytest.raises(RuntimeError, match=r"shape\[0\] to be equal to 4, but got 5"):
        static(ember.randn(5, 6))


def test_specialized_dynamic_dim_raises():
    class Frozen(nn.Module):
        def forward(self, x):
            return x + ember.arange(int(x.shape[0])).reshape(-1, 1)

    class Literal(nn.Module):
        def forward(self, x):
            return x.view(4, -1)
    for mod in (Frozen(), Literal()):
        with pytest.raises(ConstraintViolationError, match="Constraints violated"):
            export(mod, (ember.randn(4, 3),), dynamic_shapes={"x": {0: Dim("b")}})
        ep = export(mod, (ember.randn(4, 3),))  # static: fine
        assert ep.range_constraints == {}
    with pytest.raises(ConstraintViolationError, match="size 1"):
        export(Literal(), (ember.randn(1, 12),), dynamic_shapes={"x": {0: Dim("b")}})


def test_strict_capture_errors_name_reason_and_line():
    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    class Item(nn.Module):
        def forward(self, x):
            return x * x.max().item()
    with pytest.raises(Unsupported, match=r"Python boolean .*test_export.py:\d+"):
        export(Branchy(), (ember.randn(3),))
    with pytest.raises(Unsupported, match=r"Python number"):
        export(Item(), (ember.randn(3),))
    with pytest.raises(NotImplementedError, match="strict=False"):
        export(Item(), (ember.randn(3),), strict=False)
    with pytest.raises(ValueError, match="tuple"):
        export(Item(), ember.randn(3))


def test_lstm_export_dynamic_batch_and_gradients():
    ember.manual_seed(0)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.lstm = nn.LSTM(4, 8, batch_first=True)
            self.fc = nn.Linear(8, 10)

        def forward(self, tok):
            out, _ = self.lstm(self.emb(tok))
            return self.fc(out)
    model = LM()
    tok = ember.randint(0, 10, (3, 5))
    # the LSTM is one node: the batch and the length are both dynamic
    ep = export(model, (tok,), dynamic_shapes={"tok": {0: Dim("batch"), 1: Dim("seq")}})
    m = ep.module()
    for shape in ((6, 5), (2, 9)):
        t2 = ember.randint(0, 10, shape)
        np.testing.assert_allclose(m(t2).detach().numpy(), model(t2).detach().numpy(),
                                   rtol=1e-6)
    t2 = ember.randint(0, 10, (6, 5))
    m(t2).sum().backward()  # the module shares the original's parameters
    g = model.fc.weight.grad.numpy().copy()
    model.zero_grad()
    model(t2).sum().backward()
    np.testing.assert_allclose(g, model.fc.weight.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("kind,kw", [("LSTM", {"num_layers": 2}),
                                     ("LSTM", {"batch_first": True, "bidirectional": True}),
                                     ("GRU", {"num_layers": 2}), ("RNN", {"nonlinearity": "relu"})])
def test_recurrent_layer_with_a_dynamic_sequence_length(kind, kw):
    """The recurrent layers are one node in the exported graph (``lstm``...), so a
    sequence length marked dynamic runs at other lengths with torch's answer."""
    ember.manual_seed(0)
    m = getattr(ember.nn, kind)(4, 6, **kw).eval()
    tm = getattr(torch.nn, kind)(4, 6, **kw).eval()
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    seq = 1 if kw.get("batch_first") else 0
    shape = [2, 2, 4]
    shape[seq] = 5
    T = Dim("T", min=2, max=32)
    ep = export(m, (ember.randn(*shape),), dynamic_shapes=({seq: T},))
    assert [n.op for n in ep.graph.nodes].count(kind.lower() if kind != "RNN" else
                                                "rnn_relu") == 1
    for n in (5, 3, 11):
        shape[seq] = n
        x = np.random.RandomState(n).randn(*shape).astype("float32")
        got = ep.module()(ember.tensor(x))
        want = tm(torch.tensor(x))
        np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy(),
                                   rtol=1e-5, atol=1e-5)
