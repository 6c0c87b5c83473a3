"""Pooling over sliding windows: max, average and Lp pooling and max-unpooling, for 1-3
spatial dims (adaptive pooling, whose windows follow the output size, is in
``adaptive_pooling``).

Pools loop over kernel positions (a handful of strided slices of the padded input),
never over the batch or the pixels. Max pooling keeps which kernel position won
(``arg``); its gradient scatters there (:class:`PoolScatter`) and the gradient of
that scatter is the matching gather (:class:`PoolGather`), so double backward works.
Average pooling is linear: :class:`AvgPool` and :class:`AvgPoolAdjoint` are each
other's derivative. Adaptive max pooling and unpooling address the input by flat
indices (PyTorch's ``return_indices`` convention): :class:`GatherFlat` and
:class:`ScatterFlat`.
"""
import itertools
import math

import numpy as np

from ember._factory import zeros_like
from ember._tensor import Tensor, _make, _mode_active
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import fast_kernels as _fast_kernels
from ember.backend.threads import parallel_rows
from ember.ops import _batch, _jvp
from ember.ops._util import int_args, reduced_float, refuse_dtype, traced_ints, with_out
from ember.ops.conv import Geom
from ember.ops.unary import _ZerosLikeOf

# the names torch also has at top level, with the same signature
__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d"]


