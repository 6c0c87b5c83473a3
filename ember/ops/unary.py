"""Elementwise functions of one tensor: exp/log, trigonometry, rounding, sigmoid/tanh,
hardtanh, and the float predicates. relu, leaky_relu, softplus and the sigmoid/tanh
backward kernels are in ``activations``, the clamp family in ``clamping`` (re-exported
here, their Tensor methods bound here)."""
import math

import numpy as np

from ember import backend as _backend
from ember._factory import zeros_like
from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.autograd.saved import _read_saved, _saved_inputs, _saved_output_array
from ember.backend import threads as _threads
from ember.ops import _batch, _erf_kernels, _grad_arrays, _jvp
from ember.ops._util import (
    cj,
    default_float_np,
    not_implemented_for,
    opmath,
    reduced_float,
    to_float,
    type_name,
    with_out,
    with_out_unary,
)
from ember.ops._util import (
    split_or as _split_or,
)
from ember.ops._variants import Variants
from ember.ops._variants import bind as bind_variants

# relu, leaky_relu, softplus, zero_curvature and the sigmoid/tanh backward kernels live in
# ``activations``; their names stay importable from here (``unary.Relu``,
# ``unary.zero_curvature`` ...), and the Variants rows below bind their Tensor methods
from ember.ops.activations import (  # noqa: F401
    _BLOCK,
    _ZEROS,
    LeakyRelu,
    Relu,
    ReluBackward,
    SigmoidBackward,
    Softplus,
    TanhBackward,
    ZeroCurvature,
    _relu_array,
    _relu_grad,
    _relu_grad_array,
    _ZerosLikeOf,
    leaky_relu,
    relu,
    softplus,
    zero_curvature,
)
from ember.ops.arithmetic import AddScalar as _AddScalar
from ember.ops.arithmetic import MulScalar as _MulScalar
from ember.ops.arithmetic import SubScalar as _SubScalar

# the clamp family lives in ``clamping``; bound here as Tensor methods (``_VARIANTS``)
# and importable from here as before (``unary.Clamp`` ...)
from ember.ops.clamping import (  # noqa: F401
    Clamp,
    ClampMax,
    ClampMaxTensor,
    ClampMin,
    ClampMinTensor,
    ClampTensor,
    clamp,
    clamp_max,
    clamp_min,
    clip,
)

_SQRT_PI = math.sqrt(math.pi)
# backward formulas on arrays where that is all their Tensor ops would do (``_grad_arrays``)
_array = _grad_arrays.array
_same = _grad_arrays.operand
_wrap = _grad_arrays.wrap


def _erf_parts(x):
    """erf and erfc to the dtype's precision, with NumPy alone (``_erf_kernels``)."""
    return _erf_kernels.erf_erfc(x)


class _Unary(Primitive):
    """A float function of one tensor; integer inputs compute in the default float dtype."""
    jvp = _jvp.diagonal
    batch = _batch.elementwise


