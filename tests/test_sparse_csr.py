"""Sparse CSR tensors, ``torch.sparse.mm(..., reduce=)``, ``torch.sparse.sampled_addmm``
and gradients through sparse (COO and CSR) tensors, against torch."""
import io
import warnings

import numpy as np
import pytest
import torch

import ember

warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
warnings.filterwarnings("ignore", message=".*Sparse invariant checks.*")

# a 3x4 matrix with an explicit zero (row 0), an empty row (row 1) and a negative value
CROW, COL, VALS = [0, 3, 3, 6], [0, 1, 2, 0, 1, 3], [1.0, 0.0, 2.0, 3.0, -1.0, 2.0]
DENSE = [[1.0, 2.0], [3.0, -4.0], [1.0, 2.0], [-1.0, 0.5]]


def csr(m, dtype="float64", grad=False):
    dt = getattr(m, dtype)
    return m.sparse_csr_tensor(m.tensor(CROW), m.tensor(COL), m.tensor(VALS, dtype=dt), (3, 4),
                               requires_grad=grad)


def arr(x):
    if x.layout != (torch.strided if isinstance(x, torch.Tensor) else ember.strided):
        x = x.to_dense()
    return x.detach().numpy()


def same(e, t):
    """Same layout, shape, dtype, values (and, for CSR, the same compressed arrays)."""
    assert str(e.layout).split(".")[-1] == str(t.layout).split(".")[-1]
    assert tuple(e.shape) == tuple(t.shape)
    assert e.dtype.name == str(t.dtype).split(".")[1]
    if t.layout == torch.sparse_csr:
        np.testing.assert_array_equal(e.crow_indices().numpy(), t.crow_indices().numpy())
        np.testing.assert_array_equal(e.col_indices().numpy(), t.col_indices().numpy())
        np.testing.assert_allclose(e.values().detach().numpy(), t.values().detach().numpy(),
                                   rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(arr(e), arr(t), rtol=1e-12, atol=1e-12)


def grads(fn, make_inputs, go=None):
    """``fn`` on both libraries' inputs; returns (ember, torch) outputs and gradients."""
    res = []
    for m in (ember, torch):
        inputs = make_inputs(m)
        out = fn(m, *inputs)
        g = np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)) if go is None else go
        leaves = [x for x in inputs if x.requires_grad]
        res.append((out, m.autograd.grad(out, leaves, m.tensor(g, dtype=out.dtype))))
    return res


def check_grads(fn, make_inputs, go=None):
    (eo, eg), (to, tg) = grads(fn, make_inputs, go)
    same(eo, to)
    assert len(eg) == len(tg)
    for a, b in zip(eg, tg):
        same(a, b)


# ----- construction and conversion --------------------------------------------------------
def test_construct_matches_torch():
    e, t = csr(ember), csr(torch)
    same(e, t)
    assert e.layout is ember.sparse_csr and e.is_sparse_csr and not e.is_sparse
    assert e._nnz() == t._nnz() == 6
    assert e.crow_indices().dtype is ember.int64 and e.col_indices().dtype is ember.int64
    assert "layout=torch.sparse_csr" in repr(e) and "crow_indices=tensor([0, 3, 3, 6])" in repr(e)


def test_size_inferred_and_int32_kept():
    for m in (ember, torch):
        s = m.sparse_csr_tensor(m.tensor([0, 1, 2], dtype=m.int32),
                                m.tensor([2, 0], dtype=m.int32), m.tensor([1.0, 2.0]))
        assert tuple(s.shape) == (2, 3)
        assert str(s.crow_indices().dtype).endswith("int32")
    same(*(m.sparse_csr_tensor(m.tensor([0, 1, 2]), m.tensor([2, 0]), m.tensor([1.0, 2.0]))
           for m in (ember, torch)))


@pytest.mark.parametrize("shape", [(3, 4), (0, 5), (5, 0), (2, 3, 4)])
def test_dense_to_csr_matches_torch(shape):
    a = np.random.default_rng(0).standard_normal(shape) * (np.arange(np.prod(shape)) % 3 == 0
                                                           ).reshape(shape)
    if len(shape) == 3:
        a[1] = a[0][::-1, ::-1]  # the same count of nonzeros in each batch
    e, t = ember.tensor(a).to_sparse_csr(), torch.tensor(a).to_sparse_csr()
    same(e, t)
    same(ember.tensor(a).to_sparse(layout=ember.sparse_csr),
         torch.tensor(a).to_sparse(layout=torch.sparse_csr))
    same(e.to_sparse(), t.to_sparse())  # back to COO
    same(e.to_dense(), t.to_dense())


