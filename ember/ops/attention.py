"""Scaled dot-product attention as one primitive (the kernel behind
``ember.nn.functional.scaled_dot_product_attention``).

``out = dropout(softmax(q @ k^T * scale + bias)) @ v`` over the last two dims, batch
dims broadcasting. Forward is two batched BLAS products around an in-place softmax on
the ``(..., L, S)`` scores: no separately scaled copy of ``q``, no per-op temporaries.
The node keeps the attention weights, so a first-order backward is four batched
products and one fused softmax-gradient pass on arrays. When a graph of the gradient is
recorded (``create_graph``) backward is written in ember Tensor ops from the saved
inputs, so second derivatives are exact (the house rule of ``ember.ops.normalization``).
"""
import numpy as np

from ember._tensor import _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import fast_kernels as _fast_kernels
from ember.backend import gemm as _gemm
from ember.backend import threads as _threads
from ember.backend.threads import parallel_rows
from ember.ops import _batch_nn
from ember.ops.composite_node import partial_inputs, transforming

__all__ = []


def _softmax_rows_(s, safe, direct=True, plain=False):
    """Softmax over the last dim of the float array ``s``, in place; returns the route
    it took: ``"numba"`` (the kernels, row by row), ``"direct"`` or ``"max"``.

    An infinite row maximum is not subtracted (``inf - inf`` is NaN), so rows holding
    +inf, or only -inf, come out NaN as PyTorch's ``softmax`` does; with ``safe`` rows
    that are all -inf give zeros instead (PyTorch's ``_safe_softmax``, used by sdpa).
    With ``direct`` (the caller has checked the size bound, ``_DIRECT_MIN``), scores all
    within +-64 take ``exp`` without the row maxima. ``plain`` takes the maxima's route
    whatever the scores (what one call over more rows took: see ``_weights``).
    """
    if not plain:
        k = _columns(s)
        if k is not None:
            s2 = _as_columns(s)
            if s2 is not None and k.softmax_columns(s2, np.float32(1), _scratch(s2),
                                                    np.empty(s2.shape[2], s.dtype)):
                return "numba"
        elif _softmax_in_rows(s, 1):
            return "numba"
    xp = array_module(s)
    if direct and not plain and s.dtype in _WIDE:
        # every score within +-64 (no NaN, no mask's -inf): exp(s) neither overflows
        # nor leaves the normal range, so the row maximum need not be subtracted; two
        # reductions over memory in place of a pass down the rows and a subtraction
        hi, lo = s.max(), s.min()
        if lo >= -_DIRECT_RANGE and hi <= _DIRECT_RANGE:
            xp.exp(s, out=s)
            # times the sums' reciprocals: a multiply costs a fraction of a divide per
            # element (within an ulp of the quotient)
            r = _row_sums(s)
            xp.divide(1, r, out=r)
            s *= r[..., None]
            return "direct"
    if xp is np:
        # the reductions as the ufuncs' own (what the array methods call, after a
        # Python wrapper that costs more than a small attention's passes)
        m = np.maximum.reduce(s, axis=-1, keepdims=True)
        finite = np.isfinite(m)
        all_finite = bool(np.logical_and.reduce(finite, axis=None))
    else:
        m = s.max(axis=-1, keepdims=True)
        finite = xp.isfinite(m)
        all_finite = bool(finite.all())
    s -= m if all_finite else xp.where(finite, m, 0).astype(s.dtype)
    xp.exp(s, out=s)
    z = np.add.reduce(s, axis=-1, keepdims=True) if xp is np else s.sum(axis=-1, keepdims=True)
    if safe and not all_finite:
        z[m == -np.inf] = 1        # their exps are all 0: the row becomes 0
    s /= z
    return "max"


# softmax without its maximum subtracted: where every score lies within this bound
# (e**64 times the number of keys stays finite in float32; e**-64 is a normal float)
_DIRECT_RANGE = 64.0
_DIRECT_MIN = 1024  # below this many scores the passes cost less than the checks
_WIDE = (np.dtype(np.float32), np.dtype(np.float64))


def _row_sums(s):
    """The sums over the last dim of the float scores ``s`` (..., L, S), in either
    matrix layout, as BLAS matrix-vector products (NumPy's reduction down the columns
    of the transposed layout runs one short loop per row)."""
    xp = array_module(s)
    return xp.matmul(s, xp.ones(s.shape[-1], s.dtype))


_NUMBA = {}


