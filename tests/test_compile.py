"""ember.compile: capture once, replay the IR under guards; graph breaks run eagerly;
training through the replay equals eager ember's loss curve; torch.compile under
``python -m ember run`` is this function."""
import copy
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn
from ember._compile import Unsupported, config


def _mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def test_module_replay_equals_eager_and_gradients():
    m = _mlp()
    cm = ember.compile(m)
    assert cm._orig_mod is m and isinstance(cm, ember._compile.OptimizedModule)
    x = ember.randn(4, 6)
    for _ in range(3):
        out = cm(x)
        np.testing.assert_array_equal(out.detach().numpy(), m(x).detach().numpy())
    assert cm._compiled.stats == {"captures": 1, "replays": 2, "eager": 0}
    out.sum().backward()
    g_compiled = [p.grad.numpy().copy() for p in m.parameters()]
    m.zero_grad()
    m(x).sum().backward()
    for a, p in zip(g_compiled, m.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-6)
    assert cm.state_dict().keys() == m.state_dict().keys()


def test_guards_recapture():
    m = _mlp()
    cm = ember.compile(m, dynamic=False)
    x = ember.randn(4, 6)
    cm(x)
    cm(x.double().float())            # same guards: replay
    assert cm._compiled.stats["captures"] == 1
    cm(x.requires_grad_())            # requires_grad changed
    assert cm._compiled.stats["captures"] == 2
    m.eval()
    cm(x)                             # training changed
    with ember.no_grad():
        y = cm(x)                     # grad mode changed
    assert y.grad_fn is None
    m[0].weight = nn.Parameter(ember.zeros(16, 6))  # parameter identity changed
    np.testing.assert_allclose(cm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    assert cm._compiled.stats["captures"] == 5
    cm(ember.randn(5, 6))             # dynamic=False: a new size is a new entry
    assert cm._compiled.stats["captures"] == 6


def test_recompile_log_and_cache_limit(monkeypatch):
    records = []

    class H(logging.Handler):
        def emit(self, r):
            records.append(r.getMessage())
    h = H()
    logging.getLogger("ember._dynamo").addHandler(h)
    ember._logging.set_logs(recompiles=True)
    monkeypatch.setattr(config, "cache_size_limit", 2)
    try:
        f = ember.compile(lambda x, k: x * k)
        x = ember.ones(3)
        f(x, 1)
        f(x, 2)
        assert "non-tensor arguments changed" in records[-1]
        with pytest.warns(UserWarning, match="cache_size_limit"):
            assert f(x, 3).tolist() == [3.0, 3.0, 3.0]   # beyond the limit: eager, correct
        assert f.stats["eager"] == 1
    finally:
        ember._logging.set_logs(recompiles=False)
        logging.getLogger("ember._dynamo").removeHandler(h)


def test_torch_logs_env_var():
    code = ("import ember; f = ember.compile(lambda x: x + 1); f(ember.ones(2)); "
            "f(ember.ones(2, dtype=ember.float64))")
    env = dict(os.environ, TORCH_LOGS="recompiles", PYTHONPATH=os.getcwd())
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "Recompiling" in r.stderr and "dtype mismatch" in r.stderr, r.stderr


def test_dynamic_batch_one_graph():
    m = _mlp()
    cm = ember.compile(m)
    for b in (2, 3, 5, 9):
        x = ember.randn(b, 6)
        np.testing.assert_allclose(cm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    assert cm._compiled.stats == {"captures": 2, "replays": 2, "eager": 0}
    assert len(cm._compiled._cache) == 1 and cm._compiled._cache[0].dynamic


def test_size_specialized_graph_stays_static():
    def g(x):  # int() freezes the size into a literal: not batch-generic
        return x + ember.arange(int(x.shape[0])).reshape(-1, 1)
    f = ember.compile(g)
    for b in (4, 8, 12):
        x = ember.randn(b, 3)
        np.testing.assert_allclose(f(x).numpy(), g(x).numpy())
    assert f.stats["captures"] == 3 and not any(e.dynamic for e in f._cache)


def _branchy(x):
    if x.sum() > 0:          # data-dependent: a graph break
        return x * 2
    return x - 1


def test_graph_break_runs_eagerly_and_correctly():
    f = ember.compile(_branchy)
    a, b = ember.ones(3), -ember.ones(3)
    assert f(a).tolist() == [2.0] * 3
    assert f(b).tolist() == [-2.0] * 3     # the other branch: eager, not a stale graph
    assert f(a).tolist() == [2.0] * 3
    assert f.stats["replays"] == 0 and "Python boolean" in str(f._cache[0].breaks[0])


def test_item_breaks_and_fullgraph_raises_with_line():
    def g(x):
        return x * x.max().item()
    assert ember.compile(g)(ember.tensor([1.0, 3.0])).tolist() == [3.0, 9.0]
    with pytest.raises(Unsupported, match=r"Python number .*test_compile.py:\d+"):
        ember.compile(g, fullgraph=True)(ember.tensor([1.0, 3.0]))
    with pytest.raises(Unsupported, match="Python boolean"):
        ember.compile(_branchy, fullgraph=True)(ember.ones(2))


def test_gradients_and_create_graph_through_replay():
    def f(x, w):
        return (ember.tanh(x @ w) ** 2).sum()
    cf = ember.compile(f)
    rng = np.random.default_rng(0)
    xa, wa = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    cf(ember.tensor(xa, requires_grad=True), ember.tensor(wa, requires_grad=True))
    results = []
    for fn in (cf, f, None):
        if fn is None:
            x = torch.tensor(xa, requires_grad=True)
            w = torch.tensor(wa, requires_grad=True)
            y = (torch.tanh(x @ w) ** 2).sum()
            (gx,) = torch.autograd.grad(y, x, create_graph=True)
            (ggw,) = torch.autograd.grad(gx.sum(), w)
        else:
            x = ember.tensor(xa, requires_grad=True)
            w = ember.tensor(wa, requires_grad=True)
            y = fn(x, w)
            (gx,) = ember.autograd.grad(y, x, create_graph=True)
            (ggw,) = ember.autograd.grad(gx.sum(), w)
        results.append((gx.detach().numpy(), ggw.numpy()))
    assert cf.stats["replays"] == 1
    for r in results[1:]:
        np.testing.assert_allclose(results[0][0], r[0], rtol=1e-10)
        np.testing.assert_allclose(results[0][1], r[1], rtol=1e-10)


class _CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = nn.functional.max_pool2d(ember.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


class _LSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 8, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


class _Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.enc(x).mean(1))


_MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)), (8, 6)),
    "cnn": (_CNN, (8, 1, 8, 8)),
    "lstm": (_LSTM, (8, 4, 5)),
    "transformer": (_Transformer, (8, 4, 8)),
}


