"""Calls whose result follows their input's values or sizes through Python (the distinct
values, index rows built for a length, a path chosen by the number of rows, a loop over
reflectors, an inverse's info, a broadcast batch, a mask's broadcast, exponents): a trace
and a compiled graph record each as one call, so another input gives its own answer (each
replayed the example's answer before, silently). A saved trace calls the aten operator
PyTorch's trace records, run by the real ``torch.jit.load`` and by ``ember.jit.load``;
ONNX writes an operator where one exists and refuses the call by name where none does.
"""
import io
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from opdb_trace import Call

import ember
import ember.onnx


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _same(got, want, exact=True):
    got, want = _tuple(got), _tuple(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.detach().numpy() if hasattr(g, "detach") else np.asarray(g)
        w = w.detach().numpy()
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _replays(fn, torch_fn, example, others, exact=True):
    """``fn`` traced at ``example`` (no TracerWarning), saved and read by torch.jit.load
    and ember.jit.load, and compiled: each gives eager's answer at every input of
    ``others`` (torch's eager answer for torch.jit.load)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ember.jit.TracerWarning)
        traced = ember.jit.trace(Call(fn), example, check_trace=False)
    buf = io.BytesIO()
    ember.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    buf.seek(0)
    ember_loaded = ember.jit.load(buf)
    compiled = ember.compile(fn)
    compiled(*example)
    for xs in others:
        want = fn(*xs)
        for got in (traced(*xs), ember_loaded(*xs), compiled(*xs)):
            _same(got, want, exact)
        t_xs = [torch.tensor(x.numpy()) for x in xs]
        _same(loaded(*t_xs), torch_fn(*t_xs), exact)


def _session(fn, example):
    names = [f"x{i}" for i in range(len(example))]
    buf = io.BytesIO()
    ember.onnx.export(Call(fn), example, buf, input_names=names,
                      dynamic_axes={n: list(range(x.dim())) for n, x in zip(names, example)})
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    return lambda *xs: sess.run(None, {n: x.numpy() for n, x in zip(names, xs)})


def _refused(fn, example, name):
    with pytest.raises(ember.onnx.UnsupportedOnnxExport, match=name):
        ember.onnx.export(Call(fn), example, io.BytesIO())


_V = ember.tensor([3., 1., 3., 2.])
_OTHERS = [(ember.tensor([5., 5., 7., 2.]),), (ember.tensor([1., 2., 2., 4., 4., 1.]),)]


@pytest.mark.parametrize("inverse,counts", [(False, False), (True, True), (False, True),
                                            (True, False)])
def test_unique_finds_the_distinct_values_of_each_input(inverse, counts):
    """Traced at [3, 1, 3, 2], unique of [5, 5, 7, 2] gave [1, 2, 3] (the example's)."""
    def fn(x):
        return ember.unique(x, return_inverse=inverse, return_counts=counts)

    def torch_fn(x):
        return torch.unique(x, return_inverse=inverse, return_counts=counts)
    _replays(fn, torch_fn, (_V,), _OTHERS)
    run = _session(fn, (_V,))
    for (x,) in _OTHERS:
        _same(run(x), fn(x))


def test_unique_along_a_dim_and_its_saved_call():
    def fn(x):
        return ember.unique(x, dim=0, return_inverse=True)
    example = (ember.tensor([[1., 2.], [1., 2.], [0., 3.]]),)
    others = [(ember.tensor([[5., 2.], [1., 2.], [5., 2.], [0., 0.]]),)]
    _replays(fn, lambda x: torch.unique(x, dim=0, return_inverse=True), example, others)
    code = ember.jit.trace(Call(fn), example, check_trace=False).code
    assert "torch.unique_dim(" in code
    assert "torch._unique2(" in ember.jit.trace(Call(ember.unique), (_V,)).code


@pytest.mark.parametrize("dim", [None, 0])
def test_unique_consecutive_finds_the_runs_of_each_input(dim):
    def fn(x):
        return ember.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)

    def torch_fn(x):
        return torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)
    _replays(fn, torch_fn, (_V,), _OTHERS)
    _refused(fn, (_V,), "unique_consecutive")


