"""Special values (NaN, +-inf, -0.0, subnormals, the largest floats) in the ops the
special-value sweep (``special_values.py``) found apart from torch, on shapes, dtypes
and layouts beyond its samples: signs of zero kept at a zero bound, sums over nothing,
products in the accumulate type, gradients that stay finite or free of ``0 * inf``."""
import numpy as np
import pytest
import torch

import ember

MAX32 = float(np.finfo(np.float32).max)
MAX64 = float(np.finfo(np.float64).max)


def _bits(t):
    a = t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()
    return a.view(np.uint8)


def _same(e, t):
    """Same values bit for bit (NaN payloads aside): the sign of every zero included."""
    e, t = e.detach().numpy(), t.detach().numpy()
    assert e.dtype == t.dtype and e.shape == t.shape
    assert np.array_equal(np.isnan(e), np.isnan(t))
    keep = ~np.isnan(e)
    assert np.array_equal(e[keep], t[keep])
    assert np.array_equal(np.signbit(e[keep]), np.signbit(t[keep]))


def _pair(values, dtype, shape=None):
    a = np.asarray(values, dtype=dtype)
    if shape is not None:
        a = a.reshape(shape)
    return ember.tensor(a), torch.tensor(a)


ZERO_BOUND = [
    ("relu", lambda m, x: m.relu(x)),
    ("clamp_min", lambda m, x: m.clamp_min(x, 0)),
    ("clamp(0, 1)", lambda m, x: m.clamp(x, 0, 1)),
    ("clamp(-1, 0)", lambda m, x: m.clamp(x, -1, 0)),
    ("clamp_max", lambda m, x: m.clamp_max(x, 0.0)),
    ("relu6", lambda m, x: m.nn.functional.relu6(x)),
    ("hardtanh(0, 2)", lambda m, x: m.nn.functional.hardtanh(x, 0.0, 2.0)),
    ("hardtanh(-2, 0)", lambda m, x: m.nn.functional.hardtanh(x, -2.0, 0.0)),
]


@pytest.mark.parametrize("name,fn", ZERO_BOUND, ids=[n for n, _ in ZERO_BOUND])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("n", [1, 7, 33, 5000])
def test_zero_bound_keeps_the_inputs_zero(name, fn, dtype, n):
    """An input equal to a zero bound is kept: relu(-0.0) is -0.0, clamp(+0.0, -1, -0.0)
    is +0.0 (torch's min(max(x, lo), hi)); NaN passes; the large path (5000) too."""
    vals = np.resize([-0.0, 0.0, np.nan, -1.5, 2.5, np.inf, -np.inf, 1e-40], n)
    e, t = _pair(vals, dtype)
    _same(fn(ember, e), fn(torch, t))


@pytest.mark.parametrize("name,fn", ZERO_BOUND[:3], ids=[n for n, _ in ZERO_BOUND[:3]])
def test_zero_bound_0d_and_strided(name, fn):
    for v in (-0.0, 0.0):
        e, t = _pair(v, "float32")
        _same(fn(ember, e), fn(torch, t))
    e, t = _pair(np.resize([-0.0, 0.0, 3.0], 24), "float64", (4, 6))
    _same(fn(ember, e.t()), fn(torch, t.t()))


def test_full_of_negative_zero():
    for dt in ("float32", "float64", "float16", "bfloat16"):
        e = ember.full((3, 2), -0.0, dtype=getattr(ember, dt))
        assert e.float().signbit().all()
    assert ember.full((), -0.0).signbit()
    assert not ember.full((4,), 0.0).signbit().any()
    c = ember.full((2,), complex(0.0, -0.0))
    assert not c.real.signbit().any() and c.imag.signbit().all()
    assert ember.full_like(ember.ones(3), -0.0).signbit().all()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape", [(), (5,), (7, 33), (0,)])
@pytest.mark.parametrize("create_graph", [False, True])
def test_mse_loss_gradient_at_the_largest_values(reduction, dtype, shape, create_graph):
    """torch's (2/n * d) * g: the mean's gradient stays finite at +-max, bit for bit,
    with an incoming gradient other than 1, a target that requires grad, and float16;
    an empty input's gradient is empty (its norm 2/0 is never used)."""
    rng = np.random.default_rng(len(shape))
    big = float(np.finfo(dtype).max)
    x = rng.standard_normal(shape).astype(dtype)
    t = rng.standard_normal(shape).astype(dtype)
    if x.size > 1:
        x.flat[0], x.flat[-1] = big, -big
    elif x.ndim == 0:
        x = np.asarray(big, dtype)
    g = rng.standard_normal(() if reduction != "none" else shape).astype(dtype)
    res = []
    for m in (ember, torch):
        xt, tt = m.tensor(x, requires_grad=True), m.tensor(t, requires_grad=True)
        loss = m.nn.functional.mse_loss(xt, tt, reduction=reduction)
        res.append(m.autograd.grad(loss, [xt, tt], m.tensor(g), create_graph=create_graph))
    for e, w in zip(*res):
        _same(e, w)