def _opt(model, name):
    if name in ("lstm", "transformer"):
        return ember.optim.Adam(model.parameters(), lr=0.01)
    return ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def _curve(model, step_model, steps, data, name="mlp"):
    opt = _opt(model, name)
    losses = []
    for i in range(steps):
        x, y = data[i % len(data)]
        opt.zero_grad()
        loss = nn.functional.cross_entropy(step_model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def _setup(name):
    make, shape = _MODELS[name]
    ember.manual_seed(1)
    eager = make()
    data = [(ember.randn(*shape), ember.randint(0, 3, (shape[0],))) for _ in range(3)]
    return eager, copy.deepcopy(eager), data, _curve(eager, eager, 100, data, name)


@pytest.mark.parametrize("name", list(_MODELS))
def test_compiled_training_equals_eager_loss_curve(name):
    eager, other, data, ref = _setup(name)
    cm = ember.compile(other)
    got = _curve(other, cm, 100, data, name)
    assert cm._compiled.stats["replays"] == 99
    plan = cm._compiled._cache[0].plan
    assert plan is not None                              # run as an array plan
    fused = [st.node.op for st in plan.steps if st.inplace is not None]
    assert fused == {"cnn": [], "transformer": ["Relu"]}.get(name, fused)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert ref[-1] < ref[0]
    for p, q in zip(eager.parameters(), other.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("name,numba", [(n, True) for n in _MODELS] +
                         [("mlp", False), ("lstm", False)])
def test_compiled_train_step_with_optimizer_inside(name, numba, monkeypatch):
    from ember.optim import _one_pass
    if numba:  # numba is a test dependency: this case must run the one-pass loops
        assert _one_pass.available()
    else:  # the NumPy update (without the ember[compile] extra)
        monkeypatch.setattr(_one_pass, "_kernels", {"sgd": None, "adam": None})
    eager, other, data, ref = _setup(name)
    opt = _opt(other, name)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(other(x), y)
        loss.backward()
        opt.step()
        return loss

    cstep = ember.compile(step, fullgraph=True)
    got = np.array([cstep(*data[i % 3]).item() for i in range(100)])
    assert cstep.stats == {"captures": 1, "replays": 99, "eager": 0}
    assert cstep._cache[0].train is not None and cstep._cache[0].plan is not None
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    for p, q in zip(eager.parameters(), other.parameters()):  # the same update, bit for bit
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_train_step_breaks_on_gradient_use_after_backward():
    ember.manual_seed(2)
    model = _MODELS["mlp"][0]()
    ref_model = copy.deepcopy(model)
    data = [(ember.randn(8, 6), ember.randint(0, 3, (8,))) for _ in range(3)]

    def stepper(m):
        opt = ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(x), y)
            loss.backward()
            for p in m.parameters():     # reads the gradients: not in the graph
                p.grad.mul_(0.5)
            opt.step()
            return loss
        return step
    cstep, ref = ember.compile(stepper(model)), stepper(ref_model)
    got = [cstep(*data[i % 3]).item() for i in range(6)]
    np.testing.assert_allclose(got, [ref(*data[i % 3]).item() for i in range(6)], rtol=1e-6)
    assert cstep.stats["replays"] == 0
    assert "used after backward()" in str(cstep._cache[0].breaks[0])
    with pytest.raises(Unsupported, match="after backward"):
        ember.compile(stepper(model), fullgraph=True)(*data[0])


def test_step_without_backward_breaks():
    m = _mlp()
    opt = ember.optim.SGD(m.parameters(), lr=0.1)

    def f(x):
        opt.zero_grad()
        return m(x)
    with pytest.raises(Unsupported, match="zero_grad"):
        ember.compile(f, fullgraph=True)(ember.randn(2, 6))


def test_create_graph_falls_back_to_eager_and_says_so():
    m = _mlp()
    cm = ember.compile(m)
    x = ember.randn(4, 6, requires_grad=True)
    cm(x)
    y = cm(x).pow(2).sum()
    with pytest.warns(UserWarning, match="create_graph=True .* runs eagerly"):
        (gx,) = ember.autograd.grad(y, x, create_graph=True)
    (ggx,) = ember.autograd.grad(gx.sum(), x)
    x2 = x.detach().requires_grad_()
    (gx2,) = ember.autograd.grad(m(x2).pow(2).sum(), x2, create_graph=True)
    (ggx2,) = ember.autograd.grad(gx2.sum(), x2)
    np.testing.assert_allclose(gx.detach().numpy(), gx2.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ggx.numpy(), ggx2.numpy(), rtol=1e-6)


def test_plan_gradients_equal_eager_and_torch_and_free_after_backward():
    ember.manual_seed(4)
    m = _MODELS["transformer"][0]()
    tm = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    tfc = torch.nn.Linear(8, 3)
    with torch.no_grad():
        for (_, p), (_, q) in zip(m.named_parameters(),
                                  list(tm.named_parameters()) + list(tfc.named_parameters())):
            q.copy_(torch.tensor(p.detach().numpy()))
    cm = ember.compile(m)
    x = ember.randn(2, 4, 8)
    cm(x)
    out = cm(x)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    out.pow(2).sum().backward(retain_graph=False)
    tout = tfc(tm(torch.tensor(x.numpy())).mean(1))
    tout.pow(2).sum().backward()
    for p, q in zip(m.parameters(), list(tm.parameters()) + list(tfc.parameters())):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.pow(2).sum().backward()


def test_options_and_errors():
    m = _mlp()
    assert ember.compile(m, disable=True) is m
    deco = ember.compile(mode="reduce-overhead")
    f = deco(lambda x: x + 1)
    assert f(ember.ones(2)).tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        ember.compile(m, mode="fast")
    with pytest.raises(NotImplementedError, match="backend"):
        ember.compile(m, backend="tvm")


def test_torch_compile_under_ember_run(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Linear(3, 2)\n"
        "cm = torch.compile(m)\n"
        "x = torch.randn(4, 3)\n"
        "assert (cm(x) - m(x)).abs().max().item() == 0\n"
        "cm(x)\n"
        "print(type(cm).__name__, cm._compiled.stats['replays'])\n")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    r = subprocess.run([sys.executable, "-m", "ember", "run", str(script)], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["OptimizedModule", "1"]


_SCALE = ember.tensor([2.0])


def _scaled(x):
    return x * _SCALE


def test_function_guards_its_modules_and_tensors():
    global _SCALE
    ember.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    f = ember.compile(lambda x: model(x))
    x = ember.ones(2, 4)
    f(x)
    model.eval()                       # the closed-over module's training flag is guarded
    np.testing.assert_array_equal(f(x).detach().numpy(), model(x).detach().numpy())
    assert f.stats["captures"] == 2
    g = ember.compile(_scaled)
    assert g(ember.ones(2)).tolist() == [2.0, 2.0]
    _SCALE = ember.tensor([5.0])      # a global tensor rebound: recapture, never stale
    try:
        assert g(ember.ones(2)).tolist() == [5.0, 5.0]
    finally:
        _SCALE = ember.tensor([2.0])
    assert g.stats["captures"] == 2


def test_module_python_attribute_is_guarded():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0

        def forward(self, x):
            return x * self.scale
    m = Scaled()
    cm = ember.compile(m)
    x = ember.ones(2)
    assert cm(x).tolist() == [2.0, 2.0] and cm(x).tolist() == [2.0, 2.0]
    cm.scale = 3.0                     # written through to _orig_mod
    assert m.scale == 3.0 and cm(x).tolist() == [3.0, 3.0]
    assert cm._compiled.stats["captures"] == 2


def test_in_place_changes_of_buffers_and_inputs_are_replayed():
    ember.manual_seed(5)
    # (momentum=None reads num_batches_tracked as a number: that call runs eagerly, see
    # test_module_db_compile.py; the same batch each time hid its wrong factor here)
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4, momentum=0.1))
    ref = copy.deepcopy(m)
    cm = ember.compile(m)
    x = ember.randn(6, 4)
    for _ in range(4):
        cm(x)
        ref(x)
    assert cm._compiled._cache[0].plan is not None
    for (k, a), (_, b) in zip(m.state_dict().items(), ref.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, err_msg=k)
    assert int(m[1].num_batches_tracked) == 4

    def double_(t):
        t.mul_(2)
        return t.sum()
    f = ember.compile(double_)
    for _ in range(3):
        a = ember.ones(3)
        assert f(a).item() == 6.0 and a.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(NotImplementedError, match="eval mode"):
        ember.export.export(m.train(), (x,))


