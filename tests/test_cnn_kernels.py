"""The kernels around a CNN's convolutions against torch: relu's gradient to the bit (a
bit mask over cache-sized pieces, split over the intra-op threads), and max pooling's
gradient and its gather (double backward), with NaNs, infinities and signed zeros in
the input and in the incoming gradient."""
import numpy as np
import pytest
import torch

import ember


def _specials(rng, n, dt):
    """Random values with NaN, +-inf and +-0 scattered through them."""
    a = rng.standard_normal(n).astype(dt)
    idx = rng.integers(0, n, size=(6, max(1, n // 50)))
    for row, v in zip(idx, (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-8)):
        a[row] = v
    return a


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [100, 4096, 65536 * 2 + 17, 300001])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16],
                         ids=["f32", "f64", "f16"])
def test_relu_gradient_bit_equal_to_torch(dt, n, threads):
    rng = np.random.default_rng(n)
    x, gy = _specials(rng, n, dt), _specials(rng, n, dt)
    prev = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        ex = ember.tensor(x, requires_grad=True)
        ember.relu(ex).backward(ember.tensor(gy))
    finally:
        ember.set_num_threads(prev)
    tx = torch.tensor(x, requires_grad=True)
    torch.relu(tx).backward(torch.tensor(gy))
    assert ex.grad.numpy().tobytes() == tx.grad.numpy().tobytes()


def test_relu_gradient_of_a_cnn_activation_shape():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32, 26, 26)).astype(np.float32)
    gy = rng.standard_normal(x.shape).astype(np.float32)
    grads = []
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        m.nn.functional.relu(t).backward(m.tensor(gy))
        grads.append(t.grad.numpy())
    assert grads[0].tobytes() == grads[1].tobytes()


def test_relu_second_derivative_unchanged():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 80)).astype(np.float64)
    res = []
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        g, = m.autograd.grad((m.relu(t) ** 2).sum(), t, create_graph=True)
        g.sum().backward()
        res.append((g.detach().numpy(), t.grad.numpy()))
    for e, t in zip(*res):
        np.testing.assert_array_equal(e, t)


# (pool function, input shape, kwargs): disjoint windows take the masked product, the
# overlapping ones an add per kernel position
POOLS = [
    ("max_pool2d", (2, 3, 8, 6), dict(kernel_size=2)),
    ("max_pool2d", (2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1)),
    ("max_pool1d", (2, 3, 11), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ("max_pool3d", (1, 2, 4, 5, 4), dict(kernel_size=2, stride=(1, 2, 2))),
]


@pytest.mark.parametrize("fn,shape,kw", POOLS, ids=[f"{p[0]}_{i}" for i, p in enumerate(POOLS)])
def test_max_pool_gradient_of_non_finite_values(fn, shape, kw):
    rng = np.random.default_rng(2)
    x = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float32)  # no ties
    res = []
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        y = getattr(m.nn.functional, fn)(t, **kw)
        gy = _specials(np.random.default_rng(3), y.numel(), np.float32).reshape(tuple(y.shape))
        gyt = m.tensor(gy, requires_grad=True)
        gx, = m.autograd.grad(y, t, gyt, create_graph=True)
        # the gather (double backward) of a tangent with non-finite values off the maxima
        v = _specials(np.random.default_rng(4), x.size, np.float32).reshape(shape)
        ggy, = m.autograd.grad(gx, gyt, m.tensor(v))
        res.append((gx.detach().numpy(), ggy.numpy()))
    for e, t in zip(*res):
        # NaN and inf where torch has them; overlapping windows may sum in another order
        np.testing.assert_allclose(e, t, rtol=1e-6, atol=0, equal_nan=True)
        assert not np.isnan(e[np.isfinite(t)]).any()


# (input shape, kwargs) of 2-d max pools whose windows lie inside the input: numba's
# kernels (the 2x2 stride-2 one and the general one) beside the NumPy loops
NUMBA_POOLS = [
    ((4, 8, 26, 26), dict(kernel_size=2)),
    ((4, 8, 11, 11), dict(kernel_size=2)),              # a row and column left over
    ((2, 3, 9, 10), dict(kernel_size=3, stride=2)),     # overlapping: NumPy's gradient
    ((2, 3, 9, 10), dict(kernel_size=2, stride=3)),     # gaps between windows
    ((2, 3, 9, 11), dict(kernel_size=2, dilation=2)),
    ((2, 3, 9, 11), dict(kernel_size=3, ceil_mode=True)),  # a partial window: NumPy
    ((3, 10, 7), dict(kernel_size=2)),                  # unbatched
]


def _pool_run(x, gy, kw, numba_kernels, monkeypatch):
    from ember.ops import pooling
    monkeypatch.setattr(pooling, "_NUMBA", {} if numba_kernels else {"pool": None})
    t = ember.tensor(x, requires_grad=True)
    y, idx = ember.nn.functional.max_pool2d(t, return_indices=True, **kw)
    y.backward(ember.tensor(gy))
    used = pooling._NUMBA.get("pool")
    return [a.copy() for a in (y.detach().numpy(), idx.numpy(), t.grad.numpy())], used


