"""Order statistics, histograms and covariances: ``quantile``, ``nanquantile``,
``histogram``, ``histogramdd``, ``cov``, ``corrcoef``.

The quantiles are composites of ``sort``, ``gather`` and ``lerp`` (as in PyTorch),
so they are differentiable without derivative code here; only the ranks to read are
computed on arrays. Histograms count, so they are not differentiable (nor in PyTorch).
``cov`` and ``corrcoef`` are composites of ember ops.
"""
import math

import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.backend import array_module
from ember.backend.dtypes import FROM_NP, get_default_dtype
from ember.backend.dtypes import bool as ember_bool
from ember.ops._linalg_util import _named
from ember.ops._util import not_implemented_for, scalar_type_name, traced_ints, write_out
from ember.ops.composite_node import compile_recorder

__all__ = ["quantile", "nanquantile", "histogram", "histogramdd", "cov", "corrcoef"]

_rt = {n: _named(n, f) for n, f in [("histogram", "hist bin_edges"),
                                     ("histogramdd", "hist bin_edges")]}

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan, out):
    import ember
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    dt = input._data.dtype
    if dt not in (np.float32, np.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest. Got {interpolation}")
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q._data.dtype != dt:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        qs = np.asarray(q._data, dtype=np.float64)
        q_dims = tuple(q.shape)
    else:
        qs = np.asarray(float(q))
        q_dims = ()
    if ((qs < 0) | (qs > 1)).any():
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    qs = qs.reshape(-1)
    if dim is None:
        x = input.reshape(-1)
        kept = (1,) * input.dim() if keepdim else ()
    else:
        nd = max(input.dim(), 1)
        if not -nd <= dim < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                             f"{nd - 1}], but got {dim})")
        d = dim % nd
        x = input.reshape(1) if input.dim() == 0 else input.movedim(d, -1)
        shape = list(input.shape)
        if shape:
            if keepdim:
                shape[d] = 1
            else:
                del shape[d]
        kept = tuple(shape) if input.dim() else ()
    srt = ember.sort(x, dim=-1).values  # NaN sorts last, as in PyTorch
    arr = np.asarray(srt._data)
    n = arr.shape[-1]
    nan = np.isnan(arr)
    if ignore_nan:
        span = (n - nan.sum(-1)).astype(np.float64)[..., None] - 1  # (..., 1)
        fixed = span < 0  # only NaNs: read the last (a NaN)
    else:
        span = np.full(arr.shape[:-1] + (1,), n - 1.0)
        fixed = nan.any(-1)[..., None]  # any NaN: the result is NaN
    ranks = np.where(fixed, n - 1, qs * span)
    lo = np.floor(ranks).astype(np.int64)
    hi = np.ceil(ranks).astype(np.int64)
    xp = array_module(input._data)

    def take(idx):
        return ember.gather(srt, -1, _make(xp.asarray(idx), False))

    if interpolation == "lower":
        res = take(lo)
    elif interpolation == "higher":
        res = take(hi)
    elif interpolation == "nearest":
        res = take(np.round(ranks).astype(np.int64))  # round half to even, as PyTorch
    elif interpolation == "midpoint":
        a, b = take(lo), take(hi)
        res = ember.lerp(a, b, _make(xp.asarray(np.where(hi > lo, 0.5, 0.0).astype(dt)), False))
    else:
        a, b = take(lo), take(hi)
        # the weight as ember ops of q, so a q tensor gets its gradient (as in PyTorch)
        qt = q.reshape(-1) if isinstance(q, Tensor) else _make(xp.asarray(qs.astype(dt)), False)
        free = _make(xp.asarray((~fixed).astype(dt)), False)
        w = (qt * _make(xp.asarray(span.astype(dt)), False) -
             _make(xp.asarray(lo.astype(dt)), False)) * free
        res = ember.lerp(a, b, w)
    # (..., len(q)) -> (len(q), *kept), ending as PyTorch's does: its in-place
    # squeeze_(-1) of (len(q), *kept, 1) names the output's node SqueezeBackward4
    from ember.ops.shape import SqueezeInplace
    if q_dims:
        res = res.reshape(kept + (qs.size,)).unsqueeze(0).transpose(0, -1)
    else:
        res = res.reshape(kept + (1,))
    res = SqueezeInplace.apply(res, (res.dim() - 1,))
    return write_out(res, out) if out is not None else res


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The ``q``-th quantiles of ``input`` over ``dim`` (all elements when None).

    ``q`` is a number or a 0-d/1-D tensor in [0, 1]; with a 1-D ``q`` the result gets a
    leading dim of its length. ``interpolation`` picks between the two neighbouring
    order statistics: ``'linear'`` (default), ``'lower'``, ``'higher'``,
    ``'midpoint'`` or ``'nearest'``. A slice with a NaN gives NaN.
    """
    # the ranks read are computed on arrays from q's values and the NaNs: one node for
    # compile, run again at every replay
    if _mode_active[0] and (m := compile_recorder(input, q)) is not None:
        return m.composite_locals("quantile", quantile, locals())
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False, out)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """``quantile`` ignoring NaNs (a slice of only NaNs gives NaN)."""
    if _mode_active[0] and (m := compile_recorder(input, q)) is not None:
        return m.composite_locals("nanquantile", nanquantile, locals())
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True, out)



# ----- histograms ---------------------------------------------------------------------------
def _hist_check(name, input, weight):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    dt = input._data.dtype
    if dt.kind != "f":
        raise not_implemented_for("histogramdd", dt)
    if weight is not None and weight._data.dtype != dt:
        raise RuntimeError(f"torch.{name}: if weight tensor is provided, it should have the "
                           "same dtype as the input tensor")


def _edges(col, bins, rng, dtype):
    """Equal-width bin edges for one coordinate, as PyTorch's ``linspace`` makes them."""
    import ember
    if rng is not None:
        lo, hi = float(rng[0]), float(rng[1])
        if lo > hi:
            raise RuntimeError("torch.histogramdd: expected upper bound on range to be greater "
                               f"than or equal to lower bound, but got {hi} < {lo}")
    elif col.size:
        lo, hi = float(col.min()), float(col.max())
    else:
        lo, hi = 0.0, 1.0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histogramdd: range of [{lo}, {hi}] is not finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.asarray(ember.linspace(lo, hi, bins + 1, dtype=dtype)._data)


