"""torch.masked against torch, driven by PyTorch's OpInfo samples: forward values and
gradients of every masked reduction and normalization."""
import numpy as np
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import ember

MASKED = sorted({op.name for op in op_db if op.name.startswith("masked.")
                 and op.name.split(".", 1)[1] in ember.masked.__all__})


def _to_ember(x):
    if isinstance(x, torch.Tensor):
        t = ember.tensor(x.detach().numpy().copy())
        if x.requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(x, torch.dtype):
        return getattr(ember, str(x).split(".")[1])
    if isinstance(x, (list, tuple)):
        return type(x)(_to_ember(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_ember(v) for k, v in x.items()}
    return x


def _samples(name, dtype):
    op = next(o for o in op_db if o.name == name)
    return op, list(op.sample_inputs("cpu", dtype, requires_grad=dtype.is_floating_point))


def test_every_masked_op_of_opinfo_exists():
    assert len(MASKED) >= 18, MASKED
    missing = [op.name for op in op_db if op.name.startswith("masked.")
               and not hasattr(ember.masked, op.name.split(".", 1)[1])]
    assert missing == []


@pytest.mark.parametrize("name", MASKED)
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_masked_op_matches_torch(name, dtype):
    op, samples = _samples(name, dtype)
    if dtype not in op.supported_dtypes("cpu"):
        return
    fn_t = op.op
    fn_e = getattr(ember.masked, name.split(".", 1)[1])
    for s in samples:
        args = (s.input, *s.args)
        out_t = fn_t(*args, **s.kwargs)
        eargs = _to_ember(args)
        out_e = fn_e(*eargs, **_to_ember(s.kwargs))
        assert str(out_e.dtype).split(".")[1] == str(out_t.dtype).split(".")[1], s
        assert tuple(out_e.shape) == tuple(out_t.shape), s
        tol = 1e-5 if out_t.dtype == torch.float32 else 1e-7
        np.testing.assert_allclose(out_e.detach().numpy(), out_t.detach().numpy(),
                                   rtol=tol, atol=tol / 100, equal_nan=True, err_msg=str(s))
        if dtype.is_floating_point and out_t.requires_grad:
            g = np.linspace(-1, 1, out_t.numel()).reshape(out_t.shape)
            finite = torch.isfinite(out_t).all()
            if not finite:
                continue  # the gradient of a masked-out (inf/nan) result is not compared
            (gt,) = torch.autograd.grad(out_t, s.input, torch.tensor(g), allow_unused=True)
            (ge,) = ember.autograd.grad(out_e, eargs[0], ember.tensor(g), allow_unused=True)
            if gt is None:
                assert ge is None or not ge.abs().sum().item()
            else:
                np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=1e-7, atol=1e-9,
                                           equal_nan=True, err_msg=str(s))
