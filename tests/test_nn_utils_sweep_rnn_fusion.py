"""torch.nn.utils' sequence packing, BatchNorm fusion, functional_call and skip_init swept
against torch: ``pad_sequence``, ``pack_padded_sequence``, ``pad_packed_sequence``,
``pack_sequence``, ``unpack_sequence``, ``unpad_sequence`` (fed to LSTM and GRU and back,
gradients and node names included), ``fuse_conv_bn_eval``/``fuse_linear_bn_eval`` and
their weight functions, ``func.functional_call`` and ``nn.utils.stateless.functional_call``
with tied weights and buffers.

The comparison is tests/nn_utils_sweep.py's;
``python tests/test_nn_utils_sweep_rnn_fusion.py`` prints a summary.
"""
import numpy as np
import pytest
from nn_utils_sweep import Cases, check, inputs, linear, report

CASES = Cases()
case = CASES.add


# ------------------------------------------------------------------ rnn packing

def _seqs(m, lengths, feat=3, requires_grad=False):
    rng = np.random.default_rng(4)
    return [m.tensor(rng.standard_normal((n, feat)).astype(np.float32),
                     requires_grad=requires_grad) for n in lengths]


def _packed(p):
    return [p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices]


for _bf in (False, True):
    for _side in ("right", "left"):
        for _pad in (0.0, -1.5):
            def _pad_case(m, bf=_bf, side=_side, pad=_pad):
                seqs = _seqs(m, (2, 4, 1), requires_grad=True)
                out = m.nn.utils.rnn.pad_sequence(seqs, batch_first=bf, padding_value=pad,
                                                  padding_side=side)
                (out * m.arange(out.numel()).reshape(out.shape)).sum().backward()
                return out, [s.grad for s in seqs]
            CASES[f"pad_sequence batch_first={_bf} padding_side={_side} value={_pad}"] = (
                _pad_case, 0)


@case("pad_sequence of integer sequences", tol=0)
def _(m):
    return m.nn.utils.rnn.pad_sequence([m.arange(3), m.arange(5)], padding_value=-1)


@case("pad_sequence of a tensor (iterated along dim 0)", tol=0)
def _(m):
    return m.nn.utils.rnn.pad_sequence(m.arange(6.0).reshape(2, 3))


@case("pad_sequence mixing float32 and float64", tol=0)
def _(m):
    return m.nn.utils.rnn.pad_sequence([m.ones(2, 1), m.ones(3, 1, dtype=m.float64) / 3])


@case("pack_padded_sequence with float and int32 lengths", tol=0)
def _(m):
    a = m.nn.utils.rnn.pack_padded_sequence(m.ones(3, 2, 1), [2.7, 1.2])
    b = m.nn.utils.rnn.pack_padded_sequence(m.ones(3, 2, 1), m.tensor([3, 1], dtype=m.int32),
                                            enforce_sorted=False)
    return _packed(a), _packed(b)


@case("unsorted pack, batch_first, total_length and padding_value", tol=0)
def _(m):
    seqs = _seqs(m, (1, 3, 2), requires_grad=True)
    padded = m.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_side="left")
    packed = m.nn.utils.rnn.pack_padded_sequence(padded, [1, 3, 2], batch_first=True,
                                                 enforce_sorted=False)
    back, lens = m.nn.utils.rnn.pad_packed_sequence(packed, batch_first=True,
                                                    padding_value=-7, total_length=5)
    back.sum().backward()
    return _packed(packed), back, lens, back.stride(), [s.grad for s in seqs]


@case("unpad_sequence of a time-major batch transposes it in place", tol=0)
def _(m):
    padded = m.nn.utils.rnn.pad_sequence(_seqs(m, (3, 1)))
    out = m.nn.utils.rnn.unpad_sequence(padded, m.tensor([3, 1]))
    return out, padded.shape


@case("pad_sequence of integer sequences with a fractional padding_value", tol=0)
def _(m):
    return m.nn.utils.rnn.pad_sequence([m.arange(3), m.arange(1)], True, -1.5)


@case("pad_sequence with a trailing size-1 sequence", tol=0)
def _(m):
    return m.nn.utils.rnn.pad_sequence([m.ones(2, 3), m.arange(3.0).reshape(3, 1)])


