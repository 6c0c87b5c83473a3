"""torch.utils.checkpoint against torch: gradients, recomputation, RNG replay, errors."""
import warnings

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as tcp

import ember
import ember.utils.checkpoint as ecp

LIBS = [(ember, ecp), (torch, tcp)]


def _net(m):
    m.manual_seed(0)
    return m.nn.Sequential(m.nn.Linear(4, 8), m.nn.Dropout(0.5), m.nn.Tanh(),
                           m.nn.Linear(8, 8), m.nn.Dropout(0.3), m.nn.Linear(8, 2))


def _close(e, t, tol=1e-6):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradients_and_dropout_masks_match_torch(reentrant):
    res = []
    for m, cp in LIBS:
        net = _net(m)
        x = m.randn(5, 4, requires_grad=True)
        calls = [0]

        def f(inp, net=net, calls=calls):
            calls[0] += 1
            return net(inp)
        m.manual_seed(1)
        out = cp.checkpoint(f, x, use_reentrant=reentrant)
        out.pow(2).sum().backward()
        after = m.rand(3)  # the generator continues as if nothing was replayed
        res.append((out, x.grad, net[0].weight.grad, net[5].bias.grad, after, calls[0]))
    for e, t in zip(*res):
        if isinstance(t, int):
            assert e == t == 2  # forward and one recomputation
        else:
            _close(e, t)


@pytest.mark.parametrize("reentrant", [True, False])
def test_plain_call_gradients_equal_checkpointed(reentrant):
    net = _net(ember)
    net.eval()
    x = ember.randn(3, 4, requires_grad=True)
    net(x).sum().backward()
    plain = [p.grad.clone() for p in net.parameters()] + [x.grad.clone()]
    net.zero_grad()
    x.grad = None
    ecp.checkpoint(net, x, use_reentrant=reentrant).sum().backward()
    for a, b in zip(plain, [p.grad for p in net.parameters()] + [x.grad]):
        _close(a, b, 1e-7)


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint_sequential_matches_torch(reentrant):
    res = []
    for m, cp in LIBS:
        net = _net(m)
        x = m.randn(5, 4, requires_grad=True)
        m.manual_seed(2)
        out = cp.checkpoint_sequential(net, 3, x, use_reentrant=reentrant)
        out.sum().backward()
        res.append((out, x.grad, net[3].weight.grad))
    for e, t in zip(*res):
        _close(e, t)


def test_non_reentrant_kwargs_grad_and_double_backward():
    res = []
    for m, cp in LIBS:
        y = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
        w = m.tensor([1.5, 2.0, -0.5], requires_grad=True)
        out = cp.checkpoint(lambda t, scale, w=w: (t ** 3 * w).sum() * scale, y,
                            use_reentrant=False, scale=2.0)
        g, gw = m.autograd.grad(out, (y, w), create_graph=True)
        h, = m.autograd.grad(g.sum(), y)
        a, b = cp.checkpoint(lambda t: (t * 2, t.sum()), y, use_reentrant=False)
        (a.sum() + b).backward()
        res.append((out, g, gw, h, y.grad))
    for e, t in zip(*res):
        _close(e, t)


def test_errors_and_warnings_match_torch():
    for m, cp in LIBS:
        x = m.randn(3, requires_grad=True)
        out = cp.checkpoint(lambda t: t * 2, x, use_reentrant=True)
        with pytest.raises(RuntimeError, match="use_reentrant=True, torch.utils.checkpoint is"):
            m.autograd.grad(out.sum(), x)
        with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
            cp.checkpoint(lambda t, scale: t, x, use_reentrant=True, scale=2)
        with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
            cp.checkpoint(lambda t: t * 2, x)
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
            out = cp.checkpoint(lambda t: t * 2, m.ones(2), use_reentrant=True)
        assert not out.requires_grad
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with m.no_grad():
                assert not cp.checkpoint(lambda t: t * 2, x, use_reentrant=False).requires_grad


def test_non_reentrant_reaches_parameters_without_grad_inputs():
    res = []
    for m, cp in LIBS:
        net = _net(m)
        net.eval()
        x = m.randn(5, 4)
        cp.checkpoint(net, x, use_reentrant=False).sum().backward()
        res.append([p.grad for p in net.parameters()])
    for e, t in zip(*res):
        _close(e, t)
