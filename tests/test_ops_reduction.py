"""Reductions, extrema, scans and softmax against torch: values, dtypes, shapes, first and
second gradients (contiguous and not), dims (negative, tuple, keepdim), 0-d and empty
inputs, ties and zeros, named results, and error types."""
import pickle

import numpy as np
import pytest
from oracle import Case, cases, check, check_raises

INF = float("inf")
S = (2, 3, 5)  # an odd shape: every dim a different size


def _ties(shape, k=3, dtype=np.float64):
    """Small integers as floats: many ties."""
    return lambda rng: [rng.integers(0, k, size=shape).astype(dtype)]


def _with(shape, values, dtype=np.float64):
    """Normal values with ``values`` ({flat index: value}) planted."""
    def make(rng):
        a = rng.standard_normal(shape).astype(dtype)
        for i, v in values.items():
            a.flat[i] = v
        return [a]
    return make


def _ints(shape, lo=-3, hi=4, dtype=np.int64):
    return lambda rng: [rng.integers(lo, hi, size=shape).astype(dtype)]


def _dims_cases(name, fn, dims=(None, 0, -1, (0, 2), (-1, -3)), shape=S, keepdims=(False, True),
                inputs=None, **kw):
    """One case per (dim, keepdim), on ``shape`` (or ``inputs``)."""
    out = []
    for d in dims:
        for k in keepdims:
            out.append(Case(f"{name}[dim={d},keepdim={k}]",
                            lambda m, x, d=d, k=k: fn(m, x, d, k), inputs or [shape], **kw))
    return out


def _dim_cases(name, fn, dims=(0, 1, -1), shape=S, keepdims=(False, True), **kw):
    """For ops taking a single int dim."""
    return _dims_cases(name, fn, dims, shape, keepdims, **kw)


def _kw_dim(d, k):
    return {"dim": d, "keepdim": k}


f32 = dict(dtype=np.float32)

SUMS = [
    *_dims_cases("sum", lambda m, x, d, k: m.sum(x, **_kw_dim(d, k))),
    *_dims_cases("sum_f32", lambda m, x, d, k: x.sum(**_kw_dim(d, k)), dims=(None, (1, -1)),
                 **f32),
    Case("sum_list_dim", lambda m, x: x.sum([0, 2]), [S]),
    Case("sum_empty_tuple", lambda m, x: x.sum(()), [S]),
    Case("sum_0d", lambda m, x: x.sum(), [()]),
    Case("sum_0d_dim", lambda m, x: m.sum(x, 0, True), [()]),
    Case("sum_0d_dim_neg", lambda m, x: m.sum(x, -1), [()]),
    Case("sum_dtype_f64", lambda m, x: x.sum(1, dtype=m.float64), [S], **f32),
    Case("sum_dtype_f32", lambda m, x: m.sum(x, dtype=m.float32), [S]),
    Case("sum_empty", lambda m, x: x.sum(), [(0, 3)]),
    Case("sum_empty_dim", lambda m, x: x.sum(0), [(0, 3)]),
    Case("sum_int", lambda m, x: x.sum(1), _ints(S), grad=False),
    Case("sum_int32", lambda m, x: x.int().sum(), _ints(S), grad=False),
    Case("sum_uint8", lambda m, x: x.to(m.uint8).sum(0), _ints(S, 0, 200), grad=False),
    Case("sum_bool", lambda m, x: (x > 0).sum((0, 1)), [S], grad=False),
    Case("sum_bool_dtype", lambda m, x: (x > 0).sum(dtype=m.bool), [S], grad=False),
    Case("sum_int_dtype_float", lambda m, x: x.sum(0, dtype=m.float32), _ints(S), grad=False),
    *_dims_cases("mean", lambda m, x, d, k: m.mean(x, **_kw_dim(d, k))),
    *_dims_cases("mean_f32", lambda m, x, d, k: x.mean(**_kw_dim(d, k)), dims=(None, -2), **f32),
    Case("mean_0d", lambda m, x: x.mean(), [()]),
    Case("mean_empty", lambda m, x: x.mean(), [(0, 3)]),
    Case("mean_empty_dim", lambda m, x: x.mean(0), [(0, 3)]),
    Case("mean_int_dtype", lambda m, x: x.mean(1, dtype=m.float64), _ints(S), grad=False),
    Case("mean_dtype_f64", lambda m, x: x.mean(dtype=m.float64), [S], **f32),
    *_dims_cases("nansum", lambda m, x, d, k: m.nansum(x, **_kw_dim(d, k)),
                 dims=(None, 1, (0, 2)), inputs=_with(S, {0: np.nan, 7: np.nan, 8: np.nan})),
    Case("nansum_int", lambda m, x: m.nansum(x.int(), 0), _ints(S), grad=False),
    Case("nansum_dtype", lambda m, x: m.nansum(x, dtype=m.float64), _with(S, {3: np.nan}), **f32),
    *_dims_cases("nanmean", lambda m, x, d, k: m.nanmean(x, **_kw_dim(d, k)),
                 dims=(None, 1, (0, 2)), inputs=_with(S, {0: np.nan, 7: np.nan, 8: np.nan})),
    Case("nanmean_all_nan_row", lambda m, x: x.nanmean(1),
         _with((2, 3), {0: np.nan, 1: np.nan, 2: np.nan})),
]

