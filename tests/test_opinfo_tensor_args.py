"""0-d integer tensors where torch takes an int, over PyTorch's OpInfo table
(tests/opinfo_tensor_args.py): each int argument of an op's first samples (``scalar``), and
each int inside a list or tuple argument (``list``), given alone as a 0-d int64 tensor,
must give torch's result, or raise torch's error type where torch refuses. ``KNOWN``
maps ``(op, part)`` to the reason it still differs, asserted both ways (an entry that
starts to pass fails). CI runs every ``STRIDE``-th case (``OPINFO_TENSOR_ARGS_ALL=1``:
all); ``python tests/opinfo_tensor_args.py`` prints every difference
(docs/differences.md, "Tensor arguments, traces at other sizes, partial overlaps
(fourteenth pass)")."""
import os

import pytest
import test_opinfo as T
from opinfo_tensor_args import cases, run_case

import ember

STRIDE = 1 if os.environ.get("OPINFO_TENSOR_ARGS_ALL") else 2

KNOWN = {
    ("histogramdd", "list"): "a list of 0-d tensors as ``bins`` is read as bin-edge tensors "
                             "and refused (RuntimeError, loud), where torch reads counts",
}

CASES = cases()
_KEYS = {(T._key(op), part) for op, part in CASES}
SAMPLED = [c for i, c in enumerate(CASES)
           if i % STRIDE == 0 or (T._key(c[0]), c[1]) in KNOWN]


@pytest.mark.parametrize("op,part", SAMPLED, ids=[f"{T._key(o)}-{p}" for o, p in SAMPLED])
def test_tensor_args_opinfo(op, part):
    if (T._key(op), part) in KNOWN:  # still differs: once it passes, it leaves KNOWN
        with pytest.raises(AssertionError):
            run_case(op, part)
    else:
        run_case(op, part)


def test_known_names_live_cases():
    assert set(KNOWN) <= _KEYS, set(KNOWN) - _KEYS


def test_the_sweep_compares_something():
    """The sweep is not vacuous: the task's examples are among its compared cases."""
    by_key = {T._key(op): op for op, _ in CASES}
    for key in ("topk", "roll", "sum", "nn.functional.avg_pool1d"):
        assert run_case(by_key[key], "scalar") > 0, key
    assert ember.tensor(2).__index__() == 2
