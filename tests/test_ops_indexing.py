"""Indexing ops against torch: getitem/setitem (basic, advanced, mixed), in-place writes
through views, gather/scatter, index_*, masked ops, take, nonzero; values, dtypes,
gradients, second gradients, non-contiguous inputs, errors."""
import warnings

import numpy as np
import pytest
from oracle import Case, cases, check, check_raises

import ember


def _with(shape, *extra):
    """A float input of ``shape`` followed by fixed (index) arrays."""
    def make(rng):
        return [rng.standard_normal(shape)] + [np.asarray(e) for e in extra]
    return make


def _t(m, v):
    return m.tensor(v)


GETITEM = [
    Case("int", lambda m, x: x[1], [(3, 4)]),
    Case("int_neg", lambda m, x: x[-1, -2], [(3, 4)]),
    Case("int_1d", lambda m, x: x[2] * 3, [(4,)]),
    Case("slice", lambda m, x: x[1:], [(3, 4)]),
    Case("slice_step", lambda m, x: x[::2, 1::2], [(5, 4)]),
    Case("slice_neg", lambda m, x: x[-2:, :-1], [(3, 4)]),
    Case("slice_clip", lambda m, x: x[1:100, -100:2], [(3, 4)]),
    Case("slice_empty", lambda m, x: x[2:1], [(3, 4)]),
    Case("none", lambda m, x: x[None, :, None], [(3, 4)]),
    Case("ellipsis", lambda m, x: x[..., 1], [(2, 3, 4)]),
    Case("ellipsis_mid", lambda m, x: x[0, ..., 1:], [(2, 3, 4)]),
    Case("ellipsis_only", lambda m, x: x[...], [(2, 3)]),
    Case("0d_ellipsis", lambda m, x: x[...] * 2, [()]),
    Case("0d_none", lambda m, x: x[None], [()]),
    Case("list", lambda m, x: x[[0, 2]], [(3, 4)]),
    Case("list_repeat", lambda m, x: x[[0, 2, 0, 0]], [(3, 4)]),
    Case("list_neg", lambda m, x: x[[-1, 0]], [(3, 4)]),
    Case("list_of_floats", lambda m, x: x[[2.0, 0.0]], [(3, 4)]),
    Case("two_ellipsis", lambda m, x: x[..., 0, ...], [(2, 3, 4)]),
    Case("two_ellipsis_mid", lambda m, x: x[0, ..., 1, ...], [(2, 3, 4)]),
    Case("tensor_idx", lambda m, x: x[_t(m, [[0, 1], [2, 2]])], [(3, 4)]),
    Case("tensor_idx_int32", lambda m, x: x[_t(m, [2, 1]).int()], [(3, 4)]),
    Case("tensor_0d_idx", lambda m, x: x[_t(m, 1)], [(3, 4)]),
    Case("tensor_from_input", lambda m, x, i: x[i], _with((4, 3), [3, 1, 3])),
    Case("mask", lambda m, x: x[x > 0], [(3, 4)]),
    Case("mask_rows", lambda m, x: x[_t(m, [True, False, True])], [(3, 4)]),
    Case("mask_partial", lambda m, x: x[x[:, :, 0] > 0], [(3, 4, 2)]),
    Case("mask_list", lambda m, x: x[:, [True, False, False, True]], [(3, 4)]),
    Case("mask_uint8", lambda m, x: x[_t(m, [1, 0, 1]).to(m.uint8)], [(3, 4)]),
    Case("true", lambda m, x: x[True], [(3, 4)]),
    Case("false", lambda m, x: x[False], [(3, 4)]),
    Case("true_mid", lambda m, x: x[:, True, 1], [(3, 4)]),
    Case("mixed_adjacent", lambda m, x: x[:, [0, 2], [1, 1]], [(2, 3, 4)]),
    Case("mixed_separated", lambda m, x: x[[0, 1], :, [1, 3]], [(2, 3, 4)]),
    Case("mixed_int_then_adv", lambda m, x: x[0, :, [0, 1]], [(2, 3, 4)]),
    Case("mixed_adv_int", lambda m, x: x[[1, 0], 2], [(2, 3, 4)]),
    Case("mixed_slice_adv_slice", lambda m, x: x[1:, [2, 0, 2], :2], [(3, 4, 3)]),
    Case("mixed_none_between", lambda m, x: x[[0, 1], None, [1, 2]], [(2, 3)]),
    Case("mixed_broadcast", lambda m, x: x[[[0], [1]], [0, 2, 3]], [(2, 4)]),
    Case("mixed_mask_int", lambda m, x: x[_t(m, [True, False, True]), 1:3], [(3, 4)]),
    Case("mixed_ellipsis_adv", lambda m, x: x[..., [0, 0, 1]], [(2, 3, 2)]),
    Case("adv_empty", lambda m, x: x[[]], [(3, 4)]),
    Case("adv_on_empty_dim", lambda m, x: x[:, [0, 0]], [(0, 2)]),
    Case("tuple_of_tensors", lambda m, x: x[(_t(m, [0, 1]), _t(m, [2, 3]))], [(3, 4)]),
    Case("int_dtype", lambda m, x: x[1, [0, 2]], lambda rng: [np.arange(12).reshape(3, 4)]),
    Case("bool_dtype", lambda m, x: x[x > 0], lambda rng: [rng.standard_normal((3, 4)) > 0]),
    Case("chained", lambda m, x: x[1:][:, [0, 2]][0], [(3, 4)]),
]