def _unary(name, fn, grad, save="x", floating=True, doc="", array_grad=None, real=None,
           real_message=None, **rules):
    """Declare a one-input primitive from its forward array function and gradient.

    ``grad(gy, x, y)`` returns the input gradient in Tensor ops; ``save`` says whether
    it reads the input (``"x"``), the output (``"y"``), both, or neither (``""``).
    ``array_grad(g, a)``, where given, is the same formula on the arrays of ``gy`` and
    of the one saved tensor (``x`` or ``y``), calling the forwards the Tensor ops call,
    in the same order: used when that is all they would do (``_grad_arrays``).
    ``real``: the name of PyTorch's kernel that refuses complex inputs (a function of
    the real line only), raised as its ``NotImplementedError``; ``real_message``: the
    message of that error where PyTorch's op refuses complex inputs before any kernel
    (``floor``). ``rules`` are more class
    attributes (``onnx=``, ``torchscript=``, ``complex32_math=``: see ``Primitive``).
    """
    attrs = {"save_inputs": (0,) if "x" in save else (), "save_output": "y" in save,
             "onnx": None, "torchscript": None, **rules}
    split = isinstance(fn, np.ufunc)  # a NumPy ufunc: computes each element alone
    if real is not None or real_message is not None:
        body = fn
        message = real_message or f'"{real}" not implemented for ' + "'{type}'"

        def fn(x):
            if x.dtype.kind == "c":
                raise NotImplementedError(message.format(type=type_name(x.dtype)))
            return body(x)
    if floating:
        def forward(self, x):
            if x.dtype.kind not in "fcV":  # ``to_float``, inlined on this hot path
                x = x.astype(default_float_np())
            elif x.dtype.itemsize == 2:
                # float16/bfloat16: PyTorch's CPU kernels compute in float32 and round
                # once (``1 / sqrt(x)`` in float16 rounds twice). (Their gradients are
                # formulas of ops in the input's dtype, as PyTorch's derivatives.)
                return fn(x.astype(np.float32)).astype(x.dtype)
            if split and _threads.MANY and x.size >= _threads.SPLIT_ELEMENTS:
                r = _threads.unary(fn, x)  # large: in blocks on the intra-op threads
                if r is not None:
                    return r
            return fn(x)
    else:
        def forward(self, x):
            return fn(x)
    attrs["forward"] = forward
    # (the node's own reads of what it saved: ``saved_tensors`` without the property)
    if save == "xy":
        def backward(self, gy):
            x, y = _read_saved(self)
            return grad(gy, x, y)
    elif save == "x":
        def backward(self, gy):
            x, = _read_saved(self)
            if array_grad is not None:
                g = _array(gy)
                d = None if g is None else _same(x, g)
                if d is not None:
                    return _wrap(array_grad(g, d))
            return grad(gy, x, None)
    elif save == "y":
        def backward(self, gy):
            if array_grad is not None:
                g = _array(gy)
                if g is not None:
                    # the saved output's array, without the Tensor ``_read_saved`` makes
                    d = _saved_output_array(self)
                    if d is not None and type(d) is np.ndarray and d.size <= g.size and \
                            (d.dtype is g.dtype or d.dtype == g.dtype):
                        return _wrap(array_grad(g, d))
            y, = _read_saved(self)
            return grad(gy, None, y)
    elif array_grad is not None:
        def backward(self, gy):
            g = _array(gy)
            return grad(gy, None, None) if g is None else _wrap(array_grad(g, None))
    else:
        def backward(self, gy):
            return grad(gy, None, None)
    attrs["backward"] = backward
    if array_grad is not None and save != "xy":
        # ``backward`` on the gradient's array (``Node._array_grads``)
        if save == "x":
            def array_grads(self, gy, g):
                saved = _saved_inputs(self)
                d = None if saved is None else _same(saved[0], g)
                return None if d is None else array_grad(g, d)
        elif save == "y":
            def array_grads(self, gy, g):
                d = _saved_output_array(self)
                if d is not None and type(d) is np.ndarray and d.size <= g.size and \
                        (d.dtype is g.dtype or d.dtype == g.dtype):
                    return array_grad(g, d)
                return None
        else:
            def array_grads(self, gy, g):
                return array_grad(g, None)
        attrs["_array_grads"] = array_grads
    cls = type(name, (_Unary,), attrs)
    op = cls.unary_function()
    op.__name__ = name[0].lower() + "".join("_" + c.lower() if c.isupper() else c
                                            for c in name[1:])
    op.__doc__ = doc or f"Elementwise ``{op.__name__}``."
    op.primitive = cls
    return op


def _zero_grad(gy, x, y):
    # zeros, as PyTorch's ``zeros_like(grad)``: no inf * 0 = nan, and no graph to
    # differentiate again
    return zeros_like(gy)


def _erf_np(x):
    return _erf_kernels.erf_erfc(x, want_erfc=False)[0]


def _erfc_np(x):
    return _erf_kernels.erf_erfc(x, want_erf=False)[1]


def _neg_np(x):
    if x.dtype == np.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you "
                           "are trying to invert a mask, use the `~` or `logical_not()` operator "
                           "instead.")
    return _split_or(np.negative, x)


