"""``einsum`` gives the same bits with a graph (eager, inputs requiring grad), without one
(``no_grad``, plain inputs) and in captured graphs (``ember.compile``, ``jit.trace``
replay): every mode runs PyTorch's sequence of ops (alignment, pairwise ``bmm``), so the
values are torch's up to float32 rounding."""
import numpy as np
import pytest
import torch

import ember

# (equation, operand shapes): matmuls, batches, outer products, traces and diagonals,
# ellipses with broadcasting, size-1 broadcasting, labels summed alone, implicit output,
# upper case, one to three operands, long contractions (BLAS) and short ones
CASES = [
    ("ij,jk->ik", [(5, 7), (7, 3)]),
    ("ij,jk->ik", [(64, 48), (48, 40)]),
    ("bij,bjk->bik", [(4, 9, 17), (4, 17, 6)]),
    ("btc,qcd->qbtd", [(64, 4, 16), (3, 16, 8)]),
    ("b t c, q c d -> q b t d", [(32, 4, 16), (3, 16, 8)]),
    ("i,j->ij", [(6,), (5,)]),
    ("i,i->", [(300,)]*2),
    ("ii->", [(6, 6)]),
    ("ii->i", [(6, 6)]),
    ("iij->j", [(4, 4, 5)]),
    ("ijj,jk->ik", [(3, 4, 4), (4, 5)]),
    ("ij->", [(20, 30)]),
    ("ij->j", [(20, 30)]),
    ("ijk->kji", [(3, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 5, 6), (3, 6, 4)]),
    ("...ij->...ji", [(2, 3, 4, 5)]),
    ("i...,i...->...", [(7, 3, 4), (7, 1, 4)]),
    ("ij,ij->ij", [(4, 1), (4, 6)]),
    ("ij,jk->i", [(5, 6), (6, 7)]),
    ("ij,kl->", [(3, 4), (5, 6)]),
    ("ij,jk", [(5, 6), (6, 7)]),
    ("ba,ca", [(5, 6), (7, 6)]),
    ("iA,Aj->ij", [(5, 8), (8, 3)]),
    ("ij,jk,kl->il", [(5, 6), (6, 7), (7, 4)]),
    ("bij,bjk,bkl->bil", [(2, 30, 20), (2, 20, 25), (2, 25, 10)]),
    ("i,ij,j->", [(40,), (40, 50), (50,)]),
    ("abc,abcd->d", [(10, 11, 12), (10, 11, 12, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 16, 8), (2, 3, 16, 8)]),
]
MODES = ("grad", "no_grad", "plain", "compile", "trace")


