"""The jit interchange zoo, in torch: models, their inputs at a batch size, and archives.

Each entry names a torch model that PyTorch's deployment guides would trace or script
(MLP, CNN with BatchNorm/pooling/dropout, ResNet block, LSTM and GRU language models,
TransformerEncoder with a padding mask, control flow, tuple+dict outputs).
"""
import typing

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.ap = nn.AdaptiveAvgPool2d((2, 2))
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = self.ap(self.pool(F.relu(self.bn(self.c1(x)))))
        return self.fc(self.drop(torch.flatten(x, 1)))


class Block(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(x + self.b2(self.c2(y)))


class LSTMLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = nn.LSTM(8, 12, num_layers=2, batch_first=True)
        self.out = nn.Linear(12, 20)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


class GRULM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = nn.GRU(8, 12)
        self.out = nn.Linear(12, 20)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x, mask):
        return self.enc(x, src_key_padding_mask=mask)


class Control(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.layers = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])

    def forward(self, x, n: int = 2):
        if x.sum() > 0:
            x = self.lin(x)
        else:
            x = -x
        for i in range(n):
            x = torch.tanh(x) + i
        for m in self.layers:
            x = m(x)
        k = 0
        while k < 2:
            x = x * 0.5
            k += 1
        if x.size(0) > 2:
            return x.relu()
        return x


class TupleDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 3)

    def forward(self, x) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        y = self.lin(x)
        return y, {"sum": y.sum(1), "max": y.max(1)[0]}


