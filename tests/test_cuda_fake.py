"""ember's ``cuda`` device on the CPU, through a test double of CuPy (tests/fake_cupy).

Device rules (mixing, copies, checkpoints' locations) are compared with torch's,
optimizers' steps with the CPU's; without CuPy, ``cuda`` raises the error that names
the missing extra; the GPU check's driver runs its dry run. The op oracle's cases on
``cuda`` are in test_cuda_fake_oracle.py.
"""
import os
import subprocess
import sys

import cuda_double
import numpy as np
import pytest
import torch

import ember
from ember import backend

HERE = os.path.dirname(os.path.abspath(__file__))
cupy = cuda_double.cupy  # the fixture


def test_the_double_refuses_implicit_conversion(cupy):
    a = cupy.asarray(np.arange(3.0))
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Unsupported type"):
        a + np.ones(3)
    assert type(np.exp(a)) is cupy.ndarray and type(a.sum()) is cupy.ndarray
    assert a.get().tolist() == [0.0, 1.0, 2.0]


def test_mixing_devices_raises_torchs_error(cupy):
    a, b = ember.ones(2, 3, device="cuda"), ember.ones(2, 3)
    msg = ("Expected all tensors to be on the same device, but found at least two devices, "
           "cuda:0 and cpu!")
    for fn in (lambda: a + b, lambda: b * a, lambda: a @ b.t(), lambda: ember.cat([a, b]),
               lambda: a.index_select(0, ember.tensor([0, 1])),
               lambda: ember.where(a > 0, a, b)):
        with pytest.raises(RuntimeError) as e:
            fn()
        assert msg.split(",")[0] in str(e.value) and "cuda:0" in str(e.value)
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    # as torch: a 0-dim CPU tensor is a scalar to a cuda op, and its gradient comes back
    # to the CPU
    s = ember.tensor(2.0, requires_grad=True)
    r = a * s
    assert r.device.type == "cuda" and r.sum().item() == 12.0
    r.sum().backward()
    assert s.grad.device.type == "cpu" and s.grad.item() == 6.0
    # and a CPU index selects from a cuda tensor
    assert a[ember.tensor([1, 0])].device.type == "cuda"


def test_to_cpu_cuda_copies_as_torch(cupy):
    x = ember.arange(4.0)
    c = x.cuda()
    assert c.is_cuda and str(c.device) == "cuda:0" and repr(c).endswith("device='cuda:0')")
    # no copy when already there; copy=True copies
    assert c.cuda() is c and c.to("cuda") is c and c.to("cuda:0") is c and x.cpu() is x
    assert c.to("cuda", copy=True) is not c
    c.add_(1)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]  # .cuda() copied
    h = c.to("cpu", non_blocking=True)
    assert h.device.type == "cpu" and h.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert c.to(ember.float64).device.type == "cuda"
    assert c.to("cpu", ember.int32).dtype == ember.int32
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        c.numpy()
    # the copy is differentiable both ways
    w = ember.ones(3, requires_grad=True)
    (w.cuda() * 2).cpu().sum().backward()
    assert w.grad.device.type == "cpu" and w.grad.tolist() == [2.0, 2.0, 2.0]
    # modules move their parameters and buffers
    net = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.BatchNorm1d(2)).cuda()
    assert all(t.is_cuda for t in list(net.parameters()) + list(net.buffers()))
    assert net(ember.randn(4, 3, device="cuda")).is_cuda
    assert all(not t.is_cuda for t in net.cpu().parameters())