PRODS = [
    *_dims_cases("prod", lambda m, x, d, k: m.prod(x) if d is None else m.prod(x, d, k),
                 dims=(None, 0, -1), low=0.5, high=1.5),
    Case("prod_f32", lambda m, x: x.prod(1), [S], **f32),
    Case("prod_one_zero", lambda m, x: x.prod(), _with((3, 4), {5: 0.0})),
    Case("prod_two_zeros", lambda m, x: x.prod(), _with((3, 4), {5: 0.0, 9: 0.0})),
    Case("prod_three_zeros", lambda m, x: x.prod(), _with((3, 4), {0: 0.0, 5: 0.0, 9: 0.0})),
    Case("prod_dim_one_zero", lambda m, x: x.prod(1), _with((3, 4), {5: 0.0})),
    Case("prod_dim_zeros_mixed", lambda m, x: x.prod(-1, keepdim=True),
         _with((3, 4), {1: 0.0, 5: 0.0, 6: 0.0, 8: 0.0, 9: 0.0, 10: 0.0})),
    Case("prod_dim0_zeros", lambda m, x: x.prod(0), _with((3, 4), {1: 0.0, 5: 0.0, 2: 0.0})),
    Case("prod_3d_zeros", lambda m, x: x.prod(1), _with(S, {0: 0.0, 5: 0.0, 13: 0.0, 18: 0.0})),
    Case("prod_all_zero", lambda m, x: x.prod(0), _with((2, 2), {0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0})),
    Case("prod_0d", lambda m, x: x.prod(), [()]),
    Case("prod_0d_dim", lambda m, x: x.prod(0, True), [()]),
    Case("prod_empty", lambda m, x: x.prod(), [(0, 3)]),
    Case("prod_empty_dim", lambda m, x: x.prod(0), [(0, 3)]),
    Case("prod_int", lambda m, x: x.prod(1), _ints(S), grad=False),
    Case("prod_int32_full", lambda m, x: x.int().prod(), _ints((3, 3), 1, 3), grad=False),
    Case("prod_bool", lambda m, x: (x > -1).prod(0), [S], grad=False),
    Case("prod_dtype", lambda m, x: x.prod(1, dtype=m.float64), [S], **f32),
]

