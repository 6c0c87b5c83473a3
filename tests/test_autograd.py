"""Autograd behaviour against torch: backward/grad options, accumulation, retain_grad,
freeing, higher derivatives, long chains, grad modes, in-place rules and version
counters, hooks, graph introspection, anomaly mode."""
import threading
import warnings
import weakref

import numpy as np
import pytest
import torch

import ember

LIBS = [ember, torch]
each_lib = pytest.mark.parametrize("m", LIBS, ids=["ember", "torch"])
_rng = np.random.default_rng(0)
A = _rng.standard_normal((3, 4))
B = _rng.standard_normal((3, 4))


def _np(x):
    if x is None:
        return None
    if isinstance(x, (ember.Tensor, torch.Tensor)):
        return np.asarray(x.detach().numpy())
    if isinstance(x, (tuple, list)):
        return [_np(v) for v in x]
    return x


def same(fn, rtol=1e-10, atol=1e-12):
    """Run ``fn(m)`` with ember and torch and compare the (nested) results."""
    e, t = fn(ember), fn(torch)
    _compare(e, t, rtol, atol)
    return e, t


def _compare(e, t, rtol, atol):
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)) and len(e) == len(t), (e, t)
        for a, b in zip(e, t):
            _compare(a, b, rtol, atol)
    elif isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"ember gave {e!r}, torch a tensor"
        assert tuple(e.shape) == tuple(t.shape)
        assert e.dtype.name == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=atol)
    else:
        assert e == t, (e, t)


def leaf(m, a=A, rg=True):
    return m.tensor(a, requires_grad=rg)


# ----- backward and grad ---------------------------------------------------------------

def test_readme_example():
    x = ember.tensor(2.0, requires_grad=True)
    y = ember.tensor(3.0, requires_grad=True)
    z = (x * y + 1) ** 2
    z.backward()
    assert x.grad.item() == 42.0 and y.grad.item() == 28.0


def test_backward_default_gradient_on_scalar():
    def f(m):
        x = leaf(m)
        (x * x).sum().backward()
        return x.grad
    same(f)


def test_backward_with_gradient():
    def f(m):
        x = leaf(m)
        (x.sin() * 3).backward(gradient=m.tensor(B))
        return x.grad
    same(f)


def test_backward_retain_graph_twice():
    def f(m):
        x = leaf(m)
        y = (x.exp() * x).sum()
        y.backward(retain_graph=True)
        first = x.grad.clone()
        y.backward()
        return first, x.grad
    same(f)


def test_backward_create_graph():
    def f(m):
        x = leaf(m)
        (x ** 3).sum().backward(create_graph=True)
        g = x.grad
        assert g.requires_grad and g.grad_fn is not None
        (gx,) = m.autograd.grad(g.sum(), x)
        return g, gx
    same(f)


def test_backward_inputs_only_those_leaves():
    def f(m):
        x, y = leaf(m), leaf(m, B)
        (x * y).sum().backward(inputs=[x])
        return x.grad, y.grad
    same(f)


def test_backward_inputs_non_leaf_is_accumulated():
    def f(m):
        x = leaf(m)
        h = x * 2
        (h * h).sum().backward(inputs=[h])
        return h.grad, x.grad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(f)


def test_backward_non_scalar_without_gradient_raises():
    for m in LIBS:
        x = leaf(m)
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for "
                                               "scalar outputs"):
            (x * 2).backward()


def test_backward_on_tensor_without_grad_raises():
    for m in LIBS:
        with pytest.raises(RuntimeError, match="does not require grad"):
            m.tensor(A).sum().backward()


def test_grad_with_grad_outputs():
    def f(m):
        x, y = leaf(m), leaf(m, B)
        out = x * y.exp()
        return m.autograd.grad(out, (x, y), grad_outputs=m.tensor(B))
    same(f)


def test_grad_several_outputs():
    def f(m):
        x = leaf(m)
        return m.autograd.grad([(x * 2).sum(), (x ** 2).sum()], x)
    same(f)


