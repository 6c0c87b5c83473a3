"""The neural-network kernels at torch's top level (ATen signatures), against torch."""
import numpy as np
import pytest
from oracle import Case, cases, check

ints = np.array


def _seeded(fn):
    def run(m, *a):
        m.manual_seed(3)
        return fn(m, *a)
    return run


def _rnn_params(rng, mode, I, H, layers, D, bias, proj=0):
    chunks = {"lstm": 4, "gru": 3}.get(mode, 1)
    out = []
    for layer in range(layers):
        for _ in range(D):
            inp = I if layer == 0 else (proj or H) * D
            out += [rng.standard_normal((chunks * H, inp)) * 0.3,
                    rng.standard_normal((chunks * H, proj or H)) * 0.3]
            if bias:
                out += [rng.standard_normal(chunks * H) * 0.3,
                        rng.standard_normal(chunks * H) * 0.3]
            if proj:
                out.append(rng.standard_normal((proj, H)) * 0.3)
    return out


def _rnn_case(mode, layers, bidir, bias, batch_first, proj=0):
    D = 2 if bidir else 1
    T, B, I, H = 4, 3, 5, 6

    def inputs(rng):
        x = rng.standard_normal((B, T, I) if batch_first else (T, B, I))
        h = rng.standard_normal((layers * D, B, proj or H))
        c = rng.standard_normal((layers * D, B, H))
        return [x, h, c] + _rnn_params(rng, mode, I, H, layers, D, bias, proj)

    def fn(m, x, h, c, *params):
        hx = [h, c] if mode == "lstm" else h
        return getattr(m, mode)(x, hx, list(params), bias, layers, 0.0, False, bidir,
                                batch_first)
    return Case(f"{mode}_{layers}l_bidir{bidir}_bias{bias}_bf{batch_first}_p{proj}", fn,
                inputs, gradgrad=False, noncontig=False)


def _cell_case(name):
    chunks = {"lstm_cell": 4, "gru_cell": 3}.get(name, 1)

    def inputs(rng):
        return [rng.standard_normal((3, 5)), rng.standard_normal((3, 4)),
                rng.standard_normal((3, 4)), rng.standard_normal((chunks * 4, 5)),
                rng.standard_normal((chunks * 4, 4)), rng.standard_normal(chunks * 4),
                rng.standard_normal(chunks * 4)]

    def fn(m, x, h, c, wi, wh, bi, bh):
        hx = [h, c] if name == "lstm_cell" else h
        return getattr(m, name)(x, hx, wi, wh, bi, bh)
    return Case(name, fn, inputs, gradgrad=False)