def _no_bool(kernel, fn):
    """``fn`` for every dtype but bool, which PyTorch's kernel has no loop for."""
    def f(x):
        if x.dtype == np.bool_:
            raise not_implemented_for(kernel, x.dtype)
        return fn(x)
    return f


def _frac_np(x):
    if x.dtype.kind != "f" and not reduced_float(x.dtype):
        raise not_implemented_for("frac_cpu", x.dtype)
    return x - np.trunc(x)


def _sign_np(x):
    if x.dtype == np.bool_:
        return x.copy()
    out = np.sign(x)
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        if nan.any():
            out = np.where(nan, 0, out).astype(out.dtype)  # PyTorch's sign(nan) is 0
    return out


def _square_np(x):
    # bool squares as int64, as in PyTorch (pow promotes bool to the default int)
    return _split_or(np.square, x.astype(np.int64) if x.dtype == np.bool_ else x)


neg = negative = _unary("Neg", _neg_np, lambda gy, x, y: -gy, save="", floating=False,
                        doc="``-input``.", onnx="Neg", torchscript="neg", complex32_math=True,
                        array_grad=lambda g, _: np.negative(g))
exp = _unary("Exp", np.exp, lambda gy, x, y: gy * cj(y), save="y", doc="``e ** input``.",
             onnx="Exp", torchscript="exp", array_grad=lambda g, y: g * y)
exp2 = _unary("Exp2", np.exp2, lambda gy, x, y: _MulScalar.apply(gy * cj(y), math.log(2)),
              save="y",
              torchscript="exp2")
expm1 = _unary("Expm1", np.expm1, lambda gy, x, y: gy * cj(_AddScalar.apply(y, 1)),
               save="y", torchscript="expm1")
log = _unary("Log", np.log, lambda gy, x, y: gy / cj(x), doc="Natural logarithm.",
             onnx="Log", torchscript="log", array_grad=lambda g, x: g / x)
log2 = _unary("Log2", np.log2, lambda gy, x, y: gy / cj(_MulScalar.apply(x, math.log(2))),
              torchscript="log2")
log10 = _unary("Log10", np.log10,
               lambda gy, x, y: gy / cj(_MulScalar.apply(x, math.log(10))), torchscript="log10")
log1p = _unary("Log1p", np.log1p, lambda gy, x, y: gy / cj(_AddScalar.apply(x, 1)),
               torchscript="log1p",
               _node_name="Log1PBackward0")
sqrt = _unary("Sqrt", np.sqrt, lambda gy, x, y: gy / cj(_MulScalar.apply(y, 2)), save="y",
              onnx="Sqrt", torchscript="sqrt")
neg.primitive.fused = "-{0}"  # one element, for the compile plan's fused loops
rsqrt = _unary("Rsqrt", lambda x: 1 / np.sqrt(x),
               lambda gy, x, y: _MulScalar.apply(gy * cj(y.pow(3)), -0.5),
               save="y", doc="``1 / sqrt(input)``.", torchscript="rsqrt")
square = _unary("Square", _square_np, lambda gy, x, y: gy * cj(x * 2), floating=False,
                torchscript="square", _node_name="PowBackward0")  # PyTorch: pow(x, 2)
sin = _unary("Sin", np.sin, lambda gy, x, y: gy * cj(x.cos()), onnx="Sin", torchscript="sin",
             array_grad=lambda g, x: g * _cos_fw(None, x))
cos = _unary("Cos", np.cos, lambda gy, x, y: gy * -cj(x.sin()), onnx="Cos", torchscript="cos",
             array_grad=lambda g, x: g * np.negative(_sin_fw(None, x)))
_sin_fw = sin.primitive.forward
_cos_fw = cos.primitive.forward
tan = _unary("Tan", np.tan, lambda gy, x, y: gy * cj(y * y + 1), save="y",
             onnx="Tan", torchscript="tan")
asin = arcsin = _unary("Asin", np.arcsin,
                       lambda gy, x, y: gy * cj(_AddScalar.apply(-x * x, 1).rsqrt()),
                       onnx="Asin", torchscript="asin")
acos = arccos = _unary("Acos", np.arccos,
                       lambda gy, x, y: -gy * cj(_AddScalar.apply(-x * x, 1).rsqrt()),
                       onnx="Acos", torchscript="acos")
