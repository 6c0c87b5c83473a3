"""Saved-tensor hooks (``torch.autograd.graph.saved_tensors_hooks``, ``save_on_cpu``,
``disable_saved_tensors_hooks``) against torch 2.13: which tensors are packed, what
backward computes from the unpacked values, custom Functions, double backward, in-place
checks and errors."""
import numpy as np
import pytest
import torch

import ember

X = np.arange(6.0).reshape(2, 3) / 5 - 0.4
W = np.linspace(-1, 1, 6).reshape(3, 2)


def _leaves(m):
    return (m.tensor(X, requires_grad=True), m.tensor(W, requires_grad=True))


def _record(m, fn, pack=None, unpack=None):
    """Run ``fn`` under hooks that record what is packed; return the log and grads."""
    log = []

    def pk(t):
        log.append((tuple(t.shape), str(t.dtype).split(".")[-1], t.requires_grad))
        return pack(t) if pack else t

    x, w = _leaves(m)
    with m.autograd.graph.saved_tensors_hooks(pk, unpack or (lambda p: p)):
        y = fn(m, x, w)
    y.backward()
    return sorted(log), x.grad.numpy(), w.grad.numpy()


CASES = {
    "matmul_tanh": lambda m, x, w: (x @ w).tanh().sum(),
    "exp_mul": lambda m, x, w: (x.exp() * x).sum() + (w ** 2).sum(),
    "softmax_ce": lambda m, x, w: m.nn.functional.cross_entropy(x @ w, m.tensor([0, 1])),
    "layer_norm": lambda m, x, w: m.nn.functional.layer_norm(x, (3,)).pow(2).sum() + w.sum(),
    "sigmoid_div": lambda m, x, w: (x.sigmoid() / (1 + w.sum())).sum(),
}


# ops whose backward saves the same tensors in ember as in torch (ember's fused
# cross_entropy and layer_norm save other intermediates than torch's kernels)
SAME_SAVES = ["matmul_tanh", "exp_mul", "sigmoid_div"]


@pytest.mark.parametrize("name", SAME_SAVES)
def test_the_same_tensors_are_packed_as_in_torch(name):
    want = _record(torch, CASES[name])
    got = _record(ember, CASES[name])
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-12)


@pytest.mark.parametrize("name", SAME_SAVES)
def test_backward_computes_with_what_unpack_returns(name):
    # packed values doubled and not halved back: backward sees the doubled values
    def pack(t):
        return t.detach() * 2

    want = _record(torch, CASES[name], pack, lambda p: p)
    got = _record(ember, CASES[name], pack, lambda p: p)
    assert not np.allclose(got[1], _record(ember, CASES[name])[1])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-10, atol=1e-12)


def _entries(fn):
    """Every saved entry of every node in the graph under ``fn``."""
    seen, todo, out = set(), [fn], []
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        out += list(n.__dict__.get("_saved") or type(n)._saved or [])
        todo += [f for f, _ in n.next_functions]
    return out


@pytest.mark.parametrize("name", CASES)
def test_every_saved_tensor_goes_through_the_hooks(name):
    # pack hands back a key, not a tensor: backward can only work through unpack
    store = {}

    def pack(t):
        store[len(store)] = t.detach().clone()
        return len(store) - 1

    x, w = _leaves(ember)
    with ember.autograd.graph.saved_tensors_hooks(pack, store.__getitem__):
        y = CASES[name](ember, x, w)
    entries = _entries(y.grad_fn)
    assert store and all(type(e) is ember.autograd._saved_hooks.Packed for e in entries
                         if type(e) is not tuple or isinstance(e[0], ember.Tensor)), entries
    y.backward()
    # exactly what ember computes without hooks, and torch's numbers
    x0, w0 = _leaves(ember)
    CASES[name](ember, x0, w0).backward()
    assert np.array_equal(x.grad.numpy(), x0.grad.numpy())
    assert np.array_equal(w.grad.numpy(), w0.grad.numpy())
    _, gx, gw = _record(torch, CASES[name])
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-10, atol=1e-13)


