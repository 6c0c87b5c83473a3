"""Views' short paths against torch: the gradients of view ops made on arrays when no
graph of the gradient is recorded (the same values, layout and base as the Tensor
formulas give under ``create_graph``), a view's node and tracking made in
``ViewPrimitive.apply``'s common case (nodes, ``_base``, strides, versions, the node a
view gets when its base is changed in place), and the common
``scaled_dot_product_attention`` call."""
import numpy as np
import pytest
import torch
from test_node_names import graph

import ember

_CHAINS = [
    ("view", lambda x: x.view(6, 4)),
    ("view_tuple_neg", lambda x: x.view((-1, 4))),
    ("reshape_alias", lambda x: x.transpose(1, 2).reshape(2, 4, 3, 1)),
    ("reshape_copy", lambda x: x.transpose(1, 2).reshape(2, 12)),
    ("permute", lambda x: x.permute(2, 0, 1)),
    ("permute_neg", lambda x: x.permute((-1, 0, 1))),
    ("transpose", lambda x: x.transpose(0, -1)),
    ("t_of_select", lambda x: x[1].t()),
    ("unsqueeze_squeeze", lambda x: x.unsqueeze(-1).unsqueeze(0).squeeze(-1)),
    ("squeeze_dim", lambda x: x[:, :1].squeeze(1)),
    ("squeeze_no_op", lambda x: x.squeeze(0)),
    ("unflatten", lambda x: x.unflatten(-1, (2, 2))),
    ("select_slice", lambda x: x[:, 1:, 2]),
    ("mha_split", lambda x: x.reshape(2, 12).unflatten(-1, (3, 4)).unsqueeze(0)
     .transpose(0, -2).squeeze(-2).contiguous()[1]),
    ("heads", lambda x: x.reshape(3, 2, 4).view(3, 4, 2).transpose(0, 1).reshape(2, 2, 3, 2)
     .permute(2, 0, 1, 3)),
]


def _pair(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "nonleaf"])
@pytest.mark.parametrize("name,f", _CHAINS, ids=[c[0] for c in _CHAINS])
def test_view_gradients_match_torch_and_the_tensor_formulas(name, f, leaf):
    e, t = _pair((2, 3, 4))
    xe, xt = (e, t) if leaf else (e * 1.0, t * 1.0)
    ye, yt = f(xe), f(xt)
    assert graph(ye.grad_fn) == graph(yt.grad_fn)
    assert ye._is_view() == yt._is_view()
    assert ye.stride() == yt.stride()
    # the gradient arriving is non-contiguous (a transposed weight) so that the views'
    # gradients take their strided and copying forms too
    w = np.random.default_rng(1).standard_normal(tuple(yt.shape)[::-1]).T
    ge, = ember.autograd.grad((ye * ember.tensor(w)).sum(), e, retain_graph=True)
    gt, = torch.autograd.grad((yt * torch.tensor(w)).sum(), t)
    np.testing.assert_array_equal(ge.numpy(), gt.numpy())
    # recorded (create_graph): the Tensor formulas; the same values and layout
    gr, = ember.autograd.grad((ye * ember.tensor(w)).sum(), e, create_graph=True)
    np.testing.assert_array_equal(gr.detach().numpy(), ge.numpy())
    assert gr.stride() == ge.stride()


def _backward_grads(lib, f, a, w, create_graph=False, chain=True):
    """The leaf's gradient through ``f`` by ``backward()`` (the engine's short path, where
    view nodes pass arrays on) after an elementwise op on each side, so that arrays
    arrive at the views and leave them for another array formula."""
    x = lib.tensor(a, requires_grad=True)
    y = f(x.sin() if chain else x)
    (y * lib.tensor(w)).exp().sum().backward(create_graph=create_graph)
    return x.grad.detach().numpy()


@pytest.mark.parametrize("chain", [True, False], ids=["between_ops", "from_leaf"])
@pytest.mark.parametrize("name,f", _CHAINS, ids=[c[0] for c in _CHAINS])
def test_backward_through_views_on_arrays(name, f, chain, monkeypatch):
    a = np.random.default_rng(0).standard_normal((2, 3, 4)) * 0.3
    shape = tuple(f(torch.tensor(a)).shape)
    w = np.random.default_rng(1).standard_normal(shape[::-1]).T * 0.3  # non-contiguous
    calls = []
    for cls in (ember.ops.shape.View, ember.ops.shape.Permute, ember.ops.shape.Transpose,
                ember.ops.shape.Squeeze, ember.ops.shape.Unsqueeze,
                ember.ops.indexing.GetItem):
        orig = cls._array_grads

        def spy(self, gy, g, orig=orig):
            r = orig(self, gy, g)
            calls.append(r is not None)
            return r
        monkeypatch.setattr(cls, "_array_grads", spy)
    fast = _backward_grads(ember, f, a, w, chain=chain)
    arrays_taken = any(calls)
    monkeypatch.undo()
    slow = _backward_grads(ember, f, a, w, create_graph=True, chain=chain)
    want = _backward_grads(torch, f, a, w, chain=chain)
    np.testing.assert_array_equal(fast, slow)
    np.testing.assert_allclose(fast, want, rtol=1e-13, atol=1e-14)
    if chain and name != "squeeze_no_op":
        assert arrays_taken  # a view's node ran on the gradient's array


