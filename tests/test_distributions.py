"""torch.distributions against torch 2.13: log_prob, entropy, moments, cdf/icdf, samples
(bit-for-bit where ember replays torch's random streams, by moments elsewhere),
reparameterised gradients, KL divergences, transforms, validation and expand."""
import warnings

import mpmath
import numpy as np
import pytest
import torch

import ember

TD = torch.distributions
ED = ember.distributions
RNG = np.random.default_rng(0)
B = (3, 2)  # batch shape of the table's parameters


def pos(*shape):
    return RNG.uniform(0.5, 2.5, shape)


def real(*shape):
    return RNG.standard_normal(shape)


def unit(*shape):
    return RNG.uniform(0.05, 0.95, shape)


def simplex(*shape):
    p = RNG.uniform(0.1, 1, shape)
    return p / p.sum(-1, keepdims=True)


def spd(n, batch=()):
    a = RNG.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def tril(n, batch=()):
    m = np.tril(RNG.standard_normal(batch + (n, n)), -1)
    return m + np.eye(n) * RNG.uniform(0.5, 1.5, batch + (n,))[..., None]


# name: (constructor(m, *params), params, values in the support, samples-match-torch)
TABLE = {
    "Normal": (lambda m, a, b: m.distributions.Normal(a, b), [real(*B), pos(*B)], real(4, *B),
               True),
    "Uniform": (lambda m, a, b: m.distributions.Uniform(a, a + b), [real(*B), pos(*B)], None,
                True),
    "Laplace": (lambda m, a, b: m.distributions.Laplace(a, b), [real(*B), pos(*B)], real(4, *B),
                True),
    "Cauchy": (lambda m, a, b: m.distributions.Cauchy(a, b), [real(*B), pos(*B)], real(4, *B),
               True),
    "Exponential": (lambda m, a: m.distributions.Exponential(a), [pos(*B)], pos(4, *B), True),
    "Gumbel": (lambda m, a, b: m.distributions.Gumbel(a, b), [real(*B), pos(*B)], real(4, *B),
               True),
    "LogNormal": (lambda m, a, b: m.distributions.LogNormal(a, b), [real(*B), pos(*B)],
                  pos(4, *B), True),
    "HalfNormal": (lambda m, a: m.distributions.HalfNormal(a), [pos(*B)], pos(4, *B), True),
    "HalfCauchy": (lambda m, a: m.distributions.HalfCauchy(a), [pos(*B)], pos(4, *B), True),
    "Weibull": (lambda m, a, b: m.distributions.Weibull(a, b), [pos(*B), pos(*B)], pos(4, *B),
                True),
    "Pareto": (lambda m, a, b: m.distributions.Pareto(a, b), [pos(*B) * 0.3, pos(*B) + 2],
               pos(4, *B) + 1, True),
    "Bernoulli": (lambda m, p: m.distributions.Bernoulli(probs=p), [unit(*B)],
                  RNG.integers(0, 2, (4, *B)).astype(float), True),
    "BernoulliLogits": (lambda m, x: m.distributions.Bernoulli(logits=x), [real(*B)],
                        RNG.integers(0, 2, (4, *B)).astype(float), True),
    "Geometric": (lambda m, p: m.distributions.Geometric(probs=p), [unit(*B)],
                  RNG.integers(0, 6, (4, *B)).astype(float), True),
    "Categorical": (lambda m, p: m.distributions.Categorical(probs=p), [simplex(*B, 4)],
                    RNG.integers(0, 4, (5, *B)), True),
    "CategoricalLogits": (lambda m, x: m.distributions.Categorical(logits=x), [real(*B, 4)],
                          RNG.integers(0, 4, (5, *B)), True),
    "OneHotCategorical": (lambda m, p: m.distributions.OneHotCategorical(probs=p),
                          [simplex(*B, 4)], np.eye(4)[RNG.integers(0, 4, (5, *B))], True),
    "Multinomial": (lambda m, p: m.distributions.Multinomial(7, probs=p), [simplex(*B, 4)],
                    RNG.multinomial(7, [0.25] * 4, (5, *B)).astype(float), True),
    "Binomial": (lambda m, n, p: m.distributions.Binomial(n, probs=p),
                 [np.full(B, 9.0), unit(*B)], RNG.integers(0, 10, (4, *B)).astype(float), False),
    "BinomialLogits": (lambda m, n, x: m.distributions.Binomial(n, logits=x),
                       [RNG.integers(1, 12, B).astype(float), real(*B)], None, False),
    "Poisson": (lambda m, r: m.distributions.Poisson(r), [pos(*B) * 3],
                RNG.integers(0, 9, (4, *B)).astype(float), False),
    "NegativeBinomial": (lambda m, n, p: m.distributions.NegativeBinomial(n, probs=p),
                         [pos(*B) * 3, unit(*B)], RNG.integers(0, 9, (4, *B)).astype(float),
                         False),
    "Gamma": (lambda m, a, b: m.distributions.Gamma(a, b), [pos(*B), pos(*B)], pos(4, *B),
              False),
    "Chi2": (lambda m, a: m.distributions.Chi2(a), [pos(*B) * 3], pos(4, *B), False),
    "Beta": (lambda m, a, b: m.distributions.Beta(a, b), [pos(*B), pos(*B)], unit(4, *B),
             False),
    "Dirichlet": (lambda m, a: m.distributions.Dirichlet(a), [pos(*B, 4)], simplex(5, *B, 4),
                  False),
    "StudentT": (lambda m, d, a, b: m.distributions.StudentT(d, a, b),
                 [pos(*B) * 3, real(*B), pos(*B)], real(4, *B), False),
    "MultivariateNormal": (lambda m, a, c: m.distributions.MultivariateNormal(
        a, covariance_matrix=c), [real(*B, 3), spd(3, B)], real(4, *B, 3), True),
    "MVNScaleTril": (lambda m, a, c: m.distributions.MultivariateNormal(a, scale_tril=c),
                     [real(*B, 3), tril(3, (2,))], real(4, *B, 3), True),
    "MVNPrecision": (lambda m, a, c: m.distributions.MultivariateNormal(
        a, precision_matrix=c), [real(*B, 3), spd(3)], real(4, *B, 3), True),
    "LowRankMVN": (lambda m, a, w, d: m.distributions.LowRankMultivariateNormal(a, w, d),
                   [real(*B, 4), real(*B, 4, 2), pos(*B, 4)], real(5, *B, 4), True),
    "Independent": (lambda m, a, b: m.distributions.Independent(
        m.distributions.Normal(a, b), 1), [real(*B), pos(*B)], real(4, *B), True),
    "MixtureSameFamily": (lambda m, p, a, b: m.distributions.MixtureSameFamily(
        m.distributions.Categorical(probs=p), m.distributions.Normal(a, b)),
        [simplex(3, 4), real(3, 4), pos(3, 4)], real(5, 3), True),
    "RelaxedBernoulli": (lambda m, t, p: m.distributions.RelaxedBernoulli(t, probs=p),
                         [np.array(0.7), unit(*B)], unit(4, *B), True),
    "RelaxedOneHotCategorical": (lambda m, t, p: m.distributions.RelaxedOneHotCategorical(
        t, probs=p), [np.array(0.7), simplex(*B, 4)], simplex(5, *B, 4), True),
    "ContinuousBernoulli": (lambda m, p: m.distributions.ContinuousBernoulli(probs=p),
                            [np.concatenate([unit(4), [0.4995, 0.5, 0.5004]])[None].repeat(2, 0)],
                            unit(4, 2, 7), True),
    "InverseGamma": (lambda m, a, b: m.distributions.InverseGamma(a, b), [pos(*B) + 2, pos(*B)],
                     pos(4, *B), False),
    "FisherSnedecor": (lambda m, a, b: m.distributions.FisherSnedecor(a, b),
                       [pos(*B) * 3, pos(*B) * 3 + 4], pos(4, *B), False),
    "Kumaraswamy": (lambda m, a, b: m.distributions.Kumaraswamy(a, b), [pos(*B), pos(*B)],
                    unit(4, *B), True),
    "LogisticNormal": (lambda m, a, b: m.distributions.LogisticNormal(a, b),
                       [real(*B, 3), pos(*B, 3)], simplex(4, *B, 4), True),
    "VonMises": (lambda m, a, k: m.distributions.VonMises(a, k), [real(*B), pos(*B) * 2],
                 real(4, *B) * 3, False),
    "TransformedSigmoid": (lambda m, a, b: m.distributions.TransformedDistribution(
        m.distributions.Normal(a, b), [m.distributions.SigmoidTransform(),
                                       m.distributions.AffineTransform(1.0, 2.0)]),
        [real(*B), pos(*B)], 1 + 2 * unit(4, *B), True),
    "TransformedStickBreaking": (lambda m, a, b: m.distributions.TransformedDistribution(
        m.distributions.Normal(a, b), m.distributions.StickBreakingTransform()),
        [real(*B, 3), pos(*B, 3)], simplex(4, *B, 4), True),
}
NAMES = list(TABLE)