def _histdd(name, x, bins, rng, weight, density):
    """Counts of the rows of the (N, D) array ``x`` in a D-dimensional grid of bins."""
    D = x.shape[-1]
    dt = FROM_NP[x.dtype]
    if isinstance(bins, int) or (isinstance(bins, (list, tuple)) and bins
                                 and all(isinstance(b, int) for b in bins)):
        counts = [bins] * D if isinstance(bins, int) else list(bins)
        if len(counts) != D:
            raise RuntimeError(f"torch.histogramdd: expected {D} sequences of bin edges for each "
                               f"dimension of the input tensor, but got {len(counts)}")
        if any(c < 1 for c in counts):
            raise RuntimeError(f"torch.{name}(): bins must be > 0, but got {min(counts)}")
        if rng is not None and len(rng) != 2 * D:
            raise RuntimeError(f"torch.histogramdd: for a {D}-dimensional histogram, range "
                               f"should have {2 * D} elements, but got {len(rng)}")
        edges = [_edges(x[:, i], counts[i], None if rng is None else rng[2 * i:2 * i + 2], dt)
                 for i in range(D)]
    else:
        edges = [np.asarray(b._data) for b in bins]
        if len(edges) != D:
            raise RuntimeError(f"torch.histogramdd: expected {D} sequences of bin edges for each "
                               f"dimension of the input tensor, but got {len(edges)}")
        for e in edges:
            if e.ndim != 1 or e.size < 1:
                raise RuntimeError("torch.histogramdd: bins tensors should be 1-D with at least "
                                   "one element")
            if e.dtype != x.dtype:
                raise RuntimeError(f"torch.{name}: input tensor and bins tensors should have "
                                   "the same dtype")
    shape = tuple(max(e.size - 1, 0) for e in edges)
    keep = np.ones(x.shape[0], dtype=bool)
    flat = np.zeros(x.shape[0], dtype=np.int64)
    for i, e in enumerate(edges):
        col = x[:, i]
        nb = e.size - 1
        if nb < 1:
            keep[:] = False
            continue
        keep &= (col >= e[0]) & (col <= e[-1])
        pos = np.searchsorted(e, col, side="right") - 1
        pos = np.clip(pos, 0, nb - 1)  # the last edge belongs to the last bin
        flat = flat * nb + pos
    size = math.prod(shape)
    w = None if weight is None else np.asarray(weight._data).reshape(-1)[keep]
    hist = np.bincount(flat[keep], weights=w, minlength=size)[:size] if size else \
        np.zeros(0)
    hist = hist.astype(x.dtype).reshape(shape)
    if density:
        total = hist.sum()
        hist = hist / total
        for i, e in enumerate(edges):
            width = np.diff(e).astype(x.dtype)
            hist = hist / width.reshape((1,) * i + (-1,) + (1,) * (D - i - 1))
        hist = hist.astype(x.dtype)
    return hist, edges