def test_hooks_and_leaves_after_views_see_what_torch_gives():
    """A view's gradient stays a Tensor view where it is seen: by a hook of the node it
    goes to, and as a leaf's gradient, which never shares memory with another's."""
    seen = {}
    for lib in (ember, torch):
        a = lib.ones(3, 4, requires_grad=True)
        b = lib.ones(12, requires_grad=True)
        z = a * 2.0
        got = []
        z.register_hook(lambda g, got=got: got.append((g._is_view(), g.stride())))
        zt = a.t() * 1.0
        zt.register_hook(lambda g, got=got: got.append((g._is_view(), g.stride())))
        ((z.view(12) + b) * lib.arange(12.0)).sum().backward(retain_graph=True)
        (zt.t().reshape(12) * lib.arange(12.0)).sum().backward()
        (a.view(12) + b).sin().sum().backward()
        with lib.no_grad():
            b.grad.add_(100)
        seen[lib] = (got, a.grad.numpy().copy(), b.grad.numpy().copy(), a.grad.stride())
    assert seen[ember][0] == seen[torch][0]
    for x, y in zip(seen[ember][1:3], seen[torch][1:3]):
        np.testing.assert_allclose(x, y, rtol=1e-6)
    assert seen[ember][3] == seen[torch][3]


def test_hooks_see_view_gradients_as_in_torch():
    seen = {}
    for lib in (ember, torch):
        x = lib.tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True) * 1.0
        v = x.transpose(0, 1)
        v.retain_grad()
        u = v.reshape(3, 8)
        got = []
        u.register_hook(lambda g, got=got: got.append(g.clone()))
        (u * lib.tensor(np.arange(24.0).reshape(3, 8))).sum().backward()
        seen[lib] = (got[0].detach().numpy(), v.grad.detach().numpy(), tuple(v.grad.shape))
    for a, b in zip(seen[ember], seen[torch]):
        np.testing.assert_array_equal(a, b)


def test_second_derivative_through_views():
    e, t = _pair((2, 3, 4))
    outs = []
    for x, lib in ((e, ember), (t, torch)):
        y = (x * x).transpose(0, 2).reshape(4, 6).unsqueeze(0)[0, 1:]
        g, = lib.autograd.grad((y * y).sum(), x, create_graph=True)
        g2, = lib.autograd.grad(g.sum(), x)
        outs.append(g2.detach().numpy())
    np.testing.assert_allclose(outs[0], outs[1])


def test_views_share_base_and_version():
    for lib in (ember, torch):
        x = lib.ones(2, 3, requires_grad=True) * 2.0
        v = x.view(3, 2).transpose(0, 1).unsqueeze(0).squeeze(0)
        assert v._base is x
        before = v._version
        x.add_(1)
        assert v._version == before + 1
    y = ember.zeros(2, 3)
    assert y.view(6)._base is y and y.t().t()._base is y


def test_views_renamed_after_their_base_changes_in_place():
    # more views of one base than the tracking list holds before it drops dead refs
    names = []
    for lib in (ember, torch):
        x = lib.ones(4, 6, requires_grad=True) * 2.0
        kept = [x.view(24) for _ in range(40)] + [x.t(), x[1], x.unsqueeze(0)]
        for _ in range(40):
            x.view(6, 4)  # dropped at once
        x.mul_(3)
        names.append([v.grad_fn.name() for v in kept[-4:]])
        out = sum((v * (i + 1)).sum() for i, v in enumerate(kept[-4:]))
        out.backward()
    assert names[0] == names[1]


def test_in_place_on_a_view_still_checked():
    for lib in (ember, torch):
        x = lib.ones(2, 3, requires_grad=True) * 1.0
        y = x.sin()
        v = y.view(6)
        z = y.cos()  # saves y
        v.mul_(2)   # y's version moves on through its view
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "heads_of_projection"])
def test_common_sdpa_call_matches_torch(dtype, causal, layout):
    rng = np.random.default_rng(0)
    N, H, L, D = 2, 3, 5, 4
    if layout == "contiguous":
        arrs = [rng.standard_normal((N, H, L, D)).astype(dtype) for _ in range(3)]
    else:
        p = rng.standard_normal((N, L, 3, H, D)).astype(dtype)
        arrs = [p[:, :, i] for i in range(3)]
    gy = rng.standard_normal((N, H, L, D)).astype(dtype)
    res = []
    for lib in (ember, torch):
        if layout == "contiguous":
            q, k, v = (lib.tensor(a, requires_grad=True) for a in arrs)
            leaves = (q, k, v)
            qh, kh, vh = q, k, v
        else:
            pt = lib.tensor(p, requires_grad=True)
            leaves = (pt,)
            qh, kh, vh = (pt[:, :, i].transpose(1, 2) for i in range(3))
        out = lib.nn.functional.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)
        assert out.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
        grads = lib.autograd.grad(out, leaves, lib.tensor(gy))
        res.append((out.detach().numpy(), [t.numpy() for t in grads], out.stride()))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=tol, atol=tol)
    for a, b in zip(res[0][1], res[1][1]):
        np.testing.assert_allclose(a, b, rtol=10 * tol, atol=10 * tol)
    assert res[0][2] == res[1][2]


@pytest.mark.parametrize("case", ["dtype", "dropout_range", "mask_shape", "ndim"])
def test_uncommon_sdpa_calls_raise_as_torch(case):
    errs = []
    for lib in (ember, torch):
        q = lib.ones(1, 2, 3, 4)
        args = {"dtype": ((q, q.double(), q), {}),
                "dropout_range": ((q, q, q), {"dropout_p": 1.5}),
                "mask_shape": ((q, q, q), {"attn_mask": lib.zeros(2, 2)}),
                "ndim": ((lib.ones(4), q, q), {})}[case]
        with pytest.raises(Exception) as ei:
            lib.nn.functional.scaled_dot_product_attention(*args[0], **args[1])
        errs.append(type(ei.value))
    assert errs[0] is errs[1]
