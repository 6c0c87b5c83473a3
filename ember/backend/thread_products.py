"""How ember routes a matrix product at more than one thread (:func:`matmul`): split over
its intra-op pool (:mod:`ember.backend.threads`) in row or column blocks, left to
BLAS's own threads, or run whole at one BLAS thread.

OpenBLAS's own threads busy-wait (sched_yield) for a while after each threaded call:
between ember's products that thread spins on the second core, where ember's pool
worker (and, on a shared machine, every other process) then gets only part of it. So at
more than one thread ember runs its large products in blocks on the pool, with BLAS at
one thread per block. Row blocks of a product give the same values as the whole product
when every block stays on BLAS's large-matrix kernels and starts where one of the whole
product's tiles of rows does (``threads.row_grain``); column blocks likewise, on the
kernels where they were measured so (``threads.column_grain``). So results do not change
with the thread count.

The products ember does not split (too small to repay a dispatch, or too few rows or
columns) run on BLAS's own threads when there are cores to spare and ember's pool has
not split a kernel for a while (a loop of 32-row products in sequence, a recurrent
cell's, runs faster on both cores, and switching OpenBLAS's thread count around each
costs more than the product gains), else at one BLAS thread: on a busy machine (see
``threads.cores_to_spare``), and in steps whose other kernels run on the pool (an MLP's
inference: 3.6 ms a step that way, 5.3 with its 1024x128x10 product on BLAS's threads,
whose spinning then slows the pool's blocks). Measured: docs/performance/
threads-products.md, "Two threads: the products ember does not split".

The bounds read here (``_SPLIT_MNK``, ``_MIN_BLOCK_ROWS``, ``_BLAS_THREADED_MNK``,
``_POOL_QUIET_SECONDS``) live in :mod:`ember.backend.threads`, which scales them to its
pool's dispatch, and are read from it at each call, as are its kernel lookups.
"""
import time

import numpy as np

from ember.backend import thread_routes as _routes
from ember.backend import threads as _t
from ember.backend.pool import local

__all__ = ["matmul", "WHOLE", "blas_rows"]

# Column blocks instead of row blocks for a product with few rows (OpenBLAS's SkylakeX
# kernels, one BLAS thread, CPU time of one block against the whole product; load 6.5):
# each row block packs all of the right operand for itself, each column block half of it
# and all of the (smaller) left one. 128 x 784 x 256 (a linear layer's forward, batch
# 128): a row half takes 0.50-0.55 of the whole, a column half 0.43-0.47; 64 x 784 x 256
# 0.57-0.67 against 0.44-0.47; 128 x 1024 x 1024 0.59-0.63 against 0.45-0.48; 256 x 256 x 1024
# 0.52-0.57 against 0.46-0.49. With a short inner dimension or as many columns as rows,
# rows do as well or better (256 x 128 x 784: 0.44-0.51 against 0.49-0.51; 512 x 784 x
# 256: 0.48-0.50 against 0.50-0.52). So columns from twice as many columns as rows and
# an inner dimension of _COLUMN_MIN_K (benchmarks/split_products_ab.py; docs/performance/
# threads.md, "... where the second core goes (fourteenth pass)").
_COLUMN_MIN_K = 256


def _blas_may_thread(k, char):
    # BLAS's own threads: same bits, a core to spare, ember's pool quiet
    return k <= _t.same_bits_k(char) and _t.cores_to_spare() and \
        time.monotonic() - _t._state["pool_used"] > _t._POOL_QUIET_SECONDS


def _split_direction(char, m, k, n):
    """``(grain, 0)`` to split an ``m x k`` by ``k x n`` product in row blocks at that
    grain of rows, ``(grain, 1)`` in column blocks, ``(0, 0)`` where neither keeps the
    bits on NumPy's BLAS kernel."""
    if n >= 2 * m and k >= _COLUMN_MIN_K:
        grain = _t.column_grain(char)
        if grain:
            return grain, 1
    return _t.row_grain(char), 0


