"""A compiled training step gives eager ember's values to the bit (docs/compile.md), and
a gradient made with a graph (``create_graph``) has the bits of the one made without:
the bias gradients of ``linear`` in its three graphs (an ``Addmm`` over a matrix, over
a C-ordered input's rows, a product and a broadcast ``add`` for other inputs) are summed
by the same kernel on every path. Checked with and without MKL, and against torch."""
import numpy as np
import pytest
import torch

import ember
from ember.backend import gemm

nn = ember.nn


class _Attention(nn.Module):
    def __init__(self, lib, batch_first):
        super().__init__()
        self.m = lib.nn.MultiheadAttention(32, 4, batch_first=batch_first)

    def forward(self, x):
        return self.m(x, x, x, need_weights=False)[0]


def _model(lib, name):
    lnn = lib.nn
    if name == "encoder_layer":
        return lnn.TransformerEncoderLayer(32, 4, dim_feedforward=48, dropout=0.0,
                                           batch_first=True)
    if name == "mlp":
        return lnn.Sequential(lnn.Linear(20, 24), lnn.ReLU(), lnn.Linear(24, 5))
    if name == "linear_3d":
        return lnn.Linear(20, 7)
    raise KeyError(name)


_INPUTS = {"encoder_layer": (6, 10, 32), "attention_batch_first": (6, 10, 32),
           "attention_seq_first": (10, 6, 32), "mlp": (64, 20), "linear_3d": (4, 9, 20)}


def _train(name, compiled, steps=3):
    ember.manual_seed(0)
    model = _Attention(ember, name == "attention_batch_first") \
        if name.startswith("attention") else _model(ember, name)
    opt = ember.optim.Adam(model.parameters(), lr=1e-2)
    x = np.random.default_rng(0).standard_normal(_INPUTS[name]).astype(np.float32)
    if name == "linear_3d":  # a transposed (not C-ordered) input: product and add
        x = np.ascontiguousarray(x.transpose(1, 0, 2)).transpose(1, 0, 2)
    xt = ember.tensor(x) if name != "linear_3d" else ember.from_numpy(x)

    def step():
        opt.zero_grad()
        loss = (model(xt) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    run = ember.compile(step) if compiled else step
    for _ in range(steps):
        run()
    return [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("mkl", [False, True])
@pytest.mark.parametrize("name", list(_INPUTS))
def test_compiled_steps_are_eager_to_the_bit(name, mkl):
    if mkl:
        eager, compiled = _train(name, False), _train(name, True)
    else:
        with gemm.numpy_only():
            eager, compiled = _train(name, False), _train(name, True)
    assert len(eager) == len(compiled) > 1
    for i, (a, b) in enumerate(zip(eager, compiled)):
        np.testing.assert_array_equal(a, b, err_msg=f"parameter {i}")


@pytest.mark.parametrize("shape,transposed", [((64, 20), False), ((4, 9, 20), False),
                                              ((4, 9, 20), True)])
def test_bias_gradient_with_a_graph_has_the_bits_without(shape, transposed):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    if transposed:
        x = np.ascontiguousarray(x.transpose(1, 0, 2)).transpose(1, 0, 2)
    w = rng.standard_normal((7, 20)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)

    def grads(lib, create_graph):
        xt = lib.from_numpy(x.copy() if not transposed else x).requires_grad_()
        wt, bt = lib.tensor(w, requires_grad=True), lib.tensor(b, requires_grad=True)
        y = lib.nn.functional.linear(xt, wt, bt)
        gs = lib.autograd.grad((y * y).sum(), [xt, wt, bt], create_graph=create_graph)
        return gs, [g.detach().numpy() for g in gs]
    with gemm.numpy_only():
        _, plain = grads(ember, False)
        graphed, with_graph = grads(ember, True)
    for a, c in zip(plain, with_graph):
        np.testing.assert_array_equal(a, c)
    # the bias gradient made with a graph is PyTorch's: the view of a sum kept in its
    # dim (ViewBackward0 over SumBackward1), and it differentiates as that sum does
    torch_graphed, torch_plain = grads(torch, True)
    mine, theirs = graphed[2].grad_fn, torch_graphed[2].grad_fn
    assert [mine.name(), mine.next_functions[0][0].name()] == \
        [theirs.name(), theirs.next_functions[0][0].name()] == \
        ["ViewBackward0", "SumBackward1"]
    for a, r in zip(with_graph, torch_plain):
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-4)
    second = graphed[2].sum() * 3 + (graphed[1] ** 2).sum()
    torch_second = torch_graphed[2].sum() * 3 + (torch_graphed[1] ** 2).sum()
    np.testing.assert_allclose(second.detach().numpy(), torch_second.detach().numpy(),
                               rtol=1e-5)


@pytest.mark.parametrize("size", [(3, 4), (1, 4), (4,)])
def test_sum_to_size_records_pytorchs_nodes(size):
    # PyTorch's sum_to: a sum kept in every dim, then a view dropping the leading ones
    def chain(lib):
        x = lib.ones(2, 3, 4, requires_grad=True)
        t = x.sum_to_size(*size)
        fn, names = t.grad_fn, []
        while fn is not None and fn.name() != "torch::autograd::AccumulateGrad":
            names.append(fn.name())
            fn = fn.next_functions[0][0]
        t.backward(lib.ones(*size) * 2)
        return names, x.grad.numpy()
    (mine, gm), (theirs, gt) = chain(ember), chain(torch)
    assert mine == theirs
    np.testing.assert_array_equal(gm, gt)