@pytest.mark.parametrize("r,with_replacement", [(2, False), (3, True)])
def test_combinations_follow_the_length(r, with_replacement):
    """Traced at 4 elements, combinations of 6 gave the example's 6 rows."""
    def fn(x):
        return ember.combinations(x, r, with_replacement)
    _replays(fn, lambda x: torch.combinations(x, r, with_replacement), (_V,), _OTHERS)
    _refused(fn, (_V,), "combinations")


def test_corrcoef_of_one_row_after_a_trace_at_two():
    """One variable takes a 0-d path: a trace at two rows gave a matrix of NaNs and ones
    at one row (now 1., as eager)."""
    g = np.random.default_rng(0)
    x2, x1 = (ember.tensor(g.standard_normal(s).astype(np.float32)) for s in ((2, 5), (1, 5)))
    x3 = ember.tensor(g.standard_normal((3, 7)).astype(np.float32))
    _replays(ember.corrcoef, torch.corrcoef, (x2,), [(x1,), (x3,)], exact=False)
    _refused(ember.corrcoef, (x2,), "corrcoef")


def _randn(*shape, seed=0):
    return ember.tensor(np.random.default_rng(seed + sum(shape)).standard_normal(shape)
                        .astype(np.float32))


def test_householder_product_applies_every_reflector():
    """Traced with two reflectors, a call with three applied two (silently)."""
    example = (_randn(4, 3), _randn(2))
    others = [(_randn(5, 3), _randn(3)), (_randn(2, 4, 2), _randn(2, 1))]
    _replays(ember.linalg.householder_product, torch.linalg.householder_product, example,
             others, exact=False)
    _refused(ember.linalg.householder_product, example, "householder_product")


@pytest.mark.parametrize("left,transpose", [(True, False), (False, True)])
def test_ormqr_applies_every_reflector(left, transpose):
    def fn(a, tau, c):
        return ember.ormqr(a, tau, c, left, transpose)

    def torch_fn(a, tau, c):
        return torch.ormqr(a, tau, c, left, transpose)
    example = (_randn(4, 2), _randn(2), _randn(4, 2) if left else _randn(2, 4))
    others = [(_randn(5, 3), _randn(3), _randn(5, 5))]
    _replays(fn, torch_fn, example, others, exact=False)


def test_inv_ex_reports_a_singular_matrix():
    """Traced at an invertible matrix, a singular one gave info 0 (and no NaNs)."""
    singular = ember.tensor([[1., 2.], [2., 4.]])
    _replays(ember.linalg.inv_ex, torch.linalg.inv_ex, (_randn(2, 2),),
             [(singular,), (_randn(3, 3),)], exact=False)
    info = ember.jit.trace(Call(ember.linalg.inv_ex), (_randn(2, 2),))(singular)[1]
    assert int(info) == 2


def test_triangular_solve_broadcasts_each_batch():
    def fn(b, a):
        return ember.triangular_solve(b, a, False, True)

    def torch_fn(b, a):
        return torch.triangular_solve(b, a, False, True)
    eye = ember.eye
    example = (_randn(3, 2), _randn(3, 3) + 3 * eye(3))
    others = [(_randn(2, 4, 1), _randn(4, 4) + 3 * eye(4)),
              (_randn(2, 2), _randn(3, 2, 2) + 3 * eye(2))]
    _replays(fn, torch_fn, example, others, exact=False)


@pytest.mark.parametrize("op", ["var", "std", "sum", "mean"])
def test_masked_reduction_broadcasts_the_mask_of_each_call(op):
    """Traced with a full mask, a broadcasting mask counted its own elements (var of 125
    elements divided by 24 kept of 25)."""
    def fn(x, mask):
        return getattr(ember.masked, op)(x, mask=mask)
    g = np.random.default_rng(1)
    x = ember.tensor(g.standard_normal((5, 5, 5)).astype(np.float32))
    full = ember.tensor(g.random((5, 5, 5)) > 0.3)
    narrow = ember.tensor(g.random((5, 5, 1)) > 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ember.jit.TracerWarning)
        traced = ember.jit.trace(Call(fn), (x, full), check_trace=False)
    _same(traced(x, narrow), fn(x, narrow), exact=False)
    _same(ember.compile(fn)(x, narrow), fn(x, narrow), exact=False)