def matmul(a, b, out=None, bias=None, add=None, whole=None):
    """``np.matmul(a, b, out=out)`` for two 2-D floating NumPy arrays when ember has more
    than one thread and reaches NumPy's BLAS: in row or column blocks on the pool (BLAS
    at one thread per block) when large; at one BLAS thread when BLAS would use its
    threads but the machine has no core to spare (``threads.cores_to_spare``) or the pool
    has just run other kernels (see above): then :data:`WHOLE`, for the caller to run its
    own one-thread route inside ``threads.single_blas``; None when not taken (the caller
    runs its product itself: small products, which BLAS runs on one thread anyway, and
    the others left to BLAS's threads).

    With ``bias`` (a row of the result's columns) and ``add`` (``add(r, row)``: ``r +=
    row`` down ``r``'s rows), a split product's blocks each add their part of the bias
    to their part of the result as soon as it is computed (the same sums as adding it
    to the whole result after); where the product is not split the caller adds it.

    With ``whole`` (``whole()``: the caller's own product of ``a`` and ``b`` into ``out``,
    its one-thread route), a product with more than one of the routes above open to it
    takes the one measured fastest at its site (its shapes, layouts and dtype;
    :mod:`ember.backend.thread_routes`): the split, ``whole()`` on BLAS's own threads, or
    ``whole()`` at one BLAS thread; then the result is returned (with ``bias`` added by
    ``add``), whichever route ran."""
    state = _t._state
    if state["threads"] < 2 or a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or \
            a.dtype.char not in "fd" or getattr(local, "in_worker", False):
        return None
    if a.ndim > 2 or b.ndim > 2:
        return _batched(a, b, out)
    (m, k), n = a.shape, b.shape[-1]
    mnk = m * n * k
    if mnk < _t._BLAS_THREADED_MNK or b.shape[0] != k or not _t._all_blas():
        return None
    char = a.dtype.char
    gram = m == n and _gram(a, b)
    grain, by_columns = _split_direction(char, m, k, n)
    # the split is open (``most`` blocks, at least two) unless: small; blocks on kernels
    # where they give other bits than the whole product (see blas_kernels.ROW_GRAIN);
    # ``a @ a.T`` on one buffer, NumPy's syrk, which row blocks (gemm) do not reproduce;
    # ``out`` other than a fresh matrix, np.matmul's to check and copy through
    most = tiles = 0
    if not (mnk < _t._SPLIT_MNK or m < 2 * _t._MIN_BLOCK_ROWS or n < _t._MIN_BLOCK_ROWS or
            not grain or gram or out is not None and (
                type(out) is not np.ndarray or out.shape != (m, n) or
                np.may_share_memory(out, a) or np.may_share_memory(out, b))):
        span = n if by_columns else m
        tiles = span // grain  # (the last block takes a partial tile too)
        per_tile = grain * k * (m if by_columns else n)
        most = state["threads"]
        while most >= 2 and not _t.row_blocks_keep_kernel(char, mnk, tiles // most * per_tile):
            most -= 1  # (fewer, larger blocks: each on the whole product's kernel)
    mode = state["routes"]
    if whole is not None and mode != "static":
        routes = _routes_open(most >= 2, not gram and k <= _t.same_bits_k(char) and
                              _t.cores_to_spare())
        if mode == "measured":
            if len(routes) > 1:
                return _measured(routes, a, b, out, bias, add, whole, grain, by_columns,
                                 tiles, mnk, most)
        else:  # one route forced where open (benchmarks), else one thread
            route = mode if mode in routes else _routes.ONE
            return _run(route, a, b, out, bias, add, whole, grain, by_columns, tiles, mnk,
                        most)
    if most < 2:
        return None if not gram and _blas_may_thread(k, char) else WHOLE
    return _split(a, b, out, bias, add, grain, by_columns, tiles, mnk, most)


def _routes_open(split, blas):
    """The routes open to a product (the split, BLAS's own threads), one thread last."""
    return _ROUTES[split, blas]


_ROUTES = {(s, b): tuple(r for r, ok in ((_routes.SPLIT, s), (_routes.BLAS, b),
                                          (_routes.ONE, True)) if ok)
           for s in (False, True) for b in (False, True)}


def _measured(routes, a, b, out, bias, add, whole, *split_args):
    """The product on the route chosen at its site (timed in a trial)."""
    s = _routes.site((a.shape, b.shape, a.strides, b.strides, a.dtype.char,
                      bias is not None, out is None), routes)
    i = _routes.pick(s)
    if s.route is not None:
        return _run(routes[i], a, b, out, bias, add, whole, *split_args)
    if routes[i] == _routes.SPLIT and (_t._pool[0] is None or _t._pool[0].broken):
        _t._new_pool()  # (made and timed before the trial's clock: a one-time cost)
    start = _routes.now()
    r = _run(routes[i], a, b, out, bias, add, whole, *split_args)
    _routes.record(s, i, _routes.now() - start)
    return r


def _run(route, a, b, out, bias, add, whole, grain, by_columns, tiles, mnk, most):
    """The product (with ``bias`` added) on ``route``."""
    if route == _routes.SPLIT:
        return _split(a, b, out, bias, add, grain, by_columns, tiles, mnk, most)
    saved = _t.blas_to_one() if route == _routes.ONE else ()
    try:
        r = whole()
    finally:
        _t.blas_back(saved)
    if bias is not None:
        add(r, bias)
    return r


def _split(a, b, out, bias, add, grain, by_columns, tiles, mnk, most):
    """The product in ``most`` row or column blocks of ``grain`` on the pool."""
    m, n = a.shape[0], b.shape[1]
    if out is None:
        out = np.empty((m, n), a.dtype)
    if by_columns:
        def block(lo, hi):
            lo, hi = lo * grain, n if hi == tiles else hi * grain
            np.matmul(a, b[:, lo:hi], out=out[:, lo:hi])
            if bias is not None:
                add(out[:, lo:hi], bias[lo:hi])
    else:
        def block(lo, hi):
            lo, hi = lo * grain, m if hi == tiles else hi * grain
            np.matmul(a[lo:hi], b, out=out[lo:hi])
            if bias is not None:
                add(out[lo:hi], bias)
    _t.parallel_rows(block, tiles, mnk >> 4, blas=True, most=most, site=False)
    return out


# :func:`matmul`'s answer for a product it does not split and BLAS's threads must not
# take: the caller runs its own one-thread route (``gemm``'s, whose layouts other than
# ``np.matmul``'s own, e.g. ``(b.T @ a.T).T``, give other bits on some kernels) inside
# ``threads.single_blas``
WHOLE = object()


def _gram(a, b):
    """Whether ``a @ b`` is ``a`` times its own transpose on one buffer, which NumPy runs
    as BLAS's syrk (a symmetric product) instead of gemm."""
    return a.shape == b.shape[::-1] and a.strides == b.strides[::-1] and \
        np.may_share_memory(a, b) and \
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]


