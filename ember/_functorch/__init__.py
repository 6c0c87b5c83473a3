"""``torch._functorch`` and the ``functorch`` package: the function transforms of
``ember.func`` under their functorch names."""
from ember._functorch.make_functional import (
    make_functional,
    make_functional_with_buffers,
)
from ember.func import (  # noqa: F401
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    vjp,
    vmap,
)

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functional_call", "linearize", "make_functional", "make_functional_with_buffers"]


def __getattr__(name):
    import ember.func as func
    if hasattr(func, name):
        return getattr(func, name)
    from ember.compat import missing_attribute
    raise missing_attribute(__name__, name)
