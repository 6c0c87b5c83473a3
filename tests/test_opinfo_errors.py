"""Every invalid call of PyTorch's OpInfo table must raise in ember as it does in torch.

OpInfo entries carry ``error_inputs``: ``ErrorInput`` objects, each a sample that torch
refuses, the exception type it raises and a regex of its message. For every op that
tests/test_opinfo.py selects and ember has (its selection and its mapping from an OpInfo
to ember's function are imported from there), each error input is converted (tensors with
their dtype, shape, values, strides and device) and run through ember's op. A call ends
in one of these classes:

- ``same``: ember raised torch's exception type (``ErrorInput.error_type``; where that is
  the catch-all ``Exception``, the type torch actually raised). Whether the message also
  matches torch's regex is counted by the report, not required.
- ``other``: ember raised another type (a user's ``except`` clause would miss it).
- ``conversion``: the input could not be built in ember.
- ``silent``: ember computed a result where torch raises, the serious class.

Inputs on which torch itself does not raise (OpInfo marks its own test an expected
failure there) are skipped. ``KNOWN`` holds the exact leftovers, each with the reason;
the test asserts each still differs, so a fix must remove its entry. Run this file as a
script for the counts (see docs/differences.md).
"""
import re
import warnings

import numpy as np
import pytest
import torch
from test_opinfo import PRESENT, _ember_fn, _key, _numpy, _to_ember

import ember


def _contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _tensor(x, bases):
    """A strided torch tensor as ember's: the same dtype, shape and values, and the same
    strides and storage offset where they differ from a fresh tensor's (an expanded
    ``out=`` must stay expanded); tensors sharing a storage (an ``out=`` that is a view of
    an input) become views of one ember storage; meta tensors ember's meta tensors."""
    dtype = getattr(ember, str(x.dtype).split(".")[1])
    if x.device.type == "meta":
        t = ember.empty(tuple(x.shape), dtype=dtype, device="meta")
        return t.requires_grad_(x.requires_grad)
    # read through a clone: NumPy's view of a storage would make it non-resizable, and
    # torch, which runs the sample afterwards, would then fail on its out= for that reason
    n = x.untyped_storage().nbytes() // max(x.element_size(), 1)
    ptr = x.untyped_storage().data_ptr()
    if ptr not in bases and x.storage_offset() == 0 and n == x.numel() and \
            x.stride() == _contiguous_strides(x.shape):
        t = ember.tensor(_numpy(x.detach().clone()))
    else:
        if ptr not in bases:
            bases[ptr] = ember.tensor(_numpy(x.detach().as_strided((n,), (1,), 0).clone()))
        t = bases[ptr].as_strided(tuple(x.shape), x.stride(), x.storage_offset())
    return t.requires_grad_(x.requires_grad)


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x] if x.layout == torch.strided else []
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return _tensors(list(x.values()))
    return []


def _convert_sample(s):
    """The sample's (input, args, kwargs) in ember. A tensor met twice (an input that is
    also the ``out=``) becomes one ember tensor, and tensors sharing a storage views of
    one, so ember sees the aliasing torch sees."""
    ts = _tensors([s.input, s.args, s.kwargs])
    owners = {}
    for t in ts:
        if t.device.type != "meta" and t.numel():
            owners.setdefault(t.untyped_storage().data_ptr(), set()).add(id(t))
    # storages read by several tensors get their shared ember storage made up front
    bases = {p: None for p, ids in owners.items() if len(ids) > 1}
    for t in ts:
        p = t.untyped_storage().data_ptr() if t.device.type != "meta" else None
        if bases.get(p, 0) is None:
            n = t.untyped_storage().nbytes() // max(t.element_size(), 1)
            bases[p] = ember.tensor(_numpy(t.detach().as_strided((n,), (1,), 0).clone()))
    seen = {}

    def conv(x):
        if isinstance(x, torch.Tensor) and x.layout == torch.strided:
            if id(x) not in seen:
                seen[id(x)] = (x, _tensor(x, bases))
            return seen[id(x)][1]
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            return type(x)(conv(v) for v in x)
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        return _to_ember(x)
    return conv(s.input), conv(s.args), conv(s.kwargs)


