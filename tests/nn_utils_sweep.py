"""The comparison behind the torch.nn.utils sweeps (tests/test_nn_utils_sweep_*.py).

A case is one function run on ``ember`` and on ``torch`` after the same seed: what it
returns (tensors with dtype, shape, values and ``grad_fn`` name; exception types; plain
values, nested in lists, tuples and dicts) must agree within the case's tolerance. Each
sweep keeps a ``KNOWN`` table of the cases where ember differs on purpose, with the
reason, asserted both ways.
"""
import time
import warnings

import numpy as np
import torch

import ember

LIBS = (ember, torch)


class Raised:
    def __init__(self, exc):
        self.type = type(exc).__name__
        self.text = str(exc)

    def __repr__(self):
        return f"raised {self.type}: {self.text[:120]}"


def _leaf(x):
    if isinstance(x, (ember.Tensor, torch.Tensor)):
        fn = x.grad_fn
        x = x.detach().cpu()
        # (torch has no NumPy bfloat16: both sides compare it widened, exactly)
        values = (x.float() if str(x.dtype).endswith("bfloat16") else x).numpy()
        return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape),
                None if fn is None else type(fn).__name__, values)
    if isinstance(x, (ember.dtype, torch.dtype)):
        return ("dtype", str(x).split(".")[-1])
    if isinstance(x, (ember.Size, torch.Size)):
        return ("size", tuple(x))
    return x


def _flatten(obj):
    if isinstance(obj, dict):
        return [("key", k) for k in obj] + [v for val in obj.values() for v in _flatten(val)]
    if isinstance(obj, (list, tuple)) and not isinstance(obj, (ember.Size, torch.Size)):
        return [("len", len(obj))] + [v for item in obj for v in _flatten(item)]
    return [_leaf(obj)]


def _run(case, m):
    warnings.simplefilter("ignore")
    m.manual_seed(0)
    try:
        return _flatten(case(m))
    except Exception as exc:  # the exception's type is part of the answer
        return [Raised(exc)]


def _difference(e, t, tol):
    """None when ember's answer ``e`` agrees with torch's ``t``, else what differs."""
    if len(e) != len(t):
        return f"{len(e)} results against torch's {len(t)}: {e[:3]} / {t[:3]}"
    for i, (a, b) in enumerate(zip(e, t)):
        if isinstance(a, Raised) or isinstance(b, Raised):
            if not (isinstance(a, Raised) and isinstance(b, Raised) and a.type == b.type):
                return f"item {i}: {a!r} against torch's {b!r}"
            continue
        if isinstance(a, tuple) and a and a[0] == "tensor":
            if not (isinstance(b, tuple) and b and b[0] == "tensor"):
                return f"item {i}: a tensor against {b!r}"
            if a[1:4] != b[1:4]:
                return f"item {i}: (dtype, shape, grad_fn) {a[1:4]} against torch's {b[1:4]}"
            x, y = a[4], b[4]
            if x.dtype == np.bool_ or np.issubdtype(x.dtype, np.integer) or tol == 0:
                if not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                    return f"item {i}: values differ exactly:\n{x}\n{y}"
                continue
            x, y = x.astype(np.float64), y.astype(np.float64)
            scale = max(1.0, float(np.abs(y[np.isfinite(y)]).max(initial=0.0)))
            if not np.allclose(x, y, rtol=tol, atol=tol * scale, equal_nan=True):
                return f"item {i}: values differ beyond {tol}:\n{x}\n{y}"
            # a clipped -0.0 stays -0.0, and an infinity keeps its sign
            if not np.array_equal(np.signbit(x[(x == 0) | np.isinf(x)]),
                                  np.signbit(y[(x == 0) | np.isinf(x)])):
                return f"item {i}: signs of zeros or infinities differ:\n{x}\n{y}"
            continue
        if a != b:
            return f"item {i}: {a!r} against torch's {b!r}"
    return None


def grads(params):
    """The ``.grad`` of each parameter."""
    return [p.grad for p in params]


def linear(m, i, o, seed=0):
    """An ``m.nn.Linear(i, o)`` with seeded standard normal weight and bias."""
    rng = np.random.default_rng(seed)
    lin = m.nn.Linear(i, o)
    with m.no_grad():
        lin.weight.copy_(m.tensor(rng.standard_normal((o, i)).astype(np.float32)))
        lin.bias.copy_(m.tensor(rng.standard_normal(o).astype(np.float32)))
    return lin


def inputs(m, *shape, seed=1):
    """A seeded standard normal float32 tensor of ``shape`` in library ``m``."""
    return m.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))



class Cases(dict):
    """name -> (case, tolerance); ``add`` registers a case as a decorator."""

    def add(self, name, tol=1e-6):
        def register(fn):
            self[name] = (fn, tol)
            return fn
        return register


def check(name, fn, tol, known):
    """Assert that case ``name`` agrees with torch, or differs when it is in ``known``."""
    diff = _difference(_run(fn, ember), _run(fn, torch), tol)
    if name in known:
        assert diff is not None, f"{name} now agrees with torch: remove it from KNOWN"
    else:
        assert diff is None, f"{name}: {diff}"


def report(cases, known):
    """Run every case of ``cases`` (name -> (case, tol)) and print what differs beyond
    ``known`` and the CPU time taken."""
    failed, n_known, start = [], 0, time.process_time()
    for name, (fn, tol) in cases.items():
        diff = _difference(_run(fn, ember), _run(fn, torch), tol)
        if name in known:
            n_known += 1
            if diff is None:
                failed.append((name, "agrees now: remove from KNOWN"))
        elif diff is not None:
            failed.append((name, diff))
    for name, why in failed:
        print(f"DIFFERS {name}: {why}")
    print(f"{len(cases)} cases, {n_known} known, {len(failed)} unexpected, "
          f"{time.process_time() - start:.1f} s CPU")
    return failed
