"""Products split in row blocks at two threads give their one-thread bits: a row block of
a product is computed as the same rows of the whole product only where it starts at a
multiple of the kernel's tile of rows (``threads.row_grain``: SkylakeX float32 blocks of
two rows or more on the whole product's kernel, Haswell float32 12 rows and float64 2).
Pins the grain measured for this machine's kernel (equal on it, different at half of it
or, on SkylakeX, under the small-matrix kernel's size), checks the blocks ember makes,
and the products at 1 and 2 threads against each other and torch."""
import numpy as np
import pytest
import torch
from pool_blocks import at_one_and_two_threads, record_blocks
from threadpoolctl import threadpool_info, threadpool_limits

import ember
from ember.backend import gemm, thread_products
from ember.backend import threads as T


def _core():
    [info] = [i for i in threadpool_info()
              if i["internal_api"] == "openblas" and "numpy.libs" in i["filepath"]]
    return info["architecture"].lower()


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _operands(m, k, n, layout, dtype, seed=0):
    a = _rand(*((k, m) if layout[0] == "t" else (m, k)), dtype=dtype, seed=seed)
    b = _rand(*((n, k) if layout[1] == "t" else (k, n)), dtype=dtype, seed=seed + 1)
    return (a.T if layout[0] == "t" else a), (b.T if layout[1] == "t" else b)


def _in_blocks(a, b, edges):
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    with threadpool_limits(1):
        for lo, hi in zip(edges, edges[1:]):
            np.matmul(a[lo:hi], b, out=out[lo:hi])
    return out


# shapes of the benchmark workloads' products and ragged ones (rows that are not a
# multiple of any grain, short and long inner dimensions, narrow results)
_SHAPES = [(128, 784, 256), (256, 128, 784), (1024, 128, 384), (100, 300, 70),
           (257, 9, 33), (73, 1025, 40), (64, 8, 1000), (131, 449, 130)]


