"""Fake quantization for quantization-aware training: values are rounded to a grid of
``scale``-spaced levels, clamped to ``[quant_min, quant_max]`` and mapped back to floats,
and the gradient passes straight through where the value was not clamped.

Each op's class is its whole record: the forward on arrays, the backward in ember Tensor
ops, the forward-mode and vmap rules, the export spellings and PyTorch's node name. The
arithmetic follows PyTorch's CPU kernels step by step (which dtype each product is
rounded in), so the levels agree to the bit, ties included.
"""
import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.ops import _batch, _jvp
from ember.ops._util import not_implemented_for, type_name, wrap_dim
from ember.ops._variants import Variants
from ember.ops._variants import bind as bind_variants

_FLOATS = ("float16", "bfloat16", "float32", "float64")
_INT64_MIN = np.iinfo(np.int64).min


def _compute_dtype(x, kernel):
    """PyTorch's kernels compute float32 and float64 inputs in their own dtype and the
    16-bit floats in float32; other dtypes have no kernel."""
    if x.dtype.name not in _FLOATS:
        raise not_implemented_for(kernel, x.dtype)
    return x.dtype if x.dtype.itemsize >= 4 else np.dtype(np.float32)


def _check_range(quant_min, quant_max):
    if quant_min > quant_max:
        raise RuntimeError("`quant_min` should be less than or         equal to `quant_max`.")


class FakeQuantizePerTensorAffine(Primitive):
    """``(clamp(round(x / scale) + zero_point, quant_min, quant_max) - zero_point) * scale``
    with one ``scale`` and ``zero_point`` for the whole tensor; rounding is half to even."""
    _node_name = "FakeQuantizePerTensorAffineCachemaskBackward0"  # PyTorch's grad_fn

    def forward(self, x, scale, zero_point, quant_min, quant_max):
        _check_range(quant_min, quant_max)
        if not quant_min <= zero_point <= quant_max:
            raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
        ct = _compute_dtype(x, "fake_quantize_tensor_cachemask_kernel_type_handling")
        s32 = np.float32(scale)
        inv = (np.float32(1) / s32).astype(ct)      # a float32 reciprocal, as PyTorch's
        q = ct.type(zero_point) + np.rint(x.astype(ct, copy=False) * inv)
        lo, hi = ct.type(quant_min), ct.type(quant_max)
        self.mask = (lo <= q) & (q <= hi)
        level = np.fmin(np.fmax(q, lo), hi).astype(np.int64)  # fmax sends NaN to quant_min
        return ((level - zero_point).astype(np.float32) * s32).astype(x.dtype, copy=False)

    def backward(self, gy):
        # straight through: gy where the level was not clamped (NaN and infinities: 0)
        return gy * _make(self.mask, False), None, None, None, None

    jvp = _jvp.diagonal               # the tangent through the same mask
    batch = _batch.elementwise
    torchscript = "fake_quantize_per_tensor_affine"  # the aten schema's arguments, in order
    # onnx: QuantizeLinear + DequantizeLinear, in ember/onnx/_export_ops.py


class FakeQuantizePerTensorAffineTensorQparams(FakeQuantizePerTensorAffine):
    """The same op with ``scale`` and ``zero_point`` given as one-element tensors
    (PyTorch's ``tensor_qparams`` overload, a node of its own name)."""
    _node_name = "FakeQuantizePerTensorAffineCachemaskTensorQparamsBackward0"

    def forward(self, x, scale, zero_point, quant_min, quant_max):
        if zero_point.dtype.kind not in "iu":
            # PyTorch reads a float zero point's bits as an integer: refuse, don't guess
            raise RuntimeError("fake_quantize_per_tensor_affine: a tensor zero_point must "
                               f"have an integer dtype, not {type_name(zero_point.dtype)}")
        return super().forward(x, float(scale.reshape(-1)[0]), int(zero_point.reshape(-1)[0]),
                               quant_min, quant_max)

    batch = _batch.passthrough        # a batched scale or zero point runs per sample
    torchscript = "fake_quantize_per_tensor_affine"  # the aten ``tensor_qparams`` overload