# ----- buffers reused across steps, elementwise chains fused ----------------------------------
def _deep_mlp():
    ember.manual_seed(6)
    return nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 3))


def test_inference_buffers_shared_and_outputs_never_clobbered():
    m = _deep_mlp()
    cm = ember.compile(m)
    xs = [ember.randn(5, 6) for _ in range(4)] + [ember.randn(7, 6), ember.randn(5, 6)]
    with ember.no_grad():
        outs = [cm(x) for x in xs]        # kept by the user across calls
        plan = cm._compiled._cache[0].plan
        assert plan.mode == "infer"
        buffered = [st for st in plan.steps if st.color is not None]
        # the Linear outputs (each Tanh runs in place on them) share two blocks
        # (liveness: a layer reads one while writing the other), the result has none
        assert [st.node.op for st in buffered] == ["_Linear"] * 3
        assert len({st.color for st in buffered}) == 2
        assert plan.steps[-1].color is None
        for x, o in zip(xs, outs):
            np.testing.assert_array_equal(o.numpy(), m(x).numpy())


def test_outputs_that_view_a_buffer_are_not_buffered():
    lin = nn.Linear(4, 6)

    def f(x):
        h = lin(x)
        return h.reshape(-1), ember.relu(h) * 2
    cf = ember.compile(f)
    xs = [ember.randn(3, 4) for _ in range(3)]
    with ember.no_grad():
        got = [cf(x) for x in xs]
        assert cf._cache[0].plan.steps[0].color is None    # reaches the result
        for x, (a, b) in zip(xs, got):
            ra, rb = f(x)
            np.testing.assert_array_equal(a.numpy(), ra.numpy())
            np.testing.assert_array_equal(b.numpy(), rb.numpy())