def _setitem(idx, value_fn=None):
    """``y = x * 1; y[idx] = value; y`` with ``value`` from the second input or ``value_fn``."""
    def fn(m, x, *v):
        y = x * 1
        val = v[0] if v else value_fn(m)
        y[idx(m) if callable(idx) else idx] = val
        return y
    return fn


SETITEM = [
    Case("set_int", _setitem(1), [(3, 4), (4,)]),
    Case("set_int_scalar", _setitem(1, lambda m: 2.5), [(3, 4)]),
    Case("set_slice_broadcast", _setitem((slice(None), slice(1, 3))), [(3, 4), (2,)]),
    Case("set_slice_0d", _setitem(slice(0, 2)), [(3, 4), ()]),
    Case("set_lead_ones", _setitem(0), [(3, 4), (1, 1, 4)]),
    Case("set_ellipsis", _setitem((Ellipsis, 0)), [(2, 3, 4), (2, 1)]),
    Case("set_list", _setitem(([0, 2],)), [(3, 4), (2, 4)]),
    Case("set_list_broadcast", _setitem([0, 2]), [(3, 4), (4,)]),
    Case("set_mask", _setitem(lambda m: m.tensor([True, False, True, True])),
         [(4, 3), (3, 3)]),
    Case("set_mask_scalar", lambda m, x: x.masked_fill(x > 0, 0.0) + 0, [(3, 4)]),
    Case("set_mask_full", _setitem(lambda m: m.tensor([[True, False]] * 3), lambda m: -1.0),
         [(3, 2)]),
    Case("set_mixed", _setitem((0, slice(None), [1, 0])), [(2, 3, 4), (3, 2)]),
    Case("set_mixed_separated", _setitem(([0, 1], slice(None), [1, 3])), [(2, 3, 4), (3,)]),
    Case("set_0d", _setitem(()), [(), ()]),
    Case("set_int_tensor", _setitem(lambda m: m.tensor(2)), [(3, 4), (4,)]),
    Case("set_f32_into_f64", lambda m, x, v: _setitem(1)(m, x, v.float()), [(3, 4), (4,)]),
    Case("set_value_not_x", lambda m, x, v: _setitem(1)(m, x.detach(), v), [(3, 4), (4,)]),
    Case("set_twice", lambda m, x, v: _twice(m, x, v), [(3, 4), (4,)]),
    Case("set_int_tensor_dtype", lambda m, x: _set_int(m, x), lambda rng: [np.arange(6)]),
    Case("index_put", lambda m, x, v: x.index_put((m.tensor([0, 2]),), v), [(3, 4), (4,)]),
    Case("index_put_2", lambda m, x, v: m.index_put(x, (m.tensor([0, 2]), m.tensor([1, 1])), v),
         [(3, 4), (2,)]),
    Case("index_put_acc", lambda m, x, v: x.index_put((m.tensor([0, 2, 0]),), v,
                                                      accumulate=True), [(3, 4), (3, 4)]),
    Case("index_put_acc_bcast", lambda m, x, v: x.index_put((m.tensor([1, 1]),), v, True),
         [(3, 4), (4,)]),
    Case("index_put_mask", lambda m, x, v: x.index_put((x > 0,), v), [(3, 4), ()]),
    Case("index_put_", lambda m, x, v: (x * 1).index_put_((m.tensor([1, 1]),), v, True),
         [(3, 4), (2, 4)]),
    Case("put", lambda m, x, v: x.put(m.tensor([0, 5, -1]), v), [(3, 4), (3,)]),
    Case("put_acc", lambda m, x, v: m.put(x, m.tensor([[1, 1]]), v, accumulate=True),
         [(3, 4), (1, 2)]),
    Case("put_", lambda m, x, v: (x * 1).put_(m.tensor([2, 3]), v), [(3, 4), (2,)]),
]


