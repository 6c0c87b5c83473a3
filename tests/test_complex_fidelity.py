"""Complex and integer inputs that ember once answered silently wrong, against torch:
conjugating transposes, ``vecdot``'s conjugate, complex ``linspace``/``cov``/
``float_power``/``logsumexp``/masked ``var``, index dtypes, ``conj_physical`` of bool and
the result dtypes of integer ``linalg.vander`` and ``bilinear``."""
import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(7)
Z = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex128)
W = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex128)

CASES = {
    "H": lambda m: m.tensor(Z).H,
    "mH": lambda m: m.tensor(Z).mH,
    "vecdot": lambda m: m.linalg.vecdot(m.tensor(Z), m.tensor(W)),
    "linspace complex": lambda m: m.linspace(0, 1 + 2j, 5, dtype=m.complex64),
    "cov complex": lambda m: m.cov(m.tensor(Z)),
    "float_power complex": lambda m: m.float_power(m.tensor(Z), 2),
    "logsumexp one element": lambda m: m.logsumexp(m.tensor(Z[:, :1] * 5), 1),
    "masked var complex": lambda m: m.masked.var(m.tensor(Z), 1),
    "var complex": lambda m: m.var(m.tensor(Z), 1),
    "logaddexp complex": lambda m: m.logaddexp(m.tensor(Z), m.tensor(W)),
    "triu_indices dtype": lambda m: m.triu_indices(3, 4, dtype=m.int32),
    "tril_indices dtype": lambda m: m.tril_indices(4, 3, 1, dtype=m.int32),
    "conj_physical bool": lambda m: m.conj_physical(m.tensor([True, False])),
    "householder_product complex": lambda m: m.linalg.householder_product(
        m.tensor(Z.T.copy()), m.tensor(W[0, :3].copy())),
    "vander int32": lambda m: m.linalg.vander(m.tensor([1, 2, 3], dtype=m.int32)),
    "vander uint8": lambda m: m.linalg.vander(m.tensor([1, 2, 3], dtype=m.uint8), N=4),
    "bilinear int32": lambda m: m.nn.functional.bilinear(
        m.arange(6, dtype=m.int32).reshape(2, 3), m.arange(6, dtype=m.int32).reshape(2, 3),
        m.arange(36, dtype=m.int32).reshape(4, 3, 3)),
    "addr bool scaled": lambda m: m.addr(m.tensor([[True, False]] * 2), m.tensor([True, False]),
                                         m.tensor([False, True]), beta=3, alpha=2),
    "addr bool beta 0": lambda m: m.addr(m.tensor(True), m.tensor([True, False]),
                                         m.tensor([False, True]), beta=0),
}

REFUSED = {
    "vander bool": lambda m: m.linalg.vander(m.tensor([True, False])),
    "vander float16": lambda m: m.linalg.vander(m.tensor([1.0, 2.0], dtype=m.float16)),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_as_torch(name):
    with pytest.raises(RuntimeError) as torch_err:
        REFUSED[name](torch)
    with pytest.raises(RuntimeError, match="supports floating point") as ember_err:
        REFUSED[name](ember)
    assert str(ember_err.value) == str(torch_err.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_as_torch(name):
    e, t = CASES[name](ember), CASES[name](torch)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e.dtype, t.dtype)
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.resolve_conj().numpy() if hasattr(e, "resolve_conj")
                               else e.numpy(), t.resolve_conj().numpy(), rtol=1e-6, atol=1e-6)
