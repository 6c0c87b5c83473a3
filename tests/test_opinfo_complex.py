"""Complex autograd over PyTorch's OpInfo table (op_db), against torch.

PyTorch differentiates complex functions by the conjugate Wirtinger convention: the
gradient a backward pass returns for a complex input ``z`` of a real loss ``L`` is
``conj(dL/dz) * 2``-scaled as ``dL/dx + i dL/dy``, and a backward formula that forgets a
``conj`` still returns numbers that "train", only wrongly. test_opinfo.py compares first
gradients in float64 alone; here every op of op_db that ember runs, that supports
complex128 and ``supports_autograd``, runs its first ``SAMPLES`` samples in complex128:

- forward values and dtypes (test_opinfo.py's harness, imported), then the backward pass
  with a fixed complex ``grad_output`` (a real one for real outputs: ``abs``, ``angle``)
  against torch's gradients for every complex or real input that requires grad;
- forward-mode AD with complex tangents (tests/_fwad_opinfo.py's driver) for the ops that
  ``supports_forward_ad``;
- complex64 forward values (a separate code path where ember computes in complex64).

``KNOWN`` maps ``(op, part)`` to the reason it still differs; each is asserted to still
differ, so a fixed one must leave it. ``python tests/test_opinfo_complex.py`` prints the
counts (docs/differences.md, "Complex autograd over PyTorch's OpInfo table").
"""
import numpy as np
import pytest
import test_opinfo as T
import torch
from _fwad_opinfo import check_op as check_fwad

SAMPLES = 3  # per op and part


def _complex_grad_output(out):
    """A fixed ``grad_output`` with distinct real and imaginary parts (real for a real
    output), so that a missing ``conj`` in a backward formula changes the result."""
    if not (out.is_floating_point() or out.is_complex()):
        return None
    n = out.numel()
    go = np.linspace(-1, 1, n).reshape(out.shape)
    if out.is_complex():
        go = go + 1j * np.linspace(0.5, -1.5, n).reshape(out.shape)
    return go


def _complex_ops():
    ops = []
    for op in T.PRESENT:
        supported = op.supported_dtypes("cpu")
        if torch.complex128 in supported and op.supports_autograd:
            ops.append(op)
    return ops


OPS = _complex_ops()
PARTS = ("complex128", "forward_ad", "complex64")

# (op, part) pairs that still differ from torch, and why
KNOWN = {
    # torch's tangent is NaN on the sample's |x| = 1e4 elements (exp overflows in its rule);
    # ember's matches central differences: test_logcumsumexp_tangent_at_large_magnitude
    ("logcumsumexp", "forward_ad"): "torch's tangent overflows to NaN; ember's is finite",
    # torch's rule uses the whole tangent of A, the triangle the solve never reads included
    # (as in float64: tests/test_forward_ad.py's NOT_COMPARED)
    ("triangular_solve", "forward_ad"): "torch reads the unused triangle of A's tangent",
}


def _run(op, part):
    """Run one part for ``op``; raise AssertionError on a difference from torch."""
    if part == "complex128":
        # (no sample compared: torch refused each, and so did ember - to_sparse's)
        T.check_op(op, dtypes=[torch.complex128], samples=SAMPLES,
                   grad_output=_complex_grad_output)
    elif part == "complex64":
        T.check_op(op, dtypes=[torch.complex64], samples=SAMPLES)
    else:
        # (ember's function as test_opinfo.py resolves it: OpInfo's lambdas run on ember)
        status, detail = check_fwad(op, samples=SAMPLES, dtype=torch.complex128,
                                    fn=T._ember_fn(op), other=T._to_ember)
        assert status == "pass", f"{status}: {detail}"


def _cases():
    for op in OPS:
        yield op, "complex128"
        if op.supports_forward_ad:
            yield op, "forward_ad"
        if torch.complex64 in op.supported_dtypes("cpu"):
            yield op, "complex64"


CASES = list(_cases())


@pytest.mark.parametrize("op,part", CASES, ids=[f"{T._key(o)}-{p}" for o, p in CASES])
def test_complex_opinfo(op, part):
    if (T._key(op), part) in KNOWN:  # still differs: once it passes, it leaves KNOWN
        with pytest.raises((AssertionError, NotImplementedError, RuntimeError, TypeError)):
            _run(op, part)
    else:
        _run(op, part)


def test_known_names_live_cases():
    live = {(T._key(op), part) for op, part in CASES}
    assert set(KNOWN) <= live, set(KNOWN) - live


def _report():
    import time
    t0 = time.time()
    fails = {}
    for op, part in CASES:
        t = time.time()
        try:
            _run(op, part)
        except Exception as e:  # noqa: BLE001 - a report of every difference
            fails[(T._key(op), part)] = f"{type(e).__name__}: {str(e)[:300]}"
        if time.time() - t > 1:
            print(f"slow: {T._key(op)} {part} {time.time() - t:.1f}s")
    print(f"ops {len(OPS)}, cases {len(CASES)}, differing {len(fails)}, "
          f"{time.time() - t0:.0f}s")
    for k, v in sorted(fails.items()):
        print(f"FAIL {k}: {v}")


if __name__ == "__main__":
    _report()
