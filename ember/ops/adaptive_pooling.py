"""Adaptive pooling: average and max pooling to a given output size, for 1-3 spatial dims.

Output cell ``i`` of a dim of size ``S`` pooled to ``O`` covers input positions
``floor(i * S / O)`` to ``ceil((i + 1) * S / O)`` (exclusive), PyTorch's windows, which
may overlap and differ in size. Adaptive average pooling is linear and separable: one
small averaging matrix per dim (:class:`AdaptiveAvgPool`, whose adjoint
:class:`AdaptiveAvgPoolAdjoint` applies the transposed matrices). Adaptive max pooling
keeps the flat index of each window's maximum (PyTorch's ``return_indices``), and its
gradient scatters there (``pooling.ScatterFlat``).
"""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._util import int_args, reduced_float, scalar_type_name, traced_ints
from ember.ops.pooling import GatherFlat, ScatterFlat, _adjoint_in_x, _as_2d, _flat_in_x, _zero_in_x

# the names torch also has at top level, with the same signature
__all__ = ["adaptive_avg_pool1d"]

def _adaptive_args(name, input, nd, output_size):
    output_size = int_args(output_size)
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    sized = not isinstance(output_size, (int, np.integer)) and output_size is not None
    if nd > 1 and sized and input.dim() <= len(output_size):
        # torch.nn.functional's Python check, before its kernel's
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got "
                           f"{list(input.shape)}")
    for i in range(1, input.dim()):
        if input.shape[i] == 0 and not (i == 1 and input.dim() == nd + 2):
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with "
                               f"dimension {i} being empty")
    S = tuple(input.shape[-nd:])
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size,) * nd
    output_size = tuple(output_size)
    if len(output_size) != nd:
        if nd == 1:
            raise RuntimeError(f"{name}() argument 'output_size' should contain one int (got "
                               f"{len(output_size)})")
        raise RuntimeError(f"{name}: output_size must be {nd}")
    O = tuple(s if o is None else int(o) for o, s in zip(output_size, S))
    # an output of size 1 is a mean, which takes complex and refuses integers itself
    if not input.dtype.is_floating_point and any(o != 1 for o in O):
        # (PyTorch's kernel names: 1-d runs the 2-d kernel, 3-d is the "_cpu" one)
        kernel = name.replace("1d", "2d") if nd == 1 else name + "_cpu" if nd == 3 else name
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{scalar_type_name(input.dtype)}'")
    return S, O


def _bounds(a, o):
    i = np.arange(o)
    return (i * a) // o, -((-(i + 1) * a) // o)


def _adaptive_avg_exact(a, S, O):
    """Adaptive average pooling as PyTorch's CPU kernel computes it: each window's
    elements added one by one (row-major) to +0.0, then divided by the window's size
    along each dim in turn.
    The separable means and 0/1 matrix products of the fast path give other classes
    of result on NaN, infinite or overflowing input (0 * inf, a different order)."""
    nd = len(S)
    bounds = [_bounds(s, o) for s, o in zip(S, O)]
    out = np.empty(a.shape[:a.ndim - nd] + tuple(O), dtype=a.dtype)
    with np.errstate(all="ignore"):
        for pos in np.ndindex(*O):
            sl = tuple(slice(int(b[0][i]), int(b[1][i])) for b, i in zip(bounds, pos))
            # (the window's size spelled out: a batch of 0 leaves -1 undetermined)
            size = int(np.prod([t.stop - t.start for t in sl]))
            win = a[(Ellipsis,) + sl].reshape(a.shape[:a.ndim - nd] + (size,))
            total = np.cumsum(win, axis=-1)[..., -1] + 0
            for s in sl:
                total = total / a.dtype.type(s.stop - s.start)
            out[(Ellipsis,) + pos] = total
    return out


