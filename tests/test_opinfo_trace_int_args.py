"""``jit.trace`` of 0-d integer tensors read as ints, over PyTorch's OpInfo table
(tests/opinfo_trace_int_args.py): each int argument of an op's first samples (``scalar``)
and the first int inside a list argument (``list``), given as a traced 0-d int64 tensor,
traced at the sample's value and called at another. ember's trace must give eager's
answer there (it records ``aten::Int``), or warn that it keeps the example's value and
only where torch's trace keeps it too; a silent example answer always fails. An op that
uses such an int in Python (a dim that picks a layout, a window, a count, a size list,
a number such as ``alpha`` or ``p``) records its whole call as one node taking the
traced int (``ember.ops._util.traced_ints``). ``KNOWN`` maps ``(op, part)`` to why
ember's trace still differs from torch's (loudly), asserted both ways (an entry that
starts to pass fails). CI runs every ``STRIDE``-th
case and the ``KNOWN`` ones (``OPINFO_TRACE_INT_ARGS_ALL=1``: all);
``python tests/opinfo_trace_int_args.py`` prints every difference
(docs/differences.md, "jit.trace follows 0-d tensors read as ints (fifteenth pass)" and
"jit.trace records the calls that use a traced int in Python (sixteenth pass)")."""
import os

import pytest
import test_opinfo as T
from opinfo_trace_int_args import cases, run_case

STRIDE = 1 if os.environ.get("OPINFO_TRACE_INT_ARGS_ALL") else 3

_RESIZE = "jit.trace refuses resize_ (loud: a new shape and new memory in place)"

KNOWN = {
    ("resize_", "list"): _RESIZE,
}

# the cases whose traces kept the value (and warned) or raised before their calls were
# recorded whole with the traced int: CI runs each of them
RECORDED_WHOLE = {
    (key, "scalar") for key in (
        "addmm.decomposed", "addmv", "addbmm", "baddbmm", "cov", "dist", "norm", "linalg.norm",
        "linalg.vector_norm", "renorm", "histc", "linspace.tensor_overload",
        "logspace.tensor_overload", "gradient", "mvlgamma.mvlgamma_p_1",
        "mvlgamma.mvlgamma_p_3", "mvlgamma.mvlgamma_p_5", "select", "select_scatter",
        "nn.functional.glu", "unfold", "unfold_copy", "rot90", "diff", "stft",
        "linalg.matrix_power", "linalg.vander", "nonzero_static", "nn.functional.pixel_shuffle",
        "nn.functional.pixel_unshuffle", "grid_sampler_2d", "grid_sampler_3d",
        "nn.functional.local_response_norm", "nn.functional.avg_pool2d",
        "nn.functional.avg_pool3d", "as_strided", "as_strided.partial_views", "as_strided_copy",
        "as_strided_scatter", "nn.functional.embedding_bag")
} | {
    (key, "list") for key in (
        "rot90", "as_strided", "as_strided.partial_views", "as_strided_copy",
        "nn.functional.adaptive_max_pool2d", "nn.functional.avg_pool1d",
        "nn.functional.avg_pool2d", "nn.functional.avg_pool3d", "constant_pad_nd",
        "nn.functional.pad.constant", "nn.functional.pad.reflect",
        "nn.functional.pad.replicate", "nn.functional.pad.replicate_negative",
        "nn.functional.pad.circular", "nn.functional.unfold", "hsplit", "vsplit", "dsplit",
        "new_zeros", "new_ones", "new_full", "repeat", "linalg.tensorsolve", "norm.nuc")
}

CASES = cases()
_KEYS = {(T._key(op), part) for op, part in CASES}
SAMPLED = [c for i, c in enumerate(CASES)
           if i % STRIDE == 0 or (T._key(c[0]), c[1]) in set(KNOWN) | RECORDED_WHOLE]


@pytest.mark.parametrize("op,part", SAMPLED, ids=[f"{T._key(o)}-{p}" for o, p in SAMPLED])
def test_trace_int_args_opinfo(op, part):
    if (T._key(op), part) in KNOWN:  # still keeps the value: once it follows, it leaves
        with pytest.raises(AssertionError):
            run_case(op, part)
    else:
        run_case(op, part)


def test_known_names_live_cases():
    assert set(KNOWN) <= _KEYS, set(KNOWN) - _KEYS
    assert RECORDED_WHOLE <= _KEYS, RECORDED_WHOLE - _KEYS


@pytest.mark.parametrize("key", ["prod", "softmax", "max.reduction_with_dim", "gather",
                                 "unsqueeze", "cumsum", "transpose", "index_select"])
def test_the_sweep_follows_something(key):
    """The sweep is not vacuous: these ops' traces are checked at another value (and
    follow it; on the tree before they kept the example's value and warned)."""
    by_key = {T._key(op): op for op, _ in CASES}
    assert run_case(by_key[key], "scalar") > 0, key
