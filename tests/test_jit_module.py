"""create_script_module (what jit.trace / jit.script build on), naming, sharing, and
archives that ember writes from scratch loading in torch.jit.load."""
import io
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import ember
from ember.jit._module import create_script_function, create_script_module, qualified_name

LINEAR_FWD = """
def forward(self, input: Tensor) -> Tensor:
  weight = self.weight
  bias = self.bias
  return torch.linear(input, weight, bias)
"""


class Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = ember.nn.Linear(4, 8)
        self.fc2 = ember.nn.Linear(8, 3)
        self.register_buffer("shift", ember.arange(3.0))
        self.scale = 0.5
        self.sizes = [2, 3]


NET_FWD = """
def forward(self, x: Tensor, n: int=2) -> Tuple[Tensor, List[Tensor]]:
  h = __torch__.helpers.act((self.fc1).forward(x, ))
  if bool(torch.gt(torch.sum(h), 0)):
    h = torch.mul(h, self.scale)
  else:
    h = torch.neg(h)
  outs = annotate(List[int], [])
  for i in range(n):
    h = torch.add(h, CONSTANTS.c0)
    _0 = torch.append(outs, torch.size(h, 0) * i + self.sizes[1])
  k = 0
  while torch.lt(k, 2):
    k = torch.add(k, 1)
  y = torch.add(self.fc2.forward(h), self.shift, alpha=k)
  return (y, [torch.mul(y, float(len(outs)))])
"""
HELPERS = {"__torch__.helpers.act": """
def act(x: Tensor) -> Tensor:
  return torch.relu(x)
"""}


def _net():
    ember.manual_seed(0)
    net = Net()
    const = ember.full((8,), 0.25)
    sm = create_script_module(
        net, {"": {"forward": NET_FWD}, "fc1": {"forward": LINEAR_FWD},
              "fc2": {"forward": LINEAR_FWD}},
        functions=HELPERS, attributes={"": {"scale": None, "sizes": "List[int]"}},
        constants=[const])
    return net, sm


def _eager(net, x, n=2):
    h = ember.relu(net.fc1(x))
    h = h * net.scale if float(h.sum()) > 0 else -h
    for _ in range(n):
        h = h + 0.25
    y = net.fc2(h) + 2 * net.shift
    return y, [y * float(n)]


