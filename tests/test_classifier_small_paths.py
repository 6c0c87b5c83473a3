"""The short-array paths of a classifier's step against torch: relu's gradient on small
arrays (the mask cast whole), log_softmax/softmax over short rows (the row maxima from a
transposed copy) and nll_loss's one-reduction target check."""
import numpy as np
import pytest
import torch

import ember
from ember.ops import activations


def _special(x, rng):
    """Plant NaNs of both signs, infinities and zeros of both signs in ``x``."""
    flat = x.reshape(-1)
    idx = rng.choice(flat.size, 12, replace=False)
    flat[idx[:3]] = np.nan
    flat[idx[3:6]] = -np.nan
    flat[idx[6:8]] = np.inf
    flat[idx[8:10]] = -np.inf
    flat[idx[10]] = 0.0
    flat[idx[11]] = -0.0
    return x


@pytest.mark.parametrize("shape,dtype", [((128, 256), np.float32), ((128, 128), np.float32),
                                         ((64, 64), np.float64), ((40, 50), np.float16),
                                         ((256, 256), np.float32)])
def test_relu_gradient_bits_match_torch(shape, dtype):
    rng = np.random.default_rng(0)
    x = _special(rng.standard_normal(shape).astype(dtype), rng)
    g = _special(rng.standard_normal(shape).astype(dtype), rng)
    ex = ember.tensor(x, requires_grad=True)
    ember.relu(ex).backward(ember.tensor(g))
    tx = torch.tensor(x, requires_grad=True)
    torch.relu(tx).backward(torch.tensor(g))
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[x.itemsize]
    np.testing.assert_array_equal(ex.grad.numpy().view(bits), tx.grad.numpy().view(bits))


def test_relu_gradient_small_and_large_paths_agree():
    rng = np.random.default_rng(1)
    y = _special(np.maximum(rng.standard_normal(1 << 16), 0).astype(np.float32), rng)
    g = _special(rng.standard_normal(1 << 16).astype(np.float32), rng)
    whole = activations._relu_grad_array(g, y)  # above the small size
    half = activations._SMALL_MASK
    parts = np.concatenate([activations._relu_grad_array(g[:half], y[:half]),
                            activations._relu_grad_array(g[half:], y[half:])])
    np.testing.assert_array_equal(whole.view(np.int32), parts.view(np.int32))


@pytest.mark.parametrize("shape", [(128, 10), (1024, 10), (32, 64), (128, 3), (31, 10),
                                   (128, 65)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_softmax_short_rows_match_torch(shape, dtype):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 5).astype(dtype)
    x[1, 0] = np.nan
    x[2, :] = -np.inf
    x[3, 1] = np.inf
    x[4, :] = 0.0
    x[4, ::2] = -0.0
    x[5, :] = -200.0
    x[5, 0] = 0.0
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    e, t = ember.log_softmax(ex, 1), torch.log_softmax(tx, 1)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)
    g = rng.standard_normal(shape).astype(dtype)
    e.backward(ember.tensor(g))
    t.backward(torch.tensor(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=tol * 10, atol=tol * 10)
    np.testing.assert_allclose(ember.softmax(ember.tensor(x), 1).numpy(),
                               torch.softmax(torch.tensor(x), 1).numpy(), rtol=tol, atol=tol)
    # rows are independent: a batch too short for the transposed maxima gives each row
    # the same bits as the long batch
    long = e.detach().numpy()
    for lo in range(0, shape[0], 16):
        short = ember.log_softmax(ember.tensor(x[lo:lo + 16]), 1).numpy()
        np.testing.assert_array_equal(short.view(np.uint8), long[lo:lo + 16].view(np.uint8))


@pytest.mark.parametrize("targets,ignore_index", [
    ([0, 9, 3, 3] * 32, -100), ([0, 9, -100, 3] * 32, -100), ([0, 9, 3, -1] * 32, -100),
    ([0, 10, 3, 3] * 32, -100), ([0, 9, 3, 3] * 32, 3), ([0, 9, 3, 3] * 32, 10),
    ([0, 9, 10, 3] * 32, 10), ([0, 9, -7, 3] * 32, -7)])
def test_cross_entropy_targets_match_torch(targets, ignore_index):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((len(targets), 10)).astype(np.float32)
    y = np.array(targets, np.int64)

    def run(m):
        xt = m.tensor(x, requires_grad=True)
        loss = m.nn.functional.cross_entropy(xt, m.tensor(y), ignore_index=ignore_index)
        loss.backward()
        return loss.detach().numpy(), xt.grad.numpy()

    try:
        want, want_err = run(torch), None
    except Exception as err:  # torch's error is the expected result
        want, want_err = None, err
    if want_err is not None:
        with pytest.raises(type(want_err), match="out of bounds"):
            run(ember)
        return
    got = run(ember)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-9)
