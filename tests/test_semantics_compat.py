"""PyTorch semantics libraries lean on, against torch 2.13: ``Tensor.view(dtype)``
reinterpreting bytes (safetensors), ``UntypedStorage.from_file`` (memory-mapped
checkpoints), and an ``Optimizer`` subclass that wraps another without calling
``Optimizer.__init__`` (accelerate's ``AcceleratedOptimizer``)."""
import numpy as np
import pytest
import torch

import ember

_X = np.array([[1.0, -2.5, 3.0, 0.1], [7.25, -0.0, 1e-3, 6e4]], np.float32)

VIEWS = [
    ("f32_i8", lambda m, x: x.view(m.int8)),
    ("f32_f16", lambda m, x: x.view(m.float16)),
    ("f32_f64", lambda m, x: x.view(m.float64)),
    ("f32_bf16", lambda m, x: x.view(m.bfloat16).float()),
    ("bf16_i16", lambda m, x: x.bfloat16().view(m.int16)),
    ("f32_u8_keyword", lambda m, x: x.view(dtype=m.uint8)),
    ("f32_c64", lambda m, x: x.view(m.complex64)),
    ("c64_f32", lambda m, x: x.view(m.complex64).view(m.float32)),
    ("i64_f64", lambda m, x: m.arange(6).view(m.float64)),
    ("bool_u8", lambda m, x: (x > 0).view(m.uint8)),
    ("u8_bool", lambda m, x: (x > 0).view(m.uint8).view(m.bool)),
    ("scalar_same_size", lambda m, x: x[0, 0].view(m.int32)),
    ("same_dtype", lambda m, x: x.view(dtype=m.float32)),
    ("shape_keyword", lambda m, x: x.view(size=(8,))),
    ("sliced_rows", lambda m, x: x[1:].view(m.int16)),
]


@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_view_dtype_reinterprets_bytes_as_torch(name, fn):
    t = fn(torch, torch.from_numpy(_X.copy()))
    e = fn(ember, ember.tensor(_X.copy()))
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride()
    te = t.view(torch.uint8) if t.dtype.is_floating_point and t.dtype != torch.uint8 and \
        t.dim() else t
    ee = e.view(ember.uint8) if e.dtype.is_floating_point and e.dtype != ember.uint8 and \
        e.dim() else e
    assert ee.tolist() == te.tolist()


VIEW_ERRORS = [
    ("noncontiguous_wider", lambda m, x: x.t().view(m.float64)),
    ("scalar_narrower", lambda m, x: x[0, 0].view(m.int8)),
    ("odd_last_dim", lambda m, x: x[:, :3].view(m.float64)),
]


@pytest.mark.parametrize("name,fn", VIEW_ERRORS, ids=[v[0] for v in VIEW_ERRORS])
def test_view_dtype_errors_as_torch(name, fn):
    with pytest.raises(Exception) as t_err:
        fn(torch, torch.from_numpy(_X.copy()))
    with pytest.raises(Exception) as e_err:
        fn(ember, ember.tensor(_X.copy()))
    assert type(e_err.value) is type(t_err.value)


def test_view_dtype_shares_memory_and_keeps_the_graph_out():
    for m in (torch, ember):
        x = m.tensor(_X.copy())
        v = x.view(m.int32)
        v[0, 0] = 0
        assert x[0, 0].item() == 0.0
        g = m.tensor(_X.copy(), requires_grad=True)
        assert not g.view(m.int32).requires_grad


def _write(path):
    np.arange(10, dtype=np.float32).tofile(path)


def test_untyped_storage_from_file_private_and_shared(tmp_path):
    results = {}
    for m in (torch, ember):
        path = tmp_path / f"{m.__name__}.bin"
        _write(path)
        s = m.UntypedStorage.from_file(str(path), False, 40)
        assert s.nbytes() == 40 and s.device.type == "cpu"
        t = m.tensor([], dtype=m.float32).set_(s)
        t[0] = 100.0  # a private mapping: the file keeps its bytes
        seen = [t.tolist(), np.fromfile(path, np.float32).tolist()]
        s2 = m.UntypedStorage.from_file(str(path), True, 40)
        t2 = m.tensor([], dtype=m.float32).set_(s2)
        t2[1] = 7.0  # a shared mapping: the write reaches the file
        del t2, s2
        seen.append(np.fromfile(path, np.float32).tolist())
        fresh = m.UntypedStorage.from_file(str(tmp_path / f"{m.__name__}_new.bin"), True, 8)
        seen.append(list(fresh))
        seen.append(m.UntypedStorage.from_file(str(path), False).nbytes())
        results[m.__name__] = seen
    assert results["ember"] == results["torch"]


@pytest.mark.parametrize("call", [
    lambda m, p: m.UntypedStorage.from_file(str(p / "data.bin"), False, 80),
    lambda m, p: m.UntypedStorage.from_file(str(p / "missing.bin"), False, 8),
])
def test_untyped_storage_from_file_errors(tmp_path, call):
    _write(tmp_path / "data.bin")
    with pytest.raises(RuntimeError):
        call(torch, tmp_path)
    with pytest.raises(RuntimeError):
        call(ember, tmp_path)


def _wrapper_class(m):
    class Wrapped(m.optim.Optimizer):
        """accelerate's pattern: delegate everything, never call Optimizer.__init__."""

        def __init__(self, optimizer):
            self.optimizer = optimizer

        @property
        def param_groups(self):
            return self.optimizer.param_groups

        @param_groups.setter
        def param_groups(self, value):
            self.optimizer.param_groups = value

        @property
        def state(self):
            return self.optimizer.state

        @property
        def defaults(self):
            return self.optimizer.defaults

        def step(self, closure=None):
            return self.optimizer.step(closure)

        def zero_grad(self, set_to_none=True):
            return self.optimizer.zero_grad(set_to_none)

        def state_dict(self):
            return self.optimizer.state_dict()

        def load_state_dict(self, sd):
            return self.optimizer.load_state_dict(sd)
    return Wrapped


def _wrapped_run(m):
    m.manual_seed(0)
    model = m.nn.Linear(3, 2)
    inner = m.optim.AdamW(model.parameters(), lr=0.1)
    calls = []
    inner.register_step_post_hook(lambda opt, args, kwargs: calls.append(type(opt).__name__))
    opt = _wrapper_class(m)(inner)
    sched = m.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)
    x = m.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])
    for _ in range(3):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()
        sched.step()
    sd = opt.state_dict()
    opt.add_param_group({"params": [m.nn.Parameter(m.ones(1))]})
    return ([p.detach().tolist() for p in model.parameters()], opt.param_groups[0]["lr"],
            sorted(sd["state"]), calls, len(opt.param_groups), sched.get_last_lr())


def test_optimizer_subclass_wrapping_another_without_init():
    got, want = _wrapped_run(ember), _wrapped_run(torch)
    np.testing.assert_allclose(np.concatenate([np.ravel(p) for p in got[0]]),
                               np.concatenate([np.ravel(p) for p in want[0]]), rtol=1e-5)
    assert got[1:] == want[1:]
