"""Loss modules and functions against torch: values, gradients, second gradients, errors."""
import warnings

import numpy as np
import pytest
import torch
from oracle import Case, cases, check, check_raises

import ember

RED = ("none", "mean", "sum")


def L(m, name, *args, **kw):
    return getattr(m.nn, name)(*args, **kw)


def arrays(*specs):
    """Inputs from specs: ('n', shape) normal, ('u', shape) uniform(0.05, 0.95),
    ('p', shape) positive, ('pm', shape) random +-1, ('b', shape) 0/1,
    ('c', shape, C) class indices in [0, C), ('soft', shape) probabilities along dim 1."""
    def make(rng):
        out = []
        for spec in specs:
            kind, shape = spec[0], spec[1]
            if kind == "n":
                out.append(rng.standard_normal(shape))
            elif kind == "u":
                out.append(rng.uniform(0.05, 0.95, shape))
            elif kind == "p":
                out.append(rng.uniform(0.5, 2.0, shape))
            elif kind == "pm":
                out.append(rng.choice([-1.0, 1.0], shape))
            elif kind == "b":
                out.append(rng.integers(0, 2, shape).astype(np.float64))
            elif kind == "c":
                out.append(rng.integers(0, spec[2], shape).astype(np.int64))
            elif kind == "soft":
                a = rng.uniform(0.1, 1.0, shape)
                out.append(a / a.sum(1 if len(shape) > 1 else 0, keepdims=True))
        return out
    return make


def _with_ignored(t, ignore=-100, every=3):
    t = t.clone()
    t.view(-1)[::every] = ignore
    return t