def test_batched_csr_constructor_and_batch_count_error():
    crow, col, vals = [[0, 1, 2], [0, 2, 2]], [[1, 0], [0, 1]], [[1.0, 2.0], [3.0, 4.0]]
    same(*(m.sparse_csr_tensor(m.tensor(crow), m.tensor(col), m.tensor(vals), (2, 2, 2))
           for m in (ember, torch)))
    a = [[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]]]
    for m in (ember, torch):
        with pytest.raises(RuntimeError):
            m.tensor(a).to_sparse_csr()


def test_coo_to_csr_and_back():
    i, v = [[0, 2, 0, 1], [1, 0, 1, 3]], [1.0, 2.0, 3.0, 0.0]  # a duplicate and an explicit 0
    e, t = (m.sparse_coo_tensor(m.tensor(i), m.tensor(v), (3, 4)).to_sparse_csr()
            for m in (ember, torch))
    same(e, t)
    same(e.to_sparse(), t.to_sparse())


@pytest.mark.parametrize("crow,col", [([1, 1, 2], [0, 1]), ([0, 2, 1], [0, 1]),
                                      ([0, 1, 2], [0, 5]), ([0, 2, 2], [1, 1]),
                                      ([0, 1], [0])])
def test_invariants_raise(crow, col):
    for m in (ember, torch):
        with pytest.raises(RuntimeError):
            m.sparse_csr_tensor(m.tensor(crow), m.tensor(col), m.ones(len(col)), (2, 3),
                                check_invariants=True)


def test_conversions_keep_layout():
    for m in (ember, torch):
        c = csr(m, "float32")
        for x in (c.double(), c.to(m.float64), c.detach(), c.clone(), c.float()):
            assert x.layout == m.sparse_csr
    same(csr(ember, "float32").double(), csr(torch, "float32").double())
    assert csr(ember, grad=True).double().requires_grad


def test_values_read_only_without_grad_and_dense_accessors_raise():
    c = csr(ember)
    with pytest.raises((RuntimeError, ValueError)):
        c.values().mul_(2)
    np.testing.assert_array_equal(c.values().numpy(), VALS)
    for m in (ember, torch):
        with pytest.raises(RuntimeError):
            m.ones(2, 2).crow_indices()
        with pytest.raises(RuntimeError):
            m.ones(2, 2).col_indices()


# ----- products with dense operands -------------------------------------------------------
PRODUCTS = {
    "mm": lambda m, c, d: m.mm(c, d),
    "matmul": lambda m, c, d: m.matmul(c, d),
    "operator": lambda m, c, d: c @ d,
    "method": lambda m, c, d: c.mm(d),
    "addmm": lambda m, c, d: m.addmm(m.ones(3, 2, dtype=m.float64), c, d, beta=0.5, alpha=2),
    "sparse.addmm": lambda m, c, d: m.sparse.addmm(m.ones(3, 2, dtype=m.float64), c, d),
    "sparse.mm": lambda m, c, d: m.sparse.mm(c, d),
    "sparse.mm sum": lambda m, c, d: m.sparse.mm(c, d, "sum"),
    "dense @ csr": lambda m, c, d: d.T @ c.to_dense().T.to_sparse_csr(),
}


@pytest.mark.parametrize("name", PRODUCTS)
def test_products_and_gradients(name):
    """Forward values and both gradients (torch's layouts: dense for ``torch.mm``, the
    CSR pattern for ``torch.sparse.mm``)."""
    check_grads(PRODUCTS[name], lambda m: [csr(m, grad=True),
                                          m.tensor(DENSE, dtype=m.float64, requires_grad=True)])


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sparse_mm_reduce(reduce, dtype):
    """Explicit zeros count, an empty row gives 0, the first of tied extremes wins."""
    def make(m):
        return [csr(m, dtype, grad=True),
                m.tensor(DENSE, dtype=getattr(m, dtype), requires_grad=True)]
    (eo, eg), (to, tg) = grads(lambda m, c, d: m.sparse.mm(c, d, reduce), make)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-6)
    for a, b in zip(eg, tg):
        assert str(a.layout).split(".")[-1] == str(b.layout).split(".")[-1]
        np.testing.assert_allclose(arr(a), arr(b), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_sparse_mm_reduce_ties(reduce):
    check_grads(lambda m, c, d: m.sparse.mm(c, d, reduce),
                lambda m: [m.sparse_csr_tensor(m.tensor([0, 3]), m.tensor([0, 1, 2]),
                                               m.ones(3, dtype=m.float64), (1, 3),
                                               requires_grad=True),
                           m.full((3, 1), 2.0, dtype=m.float64, requires_grad=True)])


@pytest.mark.parametrize("call", [
    lambda m: m.sparse.mm(csr(m), m.ones(4, 2, dtype=m.float64), "prod"),
    lambda m: m.sparse.mm(csr(m), m.ones(4, 2, dtype=m.float64), "max_"),
    lambda m: m.sparse.mm(csr(m), m.ones(3, 2, dtype=m.float64), "mean"),
    lambda m: m.sparse.mm(csr(m, "float32"), m.ones(4, 2, dtype=m.float64), "amax"),
])
def test_sparse_mm_reduce_errors(call):
    for m in (ember, torch):
        with pytest.raises(RuntimeError):
            call(m)


def test_sparse_mm_reduce_needs_csr():
    for m in (ember, torch):
        with pytest.raises(NotImplementedError):
            m.sparse.mm(csr(m).to_sparse(), m.ones(4, 2, dtype=m.float64), "mean")


# ----- sampled_addmm ----------------------------------------------------------------------
@pytest.mark.parametrize("beta", [0.2, 0.0])
def test_sampled_addmm(beta):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 5)), rng.standard_normal((5, 4))
    check_grads(lambda m, c, x, y: m.sparse.sampled_addmm(c, x, y, alpha=0.6, beta=beta),
                lambda m: [csr(m, grad=True), m.tensor(a, requires_grad=True),
                           m.tensor(b, requires_grad=True)])