atan = arctan = _unary("Atan", np.arctan,
                       lambda gy, x, y: gy / cj(_AddScalar.apply(x * x, 1)),
                       onnx="Atan", torchscript="atan")
sinh = _unary("Sinh", np.sinh, lambda gy, x, y: gy * cj(x.cosh()), onnx="Sinh", torchscript="sinh")
cosh = _unary("Cosh", np.cosh, lambda gy, x, y: gy * cj(x.sinh()), onnx="Cosh", torchscript="cosh")


_tanh_grad = TanhBackward.binary_function()
_sigmoid_grad = SigmoidBackward.binary_function()
tanh = _unary("Tanh", np.tanh, lambda gy, x, y: _tanh_grad(gy, y), save="y",
              onnx="Tanh", torchscript="tanh",
              array_grad=lambda g, y: TanhBackward.forward(None, g, y))


def _tanh_vjp(self, grads, inputs, outputs, out=None):
    """tanh's array gradient (``Primitive.vjp``): ``(1 - y * y) * g`` from the output."""
    y = outputs[0]
    if reduced_float(y.dtype):
        return [TanhBackward.forward(None, grads[0], y)]
    d = np.multiply(y, y, out=None if out is None else out(0, y.shape, y.dtype))
    if type(d) is not np.ndarray:  # a 0-d product is a NumPy scalar: no ``out=``
        d = np.array(d)
    np.subtract(1, d, out=d)
    d *= grads[0]
    return [d]


def _tanh_out(self, x, out):
    return np.tanh(x, out=out(0, x.shape, x.dtype))


tanh.primitive.vjp = _tanh_vjp
tanh.primitive.forward_out = _tanh_out  # ``forward`` into a buffer (a floating x)
tanh.primitive.fused_vjp = "(one - {y} * {y}) * {g}"  # one element, for fused loops
asinh = _unary("Asinh", np.arcsinh, lambda gy, x, y: gy * cj((x * x + 1).rsqrt()),
               onnx="Asinh", torchscript="asinh")


def _acosh_grad(gy, x, y):
    if x._data.dtype.kind == "c":
        # 1 / sqrt(z^2 - 1) would cut the plane on (-1, 1) and the imaginary axis, not on
        # acosh's own cut (-inf, 1): PyTorch's complex formula splits the root
        return gy * cj(_SubScalar.apply(x, 1).rsqrt() * _AddScalar.apply(x, 1).rsqrt())
    return gy * _SubScalar.apply(x * x, 1).rsqrt()


acosh = _unary("Acosh", np.arccosh, _acosh_grad,
               onnx="Acosh", torchscript="acosh")
atanh = _unary("Atanh", np.arctanh, lambda gy, x, y: gy / cj(1 - x * x),
               onnx="Atanh", torchscript="atanh")
# the gradients' factors in PyTorch's order (each product rounds: another order gives
# other last bits in float32 and float16)
erf = _unary("Erf", _erf_np,
             lambda gy, x, y: _MulScalar.apply((-x.pow(2)).exp(), 2 / _SQRT_PI) * gy,
             doc="The error function.", onnx="Erf", torchscript="erf", real="erf_vml_cpu")
erfc = _unary("Erfc", _erfc_np,
              lambda gy, x, y: _MulScalar.apply((-x.pow(2)).exp(), -2 / _SQRT_PI) * gy,
              torchscript="erfc", real="erfc_vml_cpu")
reciprocal = _unary("Reciprocal", lambda x: 1 / x, lambda gy, x, y: -gy * cj(y * y), save="y",
                    doc="``1 / input``.", onnx="Reciprocal", torchscript="reciprocal")
deg2rad = _unary("Deg2rad", np.deg2rad, lambda gy, x, y: _MulScalar.apply(gy, math.pi / 180),
                 save="",
                 torchscript="deg2rad", _node_name="Deg2RadBackward0")
rad2deg = _unary("Rad2deg", np.rad2deg, lambda gy, x, y: _MulScalar.apply(gy, 180 / math.pi),
                 save="",
                 torchscript="rad2deg", _node_name="Rad2DegBackward0")
