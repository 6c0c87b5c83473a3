"""Every op that reaches BLAS or LAPACK gives, at two ember threads on an idle machine
(NumPy only), the bits of its one-thread result, forward and backward, in float32 and
float64, with inner dimensions past the bound up to which OpenBLAS's threads keep its
one-thread sums (``threads.same_bits_k``: 448 float32, 384 float64 here). Each result is
also compared with torch."""
import numpy as np
import pytest
import torch

import ember
from ember.backend import gemm
from ember.backend import threads as T

# inner dimensions past the bound: OpenBLAS's threads change these sums' last bits
_K = {np.float32: 460, np.float64: 400}
_TOL = {np.float32: 2e-3, np.float64: 1e-8}


def _spd(rng, n, dtype):
    a = rng.standard_normal((n, n))
    return (a @ a.T / n + np.eye(n)).astype(dtype)


def _cases(k):
    """name -> (input shapes, function of (library, *tensors)); an input "spd" is a
    well-conditioned symmetric positive definite k x k matrix, "sq" a scaled square one."""
    m = k + 40

    def F(lib):
        return lib.nn.functional
    return {
        "mm": ([(64, k), (k, 48)], lambda t, a, b: a @ b),
        "vector@matrix": ([(600,), (600, 784)], lambda t, a, b: a @ b),
        "matrix@vector": ([(512, k), (k,)], lambda t, a, b: a @ b),
        "stack@vector": ([(4, 64, k), (k,)], lambda t, a, b: a @ b),
        "vector@stack": ([(k,), (4, k, 64)], lambda t, a, b: a @ b),
        "dot": ([(200000,), (200000,)], lambda t, a, b: t.dot(a, b)),
        "bmm": ([(4, 64, k), (4, k, 64)], lambda t, a, b: t.bmm(a, b)),
        "stack@matrix": ([(4, 64, k), (k, 64)], lambda t, a, b: a @ b),
        "matrix@stack": ([(64, k), (4, k, 64)], lambda t, a, b: a @ b),
        "addmm": ([(48,), (64, k), (k, 48)], lambda t, c, a, b: t.addmm(c, a, b, beta=0.5)),
        "addmv": ([(512,), (512, k), (k,)], lambda t, c, a, b: t.addmv(c, a, b)),
        "addr": ([(k, 512), (k,), (512,)], lambda t, c, a, b: t.addr(c, a, b)),
        "baddbmm": ([(4, 64, 64), (4, 64, k), (4, k, 64)],
                    lambda t, c, a, b: t.baddbmm(c, a, b, alpha=2.0)),
        "addbmm": ([(64, 64), (4, 64, k), (4, k, 64)], lambda t, c, a, b: t.addbmm(c, a, b)),
        "linear": ([(4, 16, k), (64, k), (64,)], lambda t, x, w, b: F(t).linear(x, w, b)),
        "bilinear": ([(8, k), (8, 600), (2, k, 600), (2,)],
                     lambda t, a, b, w, c: F(t).bilinear(a, b, w, c)),
        "einsum bij,bjk": ([(4, 64, k), (4, k, 64)],
                           lambda t, a, b: t.einsum("bij,bjk->bik", a, b)),
        "einsum i,ij": ([(k,), (k, 512)], lambda t, a, b: t.einsum("i,ij->j", a, b)),
        "tensordot": ([(4, 64, k), (4, k, 64)],
                      lambda t, a, b: t.tensordot(a, b, dims=([0, 2], [0, 1]))),
        "inner": ([(64, k), (48, k)], lambda t, a, b: t.inner(a, b)),
        "multi_dot": ([(64, k), (k, 300), (300, 32)],
                      lambda t, a, b, c: t.linalg.multi_dot([a, b, c])),
        "matrix_power": (["sq"], lambda t, a: t.linalg.matrix_power(a, 3)),
        "cdist": ([(64, k), (48, k)], lambda t, a, b: t.cdist(a, b)),
        "sdpa": ([(1, 2, k, 32), (1, 2, k, 32), (1, 2, k, 32)],
                 lambda t, q, kk, v: F(t).scaled_dot_product_attention(q, kk, v)),
        "conv2d": ([(2, 64, 10, 10), (32, 64, 3, 3)], lambda t, x, w: F(t).conv2d(x, w)),
        "conv1d": ([(2, 64, 40), (32, 64, 9)], lambda t, x, w: F(t).conv1d(x, w)),
        "conv_transpose2d": ([(2, 64, 8, 8), (64, 32, 3, 3)],
                             lambda t, x, w: F(t).conv_transpose2d(x, w)),
        "layer_norm": ([(m, 64), (64,), (64,)],
                       lambda t, x, w, b: F(t).layer_norm(x, (64,), w, b)),
        "solve": (["spd", (k, 8)], lambda t, a, b: t.linalg.solve(a, b)),
        "inv": (["spd"], lambda t, a: t.linalg.inv(a)),
        "cholesky": (["spd"], lambda t, a: t.linalg.cholesky(a)),
        "slogdet": (["spd"], lambda t, a: t.linalg.slogdet(a)[1]),
        "qr": ([(m, k)], lambda t, a: t.linalg.qr(a)[1]),
        "eigvalsh": (["spd"], lambda t, a: t.linalg.eigvalsh(a)),
        "svdvals": ([(m, k)], lambda t, a: t.linalg.svdvals(a)),
        "lstsq": ([(m, k), (m, 4)], lambda t, a, b: t.linalg.lstsq(a, b).solution),
        "pinv": ([(m, k)], lambda t, a: t.linalg.pinv(a)),
        "lu_factor": (["sq"], lambda t, a: t.linalg.lu_factor(a)[0]),
        "lu": (["sq"], lambda t, a: t.linalg.lu(a)[2]),
        "solve_triangular": (["spd", (k, 8)],
                             lambda t, a, b: t.linalg.solve_triangular(a, b, upper=True)),
        "lu_solve": (["sq", (k, 8)],
                     lambda t, a, b: t.linalg.lu_solve(*t.linalg.lu_factor(a), b)),
        "cond": (["sq"], lambda t, a: t.linalg.cond(a)),
        "eigvals": (["sq"], lambda t, a: t.linalg.eigvals(a).abs().sort()[0]),
        "matrix_exp": (["sq"], lambda t, a: t.linalg.matrix_exp(a)),
        "matrix_norm nuc": ([(m, k)], lambda t, a: t.linalg.matrix_norm(a, "nuc")),
    }


