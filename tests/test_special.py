"""torch.special and the gamma family against torch 2.13: PyTorch's own OpInfo samples
(forward and gradients), then wide grids with edge values in float32 and float64,
gradcheck, and mpmath where torch's own kernels are the less accurate side."""
import math
import warnings

import mpmath
import numpy as np
import pytest
import torch
from torch.testing._internal.common_device_type import toleranceOverride
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import DecorateInfo

import ember
from ember.autograd import gradcheck

_TOP = {"lgamma", "digamma", "polygamma", "mvlgamma", "igamma", "igammac", "i0", "erfinv",
        "xlogy", "sinc", "logit", "erf", "erfc"}
OPINFOS = [op for op in op_db if op.name.startswith("special.") or op.name in _TOP]

# where torch's kernel is itself off by more than the default tolerance (checked against
# mpmath below): Cephes-derived J/Y/Airy near x = 5 and igamma for a in 20..30
# and torch's float32 polygamma (2e-5)
_LOOSE = {"special.bessel_j0": 1e-6, "special.bessel_j1": 1e-6, "special.bessel_y0": 1e-6,
          "special.bessel_y1": 1e-6, "special.airy_ai": 1e-5, "igamma": 1e-8, "igammac": 1e-8,
          "polygamma": 1e-4, "special.polygamma": 1e-4}


def _ember_fn(op):
    if op.name in ("polygamma", "special.polygamma"):
        return lambda x, n, **kw: ember.polygamma(n, x, **kw)
    if op.name.startswith("special."):
        return getattr(ember.special, op.name.split(".", 1)[1])
    return getattr(ember, op.name)


def _to_ember(v):
    if isinstance(v, torch.Tensor):
        e = ember.from_numpy(v.detach().numpy().copy())
        if v.requires_grad:
            e.requires_grad_(True)
        return e
    if isinstance(v, (list, tuple)):
        return type(v)(_to_ember(a) for a in v)
    return v


def _opinfo_tol(op, dtype):
    rtol, atol = (1e-7, 1e-9) if dtype == torch.float64 else (1.3e-5, 1e-5)
    for d in op.decorators:
        if isinstance(d, DecorateInfo):
            for dec in d.decorators:
                if isinstance(dec, toleranceOverride) and dtype in dec.d:
                    rtol = max(rtol, dec.d[dtype].rtol)
                    atol = max(atol, dec.d[dtype].atol)
    loose = _LOOSE.get(op.name)
    if loose and (dtype == torch.float32 or "polygamma" not in op.name):
        rtol, atol = max(rtol, loose), max(atol, loose)
    return rtol, atol


def _close(e, t, rtol, atol, what):
    assert isinstance(e, ember.Tensor), what
    assert tuple(e.shape) == tuple(t.shape), what
    assert e.dtype.name == str(t.dtype).replace("torch.", ""), f"{what}: {e.dtype} != {t.dtype}"
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("op", OPINFOS, ids=[f"{o.name}-{o.variant_test_name}".rstrip("-")
                                              for o in OPINFOS])
def test_opinfo_samples(op, dtype):
    """Every OpInfo sample of the op: forward, then (where torch differentiates) the first
    and second gradients, with OpInfo's own tolerance overrides."""
    grad = op.supports_autograd and dtype == torch.float64
    fn = _ember_fn(op)
    rtol, atol = _opinfo_tol(op, dtype)
    n = 0
    for sample in op.sample_inputs("cpu", dtype, requires_grad=grad):
        args, kwargs = sample.args, sample.kwargs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_out = op(sample.input, *args, **kwargs)
        e_in, e_args, e_kwargs = _to_ember(sample.input), _to_ember(args), _to_ember(kwargs)
        e_out = fn(e_in, *e_args, **e_kwargs)
        what = f"{op.name} {tuple(sample.input.shape)} {args} {kwargs}"
        _close(e_out, t_out, rtol, atol, what)
        assert e_out.requires_grad == t_out.requires_grad, what
        n += 1
        if not (grad and t_out.requires_grad) or t_out.numel() == 0:
            continue
        t_leaves = [v for v in (sample.input, *args) if isinstance(v, torch.Tensor)
                    and v.requires_grad]
        e_leaves = [v for v in (e_in, *e_args) if isinstance(v, ember.Tensor) and v.requires_grad]
        go = np.random.default_rng(0).standard_normal(tuple(t_out.shape))
        if op.name in ("igamma", "igammac", "special.zeta"):
            # torch differentiates these in their second argument only
            t_leaves, e_leaves = t_leaves[1:], e_leaves[1:]
        t_g = torch.autograd.grad(t_out, t_leaves, torch.tensor(go), create_graph=True)
        e_g = ember.autograd.grad(e_out, e_leaves, ember.tensor(go), create_graph=True)
        for a, b in zip(e_g, t_g):
            _close(a, b, max(rtol, 1e-6), max(atol, 1e-8), "grad of " + what)
        if op.supports_gradgrad:
            t_gg = torch.autograd.grad(sum(g.sum() for g in t_g), t_leaves, allow_unused=True)
            e_gg = ember.autograd.grad(sum(g.sum() for g in e_g), e_leaves, allow_unused=True)
            for a, b in zip(e_gg, t_gg):
                if b is not None:
                    _close(a, b, max(rtol, 1e-5), max(atol, 1e-7), "gradgrad of " + what)
    assert n > 0


