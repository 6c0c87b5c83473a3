"""Shape and movement ops against torch: views, joins, splits, flips, diagonals, repeats,
padding; values, dtypes, gradients, second gradients, non-contiguous inputs, errors."""
import numpy as np
import pytest
from oracle import Case, cases, check, check_raises

import ember


def _f(*arrays):
    return lambda rng: [np.asarray(a) for a in arrays]


def _mixed(rng):
    return [rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((1, 3))]


VIEWS = [
    Case("reshape", lambda m, x: x.reshape(4, 3) * 2, [(3, 4)]),
    Case("reshape_infer", lambda m, x: m.reshape(x, (-1, 2)), [(3, 4)]),
    Case("view", lambda m, x: x.view(2, 6), [(3, 4)], noncontig=False),
    Case("view_tuple", lambda m, x: x.view((12,)), [(3, 4)], noncontig=False),
    Case("view_as", lambda m, x, y: x.view_as(y), [(3, 4), (12,)], noncontig=False),
    Case("reshape_as", lambda m, x, y: x.reshape_as(y), [(3, 4), (2, 6)]),
    Case("flatten", lambda m, x: m.flatten(x), [(2, 3, 4)]),
    Case("flatten_range", lambda m, x: x.flatten(1, 2), [(2, 3, 4, 2)]),
    Case("flatten_0d", lambda m, x: x.flatten(), [()]),
    Case("unflatten", lambda m, x: x.unflatten(1, (2, -1)), [(3, 4)]),
    Case("ravel", lambda m, x: m.ravel(x.t()), [(3, 4)]),
    Case("squeeze_all", lambda m, x: x.squeeze(), [(1, 3, 1, 4)]),
    Case("squeeze_dim", lambda m, x: m.squeeze(x, 2), [(1, 3, 1, 4)]),
    Case("squeeze_tuple", lambda m, x: x.squeeze((0, 2, 3)), [(1, 3, 1, 4)]),
    Case("squeeze_non1", lambda m, x: x.squeeze(1), [(1, 3, 1, 4)]),
    Case("squeeze_0d", lambda m, x: x.squeeze(0), [()]),
    Case("unsqueeze", lambda m, x: x.unsqueeze(-1).unsqueeze(0), [(3, 4)]),
    Case("permute", lambda m, x: x.permute(2, 0, 1), [(2, 3, 4)]),
    Case("permute_neg", lambda m, x: m.permute(x, (-1, 0, 1)), [(2, 3, 4)]),
    Case("transpose", lambda m, x: x.transpose(0, -1), [(2, 3, 4)]),
    Case("t", lambda m, x: x.t() * 1, [(3, 4)]),
    Case("T_mT", lambda m, x: x.mT + 0, [(2, 3, 4)]),
    Case("movedim", lambda m, x: m.movedim(x, 0, -1), [(2, 3, 4)]),
    Case("movedim_multi", lambda m, x: m.movedim(x, (0, 1), (2, 0)), [(2, 3, 4)]),
    Case("expand", lambda m, x: x.expand(2, 3, 4), [(3, 1)]),
    Case("expand_neg", lambda m, x: x.expand(-1, 4), [(3, 1)]),
    Case("expand_as", lambda m, x, y: x.expand_as(y), [(1, 4), (3, 4)]),
    Case("broadcast_to", lambda m, x: m.broadcast_to(x, (2, 3, 4)), [(4,)]),
    Case("broadcast_tensors", lambda m, x, y: m.broadcast_tensors(x, y), [(3, 1), (4,)]),
    Case("sum_to_size", lambda m, x: x.sum_to_size(3, 1), [(3, 4)]),
    Case("atleast_2d", lambda m, x: m.atleast_2d(x), [(4,)]),
    Case("atleast_3d", lambda m, x: m.atleast_3d(x), [(2, 4)]),
    Case("empty_reshape", lambda m, x: x.reshape(0, 2, 3), [(6, 0)]),
]

