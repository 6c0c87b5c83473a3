"""Small models trained for a few hundred steps on synthetic data: ember's loss curve
is torch's, given the same initial weights and data (float64)."""
import numpy as np
import pytest
import torch

import ember


def _copy_weights(src_torch, dst_ember):
    dst_ember.load_state_dict({k: ember.tensor(v.detach().numpy())
                               for k, v in src_torch.state_dict().items()})


def _curve(m, model, opt, batches, loss_fn):
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(model(m.tensor(x)), m.tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def _check(build, make_opt, batches, loss_fn, rtol):
    torch.manual_seed(0)
    tmodel = build(torch).double()
    emodel = build(ember).double()
    _copy_weights(tmodel, emodel)
    t = _curve(torch, tmodel, make_opt(torch, tmodel), batches, loss_fn(torch))
    e = _curve(ember, emodel, make_opt(ember, emodel), batches, loss_fn(ember))
    assert t[-1] < t[0] * 0.8, "the model should learn"
    np.testing.assert_allclose(e, t, rtol=rtol, atol=1e-9)


def test_mlp_classifier_curve():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((20, 4))
    batches = []
    for _ in range(300):
        x = rng.standard_normal((32, 20))
        batches.append((x, (x @ w).argmax(1)))

    def build(m):
        return m.nn.Sequential(m.nn.Linear(20, 64), m.nn.ReLU(), m.nn.Linear(64, 32),
                               m.nn.Tanh(), m.nn.Linear(32, 4))
    _check(build, lambda m, model: m.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
           batches, lambda m: m.nn.CrossEntropyLoss(), rtol=1e-6)


def test_cnn_classifier_curve():
    rng = np.random.default_rng(1)
    batches = []
    for _ in range(120):
        x = rng.standard_normal((8, 1, 12, 12))
        y = (x[:, 0, :6].mean((1, 2)) > x[:, 0, 6:].mean((1, 2))).astype(np.int64)
        batches.append((x, y))

    def build(m):
        nn = m.nn
        return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 8, 3),
                             nn.ReLU(), nn.Flatten(), nn.Linear(8 * 3 * 3, 2))
    _check(build, lambda m, model: m.optim.Adam(model.parameters(), lr=1e-2), batches,
           lambda m: m.nn.CrossEntropyLoss(), rtol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_curve(norm_first):
    rng = np.random.default_rng(2)
    batches = []
    for _ in range(150):
        x = rng.standard_normal((4, 10, 16))
        batches.append((x, np.flip(x, 1).copy()))

    def build(m):
        layer = m.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                             batch_first=True, norm_first=norm_first)
        return m.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    _check(build, lambda m, model: m.optim.Adam(model.parameters(), lr=3e-3), batches,
           lambda m: m.nn.MSELoss(), rtol=1e-6)


def test_lstm_classifier_on_variable_length_sequences():
    rng = np.random.default_rng(3)
    batches = []
    for _ in range(120):
        lengths = np.sort(rng.integers(2, 9, 6))[::-1].copy()
        x = np.zeros((6, 8, 5))
        for i, n in enumerate(lengths):
            x[i, :n] = rng.standard_normal((n, 5))
        y = (x.sum((1, 2)) > 0).astype(np.int64)
        batches.append(((x, lengths), y))

    def build(m):
        class Net(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = m.nn.LSTM(5, 12, batch_first=True)
                self.head = m.nn.Linear(12, 2)

            def forward(self, inp):
                x, lengths = inp
                packed = m.nn.utils.rnn.pack_padded_sequence(x, m.tensor(lengths),
                                                             batch_first=True)
                _, (h, _) = self.lstm(packed)
                return self.head(h[-1])
        return Net()

    def curve(m, model, opt):
        losses = []
        loss_fn = m.nn.CrossEntropyLoss()
        for (x, lengths), y in batches:
            opt.zero_grad()
            loss = loss_fn(model((m.tensor(x), lengths)), m.tensor(y))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return np.array(losses)
    torch.manual_seed(0)
    tmodel = build(torch).double()
    emodel = build(ember).double()
    _copy_weights(tmodel, emodel)
    t = curve(torch, tmodel, torch.optim.Adam(tmodel.parameters(), lr=1e-2))
    e = curve(ember, emodel, ember.optim.Adam(emodel.parameters(), lr=1e-2))
    assert t[-20:].mean() < t[:20].mean()
    np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-9)