def test_grad_does_not_touch_dot_grad():
    for m in LIBS:
        x = leaf(m)
        m.autograd.grad((x * x).sum(), x)
        assert x.grad is None


def test_grad_retain_graph():
    def f(m):
        x = leaf(m)
        y = (x.tanh() ** 2).sum()
        g1 = m.autograd.grad(y, x, retain_graph=True)
        g2 = m.autograd.grad(y, x)
        return g1, g2
    same(f)


def test_grad_create_graph_second_derivative():
    def f(m):
        x = leaf(m)
        (g,) = m.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x)
        return g, gg
    same(f)


def test_grad_unused_input_raises_without_allow_unused():
    for m in LIBS:
        x, y = leaf(m), leaf(m, B)
        with pytest.raises(RuntimeError, match="allow_unused=True"):
            m.autograd.grad((x * 2).sum(), (x, y))


def test_grad_allow_unused_gives_none():
    def f(m):
        x, y = leaf(m), leaf(m, B)
        return m.autograd.grad((x * 2).sum(), (x, y), allow_unused=True)
    same(f)


def test_grad_materialize_grads_gives_zeros():
    def f(m):
        x, y = leaf(m), leaf(m, B)
        return m.autograd.grad((x * 2).sum(), (x, y), materialize_grads=True)
    same(f)


def test_grad_materialize_with_allow_unused_false_raises():
    for m in LIBS:
        x = leaf(m)
        with pytest.raises(ValueError):
            m.autograd.grad((x * 2).sum(), x, allow_unused=False, materialize_grads=True)


def test_grad_of_input_that_does_not_require_grad_raises():
    for m in LIBS:
        x, y = leaf(m), leaf(m, B, rg=False)
        with pytest.raises(RuntimeError, match="does not require grad"):
            m.autograd.grad((x * y).sum(), y)


def test_grad_wrt_intermediate():
    def f(m):
        x = leaf(m)
        h = x.exp()
        return m.autograd.grad((h * h).sum(), h)
    same(f)


def test_grad_shape_mismatch_of_grad_outputs_raises():
    for m in LIBS:
        x = leaf(m)
        with pytest.raises(RuntimeError, match="Mismatch in shape"):
            m.autograd.grad(x * 2, x, grad_outputs=m.ones(4, 3, dtype=m.float64))


def test_gradients_accumulate_across_backward_calls():
    def f(m):
        x = leaf(m)
        for k in range(3):
            (x * (k + 1)).sum().backward()
        return x.grad
    e, _ = same(f)
    np.testing.assert_allclose(_np(e), 6.0)


def test_zeroing_grad_then_accumulating():
    def f(m):
        x = leaf(m)
        (x * 2).sum().backward()
        x.grad = None
        (x * 5).sum().backward()
        return x.grad
    same(f)


# ----- non-leaf grads and retain_grad ---------------------------------------------------

def test_non_leaf_grad_is_none_with_warning():
    for m in LIBS:
        x = leaf(m)
        h = x * 2
        h.sum().backward()
        with pytest.warns(UserWarning, match="retain_grad"):
            assert h.grad is None


def test_retain_grad_keeps_non_leaf_grad():
    def f(m):
        x = leaf(m)
        h = x * 2
        h.retain_grad()
        (h ** 2).sum().backward()
        assert h.retains_grad
        return h.grad, x.grad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same(f)


# ----- freeing the graph ---------------------------------------------------------------

def test_second_backward_raises_mentioning_retain_graph():
    for m in LIBS:
        x = leaf(m)
        y = (x.exp() * x).sum()
        y.backward()
        with pytest.raises(RuntimeError, match=r"retain_graph=True"):
            y.backward()


def test_saved_tensors_are_released_after_backward():
    x = ember.tensor(A, requires_grad=True)
    h = x.exp()
    y = (h * h).sum()  # Mul saves both of its inputs: h
    ref = weakref.ref(h)
    del h
    assert ref() is not None  # kept alive by the graph
    y.backward()
    assert ref() is None


