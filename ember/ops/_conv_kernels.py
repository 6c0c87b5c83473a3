"""Array kernels of the convolutions in :mod:`ember.ops.conv`: the window geometry
(:class:`Geom`), im2col / col2im, and the forward / adjoint paths (depthwise, span-layout
and batch-last columns, the stride-1 transposed convolution) on plain arrays.

No autograd here: the primitives in :mod:`ember.ops.conv` call these from their
forwards; which path ``conv_input`` takes is :func:`_input_path`, timed in
docs/performance/cnn.md.
"""
import itertools

import numpy as np

from ember.backend import array_module
from ember.backend import gemm as _gemm
from ember.backend.threads import contiguous, parallel_rows
from ember.ops import _conv_accumulate, _rnn_blas


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


def _copy_runs(dst, src):
    """``dst[...] = src`` (same shape and dtype), copied as whole runs along the last
    axis where that axis is contiguous in both: each run is then one element of a
    ``void`` dtype of the run's size, so the copy loop moves rows (11 floats of a
    13x13 map, say) instead of single numbers. The columns of small feature maps copy
    in 0.3-0.8 of the time this way (measured in docs/performance/cnn.md, "Small CNN,
    default install (fourth pass)"); the bytes are the same."""
    k = src.shape[-1] if src.ndim else 0
    isz = src.itemsize
    if k > 1 and type(src) is np.ndarray and type(dst) is np.ndarray \
            and src.dtype == dst.dtype and src.dtype.kind in "biuf" \
            and src.strides[-1] == isz and dst.strides[-1] == isz:
        run = np.dtype((np.void, k * isz))
        dst.view(run)[...] = src.view(run)
    else:
        dst[...] = src


def im2col(x, g, out=None):
    """Columns ``(N, C*prod(K), prod(O))`` of ``x`` (N, C, *S) for geometry ``g``: one
    strided window view of the padded input, copied once (into ``out`` when given, a
    C-ordered array of that shape)."""
    nd = g.nd
    n, c = x.shape[:2]
    win = windows(pad_array(x, g.lo, g.hi), g.O, g.K, g.s, g.d)  # N C *O *K
    order = (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd))
    src = win.transpose(order)
    if out is None:
        col = array_module(x).empty(src.shape, dtype=x.dtype)
        _copy_runs(col, src)
        return col.reshape(n, c * _prod(g.K), _prod(g.O))
    _copy_runs(out.reshape((n, c) + tuple(g.K) + tuple(g.O)), src)
    return out


def im2col_rows(x, g, out=None):
    """Columns as one matrix ``(C*prod(K), N*prod(O))`` (for the weight gradient); into
    ``out`` when given, a ``(C, *K, N, *O)`` view (the samples' slice of a larger
    such matrix)."""
    nd = g.nd
    n, c = x.shape[:2]
    win = windows(pad_array(x, g.lo, g.hi), g.O, g.K, g.s, g.d)
    order = (1,) + tuple(range(2 + nd, 2 + 2 * nd)) + (0,) + tuple(range(2, 2 + nd))
    src = win.transpose(order)
    if out is None:
        col = array_module(x).empty(src.shape, dtype=x.dtype)
        _copy_runs(col, src)
        return col.reshape(c * _prod(g.K), n * _prod(g.O))
    _copy_runs(out, src)
    return out


def col2im(col, g):
    """The adjoint of :func:`im2col`: columns ``(N, C, *K, *O)`` (any strides) summed
    into a contiguous (N, C, *S), one strided add per kernel position, straight into the
    unpadded result (:func:`_clipped`: what lands on padding is never added)."""
    xp = array_module(col)
    n, c = col.shape[:2]
    buf = xp.zeros((n, c) + tuple(g.S), dtype=col.dtype)
    disjoint = all(s >= d * (k - 1) + 1 for s, d, k in zip(g.s, g.d, g.K))
    for kk, osl, isl in _clipped(g):
        src = col[(slice(None), slice(None)) + kk + osl]
        if disjoint:
            buf[(Ellipsis,) + isl] = src
        else:
            buf[(Ellipsis,) + isl] += src
    return buf


