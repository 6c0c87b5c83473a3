"""``torch._functorch.apis``: ``vmap``, ``grad``, ``grad_and_value``."""
from ember.func import grad, grad_and_value, vmap  # noqa: F401

__all__ = ["vmap", "grad", "grad_and_value"]
