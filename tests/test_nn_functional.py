"""ember.nn.functional against torch.nn.functional: values, gradients, dtypes, errors."""
import warnings

import numpy as np
import pytest
from oracle import Case, cases, check, check_raises

import ember


def F(m):
    return m.nn.functional


def ints(*shape, high=5, extra=()):
    def make(rng):
        return [rng.integers(0, high, size=shape).astype(np.int64)] + [
            rng.standard_normal(s) for s in extra]
    return make


ACTIVATIONS = [
    Case("relu", lambda m, x: F(m).relu(x), [(3, 4)]),
    Case("relu_inplace", lambda m, x: F(m).relu(x * 1, inplace=True), [(3, 4)]),
    Case("relu_", lambda m, x: F(m).relu_(x * 1), [(3, 4)]),
    Case("relu6", lambda m, x: F(m).relu6(x * 4), [(3, 4)]),
    Case("elu_", lambda m, x: F(m).elu_(x * 1, 0.5), [(3, 4)]),
    Case("selu", lambda m, x: F(m).selu(x), [(3, 4)]),
    Case("celu", lambda m, x: F(m).celu(x, 2.0), [(3, 4)]),
    Case("leaky_relu_", lambda m, x: F(m).leaky_relu_(x * 1, 0.3), [(3, 4)]),
    Case("prelu", lambda m, x, w: F(m).prelu(x, w), [(2, 3, 4), (3,)]),
    Case("gelu", lambda m, x: F(m).gelu(x), [(3, 4)]),
    Case("gelu_tanh", lambda m, x: F(m).gelu(x, approximate="tanh"), [(3, 4)]),
    Case("gelu_f32", lambda m, x: F(m).gelu(x), [(3, 4)], dtype=np.float32),
    Case("silu", lambda m, x: F(m).silu(x), [(3, 4)]),
    Case("mish", lambda m, x: F(m).mish(x), [(3, 4)]),
    Case("softplus", lambda m, x: F(m).softplus(x * 10, beta=0.5, threshold=3), [(3, 4)]),
    Case("softsign", lambda m, x: F(m).softsign(x), [(3, 4)]),
    Case("hardtanh_", lambda m, x: F(m).hardtanh_(x * 1, -0.3, 0.4), [(3, 4)]),
    Case("hardsigmoid", lambda m, x: F(m).hardsigmoid(x * 4), [(3, 4)], gradgrad=False),
    Case("hardswish", lambda m, x: F(m).hardswish(x * 4), [(3, 4)], gradgrad=False),
    Case("sigmoid", lambda m, x: F(m).sigmoid(x), [(3, 4)]),
    Case("tanh", lambda m, x: F(m).tanh(x), [(3, 4)]),
    Case("tanhshrink", lambda m, x: F(m).tanhshrink(x), [(3, 4)]),
    Case("softshrink", lambda m, x: F(m).softshrink(x, 0.2), [(3, 4)]),
    Case("hardshrink", lambda m, x: F(m).hardshrink(x), [(3, 4)]),
    Case("logsigmoid", lambda m, x: F(m).logsigmoid(x * 10), [(3, 4)]),
    Case("threshold", lambda m, x: F(m).threshold(x, 0.2, -1.0), [(3, 4)]),
    Case("threshold_", lambda m, x: F(m).threshold_(x * 1, 0.2, -1.0), [(3, 4)]),
    Case("glu", lambda m, x: F(m).glu(x), [(3, 4)]),
    Case("glu_dim0", lambda m, x: F(m).glu(x, 0), [(4, 3)]),
    Case("softmax", lambda m, x: F(m).softmax(x, dim=1), [(3, 4, 2)]),
    Case("softmax_dtype", lambda m, x: F(m).softmax(x, -1, dtype=m.float64), [(3, 4)],
         dtype=np.float32),
    Case("log_softmax", lambda m, x: F(m).log_softmax(x, 0), [(3, 4)]),
    Case("log_softmax_dtype", lambda m, x: F(m).log_softmax(x, 1, dtype=m.float32), [(3, 4)],
         rtol=1e-5, atol=1e-6),
    Case("softmin", lambda m, x: F(m).softmin(x, 1), [(3, 4)]),
    Case("softmax_0d", lambda m, x: F(m).softmax(x, 0), [()]),
] + [
    # half precision computes in float32 and rounds once, as torch's CPU kernels
    Case(f"{name}_f16", lambda m, x, name=name: getattr(F(m), name)(x * 3), [(4, 5)],
         dtype=np.float16, gradgrad=False)
    for name in ("gelu", "silu", "mish", "softplus", "elu", "selu", "logsigmoid", "leaky_relu",
                 "hardswish", "softsign")
]


