"""The test oracle: run the same op on ember and on torch 2.13.0 and compare.

A case is one row of a table: ``fn(m, *tensors)`` is called once with ``m=ember``
and once with ``m=torch`` on tensors built from the same seeded NumPy arrays.
Forward values, dtypes and shapes are compared, then first gradients for a random
``grad_output``, then second gradients (``create_graph=True``) where the op is
twice differentiable; each case also runs on non-contiguous copies of its inputs.
"""
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

try:
    import torch
except ImportError as e:  # the oracle is required: fail loudly, never skip
    raise ImportError("the test suite needs torch==2.13.0 as its oracle; run `make test`") from e

import ember

COMPARISONS = [0]


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    inputs: Any  # list of shapes, or callable rng -> list of arrays
    grad: bool = True
    gradgrad: bool = True
    dtype: Any = np.float64
    rtol: float = None
    atol: float = None
    noncontig: bool = True
    requires_grad: Any = None  # per-input flags; default: floating inputs
    low: float = None  # inputs drawn uniform in [low, high) instead of normal
    high: float = None
    # the call whose autograd graph test_node_names compares, where ``fn``'s torch side
    # is a stand-in formula (torch lacks the derivative the case checks)
    graph_fn: Callable = None

    def __str__(self):
        return self.name


def make_inputs(case, seed=0):
    rng = np.random.default_rng(seed)
    if callable(case.inputs):
        arrays = case.inputs(rng)
    else:
        arrays = []
        for shape in case.inputs:
            if case.low is not None:
                a = rng.uniform(case.low, case.high, size=shape)
            else:
                a = rng.standard_normal(size=shape)
            arrays.append(np.asarray(a, dtype=case.dtype))
    return [np.asarray(a) if not np.isscalar(a) else a for a in arrays]


def _noncontig(a):
    if not isinstance(a, np.ndarray) or a.ndim == 0 or a.size == 0:
        return a
    wide = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), dtype=a.dtype)
    wide[..., ::2] = a
    out = wide[..., ::2]
    assert not out.flags.c_contiguous or a.shape[-1] <= 1
    return out


def _tensors(arrays, requires_grad):
    e_ts, t_ts = [], []
    for a, rg in zip(arrays, requires_grad):
        if isinstance(a, np.ndarray):
            e = ember.from_numpy(a.copy() if a.flags.c_contiguous else a)
            t = torch.from_numpy(a.copy() if a.flags.c_contiguous else a)
            if rg:
                e.requires_grad_(True)
                t.requires_grad_(True)
            e_ts.append(e)
            t_ts.append(t)
        else:
            e_ts.append(a)
            t_ts.append(a)
    return e_ts, t_ts


def _outputs(out):
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def _tol(case, dtype):
    if dtype in (np.float32,) or str(dtype).endswith("float32"):
        return case.rtol or 1e-5, case.atol or 1e-5
    if str(dtype).endswith("float16"):
        return 1e-2, 1e-2
    return case.rtol or 1e-7, case.atol or 1e-9


