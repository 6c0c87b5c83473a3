"""Special functions: the gamma family, Bessel functions, the normal distribution's
functions and the orthogonal polynomials (``torch.special`` and the top-level
``lgamma``, ``digamma``, ``polygamma``, ``mvlgamma``, ``igamma``, ``igammac``, ``i0``).

Each primitive's forward runs a NumPy kernel from ``_gamma_kernels`` or
``_bessel_kernels`` (computed in float64, cast back to the input's dtype) and its
derivative is written in ember Tensor ops, so second derivatives work. Functions that
PyTorch does not differentiate (Bessel J/Y/K, Airy, the polynomials) return tensors
that do not require grad, as PyTorch's do.
"""
import math

import numpy as np

from ember._tensor import Tensor, _make, _mode_active
from ember.autograd.node import Primitive
from ember.backend import CPU, array_module, device_of, to_device
from ember.ops import _batch, _jvp
from ember.ops import _bessel_kernels as _bk
from ember.ops import _gamma_kernels as _gk
from ember.ops._inplace import inplace_method
from ember.ops._util import (
    follows_int_reads,
    int_arg,
    not_implemented_for,
    promote_arrays,
    reduced_float,
    refuse_dtype,
    to_float,
    traced_ints,
    with_out,
    with_out_unary,
    write_out,
)
from ember.ops._variants import Variants
from ember.ops._variants import bind as bind_variants
from ember.ops.composite_node import one_node
from ember.ops.unary import _unary

_SQRT_2PI = math.sqrt(2 * math.pi)


def _on_host(kernel, *arrays, **kw):
    """Run a NumPy kernel; arrays on a GPU make a round trip through the host."""
    dev = next((d for d in map(device_of, arrays) if d.type != "cpu"), CPU)
    if dev.type == "cpu":
        return kernel(*arrays, **kw)
    return to_device(kernel(*[to_device(a, CPU) for a in arrays], **kw), dev)


def _cast(kernel):
    """A kernel computing in float64 (on a flat copy), returning the input's dtype."""
    def flat(x):
        return kernel(x.reshape(-1)).reshape(x.shape).astype(x.dtype, copy=False)

    def fn(x):
        return _on_host(flat, x)
    return fn


def _exp_overflow_f32(kernel):
    """I0 and I1 as PyTorch computes them in float32: ``exp(|x|)`` is a factor, so the
    result is +-inf once |x| passes float32's exp overflow (88.72), a little before the
    true value overflows."""
    def fn(x):
        out = kernel(x)
        if x.dtype == np.float32:
            big = (np.abs(x) > np.float32(88.72283)) & ~np.isnan(out)
            out = np.where(big, np.copysign(np.float32(np.inf), out), out).astype(x.dtype)
        return out
    return fn


def _binary(kernel, a, b, **kw):
    def flat(a, b):
        a, b = np.broadcast_arrays(a, b)
        return kernel(a.reshape(-1), b.reshape(-1), **kw).reshape(a.shape).astype(
            a.dtype, copy=False)
    return _on_host(flat, a, b)


def _float_pair(a, b):
    """Two operands (arrays or Python numbers) as arrays of PyTorch's result dtype,
    integer results lifted to the default float dtype."""
    a, b = promote_arrays(a, b)
    arrays = [v for v in (a, b) if hasattr(v, "dtype") and not isinstance(v, np.generic)]
    ref = arrays[0] if arrays else np.asarray(a)
    xp = array_module(ref)
    a, b = xp.asarray(a, dtype=ref.dtype), xp.asarray(b, dtype=ref.dtype)
    if a.dtype.kind != "f":
        a, b = to_float(a), to_float(b)
    return a, b


def _digamma_grad(gy, x, y):
    return gy * polygamma(1, x)


lgamma = _unary("Lgamma", _cast(_gk.lgamma), lambda gy, x, y: gy * digamma(x),
                doc="``log |Gamma(input)|``.", torchscript="lgamma", real="lgamma_vml_cpu")
digamma = _unary("Digamma", _cast(_gk.digamma), _digamma_grad,
                 doc="The logarithmic derivative of the gamma function, ``psi``.",
                 torchscript="digamma", real="digamma")
lgamma, digamma = with_out_unary(lgamma), with_out_unary(digamma)  # torch's out=


class Polygamma(Primitive):
    save_inputs = (0,)

    def forward(self, x, n):
        if n < 0:  # (here too: a trace's replay takes ``n`` read from a tensor)
            raise RuntimeError("polygamma(n, x) does not support negative n.")
        x = to_float(x)
        self.n = n
        return _cast(lambda v: _gk.polygamma(n, v))(x)

    def backward(self, gy):
        x, = self.saved_tensors
        return gy * polygamma(self.n + 1, x), None

    jvp = _jvp.diagonal
    batch = _batch.elementwise


