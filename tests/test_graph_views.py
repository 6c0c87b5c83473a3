"""Whole graphs of views, indexing and writes into views against torch, beyond the oracle
tables' single cases: ``reshape``'s view / ``_reshape_alias`` / clone rule over
contiguous, sliced, expanded and transposed inputs; one node per basic index item;
``x[idx] = v``'s view and expand of the value; in-place ops on views (PyTorch's
``CopySlices`` wrapping the op's node), with their gradients; circular padding."""
import numpy as np
import pytest
import torch
from test_node_names import graph

import ember


def _pair(shape, seed=0, dtype=np.float64):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _same_graph(e, t):
    assert graph(e.grad_fn) == graph(t.grad_fn)


_RESHAPES = [
    ("contiguous", lambda x: x, (6, 4)),
    ("contiguous_same", lambda x: x, (2, 3, 4)),
    ("transposed_viewable", lambda x: x.transpose(1, 2), (2, 4, 3, 1)),
    ("transposed_copy", lambda x: x.transpose(1, 2), (2, 12)),
    ("transposed_outer", lambda x: x.transpose(0, 1), (3, 8)),
    ("sliced_viewable", lambda x: x[:, :2], (2, 8)),
    ("sliced_copy", lambda x: x[:, :, :2], (12,)),
    ("sliced_rows", lambda x: x[:, :, :2], (6, 2)),
    ("expanded_viewable", lambda x: x[:, :1].expand(2, 5, 4), (2, 5, 4, 1)),
    ("expanded_copy", lambda x: x[:, :1].expand(2, 5, 4), (10, 4)),
    ("size_one_dims", lambda x: x[:, :1, :], (2, 4)),
    ("empty", lambda x: x[:, :0], (0, 4)),
]


@pytest.mark.parametrize("name,prep,shape", _RESHAPES, ids=[r[0] for r in _RESHAPES])
def test_reshape_records_torchs_nodes(name, prep, shape):
    e, t = _pair((2, 3, 4))
    ye, yt = prep(e).reshape(shape), prep(t).reshape(shape)
    _same_graph(ye, yt)
    assert ye._is_view() == yt._is_view()
    w = np.random.default_rng(1).standard_normal(yt.shape)
    ge, = ember.autograd.grad((ye * ember.tensor(w)).sum(), e)
    gt, = torch.autograd.grad((yt * torch.tensor(w)).sum(), t)
    np.testing.assert_allclose(ge.numpy(), gt.numpy())


def test_reshape_of_a_tensor_without_grad_is_a_view_where_possible():
    for lib in (ember, torch):
        a = lib.zeros(2, 3, 4)
        assert a.transpose(1, 2).reshape(2, 4, 3, 1)._is_view()
        assert not a.transpose(1, 2).reshape(2, 12)._is_view()


def test_ravel_is_contiguous_then_view():
    e, t = _pair((3, 4))
    for f in (lambda x: x.ravel(), lambda x: x.t().ravel(), lambda x: x[:, :2].ravel(),
              lambda x: x.t().flatten()):
        _same_graph(f(e), f(t))


def test_expand_to_the_same_shape_is_an_expand():
    e, t = _pair((3, 4))
    _same_graph(e.expand(3, 4), t.expand(3, 4))
    _same_graph(e.expand_as(e), t.expand_as(t))
    (ae, be), (at, bt) = ember.broadcast_tensors(e, e * 2), torch.broadcast_tensors(t, t * 2)
    assert ae is e and at is t
    _same_graph(be, bt)


_FULL = slice(None)
_INDICES = [(-1, -2), (slice(0, 100), 1), (slice(0, 3), slice(0, 100)), (None, _FULL, None),
            (0, Ellipsis, slice(1, None)), (0, Ellipsis, 1, Ellipsis), (True,), (False,),
            (_FULL, True, 1), (0, _FULL, [0, 1]), ([1, 0], 2),
            (slice(1, None), [2, 0, 2], slice(None, 2)), ([0, 1], None, [1, 2]),
            (slice(None, None, 2), slice(1, None, 2)), (None, Ellipsis, 0), (1, 2, 3),
            (_FULL, _FULL, 0), (slice(-2, None), slice(None, -1)), (1, None, 2),
            (None, None), (0, True), (Ellipsis,), (_FULL, _FULL)]


@pytest.mark.parametrize("idx", _INDICES, ids=[repr(i) for i in _INDICES])
def test_each_basic_index_item_is_a_node(idx):
    e, t = _pair((3, 4, 5))
    ye, yt = e[idx], t[idx]
    _same_graph(ye, yt)
    w = np.random.default_rng(2).standard_normal(yt.shape)
    ge, = ember.autograd.grad((ye * ember.tensor(w)).sum(), e)
    gt, = torch.autograd.grad((yt * torch.tensor(w)).sum(), t)
    np.testing.assert_allclose(ge.numpy(), gt.numpy())


def test_index_without_grad_is_one_view():
    x = ember.zeros(3, 4, 5)
    y = x[1, 2]
    assert y._is_view() and y.grad_fn is None
    assert np.shares_memory(y.numpy(), x.numpy())


_SETS = [((3, 4), (2,), (_FULL, slice(1, 3))), ((3, 4), (1, 1, 4), 0),
         ((2, 3, 4), (2, 1), (Ellipsis, 0)), ((3, 4), (4,), 1), ((3, 4), (3, 4), _FULL),
         ((3, 4), (4,), _FULL), ((3, 4), (), 1), ((3, 4), (1,), 1),
         ((3, 4), (1, 2), ([0, 1], 1)), ((3, 4), (3, 1), (_FULL, slice(0, 2))),
         ((3, 4), (1, 1, 2), (_FULL, slice(0, 2)))]


