"""``torch.masked``: reductions and normalizations that ignore masked-out elements.

Each function takes ``mask=`` (a bool tensor broadcastable to ``input``; None keeps
every element) and computes the plain operation on ``input`` with the masked-out
elements replaced by the operation's identity (0 for sum, 1 for prod, -inf for amax and
logsumexp ...), exactly as PyTorch's strided implementation does; ``mean``, ``var`` and
``std`` divide by the number of kept elements. Results are ordinary tensors, and every
function is differentiable through the ops it is made of. ``MaskedTensor`` is not
implemented.
"""
import math

from ember import _core as ember
from ember._tensor import Tensor
from ember.nn import functional as F

__all__ = ["sum", "prod", "cumsum", "cumprod", "amax", "amin", "argmax", "argmin", "mean",
           "median", "logsumexp", "logaddexp", "norm", "var", "std", "softmax", "log_softmax",
           "softmin", "normalize", "MaskedTensor", "masked_tensor", "as_masked_tensor"]

_SMALL_INTS = ("uint8", "bool", "int8", "int16", "int32")


def _canonical_dim(dim, ndim):
    if dim == () or dim is None:
        return tuple(range(ndim))
    ndim = max(ndim, 1)
    dims = []
    for d in (dim,) if isinstance(dim, int) else dim:
        if d in dims:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        if d >= ndim or d < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                             f"{ndim - 1}], but got {d})")
        dims.append(d % ndim)
    return tuple(sorted(dims))


def _input_mask(input, mask):
    if mask.ndim > input.ndim:
        raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality "
                         "higher than of the input)")
    # broadcast even where the shapes agree, so that a trace records the broadcast to
    # the input's sizes and a replay with a broadcasting mask counts the elements kept
    mask = ember.broadcast_to(mask.clone() if mask.shape != input.shape else mask,
                              input.shape)
    return mask.to(dtype=ember.bool)


def _identity(op, input, ord=2):
    dt = input.dtype
    floating = dt.is_floating_point
    if op in ("sum", "cumsum"):
        return ember.tensor(0, dtype=dt)
    if op in ("prod", "cumprod"):
        return ember.tensor(1, dtype=dt)
    if op in ("logaddexp", "logsumexp") and dt.is_complex:
        return ember.tensor(complex(-math.inf, 0.0), dtype=dt)  # exp of it is 0
    if op in ("amax", "argmax", "logaddexp", "logsumexp"):
        if floating:
            return ember.tensor(-math.inf, dtype=dt)
        if dt != ember.bool:
            return ember.tensor(ember.iinfo(dt).min, dtype=dt)
    if op in ("amin", "argmin"):
        if floating:
            return ember.tensor(math.inf, dtype=dt)
        if dt != ember.bool:
            return ember.tensor(ember.iinfo(dt).max, dtype=dt)
    if op == "norm":
        return ember.tensor(math.inf if ord == -math.inf else 0, dtype=dt)
    if op == "median":
        return ember.tensor(math.nan, dtype=dt if floating else ember.float32)
    raise NotImplementedError(f"identity of {op} on {dt} input")


def _combine(op, input, mask, *args):
    if mask is None:
        return input
    return ember.where(_input_mask(input, mask), input, _identity(op, input, *args))