def test_saved_tensors_kept_with_retain_graph():
    x = ember.tensor(A, requires_grad=True)
    h = x.exp()
    y = (h * h).sum()
    ref = weakref.ref(h)
    del h
    y.backward(retain_graph=True)
    assert ref() is not None
    del y
    assert ref() is None


# ----- higher order --------------------------------------------------------------------

def test_second_derivative_of_cube():
    def f(m):
        x = m.tensor(2.0, requires_grad=True)
        (g,) = m.autograd.grad(x ** 3, x, create_graph=True)
        (gg,) = m.autograd.grad(g, x)
        return g, gg
    e, _ = same(f)
    assert e[1].item() == 12.0


def test_third_derivative():
    def f(m):
        x = leaf(m)
        (g,) = m.autograd.grad((x.sin() * x.exp()).sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x, create_graph=True)
        (ggg,) = m.autograd.grad(gg.sum(), x)
        return ggg
    same(f)


GRADGRAD_OPS = [
    ("mul", lambda m, a, b: a * b),
    ("div", lambda m, a, b: a / (b * b + 1)),
    ("pow", lambda m, a, b: (a * a + 1) ** b),
    ("exp_sin", lambda m, a, b: a.exp() * b.sin()),
    ("tanh_sigmoid", lambda m, a, b: a.tanh() + b.sigmoid()),
    ("log_sqrt", lambda m, a, b: (a * a + 1).log() * (b * b + 1).sqrt()),
    ("sum_mean", lambda m, a, b: (a * b).sum(0) + (a - b).mean(1, keepdim=True)),
    ("broadcast", lambda m, a, b: a * b[:1]),
    ("matmul", lambda m, a, b: a @ b.T),
    ("view_transpose", lambda m, a, b: a.view(4, 3).t() * b),
]


@pytest.mark.parametrize("name,fn", GRADGRAD_OPS, ids=[g[0] for g in GRADGRAD_OPS])
def test_gradgradcheck_ops(name, fn):
    a = ember.tensor(A[:2, :3].copy(), requires_grad=True)
    b = ember.tensor(B[:2, :3].copy(), requires_grad=True)
    if name == "view_transpose":
        a, b = ember.tensor(A, requires_grad=True), ember.tensor(B, requires_grad=True)
    assert ember.autograd.gradcheck(lambda x, y: fn(ember, x, y), (a, b))
    assert ember.autograd.gradgradcheck(lambda x, y: fn(ember, x, y), (a, b))


def test_long_chain_has_no_recursion_error():
    x = ember.ones(1, dtype=ember.float64, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0001
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 100_000], rtol=1e-9)


# ----- grad modes ----------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "set_grad_enabled"])
@each_lib
def test_modes_as_context_manager(m, mode):
    x = leaf(m)
    ctx = {"no_grad": m.no_grad, "inference_mode": m.inference_mode,
           "set_grad_enabled": lambda: m.set_grad_enabled(False)}[mode]
    with ctx():
        y = x * 2
        assert not m.is_grad_enabled()
    assert m.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "set_grad_enabled"])
@each_lib
def test_modes_as_decorator(m, mode):
    deco = {"no_grad": m.no_grad, "inference_mode": m.inference_mode,
            "set_grad_enabled": lambda: m.set_grad_enabled(False)}[mode]

    @deco()
    def f(t):
        return t * 2, m.is_grad_enabled()

    y, enabled = f(leaf(m))
    assert not enabled and not y.requires_grad
    assert m.is_grad_enabled()


@each_lib
def test_enable_grad_inside_no_grad(m):
    x = leaf(m)
    with m.no_grad():
        with m.enable_grad():
            y = x * 2
        z = x * 2
    assert y.requires_grad and not z.requires_grad

    @m.enable_grad()
    def f(t):
        return t * 2
    with m.no_grad():
        assert f(x).requires_grad


