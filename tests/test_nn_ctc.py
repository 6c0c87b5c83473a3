"""F.ctc_loss / nn.CTCLoss against torch: losses and gradients (with respect to
log_probs and through log_softmax), reductions, zero_infinity, target layouts."""
import numpy as np
import pytest
import torch

import ember


def _run(m, logits, targets, il, tl, dtype, concat=False, unbatched=False, **kw):
    x = m.tensor(logits, dtype=getattr(m, dtype), requires_grad=True)
    lp = x.log_softmax(-1)
    lpd = lp.detach().requires_grad_(True)
    if concat:
        t = m.tensor(np.concatenate([targets[n, :tl[n]] for n in range(len(tl))]))
    else:
        t = m.tensor(targets)
    if unbatched:
        il, tl = int(il[0]), int(tl[0])
    loss = m.nn.CTCLoss(**kw)(lpd, t, m.tensor(il), m.tensor(tl))
    loss.backward(m.ones_like(loss))
    loss2 = m.nn.functional.ctc_loss(lp, t, m.tensor(il), m.tensor(tl), **kw)
    loss2.sum().backward()
    return [loss.detach().numpy(), lpd.grad.numpy(), x.grad.numpy()]


def _data(seed=0):
    rng = np.random.default_rng(seed)
    T, N, C = 12, 5, 5
    logits = rng.standard_normal((T, N, C))
    targets = rng.integers(1, C, (N, 6))
    targets[0, :3] = [2, 2, 3]  # a repeated label needs a blank between
    tl = np.array([3, 0, 6, 2, 4])
    il = np.array([12, 7, 10, 3, 2])  # the last sample cannot emit its 4 labels: inf loss
    return logits, targets, il, tl


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ctc_matches_torch(reduction, zero_infinity, dtype):
    logits, targets, il, tl = _data()
    kw = dict(reduction=reduction, zero_infinity=zero_infinity)
    e = _run(ember, logits, targets, il, tl, dtype, **kw)
    t = _run(torch, logits, targets, il, tl, dtype, **kw)
    tol = 1e-5 if dtype == "float32" else 1e-10
    for a, b in zip(e, t):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_ctc_concatenated_and_unbatched_targets():
    logits, targets, il, tl = _data(1)
    il, tl = il[:4], tl[:4]
    logits = logits[:, :4]
    for kw in (dict(concat=True), dict(concat=True, reduction="none")):
        for a, b in zip(_run(ember, logits, targets[:4], il, tl, "float64", **kw),
                        _run(torch, logits, targets[:4], il, tl, "float64", **kw)):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
    for red in ("none", "mean"):
        e = _run(ember, logits[:, 0], targets[0, :tl[0]], il, tl, "float64", unbatched=True,
                 reduction=red)
        t = _run(torch, logits[:, 0], targets[0, :tl[0]], il, tl, "float64", unbatched=True,
                 reduction=red)
        for a, b in zip(e, t):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_ctc_errors():
    for m in (ember, torch):
        lp = m.zeros(4, 2, 3).log_softmax(-1)
        with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 4"):
            m.nn.functional.ctc_loss(lp, m.ones(2, 2, dtype=m.long), m.tensor([5, 4]),
                                     m.tensor([2, 2]))
        with pytest.raises(RuntimeError, match="Expected tensor to have size 3 at dimension 0"):
            m.nn.functional.ctc_loss(lp, m.ones(4, dtype=m.long), m.tensor([4, 4]),
                                     m.tensor([1, 2]))
