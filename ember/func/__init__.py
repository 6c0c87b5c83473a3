"""ember.func: PyTorch's torch.func transforms (grad, vjp, jvp, jacrev, jacfwd, hessian,
functional_call, stack_module_state, vmap) built on ember's reverse-mode autograd.
See docs/autograd.md ("torch.func") for what is exact, what falls back and what it costs."""
from ember.func._eager import (
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    vjp,
)
from ember.func._module import functional_call, stack_module_state
from ember.func._vmap import vmap

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "linearize", "stack_module_state", "vjp", "vmap"]
from ember.func._functionalize import functionalize, replace_all_batch_norm_modules_  # noqa: E402

__all__ += ["functionalize", "replace_all_batch_norm_modules_"]