EXTREMA = [
    Case("max_all", lambda m, x: x.max(), [S]),
    Case("min_all", lambda m, x: m.min(x), [S]),
    Case("max_all_f32", lambda m, x: m.max(x), [S], **f32),
    Case("max_all_ties", lambda m, x: x.max(), _ties((3, 4))),
    Case("min_all_ties", lambda m, x: x.min(), _ties((3, 4))),
    Case("max_all_nan", lambda m, x: x.max(), _with((3, 4), {2: np.nan, 7: np.nan})),
    Case("max_0d", lambda m, x: x.max(), [()]),
    *_dim_cases("max_dim", lambda m, x, d, k: m.max(x, d, k)),
    *_dim_cases("min_dim", lambda m, x, d, k: x.min(dim=d, keepdim=k)),
    Case("max_dim_f32", lambda m, x: x.max(1), [S], **f32),
    Case("max_dim_ties", lambda m, x: x.max(1), _ties((4, 6))),
    Case("min_dim_ties", lambda m, x: x.min(0, True), _ties((4, 6))),
    Case("max_dim_nan", lambda m, x: x.max(1), _with((3, 4), {1: np.nan, 3: np.nan, 6: np.nan})),
    Case("min_dim_nan", lambda m, x: x.min(1), _with((3, 4), {1: np.nan, 3: np.nan, 6: np.nan})),
    Case("max_0d_dim", lambda m, x: x.max(0), [()]),
    Case("max_0d_dim_keep", lambda m, x: m.min(x, -1, True), [()]),
    Case("max_empty_other_dim", lambda m, x: x.max(1), [(0, 3)]),
    Case("max_values_field", lambda m, x: x.max(1).values * 2, [S]),
    Case("max_indices_field", lambda m, x: x.max(1).indices, [S], grad=False),
    Case("max_int", lambda m, x: (x.max(), x.max(0)), _ints(S), grad=False),
    Case("max_bool", lambda m, x: ((x > 0).max(), (x > 0).min(1)), [S], grad=False),
    Case("max_binary", lambda m, a, b: m.max(a, b), [(3, 4), (4,)]),
    Case("min_binary", lambda m, a, b: a.min(b), [(3, 4), (3, 1)]),
    *_dims_cases("amax", lambda m, x, d, k: m.amax(x, () if d is None else d, k)),
    *_dims_cases("amin", lambda m, x, d, k: x.amin(() if d is None else d, k),
                 dims=(None, 1, (0, 2))),
    Case("amax_default", lambda m, x: m.amax(x), [S]),
    Case("amax_f32", lambda m, x: x.amax((0, 1)), [S], **f32),
    Case("amax_ties", lambda m, x: x.amax(1), _ties((4, 6))),
    Case("amin_ties_tuple", lambda m, x: x.amin((0, 2), keepdim=True), _ties(S)),
    Case("amax_all_ties", lambda m, x: x.amax(), _ties((3, 4), 2)),
    Case("amax_nan", lambda m, x: x.amax(1), _with((3, 4), {1: np.nan})),
    Case("amax_0d", lambda m, x: (x.amax(), x.amin(0)), [()]),
    Case("amax_empty_other_dim", lambda m, x: x.amax(1), [(0, 3)]),
    Case("amax_int", lambda m, x: x.int().amax(0), _ints(S), grad=False),
    *_dim_cases("argmax", lambda m, x, d, k: m.argmax(x, d, k), grad=False),
    *_dim_cases("argmin", lambda m, x, d, k: x.argmin(d, keepdim=k), grad=False),
    Case("argmax_flat", lambda m, x: (x.argmax(), m.argmin(x)), [S], grad=False),
    Case("argmax_flat_keepdim", lambda m, x: (x.argmax(keepdim=True), x.argmin(None, True)), [S],
         grad=False),
    Case("argmax_ties", lambda m, x: (x.argmax(1), x.argmin(0), x.argmax()), _ties((4, 6)),
         grad=False),
    Case("argmax_nan", lambda m, x: (x.argmax(1), x.argmin(1)),
         _with((3, 4), {1: np.nan, 3: np.nan}), grad=False),
    Case("argmax_0d", lambda m, x: (x.argmax(), x.argmax(0), x.argmin(0, True)), [()],
         grad=False),
    Case("argmax_int", lambda m, x: x.argmax(1), _ints(S), grad=False),
    Case("aminmax", lambda m, x: m.aminmax(x), [S]),
    Case("aminmax_dim", lambda m, x: m.aminmax(x, dim=1), [S]),
    Case("aminmax_dim_keep", lambda m, x: x.aminmax(dim=-1, keepdim=True), [S]),
    Case("aminmax_ties", lambda m, x: m.aminmax(x, dim=0), _ties((4, 6))),
    Case("aminmax_0d", lambda m, x: m.aminmax(x), [()]),
    Case("median_all", lambda m, x: x.median(), [S]),
    Case("median_all_even", lambda m, x: m.median(x), [(4, 6)]),
    Case("median_all_ties", lambda m, x: x.median(), _ties((3, 5))),
    Case("median_all_nan", lambda m, x: x.median(), _with((3, 4), {4: np.nan})),
    Case("median_0d", lambda m, x: (x.median(), x.median(0)), [()]),
    Case("median_empty", lambda m, x: x.median(), [(0,)]),
    Case("median_int", lambda m, x: (x.median(), x.median(1).values), _ints(S), grad=False),
    *_dim_cases("median_dim", lambda m, x, d, k: m.median(x, d, k)),
    Case("median_dim_f32", lambda m, x: x.median(-1), [(3, 4)], **f32),
    Case("median_dim_nan", lambda m, x: x.median(1), _with((3, 4), {1: np.nan, 3: np.nan})),
    Case("nanmedian_all", lambda m, x: x.nanmedian(), _with((3, 4), {1: np.nan, 3: np.nan})),
    Case("nanmedian_dim", lambda m, x: m.nanmedian(x, 1),
         _with((3, 5), {1: np.nan, 3: np.nan, 8: np.nan, 9: np.nan, 10: np.nan, 11: np.nan})),
    # an all-NaN slice: NaN (PyTorch's index there is an artefact of its selection kernel)
    Case("nanmedian_all_nan_row", lambda m, x: m.nanmedian(x, 1).values,
         _with((2, 3), {0: np.nan, 1: np.nan, 2: np.nan})),
    Case("nanmedian_dim_keep", lambda m, x: x.nanmedian(0, True), _with((5, 4), {1: np.nan})),
    Case("mode", lambda m, x: m.mode(x), _ties((4, 7))),
    Case("mode_dim0_keep", lambda m, x: x.mode(0, True), _ties((7, 4), 4)),
    Case("mode_0d", lambda m, x: x.mode(), [()]),
    Case("mode_int", lambda m, x: x.mode(1), _ints((3, 8), 0, 3), grad=False),
]

