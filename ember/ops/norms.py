"""Norms between and within tensors, as composites of ember ops: ``dist``, ``renorm``."""
from ember._factory import ones_like
from ember.autograd.grad_mode import no_grad
from ember.backend import dtypes as _dt
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
    if input.dim() < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} "
                           "dimensions")
    from ember.linalg import vector_norm  # torch.linalg is built on ops
    dims = [d for d in range(input.ndim) if d != dim % input.ndim]
    # float16/bfloat16: the norms and the factor in float32, the factor then rounded to
    # the input's dtype, as torch's kernel
    acc = input.dtype.name in ("float16", "bfloat16")
    kw = {"dtype": _dt.float32} if acc else {}
    with no_grad():
        over = vector_norm(input, p, dims, keepdim=True, **kw) > maxnorm
    # only the slices that are rescaled differentiate through their norm: the others
    # (a NaN norm among them) pass the gradient through unchanged, as torch's do
    kept = where(over, input, input.new_zeros(()))
    norms = vector_norm(kept, p, dims, keepdim=True, **kw)
    factor = where(over, maxnorm / (norms + 1e-7), ones_like(norms))
    return input * (factor.to(input.dtype) if acc else factor)
