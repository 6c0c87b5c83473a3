"""nn layers against torch: forward, input and parameter gradients, second gradients.

Parameters are passed to the oracle as inputs: ``with_params`` swaps a module's
Parameters for the oracle's leaf tensors, so ``grad[i]`` covers them too.
"""
import numpy as np
import pytest
import torch
from oracle import Case, cases, check, check_raises

import ember


def with_params(mod, *tensors):
    """Replace ``mod``'s parameters (in ``named_parameters`` order) by plain tensors."""
    names = [n for n, _ in mod.named_parameters()]
    assert len(names) == len(tensors), names
    for name, t in zip(names, tensors):
        owner_name, _, attr = name.rpartition(".")
        owner = mod.get_submodule(owner_name)
        delattr(owner, attr)
        setattr(owner, attr, t)
    return mod


def mod(m, cls, *args, train=True, **kw):
    module = getattr(m.nn, cls)(*args, **kw)
    return module.train(train)


def idx(*shape, high=5, extra=()):
    """Inputs: integer indices of ``shape`` in [0, high), then normal arrays of shapes ``extra``."""
    def make(rng):
        out = [rng.integers(0, high, size=shape).astype(np.int64)]
        return out + [rng.standard_normal(s) for s in extra]
    return make


ACT = [
    ("ReLU", (), {}), ("ReLU6", (), {}), ("LeakyReLU", (0.2,), {}), ("ELU", (0.7,), {}),
    ("SELU", (), {}), ("CELU", (1.3,), {}), ("GELU", (), {}), ("GELU", (), {"approximate": "tanh"}),
    ("SiLU", (), {}), ("Mish", (), {}), ("Softplus", (), {}), ("Softplus", (2.0, 1.0), {}),
    ("Softsign", (), {}), ("Hardtanh", (-0.5, 0.7), {}), ("Hardsigmoid", (), {}),
    ("Hardswish", (), {}), ("Sigmoid", (), {}), ("Tanh", (), {}), ("Tanhshrink", (), {}),
    ("Softshrink", (0.3,), {}), ("Hardshrink", (0.3,), {}), ("LogSigmoid", (), {}),
    ("Softmax", (1,), {}), ("LogSoftmax", (-1,), {}), ("Softmin", (0,), {}),
    ("Softmax2d", (), {}), ("Threshold", (0.1, -2.0), {}), ("GLU", (1,), {}), ("Identity", (), {}),
]


# torch has no double backward for these
_NO_GRADGRAD = {"Hardsigmoid", "Hardswish"}


def _act_case(name, args, kw, shape=(3, 4, 2, 3), **case_kw):
    label = name + "".join(f"_{a}" for a in args) + "".join(f"_{v}" for v in kw.values())
    case_kw.setdefault("gradgrad", name not in _NO_GRADGRAD)
    return Case(label, lambda m, x: mod(m, name, *args, **kw)(x * 3), [shape], **case_kw)


ACTIVATIONS = [_act_case(*a) for a in ACT] + [
    _act_case("ReLU", (), {}, shape=()),
    _act_case("GELU", (), {}, shape=(0, 3)),
    _act_case("Softmax", (0,), {}, shape=(5,), dtype=np.float32),
    _act_case("LogSigmoid", (), {}, shape=(4, 5), dtype=np.float32),
    Case("Softplus_large", lambda m, x: mod(m, "Softplus")(x * 40), [(4, 5)]),
    Case("ELU_large", lambda m, x: mod(m, "ELU")(x * 400), [(4, 5)]),
    Case("LogSigmoid_large", lambda m, x: mod(m, "LogSigmoid")(x * 400), [(4, 5)]),
    Case("RReLU_eval", lambda m, x: mod(m, "RReLU", 0.1, 0.4, train=False)(x), [(3, 4)]),
    Case("PReLU_shared", lambda m, x, w: with_params(mod(m, "PReLU"), w)(x), [(3, 4, 5), (1,)]),
    Case("PReLU_channels", lambda m, x, w: with_params(mod(m, "PReLU", 4), w)(x),
         [(3, 4, 5), (4,)]),
    Case("PReLU_1d", lambda m, x, w: with_params(mod(m, "PReLU", 1), w)(x), [(5,), (1,)]),
    # in-place on a non-leaf: the graph goes through the write
    Case("ReLU_inplace", lambda m, x: mod(m, "ReLU", True)(x * 1.0) * 2, [(3, 4)]),
    Case("LeakyReLU_inplace", lambda m, x: mod(m, "LeakyReLU", 0.1, True)(x * 1.0), [(3, 4)]),
    Case("ELU_inplace", lambda m, x: mod(m, "ELU", 1.0, True)(x + 0.0), [(3, 4)]),
    Case("Hardtanh_inplace", lambda m, x: mod(m, "Hardtanh", -0.5, 0.5, True)(x + 0), [(3, 4)]),
    Case("SiLU_inplace", lambda m, x: mod(m, "SiLU", True)(x + 0), [(3, 4)]),
    Case("Threshold_inplace", lambda m, x: mod(m, "Threshold", 0.2, 5.0, True)(x + 0),
         [(3, 4)]),
]

