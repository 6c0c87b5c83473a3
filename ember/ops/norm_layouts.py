"""Normalization's array kernels by memory layout, run in blocks of rows that stay in
cache: ``rows`` (layer norm: the trailing dims, a weight and bias of their shape),
``groups`` (group and instance norm, layer norm without affine) and ``channels`` (batch
norm: every dim but the channels). :class:`ember.ops.normalization.Normalize` picks one
with :func:`_layout` and calls ``_FORWARD[kind]`` / ``_BACKWARD[kind]`` on arrays.
"""
import numpy as np

from ember.backend import array_module
from ember.backend import fast_kernels as _fast_kernels
from ember.backend import threads as _threads
from ember.backend.threads import parallel_rows

# NumPy makes one pass over memory per operation; over a block of rows that stays in
# the (1 MiB) L2 cache the passes are cheaper, and the block temporaries are reused
# instead of fresh full-size ones (a fresh large array costs a page fault per 4 KiB).
# Row sums are ``rows @ ones`` and row dot products ``a[:, None, :] @ b[:, :, None]``
# (BLAS; two to three times faster than NumPy's sum and einsum). The first-order
# backward uses PyTorch's formulas with centred inputs: with ``r = invstd`` and
# ``xc = x - mean`` over ``n`` elements,
# ``gx = r*g - r*sum(g)/n - xc * r**3 * sum(g*xc)/n`` where ``g = gy * w``.

# bytes of input per block of rows
_BLOCK_BYTES = 1 << 20


