"""The model zoo of the ONNX tests, in ember (each with a maker of inputs by batch size
and sequence length)."""
import ember
from ember import nn


class ResBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x):
        y = ember.relu(self.bn1(self.conv1(x)))
        return ember.relu(self.bn2(self.conv2(y)) + x)


class LM(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = getattr(nn, kind)(8, 12, num_layers=2, batch_first=True)
        self.head = nn.Linear(12, 20)

    def forward(self, tokens):
        out, _ = self.rnn(self.emb(tokens))
        return self.head(out)


class TupleDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(5, 3)

    def forward(self, x):
        h = self.a(x)
        return h.sum(1), {"probs": ember.softmax(h, -1)}


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x, mask):
        return self.enc(x, src_key_padding_mask=mask)


def _mask(b, t):
    m = ember.zeros(b, t, dtype=ember.bool)
    m[0, -1] = True
    return m


def zoo():
    """{name: (model, make(batch, seq) -> args, dynamic axes per input)}"""
    ember.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 6, 3), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Dropout(0.3), nn.Flatten(), nn.Linear(54, 5))
    batch = {0: "batch"}
    both = {0: "batch", 1: "seq"}
    return {
        "mlp": (nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)),
                lambda b, t: (ember.randn(b, 6),), [batch]),
        "cnn": (cnn, lambda b, t: (ember.randn(b, 3, 8, 8),), [batch]),
        "resblock": (ResBlock(), lambda b, t: (ember.randn(b, 4, 6, 6),), [batch]),
        "lstm_lm": (LM("LSTM"), lambda b, t: (ember.randint(0, 20, (b, t)),), [both]),
        "gru_lm": (LM("GRU"), lambda b, t: (ember.randint(0, 20, (b, t)),), [both]),
        "transformer": (Encoder(), lambda b, t: (ember.randn(b, t, 16), _mask(b, t)),
                        [both, both]),
        "tuple_dict": (TupleDict(), lambda b, t: (ember.randn(b, 5),), [batch]),
        # MobileNetV3's gates: HardSigmoid with PyTorch's alpha 1/6, and hardswish
        "hard_gates": (nn.Sequential(nn.Linear(6, 8), nn.Hardsigmoid(), nn.Linear(8, 8),
                                     nn.Hardswish(), nn.Linear(8, 3)),
                       lambda b, t: (ember.randn(b, 6) * 4,), [batch]),
    }