class FakeQuantizePerChannelAffine(Primitive):
    """Fake quantization with one ``scale`` and ``zero_point`` per index of ``axis``."""
    _node_name = "FakeQuantizePerChannelAffineCachemaskBackward0"

    def forward(self, x, scale, zero_point, axis, quant_min, quant_max):
        if scale.dtype.name not in ("float32", "bfloat16"):
            raise RuntimeError(f"Scale must be Float or BFloat16, found {type_name(scale.dtype)}")
        if zero_point.dtype.name not in ("int32", "float32", "float16"):
            raise RuntimeError("Zero-point must be Int32, Float or Half, found "
                               f"{type_name(zero_point.dtype)}")
        _check_range(quant_min, quant_max)
        if scale.ndim != 1:
            raise RuntimeError("scale should be a 1-D tensor")
        if zero_point.ndim != 1:
            raise RuntimeError("zero point should be a 1-D tensor")
        if scale.size != zero_point.size:
            raise RuntimeError("scale and zero-point need to have the same dimensions")
        if x.ndim == 0:
            raise IndexError(f"Dimension specified as {axis} but tensor has no dimensions")
        wrap_dim(axis, x.ndim)
        if axis < 0:
            raise RuntimeError("`axis` must be between 0 and number of dimensions of input")
        if scale.size != x.shape[axis]:
            raise RuntimeError("dimensions of scale and zero-point are not consistent with "
                               "input tensor")
        zpv = zero_point.astype(np.float64)
        if ((zpv < quant_min) | (zpv > quant_max)).any():
            raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
        ct = _compute_dtype(x, "fake_quantize_channel_cachemask_cpu_type_handling")
        shape = [1] * x.ndim
        shape[axis] = -1
        s32 = scale.astype(np.float32).reshape(shape)
        inv = np.float32(1) / s32
        if zero_point.dtype.kind == "i":
            zp = zero_point.astype(np.int64).reshape(shape)
            q = zp.astype(ct) + np.rint(x.astype(ct, copy=False) * inv.astype(ct))
            level = np.clip(_to_int64(q), quant_min, quant_max)
            out = (level - zp).astype(ct) * s32.astype(ct)
        else:  # a float zero point shifts before rounding (in float32); the level maps
            # back in float64, as PyTorch's kernel does
            zp = zero_point.astype(np.float32).reshape(shape)
            q = np.rint(x.astype(np.float32) * inv + zp)
            level = np.clip(_to_int64(q), quant_min, quant_max)
            out = ((level - zp.astype(np.float64)) * s32.astype(np.float64)).astype(ct)
        self.mask = (q >= quant_min) & (q <= quant_max)
        return out.astype(x.dtype, copy=False)

    def backward(self, gy):
        return gy * _make(self.mask, False), None, None, None, None, None

    jvp = _jvp.diagonal

    def batch(cls, lvl, args, params):
        """vmap: the per-sample ``axis`` moves past the batch dim (``_batch.dim_rule``),
        once the per-sample checks that the shift would hide have run."""
        axis = args[3]
        if args[0].dim() == 0:
            raise IndexError(f"Dimension specified as {axis} but tensor has no dimensions")
        if axis < 0:
            raise RuntimeError("`axis` must be between 0 and number of dimensions of input")
        return _batch_axis(cls, lvl, args, params)

    torchscript = "fake_quantize_per_channel_affine"
    # onnx: QuantizeLinear + DequantizeLinear with ``axis``, in ember/onnx/_export_ops.py


_batch_axis = _batch.dim_rule(3)


def _to_int64(q):
    """Float levels as int64 the way PyTorch's per-channel kernel converts them: NaN,
    infinities and values past int64 become its smallest value (then clamp to quant_min)."""
    ok = np.abs(q) < 2.0 ** 63
    return np.where(ok, np.where(ok, q, 0).astype(np.int64), _INT64_MIN)


def _bad_call(name, got, signatures):
    return TypeError(f"{name}() received an invalid combination of arguments - got "
                     f"({', '.join(got)}), but expected one of:\n" +
                     "\n".join(f" * ({s})" for s in signatures))