floor = _unary("Floor", _no_bool("floor_vml_cpu", np.floor), _zero_grad, save="", floating=False,
               onnx="Floor", torchscript="floor",
               real_message="floor is not supported for complex inputs")
ceil = _unary("Ceil", _no_bool("ceil_vml_cpu", np.ceil), _zero_grad, save="", floating=False,
              onnx="Ceil", torchscript="ceil",
              real_message="ceil is not supported for complex inputs")
trunc = fix = _unary("Trunc", _no_bool("trunc_vml_cpu", np.trunc), _zero_grad, save="",
                     floating=False, torchscript="trunc",
                     real_message="trunc is not supported for complex inputs")
frac = _unary("Frac", _frac_np, lambda gy, x, y: gy, save="", floating=False, torchscript="frac")


def _sgn_grad(gy, x, y):
    if x._data.dtype.kind != "c":
        return _zero_grad(gy, x, y)
    # sgn(z) = z / |z| is not holomorphic: PyTorch's sgn_backward,
    # (g - sgn^2 conj(g)) / (2 |z|), 0 at z = 0
    a = x.abs()
    return ((gy - y * y * gy.conj()) / (a * 2)).masked_fill(a == 0, 0.0)


# ``sign``'s gradient is zero: it saves nothing (torch's SignBackward0 neither), so the
# input may be modified before the backward pass
_sign = _unary("Sign", _sign_np, _zero_grad, save="", floating=False,
               doc="Elementwise sign; of a complex number ``z / abs(z)`` (0 at 0).",
               onnx="Sign", torchscript="sgn", complex32_math=True)


class Sgn(_sign.primitive):
    """``sgn``: the same op as ``sign``, under PyTorch's own node for it; its gradient
    at a complex input reads the input and the output."""
    _node_name = "SgnBackward0"
    _op_name = "Sign"
    save_inputs = (0,)
    save_output = True

    def backward(self, gy):
        x, y = _read_saved(self)
        return _sgn_grad(gy, x, y)


sgn = Sgn.unary_function()
sgn.__name__, sgn.__doc__, sgn.primitive = "sgn", _sign.__doc__, Sgn


def sign(input):
    """Elementwise sign (-1, 0 or 1; 0 for NaN). Complex inputs raise, as in PyTorch:
    their sign is ``sgn``."""
    if isinstance(input, Tensor) and input._data.dtype.kind in "cV" and \
            (input._data.dtype.kind == "c" or input._data.dtype.names):
        raise NotImplementedError("Unlike NumPy, torch.sign is not intended to support complex "
                                  "numbers. Please use torch.sgn instead.")
    return _sign(input)


sign.primitive = _sign.primitive


def _sigmoid_np(x):
    if x.dtype.kind == "f":
        # exp(-|x|) never overflows: 1 / (1 + e) for x >= 0 and e / (1 + e) below, the
        # same roundings as splitting by sign; the numerator is max(e, x >= 0) (e <= 1),
        # since masked ufunc calls and np.where are slow on a random sign pattern
        e = np.abs(x, out=np.empty_like(x))
        np.negative(e, out=e)
        np.exp(e, out=e)
        d = np.add(e, 1, out=np.empty_like(e))
        np.maximum(e, x >= 0, out=e)
        return np.divide(e, d, out=d)
    # split by sign so exp never overflows
    if _backend.is_gpu_array(x):
        # a GPU array: CuPy's ufuncs take no ``where=``; the same split by selects
        xp = _backend.array_module(x)
        e = xp.exp(-xp.abs(x))
        return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)
    out = np.empty_like(x)
    pos = x >= 0
    np.divide(1, 1 + np.exp(-x, where=pos, out=np.zeros_like(x)), out=out, where=pos)
    ex = np.exp(x, where=~pos, out=np.zeros_like(x))
    np.divide(ex, 1 + ex, out=out, where=~pos)
    return out


