"""Convolutions: conv1d/2d/3d, their transposes, and im2col (unfold) / col2im (fold).

Three primitives close under differentiation. With ``B(x, w, y) = <y, conv(x, w)>``:

- :class:`Conv` ``y = conv(x, w)`` (+ bias),
- :class:`ConvInput` ``x = conv_input(y, w)``, the adjoint of ``conv`` in ``x``
  (which is ``conv_transpose``),
- :class:`ConvWeight` ``w = conv_weight(x, y)``, the adjoint of ``conv`` in ``w``.

Each one's backward is written with the other two, so second derivatives (a
gradient penalty through a conv net) fall out. Forward is im2col: a strided
window view of the padded input, one copy into ``(N, C*K, O)`` columns, one
(batched) matmul that lands directly in (N, F, O) order. ``conv_input`` picks its
path by shape (:func:`_input_path`: the stride-1 transposed convolution, span-layout
or batch-last columns, or col2im with one strided add per kernel position); the
timings behind each choice are in docs/performance.md.
"""
import itertools

import numpy as np

from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend.dtypes import FROM_NP
from ember.backend.threads import contiguous, parallel_rows
from ember.ops import _batch, _batch_nn, _jvp

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]


class Geom:
    """Geometry of one convolution: everything but the tensors.

    ``S`` input spatial size, ``O`` output spatial size, ``K`` kernel size, ``s``
    stride, ``d`` dilation, ``lo``/``hi`` zero padding before/after each spatial dim,
    ``G`` groups.
    """

    __slots__ = ("S", "O", "K", "s", "d", "lo", "hi", "G", "ceil", "extra")

    def __init__(self, S, O, K, s, d, lo, hi, G, ceil=None, extra=None):
        self.S, self.O, self.K, self.s, self.d = S, O, K, s, d
        self.lo, self.hi, self.G = lo, hi, G
        self.ceil = ceil    # pooling: ceil_mode (None: a convolution's floor and padding)
        self.extra = extra  # average pooling: (count_include_pad, divisor_override)

    def at(self, S):
        """This geometry for an input of spatial size ``S``. A recorded graph keeps the
        geometry computed for the example; replayed on an input of another size, each
        op recomputes it from the same arguments, as the functional call did."""
        S = tuple(S)
        if S == self.S:
            return self
        K, s, d, lo = self.K, self.s, self.d, self.lo
        if self.ceil is None:
            hi = self.hi
            O = tuple((a + p + q - e * (k - 1) - 1) // t + 1
                      for a, p, q, e, k, t in zip(S, lo, hi, d, K, s))
        else:
            O = []
            for a, k, t, p, e in zip(S, K, s, lo, d):
                o = (a + 2 * p - e * (k - 1) - 1 + (t - 1 if self.ceil else 0)) // t + 1
                if self.ceil and (o - 1) * t >= a + p:
                    o -= 1
                O.append(o)
            O = tuple(O)
            hi = tuple(max(p, (o - 1) * t + e * (k - 1) + 1 - a - p)
                       for a, o, k, t, p, e in zip(S, O, K, s, lo, d))
        if any(o < 1 for o in O):
            raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, S))}). "
                               f"Calculated output size per channel: "
                               f"({' x '.join(map(str, O))}). Output size is too small")
        return Geom(S, O, K, s, d, lo, hi, self.G, self.ceil, self.extra)

    def at_transposed(self, O):
        """For a transposed convolution (whose input has the spatial size ``O``): this
        geometry for an input of spatial size ``O``, the output_padding kept."""
        O = tuple(O)
        if O == self.O:
            return self
        K, s, d, lo, hi = self.K, self.s, self.d, self.lo, self.hi
        S = tuple(a - ((o - 1) * t - p - q + e * (k - 1) + 1) + (n - 1) * t - p - q +
                  e * (k - 1) + 1
                  for a, o, n, t, p, q, e, k in zip(self.S, self.O, O, s, lo, hi, d, K))
        return Geom(S, O, K, s, d, lo, hi, self.G)

    @property
    def nd(self):
        return len(self.K)


def _prod(xs):
    n = 1
    for v in xs:
        n *= v
    return n


def _as_strided(a, shape, strides):
    xp = array_module(a)
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def pad_array(x, lo, hi, value=0):
    """``x`` with its trailing ``len(lo)`` dims padded by ``value`` (no copy if no pad)."""
    nd = len(lo)
    if not any(lo) and not any(hi):
        return x
    lead = x.shape[:x.ndim - nd]
    sp = x.shape[x.ndim - nd:]
    out = array_module(x).full(lead + tuple(n + a + b for n, a, b in zip(sp, lo, hi)), value,
                               dtype=x.dtype)
    out[(Ellipsis,) + tuple(slice(a, a + n) for a, n in zip(lo, sp))] = x
    return out


