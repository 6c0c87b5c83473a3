"""Lazy layers against torch: inferred shapes, parameter values after the same seed,
the class they become, state_dict loading, errors."""
import io

import numpy as np
import pytest
import torch

import ember

CASES = [
    ("LazyLinear", (3,), {}, (2, 5)),
    ("LazyLinear", (4,), {"bias": False}, (2, 3, 6)),
    ("LazyConv1d", (4, 2, 1, 0, 1, 2, False), {}, (2, 4, 6)),
    ("LazyConv2d", (4, 3), {"padding": 1}, (2, 3, 5, 5)),
    ("LazyConv3d", (2, 2), {"stride": 2}, (1, 2, 4, 4, 4)),
    ("LazyConvTranspose1d", (2, 3, 2), {}, (2, 3, 5)),
    ("LazyConvTranspose2d", (2, 3), {"groups": 1, "output_padding": 0}, (3, 4, 4)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 3, 3, 3)),
    ("LazyBatchNorm1d", (), {}, (4, 3)),
    ("LazyBatchNorm2d", (), {"momentum": 0.2}, (2, 3, 4, 4)),
    ("LazyBatchNorm3d", (), {}, (2, 2, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), {"affine": True}, (2, 3, 5)),
    ("LazyInstanceNorm2d", (), {"affine": False}, (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), {}, (2, 3, 2, 2, 2)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", CASES, ids=[c[0] for c in CASES])
def test_lazy_module_matches_torch(name, args, kwargs, shape):
    res = []
    for m in (ember, torch):
        m.manual_seed(0)
        mod = getattr(m.nn, name)(*args, **kwargs)
        assert mod.has_uninitialized_params()
        params = list(mod.parameters())
        # an optimizer made before the shapes are known still updates the parameters
        opt = m.optim.SGD(params, lr=0.1) if params else None
        x = m.randn(*shape)
        y = mod(x)
        if opt is not None:
            y.pow(2).sum().backward()
            opt.step()
        res.append((type(mod).__name__, repr(mod), y, mod.state_dict()))
    (en, er, ey, esd), (tn, tr, ty, tsd) = res
    assert en == tn == name[4:]
    assert er == tr
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert list(esd) == list(tsd)
    for k in tsd:
        np.testing.assert_allclose(esd[k].numpy(), tsd[k].numpy(), rtol=1e-5, atol=1e-6)


def test_lazy_load_state_dict_and_save():
    for m in (ember, torch):
        m.manual_seed(0)
        sd = m.nn.Linear(5, 3).state_dict()
        lazy = m.nn.LazyLinear(3)
        lazy.load_state_dict(sd)
        assert type(lazy).__name__ == "LazyLinear" and tuple(lazy.weight.shape) == (3, 5)
        y = lazy(m.ones(1, 5))
        assert type(lazy).__name__ == "Linear"
        np.testing.assert_allclose(y.detach().numpy(), (m.ones(1, 5) @ sd["weight"].T
                                                        + sd["bias"]).numpy(), rtol=1e-6)
    bn = ember.nn.LazyBatchNorm1d()
    bn(ember.randn(4, 3))
    buf = io.BytesIO()
    ember.save(bn.state_dict(), buf)
    buf.seek(0)
    back = torch.load(buf)
    assert tuple(back["running_mean"].shape) == (3,)


def test_lazy_errors_match_torch():
    msgs = []
    for m in (ember, torch):
        with pytest.raises(RuntimeError) as info:
            m.nn.LazyConv2d(4, 3)(m.randn(3, 4))
        msgs.append(str(info.value).replace("torch.", "").replace("ember.", ""))
        with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
            m.nn.LazyConv1d(4, 2, groups=2)(m.randn(1, 3, 5))
    assert msgs[0] == msgs[1]
    assert repr(ember.nn.parameter.UninitializedParameter()) == "<UninitializedParameter>"
