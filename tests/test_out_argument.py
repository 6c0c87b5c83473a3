"""`out=`: written into the given tensor (resized) as PyTorch does, never ignored."""
import numpy as np
import pytest
import torch

import ember

CASES = [
    ("zeros", lambda m, o: m.zeros(2, 3, out=o), "float64"),
    ("ones", lambda m, o: m.ones(4, out=o), "float32"),
    ("full", lambda m, o: m.full((2,), 7.0, out=o), "float32"),
    ("arange", lambda m, o: m.arange(5, out=o), "int64"),
    ("linspace", lambda m, o: m.linspace(0, 1, 3, out=o), "float32"),
    ("eye", lambda m, o: m.eye(3, out=o), "float32"),
    ("index_select", lambda m, o: m.index_select(m.arange(6.0).reshape(2, 3), 1,
                                                 m.tensor([0, 2]), out=o), "float32"),
    ("gather", lambda m, o: m.gather(m.arange(6.0).reshape(2, 3), 1,
                                     m.tensor([[0], [2]]), out=o), "float32"),
    ("eq", lambda m, o: m.eq(m.arange(3.0), 1.0, out=o), "bool"),
    ("nonzero", lambda m, o: m.nonzero(m.tensor([0, 1, 1]), out=o), "int64"),
    ("take_along_dim", lambda m, o: m.take_along_dim(m.arange(4.0), m.tensor([3, 0]), out=o),
     "float32"),
]


@pytest.mark.parametrize("name,fn,dtype", CASES, ids=[c[0] for c in CASES])
def test_out_is_written_like_torch(name, fn, dtype):
    eo = ember.empty(0, dtype=getattr(ember, dtype))
    to = torch.empty(0, dtype=getattr(torch, dtype))
    assert fn(ember, eo) is eo
    assert fn(torch, to) is to
    assert tuple(eo.shape) == tuple(to.shape)
    np.testing.assert_array_equal(eo.numpy(), to.numpy())


def test_out_refused_where_not_supported():
    with pytest.raises(NotImplementedError):
        ember.add(ember.ones(2), 1, out=ember.empty(2))