@case("pad_packed_sequence of integer data", tol=0)
def _(m):
    packed = m.nn.utils.rnn.pack_sequence([m.arange(3), m.arange(2)])
    return m.nn.utils.rnn.pad_packed_sequence(packed, padding_value=-2.5)


@case("pad_sequence with an empty sequence", tol=0)
def _(m):
    return m.nn.utils.rnn.pad_sequence([m.ones(0, 2), m.ones(2, 2)], batch_first=True)


@case("pack_padded_sequence of an empty batch")
def _(m):
    m.nn.utils.rnn.pack_padded_sequence(m.ones(0, 2, 1), [0, 0])


@case("pad_sequence mixing dtypes, with gradients", tol=0)
def _(m):
    a = m.ones(2, 1, requires_grad=True)
    b = (m.arange(3.0, dtype=m.float64) / 3).reshape(3, 1).requires_grad_()
    out = m.nn.utils.rnn.pad_sequence([a, b], padding_side="left")
    (out * m.arange(6.0).reshape(3, 2, 1)).sum().backward()
    return out, a.grad, b.grad


for _sorted in (True, False):
    def _packed_graph_case(m, enforce=_sorted):
        seqs = _seqs(m, (4, 2, 3) if not enforce else (4, 3, 2), requires_grad=True)
        packed = m.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=enforce)
        back = m.nn.utils.rnn.unpack_sequence(packed)
        sum((t * (i + 1)).sum() for i, t in enumerate(back)).backward()
        padded = m.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
        parts = m.nn.utils.rnn.unpad_sequence(padded, m.tensor([len(s) for s in seqs]),
                                              batch_first=True)
        return _packed(packed), back, [s.grad for s in seqs], parts
    CASES[f"pack_sequence / unpack_sequence graphs enforce_sorted={_sorted}"] = (
        _packed_graph_case, 0)


@case("pad_sequence with a bad padding_side")
def _(m):
    m.nn.utils.rnn.pad_sequence(_seqs(m, (2, 3)), padding_side="middle")


for _bf in (False, True):
    for _sorted in (True, False):
        for _lengths in ((4, 3, 1), (1, 4, 3), (4, 4, 4)):
            def _pack_case(m, bf=_bf, enforce=_sorted, lengths=_lengths):
                seqs = _seqs(m, lengths, requires_grad=True)
                padded = m.nn.utils.rnn.pad_sequence(seqs, batch_first=bf)
                packed = m.nn.utils.rnn.pack_padded_sequence(padded, m.tensor(lengths),
                                                             batch_first=bf,
                                                             enforce_sorted=enforce)
                back, lens = m.nn.utils.rnn.pad_packed_sequence(packed, batch_first=bf,
                                                                padding_value=9.0,
                                                                total_length=6)
                (back * m.arange(back.numel()).reshape(back.shape)).sum().backward()
                return _packed(packed), back, lens, [s.grad for s in seqs]
            CASES[f"pack_padded_sequence batch_first={_bf} enforce_sorted={_sorted} "
                  f"lengths={_lengths}"] = (_pack_case, 0)


@case("pack_padded_sequence with lengths as a list", tol=0)
def _(m):
    return _packed(m.nn.utils.rnn.pack_padded_sequence(m.ones(3, 2, 1), [3, 2]))


@case("pack_padded_sequence with unsorted lengths and enforce_sorted")
def _(m):
    m.nn.utils.rnn.pack_padded_sequence(m.ones(3, 2, 1), [2, 3])


@case("pack_padded_sequence with a zero length")
def _(m):
    m.nn.utils.rnn.pack_padded_sequence(m.ones(3, 2, 1), [3, 0])


@case("pad_packed_sequence with a short total_length")
def _(m):
    packed = m.nn.utils.rnn.pack_padded_sequence(m.ones(3, 2, 1), [3, 2])
    m.nn.utils.rnn.pad_packed_sequence(packed, total_length=2)