JOINS = [
    Case("cat0", lambda m, a, b: m.cat([a, b]), [(2, 3), (4, 3)]),
    Case("cat1", lambda m, a, b, c: m.cat((a, b, c), dim=1), [(2, 3), (2, 1), (2, 2)]),
    Case("cat_neg", lambda m, a, b: m.cat([a, b], -1), [(2, 2, 3), (2, 2, 1)]),
    Case("cat_single", lambda m, a: m.cat([a]), [(2, 3)]),
    Case("concat", lambda m, a, b: m.concat([a, b], 0), [(2, 3), (1, 3)]),
    Case("concatenate", lambda m, a, b: m.concatenate([a, b], 1), [(2, 3), (2, 2)]),
    Case("cat_promote", lambda m, a, b: m.cat([a, b]), _mixed),
    Case("cat_skip_empty", lambda m, a, b: m.cat([a, b, a], 1), [(2, 3), (0,)]),
    Case("cat_all_empty", lambda m, a, b: m.cat([a, b]), [(0,), (0,)]),
    Case("cat_empty_rows", lambda m, a, b: m.cat([a, b]), [(0, 3), (2, 3)]),
    Case("cat_int", lambda m, a, b: m.cat([a, b]),
         _f(np.arange(6).reshape(2, 3), np.ones((1, 3), np.int32))),
    Case("cat_int_float", lambda m, a, b: m.cat([a, b]),
         lambda rng: [np.arange(6).reshape(2, 3), rng.standard_normal((1, 3))]),
    Case("cat_self", lambda m, a: m.cat([a, a * 2, a]), [(2, 3)]),
    Case("stack", lambda m, a, b: m.stack([a, b]), [(2, 3), (2, 3)]),
    Case("stack1", lambda m, a, b: m.stack((a, b), 1), [(2, 3), (2, 3)]),
    Case("stack_neg", lambda m, a, b, c: m.stack([a, b, c], dim=-1), [(2, 3)] * 3),
    Case("stack_0d", lambda m, a, b: m.stack([a, b]), [(), ()]),
    Case("stack_promote", lambda m, a, b: m.stack([a[0], b[0]]), _mixed),
    Case("hstack_1d", lambda m, a, b: m.hstack([a, b]), [(3,), (2,)]),
    Case("hstack_2d", lambda m, a, b: m.hstack([a, b]), [(2, 3), (2, 1)]),
    Case("vstack", lambda m, a, b: m.vstack([a, b]), [(3,), (2, 3)]),
    Case("row_stack", lambda m, a, b: m.row_stack((a, b)), [(3,), (3,)]),
    Case("dstack", lambda m, a, b: m.dstack([a, b]), [(2, 3), (2, 3, 2)]),
    Case("column_stack", lambda m, a, b, c: m.column_stack([a, b, c]), [(3,), (3, 2), (3,)]),
]

SPLITS = [
    Case("split_int", lambda m, x: m.split(x, 2), [(5, 3)]),
    Case("split_int_dim", lambda m, x: x.split(2, dim=1), [(3, 4)]),
    Case("split_sizes", lambda m, x: x.split([1, 3, 0, 1], -1), [(2, 5)]),
    Case("split_partial_grad", lambda m, x: x.split(2)[1] * 3, [(5, 3)]),
    Case("split_empty", lambda m, x: m.split(x, 2), [(0, 3)]),
    Case("chunk", lambda m, x: x.chunk(3), [(7, 2)]),
    Case("chunk_fewer", lambda m, x: m.chunk(x, 4, 1), [(2, 6)]),
    Case("chunk_empty", lambda m, x: m.chunk(x, 3), [(0,)]),
    Case("tensor_split_int", lambda m, x: m.tensor_split(x, 3), [(7, 2)]),
    Case("tensor_split_idx", lambda m, x: x.tensor_split([1, 4], dim=1), [(2, 6)]),
    Case("tensor_split_odd", lambda m, x: m.tensor_split(x, [3, 1, -1]), [(6,)]),
    Case("tensor_split_tensor", lambda m, x: m.tensor_split(x, m.tensor([2, 3])), [(6,)]),
    Case("hsplit", lambda m, x: m.hsplit(x, 2), [(2, 6)]),
    Case("hsplit_1d", lambda m, x: x.hsplit([2]), [(6,)]),
    Case("vsplit", lambda m, x: m.vsplit(x, [1, 2]), [(4, 3)]),
    Case("dsplit", lambda m, x: m.dsplit(x, 2), [(2, 3, 4)]),
    Case("unbind", lambda m, x: m.unbind(x), [(3, 4)]),
    Case("unbind_dim", lambda m, x: x.unbind(-1), [(2, 3)]),
    Case("unbind_one", lambda m, x: x.unbind(1)[2] * 2, [(2, 3)]),
    Case("iter_rows", lambda m, x: m.stack([r * i for i, r in enumerate(x)]), [(3, 2)]),
]