def test_train_step_buffers_keep_user_held_losses_and_grads(monkeypatch):
    from ember._compile import _plan
    monkeypatch.setattr(_plan, "_ARENA_MIN_BYTES", 0)  # small arrays through the buffers
    ember.manual_seed(7)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                          nn.Linear(16, 3))
    ref_model = copy.deepcopy(model)
    data = [(ember.randn(8, 6, requires_grad=True), ember.randint(0, 3, (8,)))
            for _ in range(3)]

    def stepper(m):
        opt = ember.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss
        return step
    cstep, ref = ember.compile(stepper(model)), stepper(ref_model)
    losses, grads, xgrads = [], [], []
    for i in range(6):
        x, y = data[i % 3]
        x.grad = None
        losses.append(cstep(x, y))
        grads.append(model[0].weight.grad)       # zero_grad sets None: a new .grad each step
        xgrads.append(x.grad)                    # an input's gradient (through a buffer)
    assert cstep._cache[0].plan.mode == "train" and cstep.stats["replays"] == 5
    assert any(st.color is not None for st in cstep._cache[0].plan.steps)
    for i in range(6):
        x, y = data[i % 3]
        x.grad = None
        r = ref(x, y)
        assert losses[i].item() == r.item()
        np.testing.assert_array_equal(grads[i].numpy(), ref_model[0].weight.grad.numpy())
        np.testing.assert_array_equal(xgrads[i].numpy(), x.grad.numpy())


