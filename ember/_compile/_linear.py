"""A compiled plan's linear steps on a batch of rows: ``matmul_graph.linear_rows`` with
the branch its checks take found once per layout of the step's arrays.

A cell called in a Python loop replays the same plan with arrays of the same layout on
every call; ``linear_rows`` spends 3-4 us per product on the tests that pick its branch
(the kept row-major copy, ``gemm._by_transpose``'s transposed product, plain
``np.matmul``, the bias summed in place or in tiles). :func:`linear_step` makes those
tests once per layout (shapes, strides, dtypes, ember's thread count) and keeps the
branch on the step; the branch then runs the same NumPy calls, so the same bits.
"""
import numpy as np

from ember.backend import gemm as _gemm
from ember.backend import threads as _threads
from ember.ops import matmul_graph

__all__ = ["linear_step", "vjp_products", "vjp_products_into"]

_ndarray = np.ndarray
_nthreads = _threads.get_num_threads
_matmul = np.matmul
_rows_summed = matmul_graph._rows_summed


def linear_step(st, b, x, w, kept):
    """A linear step's ``linear_rows(b, x, w)`` (``x`` a matrix): the branch its checks
    take for these arrays' layout (shapes, strides, dtypes, ember's thread count) found
    once per layout and kept on the step, so a repeated call (a cell in a loop) runs its
    NumPy calls without the checks. The same calls, so the same bits."""
    if type(w) is _ndarray and type(b) is _ndarray:
        lay = (x.shape, x.strides, x.dtype, w.shape, w.strides, w.dtype, b.shape, b.dtype,
               _nthreads())
        routes = st.routes
        r = routes.get(lay, False)
        if r is False:
            if len(routes) > 16:
                routes.clear()
            r = routes[lay] = _route(b, x, w, st.shared)
        if r is not None:
            return r(b, x, w, kept, st.linear[1])
    return matmul_graph.linear_rows(b, x, w, kept if st.shared else None, st.linear[1])


def _route(b, x, w, shared):
    """The function running ``linear_rows(b, x, w)``'s branch for arrays of this layout
    (see there and ``gemm._numpy_matmul``), or None where it is left to ``linear_rows``
    itself (products on MKL or ember's threads, the narrow head's blocks)."""
    if w.ndim != 2 or b.shape != w.shape[:1] or b.dtype != x.dtype:
        return None
    (m, k), n = x.shape, w.shape[0]
    if not matmul_graph._direct((m, k), (k, n)):
        return None
    wt = w.T
    if shared and matmul_graph._copy_keeps_bits(x, w):
        product = _run_copy
    elif not shared and k < matmul_graph._WT_K and \
            matmul_graph._WT_ROWS[0] <= m <= matmul_graph._WT_ROWS[1] and \
            matmul_graph._rows_times_weight_t(x, w) is not None:
        product = _call_copy
    elif _gemm._TRANS_MIN <= m <= _gemm._TRANS_ROWS and wt.flags.f_contiguous:
        product = _by_transpose if _gemm._by_transpose(x, wt) is not None else _plain
    elif _gemm._NARROW_MIN <= n < _gemm._NARROW and m % _gemm._NARROW_ROWS == 0 and m and \
            wt.flags.f_contiguous:
        return None
    else:
        product = _plain
    if m * n >= _gemm.ADD_ROWS_TILED:  # (``_add_rows`` tiles large sums)
        def run(b, x, w, kept, key):
            out = product(x, w, kept, key)
            _gemm._add_rows(out, b)
            return out
    else:  # ``_add_rows``' own sum for a small result
        def run(b, x, w, kept, key):
            out = product(x, w, kept, key)
            out += b
            return out
    return run


def _run_copy(x, w, kept, key):
    """The product on the run's row-major copy of ``w.T`` (``linear_rows``' ``kept``)."""
    wc = kept.get(key)
    if wc is None or wc is False:  # (False: another step's rows were out of its range)
        wc = kept[key] = np.ascontiguousarray(w.T)
    return np.matmul(x, wc)


def _call_copy(x, w, kept, key):
    """The product on the copy kept across calls (``_rows_times_weight_t``)."""
    return matmul_graph._kept_product(x, w)


def _by_transpose(x, w, kept, key):
    """``gemm._by_transpose(x, w.T)``'s product."""
    return np.matmul(w, x.T).T.copy()