def _scaled_softmax_(s, scale):
    """``softmax(s * scale)`` in place by the numba kernel, reading the scores once more
    instead of scaling them in a pass of their own; False, with ``s`` unchanged, where
    it does not apply (no numba, another layout, a row whose maximum is not finite)."""
    k = _columns(s)
    if k is None:
        return _softmax_in_rows(s, scale)
    s2 = _as_columns(s)
    return s2 is not None and k.softmax_columns(s2, np.float32(scale), _scratch(s2),
                                                np.empty(s2.shape[2], s.dtype))


def _rows(*arrays):
    """numba's softmax kernels (``ember.ops._softmax_numba``) when every array is a
    C-contiguous float32 NumPy array of row-major scores (:func:`_scores_array` where
    writing through the transpose does not keep the bits), else None. Measured on
    OpenBLAS's Haswell kernels (AMD Zen 3, AVX2), where the scores are row-major: the
    kernel's forward in about half the time of NumPy's passes, its backward in about a
    third (docs/performance/transformer.md, "The Transformer step on AVX2: attention's
    softmax along rows")."""
    if _NUMBA.get("softmax", False) is None:
        return None  # (numba missing: known after the first call, no checks then)
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != np.float32 or a.ndim < 2 or \
                not a.flags.c_contiguous or not a.size:
            return None
    return _fast_kernels.load(_NUMBA, "softmax", "ember.ops._softmax_numba")


def _softmax_in_rows(s, scale):
    """``softmax(s * scale)`` along the rows of row-major scores ``s``, in place, by the
    numba kernel; False, with ``s`` unchanged, where it does not apply (no numba,
    another layout, a row whose maximum is not finite)."""
    k = _rows(s)
    if k is None:
        return False
    s2 = s.reshape(-1, s.shape[-1])
    return k.softmax_rows(s2, np.float32(scale), np.empty(s2.shape[0], s.dtype))


def _columns(*arrays):
    """numba's softmax kernels (``ember.ops._softmax_numba``, the ``ember[fast]`` extra)
    when every array is a float32 NumPy array of scores stored transposed
    (:func:`_scores_layout`), else None (imported on first use; None without numba)."""
    if _NUMBA.get("softmax", False) is None:
        return None  # (numba missing: known after the first call, no checks then)
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != np.float32 or a.ndim < 2 or \
                a.strides[-1] <= a.strides[-2] or not a.size:
            return None
    return _fast_kernels.load(_NUMBA, "softmax", "ember.ops._softmax_numba")


def _as_columns(s):
    """The (..., L, S) scores ``s`` as a (B, S, L) view of their transposed matrices with
    contiguous rows, or None when they do not make one."""
    t = s.swapaxes(-1, -2)
    if t.flags.c_contiguous:
        return t.reshape((-1,) + t.shape[-2:])
    return None


def _scratch(s3):
    """Scratch for the column maxima of the (B, S, L) scores."""
    return np.empty((s3.shape[0], s3.shape[2]), s3.dtype)


def _product_into(a, b, out):
    """``a @ b`` into the row-major matrices ``out`` (the transposed view of scores stored
    by :func:`_scores_layout`) on NumPy's BLAS: the bits of NumPy's own loop into the
    column-major scores (checked for float32 and float64, inner sizes 1-256), in about
    0.8 of its time at 64 x 64 x 32. (MKL's batched product is faster still but differs
    in the last bit from an inner size of 32.) At more than one ember thread, a product
    that OpenBLAS would run on its own threads with an inner size past the bound where
    those keep its one-thread bits (``threads.same_bits_k``: 7 on its Haswell kernels)
    runs at one BLAS thread, as ``gemm.matmul``'s products do: the scores do not change
    with the thread count."""
    k = a.shape[-1]
    if _threads.MANY and k > _threads.same_bits_k(a.dtype.char) and \
            a.shape[-2] * k * b.shape[-1] >= _BLAS_THREADED_MNK:
        with _threads.single_blas():
            np.matmul(a, b, out=out)
        return
    np.matmul(a, b, out=out)


_BLAS_THREADED_MNK = 1 << 18  # OpenBLAS runs one thread below this m*n*k by itself


def _transposed(t):
    """Whether the matrices of ``t`` are stored transposed (column-major), as the
    scores of :func:`_scores_layout` are."""
    return t is not None and t.ndim >= 2 and t.strides[-1] > t.strides[-2]