def test_multi_margin_loss_gradient_with_infinite_terms():
    x = np.array([[np.nan, -7.58, np.inf, -1.54, -np.inf],
                  [1.0, 2.0, MAX64, -MAX64, 0.5],
                  [0.1, 0.2, 0.3, 0.4, 0.5]])
    for p in (1, 2):
        for tgt in ([1, 0, 4], [2, 3, 0]):
            grads = []
            for m in (ember, torch):
                xt = m.tensor(x, requires_grad=True)
                loss = m.nn.functional.multi_margin_loss(xt, m.tensor(tgt), p=p)
                grads.append(m.autograd.grad(loss, xt)[0])
            e, w = (g.numpy() for g in grads)
            np.testing.assert_array_equal(np.isnan(e), np.isnan(w))
            np.testing.assert_array_equal(np.isinf(e), np.isinf(w))
            fin = np.isfinite(w)
            np.testing.assert_allclose(e[fin], w[fin], rtol=1e-12)


@pytest.mark.parametrize("values", [[1.0, np.inf], [1.0, np.nan], [np.inf], [-np.inf, 2.0]])
def test_histc_refuses_a_range_that_is_not_finite(values):
    for m in (torch, ember):
        with pytest.raises(RuntimeError, match="is not finite"):
            m.histc(m.tensor(values), bins=4)
    with pytest.raises(RuntimeError, match=r"range of \[nan, 1\] is not finite"):
        ember.histc(ember.tensor([1.0, 2.0]), bins=4, min=float("nan"), max=1)
    # a finite explicit range ignores the values outside it, NaN and inf included
    e = ember.histc(ember.tensor(values + [0.5]), bins=2, min=0, max=2)
    t = torch.histc(torch.tensor(values + [0.5]), bins=2, min=0, max=2)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "complex64", "float64"])
def test_cumprod_runs_in_the_accumulate_type(dtype):
    """1e30 * 1e30 * 1e-30 is 1e30 in float32 (the product runs in double), and a run
    of subnormal factors keeps its last bits, as torch's kernel."""
    vals = {"float16": [300.0, 300.0, 1 / 300, 1 / 300, 2.0],
            "bfloat16": [1e30, 1e30, 1e-30, 1e-30, 3.0]}.get(
        dtype, [1e30, 1e30, 1e-30, 1e-30, 2.9e-39, 0.126, -2.9e-39, 0.64, MAX32])
    e = ember.tensor(vals, dtype=getattr(ember, dtype))
    t = torch.tensor(vals, dtype=getattr(torch, dtype))
    for dim in (0, -1):
        got, want = ember.cumprod(e, dim), torch.cumprod(t, dim)
        if dtype == "bfloat16":
            got, want = got.float(), want.float()
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    e2, t2 = e.reshape(-1, 1).expand(-1, 3), t.reshape(-1, 1).expand(-1, 3)  # strided
    got, want = ember.cumprod(e2, 0), torch.cumprod(t2, 0)
    if dtype == "bfloat16":
        got, want = got.float(), want.float()
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype,kw", [("float32", {}), ("float64", {"dtype": "float32"}),
                                      ("int32", {"dtype": "float32"}), ("float16", {}),
                                      ("complex64", {}), ("float64", {})])
@pytest.mark.parametrize("shape,dim", [((1000,), 0), ((50, 40), 0), ((3, 200, 7), 1),
                                       ((), 0)])