LOSSES = []
for r in RED:
    LOSSES += [
        Case(f"L1_{r}", lambda m, x, y, r=r: L(m, "L1Loss", reduction=r)(x, y), [(3, 4), (3, 4)]),
        Case(f"MSE_{r}", lambda m, x, y, r=r: L(m, "MSELoss", reduction=r)(x, y), [(3, 4), (3, 4)]),
        Case(f"SmoothL1_{r}", lambda m, x, y, r=r: L(m, "SmoothL1Loss", reduction=r, beta=0.5)(
            x, y), [(3, 4), (3, 4)]),
        Case(f"Huber_{r}", lambda m, x, y, r=r: L(m, "HuberLoss", reduction=r, delta=0.7)(x, y),
             [(3, 4), (3, 4)]),
        Case(f"BCE_{r}", lambda m, x, y, r=r: L(m, "BCELoss", reduction=r)(x, y),
             arrays(("u", (3, 4)), ("u", (3, 4)))),
        Case(f"BCE_weight_{r}", lambda m, x, y, w, r=r: L(m, "BCELoss", w, reduction=r)(x, y),
             arrays(("u", (3, 4)), ("b", (3, 4)), ("p", (4,))), requires_grad=[1, 0, 0]),
        Case(f"BCEWithLogits_{r}", lambda m, x, y, r=r: L(m, "BCEWithLogitsLoss", reduction=r)(
            x * 5, y), arrays(("n", (3, 4)), ("u", (3, 4)))),
        Case(f"BCEWithLogits_pos_weight_{r}", lambda m, x, y, w, pw, r=r: L(
            m, "BCEWithLogitsLoss", w, reduction=r, pos_weight=pw)(x, y),
            arrays(("n", (3, 4)), ("b", (3, 4)), ("p", (3, 1)), ("p", (4,))),
            requires_grad=[1, 1, 0, 0]),
        Case(f"KLDiv_{r}", lambda m, x, y, r=r: L(m, "KLDivLoss", reduction=r)(x.log(), y),
             arrays(("soft", (3, 4)), ("soft", (3, 4)))),
        Case(f"KLDiv_logtarget_{r}", lambda m, x, y, r=r: L(
            m, "KLDivLoss", reduction=r, log_target=True)(x.log(), y.log()),
            arrays(("soft", (3, 4)), ("soft", (3, 4)))),
        Case(f"NLL_{r}", lambda m, x, t, r=r: L(m, "NLLLoss", reduction=r)(x, t),
             arrays(("n", (5, 4)), ("c", (5,), 4))),
        Case(f"NLL_weight_ignore_{r}", lambda m, x, t, w, r=r: L(
            m, "NLLLoss", w, ignore_index=1, reduction=r)(x, t),
            arrays(("n", (6, 4)), ("c", (6,), 4), ("p", (4,))), requires_grad=[1, 0, 0]),
        Case(f"NLL_kdim_{r}", lambda m, x, t, r=r: L(m, "NLLLoss", reduction=r)(x, t),
             arrays(("n", (2, 3, 4, 2)), ("c", (2, 4, 2), 3))),
        Case(f"CE_{r}", lambda m, x, t, r=r: L(m, "CrossEntropyLoss", reduction=r)(x, t),
             arrays(("n", (5, 4)), ("c", (5,), 4))),
        Case(f"CE_weight_ignore_{r}", lambda m, x, t, w, r=r: L(
            m, "CrossEntropyLoss", w, reduction=r)(x, _with_ignored(t)),
            arrays(("n", (7, 4)), ("c", (7,), 4), ("p", (4,))), requires_grad=[1, 0, 0]),
        Case(f"CE_smoothing_{r}", lambda m, x, t, r=r: L(
            m, "CrossEntropyLoss", reduction=r, label_smoothing=0.2)(x, _with_ignored(t)),
            arrays(("n", (7, 4)), ("c", (7,), 4))),
        Case(f"CE_smoothing_weight_{r}", lambda m, x, t, w, r=r: L(
            m, "CrossEntropyLoss", w, reduction=r, label_smoothing=0.1)(x, _with_ignored(t)),
            arrays(("n", (7, 4)), ("c", (7,), 4), ("p", (4,))), requires_grad=[1, 0, 0]),
        Case(f"CE_kdim_{r}", lambda m, x, t, r=r: L(m, "CrossEntropyLoss", reduction=r)(x, t),
             arrays(("n", (2, 3, 4, 2)), ("c", (2, 4, 2), 3))),
        Case(f"CE_probs_{r}", lambda m, x, t, r=r: L(m, "CrossEntropyLoss", reduction=r)(x, t),
             arrays(("n", (5, 4)), ("soft", (5, 4)))),
        Case(f"CE_probs_smooth_weight_{r}", lambda m, x, t, w, r=r: L(
            m, "CrossEntropyLoss", w, reduction=r, label_smoothing=0.3)(x, t),
            arrays(("n", (2, 4, 3)), ("soft", (2, 4, 3)), ("p", (4,)))),
        Case(f"PoissonNLL_{r}", lambda m, x, y, r=r: L(m, "PoissonNLLLoss", reduction=r)(x, y),
             arrays(("n", (3, 4)), ("p", (3, 4)))),
        Case(f"PoissonNLL_full_{r}", lambda m, x, y, r=r: L(
            m, "PoissonNLLLoss", log_input=False, full=True, reduction=r)(x, y * 2),
            arrays(("p", (3, 4)), ("p", (3, 4)))),
        Case(f"GaussianNLL_{r}", lambda m, x, y, v, r=r: L(
            m, "GaussianNLLLoss", reduction=r, full=True)(x, y, v),
            arrays(("n", (3, 4)), ("n", (3, 4)), ("p", (3, 4)))),
        Case(f"GaussianNLL_homo_{r}", lambda m, x, y, v, r=r: L(
            m, "GaussianNLLLoss", reduction=r)(x, y, v), arrays(("n", (3, 4)), ("n", (3, 4)),
                                                                ("p", (3,)))),
        Case(f"CosineEmbedding_{r}", lambda m, a, b, y, r=r: L(
            m, "CosineEmbeddingLoss", 0.1, reduction=r)(a, b, y),
            arrays(("n", (5, 4)), ("n", (5, 4)), ("pm", (5,)))),
        Case(f"MarginRanking_{r}", lambda m, a, b, y, r=r: L(
            m, "MarginRankingLoss", 0.3, reduction=r)(a, b, y),
            arrays(("n", (6,)), ("n", (6,)), ("pm", (6,)))),
        Case(f"TripletMargin_{r}", lambda m, a, p, n, r=r: L(
            m, "TripletMarginLoss", reduction=r)(a, p, n), [(5, 4), (5, 4), (5, 4)]),
        Case(f"HingeEmbedding_{r}", lambda m, x, y, r=r: L(
            m, "HingeEmbeddingLoss", 0.5, reduction=r)(x, y), arrays(("n", (3, 4)),
                                                                     ("pm", (3, 4)))),
        Case(f"SoftMargin_{r}", lambda m, x, y, r=r: L(m, "SoftMarginLoss", reduction=r)(x, y),
             arrays(("n", (3, 4)), ("pm", (3, 4))), requires_grad=[1, 0]),
        Case(f"MultiLabelSoftMargin_{r}", lambda m, x, y, w, r=r: L(
            m, "MultiLabelSoftMarginLoss", w, reduction=r)(x, y),
            arrays(("n", (3, 4)), ("b", (3, 4)), ("p", (4,)))),
        Case(f"MultiMargin_{r}", lambda m, x, t, r=r: L(m, "MultiMarginLoss", reduction=r)(x, t),
             arrays(("n", (5, 4)), ("c", (5,), 4)), gradgrad=False),
        Case(f"MultiMargin_p2_weight_{r}", lambda m, x, t, w, r=r: L(
            m, "MultiMarginLoss", 2, 0.5, w, reduction=r)(x, t),
            arrays(("n", (5, 4)), ("c", (5,), 4), ("p", (4,))), gradgrad=False,
            requires_grad=[1, 0, 0]),
    ]

