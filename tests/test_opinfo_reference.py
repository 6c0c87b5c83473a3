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

Up to ``SAMPLES`` (20) reference samples per op and dtype are run, counted after the
first five when those equal ``sample_inputs``' first five (most generators start by
yielding ``sample_inputs``), leaving out those of more than ``LARGEST`` (300,000)
elements (the million-element transposed and strided copies of layouts that also come
small); that keeps the file near 120 s on one core of this machine.
``OPINFO_REFERENCE_SAMPLES`` and ``OPINFO_REFERENCE_LARGEST`` change them; run this
file as a script for every reference sample of every case, one line per difference
and the counts by kind (docs/differences.md).

``KNOWN`` lists the (op, dtype) pairs that still differ, each with its reason; each is
asserted to still differ, so a pair that starts to agree must leave it.
"""
import itertools
import os
import warnings

import numpy as np
import pytest
import test_opinfo as T
import torch
from torch.testing._internal import common_utils
from torch.testing._internal.opinfo import core as opinfo_core

import ember

SAMPLES = int(os.environ.get("OPINFO_REFERENCE_SAMPLES", 20))  # per op and dtype
# the million-element transposed and strided samples (their layouts come small too)
LARGEST = int(os.environ.get("OPINFO_REFERENCE_LARGEST", 300_000))
SHARED = 5  # the sample_inputs samples a reference generator usually starts with

OPS = [op for op in T.PRESENT if op.reference_inputs_func is not None]
CASES = [(op, dtype) for op in OPS for dtype in T._dtypes(op)]

# the (op, dtype) pairs with a reference sample that differs, and why; the goal is an
# empty dict
_NAN_TAIL = "a NaN input's gradient: torch's CPU kernel gives 0 (NaN for elu) in its " \
    "vectorised body and passes the gradient in its scalar tail; ember follows the body"
_POLE = "the gradient at a negative integer (a pole): torch's reflection through sin(pi x) " \
    "gives a finite number, ember inf (docs/differences.md)"
KNOWN = {
    ("clamp", "float64"): "bounds (made to require grad: OpInfo asks make_tensor for an int64 "
                          "bound with grad) broadcast beyond the input: torch's backward "
                          "raises a shape mismatch, ember computes (gradcheck below)",
    ("narrow_copy", "float64"): "a negative start: torch's backward raises a shape mismatch, "
                                "ember's gradient is narrow's",
    ("nn.functional.silu.complex", "complex64"): "silu(-1e20 + iy): torch divides by "
                                                 "exp(1e20) = inf and gives NaN; the limit, "
                                                 "ember's, is 0",
    ("nn.functional.silu.complex", "complex128"): "as complex64",
    **{(f"nn.functional.{n}", "float64"): _NAN_TAIL
       for n in ("elu", "celu", "selu", "hardshrink", "softshrink", "hardtanh", "relu6")},
    ("digamma", "float64"): _POLE,
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


def _elements(s):
    return sum(t.numel() for t in T._flat([s.input, list(s.args), list(s.kwargs.values())])
               if isinstance(t, torch.Tensor))


def reference_samples(op, dtype, grad, samples=None, largest=None):
    """``(index, sample)`` pairs: up to ``samples`` (``SAMPLES``) reference samples of
    ``op`` in ``dtype``, after the first ``SHARED`` when they equal ``sample_inputs``',
    leaving out those with more than ``largest`` (``LARGEST``) elements in all."""
    limit = SAMPLES if samples is None else samples
    largest = LARGEST if largest is None else largest
    ref = _generate(op, dtype, grad, SHARED + 2 * limit)
    plain = T._samples(op, dtype, grad, SHARED)[:SHARED]
    first = 0
    if len(plain) == SHARED and all(_same((a.input, a.args, a.kwargs),
                                          (b.input, b.args, b.kwargs))
                                    for a, b in zip(ref, plain)):
        first = SHARED
    kept = [(i, s) for i, s in enumerate(ref) if i >= first and _elements(s) <= largest]
    return kept[:limit]


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


def _report(samples=10 ** 6, largest=10 ** 9):
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
        for i, s in reference_samples(op, dtype, grad, samples, largest):
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


# ----- what the reference inputs found, each checked on its own ----------------------------
_NUMBER_PAIRS = [(2.5, 1.5), (2, 3), (True, False), (2, 1.5), (2, 1j), (1.1, 3.3), (True, True),
                 (-7, 2)]


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "true_divide", "floor_divide",
                                  "multiply", "subtract", "divide", "rsub"])
def test_two_python_numbers(name):
    """``torch.add(2.5, 1.5)`` is a float32 tensor computed in float32 (the first number
    is wrapped as a 0-d tensor of its default dtype), not NumPy's float64; rsub refuses."""
    for a, b in _NUMBER_PAIRS:
        for kw in ({}, {"rounding_mode": "floor"}) if name == "div" else ({},):
            res = []
            for m in (torch, ember):
                try:
                    r = getattr(m, name)(a, b, **kw)
                    res.append((_name(r.dtype), repr(r.item())))
                except Exception as e:  # noqa: BLE001 - the same refusal on both sides
                    res.append(type(e).__name__)
            assert res[0] == res[1], (name, a, b, kw, res)