def test_deferred_backward_after_more_calls_uses_its_own_activations():
    m = _deep_mlp()
    cm = ember.compile(m)
    x1, x2, x3 = (ember.randn(4, 6) for _ in range(3))
    cm(x1)
    o1, o2, o3 = cm(x1), cm(x2), cm(x3)   # three forwards kept for one backward
    (o1.pow(2).sum() + o2.sum() + o3.sum()).backward()
    got = [p.grad.numpy().copy() for p in m.parameters()]
    m.zero_grad()
    (m(x1).pow(2).sum() + m(x2).sum() + m(x3).sum()).backward()
    for a, p in zip(got, m.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-6, atol=1e-7)


def _chain(x, y):
    return ember.relu((x + y) * 0.5 - 1) / (y - 0.25) - x


@pytest.mark.parametrize("numba", [True, False])
def test_fused_chain_equals_eager_bitwise(numba, monkeypatch):
    from ember._compile import _fused, _plan
    if not numba:   # without the ember[compile] extra: NumPy, op by op, into buffers
        monkeypatch.setattr(_fused, "_kernels", {"ready": True})
    monkeypatch.setattr(_plan, "_ARENA_MIN_BYTES", 0)  # small arrays through the buffers
    rng = np.random.default_rng(8)
    xa = rng.standard_normal((64, 33)).astype(np.float32)
    ya = rng.standard_normal((64, 33)).astype(np.float32)
    xa[0, :4] = [np.nan, -0.0, np.inf, -np.inf]
    ya[1, :3] = [0.25, -2.0, 1.0]                 # a division by zero: inf, as eagerly
    xa[1, 2] = -0.0
    x, y = ember.tensor(xa), ember.tensor(ya)
    cf = ember.compile(_chain)
    with ember.no_grad():
        for _ in range(3):
            got = cf(x, y)
    groups = cf._cache[0].plan.groups
    assert [len(g.steps) for g in groups] == ([7] if numba else [])
    np.testing.assert_array_equal(got.numpy(), _chain(x, y).numpy())
    assert np.signbit(got.numpy()).tolist() == np.signbit(_chain(x, y).numpy()).tolist()
    # ReLU of -0.0 and of NaNs of either sign, inside a chain
    z = ember.tensor(np.array([-0.0, 0.0, np.nan, -np.nan, 1.0, -1.0] * 3, np.float32))

    def relu_chain(a, b):
        return ember.relu(a * b)
    cr = ember.compile(relu_chain)
    with ember.no_grad():
        for _ in range(3):
            r = cr(z, ember.ones(18))
    assert len(cr._cache[0].plan.groups) == (1 if numba else 0)
    want = relu_chain(z, ember.ones(18)).numpy()
    np.testing.assert_array_equal(r.numpy(), want)
    assert np.signbit(r.numpy()).tolist() == np.signbit(want).tolist()

    # training through the chain: the kept intermediates feed the backward
    def step(x, y):
        loss = _chain(x, y).nan_to_num().sum()
        loss.backward()
        return loss
    results = []
    for f in (ember.compile(step), step):
        xs, ys = x.clone().requires_grad_(), y.clone().requires_grad_()
        for _ in range(3):
            xs.grad = ys.grad = None
            loss = f(xs, ys)
        if f is not step:
            plan = f._cache[0].plan
            assert plan.mode == "train"
            assert [len(g.steps) for g in plan.groups] == ([7] if numba else [])
        results.append((loss.item(), xs.grad.numpy(), ys.grad.numpy()))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_array_equal(results[0][2], results[1][2])