for _sorted in (True, False):
    @case(f"pack_sequence / unpack_sequence enforce_sorted={_sorted}", tol=0)
    def _(m, enforce=_sorted):
        seqs = _seqs(m, (3, 5, 2) if not enforce else (5, 3, 2))
        packed = m.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=enforce)
        return _packed(packed), m.nn.utils.rnn.unpack_sequence(packed)


for _bf in (False, True):
    @case(f"unpad_sequence batch_first={_bf}", tol=0)
    def _(m, bf=_bf):
        seqs = _seqs(m, (3, 5, 2))
        padded = m.nn.utils.rnn.pad_sequence(seqs, batch_first=bf)
        return m.nn.utils.rnn.unpad_sequence(padded, m.tensor([3, 5, 2]), batch_first=bf)


def _rnn_case(kind, bf, enforce, **kwargs):
    def run(m):
        rnn = getattr(m.nn, kind)(3, 4, num_layers=2, batch_first=bf, bidirectional=True,
                                  **kwargs)
        seqs = _seqs(m, (2, 5, 3) if not enforce else (5, 3, 2), requires_grad=True)
        packed = m.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=enforce)
        out, state = rnn(packed)
        padded, lens = m.nn.utils.rnn.pad_packed_sequence(out, batch_first=bf)
        (padded.sum() + (state[0] if kind == "LSTM" else state).sum()).backward()
        return (_packed(out), padded, lens, state, [s.grad for s in seqs],
                [p.grad for p in rnn.parameters()])
    return run


CASES["RNN (relu) on packed sequences"] = (_rnn_case("RNN", True, False, nonlinearity="relu"),
                                           1e-5)
CASES["LSTM with proj_size on packed sequences"] = (_rnn_case("LSTM", False, False,
                                                              proj_size=2), 1e-5)
for _kind in ("LSTM", "GRU"):
    for _bf in (False, True):
        for _sorted in (True, False):
            CASES[f"{_kind} on packed sequences batch_first={_bf} enforce_sorted={_sorted}"] = (
                _rnn_case(_kind, _bf, _sorted), 1e-5)


@case("PackedSequence.to(float64)")
def _(m):
    packed = m.nn.utils.rnn.pack_sequence(_seqs(m, (2, 3)), enforce_sorted=False)
    return _packed(packed.to(m.float64)), _packed(packed.double())


@case("invert_permutation", tol=0)
def _(m):
    return m.nn.utils.rnn.invert_permutation(m.tensor([2, 0, 3, 1]))


# ------------------------------------------------------------------- fusion

def _conv_bn(m, conv_cls, dtype, bias, affine):
    rng = np.random.default_rng(6)
    conv = conv_cls(3, 4, 2, bias=bias).to(dtype).eval()
    bn = (m.nn.BatchNorm2d if "2d" in conv_cls.__name__ else m.nn.BatchNorm1d)(
        4, affine=affine).to(dtype).eval()
    with m.no_grad():
        for t in list(conv.parameters()) + list(bn.parameters()):
            t.copy_(m.tensor(rng.standard_normal(t.shape)))
        bn.running_mean.copy_(m.tensor(rng.standard_normal(4)))
        bn.running_var.copy_(m.tensor(rng.uniform(0.5, 2.0, 4)))
    return conv, bn


# the fused weight and bias are torch's bit for bit ("params"); the fused layer's output
# goes through each library's own convolution or matmul kernel ("forward")
for _cls in ("Conv2d", "ConvTranspose2d", "Conv1d"):
    for _dtype in ("float32", "float64"):
        for _bias in (True, False):
            for _affine in (True, False):
                for _part in ("params", "forward"):
                    def _fuse_case(m, cls=_cls, dtype=_dtype, bias=_bias, affine=_affine,
                                   part=_part):
                        conv, bn = _conv_bn(m, getattr(m.nn, cls), getattr(m, dtype), bias,
                                            affine)
                        fused = m.nn.utils.fuse_conv_bn_eval(conv, bn,
                                                             transpose="Transpose" in cls)
                        if part == "params":
                            return (fused.weight, fused.bias, fused.weight.requires_grad,
                                    fused.bias.requires_grad)
                        shape = (2, 3, 4, 4) if "2d" in cls else (2, 3, 5)
                        return fused(inputs(m, *shape).to(getattr(m, dtype)))
                    CASES[f"fuse_conv_bn_eval {_cls} {_dtype} bias={_bias} affine={_affine} "
                          f"{_part}"] = (_fuse_case, 0 if _part == "params" else
                                         2e-6 if _dtype == "float32" else 1e-12)


