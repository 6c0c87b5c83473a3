"""jit.script: Python source -> TorchScript, run by ember, loaded by real torch.jit.load."""

import math
import typing

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember import jit


def _np(v):
    return v.detach().numpy() if isinstance(v, ember.Tensor) else v


def _to_torch(v):
    if isinstance(v, ember.Tensor):
        return torch.from_numpy(np.array(v.detach().numpy()))
    if isinstance(v, (tuple, list)):
        return type(v)(_to_torch(x) for x in v)
    if isinstance(v, dict):
        return {k: _to_torch(x) for k, x in v.items()}
    return v


def _same(a, b, tol=1e-5):
    if isinstance(b, torch.Tensor):
        np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=tol, atol=tol)
    elif isinstance(b, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y, tol)
    elif isinstance(b, dict):
        assert set(a) == set(b)
        for k in b:
            _same(a[k], b[k], tol)
    else:
        assert a == b


def _check(model, inputs, tmp_path):
    """Scripted == eager on every input, and torch.jit.load of the saved archive agrees."""
    model.eval()
    sm = jit.script(model)
    path = str(tmp_path / "m.pt")
    sm.save(path)
    loaded = torch.jit.load(path)
    for args in inputs:
        eager = model(*args)
        ours = sm(*args)
        _same(ours, _to_torch(eager))
        theirs = loaded(*[_to_torch(a) for a in args])
        _same(eager, theirs)
    return sm, loaded


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv1(x))))
        x = self.drop(x)
        return self.fc(torch_flatten(x))


def torch_flatten(x):
    return x.flatten(1)


def test_seed_cnn_scripts_saves_and_loads_in_torch(tmp_path):
    ember.manual_seed(0)
    m = SmallCNN()
    _check(m, [(ember.randn(2, 3, 8, 8),), (ember.randn(5, 3, 8, 8),)], tmp_path)


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)])
        self.repeats = 2

    def forward(self, x, scale: float = 1.0):
        if x.sum() > 0:
            y = self.a(x)
        else:
            y = self.b(x) * 2
        for blk in self.blocks:
            y = blk(y)
        for i in range(self.repeats):
            y = y + i * scale
        n = 0
        while n < 3 and y.abs().max() > 0.001:
            y = y / 2
            n += 1
        if y.mean() > 100:
            return y * 0
        return y


def test_control_flow_follows_the_branch(tmp_path):
    ember.manual_seed(1)
    m = Branchy()
    pos = ember.ones(3, 4)
    neg = -ember.ones(2, 4)
    sm, loaded = _check(m, [(pos,), (neg,), (pos, 0.5)], tmp_path)
    # the two branches really differ, and both runtimes took the right one
    assert not np.allclose(_np(sm(pos)[:2]), _np(sm(-pos)[:2]))
    # printed in PyTorch's SSA form: the container's modules read once before the
    # unrolled loop, the loop's carried value renamed
    assert "if bool(" in sm.code and '  _2 = getattr(blocks, "2")\n' in sm.code
    assert "  for i in range(repeats):\n    y3 = torch.add(y3, " in sm.code


class DynamicRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.cells = nn.ModuleList([nn.RNNCell(3, 6), nn.RNNCell(6, 6)])

    def forward(self, x):
        h: list[ember.Tensor] = []
        for _ in self.cells:
            h.append(ember.zeros(x.size(1), 6))
        outs = []
        for t in range(x.size(0)):
            inp = x[t]
            i = 0
            for cell in self.cells:
                h[i] = cell(inp, h[i])
                inp = h[i]
                i += 1
            outs.append(inp)
        return ember.stack(outs, 0)


def test_dynamic_rnn_over_module_list(tmp_path):
    ember.manual_seed(2)
    _check(DynamicRNN(), [(ember.randn(5, 2, 3),), (ember.randn(3, 4, 3),)], tmp_path)


