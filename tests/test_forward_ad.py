"""ember.autograd.forward_ad against torch.autograd.forward_ad: every OpInfo op torch supports
forward mode on (float64, two samples each), dual-tensor semantics (views, in-place, grad
mode), custom Function jvp, gradcheck(check_forward_ad) and the func/functional transforms
built on forward mode."""
import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfw
from _fwad_opinfo import check_op
from torch.testing._internal.common_methods_invocations import op_db

import ember
import ember.autograd.forward_ad as efw
from ember.autograd.node import Primitive

FW_OPS = [o for o in op_db if o.supports_forward_ad]

# OpInfo entries that are not compared, and why: ember lacks the function ("missing"), or
# ember's forward raises/differs on the samples, or torch refuses float64 samples
# (complex-only ops) ("not run"). A change in either direction fails the test: update here.
NOT_COMPARED = {
    **{n: "missing" for n in (
        "_batch_norm_with_update", "_native_batch_norm_legit", "_softmax_backward_data",
        "_unsafe_masked_index", "_unsafe_masked_index_put_accumulate",
        "_upsample_bilinear2d_aa", "max_pool2d_with_indices_backward", "slice",
        "torch.ops.aten._safe_softmax.default")},
    **{n: "forward" for n in (
        "__rand__", "__ror__", "__rxor__", "imag", "istft", "view_as_real",  # no float64
        "nn.functional.soft_margin_loss",
        "linalg.lstsq.grad_oriented",
        "linalg.pinv.singular",
        "nn.functional.triplet_margin_with_distance_loss",
        # the OpInfo wrappers pass q both by position and by name to ember's signature
        "svd_lowrank", "pca_lowrank")},
    # torch's forward AD uses the whole tangent of A, including the triangle the solve
    # never reads (its own backward masks it); ember's tangent is the true derivative
    # (both agree for a triangular tangent: test_triangular_solve_tangent_ignores_other_half)
    "triangular_solve": "tangent",
}


def _id(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


@pytest.mark.parametrize("op", FW_OPS, ids=_id)
def test_opinfo_tangents_match_torch(op):
    status, detail = check_op(op)
    assert status == NOT_COMPARED.get(_id(op), "pass"), detail


def test_eigh_tangents_match_torch():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 5))
    a = a + a.T
    ta = rng.standard_normal((5, 5))
    ta = ta + ta.T
    with efw.dual_level():
        w, v = ember.linalg.eigh(efw.make_dual(ember.tensor(a), ember.tensor(ta)))
        ew, ev = efw.unpack_dual(w).tangent.numpy(), efw.unpack_dual(v).tangent.numpy()
        ev0 = v.detach().numpy()
    with tfw.dual_level():
        w, v = torch.linalg.eigh(tfw.make_dual(torch.tensor(a), torch.tensor(ta)))
        tw, tv = tfw.unpack_dual(w).tangent.numpy(), tfw.unpack_dual(v).tangent.numpy()
        tv0 = v.detach().numpy()
    sign = np.sign((ev0 * tv0).sum(0))  # eigenvectors are defined up to sign
    np.testing.assert_allclose(ew, tw, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(ev * sign, tv, rtol=1e-8, atol=1e-9)


def test_eigh_tangent_off_the_symmetric_matrices():
    """eigh reads one triangle of a matrix taken as symmetric. For a tangent that is not
    symmetric, torch's forward rule uses the whole tangent and gives an eigenvector
    tangent that breaks V^T V = I to first order (V^T dV not antisymmetric): no
    derivative of orthonormal eigenvectors. ember's tangent is the rule on the tangent's
    symmetric part (the adjoint of the backward both libraries share): it keeps V^T dV
    antisymmetric and equals torch's for the symmetric part. (OpInfo's eigh samples are
    not symmetric; tests/_fwad_opinfo.py compares them with symmetric tangents.)"""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 5))
    ta = rng.standard_normal((5, 5))
    for uplo in "LU":
        with efw.dual_level():
            _, v = ember.linalg.eigh(efw.make_dual(ember.tensor(a), ember.tensor(ta)), UPLO=uplo)
            ev, ev0 = efw.unpack_dual(v).tangent.numpy(), v.detach().numpy()

        def torch_tangent(t, uplo=uplo):
            with tfw.dual_level():
                _, v = torch.linalg.eigh(tfw.make_dual(torch.tensor(a), torch.tensor(t)),
                                         UPLO=uplo)
                return tfw.unpack_dual(v).tangent.numpy(), v.detach().numpy()
        tv, tv0 = torch_tangent(ta)
        sv, _ = torch_tangent((ta + ta.T) / 2)
        sign = np.sign((ev0 * tv0).sum(0))  # eigenvectors are defined up to sign
        skew = ev0.T @ ev
        np.testing.assert_allclose(skew, -skew.T, atol=1e-12)
        torch_skew = tv0.T @ tv
        assert np.abs(torch_skew + torch_skew.T).max() > 1e-2
        np.testing.assert_allclose(ev * sign, sv, rtol=1e-10, atol=1e-12)


