"""Norms between and within tensors, as composites of ember ops: ``dist``, ``renorm``."""
from ember._factory import ones_like
from ember.autograd.grad_mode import no_grad
from ember.ops._util import with_out
from ember.ops.composite_node import one_node
from ember.ops.elementwise import where

__all__ = ["dist", "renorm"]


@one_node("DistBackward0", 2)
def dist(input, other, p=2):
    """The ``p``-norm of ``input - other``."""
    from ember.linalg import vector_norm  # torch.linalg is built on ops
    return vector_norm(input - other, p)


@one_node("RenormBackward0", 1)
@with_out
def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` rescaled so that its ``p``-norm is at most ``maxnorm``."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    from ember.linalg import vector_norm  # torch.linalg is built on ops
    dims = [d for d in range(input.ndim) if d != dim % input.ndim]
    with no_grad():
        over = vector_norm(input, p, dims, keepdim=True) > maxnorm
    # only the slices that are rescaled differentiate through their norm: the others
    # (a NaN norm among them) pass the gradient through unchanged, as torch's do
    kept = where(over, input, input.new_zeros(()))
    norms = vector_norm(kept, p, dims, keepdim=True)
    factor = where(over, maxnorm / (norms + 1e-7), ones_like(norms))
    return input * factor
