"""Products at two threads give their one-thread bits whatever the inner dimension:
OpenBLAS's own threads group a long inner dimension otherwise than one thread does, so
ember hands them only products within the bound measured for the kernel
(``threads.same_bits_k``); longer ones run in blocks or at one BLAS thread. Checked at 1
and 2 threads on the routes a step takes (unsplit 2-D products on an idle machine,
stacks of products, the bias gradient's row sum, attention over long sequences, a
linear layer), and against torch."""
import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

import ember
from ember.backend import gemm
from ember.backend import threads as T


@pytest.fixture
def idle(monkeypatch):
    """ember at 2 threads on a machine with a core to spare and the pool idle: the
    conditions under which BLAS's own threads take the products ember does not split."""
    before = ember.get_num_threads()
    monkeypatch.setattr(T, "cores_to_spare", lambda: True)
    monkeypatch.setitem(T._state, "pool_used", float("-inf"))

    def at(n, fn):
        ember.set_num_threads(n)
        T._state["pool_used"] = float("-inf")
        return fn()
    yield at
    ember.set_num_threads(before)


def _numpy_blas():
    [info] = [i for i in threadpool_info()
              if i["internal_api"] == "openblas" and "numpy.libs" in i["filepath"]]
    return info


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _core():
    return _numpy_blas()["architecture"].lower()


def _threads_differ(k, dtype, shapes=((32, 512), (128, 256), (1, 1000), (400, 300),
                                      (257, 300))):
    """For each (m, n): whether ``(m, k) @ (k, n)`` differs between one and two of
    OpenBLAS's threads."""
    diffs = []
    for m, n in shapes:
        a, b = _rand(m, k, dtype=dtype), _rand(k, n, dtype=dtype, seed=1)
        with threadpool_limits(1):
            one = a @ b
        with threadpool_limits(2):
            two = a @ b
        diffs.append(not np.array_equal(one, two))
    return diffs


@pytest.mark.parametrize("char", "fd")
def test_the_bound_is_where_openblas_threads_change_bits(char):
    # pins the bound measured for this OpenBLAS's kernel (SkylakeX, Haswell): equal bits
    # up to it, not one past it (a wrong bound fails here rather than ember trusting it);
    # a bound of 0 (SkylakeX's float64) means they differ even for short inner dims
    dtype = np.float32 if char == "f" else np.float64
    bound = T.same_bits_k(char)
    core = _core()
    if core not in T._SAME_BITS_K:
        # a kernel not measured: BLAS's threads take no product (the other tests here
        # check that every route then keeps the one-thread bits)
        assert bound == 0
        return
    assert bound == T._SAME_BITS_K[core][char]
    checks = [(1, True), (bound, True), (bound + 1, False), (784, False)] if bound else \
        [(32, False), (784, False)]
    for k, same in checks:
        diffs = _threads_differ(k, dtype)
        assert (not any(diffs)) if same else any(diffs), (k, diffs)


def test_the_measured_kernels_bounds():
    # SkylakeX: float32 threads keep the bits up to its K block, float64 ones never;
    # Haswell (also AMD's Zen): both only below the unrolled inner loop's 8
    assert T._SAME_BITS_K["skylakex"] == {"f": 448, "d": 0}
    assert T._SAME_BITS_K["haswell"] == {"f": 7, "d": 7}


def test_float64_products_past_the_bound_keep_their_bits(idle):
    # OpenBLAS's float64 threads change bits for short inner dimensions (400 x 32 by
    # 32 x 300 on SkylakeX, from k = 8 on Haswell): such a product runs whole at one
    # BLAS thread, or in row blocks where those keep the bits (Haswell's 2-row tiles)
    assert 32 > T.same_bits_k("d")
    a, b = _rand(400, 32, dtype=np.float64), _rand(32, 300, dtype=np.float64, seed=1)
    with gemm.numpy_only():
        one = idle(1, lambda: gemm.matmul(a, b))
        two = idle(2, lambda: gemm.matmul(a, b))
        taken = idle(2, lambda: T.matmul(a, b))
        assert (taken is T.WHOLE) if not T.row_grain("d") else type(taken) is np.ndarray
    np.testing.assert_array_equal(one, two)
    with threadpool_limits(1):
        np.testing.assert_array_equal(one, a @ b)