MOVES = [
    Case("flip", lambda m, x: m.flip(x, (0, 2)), [(2, 3, 4)]),
    Case("flip_neg", lambda m, x: x.flip(-1), [(3, 4)]),
    Case("flip_empty_dims", lambda m, x: x.flip([]), [(3, 4)]),
    Case("fliplr", lambda m, x: m.fliplr(x), [(3, 4)]),
    Case("flipud", lambda m, x: x.flipud(), [(3, 4)]),
    Case("roll", lambda m, x: m.roll(x, 1, 0), [(3, 4)]),
    Case("roll_multi", lambda m, x: x.roll((1, -2), (0, 1)), [(3, 4)]),
    Case("roll_flat", lambda m, x: m.roll(x, 5), [(3, 4)]),
    Case("roll_big", lambda m, x: m.roll(x, -7, -1), [(3, 4)]),
    Case("rot90", lambda m, x: m.rot90(x), [(3, 4)]),
    Case("rot90_k2", lambda m, x: m.rot90(x, 2, (1, 2)), [(2, 3, 4)]),
    Case("rot90_k3", lambda m, x: x.rot90(3, [0, 1]), [(3, 4)]),
    Case("rot90_neg", lambda m, x: x.rot90(-1, [1, 0]), [(3, 4)]),
    Case("rot90_k0", lambda m, x: x.rot90(0), [(3, 4)]),
    Case("narrow", lambda m, x: m.narrow(x, 1, 1, 2), [(3, 4)]),
    Case("narrow_neg", lambda m, x: x.narrow(0, -2, 2), [(3, 4)]),
    Case("narrow_tensor_start", lambda m, x: x.narrow(1, m.tensor(1), 3), [(3, 4)]),
    Case("narrow_copy", lambda m, x: m.narrow_copy(x, 0, 1, 1), [(3, 4)]),
    Case("select", lambda m, x: m.select(x, 1, 2), [(3, 4)]),
    Case("select_neg", lambda m, x: x.select(-1, -1), [(2, 3, 4)]),
    Case("unfold", lambda m, x: x.unfold(1, 2, 1), [(3, 5)]),
    Case("unfold_step", lambda m, x: x.unfold(0, 2, 3), [(7, 2)]),
    Case("unfold_dim0", lambda m, x: x.unfold(-1, 3, 2), [(2, 3, 7)]),
    Case("unfold_twice", lambda m, x: x.unfold(0, 2, 1).unfold(1, 2, 2), [(4, 5)]),
]