@pytest.mark.parametrize("char", "fd")
def test_the_grain_is_where_row_blocks_keep_the_bits(char):
    # on this machine's kernel: blocks at multiples of the grain give the whole
    # product's bits; where the grain is more than one row, blocks at half of it do not
    # (a wrong grain fails here rather than ember trusting it); on a kernel not measured
    # (or a dtype whose blocks differ) the grain is 0 and nothing is split
    dtype = np.float32 if char == "f" else np.float64
    grain = T.row_grain(char)
    core = _core()
    assert grain == T._ROW_GRAIN.get(core, {}).get(char, 0)
    if not grain:
        return
    differ_at_half = 0
    for m, k, n in _SHAPES:
        for layout in ("nn", "tn", "nt", "tt"):
            a, b = _operands(m, k, n, layout, dtype)
            with threadpool_limits(1):
                whole = a @ b
            for cut in (m // 2 // grain * grain, m // 3 // grain * grain + grain):
                if not all(T.row_blocks_keep_kernel(char, m * k * n, rows * k * n)
                           for rows in (cut, m - cut)):
                    continue  # (a block on the small-matrix kernel: see below)
                np.testing.assert_array_equal(_in_blocks(a, b, [0, cut, m]), whole,
                                              err_msg=f"{m, k, n, layout, cut}")
            if grain > 1 and not T.small_kernel_mnk(char):
                half = grain // 2
                odd = (m // 2 // grain) * grain + half  # a multiple of half, not of grain
                differ_at_half += not np.array_equal(_in_blocks(a, b, [0, odd, m]), whole)
    assert grain == 1 or T.small_kernel_mnk(char) or differ_at_half, \
        "half the grain keeps the bits: measure again"
    if T.small_kernel_mnk(char):
        # the small-matrix kernel's bound is real: a block within it of a product past it
        # gives other bits (34 x 300 x 70 = 714,000 multiply-adds), and so does a block of
        # one row (a matrix-vector product) where the grain is two
        a, b = _operands(100, 300, 70, "nn", dtype)
        with threadpool_limits(1):
            whole = a @ b
        assert not T.row_blocks_keep_kernel(char, 100 * 300 * 70, 34 * 300 * 70)
        assert not np.array_equal(_in_blocks(a, b, [0, 34, 100]), whole)
        assert not np.array_equal(_in_blocks(a, b, [0, 1, 100]), whole)
        assert T.row_blocks_keep_kernel(char, 100 * 300 * 70, 50 * 300 * 70)
        np.testing.assert_array_equal(_in_blocks(a, b, [0, 50, 100]), whole)


def test_the_measured_kernels_grains():
    assert T._ROW_GRAIN == {"haswell": {"f": 12, "d": 2}, "skylakex": {"f": 2}}
    assert T._SMALL_KERNEL_MNK == {"skylakex": {"f": 1000000}}


def test_the_small_kernels_bound_and_plain_products():
    # past the bound any block keeps the kernel; within it only plain products' blocks
    # (neither operand transposed: the small kernel takes them at any shape)
    if not T.small_kernel_mnk("f"):
        assert T.row_blocks_keep_kernel("f", 10 ** 7, 10)
        return
    least = T.small_kernel_mnk("f")
    assert T.row_blocks_keep_kernel("f", 4 * least, least + 1)
    assert not T.row_blocks_keep_kernel("f", 4 * least, least)
    assert not T.row_blocks_keep_kernel("f", least, least // 2)
    assert T.row_blocks_keep_kernel("f", least, least // 2, plain=True)
    assert not T.row_blocks_keep_kernel("f", least + 1, least // 2, plain=True)
    # blocks of plain products within the bound: the same bits (the LSTM's per-step
    # products in column blocks of the small kernel)
    for m, k, n in ((32, 128, 128), (48, 64, 256), (19, 256, 200)):
        a, b = _operands(m, k, n, "nn", np.float32, seed=m)
        with threadpool_limits(1):
            whole = a @ b
        for cut in range(2, m - 1, 2):
            np.testing.assert_array_equal(_in_blocks(a, b, [0, cut, m]), whole,
                                          err_msg=f"{m, k, n, cut}")


def test_grains_are_trusted_only_on_measured_kernels(monkeypatch):
    class Lib:
        internal_api = "openblas"

        def __init__(self, name):
            self.architecture = name

    class Mkl:
        internal_api = "mkl"
    # (kernels with different grains: neither grain is safe for both)
    for libs, f, d in (((Lib("SkylakeX"),), 2, 0), ((Lib("Haswell"),), 12, 2),
                       ((Lib("SkylakeX"), Lib("Zen")), 0, 0),
                       ((Lib("Haswell"), Lib("SkylakeX")), 0, 0), ((), 0, 0),
                       ((Mkl(), Lib("Haswell")), 12, 2), ((Mkl(),), 0, 0)):
        monkeypatch.setitem(T._state, "libs", libs)
        assert (T.row_grain("f"), T.row_grain("d")) == (f, d), libs
        assert T.row_blocks_keep_bits() is (f > 0)
    monkeypatch.undo()  # this machine's libraries: the table's figure for their kernels
    arch = [lib.architecture.lower() for lib in T._blas_libs()
            if lib.internal_api == "openblas"]
    grains = {T._ROW_GRAIN.get(a, {}).get("f", 0) for a in arch}
    assert T.row_grain("f") == (grains.pop() if len(grains) == 1 else 0)


@pytest.fixture
def two_threads(monkeypatch):
    """ember's matmul at 1 and at 2 threads, the blocks the pool ran recorded."""
    before = ember.get_num_threads()
    monkeypatch.setattr(T, "_MIN_COST_PER_THREAD", 1)
    seen = record_blocks(monkeypatch)
    yield at_one_and_two_threads(seen)
    ember.set_num_threads(before)


@pytest.mark.parametrize("m,k,n", [(128, 784, 256), (1024, 128, 384), (133, 300, 70),
                                   (64, 2049, 40), (781, 129, 33)])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
@pytest.mark.parametrize("char", "fd")
def test_split_products_keep_their_one_thread_bits(two_threads, m, k, n, layout, char):
    dtype = np.float32 if char == "f" else np.float64
    a, b = _operands(m, k, n, layout, dtype, seed=m + n)
    # row blocks, or column blocks for a product of few rows (``thread_products``)
    grain, by_columns = thread_products._split_direction(char, m, k, n)
    span, other = (n, m) if by_columns else (m, n)
    with gemm.numpy_only():
        one, two, bounds = two_threads(lambda: gemm.matmul(a, b))
    np.testing.assert_array_equal(one, two)
    with threadpool_limits(1):
        np.testing.assert_array_equal(one, a @ b)
    tol = dict(rtol=1e-4, atol=1e-3) if char == "f" else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(two, (torch.tensor(a) @ torch.tensor(b)).numpy(), **tol)
    if not grain:
        assert not bounds  # not split on this kernel: whole, at one BLAS thread
        return
    assert bounds, "a product ember splits ran whole"
    # the blocks the pool ran are in tiles of the grain; the last block takes the rows
    # (columns) of a partial tile, so every block has at least a grain of them
    [tiles] = bounds
    assert tiles[0] == 0 and tiles[-1] == span // grain and len(tiles) == 3
    edges = [t * grain for t in tiles[:-1]] + [span]
    assert all(hi - lo >= grain for lo, hi in zip(edges, edges[1:]))
    assert all(T.row_blocks_keep_kernel(char, m * k * n, (hi - lo) * k * other)
               for lo, hi in zip(edges, edges[1:]))


@pytest.mark.parametrize("threads,m,k,n,blocks", [
    (2, 100, 300, 70, 2), (3, 100, 300, 70, 2), (4, 256, 128, 128, 4), (4, 128, 128, 128, 2)])
def test_blocks_stay_on_the_whole_products_kernel(monkeypatch, threads, m, k, n, blocks):
    # more threads than blocks past the small-matrix kernel's size: fewer, larger blocks
    # (100 x 300 x 70 in three blocks of 33 rows would run on the small kernel and give
    # other bits); past the split size, bits equal to one thread's and to torch's
    monkeypatch.setattr(T, "_MIN_COST_PER_THREAD", 1)
    monkeypatch.setattr(T, "_SPLIT_MNK", 1 << 20)
    seen = record_blocks(monkeypatch)
    a, b = _operands(m, k, n, "nn", np.float32, seed=m)
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(threads)
        with gemm.numpy_only():
            got = gemm.matmul(a, b)
    finally:
        ember.set_num_threads(before)
    with threadpool_limits(1):
        np.testing.assert_array_equal(got, a @ b)
    np.testing.assert_allclose(got, (torch.tensor(a) @ torch.tensor(b)).numpy(),
                               rtol=1e-4, atol=1e-3)
    if not T.row_grain("f"):
        assert not seen  # (a kernel whose row blocks change the bits: whole)
        return
    [edges] = seen
    assert len(edges) == (blocks if T.small_kernel_mnk("f") else threads) + 1


def test_float64_products_split_only_on_kernels_measured_for_them(monkeypatch):
    # SkylakeX's float64 row blocks differ from its whole products: not split there;
    # its float32 ones are (blocks past the small-matrix kernel's size)
    class Lib:
        internal_api = "openblas"
        architecture = "SkylakeX"
        num_threads = 1  # (BLAS at one thread: the split leaves it there)
    monkeypatch.setitem(T._state, "libs", (Lib(),))
    monkeypatch.setitem(T._state, "threads", 2)  # (ember at two threads, BLAS untouched)
    monkeypatch.setattr(T, "_all_blas", lambda: (Lib(),))
    monkeypatch.setattr(T, "_blas_may_thread", lambda k, char: False)
    a, b = _rand(400, 32, dtype=np.float64), _rand(32, 300, dtype=np.float64, seed=1)
    assert T.row_grain("d") == 0 and T.row_grain("f") == 2
    assert T.matmul(a, b) is T.WHOLE
    a, b = a.astype(np.float32), b.astype(np.float32)
    with threadpool_limits(1):
        np.testing.assert_array_equal(T.matmul(a, b), a @ b)