def test_openblas_names_its_kernel_without_threadpoolctl(monkeypatch):
    from ember.backend import openblas
    monkeypatch.setitem(__import__("sys").modules, "threadpoolctl", None)
    monkeypatch.setitem(T._state, "libs", None)
    try:
        libs = T._blas_libs()
        assert libs and all(isinstance(lib, openblas.OpenBLAS) for lib in libs)
        assert libs[0].architecture == _numpy_blas()["architecture"]
    finally:
        T._state["libs"] = None


@pytest.mark.parametrize("m,k,n", [(32, 784, 256), (7, 784, 256), (32, 1000, 40),
                                   (100, 500, 16), (32, 448, 256)])
def test_unsplit_products_keep_their_bits_on_an_idle_machine(idle, m, k, n):
    a, b = _rand(m, k), _rand(k, n, seed=1)
    with gemm.numpy_only():
        one = idle(1, lambda: gemm.matmul(a, b))
        two = idle(2, lambda: gemm.matmul(a, b))
        # within the bound the product is left to BLAS's own threads (the speed rule)
        left = idle(2, lambda: T.matmul(a, b)) is None
    np.testing.assert_array_equal(one, two)
    assert left == (k <= T.same_bits_k("f"))
    np.testing.assert_allclose(two, (torch.tensor(a) @ torch.tensor(b)).numpy(),
                               rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("sa,sb", [((4, 32, 784), (4, 784, 256)),
                                   ((2, 3, 64, 600), (2, 3, 600, 64)),
                                   ((4, 32, 784), (784, 256)),
                                   ((5, 64, 448), (5, 448, 128))])
def test_stacks_of_products_keep_their_bits(idle, sa, sb):
    a, b = _rand(*sa), _rand(*sb, seed=1)
    with gemm.numpy_only():
        one = idle(1, lambda: gemm.matmul(a, b))
        two = idle(2, lambda: gemm.matmul(a, b))
        out = np.empty_like(two)
        into = idle(2, lambda: gemm.matmul(a, b, out=out))
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, into)
    assert into is out
    np.testing.assert_allclose(two, (torch.tensor(a) @ torch.tensor(b)).numpy(),
                               rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("rows,cols", [(1024, 784), (4096, 784), (449, 2048), (1024, 256)])
def test_bias_gradient_row_sum_keeps_its_bits(idle, rows, cols):
    g = _rand(rows, cols)
    one = idle(1, lambda: gemm.sum_rows(g))
    two = idle(2, lambda: gemm.sum_rows(g))
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(two, g.astype(np.float64).sum(0), rtol=1e-5, atol=1e-4)


def test_linear_layer_step_keeps_its_bits_and_matches_torch(idle):
    x, w, bias = _rand(1024, 300), _rand(784, 300, seed=1) * 0.05, _rand(784, seed=2)

    def step(lib):
        xt = lib.tensor(x, requires_grad=True)
        wt, bt = lib.tensor(w, requires_grad=True), lib.tensor(bias, requires_grad=True)
        y = lib.nn.functional.linear(xt, wt, bt)
        (y * y).sum().backward()
        return [t.detach().numpy() for t in (y, xt.grad, wt.grad, bt.grad)]
    with gemm.numpy_only():
        one = idle(1, lambda: step(ember))
        two = idle(2, lambda: step(ember))
    ref = step(torch)
    for a, b, r in zip(one, two, ref):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(b, r, rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("seq", [512, 600])
def test_attention_over_long_sequences_keeps_its_bits(idle, seq):
    q, k, v = (_rand(2, 2, seq, 64, seed=s) for s in range(3))

    def run(lib):
        qt, kt, vt = (lib.tensor(t, requires_grad=True) for t in (q, k, v))
        out = lib.nn.functional.scaled_dot_product_attention(qt, kt, vt)
        out.backward(lib.tensor(_rand(*out.shape, seed=9)))
        return [t.detach().numpy() for t in (out, qt.grad, kt.grad, vt.grad)]
    with gemm.numpy_only():
        one = idle(1, lambda: run(ember))
        two = idle(2, lambda: run(ember))
    ref = run(torch)
    for a, b, r in zip(one, two, ref):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(b, r, rtol=1e-4, atol=1e-4)


def test_unknown_kernels_get_no_bound(monkeypatch):
    class Other:
        internal_api = "openblas"
        architecture = "SomeFutureCore"

    class Mkl:
        internal_api = "mkl"
        architecture = "SkylakeX"
    for libs, bound in (((Other(),), 0), ((), 0), ((Mkl(),), 0),
                        ((Mkl(), _Named("SkylakeX")), 448),
                        ((_Named("SkylakeX"), Other()), 0)):
        monkeypatch.setitem(T._state, "libs", libs)
        assert T.same_bits_k("f") == bound, libs
    monkeypatch.undo()
    # found anew for the libraries ember reaches
    assert T.same_bits_k("f") == T._SAME_BITS_K.get(_core(), {}).get("f", 0)


class _Named:
    internal_api = "openblas"

    def __init__(self, name):
        self.architecture = name


def _module_step(lib, name):
    """A forward and backward of one layer whose products have a long inner dimension;
    returns its output and every gradient."""
    nn, rng = lib.nn, np.random.default_rng(0)
    lib.manual_seed(0)
    make, shape = {"rnn": (lambda: nn.RNN(600, 512, batch_first=True), (4, 6, 600)),
                   "linear_one_row": (lambda: nn.Linear(1000, 1000), (1, 1000)),
                   "mha": (lambda: nn.MultiheadAttention(512, 8, batch_first=True),
                           (2, 500, 512)),
                   "lstm": (lambda: nn.LSTM(64, 256, batch_first=True), (32, 32, 64))}[name]
    mod = make()
    x = lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
    y = mod(x, x, x) if name == "mha" else mod(x)
    y = y[0] if isinstance(y, tuple) else y
    (y * y).sum().backward()
    return [y.detach().numpy(), x.grad.numpy()] + [p.grad.numpy() for p in mod.parameters()]


@pytest.mark.parametrize("name", ["rnn", "linear_one_row", "mha", "lstm"])
def test_layers_with_long_inner_dimensions_keep_their_bits(idle, monkeypatch, name):
    # the first three changed in the last bits between one and two threads when
    # OpenBLAS's own threads took their products on an idle machine; the LSTM's NumPy
    # loop sums its bias gradients as a row of ones times 1024 rows (this width happened
    # to give equal bits; 784 columns would not)
    from ember.ops import rnn
    monkeypatch.setitem(rnn._FUSED, "lstm", None)  # the NumPy loops (no numba kernels)
    with gemm.numpy_only():
        one = idle(1, lambda: _module_step(ember, name))
        two = idle(2, lambda: _module_step(ember, name))
    assert len(one) == len(two) > 2
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("batch", [8, 32])
def test_compiled_training_step_keeps_its_bits(idle, batch):
    # a compiled plan's products take the same routes (each batch differed before)
    def train():
        ember.manual_seed(0)
        model = ember.nn.Sequential(ember.nn.Linear(784, 300), ember.nn.ReLU(),
                                    ember.nn.Linear(300, 10))
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        x = ember.tensor(_rand(batch, 784))
        y = ember.tensor(np.random.default_rng(1).integers(0, 10, batch))

        @ember.compile
        def step(x, y):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        for _ in range(3):
            T._state["pool_used"] = float("-inf")
            step(x, y)
        return [p.detach().numpy().copy() for p in model.parameters()]
    with gemm.numpy_only():
        one = idle(1, train)
        two = idle(2, train)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_a_cells_kept_row_sum_keeps_its_bits(idle):
    # linear's nodes sum a bias's rows on a vector of ones kept between calls
    from ember.ops import matmul_graph
    g = _rand(1024, 784)
    one = idle(1, lambda: matmul_graph._rows_summed(g))
    two = idle(2, lambda: matmul_graph._rows_summed(g))
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, gemm.sum_rows(g))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(64, 300, 300), (256, 784, 300), (128, 460, 300)])
def test_split_sized_products_keep_their_bits_in_both_dtypes(idle, m, k, n, dtype):
    # float64 row blocks differ from the whole product here: ember splits float32 only
    a, b = _rand(m, k, dtype=dtype), _rand(k, n, dtype=dtype, seed=1)
    with gemm.numpy_only():
        one = idle(1, lambda: gemm.matmul(a, b))
        two = idle(2, lambda: gemm.matmul(a, b))
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("k", [300, 460])
def test_a_matrix_times_its_own_transpose_keeps_its_bits(idle, k):
    # NumPy runs ``a @ a.T`` on one buffer as syrk, which row blocks do not reproduce
    a = _rand(200, k)
    with gemm.numpy_only():
        one = idle(1, lambda: gemm.matmul(a, a.T))
        two = idle(2, lambda: gemm.matmul(a, a.T))
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, one.T)
