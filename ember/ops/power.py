"""Powers: ``x ** y``, ``pow``, ``float_power``, rounded as PyTorch's CPU kernel rounds
them (the special-cased small exponents here, SLEEF's vector pow and libm's for the
rest in ``_pow_kernels``; docs/pow.md)."""
import numpy as np

from ember._factory import zeros_like
from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.ops import _batch, _jvp
from ember.ops._pow_kernels import _is_bf16, cpu_pow
from ember.ops._util import cj, promote_arrays, tensor_operands, with_out
from ember.ops._variants import Variants
from ember.ops._variants import bind as bind_variants
from ember.ops.elementwise import _kind, _operand


def _int_pow(a, b):
    """Integer powers with PyTorch's rule for negative exponents (1, +-1 or 0, no error);
    ``b`` is an array."""
    neg = b < 0
    if not neg.any():
        return np.power(a, b)
    out = np.power(a, np.where(neg, 0, b))
    special = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 != 0, -1, 1), 0))
    return np.where(neg, special, out).astype(out.dtype)

class Pow(Primitive):
    broadcasts = True
    save_inputs = (0, 1)
    _node_name = "PowBackward1"

    def forward(self, a, b):
        a, b = promote_arrays(a, b)
        if _kind(a) in "iub":
            return _int_pow(a, b)
        if _cpu_float(a) and _cpu_float(b):
            return cpu_pow(a, b)
        return np.power(a, b)

    def _hook_saves(self, args, out):
        """PyTorch's node also saves the result, for saved-tensor hooks
        (``Primitive._hook_saves``); ember's backward computes it again."""
        return [(out._data, out._vc, out._vc[0], out._requires_grad, 0)]

    def backward(self, gy):
        a, b = self.saved_tensors[:2]
        e = self._edges
        ga = gb = None
        if e[0] is not None:
            # d/da a**b = b * a**(b-1), and 0 where b == 0 (so 0**0 has gradient 0)
            ga = gy * cj(b * a.pow(b - 1))
            ga = ga.masked_fill(b == 0, 0.0)
        if e[1] is not None:
            out = a.pow(b)
            la = a.log() if a._data.dtype.kind == out._data.dtype.kind else \
                a.to(out.dtype).log()  # a real base of a complex power: log of a negative
            # d/db a**b = a**b log a, taken as 0 where a == 0 and b >= 0
            # (a complex exponent: its real part, as PyTorch's; complex numbers have no order)
            br = b.real if b._data.dtype.kind == "c" else b
            gb = (gy * cj(out * la)).masked_fill((a == 0) & (br >= 0), 0.0)
        return ga, gb

    jvp = _jvp.diagonal
    batch = _batch.elementwise


def _cpu_float(x):
    """A NumPy array of a dtype PyTorch's CPU pow kernel rounds its own way."""
    if type(x) is not np.ndarray:
        return False
    dt = x.dtype
    return (dt.kind == "f" and dt.itemsize <= 8) or _is_bf16(dt)


def _float_pow_scalar(x, c):
    """``x ** c`` rounded as PyTorch's CPU kernel rounds it, bit for bit: float32,
    float64 and bfloat16 special-case a few exponents (``x**3`` is ``x*x*x``, ``x**0.5``
    a square root, ``x**-1`` a division; bfloat16 rounds after each product), and
    every other power goes through SLEEF's vector ``pow`` or, for the elements left
    over after the last full vector block, the C library's (``_pow_kernels``)."""
    if not _cpu_float(x):  # CuPy arrays and complex: the array library's power
        return np.power(x, c)
    if c == 0:
        return np.ones_like(x)
    if c == 1:
        return x.copy()
    if x.dtype == np.float16:  # PyTorch's Half kernel has no special cases
        return cpu_pow(x, float(c))
    if _is_bf16(x.dtype):  # its special cases round per product: the kernels'
        return cpu_pow(x, c)
    one = x.dtype.type(1)
    if c == 2:
        return x * x
    if c == 3:
        return x * x * x
    if c == 0.5:  # PyTorch's vector square root gives +NaN below zero
        return np.where(x < 0, x.dtype.type(np.nan), np.sqrt(x))
    if c == -0.5:
        return one / np.sqrt(x)
    if c == -1:
        return one / x
    if c == -2:
        return one / (x * x)
    return cpu_pow(x, float(c))