def test_cholesky_inverse_tangent_is_exact_where_torch_is_off():
    """OpInfo's cholesky_inverse sample 6 (a well-conditioned factor, cond 1.002): ember's
    tangent is the exact -A^-1 dA A^-1 (dA = dL L^T + L dL^T) to 1e-15, torch's forward
    formula 1.5e-6 off (relative); a 50-digit mpmath computation decides."""
    import mpmath
    from torch.testing._internal.common_methods_invocations import op_db
    op = next(o for o in op_db if o.name == "cholesky_inverse")
    torch.manual_seed(0)
    sample = list(op.sample_inputs_func(op, "cpu", torch.float64, False))[6]
    L = sample.input.detach().numpy().copy()
    T = np.random.default_rng(6).standard_normal(L.shape)
    with mpmath.workdps(50):
        Lm, Tm = mpmath.matrix(L.tolist()), mpmath.matrix(T.tolist())
        Ai = (Lm * Lm.T) ** -1
        exact = np.array((-Ai * (Tm * Lm.T + Lm * Tm.T) * Ai).tolist(), dtype=float)
    with efw.dual_level():
        y = ember.cholesky_inverse(efw.make_dual(ember.tensor(L), ember.tensor(T)))
        et = efw.unpack_dual(y).tangent.numpy()
    with tfw.dual_level():
        y = torch.cholesky_inverse(tfw.make_dual(torch.tensor(L), torch.tensor(T)))
        tt = tfw.unpack_dual(y).tangent.numpy()
    scale = np.abs(exact).max()
    assert np.abs(et - exact).max() / scale < 1e-14
    assert np.abs(tt - exact).max() / scale > 1e-7


def test_opinfo_census():
    # the count reported in docs/autograd.md
    compared = [o for o in FW_OPS if _id(o) not in NOT_COMPARED]
    assert len(FW_OPS) == 513 and len(compared) == 491


def test_rule_census():
    """Which primitives have their own JVP rule and which use the double-vjp fallback."""
    def subs(c):
        for s in c.__subclasses__():
            yield s
            yield from subs(s)
    prims = {s for s in subs(Primitive) if not s.__dict__.get("_base_class")}
    fallback = {s._op_name for s in prims if s.jvp is Primitive.jvp}
    for op in ("Normalize", "MatMul", "Sum", "Softmax", "LogSoftmax", "Conv", "_Linear",
               "GetItem", "Exp", "Mul", "MaxPool", "Cat", "Gather"):
        assert op not in fallback
    assert {"Svd", "SoftMarginLoss"} <= fallback
    assert len(prims) - len(fallback) >= 250


# ----- dual tensors -----------------------------------------------------------------------

def _pair(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape), rng.standard_normal(shape)


def test_no_grad_inside_level_keeps_tangents():
    x, t = _pair(3)
    with efw.dual_level():
        d = efw.make_dual(ember.tensor(x), ember.tensor(t))
        assert not d.requires_grad
        with ember.no_grad():
            y = d.exp() * 2
        tan = efw.unpack_dual(y).tangent
    np.testing.assert_allclose(tan.numpy(), 2 * np.exp(x) * t)


def test_levels_and_errors():
    with efw.dual_level():
        d = efw.make_dual(ember.ones(2), ember.full((2,), 3.0))
        assert ember.equal(efw.unpack_dual(d).tangent, ember.full((2,), 3.0))
        assert efw.unpack_dual(ember.ones(2) * 2).tangent is None
        assert efw.unpack_dual(d).primal is not d
        assert efw.unpack_dual(efw.unpack_dual(d).primal).tangent is None
        assert efw.unpack_dual(d.detach()).tangent is None
        assert efw.unpack_dual(d > 0).tangent is None
        assert ember.equal(efw.unpack_dual(d.floor()).tangent, ember.zeros(2))
        with pytest.raises(RuntimeError, match="different size"):
            efw.make_dual(ember.ones(2), ember.ones(3))
        with pytest.raises(ValueError, match="floating point"):
            efw.make_dual(ember.ones(2, dtype=ember.int64), ember.ones(2))
        with pytest.raises(RuntimeError, match="Nested"):
            efw.enter_dual_level()
    with pytest.raises(RuntimeError, match="no level"):
        efw.make_dual(ember.ones(2), ember.ones(2))
    assert efw.unpack_dual(d).tangent is None  # the level is closed
    assert isinstance(efw.unpack_dual(d), efw.UnpackedDualTensor)