STATS = [
    *_dims_cases("var", lambda m, x, d, k: m.var(x, d, keepdim=k)),
    *_dims_cases("std", lambda m, x, d, k: x.std(d, keepdim=k)),
    *_dims_cases("std_f32", lambda m, x, d, k: x.std(d, keepdim=k), dims=(None, (0, 1)), **f32),
    Case("var_unbiased_false", lambda m, x: m.var(x, 1, unbiased=False), [S]),
    Case("var_unbiased_positional", lambda m, x: (m.var(x, False), x.var(0, True, True)), [S]),
    Case("std_unbiased_positional", lambda m, x: (m.std(x, False), x.std(-1, False, True)), [S]),
    Case("var_correction", lambda m, x: m.var(x, (0, 2), correction=2), [S]),
    Case("std_correction_float", lambda m, x: x.std(1, correction=1.5), [S]),
    Case("std_correction_0", lambda m, x: x.std(correction=0), [S]),
    Case("var_too_few", lambda m, x: (x.var(0), x.var(correction=7)), [(1, 3)], gradgrad=False),
    Case("std_constant_rows", lambda m, x: (x * 0 + 1).std(1) + x.std(1),
         lambda rng: [np.repeat(rng.standard_normal((3, 1)), 4, axis=1)]),
    Case("std_zero", lambda m, x: x.std(1),
         _with((2, 3), {0: 1.0, 1: 1.0, 2: 1.0})),
    Case("var_0d", lambda m, x: (x.var(correction=0), x.std(0, correction=0)), [()]),
    Case("var_empty", lambda m, x: x.var(), [(0,)], grad=False),
    Case("var_mean", lambda m, x: m.var_mean(x, 1), [S]),
    Case("var_mean_keep", lambda m, x: m.var_mean(x, (0, 2), keepdim=True, correction=0), [S]),
    Case("std_mean", lambda m, x: m.std_mean(x), [S]),
    Case("std_mean_dim", lambda m, x: m.std_mean(x, -1, True), [S], **f32),
    *_dims_cases("logsumexp", lambda m, x, d, k: m.logsumexp(x, d, k),
                 dims=((0, 1, 2), 0, -1, (0, 2))),
    Case("logsumexp_f32", lambda m, x: x.logsumexp(1), [S], **f32),
    Case("logsumexp_big", lambda m, x: m.logsumexp(x * 1000, 1), [(3, 4)]),
    Case("logsumexp_f32_big", lambda m, x: m.logsumexp(x * 100, 0), [(3, 4)], **f32),
    Case("logsumexp_neginf", lambda m, x: m.logsumexp(x, 1),
         _with((3, 4), {0: -INF, 1: -INF, 2: -INF, 3: -INF, 5: -INF}), gradgrad=False),
    Case("logsumexp_inf", lambda m, x: m.logsumexp(x, 1), _with((2, 3), {1: INF}), grad=False),
    Case("logsumexp_0d", lambda m, x: x.logsumexp(0), [()]),
    Case("logsumexp_empty", lambda m, x: (m.logsumexp(x, 0), m.logsumexp(x, 1)), [(0, 3)]),
    Case("logsumexp_int", lambda m, x: m.logsumexp(x, 1), _ints(S), grad=False),
]

NORMS = [
    *[Case(f"norm_p{p}_dim{d}_k{k}", lambda m, x, p=p, d=d, k=k: m.norm(x, p, d, k), [S])
      for p in (2, 1, 3, 0.5, 1.5, -1, INF, -INF, 0) for d, k in ((None, False), (1, True),
                                                                  ((0, 2), False))],
    Case("norm_default", lambda m, x: (x.norm(), m.norm(x, dim=1)), [S]),
    Case("norm_fro", lambda m, x: (m.norm(x, "fro"), x.norm("fro", (0, 1), True)), [S]),
    Case("norm_none_p", lambda m, x: m.norm(x, None, 0), [S]),
    Case("norm_f32", lambda m, x: (x.norm(), x.norm(1, 0), x.norm(INF, 1)), [S], **f32),
    Case("norm_dtype", lambda m, x: m.norm(x, dtype=m.float64), [S], **f32),
    *[Case(f"norm_zero_vector_p{p}", lambda m, x, p=p: m.norm(x * 0, p), [(4,)])
      for p in (2, 1, 3, 0.5, 1.5, INF, -1)],
    Case("norm_zero_row", lambda m, x: m.norm(x, 2, 1), _with((3, 4), {4: 0, 5: 0, 6: 0, 7: 0})),
    Case("norm_zero_row_p3", lambda m, x: m.norm(x, 3, 1),
         _with((3, 4), {4: 0, 5: 0, 6: 0, 7: 0})),
    Case("norm_inf_ties", lambda m, x: m.norm(x - 1, INF, 1), _ties((3, 5))),
    Case("norm_0d", lambda m, x: (x.norm(), x.norm(1), x.norm(INF)), [()]),
    Case("norm_empty", lambda m, x: (x.norm(), x.norm(1, 0)), [(0, 3)]),
]