LINEAR = [
    Case("Linear", lambda m, x, w, b: with_params(mod(m, "Linear", 4, 3), w, b)(x),
         [(5, 4), (3, 4), (3,)]),
    Case("Linear_3d", lambda m, x, w, b: with_params(mod(m, "Linear", 4, 2), w, b)(x),
         [(2, 5, 4), (2, 4), (2,)]),
    Case("Linear_1d_input", lambda m, x, w, b: with_params(mod(m, "Linear", 4, 2), w, b)(x),
         [(4,), (2, 4), (2,)]),
    Case("Linear_nobias", lambda m, x, w: with_params(mod(m, "Linear", 4, 3, bias=False), w)(x),
         [(5, 4), (3, 4)]),
    Case("Linear_f32", lambda m, x, w, b: with_params(mod(m, "Linear", 4, 3), w, b)(x),
         [(5, 4), (3, 4), (3,)], dtype=np.float32),
    Case("Linear_empty_batch", lambda m, x, w, b: with_params(mod(m, "Linear", 4, 3), w, b)(x),
         [(0, 4), (3, 4), (3,)]),
    Case("Bilinear", lambda m, x1, x2, w, b: with_params(mod(m, "Bilinear", 3, 2, 4), w, b)(
        x1, x2), [(5, 3), (5, 2), (4, 3, 2), (4,)]),
    Case("Bilinear_3d", lambda m, x1, x2, w: with_params(
        mod(m, "Bilinear", 3, 2, 4, bias=False), w)(x1, x2), [(2, 5, 3), (2, 5, 2), (4, 3, 2)]),
    Case("Flatten", lambda m, x: mod(m, "Flatten")(x), [(2, 3, 4, 5)]),
    Case("Flatten_dims", lambda m, x: mod(m, "Flatten", 0, 2)(x), [(2, 3, 4, 5)]),
    Case("Unflatten", lambda m, x: mod(m, "Unflatten", 1, (3, 4))(x), [(2, 12, 5)]),
    Case("CosineSimilarity", lambda m, a, b: mod(m, "CosineSimilarity")(a, b), [(4, 5), (4, 5)]),
    Case("CosineSimilarity_bcast", lambda m, a, b: mod(m, "CosineSimilarity", -1)(a, b),
         [(3, 4, 5), (4, 5)]),
    Case("PairwiseDistance", lambda m, a, b: mod(m, "PairwiseDistance")(a, b), [(4, 5), (4, 5)]),
    Case("PairwiseDistance_p1_keep", lambda m, a, b: mod(m, "PairwiseDistance", 1.0, 1e-6,
                                                         True)(a, b), [(4, 5), (4, 5)]),
    Case("PairwiseDistance_p3", lambda m, a, b: mod(m, "PairwiseDistance", 3.0)(a, b),
         [(4, 5), (5,)]),
]


def _emb(m, w, *args, **kw):
    return with_params(mod(m, "Embedding", 6, 3, *args, **kw), w)


def _bag(m, w, **kw):
    return with_params(mod(m, "EmbeddingBag", 6, 3, **kw), w)


def _offsets(m):
    return m.tensor([0, 2, 2, 5])


