"""Target checks of every loss as torch's: a sweep of target (and second-operand) shapes
and dtypes — matching, broadcastable, wrong rank, integer, floating, bool, wrong class
counts, ``(N, 1)``, empty — run through ``ember.nn.functional`` and ``torch.nn.functional``
(and the loss modules). Both must accept or refuse alike, refuse with the same exception
type and message, return the same shape and dtype when they accept, and emit the same
warnings (torch's UserWarning for a target size that differs from the input size)."""
import re
import warnings

import numpy as np
import pytest
import torch

import ember

_NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64,
       "i32": np.int32, "u8": np.uint8, "bool": np.bool_}


def _array(shape, dt, kind, seed):
    """Values of ``kind`` (normal, probability, class index, +-1, positive, out of range)."""
    rng = np.random.default_rng(seed)
    a = {"normal": lambda: rng.normal(size=shape),
         "prob": lambda: rng.uniform(0.05, 0.95, size=shape),
         "cls": lambda: rng.integers(1, 3, size=shape),
         "pm1": lambda: rng.choice([-1.0, 1.0], size=shape),
         "pos": lambda: rng.uniform(0.1, 2.0, size=shape),
         "big": lambda: np.full(shape, 7),
         "neg": lambda: np.full(shape, -5),
         "ml": lambda: np.where(rng.uniform(size=shape) < 0.3, -1, rng.integers(0, 3, shape)),
         "logp": lambda: np.log(rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])),
         "len6": lambda: np.full(shape, 6), "len3": lambda: np.full(shape, 3),
         "len0": lambda: np.zeros(shape, np.int64),
         }[kind]()
    a = np.asarray(a)
    if dt == "bool":
        return a > (0 if kind in ("cls", "pm1") else 0.5)
    return a.astype(_NP[dt])


def _t(lib, spec, seed):
    shape, dt, kind = spec
    return lib.tensor(_array(shape, dt, kind, seed))


F32 = ((4, 3), "f32")
# targets of the elementwise losses, for a (4, 3) float32 input
ELEMENTWISE_TARGETS = [
    ((4, 3), "f32"), ((4, 3), "f64"), ((4, 3), "f16"), ((4, 3), "i64"), ((4, 3), "i32"),
    ((4, 3), "bool"), ((4, 1), "f32"), ((1, 3), "f32"), ((3,), "f32"), ((4,), "f32"),
    ((), "f32"), ((1,), "f32"), ((2, 4, 3), "f32"), ((5, 3), "f32"), ((4, 3, 1), "f32"),
    ((0, 3), "f32"), ((12,), "f32"), ((3, 4), "f32"),
]
# (loss, input kind, target kind)
ELEMENTWISE = [
    ("l1_loss", "normal", "normal"), ("mse_loss", "normal", "normal"),
    ("smooth_l1_loss", "normal", "normal"), ("huber_loss", "normal", "normal"),
    ("binary_cross_entropy", "prob", "prob"),
    ("binary_cross_entropy_with_logits", "normal", "prob"),
    ("soft_margin_loss", "normal", "pm1"), ("multilabel_soft_margin_loss", "normal", "prob"),
    ("kl_div", "normal", "prob"), ("poisson_nll_loss", "normal", "pos"),
    ("hinge_embedding_loss", "normal", "pm1"),
]
CLASS_TARGETS = [
    ((4,), "i64", "cls"), ((4,), "i32", "cls"), ((4,), "u8", "cls"), ((4,), "f32", "cls"),
    ((4,), "bool", "cls"), ((4, 1), "i64", "cls"), ((), "i64", "cls"), ((5,), "i64", "cls"),
    ((4, 3), "i64", "cls"), ((4, 3), "f32", "prob"), ((4, 3), "f64", "prob"),
    ((4, 2), "f32", "prob"), ((3,), "i64", "cls"), ((4,), "i64", "big"),
    ((4,), "i64", "neg"),
]
CLASS = ["nll_loss", "cross_entropy", "multi_margin_loss", "multilabel_margin_loss"]


