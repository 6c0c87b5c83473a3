"""A compiled plan runs as generated straight-line functions (``_compile/_codegen.py``):
one per way of running (forward with or without the tape and the arena's buffers,
backward with or without them), each giving eager ember's values to the bit and
torch's to rounding, its source readable through ``Plan.sources()``. The leaves'
gradients a backward hands out never share memory (``a + b`` gives both one array)."""
import copy
import linecache

import numpy as np
import pytest
import torch

import ember


def _mlp(m, width):
    nn = m.nn
    return nn.Sequential(nn.Linear(12, width), nn.ReLU(), nn.Linear(width, width), nn.Tanh(),
                         nn.Linear(width, 5))


def _state_of(net):
    return {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in net.state_dict().items()}


def _train(m, net, x, y, compiled, steps=4):
    opt = m.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = m.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss
    run = m.compile(step) if compiled else step
    losses = [run(x).detach().numpy().copy() for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in net.parameters()], run


# (batch, width): small temporaries run on the heap, large ones in the arena's buffers
@pytest.mark.parametrize("batch,width", [(7, 16), (64, 8), (512, 256)])
def test_generated_training_step_equals_eager_bitwise_and_torch(batch, width):
    ember.manual_seed(0)
    net = _mlp(ember, width)
    ref = copy.deepcopy(net)
    tnet = _mlp(torch, width)
    tnet.load_state_dict(_state_of(net))
    rng = np.random.default_rng(batch)
    xa = rng.standard_normal((batch, 12)).astype(np.float32)
    xa[0, 0] = -0.0
    ya = rng.integers(0, 5, batch)
    x, y = ember.tensor(xa), ember.tensor(ya)
    got, params, run = _train(ember, net, x, y, True, steps=5)
    want, want_params, _ = _train(ember, ref, x, y, False, steps=5)
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()
    for a, b in zip(params, want_params):
        assert a.tobytes() == b.tobytes()
    tl, tp, _ = _train(torch, tnet, torch.tensor(xa), torch.tensor(ya), False, steps=5)
    np.testing.assert_allclose(np.array(got), np.array([t for t in tl]), rtol=1e-5, atol=1e-6)
    for a, b in zip(params, tp):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    plan = run._cache[0].plan
    sources = plan.sources()
    assert (True, True) in sources or (False, True) in sources
    assert any(k[0] == "backward" for k in sources)
    for text in sources.values():
        assert text.startswith(("def forward(", "def backward("))
        compile(text, "<check>", "exec")  # readable Python, as shown


def test_each_way_of_running_a_compiled_module_has_its_function():
    ember.manual_seed(1)
    net = _mlp(ember, 256)
    ref = copy.deepcopy(net)
    cm = ember.compile(net)
    x = ember.tensor(np.random.default_rng(2).standard_normal((300, 12)).astype(np.float32))
    for _ in range(3):
        with ember.no_grad():  # inference: no tape
            out = cm(x)
        with ember.no_grad():
            want = ref(x)
        assert out.numpy().tobytes() == want.numpy().tobytes()
    for _ in range(3):  # the forward kept for a later backward: the tape, no buffers
        net.zero_grad()
        ref.zero_grad()
        cm(x).sum().backward()
        ref(x).sum().backward()
        for p, q in zip(net.parameters(), ref.parameters()):
            assert p.grad.numpy().tobytes() == q.grad.numpy().tobytes()
    # (grad mode is guarded: an entry, and a plan, per mode)
    inference, training = [set(e.plan.sources()) for e in cm._compiled._cache]
    assert inference == {(True, False)}  # buffers, no tape
    # the tape without forward buffers; the backward's temporaries in the arena (its
    # activations are over 128 KiB)
    assert {(False, True), ("backward", True)} <= training


def test_a_generated_function_shows_its_lines_in_a_traceback():
    ember.manual_seed(0)
    net = _mlp(ember, 8)
    cm = ember.compile(net)
    x = ember.randn(6, 12)
    cm(x)
    cm(x)
    plan = cm._compiled._cache[0].plan
    fn = next(iter(plan.generated.values()))
    filename = fn.__code__.co_filename
    assert filename.startswith("<ember plan")
    assert linecache.getline(filename, 1).startswith(("def forward(", "def backward("))


def _shared_operands(m):
    a = m.nn.Parameter(m.ones(4, 3))
    b = m.nn.Parameter(m.ones(4, 3) * 2)
    c = m.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    return a, b, c


def test_leaves_given_one_array_get_their_own_grad_memory():
    a, b, c = _shared_operands(ember)
    opt = ember.optim.SGD([a, b], lr=0.1)

    @ember.compile
    def step():
        opt.zero_grad()
        loss = ((a + b) * c).sum()
        loss.backward()
        return loss
    ta, tb, tc = _shared_operands(torch)
    ((ta + tb) * tc).sum().backward()
    for _ in range(3):
        step()
        assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
        np.testing.assert_array_equal(a.grad.numpy(), ta.grad.numpy())
        np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())
    a.grad.zero_()  # an in-place change to one leaves the other
    np.testing.assert_array_equal(b.grad.numpy(), tb.grad.numpy())


def test_a_compiled_module_hands_out_distinct_leaf_gradients():
    class Pair(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, _ = _shared_operands(ember)

        def forward(self, x):
            return (self.a + self.b) * x

    mod = Pair()
    cm = ember.compile(mod)
    x = ember.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    for _ in range(3):
        mod.zero_grad()
        cm(x).sum().backward()
        assert not np.shares_memory(mod.a.grad.numpy(), mod.b.grad.numpy())
        np.testing.assert_array_equal(mod.a.grad.numpy(), x.numpy())
        np.testing.assert_array_equal(mod.b.grad.numpy(), x.numpy())
