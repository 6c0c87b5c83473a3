"""``torch.special``: every function PyTorch 2.13 has there.

The ops are declared in ``ember.ops.special`` (and, for the ones PyTorch also has at
the top level, ``ember.ops.unary``, ``ember.ops.elementwise`` and ``ember.ops.softmaxes``);
this module gives them their ``torch.special`` names and ``out=``. See docs/special.md.
"""
from ember import ops as _ops
from ember.ops import special as _sp
from ember.ops._util import with_out as _with_out

__all__ = [
    "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "chebyshev_polynomial_t",
    "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w", "digamma",
    "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc",
    "gammaln", "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1", "i1e",
    "laguerre_polynomial_l", "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax",
    "logit", "logsumexp", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
    "modified_bessel_k1", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "sinc", "softmax", "spherical_bessel_j0", "xlog1py",
    "xlogy", "zeta",
]


def _named(fn, name, doc=None):
    """``fn`` with ``out=``, under its ``torch.special`` name."""
    wrapped = _with_out(fn)
    wrapped.__name__ = wrapped.__qualname__ = name
    wrapped.__doc__ = doc or fn.__doc__
    return wrapped


erf = _named(_ops.erf, "erf")
erfc = _named(_ops.erfc, "erfc")
erfinv = _named(_ops.erfinv, "erfinv")
erfcx = _named(_sp.special_erfcx, "erfcx")
exp2 = _named(_ops.exp2, "exp2")
expm1 = _named(_ops.expm1, "expm1")
log1p = _named(_ops.log1p, "log1p")
expit = _named(_ops.sigmoid, "expit", "The logistic sigmoid ``1 / (1 + exp(-input))``.")
sinc = _named(_ops.sinc, "sinc")
entr = _named(_sp.special_entr, "entr")
gammaln = _named(_sp.lgamma, "gammaln")
digamma = psi = _named(_sp.digamma, "digamma")
polygamma = _sp.polygamma
i0 = _named(_sp.i0, "i0")
i0e = _named(_sp.special_i0e, "i0e")
i1 = _named(_sp.special_i1, "i1")
i1e = _named(_sp.special_i1e, "i1e")
ndtr = _named(_sp.special_ndtr, "ndtr")
ndtri = _named(_sp.special_ndtri, "ndtri")
log_ndtr = _named(_sp.special_log_ndtr, "log_ndtr")
gammainc = _sp.igamma
gammaincc = _sp.igammac
xlog1py = _sp.xlog1py
zeta = _sp.zeta
xlogy = _ops.xlogy
round = _ops.round
airy_ai = _sp.airy_ai
bessel_j0, bessel_j1 = _sp.bessel_j0, _sp.bessel_j1
bessel_y0, bessel_y1 = _sp.bessel_y0, _sp.bessel_y1
modified_bessel_i0, modified_bessel_i1 = _sp.modified_bessel_i0, _sp.modified_bessel_i1
modified_bessel_k0, modified_bessel_k1 = _sp.modified_bessel_k0, _sp.modified_bessel_k1
scaled_modified_bessel_k0 = _sp.scaled_modified_bessel_k0
scaled_modified_bessel_k1 = _sp.scaled_modified_bessel_k1
spherical_bessel_j0 = _sp.spherical_bessel_j0
chebyshev_polynomial_t = _sp.chebyshev_polynomial_t
chebyshev_polynomial_u = _sp.chebyshev_polynomial_u
chebyshev_polynomial_v = _sp.chebyshev_polynomial_v
chebyshev_polynomial_w = _sp.chebyshev_polynomial_w
shifted_chebyshev_polynomial_t = _sp.shifted_chebyshev_polynomial_t
shifted_chebyshev_polynomial_u = _sp.shifted_chebyshev_polynomial_u
shifted_chebyshev_polynomial_v = _sp.shifted_chebyshev_polynomial_v
shifted_chebyshev_polynomial_w = _sp.shifted_chebyshev_polynomial_w
hermite_polynomial_h = _sp.hermite_polynomial_h
hermite_polynomial_he = _sp.hermite_polynomial_he
laguerre_polynomial_l = _sp.laguerre_polynomial_l
legendre_polynomial_p = _sp.legendre_polynomial_p


def multigammaln(input, p, *, out=None):
    """The multivariate log-gamma function of dimension ``p`` (``torch.mvlgamma``)."""
    return _with_out(_sp.mvlgamma)(input, p, out=out)


def logit(input, eps=None, *, out=None):
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    return _with_out(_ops.logit)(input, eps, out=out)


def softmax(input, dim, *, dtype=None):
    """``exp(input) / sum(exp(input), dim)``, optionally computed in ``dtype``."""
    return _ops.softmax(input, dim, dtype)


def log_softmax(input, dim, *, dtype=None):
    """``input - logsumexp(input, dim)``, optionally computed in ``dtype``."""
    return _ops.log_softmax(input, dim, dtype)


def logsumexp(input, dim, keepdim=False, *, out=None):
    """``log(sum(exp(input), dim))`` without overflow."""
    return _ops.logsumexp(input, dim, keepdim, out=out)
