"""PyTorch's OpInfo reference inputs (``op.reference_inputs``) through ember, against torch.

test_opinfo.py runs the first few ``sample_inputs`` of each op of ``op_db``. Ops with a
``reference_inputs_func`` also have a larger, harder set: operands of different dtypes
(type promotion), broadcasting both ways, extremal values (nan, inf, -0.0), large and
small magnitudes, non-contiguous, expanded, arbitrarily strided, 0-d and empty
operands. This file runs those through test_opinfo.py's harness (imported, not copied:
the same selection, OpInfo-to-ember mapping, conversion, ``assert_close`` tolerances and
float64 first gradients for a fixed ``grad_output``), in float32, float64 and one
integer dtype where the op supports them. Ops without a ``reference_inputs_func`` give
the samples test_opinfo.py already runs and are left out.

Up to ``SAMPLES`` (30) reference samples per op and dtype are run, counted after the
first five when those equal ``sample_inputs``' first five (most generators start by
yielding ``sample_inputs``); 30 keeps the file near 100 s on one core of this machine.
``OPINFO_REFERENCE_SAMPLES`` changes it; run this file as a script for the counts over
every reference sample (docs/differences.md).

``KNOWN`` lists the (op, dtype) pairs that still differ, each with its reason; each is
asserted to still differ, so a pair that starts to agree must leave it.
"""
import os
import warnings

import pytest
import test_opinfo as T
import torch
from torch.testing._internal import common_utils
from torch.testing._internal.opinfo import core as opinfo_core

SAMPLES = int(os.environ.get("OPINFO_REFERENCE_SAMPLES", 30))  # per op and dtype
SHARED = 5  # the sample_inputs samples a reference generator usually starts with

OPS = [op for op in T.PRESENT if op.reference_inputs_func is not None]
CASES = [(op, dtype) for op in OPS for dtype in T._dtypes(op)]

# the (op, dtype) pairs with a reference sample that differs, and why; the goal is an
# empty dict
KNOWN = {
}


def _name(dtype):
    return str(dtype).split(".")[1]


def _case_id(case):
    op, dtype = case
    return f"{T._key(op)}-{_name(dtype)}"


def _tensors_map(fn, x):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_tensors_map(fn, v) for v in x)
    if isinstance(x, dict):
        return {k: _tensors_map(fn, v) for k, v in x.items()}
    return x


def _reachable(t):
    """``t``, or a view that torch's autograd reaches. Some reference samples are leaf
    views made to require grad after the fact (``SampleInput.noncontiguous`` of an
    expanded tensor): torch computes on them but its graph does not lead back to them
    (``autograd.grad`` calls them unused). The same strides over a fresh leaf storage
    keep the layout and give torch a gradient to compare."""
    if not (t.requires_grad and t.is_leaf and t._is_view()):
        return t
    n = t.untyped_storage().nbytes() // t.element_size()
    storage = t.detach().as_strided((n,), (1,), 0).clone().requires_grad_()
    return storage.as_strided(t.shape, t.stride(), t.storage_offset())


def _grad_on_floats(t):
    return t.detach().requires_grad_() if t.is_floating_point() else t


def _generate(op, dtype, grad, limit):
    try:
        samples = T._samples(op, dtype, grad, limit, "reference_inputs")
    except ValueError:
        if not grad:
            raise
        # the generator asks make_tensor for an integer operand requiring grad (addcmul's
        # and clamp's promotion samples): made without grad, floats then require it
        samples = T._samples(op, dtype, False, limit, "reference_inputs")
        for s in samples:
            s.input, s.args, s.kwargs = (_tensors_map(_grad_on_floats, v)
                                         for v in (s.input, s.args, s.kwargs))
    for s in samples:
        s.input, s.args, s.kwargs = (_tensors_map(_reachable, v)
                                     for v in (s.input, s.args, s.kwargs))
    return samples