def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):
    """``(hist, bin_edges)``: counts (or ``weight`` sums) of ``input``'s elements in
    ``bins`` equal bins over ``range`` (the data's min and max by default), or in the
    bins between consecutive edges of a 1-D tensor ``bins``. ``density`` normalizes
    to a probability density. Not differentiable."""
    _hist_check("histogram", input, weight)
    if out is None and _mode_active[0] and (m := _mode_recorder((input, bins, weight))) is not None:
        # one node: the bins and counts are computed from the data (a capture would keep them)
        return m.composite_locals("histogram", histogram, locals())
    x = np.asarray(input._data).reshape(-1, 1)
    if isinstance(bins, Tensor):
        if bins.dim() != 1:
            raise RuntimeError(f"torch.histogram: bins tensor should have one dimension, but got "
                               f"{bins.dim()} dimensions")
        b = [bins]
    else:
        b = int(bins)
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError("torch.histogram: if weight tensor is provided it should have the "
                           "same shape as the input tensor")
    hist, edges = _histdd("histogram", x, b, None if range is None else tuple(range), weight,
                          density)
    xp = array_module(input._data)
    res = (_make(xp.asarray(hist), False), _make(xp.asarray(edges[0]), False))
    if out is not None:
        res = tuple(write_out(r, o) for r, o in zip(res, out))
    return _rt["histogram"](*res)


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):
    """``(hist, bin_edges)`` of the points in the rows of ``input`` (shape ``(..., D)``):
    ``bins`` is an int, ``D`` ints or ``D`` 1-D tensors of edges; ``range`` the flat list
    ``[lo_0, hi_0, lo_1, hi_1, ...]``. Not differentiable."""
    _hist_check("histogramdd", input, weight)
    if input.dim() < 2:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions, "
                           f"but got {input.dim()}")
    D = input.shape[-1]
    if D == 0:
        raise RuntimeError("torch.histogramdd: the innermost dimension of the input is 0, so "
                           "there are no coordinates to bin")
    if _mode_active[0] and (m := _mode_recorder((input, weight))) is not None:
        # the bins and counts are computed from the data, and a tuple of edges is no
        # value a graph holds
        m.unrecordable("histogramdd (its bins are computed from the data)")
    x = np.asarray(input._data).reshape(-1, D)
    if isinstance(bins, Tensor):
        bins = [bins]
    if weight is not None and tuple(weight.shape) != tuple(input.shape[:-1]):
        raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the "
                           "same shape as the input tensor excluding its innermost dimension")
    hist, edges = _histdd("histogramdd", x, bins, None if range is None else tuple(range),
                          weight, density)
    xp = array_module(input._data)
    return _rt["histogramdd"](_make(xp.asarray(hist), False),
                              tuple(_make(xp.asarray(e), False) for e in edges))


def _bind():
    for fn in (quantile, nanquantile, histogram):
        setattr(Tensor, fn.__name__, fn)


_bind()


def _check_cov_weights(name, w, n):
    """torch's checks of cov's ``fweights`` (integral counts) or ``aweights`` (floating
    importances): at most 1-D, one per observation, none negative."""
    if w is None:
        return
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got "
                           f"{name} with {w.ndim} dimensions")
    integral = not (w.is_floating_point() or w.is_complex() or w.dtype == ember_bool)
    if integral != (name == "fweights") or w.is_complex():
        kind = "integral" if name == "fweights" else "floating point"
        raise RuntimeError(f"cov(): expected {name} to have {kind} dtype but got {name} with "
                           f"{scalar_type_name(w.dtype)} dtype")
    if w.numel() != n:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are "
                           f"observations in the input but got {w.numel()} != {n}")
    if n and not w.is_meta and bool((w < 0).any()):
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the variables in the rows of ``input`` (observations in columns)."""
    if _mode_active[0] and (r := traced_ints(correction)) is not None:
        # a traced correction: a number in Python, so the call is one node
        return r[0].composite("cov", cov, (input,), {"correction": r[1][0],
                                                    "fweights": fweights, "aweights": aweights})
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.ndim} dimensions")
    if input.dtype == ember_bool:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    _check_cov_weights("fweights", fweights, x.shape[1])
    _check_cov_weights("aweights", aweights, x.shape[1])
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(get_default_dtype())
    n = x.shape[1]
    # the weights keep their own dtype, as in PyTorch (float32 weights give a float32
    # normalization factor even for float64 data)
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    # PyTorch's steps (and nodes): the sums over the observations divided by their
    # count or total weight, unsqueezed (the count as the size itself: a trace reads it
    # from its input at each call, where an array made of it would be a constant)
    if w is None:
        mean = (x.sum(1) / n).unsqueeze(1)
        norm = n - correction
    else:
        wsum = w.sum()
        mean = ((x * w).sum(1) / wsum).unsqueeze(1)
        if correction == 0:
            norm = wsum
        elif aweights is None:
            norm = wsum - correction
        else:
            norm = wsum - correction * (w * aweights).sum() / wsum
    xc = x - mean
    xw = xc if w is None else xc * w
    c = xc.mm(xw.t().conj())  # the conjugate for complex data
    if isinstance(norm, Tensor):
        norm = norm.clamp_min(0)
    else:
        norm = max(norm, 0)
    return (c / norm).squeeze()  # one variable: a 0-d result, as PyTorch


def corrcoef(input):
    """Pearson correlation coefficients of the rows of ``input``."""
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node: one row takes a 0-d path (a capture would keep the example's path)
        return m.composite_locals("corrcoef", corrcoef, locals())
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    stddev = d.sqrt()
    c = c / stddev.view(-1, 1)
    c = c / stddev.view(1, -1)
    if c.is_complex():  # the real and imaginary parts are clipped each, as torch
        from ember.ops.complex_numbers import complex as _complex
        return _complex(c.real.clamp(-1, 1), c.imag.clamp(-1, 1))
    return c.clamp(-1, 1)