def _inputs(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _run(mode, eq, arrays):
    """ember's einsum of ``arrays`` in one mode, as an array."""
    def f(*xs):
        return ember.einsum(eq, *xs)
    if mode == "grad":
        xs = [ember.tensor(a, requires_grad=True) for a in arrays]
        out = f(*xs)
        assert out.grad_fn is not None and type(out.grad_fn).__name__ != "EinsumBackward0"
        return out.detach().numpy()
    if mode == "no_grad":
        with ember.no_grad():
            return f(*[ember.tensor(a, requires_grad=True) for a in arrays]).numpy()
    xs = [ember.tensor(a) for a in arrays]
    if mode == "plain":
        return f(*xs).numpy()
    if mode == "compile":
        c = ember.compile(f)
        c(*xs)
        return c(*xs).numpy()   # the replay
    traced = ember.jit.trace(f, tuple(xs))
    return traced(*[ember.tensor(a) for a in arrays]).numpy()


def _same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eq,shapes", CASES)
def test_modes_give_the_same_bits_as_torch_values(eq, shapes, dtype):
    arrays = _inputs(shapes, dtype, len(eq))
    outs = {m: _run(m, eq, arrays) for m in MODES}
    for m in MODES[1:]:
        assert _same_bits(outs["grad"], outs[m]), (m, np.abs(outs["grad"] - outs[m]).max())
    ref = torch.einsum(eq, *[torch.tensor(a) for a in arrays]).numpy()
    assert ref.shape == outs["grad"].shape and ref.dtype == outs["grad"].dtype
    tol = 2e-6 if dtype == np.float32 else 1e-14
    scale = np.abs(ref).max() + 1
    np.testing.assert_allclose(outs["grad"], ref, rtol=tol, atol=tol * scale)


def test_einmix_compiled_equals_eager_every_time():
    # einops' EinMix: a compiled model and the eager one agreed only up to ~2e-7
    rng = np.random.default_rng(1)
    w = ember.tensor(rng.standard_normal((3, 16, 8)).astype(np.float32), requires_grad=True)

    def mix(x):
        return ember.einsum("btc,qcd->qbtd", x.reshape(x.shape[0], -1, 16), w)
    c = ember.compile(mix)
    for size in (16, 32, 64) * 5:
        x = ember.tensor(rng.random((size, size)).astype(np.float32))
        assert _same_bits(mix(x).detach().numpy(), c(x).detach().numpy())


def _grads(eq, arrays, compiled):
    xs = [ember.tensor(a, requires_grad=True) for a in arrays]
    f = (lambda *t: ember.einsum(eq, *t))
    out = ember.compile(f)(*xs) if compiled else f(*xs)
    assert (type(out.grad_fn).__name__ == "EinsumBackward0") == compiled
    w = np.random.default_rng(2).standard_normal(out.shape).astype(arrays[0].dtype)
    (out * ember.tensor(w)).sum().backward()
    return [x.grad.numpy() for x in xs], w


@pytest.mark.parametrize("eq,shapes", CASES)
def test_one_node_gradient_matches_the_graph_and_torch(eq, shapes):
    # the one-node op's gradient (an einsum again) against the recorded graph's and
    # torch's: every operand, repeated labels, broadcasting and labels summed alone
    arrays = _inputs(shapes, np.float64, 3)
    node, w = _grads(eq, arrays, True)
    graph, _ = _grads(eq, arrays, False)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    (torch.einsum(eq, *ts) * torch.tensor(w)).sum().backward()
    for a, b, t in zip(node, graph, ts):
        ref = t.grad.numpy()
        assert a.shape == ref.shape and b.shape == ref.shape
        np.testing.assert_allclose(a, ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b, ref, rtol=1e-12, atol=1e-12)


def test_one_node_second_order_gradient():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((4, 4, 3)), rng.standard_normal((4, 5))
    res = []
    for m in (ember, torch):
        x = m.tensor(a, requires_grad=True)
        y = m.tensor(b, requires_grad=True)
        if m is ember:
            out = ember.compile(lambda p, q: ember.einsum("iij,ik->jk", p, q))(x, y)
        else:
            out = torch.einsum("iij,ik->jk", x, y)
        gx, = m.autograd.grad((out ** 2).sum(), x, create_graph=True)
        gy, = m.autograd.grad(gx.sum(), y)
        res.append((gx.detach().numpy(), gy.numpy()))
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_low_precision_modes_agree(dtype):
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(8, 40), (40, 6), (6, 3)]]
    outs = []
    for grad in (True, False):
        xs = [ember.tensor(a).to(getattr(ember, dtype)).requires_grad_(grad) for a in arrays]
        outs.append(ember.einsum("ij,jk,kl->il", *xs).detach().float().numpy())
    assert _same_bits(*outs)
    ref = torch.einsum("ij,jk,kl->il", *[torch.tensor(a).to(getattr(torch, dtype))
                                         for a in arrays]).float().numpy()
    np.testing.assert_allclose(outs[0], ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())


def test_integer_einsum_is_exact():
    rng = np.random.default_rng(6)
    a, b = rng.integers(-5, 5, (4, 6)), rng.integers(-5, 5, (6, 3))
    out = ember.einsum("ij,jk->ik", ember.tensor(a), ember.tensor(b))
    ref = torch.einsum("ij,jk->ik", torch.tensor(a), torch.tensor(b))
    assert out.dtype == ember.int64
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


# the recorded graph's gradient is made another way here: a product's (``mul``'s
# gradient, then a sum over the broadcast dims), a broadcast operand's (a sum after the
# ``bmm``) and a chain's (each pair's ``bmm`` backward in turn)
GRAD_MADE_OTHERWISE = {"i,j->ij", "ij,ij->ij", "i...,i...->...", "ij,jk,kl->il",
                       "bij,bjk,bkl->bil", "i,ij,j->"}


@pytest.mark.parametrize("eq,shapes", [c for c in CASES if c[0] not in GRAD_MADE_OTHERWISE])
def test_one_node_gradient_has_the_graphs_bits(eq, shapes):
    arrays = _inputs(shapes, np.float32, 3)
    node, _ = _grads(eq, arrays, True)
    graph, _ = _grads(eq, arrays, False)
    for a, b in zip(node, graph):
        assert _same_bits(a, b), np.abs(a - b).max()


def test_one_node_gradient_of_complex_operands():
    # the gradient of a complex operand contracts with the others' conjugates
    rng = np.random.default_rng(7)
    shapes = [(3, 4), (4, 2), (2, 5)]
    arrays = [rng.standard_normal(s) + 1j * rng.standard_normal(s) for s in shapes]
    res = []
    for m in (ember, torch):
        xs = [m.tensor(a, requires_grad=True) for a in arrays]
        f = (lambda *t, m=m: m.einsum("ij,jk,kl->il", *t))
        out = (ember.compile(f) if m is ember else f)(*xs)
        out.abs().sum().backward()
        res.append([x.grad.numpy() for x in xs])
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-12, atol=1e-12)