def _ml_targets(rng):
    t = rng.integers(0, 4, (5, 4))
    t[rng.random((5, 4)) < 0.3] = -1
    t[0] = [2, 0, -1, 1]
    return t


LOSSES += [
    Case("MultiLabelMargin", lambda m, x, t: L(m, "MultiLabelMarginLoss")(x, t),
         lambda rng: [rng.standard_normal((5, 4)), _ml_targets(rng)], gradgrad=False),
    Case("MultiLabelMargin_none", lambda m, x, t: L(
        m, "MultiLabelMarginLoss", reduction="none")(x, t),
        lambda rng: [rng.standard_normal((5, 4)), _ml_targets(rng)], gradgrad=False),
    Case("MultiLabelMargin_1d", lambda m, x, t: L(m, "MultiLabelMarginLoss", reduction="sum")(
        x, t[1]), lambda rng: [rng.standard_normal(4), _ml_targets(rng)], gradgrad=False),
    Case("NLLLoss2d", lambda m, x, t: L(m, "NLLLoss2d")(x, t),
         arrays(("n", (2, 3, 4, 2)), ("c", (2, 4, 2), 3))),
    Case("CE_1d_input", lambda m, x, t: L(m, "CrossEntropyLoss")(x, t[0]),
         arrays(("n", (4,)), ("c", (1,), 4))),
    Case("CE_f32", lambda m, x, t: L(m, "CrossEntropyLoss")(x, t),
         arrays(("n", (5, 4)), ("c", (5,), 4)), dtype=np.float32),
    Case("CE_all_ignored", lambda m, x, t: L(m, "CrossEntropyLoss", ignore_index=0)(x, t * 0),
         arrays(("n", (3, 4)), ("c", (3,), 4)), grad=False),
    Case("KLDiv_batchmean", lambda m, x, y: L(m, "KLDivLoss", reduction="batchmean")(x.log(), y),
         arrays(("soft", (3, 4)), ("soft", (3, 4)))),
    Case("BCEWithLogits_large", lambda m, x, y: L(m, "BCEWithLogitsLoss")(x * 100, y),
         arrays(("n", (3, 4)), ("b", (3, 4)))),
    Case("SmoothL1_beta0", lambda m, x, y: L(m, "SmoothL1Loss", beta=0.0)(x, y), [(3, 4), (3, 4)]),
    Case("MSE_broadcast", lambda m, x, y: m.nn.functional.mse_loss(x, y), [(3, 4), (4,)]),
    Case("MSE_0d", lambda m, x, y: L(m, "MSELoss")(x, y), [(), ()]),
    Case("L1_f32", lambda m, x, y: L(m, "L1Loss")(x, y), [(3, 4), (3, 4)], dtype=np.float32),
    Case("TripletMargin_swap_p1", lambda m, a, p, n: L(
        m, "TripletMarginLoss", margin=0.5, p=1, swap=True)(a, p, n), [(5, 4), (5, 4), (5, 4)]),
    Case("TripletMarginWithDistance", lambda m, a, p, n: L(
        m, "TripletMarginWithDistanceLoss", distance_function=lambda x, y: (x - y).abs().sum(-1))(
            a, p, n), [(5, 4), (5, 4), (5, 4)]),
    Case("CosineEmbedding_1d", lambda m, a, b, y: L(m, "CosineEmbeddingLoss")(a, b, y[0]),
         arrays(("n", (4,)), ("n", (4,)), ("pm", (1,)))),
    Case("legacy_size_average", lambda m, x, y: L(m, "MSELoss", size_average=False)(x, y),
         [(3, 4), (3, 4)]),
    Case("legacy_reduce", lambda m, x, y: L(m, "L1Loss", reduce=False)(x, y), [(3, 4), (3, 4)]),
]