def test_set_grad_enabled_as_function_call():
    for m in LIBS:
        m.set_grad_enabled(False)
        try:
            assert not (leaf(m) * 2).requires_grad
        finally:
            m.set_grad_enabled(True)
        assert (leaf(m) * 2).requires_grad


def test_inference_mode_false_records():
    for m in LIBS:
        with m.inference_mode(False):
            assert (leaf(m) * 2).requires_grad


@each_lib
def test_no_grad_decorates_generator(m):
    @m.no_grad()
    def gen():
        yield m.is_grad_enabled()
        yield m.is_grad_enabled()
    assert list(gen()) == [False, False]
    assert m.is_grad_enabled()


@each_lib
def test_grad_mode_is_thread_local(m):
    seen = {}
    inside = threading.Event()
    checked = threading.Event()

    def worker():
        inside.wait()
        seen["enabled"] = m.is_grad_enabled()
        seen["rg"] = (leaf(m) * 2).requires_grad
        checked.set()

    th = threading.Thread(target=worker)
    th.start()
    with m.no_grad():
        inside.set()
        checked.wait()
    th.join()
    assert seen == {"enabled": True, "rg": True}


# ----- detach, requires_grad, leaves ---------------------------------------------------

def test_detach_shares_memory_and_leaves_graph():
    for m in LIBS:
        x = leaf(m)
        h = x * 2
        d = h.detach()
        assert d.is_leaf and not d.requires_grad and d.grad_fn is None
        d[0, 0] = 100.0
        assert h[0, 0].item() == 100.0
        assert h.requires_grad


def test_detach_inplace():
    for m in LIBS:
        x = leaf(m)
        h = x * 2
        assert h.detach_() is h
        assert h.is_leaf and not h.requires_grad and h.grad_fn is None


def test_requires_grad_and_is_leaf():
    for m in LIBS:
        x = m.tensor(A)
        assert x.is_leaf and not x.requires_grad
        assert x.requires_grad_() is x and x.requires_grad and x.is_leaf
        h = x * 2
        assert not h.is_leaf and h.requires_grad
        with pytest.raises(RuntimeError, match="leaf variables"):
            h.requires_grad_(False)
        x.requires_grad = False
        assert not x.requires_grad
        assert (x * 2).is_leaf


def test_requires_grad_on_integer_tensor_raises():
    for m in LIBS:
        with pytest.raises(RuntimeError, match="floating point"):
            m.tensor([1, 2]).requires_grad_()


# ----- in-place rules and version counters --------------------------------------------

def test_inplace_on_leaf_requiring_grad_raises_before_changing():
    for m in LIBS:
        x = leaf(m)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x.add_(1)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x.mul_(2)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x[0] = 1.0
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x += 1
        np.testing.assert_array_equal(_np(x), A)


def test_inplace_on_leaf_works_under_no_grad():
    def f(m):
        x = leaf(m)
        with m.no_grad():
            x.mul_(2).add_(1)
        assert x.requires_grad and x.is_leaf and x.grad_fn is None
        (x * x).sum().backward()
        return x, x.grad
    same(f)


def test_inplace_on_non_leaf_gradient():
    def f(m):
        x = leaf(m)
        h = x * 1
        h.mul_(x)
        h.add_(2)
        h.sum().backward()
        return h, x.grad
    same(f)


def test_version_counter_increments():
    for m in LIBS:
        x = m.tensor(A)
        assert x._version == 0
        x.add_(1)
        x.mul_(2)
        x[0] = 1.0
        assert x._version == 3


def test_modified_saved_tensor_raises_naming_node():
    for m in LIBS:
        x = leaf(m)
        s = x.sigmoid()  # sigmoid saves its output
        s.mul_(2)
        with pytest.raises(RuntimeError) as err:
            s.sum().backward()
        msg = str(err.value)
        assert "modified by an inplace operation" in msg
        assert "[3, 4]" in msg and "version 1" in msg and "version 0" in msg
        if m is ember:
            assert "SigmoidBackward0" in msg


