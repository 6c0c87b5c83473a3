"""User autograd.Function, gradcheck/gradgradcheck and autograd.functional, against torch."""
import math
import warnings

import numpy as np
import pytest
import torch

import ember

LIBS = [ember, torch]
each_lib = pytest.mark.parametrize("m", LIBS, ids=["ember", "torch"])
_rng = np.random.default_rng(0)
A = _rng.standard_normal((3, 4))
B = _rng.standard_normal((3, 4))
V = _rng.standard_normal(4)


def _np(x):
    if isinstance(x, (ember.Tensor, torch.Tensor)):
        return np.asarray(x.detach().numpy())
    return x


def _compare(e, t, rtol=1e-10, atol=1e-12):
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)) and len(e) == len(t), (e, t)
        for a, b in zip(e, t):
            _compare(a, b, rtol, atol)
    elif isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"ember gave {e!r}, torch a tensor"
        assert tuple(e.shape) == tuple(t.shape), (e.shape, t.shape)
        assert e.dtype.name == str(t.dtype).replace("torch.", "")
        assert e.requires_grad == t.requires_grad
        np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=atol)
    else:
        assert e == t, (e, t)


def same(fn, **tol):
    e, t = fn(ember), fn(torch)
    _compare(e, t, **tol)
    return e, t


