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


@pytest.mark.parametrize("rows,cols", [(1024, 128), (4096, 40), (3, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_gradient_is_a_blas_row_sum(rows, cols, dtype):
    """``linear``'s bias gradient is the sum of the output gradient's rows on BLAS
    (``gemm.sum_rows``): close to the exact sum (nearer than NumPy's row-by-row sum
    over the first axis), to torch's, the same in the eager node and the compile plan's
    array rule, and the same bits at one and at two threads."""
    from ember.backend import gemm
    from ember.ops import nn_fused
    rng = np.random.default_rng(7)
    x = rng.standard_normal((rows, 6)).astype(dtype)
    w = rng.standard_normal((cols, 6)).astype(dtype)
    g = (rng.standard_normal((rows, cols)) + 0.5).astype(dtype)
    grads = {}
    for lib in (ember, torch):
        b = lib.zeros(cols, dtype=getattr(lib, np.dtype(dtype).name), requires_grad=True)
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        lib.nn.functional.linear(xt, wt, b).backward(lib.tensor(g))
        grads[lib] = b.grad.numpy()
    exact = g.astype(np.float64).sum(0)
    tol = {np.float32: 2e-6, np.float64: 1e-14}[dtype] * max(1.0, np.sqrt(rows) / 32)
    np.testing.assert_allclose(grads[ember], exact, rtol=tol, atol=tol * np.abs(exact).max())
    np.testing.assert_allclose(grads[ember], grads[torch], rtol=tol,
                               atol=tol * np.abs(exact).max())
    assert grads[ember].dtype == dtype
    assert np.array_equal(grads[ember], gemm.sum_rows(g))
    assert np.array_equal(grads[ember], np.ones(rows, dtype) @ g)  # BLAS's product
    op = object.__new__(nn_fused._Linear)
    op._edges = (None, None, 1)
    assert np.array_equal(op.vjp([g], [x, w, None], [None])[2], grads[ember])
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(2)
        two = gemm.sum_rows(g)
    finally:
        ember.set_num_threads(before)
    assert np.array_equal(two, grads[ember])


def test_sum_rows_of_other_arrays_is_numpys_sum():
    """One row, integers, float16 and 1-D arrays keep NumPy's own sum."""
    from ember.backend import gemm
    for a in (np.arange(6.0, dtype=np.float32).reshape(1, 6), np.arange(12).reshape(3, 4),
              np.linspace(0, 1, 12, dtype=np.float16).reshape(4, 3)):
        r = gemm.sum_rows(a)
        assert r.dtype == a.sum(0).dtype and np.array_equal(r, a.sum(0))