def test_constructor_runs_the_source_and_shares_state():
    net, sm = _net()
    x = ember.randn(5, 4)
    y, (z,) = sm(x)
    ey, (ez,) = _eager(net, x)
    np.testing.assert_allclose(y.detach().numpy(), ey.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(z.detach().numpy(), ez.detach().numpy(), rtol=1e-6)
    assert sm.fc1.weight is net.fc1.weight and sm.shift is net.shift
    with ember.no_grad():
        net.fc2.bias.add_(1.0)  # shared, not copied
    np.testing.assert_allclose(sm(x)[0].detach().numpy(), y.detach().numpy() + 1, rtol=1e-5)
    assert [k for k, _ in sm.named_parameters()] == [k for k, _ in net.named_parameters()]
    assert list(sm.state_dict()) == list(net.state_dict())
    sm.eval()
    assert sm.training is False and sm.fc1.training is False and net.training is True
    assert "__torch__.helpers.act" in sm.code


def test_constructor_archive_loads_in_torch(tmp_path):
    net, sm = _net()
    sm.save(tmp_path / "net.pt", _extra_files={"k": "v"})
    extra = {"k": ""}
    t = torch.jit.load(str(tmp_path / "net.pt"), _extra_files=extra)
    assert extra["k"] == b"v"
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    for n in (1, 3):
        y, (z,) = sm(ember.from_numpy(x), n)
        ty, (tz,) = t(torch.from_numpy(x), n)
        np.testing.assert_allclose(ty.detach().numpy(), y.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(tz.detach().numpy(), z.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    for k, v in sm.state_dict().items():
        np.testing.assert_array_equal(t.state_dict()[k].numpy(), v.numpy())
    assert t.scale == 0.5 and t.sizes == [2, 3]
    # and back into ember from torch's own re-save
    t.save(str(tmp_path / "again.pt"))
    back = ember.jit.load(tmp_path / "again.pt")
    np.testing.assert_allclose(back(ember.from_numpy(x))[0].detach().numpy(),
                               sm(ember.from_numpy(x))[0].detach().numpy(), rtol=1e-6)


def test_class_naming_and_mangling(tmp_path):
    assert qualified_name(ember.nn.Linear) == "__torch__.torch.nn.modules.linear.Linear"
    assert qualified_name(Net) == f"__torch__.{__name__}.Net"
    main = type("Top", (ember.nn.Module,), {"__module__": "__main__"})
    assert qualified_name(main) == "__torch__.Top"
    seq = ember.nn.Sequential(ember.nn.Linear(3, 3), ember.nn.Linear(3, 3), ember.nn.ReLU())
    other = LINEAR_FWD.replace("return torch.linear(input, weight, bias)",
                               "return torch.relu(torch.linear(input, weight, bias))")
    sm = create_script_module(seq, {
        "": {"forward": """
            def forward(self, x: Tensor) -> Tensor:
              _0 = getattr(self, "0")
              _1 = getattr(self, "1")
              return (getattr(self, "2")).forward((_1).forward((_0).forward(x, ), ), )
        """},
        "0": {"forward": LINEAR_FWD}, "1": {"forward": other},
        "2": {"forward": "def forward(self, x: Tensor) -> Tensor:\n  return torch.relu(x)"}})
    q0, q1 = (getattr(sm, k)._jit_class.qualname for k in "01")
    assert q0 != q1
    mangled = [q for q in (q0, q1) if "___torch_mangle_" in q]
    assert mangled and all(q.startswith("__torch__.torch.nn.modules.linear.___torch_mangle_")
                           and q.endswith(".Linear") for q in mangled)
    # the same class again (same code, same state layout) keeps its name
    again = create_script_module(ember.nn.Linear(3, 3), {"": {"forward": LINEAR_FWD}})
    assert again._jit_class.qualname in (q0, q1)
    buf = io.BytesIO()
    sm.save(buf)
    t = torch.jit.load(io.BytesIO(buf.getvalue()))
    x = torch.randn(2, 3)
    np.testing.assert_allclose(t(x).detach().numpy(),
                               sm(ember.from_numpy(x.numpy())).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert getattr(t, "1").original_name == "Linear"


def test_script_function():
    fn = create_script_function("""
        def scale(x: Tensor, k: float=2.0) -> Tensor:
          y = x
          for _ in range(3):
            y = __torch__.f.inc(y)
          return torch.mul(y, k)
    """, "__torch__.f.scale", functions={"__torch__.f.inc": "def inc(x: Tensor) -> Tensor:\n"
                                                             "  return torch.add(x, 1)"})
    assert isinstance(fn, ember.jit.ScriptFunction) and fn.name == "scale"
    np.testing.assert_array_equal(fn(ember.zeros(2)).numpy(), [6.0, 6.0])
    np.testing.assert_array_equal(fn(ember.zeros(2), k=1.0).numpy(), [3.0, 3.0])
    assert "def scale" in fn.code


def test_unsupported_constructs_raise_at_construction():
    with pytest.raises(ember.jit.ScriptSafetyError, match="Lambda|not TorchScript"):
        create_script_module(ember.nn.ReLU(), {"": {"forward": """
            def forward(self, x: Tensor) -> Tensor:
              f = lambda: x
              return x
        """}})
    # a name TorchScript has no operator for is refused at once, as torch refuses it
    with pytest.raises(ember.jit.ScriptSafetyError, match="Unknown builtin op: aten::no_such_op"):
        create_script_module(ember.nn.ReLU(), {"": {"forward": """
            def forward(self, x: Tensor) -> Tensor:
              return torch.no_such_op(x)
        """}})
    # a TorchScript operator ember lacks: loading goes on, reaching it raises
    with pytest.warns(UserWarning, match="torch.fbgemm_pack_quantized_matrix"):
        sm = create_script_module(ember.nn.ReLU(), {"": {"forward": """
            def forward(self, x: Tensor) -> Tensor:
              if torch.gt(torch.dim(x), 5):
                return torch.fbgemm_pack_quantized_matrix(x)
              return torch.relu(x)
        """}})
    assert float(sm(-ember.ones(2)).sum()) == 0.0  # the untaken branch does not matter
    with pytest.raises(NotImplementedError, match="torch.fbgemm_pack_quantized_matrix"):
        sm(ember.ones(1, 1, 1, 1, 1, 1))


def test_torch_jit_in_python_m_ember_run(tmp_path):
    archive = tmp_path / "m.pt"
    net, sm = _net()
    sm.save(archive)
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(f"""
        import torch
        m = torch.jit.load({str(archive)!r})
        y, _ = m(torch.ones(2, 4))
        torch.jit.save(m, {str(tmp_path / 'out.pt')!r})
        assert isinstance(m, torch.jit.ScriptModule)
        m2 = torch.jit.load({str(tmp_path / 'out.pt')!r})
        print(torch.__name__, tuple(y.shape), bool((m2(torch.ones(2, 4))[0] == y).all()))
    """))
    r = subprocess.run([sys.executable, "-m", "ember", "run", str(prog)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ember (2, 3) True"
