"""Activation functions of ``ember.nn.functional`` (relu, gelu, softmax, glu ...) and the
in-place helpers they share with the rest of it.

Composites only: no derivative code lives here. The classes of the one-node activations
(``Gelu``, ``Glu`` ...) and their composites are :mod:`ember.ops.activation_nodes`'.
Re-exported by :mod:`ember.nn.functional`, where users find them.
"""
import functools
import warnings

from ember import _core as ember
from ember._tensor import Tensor, _mode_active
from ember.autograd.grad_mode import no_grad
from ember.ops import nn_fused as _fused
from ember.ops._inplace import check_inplace, commit, source_for
from ember.ops._util import scalar_type_name, traced_ints
from ember.ops.activation_nodes import (  # noqa: F401  (the helpers stay importable here)
    Gelu,
    Glu,
    Hardshrink,
    HardsigmoidHalf,
    Hardswish,
    LogSigmoid,
    Mish,
    PreluKernel,
    RreluWithNoise,
    RreluWithNoiseInplace,
    SiluHalf,
    Softshrink,
    _hardsigmoid,
    _hardswish,
    _hardtanh,
    _mish,
    _opmath,
    _softplus,
    _zero_like_scalar,
    gelu_fused,
)
from ember.ops.composite_node import call, records_graph

__all__ = [
    "relu", "relu_", "relu6", "elu", "elu_", "selu", "selu_", "celu", "celu_", "leaky_relu",
    "leaky_relu_", "prelu", "gelu", "silu", "mish", "softplus", "softsign", "hardtanh",
    "hardtanh_", "hardsigmoid", "hardswish", "sigmoid", "tanh", "tanhshrink", "softshrink",
    "hardshrink", "logsigmoid", "softmax", "log_softmax", "softmin", "threshold", "threshold_",
    "glu", "rrelu", "rrelu_", "gumbel_softmax",
]


# ----- helpers ---------------------------------------------------------------------------
def _inplace(input, fn):
    """Run ``fn`` out of place and write the result into ``input`` (autograd-correct)."""
    check_inplace(input)
    return commit(input, fn(source_for(input, True)))


def _maybe_inplace(input, inplace, fn):
    return _inplace(input, fn) if inplace else fn(input)


def _nonpositive(x):
    """``min(x, 0)`` with the gradient of ``x`` where ``x <= 0`` and 0 elsewhere.

    Used so that ``exp`` of a large positive input is never evaluated inside a
    masked-out branch (whose zero gradient times ``inf`` would give NaN).
    """
    return ember.where(x > 0, _zero_like_scalar(x), x)


