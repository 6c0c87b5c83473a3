"""nn.utils.prune against torch: the same entries pruned after the same seed, the
state_dict layout, iterative pruning, global pruning, remove, errors."""
import numpy as np
import pytest
import torch
import torch.nn.utils.prune as tprune

import ember
import ember.nn.utils.prune as eprune

LIBS = [(ember, eprune), (torch, tprune)]


def _both(fn):
    out = []
    for m, p in LIBS:
        m.manual_seed(0)
        out.append(fn(m, p))
    return out


def _same_state(e, t):
    esd, tsd = e.state_dict(), t.state_dict()
    assert list(esd) == list(tsd)
    for k in tsd:
        np.testing.assert_array_equal(esd[k].numpy(), tsd[k].numpy())


STEPS = {
    "l1": lambda m, p, mod: p.l1_unstructured(mod, "weight", amount=0.3),
    "l1_int": lambda m, p, mod: p.l1_unstructured(mod, "weight", amount=5),
    "random": lambda m, p, mod: p.random_unstructured(mod, "weight", amount=0.5),
    "random_structured": lambda m, p, mod: p.random_structured(mod, "weight", amount=2, dim=0),
    "ln_structured": lambda m, p, mod: p.ln_structured(mod, "weight", amount=0.4, n=2, dim=1),
    "ln_structured_l1": lambda m, p, mod: p.ln_structured(mod, "weight", amount=1, n=1, dim=0),
    "identity": lambda m, p, mod: p.identity(mod, "bias"),
    "custom": lambda m, p, mod: p.custom_from_mask(mod, "bias", m.tensor([1., 0., 1., 0., 1.])),
    "scores": lambda m, p, mod: p.l1_unstructured(mod, "weight", amount=3,
                                                 importance_scores=m.arange(30.).reshape(5, 6)),
}


@pytest.mark.parametrize("first", sorted(STEPS))
@pytest.mark.parametrize("second", ["l1", "random_structured", "ln_structured", None])
def test_pruning_matches_torch(first, second):
    def run(m, p):
        mod = m.nn.Linear(6, 5)
        STEPS[first](m, p, mod)
        if second:
            STEPS[second](m, p, mod)
        y = mod(m.ones(2, 6))
        y.sum().backward()
        return mod, y, mod.weight_orig.grad if hasattr(mod, "weight_orig") else None
    (em, ey, eg), (tm, ty, tg) = _both(run)
    _same_state(em, tm)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-6)
    if tg is not None:
        np.testing.assert_allclose(eg.numpy(), tg.numpy(), rtol=1e-6)
    assert eprune.is_pruned(em) == tprune.is_pruned(tm)


def test_global_unstructured_and_remove():
    def run(m, p):
        net = m.nn.Sequential(m.nn.Linear(4, 6), m.nn.ReLU(), m.nn.Conv1d(1, 2, 3))
        params = [(net[0], "weight"), (net[0], "bias"), (net[2], "weight")]
        p.global_unstructured(params, pruning_method=p.L1Unstructured, amount=0.4)
        p.global_unstructured(params, pruning_method=p.RandomUnstructured, amount=3)
        sd = {k: v.clone() for k, v in net.state_dict().items()}
        for mod, name in params:
            p.remove(mod, name)
        return sd, net
    (esd, en), (tsd, tn) = _both(run)
    assert list(esd) == list(tsd)
    for k in tsd:
        np.testing.assert_array_equal(esd[k].numpy(), tsd[k].numpy())
    _same_state(en, tn)
    assert not eprune.is_pruned(en)
    assert isinstance(en[0].weight, ember.nn.Parameter)


def test_prune_errors_match_torch():
    for m, p in LIBS:
        lin = m.nn.Linear(3, 2)
        with pytest.raises(ValueError, match="should either be a float in the range"):
            p.l1_unstructured(lin, "weight", amount=1.5)
        with pytest.raises(ValueError, match="should be smaller than the number of parameters"):
            p.l1_unstructured(lin, "weight", amount=10)
        assert "weight" in lin._parameters  # a failed prune leaves the module as it was
        with pytest.raises(ValueError, match="Structured pruning can only be applied"):
            p.ln_structured(lin, "bias", amount=1, n=2, dim=0)
        with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
            p.remove(lin, "weight")
        with pytest.raises(TypeError, match='Only "unstructured" PRUNING_TYPE'):
            p.global_unstructured([(lin, "weight")], pruning_method=p.RandomStructured,
                                  amount=1)
