"""Smaller torch functions, as composites of ember ops (no derivative code of their
own): counting and searching (``bincount``, ``histc``, ``bucketize``, ``searchsorted``,
``isin``, ``unravel_index``), statistics (``cov``, ``corrcoef``), combinatorics
(``cartesian_prod``, ``combinations``, ``block_diag``, ``diagflat``), integration
(``trapezoid``, ``trapz``, ``cumulative_trapezoid``) and elementwise extras
(``dist``, ``renorm``, ``heaviside``, ``gcd``, ``lcm``, ``ldexp``, ``frexp``,
``nextafter``)."""
import itertools
import math

import numpy as np

import ember
from ember._tensor import Tensor, _make
from ember.ops._util import not_implemented_for, with_out

__all__ = ["bincount", "histc", "bucketize", "searchsorted", "isin", "unravel_index", "cov",
           "corrcoef", "cartesian_prod", "combinations", "block_diag", "diagflat",
           "trapezoid", "trapz", "cumulative_trapezoid", "dist", "renorm", "heaviside", "gcd",
           "lcm", "ldexp", "frexp", "nextafter"]


def _arr(t):
    return t._data if isinstance(t, Tensor) else np.asarray(t)


def bincount(input, weights=None, minlength=0):
    """Count of each value of a 1-D non-negative integer tensor (weighted sums with
    ``weights``)."""
    x = _arr(input)
    if x.ndim != 1 or x.dtype.kind not in "iub":
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if x.size and x.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return _make(np.bincount(x, minlength=minlength).astype(np.int64))
    w = _arr(weights)
    out = np.bincount(x, weights=w.astype(np.float64), minlength=minlength)
    return _make(out.astype(w.dtype if w.dtype.kind == "f" else np.float64))


@with_out
def histc(input, bins=100, min=0, max=0):
    """Histogram of ``bins`` equal bins between ``min`` and ``max`` (the data's range
    when both are 0); values outside are ignored."""
    x = _arr(input)
    if x.dtype.kind != "f":
        raise not_implemented_for("histogram_cpu", x.dtype)
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    xs = x.reshape(-1)
    xs = xs[(xs >= lo) & (xs <= hi)]
    idx = ((xs - lo) * bins / (hi - lo)).astype(np.int64)
    idx[idx == bins] = bins - 1
    return _make(np.bincount(idx, minlength=bins).astype(x.dtype))


def _search(sorted_seq, values, right):
    side = "right" if right else "left"
    s, v = _arr(sorted_seq), _arr(values)
    if s.shape[-1:] == (0,):
        return np.zeros(v.shape, dtype=np.int64)
    if s.ndim == 1:
        return np.searchsorted(s, v, side=side)
    flat_s = s.reshape(-1, s.shape[-1])
    flat_v = v.reshape(-1, v.shape[-1])
    out = np.stack([np.searchsorted(a, b, side=side) for a, b in zip(flat_s, flat_v)])
    return out.reshape(v.shape)


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """Index of the bucket of ``boundaries`` (1-D, sorted) each value falls in."""
    scalar = not isinstance(input, Tensor)
    res = _search(boundaries, input, right)
    res = _make(np.asarray(res, dtype=np.int32 if out_int32 else np.int64))
    if out is not None:
        from ember.ops._util import write_out
        return write_out(res, out)
    return res if not scalar else res.reshape(())


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None, out=None):
    """Insertion points of ``input`` into the innermost dimension of
    ``sorted_sequence``."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites,"
                               " got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        seq = ember.take_along_dim(sorted_sequence, sorter, dim=-1)
    scalar = not isinstance(input, Tensor)
    values = np.asarray(input) if scalar else input
    res = _make(np.asarray(_search(seq, values, right),
                           dtype=np.int32 if out_int32 else np.int64))
    if out is not None:
        from ember.ops._util import write_out
        return write_out(res, out)
    return res


@with_out
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` is in ``test_elements``."""
    e, t = _arr(elements), _arr(test_elements)
    return _make(np.isin(e, t, invert=invert))


