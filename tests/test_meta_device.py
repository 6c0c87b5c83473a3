"""The ``meta`` device against torch 2.13: tensors with shape, dtype and strides and no data.

Each case runs the same code on torch and on ember with meta inputs and compares the
results' shapes, dtypes, strides and devices, or the error type where torch refuses
(reading values, copying out, data-dependent output shapes). The module cases follow
what libraries do: build under ``with torch.device('meta')`` and ``to_empty`` the result
(transformers' ``from_pretrained``), and ``to('meta')`` a model whose parameters come
from ``functional_call`` (the model-ensembling recipe).
"""
import copy

import numpy as np
import pytest
import torch

import ember


def _meta(m, *shape, dtype=None):
    return m.empty(*shape, device="meta", dtype=dtype or m.float32)


def _desc(x):
    if isinstance(x, (tuple, list)):
        return [_desc(v) for v in x]
    return (tuple(x.shape), str(x.dtype).split(".")[-1], x.stride(), x.device.type)


OPS = [
    ("add", lambda m: _meta(m, 2, 3) + _meta(m, 3)),
    ("add_scalar_tensor", lambda m: _meta(m, 2, 3) + m.tensor(1.0)),
    ("mul_int", lambda m: _meta(m, 2, 3, dtype=m.int64) * 2),
    ("matmul", lambda m: _meta(m, 4, 2, 3) @ _meta(m, 3, 5)),
    ("transpose", lambda m: _meta(m, 2, 3).t()),
    ("transpose_contiguous", lambda m: _meta(m, 2, 3).t().contiguous()),
    ("view_reshape", lambda m: [_meta(m, 2, 3).view(-1), _meta(m, 2, 3).t().reshape(6)]),
    ("expand", lambda m: _meta(m, 1, 3).expand(4, 3)),
    ("sum_mean", lambda m: [_meta(m, 2, 3).sum(0), _meta(m, 2, 3).mean(1, keepdim=True)]),
    ("argmax_any", lambda m: [_meta(m, 2, 3).argmax(1), (_meta(m, 2, 3) > 0).any()]),
    ("softmax", lambda m: m.softmax(_meta(m, 2, 3), -1)),
    ("cat_stack", lambda m: [m.cat([_meta(m, 2, 3)] * 2, 1), m.stack([_meta(m, 2)] * 3)]),
    ("where", lambda m: m.where(_meta(m, 2, 3) > 0, _meta(m, 2, 3), 0.0)),
    ("topk_sort", lambda m: list(_meta(m, 4, 5).topk(2)) + list(_meta(m, 4, 5).sort(1))),
    ("gather", lambda m: _meta(m, 5, 4).gather(1, _meta(m, 5, 2, dtype=m.int64))),
    ("index_select", lambda m: _meta(m, 5, 4)[m.tensor([0, 3, 1])]),
    ("cast", lambda m: [_meta(m, 2, 3).half(), _meta(m, 2, 3).long()]),
    ("conv2d", lambda m: m.nn.functional.conv2d(_meta(m, 2, 3, 8, 8), _meta(m, 4, 3, 3, 3),
                                                padding=1)),
    ("sdpa", lambda m: m.nn.functional.scaled_dot_product_attention(
        *[_meta(m, 2, 4, 5, 8)] * 3)),
    ("layer_norm", lambda m: m.nn.functional.layer_norm(_meta(m, 2, 5), (5,))),
    ("cross_entropy", lambda m: m.nn.functional.cross_entropy(
        _meta(m, 4, 3), _meta(m, 4, dtype=m.int64))),
    ("embedding", lambda m: m.nn.functional.embedding(_meta(m, 2, 3, dtype=m.int64),
                                                      _meta(m, 10, 4))),
    # (contiguous: the cpu kernels' result layouts are compared elsewhere)
    ("linalg", lambda m: [r.contiguous() for r in (
        m.linalg.inv(_meta(m, 2, 3, 3)), m.linalg.cholesky(_meta(m, 3, 3)),
        m.linalg.solve(_meta(m, 3, 3), _meta(m, 3, 2)), m.linalg.det(_meta(m, 3, 3)))]),
    ("factories", lambda m: [m.arange(5, device="meta"), m.zeros(2, device="meta"),
                             m.full((2,), 3, device="meta"), m.tensor([1.0], device="meta"),
                             m.randn(3, device="meta"), m.randint(5, (2,), device="meta")]),
    ("like", lambda m: [m.zeros_like(_meta(m, 2)), m.rand_like(_meta(m, 2)),
                        m.empty_like(_meta(m, 2, 3), device="cpu")]),
    ("inplace", lambda m: [m.nn.init.normal_(_meta(m, 2, 3)), _meta(m, 2).copy_(m.ones(2)),
                           _meta(m, 2).add_(1), _meta(m, 2, 3).fill_(2)]),
]


