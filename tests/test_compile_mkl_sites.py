"""A compiled plan's linear products with MKL's arguments found once per layout
(``ember._compile._mkl``): the same bits as ``gemm.matmul``/``gemm.addmm`` on every
layout and on repeated calls, ``gemm``'s own call wherever it would not use MKL, and
compiled linear steps equal to eager ember (bitwise) and torch."""
import copy

import numpy as np
import pytest
import torch

import ember
from ember._compile import _mkl
from ember.backend import gemm


def _layouts(rng, m, k, n, dtype):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    yield "C,C", a, b
    yield "C,T", a, np.ascontiguousarray(b.T).T          # a weight's transpose (x @ w.T)
    yield "T,C", np.ascontiguousarray(a.T).T, b          # g.T @ x
    yield "T,T", np.asfortranarray(a), np.asfortranarray(b)
    wide = rng.standard_normal((m, k + 8)).astype(dtype)
    yield "strided rows", wide[:, 3:3 + k], b            # a row stride past the row
    yield "every other column", rng.standard_normal((m, 2 * k)).astype(dtype)[:, ::2], b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(128, 784, 256), (128, 256, 10), (64, 64, 64),
                                   (8, 8, 8)])
def test_site_products_equal_gemm_bitwise(dtype, shape):
    rng = np.random.default_rng(0)
    m, k, n = shape
    for name, a, b in _layouts(rng, m, k, n, dtype):
        bias = rng.standard_normal(n).astype(dtype)
        site, site_b = _mkl.Site(), _mkl.Site()
        for _ in range(3):  # the first call finds the arguments, the next reuse them
            want = gemm.matmul(a, b)
            assert np.array_equal(site.matmul(a, b), want), name
            out, out2 = np.empty((m, n), dtype), np.empty((m, n), dtype)
            assert site.matmul(a, b, out) is out
            gemm.matmul(a, b, out2)
            assert np.array_equal(out, out2), name
            want = gemm.addmm(bias, a, b)
            assert np.array_equal(site_b.addmm(bias, a, b), want), name
            assert site_b.addmm(bias, a, b, out) is out
            gemm.addmm(bias, a, b, out2)
            assert np.array_equal(out, out2), name
            np.testing.assert_allclose(out2, a.astype(np.float64) @ b + bias,
                                       rtol=1e-4, atol=1e-3)
        # where MKL is loaded and the product is above its threshold, the found
        # arguments are kept (else ``gemm``'s own call runs)
        big = 2 * m * k * n >= (gemm.THRESHOLD if n >= 16 else gemm.NARROW_THRESHOLD)
        if gemm.mkl_available() and big and "every other" not in name:
            assert any(p for p in site.memo.values()), name


def test_site_defers_to_gemm_where_memory_is_shared_or_mkl_is_off():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    site = _mkl.Site()
    for _ in range(2):
        site.matmul(a, b, np.empty((256, 256), np.float32))
    # the output is an operand: NumPy's matmul, as gemm does with that output (its
    # bits need not be MKL's: they differ on AMD's EPYC, where MKL runs other kernels)
    y = a.copy()
    want = gemm.matmul(y, b, y)
    x = a.copy()
    got = site.matmul(x, b, x)
    np.testing.assert_array_equal(got, want)
    # the bias in the output's memory: gemm.addmm's copy of it first
    out = rng.standard_normal((256, 256)).astype(np.float32)
    bias_view = out[0]
    want = gemm.addmm(bias_view.copy(), a, b)
    site_b = _mkl.Site()
    for _ in range(2):
        site_b.addmm(bias_view.copy(), a, b, np.empty((256, 256), np.float32))
    np.testing.assert_array_equal(site_b.addmm(bias_view, a, b, out), want)
    # MKL switched off for a block: NumPy's products, as gemm's
    with gemm.numpy_only():
        want = gemm.matmul(a, b)
        np.testing.assert_array_equal(site.matmul(a, b), want)
    np.testing.assert_array_equal(site.matmul(a, b), gemm.matmul(a, b))