def _twice(m, x, v):
    y = x * 2
    y[0] = v
    y[:, 1] = v[1:] * v[:1]
    return y


def _set_int(m, x):
    y = x.clone()
    y[[1, 3]] = 7
    y[0] = m.tensor(2.7)  # cast to the tensor's dtype (truncated)
    return y


def _inplace_view(body):
    def fn(m, x, *rest):
        y = x * 1
        body(m, y, *rest)
        return y
    return fn


def _do(*fns):
    def body(m, y, *rest):
        for f in fns:
            f(m, y, *rest)
    return body


VIEW_INPLACE = [
    Case("view_mul_", _inplace_view(lambda m, y: y[:, 0].mul_(2)), [(3, 4)]),
    Case("view_iadd", _inplace_view(_do(lambda m, y, z: y.__setitem__(0, y[0].__iadd__(z)))),
         [(3, 4), (4,)]),
    Case("view_iadd_sugar", lambda m, x, z: _iadd(x, z), [(3, 4), (4,)]),
    Case("view_of_view", _inplace_view(lambda m, y, z: y[1:][:, 2].mul_(z)), [(3, 4), (2,)]),
    Case("view_diagonal", _inplace_view(lambda m, y, z: y.diagonal().mul_(z)), [(3, 4), (3,)]),
    Case("view_transposed", _inplace_view(lambda m, y, z: y.t()[1].add_(z)), [(3, 4), (3,)]),
    Case("view_setitem", _inplace_view(lambda m, y, z: y[0].__setitem__(slice(1, 3), z)),
         [(3, 4), (2,)]),
    Case("view_exp_", _inplace_view(lambda m, y: y[1:, ::2].exp_()), [(3, 4)]),
    Case("view_then_use", lambda m, x: _view_then_use(x), [(3, 4)]),
    Case("view_uses_base", lambda m, x: _view_uses_base(x), [(3, 4)]),
    Case("view_reshape", _inplace_view(lambda m, y, z: y.view(-1)[2:5].mul_(z)),
         [(3, 4), (3,)]),
    Case("view_unfold", _inplace_view(lambda m, y, z: y.unfold(1, 2, 2).mul_(z)),
         [(3, 4), (2,)]),
    Case("view_split", _inplace_view(lambda m, y, z: y.narrow(1, 1, 2).sub_(z)),
         [(3, 4), (3, 1)]),
    Case("view_fcontig_base", lambda m, x, z: _fcontig(x, z), [(3, 4), (4,)]),
    Case("view_stale_after_base_inplace", lambda m, x: _stale_base(x), [(3, 4)]),
    Case("view_stale_sibling", lambda m, x: _stale_sibling(x), [(3, 4)]),
    Case("view_stale_setitem", lambda m, x, z: _stale_setitem(x, z), [(3, 4), (4,)]),
    Case("view_masked_fill_", _inplace_view(lambda m, y, z: y[1].masked_fill_(y[1] > 0, z.sum())),
         [(3, 4), (2,)]),
]


def _iadd(x, z):
    y = x * 1
    y[0] += z
    y[1:, 1:] *= z[1:]
    return y


def _view_then_use(x):
    y = x * 1
    v = y[1]
    v.mul_(3)
    return y.sum(0) * v.sum()


def _view_uses_base(x):
    y = x * 1
    y[0].mul_(y[1].detach() + 1)
    y[2] = y[0] + y[1]  # add saves nothing: the later writes into y are fine
    return y


def _stale_base(x):
    y = x * 1
    v = y[0]
    w = y.t()
    y.mul_(2)  # v and w were taken before: they must see y's new node
    return v * 1 + w[:, 1]


def _stale_sibling(x):
    y = x * 1
    a, b = y[0], y[:, 1]
    a.mul_(3)  # b overlaps a at y[0, 1]
    return b.exp()


def _stale_setitem(x, z):
    y = x * 1
    rows = [y[i] for i in range(3)]
    y[1] = z
    return rows[1] * rows[0]


def _fcontig(x, z):
    y = x.t() * 1  # NumPy keeps the transposed layout: y is not C-contiguous
    y[:, 1].mul_(z)
    return y


