"""Ops given tensors of different floating dtypes do what PyTorch does: promote (the
result's dtype) or raise (the same error type and message). Normalizations are swept in
tests/test_batch_norm_paths.py."""

import itertools

import pytest
import torch

import ember

_CASES = {
    "linear": lambda m, a, b: m.nn.functional.linear(
        m.ones(4, 3, dtype=a), m.ones(2, 3, dtype=b)
    ),
    "linear_bias": lambda m, a, b: m.nn.functional.linear(
        m.ones(4, 3, dtype=a), m.ones(2, 3, dtype=a), m.ones(2, dtype=b)
    ),
    "mm": lambda m, a, b: m.mm(m.ones(4, 3, dtype=a), m.ones(3, 2, dtype=b)),
    "matmul": lambda m, a, b: m.ones(4, 3, dtype=a) @ m.ones(3, 2, dtype=b),
    "bmm": lambda m, a, b: m.bmm(m.ones(2, 4, 3, dtype=a), m.ones(2, 3, 2, dtype=b)),
    "addmm": lambda m, a, b: m.addmm(
        m.ones(4, 2, dtype=b), m.ones(4, 3, dtype=a), m.ones(3, 2, dtype=a)
    ),
    "conv2d": lambda m, a, b: m.nn.functional.conv2d(
        m.ones(1, 2, 5, 5, dtype=a), m.ones(3, 2, 3, 3, dtype=b)
    ),
    "conv2d_bias": lambda m, a, b: m.nn.functional.conv2d(
        m.ones(1, 2, 5, 5, dtype=a), m.ones(3, 2, 3, 3, dtype=a), m.ones(3, dtype=b)
    ),
    "conv1d": lambda m, a, b: m.nn.functional.conv1d(
        m.ones(1, 2, 5, dtype=a), m.ones(3, 2, 3, dtype=b)
    ),
    "conv_t2d": lambda m, a, b: m.nn.functional.conv_transpose2d(
        m.ones(1, 2, 5, 5, dtype=a), m.ones(2, 3, 3, 3, dtype=b)
    ),
    "prelu": lambda m, a, b: m.nn.functional.prelu(m.ones(2, 3, dtype=a), m.ones(1, dtype=b)),
    "sdpa": lambda m, a, b: m.nn.functional.scaled_dot_product_attention(
        m.ones(1, 2, 4, dtype=a), m.ones(1, 2, 4, dtype=b), m.ones(1, 2, 4, dtype=a)
    ),
    "mse": lambda m, a, b: m.nn.functional.mse_loss(m.ones(3, dtype=a), m.ones(3, dtype=b)),
    "l1": lambda m, a, b: m.nn.functional.l1_loss(m.ones(3, dtype=a), m.ones(3, dtype=b)),
    "bce": lambda m, a, b: m.nn.functional.binary_cross_entropy(
        m.ones(3, dtype=a) * 0.5, m.ones(3, dtype=b)
    ),
    "bce_logits": lambda m, a, b: m.nn.functional.binary_cross_entropy_with_logits(
        m.ones(3, dtype=a), m.ones(3, dtype=b)
    ),
    "ce_probs": lambda m, a, b: m.nn.functional.cross_entropy(
        m.ones(2, 3, dtype=a), m.ones(2, 3, dtype=b) / 3
    ),
    "embedding_bag": lambda m, a, b: m.nn.functional.embedding_bag(
        m.tensor([0, 1]), m.ones(3, 2, dtype=a), m.tensor([0]), per_sample_weights=None
    ),
    "lstm_cell": lambda m, a, b: m.nn.functional.linear(
        m.ones(2, 3, dtype=a), m.ones(4, 3, dtype=b)
    ),
    "where": lambda m, a, b: m.where(
        m.tensor([True, False]), m.ones(2, dtype=a), m.ones(2, dtype=b)
    ),
    "cat": lambda m, a, b: m.cat([m.ones(2, dtype=a), m.ones(2, dtype=b)]),
    "index_add": lambda m, a, b: m.ones(3, dtype=a).index_add(
        0, m.tensor([0]), m.ones(1, dtype=b)
    ),
    "scatter": lambda m, a, b: m.ones(3, dtype=a).scatter(0, m.tensor([0]), m.ones(1, dtype=b)),
    "masked_scatter": lambda m, a, b: m.ones(3, dtype=a).masked_scatter(
        m.tensor([True, False, True]), m.ones(3, dtype=b)
    ),
    "copy_": lambda m, a, b: m.ones(3, dtype=a).copy_(m.ones(3, dtype=b)),
    "dot": lambda m, a, b: m.dot(m.ones(3, dtype=a), m.ones(3, dtype=b)),
    "mv": lambda m, a, b: m.mv(m.ones(2, 3, dtype=a), m.ones(3, dtype=b)),
    "einsum": lambda m, a, b: m.einsum(
        "ij,jk->ik", m.ones(2, 3, dtype=a), m.ones(3, 2, dtype=b)
    ),
    "lerp": lambda m, a, b: m.lerp(m.ones(3, dtype=a), m.ones(3, dtype=b), 0.5),
    "addcmul": lambda m, a, b: m.addcmul(
        m.ones(3, dtype=a), m.ones(3, dtype=b), m.ones(3, dtype=a)
    ),
}

