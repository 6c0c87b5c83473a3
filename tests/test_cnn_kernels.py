"""The elementwise kernels around a CNN's convolutions against torch, to the bit: relu's
gradient (a bit mask over cache-sized pieces, split over the intra-op threads), with
NaNs, infinities and signed zeros in the input and in the incoming gradient."""
import numpy as np
import pytest
import torch

import ember


def _specials(rng, n, dt):
    """Random values with NaN, +-inf and +-0 scattered through them."""
    a = rng.standard_normal(n).astype(dt)
    idx = rng.integers(0, n, size=(6, max(1, n // 50)))
    for row, v in zip(idx, (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-8)):
        a[row] = v
    return a


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [100, 4096, 65536 * 2 + 17, 300001])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16],
                         ids=["f32", "f64", "f16"])
def test_relu_gradient_bit_equal_to_torch(dt, n, threads):
    rng = np.random.default_rng(n)
    x, gy = _specials(rng, n, dt), _specials(rng, n, dt)
    prev = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        ex = ember.tensor(x, requires_grad=True)
        ember.relu(ex).backward(ember.tensor(gy))
    finally:
        ember.set_num_threads(prev)
    tx = torch.tensor(x, requires_grad=True)
    torch.relu(tx).backward(torch.tensor(gy))
    assert ex.grad.numpy().tobytes() == tx.grad.numpy().tobytes()


def test_relu_gradient_of_a_cnn_activation_shape():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 32, 26, 26)).astype(np.float32)
    gy = rng.standard_normal(x.shape).astype(np.float32)
    grads = []
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        m.nn.functional.relu(t).backward(m.tensor(gy))
        grads.append(t.grad.numpy())
    assert grads[0].tobytes() == grads[1].tobytes()


def test_relu_second_derivative_unchanged():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 80)).astype(np.float64)
    res = []
    for m in (ember, torch):
        t = m.tensor(x, requires_grad=True)
        g, = m.autograd.grad((m.relu(t) ** 2).sum(), t, create_graph=True)
        g.sum().backward()
        res.append((g.detach().numpy(), t.grad.numpy()))
    for e, t in zip(*res):
        np.testing.assert_array_equal(e, t)