def _cases():
    """name -> (function name, [operand specs], kwargs)."""
    out = {}
    for name, ik, tk in ELEMENTWISE:
        for shape, dt in ELEMENTWISE_TARGETS:
            out[f"{name}-{shape}-{dt}"] = (name, [(*F32, ik), (shape, dt, tk)], {})
        out[f"{name}-empty"] = (name, [((0, 3), "f32", ik), ((0, 3), "f32", tk)], {})
        out[f"{name}-f64input-f32target"] = (name, [((4, 3), "f64", ik), ((4, 3), "f32", tk)],
                                             {})
        out[f"{name}-none-(4,1)"] = (name, [(*F32, ik), ((4, 1), "f32", tk)],
                                     {"reduction": "none"})
    for name in CLASS:
        for shape, dt, kind in CLASS_TARGETS:
            out[f"{name}-{shape}-{dt}-{kind}"] = (name, [(*F32, "normal"), (shape, dt, kind)],
                                                  {})
        out[f"{name}-ml-(4,3)"] = (name, [(*F32, "normal"), ((4, 3), "i64", "ml")], {})
        out[f"{name}-vector"] = (name, [((3,), "f32", "normal"), ((), "i64", "cls")], {})
        out[f"{name}-vector-(1,)"] = (name, [((3,), "f32", "normal"), ((1,), "i64", "cls")],
                                      {})
        out[f"{name}-empty"] = (name, [((0, 3), "f32", "normal"), ((0,), "i64", "cls")], {})
        out[f"{name}-empty-ml"] = (name, [((0, 3), "f32", "normal"), ((0, 3), "i64", "cls")],
                                   {})
    for shape, dt in [((4, 3), "f32"), ((4, 1), "f32"), ((4,), "f32"), ((), "f32"),
                      ((3,), "f32"), ((1, 3), "f32"), ((5, 3), "f32"), ((4, 3), "f64"),
                      ((4, 3), "i64"), ((4, 2), "f32")]:
        out[f"gaussian_nll_loss-var{shape}-{dt}"] = (
            "gaussian_nll_loss", [(*F32, "normal"), (*F32, "normal"), (shape, dt, "pos")], {})
    for shape, dt in ELEMENTWISE_TARGETS:
        out[f"gaussian_nll_loss-target{shape}-{dt}"] = (
            "gaussian_nll_loss", [(*F32, "normal"), (shape, dt, "normal"), (*F32, "pos")], {})
    for shape, dt in [((4,), "f32"), ((4,), "i64"), ((4,), "bool"), ((4, 1), "f32"),
                      ((), "f32"), ((5,), "f32"), ((4, 3), "f32"), ((1,), "f32")]:
        out[f"cosine_embedding_loss-y{shape}-{dt}"] = (
            "cosine_embedding_loss", [(*F32, "normal"), (*F32, "normal"), (shape, dt, "pm1")],
            {})
        out[f"margin_ranking_loss-y{shape}-{dt}"] = (
            "margin_ranking_loss", [((4,), "f32", "normal"), ((4,), "f32", "normal"),
                                    (shape, dt, "pm1")], {})
    for shape, dt in [((4, 1), "f32"), ((3,), "f32"), ((5, 3), "f32"), ((4, 3), "f64"),
                      ((4, 3), "i64"), ((4,), "f32"), ((4, 4), "f32")]:
        out[f"cosine_embedding_loss-x2{shape}-{dt}"] = (
            "cosine_embedding_loss", [(*F32, "normal"), (shape, dt, "normal"),
                                      ((4,), "f32", "pm1")], {})
        out[f"margin_ranking_loss-x2{shape}-{dt}"] = (
            "margin_ranking_loss", [((4,), "f32", "normal"), (shape, dt, "normal"),
                                    ((4,), "f32", "pm1")], {})
        out[f"triplet_margin_loss-p{shape}-{dt}"] = (
            "triplet_margin_loss", [(*F32, "normal"), (shape, dt, "normal"),
                                    (*F32, "normal")], {})
    for shape, dt in [((4, 3), "f32"), ((4, 1), "f32"), ((5, 3), "f32"), ((4, 3), "f64")]:
        out[f"triplet_margin_with_distance_loss-n{shape}-{dt}"] = (
            "triplet_margin_with_distance_loss", [(*F32, "normal"), (*F32, "normal"),
                                                  (shape, dt, "normal")], {})
    # ctc: log_probs (T=6, N=2, C=4), targets (N, S=3) or concatenated, lengths per sample
    for name, tgt, tlen in [("ok", ((2, 3), "i64", "cls"), ((2,), "i64", "len3")),
                            ("i32", ((2, 3), "i32", "cls"), ((2,), "i64", "len3")),
                            ("float", ((2, 3), "f32", "cls"), ((2,), "i64", "len3")),
                            ("bool", ((2, 3), "bool", "cls"), ((2,), "i64", "len3")),
                            ("concat", ((6,), "i64", "cls"), ((2,), "i64", "len3")),
                            ("3d", ((2, 3, 1), "i64", "cls"), ((2,), "i64", "len3")),
                            ("batch3", ((3, 3), "i64", "cls"), ((2,), "i64", "len3")),
                            ("lenf", ((2, 3), "i64", "cls"), ((2,), "f32", "len3")),
                            ("len3n", ((2, 3), "i64", "cls"), ((3,), "i64", "len3")),
                            ("empty", ((2, 0), "i64", "cls"), ((2,), "i64", "len0"))]:
        out[f"ctc_loss-{name}"] = ("ctc_loss", [((6, 2, 4), "f32", "logp"), tgt,
                                                ((2,), "i64", "len6"), tlen], {})
    return out