def test_sampled_addmm_values_gradient():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 2)), rng.standard_normal((2, 4))

    def fn(m, c, x, y):
        return m.sparse.sampled_addmm(c, x, y).values()  # values() of the CSR result
    check_grads(fn, lambda m: [csr(m, grad=True), m.tensor(a, requires_grad=True),
                               m.tensor(b, requires_grad=True)])


def test_sampled_addmm_batched():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3, 2)), rng.standard_normal((2, 2, 3))
    base = np.stack([np.eye(3), np.eye(3)[::-1]])
    e, t = (m.sparse.sampled_addmm(m.tensor(base).to_sparse_csr(), m.tensor(a), m.tensor(b),
                                   beta=0.5) for m in (ember, torch))
    same(e, t)


def test_sampled_addmm_errors():
    for m in (ember, torch):
        with pytest.raises(RuntimeError):  # dtypes differ
            m.sparse.sampled_addmm(csr(m), m.ones(3, 2), m.ones(2, 4))
        with pytest.raises(RuntimeError):  # shapes cannot be multiplied
            m.sparse.sampled_addmm(csr(m), m.ones(3, 2, dtype=m.float64),
                                   m.ones(3, 4, dtype=m.float64))
        with pytest.raises(NotImplementedError):  # a dense input
            m.sparse.sampled_addmm(m.ones(3, 4, dtype=m.float64),
                                   m.ones(3, 2, dtype=m.float64),
                                   m.ones(2, 4, dtype=m.float64))


# ----- gradients through conversions ------------------------------------------------------
X = [[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]
CONVERSIONS = {
    "to_sparse": lambda m, x: x.to_sparse().to_dense(),
    "to_sparse(1)": lambda m, x: x.to_sparse(1).to_dense(),
    "to_sparse_csr": lambda m, x: x.to_sparse_csr().to_dense(),
    "to_sparse(layout=csr)": lambda m, x: x.to_sparse(layout=m.sparse_csr).to_dense(),
    "unmasked": lambda m, x: x.to_sparse_csr().to_dense(masked_grad=False),
    "coo unmasked": lambda m, x: x.to_sparse().to_dense(masked_grad=False),
    "values": lambda m, x: x.to_sparse_csr().values() * 2,
    "coo values": lambda m, x: x.to_sparse().values() * 2,
    "csr to coo": lambda m, x: x.to_sparse_csr().to_sparse().to_dense(),
    "double": lambda m, x: x.to_sparse_csr().double().to_dense(),
    "mm": lambda m, x: m.mm(x.to_sparse_csr(), m.ones(3, 2, dtype=m.float64)),
    "sparse.mm": lambda m, x: m.sparse.mm(x.to_sparse(), m.ones(3, 2, dtype=m.float64)),
    "sum": lambda m, x: x.to_sparse_csr().sum(),
}


@pytest.mark.parametrize("name", CONVERSIONS)
def test_gradients_through_conversions(name):
    check_grads(CONVERSIONS[name], lambda m: [m.tensor(X, dtype=m.float64, requires_grad=True)])


LEAVES = {
    "csr to_dense": lambda m, s: s.to_dense(),
    "csr values": lambda m, s: s.values(),
    "coo to_dense": lambda m, s: s.to_sparse().to_dense(),
    "csr twice": lambda m, s: m.sparse.mm(s, m.ones(4, 1, dtype=m.float64)) +
    m.sparse.mm(s, m.ones(4, 1, dtype=m.float64), "mean"),
}


@pytest.mark.parametrize("name", LEAVES)
def test_gradients_of_sparse_leaves(name):
    """A sparse leaf's gradient is sparse, of its pattern (explicit zero included)."""
    check_grads(LEAVES[name], lambda m: [csr(m, grad=True)])


def test_coo_leaf_and_values_leaf():
    i, v = [[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0]
    check_grads(lambda m, s: s.to_dense() * 2,
                lambda m: [m.sparse_coo_tensor(m.tensor(i), m.tensor(v, dtype=m.float64),
                                               (2, 3), requires_grad=True)])
    check_grads(lambda m, vals: m.sparse_coo_tensor(m.tensor(i), vals, (2, 3)).to_dense(),
                lambda m: [m.tensor(v, dtype=m.float64, requires_grad=True)])
    check_grads(lambda m, vals: m.sparse_csr_tensor(m.tensor(CROW), m.tensor(COL), vals,
                                                    (3, 4)).to_dense(),
                lambda m: [m.tensor(VALS, dtype=m.float64, requires_grad=True)])


def test_backward_accumulates_into_grad():
    for m in (ember, torch):
        c = csr(m, grad=True)
        m.sparse.mm(c, m.ones(4, 2, dtype=m.float64)).sum().backward()
        m.sparse.mm(c, m.ones(4, 2, dtype=m.float64), "mean").sum().backward()
        assert c.grad.layout == m.sparse_csr
        if m is ember:
            eg = c.grad
        else:
            same(eg, c.grad)


# ----- what is left out raises ------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda c: c.t(), lambda c: c.abs(), lambda c: c.mul_(2), lambda c: c[0], lambda c: -c,
    lambda c: c + 1, lambda c: c.sum(0), lambda c: c.to_sparse_csc(), lambda c: c @ c,
    lambda c: c.to_sparse(1), lambda c: c.T, lambda c: ember.save(c, io.BytesIO()),
    lambda c: ember.sparse.sampled_addmm(c, c, c),
    lambda c: ember.ones(2, 2).to_sparse(layout=ember.sparse_bsr),
    lambda c: ember.ones(2, 2).to_sparse_csr(dense_dim=1),
    lambda c: ember.sparse.mm(ember.stack([c.to_dense()] * 2).to_sparse_csr(),
                              ember.ones(4, 1, dtype=ember.float64), "mean"),
])
def test_left_out_raises_not_implemented(call):
    with pytest.raises(NotImplementedError):
        call(csr(ember))