def windows(xp, O, K, s, d):
    """The view ``(N, C, *O, *K)`` of sliding windows over padded ``xp``."""
    nd = len(K)
    st = xp.strides
    sp = st[xp.ndim - nd:]
    shape = xp.shape[:xp.ndim - nd] + tuple(O) + tuple(K)
    strides = st[:xp.ndim - nd] + tuple(a * b for a, b in zip(sp, s)) + \
        tuple(a * b for a, b in zip(sp, d))
    return _as_strided(xp, shape, strides)


def im2col(x, g):
    """Columns ``(N, C*prod(K), prod(O))`` of ``x`` (N, C, *S) for geometry ``g``: one
    strided window view of the padded input, copied once."""
    nd = g.nd
    n, c = x.shape[:2]
    win = windows(pad_array(x, g.lo, g.hi), g.O, g.K, g.s, g.d)  # N C *O *K
    order = (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd))
    col = array_module(x).ascontiguousarray(win.transpose(order))
    return col.reshape(n, c * _prod(g.K), _prod(g.O))


def im2col_rows(x, g):
    """Columns as one matrix ``(C*prod(K), N*prod(O))`` (for the weight gradient)."""
    nd = g.nd
    n, c = x.shape[:2]
    win = windows(pad_array(x, g.lo, g.hi), g.O, g.K, g.s, g.d)
    order = (1,) + tuple(range(2 + nd, 2 + 2 * nd)) + (0,) + tuple(range(2, 2 + nd))
    col = array_module(x).ascontiguousarray(win.transpose(order))
    return col.reshape(c * _prod(g.K), n * _prod(g.O))


def col2im(col, g):
    """The adjoint of :func:`im2col`: columns ``(N, C, *K, *O)`` (any strides) summed
    into a contiguous (N, C, *S), one strided add per kernel position."""
    xp = array_module(col)
    n, c = col.shape[:2]
    sp = tuple(a + lo + hi for a, lo, hi in zip(g.S, g.lo, g.hi))
    buf = xp.zeros((n, c) + sp, dtype=col.dtype)
    disjoint = all(s >= d * (k - 1) + 1 for s, d, k in zip(g.s, g.d, g.K))
    for kk in itertools.product(*[range(k) for k in g.K]):
        sl = (Ellipsis,) + tuple(slice(k * d, k * d + s * (o - 1) + 1, s)
                                 for k, d, s, o in zip(kk, g.d, g.s, g.O))
        src = col[(slice(None), slice(None)) + kk]
        if disjoint:
            buf[sl] = src
        else:
            buf[sl] += src
    return _crop(buf, g)


# ConvWeight: up to this many columns per window (C/G * prod(K)), per-sample products
# summed over the batch beat one product over all samples (measured, OpenBLAS)
_PER_SAMPLE_CK = 128
# working-set size per block of samples for the multi-pass depthwise loops (L2-sized)
_BLOCK_BYTES = 1 << 18


def _bias_shape(b, nd):
    return b.reshape((1, -1) + (1,) * nd)


def _kernel_slices(g):
    """(kernel position, slice of the padded input it meets) for each kernel position."""
    for kk in itertools.product(*[range(k) for k in g.K]):
        yield kk, (Ellipsis,) + tuple(slice(k * d, k * d + s * (o - 1) + 1, s)
                                      for k, d, s, o in zip(kk, g.d, g.s, g.O))


def _stride1(g):
    return all(s == 1 for s in g.s)


def _crop(buf, g):
    """The unpadded (N, C, *S) part of a padded (N, C, *padded) array, contiguous."""
    if buf.shape[2:] != tuple(g.S):
        buf = buf[(Ellipsis,) + tuple(slice(lo, lo + a) for lo, a in zip(g.lo, g.S))]
    return contiguous(buf, array_module(buf))


def _transposed(y, g):
    """For a stride-1 geometry ``g``: ``(y', g')`` such that the convolution of ``y'``
    with the flipped weight (:func:`_flipped`) over ``g'`` is the adjoint of ``conv(.,
    w)`` over ``g`` applied to ``y``: ``y`` padded by ``d*(K-1) - lo`` before and
    ``S - O + lo`` after (``d*(K-1) - hi`` unless input positions past the last window
    exist, as with ``output_padding``), cropped where that is negative."""
    lo = [d * (k - 1) - p for d, k, p in zip(g.d, g.K, g.lo)]
    hi = [a - o + p for a, o, p in zip(g.S, g.O, g.lo)]
    if any(v < 0 for v in lo + hi):
        y = y[(Ellipsis,) + tuple(slice(max(-a, 0), o - max(-b, 0))
                                  for a, b, o in zip(lo, hi, g.O))]
        lo = [max(v, 0) for v in lo]
        hi = [max(v, 0) for v in hi]
    return y, Geom(tuple(y.shape[2:]), tuple(g.S), g.K, g.s, g.d, tuple(lo), tuple(hi), g.G)