def _batched(a, b, out):
    """A stack of products (``a`` or ``b`` of more than two dims) whose inner dimension is
    longer than ``threads.same_bits_k`` and each large enough for BLAS to thread it: over the
    pool in blocks of whole matrices, BLAS at one thread per block, when both operands
    have one batch shape; else at one BLAS thread. None for the others (BLAS's own
    threads give the one-thread bits)."""
    k = a.shape[-1]
    if b.shape[-2] != k or k <= _t.same_bits_k(a.dtype.char) or \
            a.shape[-2] * k * b.shape[-1] < _t._BLAS_THREADED_MNK or not _t._all_blas():
        return None
    if a.shape[:-2] == b.shape[:-2] and a.shape[0] >= 2 and (
            out is None or type(out) is np.ndarray and out.shape == a.shape[:-1] + b.shape[-1:]
            and not np.may_share_memory(out, a) and not np.may_share_memory(out, b)):
        if out is None:
            out = np.empty(a.shape[:-1] + b.shape[-1:], a.dtype)

        def block(lo, hi):
            np.matmul(a[lo:hi], b[lo:hi], out=out[lo:hi])
        blas_rows(block, a.shape[0], out.size * k >> 4)
        return out
    with _t.single_blas():
        return np.matmul(a, b, out=out)


def blas_rows(fn, rows, cost):
    """``threads.parallel_rows`` with ``blas``, for kernels that call BLAS: when the work is
    too small to split, ``fn(0, rows)`` still runs at one BLAS thread (at more than one
    ember thread), so that BLAS's own threads are not woken (see above)."""
    if min(_t._state["threads"], rows, int(cost // _t._MIN_COST_PER_THREAD)) >= 2:
        _t.parallel_rows(fn, rows, cost, blas=True)
        return
    with _t.single_blas():
        fn(0, rows)

