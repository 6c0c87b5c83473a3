"""The zero-size sweep (``special_empty.py``) as a test: every OpInfo op on zero-size
variants of its first samples (a dim shrunk to 0), float32 and float64, forward and first
gradient, refuses where torch refuses (the same builtin exception type) and otherwise
gives torch's output shapes, dtypes and value classes — or is listed here.

torch's side runs in forked children, as some of its kernels kill the process on empty
input; ``TORCH_DIES`` lists those ops with the signal (exact: a torch fix is noticed).
``TORCH_WRONG`` lists the ops where ember keeps the sound result on purpose
(docs/differences.md, "Special values", says why); it is exact too, so it only shrinks.
"""
import pytest
from special_empty import sweep

TORCH_WRONG = {
    "cholesky": "torch skips the square check when the matrix is empty (0x5 in, 0x5 out)",
    "linalg.matrix_rank.hermitian":
        "with hermitian=True torch skips the square check when the matrix is empty",
    "linalg.pinv.hermitian":
        "with hermitian=True torch skips the square check when the matrix is empty",
    "nn.functional.linear_cross_entropy.chunked":
        "torch's chunked path skips the batch-size check (its unchunked path makes it)",
    "nn.functional.linear_cross_entropy.chunked_none":
        "torch's chunked path skips the batch-size check (its unchunked path makes it)",
    "nn.functional.pixel_unshuffle":
        "torch returns an empty input's shape unchanged ((0, 1, 6, 6) for (0, 9, 2, 2))",
    "nn.functional.pixel_shuffle":
        "torch's backward refuses the gradient of its own wrongly shaped empty forward",
    "nn.functional.instance_norm":
        "an empty batch with a weight fails inside torch (IndexError from select on the "
        "weight repeated 0 times); ember returns the empty result",
    "native_batch_norm":
        "torch's float64 evaluation kernel dies (SIGFPE) on empty input; ember returns "
        "the empty result, as torch's float32 kernel does",
    "nn.functional.pdist":
        "torch dies (SIGSEGV/SIGFPE) on zero rows; ember returns the empty result",
}
# ops on whose zero-size input torch's process dies, with the signal of the first case
TORCH_DIES = {
    "native_batch_norm": "SIGFPE",
    "nn.functional.pdist": "SIGSEGV",
}


@pytest.fixture(scope="module")
def result():
    return sweep()


def test_zero_size_inputs_as_torch(result):
    assert result.compared > 3000
    unexpected = {k: v for k, v in result.diffs.items() if k not in TORCH_WRONG}
    assert not unexpected, "\n".join(f"{k}: {v}" for k, v in sorted(unexpected.items()))
    agree = set(TORCH_WRONG) - set(result.diffs)
    assert not agree, f"now agree with torch, drop from TORCH_WRONG: {sorted(agree)}"


def test_torch_deaths_are_caught(result):
    assert {k: v[0] for k, v in result.crashes.items()} == TORCH_DIES
