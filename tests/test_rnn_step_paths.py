"""The short paths a Python loop over a recurrent cell takes (its ``linear``'s first-order
backward straight from ``np.matmul`` for small products, ``matmul_graph._small_grads``)
and the NumPy LSTM's backward buffers: the same values as the general paths, bit for bit,
and torch's within float32 rounding."""
import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

import ember
from ember.backend import gemm, threads
from ember.ops import matmul_graph, rnn


def _cell_loop(m, cell, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = cell(xs[t], h)
    return h


def _copy_cell(ecell, tcell):
    with torch.no_grad():
        for (_, tp), (_, ep) in zip(tcell.named_parameters(), ecell.named_parameters()):
            tp.copy_(torch.from_numpy(ep.detach().numpy().copy()))


@pytest.mark.parametrize("kind", ["RNNCell", "GRUCell", "LSTMCell"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cell_loop_gradients_equal_the_general_path(kind, dtype, monkeypatch):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((5, 4, 6)).astype(dtype)
    h0 = rng.standard_normal((4, 7)).astype(dtype)
    ember.manual_seed(0)
    ecell = getattr(ember.nn, kind)(6, 7, dtype=getattr(ember, np.dtype(dtype).name))
    grads = {}
    calls = []
    # the short products, on Tensors (``Addmm.backward``) or arrays (``_array_grads``)
    for name in ("_small_products", "_small_arrays"):
        short = getattr(matmul_graph, name)
        monkeypatch.setattr(matmul_graph, name,
                            lambda *a, short=short: calls.append(1) or short(*a))
    for small in (True, False):
        if not small:
            monkeypatch.setattr(matmul_graph, "_SMALL_MNK", 0)  # gemm.matmul's dispatch
        ecell.zero_grad()
        x = ember.tensor(xs, requires_grad=True)
        h = ember.tensor(h0, requires_grad=True)
        state = (h, h * 0.5) if kind == "LSTMCell" else h
        out = _cell_loop(ember, ecell, x, state)
        out = out[0] + out[1] if kind == "LSTMCell" else out
        out.pow(2).sum().backward()
        grads[small] = [x.grad.numpy(), h.grad.numpy()] + \
            [p.grad.numpy().copy() for p in ecell.parameters()]
        assert calls if small else True  # the short path ran
    for a, b in zip(grads[True], grads[False]):
        np.testing.assert_array_equal(a, b)

    tcell = getattr(torch.nn, kind)(6, 7, dtype=getattr(torch, np.dtype(dtype).name))
    _copy_cell(ecell, tcell)
    x = torch.tensor(xs, requires_grad=True)
    h = torch.tensor(h0, requires_grad=True)
    state = (h, h * 0.5) if kind == "LSTMCell" else h
    out = _cell_loop(torch, tcell, x, state)
    out = out[0] + out[1] if kind == "LSTMCell" else out
    out.pow(2).sum().backward()
    want = [x.grad.numpy(), h.grad.numpy()] + [p.grad.numpy() for p in tcell.parameters()]
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    for a, b in zip(grads[True], want):
        np.testing.assert_allclose(a, b, **tol)


def test_small_linear_backward_keeps_hooks_and_the_weight_layout():
    """A hook on the linear's AddmmBackward0 sees PyTorch's three gradients (the third the
    transposed weight's), and the weight's .grad is row-major like the weight."""
    rng = np.random.default_rng(1)
    w0, b0, x0 = (rng.standard_normal(s).astype(np.float32) for s in ((3, 5), (3,), (4, 5)))
    seen = {}
    grads = []
    for m in (ember, torch):
        lin = m.nn.Linear(5, 3)
        with m.no_grad():
            lin.weight.copy_(m.tensor(w0))
            lin.bias.copy_(m.tensor(b0))
        x = m.tensor(x0, requires_grad=True)
        y = lin(x)
        y.grad_fn.register_hook(
            lambda gi, go, m=m: seen.__setitem__(m, [tuple(g.shape) for g in gi]))
        y.pow(2).sum().backward()
        assert lin.weight.grad.numpy().flags.c_contiguous
        grads.append([x.grad.numpy(), lin.weight.grad.numpy(), lin.bias.grad.numpy()])
    assert seen[ember] == seen[torch] == [(3,), (4, 5), (5, 3)]
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_second_derivatives_take_the_recorded_path():
    """create_graph records the gradient's graph (the short path is first-order only)."""
    rng = np.random.default_rng(2)
    w0, b0, x0 = (rng.standard_normal(s) for s in ((3, 4), (3,), (2, 4)))
    out = []
    for m in (ember, torch):
        w = m.tensor(w0, requires_grad=True)
        b = m.tensor(b0, requires_grad=True)
        x = m.tensor(x0, requires_grad=True)
        y = m.nn.functional.linear(x, w, b).tanh().sum()
        gw, = m.autograd.grad(y, w, create_graph=True)
        assert gw.grad_fn is not None
        gw.sum().backward()
        out.append([x.grad.numpy(), b.grad.numpy()])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-10)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bs", [(4, 4, 4, 4), (4, 3, 3, 1)])
def test_numpy_lstm_backward_over_padded_and_packed_batches(reverse, bs, monkeypatch):
    """The NumPy loop's backward (reused buffers for a padded batch, fresh arrays for a
    packed one) against the generic layer math on arrays."""
    monkeypatch.setitem(rnn._FUSED, "lstm", None)
    rng = np.random.default_rng(3)
    H, Iz = 5, 3
    N = sum(bs)
    f = np.float32
    x = rng.standard_normal((N, Iz)).astype(f)
    h0, c0 = (rng.standard_normal((bs[0], H)).astype(f) for _ in range(2))
    w_ih = rng.standard_normal((4 * H, Iz)).astype(f)
    w_hh = rng.standard_normal((4 * H, H)).astype(f)
    b_ih, b_hh = (rng.standard_normal(4 * H).astype(f) for _ in range(2))
    args = (x, h0, c0, w_ih, w_hh, b_ih, b_hh, None, bs, reverse)
    fwd = rnn._lstm_forward_np(np, *args)
    gy = rng.standard_normal((N, H)).astype(f)
    ghn, gcn = (rng.standard_normal((bs[0], H)).astype(f) for _ in range(2))
    needs = [True] * 8
    got = rnn._lstm_backward_np(np, gy, ghn, gcn, fwd[3], x, w_ih, w_hh, None, bs, reverse,
                                needs)
    m = rnn._NP_MATH
    acts = rnn._layer_forward(m, rnn._LSTMCellMath, *args)[3]
    want = rnn._layer_backward(m, rnn._LSTMCellMath, gy, ghn, gcn, acts, x, w_ih, w_hh, None,
                               bs, reverse, needs)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rows,k,n", [(4096, 12, 16), (4096, 16, 5), (32, 64, 128)])
def test_linear_gradients_take_the_products_gemm_would(rows, k, n):
    """The short backward computes each product where ``gemm.matmul`` would compute it
    (a long batch's ``g.T @ x`` sums over thousands of rows: MKL, when installed, takes it
    although ``x @ w.T`` is small): the same bits as the general path's products."""
    from ember.backend import gemm
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((rows, k)).astype(np.float32), requires_grad=True)
    lin = ember.nn.Linear(k, n)
    g = rng.standard_normal((rows, n)).astype(np.float32)
    lin(x).backward(ember.tensor(g))
    w = lin.weight.detach().numpy()
    np.testing.assert_array_equal(lin.weight.grad.numpy(), gemm.matmul(g.T, x.detach().numpy()))
    np.testing.assert_array_equal(x.grad.numpy(), gemm.matmul(g, w))


def test_linear_node_marks_its_small_backward():
    """``_addmm_linear`` records whether its backward products may run on ``np.matmul``
    straight away: at any thread count below ember's BLAS-holding size, only at one
    thread above it, never where MKL could take a product or the forward did not."""
    def node(m, k, n):
        x = ember.zeros(m, k, requires_grad=True)
        w = ember.nn.Parameter(ember.zeros(n, k))
        return matmul_graph._addmm_linear(x, w, ember.zeros(n)).grad_fn

    assert node(4, 6, 7).small == 1
    assert node(32, 128, 128).small == 2  # 2**19 operations: BLAS held above one thread
    assert node(512, 512, 512).small == 0
    x, w = ember.zeros(3, 2, requires_grad=True), ember.nn.Parameter(ember.zeros(4, 2))
    assert matmul_graph.Addmm.apply(ember.zeros(4), x, w.t()).grad_fn.small == 0


@pytest.mark.parametrize("m", [19, 25, 32])
@pytest.mark.parametrize("k, n", [(1, 64), (64, 128), (127, 512), (100, 320)])
def test_kept_weight_copy_gives_the_transposed_products_bits(m, k, n):
    """``x @ w.T`` through the kept row-major copy of ``w.T`` (``_rows_times_weight_t``)
    has the bits of the product on the transposed weight, over the range it is taken."""
    rng = np.random.default_rng(m * 1000 + k + n)
    for scale in (1.0, 1e-3, 1e3):
        x = (rng.standard_normal((m, k)) * scale).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        got = matmul_graph._rows_times_weight_t(x, w)
        if not threads.copy_keeps_bits():
            # a kernel where the copy changes the bits (OpenBLAS's Haswell ones): not
            # taken, and a cell's product is np.matmul's on the transposed weight
            assert got is None
            with gemm.numpy_only():  # (MKL's products are its own)
                np.testing.assert_array_equal(
                    matmul_graph.linear_rows(np.zeros(n, np.float32), x, w),
                    np.matmul(x, w.T))
            continue
        assert got is not None
        np.testing.assert_array_equal(got, np.matmul(x, w.T))
        np.testing.assert_array_equal(matmul_graph._rows_times_weight_t(x, w),
                                      np.matmul(x, w.T))  # from the kept copy


@pytest.mark.parametrize("shape, dtype", [((18, 64, 128), np.float32),
                                          ((33, 64, 128), np.float32),
                                          ((32, 128, 128), np.float32),
                                          ((32, 64, 100), np.float32),
                                          ((32, 64, 576), np.float32),
                                          ((32, 64, 128), np.float64)])
def test_products_outside_the_range_take_the_transposed_weight(shape, dtype):
    m, k, n = shape
    assert matmul_graph._rows_times_weight_t(np.ones((m, k), dtype),
                                             np.ones((n, k), dtype)) is None


def test_kept_copy_follows_every_write_to_the_weight():
    """Writes the version counter does not see (through ``.data``, through a NumPy view,
    a new array set with ``.data =``) reach the next step's product: the cell's output is
    the one a fresh cell with the written weight gives, and torch's."""
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((32, 64)).astype(np.float32)
    h0 = rng.standard_normal((32, 128)).astype(np.float32)
    ecell, tcell = ember.nn.RNNCell(64, 128), torch.nn.RNNCell(64, 128)
    _copy_cell(ecell, tcell)
    x, h = ember.tensor(x0), ember.tensor(h0)
    writes = [lambda p: p.data.mul_(0.5),
              lambda p: p.detach().numpy().__setitem__((0, 0), 3.0),
              lambda p: setattr(p, "data", p.data * -1.0)]
    for write in [None] + writes:
        if write is not None:
            write(ecell.weight_ih)
            _copy_cell(ecell, tcell)
        got = ecell(x, h)
        with torch.no_grad():
            want = tcell(torch.tensor(x0), torch.tensor(h0))
        np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-5,
                                   atol=1e-6)
        w = ecell.weight_ih.detach().numpy()
        # NumPy's products at one BLAS thread: ember's results are the one-thread ones
        # at any thread count, and OpenBLAS's own threads change the bits of these on
        # some kernels (Haswell: from an inner dimension of 8)
        with threadpool_limits(1):
            ref = np.tanh(np.matmul(h0, ecell.weight_hh.detach().numpy().T) +
                          ecell.bias_hh.detach().numpy() +
                          (np.matmul(x0, w.T) + ecell.bias_ih.detach().numpy()))
        np.testing.assert_array_equal(got.detach().numpy(), ref.astype(np.float32))


