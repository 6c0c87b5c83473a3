"""The per-op fast paths against torch 2.13: a leaf's gradients summed before they reach
it (its hooks see the total, once), Python numbers beside float tensors, nodes made only
when recorded, saved inputs and outputs read on the short path (with their in-place
checks), a full reduction's gradient, and hooks that still cannot see ``saved_tensors``."""
import numpy as np
import pytest
import torch

import ember

A = np.array([0.3, -1.2, 2.5, 0.7], np.float32)
B = np.array([1.1, 0.4, -0.8, 2.0], np.float32)


def _leaves(m, dtype=np.float32):
    return (m.tensor(A.astype(dtype), requires_grad=True),
            m.tensor(B.astype(dtype), requires_grad=True))


def _np(t):
    return t.detach().numpy()


def _chain(m, x, w):
    """The benchmark's chain: each op family, with ``w`` used by several nodes."""
    y = x
    for _ in range(3):
        y = m.exp(m.tanh(m.sin(y * w + w))) - w
        y = y / 3.0
    return y.sum()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chain_gradients_match(dtype):
    got = []
    for m in (ember, torch):
        x, w = _leaves(m, dtype)
        _chain(m, x, w).backward()
        got.append((_np(x.grad), _np(w.grad)))
    for e, t in zip(*got):
        np.testing.assert_allclose(e, t, rtol=1e-6 if dtype == np.float64 else 1e-5)


def test_leaf_hooks_see_the_total_once():
    logs = []
    for m in (ember, torch):
        x, _ = _leaves(m)
        log = []
        x.register_hook(lambda g, log=log: log.append(("hook", _np(g).copy())))
        x.register_post_accumulate_grad_hook(
            lambda t, log=log: log.append(("post", _np(t.grad).copy())))
        (x * 2 + x * 3 + x.sin()).sum().backward()
        logs.append(log)
    e, t = logs
    assert [k for k, _ in e] == [k for k, _ in t] == ["hook", "post"]
    for (_, ge), (_, gt) in zip(e, t):
        np.testing.assert_allclose(ge, gt, rtol=1e-6)


def test_hook_replaces_the_summed_leaf_gradient():
    grads = []
    for m in (ember, torch):
        x, w = _leaves(m)
        x.register_hook(lambda g: g * 10)
        (x * w + x).sum().backward()
        grads.append(_np(x.grad))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_summed_leaf_gradients_are_not_aliased():
    """``x + w`` passes one gradient to both leaves: summing in place must not reach the
    other leaf's ``.grad``, the user's grad_output, or an earlier ``.grad``."""
    out = []
    for m in (ember, torch):
        x, w = _leaves(m)
        g0 = m.ones(4)
        y = x + w
        (y + x).backward(g0)
        old = x.grad
        x.grad.mul_(0)  # changes nothing but x.grad
        out.append((_np(w.grad).copy(), _np(g0).copy(), _np(old).copy()))
        x.grad = None
        (x * 1.0 + x).sum().backward()
        out[-1] += (_np(x.grad).copy(),)
    for e, t in zip(*out):
        np.testing.assert_array_equal(e, t)


def test_gradients_accumulate_across_passes():
    res = []
    for m in (ember, torch):
        x, w = _leaves(m)
        for _ in range(3):
            (x * w + x + w).sum().backward()
        res.append((_np(x.grad).copy(), _np(w.grad).copy()))
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-6)


def test_autograd_grad_of_a_leaf_used_many_times():
    res = []
    for m in (ember, torch):
        x, w = _leaves(m)
        loss = _chain(m, x, w)
        gw, = m.autograd.grad(loss, [w], retain_graph=True)
        gx, gw2 = m.autograd.grad(loss, [x, w])
        res.append((_np(gw), _np(gx), _np(gw2), x.grad, w.grad))
    for e, t in zip(res[0][:3], res[1][:3]):
        np.testing.assert_allclose(e, t, rtol=1e-5)
    assert res[0][3:] == res[1][3:] == (None, None)


def test_backward_inputs_leaf_subset():
    res = []
    for m in (ember, torch):
        x, w = _leaves(m)
        _chain(m, x, w).backward(inputs=[w])
        res.append((x.grad, _np(w.grad)))
    assert res[0][0] is None and res[1][0] is None
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5)


def test_second_derivatives_through_the_chain():
    res = []
    for m in (ember, torch):
        x, w = _leaves(m, np.float64)
        gx, = m.autograd.grad(_chain(m, x, w), [x], create_graph=True)
        gw, = m.autograd.grad(gx.sum(), [w])
        res.append((_np(gx), _np(gw)))
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("number", [3.0, 0.1, -0.0, 0.0, 1e39, -1e39, float("nan"),
                                    float("inf"), 7, 2 ** 30 + 1, -(2 ** 24)])