def _build(name, lib, requires_grad=False):
    ctor, params, _, _ = TABLE[name]
    ts = []
    for p in params:
        if lib is torch:
            t = torch.tensor(p, dtype=torch.float64)
        else:
            t = ember.tensor(p, dtype=ember.float64)
        if requires_grad and p.ndim > 0:
            t.requires_grad_(True)
        ts.append(t)
    return ctor(lib, *ts), ts


def _np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    if isinstance(x, ember.Tensor):
        return x.detach().numpy()
    return np.asarray(x)


def _same(e, t, what, rtol=1e-9, atol=1e-11):
    if what.startswith("VonMises"):
        # torch's log I0 / log I1 are polynomial approximations good to ~1e-7
        rtol, atol = max(rtol, 1e-6), max(atol, 1e-7)
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), what
        assert tuple(e.shape) == tuple(t.shape), f"{what}: {tuple(e.shape)} != {tuple(t.shape)}"
    np.testing.assert_allclose(_np(e), _np(t), rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=what)


def _try(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(), None
    except (NotImplementedError, ValueError) as err:
        return None, type(err)


def _values(name, lib, dist):
    vals = TABLE[name][2]
    if vals is None:
        with torch.no_grad():
            torch.manual_seed(5)
            _, tparams = _build(name, torch)
            vals = TABLE[name][0](torch, *tparams).sample((4,)).numpy()
    return torch.tensor(vals) if lib is torch else ember.tensor(vals)


@pytest.mark.parametrize("name", NAMES)
def test_against_torch(name):
    """Shapes, support, moments, log_prob, entropy, cdf/icdf equal torch's (or both raise)."""
    t, _ = _build(name, torch)
    e, _ = _build(name, ember)
    assert tuple(e.batch_shape) == tuple(t.batch_shape), name
    assert tuple(e.event_shape) == tuple(t.event_shape), name
    assert e.has_rsample == t.has_rsample, name
    for attr in ("mean", "variance", "stddev", "mode"):
        tv, terr = _try(lambda: getattr(t, attr))  # noqa: B023
        ev, eerr = _try(lambda: getattr(e, attr))  # noqa: B023
        assert terr == eerr, f"{name}.{attr}: ember {eerr}, torch {terr}"
        if terr is None:
            _same(ev, tv, f"{name}.{attr}")
    tv, terr = _try(t.entropy)
    ev, eerr = _try(e.entropy)
    assert terr == eerr, f"{name}.entropy: ember {eerr}, torch {terr}"
    if terr is None:
        _same(ev, tv, f"{name}.entropy")
    xt, xe = _values(name, torch, t), _values(name, ember, e)
    _same(e.log_prob(xe), t.log_prob(xt), f"{name}.log_prob")
    tv, terr = _try(lambda: t.cdf(xt))
    ev, eerr = _try(lambda: e.cdf(xe))
    assert terr == eerr, f"{name}.cdf: ember {eerr}, torch {terr}"
    if terr is None:
        _same(ev, tv, f"{name}.cdf")
        q = np.linspace(0.05, 0.95, 4)[:, None, None] * np.ones(t.batch_shape)
        tq, terr = _try(lambda: t.icdf(torch.tensor(q)))  # noqa: B023
        eq, eerr = _try(lambda: e.icdf(ember.tensor(q)))  # noqa: B023
        assert terr == eerr, f"{name}.icdf"
        if terr is None:
            _same(eq, tq, f"{name}.icdf")
    if t.has_enumerate_support:
        tv, terr = _try(t.enumerate_support)
        ev, eerr = _try(e.enumerate_support)
        assert terr == eerr
        if terr is None:
            _same(ev, tv, f"{name}.enumerate_support")
    # expand to a new leading batch dim
    te, ee = t.expand((5,) + tuple(t.batch_shape)), e.expand((5,) + tuple(e.batch_shape))
    assert tuple(ee.batch_shape) == tuple(te.batch_shape)
    _same(ee.log_prob(xe[:1]), te.log_prob(xt[:1]), f"{name}.expand.log_prob")
    assert type(e).__name__ == type(t).__name__


@pytest.mark.parametrize("name", NAMES)
def test_samples(name):
    """After manual_seed, samples equal torch's where ember replays torch's streams, and
    the generator ends in the same state; elsewhere shapes and support are right."""
    t, _ = _build(name, torch)
    e, _ = _build(name, ember)
    torch.manual_seed(123)
    ember.manual_seed(123)
    ts = t.sample((6,))
    es = e.sample((6,))
    assert tuple(es.shape) == tuple(ts.shape)
    assert es.dtype.name == str(ts.dtype).replace("torch.", "")
    assert not es.requires_grad
    if TABLE[name][3]:
        _same(es, ts, f"{name}.sample", rtol=1e-12, atol=1e-12)
        assert bytes(ember.get_rng_state().numpy()) == bytes(torch.get_rng_state().numpy())
    else:
        assert bool(e.support.check(es).all()), name


@pytest.mark.parametrize("name", [n for n in NAMES if TABLE[n][3] and
                                  (TABLE[n][0](torch, *[torch.tensor(p) for p in
                                                               TABLE[n][1]])).has_rsample])
def test_rsample_pathwise_gradients(name):
    """rsample on the same noise as torch: values and parameter gradients equal."""
    t, tp = _build(name, torch, requires_grad=True)
    e, ep = _build(name, ember, requires_grad=True)
    torch.manual_seed(7)
    ember.manual_seed(7)
    ts, es = t.rsample((3,)), e.rsample((3,))
    _same(es, ts, f"{name}.rsample", rtol=1e-12, atol=1e-12)
    w = np.random.default_rng(1).standard_normal(tuple(ts.shape))
    tl = [p for p in tp if p.requires_grad]
    el = [p for p in ep if p.requires_grad]
    tg = torch.autograd.grad((ts * torch.tensor(w)).sum(), tl, allow_unused=True)
    eg = ember.autograd.grad((es * ember.tensor(w)).sum(), el, allow_unused=True)
    for a, b in zip(eg, tg):
        if b is None:
            assert a is None or not _np(a).any()
        else:
            _same(a, b, f"{name}.rsample grad", rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", NAMES)
def test_log_prob_gradients(name):
    """Gradients of log_prob (and entropy) with respect to the parameters equal torch's."""
    t, tp = _build(name, torch, requires_grad=True)
    e, ep = _build(name, ember, requires_grad=True)
    xt, xe = _values(name, torch, t), _values(name, ember, e)
    tl = [p for p in tp if p.requires_grad]
    el = [p for p in ep if p.requires_grad]
    tg = torch.autograd.grad(t.log_prob(xt).sum(), tl, allow_unused=True)
    eg = ember.autograd.grad(e.log_prob(xe).sum(), el, allow_unused=True)
    for a, b in zip(eg, tg):
        if b is not None:
            _same(a, b, f"{name}.log_prob grad", rtol=1e-7, atol=1e-9)


MOMENT_CHECKS = ["Binomial", "BinomialLogits", "Poisson", "NegativeBinomial", "Gamma", "Chi2",
                 "Beta", "Dirichlet", "StudentT", "InverseGamma", "FisherSnedecor", "VonMises"]


@pytest.mark.parametrize("name", MOMENT_CHECKS)
def test_sample_moments(name):
    """Samplers that are not torch's streams: with a fixed seed, sample means and
    variances match the distribution's within 5 standard errors."""
    e, _ = _build(name, ember)
    ember.manual_seed(0)
    n = 40000
    s = e.sample((n,)).numpy()
    mean, var = e.mean.numpy(), e.variance.numpy()
    if name == "VonMises":  # circular moments
        mean_dir = np.arctan2(np.sin(s).mean(0), np.cos(s).mean(0))
        assert np.all(np.abs(np.angle(np.exp(1j * (mean_dir - mean)))) < 0.05)
        np.testing.assert_allclose(1 - np.abs(np.exp(1j * s).mean(0)), var, atol=0.02)
        return
    finite = np.isfinite(var)
    se = np.sqrt(var / n)
    assert np.all(np.abs(s.mean(0) - mean)[finite] < 5 * se[finite] + 1e-12), name
    if name not in ("StudentT", "InverseGamma", "FisherSnedecor"):
        # (heavy tails: their sample variances converge too slowly to test)
        rel = np.abs(s.var(0) - var) / var
        assert np.all(rel < 0.06), name
    ember.manual_seed(1)
    first = e.sample((3,)).numpy()
    ember.manual_seed(1)
    assert np.array_equal(e.sample((3,)).numpy(), first), "not reproducible under manual_seed"


def standard_gamma_grad(a, x):
    return ember._standard_gamma_grad(ember.tensor(a), ember.tensor(x)).numpy()


def test_gamma_rsample_gradient():
    """Gamma's implicit reparameterisation gradient dx/dalpha is
    torch._standard_gamma_grad's on the same (alpha, x), bit for bit, and flows
    through rsample."""
    a = np.exp(np.random.default_rng(4).uniform(-2, 3, 200))
    torch.manual_seed(0)
    x = torch._standard_gamma(torch.tensor(a)).numpy()
    ref = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    np.testing.assert_array_equal(standard_gamma_grad(a, x), ref)
    # PyTorch's approximations are good to ~1e-3 against the exact derivative
    for av, xv in [(1.3, 1.1), (0.2, 0.01), (25.0, 30.0)]:
        with mpmath.workdps(40):
            h = mpmath.mpf("1e-15")
            p = lambda al: mpmath.gammainc(al, 0, xv, regularized=True)  # noqa: B023,E731
            pdf = mpmath.exp((av - 1) * mpmath.log(xv) - xv - mpmath.loggamma(av))
            exact = float(-(p(av + h) - p(av - h)) / (2 * h) / pdf)
        np.testing.assert_allclose(standard_gamma_grad(np.array([av]), np.array([xv])), exact,
                                   rtol=2e-3)
    alpha = ember.tensor(a[:5], requires_grad=True)
    rate = ember.tensor(np.full(5, 2.0), requires_grad=True)
    s = ED.Gamma(alpha, rate).rsample()
    ga, gr = ember.autograd.grad(s.sum(), [alpha, rate])
    x0 = (s * rate).detach().numpy()
    np.testing.assert_allclose(ga.numpy(), standard_gamma_grad(a[:5], x0) / 2.0, rtol=1e-6)
    np.testing.assert_allclose(gr.numpy(), -s.detach().numpy() / 2.0, rtol=1e-12)
    # Beta and Dirichlet rsample carry gradients to their concentrations
    c = ember.tensor([[1.5, 2.0, 0.7]], requires_grad=True)
    d = ED.Dirichlet(c).rsample((4,))
    (g,) = ember.autograd.grad((d * ember.tensor([1.0, -1.0, 0.5])).sum(), c)
    assert g.shape == c.shape and np.isfinite(g.numpy()).all() and np.abs(g.numpy()).sum() > 0


KL_PAIRS = [("Normal", "Normal"), ("Bernoulli", "Bernoulli"), ("Categorical", "Categorical"),
            ("OneHotCategorical", "OneHotCategorical"), ("Beta", "Beta"),
            ("Binomial", "Binomial"), ("Dirichlet", "Dirichlet"),
            ("Exponential", "Exponential"), ("Gamma", "Gamma"), ("Gumbel", "Gumbel"),
            ("Geometric", "Geometric"), ("HalfNormal", "HalfNormal"), ("Laplace", "Laplace"),
            ("MultivariateNormal", "MultivariateNormal"), ("LowRankMVN", "LowRankMVN"),
            ("LowRankMVN", "MultivariateNormal"), ("MultivariateNormal", "LowRankMVN"),
            ("Poisson", "Poisson"), ("LogNormal", "LogNormal"), ("Uniform", "Uniform"),
            ("Independent", "Independent"), ("Cauchy", "Cauchy"),
            ("ContinuousBernoulli", "ContinuousBernoulli"), ("Pareto", "Pareto"),
            ("Exponential", "Gamma"), ("Uniform", "Normal"), ("Normal", "Laplace")]


@pytest.mark.parametrize("pair", KL_PAIRS, ids=["-".join(p) for p in KL_PAIRS])
def test_kl_divergence(pair):
    """KL(p || q) equals torch's, p and q of the table with different parameters."""
    a, b = pair
    tp, _ = _build(a, torch)
    ep, _ = _build(a, ember)
    # q: the same family rebuilt from perturbed parameters (the second draw of the table)
    ctor, params, _, _ = TABLE[b]
    rng = np.random.default_rng(11)
    qparams = [p * rng.uniform(0.8, 1.2, np.shape(p)) if p.ndim else p for p in params]
    if b in ("Categorical", "OneHotCategorical", "Dirichlet") and b != "Dirichlet":
        qparams = [p / p.sum(-1, keepdims=True) for p in qparams]
    if b == "Binomial":
        qparams[0] = params[0]
    if b in ("MultivariateNormal",):
        qparams[1] = spd(3, B) if a == "MultivariateNormal" else spd(4, B)
        qparams[0] = real(*B, qparams[1].shape[-1])
    tq = ctor(torch, *[torch.tensor(p) for p in qparams])
    eq = ctor(ember, *[ember.tensor(p) for p in qparams])
    if a == "LowRankMVN" and b == "MultivariateNormal" or \
            a == "MultivariateNormal" and b == "LowRankMVN":
        n = 4
        mvn_params = [real(*B, n), spd(n, B)]
        if a == "MultivariateNormal":
            tp = TD.MultivariateNormal(*[torch.tensor(p) for p in mvn_params])
            ep = ED.MultivariateNormal(*[ember.tensor(p) for p in mvn_params])
        else:
            tq = TD.MultivariateNormal(*[torch.tensor(p) for p in mvn_params])
            eq = ED.MultivariateNormal(*[ember.tensor(p) for p in mvn_params])
    _same(ED.kl_divergence(ep, eq), TD.kl_divergence(tp, tq), f"KL({a} || {b})", rtol=1e-8)
    if a == b:
        # KL(p || p) = 0
        np.testing.assert_allclose(ED.kl_divergence(ep, ep).numpy(), 0, atol=1e-9)


def test_kl_infinities_and_registry():
    p = ED.Uniform(ember.tensor([0.0, 0.0]), ember.tensor([1.0, 2.0]))
    q = ED.Uniform(ember.tensor([0.0, 0.5]), ember.tensor([2.0, 3.0]))
    tp = TD.Uniform(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 2.0]))
    tq = TD.Uniform(torch.tensor([0.0, 0.5]), torch.tensor([2.0, 3.0]))
    _same(ED.kl_divergence(p, q), TD.kl_divergence(tp, tq), "uniform inf")
    b = ED.Bernoulli(ember.tensor([0.0, 1.0, 0.3]))
    c = ED.Bernoulli(ember.tensor([0.5, 0.0, 1.0]))
    _same(ED.kl_divergence(b, c), TD.kl_divergence(TD.Bernoulli(torch.tensor([0.0, 1.0, 0.3])),
                                                    TD.Bernoulli(torch.tensor([0.5, 0.0, 1.0]))),
          "bernoulli edges")
    with pytest.raises(NotImplementedError, match="No KL"):
        ED.kl_divergence(ED.Normal(0.0, 1.0), ED.Poisson(1.0))

    class MyNormal(ED.Normal):
        pass

    @ED.register_kl(MyNormal, ED.Normal)
    def _mine(p, q):
        return ember.tensor(42.0)

    assert ED.kl_divergence(MyNormal(0.0, 1.0), ED.Normal(0.0, 1.0)).item() == 42.0
    assert ED.kl_divergence(ED.Normal(0.0, 1.0), MyNormal(0.0, 2.0)).item() != 42.0