def test_modified_saved_input_raises():
    for m in LIBS:
        x = leaf(m)
        h = x * 1
        y = h * h  # saves h
        h.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_views_share_version_counter_with_base():
    for m in LIBS:
        base = m.tensor(A)
        v = base[1:]
        w = base.view(12)
        t = base.t()
        v.add_(1)
        assert base._version == v._version == w._version == t._version == 1
        base.mul_(2)
        assert v._version == w._version == 2
        assert base.detach()._version == 2


def test_inplace_through_view_reaches_base_gradient():
    def f(m):
        x = leaf(m)
        h = x * 1
        h[0].mul_(3)
        h.sum().backward()
        return h, x.grad
    same(f)


# ----- hooks ---------------------------------------------------------------------------

def test_tensor_hook_replaces_gradient_and_removes():
    def f(m):
        x = leaf(m)
        seen = []
        handle = x.register_hook(lambda g: seen.append(g.clone()) or g * 10)
        (x * 2).sum().backward()
        first = x.grad.clone()
        handle.remove()
        x.grad = None
        (x * 2).sum().backward()
        return first, x.grad, seen[0], len(seen)
    same(f)


def test_hook_on_intermediate():
    def f(m):
        x = leaf(m)
        h = x * 3
        h.register_hook(lambda g: g + 1)
        (h * h).sum().backward()
        return x.grad
    same(f)


def test_hook_on_tensor_without_grad_raises():
    for m in LIBS:
        with pytest.raises(RuntimeError):
            m.tensor(A).register_hook(lambda g: g)


def test_post_accumulate_grad_hook():
    def f(m):
        x = leaf(m)
        seen = []
        h = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.clone()))
        (x * 2).sum().backward()
        (x * 3).sum().backward()
        h.remove()
        (x * 4).sum().backward()
        return seen, x.grad
    same(f)


def test_post_accumulate_grad_hook_on_non_leaf_raises():
    for m in LIBS:
        with pytest.raises(RuntimeError):
            (leaf(m) * 2).register_post_accumulate_grad_hook(lambda t: None)


# ----- graph introspection ---------------------------------------------------------------

def test_next_functions_walk_to_accumulate_grad():
    for m in LIBS:
        x, y = leaf(m), leaf(m, B)
        z = (x * y).exp()
        assert z.grad_fn.name() == "ExpBackward0"
        ((mul, _),) = z.grad_fn.next_functions
        assert mul.name() == "MulBackward0"
        (ax, nx), (ay, ny) = mul.next_functions
        assert ax.name() == "torch::autograd::AccumulateGrad"
        assert type(ax).__name__ == "AccumulateGrad" and repr(ax).startswith("<AccumulateGrad ")
        assert ax.variable is x and ay.variable is y and nx == ny == 0


def test_next_functions_none_for_constant_input():
    for m in LIBS:
        x = leaf(m)
        z = x * m.tensor(B)
        assert z.grad_fn.next_functions[1] == (None, 0)


def test_grad_fn_names():
    for m in LIBS:
        x = leaf(m)
        names = [(x + x).grad_fn.name(), (x - 1).grad_fn.name(), (x / 2).grad_fn.name(),
                 x.sum().grad_fn.name(), x.sigmoid().grad_fn.name()]
        assert names == ["AddBackward0", "SubBackward0", "DivBackward0", "SumBackward0",
                         "SigmoidBackward0"], (m.__name__, names)


def test_grad_fn_repr_in_tensor():
    x = ember.tensor(2.0, requires_grad=True)
    assert repr(x * 3) == "tensor(6., grad_fn=<MulBackward0>)"


# ----- anomaly mode ----------------------------------------------------------------------

