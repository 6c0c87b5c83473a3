"""bincount, cov, cartesian_prod, trapezoid, gcd ... against torch, driven by PyTorch's
OpInfo samples: forward values (and dtypes) and gradients."""
import numpy as np
import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import ember
from ember.ops import (
    combinatorics,
    elementwise_composites,
    integration,
    norms,
    searching,
    stats,
    view_copies,
)

# the composites of ember ops that PyTorch's OpInfo database has samples for
_MODULES = (searching, combinatorics, integration, norms, elementwise_composites, view_copies)
COMPOSITES = {name for m in _MODULES for name in m.__all__} | {"cov", "corrcoef"}
assert COMPOSITES <= set(ember.ops.__all__) and {"cov", "corrcoef"} <= set(stats.__all__)
NAMES = sorted({op.name for op in op_db if op.name in COMPOSITES and not op.variant_test_name})


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


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def test_opinfo_covers_these_ops():
    assert len(NAMES) >= 18, NAMES


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.float32])
def test_op_matches_torch(name, dtype):
    op = next(o for o in op_db if o.name == name and not o.variant_test_name)
    if dtype not in op.supported_dtypes("cpu"):
        return
    fn_e = getattr(ember, name)
    grad = dtype.is_floating_point and op.supports_autograd
    for s in op.sample_inputs("cpu", dtype, requires_grad=grad):
        args = (s.input, *s.args)
        try:
            out_t = op.op(*args, **s.kwargs)
        except Exception:  # noqa: BLE001 - samples torch itself rejects are skipped
            continue
        eargs = _to_ember(args)
        out_e = fn_e(*eargs, **_to_ember(s.kwargs))
        for a, b in zip(_flat(out_e), _flat(out_t)):
            tol = 1e-5 if b.dtype in (torch.float32, torch.int32) or dtype == torch.float32 \
                else 1e-9
            assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1], (name, s)
            assert tuple(a.shape) == tuple(b.shape), (name, s)
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol,
                                       atol=tol, equal_nan=True, err_msg=f"{name} {s}")
        t_in = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        e_in = [a for a in eargs if isinstance(a, ember.Tensor) and a.requires_grad]
        outs_t = [o for o in _flat(out_t) if isinstance(o, torch.Tensor) and o.requires_grad]
        if not (t_in and outs_t):
            continue
        o_t = outs_t[0]
        o_e = _flat(out_e)[next(i for i, o in enumerate(_flat(out_t)) if o is o_t)]
        g = np.linspace(-1, 1, o_t.numel()).reshape(o_t.shape)
        gt = torch.autograd.grad(o_t, t_in, torch.tensor(g, dtype=o_t.dtype), allow_unused=True)
        ge = ember.autograd.grad(o_e, e_in, ember.tensor(g, dtype=o_e.dtype), allow_unused=True)
        for a, b in zip(ge, gt):
            if b is None or a is None:  # an absent gradient must be a zero one on the other side
                assert (a is None or not a.abs().sum().item()) and \
                    (b is None or not b.abs().sum().item())
                continue
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol,
                                       err_msg=f"grad {name} {s}")