def _clipped(g):
    """(kernel position, output slices, input slices) for each kernel position: the
    windows where that position meets the unpadded input, and the input elements it
    meets there (strided). Positions that meet only padding are left out."""
    for kk in itertools.product(*[range(k) for k in g.K]):
        osl, isl = [], []
        for k, d, s, lo, a, o in zip(kk, g.d, g.s, g.lo, g.S, g.O):
            off = k * d - lo       # the input index of window 0 (negative: in padding)
            o_lo = -(off // s) if off < 0 else 0
            o_hi = min(o, (a - 1 - off) // s + 1) if off < a else 0
            if o_hi <= o_lo:
                break
            p0 = o_lo * s + off
            osl.append(slice(o_lo, o_hi))
            isl.append(slice(p0, p0 + s * (o_hi - o_lo - 1) + 1, s))
        else:
            yield kk, tuple(osl), tuple(isl)


# ConvWeight: up to this many columns per window (C/G * prod(K)), per-sample products
# summed over the batch beat one product over all samples (measured, OpenBLAS)
_PER_SAMPLE_CK = 128
# working-set size per block of samples for the multi-pass depthwise loops (L2-sized)
_BLOCK_BYTES = 1 << 18
# columns per block of samples of the batch-last input gradient (at least 16 samples)
_LAST_BLOCK_BYTES = 1 << 21


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
    """``conv_input(y, w)`` with the batch as the last axis: per block of samples, one
    matrix product, then one strided add per kernel position whose rows (last output
    dim times the block) are long even when the feature maps are small. Blocks of
    about :data:`_LAST_BLOCK_BYTES` of columns keep the product's output in cache for
    the adds (18% faster than one product over the whole batch for the CNN's second
    convolution); they run on the intra-op threads.

    Where :func:`_span_last_pays`, the columns are in the span layout (:class:`_Span`)
    with the batch last: ``y`` is placed in zero runs, so each kernel position's add is
    one contiguous run per channel (all its output rows and samples) instead of one run
    per output row. The product is longer by the runs' gaps (141 against 121 columns a
    sample for a 13x13 input and 3x3 kernel), whose columns are exact zeros: each input
    element gets the same terms in the same order as from the strided adds (the same
    bits for the CNN's second convolution; the BLAS may round a product of another
    length differently in the last bit), and the adds take about a third of their
    time."""
    xm = array_module(y)
    n, f = y.shape[:2]
    G, cg, kp, o = g.G, w.shape[1], _prod(g.K), _prod(g.O)
    wt = w.reshape(G, f // G, cg * kp).transpose(0, 2, 1)
    out = xm.empty((n, G * cg) + tuple(g.S), dtype=y.dtype)
    sp = _Span(g) if _span_last_pays(g, cg * kp * G, o, y.itemsize) else None
    slices = None if sp is not None else list(_clipped(g))
    run = o if sp is None else sp.L
    step = max(16, _LAST_BLOCK_BYTES // max(1, G * cg * kp * run * y.itemsize))
    crop = None if sp is None else \
        (slice(None),) + tuple(slice(lo, lo + a) for lo, a in zip(g.lo, g.S))
    o_in = _prod(g.S)
    # each kernel position's (F, C) weight, for the products that add into the plane
    acc = _conv_accumulate.position_weights(w, y, kp) if sp is not None and G == 1 else None

    def block(lo, hi):
        for a in range(lo, hi, step):
            b = min(a + step, hi)
            m = b - a
            if sp is None:
                yb = _batch_last(y[a:b], xm)  # (F, *O, m)
                col = _gemm.matmul(wt, yb.reshape(G, f // G, o * m))
                col = col.reshape((G * cg,) + tuple(g.K) + tuple(g.O) + (m,))
                # added straight into the unpadded result (batch last), then moved
                # into (N, C, *S) order with one copy
                buf = xm.zeros((G * cg,) + tuple(g.S) + (m,), dtype=y.dtype)
                for kk, osl, isl in slices:
                    buf[(slice(None),) + isl] += col[(slice(None),) + kk + osl]
                _batch_first(buf, out[a:b], xm)
                continue
            ys = xm.zeros((f, sp.L, m), dtype=y.dtype)
            # (a strided copy: whole runs of a transposed copy take as long here)
            _span_last(ys, sp)[...] = xm.moveaxis(y[a:b], 0, -1)
            buf = xm.zeros((G * cg, sp.plane, m), dtype=y.dtype)
            # (per block, on the block's thread: a NaN or infinity in the block's
            # gradient sends it the columns' way, see _conv_accumulate.position_weights)
            fn = None if acc is None or not np.isfinite(y[a:b]).all() else \
                _conv_accumulate.accumulation(ys, sp, acc)
            if fn is not None:
                _conv_accumulate.accumulate(fn, acc, ys, buf, sp)
            else:
                col = _gemm.matmul(wt, ys.reshape(G, f // G, sp.L * m))
                col = col.reshape(G * cg, kp, sp.L, m)
                for k, (_, off) in enumerate(sp.offs):
                    buf[:, off:off + sp.L] += col[:, k]
            buf = buf.reshape((G * cg,) + sp.sp + (m,))
            if sp.plane == o_in:
                _batch_first(buf, out[a:b], xm)
            else:
                out[a:b] = xm.moveaxis(buf[crop], -1, 0)
    parallel_rows(block, n, out.size * kp * f // G, xm, blas=True)
    return out


def _batch_last(y, xm):
    """``y`` (m, ...) as a C-ordered (..., m) array: one BLAS transposition of the
    (m, rest) matrix for float32 NumPy arrays (:func:`ember.ops._rnn_blas.transpose`:
    2-3.5x as fast as NumPy's strided copy, whose inner loop runs over the m samples;
    docs/performance/cnn.md, "Small CNN, default install (seventh pass)"), else NumPy's
    copy. Only gradients that go on into a product (or come out of sums of products)
    pass here: the BLAS copy multiplies by 1.0, which quiets a signalling NaN (its
    payload kept) just as those products do."""
    m = y.shape[0]
    if xm is np and y.dtype == np.float32 and y.flags.c_contiguous:
        return _rnn_blas.transpose(y.reshape(m, -1)).reshape(y.shape[1:] + (m,))
    return xm.ascontiguousarray(xm.moveaxis(y, 0, -1))


def _batch_first(buf, out, xm):
    """``out[...] = moveaxis(buf, -1, 0)`` for a C-ordered ``buf`` (..., m) and a
    C-ordered ``out`` (m, ...): the inverse move of :func:`_batch_last`, by the same
    BLAS transposition where it applies."""
    m = buf.shape[-1]
    if xm is np and buf.dtype == np.float32 == out.dtype and buf.flags.c_contiguous \
            and out.flags.c_contiguous:
        _rnn_blas.transpose(buf.reshape(-1, m), out=out.reshape(m, -1))
    else:
        out[...] = xm.moveaxis(buf, -1, 0)


def _span_last_pays(g, ck, o, itemsize):
    """Whether :func:`_col2im_last` takes the span layout (measured on OpenBLAS, one
    core): stride 1, runs at most 1.2x the output positions (``L`` against ``prod(O)``:
    the product grows by that factor), and columns of the smallest block (16 samples)
    larger than :data:`_LAST_BLOCK_BYTES`, where the strided adds read them from beyond
    the cache and the contiguous adds stream (the CNN's conv2, 13x13 maps: 5.7 -> 4.8
    ms). Where the block's columns fit, the strided adds are faster (12x12 maps: 4.8
    against 5.4 ms; 8x8 maps, small 3-d maps)."""
    if not _stride1(g):
        return False
    return _Span(g).L * 5 <= o * 6 and ck * o * itemsize * 16 > _LAST_BLOCK_BYTES


def _span_last(span, sp):
    """The (F, *O, m) outputs inside runs ``span`` (F, L, m) of :class:`_Span` ``sp``
    with the batch last, as a strided view."""
    st = span.strides
    return _as_strided(span, (span.shape[0],) + sp.O + (span.shape[2],),
                       (st[0],) + tuple(p * st[1] for p in sp.P) + (st[2],))


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
        col = _gemm.matmul(wm[0].T, ys)
    else:
        col = _gemm.matmul(wm.transpose(0, 2, 1), ys.reshape(n, G, f // G, sp.L))
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
    if not n:  # an empty batch: no blocks of samples to loop over
        return out.reshape((n, c * m) + O)
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
        return _crop(buf.reshape((n, c) + padded), g)
    wk = w.reshape((c, m) + tuple(g.K))
    buf = xm.zeros((n, c) + tuple(g.S), dtype=y.dtype)  # unpadded: see _clipped
    letters = "xyz"[:nd]
    for kk, osl, isl in _clipped(g):
        wkk = wk[(Ellipsis,) + kk]
        ys = yv[(Ellipsis,) + osl]
        if m == 1:
            buf[(Ellipsis,) + isl] += ys[:, :, 0] * wkk.reshape((1, c) + (1,) * nd)
        else:
            buf[(Ellipsis,) + isl] += xm.einsum(f"ncm{letters},cm->nc{letters}", ys, wkk)
    return buf


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
            out[(Ellipsis,) + kk] = _gemm.matmul(ys, xpf[:, :, off:off + sp.L]).sum(0)[..., 0]
        return out.reshape((f, 1) + tuple(g.K))
    xp = pad_array(x, g.lo, g.hi)
    letters = "xyz"[:g.nd]
    for kk, sl in _kernel_slices(g):
        out[(Ellipsis,) + kk] = xm.einsum(f"ncm{letters},nc{letters}->cm", yv, xp[sl])
    return out.reshape((f, 1) + tuple(g.K))


def _conv_arrays(x, w, g, keep=False, bias=None):
    """``conv(x, w)`` on arrays, plus ``bias`` (F,) when given: x (N, C, *S), w (F, C/G,
    *K) -> (N, F, *O).

    With ``keep``, returns ``(out, cols)``: the columns the products read, for the weight
    gradient (:func:`_weight_arrays`), or None where the path makes none (depthwise).
    They are the blocks of :func:`_conv_rows` for wide windows over small maps
    (:func:`_rows`), else ``(N, C*prod(K), prod(O))`` (:func:`im2col`) for per-sample
    products."""
    if _depthwise(g, w.shape[1]):
        out = _dw_forward(x, w, g)
        if bias is not None:
            out += _bias_shape(bias, g.nd)
        return (out, None) if keep else out
    G = g.G
    n, c = x.shape[:2]
    f = w.shape[0]
    xm = array_module(x)
    o = _prod(g.O)
    ck = c * _prod(g.K)
    if _rows(ck // G, o):
        # the same products whether or not the columns are kept: the same values
        # with and without a weight gradient (eager, compiled plans, no_grad)
        out, cols = _conv_rows(x, w, g, bias)
        out = out.reshape((n, f) + tuple(g.O))
        return (out, cols) if keep else out
    out = xm.empty((n, f, o), dtype=xm.result_type(x, w))
    wm = w.reshape(f, -1) if G == 1 else w.reshape(G, f // G, -1)
    cols = xm.empty((n, ck, o), dtype=x.dtype) if keep else None
    bf = None if bias is None else bias.reshape(f, 1)

    def block(lo, hi):
        # every sample is its own im2col and gemm: blocks of the batch run on the
        # intra-op threads with the same per-sample products
        col = im2col(x[lo:hi], g, None if cols is None else cols[lo:hi])  # n, C*K, O
        if G == 1:
            _gemm.matmul(wm, col, out=out[lo:hi])  # n, F, O: no transposes
        else:
            col = col.reshape(hi - lo, G, c // G * _prod(g.K), -1)
            _gemm.matmul(wm, col, out=out[lo:hi].reshape(hi - lo, G, f // G, o))
        if bf is not None:  # the bias added to the block's samples, on its thread
            out[lo:hi] += bf
    parallel_rows(block, n, out.size * w[0].size, xm, blas=True)
    out = out.reshape((n, f) + tuple(g.O))
    return (out, cols) if keep else out


def _rows(ck, o):
    """Whether a convolution with ``ck`` columns a window (per group) and ``o`` output
    positions takes row columns (:func:`_conv_rows`, :func:`_weight_rows`): wide windows
    over small maps, whose per-sample weight products (``o`` long) run slowly. On large
    maps per-sample products are long enough, and one product over a block of samples
    runs up to 2x slower on MKL (64x576 by 576x4096 against 4 per-sample products)."""
    return ck > _PER_SAMPLE_CK and o <= 128


# samples per block of the row columns: about this many columns (samples times output
# positions) each, long enough for the products to run at full speed, few enough that
# the batch makes several blocks for the intra-op threads
_ROWS_CHUNK = 4096


def _row_blocks(n, o):
    """The blocks ``(first sample, end)`` of a batch of ``n`` samples with ``o`` output
    positions each for :func:`_conv_rows`: fixed by the shape alone, so the products
    (and their values) are the same however the intra-op threads share them out."""
    step = max(1, _ROWS_CHUNK // max(o, 1))
    return [(a, min(a + step, n)) for a in range(0, n, step)]


def _conv_rows(x, w, g, bias):
    """``conv(x, w)`` (+ ``bias``) as (N, F, O), and its columns for the weight
    gradient: per block of samples (:func:`_row_blocks`), the columns as one matrix
    ``(C*prod(K), samples*O)`` (:func:`im2col_rows`), one product with the weight, and
    one transposing copy into (samples, F, O) that adds the bias on the way. The
    columns are kept as one flat array, block after block."""
    xm = array_module(x)
    G = g.G
    n, c = x.shape[:2]
    f = w.shape[0]
    o = _prod(g.O)
    ck = c * _prod(g.K)
    dt = xm.result_type(x, w)
    out = xm.empty((n, f, o), dtype=dt)
    cols = xm.empty(n * ck * o, dtype=x.dtype)
    wm = w.reshape(G, f // G, ck // G)
    blocks = _row_blocks(n, o)
    b3 = None if bias is None else bias.reshape(1, f, 1)

    def block(lo, hi):
        for a, b in blocks[lo:hi]:
            m = b - a
            cb = cols[a * ck * o:b * ck * o]
            im2col_rows(x[a:b], g, cb.reshape((c,) + tuple(g.K) + (m,) + tuple(g.O)))
            r = _gemm.matmul(wm, cb.reshape(G, ck // G, m * o))  # G, F/G, m*O
            r = r.reshape(f, m, o).transpose(1, 0, 2)
            if b3 is None:
                out[a:b] = r
            else:
                xm.add(r, b3, out=out[a:b])
    parallel_rows(block, len(blocks), out.size * w[0].size // max(len(blocks), 1), xm,
                  blas=True)
    return out, cols


def _weight_arrays(x, y, g, cols=None):
    """``conv_weight(x, y)`` on arrays: x (N, C, *S), y (N, F, *O) -> (F, C/G, *K).

    ``cols`` are the forward's columns of ``x`` (:func:`_conv_arrays` with ``keep``);
    given, no columns are built here. Wide windows over small maps (:func:`_rows`) take
    the same products either way (so the same values), per block of samples
    (:func:`_weight_rows`); others per sample, or without kept columns and with more
    than :data:`_PER_SAMPLE_CK` columns a window one product over the whole batch."""
    G = g.G
    n, c = x.shape[:2]
    f = y.shape[1]
    ck = c // G * _prod(g.K)
    o = _prod(g.O)
    xm = array_module(x)
    if _depthwise(g, c // G):
        return _dw_weight(x, y, g)
    if _rows(ck, o):
        out = _weight_rows(x, cols, y, g)
    elif cols is not None or ck <= _PER_SAMPLE_CK:
        # per-sample products (blocks of the batch on the intra-op threads), then summed
        # over the batch: the layout of the forward's columns, so kept columns serve as
        # they are; built here, few columns per window make this the faster orientation
        per = xm.empty((n, G, f // G, ck), dtype=xm.result_type(x, y))

        def block(lo, hi):
            col = im2col(x[lo:hi], g) if cols is None else cols[lo:hi]
            _gemm.matmul(y[lo:hi].reshape(hi - lo, G, f // G, o),
                         col.reshape(hi - lo, G, ck, o).swapaxes(-1, -2), out=per[lo:hi])
        parallel_rows(block, n, per.size * o, xm, blas=True)
        out = per.sum(0)
    else:
        # one matrix product over all samples and positions, the columns as the
        # left operand (the faster orientation for OpenBLAS)
        col = im2col_rows(x, g).reshape(G, ck, n * o)
        rows = contiguous(xm.moveaxis(y.reshape(n, G, f // G, o), 0, 2), xm)
        out = _gemm.matmul(col, rows.reshape(G, f // G, n * o).swapaxes(-1, -2))
        out = out.swapaxes(-1, -2)
    return out.reshape((f, c // G) + tuple(g.K))


def _weight_rows(x, cols, y, g):
    """The weight gradient (G, F/G, C/G*K) per block of samples (:func:`_row_blocks`):
    the block's columns (the forward's, :func:`_conv_rows`, or made here when ``cols``
    is None) times that block of ``y`` made (G, F/G, samples*O) with one copy; the
    blocks' products summed in order."""
    xm = array_module(y)
    n, f = y.shape[:2]
    c = x.shape[1]
    G = g.G
    o = _prod(g.O)
    ck = c * _prod(g.K)
    blocks = _row_blocks(n, o)
    nb = len(blocks)
    dt = xm.result_type(x, y)
    per = xm.empty((nb, G, ck // G, f // G), dtype=dt)

    def block(lo, hi):
        for i in range(lo, hi):
            a, b = blocks[i]
            m = b - a
            yt = xm.ascontiguousarray(y[a:b].reshape(m, G, f // G, o).transpose(1, 2, 0, 3))
            yt = yt.reshape(G, f // G, m * o)
            if cols is None:
                cb = im2col_rows(x[a:b], g)
            else:
                cb = cols[a * ck * o:b * ck * o]
            # the columns as the left operand: 20-25% faster than the transposed
            # product on OpenBLAS
            _gemm.matmul(cb.reshape(G, ck // G, m * o), yt.swapaxes(-1, -2), out=per[i])
    parallel_rows(block, nb, per.size * o * (n // nb), xm, blas=True)
    return (per[0] if nb == 1 else per.sum(0)).swapaxes(-1, -2)