_CASES = _cases(460)


@pytest.fixture(scope="module")
def idle():
    """ember at 1 or 2 threads with a core to spare and the pool quiet: where BLAS's own
    threads take the products ember does not split (patched for the module)."""
    saved = T.cores_to_spare, ember.get_num_threads()
    T.cores_to_spare = lambda: True
    yield
    T.cores_to_spare = saved[0]
    ember.set_num_threads(saved[1])


def _inputs(name, dtype):
    shapes = _cases(_K[dtype])[name][0]
    rng = np.random.default_rng(sum(map(ord, name)))
    k = _K[dtype]
    out = []
    for s in shapes:
        if s == "spd":
            out.append(_spd(rng, k, dtype))
        elif s == "sq":
            out.append((rng.standard_normal((k, k)) / (2 * np.sqrt(k)) +
                        np.eye(k)).astype(dtype))
        else:
            out.append(rng.standard_normal(s).astype(dtype))
    return out


def _run(lib, fn, arrays, seed_grad, grad=True):
    if not grad:  # inference: no graph recorded (a product may take another route)
        return [fn(lib, *[lib.tensor(a) for a in arrays]).numpy().copy()]
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = fn(lib, *ts)
    g = np.random.default_rng(1).standard_normal(tuple(out.shape)).astype(arrays[0].dtype)
    out.backward(lib.tensor(g))
    return [out.detach().numpy().copy()] + [t.grad.numpy().copy() for t in ts]


# the products without a graph (inference): those with a 1-D or stacked operand
_INFERENCE = ["vector@matrix", "matrix@vector", "stack@vector", "vector@stack", "dot",
              "stack@matrix", "matrix@stack", "addmv", "einsum i,ij", "bilinear"]


