"""sort/argsort/msort/topk/kthvalue against torch: values, indices, gradients, second
gradients, ties, NaN, dtypes, 0-d and empty inputs, errors."""
import numpy as np
from oracle import Case, cases, check, check_raises


def _ties(rng):
    return [rng.integers(0, 3, size=(4, 7)).astype(np.float64)]


def _with_nan(rng):
    a = rng.standard_normal((3, 6))
    a[0, 2] = a[2, 0] = a[2, 5] = np.nan
    return [a]


SORTS = [
    Case("sort_last", lambda m, x: m.sort(x), [(4, 5)]),
    Case("sort_dim0_desc", lambda m, x: m.sort(x, dim=0, descending=True), [(4, 5)]),
    Case("sort_3d_mid", lambda m, x: x.sort(1), [(2, 5, 3)]),
    Case("sort_ties_stable", lambda m, x: m.sort(x, stable=True), _ties, grad=False),
    Case("sort_ties_desc", lambda m, x: m.sort(x, descending=True), _ties, grad=False),
    Case("sort_nan", lambda m, x: m.sort(x), _with_nan, grad=False),
    Case("sort_nan_desc", lambda m, x: m.sort(x, descending=True), _with_nan, grad=False),
    Case("sort_int", lambda m, x: m.sort((x * 10).long(), dim=0), [(6, 2)], grad=False),
    Case("sort_bool", lambda m, x: m.sort(x > 0, descending=True, stable=True), [(9,)],
         grad=False),
    Case("sort_0d", lambda m, x: m.sort(x), [()]),
    Case("sort_empty", lambda m, x: m.sort(x), [(0, 3)], grad=False),
    Case("sort_f32", lambda m, x: m.sort(x), [(3, 4)], dtype=np.float32),
    Case("argsort", lambda m, x: m.argsort(x, dim=1, descending=True), [(3, 6)], grad=False),
    Case("argsort_method_ties", lambda m, x: x.argsort(stable=True), _ties, grad=False),
    Case("msort", lambda m, x: m.msort(x), [(5, 3)]),
    Case("topk", lambda m, x: m.topk(x, 3), [(4, 8)]),
    Case("topk_smallest_dim0", lambda m, x: x.topk(2, dim=0, largest=False), [(5, 3)]),
    Case("topk_k0", lambda m, x: m.topk(x, 0), [(2, 4)], grad=False),
    Case("topk_all", lambda m, x: m.topk(x, 6), [(6,)]),
    Case("kthvalue", lambda m, x: m.kthvalue(x, 2), [(3, 5)]),
    Case("kthvalue_keepdim", lambda m, x: x.kthvalue(4, dim=0, keepdim=True), [(5, 3)]),
    Case("sort_composed", lambda m, x: (m.sort(x).values * m.arange(5.0)).cumsum(-1),
         [(3, 5)]),
]


@cases(SORTS)
def test_sorting(case):
    check(case)


def test_named_fields_and_repr():
    import torch

    import ember
    for m in (ember, torch):
        r = m.sort(m.tensor([3.0, 1.0]))
        assert r.values.tolist() == [1.0, 3.0] and r.indices.tolist() == [1, 0]
        assert repr(r).startswith("torch.return_types.sort(")
        v, i = m.topk(m.tensor([1.0, 5.0, 2.0]), 1)
        assert (v.item(), i.item()) == (5.0, 1)


def test_sorting_errors():
    check_raises(lambda m, x: m.topk(x, 5), np.zeros(3))
    check_raises(lambda m, x: m.topk(x, -1), np.zeros(3))
    check_raises(lambda m, x: m.sort(x, dim=2), np.zeros((2, 2)))
    check_raises(lambda m, x: m.kthvalue(x, 0), np.zeros(3))
    check_raises(lambda m, x: m.kthvalue(x, 4), np.zeros(3))
    check_raises(lambda m, x: m.sort([1, 2]), np.zeros(3))