class LM(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = getattr(nn, kind)(8, 12, 2, batch_first=True)
        self.out = nn.Linear(12, 20)

    def forward(self, tok):
        y, _ = self.rnn(self.emb(tok))
        return F.log_softmax(self.out(y), dim=-1)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_language_models(kind, tmp_path):
    ember.manual_seed(3)
    _check(LM(kind), [(ember.randint(0, 20, (2, 7)),), (ember.randint(0, 20, (5, 3)),)],
           tmp_path)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))

    def forward(self, x):
        return self.net(x)


class ResBlock(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = F.relu(self.b1(self.c1(x)))
        out = self.b2(self.c2(out))
        return F.relu(out + x)


class Outputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x) -> tuple[ember.Tensor, dict[str, ember.Tensor]]:
        y = self.fc(x)
        return y, {"logits": y, "probs": F.softmax(y, dim=1)}


@pytest.mark.parametrize("make,shape", [(MLP, (2, 6)), (ResBlock, (2, 4, 5, 5)),
                                        (Outputs, (2, 3))])
def test_zoo_round_trips_through_torch(make, shape, tmp_path):
    ember.manual_seed(4)
    big = (7,) + shape[1:]
    _check(make(), [(ember.randn(*shape),), (ember.randn(*big),)], tmp_path)


# ----- values, annotations, refinement ----------------------------------------------------
class Values(nn.Module):
    __constants__ = ["k"]
    scale: jit.Final[float]

    def __init__(self):
        super().__init__()
        self.k = 3
        self.scale = 0.5
        self.names = ["a", "b"]

    def forward(self, x, mask: ember.Tensor | None = None, n: int = 2):
        if mask is not None:
            x = x * mask
        sizes: list[int] = [x.size(0), x.size(1)]
        d: dict[str, int] = {}
        d["rows"] = sizes[0]
        acc = ember.jit.annotate(list[float], [])
        for i, s in enumerate(sizes):
            acc.append(float(i * s) * self.scale)
        total = 0.0
        for v in acc:
            total += v
        for j in range(1, 7, 2):
            total = total + j
        t = (x.sum(), self.k)
        label = self.names[0] if n > 1 else self.names[1]
        return x * total + t[1], d["rows"], label


def test_values_annotations_and_refinement(tmp_path):
    m = Values()
    x = ember.randn(2, 3)
    mask = ember.ones(2, 3) * 2
    sm, loaded = _check(m, [(x,), (x, mask), (x, None, 1)], tmp_path)
    assert "unchecked_cast(Tensor, mask)" in sm.code


def test_script_function_and_is_scripting():
    def clip_sum(x, lo: float, hi: float) -> ember.Tensor:
        y = x.clamp(lo, hi)
        if jit.is_scripting():
            return y.sum() + 1
        return y.sum()

    f = jit.script(clip_sum)
    x = ember.randn(4)
    assert jit.is_scripting() is False
    np.testing.assert_allclose(_np(f(x, -0.5, 0.5)), _np(clip_sum(x, -0.5, 0.5)) + 1,
                               rtol=1e-6)
    assert "torch.clamp" in f.code


