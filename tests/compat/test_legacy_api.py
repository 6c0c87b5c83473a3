"""Small pieces of torch's API that real programs touch, against torch: constants,
torch-level in-place functions and alias methods, legacy Tensor methods and
predicates, GradScaler's loss scaling, one-process torch.distributed and
torch.nn.parallel, dtype names ember cannot store, and the torch.* imports served by
``python -m ember run``."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import ember


def test_constants():
    for name in ("pi", "e", "inf", "nan", "newaxis"):
        a, b = getattr(ember, name), getattr(torch, name)
        assert (a is None and b is None) or a == b or (a != a and b != b)


@pytest.mark.parametrize("name,make", [
    ("exp_", lambda m: m.tensor([0.5, -1.0])), ("sigmoid_", lambda m: m.tensor([0.5, -1.0])),
    ("clamp_", lambda m: m.tensor([0.5, -1.0])), ("relu_", lambda m: m.tensor([0.5, -1.0])),
    ("arccosh", lambda m: m.tensor([1.5, 2.0])), ("arcsinh", lambda m: m.tensor([0.5, -1.0])),
    ("arctanh", lambda m: m.tensor([0.5, -0.1])), ("sqrt_", lambda m: m.tensor([4.0, 2.0])),
])
def test_torch_level_functions(name, make):
    args = (0.0,) if name == "clamp_" else ()
    e, t = getattr(ember, name)(make(ember), *args), getattr(torch, name)(make(torch), *args)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name,arg", [("less_", 1.0), ("greater_equal_", 1.0),
                                      ("not_equal_", 2.0), ("arccosh_", None)])
def test_alias_methods(name, arg):
    out = []
    for m in (ember, torch):
        x = m.tensor([1.5, 2.0, 0.5]) if arg is not None else m.tensor([1.5, 2.0, 3.0])
        r = getattr(x, name)(*(() if arg is None else (arg,)))
        assert r is x
        out.append(x.numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-6)


def test_legacy_tensor_methods():
    for m in (ember, torch):
        x = m.tensor([1.0, 2.0], dtype=m.float64)
        assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype == m.float64
        assert x.new([1, 2]).dtype == m.float64 and x.new([1, 2]).tolist() == [1.0, 2.0]
        assert x.real is x and x.conj() is x and not m.is_complex(x)
        with pytest.raises(RuntimeError):
            _ = x.imag
        assert x.get_device() == -1 and m.get_device(x) == -1
        assert x.is_signed() and not m.zeros(1, dtype=m.uint8).is_signed()
        assert not x.is_xpu and not x.is_mps and not x.is_meta and not x.is_sparse
        assert not x.is_pinned()
        with pytest.raises(RuntimeError):
            x.pin_memory()  # no accelerator here
        assert x.is_same_size(m.zeros(2)) and not x.is_inference()
        y = m.zeros(3)
        y.apply_(lambda v: v + 1)
        y.map_(m.tensor([1.0, 2.0, 3.0]), lambda a, b: a * b)
        assert y.tolist() == [1.0, 2.0, 3.0]
        assert m.detach(x.requires_grad_()).requires_grad is False


def test_grad_scaler_matches_torch_cpu():
    results = []
    for m in (ember, torch):
        m.manual_seed(0)
        w = m.nn.Parameter(m.ones(3))
        opt = m.optim.SGD([w], lr=0.25)  # exact steps: the scaler is what is compared
        scaler = m.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
        trace = []
        for step in range(5):
            opt.zero_grad()
            loss = (w * m.tensor([1.0, 2.0, 3.0])).sum()
            if step == 2:
                loss = loss * float("inf")  # a step whose gradients overflow is skipped
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            trace.append((scaler.get_scale(), w.detach().tolist()))
        results.append((trace, scaler.state_dict()))
    assert results[0][0] == results[1][0]
    e_sd, t_sd = results[0][1], results[1][1]
    assert {k: float(v) for k, v in e_sd.items()} == {k: float(v) for k, v in t_sd.items()}


def test_grad_scaler_cuda_without_gpu_disables_itself():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        s = ember.amp.GradScaler()
    assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
    x = ember.ones(2)
    assert s.scale(x) is x
    with pytest.warns(FutureWarning):
        assert not ember.cuda.amp.GradScaler(enabled=False).is_enabled()


def test_not_implemented_pieces_say_so():
    with pytest.raises(NotImplementedError):
        ember.autocast("cpu", dtype=ember.bfloat16)
    with ember.autocast("cpu", enabled=False):
        pass
    assert ember.zeros(2, dtype=ember.bfloat16).dtype is ember.bfloat16  # via ml_dtypes
    assert ember.ones(2).to(ember.complex64).is_complex()
    assert ember.ones(2).to(ember.complex32).dtype is ember.complex32  # tests/test_complex32.py
    with pytest.raises(NotImplementedError):
        ember.ones(2).to(ember.complex32).exp()  # as torch: no ComplexHalf exp on the CPU
    assert repr(ember.bfloat16) == "ember.bfloat16" and ember.bfloat16.is_floating_point
    # ember.distributed runs on MPI (tests/test_distributed*.py); no group exists here
    assert not ember.distributed.is_initialized()
    with pytest.raises(ValueError):
        ember.distributed.get_rank()


def test_data_parallel_on_one_device():
    from ember.nn import parallel
    lin = ember.nn.Linear(2, 2)
    dp = parallel.DataParallel(lin)
    x = ember.ones(1, 2)
    assert dp(x).tolist() == lin(x).tolist()
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    assert parallel.data_parallel(lin, x).tolist() == lin(x).tolist()
    with pytest.raises(NotImplementedError):
        parallel.DataParallel(lin, device_ids=[0, 1])


def test_served_torch_submodules(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import torch
        import torch.backends.cudnn as cudnn
        import torch.cuda.amp
        import torch.nn.parallel
        import torch.onnx
        from torch.distributed import init_process_group
        cudnn.benchmark = True
        print(torch.utils.data.DataLoader.__name__, torch.nn.parallel.DataParallel.__name__,
              torch.cuda.amp.GradScaler.__name__, torch.sparse.mm.__name__)
        torch.onnx.export(torch.nn.Linear(2, 1), (torch.ones(1, 2),), "x.onnx")
        import os
        print("onnx:", os.path.getsize("x.onnx") > 0)
    """))
    r = subprocess.run([sys.executable, "-m", "ember", "run", str(prog)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["DataLoader DataParallel GradScaler mm", "onnx: True"]


@pytest.mark.parametrize("op", ["add", "sub"])
def test_add_with_alpha_rounds_once_like_torch(op):
    # torch computes a + alpha * b as one fused multiply-add in float32; optimizers and
    # hand-written updates (p.data.add_(g, alpha=-lr)) depend on it bit for bit
    rng = np.random.default_rng(0)
    a = rng.standard_normal((20, 50)).astype(np.float32)
    b = rng.standard_normal(50).astype(np.float32)
    for alpha in (-0.1, 0.3, 1e-3, 7):
        e = getattr(ember.from_numpy(a), op)(ember.from_numpy(b), alpha=alpha).numpy()
        t = getattr(torch.from_numpy(a), op)(torch.from_numpy(b), alpha=alpha).numpy()
        np.testing.assert_array_equal(e, t)
    x = ember.tensor([0.3999999761581421])
    assert x.add_(ember.tensor([3.0]), alpha=-0.1).item() == \
        torch.tensor([0.3999999761581421]).add_(torch.tensor([3.0]), alpha=-0.1).item()