def _error_inputs(op):
    """The op's ErrorInputs, fresh (running one may resize another's tensors). Read from
    ``error_inputs_func`` itself: ``op.error_inputs`` wraps it in torch's tracking
    iterator, whose ``inspect.stack()`` per item costs seconds per op."""
    if op.error_inputs_func is None:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        return list(op.error_inputs_func(op, "cpu"))


def _torch_error(op, sample):
    """The exception torch raises on ``sample``, or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op.op(sample.input, *sample.args, **sample.kwargs)
    except Exception as err:  # noqa: BLE001 - any error torch raises is the reference
        return err
    return None


def classify(op, error_input):
    """``(class, detail)`` of ember on one ErrorInput: ``same``, ``other``,
    ``conversion``, ``silent``, or ``torch-silent`` when torch itself does not raise.
    For ``same``, detail is whether the message matches torch's regex."""
    s = error_input.sample_input
    try:  # before torch runs: torch may resize an out= tensor of the sample
        args = _convert_sample(s)
    except Exception as err:  # noqa: BLE001 - reported as a harness problem
        args = err
    torch_err = _torch_error(op, s)
    if torch_err is None:
        return "torch-silent", ""
    if isinstance(args, Exception):
        return "conversion", f"{type(args).__name__}: {args}"
    expected = error_input.error_type
    if expected is Exception:
        expected = type(torch_err)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _ember_fn(op)(args[0], *args[1], **args[2])
    except Exception as err:  # noqa: BLE001 - classified below
        if isinstance(err, expected):
            return "same", bool(re.search(error_input.error_regex, str(err)))
        return "other", f"{type(err).__name__} (torch: {expected.__name__}): {err}"
    return "silent", f"torch: {expected.__name__}: {torch_err}"


ERROR_OPS = [op for op in PRESENT if _error_inputs(op)]

# the error inputs ember still answers differently, by (op, index), and why
_DESCRIPTOR = ("the unbound reflected operator called with a number as self: torch's C "
               "descriptor refuses it; ember's operators are Python functions (Python "
               "itself only ever calls them with a Tensor self)")
_DIMS_65 = ("a 65-dim input: NumPy arrays hold at most 64 dims, so the tensor cannot be "
            "made in ember (its factory raises ValueError before the op runs)")
KNOWN = {
    ("__radd__", 0): _DESCRIPTOR, ("__radd__", 1): _DESCRIPTOR,
    ("__rmul__", 0): _DESCRIPTOR, ("__rmul__", 1): _DESCRIPTOR,
    ("__rand__", 0): _DESCRIPTOR, ("__ror__", 0): _DESCRIPTOR, ("__rxor__", 0): _DESCRIPTOR,
    # torch's __rdiv__ is Python (self.reciprocal() * other): an AttributeError on a number
    ("__rdiv__", 0): _DESCRIPTOR + "; ember's reciprocal raises TypeError",
    ("__rdiv__", 1): _DESCRIPTOR + "; ember's reciprocal raises TypeError",
    ("aminmax", 1): _DIMS_65, ("aminmax", 2): _DIMS_65, ("amax", 1): _DIMS_65,
    ("amax", 2): _DIMS_65, ("amin", 1): _DIMS_65, ("amin", 2): _DIMS_65,
    # gather(ind.clone(), 0, ind[1:], out=ind[:1]): torch resizes out= inside its storage
    # (to ind[:2]) and then finds it overlapping the index; ember's resize gives out= a
    # new array, so there is no overlap and the result is torch's would-be values
    ("gather", 7): "out= resized inside its storage by torch (then overlapping the index); "
                   "ember's resize gives out= new memory",
}