class PowScalar(Primitive):
    """``x ** c`` for a Python number ``c`` (the common case, kept cheap)."""
    save_inputs = (0,)
    _node_name = "PowBackward0"

    def forward(self, x, c):
        negative = isinstance(c, int) and c < 0  # (before promotion: uint8 wraps it)
        x, c = promote_arrays(x, c)
        if x.dtype.kind in "iu" and negative:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        self.c = c
        if x.dtype.kind != "f" and not _cpu_float(x):
            return np.power(x, c)
        return _float_pow_scalar(x, c)

    def backward(self, gy):
        x, = self.saved_tensors
        c = self.c
        if c == 0:
            return zeros_like(gy), None
        if c == 1:
            return gy, None
        if c == 2:
            return gy * cj(x * 2), None
        return gy * cj(x.pow(c - 1) * c), None

    jvp = _jvp.diagonal
    batch = _batch.elementwise


class RPowScalar(Primitive):
    """``c ** x`` for a Python number ``c``."""
    save_output = True
    _node_name = "PowBackward2"
    _edge_inputs = (1,)  # the number is no edge in PyTorch's node

    def forward(self, c, x):
        c, x = promote_arrays(c, x)
        self.c = c
        if isinstance(c, (complex, np.complexfloating)):  # a complex base: its principal log
            self.logc = complex(np.log(c)) if c != 0 else float("-inf")
        else:
            self.logc = float(np.log(c)) if c > 0 else \
                (float("-inf") if c == 0 else float("nan"))
        if c == 0 and _kind(x) == "c":
            # where 0 ** x has gradient 0: a complex x that is real and >= 0, as PyTorch's
            # (elsewhere the formula's 0 * log(0) makes NaN)
            self.flat = (x.real >= 0) & (x.imag == 0)
            # PyTorch's complex pow is exp(x * log(base)): 0 ** 0j is NaN, 0 ** (-1+0j)
            # inf+nanj (NumPy's power gives 1 and nan+nanj)
            with np.errstate(all="ignore"):
                return np.exp(x * np.log(x.dtype.type(0)))
        if _kind(x) in "iub":
            return _int_pow(c, x)
        if _cpu_float(x) and not isinstance(c, complex):
            if c == 1:
                return np.ones_like(x)
            # PyTorch wraps the base in a tensor of the result dtype: a tensor power
            return cpu_pow(np.array(c).astype(x.dtype), x)
        return np.power(c, x)

    def backward(self, gy):
        y, = self.saved_tensors
        logc = self.logc
        if y._data.dtype.kind == "c" and logc != logc:
            logc = complex(np.log(complex(self.c)))  # a negative base: log|c| + i pi
        g = gy * cj(y * logc)  # torch's order
        if self.logc == float("-inf"):
            # 0 ** x: the gradient is 0 where x >= 0 (the output is then 0 or 1), as PyTorch
            flat = _make(self.flat) if y._data.dtype.kind == "c" else y <= 1
            g = g.masked_fill(flat, 0.0)
        return None, g

    jvp = _jvp.diagonal
    batch = _batch.elementwise



@with_out
def pow(input, exponent, *, out=None):
    """``input ** exponent``; either may be a Python number."""
    for x in (input, exponent):
        if not _operand(x):
            raise TypeError(f"unsupported operand type(s) for ** or pow(): "
                            f"'{type(input).__name__}' and '{type(exponent).__name__}'")
    if not (isinstance(input, Tensor) or isinstance(exponent, Tensor)):
        tensor_operands("pow", input, exponent, "either", ("input", "exponent"))
    if isinstance(exponent, np.ndarray) and isinstance(input, Tensor):
        exponent = _make(exponent)
    if not isinstance(exponent, Tensor):
        if isinstance(input, Tensor):
            return PowScalar.apply(input, exponent)
    elif not isinstance(input, Tensor):
        return RPowScalar.apply(input, exponent)
    return Pow.apply(input, exponent)


@with_out
def float_power(input, exponent, *, out=None):
    """``pow`` computed in float64 (complex128 when either operand is complex)."""
    if not (isinstance(input, Tensor) or isinstance(exponent, Tensor)):
        tensor_operands("float_power", input, exponent, "either", ("input", "exponent"))
    cplx = any(v.is_complex() if isinstance(v, Tensor) else isinstance(v, complex)
               for v in (input, exponent))
    from ember.backend import dtypes

    def conv(v):
        if isinstance(v, Tensor):
            return v.to(dtypes.complex128) if cplx else v.double()
        return complex(v) if cplx else float(v)
    return pow(conv(input), conv(exponent))


# the public ops, each named once: function, Tensor method, in-place method
_VARIANTS = [
    Variants("pow", inplace=True, copies=True, promotes=True),
    Variants("float_power"),  # its in-place form (a float64 check) is in _tensor_methods
]


def _bind():
    T = Tensor
    names = bind_variants(globals(), _VARIANTS)
    T.__pow__ = lambda self, other: pow(self, other)
    T.__rpow__ = lambda self, other: pow(other, self)
    T.__ipow__ = T.pow_
    return names


__all__ = _bind()