TRANSFORMS = [
    ("Exp", lambda m: m.distributions.ExpTransform(), real(5)),
    ("Affine", lambda m: m.distributions.AffineTransform(0.5, -2.0), real(5)),
    ("AffineTensor", lambda m: m.distributions.AffineTransform(
        m.tensor([0.5, 1.0], dtype=m.float64), m.tensor([2.0, -3.0], dtype=m.float64),
        event_dim=1), real(3, 2)),
    ("Sigmoid", lambda m: m.distributions.SigmoidTransform(), real(5) * 5),
    ("Tanh", lambda m: m.distributions.TanhTransform(), real(5) * 3),
    ("Softplus", lambda m: m.distributions.SoftplusTransform(), real(5) * 3),
    ("Power", lambda m: m.distributions.PowerTransform(m.tensor(2.5, dtype=m.float64)), pos(5)),
    ("StickBreaking", lambda m: m.distributions.StickBreakingTransform(), real(4, 3)),
    ("Compose", lambda m: m.distributions.ComposeTransform(
        [m.distributions.AffineTransform(1.0, 2.0), m.distributions.ExpTransform()]), real(5)),
    ("ExpInv", lambda m: m.distributions.ExpTransform().inv, pos(5)),
    ("Independent", lambda m: m.distributions.IndependentTransform(
        m.distributions.ExpTransform(), 1), real(3, 2)),
    ("Reshape", lambda m: m.distributions.ReshapeTransform((2, 3), (6,)), real(4, 2, 3)),
    ("CorrCholesky", lambda m: m.distributions.CorrCholeskyTransform(), real(4, 6)),
    ("Cat", lambda m: m.distributions.CatTransform(
        [m.distributions.ExpTransform(), m.distributions.AffineTransform(1.0, 2.0)], dim=1,
        lengths=[2, 4]), real(3, 6)),
    ("Stack", lambda m: m.distributions.StackTransform(
        [m.distributions.ExpTransform(), m.distributions.SigmoidTransform(),
         m.distributions.TanhTransform()], dim=0), real(3, 5)),
]