def test_cumsum_runs_in_the_accumulate_type(dtype, kw, shape, dim):
    """float32 sums in double, each partial sum rounded ([1e8, 1, -1e8] is [1e8, 1e8, 1],
    not 0 at the end): torch's bits on random rows, the gradient's too."""
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape) * 1000
    if dtype == "complex64":
        x = x + 1j * rng.standard_normal(shape)
    x = np.asarray(x).astype(dtype)
    res = []
    for m in (ember, torch):
        k = {key: getattr(m, v) for key, v in kw.items()}
        res.append(m.cumsum(m.tensor(x), dim, **k))
    np.testing.assert_array_equal(res[0].numpy(), res[1].numpy())
    assert res[0].numpy().dtype == res[1].numpy().dtype
    e = ember.cumsum(ember.tensor([1e8, 1.0, -1e8]), 0)
    np.testing.assert_array_equal(e.numpy(), [1e8, 1e8, 1.0])
    if dtype == "float32" and not kw:
        g = (rng.standard_normal(shape) * 1000).astype(dtype)
        grads = []
        for m in (ember, torch):
            xt = m.tensor(x, requires_grad=True)
            grads.append(m.autograd.grad(m.cumsum(xt, dim), xt, m.tensor(g))[0])
        np.testing.assert_array_equal(grads[0].numpy(), grads[1].numpy())


@pytest.mark.parametrize("with_zero", [False, True])
def test_cumprod_and_cumsum_gradients_sum_from_plus_zero(with_zero):
    """A slice of -0.0 products sums to +0.0 in the gradient, as torch's scans start
    from +0.0 (with a zero elsewhere in the tensor the other formula runs)."""
    row = [-0.74, 5.56e-309, -0.15, -5.56e-309, 0.43]
    x = np.array([row, [0.0 if with_zero else 2.0, 1.0, 3.0, -1.0, 0.5]])
    for dim in (1, -1):
        grads = []
        for m in (ember, torch):
            xt = m.tensor(x, requires_grad=True)
            grads.append(m.autograd.grad(m.cumprod(xt, dim).sum(), xt)[0])
        _same(*grads)
    g = np.array([[1.0, -0.0, -0.0], [-0.0, -0.0, -0.0]])
    grads = []
    for m in (ember, torch):
        xt = m.tensor(np.ones((2, 3)), requires_grad=True)
        grads.append(m.autograd.grad(m.cumsum(xt, 1), xt, m.tensor(g))[0])
    _same(*grads)


def test_pdist_p0_keeps_nan():
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 4.0], [np.inf, 2.0, 3.0], [1.0, 2.0, 3.0]])
    for dtype in ("float32", "float64"):
        e, t = _pair(x, dtype)
        _same(ember.nn.functional.pdist(e, 0), torch.nn.functional.pdist(t, 0))
    e, t = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ge = ember.autograd.grad(ember.nn.functional.pdist(e, 0).nansum(), e)[0]
    gt = torch.autograd.grad(torch.nn.functional.pdist(t, 0).nansum(), t)[0]
    np.testing.assert_array_equal(ge.numpy(), gt.numpy())


EMPTY_PRODUCTS = [
    ("addmm", lambda m, i, b, a: m.addmm(i, m.ones(2, 0), m.ones(0, 3), beta=b, alpha=a)),
    ("addmm bias row", lambda m, i, b, a: m.addmm(i[0], m.ones(2, 0), m.ones(0, 3), beta=b,
                                                  alpha=a)),
    ("addmv", lambda m, i, b, a: m.addmv(i[0, :2], m.ones(2, 0), m.ones(0), beta=b, alpha=a)),
    ("baddbmm", lambda m, i, b, a: m.baddbmm(i[None], m.ones(1, 2, 0), m.ones(1, 0, 3),
                                             beta=b, alpha=a)),
    ("addbmm", lambda m, i, b, a: m.addbmm(i, m.ones(1, 2, 0), m.ones(1, 0, 3), beta=b,
                                           alpha=a)),
    ("addbmm no batch", lambda m, i, b, a: m.addbmm(i, m.ones(0, 2, 4), m.ones(0, 4, 3),
                                                    beta=b, alpha=a)),
]


@pytest.mark.parametrize("name,fn", EMPTY_PRODUCTS, ids=[n for n, _ in EMPTY_PRODUCTS])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.2, 0.6), (0, 1), (1, 0), (-1, 2)])
@pytest.mark.parametrize("grad", [False, True])
def test_product_over_nothing_is_beta_times_input(name, fn, beta, alpha, grad):
    vals = np.array([[-0.0, 0.0, np.nan], [np.inf, -1.5, -0.0]], np.float32)
    out = []
    for m in (ember, torch):
        i = m.tensor(vals, requires_grad=grad)
        y = fn(m, i, beta, alpha)
        g = m.autograd.grad(y.sum(), i)[0] if grad else None
        out.append((y, g))
    _same(out[0][0], out[1][0])
    if grad:
        _same(out[0][1], out[1][1])