sigmoid = _unary("Sigmoid", _sigmoid_np, lambda gy, x, y: _sigmoid_grad(gy, y), save="y",
                 doc="``1 / (1 + exp(-input))``.", onnx="Sigmoid", torchscript="sigmoid",
                 array_grad=lambda g, y: SigmoidBackward.forward(None, g, y))


def _sigmoid_vjp(self, grads, inputs, outputs, out=None):
    """sigmoid's array gradient (``Primitive.vjp``): ``(g * (1 - y)) * y``."""
    y = outputs[0]
    if reduced_float(y.dtype):
        return [SigmoidBackward.forward(None, grads[0], y)]
    d = np.subtract(1, y, out=None if out is None else out(0, y.shape, y.dtype))
    d *= grads[0]  # (gy * (1 - y)) * y, PyTorch's order
    d *= y
    return [d]


sigmoid.primitive.vjp = _sigmoid_vjp


def _silu_grad(gy, x, y):
    # s (1 + x (1 - s)) as torch factors it: at the most negative floats s = 0 and the
    # product keeps the sign of 1 + x, so the slope there is -0.0
    s = x.sigmoid()
    return gy * (s * (1 + x * (1 - s)))


silu = _unary("Silu", lambda x: x * _sigmoid_np(x), _silu_grad,
              doc="``input * sigmoid(input)``.", torchscript="silu")


def _sinc_np(x):
    with np.errstate(invalid="ignore"):
        return np.sinc(x)


def _sinc_grad(gy, x, y):
    # (pi x cos(pi x) - sin(pi x)) / (pi x^2), taken as 0 wherever the denominator
    # underflows to 0 (x = 0, subnormal and tiny x, where the true slope is ~0 too)
    px = x * math.pi
    den = x * x * math.pi
    g = ((px * px.cos() - px.sin()) / den).masked_fill(den == 0, 0.0)
    return gy * cj(g)


sinc = _unary("Sinc", _sinc_np, _sinc_grad, torchscript="sinc")


def _erfinv_np(x):
    # Giles' start and Halley steps on the fitted erf/erfc (``_erf_kernels``)
    return _erf_kernels.erfinv(x)


erfinv = _unary("Erfinv", _erfinv_np,
                lambda gy, x, y: _MulScalar.apply(y.pow(2).exp(), _SQRT_PI / 2) * gy,
                save="xy",
                torchscript="erfinv", real="erfinv_vml_cpu")


class PiecewiseGrad(Primitive):
    """``gy * slope(x)`` for a function that is piecewise linear in ``x``.

    ``slope`` maps the input array to the (piecewise constant) derivative. The op's own
    derivative with respect to ``x`` is zero but it is a tensor: second derivatives
    through clamps, abs and leaky ReLU reach earlier parameters as zeros, as PyTorch's
    do, instead of leaving them out of the graph.
    """
    # operands broadcast (a batched gradient against an unbatched output under vmap):
    # each operand's gradient is summed back to its shape
    broadcasts = True
    save_inputs = (1,)

    def forward(self, gy, x, slope):
        self.slope = slope
        return gy * slope(x)

    def backward(self, ggx):
        x, = self.saved_tensors
        # zeros still linked to x's graph; an infinite or NaN x would make 0 * x NaN
        # (the second derivative of logaddexp against -inf, of abs at inf)
        xa = x._data
        finite = xa.dtype.kind not in "fc" or bool(np.isfinite(xa).all())
        zero = x * 0 if finite else x.nan_to_num(0.0, 0.0, 0.0) * 0
        return _piecewise_grad(ggx, x, self.slope), zero, None

    jvp = _jvp.diagonal
    batch = _batch.elementwise


def _piecewise_grad(gy, x, slope):
    if not _grad_state.grad_enabled:
        # first order: one array product, no node
        return _make(np.multiply(gy._data, slope(x._data)))
    return PiecewiseGrad.apply(gy, x, slope)


def _abs_slope(x):
    # sgn as PyTorch's: 0 at NaN, so |x|'s gradient at a NaN input is 0
    s = np.sign(x)
    return np.where(np.isnan(s), 0, s).astype(s.dtype, copy=False) if s.dtype.kind == "f" \
        else s