def test_anomaly_mode_names_node_and_prints_forward_line(capfd):
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        with ember.autograd.detect_anomaly():
            y = x.sqrt() * 0.0 + x.sqrt()  # marker: the line that builds the node
            with pytest.raises(RuntimeError, match="SqrtBackward0.*nan"):
                (y * 0).sum().backward()
    err = capfd.readouterr().err
    assert "marker: the line that builds the node" in err
    assert "SqrtBackward0" in err


def test_anomaly_mode_matches_torch_error_type():
    for m in LIBS:
        x = m.tensor([0.0, 1.0], requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with m.autograd.detect_anomaly():
                with pytest.raises(RuntimeError, match="returned nan values"):
                    (x.sqrt() * 0).sum().backward()


def test_anomaly_enabled_flags():
    for m in LIBS:
        assert not m.is_anomaly_enabled()
        with m.autograd.set_detect_anomaly(True):
            assert m.is_anomaly_enabled()
        assert not m.is_anomaly_enabled()


def test_without_anomaly_mode_nan_passes_silently():
    def f(m):
        x = m.tensor([0.0, 1.0], requires_grad=True)
        (x.sqrt() * 0).sum().backward()
        return x.grad
    same(f)


def test_fan_in_gradients_add_up_as_torchs_and_spare_what_others_hold():
    """Gradients meeting at one input (selects and slices of one tensor, plain reuse) sum
    to torch's; the engine adds into a buffered gradient in place only when nothing else
    holds it: a gradient a hook kept keeps its values."""
    import torch

    def f(lib, x, kept):
        y = x * 2
        y.register_hook(lambda g: kept.append(g))    # the hook sees the summed gradient
        z = y * 1
        parts = [z[0], z[1], z[2], z[:, 1:].sum(1), z * 3]
        return sum((p ** 2).sum() for p in parts)

    x0 = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    got, want = [], []
    xe = ember.tensor(x0, requires_grad=True)
    xt = torch.tensor(x0, requires_grad=True)
    f(ember, xe, got).backward()
    f(torch, xt, want).backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)

    # a node hook that keeps the gradient it passes on: a later sum must not change it
    kept = []
    xe = ember.tensor(x0, requires_grad=True)
    a = xe * 1
    b = a[0]
    b.grad_fn.register_hook(lambda gi, go: kept.append(gi[0]))
    loss = (b * 2).sum() + (a[1] * 3).sum()
    loss.backward()
    first = kept[0].numpy().copy()
    assert first[1].sum() == 0 and first[0].sum() == 2 * 4
    np.testing.assert_array_equal(kept[0].numpy(), first)


@pytest.mark.parametrize("case", ["plain", "after_create_graph", "half"])
def test_second_backward_sums_into_grad_as_torch(case):
    # without a graph PyTorch adds into the existing .grad in place: a reference taken
    # before the second backward sees the sum (ember made a new tensor)
    seen = []
    for m in (torch, ember):
        p = m.ones(3, dtype=m.float16 if case == "half" else m.float32, requires_grad=True)
        (p * 2).sum().backward(create_graph=case == "after_create_graph")
        held = p.grad
        (p * 3).sum().backward()
        seen.append((p.grad is held, held.detach().float().numpy().tolist(),
                     p.grad.detach().float().numpy().tolist()))
    assert seen[0] == seen[1]


def test_second_backward_into_an_expanded_grad_makes_a_new_tensor():
    # PyTorch raises ("more than one element of the written-to tensor refers to a single
    # memory location"); ember cannot sum in place either and makes a new .grad
    p = torch.ones(3, requires_grad=True)
    p.grad = torch.zeros(1).expand(3)
    with pytest.raises(RuntimeError, match="single memory location"):
        (p * 3).sum().backward()
    q = ember.ones(3, requires_grad=True)
    q.grad = held = ember.zeros(1).expand(3)
    (q * 3).sum().backward()
    assert q.grad is not held and q.grad.tolist() == [3.0, 3.0, 3.0]