DIAGS = [
    Case("tril", lambda m, x: m.tril(x), [(4, 4)]),
    Case("tril_k", lambda m, x: x.tril(1), [(3, 5)]),
    Case("tril_negk_batched", lambda m, x: m.tril(x, -1), [(2, 4, 3)]),
    Case("triu", lambda m, x: m.triu(x), [(4, 4)]),
    Case("triu_k", lambda m, x: x.triu(-2), [(5, 3)]),
    Case("triu_batched", lambda m, x: m.triu(x, 1), [(2, 3, 4)]),
    Case("tril_int", lambda m, x: m.tril(x), _f(np.arange(12).reshape(3, 4))),
    Case("diagonal", lambda m, x: m.diagonal(x), [(3, 4)]),
    Case("diagonal_off", lambda m, x: x.diagonal(1), [(3, 4)]),
    Case("diagonal_negoff", lambda m, x: x.diagonal(-1), [(3, 4)]),
    Case("diagonal_out_of_range", lambda m, x: x.diagonal(5), [(3, 4)]),
    Case("diagonal_dims", lambda m, x: m.diagonal(x, 0, 2, 0), [(3, 2, 4)]),
    Case("diagonal_dims_off", lambda m, x: x.diagonal(offset=-1, dim1=-1, dim2=1), [(2, 3, 4)]),
    Case("diag_1d", lambda m, x: m.diag(x), [(3,)]),
    Case("diag_1d_off", lambda m, x: m.diag(x, -2), [(3,)]),
    Case("diag_2d", lambda m, x: m.diag(x), [(3, 4)]),
    Case("diag_2d_off", lambda m, x: x.diag(2), [(3, 4)]),
    Case("diag_embed", lambda m, x: m.diag_embed(x), [(2, 3)]),
    Case("diag_embed_off", lambda m, x: m.diag_embed(x, 1), [(2, 3)]),
    Case("diag_embed_dims", lambda m, x: m.diag_embed(x, -1, 0, 2), [(2, 3)]),
    Case("diag_embed_rev", lambda m, x: x.diag_embed(0, 2, 0), [(2, 3)]),
    Case("diagonal_scatter", lambda m, x, s: m.diagonal_scatter(x, s), [(3, 4), (3,)]),
    Case("diagonal_scatter_off", lambda m, x, s: m.diagonal_scatter(x, s, 1, 1, 0),
         [(3, 4), (2,)]),
    Case("select_scatter", lambda m, x, s: m.select_scatter(x, s, 1, 0), [(3, 4), (3,)]),
    Case("slice_scatter", lambda m, x, s: m.slice_scatter(x, s, 1, 0, 4, 2), [(3, 4), (3, 2)]),
    Case("slice_scatter_default", lambda m, x, s: m.slice_scatter(x, s, start=1),
         [(3, 4), (2, 4)]),
]

REPEATS = [
    Case("repeat", lambda m, x: x.repeat(2, 3), [(2, 3)]),
    Case("repeat_lead", lambda m, x: x.repeat(2, 1, 2), [(2, 3)]),
    Case("repeat_zero", lambda m, x: x.repeat(0, 2), [(2, 3)]),
    Case("repeat_0d", lambda m, x: x.repeat(3), [()]),
    Case("tile", lambda m, x: m.tile(x, (2,)), [(2, 3)]),
    Case("tile_more", lambda m, x: x.tile((2, 1, 2)), [(2, 3)]),
    Case("repeat_interleave", lambda m, x: x.repeat_interleave(2), [(2, 3)]),
    Case("repeat_interleave_dim", lambda m, x: m.repeat_interleave(x, 3, dim=1), [(2, 3)]),
    Case("repeat_interleave_tensor", lambda m, x: x.repeat_interleave(m.tensor([1, 0, 2]), 0),
         [(3, 2)]),
    Case("repeat_interleave_one", lambda m, x: x.repeat_interleave(m.tensor([2]), dim=0),
         [(3, 2)]),
    Case("repeat_interleave_counts", lambda m: m.repeat_interleave(m.tensor([1, 3, 0, 2])), []),
]