for _bias in (True, False):
    for _dtype in ("float32", "float64"):
        for _part in ("params", "forward"):
            def _fuse_lin_case(m, bias=_bias, dtype=_dtype, part=_part):
                rng = np.random.default_rng(8)
                lin = m.nn.Linear(3, 4, bias=bias).to(getattr(m, dtype)).eval()
                bn = m.nn.BatchNorm1d(4).to(getattr(m, dtype)).eval()
                with m.no_grad():
                    for t in list(lin.parameters()) + list(bn.parameters()):
                        t.copy_(m.tensor(rng.standard_normal(t.shape)))
                    bn.running_mean.copy_(m.tensor(rng.standard_normal(4)))
                    bn.running_var.copy_(m.tensor(rng.uniform(0.5, 2.0, 4)))
                fused = m.nn.utils.fuse_linear_bn_eval(lin, bn)
                if part == "params":
                    return fused.weight, fused.bias, fused.bias.requires_grad
                x = inputs(m, 2, 3).to(getattr(m, dtype))
                return fused(x), bn(lin(x))
            CASES[f"fuse_linear_bn_eval bias={_bias} {_dtype} {_part}"] = (
                _fuse_lin_case, 0 if _part == "params" else
                2e-6 if _dtype == "float32" else 1e-12)


@case("fuse_conv_bn_eval: float32 convolution, float64 BatchNorm", tol=0)
def _(m):
    conv, _ = _conv_bn(m, m.nn.Conv2d, m.float32, True, True)
    _, bn = _conv_bn(m, m.nn.Conv2d, m.float64, True, True)
    fused = m.nn.utils.fuse_conv_bn_eval(conv, bn)
    return fused.weight, fused.bias


@case("fuse_linear_bn_weights with float16 linear and float32 statistics", tol=0)
def _(m):
    w = inputs(m, 4, 3).half()
    b = inputs(m, 4, seed=2).half()
    rm, rv = inputs(m, 4, seed=3), inputs(m, 4, seed=4).abs() + 0.5
    return m.nn.utils.fuse_linear_bn_weights(w, b, rm, rv, 1e-5, m.ones(4), m.zeros(4))


@case("fuse_conv_bn_weights with a float16 convolution and float32 statistics", tol=0)
def _(m):
    w = inputs(m, 4, 3, 2).half()
    rm, rv = inputs(m, 4, seed=3), inputs(m, 4, seed=4).abs() + 0.5
    return m.nn.utils.fuse_conv_bn_weights(w, None, rm, rv, 1e-5, None, None)


@case("fuse_conv_bn_eval of a lazy convolution")
def _(m):
    m.nn.utils.fuse_conv_bn_eval(m.nn.LazyConv2d(3, 2).eval(), m.nn.BatchNorm2d(3).eval())


@case("fuse_linear_bn_eval of a lazy linear layer")
def _(m):
    m.nn.utils.fuse_linear_bn_eval(m.nn.LazyLinear(3).eval(), m.nn.BatchNorm1d(3).eval())


@case("fuse_linear_bn_eval with a training module")
def _(m):
    m.nn.utils.fuse_linear_bn_eval(m.nn.Linear(2, 2), m.nn.BatchNorm1d(2).eval())


@case("fuse_linear_bn_eval with mismatched features")
def _(m):
    m.nn.utils.fuse_linear_bn_eval(m.nn.Linear(2, 3).eval(), m.nn.BatchNorm1d(2).eval())


# --------------------------------------------------------------- functional_call