@pytest.mark.parametrize("row", TRANSFORMS, ids=[r[0] for r in TRANSFORMS])
def test_transforms(row):
    name, build, x = row
    tt, et = build(torch), build(ember)
    xt, xe = torch.tensor(x), ember.tensor(x)
    yt, ye = tt(xt), et(xe)
    _same(ye, yt, f"{name} forward")
    _same(et.inv(ye), tt.inv(yt), f"{name} inverse")
    _same(et.inv(ye), xe, f"{name} round trip", rtol=1e-7, atol=1e-9)
    if name not in ("Reshape",) or True:
        _same(et.log_abs_det_jacobian(xe, ye), tt.log_abs_det_jacobian(xt, yt),
              f"{name} log_abs_det_jacobian")
    assert et.domain.event_dim == tt.domain.event_dim
    assert et.codomain.event_dim == tt.codomain.event_dim
    assert tuple(et.forward_shape(x.shape)) == tuple(tt.forward_shape(x.shape))


def test_validation_and_errors(monkeypatch):
    """Arguments and values are validated by default, with torch's exception types."""
    # torch.compile, once used in this process, turns torch's default validation off
    monkeypatch.setattr(torch.distributions.Distribution, "_validate_args", True)
    for fn in (lambda m: m.distributions.Normal(m.tensor([0.0]), m.tensor([-1.0])),
               lambda m: m.distributions.Bernoulli(probs=m.tensor([1.5])),
               lambda m: m.distributions.Categorical(probs=m.tensor([[0.5, -0.1]])),
               lambda m: m.distributions.Uniform(m.tensor([1.0]), m.tensor([0.0])),
               lambda m: m.distributions.Gamma(m.tensor([0.0]), m.tensor([1.0])),
               lambda m: m.distributions.Normal(m.tensor([0.0, 1.0]), m.tensor([1.0, 1.0]))
               .log_prob(m.ones(2, 3)),
               lambda m: m.distributions.Exponential(m.tensor([1.0])).log_prob(
                   m.tensor([-1.0])),
               lambda m: m.distributions.Categorical(probs=m.tensor([0.5, 0.5]),
                                                     logits=m.tensor([0.0, 0.0])),
               lambda m: m.distributions.MultivariateNormal(m.zeros(2))):
        with pytest.raises(ValueError):
            fn(torch)
        with pytest.raises(ValueError):
            fn(ember)
    # validate_args=False lets them through, as in torch
    d = ED.Normal(ember.tensor([0.0]), ember.tensor([-1.0]), validate_args=False)
    assert d.scale.item() == -1.0
    assert np.isnan(ED.Exponential(ember.tensor([1.0]), validate_args=False)
                    .log_prob(ember.tensor([-1.0])).numpy()).sum() == 0
    with pytest.raises(NotImplementedError):
        ED.Binomial(ember.tensor([3.0, 4.0]), probs=ember.tensor([0.5, 0.5])).entropy()
    with pytest.raises(NotImplementedError):
        ED.Multinomial(ember.tensor(3), probs=ember.tensor([0.5, 0.5]))
    assert repr(ED.Normal(0.0, 1.0)) == repr(TD.Normal(0.0, 1.0)).replace("torch", "ember") \
        or repr(ED.Normal(0.0, 1.0)).startswith("Normal(loc: ")
    assert ED.constraints.positive.check(ember.tensor([1.0, -1.0])).tolist() == [True, False]
    assert ED.Normal(0.0, 1.0).batch_shape == ember.Size([])