# ---------------------------------------------------------------- wide grids

_EDGES = [0.0, -0.0, 1.0, 2.0, -1.0, -2.0, 0.5, -0.5, 1e-8, -1e-8, 1e-300, 25.0, 30.0,
          170.5, np.inf, -np.inf, np.nan]


def _grid(lo, hi, n=1500, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([np.linspace(lo, hi, n), rng.uniform(lo, hi, n // 3),
                           np.sign(rng.standard_normal(200)) * np.exp(rng.uniform(-20, 6, 200)),
                           _EDGES])


def _compare(name, ember_fn, torch_fn, x, dtype, rtol, atol):
    xe = x.astype(dtype)
    t = torch_fn(torch.from_numpy(xe.copy())).numpy()
    e = ember_fn(ember.from_numpy(xe.copy())).numpy()
    assert e.dtype == t.dtype, name
    np.testing.assert_allclose(e, t, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)


S = torch.special
UNARY = [
    # name, ember fn, torch fn, range, (rtol, atol) float64, (rtol, atol) float32
    ("lgamma", ember.lgamma, torch.lgamma, (-60, 60), (1e-10, 1e-13), (2e-6, 2e-6)),
    ("digamma", ember.digamma, torch.digamma, (-60, 60), (1e-10, 1e-12), (2e-5, 2e-5)),
    ("gammaln", ember.special.gammaln, S.gammaln, (-1e4, 1e4), (1e-10, 1e-10), (2e-6, 2e-4)),
    ("psi", ember.special.psi, S.psi, (0.01, 1e4), (1e-12, 1e-12), (2e-6, 1e-6)),
    ("i0", ember.i0, torch.i0, (-700, 700), (1e-13, 0), (2e-6, 0)),
    ("i0e", ember.special.i0e, S.i0e, (-800, 800), (1e-13, 0), (2e-6, 0)),
    ("i1", ember.special.i1, S.i1, (-700, 700), (1e-13, 0), (2e-6, 0)),
    ("i1e", ember.special.i1e, S.i1e, (-800, 800), (1e-13, 0), (2e-6, 0)),
    ("erfcx", ember.special.erfcx, S.erfcx, (-26, 1e3), (1e-12, 0), (2e-6, 0)),
    ("ndtr", ember.special.ndtr, S.ndtr, (-40, 40), (1e-12, 1e-15), (2e-6, 1e-7)),
    ("log_ndtr", ember.special.log_ndtr, S.log_ndtr, (-1e3, 40), (1e-12, 1e-300), (1e-5, 1e-30)),
    ("ndtri", ember.special.ndtri, S.ndtri, (-0.1, 1.1), (1e-11, 1e-15), (2e-5, 1e-6)),
    ("entr", ember.special.entr, S.entr, (-5, 1e3), (1e-14, 0), (2e-6, 0)),
    ("erfinv", ember.special.erfinv, S.erfinv, (-1.1, 1.1), (1e-12, 1e-15), (2e-6, 1e-6)),
    ("modified_bessel_i0", ember.special.modified_bessel_i0, S.modified_bessel_i0, (-700, 700),
     (1e-13, 0), (2e-6, 0)),
    ("modified_bessel_i1", ember.special.modified_bessel_i1, S.modified_bessel_i1, (-700, 700),
     (1e-13, 0), (2e-6, 0)),
    ("modified_bessel_k0", ember.special.modified_bessel_k0, S.modified_bessel_k0, (-1, 700),
     (1e-13, 1e-300), (2e-6, 1e-30)),
    ("modified_bessel_k1", ember.special.modified_bessel_k1, S.modified_bessel_k1, (-1, 700),
     (1e-13, 1e-300), (2e-6, 1e-30)),
    ("scaled_modified_bessel_k0", ember.special.scaled_modified_bessel_k0,
     S.scaled_modified_bessel_k0, (-1, 1e4), (1e-13, 0), (2e-6, 0)),
    ("scaled_modified_bessel_k1", ember.special.scaled_modified_bessel_k1,
     S.scaled_modified_bessel_k1, (-1, 1e4), (1e-13, 0), (2e-6, 0)),
    ("spherical_bessel_j0", ember.special.spherical_bessel_j0, S.spherical_bessel_j0,
     (-100, 100), (1e-13, 1e-16), (2e-6, 1e-7)),
    # torch's J/Y/Ai are off by up to ~1e-6 near x = 5 (see test_bessel_against_mpmath)
    ("bessel_j0", ember.special.bessel_j0, S.bessel_j0, (-100, 100), (0, 1e-6), (0, 2e-6)),
    ("bessel_j1", ember.special.bessel_j1, S.bessel_j1, (-100, 100), (0, 1e-6), (0, 2e-6)),
    ("bessel_y0", ember.special.bessel_y0, S.bessel_y0, (-1, 100), (1e-6, 1e-6), (2e-6, 2e-6)),
    ("bessel_y1", ember.special.bessel_y1, S.bessel_y1, (-1, 100), (1e-6, 1e-6), (2e-6, 2e-6)),
    ("airy_ai", ember.special.airy_ai, S.airy_ai, (-40, 100), (1e-5, 1e-5), (1e-4, 1e-4)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("row", UNARY, ids=[r[0] for r in UNARY])
def test_unary_wide_range(row, dtype):
    name, efn, tfn, (lo, hi), tol64, tol32 = row
    rtol, atol = tol64 if dtype == np.float64 else tol32
    x = _grid(lo, hi)
    if name in ("bessel_y0", "bessel_y1", "airy_ai", "ndtri"):
        x = x[np.isfinite(x) | np.isnan(x)] if name != "ndtri" else x
    with np.errstate(all="ignore"):
        _compare(name, efn, tfn, x, dtype, rtol, atol)


def test_bessel_against_mpmath():
    """Where ember and torch differ most, ember agrees with mpmath to ~1e-15."""
    x = np.array([0.3, 1.0, 2.4, 4.99, 5.005, 5.52, 7.0, 12.5, 24.9, 25.1, 40.0, 300.0])
    for name, ref in [("bessel_j0", lambda v: mpmath.besselj(0, v)),
                      ("bessel_j1", lambda v: mpmath.besselj(1, v)),
                      ("bessel_y0", lambda v: mpmath.bessely(0, v)),
                      ("bessel_y1", lambda v: mpmath.bessely(1, v))]:
        e = getattr(ember.special, name)(ember.tensor(x)).numpy()
        r = np.array([float(ref(v)) for v in x])
        np.testing.assert_allclose(e, r, rtol=1e-12, atol=1e-15, err_msg=name)
    xa = np.array([-30.0, -10.0, -8.6, -8.4, -5.0, -2.095, -1.0, 0.0, 1.0, 1.99, 2.01, 10.0,
                   29.0, 31.0, 90.0])
    e = ember.special.airy_ai(ember.tensor(xa)).numpy()
    r = np.array([float(mpmath.airyai(v)) for v in xa])
    np.testing.assert_allclose(e, r, rtol=1e-11, atol=1e-14)


def test_igamma_against_mpmath():
    """torch's igamma is off by ~2e-9 for a in 20..30; ember's series and continued
    fraction are good to ~1e-14."""
    a = np.array([0.1, 0.5, 1.0, 3.0, 21.2, 23.7, 31.4, 100.0, 1e4])
    x = np.array([0.05, 2.0, 1.0, 2.5, 15.06, 16.79, 22.0, 120.0, 1.01e4])
    p = ember.igamma(ember.tensor(a), ember.tensor(x)).numpy()
    q = ember.igammac(ember.tensor(a), ember.tensor(x)).numpy()
    rp = np.array([float(mpmath.gammainc(u, 0, v, regularized=True)) for u, v in zip(a, x)])
    rq = np.array([float(mpmath.gammainc(u, v, mpmath.inf, regularized=True))
                   for u, v in zip(a, x)])
    np.testing.assert_allclose(p, rp, rtol=1e-11)  # a = 1e4: the prefactor's cancellation
    np.testing.assert_allclose(q, rq, rtol=1e-11)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_binary_wide_range(dtype):
    rng = np.random.default_rng(0)
    n = 3000
    # igamma/igammac over many decades of a and x, and edge values
    a = np.concatenate([np.exp(rng.uniform(-6, 8, n)), [0, 0, 1, np.inf, -1, np.nan, 2, 3]])
    x = np.concatenate([a[:n] * np.exp(rng.uniform(-2, 2, n)), [0, 1, 0, 1, 1, 1, np.inf, 0]])
    tol = (1e-8, 1e-12) if dtype == np.float64 else (5e-4, 1e-6)
    for ef, tf in [(ember.igamma, torch.igamma), (ember.igammac, torch.igammac)]:
        e = ef(ember.tensor(a.astype(dtype)), ember.tensor(x.astype(dtype))).numpy()
        t = tf(torch.tensor(a.astype(dtype)), torch.tensor(x.astype(dtype))).numpy()
        np.testing.assert_allclose(e, t, rtol=tol[0], atol=tol[1], equal_nan=True)
    # zeta over s > 1 (and integer s with negative q), poles and the s <= 1 domain
    s = np.concatenate([rng.uniform(1.01, 30, n), np.round(rng.uniform(2, 12, 500)),
                        [1, 0.5, 2, 2, 3, np.inf, np.inf, 2]])
    q = np.concatenate([rng.uniform(0.01, 60, n), rng.uniform(-9.7, -0.1, 500),
                        [1, 1, 0, -3, -2.5, 1, 2, -np.inf]])
    e = ember.special.zeta(ember.tensor(s.astype(dtype)), ember.tensor(q.astype(dtype))).numpy()
    t = S.zeta(torch.tensor(s.astype(dtype)), torch.tensor(q.astype(dtype))).numpy()
    np.testing.assert_allclose(e, t, rtol=1e-9 if dtype == np.float64 else 1e-4, atol=1e-40,
                               equal_nan=True)
    # polygamma(n, x) for n = 1..6
    xs = _grid(-20, 60, 800)
    xs = xs[~((xs <= 0) & (xs == np.floor(xs)))]  # torch's trigamma is finite at poles
    for k in range(1, 7):
        e = ember.polygamma(k, ember.tensor(xs.astype(dtype))).numpy()
        t = torch.polygamma(k, torch.tensor(xs.astype(dtype))).numpy()
        # float32: OpInfo's own reference tolerance for polygamma (torch's float32 sums
        # lose digits near the poles)
        np.testing.assert_allclose(e, t, rtol=1e-9 if dtype == np.float64 else 1e-2,
                                   atol=0 if dtype == np.float64 else 1e-4, equal_nan=True)
    # xlog1py with its zero rule
    u = np.array([0, 0, 0, 1.5, -2, 3, np.nan, 2])
    v = np.array([-1, np.nan, 2, -1, 0.5, -0.99, 1, np.inf])
    e = ember.special.xlog1py(ember.tensor(u.astype(dtype)), ember.tensor(v.astype(dtype)))
    t = S.xlog1py(torch.tensor(u.astype(dtype)), torch.tensor(v.astype(dtype)))
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, equal_nan=True)


POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
         "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
         "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYS)
def test_polynomials(name):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-1.5, 1.5, 1500), [-1, 1, 0, 0.5, 2, -2, np.inf, -np.inf]])
    if name.startswith("shifted"):
        x = (x + 1) / 2
    n = rng.integers(-2, 30, x.size).astype(np.float64)
    n[:20] = np.nan
    n[20:30] = 600
    n[30:40] = 150
    t = getattr(S, name)(torch.tensor(x), torch.tensor(n)).numpy()
    e = getattr(ember.special, name)(ember.tensor(x), ember.tensor(n))
    assert not e.requires_grad and e.dtype == ember.float64
    scale = np.maximum(np.abs(t), 1.0)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(e.numpy() / scale, t / scale, rtol=1e-9, atol=1e-10,
                                   equal_nan=True)
    # float32 inputs are evaluated in float64 and rounded: at least as close to the exact
    # value as torch's float32 result
    t32 = getattr(S, name)(torch.tensor(x, dtype=torch.float32),
                           torch.tensor(n, dtype=torch.float32))
    e32 = getattr(ember.special, name)(ember.tensor(x, dtype=ember.float32),
                                       ember.tensor(n, dtype=ember.float32))
    assert e32.dtype == ember.float32
    exact = getattr(S, name)(torch.tensor(x.astype(np.float32).astype(np.float64)),
                             torch.tensor(n)).numpy()
    ok = np.isfinite(exact) & np.isfinite(t32.numpy()) & (np.abs(exact) < 1e30)
    err_e = np.abs(e32.numpy()[ok] - exact[ok])
    err_t = np.abs(t32.numpy()[ok].astype(np.float64) - exact[ok])
    assert np.all(err_e <= err_t + 1e-6 * np.maximum(np.abs(exact[ok]), 1))
    # a Python number for either argument
    e = getattr(ember.special, name)(ember.tensor(x[:5]), 3)
    t = getattr(S, name)(torch.tensor(x[:5]), 3)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)
    e = getattr(ember.special, name)(0.3, ember.tensor(n[40:45]))
    t = getattr(S, name)(0.3, torch.tensor(n[40:45]))
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- derivatives