# The custom Functions are defined once per library, from the same source.
def make_functions(m):
    class LegendrePolynomial3(m.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    class ScaleShift(m.autograd.Function):
        """Non-tensor arguments, attributes on ctx, needs_input_grad."""

        @staticmethod
        def forward(ctx, x, scale, y, shift=0.0):
            ctx.scale = scale
            ctx.seen_forward = ctx.needs_input_grad
            ctx.save_for_backward(x, y)
            return x * scale + y * y + shift

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            ctx.seen_backward = ctx.needs_input_grad
            gx = g * ctx.scale if ctx.needs_input_grad[0] else None
            gy = g * 2 * y if ctx.needs_input_grad[2] else None
            return gx, None, gy, None

    class TwoOutputs(m.autograd.Function):
        """Several outputs, one not differentiable."""

        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            mask = (x > 0).to(x.dtype)
            ctx.mark_non_differentiable(mask)
            ctx.save_for_backward(y)
            return y, mask

        @staticmethod
        def backward(ctx, gy, gmask):
            (y,) = ctx.saved_tensors
            ctx.gmask = gmask
            return gy * y

    class Unmaterialized(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            ctx.got = (g1 is None, g2 is None)
            out = 0
            if g1 is not None:
                out = out + g1 * 2
            if g2 is not None:
                out = out + g2 * 3
            return out

    class Materialized(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            ctx.got = (g1.clone(), g2.clone())
            return g1 * 2 + g2 * 3

    class MulInplace(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            x.mul_(k)
            ctx.mark_dirty(x)
            ctx.k = k
            return x

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    class OnceExp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        @m.autograd.function.once_differentiable
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    class WrongCount(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    class Identity(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class SetupCtxCube(m.autograd.Function):
        @staticmethod
        def forward(x, power=3):
            return x ** power

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, power = inputs
            ctx.power = power
            ctx.save_for_backward(x, output)

        @staticmethod
        def backward(ctx, g, ):
            x, out = ctx.saved_tensors
            return g * ctx.power * x ** (ctx.power - 1), None

    class BadShape(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g[:1]

    class Broadcast(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.expand(2, *g.shape) if g.dim() else g

    class GradForNonTensor(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    return dict(P3=LegendrePolynomial3, ScaleShift=ScaleShift, TwoOutputs=TwoOutputs,
                Unmaterialized=Unmaterialized, Materialized=Materialized,
                MulInplace=MulInplace, OnceExp=OnceExp, WrongCount=WrongCount,
                Identity=Identity, SetupCtxCube=SetupCtxCube, BadShape=BadShape,
                Broadcast=Broadcast, GradForNonTensor=GradForNonTensor)


FNS = {ember: make_functions(ember), torch: make_functions(torch)}


def leaf(m, a=A, rg=True):
    return m.tensor(a, requires_grad=rg)


# ----- Function ----------------------------------------------------------------------

def test_legendre_forward_backward_double_backward():
    def f(m):
        x = leaf(m)
        y = FNS[m]["P3"].apply(x)
        (g,) = m.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x)
        return y, g, gg
    same(f)


def test_legendre_tutorial_trains():
    """PyTorch's "Defining new autograd Functions" tutorial, 300 steps, float64."""
    def train(m):
        x = m.linspace(-math.pi, math.pi, 2000, dtype=m.float64)
        y = m.sin(x)
        a = m.full((), 0.0, dtype=m.float64, requires_grad=True)
        b = m.full((), -1.0, dtype=m.float64, requires_grad=True)
        c = m.full((), 0.0, dtype=m.float64, requires_grad=True)
        d = m.full((), 0.3, dtype=m.float64, requires_grad=True)
        lr = 5e-6
        losses = []
        P3 = FNS[m]["P3"].apply
        for _ in range(300):
            y_pred = a + b * P3(c + d * x)
            loss = (y_pred - y).pow(2).sum()
            losses.append(loss.item())
            loss.backward()
            with m.no_grad():
                for p in (a, b, c, d):
                    p -= lr * p.grad
                    p.grad = None
        return losses, [p.item() for p in (a, b, c, d)]
    (le, pe), (lt, pt) = train(ember), train(torch)
    np.testing.assert_allclose(le, lt, rtol=1e-9)
    np.testing.assert_allclose(pe, pt, rtol=1e-9, atol=1e-12)
    assert le[-1] < le[0] / 4


def test_grad_fn_name_and_repr():
    x = leaf(ember)
    y = FNS[ember]["P3"].apply(x)
    assert y.grad_fn.name() == "LegendrePolynomial3Backward"
    assert type(y.grad_fn).__name__ == "LegendrePolynomial3Backward"
    assert "grad_fn=<LegendrePolynomial3Backward>" in repr(y)
    t = FNS[torch]["P3"].apply(leaf(torch))
    assert t.grad_fn.name() == y.grad_fn.name()


def test_non_tensor_args_ctx_attributes_needs_input_grad():
    def f(m):
        x, y = leaf(m), leaf(m, B, rg=False)
        out = FNS[m]["ScaleShift"].apply(x, 2.5, y, 1.0)
        out.sum().backward()
        ctx = out.grad_fn
        assert ctx.scale == 2.5
        return out, x.grad, ctx.seen_forward, ctx.seen_backward
    e, _ = same(f)
    assert e[2] == (True, False, False, False)


def test_needs_input_grad_under_no_grad():
    def f(m):
        x = leaf(m)
        with m.no_grad():
            out = FNS[m]["P3"].apply(x)
        return out, out.requires_grad, out.grad_fn is None
    same(f)


def test_saved_tensor_modified_in_place_raises():
    for m in LIBS:
        x = leaf(m)
        h = x * 1
        out = FNS[m]["P3"].apply(h)
        h.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


def test_saved_tensors_freed_after_backward():
    for m in LIBS:
        x = leaf(m)
        out = FNS[m]["P3"].apply(x)
        ctx = out.grad_fn
        out.sum().backward()
        with pytest.raises(RuntimeError, match="retain_graph=True"):
            _ = ctx.saved_tensors


def test_saved_tensors_kept_with_retain_graph():
    def f(m):
        x = leaf(m)
        out = FNS[m]["P3"].apply(x)
        out.sum().backward(retain_graph=True)
        out.sum().backward()
        return x.grad
    same(f)


def test_save_for_backward_rejects_non_tensors():
    class Bad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 1

    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        Bad.apply(leaf(ember))


def test_mark_non_differentiable_and_materialized_zero_grad():
    def f(m):
        x = leaf(m)
        y, mask = FNS[m]["TwoOutputs"].apply(x)
        y.sum().backward()
        return y, mask, x.grad, y.grad_fn.gmask
    same(f)


def test_saved_output_is_double_differentiable():
    def f(m):
        x = leaf(m)
        y, _ = FNS[m]["TwoOutputs"].apply(x)
        (g,) = m.autograd.grad((y * y).sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x)
        return g, gg
    same(f)


def test_materialize_grads_default_gives_zeros():
    def f(m):
        x = leaf(m)
        a, _ = FNS[m]["Materialized"].apply(x)
        a.sum().backward()
        return x.grad, a.grad_fn.got
    same(f)


def test_set_materialize_grads_false_gives_none():
    def f(m):
        x = leaf(m)
        a, _ = FNS[m]["Unmaterialized"].apply(x)
        a.sum().backward()
        return x.grad, a.grad_fn.got
    e, _ = same(f)
    assert e[1] == (False, True)


def test_mark_dirty_inplace_forward():
    def f(m):
        x = leaf(m)
        h = x * 1
        v0 = h._version
        out = FNS[m]["MulInplace"].apply(h, 3.0)
        assert out is h
        assert h.grad_fn.name() == "MulInplaceBackward"
        (h * h).sum().backward()
        return h, x.grad, h._version - v0
    same(f)


def test_mark_dirty_on_leaf_requiring_grad_raises():
    for m in LIBS:
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            FNS[m]["MulInplace"].apply(leaf(m), 2.0)


def test_mark_dirty_on_view():
    def f(m):
        x = leaf(m)
        h = x * 1
        FNS[m]["MulInplace"].apply(h[1], 5.0)
        h.sum().backward()
        return h, x.grad
    same(f)


def test_once_differentiable():
    def f(m):
        x = leaf(m)
        y = FNS[m]["OnceExp"].apply(x)
        go = m.tensor(B, requires_grad=True)
        (g,) = m.autograd.grad(y, x, go, create_graph=True)
        assert g.requires_grad
        with pytest.raises(RuntimeError, match="trying to differentiate twice"):
            g.sum().backward()
        return y, g.detach()
    same(f)


def test_wrong_number_of_gradients_message():
    for m in LIBS:
        x, y = leaf(m), leaf(m, B)
        out = FNS[m]["WrongCount"].apply(x, y)
        with pytest.raises(RuntimeError) as err:
            out.sum().backward()
        assert str(err.value) == ("function WrongCountBackward returned an incorrect number of "
                                  "gradients (expected 2, got 1)")


def test_gradient_for_non_tensor_input_raises():
    for m in LIBS:
        out = FNS[m]["GradForNonTensor"].apply(leaf(m), 2.0)
        with pytest.raises(RuntimeError, match="forward input was not a Variable"):
            out.sum().backward()


def test_invalid_gradient_shape_raises():
    for m in LIBS:
        out = FNS[m]["BadShape"].apply(leaf(m))
        with pytest.raises(RuntimeError, match="returned an invalid gradient at index 0"):
            out.sum().backward()


def test_expanded_gradient_is_summed_back():
    def f(m):
        x = leaf(m)
        FNS[m]["Broadcast"].apply(x).sum().backward()
        return x.grad
    same(f)


def test_returned_input_becomes_view():
    def f(m):
        x = leaf(m)
        y = FNS[m]["Identity"].apply(x)
        assert y is not x and y._base is x
        y.sum().backward()
        return y, x.grad
    same(f)


def test_setup_context_style_and_default_args():
    def f(m):
        x = leaf(m)
        y = FNS[m]["SetupCtxCube"].apply(x)
        (g,) = m.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), x)
        y2 = FNS[m]["SetupCtxCube"].apply(x, power=2)
        (g2,) = m.autograd.grad(y2.sum(), x)
        return y, g, gg, g2
    same(f)


def test_user_backward_is_double_differentiable_like_torch():
    def f(m):
        x, y = leaf(m), leaf(m, B)
        out = FNS[m]["ScaleShift"].apply(x, 1.5, y)
        (gx, gy) = m.autograd.grad((out * out).sum(), (x, y), create_graph=True)
        return m.autograd.grad((gx * gy).sum(), (x, y))
    same(f)


@each_lib
def test_function_hooks_and_next_functions(m):
    x = leaf(m)
    h = x * 2
    y = FNS[m]["P3"].apply(h)
    ((node, nr),) = y.grad_fn.next_functions
    assert node.name() == "MulBackward0" and nr == 0
    seen = []
    y.register_hook(lambda g: seen.append(1))
    y.sum().backward()
    assert seen == [1]


def test_legacy_call_raises():
    with pytest.raises(RuntimeError, match="Legacy autograd function"):
        FNS[ember]["P3"]()(leaf(ember))


# ----- gradcheck ---------------------------------------------------------------------

def test_gradcheck_passes_on_function_and_ops():
    for m in LIBS:
        x = leaf(m)
        assert m.autograd.gradcheck(FNS[m]["P3"].apply, (x,))
        assert m.autograd.gradgradcheck(FNS[m]["P3"].apply, (x,))
        y = leaf(m, B)
        assert m.autograd.gradcheck(lambda a, b: (a * b.sin(), a.exp().sum()), (x, y))


def test_gradcheck_failure_shows_jacobians():
    msgs = []
    for m in LIBS:
        class Wrong(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x  # should be 2 * x

        x = m.tensor([1.0, 2.0, -1.5], dtype=m.float64, requires_grad=True)
        with pytest.raises(RuntimeError) as err:
            m.autograd.gradcheck(Wrong.apply, (x,))
        assert type(err.value).__name__ == "GradcheckError"
        msgs.append(str(err.value).replace("torch.", "ember."))
        assert m.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False) is False
    assert msgs[0] == msgs[1]
    assert msgs[0].startswith("Jacobian mismatch for output 0 with respect to input 0,\n"
                              "numerical:tensor([[ 2.0000,  0.0000,  0.0000],")
    from ember.autograd.gradcheck import GradcheckError
    assert GradcheckError is ember.autograd.GradcheckError


def test_gradgradcheck_detects_wrong_second_derivative():
    class WrongSecond(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x.detach() ** 2  # detached: no second derivative through x

    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(WrongSecond.apply, (x,))
    assert not ember.autograd.gradgradcheck(WrongSecond.apply, (x,), raise_exception=False)


def test_gradcheck_input_checks():
    for m in LIBS:
        with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
            m.autograd.gradcheck(lambda a: a * 2, (m.tensor(A),))
        x32 = m.tensor(A, dtype=m.float32, requires_grad=True)
        with pytest.warns(UserWarning, match="not a double precision"):
            m.autograd.gradcheck(lambda a: a * 2, (x32,), atol=1e-2, rtol=1e-2, eps=1e-3)
        with pytest.raises(RuntimeError, match="stride 0"):
            m.autograd.gradcheck(lambda a: a * 2,
                                 (m.tensor(V, requires_grad=True).expand(3, 4),))


def test_gradcheck_non_tensor_args_and_single_tensor_input():
    for m in LIBS:
        x = leaf(m)
        assert m.autograd.gradcheck(lambda a, k: a * k, (x, 3.0))
        assert m.autograd.gradcheck(lambda a: a.tanh(), x)


# ----- autograd.functional -----------------------------------------------------------

def _f_multi(a, b):
    return (a * b).sum(0), b.exp()


FUNCTIONAL = [
    ("jacobian", lambda m, x, y: m.autograd.functional.jacobian(lambda a: (a * a).sin(), x)),
    ("jacobian_tuple", lambda m, x, y: m.autograd.functional.jacobian(_f_multi, (x, y))),
    ("jacobian_vectorize", lambda m, x, y: m.autograd.functional.jacobian(
        lambda a: a.exp() * 2, x, vectorize=True)),
    ("hessian", lambda m, x, y: m.autograd.functional.hessian(lambda a: (a ** 3).sum(), x)),
    ("hessian_tuple", lambda m, x, y: m.autograd.functional.hessian(
        lambda a, b: (a * b).sum() ** 2, (x, y))),
    ("vjp", lambda m, x, y: m.autograd.functional.vjp(lambda a: a.exp() * a, x, y)),
    ("jvp", lambda m, x, y: m.autograd.functional.jvp(lambda a: a.exp() * a, x, y)),
    ("hvp", lambda m, x, y: m.autograd.functional.hvp(lambda a: (a ** 3).sum(), x, y)),
    ("vhp", lambda m, x, y: m.autograd.functional.vhp(lambda a: (a.sin() * a).sum(), x, y)),
]


@pytest.mark.parametrize("name,fn", FUNCTIONAL, ids=[f[0] for f in FUNCTIONAL])
def test_functional(name, fn):
    same(lambda m: fn(m, m.tensor(A[0]), m.tensor(B[0])))


def test_functional_create_graph():
    def f(m):
        x = leaf(m, A[0])
        h = m.autograd.functional.hessian(lambda a: (a ** 3).sum(), x, create_graph=True)
        assert h.requires_grad
        (g,) = m.autograd.grad(h.sum(), x)
        j = m.autograd.functional.jacobian(lambda a: a.exp(), x)
        assert not j.requires_grad
        return h, g, j
    same(f)


def test_functional_strict():
    for m in LIBS:
        x, y = m.tensor(A[0]), m.tensor(B[0])
        with pytest.raises(RuntimeError, match="independent of input 1"):
            m.autograd.functional.jacobian(lambda a, b: a.exp(), (x, y), strict=True)
        with pytest.raises(RuntimeError, match="strict"):
            m.autograd.functional.jacobian(lambda a: a.exp(), x, strict=True, vectorize=True)
        j = m.autograd.functional.jacobian(lambda a, b: a.exp(), (x, y))
        assert not _np(j[1]).any()


def test_functional_errors():
    for m in LIBS:
        x = m.tensor(A[0])
        with pytest.raises(RuntimeError, match="single element"):
            m.autograd.functional.hessian(lambda a: a * 2, x)
        with pytest.raises(RuntimeError, match="v can only be None"):
            m.autograd.functional.vjp(lambda a: a * 2, x)
        with pytest.raises(TypeError):
            m.autograd.functional.jacobian(lambda a: a, [x])


def test_gradcheck_leaves_no_warnings_for_double_inputs():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ember.autograd.gradcheck(lambda a: a.sigmoid(), (leaf(ember),))
