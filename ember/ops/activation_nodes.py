"""The one-node activations of ``ember.nn.functional``: PyTorch runs each as one kernel
with one backward node (``GeluBackward0``, ``GluBackward0`` ...), ember writes it as a
composite of primitives (see :mod:`ember.ops.composite_node`). Each class here is the op's
record; its composite, and the float16 / dtype helpers the composites share, sit beside it.

The public functions (``F.gelu``, ``F.glu`` ...) check their arguments and call these
nodes; they live in :mod:`ember.nn.functional_activations`.
"""
import math

import numpy as np

from ember import _core as ember
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.ops.composite_node import CompositeNode, transforming
from ember.ops.unary import zero_curvature as _zero_curvature

__all__ = []


# ----- helpers the composites share (also used by ember.nn.functional) ---------------------
def _zero_like_scalar(x):
    """0 in ``x``'s dtype, so ``where`` keeps the dtype."""
    return ember.zeros((), dtype=x.dtype, device=x.device)


def _opmath(fn):
    """Compute float16 and bfloat16 inputs in float32 and round the result back once, as
    PyTorch's CPU kernels do for reduced precision (a chain of float16 ops would round
    at every step)."""
    def wrapped(x, *args, **kwargs):
        if x.dtype is ember.float16 or x.dtype is ember.bfloat16:
            return fn(x.float(), *args, **kwargs).to(x.dtype)
        return fn(x, *args, **kwargs)
    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


# ----- the composites and their nodes ------------------------------------------------------
def _hardtanh(x, min_val, max_val):
    # gradient 1 strictly inside (min_val, max_val), as PyTorch's hardtanh_backward
    if x.is_floating_point():
        from ember.ops.unary import hardtanh as _hardtanh_op
        return _hardtanh_op(x, min_val, max_val)
    lo = ember.full((), min_val, dtype=x.dtype, device=x.device)
    hi = ember.full((), max_val, dtype=x.dtype, device=x.device)
    return ember.where(x <= min_val, lo, ember.where(x >= max_val, hi, x))


def _prelu_kernel(input, w):
    return _zero_curvature(ember.where(input > 0, input, w * input), input)


class PreluKernel(CompositeNode):
    """``_prelu_kernel(x, w)`` for a weight already shaped to broadcast over ``x``."""
    save_inputs = (0, 1)
    profiler_name = "aten::_prelu_kernel"
    composite = staticmethod(_prelu_kernel)


@_opmath
def _gelu(input, approximate="none"):
    if approximate == "none":
        return input * 0.5 * (1.0 + ember.erf(input * (1.0 / math.sqrt(2.0))))
    if approximate == "tanh":
        inner = (input + input * input * input * _GELU_KAPPA) * _GELU_BETA
        return input * 0.5 * (1.0 + ember.tanh(inner))
    raise RuntimeError("approximate argument must be either none or tanh.")


_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_KAPPA, _GELU_BETA = 0.044715, math.sqrt(2.0 / math.pi)  # the tanh form's constants
_TANH_CHUNK = 16384  # elements per piece of ``gelu_tanh_arrays``: its buffer stays in L2