@pytest.mark.parametrize("op", ERROR_OPS, ids=_key)
def test_error_inputs(op):
    key = _key(op)
    wrong = []
    for i, error_input in enumerate(_error_inputs(op)):
        cls, detail = classify(op, error_input)
        if (key, i) in KNOWN:
            assert cls not in ("same", "torch-silent"), \
                f"{key} error input {i} now raises as torch: remove it from KNOWN"
        elif cls not in ("same", "torch-silent"):
            wrong.append(f"{i}: {cls}: {detail}")
    assert not wrong, f"{key}: " + "; ".join(wrong)


def test_known_names_live_inputs():
    counts = {_key(op): len(_error_inputs(op)) for op in ERROR_OPS}
    stale = [k for k in KNOWN if k[1] >= counts.get(k[0], 0)]
    assert not stale, f"KNOWN entries without an error input: {stale}"


def _report():
    import collections
    import time
    t0 = time.time()
    counts, rows = collections.Counter(), []
    for op in ERROR_OPS:
        for i, error_input in enumerate(_error_inputs(op)):
            cls, detail = classify(op, error_input)
            counts[cls] += 1
            if cls == "same":
                counts["message matches"] += detail
            else:
                rows.append(f"{cls} {_key(op)} {i}: {str(detail)[:200]}")
    print(f"ops {len(ERROR_OPS)}, error inputs {sum(counts.values()) - counts['message matches']}"
          f", {dict(counts)}, {time.time() - t0:.1f}s")
    print("\n".join(rows))


if __name__ == "__main__":
    _report()


# The refusals above on other shapes, dtypes and layouts than OpInfo's, each beside a
# valid neighbour the same check must let through: ``case(m)`` runs with m = torch and
# m = ember; where torch raises, ember must raise the same type, else give its values.
def _x(m, *shape, dtype=None):
    n = 1
    for s in shape:
        n *= s
    return m.arange(n, dtype=dtype or m.float64).reshape(shape) / 4 - 1