def _sum_dtype(input, dtype):
    if dtype is None:
        return ember.int64 if input.dtype.name in _SMALL_INTS else input.dtype
    return dtype


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Sum of the kept elements (0 where none are kept)."""
    dtype = _sum_dtype(input, dtype)
    return ember.sum(_combine("sum", input, mask), _canonical_dim(dim, input.ndim),
                     bool(keepdim), dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Product of the kept elements (1 where none are kept)."""
    dtype = _sum_dtype(input, dtype)
    result = _combine("prod", input, mask).to(dtype=dtype)
    for d in reversed(_canonical_dim(dim, input.ndim)):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def cumsum(input, dim, *, dtype=None, mask=None):
    """Cumulative sum along ``dim``, masked-out elements counting as 0."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return ember.cumsum(_combine("sum", input, mask), d, dtype=dtype).to(dtype=dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Cumulative product along ``dim``, masked-out elements counting as 1."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return ember.cumprod(_combine("prod", input, mask), d, dtype=dtype).to(dtype=dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Largest kept element (-inf, or the dtype's minimum, where none are kept)."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("amax", input, mask)
    return ember.amax(x, _canonical_dim(dim, x.ndim), bool(keepdim)).to(dtype=dtype)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Smallest kept element (inf, or the dtype's maximum, where none are kept)."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("amin", input, mask)
    return ember.amin(x, _canonical_dim(dim, x.ndim), bool(keepdim)).to(dtype=dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the largest kept element (returned in ``dtype``, the input's by default)."""
    dtype = input.dtype if dtype is None else dtype
    return ember.argmax(_combine("argmax", input, mask), dim, bool(keepdim)).to(dtype=dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the smallest kept element (returned in ``dtype``, the input's by default)."""
    dtype = input.dtype if dtype is None else dtype
    return ember.argmin(_combine("argmin", input, mask), dim, bool(keepdim)).to(dtype=dtype)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Mean of the kept elements (nan where none are kept)."""
    source = "Optional"
    if dtype is None:
        dtype, source = input.dtype, "Input"
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"mean(): Could not infer output dtype. {source} dtype must be either "
                         f"a floating point or complex dtype. Got: {dtype}")
    if mask is None:
        count = sum(ember.ones(input.shape, dtype=ember.int64), dim, keepdim=keepdim)
        total = sum(input, dim, keepdim=keepdim, dtype=dtype)
    else:
        inmask = _input_mask(input, mask)
        count = inmask.sum(dim=dim, keepdim=bool(keepdim))
        total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=inmask)
    return total / count


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """Median of the kept elements along ``dim`` (nan where none are kept)."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    if not input.is_floating_point():
        input = input.to(dtype=ember.float32)
    x = _combine("median", input, mask)
    return ember.nanmedian(x, d, keepdim=keepdim).values.to(dtype=dtype)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """``log(sum(exp(x)))`` over the kept elements (-inf where none are kept)."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("logsumexp", input, mask)
    return ember.logsumexp(x, _canonical_dim(dim, input.ndim), keepdim=keepdim).to(dtype=dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """``log(exp(input) + exp(other))`` with masked-out elements taken as -inf."""
    dtype = input.dtype if dtype is None else dtype
    return ember.logaddexp(_combine("logaddexp", input, input_mask),
                           _combine("logaddexp", other, other_mask)).to(dtype=dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Vector ``ord``-norm of the kept elements."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("norm", input, mask, ord)
    return ember.linalg.vector_norm(x, ord, _canonical_dim(dim, input.ndim), bool(keepdim),
                                    dtype=dtype)


def _std_var(input, dim, unbiased, correction_opt, keepdim, dtype, mask, take_sqrt):
    if unbiased is not None and correction_opt is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = float(correction_opt)
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point or input.dtype.is_complex \
            else ember.float32
    compute = dtype if dtype.is_floating_point or dtype.is_complex else ember.float32
    if mask is None:
        count = sum(ember.ones(input.shape, dtype=ember.int64), dim, keepdim=True)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype)
    else:
        inmask = _input_mask(input, mask)
        count = inmask.sum(dim=dim, keepdim=True)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype, mask=inmask)
    x = input - sample_total / count
    # |x|**2 for complex data (a complex result with zero imaginary part, as torch)
    sq = x * x.conj() if x.is_complex() else x * x
    if mask is None:
        total = sum(sq, dim, keepdim=keepdim, dtype=compute)
    else:
        total = sum(sq, dim, keepdim=keepdim, dtype=compute, mask=inmask)
    if not keepdim:
        count = count.reshape(total.shape)
    if correction != 0:
        # clamped as a real count (complex has no order), then in the compute dtype
        count = (count.to(ember.float64) - correction).clamp_min(0).to(compute)
    out = (total / count).to(dtype=dtype)
    return out.sqrt() if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Variance of the kept elements (``correction`` 1 by default; nan where none)."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Standard deviation of the kept elements (``correction`` 1 by default)."""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, True)


def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax along ``dim`` with masked-out elements given probability 0."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return F.softmax(_combine("amax", input, mask), d, dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """Log-softmax along ``dim`` with masked-out elements at -inf."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return F.log_softmax(_combine("amax", input, mask), d, dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    """Softmin along ``dim`` with masked-out elements given probability 0."""
    dtype = input.dtype if dtype is None else dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return F.softmin(_combine("amin", input, mask), d, dtype=dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """``input`` divided by its masked ``ord``-norm along ``dim`` (masked-out elements
    become 0)."""
    dtype = input.dtype if dtype is None else dtype
    x = _combine("sum", input, mask)
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return x / ember.maximum(nrm, ember.tensor(eps, dtype=nrm.dtype))


class MaskedTensor(Tensor):
    """``torch.masked.MaskedTensor`` is not implemented in ember."""

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError("torch.masked.MaskedTensor is not implemented in ember; the "
                                  "torch.masked functions take mask= on ordinary tensors")


def masked_tensor(data, mask, requires_grad=False):
    """Not implemented in ember (see ``MaskedTensor``)."""
    return MaskedTensor(data, mask, requires_grad)


def as_masked_tensor(data, mask):
    """Not implemented in ember (see ``MaskedTensor``)."""
    return MaskedTensor(data, mask)




def is_masked_tensor(obj):
    """True if ``obj`` is a ``MaskedTensor`` (never, in ember, where they cannot be
    built; see ``MaskedTensor``)."""
    return isinstance(obj, MaskedTensor)


__all__ += ["is_masked_tensor"]