SCANS = [
    *_dim_cases("cumsum", lambda m, x, d, k: m.cumsum(x, d), keepdims=(False,)),
    Case("cumsum_f32", lambda m, x: x.cumsum(-1), [S], **f32),
    Case("cumsum_dtype", lambda m, x: x.cumsum(1, dtype=m.float64), [S], **f32),
    Case("cumsum_int", lambda m, x: (x.cumsum(0), x.int().cumsum(1)), _ints(S), grad=False),
    Case("cumsum_bool", lambda m, x: (x > 0).cumsum(1), [S], grad=False),
    Case("cumsum_0d", lambda m, x: x.cumsum(0), [()]),
    Case("cumsum_empty", lambda m, x: x.cumsum(0), [(0, 3)]),
    *_dim_cases("cumprod", lambda m, x, d, k: m.cumprod(x, d), keepdims=(False,),
                low=0.5, high=1.5),
    Case("cumprod_f32", lambda m, x: x.cumprod(1), [(3, 4)], **f32),
    Case("cumprod_one_zero", lambda m, x: x.cumprod(0), _with((6,), {2: 0.0})),
    Case("cumprod_two_zeros", lambda m, x: x.cumprod(0), _with((7,), {1: 0.0, 4: 0.0})),
    Case("cumprod_first_zero", lambda m, x: x.cumprod(-1), _with((2, 5), {0: 0.0, 9: 0.0})),
    Case("cumprod_zeros_dim0", lambda m, x: x.cumprod(0), _with((4, 3), {0: 0.0, 4: 0.0, 7: 0.0})),
    Case("cumprod_zeros_3d", lambda m, x: x.cumprod(1), _with(S, {2: 0.0, 8: 0.0, 17: 0.0})),
    Case("cumprod_zeros_no_gradgrad", lambda m, x: x.cumprod(1),
         _with((3, 6), {1: 0.0, 4: 0.0, 8: 0.0, 13: 0.0, 14: 0.0}), gradgrad=False),
    Case("cumprod_dtype", lambda m, x: x.cumprod(1, dtype=m.float64), [(3, 4)], **f32),
    Case("cumprod_int", lambda m, x: x.cumprod(1), _ints(S), grad=False),
    Case("cumprod_0d", lambda m, x: x.cumprod(0), [()]),
    Case("cumprod_empty", lambda m, x: x.cumprod(1), [(0, 3)]),
    *_dim_cases("cummax", lambda m, x, d, k: m.cummax(x, d), keepdims=(False,)),
    *_dim_cases("cummin", lambda m, x, d, k: x.cummin(d), keepdims=(False,)),
    Case("cummax_ties", lambda m, x: x.cummax(1), _ties((3, 8))),
    Case("cummin_ties", lambda m, x: m.cummin(x, 0), _ties((8, 3))),
    Case("cummax_nan", lambda m, x: (x.cummax(1), x.cummin(1)),
         _with((2, 5), {1: np.nan, 3: np.nan, 7: np.nan})),
    Case("cummax_f32", lambda m, x: x.cummax(-1), [(3, 4)], **f32),
    Case("cummax_int", lambda m, x: (x.cummax(1), x.cummin(0)), _ints(S), grad=False),
    Case("cummax_0d", lambda m, x: (x.cummax(0), x.cummin(-1)), [()]),
    Case("cummax_empty", lambda m, x: x.cummax(0), [(0, 3)]),
    Case("cummax_fields", lambda m, x: x.cummax(1).values + x.cummin(1).indices, [(3, 4)]),
    *_dim_cases("logcumsumexp", lambda m, x, d, k: m.logcumsumexp(x, d), keepdims=(False,)),
    Case("logcumsumexp_f32", lambda m, x: x.logcumsumexp(1), [(3, 4)], **f32),
    Case("logcumsumexp_big", lambda m, x: m.logcumsumexp(x * 500, 0), [(5, 2)]),
    Case("logcumsumexp_0d", lambda m, x: x.logcumsumexp(0), [()]),
    Case("diff", lambda m, x: m.diff(x), [S]),
    Case("diff_n2_dim0", lambda m, x: x.diff(2, 0), [(5, 3)]),
    Case("diff_n_too_big", lambda m, x: x.diff(4), [(2, 3)]),
    Case("diff_n0", lambda m, x: x.diff(0), [(2, 3)]),
    Case("diff_int_append_float", lambda m, x, a: m.diff(x.long(), append=a),
         lambda rng: [rng.integers(0, 5, (3, 4)), rng.standard_normal((3, 1))], grad=False),
    Case("diff_prepend_append", lambda m, x, p, a: m.diff(x, dim=1, prepend=p, append=a),
         [(3, 4), (3, 2), (3, 1)]),
    Case("diff_int_bool", lambda m, x: (m.diff(x), m.diff(x > 0, dim=0)), _ints(S), grad=False),
]