@pytest.mark.parametrize("workload", ["mlp", "transformer"])
def test_compiled_linear_steps_equal_eager_bitwise_and_torch(workload, monkeypatch):
    rng = np.random.default_rng(2)
    ember.manual_seed(0)
    if workload == "mlp":
        nn = ember.nn
        net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                            nn.Linear(128, 10))
        xa = rng.standard_normal((128, 784)).astype(np.float32)
        ya = rng.integers(0, 10, 128)
        tnet = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                   torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                   torch.nn.Linear(128, 10))

        def loss_of(F, out, y):
            return F.cross_entropy(out, y)
    else:
        net = ember.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0,
                                               batch_first=True)
        xa = rng.standard_normal((8, 32, 64)).astype(np.float32)
        ya = rng.standard_normal((8, 32, 64)).astype(np.float32)
        tnet = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0,
                                                batch_first=True)

        def loss_of(F, out, y):
            return F.mse_loss(out, y)
    tnet.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                          for k, v in net.state_dict().items()})
    ref, plain = copy.deepcopy(net), copy.deepcopy(net)

    def train(m, model, compiled):
        opt = m.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        x, y = m.tensor(xa) if m is ember else torch.from_numpy(xa), \
            m.tensor(ya) if m is ember else torch.from_numpy(ya)

        def step():
            opt.zero_grad()
            loss = loss_of(m.nn.functional, model(x), y)
            loss.backward()
            opt.step()
            return loss
        run = m.compile(step) if compiled else step
        losses = [run().item() for _ in range(4)]
        return losses, [p.detach().numpy().copy() for p in model.parameters()], run

    got, params, run = train(ember, net, True)
    want, ref_params, _ = train(ember, ref, False)
    with monkeypatch.context() as mp:  # every product through gemm's own call
        mp.setattr(_mkl.Site, "_args", lambda self, a, b, out, bias: None)
        got_plain, plain_params, _ = train(ember, plain, True)
    assert got == got_plain
    for a, b in zip(params, plain_params):
        assert np.array_equal(a, b)
    assert run.stats["eager"] == 0 and run.stats["replays"] == 3
    tgot, tparams, _ = train(torch, tnet, False)
    np.testing.assert_allclose(got, tgot, rtol=1e-4, atol=1e-5)
    for a, b in zip(params, tparams):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
    if workload == "mlp":  # (the Transformer's compiled step rounds differently from
        # eager ember already without these sites: its attention and views)
        assert got == want
        for a, b in zip(params, ref_params):
            assert np.array_equal(a, b)
    plan = run._cache[0].plan
    linear = [st for st in plan.grad_steps if _mkl.is_linear(st.node.target)]
    assert linear and all(st.declared[0].__name__ == "vjp" and
                          st.declared[0].__module__ == _mkl.__name__ for st in linear)


@pytest.mark.parametrize("shape", [(128, 128, 10), (32, 8, 8), (1, 1, 1), (0, 5, 3)])
def test_a_product_below_every_threshold_goes_to_gemm_without_a_layout_key(shape):
    m, k, n = shape
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32).T  # a weight's transpose
    bias = rng.standard_normal(n).astype(np.float32)
    assert 2 * m * k * n < min(gemm.THRESHOLD, gemm.NARROW_THRESHOLD)
    site = _mkl.Site()
    for _ in range(2):
        out = np.empty((m, n), np.float32)
        assert site.matmul(a, b, out) is out
        assert out.tobytes() == gemm.matmul(a, b).tobytes()
        assert site.addmm(bias, a, b).tobytes() == gemm.addmm(bias, a, b).tobytes()
    assert not site.memo  # (no layout was looked at)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["matrix", "c3d", "transposed3d"])
def test_linear_vjp_bias_rows_summed_on_kept_ones_equal_linear_vjp_bitwise(layout,
                                                                          monkeypatch):
    """A plan's linear backward on MKL sites sums the bias's rows on the kept vector of
    ones (``matmul_graph._rows_summed``) for a matrix or C-ordered input: the same bits
    as ``nn_fused.linear_vjp`` (its ``gemm.sum_rows``), and for an input of more dims not
    C-ordered, NumPy's sum as there."""
    from ember.ops import nn_fused
    summed = []
    inner = _mkl._rows_summed

    def spy(g):
        summed.append(g.shape)
        return inner(g)
    monkeypatch.setattr(_mkl, "_rows_summed", spy)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((256, 384)).astype(np.float32)
    if layout == "matrix":
        x = rng.standard_normal((300, 384)).astype(np.float32)
    elif layout == "c3d":
        x = rng.standard_normal((3, 100, 384)).astype(np.float32)
    else:
        x = rng.standard_normal((100, 3, 384)).astype(np.float32).transpose(1, 0, 2)
    g = rng.standard_normal(x.shape[:-1] + (256,)).astype(np.float32)
    g.flat[:3] = [-0.0, np.nan, 0.0]

    class Op:
        _edges = (object(), object(), object())
    vjp = _mkl.linear_vjp()
    for _ in range(2):
        got = vjp(Op(), [g], [x, w, None], [None])
        want = nn_fused.linear_vjp(Op._edges, g, x, w, None, gemm.matmul, gemm.matmul)
        for a, b in zip(got, want):
            assert a.shape == b.shape and a.dtype == b.dtype
            assert a.tobytes() == b.tobytes()
    if layout == "transposed3d":
        assert summed == []
    else:
        assert summed and all(s == (300, 256) for s in summed)