def _blocks(rows, row_bytes):
    b = max(1, _BLOCK_BYTES // max(row_bytes, 1))
    return [slice(i, min(i + b, rows)) for i in range(0, rows, b)]


def _layout(x, w, b, axes):
    """How ``x`` (with weight ``w`` and bias ``b`` broadcast against it) is normalized
    over ``axes`` in blocks, or None for the general code:

    - ``("rows", M, D)``: ``axes`` are the trailing dims (D elements per row); ``w``/``b``
      absent or of the trailing shape (layer norm);
    - ``("groups", R, P, L, t)``: ``axes`` are the trailing dims from ``k``; ``w``/``b``
      vary only over the dims before ``t >= k`` (``R`` elements before ``k``, ``P`` from
      ``k`` to ``t``, ``L`` after): group and instance norm, layer norm without affine;
    - ``("channels", N, C, L)``: ``axes`` are all dims but 1, of an input with 3 or more
      dims; ``w``/``b`` per channel (batch norm).
    """
    nd = x.ndim
    if x.dtype not in (np.float32, np.float64) or x.size == 0 or not axes:
        return None
    for t in (w, b):
        if t is not None and (t.dtype != x.dtype or t.ndim not in (nd, len(axes))):
            return None
    shape = x.shape
    k = nd - len(axes)
    if axes == tuple(range(k, nd)):
        if all(t is None or (t.ndim == nd - k and t.shape == shape[k:]) for t in (w, b)) \
                and (w is not None or b is not None):
            return ("rows", _prod(shape[:k]), _prod(shape[k:]))
        if any(t is not None and t.ndim != nd for t in (w, b)):
            return None
        t_ = k
        for t in (w, b):
            if t is not None:
                t_ = max([t_] + [i + 1 for i in range(nd) if t.shape[i] != 1])
        for t in (w, b):
            if t is not None and any(t.shape[i] not in (1, shape[i]) for i in range(nd)):
                return None
        return ("groups", _prod(shape[:k]), _prod(shape[k:t_]), _prod(shape[t_:]), t_)
    if nd >= 3 and axes == (0,) + tuple(range(2, nd)):
        cshape = (1, shape[1]) + (1,) * (nd - 2)
        if all(t is None or t.shape == cshape for t in (w, b)):
            return ("channels", shape[0], shape[1], _prod(shape[2:]))
    return None


def _rows_dot(a, b):
    """Dot products of the rows of two (R, L) arrays."""
    return (a[:, None, :] @ b[:, :, None]).reshape(-1)


def _affine_rows(t, lead):
    """A weight/bias that is constant past the leading dims ``lead``, broadcast to them
    and flattened to (R, P)."""
    xm = array_module(t)
    out = xm.broadcast_to(t.reshape(t.shape[:len(lead)]), lead)
    return out.reshape(-1)


_NUMBA = {}


def _row_kernels(*arrays):
    """numba's layer norm row kernels (``ember.ops._norm_numba``, the ``ember[fast]``
    extra) when every array is a C-contiguous float32 NumPy array, else None (imported
    on first use; None without numba)."""
    for a in arrays:
        if a is not None and (type(a) is not np.ndarray or a.dtype != np.float32
                              or not a.flags.c_contiguous):
            return None
    return _fast_kernels.load(_NUMBA, "rows", "ember.ops._norm_numba")


def _fwd_rows(x, w, b, eps, lay, keep=None):
    """Layer norm's forward over rows; on the NumPy blocks the normalized rows (before
    the weight and bias) are appended to the list ``keep`` when one is given, for
    backward (``_bwd_rows``'s ``xhat``): the same passes, into an array of their own."""
    _, M, D = lay
    xm = array_module(x)
    x2 = x.reshape(M, D)
    out = xm.empty((M, D), dtype=x.dtype)
    mean = xm.empty(M, dtype=x.dtype)
    var = xm.empty(M, dtype=x.dtype)
    w2 = None if w is None else w.reshape(D)
    b2 = None if b is None else b.reshape(D)
    blocks = _blocks(M, D * x.itemsize)
    k = _row_kernels(x2, w2, b2)
    if k is not None:
        # one pass per row (numba); the same float32 operations as the blocks below
        wk = xm.ones(D, dtype=x.dtype) if w2 is None else w2
        bk = wk if b2 is None else b2

        units = _rows_units(M) if len(blocks) == 1 else 0
        if units:  # one block: its rows in blocks on the intra-op threads (one per row)
            blocks = [slice(*_unit_rows(i, i + 1, units, M)) for i in range(units)]

        def run_k(lo, hi):
            for sl in blocks[lo:hi]:
                k.forward_rows(x2[sl], wk, bk, b2 is not None, eps, out[sl], mean[sl],
                               var[sl])
        parallel_rows(run_k, len(blocks), 8 * M * D, xm)
        return out.reshape(x.shape), mean, var
    ones = xm.ones(D, dtype=x.dtype)
    wt = None if w2 is None else _RowTile(w2, blocks[0].stop - blocks[0].start)
    bt = None if b2 is None else _RowTile(b2, blocks[0].stop - blocks[0].start)
    xhat = out if keep is None else xm.empty((M, D), dtype=x.dtype)

    def run(lo, hi):  # rows are independent: blocks go to the intra-op threads
        for sl in blocks[lo:hi]:
            mean[sl], var[sl], _ = _fwd_rows_block(x2[sl], xhat[sl], out[sl], ones, wt, bt,
                                                   eps, D, xm)
    parallel_rows(run, len(blocks), 8 * M * D, xm, blas=True)
    if keep is not None:
        keep.append(xhat)
    return out.reshape(x.shape), mean, var


def _fwd_rows_block(xb, hb, ob, ones, wt, bt, eps, D, xm):
    """One block of :func:`_fwd_rows`' NumPy passes: the normalized rows of ``xb`` into
    ``hb``, times the weight and plus the bias (``_RowTile``s or None) into ``ob`` (which
    may be ``hb``); returns the rows' mean, variance and reciprocal standard deviation."""
    m = xb @ ones
    m /= D
    xm.subtract(xb, m[:, None], out=hb)
    v = _rows_dot(hb, hb)
    v /= D
    r = 1.0 / xm.sqrt(v + eps)
    hb *= r[:, None]
    if wt is not None:
        wt.apply(xm.multiply, hb, ob)
    elif hb is not ob:
        ob[...] = hb
    if bt is not None:
        bt.apply(xm.add, ob, ob)
    return m, v, r


# read-only vectors of ones (the row sums' BLAS operand), by length and dtype
_ONES = {}


def _ones(D, dtype):
    """A read-only float vector of ``D`` ones, made once per length and dtype (up to
    64 Ki elements; longer ones are made per call)."""
    key = (D, dtype)
    v = _ONES.get(key)
    if v is None:
        v = np.ones(D, dtype=dtype)
        if D <= 65536 and len(_ONES) < 64:
            v.flags.writeable = False
            _ONES[key] = v
    return v


def fwd_rows_direct(x, w, b, eps, keep):
    """Layer norm's forward over the trailing ``D`` elements (``D`` the size of ``w`` or
    ``b``, at least one given, NumPy arrays of ``x``'s float32/float64 dtype) where the
    NumPy blocks run it as one block: :func:`_fwd_rows`' passes called directly, without
    the blocks' list, the threads' dispatch and the copies of the statistics (the same
    operations: the same bits). Returns ``(M, D, out, mean, var, invstd)`` (the
    statistics of shape (M,)), or None where :func:`_fwd_rows` has more to do (several
    blocks, numba's kernels, an empty input)."""
    D = w.size if w is not None else b.size
    if x.size == 0 or D == 0:
        return None
    M = x.size // D
    if M > _BLOCK_BYTES // (D * x.itemsize):
        return None
    x2 = x.reshape(M, D)
    w2 = None if w is None else w.reshape(D)
    b2 = None if b is None else b.reshape(D)
    if _NUMBA.get("rows", False) is not None and _row_kernels(x2, w2, b2) is not None:
        return None
    out = np.empty((M, D), dtype=x.dtype)
    xhat = out if keep is None else np.empty((M, D), dtype=x.dtype)
    # (a tile is built, as in ``_fwd_rows``, only where a block has rows enough to use it)
    wt = None if w2 is None else _RowTile(w2, M)
    bt = None if b2 is None else _RowTile(b2, M)
    ones = _ones(D, x.dtype)
    units = _split_units(M)
    if units:  # the same passes over row blocks on the intra-op threads
        m, v, r = (np.empty(M, dtype=x.dtype) for _ in range(3))

        def run(lo, hi):
            a, b = _unit_rows(lo, hi, units, M)
            m[a:b], v[a:b], r[a:b] = _fwd_rows_block(x2[a:b], xhat[a:b], out[a:b], ones,
                                                     wt, bt, eps, D, np)
        parallel_rows(run, units, 8 * M * D, blas=True)
    else:
        m, v, r = _fwd_rows_block(x2, xhat, out, ones, wt, bt, eps, D, np)
    if keep is not None:
        keep.append(xhat)
    return M, D, out.reshape(x.shape), m, v, r


class _RowTile:
    """A row vector (D,) repeated down the rows of C-ordered (rows, D) blocks, applied
    with a NumPy ufunc. NumPy runs its SIMD loop once per row of a broadcast operation
    (1024 rows of 128 float32: 1.5-2x the time of the same operation over 128 rows
    at a time, 16384 elements per inner loop); the vector repeated 128 times (64 KiB of
    float32, cache-resident, built once per call) lets the block be viewed as a few
    long rows. The same elementwise operations: the same bits."""
    __slots__ = ("vec", "tile", "rows")

    _ELEMENTS = 16384

    def __init__(self, vec, block_rows):
        d = vec.shape[0]
        rows = min(self._ELEMENTS // max(d, 1), block_rows)
        self.vec, self.rows, self.tile = vec, rows, None
        if rows >= 4 and type(vec) is np.ndarray:
            t = np.empty((rows, d), vec.dtype)
            t[...] = vec
            self.tile = t.reshape(-1)

    def apply(self, ufunc, a, out):
        """``out = ufunc(a, vec)`` for C-ordered (r, D) blocks ``a`` and ``out``."""
        rows, tile = self.rows, self.tile
        r = a.shape[0]
        q = r // rows if tile is not None else 0
        if q < 2 or not (a.flags.c_contiguous and out.flags.c_contiguous):
            ufunc(a, self.vec, out=out)
            return
        n = q * rows
        ufunc(a[:n].reshape(q, -1), tile, out=out[:n].reshape(q, -1))
        if n < r:
            ufunc(a[n:], self.vec, out=out[n:])


def _bwd_rows(gy, x, w, mean, invstd, need, lay, b_shape, xhat=None):
    """Layer norm's backward over rows; ``xhat``, forward's normalized rows where it
    kept them (``_fwd_rows``'s ``keep``), spares the NumPy blocks their recomputation
    (the same operations: the same bits)."""
    _, M, D = lay
    xm = array_module(x)
    x2, g2 = x.reshape(M, D), gy.reshape(M, D)
    mean, invstd = mean.reshape(M), invstd.reshape(M)
    w2 = None if w is None else w.reshape(D)
    if type(x2) is np.ndarray and type(g2) is np.ndarray and \
            M <= _BLOCK_BYTES // (D * x.itemsize) and \
            _row_kernels(x2, g2, w2) is None:
        return _bwd_rows_direct(g2, x2, w2, mean, invstd, need, M, D, x.shape, xhat)
    ones = xm.ones(D, dtype=x.dtype)
    gx = xm.empty((M, D), dtype=x.dtype) if need[0] else None
    gw = xm.zeros(D, dtype=x.dtype) if need[1] else None
    gb = xm.zeros(D, dtype=x.dtype) if need[2] else None
    blocks = _blocks(M, D * x.itemsize)
    # each block's share of gw and gb, added up in block order afterwards: the same sums
    # in the same order whether the blocks ran on one thread or several
    parts_w, parts_b = [None] * len(blocks), [None] * len(blocks)
    k = _row_kernels(x2, g2, w2)
    if k is not None and len(blocks) == 1 and gx is not None and \
            (gw is not None or gb is not None) and _rows_units(M):
        # one block on two threads: the weight's and bias's sums over all rows (the one
        # block's) beside the input's gradient, each row by the one block's operations
        wk = ones if w2 is None else w2

        def run_two(lo, hi):
            for task in range(lo, hi):
                if task:
                    k.backward_rows(g2, x2, wk, mean, invstd, gx, ones, ones,
                                    True, False, False)
                else:
                    k.backward_rows(g2, x2, wk, mean, invstd, ones.reshape(1, D),
                                    parts_w[0], parts_b[0], False, gw is not None,
                                    gb is not None)
        parts_w[0] = xm.empty(D, dtype=x.dtype) if gw is not None else ones
        parts_b[0] = xm.empty(D, dtype=x.dtype) if gb is not None else ones
        parallel_rows(run_two, 2, 12 * M * D, xm)  # (its sums added below, as blocks' are)
    elif k is not None:
        wk = ones if w2 is None else w2
        gxk = ones.reshape(1, D) if gx is None else gx

        def run_k(lo, hi):
            for i in range(lo, hi):
                sl = blocks[i]
                pw = xm.empty(D, dtype=x.dtype) if gw is not None else ones
                pb = xm.empty(D, dtype=x.dtype) if gb is not None else ones
                k.backward_rows(g2[sl], x2[sl], wk, mean[sl], invstd[sl],
                                gxk[sl] if gx is not None else gxk, pw, pb,
                                gx is not None, gw is not None, gb is not None)
                parts_w[i], parts_b[i] = pw, pb
        parallel_rows(run_k, len(blocks), 12 * M * D, xm)
    else:
        if xhat is not None and xhat.shape != (M, D):
            xhat = None
        parallel_rows(_bwd_rows_blocks(g2, x2, w2, mean, invstd, ones, gx, gw, gb, blocks,
                                       parts_w, parts_b, D, xm, xhat),
                      len(blocks), 12 * M * D, xm, blas=True)
    for pw, pb in zip(parts_w, parts_b):
        if gw is not None:
            gw += pw
        if gb is not None:
            gb += pb
    return (None if gx is None else gx.reshape(x.shape)), gw, gb


# Layer norm's NumPy passes over one block of rows (``fwd_rows_direct``,
# ``_bwd_rows_direct``) split in row blocks on the intra-op threads. Each pass is
# elementwise or along rows except the row sums and dot products, matrix-vector products
# on NumPy's BLAS (``rows @ v``, one result per row) and stacked row-by-row dot products:
# on the OpenBLAS kernels listed, blocks that start at a multiple of ``_SPLIT_GRAIN``
# rows and hold at least as many give the whole call's bits (float32 and float64, 86
# row lengths of 1-4096, 64-1024 rows, every such cut: none differ; a one-row block
# takes another path and does differ: benchmarks/row_sums_blocks.py). Backward's sums
# down the columns (the weight's and bias's gradients) are not split: they run over all
# rows after the blocks, the calls of one block. On a kernel not measured the rows stay
# one block.
_SPLIT_GRAIN = 64
_SPLIT_KERNELS = frozenset({"skylakex", "haswell"})


def _split_units(M):
    """The number of ``_SPLIT_GRAIN``-row units over which ``M`` rows are split on the
    intra-op threads (two or more), or 0 where they run as one block (one thread, few
    rows, a BLAS kernel not measured)."""
    if not _threads.MANY or M < 2 * _SPLIT_GRAIN or \
            not _threads.kernels_in("norm_row_blocks", _SPLIT_KERNELS):
        return 0
    return M // _SPLIT_GRAIN


def _rows_units(M):
    """:func:`_split_units` for numba's row kernels (one row at a time: any blocks of
    rows keep their bits, whatever the BLAS)."""
    if not _threads.MANY or M < 2 * _SPLIT_GRAIN:
        return 0
    return M // _SPLIT_GRAIN


def _unit_rows(lo, hi, units, M):
    """The rows of units ``lo:hi`` (the last unit takes the rows past the grain)."""
    return lo * _SPLIT_GRAIN, (M if hi == units else hi * _SPLIT_GRAIN)


def _bwd_rows_direct(g2, x2, w2, mean, invstd, need, M, D, shape, xhat):
    """:func:`_bwd_rows` where the NumPy blocks run it as one block: the block called
    directly, its weight and bias sums taken as the gradients (plus 0.0 in place, as
    the blocks' sums into zeros: the same bits, a -0.0 sum included)."""
    if xhat is not None and xhat.shape != (M, D):
        xhat = None
    units = _split_units(M) if need[0] or need[1] else 0
    if units:
        return _bwd_rows_split(g2, x2, w2, mean, invstd, need, M, D, shape, xhat, units)
    gx = np.empty((M, D), dtype=x2.dtype) if need[0] else None
    parts_w, parts_b = [None], [None]
    # (the weight's and bias's gradients are only flags to the block: True where needed)
    _bwd_rows_blocks(g2, x2, w2, mean, invstd, _ones(D, x2.dtype), gx, need[1] or None,
                     need[2] or None, [slice(0, M)], parts_w, parts_b, D, np, xhat)(0, 1)
    gw, gb = parts_w[0], parts_b[0]
    if gw is not None:
        gw += 0.0
    if gb is not None:
        gb += 0.0
    return (None if gx is None else gx.reshape(shape)), gw, gb


def _bwd_rows_split(g2, x2, w2, mean, invstd, need, M, D, shape, xhat, units):
    """:func:`_bwd_rows_direct` with its passes along rows split in row blocks on the
    intra-op threads (``_split_units``): each block computes its rows of ``q = g * xh``
    and of the input's gradient by the one block's operations; the weight's and bias's
    gradients are then the one block's products over all rows (``ones @ q``,
    ``ones @ g``): the same bits."""
    dt = x2.dtype
    gx = np.empty((M, D), dtype=dt) if need[0] else None
    q = np.empty((M, D), dtype=dt)  # g * xh, kept whole for the weight's sum
    ones = _ones(D, dt)
    wv = ones if w2 is None else w2
    wt = None if w2 is None or gx is None else _RowTile(w2, M)

    def run(lo, hi):
        a, b = _unit_rows(lo, hi, units, M)
        gyb, r = g2[a:b], invstd[a:b]
        if xhat is not None:
            xh = xhat[a:b]
        else:  # forward's two operations again: its bits
            xh = x2[a:b] - mean[a:b, None]
            xh *= r[:, None]
        qb = np.multiply(gyb, xh, out=q[a:b])
        if gx is None:
            return
        sg = gyb @ wv  # sum(g)
        c = qb @ wv  # sum(g * xh)
        gxb = gx[a:b]
        if w2 is None:
            gxb[...] = gyb
        else:
            wt.apply(np.multiply, gyb, gxb)
        # (into xh: forward's rows are handed over once, else made here; q stays whole
        # for the weight's sum)
        gxb -= np.multiply(xh, (c / D)[:, None], out=xh)
        gxb -= (sg / D)[:, None]
        gxb *= r[:, None]
    parallel_rows(run, units, 12 * M * D, blas=True)
    gw = gb = None
    if need[2] or need[1]:
        ones_rows = np.ones(M, dtype=dt)
        if need[2]:
            gb = ones_rows @ g2
            gb += 0.0
        if need[1]:
            gw = ones_rows @ q
            gw += 0.0
    return (None if gx is None else gx.reshape(shape)), gw, gb


def _bwd_rows_blocks(g2, x2, w2, mean, invstd, ones, gx, gw, gb, blocks, parts_w, parts_b,
                     D, xm, xhat=None):
    """The NumPy blocks of :func:`_bwd_rows`: ``run(lo, hi)`` for ``parallel_rows``.
    With ``xh`` the normalized rows (forward's, or recomputed by forward's operations)
    and ``g = gy * w``: ``gw = sum(gy * xh)``, ``gb = sum(gy)`` down the rows, and
    ``gx = r * (g - sum(g) / D - xh * sum(g * xh) / D)`` along each row."""
    x = x2
    # the row vector ``w`` run in long rows (``_RowTile``: the same products)
    wt = None if w2 is None or gx is None else _RowTile(w2, blocks[0].stop - blocks[0].start)

    def run(lo, hi):
        for i in range(lo, hi):
            sl = blocks[i]
            gyb, r = g2[sl], invstd[sl]
            ones_rows = None
            if gb is not None:
                ones_rows = xm.ones(gyb.shape[0], dtype=x.dtype)
                parts_b[i] = ones_rows @ gyb
            if gx is None and gw is None:
                continue
            if xhat is not None:
                xh = xhat[sl]
            else:  # forward's two operations again: its bits
                xh = x2[sl] - mean[sl, None]
                xh *= r[:, None]
            q = gyb * xh
            if gw is not None:
                if ones_rows is None:
                    ones_rows = xm.ones(gyb.shape[0], dtype=x.dtype)
                parts_w[i] = ones_rows @ q
            if gx is None:
                continue
            wv = ones if w2 is None else w2
            a = gyb @ wv  # sum(g)
            c = q @ wv  # sum(g * xh)
            gxb = gx[sl]
            if w2 is None:
                gxb[...] = gyb
            else:
                wt.apply(xm.multiply, gyb, gxb)
            xm.multiply(xh, (c / D)[:, None], out=q)
            gxb -= q
            gxb -= (a / D)[:, None]
            gxb *= r[:, None]
    return run


def _fwd_groups(x, w, b, eps, lay):
    _, R, P, L, t = lay
    xm = array_module(x)
    n = P * L
    lead = x.shape[:t]
    x2 = x.reshape(R, n)
    out = xm.empty((R, n), dtype=x.dtype)
    mean = xm.empty(R, dtype=x.dtype)
    var = xm.empty(R, dtype=x.dtype)
    ones = xm.ones(n, dtype=x.dtype)
    wr = None if w is None else _affine_rows(w, lead).reshape(R, P, 1)
    br = None if b is None else _affine_rows(b, lead).reshape(R, P, 1)
    for sl in _blocks(R, n * x.itemsize):
        xb, ob = x2[sl], out[sl]
        m = xb @ ones
        m /= n
        xm.subtract(xb, m[:, None], out=ob)
        v = _rows_dot(ob, ob)
        v /= n
        r = (1.0 / xm.sqrt(v + eps))[:, None, None]
        o3 = ob.reshape(-1, P, L)
        o3 *= r if wr is None else r * wr[sl]
        if br is not None:
            o3 += br[sl]
        mean[sl], var[sl] = m, v
    return out.reshape(x.shape), mean, var


def _bwd_groups(gy, x, w, mean, invstd, need, lay, b_shape):
    _, R, P, L, t = lay
    xm = array_module(x)
    n = P * L
    lead = x.shape[:t]
    x2, g2 = x.reshape(R, n), gy.reshape(R, n)
    mean, invstd = mean.reshape(R), invstd.reshape(R)
    wr = None if w is None else _affine_rows(w, lead).reshape(R, P)
    onesL = xm.ones(L, dtype=x.dtype)
    gx = xm.empty((R, n), dtype=x.dtype) if need[0] else None
    gw = xm.empty((R, P), dtype=x.dtype) if need[1] else None
    gb = xm.empty((R, P), dtype=x.dtype) if need[2] else None
    for sl in _blocks(R, n * x.itemsize):
        gyb, r = g2[sl], invstd[sl]
        rs = (gyb.reshape(-1, L) @ onesL).reshape(-1, P)  # sum of gy per (row, p)
        if gb is not None:
            gb[sl] = rs
        if gx is None and gw is None:
            continue
        xc = x2[sl] - mean[sl, None]
        rd = _rows_dot(gyb.reshape(-1, L), xc.reshape(-1, L)).reshape(-1, P)
        if gw is not None:
            gw[sl] = rd * r[:, None]
        if gx is None:
            continue
        k0 = r[:, None] if wr is None else r[:, None] * wr[sl]
        gxb = gx[sl]
        if P == 1:
            # one weight per row (instance norm): PyTorch's order, the weight and invstd
            # last, (gy - mean(gy) - xc * k) * (invstd * w), so an exact 0 takes w's sign
            xm.subtract(gyb, (rs[:, 0] / n)[:, None], out=gxb)
            xc *= (r * r * rd[:, 0] / n)[:, None]
            gxb -= xc
            gxb *= k0
            continue
        if wr is not None:
            rs = rs * wr[sl]
            rd = rd * wr[sl]
        a, c = rs.sum(1), rd.sum(1)
        xm.multiply(gyb.reshape(-1, P, L), k0[:, :, None], out=gxb.reshape(-1, P, L))
        xc *= (r * r * r * c / n)[:, None]
        gxb -= xc
        gxb -= (r * a / n)[:, None]
    if gw is not None:
        gw = _sum_to(gw.reshape(lead), w.shape[:t])
    if gb is not None:
        gb = _sum_to(gb.reshape(lead), b_shape[:t])
    return (None if gx is None else gx.reshape(x.shape)), gw, gb


def _fwd_channels(x, w, b, eps, lay):
    _, N, C, L = lay
    xm = array_module(x)
    cnt = N * L
    x3 = x.reshape(N, C, L)
    out = xm.empty((N, C, L), dtype=x.dtype)
    onesL = xm.ones(L, dtype=x.dtype)
    blocks = _blocks(N, C * L * x.itemsize)
    mean = xm.zeros(C, dtype=x.dtype)
    for sl in blocks:
        mean += (x3[sl].reshape(-1, L) @ onesL).reshape(-1, C).sum(0)
    mean /= cnt
    var = xm.zeros(C, dtype=x.dtype)
    for sl in blocks:
        ob = out[sl]
        xm.subtract(x3[sl], mean[:, None], out=ob)
        o2 = ob.reshape(-1, L)
        var += _rows_dot(o2, o2).reshape(-1, C).sum(0)
    var /= cnt
    scale = 1.0 / xm.sqrt(var + eps)
    if w is not None:
        scale = scale * w.reshape(C)
    scale = scale[:, None]
    bias = None if b is None else b.reshape(C, 1)
    for sl in blocks:
        ob = out[sl]
        ob *= scale
        if bias is not None:
            ob += bias
    return out.reshape(x.shape), mean, var


def _bwd_channels(gy, x, w, mean, invstd, need, lay, b_shape):
    _, N, C, L = lay
    xm = array_module(x)
    cnt = N * L
    x3, g3 = x.reshape(N, C, L), gy.reshape(N, C, L)
    mean, r = mean.reshape(C, 1), invstd.reshape(C)
    onesL = xm.ones(L, dtype=x.dtype)
    blocks = _blocks(N, C * L * x.itemsize)
    sg = xm.zeros(C, dtype=x.dtype)  # sum of gy
    sgx = xm.zeros(C, dtype=x.dtype)  # sum of gy * xc
    for sl in blocks:
        gyb = g3[sl]
        sg += (gyb.reshape(-1, L) @ onesL).reshape(-1, C).sum(0)
        if need[0] or need[1]:
            xc = x3[sl] - mean
            sgx += _rows_dot(gyb.reshape(-1, L), xc.reshape(-1, L)).reshape(-1, C).sum(0)
    gw = sgx * r if need[1] else None
    gb = sg if need[2] else None
    gx = None
    if need[0]:
        k0 = r if w is None else r * w.reshape(C)
        k1 = (k0 * r * r * sgx / cnt)[:, None]
        k2 = (k0 * sg / cnt)[:, None]
        k0 = k0[:, None]
        gx = xm.empty((N, C, L), dtype=x.dtype)
        for sl in blocks:
            gxb = gx[sl]
            xm.multiply(g3[sl], k0, out=gxb)
            xc = x3[sl] - mean
            xc *= k1
            gxb -= xc
            gxb -= k2
        gx = gx.reshape(x.shape)
    return gx, gw, gb


_FORWARD = {"rows": _fwd_rows, "groups": _fwd_groups, "channels": _fwd_channels}
_BACKWARD = {"rows": _bwd_rows, "groups": _bwd_groups, "channels": _bwd_channels}


def _reduced_axes(full, shape):
    """The axes of ``full`` that a tensor of ``shape`` is broadcast along."""
    lead = len(full) - len(shape)
    return tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                      if s == 1 and full[i + lead] != 1)


def _sum_to(g, shape):
    """``g`` summed down to ``shape``, which broadcasts to ``g.shape``."""
    axes = _reduced_axes(g.shape, shape)
    return g.sum(axis=axes).reshape(shape) if axes else g


def _prod(xs):
    n = 1
    for v in xs:
        n *= v
    return n
