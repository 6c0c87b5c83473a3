"""nll_loss's second derivative: by the input it is zeros (the first gradient does not
depend on the input), not None, and by the output gradient it is the loss of the incoming
gradient; the first gradient's node is PyTorch's ``NllLoss(2D)BackwardBackward0``."""
import numpy as np
import pytest
import torch

import ember

CASES = [((3, 5), (3,)), ((5,), ()), ((2, 5, 3, 4), (2, 3, 4))]


def _second_order(m, shape, tshape, reduction, weighted, leaf_v):
    x = m.tensor(np.linspace(-1, 1, int(np.prod(shape))).reshape(shape), dtype=m.float64,
                 requires_grad=True)
    t = m.tensor(np.arange(int(np.prod(tshape))).reshape(tshape) % 5)
    w = m.tensor([1.0, 2, 3, 4, 5], dtype=m.float64) if weighted else None
    # through log_softmax too: the zeros reach the leaf through another node
    out = m.nn.functional.nll_loss(x.log_softmax(0 if len(shape) == 1 else 1), t,
                                   weight=w, reduction=reduction)
    v = m.ones_like(out).mul(1.5).requires_grad_(leaf_v)
    g, = m.autograd.grad(out, x, v, create_graph=True)
    s = (g * m.tensor(np.cos(np.arange(g.numel())).reshape(g.shape))).sum()
    inputs = (x, v) if leaf_v else (x,)
    return g, m.autograd.grad(s, inputs, allow_unused=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", CASES, ids=["2d", "1d", "4d"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_double_backward_matches_torch(reduction, case, weighted):
    shape, tshape = case
    tg, tgrads = _second_order(torch, shape, tshape, reduction, weighted, True)
    eg, egrads = _second_order(ember, shape, tshape, reduction, weighted, True)
    for e, t in zip(egrads, tgrads):
        assert e is not None  # was None for the input
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-12,
                                   atol=1e-15)


@pytest.mark.parametrize("case", CASES, ids=["2d", "1d", "4d"])
def test_nll_loss_on_leaf_second_order_zeros(case):
    # the input a leaf of nll_loss itself: zeros of its shape, as torch's, and its node
    shape, tshape = case
    names = []
    for m in (torch, ember):
        x = m.tensor(np.linspace(-1, 1, int(np.prod(shape))).reshape(shape), requires_grad=True)
        t = m.tensor(np.arange(int(np.prod(tshape))).reshape(tshape) % 5)
        g, = m.autograd.grad(m.nn.functional.nll_loss(x, t), x, create_graph=True)
        gx, = m.autograd.grad((g * g).sum(), x, allow_unused=True)
        assert gx is not None and gx.shape == x.shape and not gx.any()
        names.append(g.grad_fn.name())
    assert names[0] == names[1]
