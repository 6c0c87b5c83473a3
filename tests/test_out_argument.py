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
    # elementwise ops and reductions
    ("add", lambda m, o: m.add(m.ones(2), 1, alpha=2, out=o), "float32"),
    ("mul", lambda m, o: m.mul(m.arange(3.0), m.arange(3.0), out=o), "float32"),
    ("exp", lambda m, o: m.exp(m.arange(3.0), out=o), "float32"),
    ("sqrt", lambda m, o: m.sqrt(m.arange(4.0), out=o), "float32"),
    ("clamp", lambda m, o: m.clamp(m.arange(5.0), 1, 3, out=o), "float32"),
    ("pow", lambda m, o: m.pow(m.arange(3.0), 2, out=o), "float32"),
    ("sum", lambda m, o: m.sum(m.ones(2, 3), 1, out=o), "float32"),
    ("mean", lambda m, o: m.mean(m.arange(6.0).reshape(2, 3), 0, out=o), "float32"),
    ("prod", lambda m, o: m.prod(m.arange(1.0, 7.0).reshape(2, 3), 1, out=o), "float32"),
    ("std", lambda m, o: m.std(m.arange(6.0).reshape(2, 3), 1, out=o), "float32"),
    ("amax", lambda m, o: m.amax(m.arange(6.0).reshape(2, 3), 1, out=o), "float32"),
    ("logsumexp", lambda m, o: m.logsumexp(m.arange(6.0).reshape(2, 3), 1, out=o), "float32"),
    ("cumsum", lambda m, o: m.cumsum(m.arange(4.0), 0, out=o), "float32"),
    ("all", lambda m, o: m.all(m.tensor([[True, False], [True, True]]), 1, out=o), "bool"),
]


@pytest.mark.parametrize("name,fn,dtype", CASES, ids=[c[0] for c in CASES])
def test_out_is_written_like_torch(name, fn, dtype):
    eo = ember.empty(0, dtype=getattr(ember, dtype))
    to = torch.empty(0, dtype=getattr(torch, dtype))
    assert fn(ember, eo) is eo
    assert fn(torch, to) is to
    assert tuple(eo.shape) == tuple(to.shape)
    np.testing.assert_allclose(eo.numpy(), to.numpy(), rtol=1e-6)


@pytest.mark.parametrize("op", ["max", "min", "median", "mode"])
def test_out_tuple_for_values_and_indices(op):
    res = []
    for m in (ember, torch):
        v, i = m.empty(0), m.empty(0, dtype=m.long)
        r = getattr(m, op)(m.tensor([[1.0, 5.0, 2.0], [3.0, 2.0, 0.0]]), 1, out=(v, i))
        assert r[0] is v and r[1] is i
        res.append((v.tolist(), i.tolist()))
    assert res[0] == res[1]


def test_out_refuses_autograd():
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="out="):
            m.exp(m.ones(2, requires_grad=True), out=m.empty(2))
