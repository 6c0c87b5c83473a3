"""``torch._functorch.eager_transforms``: the Jacobian and linearization transforms."""
from ember.func import hessian, jacfwd, jacrev, jvp, linearize, vjp  # noqa: F401

__all__ = ["vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize"]