def _takes_out(fn):
    """Give an ``F`` function torch's keyword-only ``out=`` (the builtin's): the result
    is written into ``out`` by ``write_out``, which casts and resizes as torch does."""
    @functools.wraps(fn)
    def with_out(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        if out is None:
            return result
        from ember.ops._util import APART_OUT, write_out
        inputs = (*args, *kwargs.values()) if fn.__name__ in APART_OUT else ()
        return write_out(result, out, fn.__name__, inputs)
    return with_out


# ----- activations -----------------------------------------------------------------------
def relu(input, inplace=False):
    """``max(0, x)`` elementwise."""
    return input.relu_() if inplace else _fused.fused_relu(input)


def relu_(input):
    """In-place :func:`relu`."""
    return input.relu_()


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """Clamp to ``[min_val, max_val]`` (gradient 1 strictly inside the interval)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input.dtype == ember.bool:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if input.dtype.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    if input.dtype == ember.uint8 and (min_val < 0 or max_val < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    return _maybe_inplace(input, inplace, lambda x: _hardtanh(x, min_val, max_val))


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """``min(max(0, x), 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


@_opmath
def _elu(x, alpha, scale=1.0, input_scale=1.0):
    neg = (_nonpositive(x) * input_scale).expm1() * alpha
    out = ember.where(x > 0, x, neg)
    return out * scale if scale != 1.0 else out


def elu(input, alpha=1.0, inplace=False):
    """``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``."""
    from ember.ops.activations import Elu, EluInplace
    op = EluInplace if inplace else Elu
    return _maybe_inplace(input, inplace, lambda x: op.apply(x, alpha))


def elu_(input, alpha=1.0):
    """In-place :func:`elu`."""
    return elu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with the self-normalising constants (PyTorch's node is
    its elu's)."""
    from ember.ops.activations import Elu, EluInplace
    op = EluInplace if inplace else Elu
    return _maybe_inplace(input, inplace, lambda x: op.apply(x, _SELU_ALPHA, _SELU_SCALE))


def selu_(input):
    """In-place :func:`selu`."""
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    from ember.ops.activations import Celu, CeluInplace
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    op = CeluInplace if inplace else Celu
    return _maybe_inplace(input, inplace, lambda x: op.apply(x, alpha))


def celu_(input, alpha=1.0):
    """In-place :func:`celu`."""
    return celu(input, alpha, inplace=True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` if ``x > 0`` else ``negative_slope * x``."""
    from ember.ops.activations import LeakyRelu, LeakyReluInplace
    op = LeakyReluInplace if inplace else LeakyRelu
    return _maybe_inplace(input, inplace, lambda x: op.apply(x, negative_slope))


def leaky_relu_(input, negative_slope=0.01):
    """In-place :func:`leaky_relu`."""
    return leaky_relu(input, negative_slope, inplace=True)


def prelu(input, weight):
    """``x`` if ``x > 0`` else ``weight * x``, with one weight per channel (dim 1) or one
    shared weight."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"prelu(): argument 'weight' must be Tensor, not {type(weight).__name__}")
    if input.dtype != weight.dtype:  # (PyTorch's kernel takes one dtype: no promotion)
        raise RuntimeError(f"prelu: Type promoting not supported. Got "
                           f"{scalar_type_name(input.dtype)} and {scalar_type_name(weight.dtype)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"prelu_cpu\" not implemented for "
                                  f"'{scalar_type_name(input.dtype)}'")
    n = weight.numel()
    if input.ndim == 0:
        if n != 1:
            raise RuntimeError("Not allow zero-dim input tensor.")
    if n != 1:
        if weight.ndim != 1:
            raise RuntimeError("prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                               f"ndim = {weight.ndim}")
        channels = input.shape[1] if input.ndim >= 2 else 1
        if channels != n:
            raise RuntimeError("Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {n} and channel size = {channels}.")
        w = weight.reshape((1, n) + (1,) * (input.ndim - 2))
    else:
        w = weight.reshape(()) if weight.ndim else weight
    if weight.ndim == input.ndim:  # PyTorch reshapes the weight only to another rank
        w = weight
    return call(PreluKernel, input, w)


@_takes_out
def gelu(input, approximate="none"):
    """``x * Phi(x)`` (``approximate='tanh'``: PyTorch's tanh approximation)."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"GeluKernelImpl\" not implemented for "
                                  f"'{scalar_type_name(input.dtype)}'")
    if not records_graph(input):
        y = gelu_fused(input, approximate)
        if y is not None:
            return y
    return call(Gelu, input, approximate)


def silu(input, inplace=False):
    """``x * sigmoid(x)``."""
    if inplace or input.dtype is not ember.float16:
        from ember.ops.unary import silu as _silu
        return _maybe_inplace(input, inplace, _opmath(_silu))
    return call(SiluHalf, input)


def mish(input, inplace=False):
    """``x * tanh(softplus(x))``."""
    if inplace:
        return _inplace(input, _mish)
    return call(Mish, input)


@_takes_out
def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    from ember.ops.unary import softplus as _softplus_op
    return _softplus_op(input, beta, threshold)


def softsign(input):
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``."""
    if inplace or input.dtype is not ember.float16:
        return _maybe_inplace(input, inplace, _hardsigmoid)
    return call(HardsigmoidHalf, input)


def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6`` (gradient as PyTorch's at the kinks)."""
    if inplace:
        return _inplace(input, _hardswish)
    return call(Hardswish, input)


def sigmoid(input):
    """``1 / (1 + exp(-x))``."""
    return ember.sigmoid(input)


def tanh(input):
    """Hyperbolic tangent."""
    return ember.tanh(input)


def tanhshrink(input):
    """``x - tanh(x)``."""
    return input - ember.tanh(input)


@_takes_out
def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    if lambd < 0:
        raise RuntimeError("lambda must be greater or equal to 0, but found to be "
                           f"{lambd:.6f}.")
    return call(Softshrink, input, lambd)


@_takes_out
def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    return call(Hardshrink, input, lambd)


@_takes_out
def logsigmoid(input):
    """``log(sigmoid(x))``, computed without overflow."""
    return call(LogSigmoid, input)


def _softmax_dim(name, ndim, stacklevel):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``exp(x) / sum(exp(x))`` along ``dim``; ``dtype`` casts the input first."""
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return ember.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``log(softmax(x))`` along ``dim``, computed stably."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return ember.log_softmax(input, dim, dtype=dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x)`` along ``dim``. As PyTorch's, ``x`` is negated in its own dtype
    before the ``dtype`` cast: an unsigned or minimal integer wraps (``-uint8(1)`` is
    255), and a bool input is refused."""
    if dim is None:
        dim = _softmax_dim("softmin", input.ndim, _stacklevel)
    return ember.softmax(-input, dim, dtype=dtype)


def threshold(input, threshold, value, inplace=False):
    """``value`` where ``x <= threshold``, else ``x`` (so NaN stays NaN)."""
    from ember.ops.activations import Threshold, ThresholdInplace
    op = ThresholdInplace if inplace else Threshold
    return _maybe_inplace(input, inplace, lambda x: op.apply(x, threshold, value))


def threshold_(input, threshold, value):
    """In-place :func:`threshold`."""
    return globals()["threshold"](input, threshold, value, inplace=True)


def _rrelu_noise_for(x, lower, upper):
    # PyTorch draws one double from U(lower, upper) per non-positive element, in order,
    # with the bounds first rounded to the input's dtype; how many is read from the
    # values (a compile capture breaks there: its graph would keep the count)
    from ember._graph.capture import branch_on_values
    branch_on_values(x, "rrelu's input (the count of slopes drawn)")
    with no_grad():
        neg = x.detach().contiguous() <= 0
        k = int(neg.sum())
        noise = ember.ones_like(x)
        if k:
            lo, hi = (ember.tensor([lower, upper], dtype=x.dtype)).tolist()
            r = ember.empty(k, dtype=ember.float64, device=x.device).uniform_(lo, hi)
            noise[neg] = r.to(x.dtype)
    return noise


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: slope drawn from U(lower, upper) per negative element when
    ``training``, else the fixed slope ``(lower + upper) / 2``."""
    # the in-place kernel has a node of its own name
    cls = RreluWithNoiseInplace if inplace else RreluWithNoise

    def fn(x):
        noise = _rrelu_noise_for(x, lower, upper) if training else None
        return call(cls, x, noise, lower, upper, training)
    return _maybe_inplace(input, inplace, fn)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, inplace=True)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """Sample from the Gumbel-softmax distribution; ``hard=True`` returns one-hot samples
    whose gradient is the soft sample's (straight-through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -ember.empty_like(logits).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = ember.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def glu(input, dim=-1):
    """Gated linear unit: ``a * sigmoid(b)`` for the two halves ``a, b`` of ``dim``."""
    if _mode_active[0] and (r := traced_ints(dim)) is not None:
        # a traced dim: the halves are cut in Python, so the call is one node
        return r[0].composite("glu", glu, (input,) + r[1], {})
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = input._wrap_dim(dim)
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    return call(Glu, input, d)