@pytest.mark.parametrize("shapes", [((), ()), ((3,), ()), ((3,), (1,)), ((2, 3), (2,))])
def test_multi_margin_loss_none_shape(shapes):
    """A (C) or 0-d input's 'none' loss has the target's shape, () or (1), as PyTorch's."""
    xs, ts = shapes
    x = np.linspace(-1, 2, int(np.prod(xs))).reshape(xs)
    t = np.zeros(ts, dtype=np.int64)
    out = []
    for m in (torch, ember):
        xx = m.tensor(x, requires_grad=True)
        y = m.nn.functional.multi_margin_loss(xx, m.tensor(t), reduction="none")
        g, = m.autograd.grad(y.sum(), xx)
        out.append((tuple(y.shape), y.detach().numpy(), g.numpy()))
    assert out[0][0] == out[1][0]
    np.testing.assert_allclose(out[1][1], out[0][1])
    np.testing.assert_allclose(out[1][2], out[0][2])


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("margin", [0, 1, 0.5])
def test_margin_ranking_loss_integer_inputs(reduction, margin):
    """The margin is a float in ATen's schema: integer inputs give a float32 loss."""
    a, b, y = [[-8, 6], [9, 0]], [[1], [-5]], [[-4, 0]]
    r = [m.nn.functional.margin_ranking_loss(m.tensor(a), m.tensor(b), m.tensor(y),
                                             margin=margin, reduction=reduction)
         for m in (torch, ember)]
    assert _name(r[1].dtype) == _name(r[0].dtype) == "float32"
    np.testing.assert_array_equal(r[1].numpy(), r[0].numpy())


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("dtypes", [("float32", "bfloat16", "float32"),
                                    ("float64", "bfloat16", "float32"),
                                    ("float64", "float32", "float32"),
                                    ("float32", "float64", "float16"),
                                    ("int64", "float32", "float32")])
def test_addc_ops_compute_in_common_dtype(name, dtypes):
    """addcmul/addcdiv compute in the three operands' common dtype: a bfloat16 factor is
    not multiplied in bfloat16, a float32 quotient not rounded before a float64 sum."""
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(1, 9, (3, 4)), rng.uniform(-9, 9, (3, 4)), rng.uniform(1, 9, (1, 4))]
    if dtypes[0] == "int64":
        arrays[0] = np.round(arrays[0])
    res = []
    for m in (torch, ember):
        ts = [m.tensor(a).to(getattr(m, d)) for a, d in zip(arrays, dtypes)]
        res.append(getattr(m, name)(*ts, value=3.14 if dtypes[0] != "int64" else 3))
    assert _name(res[1].dtype) == _name(res[0].dtype)
    np.testing.assert_allclose(res[1].double().numpy(), res[0].double().numpy(), rtol=2e-7)


