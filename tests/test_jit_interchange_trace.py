"""ember trace -> save -> real torch.jit.load: the same outputs as ember's eager model
on the example and at another batch size; parameters bit for bit, both ways."""
import sys

import numpy as np
import pytest
import torch

import ember
import ember.jit as jit

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from jit_trace_zoo import models  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ZOO = models(ember)
ZOO_T = models(torch)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [z for y in x for z in _flat(y)]
    if isinstance(x, dict):
        return [z for y in x.values() for z in _flat(y)]
    return [x]


def _to_torch(inputs):
    return tuple(torch.from_numpy(np.array(x.numpy(), copy=True)) for x in inputs)


def _assert_same(got, ref, tol):
    got, ref = _flat(got), _flat(ref)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        a = a.detach().numpy()
        b = b.detach().numpy()
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """{name: (eager ember model, path of its saved trace)} for the whole zoo."""
    out = {}
    d = tmp_path_factory.mktemp("traces")
    for name, (make, inputs) in ZOO.items():
        ember.manual_seed(0)
        m = make().eval()
        traced = jit.trace(m, inputs(2), strict=False)
        path = d / f"{name}.pt"
        traced.save(str(path))
        out[name] = (m, traced, path)
    return out


@pytest.mark.parametrize("name", sorted(ZOO))
def test_torch_loads_embers_trace_with_the_same_outputs(saved, name):
    m, traced, path = saved[name]
    loaded = torch.jit.load(str(path))
    inputs = ZOO[name][1]
    for batch in (2, 3):                      # the example's batch size, and another
        x = inputs(batch)
        ref = m(*x)
        with torch.no_grad():
            got = loaded(*_to_torch(x))
        _assert_same(got, ref, 2e-5)
        _assert_same(traced(*x), ref, 1e-6)   # what runs before save


@pytest.mark.parametrize("name", sorted(ZOO))
def test_state_dict_bit_equal_after_torch_load_and_back(saved, name, tmp_path):
    m, traced, path = saved[name]
    loaded = torch.jit.load(str(path))
    sd_e, sd_t = m.state_dict(), loaded.state_dict()
    assert list(sd_e) == list(sd_t)
    for k in sd_e:
        assert np.array_equal(sd_e[k].numpy(), sd_t[k].numpy()), k
    # ember -> torch -> ember keeps parameters bit for bit and the code runs in ember
    back = tmp_path / "back.pt"
    torch.jit.save(loaded, str(back))
    again = jit.load(str(back))
    for k, v in again.state_dict().items():
        assert np.array_equal(v.numpy(), sd_e[k].numpy()), k
    x = ZOO[name][1](3)
    _assert_same(again(*x), m(*x), 2e-5)


def test_torch_reads_the_code_ember_wrote(saved):
    _, traced, path = saved["mlp"]
    loaded = torch.jit.load(str(path))
    # as PyTorch writes a trace: the root calls each submodule's own forward
    assert "(fc1).forward(" in loaded.code and "torch.view" in loaded.code
    assert "torch.linear" in loaded.fc1.code
    assert "torch.linear(" in traced.fc1.code and "x.size(0)" in traced.code


def test_torch_trace_of_the_same_weights_agrees(saved):
    """The seed example: torch.jit.trace on a CNN and ember's trace give one answer."""
    m, traced, _ = saved["seed_cnn"]
    tm = ZOO_T["seed_cnn"][0]().eval()
    tm.load_state_dict({k: torch.from_numpy(np.array(v.numpy(), copy=True))
                        for k, v in m.state_dict().items()})
    t_traced = torch.jit.trace(tm, torch.randn(1, 3, 224, 224), check_trace=False)
    x = ZOO["seed_cnn"][1](2)
    with torch.no_grad():
        ref = t_traced(*_to_torch(x))
    _assert_same(traced(*x), ref, 2e-5)


