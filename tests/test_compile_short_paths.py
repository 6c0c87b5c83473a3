"""A compiled plan's short paths give eager ember's values to the bit (and torch's to
rounding): a primitive recorded with its arguments as they are runs in the forward loop
itself (``plain`` steps), with the arena's buffers and without, training and inference;
the backward calls an op class's declared vjp directly (``declared``). Steps they must
not cover (a call above the primitives, several outputs, a ReLU fused in place, an op whose
gradient is its Tensor-level ``backward``) keep the general path."""
import copy

import numpy as np
import pytest
import torch

import ember


def _net(m):
    nn = m.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(12, 16)
            self.b = nn.Linear(16, 8)
            self.c = nn.Linear(16, 5)

        def forward(self, x):
            h = self.a(x).relu()                    # ReLU in place over the product
            u, v = h.chunk(2, 1)                    # one step, two outputs
            j = m.cat([v, u * 0.5], 1).view(x.size(0), -1)   # a call above primitives
            z = self.b(j).tanh() + self.b(h).exp()  # tanh, exp: Tensor-level backward
            # a max pool keeps where each maximum was (its state, per call)
            z = z + m.nn.functional.max_pool1d(h.unsqueeze(1), 2).squeeze(1)
            return self.c(m.cat([z, z], 1)).log_softmax(1)
    return Net()


def _train(m, net, x, y, compiled, steps=4):
    opt = m.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = m.nn.functional.nll_loss(net(x), y)
        loss.backward()
        opt.step()
        return loss
    run = m.compile(step) if compiled else step
    losses = [run(x).item() for _ in range(steps)]
    return losses, [p.detach().numpy().copy() for p in net.parameters()], run


@pytest.mark.parametrize("batch,large", [(6, False), (4096, True)])
def test_plain_steps_and_declared_vjps_equal_eager_bitwise(batch, large):
    ember.manual_seed(0)
    net = _net(ember)
    ref = copy.deepcopy(net)
    state = {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in
             net.state_dict().items()}
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((batch, 12)).astype(np.float32)
    ya = rng.integers(0, 5, batch)
    got, params, run = _train(ember, net, ember.tensor(xa), ember.tensor(ya), True)
    want, ref_params, _ = _train(ember, ref, ember.tensor(xa), ember.tensor(ya), False)
    assert run.stats == {"captures": 1, "replays": 3, "eager": 0}
    plan = run._cache[0].plan
    assert list(plan.train_large.values()) == [large]  # the heap, or the arena
    for st in plan.steps:
        assert st.plain == (st.prim and not st.nested and not st.multi and
                            st.inplace is None)
    ops = {st.node.op: st for st in plan.steps}
    assert not ops["Split"].plain and ops["Split"].multi
    assert not ops["Relu"].plain and ops["Relu"].inplace is not None
    assert not ops["view"].plain and not ops["view"].prim
    assert {"_Linear", "Mul", "Cat", "Add", "LogSoftmax", "NllLoss"} <= \
        {st.node.op for st in plan.steps if st.plain}
    declared = {st.node.op for st in plan.grad_steps if st.declared is not None}
    assert {"_Linear", "LogSoftmax"} <= declared
    assert ops["Exp"].grad and ops["Exp"].declared is None   # its Tensor-level backward
    assert got == want
    for p, q in zip(params, ref_params):
        np.testing.assert_array_equal(p, q)
    tnet = _net(torch)
    tnet.load_state_dict(state)
    t_losses, t_params, _ = _train(torch, tnet, torch.from_numpy(xa), torch.from_numpy(ya),
                                   False)
    np.testing.assert_allclose(got, t_losses, rtol=1e-5)
    for p, q in zip(params, t_params):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch", [6, 4096])
def test_plain_steps_in_inference_equal_eager_bitwise(batch):
    ember.manual_seed(1)
    net = _net(ember)
    x = ember.tensor(np.random.default_rng(1).standard_normal((batch, 12))
                     .astype(np.float32))
    cm = ember.compile(net)
    with ember.no_grad():
        want = net(x).numpy()
        outs = [cm(x).numpy().copy() for _ in range(3)]
    plan = cm._compiled._cache[0].plan
    assert plan.mode == "infer" and [st for st in plan.steps if st.plain]
    for o in outs:
        np.testing.assert_array_equal(o, want)
    tnet = _net(torch)
    tnet.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in
                          net.state_dict().items()})
    with torch.no_grad():
        np.testing.assert_allclose(outs[-1], tnet(torch.from_numpy(x.numpy())).numpy(),
                                   rtol=1e-5, atol=1e-5)


def test_plain_step_keeps_its_state_per_call_for_a_later_backward():
    """A compiled module called twice before either backward: each call's tape keeps
    its own copy of what the op's forward left (a plain step reuses one op object)."""
    ember.manual_seed(2)
    net = _net(ember)
    ref = copy.deepcopy(net)
    cm = ember.compile(net)
    rng = np.random.default_rng(2)
    xs = [ember.tensor(rng.standard_normal((6, 12)).astype(np.float32)) for _ in range(3)]
    for model in (cm, ref):
        model.zero_grad()
        outs = [model(x).sum() for x in xs]       # every tape pending at once
        for o in reversed(outs):
            o.backward()
    for (n, p), q in zip(net.named_parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy(), err_msg=n)