GATHERS = [
    Case("gather", lambda m, x, i: m.gather(x, 1, i), _with((3, 4), [[0, 3], [1, 1], [2, 0]])),
    Case("gather_dim0", lambda m, x, i: x.gather(0, i), _with((3, 4), [[2, 0, 1, 1]])),
    Case("gather_smaller", lambda m, x, i: x.gather(-1, i), _with((3, 4), [[1], [0]])),
    Case("gather_3d", lambda m, x, i: x.gather(1, i),
         _with((2, 3, 2), [[[0, 1], [2, 2]], [[1, 0], [0, 0]]])),
    Case("gather_0d", lambda m, x: x.gather(0, m.tensor(0)), [()]),
    Case("gather_int32", lambda m, x: x.gather(1, m.tensor([[1], [0]]).int()), [(2, 3)]),
    Case("scatter", lambda m, x, s, i: x.scatter(1, i, s),
         _with((3, 4), np.ones((2, 3)), [[0, 3, 1], [2, 1, 0]])),
    Case("scatter_big_src", lambda m, x, s, i: m.scatter(x, 0, i, s),
         lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal((3, 5)),
                      np.array([[2, 0, 1]])], grad=False),  # torch's backward fails here
    Case("scatter_value", lambda m, x, i: x.scatter(1, i, 2.5), _with((3, 4), [[0, 3], [1, 2]])),
    Case("scatter_value_kw", lambda m, x, i: m.scatter(x, 1, i, value=-1.0),
         _with((3, 4), [[0], [1]])),
    Case("scatter_reduce_add", lambda m, x, s, i: x.scatter(1, i, s, reduce="add"),
         lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 2)),
                      np.array([[0, 0], [1, 2]])], grad=False),
    Case("scatter_reduce_mul", lambda m, x, i: x.scatter(0, i, 3.0, reduce="multiply"),
         _with((2, 3), [[1, 0, 1]]), grad=False),
    Case("scatter_add", lambda m, x, s, i: x.scatter_add(1, i, s),
         lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 3)),
                      np.array([[0, 0, 2], [1, 1, 1]])]),
    Case("scatter_add_big_src", lambda m, x, s, i: x.scatter_add(1, i, s),
         lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 4)),
                      np.array([[0, 0, 2], [1, 1, 1]])], grad=False),
    Case("scatter_add_fn", lambda m, x, s, i: m.scatter_add(x, 0, i, s),
         lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((3, 3)),
                      np.array([[0, 1, 1], [1, 1, 0], [0, 0, 0]])]),
    Case("scatter_int", lambda m, x, i: x.scatter(0, i, 5),
         lambda rng: [np.arange(6).reshape(2, 3), np.array([[1, 0, 1]])]),
    Case("index_select", lambda m, x: m.index_select(x, 0, m.tensor([2, 0, 2])), [(3, 4)]),
    Case("index_select_dim", lambda m, x: x.index_select(-1, m.tensor([1])), [(2, 3, 4)]),
    Case("index_select_0d_idx", lambda m, x: x.index_select(1, m.tensor(1)), [(2, 3)]),
    Case("index_select_empty", lambda m, x: x.index_select(0, m.tensor([], dtype=m.int64)),
         [(3, 2)]),
    Case("index_add", lambda m, x, s: x.index_add(0, m.tensor([0, 2, 0]), s), [(3, 4), (3, 4)]),
    Case("index_add_alpha", lambda m, x, s: m.index_add(x, 1, m.tensor([1, 0]), s, alpha=2.5),
         [(3, 4), (3, 2)]),
    Case("index_add_", lambda m, x, s: (x * 1).index_add_(1, m.tensor([3]), s),
         [(3, 4), (3, 1)]),
    Case("index_copy", lambda m, x, s: x.index_copy(0, m.tensor([2, 0]), s), [(3, 4), (2, 4)]),
    Case("index_copy_dim1", lambda m, x, s: m.index_copy(x, 1, m.tensor([1, 3]), s),
         [(3, 4), (3, 2)]),
    Case("index_fill", lambda m, x: x.index_fill(1, m.tensor([0, 2]), -1.0), [(3, 4)]),
    Case("index_fill_tensor", lambda m, x, v: m.index_fill(x, 0, m.tensor([1, 1, 2]), v),
         [(3, 4), ()]),
    Case("index_fill_", lambda m, x, v: (x * 1).index_fill_(0, m.tensor([0]), v), [(3, 4), ()]),
    Case("take", lambda m, x: m.take(x, m.tensor([[0, 11], [5, 5]])), [(3, 4)]),
    Case("take_neg", lambda m, x: x.take(m.tensor([-1, -12])), [(3, 4)]),
    Case("take_along_dim", lambda m, x, i: m.take_along_dim(x, i, 1),
         _with((3, 4), [[0, 3], [1, 1], [2, 0]])),
    Case("take_along_dim_bcast", lambda m, x, i: x.take_along_dim(i, dim=0),
         _with((3, 4), [[2], [0]])),
    Case("take_along_dim_none", lambda m, x: m.take_along_dim(x, m.tensor([0, 5, 5])),
         [(3, 4)]),
    Case("take_along_dim_last", lambda m, x, i: m.take_along_dim(x, i, -1),
         _with((3, 4), [[1], [0], [3]])),
    # along a dim, PyTorch reads the indices modulo its size
    Case("take_along_dim_wrapped", lambda m, x, i: m.take_along_dim(x, i, 1),
         _with((3, 4), [[-1, 5], [-4, 0], [-9, 3]])),
]