SOFTMAX = [
    *_dim_cases("softmax", lambda m, x, d, k: m.softmax(x, d), keepdims=(False,)),
    *_dim_cases("log_softmax", lambda m, x, d, k: m.log_softmax(x, d), keepdims=(False,)),
    Case("softmax_method", lambda m, x: (x.softmax(-1), x.log_softmax(dim=0)), [(3, 4)]),
    Case("softmax_f32", lambda m, x: m.softmax(x, 1), [(3, 4)], **f32),
    Case("log_softmax_f32", lambda m, x: m.log_softmax(x, 1), [(3, 4)], **f32),
    Case("softmax_big", lambda m, x: (m.softmax(x * 1000, 1), m.log_softmax(x * 1000, 1)),
         [(3, 4)]),
    Case("softmax_dtype", lambda m, x: (m.softmax(x, 1, dtype=m.float64),
                                        m.log_softmax(x, 0, m.float64)), [(3, 4)], **f32),
    Case("softmax_int_dtype", lambda m, x: m.softmax(x, 1, dtype=m.float32), _ints((3, 4)),
         grad=False),
    Case("softmax_neginf", lambda m, x: m.softmax(x, 1), _with((2, 3), {0: -INF, 4: -INF}),
         gradgrad=False),
    Case("softmax_0d", lambda m, x: (m.softmax(x, 0), m.log_softmax(x, -1)), [()]),
    Case("softmax_empty", lambda m, x: m.softmax(x, 1), [(0, 3)]),
]

LOGICAL = [
    *_dims_cases("all", lambda m, x, d, k: m.all(x > -1, **_kw_dim(d, k)), grad=False),
    *_dims_cases("any", lambda m, x, d, k: (x > 1.5).any(**_kw_dim(d, k)), grad=False),
    Case("all_float", lambda m, x: (x.all(), m.any(x, 1)), _ints(S, 0, 3, np.float64), grad=False),
    Case("all_uint8", lambda m, x: (x.to(m.uint8).all(), x.to(m.uint8).any(1)), _ints(S, 0, 2),
         grad=False),
    Case("all_int", lambda m, x: (x.all(0), x.any()), _ints(S, 0, 2), grad=False),
    Case("all_empty", lambda m, x: (x.all(), x.any(), x.all(0)), [(0, 3)], grad=False),
    Case("all_0d", lambda m, x: (x.all(), x.any(0)), [()], grad=False),
    Case("count_nonzero", lambda m, x: (m.count_nonzero(x), x.count_nonzero(1),
                                        m.count_nonzero(x, (0, -1))), _ints(S, 0, 2),
         grad=False),
    Case("count_nonzero_0d", lambda m, x: (m.count_nonzero(x), m.count_nonzero(x, 0)), [()],
         grad=False),
]


@cases(SUMS)
def test_sums(case):
    check(case)


@cases(PRODS)
def test_prods(case):
    check(case)


@cases(EXTREMA)
def test_extrema(case):
    check(case)


@pytest.mark.filterwarnings("ignore:var.*degrees of freedom:UserWarning")
@cases(STATS)
def test_stats(case):
    check(case)


@cases(NORMS)
def test_norms(case):
    check(case)


@cases(SCANS)
def test_scans(case):
    check(case)


@cases(SOFTMAX)
def test_softmax(case):
    check(case)


@cases(LOGICAL)
def test_logical(case):
    check(case)


def _x(shape=(3, 4)):
    return np.random.default_rng(0).standard_normal(shape)


def _i(shape=(3, 4)):
    return np.random.default_rng(0).integers(0, 5, size=shape)