class Abs(Primitive):
    save_inputs = (0,)

    def forward(self, x):
        if x.dtype == np.bool_:
            raise not_implemented_for("abs_cpu", x.dtype)
        return np.abs(x)

    def backward(self, gy):
        x, = self.saved_tensors
        if x._data.dtype.kind == "c":
            # gy * z / |z| (0 at 0): the direction of steepest ascent of |z|
            a = x.abs()
            return gy * (x / a).masked_fill(a == 0, 0)
        return _piecewise_grad(gy, x, _abs_slope)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    complex32_math = True
    onnx = "Abs"
    torchscript = "abs"


@with_out
def abs(input, *, out=None):
    """Elementwise absolute value (gradient 0 at 0)."""
    return Abs.apply(input)


absolute = abs


class Round(Primitive):
    def forward(self, x, decimals):
        low = reduced_float(x.dtype)
        if x.dtype == np.bool_ or x.dtype.kind == "c" or \
                (decimals and x.dtype.kind != "f" and not low):
            raise not_implemented_for("round_cpu" if decimals else "round_vml_cpu", x.dtype)
        if decimals and low:  # scaled, rounded and scaled back in float32, rounded once
            return np.round(x.astype(np.float32), decimals).astype(x.dtype)
        return np.round(x, decimals)

    def backward(self, gy):
        return zeros_like(gy), None

    jvp = _jvp.diagonal
    batch = _batch.elementwise


class RoundDecimals(Round):
    _node_name = "RoundBackward1"  # PyTorch's ``round.decimals`` overload
    _op_name = "Round"


_NO_DECIMALS = object()  # ``decimals`` not given: PyTorch's overload without it


@with_out
def round(input, *, decimals=_NO_DECIMALS, out=None):
    """Round half to even, as PyTorch (optionally to ``decimals`` places)."""
    # (``decimals=0`` given is PyTorch's ``round.decimals`` overload: its node name)
    if decimals is _NO_DECIMALS:
        return Round.apply(input, 0)
    return RoundDecimals.apply(input, decimals)


class Hardtanh(Clamp):
    """``clamp(x, min_val, max_val)`` as ``F.hardtanh``: its gradient, unlike clamp's,
    stays connected to ``x`` (PyTorch's hardtanh_backward), and is zero at the bounds."""
    _node_name = "HardtanhBackward0"

    def backward(self, gy):
        x, = self.saved_tensors
        lo, hi = self.lo, self.hi
        return _piecewise_grad(gy, x, lambda a: (a > lo) & (a < hi)), None, None


def hardtanh(input, min_val=-1.0, max_val=1.0):
    """``F.hardtanh``: ``min_val`` below it, ``max_val`` above, ``x`` between."""
    return Hardtanh.apply(input, min_val, max_val)


# PyTorch's hardsigmoid_backward multiplies by 1/6 rounded to float32 in every dtype
# (its forward divides by 6): float64 gradients carry that 3e-8 relative offset too
_ONE_SIXTH_F32 = float(np.float32(1.0) / np.float32(6.0))


def _hardsigmoid_slope(a):
    return np.where((a > -3) & (a < 3), a.dtype.type(_ONE_SIXTH_F32), a.dtype.type(0))


hardsigmoid = _unary(
    "Hardsigmoid", lambda x: np.clip(x + x.dtype.type(3), 0, 6) / x.dtype.type(6),
    lambda gy, x, y: _piecewise_grad(gy, x, _hardsigmoid_slope), torchscript="hardsigmoid",
    doc="``F.hardsigmoid``: ``clamp(x + 3, 0, 6) / 6``; its gradient is PyTorch's "
        "(``1/6`` as float32 strictly inside ``(-3, 3)``, 0 outside).")


class Logit(Primitive):
    save_inputs = (0,)

    @opmath  # float16/bfloat16 (and the clamp to eps) in float32, rounded once
    def forward(self, x, eps):
        x = to_float(x)
        self.eps = eps
        if eps is not None:
            x = np.clip(x, eps, 1 - eps)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(x / (1 - x))

    def backward(self, gy):
        x, = self.saved_tensors
        g = gy / (x * (1 - x))
        if self.eps is not None:
            # the clamp's flat parts: no gradient outside [eps, 1 - eps]
            g = g.masked_fill((x < self.eps) | (x > 1 - self.eps), 0.0)
        else:
            # logit is NaN outside [0, 1], and so is its derivative
            g = g.masked_fill((x < 0) | (x > 1), math.nan)
        return g, None

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "logit"


