"""Samplers the distributions need beyond the generator's own streams: the standard
gamma (with its implicit reparameterisation gradient), binomial draws, and the
Dirichlet through normalised gammas.

PyTorch's CPU samplers for these are per-element rejection loops; ember does not
replay them. The draws come from NumPy's samplers seeded with 64 bits of the ember
generator's stream, so ``manual_seed`` makes them reproducible (within ember) and the
generator advances; the distributions are checked statistically against torch.
"""
import numpy as np

from ember import _factory
from ember._random import _gen
from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.backend import CPU, device_of, to_device
from ember.backend import dtypes as _dt
from ember.ops import _gamma_kernels as _gk
from ember.ops import _jvp

__all__ = ["binomial"]


def _numpy_rng(generator):
    return np.random.Generator(np.random.PCG64(int(_gen(generator)._u64(1)[0])))


def standard_gamma_grad(alpha, x):
    """d x / d alpha for x ~ Gamma(alpha, 1) held at a fixed CDF value (implicit
    reparameterisation): ``-(dP/d alpha)(alpha, x) / pdf(x; alpha)``. The alpha
    derivative of the regularised incomplete gamma is a central difference of ember's
    own kernel (its error, ~1e-9 relative, is far below the sampling noise)."""
    a = np.asarray(alpha, dtype=np.float64)
    xv = np.asarray(x, dtype=np.float64)
    h = 1e-5 * np.maximum(a, 1e-3)
    dp = (_gk.igamma(a + h, xv) - _gk.igamma(a - h, xv)) / (2 * h)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        log_pdf = (a - 1) * np.log(xv) - xv - _gk.lgamma(a)
        g = -dp / np.exp(log_pdf)
    return np.where(np.isfinite(g), g, 0.0)


class StandardGamma(Primitive):
    """``Gamma(alpha, 1)`` draws, differentiable in ``alpha`` (``torch._standard_gamma``)."""
    save_inputs = (0,)
    save_output = True

    def forward(self, alpha, generator):
        dev = device_of(alpha)
        a = to_device(alpha, CPU)  # NumPy's sampler draws on the host
        draws = _numpy_rng(generator).standard_gamma(a.astype(np.float64))
        # a draw of exactly 0 (tiny alpha underflows) is lifted to the smallest normal
        tiny = np.finfo(a.dtype).tiny
        return to_device(np.maximum(draws, tiny).astype(a.dtype), dev)

    def backward(self, gy):
        alpha, x = self.saved_tensors
        dev = device_of(x._data)
        g = standard_gamma_grad(to_device(alpha._data, CPU), to_device(x._data, CPU))
        return gy * _make(to_device(g.astype(x._data.dtype), dev)), None

    jvp = _jvp.diagonal


def standard_gamma(alpha, generator=None):
    """One ``Gamma(alpha, 1)`` draw per element of ``alpha``."""
    if not isinstance(alpha, Tensor):
        raise TypeError("_standard_gamma(): argument 'self' must be Tensor")
    return StandardGamma.apply(alpha, generator)


def binomial(count, prob, generator=None):
    """``Binomial(count, prob)`` draws (``torch.binomial``); no gradient. Not PyTorch's
    stream: NumPy's sampler seeded from ``generator``."""
    if not isinstance(count, Tensor) or not isinstance(prob, Tensor):
        raise TypeError("binomial(): arguments 'count' and 'prob' must be Tensors")
    dev = device_of(prob._data)
    c, p = np.broadcast_arrays(to_device(count._data, CPU), to_device(prob._data, CPU))
    draws = _numpy_rng(generator).binomial(c.astype(np.int64), np.clip(p, 0, 1))
    return _make(to_device(draws.astype(p.dtype), dev), False)


# ----- the nodes of samples: no gradient passes (PyTorch gives zeros) ------------------------
class _Sample(Primitive):
    """A sampled tensor; its inputs (the tensor written to, mean, std, p) get zero gradients."""

    broadcasts = True

    def forward(self, *arrays, value=None):
        self._dtypes = [getattr(a, "dtype", None) for a in arrays]
        return value

    def backward(self, gy):
        return tuple(None if e is None else
                     _factory.zeros(tuple(gy.shape), dtype=_dt.FROM_NP[dt], device=gy.device)
                     for e, dt in zip(self._edges, self._dtypes))

    def jvp(self, *tangents):
        return None  # a sample does not move with its parameters (zero tangent)


def _node(name):
    return type(name, (_Sample,), {"_node_name": name})


_Uniform, _Normal0, _Normal1, _Normal2, _Normal3 = map(_node, (
    "UniformBackward0", "NormalBackward0", "NormalBackward1", "NormalBackward2",
    "NormalBackward3"))
_Bernoulli0, _Bernoulli1, _Bernoulli2 = map(_node, (
    "BernoulliBackward0", "BernoulliBackward1", "BernoulliBackward2"))
_Random0, _Random1, _Random2 = map(_node, ("RandomBackward0", "RandomBackward1",
                                           "RandomBackward2"))
_Exponential, _Geometric, _Cauchy, _LogNormal, _Poisson = map(_node, (
    "ExponentialBackward0", "GeometricBackward0", "CauchyBackward0", "LogNormalBackward0",
    "PoissonBackward0"))


class _BernoulliP(_Sample):
    _node_name = "NotImplemented"

    def backward(self, gy):
        raise RuntimeError("derivative for aten::bernoulli is not implemented")