class WithDecorators(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    @jit.unused
    def debug(self, x) -> ember.Tensor:
        return x.numpy()

    @jit.export
    def doubled(self, x):
        return self.fc(x) * 2

    @jit.ignore
    def python_side(self, x):
        return x + 100

    def forward(self, x, flag: bool = False):
        if flag:
            return self.debug(x)
        return self.fc(x) + self.python_side(x)


def test_unused_export_ignore():
    m = WithDecorators()
    sm = jit.script(m)
    x = ember.randn(3, 2)
    _same(sm(x), _to_torch(m(x)))
    _same(sm.doubled(x), _to_torch(m.fc(x) * 2))
    with pytest.raises(Exception, match="annotated to be ignored"):
        sm(x, True)
    assert "doubled" in sm._jit_class.method_sources


# ----- errors name the construct, the file and the line -----------------------------------
def _bad_lambda(x):
    f = lambda t: t + 1  # noqa: E731
    return f(x)


def _bad_try(x):
    try:
        y = x + 1
    except RuntimeError:
        y = x
    return y


def _bad_with(x):
    with ember.no_grad():
        y = x * 2
    return y


def _bad_args(*xs):
    return xs[0]


_G = 1


def _bad_global(x):
    global _G
    return x + _G


def _bad_generator(x):
    return sum(t for t in [x, x])


class _Helper:
    def run(self, x):
        return x


def _bad_class(x):
    return _Helper().run(x)


def _bad_object(x):
    return np.exp(x)


@pytest.mark.parametrize("fn,construct", [
    (_bad_lambda, "lambda"), (_bad_try, "try"), (_bad_with, "with"), (_bad_args, "*args"),
    (_bad_global, "global"), (_bad_generator, "generator"), (_bad_class, "Python class"),
    (_bad_object, "Python object"),
])
def test_unsupported_python_raises_with_file_and_line(fn, construct):
    import inspect
    with pytest.raises(jit.FrontendError) as info:
        jit.script(fn)
    msg = str(info.value)
    assert construct in msg
    assert "test_jit_script.py" in msg
    first = inspect.getsourcelines(fn)[1]
    lines = [int(t) for t in msg.replace(",", " ").split() if t.isdigit()]
    assert any(first <= n <= first + 6 for n in lines), msg
    assert isinstance(info.value, RuntimeError)


def test_type_errors_are_frontend_errors():
    def bad(x, n: int):
        y = n
        y = x
        return y
    with pytest.raises(jit.FrontendError, match="previously had type int"):
        jit.script(bad)


class Refined(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, y: ember.Tensor | None = None):
        x = x.clone()
        z = x if y is None else x + y
        out: ember.Tensor | None = None
        if x.sum() > -100:
            out = self.fc(z)
        if out is None:
            return z
        a = [v * 2 for v in [x, z]]
        x[0, 1:2] = 3.0
        return out + a[1] + x[..., 0:1] + x[:, None, 1].sum()


def test_optional_refinement_comprehension_and_item_assignment(tmp_path):
    ember.manual_seed(5)
    x = ember.randn(2, 3)
    sm, _ = _check(Refined(), [(x,), (x, ember.randn(2, 3)), (ember.randn(4, 3),)], tmp_path)
    assert "unchecked_cast(Tensor, out0)" in sm.code   # ``out`` after the if: out0


def test_binop_on_optional_is_a_frontend_error():
    def f(x, y: ember.Tensor | None):
        return x + y
    with pytest.raises(jit.FrontendError, match="Optional"):
        jit.script(f)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(8, 3)

    def forward(self, x, pad):
        return self.head(self.enc(x, src_key_padding_mask=pad))


def test_transformer_encoder_with_padding_mask(tmp_path):
    ember.manual_seed(6)
    pad2 = ember.tensor([[False] * 5, [False, False, False, True, True]])
    pad3 = ember.tensor([[False] * 4, [False, True, True, True], [False, False, True, True]])
    inputs = [(ember.randn(2, 5, 8), pad2), (ember.randn(3, 4, 8), pad3)]
    # inference (PyTorch's nested-tensor numbers: padded positions are 0 before the head)
    with ember.no_grad(), torch.no_grad():
        _check(Encoder(), inputs, tmp_path)
    # with gradients: the composite path, every position computed
    _check(Encoder(), inputs, tmp_path)


class Heads(nn.Module):
    scale: jit.Final[float]

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})
        self.bn = nn.BatchNorm1d(4)
        self.scale = 0.25

    def forward(self, x: "ember.Tensor") -> typing.Dict[str, ember.Tensor]:  # noqa: UP006
        x = self.bn(x)
        out: typing.Dict[str, ember.Tensor] = {}  # noqa: UP006
        for name, head in self.heads.items():
            out[name] = head(x) * self.scale
        for key in self.heads:
            out[key + "_sum"] = out[key].sum(dim=1)
        sizes: typing.List[int] = []  # noqa: UP006
        for h in self.heads.values():
            sizes.append(h.out_features if False else 2)
        picked: ember.Tensor | None = None  # noqa: UP007
        if len(sizes) == 2:
            picked = out["a"]
        if picked is not None:
            out["picked"] = picked
        return out


