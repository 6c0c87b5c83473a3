"""The von Mises distribution on the circle."""
import math

import numpy as np

from ember import _core as ember
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.utils import broadcast_all

__all__ = ["VonMises"]


def _log_i(x, order):
    """log I_order(x) from the scaled Bessel functions (exact to rounding; PyTorch uses
    polynomial approximations good to ~1e-7)."""
    scaled = ember.special.i0e(x) if order == 0 else ember.special.i1e(x)
    return scaled.log() + x


class VonMises(Distribution):
    """The circular von Mises distribution: density ``exp(k cos(x - loc)) / (2 pi I0(k))``.
    ``loc`` and values are angles (any real, read modulo 2 pi)."""
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, (), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = ember.Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration * ember.cos(value - self.loc) - math.log(2 * math.pi)
                - _log_i(self.concentration, 0))

    @ember.no_grad()
    def sample(self, sample_shape=()):
        """Best and Fisher's rejection sampler (1979), in float64, on ember's uniform
        stream (a different draw order from PyTorch's, so not its values)."""
        shape = tuple(self._extended_shape(sample_shape))
        kappa = np.broadcast_to(self.concentration.double().numpy(), shape).ravel()
        loc = np.broadcast_to(self.loc.double().numpy(), shape).ravel()
        tau = 1 + np.sqrt(1 + 4 * kappa ** 2)
        rho = (tau - np.sqrt(2 * tau)) / (2 * kappa)
        r = np.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho ** 2) / (2 * rho))
        out = np.empty(kappa.shape)
        todo = np.arange(kappa.size)
        while todo.size:
            u = ember.rand((3, todo.size), dtype=ember.float64).numpy()
            z = np.cos(np.pi * u[0])
            f = (1 + r[todo] * z) / (r[todo] + z)
            c = kappa[todo] * (r[todo] - f)
            accept = (c * (2 - c) - u[1] > 0) | (np.log(c / u[1]) + 1 - c >= 0)
            theta = np.sign(u[2] - 0.5) * np.arccos(f)
            theta = (theta + math.pi + loc[todo]) % (2 * math.pi) - math.pi
            out[todo[accept]] = theta[accept]
            todo = todo[~accept]
        return ember.tensor(out.reshape(shape), dtype=self.loc.dtype)

    @property
    def mean(self):
        """The circular mean."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        """The circular variance ``1 - I1(k) / I0(k)``."""
        return 1 - (_log_i(self.concentration, 1) - _log_i(self.concentration, 0)).exp()