GRADS = [
    ("lgamma", lambda m, x: m.lgamma(x), (0.1, 30)),
    ("lgamma_neg", lambda m, x: m.lgamma(x), (-3.9, -3.1)),
    ("digamma", lambda m, x: m.digamma(x), (0.1, 30)),
    ("polygamma2", lambda m, x: m.polygamma(2, x), (0.2, 10)),
    ("polygamma3", lambda m, x: x.polygamma(3), (0.2, 10)),
    ("mvlgamma", lambda m, x: m.mvlgamma(x, 3), (1.1, 8)),
    ("multigammaln", lambda m, x: m.special.multigammaln(x, 2), (0.6, 8)),
    ("i0", lambda m, x: m.i0(x), (-30, 30)),
    ("i0e", lambda m, x: m.special.i0e(x), (-30, 30)),
    ("i1", lambda m, x: m.special.i1(x), (-30, 30)),
    ("i1e", lambda m, x: m.special.i1e(x), (-30, 30)),
    ("erfcx", lambda m, x: m.special.erfcx(x), (-3, 30)),
    ("ndtr", lambda m, x: m.special.ndtr(x), (-10, 10)),
    ("ndtri", lambda m, x: m.special.ndtri(x), (0.001, 0.999)),
    ("log_ndtr", lambda m, x: m.special.log_ndtr(x), (-30, 10)),
    ("entr", lambda m, x: m.special.entr(x), (0.01, 5)),
    ("erfinv", lambda m, x: m.special.erfinv(x), (-0.99, 0.99)),
    ("gammaln", lambda m, x: m.special.gammaln(x), (0.1, 30)),
    ("xlog1py", lambda m, x: m.special.xlog1py(x, x * 0.5 + 2), (-3, 3)),
    ("zeta_q", lambda m, x: m.special.zeta(3.5, x), (0.2, 10)),
    ("igamma_x", lambda m, x: m.igamma(x.detach() * 0 + 2.5, x), (0.1, 10)),
    ("igammac_x", lambda m, x: m.special.gammaincc(x.detach() * 0 + 0.7, x), (0.1, 10)),
]


