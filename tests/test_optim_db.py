"""ember.optim swept against PyTorch's own table of optimizer configurations
(``torch.testing._internal.common_optimizers.optim_db``, tests/optim_db_harness.py) and
every ``torch.optim.lr_scheduler`` class (tests/lr_sched_sweep.py).

Each optimizer input runs 10 steps in both libraries from the same parameters and
gradients, float32, float64 and complex64, with and without param groups; parameters
are compared after every step (SGD's float32 ones to the bit, as docs/optim.md promises),
then the state dicts, then each library's state dict is loaded into the other and three
more steps compared. The table's error inputs must raise the same exception with the
same message. What stays different is listed in KNOWN, matched by case and message, and
documented in docs/differences.md ("Optimizers swept against PyTorch's OptimizerInfo
table"); each entry must still match a differing case, so a fix is noticed.
``python tests/test_optim_db.py`` prints the counts per optimizer.
"""
import collections
import re
import sys
import warnings

import lr_sched_sweep
import numpy as np
import optim_db_harness as harness
import pytest
import torch

import ember

# (case-id pattern, message pattern, why ember stays different)
KNOWN = [
    (r"& differentiable", r"ember \('construction', 'NotImplementedError', "
     r"'differentiable=True",
     "differentiable=True (autograd through the step) is not implemented: ember raises "
     "NotImplementedError at construction; PyTorch, given leaf parameters, fails at the "
     "step on its in-place update"),
    (r"& foreach \(on the CPU\)", r"param 2: values \(Greatest absolute difference: nan",
     "foreach=True after a NaN/inf gradient: PyTorch's multi-tensor kernels propagate "
     "non-finite values unlike its single-tensor ones (ASGD averages as ax + (p - ax) * mu, "
     "complex parameters decay and update as real pairs); ember has one update, the "
     "single-tensor one"),
    (r"^LBFGS-.*-(float32|complex64)", r"values|\['n_iter'\]|\['func_evals'\]",
     "single-precision L-BFGS near its minimum: dot products and the loss summed in "
     "another order move the last bits, and a stopping test can end a step one "
     "iteration apart"),
]

# (optimizer, error-input description pattern, why ember stays different): none now
KNOWN_ERRORS = []

NAMES = sorted({case[0] for case in harness.CASES})
_RESULTS = {}


def _known(case_id, msg):
    return next((i for i, (cid, pat, _) in enumerate(KNOWN)
                 if re.search(cid, case_id) and re.search(pat, msg)), None)


def _results(name):
    """``[(case id, message, KNOWN index or None)]`` of the differing cases of ``name``."""
    if name not in _RESULTS:
        rows = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for case in harness.CASES:
                if case[0] == name:
                    msg = harness.run_case(case)
                    if msg:
                        cid = harness.case_id(case)
                        rows.append((cid, msg, _known(cid, msg)))
        _RESULTS[name] = rows
    return _RESULTS[name]


@pytest.mark.parametrize("name", NAMES)
def test_optimizer_inputs(name):
    bad = [f"{cid}: {msg[:300]}" for cid, msg, known in _results(name) if known is None]
    assert not bad, f"{name}: {len(bad)} inputs differ from torch:\n" + "\n".join(bad[:10])


ERRORS = harness.error_cases()


def _error_known(name, desc):
    return any(name == n and re.search(pat, desc) for n, pat, _ in KNOWN_ERRORS)


@pytest.mark.parametrize("name,desc,make", ERRORS,
                         ids=[f"{n}-{d}" for n, d, _ in ERRORS])
def test_error_inputs(name, desc, make):
    t, e = harness.error_outcome(make, torch), harness.error_outcome(make, ember)
    assert t is not None, "the table's error input should fail in torch"
    if _error_known(name, desc):
        assert e != t, f"{name} {desc}: now as torch: remove it from KNOWN_ERRORS"
    else:
        assert e == t


def test_known_entries_still_differ():
    used = collections.Counter(known for name in NAMES for _, _, known in _results(name)
                               if known is not None)
    stale = [KNOWN[i][2] for i in range(len(KNOWN)) if not used[i]]
    assert not stale, f"KNOWN entries no case needs any more: {stale}"


def test_sweep_is_wide():
    from torch.testing._internal.common_optimizers import optim_db
    assert {info.name for info in optim_db} == set(NAMES)
    assert len(harness.CASES) > 900 and len(ERRORS) > 100
    kinds = {tuple(sorted(k for k in kw if k in ("foreach", "fused", "differentiable",
                                                 "capturable") and kw[k]))
             for _, _, kw, _, _ in harness.CASES}
    assert {(), ("foreach",), ("fused",), ("differentiable",), ("capturable",)} <= kinds
    # the harness itself works: torch runs the cases it supports to the end
    sample = [c for c in harness.CASES if not any(
        c[2].get(k) for k in ("differentiable", "capturable", "fused"))][::20]
    ran = sum(harness.run_side(torch, c, 0, 2).error is None for c in sample)
    assert ran == len(sample) and len(sample) > 30


