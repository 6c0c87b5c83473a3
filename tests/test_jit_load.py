"""TorchScript interchange with real torch 2.13.0: torch.jit.save -> ember.jit.load (in a
process where torch cannot be imported) and ember.jit.save -> torch.jit.load, for the zoo."""
import copy
import io
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from jit_zoo import MODES, capture, flatten, inputs

import ember

CASES = [(name, mode) for name, modes in MODES.items() for mode in modes]
BATCHES = (2, 3)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """Each zoo model captured and saved by torch, with inputs and torch's outputs as .npy."""
    d = tmp_path_factory.mktemp("jit_zoo")
    for name, mode in CASES:
        sm = capture(name, mode)
        torch.jit.save(sm, str(d / f"{name}_{mode}.pt"), _extra_files={"note.txt": "zoo"})
        np.savez(d / f"{name}_{mode}_state.npz",
                 **{k: v.numpy() for k, v in sm.state_dict().items()})
        for n in BATCHES:
            inp = inputs(name, n)
            with torch.no_grad():
                out = flatten(sm(*inp))
            for i, x in enumerate(inp):
                np.save(d / f"{name}_{mode}_{n}_in{i}.npy", x.numpy())
            for j, y in enumerate(out):
                np.save(d / f"{name}_{mode}_{n}_out{j}.npy", y)
    return d


_NO_TORCH = textwrap.dedent("""
    import glob, json, os, sys
    import importlib.abc

    class BlockTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("torch is blocked in this process")
            return None

    sys.meta_path.insert(0, BlockTorch())
    try:
        import torch  # noqa: F401
        sys.exit("torch was importable")
    except ImportError:
        pass
    import numpy as np
    import ember

    def flat(y):
        if isinstance(y, (tuple, list)):
            return [a for v in y for a in flat(v)]
        if isinstance(y, dict):
            return [a for k in sorted(y) for a in flat(y[k])]
        return [y.detach().numpy()]

    d, cases, batches = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    report = {}
    for name, mode in cases:
        extra = {"note.txt": ""}
        m = ember.jit.load(os.path.join(d, f"{name}_{mode}.pt"), _extra_files=extra)
        assert extra["note.txt"] == b"zoo", extra
        for n in batches:
            stem = os.path.join(d, f"{name}_{mode}_{n}")
            ins = [ember.from_numpy(np.load(p)) for p in sorted(glob.glob(stem + "_in*.npy"))]
            want = [np.load(f"{stem}_out{j}.npy")
                    for j in range(len(glob.glob(stem + "_out*.npy")))]
            for grad in (False, True):  # both paths of TransformerEncoder (fast/slow)
                with ember.set_grad_enabled(grad):
                    got = flat(m(*ins))
                worst = max(float(np.max(np.abs(g - w), initial=0.0)) for g, w in zip(got, want))
                ok = len(got) == len(want) and all(
                    g.shape == w.shape and g.dtype == w.dtype and
                    np.allclose(g, w, rtol=1e-4, atol=1e-5) for g, w in zip(got, want))
                report[f"{name}/{mode}/batch{n}/grad{int(grad)}"] = [ok, worst]
    print(json.dumps({"torch_in_modules": "torch" in sys.modules, "report": report}))
""")