def _plain(x, w, kept, key):
    """``np.matmul(x, w.T)`` (``gemm._numpy_matmul``'s own product)."""
    return np.matmul(x, w.T)


def vjp_products(routes, edges, g, x, w):
    """``nn_fused.linear_vjp(edges, g, x, w, None, gemm.matmul, gemm.matmul)`` for a
    matrix ``x`` where ``gemm.matmul`` would run both products (``g @ w``, ``g.T @ x``)
    as NumPy's own ``a @ b``: found once per layout (shapes, the operands' strides,
    ember's thread count, ``gemm``'s size thresholds) and kept in ``routes``, the
    products are then called on ``np.matmul`` directly and the bias's rows summed on a
    kept vector of ones (``matmul_graph._rows_summed``: ``gemm.sum_rows``' own product).
    The same calls, so the same bits; None elsewhere (the caller runs ``linear_vjp``)."""
    if type(g) is not _ndarray or type(x) is not _ndarray or type(w) is not _ndarray or \
            x.ndim != 2 or g.ndim != 2 or w.ndim != 2:
        return None
    lay = (g.shape, x.shape, x.strides, w.shape, w.strides, _nthreads(), _gemm.THRESHOLD,
           _gemm.NARROW_THRESHOLD)
    plain = routes.get(lay)
    if plain is None:
        if len(routes) > 16:
            routes.clear()
        plain = routes[lay] = _numpys_own(g.shape, w) and _numpys_own(g.shape[::-1], x)
    if not plain:
        return None
    gx = _matmul(g, w) if edges[0] is not None else None
    gw = _matmul(g.T, x) if edges[1] is not None else None
    gb = _rows_summed(g) if len(edges) > 2 and edges[2] is not None else None
    return [gx, gw, gb]


def vjp_products_into(routes, edges, g, x, w, out):
    """``nn_fused.linear_vjp(edges, g, x, w, out, mm, mm)`` (the input's gradient into
    the arena's ``out``) for matrices at one ember thread where MKL is not in use and
    ``gemm.matmul`` runs every product as NumPy's own call (``g @ w`` into the buffer,
    ``g.T @ x`` new, the bias's rows summed on a kept vector of ones): found once per
    layout and kept in ``routes``, the same calls without the four frames per product
    between the vjp and NumPy. The same calls, so the same bits; None elsewhere."""
    if type(g) is not _ndarray or type(x) is not _ndarray or type(w) is not _ndarray or \
            x.ndim != 2 or g.ndim != 2 or w.ndim != 2 or _gemm._lib[0] is not False:
        return None
    lay = (g.shape, g.dtype, x.shape, x.strides, x.dtype, w.shape, w.strides, w.dtype,
           _nthreads())
    plain = routes.get(lay)
    if plain is None:
        if len(routes) > 16:
            routes.clear()
        dt = g.dtype
        plain = routes[lay] = _nthreads() == 1 and dt.char in "fd" and dt.isnative and \
            x.dtype == dt == w.dtype and _numpys_own(g.shape[::-1], x, True)
    if not plain:
        return None
    gx = None
    if edges[0] is not None:
        gx = out(0, x.shape, np.result_type(g.dtype, w.dtype))
        _matmul(g, w, out=gx)  # (``_numpy_matmul``'s call for a given ``out``)
    gw = _matmul(g.T, x) if edges[1] is not None else None
    gb = _rows_summed(g) if len(edges) > 2 and edges[2] is not None else None
    return [gx, gw, gb]


def _numpys_own(sa, b, mkl_off=False):
    """Whether ``gemm.matmul(a, b)`` (no ``out``) for an ``a`` of shape ``sa`` and this
    matrix ``b`` ends in ``gemm._numpy_matmul``'s plain ``a @ b``: too small for MKL
    (or ``mkl_off``: MKL not in use), for ember's threads to take it
    (``threads.matmul``), and not one of the transposed or narrow operands
    ``_numpy_matmul`` runs its own way."""
    (m, k), n = sa, b.shape[1]
    if b.shape[0] != k or (not mkl_off and _gemm._maybe_large(sa, b.shape)):
        return False
    if _nthreads() > 1 and m * k * n >= _threads._BLAS_THREADED_MNK:
        return False
    f = b.flags.f_contiguous
    if _gemm._TRANS_MIN <= m <= _gemm._TRANS_ROWS and f:
        return False
    return not (_gemm._NARROW_MIN <= n < _gemm._NARROW and m % _gemm._NARROW_ROWS == 0
                and m and f)