def test_fused_chain_dynamic_batch_and_float64():
    cf = ember.compile(_chain)
    with ember.no_grad():
        for shape, dt in (((4, 5), ember.float32), ((9, 5), ember.float32),
                          ((4, 5), ember.float64), ((4, 5), ember.float32)):
            x, y = ember.randn(*shape, dtype=dt), ember.randn(*shape, dtype=dt)
            np.testing.assert_array_equal(cf(x, y).numpy(), _chain(x, y).numpy())


class _Residual(nn.Module):
    def __init__(self):
        super().__init__()
        ember.manual_seed(9)
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        u = self.b(h) * 0.5          # h is read again below: its block stays live
        v = self.c(u) - h
        return (v + u) / (h * h + 1)


def test_liveness_keeps_values_read_later():
    m = _Residual()
    cm = ember.compile(m)
    with ember.no_grad():
        xs = [ember.randn(4, 8) for _ in range(3)]
        got = [cm(x) for x in xs]
        plan = cm._compiled._cache[0].plan
        assert plan.mode == "infer"
        # b's output is dead once scaled: c's output reuses its block, never h's
        assert [st.color for st in plan.steps if st.node.op == "_Linear"] == [0, 1, 1]
        for x, o in zip(xs, got):
            np.testing.assert_array_equal(o.numpy(), m(x).numpy())
    for flag in (True, False):   # the switch: the same values without buffers
        config.reuse_buffers = flag
        try:
            with ember.no_grad():
                np.testing.assert_array_equal(cm(xs[0]).numpy(), m(xs[0]).numpy())
        finally:
            config.reuse_buffers = True