def _same(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()
                and torch.equal(a.detach(), b.detach()))
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b)))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def reference_samples(op, dtype, grad, samples=None):
    """``(index, sample)`` pairs: up to ``samples`` (``SAMPLES``) reference samples of
    ``op`` in ``dtype``, after the first ``SHARED`` when they equal ``sample_inputs``'."""
    limit = SAMPLES if samples is None else samples
    ref = _generate(op, dtype, grad, SHARED + limit)
    plain = T._samples(op, dtype, grad, SHARED)[:SHARED]
    first = 0
    if len(plain) == SHARED and all(_same((a.input, a.args, a.kwargs),
                                          (b.input, b.args, b.kwargs))
                                    for a, b in zip(ref, plain)):
        first = SHARED
    return list(enumerate(ref))[first:first + limit]


def _no_test_fn():
    return None


@pytest.fixture(autouse=True)
def _no_stack_walk(monkeypatch):
    """OpInfo's sample iterators look for a unittest.TestCase up the stack
    (``extract_test_fn``: ``inspect.stack()``, slow under pytest's deep stack); there is
    none here, so its answer, None, is given at once."""
    monkeypatch.setattr(common_utils, "extract_test_fn", _no_test_fn)
    monkeypatch.setattr(opinfo_core, "extract_test_fn", _no_test_fn)


def check(op, dtype, samples=None):
    """The harness's ``check_op`` in ``dtype`` over the reference samples."""
    return T.check_op(op, [dtype], inputs=lambda o, d, g: reference_samples(o, d, g, samples))


def test_known_are_cases():
    assert set(KNOWN) <= {(T._key(op), _name(dtype)) for op, dtype in CASES}


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_reference_inputs(case):
    op, dtype = case
    if (T._key(op), _name(dtype)) in KNOWN:  # still differing: once it agrees, drop it
        with pytest.raises(AssertionError):
            check(op, dtype)
    else:
        check(op, dtype)


def _kind(message):
    if "torch raised, ember did not" in message:
        return "ember computes where torch refuses"
    if "ember raised" in message:
        return "ember refuses where torch computes"
    if " grad " in message or "does not require grad" in message:
        return "gradient differs"
    return "forward value, dtype or shape differs"


def _report(samples=10 ** 6):
    """Every reference sample (or the first ``samples``) of every case, one line per
    differing sample, then the counts by kind."""
    import signal
    import time

    def timeout(*_):
        raise TimeoutError("no answer in 30 s")
    signal.signal(signal.SIGALRM, timeout)
    t0 = time.time()
    mp = pytest.MonkeyPatch()
    mp.setattr(common_utils, "extract_test_fn", _no_test_fn)
    mp.setattr(opinfo_core, "extract_test_fn", _no_test_fn)
    kinds, cases, total = {}, set(), 0
    for op, dtype in CASES:
        fn = T._ember_fn(op)
        grad = dtype in (torch.float64, torch.complex128) and op.supports_autograd
        for i, s in reference_samples(op, dtype, grad, samples):
            total += 1
            signal.alarm(30)  # a sample that never ends is reported, not waited for
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    T.check_sample(op, fn, s, dtype, grad, i)
            except Exception as e:  # noqa: BLE001 - a report of every difference
                message = f"{type(e).__name__}: {str(e)[:300]}".replace("\n", " | ")
                kinds.setdefault(_kind(message), []).append((T._key(op), _name(dtype)))
                cases.add((T._key(op), _name(dtype)))
                print(f"FAIL {T._key(op)} {_name(dtype)} {i}: {message}", flush=True)
    signal.alarm(0)
    mp.undo()
    print(f"ops {len(OPS)}, cases {len(CASES)}, samples {total}, differing cases "
          f"{len(cases)}, {time.time() - t0:.0f}s")
    for kind, where in sorted(kinds.items()):
        print(f"{kind}: {len(where)} samples in {len(set(where))} cases")


if __name__ == "__main__":
    import sys
    _report(*(int(a) for a in sys.argv[1:]))
