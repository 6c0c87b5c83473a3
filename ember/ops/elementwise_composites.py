"""Elementwise functions built from ember ops (no derivative code of their own):
``heaviside``, ``gcd``, ``lcm``, ``ldexp``, ``frexp``, ``nextafter``."""
import numpy as np

from ember._factory import ones, zeros
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.backend.dtypes import bool as ember_bool
from ember.backend.dtypes import complex128, float32, float64, get_default_dtype, result_type
from ember.ops._util import scalar_type_name, tensor_operands, with_out
from ember.ops.composite_node import CompositeNode, call
from ember.ops.elementwise import where
from ember.ops.power import pow as _pow

__all__ = ["heaviside", "gcd", "lcm", "ldexp", "frexp", "nextafter"]


def _arr(t):
    if isinstance(t, Tensor):
        if _mode_active[0]:  # what is computed from the array is no node of a trace
            from ember._graph.capture import values_read
            values_read(t)
        return t._data
    return np.asarray(t)


@with_out
def heaviside(input, values):
    """0 where ``input < 0``, 1 where ``input > 0``, ``values`` where it is 0."""
    if not (isinstance(input, Tensor) and isinstance(values, Tensor)):
        tensor_operands("heaviside", input, values, names=("input", "values"))
    if input.is_complex():
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if input.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different "
                           "dtypes")
    zero = zeros((), dtype=input.dtype)
    one = ones((), dtype=input.dtype)
    return where(input == 0, values, where(input > 0, one, zero))


def _integers_only(kernel, input, other):
    # PyTorch's kernel has loops for the integer types only (NumPy's would take bool)
    dt = result_type(input, other)
    if dt.is_floating_point or dt.is_complex or dt == ember_bool:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{scalar_type_name(dt)}'")


@with_out
def gcd(input, other):
    """Greatest common divisor, elementwise (integers)."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("gcd", input, other)
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        # a whole call in a capture: NumPy computes it on the arrays, not through ops
        return m.composite("gcd", gcd, (input, other), {})
    _integers_only("gcd_cpu", input, other)
    return _make(np.gcd(_arr(input), _arr(other)))


@with_out
def lcm(input, other):
    """Least common multiple, elementwise (integers)."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("lcm", input, other)
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        return m.composite("lcm", lcm, (input, other), {})
    _integers_only("lcm_cpu", input, other)
    return _make(np.lcm(_arr(input), _arr(other)))


@with_out
def ldexp(input, other):
    """``input * 2 ** other`` (one ``LdexpBackward0`` node in a recorded graph, as
    PyTorch's, over ``input`` and ``other``)."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("ldexp", input, other)
    return call(Ldexp, input, other)


def _ldexp(input, other):
    # PyTorch's dtype: the promotion of both operands (float32 with float64 gives float64),
    # the default dtype where that is an integer type
    dt = result_type(input, other)
    if not (dt.is_floating_point or dt.is_complex):
        dt = get_default_dtype()
    elif other.dtype == ember_bool and dt.is_floating_point:
        raise NotImplementedError("\"ldexp_cpu_exp\" not implemented for 'Bool'")
    # 2 ** other in a type that holds it where the result does (a float16 result of
    # 2**-20 * 2**30, a float64 one of 2**200)
    real = float64 if dt in (float64, complex128) else float32
    wide = dt if dt.is_complex else real
    x = input if input.dtype == wide else input.to(wide)
    # a complex exponent keeps its imaginary part: 2 ** other is complex then
    out = x * _pow(2.0, other.to(dt if other.is_complex() else real))
    return out if out.dtype == dt else out.to(dt)


class Ldexp(CompositeNode):
    """``ldexp``'s node: the composite's derivative, PyTorch's name and edges."""
    _node_name = "LdexpBackward0"
    save_inputs = (0, 1)
    composite = staticmethod(_ldexp)


@with_out
def frexp(input):
    """Mantissa in [0.5, 1) and integer exponent with ``input = m * 2 ** e``."""
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node: the exponent is read off the input's values (a capture would keep the
        # example's)
        return m.composite("frexp", frexp, (input,), {})
    _, e = np.frexp(_arr(input))
    from collections import namedtuple
    Frexp = namedtuple("frexp", ["mantissa", "exponent"])
    # the mantissa as input * 2**-e, exact and differentiable (gradient 2**-e); 2**-e is
    # applied in two halves, since for the largest floats and the subnormals it is itself
    # out of range (2**-1024, 2**1074)
    half = -e // 2
    one = np.ones_like(_arr(input))
    mantissa = input * _make(np.ldexp(one, half)) * _make(np.ldexp(one, -e - half))
    return Frexp(mantissa, _make(e.astype(np.int32)))


@with_out
def nextafter(input, other):
    """The next representable value after ``input`` towards ``other``."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        tensor_operands("nextafter", input, other)
    from ember.ops.elementwise import Nextafter
    return Nextafter.apply(input, other)
