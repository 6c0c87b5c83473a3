"""Fake quantization against torch: levels to the bit (ties, NaN, infinities, signed
zeros, every float dtype), the straight-through gradient, argument checks, the ONNX graph
torch writes, and the vmap and forward-mode rules. The oracle row is in
test_ops_elementwise.py; the TorchScript spelling runs in test_op_spellings.py's sweep."""
import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import ember
import ember.onnx
from ember.func import _vmap
from ember.onnx import UnsupportedOnnxExport

SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 9.3e17]


def _values(rng, scale, n=600):
    x = rng.standard_normal(n) * 3
    x[:200] = (rng.integers(-300, 300, 200) + 0.5) * scale   # exact ties: half to even
    x[200:200 + len(SPECIAL)] = SPECIAL
    return x


def _same_bits(e, t):
    e, t = e.detach().float().numpy(), t.detach().float().numpy()
    assert e.shape == t.shape
    np.testing.assert_array_equal(e, t)              # NaN where torch has NaN
    np.testing.assert_array_equal(np.signbit(e), np.signbit(t))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("scale", [0.1, 1 / 3, 0.0123456789, 0.0, -1.0])
@pytest.mark.parametrize("qparams", [(5, -128, 127), (0, 0, 255), (2 ** 24 + 1, 0, 2 ** 26)])
def test_per_tensor_levels_and_gradient_match_torch_bit_for_bit(dtype, scale, qparams):
    x = _values(np.random.default_rng(0), scale)
    tx = torch.from_numpy(x).to(getattr(torch, dtype)).requires_grad_()
    ex = ember.from_numpy(x).to(getattr(ember, dtype)).requires_grad_()
    t = torch.fake_quantize_per_tensor_affine(tx, scale, *qparams)
    e = ember.fake_quantize_per_tensor_affine(ex, scale, *qparams)
    assert e.dtype.name == dtype and e.grad_fn.name() == t.grad_fn.name()
    _same_bits(e, t)
    gy = np.random.default_rng(1).standard_normal(x.shape)
    _same_bits(ember.autograd.grad(e, ex, ember.from_numpy(gy).to(e.dtype))[0],
               torch.autograd.grad(t, tx, torch.from_numpy(gy).to(t.dtype))[0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("zp_dtype", ["int32", "float32", "float16"])
def test_per_channel_levels_and_gradient_match_torch_bit_for_bit(dtype, zp_dtype):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 5, 80)) * 3
    x[0, :, :len(SPECIAL)] = SPECIAL
    scale = rng.uniform(0.01, 0.5, 5).astype(np.float32)
    scale[:2] = [0.0, -0.5]
    zp = rng.integers(-20, 20, 5) + (rng.uniform(-1, 1, 5) if zp_dtype != "int32" else 0)
    zp = zp.astype(zp_dtype)
    tx = torch.from_numpy(x).to(getattr(torch, dtype)).requires_grad_()
    ex = ember.from_numpy(x).to(getattr(ember, dtype)).requires_grad_()
    t = torch.fake_quantize_per_channel_affine(tx, torch.from_numpy(scale), torch.from_numpy(zp),
                                               1, -128, 127)
    e = ember.fake_quantize_per_channel_affine(ex, ember.from_numpy(scale),
                                               ember.from_numpy(zp), 1, -128, 127)
    assert e.grad_fn.name() == t.grad_fn.name()
    _same_bits(e, t)
    _same_bits(ember.autograd.grad(e.sum(), ex)[0], torch.autograd.grad(t.sum(), tx)[0])


def test_tensor_qparams_overload():
    x = _values(np.random.default_rng(3), 0.1).astype(np.float32)
    tx, ex = torch.from_numpy(x).requires_grad_(), ember.from_numpy(x).requires_grad_()
    t = torch.fake_quantize_per_tensor_affine(tx, torch.tensor(0.1), torch.tensor(3), 0, 255)
    e = ember.fake_quantize_per_tensor_affine(ex, ember.tensor(0.1), ember.tensor(3), 0, 255)
    assert e.grad_fn.name() == t.grad_fn.name() == \
        "FakeQuantizePerTensorAffineCachemaskTensorQparamsBackward0"
    _same_bits(e, t)
    _same_bits(ember.autograd.grad(e.sum(), ex)[0], torch.autograd.grad(t.sum(), tx)[0])


def _x(m, dtype="float32"):
    return m.from_numpy(np.linspace(-1, 1, 24).reshape(2, 3, 4)).to(getattr(m, dtype))


def _qp(m, scale=(0.1, 0.2, 0.3), zp=(0, 1, 2), zdt="int32", sdt="float32"):
    return (m.tensor(list(scale), dtype=getattr(m, sdt)),
            m.tensor(list(zp), dtype=getattr(m, zdt)))