def _both(fn, x, t):
    """fn(module, fwad, dual) under ember and torch; the results' tangents."""
    with efw.dual_level():
        e = fn(ember, efw, efw.make_dual(ember.tensor(x), ember.tensor(t)))
    with tfw.dual_level():
        r = fn(torch, tfw, tfw.make_dual(torch.tensor(x), torch.tensor(t)))
    return e, r


def test_views_carry_view_tangents():
    x, t = _pair(3, 4)
    with efw.dual_level():
        tan = ember.tensor(t)
        d = efw.make_dual(ember.tensor(x), tan)
        v = d[1].unsqueeze(0).transpose(0, 1)
        vt = efw.unpack_dual(v).tangent
        assert vt._base is tan  # a view of the dual's tangent
        np.testing.assert_allclose(vt.numpy(), t[1][:, None])


def test_inplace_updates_tangents():
    x, t = _pair(3, 4)

    def f(m, fw, d):
        y = d.clone()
        y.mul_(d)  # y's tangent: 2 x t
        z = m.zeros(3, 4, dtype=m.float64)
        z[0].add_(d[0].sin())  # a view of a non-dual base: the base gains a tangent
        w = d.clone()
        row = w[2]
        w.mul_(3)  # an earlier view of w sees its new tangent
        return [fw.unpack_dual(a).tangent.numpy().copy() for a in (y, z, w, row)]
    e, r = _both(f, x, t)
    for a, b in zip(e, r):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_copy_into_dual_and_exit_clears():
    x, t = _pair(4)
    with efw.dual_level():
        d = efw.make_dual(ember.tensor(x), ember.tensor(t))
        d.copy_(ember.ones(4, dtype=ember.float64))
        assert not efw.unpack_dual(d).tangent.numpy().any()
        keep = d
    assert keep._extra.fw_grad is None


def test_forward_over_reverse_through_backward():
    x, t = _pair(5)

    def f(m, fw, d):
        with m.enable_grad():
            leaf = d  # torch: a dual of a leaf that requires grad
            y = (leaf.sin() * leaf.exp()).softmax(0).log()[:3].sum()
            g, = m.autograd.grad(y, leaf, create_graph=True)
        return fw.unpack_dual(g).tangent.detach().numpy()
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    with efw.dual_level():
        e = f(ember, efw, efw.make_dual(xe, ember.tensor(t)))
    with tfw.dual_level():
        r = f(torch, tfw, tfw.make_dual(xt, torch.tensor(t)))
    np.testing.assert_allclose(e, r, rtol=1e-10)


def test_fallback_matches_torch():
    # ember's soft margin loss has no rule of its own: its tangent comes from the
    # double-vjp fallback
    from ember.ops.losses import SoftMarginLoss
    assert SoftMarginLoss.jvp is Primitive.jvp
    x, t = _pair(4, 5, seed=1)
    y = np.sign(np.random.default_rng(2).standard_normal((4, 5)))

    def f(m, fw, d):
        loss = m.nn.functional.soft_margin_loss(d, m.tensor(y), reduction="none")
        return fw.unpack_dual(loss).tangent.numpy()
    e, r = _both(f, x, t)
    np.testing.assert_allclose(e, r, rtol=1e-10)


# ----- autograd.Function --------------------------------------------------------------------

def _mul_function(m, with_jvp=True, wrong=False):
    class MyMul(m.autograd.Function):
        @staticmethod
        def forward(x, y):
            return x * y

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(*inputs)
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y, g * x

        if with_jvp:
            @staticmethod
            def jvp(ctx, tx, ty):
                x, y = ctx.saved_tensors
                return tx * y + x * ty * (2 if wrong else 1)
    return MyMul


def test_function_jvp_setup_context():
    x, t = _pair(3)
    y = np.arange(3.0)
    e, r = _both(lambda m, fw, d: fw.unpack_dual(_mul_function(m).apply(d, m.tensor(y)))
                 .tangent.numpy(), x, t)
    np.testing.assert_allclose(e, r)
    with efw.dual_level():
        d = efw.make_dual(ember.tensor(x), ember.tensor(t))
        with pytest.raises(NotImplementedError, match="jvp"):
            _mul_function(ember, with_jvp=False).apply(d, ember.tensor(y))