PADS = [
    Case("pad_last", lambda m, x: _pad(m)(x, (1, 2)), [(2, 3)]),
    Case("pad_two", lambda m, x: _pad(m)(x, (1, 0, 2, 1), value=1.5), [(2, 3)]),
    Case("pad_three", lambda m, x: _pad(m)(x, (1, 1, 0, 1, 2, 0)), [(2, 3, 2)]),
    Case("pad_crop", lambda m, x: _pad(m)(x, (-1, 2, 1, -1)), [(3, 4)]),
    Case("pad_0d_dims", lambda m, x: _pad(m)(x, ()), [(3,)]),
    Case("pad_int", lambda m, x: _pad(m)(x, (1, 1), value=7), _f(np.arange(6).reshape(2, 3))),
    Case("pad_int_float_value", lambda m, x: _pad(m)(x, (1, 1), value=1.5),
         _f(np.arange(6).reshape(2, 3))),
    Case("constant_pad_nd", lambda m, x: m.constant_pad_nd(x, (1, 1), 2.0), [(2, 3)]),
    Case("pad_reflect", lambda m, x: _pad(m)(x, (2, 1), mode="reflect"), [(2, 4)]),
    Case("pad_reflect_2d", lambda m, x: _pad(m)(x, (1, 2, 2, 1), mode="reflect"), [(2, 3, 4)]),
    Case("pad_reflect_3d", lambda m, x: _pad(m)(x, (1, 0, 0, 1, 1, 1), mode="reflect"),
         [(1, 2, 3, 3, 2)]),
    Case("pad_reflect_neg", lambda m, x: _pad(m)(x, (-1, 2), mode="reflect"), [(2, 4)]),
    Case("pad_replicate", lambda m, x: _pad(m)(x, (3, 1), mode="replicate"), [(2, 2, 3)]),
    Case("pad_replicate_2d", lambda m, x: _pad(m)(x, (1, 2, 3, 0), mode="replicate"),
         [(2, 2, 3)]),
    Case("pad_circular", lambda m, x: _pad(m)(x, (2, 3), mode="circular"), [(2, 4)]),
    Case("pad_circular_2d", lambda m, x: _pad(m)(x, (1, 1, 2, 0), mode="circular"),
         [(1, 2, 3, 4)]),
    Case("pad_circular_neg", lambda m, x: _pad(m)(x, (-2, 1), mode="circular"), [(2, 5)]),
    Case("pad_circular_neg2", lambda m, x: _pad(m)(x, (2, -1), mode="circular"), [(2, 5)]),
    Case("pad_replicate_neg", lambda m, x: _pad(m)(x, (-3, 4), mode="replicate"), [(2, 5)]),
    Case("pad_reflect_neg2", lambda m, x: _pad(m)(x, (1, -3), mode="reflect"), [(2, 5)]),
]


def _pad(m):
    if m is ember:
        from ember.ops.shape import pad
        return pad
    return m.nn.functional.pad


@cases(VIEWS)
def test_views(case):
    check(case)


@cases(JOINS)
def test_joins(case):
    check(case)


@cases(SPLITS)
def test_splits(case):
    check(case)


@cases(MOVES)
def test_moves(case):
    check(case)


@cases(DIAGS)
def test_diagonals(case):
    check(case)


@cases(REPEATS)
def test_repeats(case):
    check(case)


@cases(PADS)
def test_pad(case):
    check(case)


def test_views_share_memory():
    x = ember.arange(12.0).reshape(3, 4).clone()
    for v in (x[1], x.narrow(1, 1, 2), x.select(0, 0), x.diagonal(), x.unfold(1, 2, 1),
              x.split(2, 1)[1], x.unbind(0)[2], x.t(), x.squeeze(), x[0, 0]):
        assert v._base is x
        v_np = v.numpy()
        assert np.shares_memory(v_np, x.numpy())
    x.diagonal().mul_(0)
    assert x[1, 1].item() == 0 and x[2, 2].item() == 0 and x[0, 1].item() == 1
    assert x._version == 1
    assert x[0].dim() == 1 and x[0, 0].dim() == 0


def test_node_names():
    x = ember.randn(3, 4, requires_grad=True) if hasattr(ember, "randn") else \
        ember.ones(3, 4, requires_grad=True)
    assert x[0].grad_fn.name() == "SliceBackward0" or x[0].grad_fn.name() == "SelectBackward0"
    assert x.select(0, 1).grad_fn.name() == "SelectBackward0"
    assert ember.cat([x, x]).grad_fn.name() == "CatBackward0"
    assert x.split(2, 1)[0].grad_fn.name() == "SplitBackward0"
    assert x.unbind()[0].grad_fn.name() == "UnbindBackward0"
    assert x.diagonal().grad_fn.name() == "DiagonalBackward0"
    assert x.flip(0).grad_fn.name() == "FlipBackward0"