def _nested(m):
    seen = []
    x, _ = _leaves(m)
    with m.autograd.graph.saved_tensors_hooks(lambda t: seen.append("outer") or t,
                                              lambda t: t):
        with m.autograd.graph.saved_tensors_hooks(
                lambda t: seen.append(("inner", m.is_grad_enabled())) or t.exp(),
                lambda t: t.log()):
            y = (x * x).sum()
        z = (x.sin()).sum()
    (y + z).backward()
    return seen, x.grad.numpy()


def test_pack_runs_without_grad_and_nests_innermost_first():
    for m in (torch, ember):
        seen, grad = _nested(m)
        assert seen == [("inner", False), ("inner", False), "outer"], seen
        np.testing.assert_allclose(grad, 2 * X + np.cos(X), rtol=1e-12)


def _custom(m):
    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            r = a.sin()
            ctx.save_for_backward(a, r)
            return r

        @staticmethod
        def backward(ctx, g):
            a, r = ctx.saved_tensors
            return g * a.cos() + 0 * r

    shapes = []
    x, _ = _leaves(m)
    with m.autograd.graph.saved_tensors_hooks(
            lambda t: shapes.append(tuple(t.shape)) or t.detach() * 3, lambda p: p / 3):
        y = F.apply(x).sum()
    y.backward()
    return shapes, x.grad.numpy()


def test_custom_function_saved_tensors_go_through_hooks():
    want, got = _custom(torch), _custom(ember)
    assert got[0] == want[0] == [(2, 3), (2, 3)]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


def test_double_backward_through_unpacked_tensors():
    grads = []
    for m in (torch, ember):
        x, _ = _leaves(m)
        with m.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone() if
                                                  not t.requires_grad else t, lambda p: p):
            y = (x ** 3).sum()
            (g,) = m.autograd.grad(y, x, create_graph=True)
        g.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_save_on_cpu_keeps_values_and_graph():
    res = []
    for m in (torch, ember):
        x, w = _leaves(m)
        for pin in (False, True):
            with m.autograd.graph.save_on_cpu(pin_memory=pin):
                y = ((x @ w).relu() * x.sum()).sum()
            y.backward()
        res.append((x.grad.numpy(), w.grad.numpy()))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-12)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-12)
    assert issubclass(ember.autograd.graph.save_on_cpu, ember.autograd.graph.saved_tensors_hooks)


def test_in_place_change_after_packing_is_not_checked_as_in_torch():
    # torch checks versions of saved tensors only without hooks: with them, backward
    # reads what unpack returns, the changed values included
    grads = []
    for m in (torch, ember):
        x, _ = _leaves(m)
        a = x * 1
        with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: p):
            b = a.exp()
            c = a.sin()
        b.add_(1)
        a.add_(1)
        (b.sum() + c.sum()).backward()
        grads.append(x.grad.numpy())
        a = x * 1  # without hooks the same change raises
        b = a.exp()
        b.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            b.sum().backward()
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_errors_as_torch():
    for m in (torch, ember):
        x, _ = _leaves(m)
        with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: 5):
            y = (x * x).sum()
        with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
            y.backward()
        with m.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            with pytest.raises(RuntimeError, match="no hooks here"):
                with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: p):
                    pass
        # leaving the disabling context allows hooks again
        with m.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: p):
            pass
    assert not ember.autograd._saved_hooks.stack


def test_no_hooks_no_packing_and_no_grad_records_nothing():
    calls = []
    x, _ = _leaves(ember)
    with ember.autograd.graph.saved_tensors_hooks(lambda t: calls.append(1) or t,
                                                  lambda p: p):
        with ember.no_grad():
            (x * x).sum()
    assert calls == []
    y = (x * x).sum()  # outside the context: nothing packed
    entries = _entries(y.grad_fn)
    assert calls == [] and entries and all(type(s) is tuple for s in entries)