def test_numpy_refuses_like_torch():
    for m in (ember, torch):
        with pytest.raises(TypeError):
            csr(m).numpy()


def test_coo_gradients_accumulate_sparse_and_sparse_mask_differentiates():
    for m in (ember, torch):
        c = csr(m).to_sparse().requires_grad_()
        for _ in range(2):
            m.sparse.mm(c, m.ones(4, 2, dtype=m.float64)).sum().backward()
        assert c.grad.layout == m.sparse_coo
        if m is ember:
            eg = c.grad
        else:
            same(eg, c.grad.coalesce())
    check_grads(lambda m, x: x.sparse_mask(csr(m).to_sparse()).to_dense(),
                lambda m: [m.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)])


def test_old_sparse_products_refuse_gradients():
    c = csr(ember).to_sparse().requires_grad_()
    with pytest.raises(NotImplementedError):
        ember.smm(c, ember.ones(4, 2, dtype=ember.float64))


def test_deepcopy_keeps_layout_and_grad_flag():
    import copy
    for make in (lambda: csr(ember, grad=True), lambda: csr(ember).to_sparse()):
        s = make()
        d = copy.deepcopy(s)
        assert d.layout is s.layout and d.requires_grad == s.requires_grad
        np.testing.assert_array_equal(d.to_dense().detach().numpy(),
                                      s.to_dense().detach().numpy())
    np.testing.assert_array_equal(copy.deepcopy(csr(ember)).crow_indices().numpy(), CROW)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_second_derivatives_by_gradgradcheck(reduce):
    """PyTorch has no second derivative of ``sparse.mm(reduce=)`` or of
    ``sampled_addmm`` through a CSR input; ember's pass the finite-difference checks."""
    rng = np.random.default_rng(0)
    y = ember.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    v = ember.tensor([1.0, 0.5, 2.0, 3.0, -1.0, 2.0], dtype=ember.float64, requires_grad=True)

    def f(v, y):
        c = ember.sparse_csr_tensor(ember.tensor(CROW), ember.tensor(COL), v, (3, 4))
        return ember.sparse.mm(c, y.T, reduce)
    assert ember.autograd.gradcheck(f, (v, y))
    assert ember.autograd.gradgradcheck(f, (v, y))
    x = ember.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    assert ember.autograd.gradgradcheck(
        lambda x, y: ember.sparse.sampled_addmm(csr(ember), x, y, alpha=0.6).to_dense(), (x, y))


def test_index_copies():
    e, t = csr(ember), csr(torch)
    for name in ("crow_indices_copy", "col_indices_copy"):
        a, b = getattr(ember, name)(e), getattr(torch, name)(t)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert a.dtype is ember.int64