def _split_lead(q, k, v):
    """The batch length to split attention over (NumPy arrays of 3+ dims with one
    batch), or None."""
    if type(q) is not np.ndarray or q.ndim < 3 or not (
            type(k) is np.ndarray and type(v) is np.ndarray and
            q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        return None
    if not q.dtype == k.dtype == v.dtype or q.dtype.kind != "f":
        return None
    return q.shape[0]


def _fits(bias, shape):
    """Whether ``bias`` (or None) broadcasts to the scores' ``shape`` without growing it."""
    return bias is None or (bias.ndim <= len(shape)
                            and np.broadcast_shapes(bias.shape, shape) == shape)


def _rows_of(t, lo, hi, ndim):
    """Rows ``lo:hi`` of the batch of ``t`` (broadcasting against ``ndim`` dims), or
    ``t`` itself when it broadcasts along the batch."""
    if t is None or t.ndim < ndim or t.shape[0] == 1:
        return t
    return t[lo:hi]


def _backward_arrays(a, g, dm, q, k, v, scale, want, out=None, kscale=None, gT=None):
    """First-order gradients of q, k, v and the bias (those ``want`` asks for) from the
    weights ``a``, into ``out`` when given. ``kscale`` (``scale`` unless given) is the
    factor of k's gradient: 1 where ``q`` is the query already scaled; ``gT``: ``g``'s
    matrices transposed (made here where they are not given and ``g`` is a C-contiguous
    NumPy array: ``v @ g^T`` then runs on BLAS's kernel for untransposed operands)."""
    if kscale is None:
        kscale = scale
    out = out or [None] * 4
    gq = gk = gv = gb = None
    if want[2]:
        gv = _gemm.matmul((a if dm is None else a * dm).swapaxes(-1, -2), g, out=out[2])
    if not (want[0] or want[1] or want[3]):
        return gq, gk, gv, gb
    if _transposed(out[3]):  # d loss / d weights, as its transpose v @ g^T
        gs = out[3]
        gT = _transposed_copy(g) if gT is None else gT
        _product_into(v, g.swapaxes(-1, -2) if gT is None else gT, gs.swapaxes(-1, -2))
    else:
        gs = _gemm.matmul(g, v.swapaxes(-1, -2), out=out[3])
    if dm is not None:
        gs *= dm
    # softmax backward: a * (gs - sum(gs * a)), in place on gs
    kern = _columns(gs, a)
    g2 = None if kern is None else _as_columns(gs)
    a2 = None if g2 is None else _as_columns(a)
    rows = None if kern is not None else _rows(gs, a)
    if a2 is not None:
        kern.softmax_backward_columns(g2, a2, np.empty(a2.shape[2], a.dtype))
    elif rows is not None:
        n = gs.shape[-1]
        rows.softmax_backward_rows(gs.reshape(-1, n), a.reshape(-1, n))
    else:
        # the row dot products as one product over memory and BLAS row sums (an einsum
        # down the columns of the transposed layout runs one short loop per row)
        gs -= _row_sums(gs * a)[..., None]
        gs *= a
    if want[0]:
        gq = _gemm.matmul(gs, k, out=out[0])
        gq *= scale
    if want[1]:
        gk = _gemm.matmul(gs.swapaxes(-1, -2), q, out=out[1])
        if kscale != 1:
            gk *= kscale
    if want[3]:
        gb = gs
    return gq, gk, gv, gb


def _transposed_copy(t):
    """A C-contiguous copy of the C-contiguous NumPy array ``t`` with each matrix
    transposed, or None for anything else. OpenBLAS multiplies small matrices with
    neither operand transposed at about twice the speed of ``a @ b^T`` (64 x 32 x 64:
    0.13 against 0.24 ms over 64 matrices); the copy costs a pass over ``t``."""
    if type(t) is not np.ndarray or t.ndim < 2 or not t.flags.c_contiguous:
        return None
    return np.ascontiguousarray(t.swapaxes(-1, -2))


def _in_rows(t, fills=None):
    """``t`` with each matrix's rows adjacent in memory, copied where they are not.

    Heads split from one projection are views whose rows lie a whole token apart (``N *
    E`` elements, often a power of two): the many small products of a batch then read
    rows that share cache sets and run at half speed. A copy is one pass over ``L * D``
    elements against products of ``L * S * D``.

    With a list ``fills``, the copy is left to the blocks of a split call: an empty
    array is returned and ``fill(lo, hi)``, copying the batch rows ``lo:hi`` into it,
    is appended to the list (the same copy, made on the intra-op threads with the
    products that read it)."""
    if type(t) is not np.ndarray or t.flags.c_contiguous:
        return t
    if fills is None:
        return np.ascontiguousarray(t)
    out = np.empty(t.shape, t.dtype)
    fills.append(lambda lo, hi: np.copyto(out[lo:hi], t[lo:hi]))
    return out


def _run_fills(fills, lo, hi):
    """The deferred copies of ``_in_rows``/``_transposed_into`` for batch rows ``lo:hi``,
    in the order they were made (a later one may read an earlier one's rows)."""
    for fill in fills:
        fill(lo, hi)


def _transposed_into(t, fills):
    """:func:`_transposed_copy` of ``t`` (C-contiguous once ``fills`` have run) left to
    the blocks of a split call, as ``_in_rows`` with ``fills``."""
    if type(t) is not np.ndarray or t.ndim < 2:
        return None
    out = np.empty(t.shape[:-2] + (t.shape[-1], t.shape[-2]), t.dtype)
    fills.append(lambda lo, hi: np.copyto(out[lo:hi], t[lo:hi].swapaxes(-1, -2)))
    return out


# OpenBLAS's kernel sets on which ``k @ q^T`` written into the transposed scores gives
# the bits of ``q @ k^T`` (SkylakeX: float32 and float64, inner sizes 1-256). OpenBLAS's
# Haswell kernels (which it also runs on AMD's Zen cores) differ in the last bits, so
# there, and on a kernel not measured, the scores are stored row-major and written by
# ``q @ k^T``: the bits of every other route (an unsplit batch, the recorded formula).
# (On Zen 3 the row-major scores cost 8-22% of an attention's forward and backward at
# 8 x 4 x 64 x 32, up to 8% at 4 x 8 x 128 x 64; filling the transposed layout from
# ``q @ k^T`` by a copy cost 9-25%: docs/performance/blas-mkl.md, "Routes that keep each
# other's bits on AVX2 machines".)
_TRANSPOSED_SCORES_KEEP_BITS = frozenset({"skylakex"})


def transposed_scores_keep_bits():
    """Whether scores written through their transpose (``k @ q^T`` into row-major
    matrices, NumPy's BLAS) have the bits of ``q @ k^T`` on the kernels NumPy's OpenBLAS
    runs (measured so, see above); False where unknown."""
    from ember.backend.threads import kernels_in
    return kernels_in("transposed_scores", _TRANSPOSED_SCORES_KEEP_BITS)


def _scores_array(shape, dtype):
    """An empty (..., L, S) array for the scores: :func:`_scores_layout` where writing
    through the transpose keeps the bits, else row-major."""
    if transposed_scores_keep_bits():
        return _scores_layout(shape, dtype)
    return np.empty(tuple(shape), dtype)


def _scores_layout(shape, dtype):
    """An empty (..., L, S) array for the attention scores with each matrix stored
    transposed (``[..., S, L]``). The softmax over S then reduces across rows of L
    contiguous elements and broadcasts its maximum and sum along them: vector loops,
    where the usual layout runs one short loop (S elements) per row -- a third of the
    forward's time at S = 64. The products that write the scores write their transposes
    (``k @ q^T``, ``v @ g^T``) into row-major matrices, on BLAS (NumPy runs its own, slower
    loop for a product into column-major matrices); those that read them take a
    transposed flag, which BLAS takes at the same speed."""
    return np.empty(tuple(shape[:-2]) + (shape[-1], shape[-2]), dtype).swapaxes(-1, -2)


def _laid_out_as(q, shape, dtype):
    """An empty output of ``shape`` whose leading dimensions lie in memory in the order of
    ``q``'s (PyTorch's fused CPU attention allocates its output like the query): the
    attention of heads split from one projection then merges back with a view, not a
    copy, as in PyTorch."""
    xp = np if type(q) is np.ndarray else array_module(q)
    st = q.strides[:-1]
    # the leading dims by falling stride (ties kept in order); in that order already,
    # or the last dim not the innermost: a row-major output
    if q.ndim < 2 or q.strides[-1] > min(st) or \
            all(st[i] >= st[i + 1] for i in range(len(st) - 1)):
        return xp.empty(shape, dtype)
    order = sorted(range(len(st)), key=st.__getitem__, reverse=True)
    back = [0] * (len(st) + 1)
    for i, d in enumerate(order):
        back[d] = i
    back[-1] = q.ndim - 1
    return xp.empty([shape[i] for i in order] + [shape[-1]], dtype).transpose(back)


class ScaledDotProductAttention(Primitive):
    """``apply(q, k, v, bias, dropout_mask, scale, safe)``.

    ``bias`` (broadcasting to the scores, or None) is added after scaling;
    ``dropout_mask`` (scores-shaped, already divided by ``1 - p``, or None) multiplies
    the weights. Gradients flow to q, k, v and a floating ``bias``.
    """
    _node_name = "ScaledDotProductFlashAttentionForCpuBackward0"
    broadcasts = True
    save_inputs = (0, 1, 2, 3)
    batch = _batch_nn.attention

    def forward(self, q, k, v, bias, dmask, scale, safe):
        self.scale, self.safe, self.dmask = scale, safe, dmask
        lead = _split_lead(q, k, v)
        shape = q.shape[:-1] + k.shape[-2:-1]
        if lead is None or not _fits(bias, shape) or not (dmask is None or
                                                           dmask.shape == shape):
            a, _ = self._weights(q, k, bias)
            self.a = a
            out = _laid_out_as(q, q.shape[:-1] + v.shape[-1:], np.result_type(a, v))
            return _gemm.matmul(a if dmask is None else a * dmask, v, out=out)
        # every (batch, head) is independent: blocks of the batch on the intra-op threads
        a = _scores_array(shape, q.dtype)
        out = _laid_out_as(q, q.shape[:-1] + v.shape[-1:], q.dtype)
        # the copies below are made by each block of its own batch rows (on the intra-op
        # threads when split): the same copies, not a serial pass before the split
        fills = []
        k, v = _in_rows(k, fills), _in_rows(v, fills)
        scale = self.scale
        if scale != 1 and _columns(a) is None and _transposed(a):
            # NumPy's softmax passes (no numba kernel to fold the scale into): the scale
            # multiplies q (L * D elements) as it is copied into rows, not the scores
            # (L * S) in a pass of their own; backward's k gradient then needs none.
            # (Row-major scores keep the scale on the scores: an unsplit batch's bits.)
            qs, q = q, np.empty(q.shape, q.dtype)
            fills.append(lambda lo, hi, s=scale: np.multiply(qs[lo:hi], s, out=q[lo:hi]))
            scale = 1
        else:
            q = _in_rows(q, fills)
        self.rows = (q, k, v, scale)

        # q's matrices transposed as well, so that BLAS multiplies k @ q^T with neither
        # operand transposed (twice the speed of the transposed-operand kernel at 64 x
        # 32 x 64); q itself stays for k's gradient
        qT = _transposed_into(q, fills) if _transposed(a) else None

        routes = {}

        def run(lo, hi, plain=False):
            if not plain:  # (a block computed again has its copies already)
                _run_fills(fills, lo, hi)
            ab, routes[lo, hi] = self._weights(
                q[lo:hi], k[lo:hi], _rows_of(bias, lo, hi, q.ndim), a[lo:hi], scale,
                None if qT is None else qT[lo:hi], whole=a.size, plain=plain)
            if dmask is not None:
                ab = ab * dmask[lo:hi]
            _gemm.matmul(ab, v[lo:hi], out=out[lo:hi])
        if _threads.get_num_threads() < 2:
            run(0, lead)  # one block: no threads' dispatch, one route
        else:
            parallel_rows(run, lead, 2 * a.size * (q.shape[-1] + v.shape[-1]), blas=True)
        if len(routes) > 1 and len(set(routes.values())) > 1:
            # one call over every row takes the maxima's route where any block needs it
            # (a row with an infinite maximum, or scores beyond +-64): the blocks that
            # took another are computed again that way, so that the bits do not depend
            # on the number of threads (rare: such scores, split over threads)
            for (lo, hi), route in list(routes.items()):
                if route != "max":
                    run(lo, hi, plain=True)
        self.a = a
        return out

    def _weights(self, q, k, bias, out=None, scale=None, qT=None, whole=None, plain=False):
        """The attention weights ``softmax(q @ k^T * scale + bias)`` (``scale`` the node's
        unless given: 1 for a q already scaled), into ``out`` when given, and the
        softmax's route (``_softmax_rows_``); ``qT``, when given, holds q's matrices
        transposed (``_transposed_copy``). For one block of a split call's rows,
        ``whole`` is the number of scores of the whole call (the direct softmax's size
        bound is the call's, not the block's), and ``plain`` takes the maxima's route."""
        if scale is None:
            scale = self.scale
        if _transposed(out):  # the scores' layout: their transpose k @ q^T, row-major
            s = out
            _product_into(k, q.swapaxes(-1, -2) if qT is None else qT, s.swapaxes(-1, -2))
        else:
            s = _gemm.matmul(q, k.swapaxes(-1, -2), out=out)
        if bias is None and s.size and not plain and _scaled_softmax_(s, scale):
            return s, "numba"
        if scale != 1:
            s *= scale
        if bias is not None:
            s += bias
        if not s.size:
            return s, "max"
        # (a mask's -inf or large negative values fail the direct softmax's bound:
        # its checks are not spent on masked scores)
        direct = bias is None and (s.size if whole is None else whole) >= _DIRECT_MIN
        return s, _softmax_rows_(s, self.safe, direct, plain)

    def backward(self, gy):
        q, k, v, bias = self.saved_tensors
        if _grad_state.grad_enabled:
            if transforming():  # a transform sees the formula's ops (their rules)
                return self._backward_recorded(gy, q, k, v, bias)
            # recorded: the same kernel as below, as one differentiable op
            outs = AttentionGrads.apply(gy, q, k, v, bias, node=self)
            return tuple(o if e is not None else None
                         for o, e in zip(outs, self._edges[:4])) + (None, None, None)
        grads = self._plain_grads(gy._data, q._data, k._data, v._data,
                                  None if bias is None else bias._data)
        return tuple(None if t is None else _make(t) for t in grads) + (None, None, None)

    def _plain_grads(self, g, q, k, v, bias):
        """The first-order gradients (arrays; None where not wanted) of a backward pass
        without a graph, from the weights forward kept."""
        a = self.a
        if a is None:    # a second pass through a retained graph
            a, _ = self._weights(q, k, bias)
        self.a = None
        eq, ek, ev, eb = self._edges[:4]
        want = (eq is not None, ek is not None, ev is not None, eb is not None)
        return self._grads(a, g, q, k, v, want)

    def _grads(self, a, g, q, k, v, want):
        """The first-order gradients of q, k, v and the bias (those ``want`` asks for),
        as arrays, from the weights ``a`` forward kept (eager backward and the compile
        plan's ``vjp`` alike)."""
        dm, scale = self.dmask, self.scale
        # the rows forward copied heads into (``_in_rows``), when it did
        rows, self.rows = getattr(self, "rows", None), None
        given = q, k, v
        kscale = scale  # the factor k's gradient takes: none where q came scaled
        if rows is not None:
            q, k, v, qs = rows
            if qs == 1:
                kscale = 1
        lead = _split_lead(q, k, v)
        if lead is None or g.shape[:-1] != a.shape[:-1] or not (
                g.dtype == a.dtype == q.dtype and (dm is None or dm.shape == a.shape)):
            if rows is not None:
                g = _in_rows(g)
            return list(_backward_arrays(a, g, dm, q, k, v, scale, want, kscale=kscale))
        fills = []  # (g's copy into rows, made by each block of its own rows)
        if rows is not None:
            g = _in_rows(g, fills)
        # independent per (batch, head): blocks of the batch on the intra-op threads;
        # each gradient laid out in memory as its input is (PyTorch's empty_like): heads
        # split from one projection then merge back into it with views
        grads = [_laid_out_as(t, t.shape, q.dtype) if w else None
                 for t, w in zip(given, want)] + [None]
        if want[0] or want[1] or want[3]:
            # the weights' gradient: scratch laid out as the weights are, or the
            # bias's gradient (row-major, as PyTorch gives it)
            grads[3] = _scores_layout(a.shape, q.dtype) if not want[3] and \
                a.strides[-1] > a.strides[-2] else np.empty(a.shape, q.dtype)

        def run(lo, hi):
            _run_fills(fills, lo, hi)
            _backward_arrays(a[lo:hi], g[lo:hi], None if dm is None else dm[lo:hi],
                             q[lo:hi], k[lo:hi], v[lo:hi], scale, want,
                             [None if t is None else t[lo:hi] for t in grads], kscale)
        if _threads.get_num_threads() < 2:
            run(0, lead)  # one block: no threads' dispatch
        else:
            parallel_rows(run, lead, 4 * a.size * (q.shape[-1] + v.shape[-1]), blas=True)
        if not want[3]:
            grads[3] = None
        return grads

    def _backward_recorded(self, gy, q, k, v, bias):
        """The same formulas in differentiable ember ops, from the saved inputs."""
        import ember
        s = ember.matmul(q, k.transpose(-2, -1)) * self.scale
        if bias is not None:
            s = s + bias
        a = s
        if s.numel():
            rows = None
            if self.safe:
                rows = (s.detach() == float("-inf")).all(-1, keepdim=True)
                rows = rows if bool(rows.any()) else None
            if rows is None:
                a = ember.softmax(s, -1)
            else:
                zero = ember.zeros((), dtype=s.dtype, device=s.device)
                a = ember.where(rows, zero, ember.softmax(ember.where(rows, zero, s), -1))
        dm = None if self.dmask is None else _make(self.dmask)
        ad = a if dm is None else a * dm
        eq, ek, ev, eb = self._edges[:4]
        gv = ad.transpose(-2, -1).matmul(gy) if ev is not None else None
        ga = gy.matmul(v.transpose(-2, -1))
        if dm is not None:
            ga = ga * dm
        gs = a * (ga - (ga * a).sum(-1, keepdim=True))
        gq = gs.matmul(k) * self.scale if eq is not None else None
        gk = gs.transpose(-2, -1).matmul(q) * self.scale if ek is not None else None
        gb = gs if eb is not None else None
        return gq, gk, gv, gb, None, None, None

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``) from the weights forward kept: eager
        backward's blocks, so the weights' gradient lies in memory as the weights do."""
        want = tuple(e is not None for e in self._edges[:4])
        got = self._grads(self.a, grads[0], inputs[0], inputs[1], inputs[2], want)
        return got + [None, None, None]


class AttentionGrads(Primitive):
    """``apply(grad_out, q, k, v, bias, node=...)``: the attention node ``node``'s
    first-order gradients of q, k, v and the bias, by the array kernel of the pass
    without a graph (so a gradient has the same bits with ``create_graph`` or without;
    PyTorch's CPU kernel computes both). An output the node gives None for is an empty
    placeholder. Its backward differentiates the same gradients written in ember ops
    (``_backward_recorded``) on the saved operands, so every order is exact; PyTorch's
    node here is ``NotImplemented`` (its fused kernel has no second derivative)."""
    _node_name = "ScaledDotProductFlashAttentionForCpuBackwardBackward0"
    n_outputs = 4
    save_inputs = (0, 1, 2, 3, 4)
    _custom_zeros = True  # an output no gradient reached is None in ``backward``

    def forward(self, g, q, k, v, bias, node):
        self.node = node
        grads = node._plain_grads(g, q, k, v, bias)
        empty = array_module(g).empty((0,), g.dtype)
        return tuple(empty if t is None else t for t in grads)

    def backward(self, *ggs):
        from ember.autograd import grad as _grad
        from ember.autograd.grad_mode import enable_grad
        saved = self.saved_tensors[:5]
        need = [i for i, e in enumerate(self._edges[:5]) if e is not None]
        with enable_grad():
            saved = list(saved)
            for i, t in zip(need, partial_inputs([saved[i] for i in need])):
                saved[i] = t
            outs = self.node._backward_recorded(*saved)[:4]
            pairs = [(o, gg) for o, gg in zip(outs, ggs)
                     if o is not None and gg is not None and o.requires_grad]
            result = [None] * 5
            if need and pairs:
                got = _grad([o for o, _ in pairs], [saved[i] for i in need],
                            [gg for _, gg in pairs], create_graph=_grad_state.grad_enabled,
                            allow_unused=True)
                for i, t in zip(need, got):
                    result[i] = t
        return tuple(result)


class FlashAttentionForCpu(ScaledDotProductAttention):
    """:class:`ScaledDotProductAttention` where PyTorch runs its fused CPU kernel: the
    bias is a constant there (the kernel is not chosen for a mask that needs a gradient),
    and the node's inputs are query, key and value."""
    _node_name = "ScaledDotProductFlashAttentionForCpuBackward0"
    n_inputs = 3


def scaled_dot_product_attention(q, k, v, bias, dropout_mask, scale, safe):
    """The attention output as one node (arguments as :class:`ScaledDotProductAttention`)."""
    return ScaledDotProductAttention.apply(q, k, v, bias, dropout_mask, scale, safe)
