"""``linear`` and ``matmul`` record torch's nodes (``AddmmBackward0`` over ``TBackward0``,
``UnsafeViewBackward0`` over ``BmmBackward0`` with its expands and views...): the whole
graph, walked from the output with every node's inputs in order, equals torch's for each
input rank, with and without a bias; first and second derivatives equal torch's; and
without a recorded graph one kernel runs (no node at all)."""
import numpy as np
import pytest
import torch

import ember

CASES = {
    "linear_2d": (lambda L, x, w, b: L.nn.functional.linear(x, w, b), [(3, 4), (5, 4), (5,)]),
    "linear_2d_no_bias": (lambda L, x, w: L.nn.functional.linear(x, w), [(3, 4), (5, 4)]),
    "linear_3d": (lambda L, x, w, b: L.nn.functional.linear(x, w, b), [(2, 3, 4), (5, 4), (5,)]),
    "linear_4d_no_bias": (lambda L, x, w: L.nn.functional.linear(x, w), [(2, 2, 3, 4), (5, 4)]),
    "linear_1d": (lambda L, x, w, b: L.nn.functional.linear(x, w, b), [(4,), (5, 4), (5,)]),
    "linear_1d_no_bias": (lambda L, x, w: L.nn.functional.linear(x, w), [(4,), (5, 4)]),
    "linear_3d_transposed": (lambda L, x, w, b: L.nn.functional.linear(x.transpose(0, 1), w, b),
                             [(3, 2, 4), (5, 4), (5,)]),
    "nn_linear_3d": (lambda L, x, w, b: _module(L, w, b)(x), [(2, 3, 4), (5, 4), (5,)]),
    "matmul_batched": (lambda L, a, b: a @ b, [(2, 3, 4), (2, 4, 5)]),
    "matmul_broadcast": (lambda L, a, b: L.matmul(a, b), [(2, 1, 3, 4), (5, 4, 2)]),
    "matmul_3d_2d": (lambda L, a, b: a @ b, [(2, 3, 4), (4, 5)]),
    "matmul_2d_3d": (lambda L, a, b: a @ b, [(3, 4), (2, 4, 5)]),
    "matmul_1d_3d": (lambda L, a, b: a @ b, [(4,), (2, 4, 5)]),
    "matmul_3d_1d": (lambda L, a, b: a @ b, [(2, 3, 4), (4,)]),
    "matmul_1d_2d": (lambda L, a, b: L.matmul(a, b), [(4,), (4, 5)]),
    "matmul_4d": (lambda L, a, b: a @ b, [(2, 2, 3, 4), (2, 2, 4, 5)]),
}


def _module(lib, w, b):
    m = lib.nn.Linear(w.shape[1], w.shape[0])
    m.weight, m.bias = lib.nn.Parameter(w.detach()), lib.nn.Parameter(b.detach())
    return m


def _walk(fn):
    if fn is None:
        return None
    return (fn.name(), tuple(_walk(f) for f, _ in fn.next_functions))


def _inputs(lib, shapes, requires_grad=True):
    rng = np.random.default_rng(0)
    return [lib.tensor(rng.standard_normal(s), requires_grad=requires_grad) for s in shapes]


@pytest.mark.parametrize("name", CASES)
def test_graph_equals_torchs(name):
    fn, shapes = CASES[name]
    walks = [_walk(fn(lib, *_inputs(lib, shapes)).grad_fn) for lib in (ember, torch)]
    assert walks[0] == walks[1]


# (the module case holds its own parameters: the functional cases cover its math)
@pytest.mark.parametrize("name", [n for n in CASES if not n.startswith("nn_")])
def test_first_and_second_derivatives_equal_torchs(name):
    fn, shapes = CASES[name]
    results = []
    for lib in (ember, torch):
        ts = _inputs(lib, shapes)
        y = fn(lib, *ts)
        g = lib.autograd.grad((y ** 2).sum(), ts, create_graph=True)
        g2 = lib.autograd.grad(sum((gi * gi).sum() for gi in g), ts)
        results.append([y.detach().numpy()] + [t.detach().numpy() for t in g + g2])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_without_a_recorded_graph_one_kernel_and_no_node():
    x, w, b = _inputs(ember, [(2, 3, 4), (5, 4), (5,)], requires_grad=False)
    assert ember.nn.functional.linear(x, w, b).grad_fn is None
    with ember.no_grad():
        x.requires_grad_(True)
        assert (x @ x.mT).grad_fn is None


def test_weight_gradient_is_row_major():
    """The weight's gradient reaches ``.grad`` in the weight's own layout."""
    x, w, b = _inputs(ember, [(3, 4), (5, 4), (5,)])
    ember.nn.functional.linear(x, w, b).sum().backward()
    assert w.grad._data.flags.c_contiguous and w.grad._data.base is None  # not copied
    np.testing.assert_allclose(w.grad.numpy(), np.tile(x.detach().numpy().sum(0), (5, 1)))