class Language(nn.Module):
    """Constructs that TorchScript prints in many ways: list/dict/str loops, Optional,
    enumerate, early return, advanced indexing, method calls on self, ModuleDict."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.names: list[str] = ["a", "b"]
        self.scale = 2.0
        self.blocks = nn.ModuleDict({"x": nn.Linear(4, 4), "y": nn.ReLU()})

    def helper(self, x: torch.Tensor, k: int) -> torch.Tensor:
        return x * k

    def forward(self, x: torch.Tensor, xs: list[torch.Tensor], opt: torch.Tensor | None = None,
                d: dict[str, int] | None = None) -> tuple[torch.Tensor, list[int], str]:
        if d is None:
            d = {"a": 1}
        total = torch.zeros_like(x)
        for t in xs:
            total = total + t
        sizes: list[int] = []
        for i, t in enumerate(xs):
            sizes.append(t.size(0) + i)
        if opt is not None:
            total = total + opt
        for _k, v in d.items():
            total = total + v
        acc = 0
        for n in self.names:
            acc += len(n)
        y = self.lin(total).clamp(min=-1.0, max=1.0)
        y = y.view(-1).reshape(x.shape)[:, 1:3]
        y = torch.cat([y, y * self.scale], dim=1)
        y = y.transpose(0, 1).contiguous().t()
        z = self.helper(y, acc)
        for _name, m in self.blocks.items():
            z = m(z)
        s = "n={}".format(len(sizes))  # noqa: UP032 (TorchScript prints torch.format)
        if z.sum() > 1000.0:
            return z, sizes, s
        mx = z.max(dim=1).values.mean()
        w = torch.where(z > mx, z, torch.full_like(z, 0.5))
        w = w.masked_fill(w < 0, 0.0).softmax(-1) + F.gelu(w) + torch.sigmoid(w)
        q = w.unsqueeze(0).squeeze(0).sum(dim=[0], keepdim=True).float()
        idx = torch.argmax(w, dim=1)
        r = w[torch.arange(w.size(0)), idx] if w.dim() == 2 else w
        return q * r.mean() + x.mean(), sizes, s


class Ops(nn.Module):
    """Many operators in one model: resampling, group/layer/batch norm, transposed conv,
    einsum, top-k, sort, gather, masked fill, where, reductions over several dims."""

    def __init__(self):
        super().__init__()
        self.ct = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.gn = nn.GroupNorm(2, 4)
        self.ln = nn.LayerNorm(8)
        self.c1 = nn.Conv1d(4, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm1d(4)
        self.prelu = nn.PReLU()
    def forward(self, x):
        y = F.interpolate(x, scale_factor=2.0, mode="nearest")
        y = F.avg_pool2d(y, 2)
        y = self.gn(self.ct(y))
        y = F.interpolate(y, size=(8, 8), mode="bilinear", align_corners=False)
        a, b = torch.chunk(y, 2, dim=1)
        y = torch.cat([torch.sigmoid(a) * torch.tanh(b), F.gelu(a), F.leaky_relu(b, 0.1),
                       F.hardswish(a), F.elu(b)], 1)
        y = self.ln(y)
        z = y.flatten(2)
        z = self.prelu(self.bn1(self.c1(z[:, :4])))
        w = torch.einsum("ncl,ndl->ncd", z, z) / 8.0
        w = w.softmax(-1) + F.log_softmax(w, dim=1)
        v, i = w.max(dim=-1)
        t = torch.topk(w, 2, dim=-1).values.sum(-1)
        s = torch.sort(w, dim=-1)[0].cumsum(-1)[..., -1]
        g = torch.gather(w, 2, i.unsqueeze(-1)).squeeze(-1)
        m = w.masked_fill(w > 0.5, 0.0).clamp(-1, 1).pow(2).sqrt().exp().log().abs()
        u = torch.stack([v, t, s, g], 0).permute(1, 0, 2).mean(dim=(1, 2))
        out = u + m.mean((1, 2)) + torch.matmul(z.mean(-1), torch.ones(4, 1)).squeeze(1)
        out = out + torch.where(u > 0, u, -u) + F.adaptive_max_pool2d(x, 1).flatten(1).sum(1)
        return out + F.max_pool1d(z, 2).amax((1, 2))


MODELS = {"mlp": MLP, "cnn": CNN, "block": Block, "lstm": LSTMLM, "gru": GRULM,
          "encoder": Encoder, "control": Control, "tupledict": TupleDict, "ops": Ops}
# how each model is captured: torch can't trace TransformerEncoder's mask checks
# (its trace sanity check fails in torch itself); control flow only survives script
MODES = {"mlp": ("trace", "script"), "cnn": ("trace", "script"), "block": ("trace", "script"),
         "lstm": ("trace", "script"), "gru": ("trace", "script"), "encoder": ("script",),
         "control": ("script",), "tupledict": ("trace", "script"), "ops": ("trace", "script")}


def inputs(name, n, seed=0):
    """The model's inputs (torch tensors) at batch size ``n``."""
    g = torch.Generator().manual_seed(seed * 100 + n)
    if name == "mlp":
        return (torch.randn(n, 8, generator=g),)
    if name == "cnn":
        return (torch.randn(n, 3, 8, 8, generator=g),)
    if name == "block":
        return (torch.randn(n, 8, 6, 6, generator=g),)
    if name == "lstm":
        return (torch.randint(0, 20, (n, 5), generator=g),)
    if name == "gru":
        return (torch.randint(0, 20, (5, n), generator=g),)
    if name == "encoder":
        mask = torch.zeros(n, 5, dtype=torch.bool)
        mask[1:, 3:] = True
        return torch.randn(n, 5, 16, generator=g), mask
    if name == "control":
        return (torch.randn(n, 6, generator=g),)
    if name == "tupledict":
        return (torch.randn(n, 5, generator=g),)
    if name == "ops":
        return (torch.randn(n, 4, 4, 4, generator=g),)
    raise KeyError(name)


def capture(name, mode, batch=2):
    """torch.jit.trace or torch.jit.script of a fresh seeded model in eval mode."""
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    with torch.no_grad():  # give BatchNorm non-trivial statistics
        for mod in model.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
    if mode == "script":
        return torch.jit.script(model)
    return torch.jit.trace(model, inputs(name, batch), check_trace=False, strict=False)


def flatten(y):
    """Outputs as a list of arrays in a fixed order (tuples, lists, dicts by key)."""
    if isinstance(y, (tuple, list)):
        return [a for v in y for a in flatten(v)]
    if isinstance(y, dict):
        return [a for k in sorted(y) for a in flatten(y[k])]
    return [y.detach().numpy()]


class Pair(typing.NamedTuple):
    logits: torch.Tensor
    length: int


class TiedLM(nn.Module):
    """Tied input/output embeddings and a NamedTuple result."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, x) -> Pair:
        return Pair(self.out(self.emb(x)), x.size(1))
