"""Model and optimizer checkpoints move between ember and torch without conversion."""
import numpy as np
import pytest
import torch

import ember


def _model(m):
    nn = m.nn
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.LayerNorm(8),
                         nn.Linear(8, 3))


def _train_bn(model, m):
    # one forward in train mode moves BatchNorm's running statistics and counter
    model.train()
    model(m.tensor(np.random.default_rng(5).standard_normal((16, 6)), dtype=m.float32))
    model.eval()


def test_torch_state_dict_drives_the_same_ember_model(tmp_path):
    tmodel = _model(torch)
    _train_bn(tmodel, torch)
    path = tmp_path / "torch.pt"
    torch.save(tmodel.state_dict(), path)
    emodel = _model(ember)
    result = emodel.load_state_dict(ember.load(path))
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    emodel.eval()
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    np.testing.assert_allclose(emodel(ember.tensor(x)).detach().numpy(),
                               tmodel(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    sd = ember.load(path)
    assert sd["1.num_batches_tracked"].dtype == ember.int64
    assert sd["1.num_batches_tracked"].item() == 1


def test_ember_state_dict_drives_the_same_torch_model(tmp_path):
    emodel = _model(ember)
    _train_bn(emodel, ember)
    path = tmp_path / "ember.pt"
    ember.save(emodel.state_dict(), path)
    tmodel = _model(torch)
    tmodel.load_state_dict(torch.load(path, weights_only=True))
    tmodel.eval()
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    np.testing.assert_allclose(emodel(ember.tensor(x)).detach().numpy(),
                               tmodel(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    for k, v in torch.load(path, weights_only=True).items():
        np.testing.assert_array_equal(v.numpy(), emodel.state_dict()[k].detach().numpy())


def test_tied_weights_stay_tied(tmp_path):
    nn = ember.nn
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = nn.ModuleDict({"emb": emb, "head": head})
    path = tmp_path / "tied.pt"
    ember.save(model.state_dict(keep_vars=True), path)
    sd = torch.load(path, weights_only=True)
    assert sd["emb.weight"].data_ptr() == sd["head.weight"].data_ptr()
    back = ember.load(path)
    assert back["emb.weight"] is back["head.weight"]


def test_optimizer_state_moves_both_ways(tmp_path):
    tmodel = torch.nn.Linear(3, 2)
    topt = torch.optim.Adam(tmodel.parameters(), lr=1e-2)
    tmodel(torch.ones(4, 3)).sum().backward()
    topt.step()
    path = tmp_path / "opt.pt"
    torch.save(topt.state_dict(), path)
    emodel = ember.nn.Linear(3, 2)
    eopt = ember.optim.Adam(emodel.parameters(), lr=1e-2)
    eopt.load_state_dict(ember.load(path))
    st = eopt.state_dict()
    assert st["param_groups"][0]["lr"] == 1e-2
    np.testing.assert_array_equal(st["state"][0]["exp_avg"].numpy(),
                                  topt.state_dict()["state"][0]["exp_avg"].numpy())
    path2 = tmp_path / "opt2.pt"
    ember.save(st, path2)
    back = torch.load(path2, weights_only=True)
    assert back["state"][0]["step"].item() == 1.0
    topt.load_state_dict(back)


def test_shape_mismatch_names_key_and_both_shapes():
    model = ember.nn.Linear(3, 2)
    bad = {"weight": ember.zeros(4, 3), "bias": ember.zeros(2)}
    with pytest.raises(RuntimeError) as err:
        model.load_state_dict(bad)
    msg = str(err.value)
    assert "weight" in msg and "[4, 3]" in msg.replace("torch.Size(", "").replace(")", "") \
        and "[2, 3]" in msg.replace("torch.Size(", "").replace(")", "")


def test_assign_keeps_the_loaded_tensors():
    model = ember.nn.Linear(3, 2)
    w = ember.ones(2, 3)
    model.load_state_dict({"weight": w, "bias": ember.zeros(2)}, assign=True)
    assert model.weight.data_ptr() == w.data_ptr()
    assert isinstance(model.weight, ember.nn.Parameter)
