"""The zoo of models whose pictures are compared with the real tools' pictures of torch
(``tests/test_viz_zoo.py``, ``tools/viz_pictures.py``). Each model is written once for
``lib``, ember or torch (also ember answering ``import torch`` under ``python -m ember
run``); the weights and inputs are NumPy arrays, so both libraries run the same numbers.
"""
import numpy as np

ZOO = ["mlp", "cnn", "resnet_block", "lstm_lm", "transformer_layer", "custom_function"]


def _resnet_block(lib):
    nn = lib.nn

    class BasicBlock(nn.Module):
        """ResNet's basic block: two 3x3 convolutions with batch norm, the input added
        back before the last ReLU."""

        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + x)
    return BasicBlock(4)


def _lstm_lm(lib):
    nn = lib.nn

    class LanguageModel(nn.Module):
        """Embedding, a 2-layer LSTM, a Linear decoder over the vocabulary."""

        def __init__(self, vocab=20, emb=8, hidden=12):
            super().__init__()
            self.embed = nn.Embedding(vocab, emb)
            self.lstm = nn.LSTM(emb, hidden, num_layers=2, batch_first=True)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, tokens):
            out, _ = self.lstm(self.embed(tokens))
            return self.decoder(out)
    return LanguageModel()


def _custom_function(lib):
    nn = lib.nn

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x ** 2 * g

    class CubeNet(nn.Module):
        """A Linear, a custom autograd.Function, a Linear."""

        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 5)
            self.fc2 = nn.Linear(5, 3)

        def forward(self, x):
            return self.fc2(Cube.apply(self.fc1(x)))
    return CubeNet()


def build(lib, name):
    """The zoo's model ``name`` in ``lib`` (training mode, weights not yet set)."""
    nn = lib.nn
    if name == "mlp":  # the demo's MLP (ember.examples.mnist.build_model("mlp", 8, 8))
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128),
                             nn.ReLU(), nn.Linear(128, 10))
    if name == "cnn":  # the demo's CNN (build_model("cnn", 8, 8))
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 2 * 2, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "resnet_block":
        return _resnet_block(lib)
    if name == "lstm_lm":
        return _lstm_lm(lib)
    if name == "transformer_layer":
        return nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                          batch_first=True)
    if name == "custom_function":
        return _custom_function(lib)
    raise KeyError(name)


def example_input(name):
    """The NumPy input the model ``name`` runs on."""
    rng = np.random.default_rng(1)
    if name in ("mlp", "cnn"):
        return rng.standard_normal((4, 1, 8, 8)).astype(np.float32)
    if name == "resnet_block":
        return rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    if name == "lstm_lm":
        return rng.integers(0, 20, (2, 5))
    if name == "transformer_layer":
        return rng.standard_normal((2, 5, 16)).astype(np.float32)
    return rng.standard_normal((4, 6)).astype(np.float32)


def weights(name):
    """{state_dict key: NumPy array}: the weights both libraries load for ``name``."""
    import torch
    torch.manual_seed(0)
    return {k: v.detach().numpy().copy() for k, v in build(torch, name).state_dict().items()}


def model(lib, name, state):
    """The zoo's model ``name`` in ``lib`` holding the weights ``state``."""
    m = build(lib, name)
    m.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    return m


def loss(lib, name, m):
    """The scalar the backward-graph pictures are drawn for: the model's output summed
    after a square (a graph above the output that every model shares)."""
    x = lib.tensor(example_input(name))
    return (m(x) ** 2).mean()