def test_reparameterised_training_step():
    """A VAE-style step: the reparameterised sample's loss has the same gradients as
    torch's on the same noise (Normal) and a Gumbel-softmax relaxation's too."""
    mu = np.array([0.3, -0.2])
    tm = torch.tensor(mu, requires_grad=True)
    em = ember.tensor(mu, requires_grad=True)
    torch.manual_seed(3)
    ember.manual_seed(3)
    tz = TD.Normal(tm, tm.exp()).rsample((20,))
    ez = ED.Normal(em, em.exp()).rsample((20,))
    tl = (tz ** 2).mean() + TD.kl_divergence(TD.Normal(tm, tm.exp()), TD.Normal(0.0, 1.0)).sum()
    el = (ez ** 2).mean() + ED.kl_divergence(ED.Normal(em, em.exp()), ED.Normal(0.0, 1.0)).sum()
    _same(ember.autograd.grad(el, em)[0], torch.autograd.grad(tl, tm)[0], "vae grad")


@pytest.mark.parametrize("make", [
    lambda m: m.distributions.constraints.real, lambda m: m.distributions.constraints.positive,
    lambda m: m.distributions.constraints.greater_than(1.5),
    lambda m: m.distributions.constraints.less_than(-2.0),
    lambda m: m.distributions.constraints.interval(-1.0, 3.0),
    lambda m: m.distributions.constraints.unit_interval,
    lambda m: m.distributions.constraints.simplex,
    lambda m: m.distributions.constraints.real_vector,
    lambda m: m.distributions.constraints.independent(m.distributions.constraints.positive, 1),
], ids=["real", "positive", "greater_than", "less_than", "interval", "unit_interval", "simplex",
        "real_vector", "independent"])
