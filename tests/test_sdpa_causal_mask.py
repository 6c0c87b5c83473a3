"""``F.scaled_dot_product_attention`` with an ``attn_mask`` and ``is_causal=True``:
PyTorch 2.13's fused CPU kernel applies both masks, its math kernel raises. Against
torch over both kernels' inputs: values, gradients (the mask's too), node names, errors."""
import numpy as np
import pytest
import torch

import ember

RNG = np.random.default_rng(0)


def _run(m, q, k, v, mask, mask_grad):
    F = m.nn.functional
    tq, tk, tv = (m.tensor(a, requires_grad=True) for a in (q, k, v))
    tm = m.tensor(mask, requires_grad=mask_grad and mask.dtype != bool)
    try:
        out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, is_causal=True)
    except RuntimeError as e:
        return str(e), None
    out.sum().backward()
    grads = [out.detach().numpy()] + [t.grad.numpy() for t in (tq, tk, tv)]
    if tm.requires_grad:
        grads.append(tm.grad.numpy())
    return grads, out.grad_fn.name()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["bool", "float", "float needing grad"])
@pytest.mark.parametrize("lead,ev", [((2, 3), 8), ((1, 2), 8), ((2, 3), 6), ((3,), 8)])
def test_mask_and_causal_as_torch(lead, ev, kind, dtype):
    taken = 0
    for L, S in [(3, 5), (5, 3), (4, 4)]:
        for mshape in [(L, S), (1, S), lead + (L, S)]:
            q = RNG.standard_normal(lead + (L, 8)).astype(dtype)
            k = RNG.standard_normal(lead + (S, 8)).astype(dtype)
            v = RNG.standard_normal(lead + (S, ev)).astype(dtype)
            mask = RNG.random(mshape) > 0.3 if kind == "bool" else \
                RNG.standard_normal(mshape).astype(dtype)
            e, e_name = _run(ember, q, k, v, mask, kind == "float needing grad")
            t, t_name = _run(torch, q, k, v, mask, kind == "float needing grad")
            if isinstance(t, str):
                assert e == t
                continue
            taken += 1
            assert e_name == t_name
            assert len(e) == len(t)
            tol = 1e-5 if dtype == np.float32 else 1e-12
            for a, b in zip(e, t):
                np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    # the fused kernel's inputs (4-d, one head size, a mask without grad) are taken
    assert taken == (9 if len(lead) == 2 and ev == 8 and kind != "float needing grad"
                     else 0)
