"""Norms between and within tensors, as composites of ember ops: ``dist``, ``renorm``,
and the pieces of weight normalization, ``norm_except_dim`` and ``_weight_norm``."""
from ember._factory import ones_like
from ember._tensor import _mode_active
from ember.autograd.grad_mode import no_grad
from ember.backend import dtypes as _dt
from ember.ops._util import traced_ints, with_out
from ember.ops.composite_node import one_node
from ember.ops.elementwise import where
from ember.ops.reduction import _axes
from ember.ops.vector_norms import NormScalar, NormScalarOpt

__all__ = ["dist", "renorm", "norm_except_dim", "_weight_norm"]


@one_node("DistBackward0", 2)
def dist(input, other, p=2):
    """The ``p``-norm of ``input - other``."""
    if _mode_active[0] and (r := traced_ints(p)) is not None:
        # a traced order picks the norm's formula in Python: one node
        return r[0].composite("dist", dist, (input, other) + r[1], {})
    from ember.linalg import vector_norm  # torch.linalg is built on ops
    return vector_norm(input - other, p)


@one_node("RenormBackward0", 1)
@with_out
def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` rescaled so that its ``p``-norm is at most ``maxnorm``."""
    if _mode_active[0] and (r := traced_ints(p, dim, maxnorm)) is not None:
        # a traced order, dim or bound is used in Python: one node
        return r[0].composite("renorm", renorm, (input,) + r[1], {})
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


def norm_except_dim(v, pow=2, dim=0):
    """The ``pow``-norm over every dimension but ``dim`` (kept as size 1 elsewhere), or
    over everything when ``dim`` is -1: weight normalization's ``g`` initial value.

    Built as torch builds it (a 2-D view normed along one dimension, transposes around it
    for an inner ``dim``), so the graph has torch's nodes; the norms carry the names of
    torch's ``norm`` overloads (``NormBackward0`` without a dim, ``NormBackward1`` with)."""
    if dim == -1:
        return NormScalar.apply(v, float(pow), _axes(v, None), False)
    if not -v.ndim <= dim < v.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-v.ndim}, "
                         f"{v.ndim - 1}], but got {dim})")
    dim = dim % v.ndim
    if v.ndim == 1:
        return v.abs() if pow != 0 else (v != 0).to(v.dtype)
    if dim not in (0, v.ndim - 1):
        return norm_except_dim(v.transpose(0, dim), pow, 0).transpose(0, dim)
    keep = [1] * v.ndim
    keep[dim] = v.shape[dim]
    flat = (v.shape[0], -1) if dim == 0 else (-1, v.shape[-1])
    rows = v.contiguous().view(flat)
    n = NormScalarOpt.apply(rows, float(pow), (1 - min(dim, 1),), False)
    return n.view(keep)


def _fused_weight_norm(v, g, dim=0):
    # PyTorch runs one kernel (one node) for the first and the last dim only
    return dim in (0, v.ndim - 1)


@one_node("WeightNormInterfaceBackward0", 2, when=_fused_weight_norm)
def _weight_norm(v, g, dim=0):
    """``v * (g / norm_except_dim(v, 2, dim))``: the weight of a weight-normalized layer
    (``nn.utils.parametrizations.weight_norm``), with magnitude ``g`` and direction
    ``v``."""
    return v * (g / norm_except_dim(v, 2, dim))