def test_frexp_reads_each_input():
    """Traced at values near 1, frexp of values near 100 gave the example's exponents."""
    _replays(ember.frexp, torch.frexp, (_randn(3),),
             [(_randn(5) * 100,), (_randn(2, 2) * 1e-3,)])
    _refused(ember.frexp, (_randn(3),), "frexp")


@pytest.mark.parametrize("invert", [False, True])
def test_isin_compares_each_input(invert):
    """Traced at [1, 2, 3] in [2, 5], [5, 6, 2, 1] in [1, 6, 7] gave a TracerWarning and
    the example's answer."""
    def fn(a, b):
        return ember.isin(a, b, invert=invert)

    def torch_fn(a, b):
        return torch.isin(a, b, invert=invert)
    example = (ember.tensor([1, 2, 3]), ember.tensor([2, 5]))
    others = [(ember.tensor([5, 6, 2, 1]), ember.tensor([1, 6, 7])),
              (ember.tensor([[5, 6], [2, 1]]), ember.tensor([1]))]
    _replays(fn, torch_fn, example, others)
    run = _session(fn, example)
    _same(run(*others[0]), fn(*others[0]))


def test_isin_of_floats_and_a_number_exports():
    run = _session(lambda a, b: ember.isin(a, b), (_randn(2, 3), _randn(4)))
    a, b = ember.tensor([[5., 6.], [2., 1.]]), ember.tensor([1., 6., 7.])
    _same(run(a, b), ember.isin(a, b))
    run = _session(lambda a: ember.isin(a, 2), (ember.tensor([1, 2, 3]),))
    a = ember.tensor([2, 2, 1, 0])
    _same(run(a), ember.isin(a, 2))


def test_unravel_index_is_recorded_as_divisions():
    """Traced at [1, 5], the coordinates of [11, -1, 0] were read outside the ops (a
    TracerWarning and the example's coordinates)."""
    def fn(i):
        return ember.unravel_index(i, (3, 4))
    others = [(ember.tensor([11, -1, 0]),), (ember.tensor([[3, 4], [7, 8]]),)]
    _replays(fn, lambda i: torch.unravel_index(i, (3, 4)), (ember.tensor([1, 5]),), others)
    run = _session(fn, (ember.tensor([1, 5]),))
    _same(run(*others[0]), fn(*others[0]))


def test_floor_divide_of_integers_exports_and_of_floats_is_refused():
    def fn(a, b):
        return ember.floor_divide(a, b)
    a, b = ember.tensor([7, -7, 9, -1, 0]), ember.tensor([2, 2, -4, 3, 5])
    _same(_session(fn, (a, b))(a, b), fn(a, b))
    _refused(fn, (_randn(3), _randn(3)), "floor_divide")


@pytest.mark.parametrize("m,n,k,left,other", [(4, 2, 1, True, (4, 3)), (4, 3, 2, True, (4, 2)),
                                              (4, 3, 2, False, (5, 4)), (3, 3, 2, True, (3, 3))])
def test_ormqr_refuses_fewer_reflectors_than_torch_does(m, n, k, left, other):
    """torch.ormqr takes one reflector per column of ``input`` (at most one per row of
    ``other``); ember's applied fewer and answered."""
    msg = f"must be equal to min\\(other.shape\\[{-2 if left else -1}\\], input.shape\\[-1\\]\\)"
    with pytest.raises(RuntimeError, match=msg):
        torch.ormqr(torch.randn(m, n), torch.randn(k), torch.randn(*other), left)
    with pytest.raises(RuntimeError, match=msg):
        ember.ormqr(_randn(m, n), _randn(k), _randn(*other), left)