def _sr(reduce, include_self=True, dim=1):
    return lambda m, x, s, i: x.scatter_reduce(dim, i, s, reduce, include_self=include_self)


def _sr_inputs(rng):
    # well separated values: no ties between self and src
    x = rng.permutation(12).reshape(3, 4) * 0.5 - 2.2
    s = rng.permutation(9).reshape(3, 3) * 0.3 + 0.1
    return [x, s, np.array([[0, 0, 2], [1, 3, 3], [2, 2, 2]])]


def _sr_zeros(rng):
    x = np.array([[1.5, 0.0, 2.0, -1.0], [0.5, 2.0, 0.0, 3.0]])
    s = np.array([[0.0, 2.0, 3.0], [1.5, 0.0, -2.0]])
    return [x, s, np.array([[0, 0, 1], [2, 3, 3]])]


SCATTER_REDUCE = [
    Case(f"scatter_reduce_{r}_{inc}", _sr(r, inc), _sr_inputs)
    for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)
] + [
    Case("scatter_reduce_prod_zeros", _sr("prod"), _sr_zeros),
    Case("scatter_reduce_prod_zeros_excl", _sr("prod", False), _sr_zeros),
    Case("scatter_reduce_amax_ties", lambda m, x, s, i: x.scatter_reduce(0, i, s, "amax"),
         lambda rng: [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, 5.0], [1.0, 2.0]]),
                      np.array([[0, 1], [0, 0]])], gradgrad=False),
    Case("scatter_reduce_mean_int", lambda m, x, s, i: x.scatter_reduce(0, i, s, "mean"),
         lambda rng: [np.arange(6).reshape(2, 3), np.full((1, 3), 3), np.array([[0, 1, 0]])]),
] + [
    # 0-d operands: one node of the op itself, its edges to both inputs, as PyTorch's
    Case(f"scatter_reduce_0d_{r}_{inc}",
         lambda m, x, s, r=r, inc=inc: x.scatter_reduce(0, m.tensor(0), s, r, include_self=inc),
         [(), ()], gradgrad=r not in ("amax", "amin"))
    for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)
] + [
    Case("scatter_0d", lambda m, x, s: x.scatter(0, m.tensor(0), s), [(), ()]),
    Case("scatter_value_0d", lambda m, x: m.scatter(x, -1, m.tensor(0), 2.5), [()]),
    Case("scatter_add_0d", lambda m, x, s: x.scatter_add(0, m.tensor(0), s), [(), ()]),
    Case("index_select_0d", lambda m, x: x.index_select(0, m.tensor(0)), [()]),
    Case("index_select_0d_list", lambda m, x: m.index_select(x, -1, m.tensor([0])), [()]),
]

MASKED = [
    Case("masked_fill", lambda m, x: x.masked_fill(x > 0, 0.5), [(3, 4)]),
    Case("masked_fill_bcast_mask", lambda m, x: m.masked_fill(x, m.tensor([True, False, True,
                                                                           False]), -2.0),
         [(3, 4)]),
    Case("masked_fill_tensor_value", lambda m, x, v: x.masked_fill(x > 0, v), [(3, 4), ()]),
    Case("masked_fill_", lambda m, x, v: (x * 1).masked_fill_(x < 0, v * 2), [(3, 4), ()]),
    Case("masked_fill_int", lambda m, x: x.masked_fill(x > 3, 1),
         lambda rng: [np.arange(6).reshape(2, 3)]),
    Case("masked_select", lambda m, x: m.masked_select(x, x > 0), [(3, 4)]),
    Case("masked_select_bcast", lambda m, x: x.masked_select(m.tensor([True, False, True])),
         [(2, 3)]),
    Case("masked_select_bcast_both", lambda m, x, y: m.masked_select(x, y > 0),
         [(3, 1), (4,)]),
    Case("masked_select_0d", lambda m, x: m.masked_select(x, x > -100), [()]),
    Case("masked_scatter", lambda m, x, s: x.masked_scatter(x > 0, s), [(3, 4), (14,)]),
    Case("masked_scatter_2d_src", lambda m, x, s: m.masked_scatter(x, m.tensor([True, False,
                                                                                True]), s),
         [(2, 3), (3, 3)]),
    Case("masked_scatter_", lambda m, x, s: (x * 1).masked_scatter_(x < 0, s), [(3, 4), (12,)]),
    Case("nonzero", lambda m, x: m.nonzero(x > 0), [(3, 4)], grad=False),
    Case("nonzero_tuple", lambda m, x: x.gt(0).nonzero(as_tuple=True), [(3, 4)], grad=False),
    Case("nonzero_0d", lambda m, x: (x > -100).nonzero(), [()], grad=False),
    Case("nonzero_0d_tuple", lambda m, x: m.nonzero(x < -100, as_tuple=True), [()], grad=False),
    Case("nonzero_float", lambda m, x: m.nonzero(m.relu(x)), [(2, 3, 2)], grad=False),
    Case("argwhere", lambda m, x: m.argwhere(x > 0), [(3, 4)], grad=False),
    Case("argwhere_method", lambda m, x: (x > 0).argwhere(), [(2, 2, 3)], grad=False),
]