def test_module_dict_typing_spellings_final_and_training_batchnorm(tmp_path):
    ember.manual_seed(7)
    m = Heads()
    _check(m, [(ember.randn(3, 4),), (ember.randn(6, 4),)], tmp_path)
    sm = jit.script(m)
    assert "0.25" in sm.code and "self.scale" not in sm.code  # Final is a constant
    # training mode: batch statistics, running stats and the counter updated in place
    m2 = Heads().train()
    sm2 = jit.script(m2)
    x = ember.randn(5, 4)
    y = sm2(x)
    assert int(m2.bn.num_batches_tracked) == 1  # shared buffers: the eager module sees it
    np.testing.assert_allclose(_np(y["a"]), _np(m2(x)["a"]), rtol=1e-5, atol=1e-6)


def test_ignored_method_module_refuses_to_save(tmp_path):
    sm = jit.script(WithDecorators())
    with pytest.raises(RuntimeError, match="python_side"):
        sm.save(str(tmp_path / "x.pt"))
    with pytest.raises(RuntimeError, match="python_side"):
        jit.save(sm, str(tmp_path / "y.pt"))


def helper(x, k: int = 2, scale: float = 1.0):
    return F.max_pool2d(x, k) * scale

class Many(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.a = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])
        self.b = nn.ModuleList([nn.ReLU(), nn.Tanh()])
        self.d = 4

    def extra(self, x, w: float = 2.0):
        return x * w

    def forward(self, x, mask):
        x = helper(self.conv(x), k=2, scale=0.5)
        x = x.view(x.size(0), -1)
        x = x.reshape(x.shape[0], 4, -1).mean(-1)
        assert x.dim() == 2, "rank 2 expected"
        if x.size(1) != self.d:
            raise ValueError(f"bad width {x.size(1)}")
        for i, layer in enumerate(self.a):
            x = layer(x) + i
        for l1, l2 in zip(self.a, self.b):
            x = l2(l1(x))
        vals, idx = x.max(dim=1)
        z = _zeros_like(x)
        m = x.masked_fill(~mask & (x > 0), float("-inf"))
        m = _where(mask, m, z)
        s = x.size()
        r = x[:, -1] + x[:, 0:2].sum(1) + x ** 0.5 if x.min() > 0 else x[:, -1]
        q = ember.cat([x, -x], dim=1).float() / math.sqrt(self.d)
        n = self.d // 3 + len(s)
        y = ember.zeros(x.size(0), 2, dtype=ember.float32) + n
        return vals, idx, m, r, q, y, self.extra(x), self.extra(x, w=3.0)

def _zeros_like(x):
    return ember.zeros_like(x)

def _where(c, a, b):
    return ember.where(c, a, b)


def test_many_constructs_against_torch(tmp_path):
    ember.manual_seed(8)
    mask = ember.tensor([[True, False, True, False]] * 3)
    mask5 = ember.tensor([[False, False, True, True]] * 5)
    sm, _ = _check(Many(), [(ember.randn(3, 2, 4, 4), mask), (ember.randn(5, 2, 4, 4), mask5)],
                   tmp_path)
    assert "torch.max_pool2d(" in sm.code or "helper" in sm.code


