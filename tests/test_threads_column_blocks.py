"""Products of few rows split in column blocks at two threads (``thread_products``):
column blocks keep the whole product's bits on the kernels measured so
(``threads.column_grain``: SkylakeX float32, blocks on the whole product's kernel), a
product with at least twice as many columns as rows and an inner dimension of 256 or
more takes them instead of row blocks, and its results at 1 and 2 threads are equal to
each other, to NumPy's at one BLAS thread, and close to torch's."""
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


def _operands(m, k, n, layout, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if layout[0] == "t" else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if layout[1] == "t" else (k, n)).astype(dtype)
    return (a.T if layout[0] == "t" else a), (b.T if layout[1] == "t" else b)


def _in_columns(a, b, edges):
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    with threadpool_limits(1):
        for lo, hi in zip(edges, edges[1:]):
            np.matmul(a, b[:, lo:hi], out=out[:, lo:hi])
    return out


def test_the_measured_kernels_column_grains():
    assert T._COLUMN_GRAIN == {"skylakex": {"f": 16}}
    assert T.column_grain("f") == T._COLUMN_GRAIN.get(_core(), {}).get("f", 0)
    assert T.column_grain("d") == 0


@pytest.mark.parametrize("m,k,n", [(128, 784, 256), (64, 784, 256), (128, 1024, 1031),
                                   (33, 449, 700), (256, 256, 1024), (16, 1025, 2048)])
def test_column_blocks_keep_the_bits(m, k, n):
    # on this machine's kernel: column blocks at multiples of the grain, each past the
    # small-matrix kernel's size, give the whole product's bits in every layout (a grain
    # that is wrong here fails rather than ember trusting it)
    grain = T.column_grain("f")
    if not grain:
        return
    for layout in ("nn", "nt", "tn", "tt"):
        a, b = _operands(m, k, n, layout, np.float32, seed=m + k)
        with threadpool_limits(1):
            whole = a @ b
        for cut in (n // 2 // grain * grain, n // 3 // grain * grain + grain):
            assert all(T.row_blocks_keep_kernel("f", m * k * n, m * k * cols)
                       for cols in (cut, n - cut))
            np.testing.assert_array_equal(_in_columns(a, b, [0, cut, n]), whole,
                                          err_msg=f"{m, k, n, layout, cut}")


def test_the_direction_rule():
    # columns from twice as many columns as rows and an inner dimension of 256, where
    # the kernel keeps column blocks' bits; rows otherwise
    grain = T.column_grain("f")
    by = thread_products._split_direction
    assert by("f", 128, 784, 256) == ((grain, 1) if grain else (T.row_grain("f"), 0))
    assert by("f", 128, 255, 256) == (T.row_grain("f"), 0)
    assert by("f", 129, 784, 256) == (T.row_grain("f"), 0)
    assert by("f", 1024, 784, 256) == (T.row_grain("f"), 0)
    assert by("d", 128, 784, 256) == (T.row_grain("d"), 0)


@pytest.fixture
def two_threads(monkeypatch):
    # idle machine (BLAS's own threads allowed), the bounds as tuned; records the
    # bounds of every split the pool runs
    monkeypatch.setitem(T._idle, "next", float("inf"))
    monkeypatch.setitem(T._idle, "idle", True)
    before_scale = T.scale_bounds(1.0)
    before = ember.get_num_threads()
    seen = record_blocks(monkeypatch)
    yield at_one_and_two_threads(seen)
    ember.set_num_threads(before)
    T.scale_bounds(before_scale)
    T.scale_bounds(None)


@pytest.mark.parametrize("m,k,n", [(128, 784, 256), (64, 784, 256), (128, 1024, 1031),
                                   (100, 300, 700), (1024, 784, 256)])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
def test_split_products_of_few_rows(two_threads, m, k, n, layout):
    a, b = _operands(m, k, n, layout, np.float32, seed=n)
    grain, by_columns = thread_products._split_direction("f", m, k, n)
    with gemm.numpy_only():
        one, two, bounds = two_threads(lambda: gemm.matmul(a, b))
    np.testing.assert_array_equal(one, two)
    with threadpool_limits(1):
        np.testing.assert_array_equal(one, a @ b)
    np.testing.assert_allclose(two, (torch.tensor(a) @ torch.tensor(b)).numpy(),
                               rtol=1e-4, atol=1e-3)
    if not grain:
        assert not bounds  # not split on this kernel
        return
    # one split, in tiles of the grain along the columns (rows for 1024 x 784 x 256)
    [tiles] = bounds
    span = n if by_columns else m
    assert tiles[0] == 0 and tiles[-1] == span // grain and len(tiles) == 3
    assert by_columns == (T.column_grain("f") > 0 and n >= 2 * m)


def test_linear_layers_step_at_two_threads_keeps_one_threads_bits(two_threads):
    # the MLP's first layer (128 x 784 by 784 x 256: column blocks on SkylakeX) through
    # a few SGD steps: parameters at two threads equal to one thread's
    def train():
        ember.manual_seed(0)
        nn = ember.nn
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128))
        opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        rng = np.random.default_rng(0)
        x = ember.tensor(rng.standard_normal((128, 784), dtype=np.float32))
        for _ in range(3):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        return [p.detach().numpy().copy() for p in model.parameters()]
    with gemm.numpy_only():
        one, two, bounds = two_threads(train)
    for p, q in zip(one, two):
        np.testing.assert_array_equal(p, q)
    if T.column_grain("f"):
        assert [0, 8, 16] in bounds  # the forward's 256 columns in two blocks of 16s


@pytest.mark.parametrize("m,k,n", [(128, 784, 256), (1024, 256, 128), (100, 300, 700)])
def test_addmm_adds_the_bias_in_the_split_blocks(two_threads, monkeypatch, m, k, n):
    # a linear layer's ``bias + x @ w.T``: at two threads each block of the split product
    # adds its part of the bias (the same sums: one thread's bits), not the caller after
    a, b = _operands(m, k, n, "nt", np.float32, seed=m)
    bias = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    added = []
    real = gemm._add_rows

    def recording(r, row):
        added.append(r.shape)
        return real(r, row)
    monkeypatch.setattr(gemm, "_add_rows", recording)
    with gemm.numpy_only():
        one, two, bounds = two_threads(lambda: (added.clear(), gemm.addmm(bias, a, b))[1])
    np.testing.assert_array_equal(one, two)
    with threadpool_limits(1):
        np.testing.assert_array_equal(one, a @ b + bias)
    grain, by_columns = thread_products._split_direction("f", m, k, n)
    if not grain:
        assert added == [(m, n)]
        return
    [tiles] = bounds
    span = n if by_columns else m
    edges = [t * grain for t in tiles[:-1]] + [span]
    blocks = [hi - lo for lo, hi in zip(edges, edges[1:])]
    assert len(blocks) == 2
    assert sorted(added) == sorted((m, w) if by_columns else (w, n) for w in blocks)


def test_the_routing_is_still_read_from_threads():
    # ``ember.backend.threads``'s product names resolve to the routing's module
    from ember.backend.threads import WHOLE, blas_rows, matmul
    assert matmul is thread_products.matmul and WHOLE is thread_products.WHOLE
    assert blas_rows is thread_products.blas_rows
    with pytest.raises(AttributeError):
        T.no_such_name  # noqa: B018