def _implicit(m, fn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(m)(x)


IMPLICIT_DIM = [
    Case(f"{name}_implicit_{nd}d", lambda m, x, name=name: _implicit(
        m, lambda mm: getattr(F(mm), name), x), [shape])
    for name in ("softmax", "log_softmax", "softmin")
    for nd, shape in ((1, (4,)), (2, (3, 4)), (3, (2, 3, 4)), (4, (2, 3, 2, 2)))
]

LINEAR = [
    Case("linear", lambda m, x, w, b: F(m).linear(x, w, b), [(5, 3), (4, 3), (4,)]),
    Case("linear_nobias_3d", lambda m, x, w: F(m).linear(x, w), [(2, 5, 3), (4, 3)]),
    Case("linear_1d_weight", lambda m, x, w: F(m).linear(x, w), [(5, 3), (3,)]),
    Case("linear_bias_bcast", lambda m, x, w, b: F(m).linear(x, w, b), [(5, 3), (4, 3), ()]),
    Case("bilinear", lambda m, a, b, w, bias: F(m).bilinear(a, b, w, bias),
         [(4, 3), (4, 2), (5, 3, 2), (5,)]),
    Case("embedding", lambda m, i, w: F(m).embedding(i, w), ints(3, 4, high=5, extra=[(5, 2)])),
    Case("embedding_padding", lambda m, i, w: F(m).embedding(i, w, padding_idx=0),
         ints(3, 4, high=5, extra=[(5, 2)])),
    Case("embedding_bag", lambda m, i, w: F(m).embedding_bag(i, w, m.tensor([0, 1, 4]),
                                                             mode="sum"),
         ints(6, high=5, extra=[(5, 2)])),
    Case("one_hot", lambda m, i: F(m).one_hot(i), ints(3, 4, high=5)),
    Case("one_hot_classes", lambda m, i: F(m).one_hot(i, 7), ints(5, high=5)),
    Case("one_hot_0d", lambda m, i: F(m).one_hot(i[0], 3), ints(1, high=3)),
    Case("normalize", lambda m, x: F(m).normalize(x), [(3, 4)]),
    Case("normalize_p1_dim0", lambda m, x: F(m).normalize(x, 1.0, 0), [(3, 4)]),
    Case("normalize_zero_row", lambda m, x: F(m).normalize(x * m.tensor([[0.0], [1.0]],
                                                                        dtype=x.dtype)),
         [(2, 4)]),
    Case("cosine_similarity", lambda m, a, b: F(m).cosine_similarity(a, b), [(3, 4), (3, 4)]),
    Case("cosine_similarity_eps", lambda m, a, b: F(m).cosine_similarity(a * 1e-5, b, dim=0,
                                                                         eps=0.1),
         [(3, 4), (3, 4)]),
    Case("cosine_similarity_1d", lambda m, a, b: F(m).cosine_similarity(a, b, dim=0),
         [(4,), (4,)]),
    Case("pairwise_distance", lambda m, a, b: F(m).pairwise_distance(a, b), [(3, 4), (3, 4)]),
    Case("pairwise_distance_inf", lambda m, a, b: F(m).pairwise_distance(
        a, b, p=float("inf"), keepdim=True), [(3, 4), (3, 4)], gradgrad=False),
    Case("pairwise_distance_1d", lambda m, a, b: F(m).pairwise_distance(a, b), [(4,), (4,)]),
    Case("pdist", lambda m, x: F(m).pdist(x), [(5, 3)], gradgrad=False),
    Case("pdist_p1", lambda m, x: F(m).pdist(x, 1), [(4, 3)], gradgrad=False),
    Case("pad_reexport", lambda m, x: F(m).pad(x, (1, 2), mode="reflect"), [(2, 3, 4)]),
    Case("rrelu_eval", lambda m, x: F(m).rrelu(x, 0.2, 0.5), [(3, 4)]),
    Case("dropout_eval", lambda m, x: F(m).dropout(x, 0.5, training=False), [(3, 4)]),
    Case("dropout2d_eval", lambda m, x: F(m).dropout2d(x, 0.5, training=False), [(2, 3, 4, 4)]),
    Case("alpha_dropout_default", lambda m, x: F(m).alpha_dropout(x, 0.5), [(3, 4)]),
]

LOSSES = [
    Case("mse_loss_legacy", lambda m, x, y: F(m).mse_loss(x, y, size_average=False),
         [(3, 4), (3, 4)]),
    Case("l1_loss_reduce", lambda m, x, y: F(m).l1_loss(x, y, reduce=False), [(3, 4), (3, 4)]),
    Case("cross_entropy", lambda m, x, t: F(m).cross_entropy(x, t),
         lambda rng: [rng.standard_normal((4, 3)), rng.integers(0, 3, 4)]),
    Case("nll_loss_sum", lambda m, x, t: F(m).nll_loss(x, t, reduction="sum"),
         lambda rng: [rng.standard_normal((4, 3)), rng.integers(0, 3, 4)]),
    Case("binary_cross_entropy", lambda m, x, y: F(m).binary_cross_entropy(x.sigmoid(), y),
         lambda rng: [rng.standard_normal((3, 4)), rng.uniform(0, 1, (3, 4))]),
    Case("bce_with_logits", lambda m, x, y: F(m).binary_cross_entropy_with_logits(x, y),
         lambda rng: [rng.standard_normal((3, 4)), rng.uniform(0, 1, (3, 4))]),
    Case("kl_div_sum", lambda m, x, y: F(m).kl_div(F(m).log_softmax(x, 1), y.softmax(1),
                                                   reduction="sum"), [(3, 4), (3, 4)]),
    Case("huber_loss", lambda m, x, y: F(m).huber_loss(x, y, delta=0.5), [(3, 4), (3, 4)]),
    Case("smooth_l1_loss", lambda m, x, y: F(m).smooth_l1_loss(x, y, beta=2.0), [(3, 4), (3, 4)]),
    Case("poisson_nll_loss", lambda m, x, y: F(m).poisson_nll_loss(x, y.abs()), [(3, 4), (3, 4)]),
    Case("gaussian_nll_loss_float_var", lambda m, x, y: F(m).gaussian_nll_loss(x, y, 0.5),
         [(3, 4), (3, 4)]),
    Case("gaussian_nll_loss_small_var", lambda m, x, y, v: F(m).gaussian_nll_loss(
        x, y, v * 1e-8), [(3, 4), (3, 4), (3, 4)], low=0.1, high=1.0),
    Case("soft_margin_loss", lambda m, x, y: F(m).soft_margin_loss(x, y.sign()),
         [(3, 4), (3, 4)], requires_grad=[True, False]),
    Case("multilabel_soft_margin_loss", lambda m, x, y: F(m).multilabel_soft_margin_loss(
        x, (y > 0).to(x.dtype)), [(3, 4), (3, 4)]),
    Case("multi_margin_loss", lambda m, x, t: F(m).multi_margin_loss(x, t, margin=0.5),
         lambda rng: [rng.standard_normal((4, 3)), rng.integers(0, 3, 4)], gradgrad=False),
    Case("multi_margin_loss_1d", lambda m, x, t: F(m).multi_margin_loss(x, t[0]),
         lambda rng: [rng.standard_normal(3), rng.integers(0, 3, 1)], gradgrad=False),
    Case("triplet_margin_loss", lambda m, a, p, n: F(m).triplet_margin_loss(a, p, n, swap=True),
         [(4, 3), (4, 3), (4, 3)]),
    Case("triplet_margin_with_distance", lambda m, a, p, n: F(
        m).triplet_margin_with_distance_loss(a, p, n, margin=2.0), [(4, 3), (4, 3), (4, 3)]),
    Case("margin_ranking_loss", lambda m, a, b, y: F(m).margin_ranking_loss(a, b, y.sign()),
         [(5,), (5,), (5,)], requires_grad=[True, True, False]),
    Case("hinge_embedding_loss", lambda m, x, y: F(m).hinge_embedding_loss(x, y.sign()),
         [(3, 4), (3, 4)], requires_grad=[True, False]),
    Case("cosine_embedding_loss", lambda m, a, b, y: F(m).cosine_embedding_loss(
        a, b, y.sign(), margin=-0.2), [(5, 3), (5, 3), (5,)], requires_grad=[True, True, False]),
]


@cases(ACTIVATIONS + IMPLICIT_DIM)
def test_functional_activations(case):
    check(case)


@cases(LINEAR)
def test_functional_layers(case):
    check(case)


@cases(LOSSES)
def test_functional_losses(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(case)


ERRORS = [
    ("inplace_on_leaf", lambda m, x: F(m).relu(x.requires_grad_(), inplace=True), [(3,)]),
    ("inplace_elu_on_leaf", lambda m, x: F(m).elu(x.requires_grad_(), inplace=True), [(3,)]),
    ("glu_0d", lambda m, x: F(m).glu(x[0]), [(3,)]),
    ("gelu_approximate", lambda m, x: F(m).gelu(x, approximate="fast"), [(3,)]),
    ("softshrink_negative", lambda m, x: F(m).softshrink(x, -1.0), [(3,)]),
    ("hardtanh_bounds", lambda m, x: F(m).hardtanh(x, 1.0, -1.0), [(3,)]),
    ("prelu_weight_dims", lambda m, x: F(m).prelu(x, m.ones(2, 2, dtype=x.dtype)), [(3, 4)]),
    ("linear_mismatch", lambda m, x: F(m).linear(x, m.ones(4, 2, dtype=x.dtype)), [(3, 5)]),
    ("bilinear_features", lambda m, x: F(m).bilinear(x, x, m.ones(2, 3, 2, dtype=x.dtype)),
     [(3, 2)]),
    ("dropout_p", lambda m, x: F(m).dropout(x, 1.5), [(3,)]),
    ("alpha_dropout_p", lambda m, x: F(m).alpha_dropout(x, -0.5), [(3,)]),
    ("one_hot_float", lambda m, x: F(m).one_hot(x), [(3,)]),
    ("one_hot_negative", lambda m, x: F(m).one_hot(m.tensor([-1, 2])), [(3,)]),
    ("one_hot_too_large", lambda m, x: F(m).one_hot(m.tensor([1, 5]), 3), [(3,)]),
    ("one_hot_empty", lambda m, x: F(m).one_hot(m.zeros(0, dtype=m.int64)), [(3,)]),
    ("embedding_bag_offsets_start", lambda m, x: F(m).embedding_bag(
        m.tensor([0, 1, 2]), x, m.tensor([1, 2])), [(3, 2)]),
    ("embedding_bag_3d", lambda m, x: F(m).embedding_bag(m.zeros(1, 1, 1, dtype=m.int64), x),
     [(3, 2)]),
    ("embedding_bag_mode", lambda m, x: F(m).embedding_bag(m.zeros(1, 2, dtype=m.int64), x,
                                                            mode="prod"), [(3, 2)]),
    ("pdist_3d", lambda m, x: F(m).pdist(x), [(2, 3, 4)]),
]


@pytest.mark.parametrize("name,fn,shapes", ERRORS, ids=[e[0] for e in ERRORS])
def test_functional_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    check_raises(fn, *[rng.standard_normal(s) for s in shapes])


def test_implicit_dim_warns_and_reexports():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        ember.nn.functional.softmax(ember.ones(2, 3))
    for name in ("relu", "cross_entropy", "embedding", "dropout", "normalize", "one_hot"):
        assert name in ember.nn.functional.__all__
    # sparse=True: the same gradient values, as a dense tensor
    import torch
    grads = []
    for m in (ember, torch):
        w = m.ones(3, 2, requires_grad=True)
        m.nn.functional.embedding(m.tensor([0, 2, 0]), w, sparse=True).sum().backward()
        grads.append(w.grad.to_dense().numpy())
    np.testing.assert_array_equal(*grads)


def test_inplace_functional_returns_input_and_bumps_version():
    x = ember.randn(3, 4)
    ref = np.where(x.numpy() > 0, x.numpy(), 0.2 * x.numpy())
    v = x._version
    out = ember.nn.functional.leaky_relu(x, 0.2, inplace=True)
    assert out is x and x._version > v
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-6)


ACTIVATIONS_GP = [
    ("relu", lambda m, t: m.relu(t)),
    ("leaky_relu", lambda m, t: m.nn.functional.leaky_relu(t, 0.2)),
    ("clamp", lambda m, t: t.clamp(-0.1, 0.1)),
    ("abs", lambda m, t: t.abs()),
    ("hardtanh", lambda m, t: m.nn.functional.hardtanh(t)),
    ("relu6", lambda m, t: m.nn.functional.relu6(t)),
]


@pytest.mark.parametrize("name,act", ACTIVATIONS_GP, ids=[a[0] for a in ACTIVATIONS_GP])
def test_gradient_penalty_reaches_earlier_biases_like_torch(name, act):
    """Second derivatives through piecewise-linear activations: zeros where PyTorch
    gives zeros, None where it gives None (its clamp is not connected)."""
    import torch
    results = []
    for m in (ember, torch):
        m.manual_seed(0)
        l1, l2 = m.nn.Linear(3, 4), m.nn.Linear(4, 1)
        x = m.randn(5, 3, requires_grad=True)
        g, = m.autograd.grad(l2(act(m, l1(x))).sum(), x, create_graph=True)
        gp = (g.norm(2, dim=1) - 1).pow(2).mean()
        r, = m.autograd.grad(gp, [l1.bias], allow_unused=True)
        results.append(None if r is None else r.detach().numpy().tolist())
    assert results[0] == results[1]