@pytest.mark.parametrize("name,fn", OPS, ids=[c[0] for c in OPS])
def test_ops_give_meta_results_as_torch(name, fn):
    expected, got = _desc(fn(torch)), _desc(fn(ember))
    assert got == expected


RAISES = [
    ("item", lambda m: _meta(m, 1).item()),
    ("bool", lambda m: bool(_meta(m, 1))),
    ("float", lambda m: float(_meta(m, 1))),
    ("tolist", lambda m: _meta(m, 2).tolist()),
    ("numpy", lambda m: _meta(m, 2).numpy()),
    ("to_cpu", lambda m: _meta(m, 2).to("cpu")),
    ("copy_into_cpu", lambda m: m.zeros(2).copy_(_meta(m, 2))),
    ("mixed_devices", lambda m: _meta(m, 2, 3) + m.ones(2, 3)),
    ("nonzero", lambda m: _meta(m, 2, 3).nonzero()),
    ("masked_select", lambda m: _meta(m, 2, 3).masked_select(_meta(m, 2, 3) > 0)),
    ("boolean_mask", lambda m: _meta(m, 2, 3)[_meta(m, 2, 3) > 0]),
    ("unique", lambda m: m.unique(_meta(m, 3))),
    ("allclose", lambda m: m.allclose(_meta(m, 3), _meta(m, 3))),
    ("module_to_cpu", lambda m: m.nn.Linear(2, 2, device="meta").to("cpu")),
]


@pytest.mark.parametrize("name,fn", RAISES, ids=[c[0] for c in RAISES])
def test_reading_values_raises_as_torch(name, fn):
    with pytest.raises(Exception) as t_err:
        fn(torch)
    with pytest.raises(Exception) as e_err:
        fn(ember)
    # torch's meta kernels raise NotImplementedError or RuntimeError; ember raises the same
    # family (the data-dependent ops raise NotImplementedError on both)
    assert isinstance(e_err.value, (type(t_err.value), NotImplementedError, RuntimeError))
    assert type(e_err.value) is type(t_err.value) or name in (
        "nonzero", "masked_select", "boolean_mask", "unique")


def test_meta_repr_and_flags():
    for m, name in ((torch, "torch"), (ember, "ember")):
        x = _meta(m, 2, 3)
        assert x.is_meta and x.device == m.device("meta") and str(x.device) == "meta"
        assert repr(x) == "tensor(..., device='meta', size=(2, 3))"
        i = m.empty((), device="meta", dtype=m.int64)
        assert repr(i) == f"tensor(..., device='meta', size=(), dtype={name}.int64)"
        g = m.empty(2, device="meta", requires_grad=True)
        assert repr(g) == "tensor(..., device='meta', size=(2,), requires_grad=True)"


def test_meta_draws_nothing_from_the_generator():
    out = []
    for m in (torch, ember):
        m.manual_seed(0)
        m.randn(3, device="meta")
        m.nn.init.kaiming_uniform_(m.empty(3, 4, device="meta"))
        m.rand(2, 2, device="meta")
        out.append(m.randn(4).tolist())
    assert out[0] == pytest.approx(out[1], abs=1e-6)