TABLE = [
    Case("celu", lambda m, x: m.celu(x, 0.7), [(3, 4)]),
    Case("selu", lambda m, x: m.selu(x), [(3, 4)]),
    Case("threshold", lambda m, x: m.threshold(x, 0.1, -2.0), [(3, 4)]),
    Case("hardshrink", lambda m, x: m.hardshrink(x, 0.3), [(3, 4)]),
    Case("prelu", lambda m, x, w: m.prelu(x, w), [(2, 3, 4), (3,)]),
    Case("rrelu_eval", lambda m, x: m.rrelu(x, 0.1, 0.3, False), [(3, 4)]),
    Case("bilinear", lambda m, a, b, w, c: m.bilinear(a, b, w, c),
         [(2, 3), (2, 4), (5, 3, 4), (5,)]),
    Case("embedding", lambda m, w, i: m.embedding(w, i, 1),
         lambda r: [r.standard_normal((5, 3)), ints([[0, 1, 4], [1, 2, 2]])]),
    Case("batch_norm_train", lambda m, x, w, b: m.batch_norm(
        x, w, b, m.zeros(3, dtype=x.dtype), m.ones(3, dtype=x.dtype), True, 0.1, 1e-5,
        False), [(4, 3, 2), (3,), (3,)], gradgrad=False),
    Case("batch_norm_eval", lambda m, x, w, b, rm, rv: m.batch_norm(
        x, w, b, rm, rv.abs() + 0.5, False, 0.1, 1e-5, False),
        [(4, 3, 2), (3,), (3,), (3,), (3,)], requires_grad=[True, True, True, False, False]),
    Case("instance_norm", lambda m, x, w, b: m.instance_norm(
        x, w, b, None, None, True, 0.1, 1e-5, False), [(2, 3, 5), (3,), (3,)],
        gradgrad=False),
    Case("bce_with_logits_sum", lambda m, x, t, pw: m.binary_cross_entropy_with_logits(
        x, t.sigmoid(), None, pw, 2), [(3, 4), (3, 4), (4,)],
        requires_grad=[True, True, False]),
    Case("kl_div_none_logt", lambda m, x, t: m.kl_div(x, t, 0, log_target=True),
         [(3, 4), (3, 4)]),
    Case("kl_div_mean", lambda m, x, t: m.kl_div(x, t.abs(), 1), [(3, 4), (3, 4)]),
    Case("cosine_embedding_loss", lambda m, a, b, t: m.cosine_embedding_loss(
        a, b, m.tensor([1, -1, 1]), 0.2, 1), [(3, 5), (3, 5), (3,)],
        requires_grad=[True, True, False]),
    Case("hinge_embedding_loss", lambda m, x: m.hinge_embedding_loss(
        x, m.tensor([1.0, -1.0, 1.0, -1.0], dtype=x.dtype), 0.5, 2), [(4,)]),
    Case("margin_ranking_loss", lambda m, a, b: m.margin_ranking_loss(
        a, b, m.tensor([1.0, -1.0, 1.0], dtype=a.dtype), 0.1, 0), [(3,), (3,)]),
    Case("poisson_nll_loss", lambda m, x, t: m.poisson_nll_loss(x, t.abs(), True, True,
                                                                1e-8, 1), [(3, 4), (3, 4)]),
    Case("triplet_margin_loss", lambda m, a, p, n: m.triplet_margin_loss(
        a, p, n, 1.0, 2.0, 1e-6, True, 1), [(3, 4), (3, 4), (3, 4)], gradgrad=False),
    Case("ctc_loss", lambda m, lp: m.ctc_loss(
        lp.log_softmax(2), m.tensor([[1, 2, 2], [1, 3, 0]]), [6, 5], [3, 2], 0, 1, False),
        [(6, 2, 4)], gradgrad=False),
    Case("cosine_similarity", lambda m, a, b: m.cosine_similarity(a, b, 0), [(3, 4), (3, 4)]),
    Case("pairwise_distance", lambda m, a, b: m.pairwise_distance(a, b, 3.0, 1e-6, True),
         [(3, 4), (3, 4)]),
    Case("pdist", lambda m, x: m.pdist(x, 2), [(4, 3)], gradgrad=False),
    Case("channel_shuffle", lambda m, x: m.channel_shuffle(x, 2), [(2, 4, 3)]),
    Case("native_channel_shuffle", lambda m, x: m.native_channel_shuffle(x, 2),
         [(2, 4, 3)], grad=False),
    Case("kl_div_default_none", lambda m, x, t: m.kl_div(x, t.abs()), [(3, 4), (3, 4)]),
    Case("losses_default_none", lambda m, x, t: (
        m.binary_cross_entropy_with_logits(x, t.sigmoid()),
        m.hinge_embedding_loss(x, t), m.triplet_margin_loss(x, t, x * 2)),
        [(3, 4), (3, 4)], gradgrad=False),
    Case("adaptive_max_pool1d", lambda m, x: m.adaptive_max_pool1d(x, 3), [(2, 3, 7)]),
    Case("max_pool1d_with_indices", lambda m, x: m.max_pool1d_with_indices(x, 3, [], 1),
         [(2, 3, 7)]),
    Case("max_pool1d_with_indices_stride", lambda m, x: m.max_pool1d_with_indices(
        x, [2], [1], [0], [2], True), [(2, 3, 7)]),
    Case("affine_grid_generator", lambda m, t: m.affine_grid_generator(t, [2, 3, 4, 5],
                                                                        False), [(2, 2, 3)]),
    Case("grid_sampler_bilinear_border", lambda m, x, g: m.grid_sampler(
        x, g.tanh(), 0, 1, True), [(1, 2, 4, 5), (1, 3, 3, 2)], gradgrad=False),
    Case("grid_sampler_2d_nearest", lambda m, x, g: m.grid_sampler_2d(
        x, g.tanh(), 1, 0, False), [(1, 2, 4, 5), (1, 3, 3, 2)], gradgrad=False),
    Case("grid_sampler_3d", lambda m, x, g: m.grid_sampler_3d(x, g.tanh(), 0, 2, False),
         [(1, 2, 3, 4, 5), (1, 2, 3, 2, 3)], gradgrad=False),
    Case("conv_tbc", lambda m, x, w, b: m.conv_tbc(x, w, b, 1), [(7, 2, 3), (3, 3, 4), (4,)],
         gradgrad=False),
    Case("convolution_2d", lambda m, x, w, b: m.convolution(
        x, w, b, [2, 1], [1, 0], [1, 2], False, [0, 0], 1), [(2, 3, 6, 7), (4, 3, 3, 2),
                                                             (4,)], gradgrad=False),
    Case("convolution_transposed_1d_groups", lambda m, x, w, b: m.convolution(
        x, w, b, [2], [1], [1], True, [1], 2), [(2, 4, 5), (4, 3, 3), (6,)],
        gradgrad=False),
    Case("native_norm_sparse", lambda m, x: m.native_norm((x * (x > 0)).to_sparse(), 3),
         [(3, 4)], grad=False),
    Case("native_norm_sparse_dims", lambda m, x: m.native_norm(
        (x * (x > 0)).to_sparse(), 2, [0, 1], False, None), [(3, 4)], grad=False),
    Case("norm_except_dim", lambda m, x: m.norm_except_dim(x, 2, 1), [(3, 4, 2)]),
    Case("norm_except_dim_all", lambda m, x: m.norm_except_dim(x, 2, -1), [(3, 4)]),
    Case("frobenius_norm", lambda m, x: m.frobenius_norm(x, [0, 2], True), [(3, 4, 2)]),
    Case("nuclear_norm", lambda m, x: m.nuclear_norm(x), [(3, 4)], gradgrad=False),
    Case("nuclear_norm_dim", lambda m, x: m.nuclear_norm(x, [0, 2], True), [(3, 4, 2)],
         gradgrad=False),
    Case("dropout", _seeded(lambda m, x: m.dropout(x, 0.3, True)), [(5, 6)]),
    Case("dropout_eval", lambda m, x: m.dropout(x, 0.3, False), [(5, 6)]),
    Case("alpha_dropout", _seeded(lambda m, x: m.alpha_dropout(x, 0.3, True)), [(5, 6)]),
    Case("feature_dropout", _seeded(lambda m, x: m.feature_dropout(x, 0.5, True)),
         [(4, 6, 3)]),
    Case("feature_alpha_dropout", _seeded(lambda m, x: m.feature_alpha_dropout(x, 0.5,
                                                                               True)),
         [(4, 6, 3)]),
    Case("native_dropout", _seeded(lambda m, x: m.native_dropout(x, 0.4, True)), [(5, 6)]),
    Case("native_dropout_eval", lambda m, x: m.native_dropout(x, 0.4, False), [(5, 6)]),
    Case("dropout_inplace", _seeded(lambda m, x: m.dropout_(x * 1, 0.3, True)), [(5, 6)]),
    Case("celu_inplace", lambda m, x: m.celu_(x * 1, 1.5), [(5, 6)]),
    Case("selu_inplace", lambda m, x: m.selu_(x * 1), [(5, 6)]),
    Case("threshold_inplace", lambda m, x: m.threshold_(x * 1, 0.0, 9.0), [(5, 6)]),
    Case("rrelu_inplace_eval", lambda m, x: m.rrelu_(x * 1), [(5, 6)]),
    Case("alpha_dropout_inplace", _seeded(lambda m, x: m.alpha_dropout_(x * 1, 0.2, True)),
         [(5, 6)]),
    Case("feature_dropout_inplace", _seeded(lambda m, x: m.feature_dropout_(x * 1, 0.2,
                                                                            True)),
         [(4, 5, 2)]),
    Case("feature_alpha_dropout_inplace", _seeded(
        lambda m, x: m.feature_alpha_dropout_(x * 1, 0.2, True)), [(4, 5, 2)]),
    _cell_case("lstm_cell"), _cell_case("gru_cell"), _cell_case("rnn_tanh_cell"),
    _cell_case("rnn_relu_cell"),
    _rnn_case("lstm", 2, True, True, False),
    _rnn_case("lstm", 1, False, False, True, proj=3),
    _rnn_case("gru", 2, False, True, True),
    _rnn_case("rnn_tanh", 1, True, True, False),
    _rnn_case("rnn_relu", 2, False, False, False),
]


