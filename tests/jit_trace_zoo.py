"""The jit test zoo's models, written once against a framework namespace (``ember`` or
``torch``) so both build the same architecture; ``copy_weights`` makes them equal."""
import numpy as np


def models(torch):
    """{name: (model factory, example inputs factory(batch))} for ``torch`` or ``ember``."""
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(12, 16)
            self.fc2 = nn.Linear(16, 5)

        def forward(self, x):
            x = x.view(x.size(0), -1)
            return self.fc2(torch.relu(self.fc1(x)))

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.pool = nn.MaxPool2d(2)
            self.drop = nn.Dropout(0.5)
            self.fc = nn.Linear(4 * 4 * 4, 5)

        def forward(self, x):
            x = self.pool(torch.relu(self.bn(self.conv(x))))
            x = self.drop(x)
            return self.fc(x.flatten(1))

    class BasicBlock(nn.Module):
        def __init__(self, c=4):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out = out + x
            return self.relu(out)

    class ResNetish(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 4, 3, padding=1)
            self.layer1 = nn.Sequential(BasicBlock(4))
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            x = self.layer1(self.stem(x))
            x = x.mean((2, 3))
            return self.fc(x)

    class RNNLM(nn.Module):
        def __init__(self, kind):
            super().__init__()
            self.emb = nn.Embedding(20, 6)
            self.rnn = getattr(nn, kind)(6, 5, num_layers=2)
            self.fc = nn.Linear(5, 20)

        def forward(self, x):
            out, hidden = self.rnn(self.emb(x))
            return self.fc(out)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

        def forward(self, x, mask):
            return self.enc(x, src_key_padding_mask=mask)

    class TupleDict(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            y = self.fc(x)
            return (y, torch.sigmoid(y)), {"logits": y, "prob": torch.softmax(y, -1)}

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 4, 7, stride=4, padding=3), nn.ReLU(), nn.MaxPool2d(4),
                nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
            self.classifier = nn.Linear(8, 10)

        def forward(self, x):
            x = self.features(x)
            x = x.reshape(x.shape[0], -1)
            return self.classifier(x)

    class DynamicRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.cells = nn.ModuleList([nn.RNNCell(3, 4), nn.RNNCell(4, 4)])

        def forward(self, x):
            hs = [torch.zeros(x.size(1), 4) for _ in self.cells]
            for t in range(x.size(0)):
                inp = x[t]
                for i, cell in enumerate(self.cells):
                    hs[i] = cell(inp, hs[i])
                    inp = hs[i]
            return hs[-1]

    def tokens(b):
        return (torch.from_numpy(np.random.default_rng(b).integers(0, 20, (7, b))),)

    def enc_inputs(b):
        mask = np.zeros((b, 5), dtype=bool)
        mask[-1, 3:] = True
        x = np.random.default_rng(b).standard_normal((b, 5, 8)).astype(np.float32)
        return (torch.from_numpy(x), torch.from_numpy(mask))

    def randn(*shape):
        def make(b):
            x = np.random.default_rng(b).standard_normal((b,) + shape).astype(np.float32)
            return (torch.from_numpy(x),)
        return make

    return {
        "mlp": (MLP, randn(3, 4)),
        "cnn": (CNN, randn(3, 8, 8)),
        "resnet_block": (ResNetish, randn(3, 8, 8)),
        "lstm_lm": (lambda: RNNLM("LSTM"), tokens),
        "gru_lm": (lambda: RNNLM("GRU"), tokens),
        "transformer": (Encoder, enc_inputs),
        "tuple_dict": (TupleDict, randn(4)),
        "seed_cnn": (SmallCNN, randn(3, 224, 224)),
        "dynamic_rnn": (DynamicRNN, lambda b: (randn(b, 3)(4)[0],)),
    }


def copy_weights(src, dst, framework):
    """Load ``src``'s state_dict into ``dst``, a model of ``framework`` (ember or torch)."""
    sd = {k: framework.from_numpy(np.array(v.detach().numpy(), copy=True))
          for k, v in src.state_dict().items()}
    dst.load_state_dict(sd)
