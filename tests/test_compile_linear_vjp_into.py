"""A compiled plan's linear backward with the input's gradient written into the arena
(``_linear.vjp_products_into``): at one thread with MKL not in use, the products on
NumPy's own calls found once per layout -- the same calls, so the same bits as
``nn_fused.linear_vjp`` through ``gemm`` -- and ``gemm``'s own route everywhere else."""
import numpy as np
import pytest
import torch

from ember._compile import _linear
from ember.backend import gemm, threads
from ember.ops import nn_fused


def _arrays(m, k, n, dtype, x_order):
    rng = np.random.default_rng(m * 7 + k + n)
    g = rng.standard_normal((m, n)).astype(dtype)
    x = rng.standard_normal((m, k)).astype(dtype)
    if x_order == "F":
        x = np.asfortranarray(x)
    elif x_order == "strided":
        x = np.repeat(x, 2, axis=1)[:, ::2]
    w = rng.standard_normal((n, k)).astype(dtype)
    if m > 2 and n > 1:
        g[0, 0] = np.nan
        g[1, 1] = -0.0
        x[2, 2] = np.inf
    return g, x, w


def _site(dtype):
    bufs = {}

    def out(i, shape, dt):
        key = (i, shape, np.dtype(dt))
        if key not in bufs:
            bufs[key] = np.full(shape, 7.0, dt)
        return bufs[key]
    return out


def _mkl_off(fn):
    with gemm.numpy_only():
        return fn()


@pytest.mark.parametrize("m,k,n", [(128, 784, 256), (128, 256, 128), (128, 128, 10),
                                   (64, 20, 24), (3, 5, 2), (1, 8, 4), (0, 8, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_order", ["C", "F", "strided"])
@pytest.mark.parametrize("edges", [(1, 1, 1), (None, 1, 1), (1, None, None)])
def test_same_bits_as_linear_vjp(m, k, n, dtype, x_order, edges):
    g, x, w = _arrays(m, k, n, dtype, x_order)
    routes = {}

    def both():
        got = [_linear.vjp_products_into(routes, edges, g, x, w, _site(dtype))
               for _ in range(2)]  # (found, then kept)
        want = nn_fused.linear_vjp(edges, g, x, w, _site(dtype), gemm.matmul, gemm.matmul)
        return got, want
    got, want = _mkl_off(both)
    assert threads.get_num_threads() == 1
    if not x.flags.f_contiguous:  # (gemm may run a product with such an x its own way)
        assert got[0] is not None
    for r in got:
        if r is None:  # the caller runs ``linear_vjp``
            continue
        for a, b in zip(r, want):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.dtype == b.dtype and a.shape == b.shape
                assert a.tobytes() == b.tobytes()
    if edges[0] is not None and m and got[0] is not None:  # torch's, to rounding
        tg, tw = torch.from_numpy(g), torch.from_numpy(w)
        np.testing.assert_allclose(got[0][0], (tg @ tw).numpy(), rtol=1e-4, atol=1e-4)


def test_gemms_own_route_elsewhere():
    g, x, w = _arrays(64, 32, 16, np.float32, "C")
    routes = {}
    edges = (1, 1, 1)
    saved = gemm._lib[0]
    gemm._lib[0] = None  # MKL not decided yet (or in use): gemm decides per product
    try:
        assert _linear.vjp_products_into(routes, edges, g, x, w, _site(np.float32)) is None
    finally:
        gemm._lib[0] = saved
    n = threads.get_num_threads()
    threads.set_num_threads(2)
    try:
        assert _mkl_off(lambda: _linear.vjp_products_into(
            routes, edges, g, x, w, _site(np.float32))) is None
    finally:
        threads.set_num_threads(n)
    half = [a.astype(np.float16) for a in (g, x, w)]
    assert _mkl_off(lambda: _linear.vjp_products_into(
        routes, edges, *half, _site(np.float16))) is None
    mixed = _mkl_off(lambda: _linear.vjp_products_into(
        routes, edges, g, x.astype(np.float64), w, _site(np.float32)))
    assert mixed is None
    x3 = np.zeros((2, 32, 32), np.float32)
    assert _mkl_off(lambda: _linear.vjp_products_into(
        routes, edges, g.reshape(2, 32, 16), x3, w, _site(np.float32))) is None