def _same_bits(name, dtype, grad):
    arrays = _inputs(name, dtype)
    fn = _cases(_K[dtype])[name][1]
    res = {}
    with gemm.numpy_only():
        for n in (1, 2):
            ember.set_num_threads(n)
            T._state["pool_used"] = float("-inf")
            res[n] = _run(ember, fn, arrays, 1, grad)
    for i, (one, two) in enumerate(zip(res[1], res[2])):
        assert np.array_equal(one, two, equal_nan=True), \
            (name, "output" if i == 0 else f"grad {i - 1}", np.abs(one - two).max())
    ref = _run(torch, fn, arrays, 1, grad)
    for i, (mine, theirs) in enumerate(zip(res[1], ref)):
        scale = np.abs(theirs).max() + 1
        assert np.abs(mine - theirs).max() <= _TOL[dtype] * scale, \
            (name, i, np.abs(mine - theirs).max() / scale)


# every case in both dtypes (the float64 chain's gradient of the middle matrix, 400 x 32
# by 32 x 300, differed while float64 products were split in row blocks)
_SWEEP = [(name, dtype) for name in _CASES for dtype in (np.float32, np.float64)]


@pytest.mark.parametrize("name,dtype", _SWEEP,
                         ids=[f"{n}-{np.dtype(d).char}" for n, d in _SWEEP])
def test_one_and_two_threads_give_the_same_bits(idle, name, dtype):
    _same_bits(name, dtype, True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", _INFERENCE)
def test_inference_products_give_the_same_bits(idle, name, dtype):
    _same_bits(name, dtype, False)


def test_orthogonal_init_and_smm_give_the_same_bits(idle):
    # nn.init.orthogonal_ (a QR) and torch.smm (its dense product) outside the graph
    a = _inputs("mm", np.float32)
    res = {}
    for n in (1, 2):
        ember.set_num_threads(n)
        T._state["pool_used"] = float("-inf")
        w = ember.empty(500, 460, dtype=ember.float64)
        ember.nn.init.orthogonal_(w, generator=ember.Generator().manual_seed(0))
        T._state["pool_used"] = float("-inf")
        p = ember.smm(ember.tensor(a[0]).to_sparse(), ember.tensor(a[1]))
        res[n] = w.numpy().copy(), p.to_dense().numpy().copy()
    assert np.array_equal(res[1][0], res[2][0]) and np.array_equal(res[1][1], res[2][1])
    w = torch.from_numpy(res[1][0])
    assert torch.allclose(w.T @ w, torch.eye(460, dtype=torch.float64), atol=1e-12)
    want = torch.smm(torch.from_numpy(a[0]).to_sparse(), torch.from_numpy(a[1]))
    np.testing.assert_allclose(res[1][1], want.to_dense().numpy(), rtol=1e-4, atol=1e-4)


def test_complex_products_give_the_same_bits(idle):
    rng = np.random.default_rng(3)
    a, b = ((rng.standard_normal(s) + 1j * rng.standard_normal(s)).astype(np.complex64)
            for s in ((64, 600), (600, 200)))
    res = {}
    for n in (1, 2):
        ember.set_num_threads(n)
        T._state["pool_used"] = float("-inf")
        res[n] = (ember.tensor(a) @ ember.tensor(b)).numpy().copy()
    assert np.array_equal(res[1], res[2])
    np.testing.assert_allclose(res[1], (torch.from_numpy(a) @ torch.from_numpy(b)).numpy(),
                               rtol=1e-4, atol=1e-3)


def _lbfgs(lib, target):
    p = lib.zeros(target.size, dtype=lib.float64, requires_grad=True)
    opt = lib.optim.LBFGS([p], lr=0.5, max_iter=4)
    t = lib.tensor(target)

    def closure():
        opt.zero_grad()
        loss = ((p - t) ** 4).sum() + (p * p).sum()
        loss.backward()
        return loss
    opt.step(closure)
    return p.detach().numpy().copy()


def test_lbfgs_gives_the_same_bits(idle):
    # its dot products of the flattened float64 parameters (OpenBLAS's threads change
    # a float64 dot's sum from about 1e5 elements)
    target = np.random.default_rng(4).standard_normal(200000)
    res = {}
    for n in (1, 2):
        ember.set_num_threads(n)
        T._state["pool_used"] = float("-inf")
        res[n] = _lbfgs(ember, target)
    assert np.array_equal(res[1], res[2])
    np.testing.assert_allclose(res[1], _lbfgs(torch, target), rtol=1e-9, atol=1e-12)