def test_igamma_large_a_ends():
    """a = x = 1e20 (a reference input) took sqrt(a) steps; from a = 1e8 Temme's expansion
    answers at once, agreeing with Cephes (scipy, whose asymptotic series with the full
    coefficient table is exact there) near the diagonal, P + Q = 1."""
    from scipy import special
    a = np.repeat([1e8, 3.3e9, 1e12, 1e20, 1e30], 7)
    x = a * (1 + np.tile([-1e-4, -3e-5, -1e-6, 0.0, 1e-6, 3e-5, 1e-4], 5) * (1e8 / a) ** 0.5)
    p = ember.igamma(ember.tensor(a), ember.tensor(x)).numpy()
    q = ember.igammac(ember.tensor(a), ember.tensor(x)).numpy()
    np.testing.assert_allclose(p, special.gammainc(a, x), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(q, special.gammaincc(a, x), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(p + q, 1, rtol=1e-15)
    assert ember.igamma(ember.tensor([1e20]), ember.tensor([1e20])).item() == 0.5
    # far from the diagonal, down to x / a rounding to 0 (P(1e20, 501) is 0, not NaN)
    a = np.repeat([1e8, 1e12, 1e20, 1e300], 6)
    x = a * np.tile([0.0, 0.5, 0.9, 1.1, 2.0, 1e6], 4)
    x[::6] = 501.0
    for upper, ref in ((False, special.gammainc), (True, special.gammaincc)):
        got = (ember.igammac if upper else ember.igamma)(ember.tensor(a), ember.tensor(x))
        np.testing.assert_allclose(got.numpy(), ref(a, x), rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("kind", ["both", "min", "max", "clamp_min", "clamp_max"])
def test_clamp_tensor_bound_gradients_at_nan(kind):
    """Each gradient of clamp with tensor bounds goes where its comparison holds
    (PyTorch's clamp_backward_min_max): a NaN, in the input or a bound, sends none to a
    bound; crossed bounds send all to max. Every triple of NaN, +-inf, -1, 0, 1."""
    vals = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1.0]
    cols = [np.array(c) for c in zip(*itertools.product(vals, repeat=3))]
    res = []
    for m in (torch, ember):
        x, lo, hi = (m.tensor(v, requires_grad=True) for v in cols)
        if kind == "both":
            y, ins = m.clamp(x, lo, hi), [x, lo, hi]
        elif kind == "min":
            y, ins = m.clamp(x, min=lo), [x, lo]
        elif kind == "max":
            y, ins = m.clamp(x, max=hi), [x, hi]
        else:
            bound = lo if kind == "clamp_min" else hi
            y, ins = getattr(m, kind)(x, bound), [x, bound]
        grads = m.autograd.grad(y, ins, m.ones_like(y))
        res.append([y.detach().numpy()] + [g.numpy() for g in grads])
    for e, t in zip(res[1], res[0]):
        np.testing.assert_array_equal(e, t)


def test_nextafter_gradient_where_equal():
    """nextafter's gradient for its input is 1, but 0 where input == other (the result is
    other itself), as PyTorch's formula; broadcast operands included."""
    inf, nan = float("inf"), float("nan")
    a = [inf, inf, inf, -inf, -inf, nan, nan, 1.0, 1.0, 2.0, 0.0, -0.0]
    b = [inf, -inf, nan, inf, -inf, inf, nan, 1.0, 2.0, 1.0, 0.0, 0.0]
    res = []
    for m in (torch, ember):
        for x, y in ((a, b), ([[1.0], [2.0]], [1.0, 2.0, 3.0])):
            x = m.tensor(x, dtype=m.float64, requires_grad=True)
            out = m.nextafter(x, m.tensor(y, dtype=m.float64))
            res.append(m.autograd.grad(out, x, m.ones_like(out))[0].numpy())
    for e, t in zip(res[2:], res[:2]):
        np.testing.assert_array_equal(e, t)


def test_where_torch_backward_raises():
    """KNOWN's two cases where torch's backward raises and ember's computes: clamp with
    tensor bounds broadcast beyond the input (gradcheck), and narrow_copy from a negative
    start (narrow's gradient). torch still raising is asserted, so a fix is noticed."""
    rng = np.random.default_rng(0)
    x, lo, hi = rng.uniform(-3, 3, (4, 4)), rng.uniform(-3, 0, (1, 4, 4)), rng.uniform(0, 3, (4, 4))
    tx, tlo, thi = (torch.tensor(a, requires_grad=True) for a in (x, lo, hi))
    ty = torch.clamp(tx, tlo, thi)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.autograd.grad(ty, [tx, tlo, thi], torch.ones_like(ty))
    leaves = [ember.tensor(a, requires_grad=True) for a in (x, lo, hi)]
    assert ember.autograd.gradcheck(lambda a, b, c: ember.clamp(a, b, c), leaves)
    t = torch.arange(10.0, dtype=torch.float64, requires_grad=True)
    ty = torch.narrow_copy(t, 0, -10, 10)
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.autograd.grad(ty, t, torch.ones_like(ty))
    e = ember.arange(10.0, dtype=ember.float64, requires_grad=True)
    for start, length in ((-10, 10), (-4, 3), (2, 5)):
        g, = ember.autograd.grad(ember.narrow_copy(e, 0, start, length).sum(), e)
        ref, = ember.autograd.grad(ember.narrow(e, 0, start, length).sum(), e)
        np.testing.assert_array_equal(g.numpy(), ref.numpy())