# ----- PyTorch behaviours ember does not copy (asserted, so a change is noticed) ---------
def test_known_lbfgs_transposed_parameter():
    """PyTorch's LBFGS flattens each gradient with ``view(-1)``, which fails on the
    gradient of a transposed parameter; ember's reshapes and runs."""
    def run(m):
        p = m.from_numpy(np.arange(6.0).reshape(2, 3).T.copy()).t().requires_grad_()
        opt = m.optim.LBFGS([p])

        def closure():
            opt.zero_grad()
            loss = ((p - 1) ** 2).sum()
            loss.backward()
            return loss
        opt.step(closure)
        return p.detach().numpy()

    with pytest.raises(RuntimeError, match="view size is not compatible"):
        run(torch)
    np.testing.assert_allclose(run(ember), np.ones((2, 3)), atol=1e-6)


def test_known_torch_fused_pairs_memory_not_elements():
    """PyTorch's fused CPU kernels update a parameter and a gradient of other strides
    memory slot by memory slot (a transposed parameter, a contiguous gradient: wrong
    elements); ember's fused=True is its one update, element by element, as PyTorch's
    unfused kernels."""
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    g = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)

    def run(m, **kw):
        p = m.from_numpy(a.copy()).t().requires_grad_()
        p.grad = m.from_numpy(g.copy())
        m.optim.Adam([p], lr=0.1, **kw).step()
        return p.detach().numpy()

    plain = run(torch)
    assert not np.allclose(run(torch, fused=True), plain)
    np.testing.assert_allclose(run(ember, fused=True), plain, rtol=1e-6)


# ----- rows this sweep found wrong, as plain checks (each differed before) ---------------
def _param(m, values, dtype=None):
    p = m.tensor(values, dtype=dtype, requires_grad=True)
    p.grad = m.ones_like(p)
    return p


@pytest.mark.parametrize("name", ["Adam", "Adadelta", "ASGD", "NAdam", "Rprop"])
def test_capturable_on_cpu_raises(name):
    for m in (torch, ember):
        opt = getattr(m.optim, name)([_param(m, [1.0, 2.0])], capturable=True)
        with pytest.raises(AssertionError, match="If capturable=True, params"):
            opt.step()
    # without a gradient there is nothing to refuse
    getattr(ember.optim, name)([ember.zeros(2, requires_grad=True)], capturable=True).step()


def test_fused_refuses_complex():
    for name in ("SGD", "Adam", "AdamW", "Adagrad"):
        p = _param(ember, [1 + 1j], ember.complex64)
        with pytest.raises(RuntimeError, match="`fused=True` requires all the params to be "
                                               "floating point"):
            getattr(ember.optim, name)([p], fused=True).step()


def test_complex_parameters():
    def run(m, name, **kw):
        p = m.tensor([1 + 2j, -0.5 + 0.25j], dtype=m.complex64, requires_grad=True)
        opt = getattr(m.optim, name)([p], **kw)
        for step in range(3):
            p.grad = m.tensor([0.3 - 1j, 2 + 0.5j], dtype=m.complex64) * (step + 1)
            opt.step()
        return p.detach().numpy()

    for name, kw in [("Adam", {"weight_decay": 0.1}), ("SGD", {"weight_decay": 0.5}),
                     ("Rprop", {}), ("Adagrad", {"initial_accumulator_value": 0.1}),
                     ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True})]:
        np.testing.assert_allclose(run(ember, name, **kw), run(torch, name, **kw),
                                   rtol=1e-6, err_msg=name)


def test_infinite_and_nan_gradients():
    nan, inf = float("nan"), float("inf")

    def run(m, name, values, dtype, **kw):
        p = m.tensor(values, dtype=dtype, requires_grad=True)
        opt = getattr(m.optim, name)([p], **kw)
        for grad in ([0.5, -1.0, 2.0], [nan, inf, -inf]):
            p.grad = m.tensor(grad, dtype=dtype)
            opt.step()
        return np.concatenate([p.detach().numpy().reshape(-1),
                               *[t.numpy().reshape(-1) for t in opt.state[p].values()
                                 if isinstance(t, type(p)) and t.dim()]])

    for name, values, kw in [("Rprop", [1.0, 2.0, 3.0], {}),
                             ("SGD", [1 + 1j, 2j, 3.0], {"momentum": 0.9}),
                             ("Adadelta", [1 + 1j, 2j, 3.0], {}),
                             ("RAdam", [1 + 1j, 2j, 3.0], {"weight_decay": 0.1})]:
        dtype = "complex64" if isinstance(values[0], complex) else "float32"
        e = run(ember, name, values, getattr(ember, dtype), **kw)
        t = run(torch, name, values, getattr(torch, dtype), **kw)
        np.testing.assert_array_equal(np.isnan(e), np.isnan(t), err_msg=name)
        np.testing.assert_allclose(e, t, rtol=1e-6, equal_nan=True, err_msg=name)
    p = ember.zeros(2, 3, requires_grad=True)
    p.grad = ember.tensor([[nan, 1.0, 2.0], [0.0, 1.0, 2.0]])
    ember.optim.Muon([p]).step()  # a NaN norm used to raise TypeError
    assert np.isnan(p.detach().numpy()).all()