class _Tied:
    @staticmethod
    def build(m):
        class Tied(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = linear(m, 3, 3)
                self.dec = m.nn.Linear(3, 3)
                self.dec.weight = self.enc.weight
                self.register_buffer("scale", m.tensor(2.0))

            def forward(self, x):
                return self.dec(self.enc(x)) * self.scale
        return Tied()


def _functional_call_case(spelling, given, tie_weights=True, strict=False):
    def run(m):
        mod = _Tied.build(m)
        call = (m.func.functional_call if spelling == "func"
                else m.nn.utils.stateless.functional_call)
        tensors = {k: (m.ones(3, 3, requires_grad=True) if "weight" in k
                       else m.tensor(3.0)) for k in given}
        y = call(mod, tensors, (inputs(m, 2, 3),), tie_weights=tie_weights, strict=strict)
        y.sum().backward()
        return (y, [t.grad for t in tensors.values()], mod.state_dict(),
                mod.enc.weight is mod.dec.weight)
    return run


for _spelling in ("func", "stateless"):
    for _given in (("enc.weight",), ("dec.weight",), ("enc.weight", "scale"), ("scale",),
                   ("enc.weight", "dec.weight")):
        for _tie in (True, False):
            CASES[f"functional_call via {_spelling} {_given} tie_weights={_tie}"] = (
                _functional_call_case(_spelling, _given, _tie), 1e-6)
    CASES[f"functional_call via {_spelling} strict with a missing key"] = (
        _functional_call_case(_spelling, ("scale",), strict=True), 1e-6)


@case("functional_call strict with an unexpected key")
def _(m):
    lin = linear(m, 3, 2)
    given = {k: v.detach() for k, v in lin.named_parameters()}
    given["extra"] = m.zeros(1)
    return m.func.functional_call(lin, given, (inputs(m, 2, 3),), strict=True)


@case("stateless.functional_call with a kwargs dict and a bare argument")
def _(m):
    lin = linear(m, 3, 2)
    return m.nn.utils.stateless.functional_call(lin, {"bias": m.zeros(2)}, inputs(m, 2, 3),
                                                kwargs=None)


@case("functional_call with a tuple of dicts")
def _(m):
    lin = linear(m, 3, 2)
    return m.func.functional_call(lin, ({"bias": m.zeros(2)}, {"weight": m.ones(2, 3)}),
                                  (inputs(m, 2, 3),))


@case("functional_call on a parametrized module")
def _(m):
    mod = m.nn.utils.parametrizations.weight_norm(linear(m, 3, 2))
    g = m.ones(2, 1, requires_grad=True)
    y = m.func.functional_call(mod, {"parametrizations.weight.original0": g}, (inputs(m, 2, 3),))
    y.sum().backward()
    return y, g.grad, mod.weight


@case("functional_call giving a parametrized tensor by its own name", tol=1e-6)
def _(m):
    mod = m.nn.utils.parametrize.register_parametrization(linear(m, 3, 3), "weight",
                                                          m.nn.Tanh())
    w = m.full((3, 3), 0.5, requires_grad=True)
    y = m.func.functional_call(mod, {"weight": w}, (inputs(m, 2, 3),))
    y.sum().backward()
    return y, w.grad, mod.state_dict(), mod.weight


@case("per-sample gradients of a weight-normed layer (vmap of grad of functional_call)",
      tol=1e-5)
def _(m):
    mod = m.nn.utils.parametrizations.weight_norm(linear(m, 3, 2))
    params = {k: v.detach() for k, v in mod.named_parameters()}

    def loss(p, x):
        return m.func.functional_call(mod, p, (x.unsqueeze(0),)).pow(2).sum()
    return m.func.vmap(m.func.grad(loss), in_dims=(None, 0))(params, inputs(m, 4, 3))


# -------------------------------------------------------------------- skip_init

@case("skip_init: shapes, dtypes, the random stream untouched")
def _(m):
    lin = m.nn.utils.skip_init(m.nn.Linear, 3, 4, bias=False, dtype=m.float64)
    return ([(k, v.shape, v.dtype, v.requires_grad) for k, v in lin.named_parameters()],
            m.rand(2))


@case("skip_init of a module without a device argument")
def _(m):
    m.nn.utils.skip_init(m.nn.ReLU)


# Cases where ember's answer differs from torch 2.13.0's, with the reason. Each must
# still differ (a fix removes its entry).
KNOWN = {}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name):
    check(name, *CASES[name], KNOWN)



def test_known_entries_name_cases():
    assert set(KNOWN) <= set(CASES)


if __name__ == "__main__":
    report(CASES, KNOWN)