# ----- one function per op family: traced, saved, run by torch at another batch size ----
def _ops():
    F = ember.nn.functional
    return {
        "cat_transpose": lambda x: ember.cat([x, x.transpose(0, 1).transpose(0, 1)], 1),
        "stack": lambda x: ember.stack([x, x * 2], 0).sum(0),
        "chunk_split": lambda x: x.chunk(2, 1)[0] + x.split(2, 1)[1],
        "matmul": lambda x: x @ x.transpose(-1, -2),
        "softmax": lambda x: F.softmax(x, -1) + F.log_softmax(x, 1),
        "activations": lambda x: F.gelu(x) + F.silu(x) + ember.tanh(x) + F.leaky_relu(x),
        "reductions": lambda x: x.mean(1, keepdim=True) + x.sum(-1, keepdim=True) + x.mean(),
        "max_dim": lambda x: x.max(1)[0] + x.amax(1) + x.argmax(1).float(),
        "index": lambda x: x[:, 0] + x[..., 1] + x[1:, 2].sum(),
        "none_index": lambda x: x[None, :, 1:3].squeeze(0),
        "unsqueeze": lambda x: x.unsqueeze(1).squeeze(1) + x.unsqueeze(-1)[..., 0],
        "clamp_pow": lambda x: x.clamp(-0.5, 0.5) + x.clamp(min=0) + x.abs().exp() + x.pow(2),
        "casts": lambda x: (x > 0).float() * x + x.to(ember.float64).float(),
        "expand": lambda x: x[:, :1].expand(-1, 4) + x[:, :1].expand_as(x),
        "where_mask": lambda x: ember.where(x > 0, x, ember.zeros_like(x)) +
        x.masked_fill(x < 0, 1.0),
        "sub_div": lambda x: (1 - x) / (x.abs() + 1) - x / 2 + 2 / (x.abs() + 1),
        "layer_norm": lambda x: F.layer_norm(x, (4,)),
        "repeat_pad": lambda x: x.repeat(1, 2)[:, :4] + F.pad(x, (1, 1))[:, 1:5],
        "permute": lambda x: x.permute(1, 0).reshape(-1),
        "factories": lambda x: x + ember.arange(x.size(1)) + ember.ones(x.size(0), 4) +
        ember.full((x.size(0), 4), 2.0),
        "normalize": lambda x: F.normalize(x, dim=1),
        "flip_cumsum": lambda x: x.flip(0).cumsum(1),
    }


OPS = _ops()


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_families_round_trip(name, tmp_path):
    fn = OPS[name]

    class M(ember.nn.Module):
        def forward(self, x):
            return fn(x)

    traced = jit.trace(M(), ember.randn(3, 4))
    path = str(tmp_path / "m.pt")
    traced.save(path)
    x = ember.randn(5, 4)
    ref = fn(x)
    with torch.no_grad():
        _assert_same(torch.jit.load(path)(*_to_torch((x,))), ref, 1e-5)
    _assert_same(jit.load(path)(x), ref, 1e-6)


def test_nested_inputs_and_a_dict_output_through_torch(tmp_path):
    class D(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = ember.nn.Linear(3, 2)

        def forward(self, pair, d):
            a, b = pair
            return {"y": self.fc(a) + d["k"], "z": b.sum(0)}

    m = D()
    traced = jit.trace(m, ((ember.randn(2, 3), ember.randn(2, 3)), {"k": ember.randn(2, 2)}),
                       strict=False)
    assert "pair: Tuple[Tensor, Tensor]" in traced.code and "d: Dict[str, Tensor]" in traced.code
    path = str(tmp_path / "d.pt")
    traced.save(path)
    new = ((ember.randn(5, 3), ember.randn(5, 3)), {"k": ember.randn(5, 2)})
    t_new = (_to_torch(new[0]), {"k": _to_torch((new[1]["k"],))[0]})
    with torch.no_grad():
        got = torch.jit.load(path)(*t_new)
    assert set(got) == {"y", "z"}
    _assert_same(got, m(*new), 1e-5)


def test_batch_norm_in_training_mode_updates_the_same_statistics(tmp_path):
    m = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3), ember.nn.BatchNorm2d(4)).train()
    traced = jit.trace(m, ember.randn(2, 3, 6, 6))
    assert "torch.batch_norm(" in traced._modules["1"].code
    path = str(tmp_path / "bn.pt")
    traced.save(path)
    loaded = torch.jit.load(path)
    x = ember.randn(5, 3, 6, 6)
    _assert_same(loaded(*_to_torch((x,))), m(x), 1e-5)    # one update on each side
    for k in ("1.running_mean", "1.running_var"):
        np.testing.assert_allclose(loaded.state_dict()[k].numpy(), m.state_dict()[k].numpy(),
                                   rtol=1e-6, atol=1e-7)