def test_lbfgs_state_in_parameter_dtype():
    p = ember.tensor([1.0, -2.0, 0.5], requires_grad=True)
    opt = ember.optim.LBFGS([p], lr=ember.tensor(0.5))

    def closure():
        opt.zero_grad()
        loss = (p * p * ember.tensor([1.0, 2.0, 3.0])).sum()
        loss.backward()
        return loss
    opt.step(closure)
    state = opt.state[p]
    assert state["t"].dtype == ember.float32
    assert all(r.dtype == ember.float32 for r in state["ro"])
    assert all(a is None or a.dtype == ember.float32 for a in state["al"])


def test_sparse_adam():
    """SparseAdam existed only as a name that raised."""
    def run(m):
        p = m.tensor(np.linspace(-1, 1, 12).reshape(4, 3), requires_grad=True)
        opt = m.optim.SparseAdam([p], lr=m.tensor(0.05), maximize=True)
        for step in range(3):
            p.grad = m.sparse_coo_tensor(m.tensor([[3, 1, 3]]),
                                         m.ones(3, 3, dtype=m.float64) * (step - 1), (4, 3))
            opt.step()
        return p.detach().numpy(), opt.state[p]["step"]

    (e, e_step), (t, t_step) = run(ember), run(torch)
    np.testing.assert_allclose(e, t, rtol=1e-12)
    assert e_step == t_step == 3 and type(e_step) is int
    with pytest.raises(ValueError, match="SparseAdam requires dense parameter tensors"):
        ember.optim.SparseAdam([ember.zeros(3).to_sparse().requires_grad_()])


def test_adam_tensor_betas_with_foreach():
    for m in (torch, ember):
        with pytest.raises(ValueError, match=r"betas\[0\] as a Tensor is not supported"):
            m.optim.Adam([m.zeros(1, requires_grad=True)], foreach=True,
                         betas=(m.tensor(0.9), m.tensor(0.99)))


# ----- learning-rate schedulers ----------------------------------------------------------
@pytest.mark.parametrize("case", lr_sched_sweep.CASES, ids=lr_sched_sweep.case_id)
def test_lr_scheduler(case):
    msg = lr_sched_sweep.run_case(case)
    assert msg is None, msg


def test_every_lr_scheduler_swept():
    cases = collections.Counter(c[0] for c in lr_sched_sweep.CASES)
    assert set(cases) == lr_sched_sweep.classes()
    assert min(cases.values()) >= 2


def main():
    """Print optimizer: cases, equal, documented, differing; then the undocumented."""
    print(f"{'optimizer':12s} cases equal documented differing")
    totals, lines = [0, 0, 0], []
    for name in NAMES:
        rows = _results(name)
        n = sum(1 for c in harness.CASES if c[0] == name)
        k = sum(1 for r in rows if r[2] is not None)
        u = len(rows) - k
        totals = [totals[0] + n, totals[1] + k, totals[2] + u]
        print(f"{name:12s} {n:5d} {n - k - u:5d} {k:10d} {u:9d}")
        lines += [f"  {cid}: {msg[:200]}" for cid, msg, known in rows if known is None]
    n, k, u = totals
    print(f"{'total':12s} {n:5d} {n - k - u:5d} {k:10d} {u:9d}")
    bad = [f"  {n} {d}" for n, d, make in ERRORS if not _error_known(n, d) and
           harness.error_outcome(make, torch) != harness.error_outcome(make, ember)]
    print(f"error inputs: {len(ERRORS)}, undocumented differences: {len(bad)}")
    sched = [lr_sched_sweep.case_id(c) for c in lr_sched_sweep.CASES
             if lr_sched_sweep.run_case(c)]
    print(f"scheduler cases: {len(lr_sched_sweep.CASES)}, differing: {len(sched)}")
    print("\n".join(lines + bad + sched))
    return 1 if u or bad or sched else 0


if __name__ == "__main__":
    sys.exit(main())