@with_out
def logit(input, eps=None):
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    return Logit.apply(input, eps)


class NanToNum(Primitive):
    save_inputs = (0,)

    def forward(self, x, nan, posinf, neginf):
        return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)

    def backward(self, gy):
        x, = self.saved_tensors
        return gy.masked_fill(~x.isfinite(), 0.0), None, None, None

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "nan_to_num"


@with_out
def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    """Replace NaN, +inf and -inf with finite numbers (default: 0 and the dtype's extremes)."""
    return NanToNum.apply(input, nan, posinf, neginf)


class _Predicate(Primitive):
    batch = _batch.elementwise
    complex_message = None  # PyTorch's error for a complex input, where it refuses one

    def forward(self, x):
        if self.complex_message is not None and x.dtype.kind == "c":
            raise NotImplementedError(self.complex_message)
        return self.fn(x)


def _predicate(name, fn, **rules):
    cls = type(name, (_Predicate,), {"fn": staticmethod(fn), "onnx": None,
                                     "torchscript": None, **rules})

    def op(input):
        return cls.apply(input)
    op.__name__ = name.lower()
    op.__doc__ = f"Elementwise ``{name.lower()}``; a bool tensor."
    op.primitive = cls
    return op


isnan = _predicate("Isnan", np.isnan, onnx="IsNaN", torchscript="isnan", complex32_math=True)
isinf = _predicate("Isinf", np.isinf, onnx="IsInf", torchscript="isinf")
isfinite = _predicate("Isfinite", np.isfinite, torchscript="isfinite", complex32_math=True)
isposinf = with_out(_predicate("Isposinf", np.isposinf, torchscript="isposinf"))
isneginf = with_out(_predicate("Isneginf", np.isneginf, torchscript="isneginf"))
signbit = with_out(_predicate("Signbit", np.signbit, torchscript="signbit",
                              complex_message="signbit is not implemented for complex tensors."))


def positive(input):
    """``input`` itself."""
    return input



# ----- the public ops, each named once: function, Tensor method, in-place method ------------
_VARIANTS = [
    # the in-place form keeps the old values when the op's primitive saves its input
    Variants("neg negative sign sgn exp exp2 log log2 log10 log1p expm1 sqrt rsqrt square "
             "sin cos tan asin acos atan arcsin arccos arctan sinh cosh tanh asinh acosh "
             "atanh sigmoid relu erf erfc floor ceil round trunc fix frac reciprocal "
             "deg2rad rad2deg sinc erfinv", inplace=True),
    Variants("abs absolute logit nan_to_num", inplace=True, copies=True),
    Variants("clamp clip clamp_min clamp_max", inplace=True, copies=True, promotes=True),
    Variants("isnan isinf isfinite isposinf isneginf signbit positive"),  # no in-place form
]


def _bind():
    T = Tensor
    T.__neg__ = neg
    T.__pos__ = positive
    T.__abs__ = abs
    return bind_variants(globals(), _VARIANTS)


__all__ = _bind()


def _takes_one(fn):
    """Whether ``fn`` is called with the input alone (the fast one-input functions)."""
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_argcount == 1 and not code.co_kwonlyargcount \
        and not code.co_flags & 0x0C  # no *args, no **kwargs


def _namespace_out():
    """``torch.exp(x, out=y)``: the namespace functions made by ``_unary`` take ``out=``;
    the Tensor methods bound above stay the one-call fast path."""
    g = globals()
    for name, fn in list(g.items()):
        if callable(fn) and getattr(fn, "primitive", None) is not None \
                and not name.startswith("_"):
            wrapped = with_out_unary(fn) if _takes_one(fn) else with_out(fn)
            wrapped.primitive = fn.primitive
            g[name] = wrapped


_namespace_out()