@cases(LOSSES)
def test_losses(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(case)


LOSS_ERRORS = [
    ("ce_target_out_of_bounds", lambda m, x: m.nn.functional.cross_entropy(
        x, m.tensor([1, 7, 2])), [(3, 5)]),
    ("ce_batch_mismatch", lambda m, x: m.nn.functional.cross_entropy(x, m.tensor([1, 2])),
     [(3, 5)]),
    ("ce_float_target_wrong_shape", lambda m, x: m.nn.functional.cross_entropy(
        x, m.tensor([1.0, 2.0, 3.0])), [(3, 5)]),
    ("ce_probs_ignore_index", lambda m, x: m.nn.functional.cross_entropy(x, x, ignore_index=1),
     [(3, 5)]),
    ("ce_label_smoothing_range", lambda m, x: m.nn.functional.cross_entropy(
        x, m.tensor([1, 2, 3]), label_smoothing=1.5), [(3, 5)]),
    ("nll_weight_size", lambda m, x: m.nn.functional.nll_loss(
        x, m.tensor([1, 2, 3]), weight=m.ones(4)), [(3, 5)]),
    ("nll_int32_target", lambda m, x: m.nn.functional.nll_loss(
        x, m.tensor([1, 2, 3], dtype=m.int32)), [(3, 5)]),
    ("nll_kdim_mismatch", lambda m, x: m.nn.functional.nll_loss(
        x, m.zeros(2, 4, 4, dtype=m.int64)), [(2, 3, 4, 5)]),
    ("nll_kdim_target_dims", lambda m, x: m.nn.functional.nll_loss(
        x, m.zeros(2, 4, dtype=m.int64)), [(2, 3, 4, 5)]),
    ("nll_1d_target_size", lambda m, x: m.nn.functional.nll_loss(
        x, m.zeros(2, dtype=m.int64)), [(5,)]),
    ("mse_not_broadcastable", lambda m, x: m.nn.functional.mse_loss(x, m.zeros(4)), [(2, 3)]),
    ("bce_size", lambda m, x: m.nn.functional.binary_cross_entropy(x.sigmoid(), m.zeros(3)),
     [(2, 3)]),
    ("bce_range", lambda m, x: m.nn.functional.binary_cross_entropy(x.abs() + 1, x * 0),
     [(2, 3)]),
    ("bce_logits_size", lambda m, x: m.nn.functional.binary_cross_entropy_with_logits(
        x, m.zeros(3)), [(2, 3)]),
    ("bad_reduction", lambda m, x: m.nn.functional.l1_loss(x, x, reduction="foo"), [(2, 3)]),
    ("gaussian_negative_var", lambda m, x: m.nn.functional.gaussian_nll_loss(x, x, -x.abs()),
     [(2, 3)]),
    ("gaussian_var_size", lambda m, x: m.nn.functional.gaussian_nll_loss(x, x, m.ones(3, 3)),
     [(2, 3)]),
    ("triplet_dims", lambda m, x: m.nn.functional.triplet_margin_loss(x, x[0], x), [(2, 3)]),
    ("triplet_margin", lambda m, x: m.nn.TripletMarginLoss(margin=0.0), [(2, 3)]),
    ("multimargin_p", lambda m, x: m.nn.MultiMarginLoss(p=3), [(2, 3)]),
    ("multilabel_margin_shape", lambda m, x: m.nn.functional.multilabel_margin_loss(
        x, m.zeros(2, 2, dtype=m.int64)), [(2, 3)]),
    ("multilabel_margin_range", lambda m, x: m.nn.functional.multilabel_margin_loss(
        x, m.full((2, 3), 5, dtype=m.int64)), [(2, 3)]),
]


@pytest.mark.parametrize("name,fn,shapes", LOSS_ERRORS, ids=[e[0] for e in LOSS_ERRORS])
def test_loss_errors(name, fn, shapes):
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_raises(fn, *[rng.standard_normal(s) for s in shapes])


def test_loss_messages_and_warnings():
    x = ember.zeros(3, 5)
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        ember.nn.functional.cross_entropy(x, ember.tensor([1, 7, 2]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target "
                                         r"batch_size \(2\)"):
        ember.nn.functional.cross_entropy(x, ember.tensor([1, 2]))
    with pytest.warns(UserWarning, match="target size"):
        ember.nn.functional.mse_loss(ember.zeros(2, 3), ember.zeros(3))
    with pytest.warns(UserWarning, match="batchmean"):
        ember.nn.functional.kl_div(x, x)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        ember.nn.MSELoss(size_average=False)


def test_loss_modules_state_and_repr():
    w = np.array([1.0, 2.0, 0.5])
    pairs = [(ember.nn.CrossEntropyLoss(ember.tensor(w)), torch.nn.CrossEntropyLoss(
        torch.tensor(w))), (ember.nn.BCEWithLogitsLoss(pos_weight=ember.tensor(w)),
                            torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(w))),
             (ember.nn.NLLLoss(), torch.nn.NLLLoss()), (ember.nn.HuberLoss(), torch.nn.HuberLoss())]
    for e, t in pairs:
        assert repr(e) == repr(t)
        assert list(e.state_dict()) == list(t.state_dict())
        assert e.reduction == t.reduction
    with pytest.warns(UserWarning):
        assert ember.nn.MSELoss(reduce=False).reduction == "none"


def test_cross_entropy_training_step_matches_torch():
    """A tiny classifier: loss and every parameter gradient equal torch's (copied weights)."""
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((8, 5)), rng.integers(0, 3, 8)
    grads = []
    tnet = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    enet = ember.nn.Sequential(ember.nn.Linear(5, 6), ember.nn.ReLU(), ember.nn.Linear(6, 3))
    tnet.double()
    enet.double().load_state_dict({k: ember.tensor(v.numpy()) for k, v in
                                   tnet.state_dict().items()})
    for m, net in ((torch, tnet), (ember, enet)):
        loss = m.nn.CrossEntropyLoss(label_smoothing=0.1)(net(m.tensor(x)), m.tensor(t))
        loss.backward()
        grads.append([loss.item()] + [p.grad.numpy() for p in net.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_every_target_ignored_gives_nan_loss_and_zero_gradient():
    import torch
    for m in (ember, torch):
        x = m.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
        t = m.tensor([-100, -100, -100])
        for loss in (m.nn.functional.nll_loss(m.log_softmax(x, 1), t),
                     m.nn.functional.cross_entropy(x, t, weight=m.ones(4, dtype=m.float64))):
            x.grad = None
            loss.backward()
            assert np.isnan(loss.item())
            assert not x.grad.abs().sum().item()


def test_binary_cross_entropy_at_saturated_probabilities():
    import torch
    out = []
    for m in (ember, torch):
        x = m.tensor([0.0, 1.0, 0.3, 1.0], requires_grad=True)
        t = m.tensor([1.0, 0.0, 1.0, 1.0], requires_grad=True)
        loss = m.nn.functional.binary_cross_entropy(x, t)
        loss.backward()
        out.append((loss.item(), x.grad.numpy().copy(), t.grad.numpy().copy()))
    assert out[0][0] == pytest.approx(out[1][0])
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-6)
    np.testing.assert_array_equal(np.isinf(out[0][2]), np.isinf(out[1][2]))


def _loss_calls(m):
    F = m.nn.functional
    t = m.tensor([0, 2, 4, 1])
    w = m.tensor([0.5, 1.0, 2.0, 1.5, 0.7])
    return {
        "mse": lambda x, y: F.mse_loss(x, y, reduction="sum"),
        "smooth_l1": lambda x, y: F.smooth_l1_loss(x, y, beta=0.5),
        "huber": lambda x, y: F.huber_loss(x, y, delta=0.4, reduction="none"),
        "soft_margin": lambda x, y: F.soft_margin_loss(x, y.sign()),
        "bce": lambda x, y: F.binary_cross_entropy(x.sigmoid(), y.sigmoid(), w),
        "bce_logits": lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid(), w,
                                                                      pos_weight=w),
        "nll": lambda x, y: F.nll_loss(x, t, w, ignore_index=2),
        "nll2d": lambda x, y: F.nll_loss(x.reshape(2, 5, 2, 1), t.reshape(2, 2, 1),
                                         reduction="none"),
        "cross_entropy": lambda x, y: F.cross_entropy(x, t),
        "multi_margin": lambda x, y: F.multi_margin_loss(x, t, p=2, margin=0.5, weight=w),
        "multilabel_margin": lambda x, y: F.multilabel_margin_loss(
            x, m.tensor([[0, 3, -1, 1, 2]] * 4)),
    }


@pytest.mark.parametrize("name", list(_loss_calls(torch)))
def test_loss_nodes_trace_save_and_load_in_torch(name):
    """Each loss kernel's node is written as PyTorch's aten call: a traced call saved by
    ember loads in torch and gives torch's value."""
    import io
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(2)]
    fn = _loss_calls(ember)[name]

    class M(ember.nn.Module):
        def forward(self, x, y):
            return fn(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = ember.jit.trace(M(), tuple(ember.tensor(x) for x in xs))
    f = io.BytesIO()
    ember.jit.save(traced, f)
    f.seek(0)
    got = torch.jit.load(f)(*[torch.from_numpy(x) for x in xs])
    want = _loss_calls(torch)[name](*[torch.from_numpy(x) for x in xs])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call,fn,arg", [
    (lambda m, x, w: m.nn.functional.nll_loss(x, m.tensor([0, 1, 2]), w),
     "nll_loss_forward", "weight"),
    (lambda m, x, w: m.nn.functional.binary_cross_entropy(x.sigmoid(), x.detach() * 0, w[:3]),
     "binary_cross_entropy", "weight"),
    (lambda m, x, w: m.nn.functional.binary_cross_entropy_with_logits(
        x, x.detach() * 0, pos_weight=w[:3]), "binary_cross_entropy_with_logits", "pos_weight"),
    (lambda m, x, w: m.nn.functional.soft_margin_loss(x[0], w[:3]), "soft_margin_loss",
     "target"),
    (lambda m, x, w: m.nn.functional.multi_margin_loss(x, m.tensor([0, 1, 2]), weight=w),
     "multi_margin_loss", "weight"),
])
def test_arguments_the_kernels_do_not_differentiate_refuse_requires_grad(call, fn, arg):
    for m in (torch, ember):
        x = m.ones(3, 3, requires_grad=True)
        w = m.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match=f"'{fn}' is not differentiable with respect "
                                               f"to argument '{arg}'"):
            call(m, x, w)


