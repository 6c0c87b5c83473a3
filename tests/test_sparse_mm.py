"""torch's sparse-times-dense products and sparse in-place resizes, against torch."""
import numpy as np
import pytest
import torch

import ember

A = np.array([[0.0, 2, 0], [3, 0, 4], [0, 0, 0]])
B = np.arange(6.0).reshape(3, 2) - 2
C = np.array([[1.0, 0], [0, 0], [0, 5]])


def _same_sparse(e, t):
    assert e.is_sparse and t.is_sparse
    assert tuple(e.shape) == tuple(t.shape)
    assert e.sparse_dim() == t.sparse_dim() and e.dense_dim() == t.dense_dim()
    assert e._nnz() == t._nnz()
    np.testing.assert_array_equal(e._indices().numpy(), t._indices().numpy())
    np.testing.assert_allclose(e._values().numpy(), t._values().numpy())
    np.testing.assert_allclose(e.to_dense().numpy(), t.to_dense().numpy())


@pytest.mark.parametrize("name", ["smm", "hsmm", "hspmm"])
def test_sparse_products(name):
    e = getattr(ember, name)(ember.tensor(A).to_sparse(), ember.tensor(B))
    t = getattr(torch, name)(torch.tensor(A).to_sparse(), torch.tensor(B))
    _same_sparse(e, t)


def test_dsmm_and_methods():
    e = ember.dsmm(ember.tensor(A).to_sparse(), ember.tensor(B))
    t = torch.dsmm(torch.tensor(A).to_sparse(), torch.tensor(B))
    np.testing.assert_allclose(e.numpy(), t.numpy())
    _same_sparse(ember.tensor(A).to_sparse().smm(ember.tensor(B)),
                 torch.tensor(A).to_sparse().smm(torch.tensor(B)))
    with pytest.raises(RuntimeError, match="sparse"):
        ember.smm(ember.tensor(A), ember.tensor(B))


@pytest.mark.parametrize("name", ["sspaddmm", "saddmm"])
def test_sspaddmm(name):
    e = getattr(ember, name)(ember.tensor(C).to_sparse(), ember.tensor(A).to_sparse(),
                             ember.tensor(B), beta=2, alpha=3)
    t = getattr(torch, name)(torch.tensor(C).to_sparse(), torch.tensor(A).to_sparse(),
                             torch.tensor(B), beta=2, alpha=3)
    _same_sparse(e, t)
    _same_sparse(ember.tensor(C).to_sparse().sspaddmm(ember.tensor(A).to_sparse(),
                                                      ember.tensor(B)),
                 torch.tensor(C).to_sparse().sspaddmm(torch.tensor(A).to_sparse(),
                                                      torch.tensor(B)))


def test_sparse_resizes():
    for size in [(4, 5), (3, 3)]:
        e, t = ember.tensor(A).to_sparse(), torch.tensor(A).to_sparse()
        e.sparse_resize_(size, 2, 0)
        t.sparse_resize_(size, 2, 0)
        _same_sparse(e, t)
    e, t = ember.tensor(A).to_sparse(), torch.tensor(A).to_sparse()
    with pytest.raises(RuntimeError, match="shrinking"):
        e.sparse_resize_((2, 4), 2, 0)
    with pytest.raises(RuntimeError, match="shrinking"):
        t.sparse_resize_((2, 4), 2, 0)
    e.sparse_resize_and_clear_((5, 2), 2, 0)
    t.sparse_resize_and_clear_((5, 2), 2, 0)
    _same_sparse(e, t)
    e, t = ember.tensor(A).to_sparse(), torch.tensor(A).to_sparse()
    e.resize_as_sparse_(ember.zeros(4, 6).to_sparse())
    ember.resize_as_sparse_(e, ember.zeros(5, 6).to_sparse())
    torch.resize_as_sparse_(t, torch.zeros(5, 6).to_sparse())
    _same_sparse(e, t)
    with pytest.raises(NotImplementedError):
        ember.ones(2).sparse_resize_((3, 3), 2, 0)
    with pytest.raises(NotImplementedError):
        torch.ones(2).sparse_resize_((3, 3), 2, 0)
