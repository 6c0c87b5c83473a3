"""Forward-mode AD over OpInfo's longer sample lists: every op torch supports forward AD
on, up to ``SAMPLES`` samples each (test_forward_ad.py compares two), in float64 and,
for the ops with complex128 samples, in complex128 (test_opinfo_complex.py compares
three), through tests/_fwad_opinfo.py's driver: ember's tangents against torch's.

``KNOWN`` maps ``(op, dtype)`` to the status the driver returns and why; it is exact:
an op that starts to pass must leave it. ``python tests/test_forward_ad_samples.py``
runs the sweep and prints every difference and the CPU time it took.
"""
import sys
import time

import pytest
import test_opinfo as T
import torch
from _fwad_opinfo import check_op
from test_forward_ad import FW_OPS, NOT_COMPARED, _id

SAMPLES = 40  # per op and dtype (about 12 s of CPU in float64, 9 s in complex128)

_CHOL_INV = ("torch's forward formula is 1.5e-6 (relative) off on sample 6, a factor of "
             "condition 1.002; ember's tangent is exact to 3e-16 (mpmath: "
             "test_forward_ad.py's test_cholesky_inverse_tangent_is_exact_where_torch_is_off)")
KNOWN = {
    ("cholesky_inverse", "float64"): ("tangent", _CHOL_INV),
    ("cholesky_inverse", "complex128"): ("tangent", _CHOL_INV),
    # embedding(idx, w, padding_idx): torch's forward rule passes the padding row's
    # tangent while its backward gives that row no gradient; ember's jvp is the backward's
    # adjoint (jacfwd equals jacrev; test_func_opinfo.py's KNOWN says the same)
    ("nn.functional.embedding", "float64"): (
        "tangent", "torch's forward rule ignores padding_idx, its backward honours it"),
    # (as in test_opinfo_complex.py's KNOWN)
    ("logcumsumexp", "complex128"): (
        "tangent", "torch's tangent overflows to NaN at |x| = 1e4; ember's is finite"),
    ("triangular_solve", "complex128"): (
        "tangent", "torch's rule reads the triangle of A's tangent that the solve ignores"),
}


def _cases():
    for op in FW_OPS:
        if _id(op) not in NOT_COMPARED:
            yield op, "float64"
    present = {id(op) for op in T.PRESENT}
    for op in FW_OPS:
        if id(op) in present and torch.complex128 in op.supported_dtypes("cpu"):
            yield op, "complex128"


CASES = list(_cases())


def _check(op, dtype):
    if dtype == "float64":
        return check_op(op, samples=SAMPLES)
    # (ember's function as test_opinfo.py resolves it: OpInfo's lambdas run on ember)
    return check_op(op, samples=SAMPLES, dtype=torch.complex128, fn=T._ember_fn(op),
                    other=T._to_ember)


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{_id(o)}-{d}" for o, d in CASES])
def test_forward_ad_samples_as_torch(op, dtype):
    status, detail = _check(op, dtype)
    assert status == KNOWN.get((_id(op), dtype), ("pass",))[0], detail


def test_known_names_live_cases():
    assert set(KNOWN) <= {(_id(o), d) for o, d in CASES}


if __name__ == "__main__":
    SAMPLES = int(sys.argv[1]) if len(sys.argv) > 1 else SAMPLES
    start = time.process_time()
    for op, dtype in CASES:
        status, detail = _check(op, dtype)
        if status != "pass" or (_id(op), dtype) in KNOWN:
            print(f"{_id(op)} {dtype}: {status}: {detail}")
    print(f"{len(CASES)} cases, {SAMPLES} samples each at most: "
          f"{time.process_time() - start:.1f} s of CPU")
