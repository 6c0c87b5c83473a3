"""``torch.distributions``: probability distributions with PyTorch's API (sampling,
log-densities, entropies, moments, transforms and KL divergences). See
docs/distributions.md for what matches torch's random streams and what does not."""
from ember.distributions import constraints, transforms
from ember.distributions.categorical import (
    Categorical,
    OneHotCategorical,
    OneHotCategoricalStraightThrough,
)
from ember.distributions.circular import VonMises
from ember.distributions.constraint_registry import biject_to, transform_to
from ember.distributions.continuous import (
    Cauchy,
    Exponential,
    ExponentialFamily,
    Laplace,
    Normal,
    Uniform,
)
from ember.distributions.discrete import (
    Bernoulli,
    Binomial,
    Geometric,
    Multinomial,
    NegativeBinomial,
    Poisson,
)
from ember.distributions.distribution import Distribution
from ember.distributions.gamma import Beta, Chi2, Dirichlet, FisherSnedecor, Gamma, StudentT
from ember.distributions.kl import kl_divergence, register_kl
from ember.distributions.multivariate_normal import (
    LowRankMultivariateNormal,
    MultivariateNormal,
)
from ember.distributions.relaxed import (
    ContinuousBernoulli,
    ExpRelaxedCategorical,
    LogitRelaxedBernoulli,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
)
from ember.distributions.transformed import (
    Gumbel,
    HalfCauchy,
    HalfNormal,
    InverseGamma,
    Kumaraswamy,
    LogisticNormal,
    LogNormal,
    Pareto,
    TransformedDistribution,
    Weibull,
)
from ember.distributions.transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from ember.distributions.wrappers import Independent, MixtureSameFamily

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy",
    "Chi2", "ComposeTransform", "ContinuousBernoulli", "CumulativeDistributionTransform",
    "Dirichlet", "Distribution", "ExpRelaxedCategorical", "ExpTransform", "Exponential",
    "ExponentialFamily", "FisherSnedecor", "Gamma", "Geometric", "Gumbel", "HalfCauchy",
    "HalfNormal", "Independent", "IndependentTransform", "InverseGamma", "Kumaraswamy",
    "Laplace", "LogNormal", "LogisticNormal", "LogitRelaxedBernoulli",
    "LowRankMultivariateNormal", "LowerCholeskyTransform", "MixtureSameFamily", "Multinomial",
    "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PowerTransform",
    "RelaxedBernoulli", "RelaxedOneHotCategorical", "ReshapeTransform", "SigmoidTransform",
    "SoftmaxTransform", "SoftplusTransform", "StickBreakingTransform", "StudentT",
    "TanhTransform", "Transform", "TransformedDistribution", "Uniform", "VonMises", "Weibull",
    "biject_to", "constraints", "identity_transform", "kl_divergence", "register_kl",
    "transform_to", "transforms",
]

def __getattr__(name):
    # what torch.distributions has and ember lacks (LKJCholesky, Wishart, GeneralizedPareto,
    # the Cat/Stack/CorrCholesky/PositiveDefinite transforms) gets an error naming it
    from ember.compat import missing_attribute
    raise missing_attribute(__name__, name)