def unravel_index(indices, shape):
    """The coordinates (one tensor per dimension) of flat ``indices`` in ``shape``."""
    idx = _arr(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError("expected 'indices' to be integer dtype, but got "
                        f"{ember.tensor(idx).dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got "
                         f"{tuple(shape)}")
    total = math.prod(shape)
    if idx.size and (idx.min() < -total or idx.max() >= total):
        raise RuntimeError(f"'indices' must be in range [-{total}, {total})")
    idx = np.where(idx < 0, idx + total, idx)
    return tuple(_make(c.astype(np.int64)) for c in np.unravel_index(idx, shape))


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the variables in the rows of ``input`` (observations in columns)."""
    x = input if input.ndim == 2 else input.reshape(1, -1)
    if not x.is_floating_point():
        x = x.to(ember.get_default_dtype())
    n = x.shape[1]
    # the weights keep their own dtype, as in PyTorch (float32 weights give a float32
    # normalization factor even for float64 data)
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if w is None:
        mean = x.mean(1, keepdim=True)
        norm = n - correction
    else:
        wsum = w.sum()
        mean = (x * w).sum(1, keepdim=True) / wsum
        if correction == 0:
            norm = wsum
        elif aweights is None:
            norm = wsum - correction
        else:
            norm = wsum - correction * (w * aweights).sum() / wsum
    xc = x - mean
    xw = xc if w is None else xc * w
    c = xc @ xw.T
    if isinstance(norm, Tensor):
        norm = norm.clamp_min(0)
    else:
        norm = max(norm, 0)
    c = c / norm
    return c.reshape(()) if c.shape == (1, 1) else c


def corrcoef(input):
    """Pearson correlation coefficients of the rows of ``input``."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    stddev = d.sqrt()
    c = c / stddev.unsqueeze(1)
    c = c / stddev.unsqueeze(0)
    return c.clamp(-1, 1)


def cartesian_prod(*tensors):
    """All tuples with one element from each 1-D tensor, as rows."""
    if len(tensors) == 1:
        return tensors[0]
    grids = ember.meshgrid(*tensors, indexing="ij")
    return ember.stack([g.reshape(-1) for g in grids], dim=1)


def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of a 1-D tensor's elements, as rows."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return ember.empty(0, dtype=input.dtype)
    n = input.shape[0]
    gen = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    idx = np.array(list(gen(range(n), r)), dtype=np.int64).reshape(-1, r)
    if idx.size == 0:
        return input[_make(np.zeros((0, r), dtype=np.int64))]
    return input[_make(idx)]


def block_diag(*tensors):
    """A block-diagonal matrix of the given 0-, 1- or 2-D tensors."""
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.ndim} dimensions")
        mats.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not mats:
        return ember.empty(1, 0)
    dtype = mats[0].dtype
    for m in mats[1:]:
        dtype = ember.promote_types(dtype, m.dtype)
    cols = sum(m.shape[1] for m in mats)
    parts, c0 = [], 0
    for m in mats:
        left = ember.zeros(m.shape[0], c0, dtype=dtype)
        right = ember.zeros(m.shape[0], cols - c0 - m.shape[1], dtype=dtype)
        parts.append(ember.cat([left, m.to(dtype), right], dim=1))
        c0 += m.shape[1]
    return ember.cat(parts, dim=0)


def diagflat(input, offset=0):
    """A 2-D tensor with the flattened input on diagonal ``offset``."""
    return ember.diag(input.reshape(-1), offset)


def _trap_dx(y, x, dx, dim):
    if x is None:
        return dx
    if x.ndim == 1:
        shape = [1] * y.ndim
        shape[dim] = -1
        return ember.diff(x).reshape(shape)
    return ember.diff(x, dim=dim)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along ``dim`` (spacing ``dx``, default 1, or samples ``x``)."""
    dim = dim % y.ndim if y.ndim else 0
    if y.shape[dim] == 0:
        return ember.zeros(y.shape[:dim] + y.shape[dim + 1:], dtype=y.dtype)
    left = y.narrow(dim, 0, y.shape[dim] - 1)
    right = y.narrow(dim, 1, y.shape[dim] - 1)
    d = _trap_dx(y, x, 1 if dx is None else dx, dim)
    return ((left + right) * d).sum(dim) / 2


def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of ``trapezoid``."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integral along ``dim`` (one element shorter)."""
    dim = dim % y.ndim if y.ndim else 0
    n = y.shape[dim]
    if n == 0:
        return y
    left = y.narrow(dim, 0, n - 1)
    right = y.narrow(dim, 1, n - 1)
    d = _trap_dx(y, x, 1 if dx is None else dx, dim)
    return ((left + right) * d / 2).cumsum(dim)


def dist(input, other, p=2):
    """The ``p``-norm of ``input - other``."""
    return ember.linalg.vector_norm(input - other, p)