def test_biject_to_and_transform_to(make):
    x = real(4, 3)
    for reg in ("biject_to", "transform_to"):
        tt = getattr(TD, reg)(make(torch))
        et = getattr(ED, reg)(make(ember))
        yt, ye = tt(torch.tensor(x)), et(ember.tensor(x))
        _same(ye, yt, reg)
        assert bool(make(ember).check(ye).all())
        if reg == "biject_to":
            _same(et.inv(ye), ember.tensor(x), reg + " inverse", rtol=1e-7, atol=1e-9)
            _same(et.log_abs_det_jacobian(ember.tensor(x), ye),
                  tt.log_abs_det_jacobian(torch.tensor(x), yt), reg + " jacobian")
    with pytest.raises(NotImplementedError):
        ED.biject_to(ED.constraints.lower_cholesky)
    with pytest.raises(AttributeError, match="not implemented in ember"):
        ED.NoSuchDistribution  # noqa: B018
    # every public name of torch.distributions exists
    assert [n for n in TD.__all__ if not hasattr(ED, n)] == []


def test_positive_definite_and_corr_cholesky_registry():
    m = real(2, 3, 3)
    t, e = TD.PositiveDefiniteTransform(), ED.PositiveDefiniteTransform()
    yt, ye = t(torch.tensor(m)), e(ember.tensor(m))
    _same(ye, yt, "PositiveDefiniteTransform")
    _same(e.inv(ye), t.inv(yt), "PositiveDefiniteTransform.inv")
    assert bool(ED.constraints.positive_definite.check(ye).all())
    x = real(5, 3)
    for reg in ("biject_to", "transform_to"):
        tt = getattr(TD, reg)(TD.constraints.corr_cholesky)
        et = getattr(ED, reg)(ED.constraints.corr_cholesky)
        _same(et(ember.tensor(x)), tt(torch.tensor(x)), reg + " corr_cholesky")
    _same(ED.transform_to(ED.constraints.positive_definite)(ember.tensor(m)),
          TD.transform_to(TD.constraints.positive_definite)(torch.tensor(m)), "pd")