EMBEDDING = [
    Case("Embedding", lambda m, i, w: _emb(m, w)(i), idx(4, 3, high=6, extra=[(6, 3)])),
    Case("Embedding_padding", lambda m, i, w: _emb(m, w, padding_idx=2)(i),
         idx(4, 5, high=6, extra=[(6, 3)])),
    Case("Embedding_padding_neg", lambda m, i, w: _emb(m, w, padding_idx=-1)(i),
         idx(4, 5, high=6, extra=[(6, 3)])),
    Case("Embedding_max_norm", lambda m, i, w: _emb(m, w, max_norm=1.0)(i) * 1.0,
         idx(7, high=6, extra=[(6, 3)]), noncontig=False),
    Case("Embedding_scale_grad", lambda m, i, w: _emb(m, w, scale_grad_by_freq=True)(i),
         idx(9, high=4, extra=[(6, 3)])),
    Case("Embedding_0d", lambda m, i, w: _emb(m, w)(i[0, 0]), idx(1, 1, high=6, extra=[(6, 3)])),
    Case("EmbeddingBag_mean_2d", lambda m, i, w: _bag(m, w)(i), idx(4, 3, high=6, extra=[(6, 3)])),
    Case("EmbeddingBag_sum_offsets", lambda m, i, w: _bag(m, w, mode="sum")(i, _offsets(m)),
         idx(7, high=6, extra=[(6, 3)])),
    Case("EmbeddingBag_mean_offsets", lambda m, i, w: _bag(m, w)(i, _offsets(m)),
         idx(7, high=6, extra=[(6, 3)])),
    Case("EmbeddingBag_max_offsets", lambda m, i, w: _bag(m, w, mode="max")(i, _offsets(m)),
         idx(7, high=6, extra=[(6, 3)]), gradgrad=False),
    Case("EmbeddingBag_max_2d", lambda m, i, w: _bag(m, w, mode="max")(i),
         idx(3, 4, high=6, extra=[(6, 3)]), gradgrad=False),
    Case("EmbeddingBag_psw", lambda m, i, w, s: _bag(m, w, mode="sum")(i, _offsets(m), s),
         idx(7, high=6, extra=[(6, 3), (7,)]), gradgrad=False),
    Case("EmbeddingBag_padding", lambda m, i, w: _bag(m, w, padding_idx=1)(i, _offsets(m)),
         idx(7, high=3, extra=[(6, 3)])),
    Case("EmbeddingBag_last_offset", lambda m, i, w: _bag(
        m, w, mode="sum", include_last_offset=True)(i, m.tensor([0, 3, 7])),
        idx(7, high=6, extra=[(6, 3)])),
]

DROPOUT_EVAL = [
    Case(f"{name}_eval", lambda m, x, name=name: mod(m, name, 0.4, train=False)(x), [shape])
    for name, shape in [("Dropout", (3, 4)), ("Dropout1d", (2, 3, 4)), ("Dropout2d", (2, 3, 4, 5)),
                        ("Dropout3d", (2, 3, 2, 2, 2)), ("AlphaDropout", (3, 4)),
                        ("FeatureAlphaDropout", (2, 3, 4))]
] + [
    Case("Dropout_p0_train", lambda m, x: mod(m, "Dropout", 0.0)(x), [(3, 4)]),
    Case("Dropout_p1_train", lambda m, x: mod(m, "Dropout", 1.0)(x), [(3, 4)]),
]


@cases(ACTIVATIONS)
def test_activations(case):
    check(case)


@cases(LINEAR)
def test_linear_and_distance(case):
    check(case)


@cases(EMBEDDING)
def test_embedding(case):
    check(case)


@cases(DROPOUT_EVAL)
def test_dropout_deterministic(case):
    check(case)


def _manual_seed(m, seed):
    m.manual_seed(seed)


@pytest.mark.parametrize("name,shape", [("Dropout", (40, 50)), ("Dropout1d", (6, 8, 5)),
                                        ("Dropout2d", (6, 8, 3, 3)),
                                        ("Dropout3d", (8, 6, 2, 2, 2)),
                                        ("AlphaDropout", (40, 50)),
                                        ("FeatureAlphaDropout", (6, 8, 3, 3))])
