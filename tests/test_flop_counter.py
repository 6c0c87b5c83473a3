"""torch.utils.flop_counter.FlopCounterMode against torch 2.13: totals and per-module,
per-operator counts of forward + backward for an MLP, CNNs and a Transformer layer."""
import pytest
import torch
import torch.utils.flop_counter

import ember
import ember.utils.flop_counter


def _counts(lib, make, shape, requires_grad=False, **mode):
    lib.manual_seed(0)
    model = make(lib.nn)
    x = lib.randn(*shape, requires_grad=requires_grad)
    counter_cls = lib.utils.flop_counter.FlopCounterMode
    with counter_cls(display=False, **mode) as counter:
        model(x).sum().backward()
    counts = {name: {str(op): n for op, n in ops.items()}
              for name, ops in counter.get_flop_counts().items()}
    return counter.get_total_flops(), counts


MODELS = {
    "mlp": (lambda nn: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)),
            (5, 8), False),
    "mlp-3d-no-bias": (lambda nn: nn.Sequential(nn.Linear(8, 16), nn.ReLU(),
                                                nn.Linear(16, 4, bias=False)),
                       (2, 5, 8), True),
    "cnn-grouped": (lambda nn: nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, groups=2),
        nn.Flatten(), nn.Linear(8 * 3 * 3, 10)), (2, 3, 8, 8), False),
    "conv1d": (lambda nn: nn.Conv1d(2, 3, 5, dilation=2), (4, 2, 20), True),
    "conv-transpose": (lambda nn: nn.ConvTranspose2d(3, 4, 3, stride=2), (2, 3, 5, 5),
                       True),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_counts_match_torch(name):
    make, shape, rg = MODELS[name]
    assert _counts(ember, make, shape, rg) == _counts(torch, make, shape, rg)


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_transformer_layer_total_matches_torch(dropout):
    # at dropout 0 both run the fused CPU attention, which torch does not count; with
    # dropout the attention's two bmm's count
    def make(nn):
        return nn.TransformerEncoderLayer(16, 2, 32, dropout=dropout, batch_first=True)
    e_total, e_counts = _counts(ember, make, (2, 5, 16))
    t_total, t_counts = _counts(torch, make, (2, 5, 16))
    assert e_total == t_total
    assert sum(e_counts["TransformerEncoderLayer"].values()) == t_total
    for layer in ("linear1", "linear2"):
        key = "TransformerEncoderLayer." + layer
        assert e_counts[key] == t_counts[key]


def test_attention_op_by_op_matches_torch():
    def run(lib, rg):
        q = lib.randn(3, 5, 8, requires_grad=rg[0])
        k = lib.randn(3, 7, 8, requires_grad=rg[1])
        v = lib.randn(3, 7, 4, requires_grad=rg[2])
        with lib.utils.flop_counter.FlopCounterMode(display=False) as c:
            lib.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()
        return c.get_total_flops()
    for rg in ((True, True, True), (True, False, False), (False, False, True)):
        assert run(ember, rg) == run(torch, rg)


def test_matmul_shapes_match_torch():
    def run(lib):
        out = []
        for sa, sb in (((4, 5), (5, 6)), ((2, 4, 5), (5, 6)), ((2, 4, 5), (2, 5, 6)),
                       ((5,), (5, 6)), ((4, 5), (5,)), ((5,), (5,)),
                       ((3, 1, 4, 5), (2, 5, 6))):
            a = lib.ones(*sa, requires_grad=True)
            b = lib.ones(*sb, requires_grad=True)
            with lib.utils.flop_counter.FlopCounterMode(display=False) as c:
                lib.matmul(a, b).sum().backward()
            out.append(c.get_total_flops())
        return out
    assert run(ember) == run(torch)


def test_display_prints_a_table(capsys):
    net = ember.nn.Sequential(ember.nn.Linear(4, 4))
    with ember.utils.flop_counter.FlopCounterMode(depth=1) as c:
        net(ember.ones(2, 4))
    printed = capsys.readouterr().out
    assert c.get_total_flops() == 64
    assert printed.splitlines()[0].split() == ["Module", "FLOP", "%", "Total"]
    assert "Global" in printed and "Sequential" in printed and "aten.addmm" in printed
    assert "Sequential.0" not in printed  # deeper than depth=1


def test_custom_mapping_raises():
    with pytest.raises(NotImplementedError, match="custom_mapping"):
        ember.utils.flop_counter.FlopCounterMode(custom_mapping={"mm": lambda *a: 0})