def _flipped(w, G):
    """The weight (C, F/G, *K) of the transposed convolution of a weight (F, C/G, *K):
    input and output channels swapped within each group, the kernel reversed."""
    f, cg = w.shape[:2]
    K = tuple(w.shape[2:])
    wt = w.reshape((G, f // G, cg) + K).swapaxes(1, 2).reshape((G * cg, f // G) + K)
    return wt[(Ellipsis,) + (slice(None, None, -1),) * len(K)]


def _depthwise(g, cg):
    """Grouped convolutions with one input channel per group run as a few broadcast
    multiply-adds per kernel position instead of many tiny matrix products."""
    return g.G > 1 and cg == 1


class _Span:
    """Stride-1 layout: every kernel position is one contiguous run of the flattened
    padded plane, ``plane[off_k : off_k + L]``; output ``o`` sits at flat position
    ``sum(o_i * P_i)`` of the run (the positions in between are discarded). Long
    contiguous runs make the column copies and the adjoint's adds fast."""

    def __init__(self, g):
        sp = tuple(a + lo + hi for a, lo, hi in zip(g.S, g.lo, g.hi))
        P = [1] * len(sp)
        for i in range(len(sp) - 2, -1, -1):
            P[i] = P[i + 1] * sp[i + 1]
        self.sp, self.P = sp, tuple(P)
        self.plane = _prod(sp)
        self.L = sum((o - 1) * p for o, p in zip(g.O, P)) + 1
        self.offs = [(kk, sum(k * d * p for k, d, p in zip(kk, g.d, P)))
                     for kk in itertools.product(*[range(k) for k in g.K])]
        self.O = tuple(g.O)

    def view(self, span):
        """The (..., *O) outputs inside a (..., L) run, as a strided view."""
        isz = span.itemsize
        return _as_strided(span, span.shape[:-1] + self.O,
                           span.strides[:-1] + tuple(p * isz for p in self.P))

    def embed(self, y):
        """(..., *O) outputs placed in a zero (..., L) run."""
        nd = len(self.O)
        span = array_module(y).zeros(y.shape[:-nd] + (self.L,), dtype=y.dtype)
        self.view(span)[...] = y
        return span

    def plane_of(self, x, g):
        xp = array_module(x).ascontiguousarray(pad_array(x, g.lo, g.hi))
        return xp.reshape(x.shape[:2] + (self.plane,))


def _input_path(g, n, fg, cg):
    """How :class:`ConvInput` runs for ``n`` samples with ``fg`` / ``cg`` output / input
    channels per group (chosen by measurements with OpenBLAS on one core):

    - ``gemm``: 1x1 kernel, stride 1, no padding: the product is the answer;
    - ``transposed``: stride 1, at least 16 input channels per group, no more output
      than input channels (the columns of ``y`` are no larger than those of ``x``) and
      no more input positions than span columns (same-size convolutions): the
      convolution of the padded ``y`` with the flipped weight, with no adds at all;
    - ``last``: at most 128 output positions and at least 16 samples, with at least
      32 columns per window: :func:`_col2im_last` (small feature maps of a large batch);
    - ``span``: stride 1, at least 32 columns per window: :func:`_col2im_span`;
    - ``col2im``: otherwise (strided, or tiny products where the extra span columns
      cost more than the short strided adds).
    """
    wide = cg * _prod(g.K) >= 32
    if _stride1(g):
        if _prod(g.K) == 1 and not any(g.lo) and not any(g.hi) and tuple(g.S) == tuple(g.O):
            return "gemm"
        if cg >= 16 and fg <= cg and _prod(g.S) <= _Span(g).L:
            return "transposed"
    if wide and _prod(g.O) <= 128 and n >= 16:
        return "last"
    if wide and _stride1(g):
        return "span"
    return "col2im"


def _col2im_last(y, w, g):
    """``conv_input(y, w)`` with the batch as the last axis: one matrix product over all
    samples, then one strided add per kernel position whose rows (last output dim times
    the batch) are long even when the feature maps are small."""
    xm = array_module(y)
    n, f = y.shape[:2]
    G, cg, kp, o = g.G, w.shape[1], _prod(g.K), _prod(g.O)
    yt = contiguous(xm.moveaxis(y.reshape(n, f, o), 0, -1), xm)
    col = w.reshape(G, f // G, cg * kp).transpose(0, 2, 1) @ yt.reshape(G, f // G, o * n)
    col = col.reshape((G * cg,) + tuple(g.K) + tuple(g.O) + (n,))
    padded = tuple(a + lo + hi for a, lo, hi in zip(g.S, g.lo, g.hi))
    buf = xm.zeros((G * cg,) + padded + (n,), dtype=y.dtype)
    slices = list(_kernel_slices(g))

    def block(lo, hi):  # channels are independent: blocks of them on the intra-op threads
        bb, cb = buf[lo:hi], col[lo:hi]
        for kk, sl in slices:
            bb[(slice(None),) + sl[1:] + (slice(None),)] += cb[(slice(None),) + kk]
    parallel_rows(block, G * cg, col.size, xm)
    return _crop(xm.moveaxis(buf, -1, 0), g)


def _col2im_span(y, w, g):
    """Stride-1 ``conv_input(y, w)``: the columns made in the span layout (one matrix
    product over ``y`` embedded in zero runs), then one contiguous add per kernel
    position instead of a strided add with short rows."""
    xm = array_module(y)
    sp = _Span(g)
    n, f = y.shape[:2]
    G, cg, kp = g.G, w.shape[1], _prod(g.K)
    ys = sp.embed(y)  # N, F, L
    wm = w.reshape(G, f // G, cg * kp)
    if G == 1:
        col = wm[0].T @ ys
    else:
        col = wm.transpose(0, 2, 1) @ ys.reshape(n, G, f // G, sp.L)
    col = col.reshape(n, G * cg, kp, sp.L)
    buf = xm.zeros((n, G * cg, sp.plane), dtype=y.dtype)
    for k, (_, off) in enumerate(sp.offs):
        buf[..., off:off + sp.L] += col[:, :, k]
    return _crop(buf.reshape((n, G * cg) + sp.sp), g)


def _batch_blocks(n, item_bytes):
    """Slices of the batch whose per-sample working arrays fit in about
    ``_BLOCK_BYTES``: loops of several passes over data that stays in cache run up to
    twice as fast as passes over the whole batch."""
    b = max(1, _BLOCK_BYTES // max(item_bytes, 1))
    return [slice(i, min(i + b, n)) for i in range(0, n, b)]


def _dw_forward(x, w, g):
    """Depthwise ``conv(x, w)``: x (N, C, *S), w (C*m, 1, *K) -> (N, C*m, *O), as one
    broadcast multiply-add per kernel position over a cache-sized block of samples."""
    xm = array_module(x)
    n, c = x.shape[:2]
    m = w.shape[0] // c
    nd = g.nd
    O = tuple(g.O)
    out = xm.empty((n, c, m) + O, dtype=x.dtype)
    if _stride1(g):
        sp = _Span(g)
        xpf = sp.plane_of(x, g)[:, :, None]  # N, C, 1, plane
        wk = w.reshape((1, c, m, _prod(g.K), 1))
        blocks = _batch_blocks(n, c * m * sp.L * x.itemsize)
        acc = xm.empty((blocks[0].stop, c, m, sp.L), dtype=x.dtype)
        tmp = xm.empty_like(acc)
        for sl in blocks:
            a, t, xs = acc[:sl.stop - sl.start], tmp[:sl.stop - sl.start], xpf[sl]
            for k, (_, off) in enumerate(sp.offs):
                xm.multiply(wk[:, :, :, k], xs[..., off:off + sp.L], out=t if k else a)
                if k:
                    a += t
            out[sl] = sp.view(a)
        return out.reshape((n, c * m) + O)
    xp = pad_array(x, g.lo, g.hi)[:, :, None]
    wk = w.reshape((1, c, m) + tuple(g.K) + (1,) * nd)
    blocks = _batch_blocks(n, c * m * _prod(O) * x.itemsize)
    tmp = xm.empty((blocks[0].stop, c, m) + O, dtype=x.dtype)
    for sl in blocks:
        a, t, xs = out[sl], tmp[:sl.stop - sl.start], xp[sl]
        for i, (kk, ksl) in enumerate(_kernel_slices(g)):
            xm.multiply(wk[(Ellipsis,) + kk + (slice(None),) * nd], xs[ksl], out=t if i else a)
            if i:
                a += t
    return out.reshape((n, c * m) + O)


def _dw_input(y, w, g):
    """The adjoint of :func:`_dw_forward` in ``x``: y (N, C*m, *O) -> (N, C, *S). With
    stride 1 and m == 1 it is the depthwise convolution of the padded ``y`` with the
    reversed kernel."""
    xm = array_module(y)
    n, f = y.shape[:2]
    c = g.G
    m = f // c
    nd = g.nd
    if m == 1 and _stride1(g):
        yp, gt = _transposed(y, g)
        return _dw_forward(yp, w[(Ellipsis,) + (slice(None, None, -1),) * nd], gt)
    yv = y.reshape((n, c, m) + tuple(g.O))
    padded = tuple(a + lo + hi for a, lo, hi in zip(g.S, g.lo, g.hi))
    if _stride1(g):
        sp = _Span(g)
        ys = sp.embed(yv)  # N, C, m, L
        wk = w.reshape(c, m, _prod(g.K))
        buf = xm.zeros((n, c, sp.plane), dtype=y.dtype)
        for k, (_, off) in enumerate(sp.offs):
            buf[..., off:off + sp.L] += xm.einsum("ncml,cm->ncl", ys, wk[:, :, k])
        buf = buf.reshape((n, c) + padded)
    else:
        wk = w.reshape((c, m) + tuple(g.K))
        buf = xm.zeros((n, c) + padded, dtype=y.dtype)
        letters = "xyz"[:nd]
        for kk, sl in _kernel_slices(g):
            wkk = wk[(Ellipsis,) + kk]
            if m == 1:
                buf[sl] += yv[:, :, 0] * wkk.reshape((1, c) + (1,) * nd)
            else:
                buf[sl] += xm.einsum(f"ncm{letters},cm->nc{letters}", yv, wkk)
    return _crop(buf, g)


def _dw_weight(x, y, g):
    """The adjoint of :func:`_dw_forward` in ``w``: -> (C*m, 1, *K). With stride 1, each
    kernel position is a batch of dot products (one matrix product) of the outputs'
    gradient with a contiguous run of the input, summed over samples."""
    xm = array_module(x)
    n, c = x.shape[:2]
    f = y.shape[1]
    m = f // c
    yv = y.reshape((n, c, m) + tuple(g.O))
    out = xm.empty((c, m) + tuple(g.K), dtype=x.dtype)
    if _stride1(g):
        sp = _Span(g)
        ys = sp.embed(yv)  # N, C, m, L
        xpf = sp.plane_of(x, g)[..., None]  # N, C, plane, 1
        for kk, off in sp.offs:
            out[(Ellipsis,) + kk] = (ys @ xpf[:, :, off:off + sp.L]).sum(0)[..., 0]
        return out.reshape((f, 1) + tuple(g.K))
    xp = pad_array(x, g.lo, g.hi)
    letters = "xyz"[:g.nd]
    for kk, sl in _kernel_slices(g):
        out[(Ellipsis,) + kk] = xm.einsum(f"ncm{letters},nc{letters}->cm", yv, xp[sl])
    return out.reshape((f, 1) + tuple(g.K))


def _conv_arrays(x, w, g):
    """``conv(x, w)`` on arrays, without bias: x (N, C, *S), w (F, C/G, *K) -> (N, F, *O)."""
    if _depthwise(g, w.shape[1]):
        return _dw_forward(x, w, g)
    G = g.G
    n, c = x.shape[:2]
    f = w.shape[0]
    xm = array_module(x)
    o = _prod(g.O)
    out = xm.empty((n, f, o), dtype=xm.result_type(x, w))
    wm = w.reshape(f, -1) if G == 1 else w.reshape(G, f // G, -1)

    def block(lo, hi):
        # every sample is its own im2col and gemm: blocks of the batch run on the
        # intra-op threads with the same per-sample products
        col = im2col(x[lo:hi], g)  # n, C*K, O
        if G == 1:
            xm.matmul(wm, col, out=out[lo:hi])  # n, F, O: no transposes
        else:
            col = col.reshape(hi - lo, G, c // G * _prod(g.K), -1)
            xm.matmul(wm, col, out=out[lo:hi].reshape(hi - lo, G, f // G, o))
    parallel_rows(block, n, out.size * w[0].size, xm, blas=True)
    return out.reshape((n, f) + tuple(g.O))


class Conv(Primitive):
    """``y = conv(x, w) + b``: x (N, C, *S), w (F, C/G, *K), b (F,) or None."""
    save_inputs = (0, 1)
    _node_name = "ConvolutionBackward0"
    batch = _batch_nn.conv

    def forward(self, x, w, b, g):
        g = self.g = g.at(x.shape[2:])
        out = _conv_arrays(x, w, g)
        if b is not None:
            out += _bias_shape(b, g.nd)
        return out

    def backward(self, gy):
        x, w = self.saved_tensors
        e = self._edges
        g = self.g
        gx = ConvInput.apply(gy, w, None, g) if e[0] is not None else None
        gw = ConvWeight.apply(x, gy, g) if e[1] is not None else None
        gb = gy.sum((0,) + tuple(range(2, 2 + g.nd))) if e[2] is not None else None
        return gx, gw, gb, None

    def jvp(self, tx, tw, tb, _):
        return _conv_jvp(self, tx, tw, tb)

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``): the adjoint convolutions' forwards."""
        x, w = inputs[0], inputs[1]
        e, g, gy = self._edges, self.g, grads[0]
        gx = object.__new__(ConvInput).forward(gy, w, None, g) if e[0] is not None else None
        gw = object.__new__(ConvWeight).forward(x, gy, g) if e[1] is not None else None
        gb = gy.sum((0,) + tuple(range(2, 2 + g.nd))) if e[2] is not None else None
        return [gx, gw, gb, None]


class ConvInput(Primitive):
    """``x = conv_input(y, w) + b``: the adjoint of ``conv`` in its input (conv_transpose).

    y (N, F, *O), w (F, C/G, *K), b (C,) or None; the result is (N, C, *S). The path
    (:func:`_input_path`): a convolution of the padded ``y`` with the flipped weight,
    the span-layout columns of :func:`_col2im_span`, or columns added back with
    :func:`col2im`.
    """
    save_inputs = (0, 1)
    _node_name = "ConvolutionBackward0"
    batch = _batch_nn.conv_input

    def forward(self, y, w, b, g):
        g = self.g = g.at_transposed(y.shape[2:])
        G = g.G
        n, f = y.shape[:2]
        cg = w.shape[1]
        kp = _prod(g.K)
        o = _prod(g.O)
        wm = w.reshape(G, f // G, cg * kp)
        path = _input_path(g, n, f // G, cg) if not _depthwise(g, cg) else "depthwise"
        if path == "depthwise":
            out = _dw_input(y, w, g)
        elif path == "transposed":
            yp, gt = _transposed(y, g)
            out = _conv_arrays(yp, _flipped(w, G), gt)
        elif path == "span":
            out = _col2im_span(y, w, g)
        elif path == "last":
            out = _col2im_last(y, w, g)
        else:
            if G == 1:
                col = wm[0].T @ y.reshape(n, f, o)  # N, C*K, O
            else:
                col = wm.transpose(0, 2, 1) @ y.reshape(n, G, f // G, o)  # N, G, Cg*K, O
            col = col.reshape((n, cg * G) + tuple(g.K) + tuple(g.O))
            out = col.reshape((n, cg * G) + tuple(g.S)) if path == "gemm" else col2im(col, g)
        if b is not None:
            out += _bias_shape(b, g.nd)
        return out

    def backward(self, gx):
        y, w = self.saved_tensors
        e = self._edges
        g = self.g
        gy = Conv.apply(gx, w, None, g) if e[0] is not None else None
        gw = ConvWeight.apply(gx, y, g) if e[1] is not None else None
        gb = gx.sum((0,) + tuple(range(2, 2 + g.nd))) if e[2] is not None else None
        return gy, gw, gb, None

    def jvp(self, ty, tw, tb, _):
        return _conv_jvp(self, ty, tw, tb)


class ConvWeight(Primitive):
    """``w = conv_weight(x, y)``: the adjoint of ``conv`` in its weight.

    x (N, C, *S), y (N, F, *O); the result is (F, C/G, *K).
    """
    save_inputs = (0, 1)
    _node_name = "ConvolutionBackward0"

    def forward(self, x, y, g):
        self.g = g
        G = g.G
        n, c = x.shape[:2]
        f = y.shape[1]
        ck = c // G * _prod(g.K)
        o = _prod(g.O)
        xm = array_module(x)
        if _depthwise(g, c // G):
            return _dw_weight(x, y, g)
        if ck <= _PER_SAMPLE_CK:
            # few columns per window: per-sample products (blocks of the batch on the
            # intra-op threads), then summed over the batch
            per = xm.empty((n, G, f // G, ck), dtype=xm.result_type(x, y))

            def block(lo, hi):
                col = im2col(x[lo:hi], g).reshape(hi - lo, G, ck, o)
                xm.matmul(y[lo:hi].reshape(hi - lo, G, f // G, o), col.swapaxes(-1, -2),
                          out=per[lo:hi])
            parallel_rows(block, n, per.size * o, xm, blas=True)
            out = per.sum(0)
        else:
            # one matrix product over all samples and positions, the columns as the
            # left operand (the faster orientation for OpenBLAS)
            col = im2col_rows(x, g).reshape(G, ck, n * o)
            rows = contiguous(xm.moveaxis(y.reshape(n, G, f // G, o), 0, 2), xm)
            out = (col @ rows.reshape(G, f // G, n * o).swapaxes(-1, -2)).swapaxes(-1, -2)
        return out.reshape((f, c // G) + tuple(g.K))

    def backward(self, gw):
        x, y = self.saved_tensors
        e = self._edges
        g = self.g
        gx = ConvInput.apply(y, gw, None, g) if e[0] is not None else None
        gy = Conv.apply(x, gw, None, g) if e[1] is not None else None
        return gx, gy, None

    jvp = _jvp.multilinear(0, 1)


class Unfold(Primitive):
    """im2col: (N, C, *S) -> (N, C*prod(K), L), L the number of windows."""
    _node_name = "Im2ColBackward0"

    def forward(self, x, g):
        g = self.g = g.at(x.shape[2:])
        return im2col(x, g)

    def backward(self, gy):
        return Fold.apply(gy, self.g), None

    jvp = _jvp.linear(0)
    batch = _batch.fold_into_n


class Fold(Primitive):
    """col2im: (N, C*prod(K), L) -> (N, C, *S), overlapping values summed."""
    _node_name = "Col2ImBackward0"

    def forward(self, col, g):
        self.g = g
        n, ck = col.shape[:2]
        c = ck // _prod(g.K)
        return col2im(col.reshape((n, c) + tuple(g.K) + tuple(g.O)), g)

    def backward(self, gx):
        return Unfold.apply(gx, self.g), None

    jvp = _jvp.linear(0)
    batch = _batch.fold_into_n


# ----- argument checks and the public functions ---------------------------------------

def ntuple(v, n, name, op="convolution"):
    """``v`` as an n-tuple of ints (an int is repeated), with PyTorch's error."""
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    v = tuple(int(i) for i in v)
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                           f"values to match the {op} dimensions, but got {name}={list(v)}")
    return v


def _dtype_name(a):
    return FROM_NP[a.dtype].name


def _check_common(name, x, w, b, nd):
    if not isinstance(x, Tensor) or not isinstance(w, Tensor):
        raise TypeError(f"{name}() argument 'input' and 'weight' must be Tensors, got "
                        f"{type(x).__name__} and {type(w).__name__}")
    if x.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"{name}, but got input of size: {list(x.shape)}")
    if w.dim() != nd + 2:
        raise RuntimeError(f"{name}: expected weight to have {nd + 2} dimensions, but got "
                           f"weight of size {list(w.shape)}")
    if x._data.dtype != w._data.dtype or (b is not None and b._data.dtype != x._data.dtype):
        other = w if x._data.dtype != w._data.dtype else b
        raise RuntimeError(f"expected scalar type {_dtype_name(x._data).capitalize()} but found "
                           f"{_dtype_name(other._data).capitalize()}")


def _check_bias(w, b, nout):
    if b is not None and (b.dim() != 1 or b.shape[0] != nout):
        raise RuntimeError(f"Given weight of size {list(w.shape)}, expected bias to be "
                           f"1-dimensional with {nout} elements, but got bias of size "
                           f"{list(b.shape)} instead")


def _check_sd(stride, dilation, groups):
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")


def _conv(name, nd, input, weight, bias, stride, padding, dilation, groups):
    _check_common(name, input, weight, bias, nd)
    batched = input.dim() == nd + 2
    x = input if batched else input.unsqueeze(0)
    stride = ntuple(stride, nd, "stride")
    dilation = ntuple(dilation, nd, "dilation")
    groups = int(groups)
    _check_sd(stride, dilation, groups)
    K = tuple(weight.shape[2:])
    S = tuple(x.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            lo = hi = (0,) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            tot = [d * (k - 1) for d, k in zip(dilation, K)]
            lo = tuple(t // 2 for t in tot)
            hi = tuple(t - t // 2 for t in tot)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        lo = hi = ntuple(padding, nd, "padding")
        if any(p < 0 for p in lo):
            raise RuntimeError("negative padding is not supported")
    f, cg = weight.shape[:2]
    c = x.shape[1]
    if c != cg * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(x.shape)} to have {cg * groups} channels, "
                           f"but got {c} channels instead")
    if f % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size {list(weight.shape)} "
                           f"instead")
    _check_bias(weight, bias, f)
    padded = tuple(a + p + q for a, p, q in zip(S, lo, hi))
    ext = tuple(d * (k - 1) + 1 for d, k in zip(dilation, K))
    if any(p < e for p, e in zip(padded, ext)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
            f"Kernel size: ({' x '.join(map(str, ext))}). Kernel size can't be greater than "
            f"actual input size")
    if 0 in S and x.shape[0] and c:  # torch's kernels take only an empty batch or channels
        shown = list(x.shape[:2]) + [1] * (nd == 1) + list(S)  # conv1d runs as 2-D there
        raise RuntimeError("Only zero batch or zero channel inputs are supported, but got "
                           f"input shape: {shown}")
    O = tuple((p - e) // s + 1 for p, e, s in zip(padded, ext, stride))
    g = Geom(S, O, K, stride, dilation, lo, hi, groups)
    out = Conv.apply(x, weight, bias, g)
    return out if batched else out.squeeze(0)


def _conv_transpose(name, nd, input, weight, bias, stride, padding, output_padding, groups,
                    dilation):
    _check_common(name, input, weight, bias, nd)
    batched = input.dim() == nd + 2
    y = input if batched else input.unsqueeze(0)
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
    stride = ntuple(stride, nd, "stride")
    dilation = ntuple(dilation, nd, "dilation")
    padding = ntuple(padding, nd, "padding")
    output_padding = ntuple(output_padding, nd, "output_padding")
    groups = int(groups)
    _check_sd(stride, dilation, groups)
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        dims = ("height", "width") if nd == 2 else ("depth", "height", "width")[3 - nd:]
        parts = " ".join(f"output_padding_{n}: {v}" for n, v in zip(dims, output_padding))
        parts += " " + " ".join(f"stride_{n}: {v}" for n, v in zip(dims, stride))
        parts += " " + " ".join(f"dilation_{n}: {v}" for n, v in zip(dims, dilation))
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, "
                           f"but got {parts}")
    cin, cg = weight.shape[:2]
    if y.shape[1] != cin:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(y.shape)} to have {cin} channels, but got "
                           f"{y.shape[1]} channels instead")
    if cin % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size {list(weight.shape)} "
                           f"instead")
    _check_bias(weight, bias, cg * groups)
    K = tuple(weight.shape[2:])
    O = tuple(y.shape[2:])
    S = tuple((o - 1) * s - 2 * p + d * (k - 1) + op + 1
              for o, s, p, d, k, op in zip(O, stride, padding, dilation, K, output_padding))
    if any(v <= 0 for v in S):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, O))}). "
                           f"Calculated output size per channel: ({' x '.join(map(str, S))}). "
                           f"Output size is too small")
    g = Geom(S, O, K, stride, dilation, padding, padding, groups)
    out = ConvInput.apply(y, weight, bias, g)
    return out if batched else out.squeeze(0)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) of ``input`` (N, C, L) with ``weight``
    (out_channels, C/groups, kL); ``padding`` may be an int, a tuple, 'valid' or 'same'.

    >>> conv1d(ember.randn(2, 3, 10), ember.randn(4, 3, 3)).shape
    ember.Size([2, 4, 8])
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) of ``input`` (N, C, H, W) with ``weight``
    (out_channels, C/groups, kH, kW); ``padding`` may be an int, a tuple, 'valid' or 'same'.

    >>> conv2d(ember.randn(1, 3, 8, 8), ember.randn(4, 3, 3, 3), padding=1).shape
    ember.Size([1, 4, 8, 8])
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution of ``input`` (N, C, D, H, W) with ``weight``
    (out_channels, C/groups, kD, kH, kW)."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution ("deconvolution"): the gradient of ``conv1d`` with
    respect to its input. ``weight`` is (in_channels, out_channels/groups, kL)."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution: the gradient of ``conv2d`` with respect to its input.
    ``weight`` is (in_channels, out_channels/groups, kH, kW); the output size is
    ``(in - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.

    >>> conv_transpose2d(ember.randn(1, 4, 5, 5), ember.randn(4, 2, 3, 3), stride=2).shape
    ember.Size([1, 2, 11, 11])
    """
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-D transposed convolution; ``weight`` is (in_channels, out_channels/groups, kD, kH, kW)."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def _fold_args(name, kernel_size, dilation, padding, stride):
    k = ntuple(kernel_size, 2, "kernel_size", name)
    d = ntuple(dilation, 2, "dilation", name)
    p = ntuple(padding, 2, "padding", name)
    s = ntuple(stride, 2, "stride", name)
    if any(v <= 0 for v in k):
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: "
                           f"{k[0]} kernel_width: {k[1]}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: "
                           f"{s[0]} stride_width: {s[1]}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: "
                           f"{d[0]} dilation_width: {d[1]}")
    if any(v < 0 for v in p):
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} "
                           f"pad_width: {p[1]}")
    return k, d, p, s


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks (im2col): (N, C, H, W) -> (N, C*kH*kW, L), where L is
    the number of block positions; each column is one flattened block.

    >>> unfold(ember.randn(1, 2, 4, 4), 2).shape
    ember.Size([1, 8, 9])
    """
    k, d, p, s = _fold_args("unfold", kernel_size, dilation, padding, stride)
    if input.dim() not in (3, 4):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    x = input if input.dim() == 4 else input.unsqueeze(0)
    S = tuple(x.shape[2:])
    O = tuple((a + 2 * pi - di * (ki - 1) - 1) // si + 1
              for a, pi, di, ki, si in zip(S, p, d, k, s))
    if any(o < 1 for o in O):
        raise RuntimeError(f"Given input with spatial size ({S[0]}, {S[1]}), kernel_size=({k[0]}"
                           f", {k[1]}), dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), "
                           f"calculated shape of the array of sliding blocks as ({O[0]}, "
                           f"{O[1]}), but its components must be at least one.")
    out = Unfold.apply(x, Geom(S, O, k, s, d, p, p, 1))
    return out if input.dim() == 4 else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding local blocks into a tensor (col2im), summing overlaps:
    (N, C*kH*kW, L) -> (N, C, *output_size). The adjoint of :func:`unfold`."""
    S = ntuple(output_size, 2, "output_size", "fold")
    k, d, p, s = _fold_args("fold", kernel_size, dilation, padding, stride)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    x = input if input.dim() == 3 else input.unsqueeze(0)
    kk = k[0] * k[1]
    if x.shape[1] % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={x.shape[1]} and "
                           f"kernel_size=({k[0]}, {k[1]})")
    O = tuple((a + 2 * pi - di * (ki - 1) - 1) // si + 1
              for a, pi, di, ki, si in zip(S, p, d, k, s))
    if x.shape[2] != O[0] * O[1] or any(o < 1 for o in O):
        raise RuntimeError(f"Given output_size=({S[0]}, {S[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=("
                           f"{s[0]}, {s[1]}), expected size of input's dimension 2 to match the "
                           f"calculated number of sliding blocks {O[0]} * {O[1]} = "
                           f"{O[0] * O[1]}, but got input.size(2)={x.shape[2]}.")
    out = Fold.apply(x, Geom(S, O, k, s, d, p, p, 1))
    return out if input.dim() == 3 else out.squeeze(0)


def _conv_jvp(self, tx, tw, tb):
    """Tangent of ``conv(x, w) + b`` (also for the transposed conv): linear in each."""
    x, w, _, g = self.fw_inputs
    cls = type(self)
    out = None if tx is None else cls.apply(tx, w, None, g)
    if tw is not None:
        r = cls.apply(x, tw, None, g)
        out = r if out is None else out + r
    if tb is not None:
        r = tb.reshape((-1,) + (1,) * g.nd)
        out = r if out is None else out + r
    return out