def _adaptive_avg_adjoint_exact(g, S):
    """The adjoint as PyTorch's CPU kernel computes it for half and bfloat16: each
    output's gradient divided by its window's size along each dim in turn and added to
    the window, the outputs taken row-major, each step rounding in the input's dtype."""
    nd = len(S)
    O = g.shape[g.ndim - nd:]
    bounds = [_bounds(s, o) for s, o in zip(S, O)]
    buf = np.zeros(g.shape[:g.ndim - nd] + tuple(S), dtype=g.dtype)
    for pos in np.ndindex(*O):
        sl = tuple(slice(int(b[0][i]), int(b[1][i])) for b, i in zip(bounds, pos))
        delta = g[(Ellipsis,) + pos]
        for s in sl:
            delta = delta / g.dtype.type(s.stop - s.start)
        buf[(Ellipsis,) + sl] += delta[(Ellipsis,) + (None,) * nd]
    return buf


def _adaptive_avg(name, nd, input, output_size):
    """Adaptive average pooling as PyTorch records it: a mean where every output size is
    1 (2-d and 3-d), the 2-d node over a height of 1 for 1-d, else one node."""
    S, O = _adaptive_args(name, input, nd, output_size)
    if nd == 1:
        return _as_2d(_adaptive_avg_op, input, (1,) + tuple(O))
    return _adaptive_avg_op(input, tuple(O))


def _adaptive_avg_op(input, O):
    nd = len(O)
    if all(o == 1 for o in O):
        return input.mean(tuple(range(-nd, 0)), keepdim=True)
    return (AdaptiveAvgPool3D if nd == 3 else AdaptiveAvgPool).apply(input, O)


def _avg_matrices(S, O, dtype, xm):
    """Per pooled dim, the (o, a) matrix of window weights (None where o == a)."""
    out = []
    for a, o in zip(S, O):
        if a == o:
            out.append(None)
            continue
        start, end = _bounds(a, o)
        cols = np.arange(a)
        m = ((cols >= start[:, None]) & (cols < end[:, None])) / (end - start)[:, None]
        out.append(xm.asarray(m.astype(dtype)))
    return out


def _separable(x, mats, transpose=False):
    """``x`` with each of its last ``len(mats)`` dims multiplied by its matrix."""
    xm = array_module(x)
    nd = len(mats)
    for i, m in enumerate(mats):
        if m is not None:
            ax = x.ndim - nd + i
            x = xm.moveaxis(xm.tensordot(x, m.T if not transpose else m, axes=([ax], [0])),
                            -1, ax)
    return xm.ascontiguousarray(x)


class AdaptiveAvgPool(Primitive):
    """``apply(x, O)``: the mean of each adaptive window of the last ``len(O)`` dims (as
    separable window-weight products; PyTorch's running sums where that could give
    another class of result)."""
    _node_name = "AdaptiveAvgPool2DBackward0"
    batch = _batch.passthrough
    save_inputs = (0,)  # as PyTorch's node: for a zero (not missing) second derivative
    # PyTorch's kernel sums half and bfloat16 windows in float32 and rounds once (its
    # 3-d kernel computes in their own dtype, each sum and division rounding)
    reduced_in_float32 = True

    def forward(self, x, O):
        nd = len(O)
        S = tuple(x.shape[x.ndim - nd:])
        self.S = S
        if reduced_float(x.dtype) or x.dtype == np.float16:
            if not self.reduced_in_float32:
                return _adaptive_avg_exact(x, S, O)
            return _adaptive_avg_exact(x.astype(np.float32), S, O).astype(x.dtype)
        y = _separable(x, _avg_matrices(S, O, x.dtype, array_module(x)))
        if array_module(x) is np and x.size and _inexact(x, y):
            y = _adaptive_avg_exact(x, S, O)
        return y

    def backward(self, gy):
        return _adjoint_in_x(self, self.adjoint, (gy, self.S)), None

    jvp = _jvp.linear(0)


class AdaptiveAvgPool3D(AdaptiveAvgPool):
    """:class:`AdaptiveAvgPool` over three dims (PyTorch's 3-d node)."""
    _node_name = "AdaptiveAvgPool3DBackward0"
    reduced_in_float32 = False



