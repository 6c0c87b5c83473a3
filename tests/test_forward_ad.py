"""ember.autograd.forward_ad (tangents by the double-vjp trick) against torch's forward AD."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw

import ember
import ember.autograd.forward_ad as efw

RNG = np.random.default_rng(1)
OPS = {
    "sin_mul": lambda T, x, y: x.sin() * y,
    "exp_div": lambda T, x, y: x.exp() / (y * y + 1),
    "matmul": lambda T, x, y: x.reshape(2, 3) @ y.reshape(3, 2),
    "tanh_sum": lambda T, x, y: T.tanh(x + y).sum(),
    "softmax": lambda T, x, y: T.softmax(x * y, dim=0),
    "pow_log": lambda T, x, y: (x * x + 1).log() ** 2 + y,
    "relu_max": lambda T, x, y: T.relu(x).max() * y,
    "mean_var": lambda T, x, y: x.var() + y.mean(),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_tangents_match_torch_forward_ad(name):
    x, y, tx, ty = (RNG.standard_normal(6).astype(np.float32) for _ in range(4))
    f = OPS[name]
    with efw.dual_level():
        eo = efw.unpack_dual(f(ember, efw.make_dual(ember.tensor(x), ember.tensor(tx)),
                               efw.make_dual(ember.tensor(y), ember.tensor(ty))))
    with tfw.dual_level():
        to = tfw.unpack_dual(f(torch, tfw.make_dual(torch.tensor(x), torch.tensor(tx)),
                               tfw.make_dual(torch.tensor(y), torch.tensor(ty))))
    np.testing.assert_allclose(eo.primal.detach().numpy(), to.primal.numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(eo.tangent.numpy(), to.tangent.numpy(), rtol=1e-4, atol=1e-5)


def test_no_tangent_errors_and_levels():
    with efw.dual_level():
        d = efw.make_dual(ember.ones(2), ember.full((2,), 3.0))
        assert ember.equal(efw.unpack_dual(d).tangent, ember.full((2,), 3.0))
        assert efw.unpack_dual(ember.ones(2) * 2).tangent is None
        with pytest.raises(RuntimeError, match="different size"):
            efw.make_dual(ember.ones(2), ember.ones(3))
        with pytest.raises(RuntimeError, match="nested"):
            efw.enter_dual_level()
        with ember.no_grad():
            y = d * 2
            with pytest.raises(NotImplementedError, match="no_grad"):
                efw.unpack_dual(y)
    with pytest.raises(RuntimeError, match="no level"):
        efw.make_dual(ember.ones(2), ember.ones(2))
    assert efw.unpack_dual(d).tangent is None  # the level is closed
