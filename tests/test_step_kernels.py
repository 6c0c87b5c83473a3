"""Kernels of the benchmarked training steps (benchmarks/training_steps.py) against
torch where their fast paths promise more than closeness: mse_loss's gradient bit for
bit, and attention's weights laid out for its softmax with the values, gradients and
output strides of torch."""
import numpy as np
import pytest
import torch

import ember


@pytest.mark.parametrize("shape", [(16, 64, 128), (7, 33), (5,)])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_mse_loss_gradient_bits_as_torch(shape, reduction):
    """The reduced loss's input gradient: d * (2 * g) in place, the bits of torch's
    2/n * d * g; the target's gradient only when it asks for one."""
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    t = rng.standard_normal(shape).astype(np.float32)
    out = []
    for m in (ember, torch):
        xt, tt = m.tensor(x, requires_grad=True), m.tensor(t)
        loss = m.nn.functional.mse_loss(xt, tt, reduction=reduction)
        loss.backward()
        out.append((loss.detach().numpy(), xt.grad.numpy(), tt.grad))
    (el, eg, et), (tl, tg, _) = out
    np.testing.assert_allclose(el, tl, rtol=1e-6)
    np.testing.assert_array_equal(eg.view(np.int32), tg.view(np.int32))
    assert et is None


def test_mse_loss_target_gradient_as_torch():
    rng = np.random.default_rng(1)
    x, t = (rng.standard_normal((6, 9)).astype(np.float32) for _ in range(2))
    grads = []
    for m in (ember, torch):
        xt, tt = m.tensor(x, requires_grad=True), m.tensor(t, requires_grad=True)
        (m.nn.functional.mse_loss(xt, tt) * 3).backward()
        grads.append((xt.grad.numpy(), tt.grad.numpy()))
    for e, w in zip(*grads):
        np.testing.assert_allclose(e, w, rtol=1e-6)


@pytest.mark.parametrize("with_mask", [False, True])
def test_attention_weights_layout_gives_torch_values(with_mask):
    """The fused attention of 4-D inputs (the scores stored key-axis-outermost):
    output, its strides, and q/k/v gradients as torch's, with and without a mask."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((3, 2, 17, 8)).astype(np.float32) for _ in range(3))
    g = rng.standard_normal((3, 2, 17, 8)).astype(np.float32)
    mask = rng.standard_normal((17, 17)).astype(np.float32) if with_mask else None
    res = []
    for m in (ember, torch):
        ts = [m.tensor(a, requires_grad=True) for a in (q, k, v)]
        o = m.nn.functional.scaled_dot_product_attention(
            *ts, attn_mask=None if mask is None else m.tensor(mask))
        o.backward(m.tensor(g))
        res.append([o.detach().numpy(), tuple(o.stride())] + [t.grad.numpy() for t in ts])
    e, w = res
    assert e[1] == w[1]
    for a, b in zip(e[:1] + e[2:], w[:1] + w[2:]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_linear_of_transposed_input_adds_bias_in_place_as_torch():
    """linear of a non-contiguous 3-D input: matmul, then the bias added into the
    product (torch's ``add_``): values, strides, nodes, profiler rows and gradients."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7, 6)).astype(np.float32)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = rng.standard_normal((7, 5, 4)).astype(np.float32)
    res = []
    for m in (ember, torch):
        xt, wt, bt = (m.tensor(a, requires_grad=True) for a in (x, w, b))
        with m.profiler.profile() as prof:
            y = m.nn.functional.linear(xt.transpose(0, 1), wt, bt)
        rows = [e.key for e in prof.key_averages() if e.key.startswith("aten::add")]
        y.backward(m.tensor(g))
        res.append([y.detach().numpy(), tuple(y.stride()), y.grad_fn.name(), rows,
                    xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy(), xt.detach().numpy()])
    e, t = res
    assert e[1:4] == t[1:4]
    for a, c in zip(e[:1] + e[4:], t[:1] + t[4:]):
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(e[7], x)  # the input is left as it was