# ----- the interchange zoo's own torch source, scripted by ember and by torch -------------
def _zoo_in_ember():
    """tests/jit_zoo.py's classes with ``torch`` bound to ember: the same source text (and
    line numbers, so jit.script reads it), scripted by both frameworks."""
    import os
    path = os.path.join(os.path.dirname(__file__), "jit_zoo.py")
    with open(path) as f:
        text = f.read()
    text = (text.replace("import torch.nn.functional as F", "F = __ember__.nn.functional")
            .replace("import torch.nn as nn", "nn = __ember__.nn")
            .replace("import torch\n", "torch = __ember__\n"))
    ns = {"__ember__": ember, "__name__": "jit_zoo_ember"}
    exec(compile(text, path, "exec"), ns)  # noqa: S102 (our own test source)
    return ns


def _zoo_pair(name):
    import jit_zoo
    ember.manual_seed(9)
    ours = _zoo_in_ember()[jit_zoo.MODELS[name].__name__ if name in jit_zoo.MODELS
                           else name]().eval()
    theirs = (jit_zoo.MODELS[name] if name in jit_zoo.MODELS else getattr(jit_zoo, name))()
    theirs.load_state_dict({k: torch.from_numpy(np.array(v.numpy()))
                            for k, v in ours.state_dict().items()})
    return ours, theirs.eval()


@pytest.mark.parametrize("name", ["mlp", "cnn", "block", "lstm", "gru", "encoder", "control",
                                  "tupledict"])
def test_zoo_source_scripted_by_ember_matches_torch_script(name, tmp_path):
    import jit_zoo
    ours, theirs = _zoo_pair(name)
    sm = jit.script(ours)
    sm.save(str(tmp_path / "e.pt"))
    loaded = torch.jit.load(str(tmp_path / "e.pt"))
    ts = torch.jit.script(theirs)
    for n in (2, 3):
        args = jit_zoo.inputs(name, n)
        eargs = [ember.tensor(a.numpy()) for a in args]
        with torch.no_grad(), ember.no_grad():
            want = jit_zoo.flatten(ts(*args))
            got = [_np(v) for v in _flatten(sm(*eargs))]
            back = jit_zoo.flatten(loaded(*args))
        for a, b, c in zip(got, want, back):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(c, b, rtol=1e-4, atol=1e-5)


def _flatten(y):
    if isinstance(y, (tuple, list)):
        return [a for v in y for a in _flatten(v)]
    if isinstance(y, dict):
        return [a for k in sorted(y) for a in _flatten(y[k])]
    return [y]