def _type_names(*args):
    return [type(a).__name__ if not isinstance(a, Tensor) else "Tensor" for a in args]


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min, quant_max):
    """``input`` fake-quantized with one ``scale`` and ``zero_point``:
    ``(clamp(round(input / scale) + zero_point, quant_min, quant_max) - zero_point) * scale``
    (rounding half to even), in ``input``'s floating dtype. The gradient is passed where
    the rounded value lies in ``[quant_min, quant_max]`` and is 0 elsewhere.

    >>> ember.fake_quantize_per_tensor_affine(ember.tensor([0.05, 0.27, 9.0]), 0.1, 0, 0, 255)
    tensor([0.0000, 0.3000, 9.0000])
    """
    if isinstance(scale, Tensor) and isinstance(zero_point, Tensor):
        return _tensor_qparams(input, scale, zero_point, quant_min, quant_max)
    if not (isinstance(scale, (float, np.floating)) or _is_int(scale)) or \
            not all(_is_int(v) for v in (zero_point, quant_min, quant_max)):
        raise _bad_call("fake_quantize_per_tensor_affine",
                        _type_names(input, scale, zero_point, quant_min, quant_max),
                        ["Tensor input, float scale, int zero_point, int quant_min, "
                         "int quant_max",
                         "Tensor input, Tensor scale, Tensor zero_point, int quant_min, "
                         "int quant_max"])
    return FakeQuantizePerTensorAffine.apply(input, float(scale), int(zero_point),
                                             int(quant_min), int(quant_max))


def _tensor_qparams(input, scale, zero_point, quant_min, quant_max):
    for name, v in (("scale", scale), ("zero_point", zero_point)):
        if v.requires_grad:
            raise RuntimeError("The function '_fake_quantize_per_tensor_affine_cachemask_"
                               "tensor_qparams' is not differentiable with respect to argument "
                               f"'{name}'. This input cannot have requires_grad True.")
        if v.numel() != 1:
            raise RuntimeError(f"a Tensor with {v.numel()} elements cannot be converted to "
                               "Scalar")
    if not (_is_int(quant_min) and _is_int(quant_max)):
        raise _bad_call("fake_quantize_per_tensor_affine",
                        _type_names(input, scale, zero_point, quant_min, quant_max),
                        ["Tensor input, Tensor scale, Tensor zero_point, int quant_min, "
                         "int quant_max"])
    return FakeQuantizePerTensorAffineTensorQparams.apply(input, scale, zero_point,
                                                          int(quant_min), int(quant_max))


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min, quant_max):
    """``input`` fake-quantized along ``axis``: index ``i`` of that dim uses ``scale[i]``
    (a float32 tensor) and ``zero_point[i]`` (an int32, float32 or float16 tensor; a float
    zero point is added before rounding). The gradient passes straight through where the
    value was not clamped, as in :func:`fake_quantize_per_tensor_affine`."""
    for i, (name, v) in enumerate((("scale", scale), ("zero_point", zero_point)), 2):
        if not isinstance(v, Tensor):
            raise TypeError(f"fake_quantize_per_channel_affine(): argument '{name}' "
                            f"(position {i}) must be Tensor, not {type(v).__name__}")
        if v.requires_grad:
            raise RuntimeError("The function 'fake_quantize_per_channel_affine_cachemask' is "
                               f"not differentiable with respect to argument '{name}'. This "
                               "input cannot have requires_grad True.")
    for i, (name, v) in enumerate((("axis", axis), ("quant_min", quant_min),
                                   ("quant_max", quant_max)), 4):
        if not _is_int(v):
            raise TypeError(f"fake_quantize_per_channel_affine(): argument '{name}' "
                            f"(position {i}) must be int, not {type(v).__name__}")
    return FakeQuantizePerChannelAffine.apply(input, scale, zero_point, int(axis),
                                              int(quant_min), int(quant_max))


# torch has these as functions only (no Tensor methods)
_VARIANTS = [
    Variants("fake_quantize_per_tensor_affine fake_quantize_per_channel_affine", method=False),
]

__all__ = bind_variants(globals(), _VARIANTS)