def gelu_tanh_arrays(x, keep=False):
    """The tanh GELU of a float32 or float64 NumPy array: the composite's steps in its
    order (the same bits), on cache-sized pieces with one buffer instead of eight
    whole-array temporaries; with numba (``ember[fast]``) two compiled loops around
    NumPy's ``tanh`` (``_erf_numba.gelu_tanh``), the same bits again. With ``keep``,
    ``(y, tanh(inner))``, the second for :func:`gelu_tanh_grad_arrays`."""
    from ember.ops import _erf_kernels
    fused = _erf_kernels.numba_kernels(x)
    if fused is not None:
        return fused.gelu_tanh(x, keep)
    t = x.dtype.type
    kappa, beta, half, one = t(_GELU_KAPPA), t(_GELU_BETA), t(0.5), t(1)
    flat = x.reshape(-1)
    y = np.empty(flat.size, x.dtype)
    th = np.empty(flat.size, x.dtype) if keep else None
    buf = np.empty(max(min(flat.size, _TANH_CHUNK), 1), x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # as the composite's ops
        for i in range(0, flat.size, _TANH_CHUNK):
            xs = flat[i:i + _TANH_CHUNK]
            b = buf[:xs.size]
            ys = y[i:i + xs.size]
            np.multiply(xs, xs, out=b)
            b *= xs
            b *= kappa
            b += xs
            b *= beta
            np.tanh(b, out=b)
            if keep:
                th[i:i + xs.size] = b
            b += one
            np.multiply(xs, half, out=ys)
            ys *= b
    y = y.reshape(x.shape)
    return (y, th.reshape(x.shape)) if keep else y


def gelu_tanh_grad_arrays(g, x, th):
    """The tanh GELU's first-order gradient on arrays (``g``, ``x`` and the forward's
    ``th = tanh(inner)``, one shape and dtype): the composite's gradient, the ops its
    backward pass runs (each product's and tanh's rule) and the engine's sums into ``x``
    in its order, so the same bits, in one pass (numba) or a few over cache-sized pieces
    instead of some twenty over the whole array and the forward again."""
    from ember.ops import _erf_kernels
    fused = _erf_kernels.numba_kernels(x)
    if fused is not None:
        return fused.gelu_tanh_backward(g, x, th)
    t = x.dtype.type
    kappa, beta, half, one = t(_GELU_KAPPA), t(_GELU_BETA), t(0.5), t(1)
    fx, fg, ft = x.reshape(-1), g.reshape(-1), th.reshape(-1)
    out = np.empty(fx.size, x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(0, fx.size, _TANH_CHUNK):
            xs, gs, ts = fx[i:i + _TANH_CHUNK], fg[i:i + _TANH_CHUNK], ft[i:i + _TANH_CHUNK]
            # the graph: a1 = x*x, a2 = a1*x, a3 = a2*kappa, a4 = x + a3, a5 = a4*beta,
            # th = tanh(a5), a6 = x*0.5, a7 = th + 1, y = a6*a7
            g5 = gs * (xs * half)  # gradient of th (= of a7): gy * a6 ...
            g5 *= one - ts * ts  # ... through tanh
            g4 = g5 * beta  # of a4 (and x's first term)
            g2 = g4 * kappa  # of a2
            g1 = g2 * xs  # of a1
            s = g2 * (xs * xs)  # x's terms, in the engine's order: a4, a2, a1 twice, a6
            s += g4
            g1 *= xs
            s += g1
            s += g1
            a7 = ts + one
            a7 *= gs  # gradient of a6
            a7 *= half
            s += a7
            out[i:i + xs.size] = s
    return out.reshape(x.shape)


def gelu_fused(x, approximate="none"):
    """The GELU of the Tensor ``x`` where no graph is recorded, the composite's values in
    fewer passes: the exact form by the numba kernel (``ember[fast]``), the tanh form by
    ``gelu_tanh_arrays`` (with numba or without); None where it does not apply (not
    float32/float64 on NumPy, numba missing for the exact form, or a mode on the stack,
    which must see the composite's ops)."""
    from ember._tensor import Tensor, _make, _mode_active
    if _mode_active[0] or type(x) is not Tensor:
        return None
    a = x._data
    if type(a) is not np.ndarray or a.dtype not in (np.float32, np.float64):
        return None
    if approximate == "tanh":
        return _make(gelu_tanh_arrays(a))
    from ember.ops import _erf_kernels
    fused = _erf_kernels.numba_kernels(a)
    return None if fused is None else _make(fused.gelu(a, keep=False)[0])


class Gelu(CompositeNode):
    """``F.gelu``: one node over its input. The exact form of float32/64 runs on arrays,
    the composite's steps in its order (same values), and keeps ``1 + erf(x / sqrt 2)``
    for the first-order gradient ``Phi(x) + x phi(x)``."""
    save_inputs = (0,)
    composite = staticmethod(_gelu)

    def forward(self, x, approximate):
        if approximate not in ("none", "tanh") or type(x) is not np.ndarray or \
                x.dtype not in (np.float32, np.float64):
            self._one_plus_erf = None
            return CompositeNode.forward(self, x, approximate)
        from ember.ops import _erf_kernels
        self._plain = [None, approximate]
        self.params = {}
        if approximate == "tanh":
            from ember._tensor import _mode_active
            self._one_plus_erf = None
            if _mode_active[0]:  # a mode (the profiler too) sees the composite's ops
                self._tanh = None
                return CompositeNode.forward(self, x, approximate)
            # the composite's values, and its tanh for the first-order gradient
            y, self._tanh = gelu_tanh_arrays(x, keep=True)
            return y
        fused = _erf_kernels.numba_kernels(x)
        if fused is not None:  # ember[fast]: the steps below fused, the same values
            y, self._one_plus_erf = fused.gelu(x)
            return y
        t = x.dtype.type
        e = _erf_kernels.erf_erfc(x * t(_SQRT_HALF), want_erfc=False)[0]
        e += t(1)
        self._one_plus_erf = e
        return (x * t(0.5)) * e

    def backward(self, gy):
        e = self._one_plus_erf
        if e is None:
            th = getattr(self, "_tanh", None)
            if th is not None and not _grad_state.grad_enabled and type(gy._data) is \
                    np.ndarray and gy._data.dtype == th.dtype and gy._data.shape == th.shape:
                from ember._tensor import _make, _mode_active
                if not _mode_active[0]:  # (a mode sees the composite's gradient ops)
                    x = self.saved_tensors[0]
                    return _make(gelu_tanh_grad_arrays(gy._data, x._data, th)), None
            return self.recompute_grads(gy)
        x = self.saved_tensors[0]
        if _grad_state.grad_enabled:
            if transforming():  # a transform sees the composite's ops (their rules)
                return self.recompute_grads(gy)
            # recorded: the same arrays as below, as one differentiable op
            return GeluGrad.apply(gy, x, one_plus_erf=e), None
        from ember._tensor import _make
        return _make(_gelu_grad_arrays(gy._data, x._data, e)), None


def _gelu_grad_arrays(g, x, e):
    """The exact GELU's gradient ``g * (Phi(x) + x phi(x))`` on arrays (float32/64), with
    ``e = 1 + erf(x / sqrt 2)`` from the forward."""
    if type(g) is np.ndarray and g.dtype == x.dtype and g.shape == x.shape:
        from ember.ops import _erf_kernels
        fused = _erf_kernels.numba_kernels(x)
        if fused is not None:  # ember[fast]: the steps below fused, the same values
            return fused.gelu_backward(x, e, g)
    t = x.dtype.type
    with np.errstate(over="ignore", invalid="ignore"):  # x * x overflows to a 0 pdf
        d = e * t(0.5)
        z = x * x * t(-0.5)
        if type(x) is np.ndarray and x.dtype == np.float32:
            from ember.ops import _erf_kernels  # float32: the kernel's own exponential
            ex = _erf_kernels.exp32_neg(z)
        else:
            ex = np.exp(z)
        d += x * ex * t(_INV_SQRT_2PI)
        d *= g
    return d


class GeluGrad(Primitive):
    """The exact GELU's first-order gradient over ``(grad_output, self)``, as PyTorch's
    ``gelu_backward``: the array kernel of the pass without a graph (so a gradient has
    the same bits with ``create_graph`` or without), recorded as PyTorch's
    ``GeluBackwardBackward0``. Its own gradient is ``gelu_backward(ggx, x)`` for the
    output gradient and ``ggx * gy * phi(x) * (2 - x**2)`` for the input."""
    _node_name = "GeluBackwardBackward0"
    save_inputs = (0, 1)

    def forward(self, g, x, one_plus_erf=None):
        e = one_plus_erf
        if e is None:  # a gradient of a gradient: 1 + erf as the forward computes it
            from ember.ops import _erf_kernels
            fused = _erf_kernels.numba_kernels(x)
            if fused is not None:
                e = fused.gelu(x)[1]
            else:
                t = x.dtype.type
                e = _erf_kernels.erf_erfc(x * t(_SQRT_HALF), want_erfc=False)[0]
                e += t(1)
        return _gelu_grad_arrays(g, x, e)

    def backward(self, ggx):
        gy, x = self.saved_tensors
        e = self._edges
        d_gy = GeluGrad.apply(ggx, x) if e[0] is not None else None
        d_x = None
        if e[1] is not None:
            x2 = x * x
            pdf = (x2 * -0.5).exp() * _INV_SQRT_2PI
            d_x = ggx * gy * (pdf * 2 - x2 * pdf)
        return d_gy, d_x


def _silu_half(x):
    from ember.ops.unary import silu as _silu
    return _opmath(_silu)(x)


class SiluHalf(CompositeNode):
    """``F.silu`` of half precision (computed in float32, rounded once): PyTorch's one
    ``SiluBackward0``; other dtypes run the ``silu`` primitive itself."""
    _node_name = "SiluBackward0"
    save_inputs = (0,)
    composite = staticmethod(_silu_half)


@_opmath
def _softplus(x, beta=1.0, threshold=20.0):
    big = x * beta > threshold
    safe = ember.where(big, _zero_like_scalar(x), x)
    soft = (safe * beta).exp().log1p()
    if beta != 1.0:
        soft = soft / beta
    return ember.where(big, x, soft)


@_opmath
def _mish(x):
    return x * ember.tanh(_softplus(x))


class Mish(CompositeNode):
    """``F.mish``: one node over its input."""
    save_inputs = (0,)
    composite = staticmethod(_mish)


@_opmath
def _hardsigmoid(x):
    if x.is_floating_point():
        from ember.ops.unary import hardsigmoid as _hardsigmoid_op
        return _hardsigmoid_op(x)
    return _hardtanh(x + 3.0, 0.0, 6.0) / 6.0


class HardsigmoidHalf(CompositeNode):
    """``F.hardsigmoid`` of half precision (computed in float32, rounded once): PyTorch's
    one ``HardsigmoidBackward0``; other dtypes run the ``hardsigmoid`` primitive itself."""
    _node_name = "HardsigmoidBackward0"
    save_inputs = (0,)
    composite = staticmethod(_hardsigmoid)


@_opmath
def _hardswish(x):
    # below -3, x * 0 as PyTorch's x * clamp(x + 3, 0, 6) / 6 gives: -0.0, NaN at -inf;
    # the middle piece sees only (-3, 3), so no inf * 0 reaches its gradient; at the
    # kinks the gradient is the outer pieces' (0 at -3, 1 at 3), as PyTorch's
    mid = (x > -3.0) & (x < 3.0)
    xs = ember.where(mid, x, _zero_like_scalar(x))
    return ember.where(x <= -3.0, x * 0.0, ember.where(mid, xs * (xs + 3.0) / 6.0, x))


class Hardswish(CompositeNode):
    """``F.hardswish``: one node over its input."""
    save_inputs = (0,)
    composite = staticmethod(_hardswish)

    def backward(self, gy):
        # PyTorch's kernel: 0 up to -3, grad from 3 on, grad * (x / 3 + 0.5) between (and
        # at NaN); half precision in float32, rounded once. (The composite's own derivative,
        # grad * ((x + 3) + x) / 6, rounds differently in 40 % of float32 elements.)
        x = self.saved_tensors[0]
        low = x.dtype is ember.float16 or x.dtype is ember.bfloat16
        w, g = (x.float(), gy.float()) if low else (x, gy)
        zero = _zero_like_scalar(g)
        gx = ember.where(w <= -3.0, zero, ember.where(w >= 3.0, g, g * (w / 3.0 + 0.5)))
        return (gx.to(gy.dtype) if low else gx,)


@_opmath
def _softshrink(input, lambd):
    # x - x: +0.0 for every finite x and NaN for NaN, with gradient 0 (PyTorch's values)
    return _zero_curvature(ember.where(input > lambd, input - lambd,
                                       ember.where(input < -lambd, input + lambd,
                                                   input - input)), input)


class Softshrink(CompositeNode):
    """``F.softshrink``: one node over its input."""
    save_inputs = (0,)
    composite = staticmethod(_softshrink)


def _hardshrink(input, lambd):
    # NaN stays NaN with gradient 0, as PyTorch's kernel tests |x| > lambd
    return _zero_curvature(ember.where((input > lambd) | (input < -lambd), input,
                                       input - input), input)


class Hardshrink(CompositeNode):
    """``F.hardshrink``: one node over its input."""
    save_inputs = (0,)
    composite = staticmethod(_hardshrink)


@_opmath
def _logsigmoid(input):
    zero = _zero_like_scalar(input)
    neg = input < 0
    xn = ember.where(neg, input, zero)
    xp = ember.where(neg, zero, input)
    # 0 - log1p(...), not -log1p(...): logsigmoid(+inf) is +0.0, as min(x, 0) - ... gives
    return ember.where(neg, xn - xn.exp().log1p(), zero - (-xp).exp().log1p())


class LogSigmoid(CompositeNode):
    """``F.logsigmoid``: one node over its input."""
    save_inputs = (0,)
    composite = staticmethod(_logsigmoid)

    def backward(self, gy):
        x = self.saved_tensors[0]
        if x.dtype is not ember.float16 and x.dtype is not ember.bfloat16:
            return self.recompute_grads(gy)
        # PyTorch's half-precision kernel keeps exp(-|x|) from the forward as a buffer in
        # the input's dtype and computes the slope from it in float32, rounded once:
        # (x < 0) - sign * z / (1 + z), sign +1 below 0 and -1 above
        w = x.float()
        z = (-w.abs()).exp().to(x.dtype).float()
        neg = w < 0
        one = ember.ones((), dtype=w.dtype)
        slope = ember.where(neg, one, one * 0) - ember.where(neg, one, -one) * (z / (z + 1))
        return ((slope * gy.float()).to(gy.dtype),)


def _rrelu_eval(x, lower, upper):
    return _zero_curvature(ember.where(x >= 0, x, x * ((lower + upper) / 2)), x)


def _rrelu_noise(x, noise):
    return _zero_curvature(x * noise, x)


class RreluWithNoise(CompositeNode):
    """``F.rrelu``: one node over its input (the training noise is drawn before, a plain
    argument as in PyTorch)."""
    save_inputs = (0, 1)
    n_inputs = 1

    @staticmethod
    def composite(x, noise, lower, upper, training):
        return _rrelu_noise(x, noise) if training else _rrelu_eval(x, lower, upper)


class RreluWithNoiseInplace(RreluWithNoise):
    """``rrelu_``: the same op, PyTorch's in-place node."""
    _node_name = "RreluWithNoiseBackward1"
    _op_name = "RreluWithNoise"


@_opmath
def _glu(input, d):
    # one split, so the gradient is one concatenation (a sum of two zero-padded slices
    # would turn the gate half's -0.0 into +0.0)
    a, b = input.chunk(2, d)
    return a * ember.sigmoid(b)


class Glu(CompositeNode):
    """``F.glu``: one node over its input."""
    save_inputs = (0,)
    composite = staticmethod(_glu)

    def backward(self, gy):
        x = self.saved_tensors[0]
        if x.dtype is not ember.float16 and x.dtype is not ember.bfloat16:
            return self.recompute_grads(gy)
        # PyTorch's half-precision kernel: the gate's sigmoid rounded to the input's
        # dtype, then both halves' gradients in float32, each rounded once
        d = self._plain[1]
        a, b = x.float().chunk(2, d)
        s = ember.sigmoid(b).to(x.dtype).float()
        g = gy.float()
        return (ember.cat([s * g, (1 - s) * s * a * g], d).to(gy.dtype), None)