@pytest.mark.parametrize("finite", [True, False], ids=["finite", "nonfinite_grad"])
@pytest.mark.parametrize("shape,kw", NUMBA_POOLS, ids=[str(i) for i in range(len(NUMBA_POOLS))])
def test_max_pool_numba_kernels_bit_equal_to_numpy_and_match_torch(shape, kw, finite,
                                                                   monkeypatch):
    rng = np.random.default_rng(5)
    x = _specials(rng, int(np.prod(shape)), np.float32).reshape(shape)
    x.reshape(-1)[:8] = [1.0, 1.0, 1.0, 1.0, -0.0, 0.0, 0.0, -0.0]  # ties, signed zeros
    with torch.no_grad():
        out_shape = torch.nn.functional.max_pool2d(torch.tensor(x), **kw).shape
    gy = rng.standard_normal(out_shape).astype(np.float32)
    if not finite:
        gy.reshape(-1)[::7] = np.inf
    fast, used = _pool_run(x, gy, kw, True, monkeypatch)
    # numba is installed with the test extras; a partial window is NumPy's alone
    assert (used is not None) == ("ceil_mode" not in kw)
    slow, _ = _pool_run(x, gy, kw, False, monkeypatch)
    for a, b in zip(fast, slow):
        assert a.tobytes() == b.tobytes()
    tx = torch.tensor(x, requires_grad=True)
    ty, tidx = torch.nn.functional.max_pool2d(tx, return_indices=True, **kw)
    ty.backward(torch.tensor(gy))
    np.testing.assert_array_equal(fast[0], ty.detach().numpy())
    np.testing.assert_array_equal(fast[1], tidx.numpy())
    # overlapping windows (NumPy's loops) add in another order than torch
    np.testing.assert_allclose(fast[2], tx.grad.numpy(), rtol=1e-6, atol=0, equal_nan=True)


# max pools on the NumPy loops (numba hidden), in pieces of samples: windows strided
# along the last dim (each position's values copied once, then compared), windows that
# tile the input exactly (the gradient's buffer left unfilled before the windows'
# writes) or leave strips over, and windows that do not tile
NUMPY_POOLS = [
    ("max_pool1d", (3, 4, 11), dict(kernel_size=2)),                    # a strip left over
    ("max_pool1d", (3, 4, 12), dict(kernel_size=3)),                    # tiles exactly
    ("max_pool2d", (5, 6, 26, 26), dict(kernel_size=2)),                # tiles exactly
    ("max_pool2d", (3, 4, 11, 9), dict(kernel_size=(2, 3))),             # strips in both dims
    ("max_pool2d", (2, 3, 9, 10), dict(kernel_size=3, stride=2)),        # overlapping
    ("max_pool2d", (2, 3, 9, 11), dict(kernel_size=3, ceil_mode=True)),  # a partial window
    ("max_pool2d", (2, 3, 8, 9), dict(kernel_size=2, padding=1)),        # padding
    ("max_pool2d", (4, 9, 9), dict(kernel_size=2, stride=(2, 1))),       # width stride 1
    ("max_pool3d", (2, 2, 5, 6, 7), dict(kernel_size=2)),
]


@pytest.mark.parametrize("finite", [True, False], ids=["finite", "nonfinite_grad"])
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("fn,shape,kw", NUMPY_POOLS,
                         ids=[f"{p[0]}_{i}" for i, p in enumerate(NUMPY_POOLS)])
def test_max_pool_numpy_loops_match_torch_at_one_and_two_threads(fn, shape, kw, dt, finite,
                                                                   monkeypatch):
    from ember.ops import pooling
    monkeypatch.setattr(pooling, "_NUMBA", {"pool": None})
    rng = np.random.default_rng(6)
    x = _specials(rng, int(np.prod(shape)), dt).reshape(shape)
    x.reshape(-1)[:8] = [1.0, 1.0, 1.0, 1.0, -0.0, 0.0, 0.0, -0.0]  # ties, signed zeros
    tx = torch.tensor(x, requires_grad=True)
    ty, tidx = getattr(torch.nn.functional, fn)(tx, return_indices=True, **kw)
    gy = (_specials(rng, ty.numel(), dt) if not finite else
          rng.standard_normal(ty.numel()).astype(dt)).reshape(tuple(ty.shape))
    ty.backward(torch.tensor(gy))
    runs = []
    prev = ember.get_num_threads()
    try:
        # one and two threads, then one thread with every sample its own piece of the
        # loops' cache-sized pieces (``pooling._pieces``)
        for threads, piece in ((1, pooling._PIECE_BYTES), (2, pooling._PIECE_BYTES), (1, 1)):
            ember.set_num_threads(threads)
            monkeypatch.setattr(pooling, "_PIECE_BYTES", piece)
            t = ember.tensor(x, requires_grad=True)
            y, idx = getattr(ember.nn.functional, fn)(t, return_indices=True, **kw)
            y.backward(ember.tensor(gy))
            runs.append([y.detach().numpy(), idx.numpy(), t.grad.numpy()])
    finally:
        ember.set_num_threads(prev)
    for a, b, c in zip(*runs):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    y, idx, gx = runs[0]
    np.testing.assert_array_equal(y, ty.detach().numpy())   # NaNs where torch has them
    np.testing.assert_array_equal(idx, tidx.numpy())
    # (zeros off the maxima, as torch's: nothing left of an uninitialised buffer)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-6, atol=0, equal_nan=True)