class AdaptiveAvgPoolAdjoint(Primitive):
    """``apply(g, S)``: each output's gradient spread evenly over its window in a
    plane of size ``S`` (the adjoint of :class:`AdaptiveAvgPool`)."""
    _node_name = "AdaptiveAvgPool2DBackwardBackward0"
    batch = _batch.passthrough
    n_args = 2  # then the pooled input, under create_graph (``_adjoint_in_x``)

    def forward(self, g, S, x=None):
        nd = len(S)
        O = tuple(g.shape[g.ndim - nd:])
        self.O, self.with_x = O, x is not None
        if reduced_float(g.dtype) or g.dtype == np.float16:
            return _adaptive_avg_adjoint_exact(g, S)
        return _separable(g, _avg_matrices(S, O, g.dtype, array_module(g)), transpose=True)

    def backward(self, gx):
        return (AdaptiveAvgPool.apply(gx, self.O), None) + _zero_in_x(self, gx)

    jvp = _jvp.linear(0)


class AdaptiveAvgPool3DAdjoint(AdaptiveAvgPoolAdjoint):
    """:class:`AdaptiveAvgPoolAdjoint` over three dims (PyTorch's 3-d node)."""
    _node_name = "AdaptiveAvgPool3DBackwardBackward0"

    def backward(self, gx):
        return (AdaptiveAvgPool3D.apply(gx, self.O), None) + _zero_in_x(self, gx)


AdaptiveAvgPool.adjoint = AdaptiveAvgPoolAdjoint
AdaptiveAvgPool3D.adjoint = AdaptiveAvgPool3DAdjoint


def _inexact(a, y):
    """Whether the fast path's classes of result may differ from PyTorch's: a result
    that is not finite, is zero (maybe -0.0) or large enough for a window's running sum
    to have overflowed. Only the (small) result is looked at, so ordinary input costs
    next to nothing; a window whose huge values cancel is not caught."""
    if not np.isfinite(y).all() or not y.all():
        return True
    big = np.finfo(a.dtype).max / a.size
    return not (-big < y.min() and y.max() < big)


def adaptive_avg_pool1d(input, output_size):
    """1-D adaptive average pooling: (N, C, L) -> (N, C, output_size)."""
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node with the output size: the windows depend on the input's size
        return m.composite("adaptive_avg_pool1d", adaptive_avg_pool1d, (input, output_size), {})
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    """2-D adaptive average pooling: (N, C, H, W) -> (N, C, *output_size); window ``i``
    covers ``floor(i*H/oH)`` to ``ceil((i+1)*H/oH)``. ``None`` keeps an input size."""
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node with the output size: the windows depend on the input's size
        return m.composite("adaptive_avg_pool2d", adaptive_avg_pool2d, (input, output_size), {})
    return _adaptive_avg("adaptive_avg_pool2d", 2, input, output_size)


def adaptive_avg_pool3d(input, output_size):
    """3-D adaptive average pooling: (N, C, D, H, W) -> (N, C, *output_size)."""
    if _mode_active[0] and (m := _mode_recorder((input,))) is not None:
        # one node with the output size: the windows depend on the input's size
        return m.composite("adaptive_avg_pool3d", adaptive_avg_pool3d, (input, output_size), {})
    return _adaptive_avg("adaptive_avg_pool3d", 3, input, output_size)


class AdaptiveMaxPool(Primitive):
    """Max over adaptive windows; returns (values, flat indices into each plane)."""
    n_outputs = 2
    differentiable_outputs = (0,)
    _node_name = "AdaptiveMaxPool2DBackward0"
    batch = _batch.passthrough

    save_inputs = (0,)  # as PyTorch's node: for a zero (not missing) second derivative

    def _hook_saves(self, args, out):
        """PyTorch's node saves the input (``save_inputs``) and the indices, for
        saved-tensor hooks (``Primitive._hook_saves``); backward then reads the indices
        their unpack gives."""
        return [(_make(self.idx, False), None)]

    def forward(self, x, O):
        nd = len(O)
        S = x.shape[x.ndim - nd:]
        self.S = S
        xm = array_module(x)
        flat_pos = 0
        idx = []
        for i, (a, o) in enumerate(zip(S, O)):
            start, end = _bounds(a, o)
            kmax = int((end - start).max())
            t = np.minimum(start[:, None] + np.arange(kmax), end[:, None] - 1)
            shape = [1] * (2 * nd)
            shape[i], shape[nd + i] = o, kmax
            idx.append(t.reshape(shape))
            flat_pos = flat_pos * a + t.reshape(shape)
        vals = x[(Ellipsis,) + tuple(xm.asarray(t) for t in idx)]  # (..., *O, *kmax)
        lead = vals.shape[:vals.ndim - nd]
        vals = vals.reshape(lead + (int(np.prod(vals.shape[vals.ndim - nd:])),))  # lead may hold 0
        arg = vals.argmax(-1)
        if x.dtype.kind == "f" or reduced_float(x.dtype):  # (bfloat16: NumPy's kind "V")
            nan = xm.isnan(vals)
            if nan.any():  # PyTorch keeps the last NaN of a window
                last = nan.shape[-1] - 1 - nan[..., ::-1].argmax(-1)
                arg = xm.where(nan.any(-1), last, arg)
        out = xm.take_along_axis(vals, arg[..., None], -1)[..., 0]
        fp = xm.asarray(np.broadcast_to(flat_pos, tuple(O) + flat_pos.shape[nd:])
                        .reshape(tuple(O) + (-1,)))
        self.idx = _pick(xm, fp, arg, O)
        return out, self.idx

    def backward(self, gy, *_):
        (x,), (idx,) = self._saved_and_hooked(self.idx)
        return _flat_in_x(self, ScatterFlat.apply(gy, idx, self.S, True), x), None