@cases(GETITEM)
def test_getitem(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(case)


@cases(SETITEM)
def test_setitem(case):
    check(case)


@cases(VIEW_INPLACE)
def test_inplace_on_views(case):
    check(case)


@cases(GATHERS)
def test_gather_scatter(case):
    check(case)


@cases(SCATTER_REDUCE)
def test_scatter_reduce(case):
    check(case)


@cases(MASKED)
def test_masked(case):
    check(case)


def _random_index(rng, shape):
    items, d = [], 0
    for _ in range(rng.integers(1, 5)):
        n = max(shape[min(d, len(shape) - 1)], 2)
        k = rng.integers(8)
        if k == 0:
            it = int(rng.integers(-n, n))
        elif k == 1:
            it = slice([None, 0, 1, -2][rng.integers(4)], [None, 2, -1, 10][rng.integers(4)],
                       [None, 1, 2][rng.integers(3)])
        elif k == 2:
            it = None
        elif k == 3:
            it = [int(v) for v in rng.integers(-n, n, size=rng.integers(1, 4))]
        elif k == 4:
            it = ("int", [int(v) for v in rng.integers(0, n, size=2)])
        elif k == 5:
            it = ("mask", [bool(v) for v in rng.random(n) < 0.5])
        elif k == 6:
            it = Ellipsis
        else:
            it = slice(None)
        items.append(it)
        d += it is not None and it is not Ellipsis
    return items


@pytest.mark.parametrize("shape", [(3, 4, 5, 2), (2, 0, 3), (5, 1, 3)])
def test_random_indices(shape):
    """Random mixes of every index kind: result, gradient and setitem agree with torch
    (or both raise the same error type)."""
    import torch
    rng = np.random.default_rng(len(shape))
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    for _ in range(150):
        items = _random_index(rng, shape)
        res = []
        for lib in (torch, ember):
            x = lib.tensor(a, requires_grad=True)
            idx = tuple(lib.tensor(it[1]) if type(it) is tuple else it for it in items)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = x[idx]
                    g = lib.autograd.grad((r * r).sum(), x)[0]
                    y = x.detach().clone()
                    y[idx] = -1.0
                res.append((r.detach().numpy().copy(), g.numpy().copy(), y.numpy().copy()))
            except (IndexError, RuntimeError, TypeError, ValueError) as e:
                res.append(type(e))
        t, e = res
        if isinstance(t, type) or isinstance(e, type):
            assert t is e, f"{items}: torch {t}, ember {e}"
            continue
        for u, v in zip(t, e):
            assert u.shape == v.shape and np.array_equal(u, v), items


def test_list_of_lists_index_is_a_tuple():
    import torch
    a = np.arange(12.0).reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r_t = torch.tensor(a)[[[0, 1], [1, 2]]]
        r_e = ember.tensor(a)[[[0, 1], [1, 2]]]
    np.testing.assert_array_equal(r_e.numpy(), r_t.numpy())


def test_setitem_no_grad_and_version():
    x = ember.zeros(3, 4)
    v0 = x._version
    x[1, [0, 2]] = 5
    x[x > 4] += 1
    assert x._version > v0
    assert x[1, 0].item() == 6 and x[1, 1].item() == 0
    x[0] = ember.ones(4, dtype=ember.int64)
    assert x.dtype == ember.float32 and x[0].sum().item() == 4


def test_repeated_index_grad_accumulates():
    import torch
    for lib in (ember, torch):
        x = lib.ones(3, requires_grad=True)
        x[[0, 0, 2, 0]].sum().backward()
        assert x.grad.tolist() == [3.0, 0.0, 1.0]


def test_leaf_inplace_errors():
    import torch
    for lib in (ember, torch):
        x = lib.ones(3, 4, requires_grad=True)
        with pytest.raises(RuntimeError):
            x[0] = 2.0
        with pytest.raises(RuntimeError):
            x[0].mul_(2)
        with pytest.raises(RuntimeError):
            x.diagonal().zero_() if hasattr(x, "zero_") else x.diagonal().mul_(0)
        assert x.is_leaf and x.grad_fn is None


def test_view_grad_fn_after_inplace():
    x = ember.ones(3, 4, requires_grad=True)
    y = x * 1
    v = y[0]
    v.mul_(2)
    assert y.grad_fn.name() == "torch::autograd::CopySlices"
    assert v.grad_fn is not None
    (y.sum() + v.sum()).backward()
    assert x.grad.tolist() == [[4.0] * 4, [1.0] * 4, [1.0] * 4]


def test_saved_tensor_check_through_view():
    import torch
    for lib in (ember, torch):
        x = lib.ones(3, requires_grad=True)
        y = x * 1
        z = y * y
        y[0].mul_(2)
        with pytest.raises(RuntimeError):
            z.sum().backward()


def _err(fn, *arrays, exc=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return check_raises(fn, *arrays, exc=exc)


X = np.arange(12.0).reshape(3, 4)
ERRORS = [
    ("int_out_of_range", lambda m, x: x[3]),
    ("int_out_of_range_neg", lambda m, x: x[-4]),
    ("int_out_of_range_dim1", lambda m, x: x[:, 4]),
    ("list_out_of_range", lambda m, x: x[[0, 5]]),
    ("tensor_out_of_range", lambda m, x: x[m.tensor([-5])]),
    ("adv_out_of_range_dim1", lambda m, x: x[0, [1, 4]]),
    ("float_index_tensor", lambda m, x: x[m.tensor([1.0])]),
    ("float_index", lambda m, x: x[1.5]),
    ("str_index", lambda m, x: x["a"]),
    ("too_many", lambda m, x: x[0, 0, 0]),
    ("negative_step", lambda m, x: x[::-1]),
    ("zero_step", lambda m, x: x[::0]),
    ("mask_shape", lambda m, x: x[m.tensor([True, False])]),
    ("mask_shape_dim1", lambda m, x: x[:, m.tensor([True, False])]),
    ("index_0d", lambda m, x: x.sum()[0]),
    ("set_shape", lambda m, x: x.__setitem__(0, m.ones(3))),
    ("set_adv_shape", lambda m, x: x.__setitem__([0, 1], m.ones(3, 3))),
    ("set_out_of_range", lambda m, x: x.__setitem__(5, 1.0)),
    ("set_float_index", lambda m, x: x.__setitem__(m.tensor([0.0]), 1.0)),
    ("gather_out_of_range", lambda m, x: x.gather(1, m.tensor([[5]]))),
    # gather and the scatters take no negative index (index_select neither)
    ("gather_negative", lambda m, x: x.gather(1, m.tensor([[-1]]))),
    ("gather_0d_negative", lambda m, x: x.sum().gather(0, m.tensor(-1))),
    ("scatter_negative", lambda m, x: x.scatter(0, m.tensor([[-1]]), 1.0)),
    ("scatter_add_negative", lambda m, x: x.scatter_add(1, m.tensor([[-2]]), x[:1, :1])),
    ("scatter_reduce_negative", lambda m, x: x.scatter_reduce(1, m.tensor([[-1]]), x[:1, :1],
                                                             "amax")),
    ("take_along_dim_none_negative", lambda m, x: m.take_along_dim(x, m.tensor([-1]))),
    ("gather_ndim", lambda m, x: x.gather(1, m.tensor([1]))),
    ("gather_float_index", lambda m, x: x.gather(1, m.tensor([[1.0]]))),
    ("gather_too_big", lambda m, x: x.gather(1, m.tensor([[0]] * 4))),
    ("gather_dim", lambda m, x: x.gather(2, m.tensor([[0]]))),
    ("scatter_dtype", lambda m, x: x.scatter(0, m.tensor([[0]]), m.ones(1, 1).float())),
    ("scatter_out_of_range", lambda m, x: x.scatter(0, m.tensor([[5]]), 1.0)),
    ("scatter_too_big", lambda m, x: x.scatter(0, m.tensor([[0] * 5]), 1.0)),
    ("scatter_src_small", lambda m, x: x.scatter(0, m.tensor([[0, 1]]), m.ones(1, 1).double())),
    ("scatter_src_ndim", lambda m, x: x.scatter(0, m.tensor([[0]]), m.tensor(1.0).double())),
    ("scatter_float_index", lambda m, x: x.scatter(0, m.tensor([[0.0]]), 1.0)),
    ("scatter_bad_reduce", lambda m, x: x.scatter(0, m.tensor([[0]]), 1.0, reduce="max")),
    ("scatter_add_out_of_range", lambda m, x: x.scatter_add(0, m.tensor([[5]]),
                                                            m.ones(1, 1).double())),
    ("scatter_reduce_bad", lambda m, x: x.scatter_reduce(0, m.tensor([[0]]),
                                                         m.ones(1, 1).double(), "foo")),
    ("index_select_range", lambda m, x: x.index_select(0, m.tensor([5]))),
    ("index_select_neg", lambda m, x: x.index_select(0, m.tensor([-1]))),
    ("index_select_2d", lambda m, x: x.index_select(0, m.tensor([[1]]))),
    ("index_select_float", lambda m, x: x.index_select(0, m.tensor([1.0]))),
    ("index_add_dtype", lambda m, x: x.index_add(0, m.tensor([0]), m.ones(1, 4))),
    ("index_add_count", lambda m, x: x.index_add(0, m.tensor([0, 1]), m.ones(1, 4).double())),
    ("index_add_shape", lambda m, x: x.index_add(0, m.tensor([0]), m.ones(1, 3).double())),
    ("index_add_range", lambda m, x: x.index_add(0, m.tensor([5]), m.ones(1, 4).double())),
    ("index_copy_shape", lambda m, x: x.index_copy(0, m.tensor([0]), m.ones(1, 3).double())),
    ("index_copy_int32", lambda m, x: x.index_copy(0, m.tensor([0]).int(),
                                                   m.ones(1, 4).double())),
    ("index_copy_range", lambda m, x: x.index_copy(0, m.tensor([5]), m.ones(1, 4).double())),
    ("index_fill_range", lambda m, x: x.index_fill(0, m.tensor([5]), 1.0)),
    ("index_fill_1d_value", lambda m, x: x.index_fill(0, m.tensor([1]), m.ones(1).double())),
    ("index_fill_int32", lambda m, x: x.index_fill(0, m.tensor([1]).int(), 1.0)),
    ("index_fill_2d", lambda m, x: x.index_fill(0, m.tensor([[1]]), 1.0)),
    ("index_put_range", lambda m, x: x.index_put((m.tensor([5]),), m.tensor(1.0).double())),
    ("take_range", lambda m, x: x.take(m.tensor([12]))),
    ("take_along_dim_ndim", lambda m, x: m.take_along_dim(x, m.tensor([0]), 0)),
    ("masked_select_float", lambda m, x: x.masked_select(m.ones(4))),
    ("masked_fill_float", lambda m, x: x.masked_fill(m.ones(4), 1.0)),
    ("masked_fill_1d_value", lambda m, x: x.masked_fill(x > 1, m.ones(2).double())),
    ("masked_scatter_few", lambda m, x: x.masked_scatter(x > 3, m.ones(3).double())),
    ("masked_scatter_dtype", lambda m, x: x.masked_scatter(x > 3, m.ones(20))),
    ("put_range", lambda m, x: x.put(m.tensor([12]), m.ones(1).double())),
    ("put_dtype", lambda m, x: x.put(m.tensor([1]), m.ones(1))),
    ("index_put_dtype", lambda m, x: x.index_put((m.tensor([0]),), m.tensor(1.0))),
    ("index_put_number", lambda m, x: x.index_put((m.tensor([0]),), 1.0)),
    ("index_put_none", lambda m, x: x.index_put((m.tensor([0]), None), m.tensor(1.0).double())),
    ("index_put_tensor_indices", lambda m, x: x.index_put(m.tensor([0]),
                                                          m.tensor(1.0).double())),
]


@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn):
    _err(fn, X)


def test_scatter_reduce_arg_backward_error():
    import torch
    for lib in (ember, torch):
        x = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        y = x.scatter(0, lib.tensor([[1, 0, 1]]), 2.0, reduce="multiply")
        with pytest.raises(RuntimeError):
            y.sum().backward()


def test_range_index_reads_as_a_list():
    import torch
    for m in (ember, torch):
        x = m.zeros(3, 4)
        x[range(3), m.tensor([1, 0, 3])] = 5.0
        assert x.sum().item() == 15.0 and tuple(x[range(2)].shape) == (2, 4)