def assert_close(e, t, case, what):
    """Compare an ember tensor (or value) with a torch one: shape, dtype, values."""
    COMPARISONS[0] += 1
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"{case}: {what} is {type(e).__name__}, not a Tensor"
        assert tuple(e.shape) == tuple(t.shape), \
            f"{case}: {what} shape {tuple(e.shape)} != torch {tuple(t.shape)}"
        assert e.dtype.name == str(t.dtype).replace("torch.", ""), \
            f"{case}: {what} dtype {e.dtype} != torch {t.dtype}"
        ea = e.detach().numpy()
        ta = t.detach().numpy()
        if ea.dtype.kind in "biu":
            np.testing.assert_array_equal(ea, ta, err_msg=f"{case}: {what}")
        else:
            rtol, atol = _tol(case, ea.dtype)
            np.testing.assert_allclose(ea, ta, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{case}: {what}")
    elif isinstance(t, (tuple, list)):
        assert len(e) == len(t), f"{case}: {what} length"
        for i, (a, b) in enumerate(zip(e, t)):
            assert_close(a, b, case, f"{what}[{i}]")
    else:
        if isinstance(e, ember.Tensor):
            e = e.item()
        assert e == pytest.approx(t, rel=1e-6, nan_ok=True), f"{case}: {what}: {e} != {t}"


def run_case(case, seed=0, noncontig=False):
    arrays = make_inputs(case, seed)
    if noncontig:
        arrays = [_noncontig(a) for a in arrays]
    rg = case.requires_grad
    if rg is None:
        rg = [isinstance(a, np.ndarray) and a.dtype.kind == "f" and case.grad for a in arrays]
    e_in, t_in = _tensors(arrays, rg)
    e_out = case.fn(ember, *e_in)
    t_out = case.fn(torch, *t_in)
    assert_close(e_out, t_out, case, "forward")
    if not case.grad:
        return
    e_outs = [o for o in _outputs(e_out) if isinstance(o, ember.Tensor) and o.requires_grad]
    t_outs = [o for o in _outputs(t_out) if isinstance(o, torch.Tensor) and o.requires_grad]
    assert len(e_outs) == len(t_outs), f"{case}: differentiable outputs differ"
    if not t_outs:
        return
    rng = np.random.default_rng(seed + 1)
    gos = [rng.standard_normal(o.shape).astype(o.detach().numpy().dtype) for o in t_outs]
    e_leaves = [x for x, r in zip(e_in, rg) if r]
    t_leaves = [x for x, r in zip(t_in, rg) if r]
    e_g = ember.autograd.grad(e_outs, e_leaves, [ember.tensor(g) for g in gos],
                              create_graph=case.gradgrad, allow_unused=True)
    t_g = torch.autograd.grad(t_outs, t_leaves, [torch.tensor(g) for g in gos],
                              create_graph=case.gradgrad, allow_unused=True)
    for i, (a, b) in enumerate(zip(e_g, t_g)):
        if b is None or a is None:
            # None and an all-zero gradient mean the same
            for g in (a, b):
                assert g is None or not g.detach().numpy(force=True).any(), \
                    f"{case}: grad {i}: one library has a nonzero gradient, the other None"
            continue
        assert_close(a, b, case, f"grad[{i}]")
    if not case.gradgrad:
        return
    vs = [rng.standard_normal(tuple(b.shape)) if b is not None else None for b in t_g]
    e_terms = [(a * ember.tensor(v, dtype=a.dtype)).sum() for a, v in zip(e_g, vs)
               if a is not None and v is not None and a.requires_grad]
    t_terms = [(b * torch.tensor(v, dtype=b.dtype)).sum() for b, v in zip(t_g, vs)
               if b is not None and b.requires_grad]
    if not t_terms:
        return
    t_gg = torch.autograd.grad(sum(t_terms[1:], t_terms[0]), t_leaves, allow_unused=True)
    if not e_terms:
        # ember may see that a gradient is constant where torch records a graph anyway
        for i, b in enumerate(t_gg):
            assert b is None or not b.detach().numpy(force=True).any(), \
                f"{case}: ember's gradient is not differentiable but torch's second grad {i} " \
                "is nonzero"
        return
    e_gg = ember.autograd.grad(sum(e_terms[1:], e_terms[0]), e_leaves, allow_unused=True)
    for i, (a, b) in enumerate(zip(e_gg, t_gg)):
        if b is None or not b.detach().numpy(force=True).any():
            assert a is None or not a.detach().numpy().any(), \
                f"{case}: second grad {i} should be zero"
            continue
        assert a is not None, f"{case}: second grad {i} is None but torch's is not"
        assert_close(a, b, case, f"gradgrad[{i}]")


def check(case):
    run_case(case)
    if case.noncontig:
        run_case(case, noncontig=True)


def check_raises(fn, *arrays, exc=None):
    """Both libraries raise, and the same exception type (or ``exc`` when given)."""
    e_in, t_in = _tensors(list(arrays), [False] * len(arrays))
    with pytest.raises(Exception) as t_err:
        fn(torch, *t_in)
    with pytest.raises(Exception) as e_err:
        fn(ember, *e_in)
    expected = exc or type(t_err.value)
    assert isinstance(e_err.value, expected), \
        f"ember raised {type(e_err.value).__name__}: {e_err.value}; torch raised " \
        f"{type(t_err.value).__name__}: {t_err.value}"
    return e_err.value


def cases(table):
    """pytest parametrisation of a table, with readable ids."""
    return pytest.mark.parametrize("case", table, ids=[c.name for c in table])