def test_torch_archives_run_in_ember_without_torch(zoo):
    r = subprocess.run([sys.executable, "-c", _NO_TORCH, str(zoo), json.dumps(CASES),
                        json.dumps(BATCHES)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["torch_in_modules"] is False
    report = result["report"]
    assert len(report) == len(CASES) * len(BATCHES) * 2
    bad = {k: v for k, v in report.items() if not v[0]}
    assert not bad, bad


@pytest.mark.parametrize("name,mode", CASES)
def test_ember_saves_what_torch_loads(zoo, name, mode, tmp_path):
    """torch archive -> ember.jit.load -> ember save -> torch.jit.load: the parameters of
    torch's model bit for bit, torch's outputs, extra files kept."""
    m = ember.jit.load(str(zoo / f"{name}_{mode}.pt"))
    path = tmp_path / "again.pt"
    ember.jit.save(m, str(path), _extra_files={"meta.json": '{"a": 1}', "raw.bin": b"\x00\x01"})
    extra = {"meta.json": "", "raw.bin": ""}
    back = torch.jit.load(str(path), _extra_files=extra)
    assert extra == {"meta.json": b'{"a": 1}', "raw.bin": b"\x00\x01"}
    want = np.load(zoo / f"{name}_{mode}_state.npz")
    got = back.state_dict()
    assert list(got) == list(want.keys())
    for k in got:
        assert got[k].numpy().dtype == want[k].dtype
        np.testing.assert_array_equal(got[k].numpy(), want[k])
    n = BATCHES[-1]
    stem = str(zoo / f"{name}_{mode}_{n}")
    inp = [torch.from_numpy(np.load(f"{stem}_in{i}.npy")) for i in range(len(inputs(name, n)))]
    with torch.no_grad():
        out = flatten(back(*inp))
    for j, y in enumerate(out):
        np.testing.assert_array_equal(y, np.load(f"{stem}_out{j}.npy"))


def test_save_to_file_object(zoo):
    m = ember.jit.load(str(zoo / "tupledict_script.pt"))
    buf = io.BytesIO()
    m.save(buf)
    back = torch.jit.load(io.BytesIO(buf.getvalue()))
    x = inputs("tupledict", 2)[0]
    y, d = back(x)
    ey, ed = m(ember.from_numpy(x.numpy()))
    np.testing.assert_allclose(ey.detach().numpy(), y.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert sorted(d) == sorted(ed) == ["max", "sum"]


def test_round_trip_ember_torch_ember_is_bitwise(zoo, tmp_path):
    m = ember.jit.load(str(zoo / "cnn_script.pt"))
    m.save(str(tmp_path / "a.pt"))
    torch.jit.load(str(tmp_path / "a.pt")).save(str(tmp_path / "b.pt"))
    again = ember.jit.load(str(tmp_path / "b.pt"))
    a, b = m.state_dict(), again.state_dict()
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())


def test_module_api_matches_torch(zoo):
    t = torch.jit.load(str(zoo / "cnn_script.pt"))
    m = ember.jit.load(str(zoo / "cnn_script.pt"))
    assert isinstance(m, ember.jit.ScriptModule) and isinstance(m, ember.nn.Module)
    assert [k for k, _ in m.named_parameters()] == [k for k, _ in t.named_parameters()]
    assert [k for k, _ in m.named_buffers()] == [k for k, _ in t.named_buffers()]
    assert [k for k, _ in m.named_children()] == [k for k, _ in t.named_children()]
    assert m.original_name == t.original_name == "CNN"
    assert m.training is False and m.bn.training is False
    assert "def forward" in m.code and "torch.flatten" in m.code
    assert "def forward" in str(m.graph)
    x = inputs("cnn", 4)[0]
    ex = ember.from_numpy(x.numpy())
    np.testing.assert_allclose(m(ex).detach().numpy(), t(x).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    # train() reaches the script code: dropout and batch statistics switch on
    tr = ember.jit.load(str(zoo / "cnn_script.pt")).train()
    assert tr.bn.training and tr.drop.training
    before = tr.bn.running_mean.clone()
    a, b = tr(ex), tr(ex)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
    assert not np.allclose(before.numpy(), tr.bn.running_mean.numpy())
    # load_state_dict, to(), requires_grad and backward through the interpreter
    sd = {k: v * 0 for k, v in m.state_dict().items()}
    m.load_state_dict(sd)
    assert float(m(ex).abs().sum()) == 0.0
    m64 = ember.jit.load(str(zoo / "cnn_script.pt")).to(ember.float64)
    assert m64.fc.weight.dtype == ember.float64
    assert m64(ex.double()).dtype == ember.float64
    c = copy.deepcopy(m)
    assert c.fc.weight is not m.fc.weight and c._jit_class is m._jit_class
    np.testing.assert_array_equal(c(ex).detach().numpy(), m(ex).detach().numpy())
    with pytest.raises(pickle.PickleError):
        pickle.dumps(m)
    g = ember.jit.load(str(zoo / "mlp_trace.pt"))
    g(ember.randn(3, 8)).sum().backward()
    assert g.l1.weight.grad is not None and g.l1.weight.grad.shape == (16, 8)


def test_map_location_and_file_objects(zoo):
    data = (zoo / "mlp_script.pt").read_bytes()
    m = ember.jit.load(io.BytesIO(data), map_location="cpu")
    assert m.l1.weight.device.type == "cpu"
    with open(zoo / "mlp_script.pt", "rb") as fh:
        m2 = ember.jit.load(fh)
    np.testing.assert_array_equal(m.l2.bias.detach().numpy(), m2.l2.bias.detach().numpy())
    with pytest.raises(ValueError, match="does not exist"):
        ember.jit.load(str(zoo / "missing.pt"))


def test_freeze_and_optimize_for_inference(zoo):
    m = ember.jit.load(str(zoo / "block_script.pt"))
    x = ember.from_numpy(inputs("block", 2)[0].numpy())
    want = m(x).detach().numpy()
    f = ember.jit.freeze(m.eval())
    assert all(not p.requires_grad for p in f.parameters())
    np.testing.assert_array_equal(f(x).detach().numpy(), want)
    o = ember.jit.optimize_for_inference(ember.jit.load(str(zoo / "block_script.pt")))
    np.testing.assert_array_equal(o(x).detach().numpy(), want)
    with pytest.raises(RuntimeError, match="eval mode"):
        ember.jit.freeze(ember.jit.load(str(zoo / "block_script.pt")).train())
    with pytest.raises(RuntimeError, match="ScriptModule"):
        ember.jit.freeze(ember.nn.Linear(2, 2))


def test_script_language_constructs(tmp_path):
    """Loops over lists/dicts/strings, enumerate, Optional, early return, advanced
    indexing, self-method calls, ModuleDict: torch's script printout runs in ember."""
    from jit_zoo import Language
    torch.manual_seed(0)
    s = torch.jit.script(Language().eval())
    s.save(str(tmp_path / "lang.pt"))
    e = ember.jit.load(tmp_path / "lang.pt")

    def em(v):
        if isinstance(v, torch.Tensor):
            return ember.from_numpy(v.numpy())
        return [em(i) for i in v] if isinstance(v, list) else v
    g = torch.Generator().manual_seed(3)
    for scale in (1.0, 1000.0):
        x = torch.randn(3, 4, generator=g) * scale
        xs = [torch.randn(3, 4, generator=g), torch.randn(2, 4, generator=g)[:1].expand(3, 4)]
        for args in ((x, xs), (x, xs, torch.ones(3, 4), {"a": 1, "b": 2})):
            want, got = s(*args), e(*[em(a) for a in args])
            np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy(),
                                       rtol=1e-5, atol=1e-5)
            assert got[1] == want[1] and got[2] == want[2]


def test_tied_weights_and_named_tuples_both_ways(tmp_path):
    from jit_zoo import TiedLM
    torch.manual_seed(0)
    s = torch.jit.script(TiedLM())
    s.save(str(tmp_path / "tied.pt"))
    m = ember.jit.load(tmp_path / "tied.pt")
    assert m.emb.weight is m.out.weight and len(list(m.parameters())) == 1
    x = torch.randint(0, 10, (2, 3))
    got, want = m(ember.from_numpy(x.numpy())), s(x)
    assert type(got).__name__ == "Pair" and got.length == want.length == 3
    np.testing.assert_allclose(got.logits.detach().numpy(), want.logits.detach().numpy(),
                               rtol=1e-6)
    m.save(str(tmp_path / "again.pt"))
    back = torch.jit.load(str(tmp_path / "again.pt"))
    assert len(list(back.parameters())) == 1
    assert back.emb.weight.data_ptr() == back.out.weight.data_ptr()
    np.testing.assert_array_equal(back(x).logits.detach().numpy(),
                                  want.logits.detach().numpy())