def test_torch_programs_import_paths(tmp_path):
    """Under `python -m ember run`, torch's per-distribution module paths resolve."""
    import os
    import subprocess
    import sys
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch\n"
        "import torch.distributions as dist\n"
        "from torch.distributions.normal import Normal\n"
        "from torch.distributions.categorical import Categorical\n"
        "from torch.distributions.kl import kl_divergence\n"
        "from torch.distributions.transforms import ExpTransform\n"
        "import torch.special\n"
        "p = Normal(torch.zeros(2), torch.ones(2))\n"
        "print(type(p).__module__, float(kl_divergence(p, dist.Normal(1.0, 2.0)).sum()),\n"
        "      torch.special.gammaln(torch.tensor([4.0])).item())\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(ember.__file__)))
    out = subprocess.run([sys.executable, "-m", "ember", "run", str(prog)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    mod, kl, lg = out.stdout.split()
    assert mod == "ember.distributions.continuous"
    expected = TD.kl_divergence(TD.Normal(torch.zeros(2), torch.ones(2)), TD.Normal(1.0, 2.0))
    assert abs(float(kl) - float(expected.sum())) < 1e-6
    assert abs(float(lg) - np.log(6)) < 1e-6


F32 = ["Normal", "Uniform", "Laplace", "Cauchy", "Exponential", "Gumbel", "LogNormal",
       "Bernoulli", "Categorical", "Geometric", "MultivariateNormal", "LowRankMVN",
       "RelaxedOneHotCategorical", "Gamma", "Beta", "Dirichlet", "StudentT", "Binomial"]


@pytest.mark.parametrize("name", F32)
def test_float32(name):
    """float32 parameters: results stay float32 and agree with torch's; samples of the
    stream-exact families equal torch's (bit for bit where no float32 transcendental
    function is applied to the noise, to 1-2 ulp elsewhere)."""
    ctor, params, _, exact = TABLE[name]
    t = ctor(torch, *[torch.tensor(p, dtype=torch.float32) for p in params])
    e = ctor(ember, *[ember.tensor(p, dtype=ember.float32) for p in params])
    torch.manual_seed(9)
    ember.manual_seed(9)
    ts, es = t.sample((20,)), e.sample((20,))
    assert es.dtype.name == str(ts.dtype).replace("torch.", "")
    if name in ("Normal", "Uniform", "Exponential", "Bernoulli", "Categorical", "Cauchy",
                "Geometric"):
        np.testing.assert_array_equal(es.numpy(), ts.numpy())
    elif exact:
        # the same noise; float32 exp/log/matmul round differently in NumPy and PyTorch
        np.testing.assert_allclose(es.numpy(), ts.numpy(), rtol=5e-6, atol=1e-6)
    lp_t = t.log_prob(ts)
    lp_e = e.log_prob(ember.tensor(ts.numpy()))
    assert lp_e.dtype == ember.float32
    np.testing.assert_allclose(lp_e.numpy(), lp_t.numpy(), rtol=2e-5, atol=2e-5)
    tv, terr = _try(t.entropy)
    if terr is None:
        np.testing.assert_allclose(e.entropy().numpy(), tv.numpy(), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("dim,conc", [(2, 0.7), (3, [0.5, 1.0, 2.5]), (5, 1.7)])
def test_lkj_cholesky(dim, conc):
    """log_prob equals torch's on torch's samples; ember's samples are Cholesky factors
    of correlation matrices whose off-diagonal correlations have mean 0 (and, for
    dim 2, the variance 1 / (2 eta + 1) of 2 Beta(eta, eta) - 1)."""
    c = np.asarray(conc, dtype=np.float64)
    t = TD.LKJCholesky(dim, torch.tensor(c))
    e = ED.LKJCholesky(dim, ember.tensor(c))
    torch.manual_seed(0)
    s = t.sample((6,))
    _same(e.log_prob(ember.tensor(s.numpy())), t.log_prob(s), "LKJCholesky.log_prob")
    ember.manual_seed(0)
    es = e.sample((4000,))
    assert tuple(es.shape) == tuple(t.sample((4000,)).shape)
    assert bool(e.support.check(es).all())
    corr = (es @ es.mT).numpy()
    np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1, atol=1e-12)
    off = corr[..., 1, 0]
    assert np.all(np.abs(off.mean(0)) < 0.06)
    if dim == 2:
        # r ~ 2 Beta(eta, eta) - 1: Var r = 1 / (2 eta + 1)
        np.testing.assert_allclose(off.var(0), 1 / (2 * c + 1), rtol=0.08)
    assert tuple(e.expand((3,) + tuple(e.batch_shape)).batch_shape) == \
        tuple(t.expand((3,) + tuple(t.batch_shape)).batch_shape)


def test_generalized_pareto():
    """float32 (torch's log_prob compares with a float32 zero and fails on float64):
    samples on torch's stream, log_prob, cdf, icdf, moments, entropy, support."""
    params = [real(*B), pos(*B), np.array([[0.3, -0.2], [0.0, 0.4], [-0.4, 0.1]])]
    t = TD.GeneralizedPareto(*[torch.tensor(p, dtype=torch.float32) for p in params])
    e = ED.GeneralizedPareto(*[ember.tensor(p, dtype=ember.float32) for p in params])
    torch.manual_seed(2)
    ember.manual_seed(2)
    ts, es = t.sample((5,)), e.sample((5,))
    np.testing.assert_allclose(es.numpy(), ts.numpy(), rtol=5e-6, atol=1e-6)
    x = ember.tensor(ts.numpy())
    for what in ("log_prob", "cdf", "log_survival_function"):
        np.testing.assert_allclose(getattr(e, what)(x).numpy(), getattr(t, what)(ts).numpy(),
                                   rtol=2e-5, atol=2e-5, err_msg=what)
    q = np.linspace(0.1, 0.9, 5)[:, None, None] * np.ones(B, np.float32)
    np.testing.assert_allclose(e.icdf(ember.tensor(q)).numpy(), t.icdf(torch.tensor(q)).numpy(),
                               rtol=2e-5, atol=2e-5)
    for attr in ("mean", "variance", "mode"):
        np.testing.assert_allclose(getattr(e, attr).numpy(), getattr(t, attr).numpy(),
                                   rtol=2e-5, equal_nan=True, err_msg=attr)
    np.testing.assert_allclose(e.entropy().numpy(), t.entropy().numpy(), rtol=2e-5)
    assert bool(e.support.check(es).all())


@pytest.mark.parametrize("kw", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart(kw):
    """log_prob, entropy and moments equal torch's for each parameterisation; Bartlett
    samples (not torch's stream) have the right mean and variance; rsample carries
    gradients to the scale matrix."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 3))
    C = a @ a.transpose(0, 2, 1) + 3 * np.eye(3)
    M = np.linalg.cholesky(C) if kw == "scale_tril" else C
    df = np.array([4.5, 7.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = TD.Wishart(torch.tensor(df), **{kw: torch.tensor(M)})
    e = ED.Wishart(ember.tensor(df), **{kw: ember.tensor(M)})
    torch.manual_seed(0)
    s = t.sample((4,))
    _same(e.log_prob(ember.tensor(s.numpy())), t.log_prob(s), "Wishart.log_prob")
    for attr in ("mean", "variance", "mode"):
        _same(getattr(e, attr), getattr(t, attr), f"Wishart.{attr}")
    _same(e.entropy(), t.entropy(), "Wishart.entropy")
    ember.manual_seed(0)
    es = e.sample((20000,)).numpy()
    np.testing.assert_allclose(es.mean(0), e.mean.numpy(), rtol=0.03, atol=0.3)
    np.testing.assert_allclose(es.var(0), e.variance.numpy(), rtol=0.12)
    assert bool(e.support.check(ember.tensor(es[:50])).all())
    m = ember.tensor(M, requires_grad=True)
    g, = ember.autograd.grad(ED.Wishart(ember.tensor(df), **{kw: m}).rsample().sum(), m)
    assert np.isfinite(g.numpy()).all() and np.abs(g.numpy()).sum() > 0
