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

import pytest
import torch
from test_opinfo import PRESENT, _key, _ember_fn, _numpy, _to_ember

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