CASES = {
    # two-operand functions: a Python number where torch's parser wants a tensor
    "maximum number other": lambda m: m.maximum(_x(m, 2, 3).t(), 0.5),
    "maximum 0-d tensor": lambda m: m.maximum(_x(m, 2, 3), m.tensor(0.5, dtype=m.float64)),
    "method fmin number": lambda m: _x(m, 4).fmin(0.0),
    "atan2 number input": lambda m: m.atan2(1.0, _x(m, 3)),
    "logical_and empty, bool": lambda m: m.logical_and(m.ones(0), True),
    "gcd numbers": lambda m: m.gcd(4, 6),
    "eq number input": lambda m: m.eq(1.5, _x(m, 2)),
    "eq number other": lambda m: m.eq(_x(m, 2), 1.5),
    "lt numbers": lambda m: m.lt(1, 2),
    "bitwise_and number self": lambda m: m.bitwise_and(3, m.tensor([1, 2])),
    "bitwise_or numbers": lambda m: m.bitwise_or(3, 4),
    "left_shift numbers": lambda m: m.bitwise_left_shift(1, 2),
    "remainder number self": lambda m: m.remainder(5, m.tensor([2, 3])),
    "remainder numbers": lambda m: m.remainder(5, 3),
    "fmod number self": lambda m: m.fmod(5, m.tensor([2, 3])),
    "float_power number self": lambda m: m.float_power(2, _x(m, 3)),
    "float_power numbers": lambda m: m.float_power(2, 3),
    "pow number self": lambda m: m.pow(2, m.tensor([1, 2])),
    "pow numbers": lambda m: m.pow(2.0, 3),
    "xlogy number self": lambda m: m.xlogy(2.0, _x(m, 3) + 2),
    "xlogy numbers": lambda m: m.xlogy(2.0, 3.0),
    "copysign number other": lambda m: m.copysign(_x(m, 3), -1.0),
    "copysign number input": lambda m: m.copysign(1.0, _x(m, 3)),
    "clamp_min number input": lambda m: m.clamp_min(2, 1),
    "clamp_min number other": lambda m: m.clamp_min(_x(m, 3), 0),
    "max numbers": lambda m: m.max(2, 3),
    "min number, tensor": lambda m: m.min(2, _x(m, 3)),
    "rsub number input": lambda m: m.rsub(2, _x(m, 2)),
    "rsub number other": lambda m: m.rsub(_x(m, 2), 2),
    "heaviside number values": lambda m: m.heaviside(_x(m, 3), 0.5),
    "complex numbers": lambda m: m.complex(1.0, _x(m, 2)),
    "isclose number other": lambda m: m.isclose(_x(m, 2), 1.0),
    "isclose rtol < 0": lambda m: m.isclose(_x(m, 2, 2), _x(m, 2, 2), rtol=-1e-9),
    "isclose atol -0.0": lambda m: m.isclose(_x(m, 2), _x(m, 2), atol=-0.0),
    # out= that overlaps itself (an expanded tensor) or an input
    "add into expanded out": lambda m: m.add(_x(m, 2, 3), 1, out=m.zeros(3, dtype=m.float64)
                                             .expand(2, 3)),
    "index_select expanded out, other shape": lambda m: m.index_select(
        _x(m, 3, 4), 0, m.tensor([0, 2]), out=m.zeros(1, 5, dtype=m.float64).expand(3, 5)),
    "cat into its input": lambda m: (lambda a: m.cat([a, _x(m, 2, 3)], out=a))(_x(m, 2, 3)),
    "cat into a disjoint slice": lambda m: (lambda b: m.cat([b[:2], b[2:4]], out=b[4:8]))(
        _x(m, 10, 3)),
    "gather into its input": lambda m: (lambda a: m.gather(a, 1, m.tensor([[0, 0], [1, 0]]),
                                                           out=a))(_x(m, 2, 2)),
    "take into a view of its input": lambda m: (lambda a: m.take(a, m.tensor([0, 5]),
                                                                 out=a[0, :2]))(_x(m, 2, 3)),
    "masked_select into its mask's twin": lambda m: (lambda a: m.masked_select(
        a, a > 0, out=a.view(-1)))(_x(m, 3, 2)),
    "complex out of another dtype": lambda m: m.complex(_x(m, 2, dtype=m.float32),
                                                        _x(m, 2, dtype=m.float32),
                                                        out=m.empty(2, dtype=m.complex128)),
    "polar out of another dtype": lambda m: m.polar(_x(m, 2), _x(m, 2),
                                                    out=m.empty(2, dtype=m.complex64)),
    "complex out of its dtype": lambda m: m.complex(_x(m, 2), _x(m, 2),
                                                    out=m.empty(2, dtype=m.complex128)),
    # shape and value checks
    "cov 3-d": lambda m: m.cov(_x(m, 2, 2, 2)),
    "cov bool": lambda m: m.cov(m.ones(2, 3, dtype=m.bool)),
    "cov aweights numel": lambda m: m.cov(_x(m, 2, 4), aweights=m.ones(3, dtype=m.float64)),
    "cov fweights float": lambda m: m.cov(_x(m, 2, 4), fweights=m.ones(4)),
    "cov fweights negative": lambda m: m.cov(_x(m, 4), fweights=m.tensor([1, 0, -1, 2])),
    "cov weights valid": lambda m: m.cov(_x(m, 2, 4), fweights=m.tensor([1, 0, 3, 2]),
                                         aweights=m.tensor([0.5, 1.0, 0.0, 2.0])),
    "gradient dims repeated by wrapping": lambda m: m.gradient(_x(m, 3, 3), dim=[0, -2]),
    "gradient spacing list, no dim": lambda m: m.gradient(_x(m, 3, 4), spacing=[2.0]),
    "gradient spacing list, 1-d": lambda m: m.gradient(_x(m, 4), spacing=[2.0]),
    "gradient spacing list, one dim": lambda m: m.gradient(_x(m, 3, 4), spacing=[2.0], dim=1),
    "renorm 1-d": lambda m: m.renorm(_x(m, 3), 2, 0, 1.0),
    "renorm 2-d": lambda m: m.renorm(_x(m, 3, 2), 2, 0, 1.0),
    "embedding 1-d weight": lambda m: m.nn.functional.embedding(m.tensor([0, 1]), _x(m, 3)),
    "layer_norm empty shape": lambda m: m.nn.functional.layer_norm(_x(m, 2, 3), []),
    "masked_fill int64, float64 1e300": lambda m: m.zeros(2, dtype=m.int64).masked_fill(
        m.tensor([True, False]), m.tensor(1e300, dtype=m.float64)),
    "masked_fill uint8, 256": lambda m: m.zeros(2, dtype=m.uint8).masked_fill(
        m.tensor(True), m.tensor(256)),
    "masked_fill float16, 7e4": lambda m: m.zeros(2, dtype=m.float16).masked_fill(
        m.tensor(True), m.tensor(7e4)),
    "masked_fill int8, -128": lambda m: m.zeros(2, dtype=m.int8).masked_fill(
        m.tensor(True), m.tensor(-128)),
    "arange to nan": lambda m: m.arange(0, float("nan")),
    "arange from -inf": lambda m: m.arange(float("-inf"), 0, 1),
    "linspace float steps": lambda m: m.linspace(0, 1, 5.0),
    "linspace bool steps": lambda m: m.linspace(0, 1, True),
    "logspace float steps": lambda m: m.logspace(0, 1, 2.5),
    "adaptive_avg_pool2d short input": lambda m: m.nn.functional.adaptive_avg_pool2d(
        _x(m, 2, 2, 2), (1, 2, 3)),
    "adaptive_avg_pool2d int size": lambda m: m.nn.functional.adaptive_avg_pool2d(
        _x(m, 2, 4, 4), 2),
    "adaptive_max_pool1d two sizes": lambda m: m.nn.functional.adaptive_max_pool1d(
        _x(m, 2, 2, 4), (1, 2)),
    "adaptive_max_pool3d two sizes": lambda m: m.nn.functional.adaptive_max_pool3d(
        _x(m, 1, 2, 2, 2, 2), (1, 2)),
    "hstack empty": lambda m: m.hstack([]),
    "vstack empty tuple": lambda m: m.vstack(()),
    "hsplit string": lambda m: m.hsplit(_x(m, 2, 4), "ab"),
    "vsplit float": lambda m: m.vsplit(_x(m, 4, 2), 2.0),
    "bucketize 0-d boundaries": lambda m: m.bucketize(_x(m, 3), m.tensor(0.5)),
    "roll 0-d with dim": lambda m: m.roll(m.tensor(1.0), 1, 0),
    "roll 0-d without dim": lambda m: m.roll(m.tensor(1.0), 1),
    "narrow_copy dim past the last": lambda m: m.narrow_copy(_x(m, 2, 3), 2, 0, 1),
    "narrow_copy dim below the first": lambda m: m.narrow_copy(_x(m, 2, 3), -3, 0, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_refusal_as_torch(name):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = CASES[name](torch)
    except Exception as err:  # noqa: BLE001 - the type ember must raise
        with pytest.raises(type(err)):
            CASES[name](ember)
        return
    got = CASES[name](ember)
    for e, t in zip(*(v if isinstance(v, (tuple, list)) else [v] for v in (got, expected))):
        assert e.dtype.name == str(t.dtype).split(".")[1]
        np.testing.assert_array_equal(e.numpy(), t.numpy())