@pytest.mark.parametrize("row", GRADS, ids=[r[0] for r in GRADS])
def test_gradients(row):
    """Gradients and second gradients equal torch's; ember's gradcheck passes."""
    name, f, (lo, hi) = row
    x = np.random.default_rng(3).uniform(lo, hi, 7)
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    ye, yt = f(ember, xe), f(torch, xt)
    ge, = ember.autograd.grad(ye.sum(), xe, create_graph=True)
    gt, = torch.autograd.grad(yt.sum(), xt, create_graph=True)
    np.testing.assert_allclose(ge.detach().numpy(), gt.detach().numpy(), rtol=1e-8, atol=1e-12)
    gge, = ember.autograd.grad(ge.sum(), xe)
    ggt, = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(gge.numpy(), ggt.numpy(), rtol=1e-7, atol=1e-10)
    assert gradcheck(lambda v: f(ember, v), (ember.tensor(x[:3], requires_grad=True),))


def test_not_differentiable_where_torch_is_not():
    x = ember.tensor([0.5, 2.0], requires_grad=True)
    for name in ("bessel_j0", "bessel_y1", "airy_ai", "modified_bessel_k0",
                 "spherical_bessel_j0"):
        assert not getattr(ember.special, name)(x).requires_grad
    a = ember.tensor([1.5, 2.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="igamma"):
        ember.igamma(a, ember.tensor([1.0, 1.0])).sum().backward()
    with pytest.raises(NotImplementedError, match="zeta"):
        ember.special.zeta(a + 1, ember.tensor([1.0, 1.0])).sum().backward()


def test_api_surface():
    names = [n for n in dir(torch.special) if not n.startswith("_")
             and n not in ("Tensor", "torch", "common_args", "multi_dim_common")]
    assert len(names) == 56
    missing = [n for n in names if not hasattr(ember.special, n)]
    assert not missing
    for n in ("lgamma", "digamma", "polygamma", "mvlgamma", "igamma", "igammac", "i0"):
        assert hasattr(ember, n) and hasattr(ember.Tensor, n) and hasattr(ember.Tensor, n + "_")
    x = ember.tensor([1.5, 2.5])
    assert ember.allclose(x.clone().lgamma_(), x.lgamma())
    assert ember.allclose(x.clone().polygamma_(1), x.polygamma(1))
    assert ember.allclose(x.clone().mvlgamma_(2), x.mvlgamma(2))
    assert ember.allclose(x.clone().igamma_(x), x.igamma(x))
    out = ember.empty(2)
    ember.special.gammaln(x, out=out)
    assert ember.allclose(out, x.lgamma())
    s = ember.special
    t = torch.special
    xt = torch.tensor([1.5, 2.5])
    for a, b in [(s.softmax(x, 0), t.softmax(xt, 0)), (s.log_softmax(x, 0), t.log_softmax(xt, 0)),
                 (s.logsumexp(x, 0), t.logsumexp(xt, 0)), (s.expit(x), t.expit(xt)),
                 (s.logit(x / 3, eps=0.1), t.logit(xt / 3, eps=0.1)), (s.round(x), t.round(xt)),
                 (s.sinc(x), t.sinc(xt)), (s.xlogy(x, 2.0), t.xlogy(xt, 2.0)),
                 (s.exp2(x), t.exp2(xt)), (s.expm1(x), t.expm1(xt)), (s.log1p(x), t.log1p(xt))]:
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    # integer inputs compute in the default float dtype, as torch
    assert ember.lgamma(ember.tensor([3, 4])).dtype == ember.float32
    assert s.bessel_j0(ember.tensor([3, 4])).dtype == ember.float32
    # below (p-1)/2 the sum is still evaluated (torch no longer refuses such inputs)
    low = [0.4, -3.0, float("nan")]
    np.testing.assert_allclose(ember.mvlgamma(ember.tensor(low), 2).numpy(),
                               torch.mvlgamma(torch.tensor(low), 2).numpy(), rtol=1e-6)
    with pytest.raises(TypeError):
        ember.igamma(ember.tensor([1.0]), 2.0)
    assert math.isclose(ember.polygamma(0, ember.tensor(2.0, dtype=ember.float64)).item(),
                        1 - 0.5772156649015329)


@pytest.mark.parametrize("name", ["zeta", "xlog1py", "xlogy", "chebyshev_polynomial_t",
                                  "hermite_polynomial_h", "laguerre_polynomial_l"])
def test_binary_dtypes_with_numbers(name):
    """Python numbers and integer tensors promote as in torch."""
    cases = [(2.0, np.array([1.0, 2.0], np.float32)), (np.array([2.0], np.float32), 1),
             (2, np.array([3])), (np.array([2.0]), 3.0), (np.array([2, 3]), np.array([1.5]))]
    for a, b in cases:
        ea = ember.tensor(a) if isinstance(a, np.ndarray) else a
        eb = ember.tensor(b) if isinstance(b, np.ndarray) else b
        ta = torch.tensor(a) if isinstance(a, np.ndarray) else a
        tb = torch.tensor(b) if isinstance(b, np.ndarray) else b
        e, t = getattr(ember.special, name)(ea, eb), getattr(S, name)(ta, tb)
        _close(e, t, 1e-6, 1e-6, f"{name}({a!r}, {b!r})")
