"""``jit.trace`` of 0-d integer tensors read as ints, over PyTorch's OpInfo table
(tests/opinfo_trace_int_args.py): each int argument of an op's first samples (``scalar``)
and the first int inside a list argument (``list``), given as a traced 0-d int64 tensor,
traced at the sample's value and called at another. ember's trace must give eager's
answer there (it records ``aten::Int``), or warn that it keeps the example's value and
only where torch's trace keeps it too; a silent example answer always fails. ``KNOWN``
maps ``(op, part)`` to why ember still keeps a value torch's trace follows (it warns),
asserted both ways (an entry that starts to pass fails). CI runs every ``STRIDE``-th
case and the ``KNOWN`` ones (``OPINFO_TRACE_INT_ARGS_ALL=1``: all);
``python tests/opinfo_trace_int_args.py`` prints every difference
(docs/differences.md, "jit.trace follows 0-d tensors read as ints (fifteenth pass)")."""
import os

import pytest
import test_opinfo as T
from opinfo_trace_int_args import cases, run_case

STRIDE = 1 if os.environ.get("OPINFO_TRACE_INT_ARGS_ALL") else 3

_NUMBER = ("a number argument (alpha/beta, p, ord, correction, max, steps, edge_order, "
           "mvlgamma's p) read in Python (a branch, a NumPy scalar): ember "
           "keeps it and warns; torch's trace records aten::Int/ScalarImplicit")
_SHAPING = ("a dim, count or size that shapes the computation in Python (the key of a "
            "select, a window, a loop count, a view's strides, a pooling window): kept, "
            "warned")
_LIST = ("an int inside a list argument (sizes, pads, dims, split points, strides), where "
         "torch's trace records the list's element: kept, warned")
_RESIZE = "jit.trace refuses resize_ (loud: a new shape and new memory in place)"
_EMBEDDING_BAG = ("a 0-d tensor padding_idx is compared in Python inside the recorded "
                  "call: the trace raises TypeError (loud)")

KNOWN = {
    ("addmm.decomposed", "scalar"): _NUMBER,
    ("addmv", "scalar"): _NUMBER,
    ("addbmm", "scalar"): _NUMBER,
    ("baddbmm", "scalar"): _NUMBER,
    ("cov", "scalar"): _NUMBER,
    ("dist", "scalar"): _NUMBER,
    ("norm", "scalar"): _NUMBER,
    ("linalg.norm", "scalar"): _NUMBER,
    ("linalg.vector_norm", "scalar"): _NUMBER,
    ("renorm", "scalar"): _NUMBER,
    ("histc", "scalar"): _NUMBER,
    ("linspace.tensor_overload", "scalar"): _NUMBER,
    ("logspace.tensor_overload", "scalar"): _NUMBER,
    ("gradient", "scalar"): _NUMBER,
    ("mvlgamma.mvlgamma_p_1", "scalar"): _NUMBER,
    ("mvlgamma.mvlgamma_p_3", "scalar"): _NUMBER,
    ("mvlgamma.mvlgamma_p_5", "scalar"): _NUMBER,
    ("select", "scalar"): _SHAPING,
    ("select_scatter", "scalar"): _SHAPING,
    ("nn.functional.glu", "scalar"): _SHAPING,
    ("unfold", "scalar"): _SHAPING,
    ("unfold_copy", "scalar"): _SHAPING,
    ("rot90", "scalar"): _SHAPING,
    ("diff", "scalar"): _SHAPING,
    ("stft", "scalar"): _SHAPING,
    ("linalg.matrix_power", "scalar"): _SHAPING,
    ("linalg.vander", "scalar"): _SHAPING,
    ("nonzero_static", "scalar"): _SHAPING,
    ("nn.functional.pixel_shuffle", "scalar"): _SHAPING,
    ("nn.functional.pixel_unshuffle", "scalar"): _SHAPING,
    ("grid_sampler_2d", "scalar"): _SHAPING,
    ("grid_sampler_3d", "scalar"): _SHAPING,
    ("nn.functional.local_response_norm", "scalar"): _SHAPING,
    ("nn.functional.avg_pool2d", "scalar"): _SHAPING,
    ("nn.functional.avg_pool3d", "scalar"): _SHAPING,
    ("as_strided", "scalar"): _SHAPING,
    ("as_strided.partial_views", "scalar"): _SHAPING,
    ("as_strided_copy", "scalar"): _SHAPING,
    ("as_strided_scatter", "scalar"): _SHAPING,
    ("rot90", "list"): _LIST,
    ("as_strided", "list"): _LIST,
    ("as_strided.partial_views", "list"): _LIST,
    ("as_strided_copy", "list"): _LIST,
    ("nn.functional.adaptive_max_pool2d", "list"): _LIST,
    ("nn.functional.avg_pool1d", "list"): _LIST,
    ("nn.functional.avg_pool2d", "list"): _LIST,
    ("nn.functional.avg_pool3d", "list"): _LIST,
    ("constant_pad_nd", "list"): _LIST,
    ("nn.functional.pad.constant", "list"): _LIST,
    ("nn.functional.pad.reflect", "list"): _LIST,
    ("nn.functional.pad.replicate", "list"): _LIST,
    ("nn.functional.pad.replicate_negative", "list"): _LIST,
    ("nn.functional.pad.circular", "list"): _LIST,
    ("nn.functional.unfold", "list"): _LIST,
    ("hsplit", "list"): _LIST,
    ("vsplit", "list"): _LIST,
    ("dsplit", "list"): _LIST,
    ("new_zeros", "list"): _LIST,
    ("new_ones", "list"): _LIST,
    ("new_full", "list"): _LIST,
    ("repeat", "list"): _LIST,
    ("linalg.tensorsolve", "list"): _LIST,
    ("norm.nuc", "list"): _LIST,
    ("resize_", "list"): _RESIZE,
    ("nn.functional.embedding_bag", "scalar"): _EMBEDDING_BAG,
}

CASES = cases()
_KEYS = {(T._key(op), part) for op, part in CASES}
SAMPLED = [c for i, c in enumerate(CASES)
           if i % STRIDE == 0 or (T._key(c[0]), c[1]) in KNOWN]


@pytest.mark.parametrize("op,part", SAMPLED, ids=[f"{T._key(o)}-{p}" for o, p in SAMPLED])
def test_trace_int_args_opinfo(op, part):
    if (T._key(op), part) in KNOWN:  # still keeps the value: once it follows, it leaves
        with pytest.raises(AssertionError):
            run_case(op, part)
    else:
        run_case(op, part)


def test_known_names_live_cases():
    assert set(KNOWN) <= _KEYS, set(KNOWN) - _KEYS


@pytest.mark.parametrize("key", ["prod", "softmax", "max.reduction_with_dim", "gather",
                                 "unsqueeze", "cumsum", "transpose", "index_select"])
def test_the_sweep_follows_something(key):
    """The sweep is not vacuous: these ops' traces are checked at another value (and
    follow it; on the tree before they kept the example's value and warned)."""
    by_key = {T._key(op): op for op, _ in CASES}
    assert run_case(by_key[key], "scalar") > 0, key