ERRORS = [
    ("sum_bad_dim", lambda m, x: x.sum(2), _x()),
    ("sum_bad_neg_dim", lambda m, x: m.sum(x, -3), _x()),
    ("sum_bad_tuple_dim", lambda m, x: x.sum((0, 5)), _x()),
    ("sum_repeated_dim", lambda m, x: x.sum((0, -2)), _x()),
    ("sum_0d_bad_dim", lambda m, x: x.sum(1), _x(())),
    ("mean_int", lambda m, x: x.mean(), _i()),
    ("mean_int_dim", lambda m, x: m.mean(x, 1), _i()),
    ("mean_bad_dim", lambda m, x: x.mean(3), _x()),
    ("nanmean_int", lambda m, x: m.nanmean(x), _i()),
    ("nansum_bad_dim", lambda m, x: m.nansum(x, 4), _x()),
    ("prod_bad_dim", lambda m, x: x.prod(2), _x()),
    ("prod_tuple_dim", lambda m, x: m.prod(x, (0, 1)), _x()),
    ("max_empty", lambda m, x: x.max(), _x((0, 3))),
    ("min_empty", lambda m, x: m.min(x), _x((0,))),
    ("max_empty_dim", lambda m, x: x.max(0), _x((0, 3))),
    ("max_bad_dim", lambda m, x: x.max(2), _x()),
    ("min_bad_dim", lambda m, x: x.min(-3), _x()),
    ("max_tuple_dim", lambda m, x: m.max(x, (0, 1)), _x()),
    ("amax_empty", lambda m, x: x.amax(), _x((0, 3))),
    ("amax_empty_dim", lambda m, x: x.amax(0), _x((0, 3))),
    ("amax_bad_dim", lambda m, x: m.amax(x, (0, 2)), _x()),
    ("amin_empty", lambda m, x: m.amin(x), _x((0,))),
    ("argmax_empty", lambda m, x: x.argmax(), _x((0, 3))),
    ("argmax_empty_dim", lambda m, x: x.argmax(0), _x((0, 3))),
    ("argmax_bad_dim", lambda m, x: x.argmax(2), _x()),
    ("aminmax_empty", lambda m, x: m.aminmax(x), _x((0, 3))),
    ("median_empty_dim", lambda m, x: x.median(0), _x((0, 3))),
    ("median_bad_dim", lambda m, x: x.median(2), _x()),
    ("var_int", lambda m, x: x.var(), _i()),
    ("std_int", lambda m, x: m.std(x, 1), _i()),
    ("var_bad_dim", lambda m, x: x.var(5), _x()),
    ("std_bad_tuple_dim", lambda m, x: x.std((0, 9)), _x()),
    ("norm_int", lambda m, x: x.norm(), _i()),
    ("norm_bad_dim", lambda m, x: m.norm(x, 2, 3), _x()),
    ("norm_inf_empty", lambda m, x: m.norm(x, INF), _x((0, 3))),
    ("norm_fro_3_dims", lambda m, x: m.norm(x, "fro", (0, 1, 2)), _x((2, 3, 4))),
    ("logsumexp_no_dim", lambda m, x: m.logsumexp(x), _x()),
    ("logsumexp_none_dim", lambda m, x: m.logsumexp(x, None), _x()),
    ("logsumexp_bad_dim", lambda m, x: m.logsumexp(x, 2), _x()),
    ("cumsum_bad_dim", lambda m, x: x.cumsum(2), _x()),
    ("cumsum_no_dim", lambda m, x: m.cumsum(x), _x()),
    ("cumprod_bad_dim", lambda m, x: x.cumprod(-3), _x()),
    ("cummax_bad_dim", lambda m, x: x.cummax(2), _x()),
    ("logcumsumexp_int", lambda m, x: m.logcumsumexp(x, 0), _i()),
    ("softmax_bad_dim", lambda m, x: m.softmax(x, 2), _x()),
    ("softmax_int", lambda m, x: m.softmax(x, 0), _i()),
    ("log_softmax_int", lambda m, x: m.log_softmax(x, 1), _i()),
    ("softmax_no_dim", lambda m, x: m.softmax(x), _x()),
    ("all_bad_dim", lambda m, x: m.all(x, 2), _x()),
    ("count_nonzero_bad_dim", lambda m, x: m.count_nonzero(x, 2), _x()),
    ("diff_0d", lambda m, x: m.diff(x), _x(())),
    ("diff_negative_n", lambda m, x: m.diff(x, -1), _x()),
    ("diff_prepend_0d", lambda m, x: m.diff(x, prepend=x[0, 0]), _x()),
    ("diff_append_number", lambda m, x: m.diff(x, append=1.0), _x()),
    ("diff_append_bad_shape", lambda m, x: m.diff(x, dim=0, append=x[:, :1]), _x()),
]


@pytest.mark.parametrize("name,fn,arr", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, arr):
    check_raises(fn, arr)


def test_norm_nuc():
    import ember
    # the nuclear norm of the identity is its trace (more cases: tests/test_ops_new.py)
    assert ember.norm(ember.eye(3), "nuc").item() == pytest.approx(3.0)


def test_named_results_behave_like_torch():
    import torch

    import ember
    a = np.random.default_rng(0).standard_normal((3, 4))
    e, t = ember.tensor(a), torch.tensor(a)
    for name, ef, tf in [("max", lambda x: x.max(1), lambda x: x.max(1)),
                         ("min", lambda x: ember.min(x, 0), lambda x: torch.min(x, 0)),
                         ("median", lambda x: x.median(1), lambda x: x.median(1)),
                         ("mode", lambda x: x.mode(), lambda x: x.mode()),
                         ("cummax", lambda x: x.cummax(1), lambda x: x.cummax(1)),
                         ("cummin", lambda x: x.cummin(0), lambda x: x.cummin(0))]:
        er, tr = ef(e), tf(t)
        assert isinstance(er, tuple) and len(er) == 2
        assert type(er).__name__ == type(tr).__name__ == name
        assert er._fields == ("values", "indices")
        values, indices = er
        assert values is er.values and indices is er.indices and er[0] is values
        np.testing.assert_allclose(values.numpy(), tr.values.numpy())
        np.testing.assert_array_equal(indices.numpy(), tr.indices.numpy())
        # the tensors print as torch's do, so the whole repr matches (up to the dtype's module)
        assert repr(er).replace("ember.", "torch.") == repr(tr)
        again = pickle.loads(pickle.dumps(er))
        assert type(again) is type(er)
        np.testing.assert_array_equal(again.indices.numpy(), er.indices.numpy())
    mm = ember.aminmax(e)
    assert mm._fields == ("min", "max") and repr(mm).startswith("torch.return_types.aminmax(")
    assert isinstance(ember.var_mean(e), tuple) and len(ember.std_mean(e, 1)) == 2