def _err(fn, shapes, exc=None):
    rng = np.random.default_rng(0)
    return check_raises(fn, *[rng.standard_normal(s) for s in shapes], exc=exc)


ERRORS = [
    ("view_noncontig", lambda m, x: x.t().view(-1), [(3, 4)]),
    ("reshape_bad", lambda m, x: x.reshape(5, -1), [(3, 4)]),
    ("reshape_two_infer", lambda m, x: x.reshape(-1, -1), [(3, 4)]),
    ("permute_bad", lambda m, x: x.permute(0, 0), [(3, 4)]),
    ("permute_dim", lambda m, x: x.permute(0, 2), [(3, 4)]),
    ("expand_bad", lambda m, x: x.expand(3, 5), [(3, 4)]),
    ("cat_shape", lambda m, a, b: m.cat([a, b]), [(2, 3), (2, 4)]),
    ("cat_ndim", lambda m, a, b: m.cat([a, b]), [(2, 3), (3,)]),
    ("cat_0d", lambda m, a, b: m.cat([a, b]), [(), ()]),
    ("cat_dim", lambda m, a, b: m.cat([a, b], 2), [(2, 3), (2, 3)]),
    ("cat_empty_list", lambda m, a: m.cat([]), [(2,)]),
    ("cat_rows_empty", lambda m, a, b: m.cat([a, b]), [(2, 0), (2, 3)]),
    ("stack_shape", lambda m, a, b: m.stack([a, b]), [(2, 3), (3, 2)]),
    ("stack_empty", lambda m, a: m.stack([]), [(2,)]),
    ("stack_dim", lambda m, a, b: m.stack([a, b], 3), [(2, 3), (2, 3)]),
    ("split_zero", lambda m, x: x.split(0), [(3, 4)]),
    ("split_sizes_sum", lambda m, x: x.split([1, 1]), [(3, 4)]),
    ("split_dim", lambda m, x: x.split(1, 2), [(3, 4)]),
    ("chunk_zero", lambda m, x: x.chunk(0), [(3, 4)]),
    ("tensor_split_zero", lambda m, x: x.tensor_split(0), [(3, 4)]),
    ("hsplit_uneven", lambda m, x: x.hsplit(3), [(3, 4)]),
    ("unbind_dim", lambda m, x: x.unbind(2), [(3, 4)]),
    ("flip_dup", lambda m, x: x.flip((0, 0)), [(3, 4)]),
    ("flip_dim", lambda m, x: x.flip(2), [(3, 4)]),
    ("roll_align", lambda m, x: x.roll((1, 2), (0,)), [(3, 4)]),
    ("roll_dim", lambda m, x: x.roll(1, 5), [(3, 4)]),
    ("rot90_dims", lambda m, x: x.rot90(1, [0]), [(3, 4)]),
    ("rot90_same", lambda m, x: x.rot90(1, [0, 0]), [(3, 4)]),
    ("narrow_start", lambda m, x: x.narrow(0, 5, 1), [(3, 4)]),
    ("narrow_len", lambda m, x: x.narrow(0, 1, 5), [(3, 4)]),
    ("narrow_dim", lambda m, x: x.narrow(3, 0, 1), [(3, 4)]),
    ("select_index", lambda m, x: x.select(0, 5), [(3, 4)]),
    ("select_dim", lambda m, x: x.select(2, 0), [(3, 4)]),
    ("tril_1d", lambda m, x: m.tril(x), [(3,)]),
    ("triu_1d", lambda m, x: x.triu(), [(3,)]),
    ("diagonal_same", lambda m, x: x.diagonal(0, 1, 1), [(3, 4)]),
    ("diagonal_dim", lambda m, x: x.diagonal(0, 0, 2), [(3, 4)]),
    ("diag_3d", lambda m, x: m.diag(x), [(2, 2, 2)]),
    ("diag_embed_same", lambda m, x: m.diag_embed(x, 0, 0, 0), [(2, 3)]),
    ("diagonal_scatter_shape", lambda m, x, s: m.diagonal_scatter(x, s), [(3, 4), (4,)]),
    ("repeat_short", lambda m, x: x.repeat(2), [(3, 4)]),
    ("repeat_interleave_size", lambda m, x: x.repeat_interleave(m.tensor([1, 2]), dim=0),
     [(3, 4)]),
    ("repeat_interleave_neg", lambda m, x: x.repeat_interleave(m.tensor([1, -1, 1]), dim=0),
     [(3, 4)]),
    ("unfold_size", lambda m, x: x.unfold(1, 5, 1), [(3, 4)]),
    ("unfold_step", lambda m, x: x.unfold(1, 2, 0), [(3, 4)]),
    ("squeeze_dim", lambda m, x: x.squeeze(3), [(3, 4)]),
    ("unsqueeze_dim", lambda m, x: x.unsqueeze(4), [(3, 4)]),
    ("transpose_dim", lambda m, x: x.transpose(0, 2), [(3, 4)]),
    ("movedim_len", lambda m, x: m.movedim(x, (0, 1), 0), [(3, 4)]),
]