@with_out
def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` rescaled so that its ``p``-norm is at most ``maxnorm``."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    dims = [d for d in range(input.ndim) if d != dim % input.ndim]
    with ember.no_grad():
        over = ember.linalg.vector_norm(input, p, dims, keepdim=True) > maxnorm
    # only the slices that are rescaled differentiate through their norm: the others
    # (a NaN norm among them) pass the gradient through unchanged, as torch's do
    kept = ember.where(over, input, input.new_zeros(()))
    norms = ember.linalg.vector_norm(kept, p, dims, keepdim=True)
    factor = ember.where(over, maxnorm / (norms + 1e-7), ember.ones_like(norms))
    return input * factor


@with_out
def heaviside(input, values):
    """0 where ``input < 0``, 1 where ``input > 0``, ``values`` where it is 0."""
    if input.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different "
                           "dtypes")
    zero = ember.zeros((), dtype=input.dtype)
    one = ember.ones((), dtype=input.dtype)
    return ember.where(input == 0, values, ember.where(input > 0, one, zero))


@with_out
def gcd(input, other):
    """Greatest common divisor, elementwise (integers)."""
    return _make(np.gcd(_arr(input), _arr(other)))


@with_out
def lcm(input, other):
    """Least common multiple, elementwise (integers)."""
    return _make(np.lcm(_arr(input), _arr(other)))


@with_out
def ldexp(input, other):
    """``input * 2 ** other``."""
    x = input if input.is_floating_point() else input.to(ember.get_default_dtype())
    return x * ember.pow(2.0, other).to(x.dtype)


@with_out
def frexp(input):
    """Mantissa in [0.5, 1) and integer exponent with ``input = m * 2 ** e``."""
    _, e = np.frexp(_arr(input))
    from collections import namedtuple
    Frexp = namedtuple("frexp", ["mantissa", "exponent"])
    # the mantissa as input * 2**-e, exact and differentiable (gradient 2**-e); 2**-e is
    # applied in two halves, since for the largest floats and the subnormals it is itself
    # out of range (2**-1024, 2**1074)
    half = -e // 2
    one = np.ones_like(_arr(input))
    mantissa = input * _make(np.ldexp(one, half)) * _make(np.ldexp(one, -e - half))
    return Frexp(mantissa, _make(e.astype(np.int32)))


@with_out
def nextafter(input, other):
    """The next representable value after ``input`` towards ``other``."""
    from ember.ops.elementwise import Nextafter
    return Nextafter.apply(input, other)


def _copy_variant(view_name, doc_name=None):
    def fn(*args, out=None, **kwargs):
        if view_name == "alias":
            res = args[0]
        elif hasattr(ember, view_name):
            res = getattr(ember, view_name)(*args, **kwargs)
        else:  # a view that PyTorch has only as a method (expand, view, unfold ...)
            res = getattr(args[0], view_name)(*args[1:], **kwargs)
        res = tuple(r.clone() for r in res) if isinstance(res, (tuple, list)) else res.clone()
        if out is not None:
            from ember.ops._util import write_out
            if isinstance(res, tuple):  # one out tensor per piece
                if len(out) != len(res):
                    raise RuntimeError(f"{fn.__name__}: expected {len(res)} out tensors, "
                                       f"got {len(out)}")
                return [write_out(r, o) for r, o in zip(res, out)]
            return write_out(res, out)
        return res
    fn.__name__ = doc_name or view_name + "_copy"
    fn.__doc__ = f"``{view_name}`` as a new tensor (PyTorch's ``{fn.__name__}``), not a view."
    return fn


alias_copy = _copy_variant("alias")
as_strided_copy = _copy_variant("as_strided")
diagonal_copy = _copy_variant("diagonal")
expand_copy = _copy_variant("expand")
permute_copy = _copy_variant("permute")
squeeze_copy = _copy_variant("squeeze")
t_copy = _copy_variant("t")
transpose_copy = _copy_variant("transpose")
unbind_copy = _copy_variant("unbind")
unfold_copy = _copy_variant("unfold")
unsqueeze_copy = _copy_variant("unsqueeze")
view_copy = _copy_variant("view")
split_with_sizes_copy = _copy_variant("split", "split_with_sizes_copy")
unsafe_chunk = _copy_variant("chunk", "unsafe_chunk")
unsafe_split = _copy_variant("split", "unsafe_split")

__all__ += ["alias_copy", "as_strided_copy", "diagonal_copy", "expand_copy", "permute_copy",
            "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy", "unfold_copy",
            "unsqueeze_copy", "view_copy", "split_with_sizes_copy", "unsafe_chunk",
            "unsafe_split"]