def test_checkpoints_from_cuda(cupy, tmp_path, monkeypatch):
    path = str(tmp_path / "ck.pt")
    lin = ember.nn.Linear(3, 2).cuda()
    ember.save({"sd": lin.state_dict(), "t": ember.arange(4.0).cuda()[1:]}, path)
    back = ember.load(path)  # the saved location: cuda
    assert back["t"].is_cuda and back["t"].tolist() == [1.0, 2.0, 3.0]
    on_cpu = ember.load(path, map_location="cpu")
    assert not on_cpu["t"].is_cuda and on_cpu["sd"]["weight"].device.type == "cpu"
    assert ember.load(path, map_location={"cuda:0": "cpu"})["t"].device.type == "cpu"
    # torch (a CPU build) reads it with map_location, and without one raises its error;
    # ember without a GPU raises the same
    t = torch.load(path, map_location="cpu", weights_only=True)
    assert t["t"].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError) as t_err:
        torch.load(path, weights_only=True)
    monkeypatch.setenv("FAKE_CUPY_DEVICES", "0")
    monkeypatch.setattr(backend, "_cupy", [None])
    assert not ember.cuda.is_available()
    with pytest.raises(RuntimeError) as e_err:
        ember.load(path)
    assert str(e_err.value) == str(t_err.value)


def test_optimizers_step_the_same_on_cuda(cupy):
    """Each optimizer's step on cuda gives the CPU's values to the bit (the double
    computes with NumPy), on parameters large enough for the chunked update paths."""
    names = ["SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop",
             "Adagrad", "Adadelta", "ASGD", "LBFGS"]
    for name in names:
        got = []
        for dev in ("cpu", "cuda"):
            ember.manual_seed(0)
            p = ember.nn.Parameter(ember.randn(70000).to(dev))
            kw = {"momentum": 0.9} if name == "SGD" else {}
            opt = getattr(ember.optim, name)([p], **({"lr": 1e-2} | kw))

            def closure(p=p, opt=opt):
                opt.zero_grad()
                loss = (p * p).sum()
                loss.backward()
                return loss
            for _ in range(2):
                opt.step(closure)
            assert p.device.type == dev
            got.append(p.detach().cpu().numpy())
        assert np.array_equal(got[0], got[1]), name


def test_without_cupy_cuda_names_the_missing_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    monkeypatch.setattr(backend, "_cupy", [None])
    assert ember.cuda.is_available() is False and ember.cuda.device_count() == 0
    for fn in (lambda: ember.zeros(2, device="cuda"), lambda: ember.ones(2).cuda(),
               lambda: ember.nn.Linear(2, 2).to("cuda"), ember.cuda.current_device):
        with pytest.raises(RuntimeError, match=r"CuPy, which is not installed.*\[cuda\]"):
            fn()
    assert torch.cuda.is_available() is False  # the oracle agrees: no CUDA here


def test_gpu_script_dry_run(tmp_path):
    """The GPU check's driver runs end to end on the double (its device checks)."""
    env = dict(os.environ, EMBER_GPU_DRYRUN="1", OPENBLAS_NUM_THREADS="1")
    root = os.path.dirname(HERE)
    p = subprocess.run([sys.executable, os.path.join(HERE, "gpu", "gpu_check.py"),
                        "--out", str(tmp_path), "--parts", "devices"],
                       cwd=root, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    import json
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["dry_run"] is True
    assert summary["parts"]["devices"]["status"] == "ok", (tmp_path / "parts.log").read_text()
    checks = summary["parts"]["devices"]["result"]
    assert checks and all(v == "pass" for v in checks.values()), checks
    assert "## devices: ok" in (tmp_path / "summary.md").read_text()
    assert sorted(os.listdir(tmp_path)) == ["parts.log", "summary.json", "summary.md"]


def test_torch_cuda_functions_on_the_double(cupy):
    c = ember.cuda
    assert c.is_available() and c.device_count() == 1 and c.current_device() == 0
    assert c.get_device_name(0) == "Fake CuPy GPU (NumPy on the CPU)"
    c.set_device(0)
    c.synchronize()
    c.empty_cache()
    with pytest.raises(NotImplementedError, match="default stream"):
        c.Stream()
    # seeding makes cuda draws repeat, as torch.manual_seed does
    draws = []
    for _ in range(2):
        ember.manual_seed(5)
        draws.append(ember.randn(4, device="cuda").tolist())
    assert draws[0] == draws[1]
    with ember.device("cuda"):
        assert ember.zeros(2).is_cuda and ember.nn.Linear(2, 2).weight.is_cuda
    x = ember.randn(4, 3, device="cuda", requires_grad=True)
    (x.softmax(-1) * ember.arange(3.0, device="cuda")).sum().backward()
    assert x.grad.is_cuda


def _same_on_both(fn):
    """``fn(device)`` on cpu and on cuda: the cuda results live there and equal the CPU's
    (the double computes with NumPy)."""
    outs = []
    for dev in ("cpu", "cuda"):
        ember.manual_seed(0)
        out = fn(dev)
        outs.append(out if isinstance(out, (list, tuple)) else [out])
    for a, b in zip(*outs):
        assert b.device.type == "cuda", b.device
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().cpu().numpy())


