"""A compiled training step (a function of no arguments, or of tensors only) called
again takes its last call's cache entry without computing its guard key when every
object the guards read is the same: the function's closure and globals, the modules
found there (their attributes, parameters, buffers, children), the grad mode and the
tensor arguments. Any change among them still recaptures or picks the right entry,
after many calls, and the steps keep eager ember's values to the bit and torch's to
rounding."""
import copy

import numpy as np
import torch

import ember


def _mlp(m):
    nn = m.nn
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))


def _data(m):
    rng = np.random.default_rng(1)
    return (m.tensor(rng.standard_normal((8, 12)).astype(np.float32)),
            m.tensor(rng.integers(0, 5, 8)))


def _step_of(m, model, opt, x, y):
    def step():
        opt.zero_grad()
        loss = m.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def test_repeated_step_equals_eager_and_torch(monkeypatch):
    from ember._compile._compiled import CompiledFunction
    keys = []
    full_key = CompiledFunction._guard_key
    monkeypatch.setattr(CompiledFunction, "_guard_key",
                        lambda self, *a: keys.append(1) or full_key(self, *a))
    ember.manual_seed(0)
    net = _mlp(ember)
    ref = copy.deepcopy(net)
    tnet = _mlp(torch)
    tnet.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                          for k, v in net.state_dict().items()})
    x, y = _data(ember)
    tx, ty = torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())
    comp = ember.compile(_step_of(ember, net, ember.optim.SGD(net.parameters(), lr=0.1,
                                                              momentum=0.9), x, y))
    eager = _step_of(ember, ref, ember.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9),
                     x, y)
    tstep = _step_of(torch, tnet, torch.optim.SGD(tnet.parameters(), lr=0.1, momentum=0.9),
                     tx, ty)
    for _ in range(6):
        a, b, t = comp().item(), eager().item(), tstep().item()
        assert a == b
        np.testing.assert_allclose(a, t, rtol=1e-5)
    for p, q, r in zip(net.parameters(), ref.parameters(), tnet.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
        np.testing.assert_allclose(p.detach().numpy(), r.detach().numpy(), rtol=1e-4,
                                   atol=1e-6)
    assert comp.stats["captures"] == 1 and comp.stats["eager"] == 0
    assert len(keys) == 2  # the capture and the first replay; then the last call's entry


def test_step_guards_fire_after_repeated_calls():
    ember.manual_seed(0)
    net = _mlp(ember)
    x, y = _data(ember)
    holder = {"model": net}
    model = net

    def step():
        return ember.nn.functional.cross_entropy(model(x), y)

    comp = ember.compile(step)
    for _ in range(3):
        assert comp().item() == step().item()
    n = comp.stats["captures"]
    # the closed-over module's training flag, a child's attribute, a parameter
    net.eval()
    assert comp().item() == step().item()
    net.train()
    assert comp().item() == step().item()
    net[0].weight = ember.nn.Parameter(ember.randn(16, 12))
    assert comp().item() == step().item()
    assert comp().item() == step().item()
    # the closure rebound to another module
    model = holder["model"] = _mlp(ember)
    assert comp().item() == step().item()
    assert comp().item() == step().item()
    # grad mode
    with ember.no_grad():
        out = comp()
    assert not out.requires_grad
    assert comp().requires_grad
    assert comp.stats["captures"] > n and comp.stats["eager"] == 0



def test_step_guards_see_renamed_and_rebound_module_state():
    """The repeated-call check compares every module's dicts at once: a child moved to
    another name with the same object, a buffer added, a parameter's requires_grad and
    a module's ``__dict__`` replaced by an equal copy each take the full guards (the
    result stays eager's)."""
    ember.manual_seed(0)
    net = _mlp(ember)
    x, y = _data(ember)

    def step():
        return ember.nn.functional.cross_entropy(net(x), y)

    comp = ember.compile(step)

    def shortcut():  # the entry the repeated-call check would take, or None
        return comp._same_as_last(()) if comp._last else None
    for _ in range(3):
        assert comp().item() == step().item()
    assert shortcut() is comp._last[0][0]
    # the same objects under other names (a child re-registered under a new key)
    child = net._modules.pop("2")
    net._modules["two"] = child
    assert shortcut() is None
    assert comp().item() == step().item()
    net._modules["2"] = net._modules.pop("two")
    assert comp().item() == step().item()
    net[0].register_buffer("extra", ember.zeros(1))
    assert shortcut() is None
    assert comp().item() == step().item()
    net[0].weight.requires_grad_(False)
    assert shortcut() is None
    assert comp().item() == step().item()
    net[0].weight.requires_grad_(True)
    net[1].__dict__ = dict(net[1].__dict__)
    assert shortcut() is None
    for _ in range(2):
        assert comp().item() == step().item()
    assert comp.stats["eager"] == 0


_W = ember.ones(5)


def _weighted():
    return (_W * 2).sum()


def test_step_reads_its_own_globals_afresh():
    global _W
    comp = ember.compile(_weighted)
    for _ in range(3):
        assert comp().item() == 10.0
    first = _W
    _W = ember.full((5,), 3.0)
    try:
        assert comp().item() == 30.0
        assert comp().item() == 30.0
    finally:
        _W = first
    assert comp().item() == 10.0      # the first entry again, from the last two calls
    assert comp.stats["captures"] == 2


def _adam_run(m, compiled, eps):
    m.manual_seed(0)
    net = m.nn.Linear(64, 32)
    with m.no_grad():
        net.weight.copy_(m.tensor(np.linspace(-1, 1, 64 * 32, dtype=np.float32)
                                  .reshape(32, 64)))
        net.bias.zero_()
    idle = m.nn.Parameter(m.ones(40))   # its gradient is zero: 0 / (0 + eps)
    x = m.tensor(np.random.default_rng(2).standard_normal((16, 64)).astype(np.float32))
    opt = m.optim.Adam(list(net.parameters()) + [idle], lr=1e-2, eps=eps)

    def step():
        opt.zero_grad()
        loss = (net(x) ** 2).mean() + (idle * 0.0).sum()
        loss.backward()
        opt.step()
        return loss
    run = m.compile(step) if compiled else step
    for _ in range(3):
        run()
    return net.weight.detach().numpy().copy(), idle.detach().numpy().copy()


def test_adam_one_pass_divides_as_numpy():
    # Adam's one-pass loop (numba) divides as IEEE does: 0 / 0 is NaN as in eager
    # ember's NumPy update and in torch, never an exception
    from ember.optim import _one_pass
    assert _one_pass.available()
    for eps in (1e-8, 0.0):
        (w, idle), (rw, ridle) = _adam_run(ember, True, eps), _adam_run(ember, False, eps)
        np.testing.assert_array_equal(w, rw)
        np.testing.assert_array_equal(idle, ridle)
        tw, tidle = _adam_run(torch, False, eps)
        np.testing.assert_allclose(w, tw, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(np.isnan(idle), np.isnan(tidle))
        assert np.isnan(idle).all() == (eps == 0.0)


def _sgd_run(compiled, steps=5, **kw):
    ember.manual_seed(0)
    net = _mlp(ember)
    state = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    x, y = _data(ember)
    step = _step_of(ember, net, ember.optim.SGD(net.parameters(), lr=0.1, **kw), x, y)
    run = ember.compile(step) if compiled else step
    for _ in range(steps):
        run()
    return [p.detach().numpy().copy() for p in net.parameters()], \
        [p._version for p in net.parameters()], state


def test_sgd_group_pass_equals_eager_and_torch(monkeypatch):
    from ember.optim import _one_pass
    used = []
    group = _one_pass.sgd_group
    monkeypatch.setattr(_one_pass, "sgd_group", lambda *a: used.append(group(*a)) or used[-1])
    for kw in ({"momentum": 0.9}, {}, {"momentum": 0.9, "weight_decay": 1e-2},
               {"momentum": 0.9, "nesterov": True}):
        used.clear()
        got, versions, state = _sgd_run(True, **kw)
        ref, ref_versions, _ = _sgd_run(False, **kw)
        # the plain cases (momentum after its first step, or none) take the group pass
        assert any(used) == (kw in ({"momentum": 0.9}, {}))
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)
        assert versions == ref_versions
        tnet = _mlp(torch)
        tnet.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        tx, ty = (torch.from_numpy(t.numpy()) for t in _data(ember))
        topt = torch.optim.SGD(tnet.parameters(), lr=0.1, **kw)
        tstep = _step_of(torch, tnet, topt, tx, ty)
        for _ in range(5):
            tstep()
        for a, t in zip(got, tnet.parameters()):
            np.testing.assert_allclose(a, t.detach().numpy(), rtol=1e-4, atol=1e-6)


def _adam_step_run(compiled, opt_cls, **kw):
    ember.manual_seed(0)
    net = _mlp(ember)
    state = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    x, y = _data(ember)
    opt = opt_cls(net.parameters(), lr=1e-2, **kw)
    run = _step_of(ember, net, opt, x, y)
    run = ember.compile(run) if compiled else run
    for _ in range(5):
        run()
    steps = [float(opt.state[p]["step"]) for p in net.parameters()]
    return [p.detach().numpy().copy() for p in net.parameters()], \
        [p._version for p in net.parameters()], steps, state


def test_adam_group_pass_equals_eager_and_torch(monkeypatch):
    from ember.optim import _one_pass
    used = []
    group = _one_pass.adam_group
    monkeypatch.setattr(_one_pass, "adam_group", lambda *a: used.append(group(*a)) or used[-1])
    cases = [("Adam", {}), ("Adam", {"betas": (0.6, 0.95)}), ("AdamW", {}),
             ("Adam", {"amsgrad": True}), ("Adam", {"weight_decay": 1e-2})]
    for name, kw in cases:
        used.clear()
        got, versions, steps, state = _adam_step_run(True, getattr(ember.optim, name), **kw)
        ref, ref_versions, ref_steps, _ = _adam_step_run(False, getattr(ember.optim, name),
                                                         **kw)
        # the plain cases (no amsgrad, no weight decay; AdamW decays by default)
        assert any(used) == (name == "Adam" and "amsgrad" not in kw and
                             "weight_decay" not in kw)
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)
        assert versions == ref_versions and steps == ref_steps == [5.0] * len(steps)
        tnet = _mlp(torch)
        tnet.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        tx, ty = (torch.from_numpy(t.numpy()) for t in _data(ember))
        topt = getattr(torch.optim, name)(tnet.parameters(), lr=1e-2, **kw)
        tstep = _step_of(torch, tnet, topt, tx, ty)
        for _ in range(5):
            tstep()
        for a, t in zip(got, tnet.parameters()):
            np.testing.assert_allclose(a, t.detach().numpy(), rtol=1e-4, atol=1e-5)
