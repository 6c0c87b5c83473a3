"""Samplers the distributions need beyond the generator's own streams: the standard
gamma (with its implicit reparameterisation gradient), binomial draws, and the
Dirichlet through normalised gammas.

The draws are PyTorch's CPU samplers replayed draw for draw
(:mod:`ember._random_samplers`): after the same ``manual_seed`` they are torch's
values, and the generator ends in torch's state.
"""
import numpy as np

from ember import _factory
from ember import _random_samplers as _rs
from ember import _sampler_grads as _grads
from ember._random import _gen
from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import CPU, device_of, to_device
from ember.backend import dtypes as _dt
from ember.ops import _jvp
from ember.ops._util import scalar_type_name

__all__ = ["binomial", "_standard_gamma", "_standard_gamma_grad", "_sample_dirichlet",
           "_dirichlet_grad"]


def _scalar_name(dtype):
    """PyTorch's C++ name of a NumPy dtype (``Float``), as its messages say it."""
    return scalar_type_name(_dt.FROM_NP[np.dtype(dtype)])


def _check_float(arr, kernel):
    """PyTorch's samplers run for float32 and float64 only."""
    if arr.dtype not in (np.float32, np.float64):
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{_scalar_name(arr.dtype)}'")


def _flat64(arr):
    """The values of ``arr`` in C order as a contiguous float64 vector on the host."""
    return np.ascontiguousarray(to_device(arr, CPU), dtype=np.float64).reshape(-1)


class StandardGamma(Primitive):
    """``Gamma(alpha, 1)`` draws, differentiable in ``alpha`` (``torch._standard_gamma``):
    PyTorch's sampler, element by element in C order; a draw below the dtype's
    smallest normal number (or NaN) becomes that number, as in PyTorch."""
    save_inputs = (0,)
    save_output = True

    def forward(self, alpha, generator):
        _check_float(alpha, "gamma_cpu")
        dev = device_of(alpha)
        draws = _rs.standard_gamma(_gen(generator), _flat64(alpha),
                                   alpha.dtype == np.float32)
        x = draws.astype(alpha.dtype).reshape(alpha.shape)
        tiny = np.finfo(alpha.dtype).tiny
        return to_device(np.where(x > tiny, x, tiny), dev)

    def backward(self, gy):
        alpha, x = self.saved_tensors
        return gy * _standard_gamma_grad(alpha, x), None

    jvp = _jvp.diagonal


def _standard_gamma(alpha, generator=None):
    """One ``Gamma(alpha, 1)`` draw per element of ``alpha`` (``torch._standard_gamma``)."""
    if not isinstance(alpha, Tensor):
        raise TypeError("_standard_gamma(): argument 'self' (position 1) must be Tensor, "
                        f"not {type(alpha).__name__}")
    return StandardGamma.apply(alpha, generator)


standard_gamma = _standard_gamma  # the name the distributions use


def _standard_gamma_grad(alpha, x):
    """d x / d alpha of a standard gamma draw ``x`` held at a fixed CDF value (implicit
    reparameterisation), PyTorch's approximations (``torch._standard_gamma_grad``)."""
    a, xv = np.broadcast_arrays(to_device(alpha._data, CPU), to_device(x._data, CPU))
    g = _grads.standard_gamma_grad(_flat64(a), _flat64(xv)).astype(alpha._data.dtype)
    return _no_derivative(to_device(g.reshape(a.shape), device_of(alpha._data)),
                          "_standard_gamma_grad", alpha, x)


def binomial(count, prob, generator=None):
    """``Binomial(count, prob)`` draws (``torch.binomial``); no gradient. PyTorch's
    sampler (BTRS where ``count * prob >= 10``, else inversion), element by element.

    A NaN ``count`` gives NaN (PyTorch's sampler loops forever on it)."""
    if not isinstance(count, Tensor) or not isinstance(prob, Tensor):
        raise TypeError("binomial(): arguments 'count' and 'prob' must be Tensors")
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        # (a trace records the draw, so each replay draws anew: not the example's values)
        return m.composite_locals("binomial", binomial, locals())
    c, p = count._data, prob._data
    if c.dtype != p.dtype:
        raise RuntimeError(f"Found dtype {_scalar_name(p.dtype)} but expected "
                           f"{_scalar_name(c.dtype)}")
    _check_float(c, "binomial_cpu")
    dev = device_of(p)
    c, p = np.broadcast_arrays(to_device(c, CPU), to_device(p, CPU))
    draws = _rs.binomial(_gen(generator), _flat64(c), _flat64(p), c.dtype == np.float32)
    arr = to_device(draws.astype(c.dtype).reshape(c.shape), dev)
    if _grad_state.grad_enabled and (count.requires_grad or prob.requires_grad):
        return _NotDifferentiable.apply(count, prob, value=arr, op="binomial")
    return _make(arr, False)