_DTYPES = ["float32", "float64", "bfloat16", "float16"]


def _outcome(m, fn, a, b):
    try:
        return str(fn(m, getattr(m, a), getattr(m, b)).dtype).split(".")[-1]
    except Exception as e:  # noqa: BLE001  (the error's type and message are compared)
        return f"{type(e).__name__}"


@pytest.mark.parametrize("name", sorted(_CASES))
def test_mixed_dtypes_promote_or_raise_as_torch(name):
    fn = _CASES[name]
    for a, b in itertools.product(_DTYPES, repeat=2):
        assert _outcome(ember, fn, a, b) == _outcome(torch, fn, a, b), (a, b)


@pytest.mark.parametrize(
    "a,b",
    [
        ("float32", "float64"),
        ("bfloat16", "float16"),
        ("float64", "int64"),
        ("int64", "int64"),
        ("complex64", "complex64"),
        ("bool", "bool"),
    ],
)
def test_prelu_dtypes_as_torch(a, b):
    # prelu's kernel takes one floating dtype: PyTorch refuses to promote (ember promoted)
    def run(m):
        x, w = m.ones(2, 3).to(getattr(m, a)), m.ones(1).to(getattr(m, b))
        try:
            return str(m.nn.functional.prelu(x, w).dtype).split(".")[-1]
        except (RuntimeError, NotImplementedError) as e:
            return f"{type(e).__name__}: {e}"

    assert run(ember) == run(torch)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("low", ["bfloat16", "float16"])
@pytest.mark.parametrize("stride", [1, 2])
def test_transposed_convolution_keeps_reduced_precision(nd, low, stride):
    # its column paths summed float16/bfloat16 in float32 and returned float32
    import numpy as np

    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 4) + (5,) * nd).astype(np.float32)
    w = rng.standard_normal((4, 3) + (3,) * nd).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    outs = []
    for m in (ember, torch):
        f = getattr(m.nn.functional, f"conv_transpose{nd}d")
        X, W, B = (m.tensor(v).to(getattr(m, low)) for v in (x, w, b))
        X.requires_grad_(True)
        out = f(X, W, B, stride=stride)
        out.float().sum().backward()
        outs.append((out, X.grad))
    f64 = getattr(torch.nn.functional, f"conv_transpose{nd}d")
    exact = f64(*(torch.tensor(v).to(getattr(torch, low)).double() for v in (x, w, b)),
                stride=stride)
    (e, eg), (t, tg) = outs
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1] == low
    assert str(eg.dtype).split(".")[-1] == low
    err = float(np.abs(e.detach().float().numpy() - exact.numpy()).max())
    # within two of the dtype's units in the last place at the largest output, or
    # torch's own error
    unit = 2.0 ** (-7 if low == "bfloat16" else -10) * float(exact.abs().max())
    assert err <= max(float((t.detach().double() - exact).abs().max()), 2 * unit)