ERRORS = [
    lambda m: m.fake_quantize_per_tensor_affine(_x(m), 0.1, 0, 5, 3),
    lambda m: m.fake_quantize_per_tensor_affine(_x(m), 0.1, 9, 0, 3),
    lambda m: m.fake_quantize_per_tensor_affine(_x(m).long(), 0.1, 0, 0, 255),
    lambda m: m.fake_quantize_per_tensor_affine(_x(m).long(), 0.1, 9, 5, 3),
    lambda m: m.fake_quantize_per_tensor_affine(_x(m, "complex64"), 0.1, 0, 0, 255),
    lambda m: m.fake_quantize_per_tensor_affine(_x(m), 0.1, 0.5, 0, 255),
    lambda m: m.fake_quantize_per_tensor_affine(_x(m), 0.1, True, 0, 255),
    lambda m: m.fake_quantize_per_tensor_affine(_x(m), 0.1, 0, 0.0, 255),
    lambda m: m.fake_quantize_per_tensor_affine(_x(m), m.tensor([0.1, 0.2]), m.tensor(0), 0, 9),
    lambda m: m.fake_quantize_per_tensor_affine(
        _x(m), m.tensor(0.1, requires_grad=True), m.tensor(0), 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), *_qp(m, sdt="float64"), 1, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), *_qp(m, zdt="int64"), 1, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), *_qp(m), 1, 9, 0),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), *_qp(m), 1, 0, 1),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), *_qp(m), 3, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), *_qp(m), -2, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), *_qp(m), 2, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), *_qp(m, (0.1, 0.2)), 1, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(
        _x(m), _qp(m)[0].reshape(1, 3), _qp(m)[1].reshape(1, 3), 1, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), _qp(m)[0], _qp(m)[1].reshape(1, 3),
                                                 1, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(m.tensor(1.0), *_qp(m, (0.1,), (0,)), 0, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m).long(), *_qp(m), 1, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), 0.1, _qp(m)[1], 1, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(_x(m), *_qp(m), 1.0, 0, 9),
    lambda m: m.fake_quantize_per_channel_affine(
        _x(m), _qp(m)[0].requires_grad_(), _qp(m)[1], 1, 0, 9),
]


@pytest.mark.parametrize("fn", ERRORS, ids=range(len(ERRORS)))
def test_argument_checks_raise_torchs_errors(fn):
    with pytest.raises(Exception) as t:
        fn(torch)
    with pytest.raises(type(t.value)) as e:
        fn(ember)
    assert str(e.value).splitlines()[0] == str(t.value).splitlines()[0]


# ----- ONNX: QuantizeLinear + DequantizeLinear, the nodes torch writes -------------------
def _onnx(lib, fn, x):
    base = torch.nn.Module if lib is torch else ember.nn.Module

    class M(base):
        def forward(self, t):
            return fn(lib, t)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if lib is torch:
            torch.onnx.export(M(), (x,), f, dynamo=False, opset_version=18)
        else:
            ember.onnx.export(M(), (x,), f, opset_version=18)
    return f.getvalue()


_FQ = [
    ("per_tensor_uint8", lambda m, t: m.fake_quantize_per_tensor_affine(t, 0.1, 5, 0, 255)),
    ("per_tensor_int8", lambda m, t: m.fake_quantize_per_tensor_affine(t, 0.05, -3, -128, 127)),
    ("per_tensor_0_127", lambda m, t: m.fake_quantize_per_tensor_affine(t, 0.1, 0, 0, 127)),
    ("per_channel_int8", lambda m, t: m.fake_quantize_per_channel_affine(
        t, *_qp(m, zp=(0, -1, 2)), 1, -128, 127)),
    ("per_channel_uint8", lambda m, t: m.fake_quantize_per_channel_affine(
        t, *_qp(m, zp=(0, 1, 9)), 1, 0, 255)),
]