class AdaptiveMaxPool3D(AdaptiveMaxPool):
    """:class:`AdaptiveMaxPool` over three dims (PyTorch's 3-d node)."""
    _node_name = "AdaptiveMaxPool3DBackward0"


def _pick(xm, table, arg, O):
    """``table[o, arg[..., o]]`` for a table (*O, kk) and choices (..., *O)."""
    nd = len(O)
    lead = arg.shape[:arg.ndim - nd]
    t = xm.broadcast_to(table, lead + table.shape)
    return xm.take_along_axis(t, arg[..., None], -1)[..., 0].astype(np.int64)


def _adaptive_max(name, nd, input, output_size, return_indices):
    S, O = _adaptive_args(name, input, nd, output_size)
    if nd == 1:  # PyTorch's 1-d pooling is its 2-d kernel over a height of 1
        out, idx = _as_2d(AdaptiveMaxPool.apply, input, (1,) + tuple(O))
    else:
        out, idx = (AdaptiveMaxPool3D if nd == 3 else AdaptiveMaxPool).apply(input, O)
    return (out, idx) if return_indices else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """1-D adaptive max pooling: (N, C, L) -> (N, C, output_size)."""
    if _mode_active[0] and (r := traced_ints(output_size)) is not None:
        # a traced output size: the windows are computed in Python, so the call is one node
        return r[0].composite("adaptive_max_pool1d", adaptive_max_pool1d,
                              (input,) + r[1] + (return_indices,), {})
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """2-D adaptive max pooling: (N, C, H, W) -> (N, C, *output_size); with
    ``return_indices`` also the flat argmax indices into H*W."""
    if _mode_active[0] and (r := traced_ints(output_size)) is not None:
        # a traced output size: the windows are computed in Python, so the call is one node
        return r[0].composite("adaptive_max_pool2d", adaptive_max_pool2d,
                              (input,) + r[1] + (return_indices,), {})
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """3-D adaptive max pooling: (N, C, D, H, W) -> (N, C, *output_size)."""
    if _mode_active[0] and (r := traced_ints(output_size)) is not None:
        # a traced output size: the windows are computed in Python, so the call is one node
        return r[0].composite("adaptive_max_pool3d", adaptive_max_pool3d,
                              (input,) + r[1] + (return_indices,), {})
    return _adaptive_max("adaptive_max_pool3d", 3, input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    """``adaptive_max_pool1d`` returning (values, indices)."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    """``adaptive_max_pool2d`` returning (values, indices)."""
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    """``adaptive_max_pool3d`` returning (values, indices)."""
    return adaptive_max_pool3d(input, output_size, True)


def _fractional_starts(sample, in_size, out_size, pool, dtype):
    """Window starts along one dim for each (n, c): PyTorch's interval sequence
    ``int((i + u) * alpha) - int(u * alpha)``, the last window flush with the end."""
    u = sample.astype(dtype)
    seq = np.empty(u.shape + (out_size,), dtype=np.int64)
    if out_size > 1:
        alpha = dtype.type(in_size - pool) / dtype.type(out_size - 1)
        i = np.arange(out_size - 1, dtype=dtype)
        seq[..., :-1] = (((i + u[..., None]) * alpha).astype(np.int64) -
                         (u * alpha).astype(np.int64)[..., None])
    seq[..., -1] = in_size - pool
    return seq


def fractional_positions(samples, spatial, out, kernel, dtype):
    """The flat input position of every window element, ``(n, c, *out, prod(kernel))``,
    from the random draw ``samples`` ``(n, c, nd)`` (PyTorch's sample order: the last
    spatial dim first for 2-D pooling (W, H), in order for 3-D (T, H, W))."""
    nd = len(spatial)
    n, c = samples.shape[:2]
    order = (1, 0) if nd == 2 else (0, 1, 2)
    starts = [_fractional_starts(samples[..., order[d]], spatial[d], out[d], kernel[d],
                                 dtype) for d in range(nd)]
    strides = [int(np.prod(spatial[d + 1:])) for d in range(nd)]
    pos = np.zeros((n, c) + tuple(out) + (int(np.prod(kernel)),), dtype=np.int64)
    offs = np.stack(np.meshgrid(*[np.arange(kk) for kk in kernel], indexing="ij"),
                    -1).reshape(-1, nd)
    for d in range(nd):
        shape = (n, c) + tuple(out[e] if e == d else 1 for e in range(nd)) + (1,)
        pos = pos + (starts[d].reshape(shape) + offs[:, d]) * strides[d]
    return pos


class FractionalMaxPool(Primitive):
    """Fractional max pooling (PyTorch's ``aten::fractional_max_pool2d(self,
    kernel_size, output_size, random_samples)``): the windows follow from the random
    draw ``samples`` ``(N, C, nd)`` (its first N rows), so a trace keeps the draw as a
    node and the windows follow the input's size at every call. Returns (values, flat
    indices). PyTorch's kernel rule: a later element wins if it is greater or NaN (so
    the last NaN of a window), else the first maximum."""
    n_outputs = 2
    differentiable_outputs = (0,)
    _node_name = "FractionalMaxPool2DBackward0"
    save_inputs = (0,)  # as PyTorch's node: for a zero (not missing) second derivative

    def _hook_saves(self, args, out):
        """PyTorch's node saves the input (``save_inputs``) and the indices, for
        saved-tensor hooks."""
        return [(_make(self.idx, False), None)]

    def forward(self, x, samples, kernel_size, output_size):
        nd = len(kernel_size)
        self.S = x.shape[x.ndim - nd:]
        xm = array_module(x)
        batched = x.ndim == nd + 2
        n = x.shape[0] if batched else 1
        u = np.asarray(samples.get() if hasattr(samples, "get") else samples)[:n]
        pos = fractional_positions(u, self.S, output_size, kernel_size, np.dtype(x.dtype))
        if not batched:
            pos = pos[0]
        lead = x.shape[:x.ndim - nd]
        flat = x.reshape(lead + (int(np.prod(self.S)),))
        p = xm.asarray(pos)
        cells = int(np.prod(pos.shape[len(lead):]))
        vals = xm.take_along_axis(flat, p.reshape(lead + (cells,)), -1).reshape(pos.shape)
        arg = vals.argmax(-1)
        if x.dtype.kind == "f" or reduced_float(x.dtype):  # (bfloat16: NumPy's kind "V")
            nan = xm.isnan(vals)
            if nan.any():
                last = nan.shape[-1] - 1 - nan[..., ::-1].argmax(-1)
                arg = xm.where(nan.any(-1), last, arg)
        out = xm.take_along_axis(vals, arg[..., None], -1)[..., 0]
        self.idx = xm.take_along_axis(p, arg[..., None], -1)[..., 0].astype(np.int64)
        return out, self.idx

    def backward(self, gy, *_):
        (x,), (idx,) = self._saved_and_hooked(self.idx)
        return (_flat_in_x(self, ScatterFlat.apply(gy, idx, self.S, True), x), None, None,
                None)

    def jvp(self, t, *_):
        return GatherFlat.apply(t, self.idx, len(self.S)), None


class FractionalMaxPool3D(FractionalMaxPool):
    """:class:`FractionalMaxPool` over three dims (PyTorch's 3-d node)."""
    _node_name = "FractionalMaxPool3DBackward0"