def test_train_step_with_python_number_operands_equals_eager():
    def f(x):
        return ((x * 0.1) ** 2).sum() + (3 - x * 0.3).mean()

    def step(x):
        loss = f(x)
        loss.backward()
        return loss
    cs = ember.compile(step)
    x = ember.randn(5, 7, requires_grad=True)
    for _ in range(3):
        x.grad = None
        loss = cs(x)
    plan = cs._cache[0].plan
    assert plan.steps[0].color is not None and plan.steps[0].bvjp is not None  # x * 0.1
    got = x.grad.numpy().copy()
    x.grad = None
    ref = f(x)
    ref.backward()
    assert loss.item() == ref.item()
    np.testing.assert_array_equal(got, x.grad.numpy())


def _cell_loop(m, cell, xs, h):
    for t in range(xs.shape[0]):
        h = cell(xs[t], h)
    return h


def test_python_loop_of_a_compiled_cell_matches_torch_and_recompiles_on_new_sizes():
    # a cell compiled on its own and called in a Python loop: one entry for the first
    # call (h without grad), one for the rest (h from the previous call); the guards
    # remembered per exact guard set must still send each call to its own entry
    ember.manual_seed(0)
    cell = nn.RNNCell(5, 7)
    tcell = torch.nn.RNNCell(5, 7)
    with torch.no_grad():
        for (_, p), (_, tp) in zip(cell.named_parameters(), tcell.named_parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy()))
    cc = ember.compile(cell)
    rng = np.random.default_rng(0)
    for batch in (3, 3, 4, 3):
        xs_np = rng.standard_normal((6, batch, 5), dtype=np.float32)
        cell.zero_grad()
        tcell.zero_grad()
        h = _cell_loop(ember, cc, ember.tensor(xs_np), ember.zeros(batch, 7))
        th = _cell_loop(torch, tcell, torch.from_numpy(xs_np), torch.zeros(batch, 7))
        (h ** 2).mean().backward()
        (th ** 2).mean().backward()
        np.testing.assert_allclose(h.detach().numpy(), th.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        for (_, p), (_, tp) in zip(cell.named_parameters(), tcell.named_parameters()):
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4,
                                       atol=1e-6)
    st = cc._compiled.stats
    # batch 4 is a new size: its calls were captured again (then made symbolic), never
    # replayed through a batch-3 entry
    assert st["captures"] >= 3 and st["eager"] == 0
    assert st["captures"] + st["replays"] == 4 * 6
    # a changed guard (eval mode) is not answered from what was remembered
    cell.eval()
    before = st["captures"]
    cc(ember.randn(3, 5), ember.zeros(3, 7))
    assert cc._compiled.stats["captures"] == before + 1


def test_complex_values_on_the_gradient_path():
    """A compiled function whose gradient runs through complex values is replayed op by
    op (the plan's array gradient kernels are real ones): its output requires grad on
    every call, and the gradients are torch's (the plan dropped the graph from the second
    call on: a silent loss of the gradient once added to another loss)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3))
    w = rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))

    def f(m, x, w):
        y = m.tanh(x @ w)
        return (y * y.conj()).real.sum() + (y.abs() * 2).sum()
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    tg = torch.autograd.grad(f(torch, tx, tw), [tx, tw])
    cf = ember.compile(lambda x, w: f(ember, x, w))
    for _ in range(3):
        ex, ew = (ember.tensor(a, requires_grad=True) for a in (x, w))
        out = cf(ex, ew)
        assert out.requires_grad
        (out + ember.zeros((), dtype=ember.float64, requires_grad=True)).backward()
        for a, b in zip((ex.grad, ew.grad), tg):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-13)