@pytest.mark.parametrize("name,fn,shapes", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, shapes):
    _err(fn, shapes)


PAD_ERRORS = [
    ("odd", (1,), "constant"),
    ("too_long", (1, 1, 1, 1, 1, 1), "constant"),
    ("crop_too_much", (-4, 1), "constant"),
    ("bad_mode", (1, 1), "foo"),
    ("reflect_too_big", (3, 1), "reflect"),
    ("circular_wrap", (4, 1), "circular"),
    ("reflect_1d", (1, 1), "reflect"),
    ("replicate_dims", (1, 1, 1, 1), "replicate"),
]


@pytest.mark.parametrize("name,pads,mode", PAD_ERRORS, ids=[e[0] for e in PAD_ERRORS])
def test_pad_errors(name, pads, mode):
    shape = (3,) if name == "reflect_1d" else (2, 3)
    _err(lambda m, x: _pad(m)(x, pads, mode=mode), [shape])


def test_pad_value_with_mode():
    _err(lambda m, x: _pad(m)(x, (1, 1), mode="reflect", value=1.0), [(2, 3)])


def test_pad_not_in_namespace():
    import torch
    assert not hasattr(torch, "pad") and not hasattr(ember, "pad")
    assert hasattr(ember, "constant_pad_nd")


def test_inplace_tril_triu():
    import torch
    a = np.random.default_rng(0).standard_normal((3, 4))
    for name, args in (("tril_", ()), ("triu_", (1,))):
        e, t = ember.tensor(a), torch.tensor(a)
        assert getattr(e, name)(*args) is e
        getattr(t, name)(*args)
        np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_cat_out():
    import torch
    a = np.ones((2, 3))
    e_out, t_out = ember.zeros(4, 3, dtype=ember.float64), torch.zeros(4, 3, dtype=torch.float64)
    r = ember.cat([ember.tensor(a), ember.tensor(a * 2)], out=e_out)
    torch.cat([torch.tensor(a), torch.tensor(a * 2)], out=t_out)
    assert r is e_out
    np.testing.assert_array_equal(e_out.numpy(), t_out.numpy())


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False),
                                        ((2, 2, 2), False), ((3, 5), False)])
def test_fill_diagonal_matches_torch(shape, wrap):
    import torch
    a, b = ember.zeros(*shape), torch.zeros(*shape)
    assert a.fill_diagonal_(5.0, wrap=wrap) is a
    b.fill_diagonal_(5.0, wrap=wrap)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    x = ember.ones(*shape, requires_grad=True)
    tx = torch.ones(*shape, requires_grad=True)
    y, ty = x * 2, tx * 2
    y.fill_diagonal_(0.0, wrap=wrap)
    ty.fill_diagonal_(0.0, wrap=wrap)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