CASES = _cases()
# torch 2.13's mean of an empty batch here is whatever was in memory (1.9e14 one run,
# 4.5e33 the next); ember gives NaN, as torch's other losses do for an empty mean
TORCH_UNINITIALISED = {"multi_margin_loss-empty", "multilabel_margin_loss-empty-ml"}


MODULES = {
    "l1_loss": "L1Loss", "mse_loss": "MSELoss", "smooth_l1_loss": "SmoothL1Loss",
    "huber_loss": "HuberLoss", "binary_cross_entropy": "BCELoss",
    "binary_cross_entropy_with_logits": "BCEWithLogitsLoss",
    "soft_margin_loss": "SoftMarginLoss", "multilabel_soft_margin_loss":
    "MultiLabelSoftMarginLoss", "kl_div": "KLDivLoss", "poisson_nll_loss": "PoissonNLLLoss",
    "hinge_embedding_loss": "HingeEmbeddingLoss", "gaussian_nll_loss": "GaussianNLLLoss",
    "nll_loss": "NLLLoss", "cross_entropy": "CrossEntropyLoss",
    "multi_margin_loss": "MultiMarginLoss", "multilabel_margin_loss": "MultiLabelMarginLoss",
    "cosine_embedding_loss": "CosineEmbeddingLoss", "margin_ranking_loss":
    "MarginRankingLoss", "triplet_margin_loss": "TripletMarginLoss",
    "triplet_margin_with_distance_loss": "TripletMarginWithDistanceLoss",
    "ctc_loss": "CTCLoss",
}


def _run(lib, name, specs, kw, module=False):
    args = [_t(lib, s, i) for i, s in enumerate(specs)]
    fn = getattr(lib.nn, MODULES[name])(**kw) if module else \
        lambda *a: getattr(lib.nn.functional, name)(*a, **kw)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out = fn(*args)
            res = ("ok", tuple(out.shape), str(out.dtype).rsplit(".", 1)[-1])
            value = np.asarray(out.detach().cpu().numpy(), dtype=np.float64)
        except Exception as e:  # noqa: BLE001 - the outcome compared
            res, value = (type(e).__name__, _norm(str(e))), None
    said = sorted({(w.category.__name__, _norm(str(w.message))) for w in seen
                   if w.category is not DeprecationWarning})
    return (res, said), value


def _norm(text):
    # the library's own name in sizes and dtypes is not part of the comparison, nor the
    # op that ember's broadcasting error names after torch's words
    text = re.sub(r" \(in \w+\)$", "", text.strip().splitlines()[0] if text.strip() else "")
    return re.sub(r"\b(torch|ember)\.", "LIB.", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_loss_target_checks_as_torch(case):
    name, specs, kw = CASES[case]
    (mine, mine_value), (ref, ref_value) = _run(ember, name, specs, kw), \
        _run(torch, name, specs, kw)
    assert mine == ref, f"\nember: {mine}\ntorch: {ref}"
    if ref_value is not None and case not in TORCH_UNINITIALISED:   # the same loss too
        np.testing.assert_allclose(mine_value, ref_value, rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_loss_modules_check_targets_as_torch(name):
    """The nn loss modules refuse and warn as their functions (and torch's modules) do."""
    differ = []
    for case, (fname, specs, kw) in sorted(CASES.items()):
        if fname != name:
            continue
        (mine, _), (ref, _) = _run(ember, name, specs, kw, True), \
            _run(torch, name, specs, kw, True)
        if mine != ref:
            differ.append(f"{case}: ember {mine}, torch {ref}")
    assert not differ, "\n".join(differ)