@pytest.mark.parametrize("xs,vs,idx", _SETS, ids=[repr(s) for s in _SETS])
@pytest.mark.parametrize("cast", [False, True])
def test_setitem_prepares_the_value_as_torch(xs, vs, idx, cast):
    if cast and any(isinstance(i, list) for i in (idx if type(idx) is tuple else (idx,))):
        return  # torch's index_put takes no value of another dtype
    ex, tx = _pair(xs)
    ev, tv = _pair(vs, seed=3)
    outs = []
    for lib, x, v in ((ember, ex, ev), (torch, tx, tv)):
        y = x * 2
        y[idx] = v.float() if cast else v
        g = lib.autograd.grad((y * y).sum(), (x, v))
        outs.append((y, g))
    _same_graph(outs[0][0], outs[1][0])
    for a, b in zip(outs[0][1], outs[1][1]):
        assert a.dtype == ember.float64
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


_INPLACE = [
    ("mul_number", lambda y, z: y[:, 0].mul_(2)),
    ("mul_tensor", lambda y, z: y[1].mul_(z)),
    ("exp", lambda y, z: y[1:, ::2].exp_()),
    ("add_broadcast", lambda y, z: y[:, 1:3].add_(z[:1])),
    ("view_of_view", lambda y, z: y[1:][:, 2].mul_(z[:2])),
    ("transposed", lambda y, z: y.t()[1].add_(z[:3])),
    ("setitem", lambda y, z: y[0].__setitem__(slice(1, 3), z[:2])),
    ("masked_fill_tensor", lambda y, z: y[1].masked_fill_(y[1] > 0, z.sum())),
    ("copy", lambda y, z: y[2].copy_(z)),
    ("twice", lambda y, z: (y[0].mul_(z), y[:, 1].sub_(3))),
]


@pytest.mark.parametrize("name,op", _INPLACE, ids=[r[0] for r in _INPLACE])
def test_inplace_on_a_view_wraps_the_ops_node(name, op):
    ex, tx = _pair((3, 4))
    ez, tz = _pair((4,), seed=4)
    outs = []
    for lib, x, z in ((ember, ex, ez), (torch, tx, tz)):
        y = x * 1.5
        op(y, z)
        out = y * y
        gx, gz = lib.autograd.grad(out.sum(), (x, z), create_graph=True, allow_unused=True)
        second = (gx * gx).sum() + (0 if gz is None else (gz * gz).sum())
        ggx, = lib.autograd.grad(second, x, allow_unused=True)
        outs.append((y, out, gx, gz, ggx))
    _same_graph(outs[0][0], outs[1][0])
    for a, b in zip(outs[0][1:], outs[1][1:]):
        if b is None:
            assert a is None or not a.detach().numpy().any()
        else:
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("shape,pad", [((2, 4), (2, 3)), ((2, 3, 4), (1, 1, 2, 0)),
                                       ((2, 5), (-2, 1)), ((2, 5), (2, -1)),
                                       ((1, 2, 3, 4, 5), (1, 2, 0, 1, 2, 1)), ((3, 4), (4, 0))])
def test_circular_pad_records_torchs_copies(shape, pad):
    e, t = _pair(shape)
    ye = ember.nn.functional.pad(e, pad, mode="circular")
    yt = torch.nn.functional.pad(t, pad, mode="circular")
    _same_graph(ye, yt)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy())
    w = np.arange(yt.numel(), dtype=np.float64).reshape(yt.shape)
    ge, = ember.autograd.grad((ye * ember.tensor(w)).sum(), e)
    gt, = torch.autograd.grad((yt * torch.tensor(w)).sum(), t)
    np.testing.assert_allclose(ge.numpy(), gt.numpy())


def test_take_put_masked_select_are_one_node_over_their_inputs():
    ex, tx = _pair((3, 4))
    ev, tv = _pair((2, 2), seed=5)
    for f in (lambda m, x, v: m.take(x, m.tensor([[0, 11], [5, 5]])),
              lambda m, x, v: x.put(m.tensor([[1, 1], [0, 7]]), v, accumulate=True),
              lambda m, x, v: (x * 1).put_(m.tensor([3, 2, 1, 0]), v),
              lambda m, x, v: m.masked_select(x, m.tensor([True, False, True, True])),
              lambda m, x, v: m.narrow_copy(x, 1, -3, 2), lambda m, x, v: m.diag(x, 1)):
        ye, yt = f(ember, ex, ev), f(torch, tx, tv)
        _same_graph(ye, yt)
        ge = ember.autograd.grad((ye * ye).sum(), (ex, ev), allow_unused=True)
        gt = torch.autograd.grad((yt * yt).sum(), (tx, tv), allow_unused=True)
        for a, b in zip(ge, gt):
            assert (a is None) == (b is None)
            if b is not None:
                np.testing.assert_allclose(a.numpy(), b.numpy())


def test_setitem_with_an_advanced_index_takes_no_other_dtype():
    # index_put_ takes no value of another dtype; a 0-d value under one mask is a
    # masked_fill_ (which casts); a shape that cannot be written is reported first
    outs = []
    for lib in (ember, torch):
        m = lib.tensor([True, False, True])
        res = []
        for v in (lib.ones(2), lib.ones(1, 2), lib.tensor(1.0), lib.tensor(1), lib.ones(4)):
            for idx in (([0, 1], 1), ([0, 1],), (m,), m, lib.tensor([0, 2]), (m, 1)):
                y = lib.zeros(3, 4, dtype=lib.float64)
                try:
                    y[idx] = v
                    res.append(("ok", y.sum().item()))
                except RuntimeError as e:
                    res.append(("error", str(e)))
        outs.append(res)
    assert outs[0] == outs[1]
