"""The Wishart distribution over positive definite matrices."""
import math
import numbers
import warnings

from ember import _core as ember
from ember.distributions import constraints
from ember.distributions.continuous import ExponentialFamily
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Chi2
from ember.distributions.multivariate_normal import _precision_to_scale_tril
from ember.distributions.utils import lazy_property

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """sum_{i<p} digamma(x - i/2): the derivative of mvlgamma."""
    shifts = ember.arange(p, dtype=x.dtype) / 2
    return ember.digamma(x.unsqueeze(-1) - shifts).sum(-1)


class Wishart(ExponentialFamily):
    """The Wishart distribution with ``df`` degrees of freedom and scale matrix given by
    exactly one of ``covariance_matrix``, ``precision_matrix`` or ``scale_tril``.
    Samples come from the Bartlett decomposition (chi-squared draws: not PyTorch's
    stream)."""
    arg_constraints = {"covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky,
                       "df": constraints.greater_than(0)}
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or "
                                 "scale_tril may be specified.")
        param = given[0]
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = tuple(param.shape[:-2])
            self.df = ember.tensor(df, dtype=param.dtype)
        else:
            batch_shape = tuple(ember.broadcast_shapes(tuple(param.shape[:-2]),
                                                       tuple(df.shape)))
            self.df = df.expand(batch_shape)
        event_shape = tuple(param.shape[-2:])
        p = event_shape[-1]
        if bool(self.df.le(p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        for name, m in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                        ("precision_matrix", precision_matrix)):
            if m is not None:
                setattr(self, name, m.expand(batch_shape + (-1, -1)))
        if bool(self.df.lt(p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur "
                          "for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = ember.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2(batch_shape)

    def _chi2(self, batch_shape):
        p = self._event_shape[-1]
        offsets = ember.arange(p, dtype=self._unbroadcasted_scale_tril.dtype)
        return Chi2(self.df.unsqueeze(-1) - offsets.expand(tuple(batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = tuple(ember.Size(batch_shape))
        cov_shape = batch_shape + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2(batch_shape)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        identity = ember.eye(self._event_shape[-1], dtype=self._unbroadcasted_scale_tril.dtype)
        return ember.cholesky_solve(identity, self._unbroadcasted_scale_tril).expand(
            self._matrix_shape())

    def _df_matrix(self):
        return self.df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = factor.masked_fill(factor <= 0, math.nan)
        return factor.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        d = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (V.pow(2) + d.unsqueeze(-1) * d.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape):
        """Bartlett: ``L A A^T L^T`` with ``A`` lower triangular, sqrt(chi2(df - i)) on the
        diagonal and standard normals below it (drawn in that order)."""
        p = self._event_shape[-1]
        diag = self._dist_chi2.rsample(sample_shape).sqrt()
        noise = diag.clamp(min=ember.finfo(diag.dtype).eps).diag_embed(dim1=-2, dim2=-1)
        rows, cols = ember.tril_indices(p, p, offset=-1)
        noise[..., rows, cols] = ember.randn(
            tuple(sample_shape) + tuple(self._batch_shape) + (p * (p - 1) // 2,),
            dtype=noise.dtype)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def rsample(self, sample_shape=(), max_try_correction=None):
        """A Bartlett sample, then PyTorch's correction rounds, which draw again for the
        samples its check marks and stop once a round marks none.

        PyTorch's check is inverted (it marks the samples that *are* positive definite),
        so every call draws a second time; ember draws exactly as PyTorch does, keeping
        the random stream in step, but warns "Singular sample detected." only when a
        returned sample is singular (see docs/differences.md)."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = tuple(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        marked = self._batch_any(self.support.check(sample))
        if marked.any():
            for _ in range(max_try_correction):
                sample_new = self._bartlett_sampling(tuple(marked[marked].shape))
                sample[marked] = sample_new
                marked[marked.clone()] = self._batch_any(~self.support.check(sample_new))
                if not marked.any():
                    break
        if not bool(self.support.check(sample).all()):
            warnings.warn("Singular sample detected.", stacklevel=2)
        return sample

    def _batch_any(self, per_matrix):
        return per_matrix.amax(tuple(range(-len(self._batch_shape), 0))) \
            if self._batch_shape else per_matrix

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        half_log_det = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace = ember.cholesky_solve(value, L).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (-nu * (p * _LOG_2 / 2 + half_log_det) - ember.mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * ember.linalg.slogdet(value).logabsdet - trace / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return ((p + 1) * (p * _LOG_2 / 2 + half_log_det) + ember.mvlgamma(nu / 2, p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)