def test_zoo_language_constructs_match_torch_script(tmp_path):
    ours, theirs = _zoo_pair("Language")
    sm = jit.script(ours)
    sm.save(str(tmp_path / "l.pt"))
    loaded = torch.jit.load(str(tmp_path / "l.pt"))
    ts = torch.jit.script(theirs)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 4, generator=g)
    xs = [torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)]
    opt = torch.randn(3, 4, generator=g)
    for args in ((x, xs), (x, xs, opt, {"a": 2, "b": 3})):
        eargs = [ember.tensor(a.numpy()) if isinstance(a, torch.Tensor) else
                 [ember.tensor(t.numpy()) for t in a] if isinstance(a, list) else a
                 for a in args]
        want = ts(*args)
        got = sm(*eargs)
        back = loaded(*args)
        np.testing.assert_allclose(_np(got[0]), want[0].detach().numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(back[0].detach().numpy(), want[0].detach().numpy(),
                                   rtol=1e-4, atol=1e-5)
        assert got[1:] == want[1:] == back[1:]


class LayerZoo(nn.Module):
    """One of each templated layer beyond the zoo's."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)
        self.gn = nn.GroupNorm(2, 4)
        self.pad = nn.ZeroPad2d((1, 0, 2, 1))
        self.acts = nn.Sequential(nn.PReLU(), nn.Softplus(beta=2.0), nn.Hardswish(),
                                  nn.ELU(0.5), nn.CELU(0.7), nn.SELU(), nn.Mish(),
                                  nn.Hardsigmoid(), nn.LeakyReLU(0.2), nn.ReLU6(),
                                  nn.Hardtanh(-0.5, 0.5), nn.LogSigmoid(), nn.Softsign(),
                                  nn.Threshold(0.1, -1.0), nn.GELU("tanh"), nn.SiLU())
        self.shuffle = nn.PixelShuffle(2)
        self.flat = nn.Flatten(1)
        self.unflat = nn.Unflatten(1, (1, -1))
        self.glu = nn.GLU(-1)

    def forward(self, x):
        y = self.acts(self.pad(self.gn(self.up(x))))
        y = self.unflat(self.flat(self.shuffle(y)))
        return self.glu(y)


def test_more_layer_templates(tmp_path):
    ember.manual_seed(10)
    _check(LayerZoo(), [(ember.randn(2, 3, 4, 4),), (ember.randn(3, 3, 4, 4),)], tmp_path)


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 0
        self.register_buffer("acc", ember.zeros(3))

    def forward(self, x):
        self.count += 1
        self.acc += x.sum(0)
        h: list[int] = [1, 2]
        h[0] += 5
        y = x.clone()
        y[0] *= 2
        k = 0
        while k < 3 and self.count > 0:
            k += 1
        return y * self.count + h[0] + k


def test_augmented_assignment_to_attributes_items_and_state(tmp_path):
    m = Counter()
    sm = jit.script(m)
    x = ember.ones(2, 3)
    first, second = _np(sm(x)), _np(sm(x))
    np.testing.assert_allclose(first, [[11.0] * 3, [10.0] * 3])
    np.testing.assert_allclose(second, [[13.0] * 3, [11.0] * 3])
    assert sm.count == 2
    np.testing.assert_allclose(_np(m.acc), [4.0] * 3)  # buffers are shared, in place
    sm.save(str(tmp_path / "c.pt"))
    loaded = torch.jit.load(str(tmp_path / "c.pt"))
    np.testing.assert_allclose(loaded(torch.ones(2, 3)).numpy(), [[15.0] * 3, [12.0] * 3])


class UpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.conv = nn.Conv2d(2, 2, 1)

    def forward(self, x):
        y = self.conv(self.up(x))
        z = F.interpolate(x, size=(6, 6), mode="nearest")
        return y[:, :, :6, :6] + z + F.interpolate(x, scale_factor=3.0)[:, :, :6, :6]


def test_upsample_and_interpolate(tmp_path):
    ember.manual_seed(11)
    _check(UpNet(), [(ember.randn(1, 2, 3, 3),), (ember.randn(2, 2, 3, 3),)], tmp_path)


def test_missing_return_on_some_path_is_an_error():
    def f(x):
        if x.sum() > 0:
            return x
    with pytest.raises(jit.FrontendError, match="does not return along all paths"):
        jit.script(f)


@jit.script
def _scaled(x, k: float = 2.0):
    return x * k


class UsesScriptFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return _scaled(self.fc(x), k=3.0) + _scaled(x)


def test_calling_a_script_function(tmp_path):
    assert isinstance(_scaled, jit.ScriptFunction)
    _check(UsesScriptFunction(), [(ember.randn(2, 3),), (ember.randn(4, 3),)], tmp_path)


class Wrapper(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(self.inner(x, 1)) + self.inner.doubled(x)


def test_already_scripted_and_loaded_submodules(tmp_path):
    ember.manual_seed(12)
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.k = 3

        def forward(self, x, n: int):
            return self.fc(x) * (n + self.k)

        @jit.export
        def doubled(self, x):
            return x * 2

    scripted = jit.script(Inner())
    _check(Wrapper(scripted), [(ember.randn(2, 2),), (ember.randn(5, 2),)], tmp_path)
    scripted.save(str(tmp_path / "inner.pt"))
    loaded = jit.load(str(tmp_path / "inner.pt"))
    _check(Wrapper(loaded), [(ember.randn(3, 2),)], tmp_path)