def test_gradient_node_names():
    import ember
    x = ember.ones(2, 3, requires_grad=True)
    names = {
        "SumBackward0": x.sum(), "MeanBackward1": x.mean(1), "ProdBackward0": x.prod(),
        "MaxBackward0": x.max(1).values, "MaxBackward1": x.max(), "AmaxBackward0": x.amax(),
        "StdBackward0": x.std(), "VarBackward0": x.var(1), "CumsumBackward0": x.cumsum(1),
        "LogsumexpBackward0": x.logsumexp(1), "SoftmaxBackward0": x.softmax(1),
        "LogSoftmaxBackward0": x.log_softmax(0), "LinalgVectorNormBackward0": x.norm(),
        "CummaxBackward0": x.cummax(1).values,
    }
    for name, y in names.items():
        assert y.grad_fn.name() == name


def test_cumsum_inplace():
    import torch

    import ember
    a = np.random.default_rng(0).standard_normal((3, 4))
    e, t = ember.tensor(a), torch.tensor(a)
    assert e.cumsum_(1) is e and t.cumsum_(1) is t
    e.cumprod_(0)
    t.cumprod_(0)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)


def test_prod_and_cumprod_zero_gradients_exact():
    """One zero: only it gets a gradient (the product of the others); two: none."""
    import ember
    x = ember.tensor([2.0, 0.0, 3.0, 4.0], requires_grad=True)
    x.prod().backward()
    assert x.grad.tolist() == [0.0, 24.0, 0.0, 0.0]
    x = ember.tensor([2.0, 0.0, 3.0, 0.0], requires_grad=True)
    x.prod().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 0.0]
    x = ember.tensor([2.0, 0.0, 3.0], requires_grad=True)
    x.cumprod(0).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0 + 6.0, 0.0]


def test_indices_written_in_place_do_not_change_the_gradient():
    import ember
    a = np.random.default_rng(0).standard_normal((3, 4))
    x = ember.tensor(a, requires_grad=True)
    values, indices = x.max(1)
    expected = indices.clone()
    indices.add_(1)
    cv, ci = x.cummax(1)
    ci.zero_() if hasattr(ci, "zero_") else ci.mul_(0)
    (values.sum() + cv.sum()).backward()
    ref = ember.tensor(a, requires_grad=True)
    (ref.max(1).values.sum() + ref.cummax(1).values.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), ref.grad.numpy())
    assert x.grad.numpy()[np.arange(3), expected.numpy()].min() >= 1


@pytest.mark.parametrize("op", ["max", "prod", "std", "norm", "amax", "logsumexp", "cumprod",
                                "softmax", "median"])
def test_input_modified_in_place_after_use_raises(op):
    import ember
    fns = {"max": lambda x: x.max(), "prod": lambda x: x.prod(), "std": lambda x: x.std(),
           "norm": lambda x: x.norm(), "amax": lambda x: x.amax(1),
           "logsumexp": lambda x: x.logsumexp(1), "cumprod": lambda x: x.cumprod(1),
           "softmax": lambda x: x.softmax(1) * x, "median": lambda x: x.median()}
    leaf = ember.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    x = leaf * 1
    y = fns[op](x)
    x.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "max", "amax", "std", "logsumexp",
                                "cumsum", "median", "all"])
def test_out_is_written_not_ignored(op):
    import torch

    import ember
    args = {"logsumexp": (1,), "cumsum": (1,), "max": (1,), "median": (1,), "prod": (1,),
            "sum": (1,), "mean": (1,), "amax": (1,), "std": (1,), "all": (1,)}
    res = []
    for m in (ember, torch):
        x = m.ones(2, 3)
        if op == "all":
            x = x.bool()
        outs = (m.empty(0), m.empty(0, dtype=m.long)) if op in ("max", "median") else \
            m.empty(0, dtype=x.dtype)
        r = getattr(m, op)(x, *args.get(op, ()), out=outs)
        first = r[0] if isinstance(outs, tuple) else r
        assert first is (outs[0] if isinstance(outs, tuple) else outs)
        res.append(first.tolist())
    assert res[0] == res[1]