@pytest.mark.parametrize("shape", [(32, 64, 128), (19, 100, 512), (32, 128, 128),
                                   (8, 64, 128), (32, 64, 100)])
def test_compiled_linear_rows_equal_addmm(shape):
    """A compiled plan's linear step (``linear_rows``) gives ``gemm.addmm``'s bits, the
    kept copy's range or not, and a compiled cell loop the eager loop's."""
    from ember.backend import gemm
    m, k, n = shape
    rng = np.random.default_rng(m + k + n)
    x, w = rng.standard_normal((m, k), np.float32), rng.standard_normal((n, k), np.float32)
    b = rng.standard_normal(n, np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(matmul_graph.linear_rows(b, x, w),
                                      gemm.addmm(b, x, w.T))


def test_compiled_cell_loop_equals_eager_bit_for_bit():
    rng = np.random.default_rng(4)
    xs = ember.tensor(rng.standard_normal((3, 32, 64)).astype(np.float32))
    ember.manual_seed(0)
    cell = ember.nn.RNNCell(64, 128)
    compiled = ember.compile(cell)
    got = []
    for run in (cell, compiled, compiled):
        cell.zero_grad()
        h = ember.zeros(32, 128)
        for t in range(3):
            h = run(xs[t], h)
        h.pow(2).sum().backward()
        got.append([h.detach().numpy()] + [p.grad.numpy().copy() for p in cell.parameters()])
    for other in got[1:]:
        for a, b in zip(got[0], other):
            np.testing.assert_array_equal(a, b)


def test_kept_copy_follows_the_measured_kernels(monkeypatch):
    # the kept copy is taken only on BLAS kernels measured to keep the bits with it
    # (threads._COPY_KEEPS_BITS); with this machine's kernel not listed, never
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((32, 64), np.float32), rng.standard_normal((128, 64), np.float32)
    libs = threads._blas_libs()
    core = threads._core_name(libs[0]) if libs else None
    for listed in (True, False):
        monkeypatch.setattr(threads, "_COPY_KEEPS_BITS",
                            frozenset({core} if listed else ()))
        threads._state.pop("copies", None)
        taken = matmul_graph._rows_times_weight_t(x, w) is not None
        assert taken is (listed and core is not None)
        assert matmul_graph._copy_keeps_bits(x, w) is taken
    threads._state.pop("copies", None)