def test_backward_through_meta():
    got = []
    for m in (torch, ember):
        p = m.empty(3, 4, device="meta", requires_grad=True)
        (p.t() @ _meta(m, 3, 2)).sum().backward()
        got.append(_desc(p.grad))
    assert got[0] == got[1]


def _model(m):
    nn = m.nn
    return nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.GELU(), nn.Linear(4, 2))


def test_build_under_device_meta_then_to_empty_and_load():
    src_t = _model(torch)
    sd = {k: v.detach().numpy().copy() for k, v in src_t.state_dict().items()}
    x = [[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]]
    outs = []
    for m in (torch, ember):
        with m.device("meta"):
            net = _model(m)
            conv = m.nn.Conv2d(3, 8, 3)
            lstm = m.nn.LSTM(4, 5)
            emb = m.nn.Embedding(10, 4)
        for mod in (net, conv, lstm, emb):
            assert all(p.is_meta for p in mod.parameters())
        assert [tuple(p.shape) for p in lstm.parameters()] == [
            (20, 4), (20, 5), (20,), (20,)]
        y = net(m.empty(7, 3, device="meta"))
        assert tuple(y.shape) == (7, 2) and y.is_meta
        net = net.to_empty(device="cpu")
        assert all(p.device.type == "cpu" for p in net.parameters())
        net.load_state_dict({k: m.tensor(v) for k, v in sd.items()})
        outs.append(net(m.tensor(x)).detach().tolist())
    np.testing.assert_allclose(outs[1], outs[0], atol=1e-6)


def test_load_state_dict_assign_onto_meta():
    sd_t = _model(torch).state_dict()
    for m in (torch, ember):
        net = _model(m).to("meta")
        sd = {k: m.tensor(v.numpy()) for k, v in sd_t.items()}
        net.load_state_dict(sd, assign=True)
        assert all(p.device.type == "cpu" for p in net.parameters())


def test_ensembling_with_a_meta_base_model():
    """stack_module_state + functional_call on a base model moved to 'meta', under vmap."""
    results = []
    for m, fn in ((torch, torch.func), (ember, ember.func)):
        m.manual_seed(0)
        models = [_model(m) for _ in range(3)]
        params, buffers = fn.stack_module_state(models)
        base = copy.deepcopy(models[0]).to("meta")

        def fmodel(params, buffers, x, base=base, fn=fn):
            return fn.functional_call(base, (params, buffers), (x,))
        x = m.randn(5, 3)
        y = fn.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
        loop = m.stack([mod(x) for mod in models])
        assert (y - loop).abs().max().item() < 1e-5
        xs = m.randn(3, 5, 3)
        results.append((fn.vmap(fmodel)(params, buffers, xs).detach().tolist(),
                        y.detach().tolist()))
        assert base[0].weight.is_meta
    for a, b in zip(results[1], results[0]):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_save_and_load_meta_tensors_across_libraries(tmp_path):
    """Meta tensors are written without data (torch's _rebuild_meta_tensor_no_storage)
    and load back on meta, from either library's file."""
    for saver, loader in ((torch, ember), (ember, torch), (ember, ember)):
        path = tmp_path / f"{saver.__name__}_{loader.__name__}.pt"
        net = saver.nn.Linear(3, 2).to("meta")
        saver.save({"sd": net.state_dict(), "t": saver.empty(4, 3, device="meta").t(),
                    "p": net.weight}, str(path))
        got = loader.load(str(path))
        for v in list(got["sd"].values()) + [got["t"], got["p"]]:
            assert v.is_meta
        assert tuple(got["t"].shape) == (3, 4) and tuple(got["t"].stride()) == (1, 3)
        assert got["p"].requires_grad and tuple(got["sd"]["weight"].shape) == (2, 3)