@pytest.mark.parametrize("name", [n for n in _loss_calls(torch)
                                  if n not in ("multi_margin", "multilabel_margin")])
def test_loss_nodes_export_to_onnx_and_run(name):
    """The loss kernels' nodes export to ONNX (NegativeLogLikelihoodLoss for nll_loss,
    arithmetic and a reduction for the others) and give torch's value in onnxruntime."""
    import io

    import onnxruntime as ort
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(2)]
    fn = _loss_calls(ember)[name]

    class M(ember.nn.Module):
        def forward(self, x, y):
            return fn(x, y)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ember.onnx.export(M(), tuple(ember.tensor(x) for x in xs), f)
    sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    got, = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})
    want = _loss_calls(torch)[name](*[torch.from_numpy(x) for x in xs])
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_elementwise_losses_under_vmap_match_torch():
    """The elementwise loss nodes' batching rule: per-sample losses and gradients as
    torch.func's, with batched and unbatched targets and per-class weights."""
    rng = np.random.default_rng(5)
    X, Y = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    W = rng.random(5) + 0.5

    def run(m):
        F = m.nn.functional
        fs = [lambda x, y: F.mse_loss(x, y),
              lambda x, y: F.smooth_l1_loss(x, y, beta=0.5, reduction="sum"),
              lambda x, y: F.huber_loss(x, y, delta=0.5, reduction="none"),
              lambda x, y: F.soft_margin_loss(x, y.sign()),
              lambda x, y: F.binary_cross_entropy(x.sigmoid(), y.sigmoid(), m.tensor(W)),
              lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid(),
                                                              pos_weight=m.tensor(W))]
        out = []
        for f in fs:
            x, y = m.tensor(X), m.tensor(Y)
            out.append(m.func.vmap(f)(x, y).numpy())
            out.append(m.func.vmap(f, in_dims=(0, None))(x, y[0]).numpy())
            out.append(m.func.vmap(m.func.grad(lambda a, c, f=f: f(a, c).sum()))(x, y).numpy())
        return out
    for e, t in zip(run(ember), run(torch)):
        np.testing.assert_allclose(e, t, rtol=1e-7, atol=1e-12)


def test_class_weights_of_another_dtype_as_torch():
    """nll_loss/cross_entropy/multi_margin_loss refuse class weights of another dtype;
    the binary cross entropies compute in the input's."""
    def run(m):
        F = m.nn.functional
        x, t = m.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)), \
            m.tensor([0, 1, 3])
        w = m.tensor(np.linspace(0.5, 2, 4))
        out = []
        for f in (lambda: F.nll_loss(x, t, w), lambda: F.cross_entropy(x, t, w),
                  lambda: F.multi_margin_loss(x, t, weight=w),
                  lambda: F.binary_cross_entropy(x.sigmoid(), x.sigmoid() * 0.5, w),
                  lambda: F.binary_cross_entropy_with_logits(x, x.sigmoid(), w, pos_weight=w)):
            try:
                r = f()
                out.append((str(r.dtype).split(".")[-1], float(r)))
            except RuntimeError as e:
                out.append(str(e))
        return out
    e, t = run(ember), run(torch)
    assert e[:3] == t[:3]
    for (de, ve), (dt, vt) in zip(e[3:], t[3:]):
        assert de == dt and abs(ve - vt) < 1e-6