def test_dropout_train_statistics(name, shape):
    """Masks are random: check the structure and scaling, and the gradient through them."""
    p = 0.3
    ember.manual_seed(0)
    layer = getattr(ember.nn, name)(p)
    x = ember.ones(*shape, dtype=ember.float64, requires_grad=True)
    y = layer(x)
    y.sum().backward()
    vals = np.unique(np.round(y.detach().numpy(), 10))
    assert len(vals) == 2
    kept = y.detach().numpy() > vals.mean()
    if name in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d"):
        np.testing.assert_allclose(vals, [0.0, 1 / (1 - p)])
    if name != "Dropout" and name != "AlphaDropout":
        # whole channels are kept or dropped together
        per_channel = kept.reshape(shape[0], shape[1], -1)
        assert (per_channel.all(-1) | ~per_channel.any(-1)).all()
    assert 0.5 < kept.mean() < 0.9
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy() if "Alpha" not in name
                               else np.where(kept, x.grad.numpy().max(), 0.0))
    layer.eval()
    assert layer(x) is x


def test_dropout_inplace_and_errors():
    x = ember.ones(10, 10)
    out = ember.nn.Dropout(0.5, inplace=True)(x)
    assert out is x
    check_raises(lambda m, x: m.nn.Dropout(1.5), np.ones(3))
    check_raises(lambda m, x: m.nn.functional.dropout(x, -0.1), np.ones(3))
    check_raises(lambda m, x: m.nn.functional.dropout1d(x, 0.5), np.ones((2, 3, 4, 5)))


def test_embedding_padding_idx_grad_zero_and_from_pretrained():
    w = np.arange(12.0).reshape(4, 3)
    e = ember.nn.Embedding.from_pretrained(ember.tensor(w), freeze=False, padding_idx=1)
    t = torch.nn.Embedding.from_pretrained(torch.tensor(w), freeze=False, padding_idx=1)
    i = [[1, 2, 1], [0, 1, 3]]
    e(ember.tensor(i)).sum().backward()
    t(torch.tensor(i)).sum().backward()
    np.testing.assert_array_equal(e.weight.grad.numpy(), t.weight.grad.numpy())
    assert not e.weight.grad.numpy()[1].any()
    frozen = ember.nn.Embedding.from_pretrained(ember.tensor(w))
    assert not frozen.weight.requires_grad
    assert repr(frozen) == repr(torch.nn.Embedding.from_pretrained(torch.tensor(w)))
    assert "sparse=True" in repr(ember.nn.Embedding(3, 2, sparse=True))


def test_embedding_max_norm_renormalises_weight_in_place():
    w = np.random.default_rng(0).standard_normal((5, 4)) * 3
    e = ember.nn.Embedding.from_pretrained(ember.tensor(w), max_norm=1.5, norm_type=3.0)
    t = torch.nn.Embedding.from_pretrained(torch.tensor(w), max_norm=1.5, norm_type=3.0)
    i = [0, 2, 2, 4]
    np.testing.assert_allclose(e(ember.tensor(i)).numpy(), t(torch.tensor(i)).numpy())
    np.testing.assert_allclose(e.weight.detach().numpy(), t.weight.detach().numpy())


LAYER_ERRORS = [
    ("linear_features", lambda m, x: m.nn.Linear(3, 4)(x), [(5, 2)]),
    ("linear_0d", lambda m, x: m.nn.functional.linear(x[0, 0], m.ones(4, 3)), [(5, 2)]),
    ("bilinear_features", lambda m, x: m.nn.Bilinear(2, 3, 4)(x, x), [(5, 2)]),
    ("prelu_channels", lambda m, x: m.nn.PReLU(3)(x), [(5, 2)]),
    ("glu_odd", lambda m, x: m.nn.GLU(1)(x), [(5, 3)]),
    ("softmax2d_2d", lambda m, x: m.nn.Softmax2d()(x), [(5, 3)]),
    ("embedding_float_idx", lambda m, x: m.nn.Embedding(4, 2)(x), [(5, 3)]),
    ("embedding_out_of_range", lambda m, x: m.nn.Embedding(4, 2)(m.tensor([4])), [(1,)]),
    ("embedding_padding_range", lambda m, x: m.nn.Embedding(4, 2, padding_idx=4), [(1,)]),
    ("embeddingbag_psw_mean", lambda m, x: m.nn.EmbeddingBag(4, 2)(
        m.tensor([[0, 1]]), per_sample_weights=m.ones(1, 2)), [(1,)]),
    ("unflatten_bad_size", lambda m, x: m.nn.Unflatten(1, (2, 2))(x), [(5, 3)]),
    ("hardtanh_bounds", lambda m, x: m.nn.Hardtanh(1.0, -1.0), [(1,)]),
]