def test_gradcheck_forward_ad():
    x = ember.tensor(np.random.default_rng(0).standard_normal(4), requires_grad=True)
    w = ember.tensor(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)

    def f(x, w):
        return ember.nn.functional.layer_norm(w @ x.tanh(), (3,)).log_softmax(0)
    assert ember.autograd.gradcheck(f, (x, w), check_forward_ad=True)
    assert ember.autograd.gradcheck(f, (x, w), check_forward_ad=True, check_backward_ad=False)
    assert ember.autograd.gradgradcheck(f, (x, w), check_fwd_over_rev=True)
    bad = _mul_function(ember, wrong=True)
    assert ember.autograd.gradcheck(bad.apply, (x, x.detach().clone().requires_grad_()))
    assert not ember.autograd.gradcheck(bad.apply, (x, x.detach().clone().requires_grad_()),
                                        check_forward_ad=True, raise_exception=False)


# ----- func and functional ------------------------------------------------------------------

def _mlp(m):
    def f(x, w1, w2):
        return (w2 @ (w1 @ x).tanh()).sin() * x.sum()
    return f


def _mlp_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in ((3,), (4, 3), (2, 4))]


def _close(a, b):
    if isinstance(a, (tuple, list)):
        for p, q in zip(a, b):
            _close(p, q)
        return
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_func_jvp_jacfwd_hessian_linearize():
    xs = _mlp_inputs()
    ts = _mlp_inputs(1)
    E = [ember.tensor(a) for a in xs]
    T = [torch.tensor(a) for a in xs]
    Et = [ember.tensor(a) for a in ts]
    Tt = [torch.tensor(a) for a in ts]
    _close(ember.func.jvp(_mlp(ember), tuple(E), tuple(Et)),
           torch.func.jvp(_mlp(torch), tuple(T), tuple(Tt)))
    _close(ember.func.jacfwd(_mlp(ember), argnums=(0, 1))(*E),
           torch.func.jacfwd(_mlp(torch), argnums=(0, 1))(*T))

    def scalar(m):
        return lambda x, w1, w2: _mlp(m)(x, w1, w2).pow(2).sum()
    _close(ember.func.hessian(scalar(ember), argnums=1)(*E),
           torch.func.hessian(scalar(torch), argnums=1)(*T))
    _close(ember.func.jacfwd(ember.func.jacfwd(scalar(ember)))(*E),
           torch.func.jacfwd(torch.func.jacfwd(scalar(torch)))(*T))
    out, fn = ember.func.linearize(_mlp(ember), *E)
    tout, tfn = torch.func.linearize(_mlp(torch), *T)
    _close(out, tout)
    _close(fn(*Et), tfn(*Tt))
    _close(ember.func.jvp(lambda x: (x.exp(), x.sum()), (E[0],), (Et[0],), has_aux=False),
           torch.func.jvp(lambda x: (x.exp(), x.sum()), (T[0],), (Tt[0],)))


def test_functional_jvp_hvp_jacobian_forward_mode():
    xs = _mlp_inputs()
    vs = _mlp_inputs(1)
    E = tuple(ember.tensor(a) for a in xs)
    T = tuple(torch.tensor(a) for a in xs)
    Ev = tuple(ember.tensor(a) for a in vs)
    Tv = tuple(torch.tensor(a) for a in vs)
    EF, TF = ember.autograd.functional, torch.autograd.functional
    _close(EF.jvp(_mlp(ember), E, Ev), TF.jvp(_mlp(torch), T, Tv))

    def scalar(m):
        return lambda x, w1, w2: _mlp(m)(x, w1, w2).pow(2).sum()
    _close(EF.hvp(scalar(ember), E, Ev), TF.hvp(scalar(torch), T, Tv))
    _close(EF.jacobian(_mlp(ember), E, vectorize=True, strategy="forward-mode"),
           TF.jacobian(_mlp(torch), T, vectorize=True, strategy="forward-mode"))
    with pytest.raises(NotImplementedError, match="vectorize=True"):
        EF.jacobian(_mlp(ember), E, strategy="forward-mode")


def test_triangular_solve_tangent_ignores_other_half():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5)) + 5 * np.eye(5)
    b, tb = rng.standard_normal((5, 2)), rng.standard_normal((5, 2))
    ta = rng.standard_normal((5, 5))
    with efw.dual_level():
        o = ember.triangular_solve(efw.make_dual(ember.tensor(b), ember.tensor(tb)),
                                   efw.make_dual(ember.tensor(a), ember.tensor(ta)))[0]
        full = efw.unpack_dual(o).tangent.numpy()
    with tfw.dual_level():
        o = torch.triangular_solve(tfw.make_dual(torch.tensor(b), torch.tensor(tb)),
                                   tfw.make_dual(torch.tensor(a), torch.tensor(np.triu(ta))))[0]
        upper = tfw.unpack_dual(o).tangent.numpy()
    np.testing.assert_allclose(full, upper, rtol=1e-10, atol=1e-12)