class PolygammaInplace(Polygamma):
    """``polygamma_``: the same op, PyTorch's in-place node."""
    _node_name = "PolygammaBackward1"
    _op_name = "Polygamma"


@follows_int_reads
def polygamma(n, input, *, out=None, _op=Polygamma):
    """The ``n``-th derivative of ``digamma`` (``n = 0`` is ``digamma`` itself)."""
    n = int_arg(n)
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return write_out(_op.apply(input, n if isinstance(n, int) else int(n)), out, "polygamma",
                     (input,))


@with_out
def mvlgamma(input, p):
    """The multivariate log-gamma of dimension ``p``:
    ``sum_i lgamma(input - i/2) + p (p - 1)/4 log(pi)`` (a composite: its derivative comes
    from ``lgamma``'s). As in torch, inputs at or below ``(p - 1)/2`` are not refused:
    they give the sum's value there (``inf`` at the poles, NaN at NaN)."""
    if _mode_active[0] and (r := traced_ints(p)) is not None:
        # a traced dimension: the sum's length, a loop in Python, so the call is one node
        return r[0].composite("mvlgamma", mvlgamma, (input,) + r[1], {})
    p = int_arg(p)
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not isinstance(input, Tensor):
        raise TypeError(f"mvlgamma(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input._data.dtype.kind == "b":
        raise RuntimeError("The input tensor may not be a boolean tensor.")
    if input._data.dtype.kind in "iu":  # integers promote to the default float, as in PyTorch
        from ember.backend.dtypes import get_default_dtype
        input = input.to(get_default_dtype())
    if input._data.dtype.kind != "f" and not reduced_float(input._data.dtype):
        # (PyTorch builds its shifts with arange in the input's dtype, which has no complex loop)
        raise not_implemented_for("arange_cpu", input._data.dtype)
    return _mvlgamma_sum(input, p)


@one_node("MvlgammaBackward0", 1)  # one node where a graph is recorded, as PyTorch's
def _mvlgamma_sum(input, p):
    """``mvlgamma``'s sum on a checked floating ``input``."""
    # shifts -(p-1)/2, ..., -1/2, 0, in PyTorch's order (the sum rounds in that order),
    # exact in every floating dtype; the last a +0.0, so that x = -0.0 shifts to +0.0
    shifts = _make((np.arange(p, dtype=np.float64) / 2 - (p - 1) / 2 + 0.0)
                   .astype(input._data.dtype))
    return lgamma(input.unsqueeze(-1) + shifts).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


class _IgammaBase(Primitive):
    broadcasts = True
    save_inputs = (0, 1)
    upper = False
    refuses = "biuc"  # floating types only: no promotion of integers

    def forward(self, a, x):
        refuse_dtype(self, *promote_arrays(a, x))
        a, x = _float_pair(a, x)
        return _binary(_gk.igamma, a, x, upper=self.upper)

    def backward(self, gy):
        a, x = self.saved_tensors
        if self.needs_input_grad[0]:
            raise NotImplementedError(f"the derivative for '{type(self).__name__.lower()}: "
                                      "input' is not implemented.")
        g = gy * ((a - 1) * x.log() - x - lgamma(a)).exp()
        return None, (-g if self.upper else g)

    jvp = _jvp.diagonal
    batch = _batch.elementwise


class Igamma(_IgammaBase):
    kernel = "igamma_cpu"
    torchscript = "igamma"


class Igammac(_IgammaBase):
    upper = True
    kernel = "igammac_cpu"
    torchscript = "igammac"


def _tensor_pair(name, a, b):
    for arg, v in (("input", a), ("other", b)):
        if not isinstance(v, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(v).__name__}")


@with_out
def igamma(input, other):
    """The regularised lower incomplete gamma function ``P(input, other)``."""
    _tensor_pair("igamma", input, other)
    return Igamma.apply(input, other)


@with_out
def igammac(input, other):
    """The regularised upper incomplete gamma function ``Q(input, other) = 1 - P``."""
    _tensor_pair("igammac", input, other)
    return Igammac.apply(input, other)


def _i1_grad(gy, x, y):
    # I1'(x) = I0(x) - I1(x)/x, which is 1/2 at 0 (x is replaced there so that no 0/0
    # reaches the second derivative)
    zero = x == 0
    g = i0(x) - y / x.masked_fill(zero, 1.0)
    return gy * g.masked_fill(zero, 0.5)


def _i1e_grad(gy, x, y):
    zero = x == 0
    g = special_i0e(x) - y * (x.sign() + x.masked_fill(zero, 1.0).reciprocal())
    return gy * g.masked_fill(zero, 0.5)


i0 = _unary("I0", _exp_overflow_f32(_cast(lambda x: _bk.bessel_i(x, 0))),
            lambda gy, x, y: gy * special_i1(x),
            doc="The modified Bessel function of the first kind, order 0.", torchscript="i0")
i0 = with_out_unary(i0)
special_i0e = _unary("I0e", _cast(lambda x: _bk.bessel_i_scaled(x, 0)),
                     lambda gy, x, y: gy * (special_i1e(x) - x.sign() * y), save="xy",
                     doc="``i0(input) * exp(-|input|)``.", torchscript="special_i0e")
special_i1 = _unary("I1", _exp_overflow_f32(_cast(lambda x: _bk.bessel_i(x, 1))), _i1_grad,
                    save="xy",
                    doc="The modified Bessel function of the first kind, order 1.",
                    torchscript="special_i1")
special_i1e = _unary("I1e", _cast(lambda x: _bk.bessel_i_scaled(x, 1)), _i1e_grad, save="xy",
                     doc="``i1(input) * exp(-|input|)``.", torchscript="special_i1e")
special_erfcx = _unary("Erfcx", _cast(_gk.erfcx),
                       lambda gy, x, y: gy * (2 * x * y - 2 / math.sqrt(math.pi)), save="xy",
                       doc="The scaled complementary error function ``exp(x^2) erfc(x)``.",
                       torchscript="special_erfcx")
special_ndtr = _unary("Ndtr", _cast(_gk.ndtr),
                      lambda gy, x, y: gy * (x * x * -0.5).exp() / _SQRT_2PI,
                      doc="The standard normal CDF.", torchscript="special_ndtr")
special_ndtri = _unary("Ndtri", _cast(_gk.ndtri),
                       lambda gy, x, y: gy * (y * y * 0.5).exp() * _SQRT_2PI, save="y",
                       doc="The standard normal quantile (the inverse of ``ndtr``).",
                       torchscript="special_ndtri")
special_log_ndtr = _unary("LogNdtr", _cast(_gk.log_ndtr),
                          lambda gy, x, y: gy * (x * x * -0.5 - y).exp() / _SQRT_2PI, save="xy",
                          doc="``log(ndtr(input))``, accurate in the lower tail.",
                          torchscript="special_log_ndtr")


def _entr_np(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -x * np.log(x)
    out = np.where(x == 0, 0, out)
    return np.where(x < 0, -np.inf, out).astype(x.dtype, copy=False)


special_entr = _unary("Entr", _entr_np, lambda gy, x, y: gy * -(x.log() + 1),
                      doc="Elementwise entropy ``-x log x`` (0 at 0, -inf below).",
                      torchscript="special_entr")


class Xlog1py(Primitive):
    broadcasts = True
    save_inputs = (0, 1)
    kernel, refuses = "xlog1py_cpu", "c"

    def forward(self, a, b):
        a, b = _float_pair(a, b)
        refuse_dtype(self, a, b)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = a * np.log1p(b)
        return np.where((a == 0) & ~np.isnan(b), 0, out).astype(a.dtype, copy=False)

    def backward(self, gy):
        a, b = self.saved_tensors
        ga = (gy * b.log1p()).masked_fill((a == 0) & (b <= -1), 0.0)
        return ga, gy * a / (b + 1)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "special_xlog1py"


class Zeta(Primitive):
    broadcasts = True
    save_inputs = (0, 1)

    def forward(self, s, q):
        s, q = _float_pair(s, q)
        return _binary(_gk.hurwitz_zeta, s, q)

    def backward(self, gy):
        s, q = self.saved_tensors
        if self.needs_input_grad[0]:
            raise NotImplementedError("the derivative for 'zeta' is not implemented.")
        return None, gy * -s * zeta(s + 1, q)

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "special_zeta"


def _number_or_tensor(name, a, b):
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{name}(): at least one of 'input' and 'other' must be a Tensor")


@with_out
def xlog1py(input, other):
    """``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN)."""
    _number_or_tensor("special_xlog1py", input, other)
    return Xlog1py.apply(input, other)


@with_out
def zeta(input, other):
    """The Hurwitz zeta function ``sum_k (other + k)^-input`` (Riemann's when other = 1)."""
    _number_or_tensor("special_zeta", input, other)
    return Zeta.apply(input, other)


def _no_grad_op(name, kernel, doc):
    """An op PyTorch does not differentiate: its result never requires grad."""
    def op(input, *, out=None):
        if not isinstance(input, Tensor):
            raise TypeError(f"special_{name}(): argument 'input' must be Tensor, not "
                            f"{type(input).__name__}")
        x = to_float(input._data)
        return with_out(lambda: _make(_cast(kernel)(x), False))(out=out)
    op.__name__ = name
    op.__doc__ = doc
    return op


bessel_j0 = _no_grad_op("bessel_j0", _bk.bessel_j0, "Bessel function of the first kind, order 0.")
bessel_j1 = _no_grad_op("bessel_j1", _bk.bessel_j1, "Bessel function of the first kind, order 1.")
bessel_y0 = _no_grad_op("bessel_y0", _bk.bessel_y0,
                        "Bessel function of the second kind, order 0 (NaN below 0).")
bessel_y1 = _no_grad_op("bessel_y1", _bk.bessel_y1,
                        "Bessel function of the second kind, order 1 (NaN below 0).")
modified_bessel_i0 = _no_grad_op("modified_bessel_i0",
                                 _exp_overflow_f32(lambda x: _bk.bessel_i(x, 0)),
                                 "Modified Bessel function of the first kind, order 0.")
modified_bessel_i1 = _no_grad_op("modified_bessel_i1",
                                 _exp_overflow_f32(lambda x: _bk.bessel_i(x, 1)),
                                 "Modified Bessel function of the first kind, order 1.")
modified_bessel_k0 = _no_grad_op("modified_bessel_k0", lambda x: _bk.bessel_k(x, 0),
                                 "Modified Bessel function of the second kind, order 0.")
modified_bessel_k1 = _no_grad_op("modified_bessel_k1", lambda x: _bk.bessel_k(x, 1),
                                 "Modified Bessel function of the second kind, order 1.")
scaled_modified_bessel_k0 = _no_grad_op("scaled_modified_bessel_k0",
                                        lambda x: _bk.bessel_k(x, 0, scaled=True),
                                        "``modified_bessel_k0(x) * exp(x)``.")
scaled_modified_bessel_k1 = _no_grad_op("scaled_modified_bessel_k1",
                                        lambda x: _bk.bessel_k(x, 1, scaled=True),
                                        "``modified_bessel_k1(x) * exp(x)``.")
airy_ai = _no_grad_op("airy_ai", _bk.airy_ai, "The Airy function Ai.")
spherical_bessel_j0 = _no_grad_op("spherical_bessel_j0", _bk.spherical_bessel_j0,
                                  "The spherical Bessel function of the first kind, order 0.")


def _polynomial(name, kind, shifted=False):
    def op(input, n, *, out=None):
        if not isinstance(input, Tensor) and not isinstance(n, Tensor):
            raise TypeError(f"special_{name}(): at least one of 'input' and 'n' must be a "
                            "Tensor")
        x = input._data if isinstance(input, Tensor) else input
        nn = n._data if isinstance(n, Tensor) else n
        x, nn = _float_pair(x, nn)

        def flat(x, nn):
            xb, nb = np.broadcast_arrays(x, nn)
            # float32 is evaluated in float64 and rounded: fewer cancellations than PyTorch's
            res = _bk.orthogonal_polynomial(kind, xb.reshape(-1).astype(np.float64),
                                            nb.reshape(-1), shifted).reshape(xb.shape)
            if x.dtype != np.float64 and kind in "he":
                res = np.where(_bk._degree(nb) > 128, np.nan, res)  # float32's limit
            return res
        res = _on_host(flat, x, nn)
        return with_out(lambda: _make(res.astype(x.dtype, copy=False), False))(out=out)
    op.__name__ = name
    op.__doc__ = (f"The {name.replace('_', ' ')} of degree ``n`` at ``input`` (``n`` is "
                  "truncated to an integer; 0 for negative ``n``).")
    return op


chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t", "t")
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u", "u")
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v", "v")
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w", "w")
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t", "t", True)
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u", "u", True)
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v", "v", True)
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w", "w", True)
hermite_polynomial_h = _polynomial("hermite_polynomial_h", "h")
hermite_polynomial_he = _polynomial("hermite_polynomial_he", "e")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", "l")
legendre_polynomial_p = _polynomial("legendre_polynomial_p", "p")


# the public ops, each named once: function, Tensor method, in-place method
_VARIANTS = [
    Variants("lgamma digamma i0 igamma igammac", inplace=True, copies=True),
    Variants("polygamma mvlgamma", method=False),  # methods with the tensor first: below
]


def _bind():
    T = Tensor
    names = bind_variants(globals(), _VARIANTS)

    def t_polygamma(self, n):
        return polygamma(n, self)

    def t_polygamma_(self, n):
        return inplace_method(lambda x: polygamma(n, x, _op=PolygammaInplace), True)(self)

    def t_mvlgamma(self, p):
        return mvlgamma(self, p)

    def t_mvlgamma_(self, p):
        return inplace_method(lambda x: mvlgamma(x, p), True)(self)

    T.polygamma, T.polygamma_ = t_polygamma, t_polygamma_
    T.mvlgamma, T.mvlgamma_ = t_mvlgamma, t_mvlgamma_
    return names


__all__ = _bind()