def _positions(g):
    """(flat kernel index, output slice, input slice) for each kernel position: the
    windows where that position lands inside the (unpadded) input, and the input
    elements it meets there. Positions that meet only padding are skipped."""
    for k, kk in enumerate(itertools.product(*[range(k) for k in g.K])):
        osl, isl = [Ellipsis], [Ellipsis]
        for i in range(g.nd):
            off = kk[i] * g.d[i] - g.lo[i]
            s = g.s[i]
            o_lo = max(0, -(off // s)) if off < 0 else 0
            o_hi = min(g.O[i], (g.S[i] - 1 - off) // s + 1) if off < g.S[i] else 0
            if o_hi <= o_lo:
                break
            p0 = o_lo * s + off
            osl.append(slice(o_lo, o_hi))
            isl.append(slice(p0, p0 + s * (o_hi - o_lo - 1) + 1, s))
        else:
            yield k, tuple(osl), tuple(isl)


def _covers(osl, g):
    return all(sl.start == 0 and sl.stop == o for sl, o in zip(osl[1:], g.O))


def _disjoint(g):
    return all(s >= d * (k - 1) + 1 for s, d, k in zip(g.s, g.d, g.K))


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" or reduced_float(dtype) else np.iinfo(dtype).min


def _pair(g):
    """2x2 windows with stride 2 (numba's specialised kernels)."""
    return tuple(g.K) == (2, 2) and tuple(g.s) == (2, 2) and tuple(g.d) == (1, 1)


_NUMBA = {}  # "pool": numba's kernels (ember/ops/_pool_numba.py), or None (tried once)


def _numba_pool(xm, dtype, g):
    """numba's 2-d max-pool kernels (``ember/ops/_pool_numba.py``, the ``ember[fast]``
    extra) for float32/float64 NumPy arrays whose windows all lie wholly inside the
    input (no padding, no partial windows), else None: the NumPy loops run. numba is
    imported here, the first time such a pool runs, never at ``import ember``."""
    if xm is not np or g.nd != 2 or dtype not in (np.float32, np.float64) or any(g.lo) \
            or any((o - 1) * s + d * (k - 1) >= a for o, s, d, k, a in
                   zip(g.O, g.s, g.d, g.K, g.S)):
        return None
    return _fast_kernels.load(_NUMBA, "pool", "ember.ops._pool_numba")


class MaxPool(Primitive):
    """Max over each window; remembers the first position of the max (PyTorch's)."""
    _node_name = "MaxPool2DWithIndicesBackward0"
    save_inputs = (0,)  # as PyTorch's node: for a zero (not missing) second derivative
    batch = _batch.passthrough
    kernel, refuses = "max_pool2d", "bc"  # (complex numbers have no order)

    def _hook_saves(self, args, out):
        """PyTorch's node saves the indices too, for saved-tensor hooks
        (``Primitive._hook_saves``): each maximum's flat position in its plane."""
        return [(_make(flat_indices(self.arg, self.g), False), None)]

    def forward(self, x, g):
        refuse_dtype(self, x)
        g = self.g = g.at(x.shape[x.ndim - g.nd:])  # (a recorded graph at another size)
        xm = array_module(x)
        pos = list(_positions(g))
        out_shape = x.shape[:x.ndim - g.nd] + tuple(g.O)
        arg = xm.empty(out_shape, np.int8 if len(pos) < 128 else np.int32)
        fast = _numba_pool(xm, x.dtype, g)
        if fast is not None:
            # one compiled pass; the last NaN of a window is its index already
            H, W = g.S
            x3 = x.reshape((-1, H, W))
            best = xm.empty(out_shape, x.dtype)
            b3, a3 = best.reshape((-1,) + tuple(g.O)), arg.reshape((-1,) + tuple(g.O))
            pair = _pair(g)

            def block(lo, hi):
                if pair:
                    fast.max_pool2x2(x3, b3, a3, lo, hi)
                else:
                    fast.max_pool2d(x3, *g.K, *g.s, *g.d, b3, a3, lo, hi)
            parallel_rows(block, x3.shape[0], best.size * len(pos), xm)
            self.arg = arg
            return best
        if not pos or not _covers(pos[0][1], g):
            best = _first_max_general(xm, x, pos, out_shape, arg, g)
        else:
            # the first kernel position lies inside every window (no padding before):
            # later positions win only when larger, so the first maximum wins, as in
            # PyTorch; three passes per position. ``arg`` is updated without masked
            # writes (slow on random masks): later positions have larger codes, so
            # taking one is a maximum.
            best = xm.empty(out_shape, x.dtype)
            # windows that step along the last dim (stride > 1 there): each position's
            # values are a strided view whose every read costs about what copying
            # it does (2x2 pooling of 26x26 maps: 0.3 ms a read against 0.06 ms
            # contiguous), so they are copied once and read twice from the copy
            gather = g.s[-1] > 1

            def block(lo, hi):  # samples (and channels) are independent: split over them
                for a, b in _pieces(xm, lo, hi, x[:1].nbytes + best[:1].nbytes * 3):
                    piece(a, b)

            def piece(lo, hi):
                xb, bb, ab = x[lo:hi], best[lo:hi], arg[lo:hi]
                bb[...] = xb[pos[0][2]]
                ab.fill(pos[0][0])
                upd = xm.empty(bb.shape, bool)
                code = xm.empty(bb.shape, arg.dtype)
                cur = xm.empty(bb.shape, x.dtype) if gather else None
                for k, osl, isl in pos[1:]:
                    b, xs, u, t, a = bb[osl], xb[isl], upd[osl], code[osl], ab[osl]
                    if gather:
                        # the position's strided values read once, into a contiguous
                        # block that the comparison and the maximum then read
                        xs = cur[osl]
                        xs[...] = xb[isl]
                    xm.greater(xs, b, out=u)
                    xm.multiply(_as_int(u, t.dtype), k, out=t)
                    xm.maximum(a, t, out=a)
                    xm.maximum(b, xs, out=b)
            parallel_rows(block, x.shape[0], best.size * 4 * len(pos), xm)
        if x.dtype.kind == "f" or reduced_float(x.dtype):  # (bfloat16: NumPy's kind "V")
            nan = xm.isnan(best)
            if nan.any():
                for k, osl, isl in pos:  # PyTorch keeps the last NaN of a window
                    arg[osl] = xm.where(nan[osl] & xm.isnan(x[isl]), arg.dtype.type(k),
                                        arg[osl])
        self.arg = arg
        return best

    def backward(self, gy, *_):
        if self._hook_at is None:
            return _adjoint_in_x(self, self.adjoint, (gy, self.arg, self.g)), None
        # saved-tensor hooks packed the input and the indices: the gradient goes where the
        # indices their unpack gives back point (ember's own window positions when those
        # are unchanged)
        (x,), (flat,) = self._saved_and_hooked(None)
        if flat.shape == self.arg.shape and \
                bool((flat == flat_indices(self.arg, self.g)).all()):
            return _adjoint_in_x(self, self.adjoint, (gy, self.arg, self.g), x), None
        return _flat_in_x(self, ScatterFlat.apply(gy, flat, self.g.S, True), x), None

    def jvp(self, t, _):
        return PoolGather.apply(t, self.arg, self.g)  # the tangent at each window's max

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``): each window's gradient at its maximum."""
        return [object.__new__(PoolScatter).forward(grads[0], self.arg, self.g), None]


def _flat_in_x(node, gx, x=None):
    """Pooling's input gradient does not depend on the input: under create_graph it is
    marked so that its derivative in the input is zero (PyTorch's), not missing. ``x``:
    the saved input, when backward has read it already."""
    if _grad_state.grad_enabled:
        if x is None:
            x = node.saved_tensors[0]
        if x._requires_grad:
            return gx + _ZerosLikeOf.apply(gx, x)
    return gx


def _adjoint_in_x(node, cls, args, x=None):
    """``cls.apply(*args)``, the adjoint that is pooling's input gradient; under
    create_graph also given the input ``x`` (``node``'s saved one when None), as PyTorch's
    ``*BackwardBackward0`` node lists it: the adjoint's derivative in ``x`` is zeros (a
    tensor, not None) with no other node in the graph. ``cls``'s forward takes ``x`` last
    and its backward adds :func:`_zero_in_x`."""
    if _grad_state.grad_enabled:
        if x is None:
            x = node.saved_tensors[0]
        if x._requires_grad:
            return cls.apply(*args, x)
    return cls.apply(*args)


def _plus_zero(a):
    """``a + 0`` in place for a floating array: -0.0 becomes +0.0, as where PyTorch's
    kernel adds into zeros (the recorded adjoints keep that; the plain pass's kernels
    may leave -0.0)."""
    if a.dtype.kind in "fc" or reduced_float(a.dtype):
        a += 0
    return a


def _zero_in_x(node, gx):
    """The gradient for an adjoint's last input ``x`` where :func:`_adjoint_in_x` gave
    it (``node.with_x``): zeros of its shape, the adjoint's output's; else nothing."""
    return (zeros_like(gx),) if node.with_x else ()


# bytes a piece of samples of the NumPy pooling loops works on: their several passes
# per kernel position then read what the previous ones left in cache (the small CNN's
# first pool, 64x32x26x26: forward 3.8 -> 2.8 ms, with its gradient 9.7 -> 6.5, one
# thread; 256 KiB pieces make too many NumPy calls; docs/performance/cnn.md,
# "fourteenth pass")
_PIECE_BYTES = 1 << 20


def _pieces(xm, lo, hi, per_sample):
    """``(start, end)`` pieces of samples ``lo:hi`` of about :data:`_PIECE_BYTES` each
    (``per_sample`` bytes a sample) for NumPy arrays, one piece for a GPU's (``xm``: the
    array module); each sample's values do not depend on the pieces."""
    if xm is not np:
        return [(lo, hi)]
    step = max(1, _PIECE_BYTES // max(per_sample, 1))
    return [(a, min(a + step, hi)) for a in range(lo, hi, step)]


def _as_int(mask, dtype):
    """A bool mask as 0/1 integers of ``dtype`` (a free view for int8)."""
    return mask.view(dtype) if np.dtype(dtype).itemsize == 1 else mask.astype(dtype)


def _first_max_general(xm, x, pos, out_shape, arg, g):
    """Window maxima and the first position reaching each (into ``arg``) when the first
    kernel position is not inside every window (padding): the maxima first, then a scan
    for the first position equal to its window's maximum. A window no kernel position
    lands inside (dilation stepping over a small input) is -inf (the dtype's lowest) at
    PyTorch's index, as its kernel leaves them."""
    best = xm.full(out_shape, _lowest(x.dtype), dtype=x.dtype)
    for _, osl, isl in pos:
        b = best[osl]
        xm.maximum(b, x[isl], out=b)
    arg[...] = 0
    found = xm.zeros(out_shape, bool)
    for k, osl, isl in pos:
        m = x[isl] == best[osl]
        m &= ~found[osl]
        if k:
            a = arg[osl]
            a += m.astype(arg.dtype) * k
        f = found[osl]
        f |= m
    empty = ~found & ~xm.isnan(best) if x.dtype.kind == "f" or reduced_float(x.dtype) \
        else ~found
    if empty.any():
        arg[...] = xm.where(empty, _start_codes(g, xm).astype(arg.dtype), arg)
    return best


def _start_codes(g, xm):
    """Per window, the kernel position PyTorch's max-pool kernels start from: along each
    dim the first one at or past the input's start (its ``while (start < 0) start +=
    dilation``), as a flat kernel index broadcast over the output's dims."""
    code = xm.zeros(tuple(g.O), np.int64)
    for i in range(g.nd):
        start = np.arange(g.O[i]) * g.s[i] - g.lo[i]
        k = np.minimum(np.where(start < 0, -(start // g.d[i]), 0), g.K[i] - 1)
        code = code * g.K[i] + xm.asarray(k.reshape((-1,) + (1,) * (g.nd - 1 - i)))
    return code


class MaxPoolWithIndices(MaxPool):
    """:class:`MaxPool` that also returns PyTorch's flat indices into each input plane."""
    _node_name = "MaxPool2DWithIndicesBackward0"
    n_outputs = 2
    differentiable_outputs = (0,)

    def forward(self, x, g):
        out = MaxPool.forward(self, x, g)
        return out, flat_indices(self.arg, self.g)

    def jvp(self, t, _):
        return PoolGather.apply(t, self.arg, self.g), None


class MaxPool3D(MaxPool):
    """:class:`MaxPool` over three dims (PyTorch's 3-d node)."""
    _node_name = "MaxPool3DWithIndicesBackward0"
    kernel = "max_pool3d"


class MaxPool3DWithIndices(MaxPoolWithIndices):
    """:class:`MaxPoolWithIndices` over three dims (PyTorch's 3-d node)."""
    _node_name = "MaxPool3DWithIndicesBackward0"
    kernel = "max_pool3d"


def flat_indices(arg, g):
    """Flat input index (within one channel's plane) of kernel position ``arg``."""
    xm = array_module(arg)
    nd = g.nd
    ks = np.unravel_index(np.arange(int(np.prod(g.K))), g.K)
    flat = xm.zeros(arg.shape, np.int64)
    stride = 1
    for i in range(nd - 1, -1, -1):
        o = xm.arange(g.O[i]).reshape((-1,) + (1,) * (nd - 1 - i)) * g.s[i] - g.lo[i]
        k = xm.asarray(ks[i] * g.d[i])[arg]
        flat += (o + k) * stride
        stride *= g.S[i]
    return flat


class PoolScatter(Primitive):
    """Each window's gradient put at its max position (the adjoint of :class:`PoolGather`)."""
    _node_name = "MaxPool2DWithIndicesBackwardBackward0"
    batch = _batch.pool_positions
    n_args = 3  # then the pooled input, under create_graph (``_adjoint_in_x``)

    def forward(self, gy, arg, g, x=None):
        self.arg, self.g, self.with_x = arg, g, x is not None
        out = self._scatter(gy, arg, g)
        # recorded (create_graph): the positions that did not win hold +0.0, as PyTorch's
        # (the plain pass's ``g * 0`` leaves -0.0 under a negative g)
        return _plus_zero(out) if x is not None else out

    def _scatter(self, gy, arg, g):
        xm = array_module(gy)
        disjoint = _disjoint(g)
        # a product with the 0/1 mask is the fast way to keep only the maxima, but an
        # infinite or NaN gradient times 0 is NaN: such gradients take a select instead
        # (elsewhere the positions that did not win get exactly 0, as in PyTorch)
        finite = gy.dtype.kind not in "fc" or bool(xm.isfinite(gy).all())
        # (the kernels index without bounds checks: ``arg`` must match ``gy`` exactly;
        # a vmapped ``arg`` broadcast to the batch is made whole by its reshape)
        fast = _numba_pool(xm, gy.dtype, g) if disjoint and arg.shape == gy.shape else None
        if fast is not None:
            # windows that tile the input leave nothing unwritten: no zeroing pass
            tile = tuple(g.s) == tuple(g.K) and all(d == 1 for d in g.d)
            shape = gy.shape[:gy.ndim - g.nd] + tuple(g.S)
            buf = xm.empty(shape, gy.dtype) if tile else xm.zeros(shape, gy.dtype)
            b3 = buf.reshape((-1,) + tuple(g.S))
            g3, a3 = gy.reshape((-1,) + tuple(g.O)), arg.reshape((-1,) + tuple(g.O))
            zero = gy.dtype.type(0)
            pair = _pair(g)

            def block(lo, hi):
                if pair:
                    fast.max_pool2x2_scatter(g3, a3, finite, zero, b3, lo, hi)
                else:
                    fast.max_pool2d_scatter(g3, a3, *g.K, *g.s, *g.d, finite, zero, b3, lo,
                                            hi)
            parallel_rows(block, b3.shape[0], gy.size * 2 * math.prod(g.K), xm)
            return buf
        buf = _scatter_buffer(xm, gy, g, disjoint)
        pos = list(_positions(g))

        def block(lo, hi):  # independent per sample and channel: split over them
            for a, b in _pieces(xm, lo, hi, buf[:1].nbytes + gy[:1].nbytes * 2):
                piece(a, b)

        def piece(lo, hi):
            bb, gb, ab = buf[lo:hi], gy[lo:hi], arg[lo:hi]
            for k, osl, isl in pos:
                if not finite:
                    part = xm.where(ab[osl] == k, gb[osl], gb.dtype.type(0))
                    if disjoint:
                        bb[isl] = part
                    else:
                        bb[isl] += part
                elif disjoint:
                    xm.multiply(gb[osl], ab[osl] == k, out=bb[isl])
                else:
                    bb[isl] += gb[osl] * (ab[osl] == k)
        parallel_rows(block, gy.shape[0], gy.size * 2 * len(pos), xm)
        return buf

    def backward(self, gx):
        return (PoolGather.apply(gx, self.arg, self.g), None, None) + _zero_in_x(self, gx)

    jvp = _jvp.linear(0)


def _scatter_buffer(xm, gy, g, disjoint):
    """The (..., *S) result of :class:`PoolScatter`'s NumPy loops, zeros where no
    window's write lands: left unfilled where the windows tile the input exactly
    (stride equal to the kernel, no dilation or padding, no input past the last window:
    each kernel position's strided write covers its share of every window), as with the
    CNN's 2x2 pooling of 26x26 maps (a 5.5 MB fill less). Where inputs are left over
    (11x11 maps), zeroing only those strips takes longer than the whole fill: their
    inner loops are a single element long."""
    shape = gy.shape[:gy.ndim - g.nd] + tuple(g.S)
    if disjoint and all(s == k and d == 1 and not lo and o * s == a for s, k, d, lo, o, a in
                        zip(g.s, g.K, g.d, g.lo, g.O, g.S)):
        return xm.empty(shape, gy.dtype)
    return xm.zeros(shape, gy.dtype)


class PoolGather(Primitive):
    """Each window's value at the remembered max position."""
    _node_name = "MaxPool2DWithIndicesBackwardBackward1"
    batch = _batch.pool_positions

    def forward(self, x, arg, g):
        self.arg, self.g = arg, g
        xm = array_module(x)
        out = xm.zeros(arg.shape, x.dtype)
        zero = x.dtype.type(0)
        for k, osl, isl in _positions(g):
            # a select, not a product with the mask: inf * 0 would be NaN
            out[osl] += xm.where(arg[osl] == k, x[isl], zero)
        return out

    def backward(self, gy):
        return PoolScatter.apply(gy, self.arg, self.g), None, None

    jvp = _jvp.linear(0)


class AvgPool(Primitive):
    """Sum over each window divided by ``div`` (broadcastable to the output)."""
    _node_name = "AvgPool2DBackward0"
    save_inputs = (0,)
    kernel, refuses = "avg_pool2d", "bIc"  # (also 1-d: PyTorch runs its 2-d kernel)

    def forward(self, x, g, div):
        refuse_dtype(self, x)
        nd = len(g.K)
        if tuple(x.shape[x.ndim - nd:]) != g.S:  # a recorded graph replayed at another size
            g = g.at(x.shape[x.ndim - nd:])
            div = _avg_divisor(g, *g.extra)
            if not isinstance(div, float):
                div = array_module(x).asarray(div)
        self.g, self.div = g, div
        xm = array_module(x)
        integer = x.dtype.kind in "iub"
        # half and bfloat16 sum in float32 and round once, as PyTorch's kernels
        acc_dt = np.float64 if integer else np.float32 if reduced_float(x.dtype) or \
            x.dtype == np.float16 else x.dtype
        pos = list(_positions(g))
        if _covers(pos[0][1], g):
            acc = x[pos[0][2]].astype(acc_dt, copy=True)
            rest = pos[1:]
        else:
            acc = xm.zeros(x.shape[:x.ndim - g.nd] + tuple(g.O), acc_dt)
            rest = pos
        for _, osl, isl in rest:
            acc[osl] += x[isl]
        if integer:
            # integer division truncates toward zero, as in PyTorch (div may be negative)
            return (xm.sign(acc) * xm.sign(div) * (xm.abs(acc) // xm.abs(div))).astype(x.dtype)
        acc /= div
        return acc if acc.dtype == x.dtype else acc.astype(x.dtype)

    def backward(self, gy):
        return _adjoint_in_x(self, self.adjoint, (gy, self.g, self.div)), None, None

    jvp = _jvp.linear(0)
    batch = _batch.passthrough


class AvgPoolAdjoint(Primitive):
    """Each window's gradient divided by ``div`` and spread over the window."""
    _node_name = "AvgPool2DBackwardBackward0"
    batch = _batch.passthrough
    n_args = 3  # then the pooled input, under create_graph (``_adjoint_in_x``)

    def forward(self, gy, g, div, x=None):
        self.g, self.div, self.with_x = g, div, x is not None
        xm = array_module(gy)
        gd = gy / xm.asarray(div, dtype=gy.dtype)
        buf = xm.zeros(gy.shape[:gy.ndim - g.nd] + tuple(g.S), gy.dtype)
        disjoint = _disjoint(g)
        # the kernel positions last to first: each input element then gets its windows'
        # shares in PyTorch's order (its windows row-major), each sum rounding as there
        for _, osl, isl in reversed(list(_positions(g))):
            if disjoint:
                buf[isl] = gd[osl]
            else:
                buf[isl] += gd[osl]
        return _plus_zero(buf) if self.with_x else buf

    def backward(self, gx):
        return (AvgPool.apply(gx, self.g, self.div), None, None) + _zero_in_x(self, gx)

    jvp = _jvp.linear(0)


class AvgPool3D(AvgPool):
    """:class:`AvgPool` over three dims (PyTorch's 3-d node)."""
    _node_name = "AvgPool3DBackward0"
    kernel, refuses = "avg_pool3d_out_frame", "bIch"  # (no half loops in 3-d)


class AvgPool3DAdjoint(AvgPoolAdjoint):
    """:class:`AvgPoolAdjoint` over three dims (PyTorch's 3-d node)."""
    _node_name = "AvgPool3DBackwardBackward0"

    def backward(self, gx):
        return (AvgPool3D.apply(gx, self.g, self.div), None, None) + _zero_in_x(self, gx)


class PoolScatter3D(PoolScatter):
    """:class:`PoolScatter` over three dims (PyTorch's 3-d node)."""
    _node_name = "MaxPool3DWithIndicesBackwardBackward0"


# each pooling's input gradient, the node PyTorch's double backward records
MaxPool.adjoint = PoolScatter
MaxPool3D.adjoint = MaxPool3DWithIndices.adjoint = PoolScatter3D
AvgPool.adjoint = AvgPoolAdjoint
AvgPool3D.adjoint = AvgPool3DAdjoint


class GatherFlat(Primitive):
    """``out[..., o] = x[..., idx[..., o]]`` over the flattened spatial dims."""
    _node_name = "GatherBackward0"

    def forward(self, x, idx, nd):
        self.idx, self.nd, self.S = idx, nd, x.shape[x.ndim - nd:]
        lead = x.shape[:x.ndim - nd]
        xm = array_module(x)
        # explicit sizes: with a 0 in lead, -1 would be ambiguous
        flat = x.reshape(lead + (int(np.prod(self.S)),))
        pos = idx.reshape(lead + (int(np.prod(idx.shape[len(lead):])),))
        out = xm.take_along_axis(flat, pos, -1)
        return out.reshape(idx.shape)

    def backward(self, gy):
        return ScatterFlat.apply(gy, self.idx, self.S, True), None, None

    jvp = _jvp.linear(0)


class ScatterFlat(Primitive):
    """Zeros of spatial size ``S`` with ``g`` added (or, without ``accumulate``, written)
    at the flat indices ``idx``."""
    _node_name = "ScatterAddBackward0"

    def forward(self, gy, idx, S, accumulate):
        self.idx, self.S = idx, tuple(S)
        nd = len(S)
        xm = array_module(gy)
        lead = gy.shape[:gy.ndim - nd]
        rows = int(np.prod(lead))
        plane = int(np.prod(S))
        if rows == 0 or gy.size == 0:  # nothing to place (and -1 in a reshape is ambiguous)
            return xm.zeros(lead + self.S, gy.dtype)
        if accumulate:
            offs = (xm.arange(rows) * plane).reshape(-1, 1)
            pos = (idx.reshape(rows, -1) + offs).ravel()
            out = xm.bincount(pos, weights=gy.reshape(-1).astype(np.float64),
                              minlength=rows * plane).astype(gy.dtype)
        else:
            out = xm.zeros((rows, plane), gy.dtype)
            xm.put_along_axis(out, idx.reshape(rows, -1), gy.reshape(rows, -1), -1)
        return out.reshape(lead + self.S)

    def backward(self, gx):
        return GatherFlat.apply(gx, self.idx, len(self.S)), None, None, None

    jvp = _jvp.linear(0)


class MaxUnpool(ScatterFlat):
    """``max_unpool2d``: :class:`ScatterFlat` writing (not adding) each value at its
    index, PyTorch's unpooling node."""
    _node_name = "MaxUnpool2DBackward0"


class MaxUnpool3D(ScatterFlat):
    """``max_unpool3d``: as :class:`MaxUnpool`, PyTorch's 3-d node."""
    _node_name = "MaxUnpool3DBackward0"


def _as_2d(fn, input, *rest):
    """A 1-d pooling as PyTorch runs it: on ``input.unsqueeze(-2)`` by the 2-d kernel
    ``fn(x, *rest)``, its outputs squeezed back (unsqueeze, the 2-d node, squeeze)."""
    out = fn(input.unsqueeze(-2), *rest)
    if isinstance(out, tuple):
        return tuple(o.squeeze(-2) for o in out)
    return out.squeeze(-2)


# ----- geometry and argument checks ----------------------------------------------------

def _pool_args(name, nd, kernel_size, stride, padding, dilation):
    dims = ("H", "W") if nd == 2 else ("T", "H", "W") if nd == 3 else ("W",)
    k = _tuple_arg(name, "kernel_size", kernel_size, nd)
    stride = int_args(stride)
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _tuple_arg(name, "stride", stride, nd)
    p = _tuple_arg(name, "padding", padding, nd)
    d = _tuple_arg(name, "dilation", dilation, nd)
    if any(v <= 0 for v in k):
        raise RuntimeError("kernel size should be greater than zero, but got " +
                           " ".join(f"k{n}: {v}" for n, v in zip(dims, k)))
    if any(v == 0 for v in s):
        raise RuntimeError("stride should not be zero")
    if any(v < 0 for v in s):
        raise RuntimeError("stride should be greater than zero, but got " +
                           " ".join(f"d{n}: {v}" for n, v in zip(dims, s)))
    if any(v <= 0 for v in d):
        raise RuntimeError("dilation should be greater than zero, but got " +
                           " ".join(f"dilation{n}: {v}" for n, v in zip(dims, d)))
    for pi, ki, di in zip(p, k, d):
        if pi < 0:
            raise RuntimeError("pad must be non-negative")
        if pi > ((ki - 1) * di + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pi}, kernel_size={ki} and dilation={di}")
    return k, s, p, d


def _tuple_arg(name, arg, v, nd):
    v = int_args(v)  # (0-d integer tensors, as torch takes them)
    if isinstance(v, (int, np.integer)):
        return (int(v),) * nd
    v = tuple(int(i) for i in v)
    if len(v) == 1:
        return v * nd
    if len(v) != nd:
        raise RuntimeError(f"{name}: {arg} must either be a single int, or a tuple of {nd} ints")
    return v


def _pool_geom(x_shape, nd, k, s, p, d, ceil_mode):
    S = tuple(x_shape[-nd:])
    O = []
    for a, ki, si, pi, di in zip(S, k, s, p, d):
        num = a + 2 * pi - di * (ki - 1) - 1 + (si - 1 if ceil_mode else 0)
        o = num // si + 1
        if ceil_mode and (o - 1) * si >= a + pi:
            o -= 1
        O.append(o)
    if any(o < 1 for o in O):
        lead = x_shape[-nd - 1] if len(x_shape) > nd else 1
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (lead,) + S))}). Calculated "
                           f"output size: ({'x'.join(map(str, (lead,) + tuple(O)))}). Output "
                           f"size is too small")
    hi = tuple(max(pi, (o - 1) * si + di * (ki - 1) + 1 - a - pi)
               for a, o, ki, si, pi, di in zip(S, O, k, s, p, d))
    return Geom(S, tuple(O), k, s, d, p, hi, 1, bool(ceil_mode))


def _check_input(name, x, nd):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.dim() not in (nd + 1, nd + 2) or any(v == 0 for v in x.shape[-nd - 1:]):
        raise RuntimeError(f"non-empty {nd + 1}D or {nd + 2}D (batch mode) tensor expected "
                           f"for input")


class _MaxPool1DImpl:
    """PyTorch's own 1-d kernel, which it runs without indices for an input that does not
    require grad: floating types only."""
    kernel, refuses = "max_pool1d_impl", "biuc"


def _max_pool(name, nd, input, kernel_size, stride, padding, dilation, ceil_mode,
              return_indices):
    _check_input(name, input, nd)
    if nd == 1 and not return_indices and not input.requires_grad:
        refuse_dtype(_MaxPool1DImpl, input._data)
    k, s, p, d = _pool_args(name, nd, kernel_size, stride, padding, dilation)
    g = _pool_geom(input.shape, nd, k, s, p, d, ceil_mode)
    if nd == 1:  # PyTorch's 1-d pooling is its 2-d kernel over a height of 1
        g = _pool_geom(input.shape[:-1] + (1,) + input.shape[-1:], 2, (1,) + k, (1,) + s,
                       (0,) + p, (1,) + d, ceil_mode)
        return _as_2d(_max_pool_op, input, g, return_indices)
    return _max_pool_op(input, g, return_indices)


def _max_pool_op(input, g, return_indices):
    if return_indices:
        out, idx = (MaxPool3DWithIndices if g.nd == 3 else MaxPoolWithIndices).apply(input, g)
        return out, idx
    return (MaxPool3D if g.nd == 3 else MaxPool).apply(input, g)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-D max pooling over (N, C, L) or (C, L); ``stride`` defaults to ``kernel_size``.
    With ``return_indices`` also returns the argmax positions (flat indices into L)."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling over (N, C, H, W) or (C, H, W); ``stride`` defaults to ``kernel_size``.
    With ``return_indices`` also returns the argmax positions as flat indices into H*W.

    >>> max_pool2d(ember.arange(16.).reshape(1, 1, 4, 4), 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-D max pooling over (N, C, D, H, W) or (C, D, H, W)."""
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``max_pool1d`` returning (values, indices)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``max_pool2d`` returning (values, indices)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``max_pool3d`` returning (values, indices)."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _avg_divisor(g, count_include_pad, divisor_override):
    if divisor_override is not None:
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        return float(divisor_override)
    div = np.ones((), np.float64)
    for i in range(g.nd):
        start = np.arange(g.O[i]) * g.s[i] - g.lo[i]
        end = np.minimum(start + g.K[i], g.S[i] + g.lo[i])
        n = end - start if count_include_pad else \
            np.minimum(end, g.S[i]) - np.maximum(start, 0)
        div = div[..., None] * n
    return div


def _avg_pool(name, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    _check_input(name, input, nd)
    k, s, p, d = _pool_args(name, nd, kernel_size, stride, padding, 1)
    g = _pool_geom(input.shape, nd, k, s, p, d, ceil_mode)
    if nd == 1:  # PyTorch's 1-d pooling is its 2-d kernel over a height of 1
        g = _pool_geom(input.shape[:-1] + (1,) + input.shape[-1:], 2, (1,) + k, (1,) + s,
                       (0,) + p, (1, 1), ceil_mode)
    g.extra = (count_include_pad, divisor_override)
    div = _avg_divisor(g, count_include_pad, divisor_override)
    if not isinstance(div, float):
        div = array_module(input._data).asarray(div)
    op = AvgPool3D if nd == 3 else AvgPool
    return _as_2d(op.apply, input, g, div) if nd == 1 else op.apply(input, g, div)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-D average pooling over (N, C, L) or (C, L)."""
    if _mode_active[0] and (r := traced_ints(kernel_size, stride, padding)) is not None:
        # a traced window, stride, padding or divisor: the geometry is computed in Python,
        # so the call is one node
        return r[0].composite("avg_pool1d", avg_pool1d, (input, *r[1][:3], ceil_mode,
                                                      count_include_pad, *r[1][3:]), {})
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


@with_out
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-D average pooling over (N, C, H, W) or (C, H, W). ``count_include_pad`` counts the
    zero padding in the divisor; ``divisor_override`` replaces the divisor."""
    if _mode_active[0] and \
            (r := traced_ints(kernel_size, stride, padding, divisor_override)) is not None:
        # a traced window, stride, padding or divisor: the geometry is computed in Python,
        # so the call is one node
        return r[0].composite("avg_pool2d", avg_pool2d, (input, *r[1][:3], ceil_mode,
                                                      count_include_pad, *r[1][3:]), {})
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


@with_out
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-D average pooling over (N, C, D, H, W) or (C, D, H, W)."""
    if _mode_active[0] and \
            (r := traced_ints(kernel_size, stride, padding, divisor_override)) is not None:
        # a traced window, stride, padding or divisor: the geometry is computed in Python,
        # so the call is one node
        return r[0].composite("avg_pool3d", avg_pool3d, (input, *r[1][:3], ceil_mode,
                                                      count_include_pad, *r[1][3:]), {})
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)