@pytest.mark.parametrize("fn", [f for _, f in _FQ], ids=[n for n, _ in _FQ])
def test_onnx_export_writes_torchs_nodes_and_runs(fn):
    x = (np.linspace(-4, 30, 48, dtype=np.float32) + 0.013).reshape(4, 3, 4)
    mine, theirs = (onnx.load_from_string(_onnx(lib, fn, lib.from_numpy(x)))
                    for lib in (ember, torch))
    assert [n.op_type for n in mine.graph.node if n.op_type not in ("Cast", "Constant")] == \
        [n.op_type for n in theirs.graph.node if n.op_type != "Constant"]
    sess = ort.InferenceSession(mine.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    np.testing.assert_array_equal(got, fn(torch, torch.from_numpy(x)).numpy())


def test_onnx_export_of_other_dtypes_and_tensor_qparams_runs():
    x = (np.linspace(-4, 30, 48) + 0.013).reshape(4, 3, 4)

    def fn(m, t):
        return m.fake_quantize_per_tensor_affine(t, m.tensor(0.1), m.tensor(5), 0, 255)
    data = _onnx(ember, fn, ember.from_numpy(x))
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, fn(torch, torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("fn", [
    lambda m, t: m.fake_quantize_per_tensor_affine(t, 0.1, 0, 0, 15),
    lambda m, t: m.fake_quantize_per_channel_affine(t, *_qp(m), 1, -8, 7),
])
def test_onnx_refuses_ranges_onnx_cannot_hold_as_torch_does(fn):
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(Exception, match="ONNX allows only"):
        _onnx(torch, fn, torch.from_numpy(x))
    with pytest.raises(UnsupportedOnnxExport, match=r"allows only \(0, 127\), \(0, 255\) and"):
        _onnx(ember, fn, ember.from_numpy(x))


def test_onnx_refuses_a_float_zero_point():
    with pytest.raises(UnsupportedOnnxExport, match="floating zero_point"):
        _onnx(ember, lambda m, t: m.fake_quantize_per_channel_affine(
            t, *_qp(m, zdt="float32"), 1, 0, 255), ember.zeros(2, 3))


# ----- transforms: vmap (the class's batch rule) and forward mode (its jvp) ---------------
@pytest.mark.parametrize("fn", [
    lambda m, t: m.fake_quantize_per_tensor_affine(t, 0.1, 3, -20, 20),
    lambda m, t: m.fake_quantize_per_tensor_affine(t, m.tensor(0.1), m.tensor(3), -20, 20),
    lambda m, t: m.fake_quantize_per_channel_affine(t, *_qp(m), 1, -20, 20),
    lambda m, t: m.fake_quantize_per_channel_affine(t, *_qp(m), -1 + 3, -20, 20),
], ids=["per_tensor", "tensor_qparams", "per_channel", "per_channel_last"])
def test_vmap_matches_torch_func_without_the_per_sample_loop(fn, monkeypatch):
    def no_loop(*a, **k):
        raise AssertionError("vmap fell back to its per-sample loop")
    monkeypatch.setattr(_vmap, "_loop", no_loop)
    x = np.random.default_rng(4).standard_normal((5, 2, 3, 3)) * 2
    got = ember.func.vmap(lambda t: fn(ember, t))(ember.from_numpy(x))
    want = torch.func.vmap(lambda t: fn(torch, t))(torch.from_numpy(x))
    _same_bits(got, want)


def test_vmap_over_the_scales_matches_torch_func():
    x = np.random.default_rng(5).standard_normal((4, 3))
    scales = np.random.default_rng(6).uniform(0.05, 0.5, (6, 3)).astype(np.float32)

    def fn(m, s):
        return m.fake_quantize_per_channel_affine(m.from_numpy(x), s, m.zeros(3, dtype=m.int32),
                                                  1, -8, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a batched scale runs per sample (exact)
        got = ember.func.vmap(lambda s: fn(ember, s))(ember.from_numpy(scales))
    _same_bits(got, torch.func.vmap(lambda s: fn(torch, s))(torch.from_numpy(scales)))


@pytest.mark.parametrize("fn", [
    lambda m, t: m.fake_quantize_per_tensor_affine(t, 0.1, 3, -20, 20),
    lambda m, t: m.fake_quantize_per_channel_affine(t, *_qp(m), 1, -20, 20),
], ids=["per_tensor", "per_channel"])
def test_forward_mode_is_the_straight_through_jacobian(fn):
    """torch 2.13 has no forward-mode rule (NotImplementedError); ember's tangent is the
    Jacobian torch's backward defines (diagonal: the mask), so it equals torch's vjp."""
    x = np.random.default_rng(7).standard_normal((2, 3, 4)) * 3
    v = np.random.default_rng(8).standard_normal((2, 3, 4))
    with pytest.raises(NotImplementedError):
        torch.func.jvp(lambda t: fn(torch, t), (torch.from_numpy(x),), (torch.from_numpy(v),))
    out, tangent = ember.func.jvp(lambda t: fn(ember, t), (ember.from_numpy(x),),
                                  (ember.from_numpy(v),))
    tx = torch.from_numpy(x).requires_grad_()
    y = fn(torch, tx)
    _same_bits(out, y)
    _same_bits(tangent, torch.autograd.grad(y, tx, torch.from_numpy(v))[0])


@pytest.mark.parametrize("axis,shape", [(-1, (5, 2, 3)), (0, (5,))])
def test_vmap_keeps_the_per_sample_axis_checks(axis, shape):
    def run(m):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return m.func.vmap(lambda t: m.fake_quantize_per_channel_affine(
                t, *_qp(m, (0.1, 0.2, 0.3)[:shape[-1] if len(shape) > 1 else 1],
                        (0, 1, 2)[:shape[-1] if len(shape) > 1 else 1]), axis, -20, 20))(
                m.zeros(*shape))
    with pytest.raises(Exception) as t:
        run(torch)
    with pytest.raises(type(t.value), match=str(t.value)[:20]):
        run(ember)