@pytest.mark.parametrize("name,fn,shapes", LAYER_ERRORS, ids=[e[0] for e in LAYER_ERRORS])
def test_layer_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    check_raises(fn, *[rng.standard_normal(s) for s in shapes])


def test_linear_shape_error_names_layer_and_shapes():
    with pytest.raises(RuntimeError) as err:
        ember.nn.Linear(3, 4)(ember.ones(5, 2))
    msg = str(err.value)
    assert "Linear(in_features=3, out_features=4" in msg
    assert "[5, 2]" in msg and "[4, 3]" in msg and "(5x2 and 3x4)" in msg


def test_default_initialisation_bounds():
    lin = ember.nn.Linear(50, 40)
    bound = 1 / np.sqrt(50)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert np.abs(b).max() <= bound
    bil = ember.nn.Bilinear(9, 3, 20)
    assert np.abs(bil.weight.detach().numpy()).max() <= 1 / 3
    emb = ember.nn.Embedding(400, 30, padding_idx=0)
    ew = emb.weight.detach().numpy()
    assert not ew[0].any() and abs(ew[1:].std() - 1) < 0.05
    pr = ember.nn.PReLU(3, init=0.1)
    np.testing.assert_array_equal(pr.weight.detach().numpy(), np.full(3, 0.1, np.float32))
    assert lin.weight.dtype == ember.float32
    assert ember.nn.Linear(2, 2, dtype=ember.float64).weight.dtype == ember.float64


def test_default_initialisation_matches_torch_stream():
    """With matching RNG streams, a freshly seeded layer equals torch's bit for bit."""
    for build in (lambda m: m.nn.Linear(7, 5), lambda m: m.nn.Bilinear(3, 4, 2),
                  lambda m: m.nn.Embedding(6, 4, padding_idx=2), lambda m: m.nn.PReLU(3)):
        ember.manual_seed(0)
        torch.manual_seed(0)
        e, t = build(ember), build(torch)
        for (n, a), (_, b) in zip(e.named_parameters(), t.named_parameters()):
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=n)


def test_rrelu_and_gumbel_softmax_match_torch_stream():
    x = np.random.default_rng(0).standard_normal((5, 6))
    for dtype in ("float32", "float64"):
        res = []
        for m in (ember, torch):
            m.manual_seed(11)
            xi = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
            y = m.nn.RReLU(0.1, 0.6)(xi)
            y.sum().backward()
            m.manual_seed(4)
            g = m.nn.functional.gumbel_softmax(xi.detach(), tau=0.5, hard=True)
            res.append([y.detach().numpy(), xi.grad.numpy(), g.numpy()])
        for a, b in zip(*res):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-15)


def test_dropout_matches_torch_stream():
    ember.manual_seed(3)
    torch.manual_seed(3)
    x = np.random.default_rng(0).standard_normal((6, 7)).astype(np.float32)
    e = ember.nn.functional.dropout(ember.tensor(x), 0.3)
    t = torch.nn.functional.dropout(torch.tensor(x), 0.3)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


def _mlp(m):
    return m.nn.Sequential(m.nn.Linear(3, 5), m.nn.LeakyReLU(0.2), m.nn.Linear(5, 4),
                           m.nn.Tanh(), m.nn.Linear(4, 1))


def _penalty_grads(m, net, x):
    xi = m.tensor(x, requires_grad=True)
    g, = m.autograd.grad(net(xi).sum(), xi, create_graph=True)
    ((g.norm(2, dim=1) - 1) ** 2).mean().backward()
    return [None if p.grad is None else p.grad.numpy() for p in net.parameters()]


def test_gradient_penalty_second_derivatives_through_linear():
    """WGAN-GP: d/dtheta of (||dD(x)/dx|| - 1)^2 needs second derivatives through Linear."""
    x = np.random.default_rng(0).standard_normal((6, 3))
    tnet = _mlp(torch).double()
    enet = _mlp(ember).double()
    enet.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tnet.state_dict().items()})
    e_grads, t_grads = _penalty_grads(ember, enet, x), _penalty_grads(torch, tnet, x)
    assert [g is None for g in e_grads] == [g is None for g in t_grads]
    for a, b in zip(e_grads, t_grads):
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10)