def test_python_numbers_beside_float_tensors(dtype, number):
    ops = {"add": lambda t: t + number, "sub": lambda t: t - number,
           "mul": lambda t: t * number, "div": lambda t: t / number}
    for op, fn in ops.items():
        e, t = (fn(m.tensor(A.astype(dtype))) for m in (ember, torch))
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], op
        np.testing.assert_array_equal(_np(e), _np(t), err_msg=f"{op} {number}")


def test_python_numbers_beside_integer_and_zero_dim_tensors():
    for make in (lambda m: m.tensor([1, 2, 3]), lambda m: m.tensor(2.5),
                 lambda m: m.tensor([True, False])):
        for number in (2, 0.5, -3):
            e, t = (make(m) * number for m in (ember, torch))
            assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
            np.testing.assert_array_equal(_np(e), _np(t))
            e, t = (make(m) / number for m in (ember, torch))
            np.testing.assert_array_equal(_np(e), _np(t))


def test_nodes_made_only_when_recorded():
    names = []
    for m in (ember, torch):
        x, w = _leaves(m)
        ys = [x * w, x + w, x - w, x / w, x / 2.0, x.sin(), x.tanh(), x.exp(),
              m.add(x, w, alpha=2)]
        names.append([type(y.grad_fn).__name__ for y in ys])
        with m.no_grad():
            assert (x * w).grad_fn is None and x.sin().grad_fn is None
        c = m.tensor(A)
        assert (c * 2).grad_fn is None and c.cos().grad_fn is None
    assert names[0] == names[1]


def test_saved_output_modified_in_place_raises():
    for make in (lambda x: x.exp(), lambda x: x.tanh()):
        errors = []
        for m in (ember, torch):
            x, _ = _leaves(m)
            y = make(x)
            y.add_(1)
            with pytest.raises(RuntimeError) as err:
                y.sum().backward()
            errors.append(str(err.value))
        assert all("modified by an inplace operation" in e for e in errors)


def test_saved_inputs_modified_in_place_raise():
    errors = []
    for m in (ember, torch):
        x, w = _leaves(m)
        a, b = x * 1, w * 1
        y = a * b
        b.mul_(2)
        with pytest.raises(RuntimeError) as err:
            y.sum().backward()
        errors.append(str(err.value))
    assert all("modified by an inplace operation" in e for e in errors)


def test_full_reduction_gradient():
    res = []
    for m in (ember, torch):
        x = m.tensor(A.reshape(2, 2).astype(np.float64), requires_grad=True)
        g, = m.autograd.grad((x * x).sum(), [x], create_graph=True)
        gg, = m.autograd.grad(g.sum(), [x])
        s = x.sum()
        s.backward(m.tensor(3.0, dtype=m.float64))
        res.append((_np(g), _np(gg), _np(x.grad), type(g.grad_fn).__name__))
    for e, t in zip(res[0][:3], res[1][:3]):
        np.testing.assert_allclose(e, t)
    assert res[0][3] == res[1][3]


def _hook_views(m):
    x, w = _leaves(m)
    y = x * w
    z = y.sin().sum()
    fn = y.grad_fn
    log = []

    def look(*_):
        log.append(hasattr(fn, "saved_tensors"))
    fn.register_hook(look)
    fn.register_prehook(look)
    x.register_hook(look)
    y.register_hook(look)
    z.backward()
    return log


def test_hooks_do_not_see_saved_tensors():
    assert _hook_views(ember) == _hook_views(torch) == [False] * 4


def _hooked_chain(m):
    x, w = _leaves(m)
    h = x * w
    h.retain_grad()
    y = h.tanh()
    calls = []
    y.grad_fn.register_hook(lambda gi, go: calls.append(len(gi)))
    y.grad_fn.register_prehook(lambda go: (go[0] * 2,))
    y.exp().sum().backward()
    return _np(h.grad), _np(x.grad), _np(w.grad), calls


def test_node_hooks_and_retain_grad_on_the_chain():
    e, t = _hooked_chain(ember), _hooked_chain(torch)
    for a, b in zip(e[:3], t[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert e[3] == t[3]


class _Methods:
    def plain(self, a, b):
        return a + b

    def keeps(self, a, b):
        self.kept = a
        return b

    def calls_super(self, a, b):
        return super().__eq__(a)

    def closes_over(self, a, b):
        return lambda: self

    def reads_late(self, a, b):
        c = a * b
        d = [c] * 3
        return d, getattr(self, "x", None)


def test_forward_reading_its_node_is_detected():
    """Fast op functions skip making a node before ``forward`` only where ``forward``
    provably never touches it; every other spelling keeps the node."""
    from ember.autograd.node import _reads_self
    assert not _reads_self(_Methods.plain)
    assert all(_reads_self(getattr(_Methods, n))
               for n in ("keeps", "calls_super", "closes_over", "reads_late"))
    # the op whose forward keeps alpha on its node still records and computes right
    e, t = (m.add(*_leaves(m), alpha=3) for m in (ember, torch))
    np.testing.assert_allclose(_np(e), _np(t))
    e.sum().backward()