def test_more_than_the_oracle_tables(cupy):
    """Paths outside the oracle's tables: host-computed losses, LU, tracing, init, fft."""
    F = ember.nn.functional

    def ctc(dev):
        lp = ember.randn(5, 2, 4).log_softmax(2).to(dev).requires_grad_()
        loss = F.ctc_loss(lp, ember.tensor([[1, 2], [1, 1]], device=dev), [5, 5], [2, 2])
        loss.backward()
        return [loss, lp.grad]
    _same_on_both(ctc)
    _same_on_both(lambda d: list(ember.linalg.lu_factor(ember.randn(3, 3).to(d))))
    _same_on_both(lambda d: ember.jit.trace(ember.nn.Linear(2, 2).to(d),
                                            ember.ones(1, 2, device=d))(ember.ones(3, 2,
                                                                                   device=d)))
    _same_on_both(lambda d: ember.nn.ConvTranspose2d(2, 3, 3).to(d)(
        ember.randn(1, 2, 5, 5).to(d)))
    _same_on_both(lambda d: F.interpolate(ember.randn(1, 1, 4, 4).to(d), scale_factor=2,
                                          mode="bilinear"))
    _same_on_both(lambda d: [ember.fft.rfft(ember.randn(8).to(d)).real,
                             ember.einsum("ij,jk->ik", ember.randn(2, 3).to(d),
                                          ember.randn(3, 4).to(d))])
    for init in (ember.nn.init.kaiming_uniform_, ember.nn.init.orthogonal_,
                 ember.nn.init.trunc_normal_):
        assert init(ember.empty(3, 4, device="cuda")).is_cuda
    for t in (ember.rand(3, device="cuda"), ember.randperm(5, device="cuda"),
              ember.multinomial(ember.ones(4, device="cuda"), 2),
              F.dropout(ember.ones(10, device="cuda"), 0.5, True)):
        assert t.is_cuda
    with pytest.raises(NotImplementedError, match="autocast"):
        ember.autocast("cuda").__enter__()


def test_float32_erf_and_gelu_on_cuda_as_on_cpu(cupy):
    # float32 erf's float32 pieces take their coefficients with the array's own module:
    # a cuda tensor gives the CPU's bits (NumPy's tables never meet a CuPy index)
    x = np.concatenate([np.linspace(-5, 5, 2001), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    x = x.astype(np.float32)
    for f in (ember.erf, ember.nn.functional.gelu, ember.special.erfc):
        cpu = f(ember.from_numpy(x)).numpy()
        gpu = f(ember.from_numpy(x).to("cuda")).cpu().numpy()
        assert cpu.tobytes() == gpu.tobytes(), f


def test_normal_with_tensor_arguments_on_cuda(cupy):
    """``normal`` with a tensor mean on cuda (the result on cuda, ``out=`` a cuda tensor
    written in place), the same values as on the CPU at one seed."""
    res = []
    for device in ("cpu", "cuda"):
        ember.manual_seed(0)
        m = ember.arange(6.0, device=device).reshape(2, 3).to(ember.complex64)
        o = ember.empty(2, 3, device=device)
        a = ember.normal(m, 2.0)
        b = ember.normal(m.real, ember.ones(3, device=device), out=o)
        assert a.device.type == device and b is o and o.device.type == device
        res.append([a.cpu().numpy(), o.cpu().numpy()])
    for x, y in zip(*res):
        np.testing.assert_array_equal(x, y)
