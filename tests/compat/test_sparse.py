"""Sparse COO tensors against torch: construction (size inference, duplicates, dtype,
hybrid values), coalesce, to_dense/to_sparse, indices/values, products with dense
tensors and their gradients, repr, errors."""
import warnings

import numpy as np
import pytest
import torch

import ember

warnings.filterwarnings("ignore", message="Sparse invariant checks")

IDX = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]]
VALS = [3.0, 4.0, 5.0, 1.0, -2.0]


def both(fn):
    return fn(ember), fn(torch)


def same(e, t):
    if isinstance(t, torch.Tensor):
        assert e.is_sparse == t.is_sparse
        ed = e.to_dense() if e.is_sparse else e
        td = t.to_dense() if t.is_sparse else t
        assert ed.dtype.name == str(td.dtype).replace("torch.", "")
        np.testing.assert_allclose(ed.detach().numpy(), td.detach().numpy(), rtol=1e-6)
    else:
        assert e == t


@pytest.mark.parametrize("name,fn", [
    ("construct", lambda m: m.sparse_coo_tensor(m.tensor(IDX), m.tensor(VALS), (3, 3))),
    ("infer_size", lambda m: m.sparse_coo_tensor(IDX, VALS)),
    ("dtype", lambda m: m.sparse_coo_tensor(np.array(IDX, np.int32), m.ones(5), (3, 4),
                                            dtype=m.int64)),
    ("hybrid", lambda m: m.sparse_coo_tensor([[0, 2, 0]], m.arange(6.0).view(3, 2), (4, 2))),
    ("empty", lambda m: m.sparse_coo_tensor(m.zeros(2, 0, dtype=m.long), m.zeros(0), (2, 2))),
    ("coalesce", lambda m: m.sparse_coo_tensor(IDX, VALS, (3, 3)).coalesce()),
    ("to_sparse", lambda m: m.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()),
    ("to_sparse_dim1", lambda m: m.tensor([[0.0, 0.0], [3.0, 0.0]]).to_sparse(1)),
    ("dense_plus_sparse", lambda m: m.eye(3) + m.sparse_coo_tensor(IDX, VALS, (3, 3))),
    ("sparse_mm", lambda m: m.mm(m.sparse_coo_tensor(IDX, VALS, (3, 3)),
                                 m.arange(6.0).view(3, 2))),
    ("spmm", lambda m: m.spmm(m.eye(3).to_sparse(), m.arange(6.0).view(3, 2))),
    ("dense_matmul_sparse", lambda m: m.ones(2, 3) @ m.sparse_coo_tensor(IDX, VALS, (3, 3))),
    ("sparse_sum", lambda m: m.sparse.sum(m.sparse_coo_tensor(IDX, VALS, (3, 3)))),
    ("to_double", lambda m: m.sparse_coo_tensor(IDX, VALS, (3, 3)).double()),
    ("sparse_mm_ns", lambda m: m.sparse.mm(m.eye(2).to_sparse(), m.ones(2, 2))),
])
def test_sparse_matches_torch(name, fn):
    same(*both(fn))


def test_coalesced_indices_values_and_flags():
    for m in (ember, torch):
        s = m.sparse_coo_tensor(IDX, VALS, (3, 3))
        assert not s.is_coalesced() and s._nnz() == 5
        assert s._indices().tolist() == IDX and s._values().tolist() == VALS
        with pytest.raises(RuntimeError):
            s.indices()
        c = s.coalesce()
        assert c.is_coalesced() and c._nnz() == 4
        assert c.indices().tolist() == [[0, 1, 1, 2], [2, 0, 2, 1]]
        assert c.values().tolist() == [4.0, 4.0, 5.0, -2.0]
        assert (c.sparse_dim(), c.dense_dim()) == (2, 0)
        assert str(s.layout) == "torch.sparse_coo" and str(m.ones(1).layout) == "torch.strided"
        assert s.to("cpu").is_sparse and not s.to_dense().is_sparse


def test_gradient_through_sparse_product_to_dense_operand():
    grads = []
    for m in (ember, torch):
        m.manual_seed(0)
        w = m.randn(3, 2, requires_grad=True)
        s = m.sparse_coo_tensor(IDX, VALS, (3, 3))
        (m.mm(s, w) ** 2).sum().backward()
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_repr_matches_torch_layout():
    e, t = both(lambda m: m.sparse_coo_tensor(IDX, VALS, (3, 3)))
    assert repr(e) == repr(t)
    e, t = both(lambda m: m.sparse_coo_tensor(IDX, m.ones(5, dtype=m.int32), (3, 3)))
    assert repr(e).replace("ember.", "torch.") == repr(t)


# ember always checks the indices (it builds the dense array); torch does with
# check_invariants=True
@pytest.mark.parametrize("fn", [
    lambda m: m.sparse_coo_tensor([[0, 3]], [1.0, 2.0], (3,), check_invariants=True),
    lambda m: m.sparse_coo_tensor([[0, 1]], [1.0, 2.0, 3.0], (3,)),
    lambda m: m.sparse_coo_tensor([0, 1], [1.0, 2.0], (3,)),
    lambda m: m.sparse_coo_tensor([[-1, 1]], [1.0, 2.0], (3,), check_invariants=True),
    lambda m: m.sparse_coo_tensor(IDX, VALS, (3, 3)).indices(),
])
def test_sparse_errors(fn):
    with pytest.raises(RuntimeError):
        fn(torch)
    with pytest.raises(RuntimeError):
        fn(ember)


def test_left_out_raises_not_implemented():
    # gradients through sparse tensors and the CSR layout are tested in test_sparse_csr.py
    with pytest.raises(NotImplementedError):
        ember.ones(2).to_sparse(layout="sparse_csr")
    with pytest.raises(NotImplementedError):
        ember.eye(2).to_sparse(layout=ember.sparse_csc)


@pytest.mark.parametrize("make", [lambda m: [[0.0, 1.0]], lambda m: m.tensor([[0.5, 2.0]]),
                                  lambda m: m.tensor([[0, 2]], dtype=m.int32)])
def test_indices_become_int64(make):
    e, t = both(lambda m: m.sparse_coo_tensor(make(m), [1.0, 2.0], (3,)))
    assert e._indices().dtype is ember.int64 and t._indices().dtype is torch.int64
    same(e, t)