@cases(TABLE)
def test_kernel(case):
    check(case)


def test_native_norm_dense_raises_as_torch():
    from oracle import check_raises
    check_raises(lambda m, x: m.native_norm(x), np.ones((2, 3)), exc=NotImplementedError)


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("extra", ["plain", "last", "pad", "pad_none", "no_grad", "f32",
                                   "f32_pad", "f32_pad_none", "f32_no_grad"])
def test_embedding_bag(mode, extra):
    import torch

    import ember
    rng = np.random.default_rng(mode)
    w = rng.standard_normal((6, 3))
    if extra.startswith("f32"):
        w = w.astype(np.float32)
        extra = extra[4:] or "plain"
    idx, off = [0, 2, 4, 5, 4, 1], [0, 2, 2, 5]
    outs = []
    for m in (ember, torch):
        wt = m.tensor(w, requires_grad=extra != "no_grad")
        args = (m.tensor([0, 2, 2, 6]), False, mode, False, None, True) if extra == "last" \
            else (m.tensor(off), False, mode, False, None, False)
        if extra.startswith("pad"):
            args += (2 if extra == "pad" else None,)
        r = m.embedding_bag(wt, m.tensor(idx), *args)
        grads = []
        if wt.requires_grad:
            r[0].sum().backward()
            grads = [wt.grad.numpy()]
        outs.append([x.detach().numpy() for x in r] + grads)
    for a, b in zip(*outs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6 if a.dtype == np.float32 else 1e-12)


def test_embedding_renorm_():
    import torch

    import ember
    w = np.random.default_rng(0).standard_normal((5, 3)) * 3
    idx = [0, 2, 2, 4]
    et, tt = ember.tensor(w), torch.tensor(w)
    assert ember.embedding_renorm_(et, ember.tensor(idx), 1.5, 2.0) is et
    torch.embedding_renorm_(tt, torch.tensor(idx), 1.5, 2.0)
    np.testing.assert_allclose(et.numpy(), tt.numpy(), rtol=1e-12)


def test_packed_lstm_matches_torch():
    import torch

    import ember
    rng = np.random.default_rng(1)
    data = rng.standard_normal((6, 3))
    bs = [3, 2, 1]
    params = _rnn_params(rng, "lstm", 3, 4, 1, 1, True)
    h = rng.standard_normal((1, 3, 4))
    c = rng.standard_normal((1, 3, 4))
    outs = []
    for m in (ember, torch):
        outs.append(m.lstm(m.tensor(data), m.tensor(bs), [m.tensor(h), m.tensor(c)],
                           [m.tensor(p) for p in params], True, 1, 0.0, False, False))
    for a, b in zip(*outs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