_DBL_MIN = np.finfo(np.float64).tiny


def _dirichlet_draws(alpha, generator):
    """``torch._sample_dirichlet`` on an array: PyTorch's double-precision gamma per
    element (C order), each row divided by its sum (added in PyTorch's order), the
    quotient clamped to [smallest normal, largest value below 1] of the dtype."""
    _check_float(alpha, "dirichlet")
    dev = device_of(alpha)
    gam = _rs.standard_gamma(_gen(generator), _flat64(alpha), False)
    gam = np.where(gam > _DBL_MIN, gam, _DBL_MIN).reshape(alpha.shape)
    total = _rs.torch_sum_lastdim(gam)[..., None] if alpha.ndim else gam
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        x = (gam / total).astype(alpha.dtype)
    x = np.where(x > np.finfo(alpha.dtype).tiny, x, np.finfo(alpha.dtype).tiny)
    return to_device(np.asarray(np.minimum(x, np.nextafter(alpha.dtype.type(1), 0))), dev)


class SampleDirichlet(Primitive):
    """``torch._sample_dirichlet``: no derivative (PyTorch's node is NotImplemented)."""
    _node_name = "NotImplemented"

    def forward(self, alpha, generator):
        return _dirichlet_draws(alpha, generator)

    def backward(self, gy):
        raise RuntimeError("derivative for aten::_sample_dirichlet is not implemented")


def _sample_dirichlet(alpha, generator=None):
    """One Dirichlet draw per row (last dim) of ``alpha`` (``torch._sample_dirichlet``);
    no gradient (``Dirichlet.rsample`` adds the reparameterised one)."""
    if not isinstance(alpha, Tensor):
        raise TypeError("_sample_dirichlet(): argument 'self' (position 1) must be Tensor, "
                        f"not {type(alpha).__name__}")
    return SampleDirichlet.apply(alpha, generator)


def _dirichlet_grad(x, alpha, total):
    """PyTorch's reparameterised gradient of a Dirichlet draw ``x`` in ``alpha``
    (``torch._dirichlet_grad``): a scaled d x / d alpha of the Beta(alpha, total - alpha)
    marginal, by PyTorch's approximations."""
    arrs = np.broadcast_arrays(*(to_device(t._data, CPU) for t in (x, alpha, total)))
    dt = x._data.dtype
    g = _grads.dirichlet_grad(*(_flat64(a) for a in arrs), dt == np.float32).astype(dt)
    return _no_derivative(to_device(g.reshape(arrs[0].shape), device_of(x._data)),
                          "_dirichlet_grad", x, alpha, total)


def _no_derivative(arr, op, *inputs):
    """``arr`` as a tensor whose own derivative PyTorch does not implement: where an
    input is in a graph (a gradient taken with ``create_graph=True``), a node that
    raises if a second derivative reaches it, as PyTorch's does, rather than a constant
    that would leave that term out silently."""
    if _grad_state.grad_enabled and any(t.requires_grad for t in inputs):
        return _GradNotDifferentiable.apply(*inputs, value=arr, op=op)
    return _make(arr, False)


class Dirichlet(Primitive):
    """A Dirichlet draw with PyTorch's reparameterised gradient (the node
    ``torch.distributions.Dirichlet.rsample`` leaves, ``_DirichletBackward``)."""
    _node_name = "_DirichletBackward"
    save_inputs = (0,)
    save_output = True

    def forward(self, alpha, generator):
        return _dirichlet_draws(alpha, generator)

    def backward(self, gy):
        alpha, x = self.saved_tensors
        total = alpha.sum(-1, True).expand_as(alpha)
        grad = _dirichlet_grad(x, alpha, total)
        return grad * (gy - (x * gy).sum(-1, True)), None


def dirichlet(alpha, generator=None):
    """``torch.distributions.dirichlet._Dirichlet.apply``: a draw that passes PyTorch's
    reparameterised gradient to ``alpha``."""
    return Dirichlet.apply(alpha, generator)


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


class _NotDifferentiable(_Sample):
    """A sample whose derivative PyTorch does not implement (``binomial``)."""
    _node_name = "NotImplemented"

    def forward(self, *arrays, value=None, op=None):
        self._op = op
        return value

    def backward(self, gy):
        raise RuntimeError(f"derivative for aten::{self._op} is not implemented")


class _GradNotDifferentiable(_NotDifferentiable):
    """A reparameterised gradient (``_standard_gamma_grad``, ``_dirichlet_grad``) whose
    own derivative PyTorch does not implement: a second derivative stops here."""

    def backward(self, gy):
        raise NotImplementedError(f"the derivative for '{self._op}' is not implemented.")


class _BernoulliP(_Sample):
    _node_name = "NotImplemented"

    def backward(self, gy):
        raise RuntimeError("derivative for aten::bernoulli is not implemented")
