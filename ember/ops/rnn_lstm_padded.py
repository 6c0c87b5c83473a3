"""The LSTM's NumPy loop over a padded batch (every step has all ``B`` rows), without a
projection: the default install's hot path (no numba), beside the general per-step loop
of ``ember.ops.rnn`` (packed batches, projections, CuPy).

Each NumPy call over a (32, 128) block costs about as much in dispatch as in arithmetic,
and a strided slice (one gate of a (B, 4H) row) several times a contiguous one, so this
loop lays the sequence out to need few calls, each over contiguous memory:

- the gate pre-activations are kept gate-major, ``S`` (5, T, B, H), in slots ``c, g, f,
  i, o`` (``c``: the step's previous cell state): the input projection is computed gate
  by gate straight into the slots, and the backward reads each gate of a chunk of steps
  as one block;
- a step computes in its own contiguous (5, B, H) block ``Q`` of the same slots (a
  NumPy call over contiguous operands dispatches in ~0.4 us, over a view of slots a
  sequence apart through NumPy's iterator in ~0.9): one add of the projection's four
  gates (slots 1-4) to the recurrent product, which is computed into ``Q``'s slots 1-4;
  the sigmoid's three calls over (f, i, o); the cell update's two products one call
  over (f, i) and (c, g); then one copy of ``Q`` into the step's slots of ``S`` for the
  backward (its c_prev and activations) before the new cell state replaces ``Q``'s
  ``c``: two calls of the step go through the iterator (the forward's ten calls had five);
- the hidden states live in a ``(T + 1)``-step buffer (the first state, then each
  step's), so a step reads its previous state in place;
- the recurrent product is computed gate by gate, in one stacked ``np.matmul`` over the
  transposed gates (NumPy's loop calls BLAS for each: no Python call per gate), or in
  ``_rnn_blas.column_block``'s column blocks where OpenBLAS's small-matrix kernel
  applies, into ``Q``'s gates (g, f, i, o); the backward's, where that kernel takes a
  gate's product but not the whole, as the sum of the four gates' products (one
  stacked call and one reduction), and the input projection in blocks of rows;
- the backward computes the step-independent factors -- ``(1 - tanh(c)**2) o`` and the
  gate derivatives ``s (1 - s)``, ``1 - g**2`` -- in passes over chunks of ``_CHUNK``
  steps (still in cache when the steps read them), leaving eight elementwise calls and
  the product per step (the forward: ten and a copy);
- a step indexes nothing in Python: its views come from iterating arrays' first axes,
  and the products' column blocks are sliced once per sequence.

At more than one thread with a core to spare, the large products run on ember's second
thread beside the loops (``rnn_overlap``): the input projection's chunks of rows ahead of
the forward's steps, the weight and input gradients' blocks of rows behind the
backward's (``rnn_seq_grads``), with the one-thread bits. The loops themselves stay on
one thread: each of their NumPy calls holds the GIL about as long as it computes.

The float operations and their order are the general loop's, so values are its bits
wherever the products are split the same way (the gate gradients ``dG`` keep its
(N, 4H) layout: the recurrent and weight products are unchanged). At one thread, where
the step's product runs by gate, ``dG`` is kept gate-major instead (each step's gate
blocks contiguous for that product) and the weight gradients are computed by gate
(``gate_major_case``), blocks of rows of the same products: the same bits.
"""
from itertools import islice

import numpy as np

from ember.backend import gemm as _gemm
from ember.backend import threads as _threads
from ember.backend.threads import single_blas
from ember.ops import rnn_overlap as _overlap
from ember.ops import rnn_seq_grads as _seq_grads
from ember.ops._rnn_blas import aligned as _aligned
from ember.ops._rnn_blas import row_block as _row_block
from ember.ops._rnn_blas import small_kernel as _small_kernel
from ember.ops._rnn_blas import transpose as _transpose

__all__ = []

# The slots of a step's gate-major block: the previous cell state c, then the gates g,
# f, i, o. Laid out so that one view serves each of three uses: (g, f, i, o) as one
# block for the recurrent product and the add of the input projection, (f, i, o) for the
# sigmoid, and (f, i) against (c, g) for the cell update ``f c + i g`` in one multiply.
# (The backward's ``dc * (g, c, i)`` is then two multiplies: (g, c) and i.)
_SLOT = (3, 2, 1, 4)  # the slot of each of PyTorch's gates (i, f, g, o)
# PyTorch's gates in the order of the slots without ``c`` (g, f, i, o): the recurrent
# product's
_P_ORDER = (2, 1, 0, 3)
# the backward computes its step-independent factors for this many steps at a time:
# about 0.5 MB of them for a (32, 128) batch, so that they are still in cache when the
# steps read them (the whole sequence's, some MB, would not be)
_CHUNK = 8
# the recurrent weights' gates are transposed by NumPy's copies up to this many elements
# a gate, by BLAS's transposition above (4 x (64, 64): 12 against 30 us; (128, 128): 74
# against 42 us, one thread)
_SMALL_GATE = 64 * 64
# the forward at more than one thread: the projection is computed in chunks of about
# this many steps' rows, ahead of the loop on ember's second thread (``_Projection``)
_AHEAD_STEPS = 4
# the longest sum (input width + 1) for which the input projection's blocks of rows were
# found to give the whole product's bits (``_projection_rows``)
_SAME_SUM_K = 385


_ONES = {}


def _one(dt):
    """The constant 1 as a read-only 0-d array of ``dt``, made once per dtype (an operand
    of the dtype spares NumPy converting a Python number; ``np.ones`` costs ~1 us)."""
    one = _ONES.get(dt)
    if one is None:
        one = _ONES[dt] = np.ones((), dt)
        one.flags.writeable = False
    return one


def _work_block(B, H, dt):
    """A step's (5, B, H) block of slots, C-ordered, with its gates (slots 1-4, the
    recurrent product's output) on a 64-byte boundary."""
    isz = np.dtype(dt).itemsize
    n = 5 * B * H * isz
    buf = np.empty(n + 64, np.uint8)
    a = -(buf.ctypes.data + B * H * isz) % 64
    return buf[a:a + n].view(dt).reshape(5, B, H)


class Acts:
    """What the padded forward keeps for its backward (the general loop keeps a tuple)."""
    __slots__ = ("S", "TC", "HH", "reverse")

    def __init__(self, S, TC, HH, reverse):
        self.S, self.TC, self.HH, self.reverse = S, TC, HH, reverse


def _gate_products(w_hh, P, nc, B):
    """``mm`` and the (weight, output) pairs of a step's recurrent product ``P[j] = h @
    W[j]``, made once per sequence, so that a step slices nothing: ``W`` (4, Hout, H) the
    transposed gates of ``w_hh`` in ``P``'s order (g, f, i, o), the sigmoid gates'
    negated (see ``forward``). Whole gates run as one stacked ``np.matmul`` (NumPy's loop
    calls BLAS for each gate: the bits of four ``np.matmul`` calls, 10-12 us a step
    faster at (32, 128) @ (128, 128) x 4); column blocks of ``nc`` (``_rnn_blas``), and
    gates large enough for MKL (``ember[mkl]``), one call per block."""
    Hout, H = w_hh.shape[1], P.shape[2]
    W = _aligned((4, Hout, H), w_hh.dtype)
    if H * Hout > _SMALL_GATE:
        for j, k in enumerate(_P_ORDER):
            _transpose(w_hh[k * H:(k + 1) * H], W[j])  # BLAS's transposition
        np.negative(W[1:], out=W[1:])
    else:
        _gates_transposed(w_hh, H, W)
    if nc is not None and nc < H:
        return np.matmul, [pair for j in range(4) for pair in _column_blocks(W[j], P[j], nc)]
    if nc is None and _gemm._maybe_large((B, Hout), (Hout, H)) and _gemm.mkl_available():
        return _gemm.matmul, list(zip(W, P))
    return np.matmul, [(W, P)]


def forward(x, w_ih, bias, h0, c0, w_hh, T, reverse, nc):
    """One direction over a padded batch (``x`` (T*B, I), or the input projection itself
    where ``w_ih`` is None); returns (y, h_n, c_n, Acts)."""
    B, H, Hout = c0.shape[0], c0.shape[1], h0.shape[1]
    dt = np.result_type(x, w_hh) if w_ih is None else np.result_type(x, w_ih)
    S = _aligned((5, T, B, H), dt)  # the slots of ``_SLOT``; slot 0 each step's c_prev
    S2 = S.reshape(5, T * B, H)
    # the sigmoid gates' pre-activations are kept negated, from negated weights: rounding
    # is symmetric in sign, so they are exactly the negation, and the sigmoid
    # 1 / (1 + exp(-z)) needs no pass to negate them
    chunks = None  # the projection's chunks of rows, claimed as the loop needs them
    if w_ih is not None and bias is not None:
        chunks = _projection_with_bias(x, w_ih, bias, S2, dt, T, reverse)
    for k in range(4 if w_ih is None or bias is None else 0):
        # the input projection gate by gate, each into its slot
        out, cols, neg = S2[_SLOT[k]], slice(k * H, (k + 1) * H), k != 2
        if w_ih is None:
            if neg:
                np.negative(x[:, cols], out=out)
            else:
                np.copyto(out, x[:, cols])
        else:
            _gemm.matmul(x, (np.negative(w_ih[cols]) if neg else w_ih[cols]).T, out=out)
        if bias is not None:
            if neg:
                out -= bias[cols]
            else:
                out += bias[cols]
    HH = _aligned((T + 1, B, Hout), dt)
    TC = np.empty((T, B, H), dt)
    Q = _work_block(B, H, dt)  # a step's slots, computed here and then copied into S
    Qc, Qg, Qp, Qs, Qo = Q[0], Q[1], Q[1:], Q[2:], Q[4]
    Qcg, Qfi = Q[:2], Q[2:4]
    F2 = np.empty((2, B, H), dt)  # f c_prev and i g of a step
    fc, ig = F2
    mm, blocks = _gate_products(w_hh, Qp, nc, B)
    first = T if reverse else 0
    HH[first] = h0
    Qc[...] = c0
    # the step-indexed views, iterated in step order (iterating an array's first axis
    # makes its views in C: a step indexes nothing in Python)
    order = slice(None, None, -1) if reverse else slice(None)
    new, old = (slice(0, T), slice(1, T + 1)) if reverse else (slice(1, T + 1), slice(0, T))
    St = S.transpose(1, 0, 2, 3)
    views = zip(St[:, 1:][order], St[order], HH[old][order], TC[order], HH[new][order])
    exp, div, tanh, mul, add = np.exp, np.divide, np.tanh, np.multiply, np.add
    step_blocks = blocks  # the first step's (then every step's) product blocks
    if not h0.any() and np.isfinite(w_hh.sum()):
        # a zero first state (the module's default): the first step's product is +0.0
        # (BLAS sums from +0.0, and +0.0 + (-0.0) is +0.0; finite weights: no 0 * inf),
        # so it is not computed, and +0.0 is added as the product would be
        Qp.fill(0)
        step_blocks = ()
    # (the outputs passed by position and the constant as an array of the dtype: NumPy
    # then skips parsing keywords and converting a Python number, ~0.5 us a call; and
    # ``1 / s`` by ``divide``, whose loop is faster than ``reciprocal``'s, the same bits)
    one = _one(dt)

    def steps(n):
        # the next ``n`` steps of ``views``
        nonlocal step_blocks
        for sg, st, hp, tc, h in islice(views, n):
            for w, out in step_blocks:
                mm(hp, w, out)
            step_blocks = blocks
            add(sg, Qp, Qp)  # the input projection's gates plus the product's
            tanh(Qg, Qg)
            # sigmoid of f, i, o (exp overflows to inf where 1 / inf is 0)
            exp(Qs, Qs)
            add(Qs, one, Qs)
            div(one, Qs, Qs)
            mul(Qfi, Qcg, F2)  # f c_prev and i g
            st[...] = Q  # the step's c_prev and activations, for the backward
            add(fc, ig, Qc)  # the next step's c_prev
            tanh(Qc, tc)
            mul(Qo, tc, h)

    with single_blas(T):  # one small matrix product per step
        if chunks is None:
            steps(T)
        else:
            chunks.run(steps)
    N = T * B
    Y = (HH[:T] if reverse else HH[1:]).reshape(N, Hout)
    last = 0 if reverse else T
    return Y, HH[last] * 1, Qc.copy(), Acts(S, TC, HH, reverse)


def _projection_with_bias(x, w_ih, bias, S2, dt, T=None, reverse=False):
    """The input projection and its bias gate by gate into the slots of ``S2`` (5, N, H),
    the sigmoid gates' negated: ``[x | 1] @ [w.T ; b]``, the bias the product's last
    term, so the sum is the one of ``x @ w.T`` then ``+ b`` (the same bits) without a
    pass over the slots to add it. The four products are one stacked ``np.matmul``
    where ``gemm.matmul`` would run ``np.matmul`` for each (NumPy's loop calls BLAS for
    each gate: the same bits, without three calls' dispatch).

    Returns None when done, or, given the steps ``T`` at more than one thread where the
    projection runs in blocks of rows (``_projection_rows``), the blocks still to
    compute, in chunks that the loop's steps claim as they need them and ember's second
    thread computes ahead of the loop (:class:`_Projection`)."""
    N, I = x.shape
    H = S2.shape[2]
    xa = np.empty((N, I + 1), dt)
    xa[:, :I] = x
    xa[:, I] = 1
    # the gates in the slots' order (g, f, i, o), on a 64-byte boundary: OpenBLAS's
    # kernel for small matrices reads this right operand in place, about 1.4x faster
    # aligned ((64, 65) @ (65, 128) blocks: 0.64 -> 0.45 ms a sequence at one thread)
    wa = _aligned((4, I + 1, H), dt)
    _gates_transposed(w_ih, H, wa[:, :I])
    _gates_transposed(bias.reshape(4 * H, 1), H, wa[:, I:])
    r = None
    if np.dtype(dt).itemsize > 2 and \
            not (_gemm._maybe_large((N, I + 1), (I + 1, H)) and _gemm.mkl_available()):
        r = _projection_rows(N, I + 1, H, dt)
        # (on a machine with no core to spare ``pair`` would run the loop and the
        # chunks one after the other: the one-thread route, without the chunks)
        if r is not None and T is not None and _threads.MANY and _threads.cores_to_spare():
            chunks = _Projection(xa, wa, S2, r, N // T, T, reverse)
            if chunks.count > 1:
                return chunks
        if _threads.get_num_threads() == 1:
            if r is None:
                np.matmul(xa, wa, out=S2[1:])
            else:
                _projection_blocks(xa, wa, S2, r, 0, N)
            return None
    if r is not None:  # (one chunk at more than one thread: the one-thread route)
        with single_blas():
            _projection_blocks(xa, wa, S2, r, 0, N)
        return None
    for j in range(4):
        _gemm.matmul(xa, wa[j], out=S2[j + 1])
    return None


def _projection_blocks(xa, wa, S2, r, lo, hi):
    """Rows ``lo:hi`` of the projection (``lo`` a multiple of ``r``) in blocks of ``r``
    rows, each in BLAS's kernel for small matrices (one stacked call over the gates and
    the blocks), then the rows left over past the last whole block: each block's
    products are the same BLAS calls on the same memory whatever the range, so any
    ranges give the bits of the whole."""
    K, H = xa.shape[1], S2.shape[2]
    n0 = lo + (hi - lo) // r * r
    if n0 > lo:
        np.matmul(xa[lo:n0].reshape((n0 - lo) // r, r, K), wa[:, None],
                  out=S2[1:, lo:n0].reshape(4, (n0 - lo) // r, r, H))
    if n0 < hi:
        np.matmul(xa[n0:hi], wa, out=S2[1:, n0:hi])


class _Projection:
    """The projection's blocks of rows in chunks of a few steps' rows, computed as the
    forward's loop reaches them: :meth:`run` takes the steps' chunks in the loop's order
    (the first on this thread), while ember's second thread (``rnn_overlap``) computes
    the chunks after it, each a BLAS call that runs without the GIL beside the loop."""
    __slots__ = ("xa", "wa", "S2", "r", "bounds", "groups", "count", "reverse")

    def __init__(self, xa, wa, S2, r, B, T, reverse):
        N = xa.shape[0]
        # chunks of whole blocks covering about _AHEAD_STEPS steps' rows (the rows left
        # over after the last whole block: the last chunk's)
        per = max(1, _AHEAD_STEPS * B // r) * r
        bounds = list(range(0, N - N % r, per)) + [N]
        self.xa, self.wa, self.S2, self.r, self.reverse = xa, wa, S2, r, reverse
        self.bounds, self.count = bounds, len(bounds) - 1
        # the loop's steps as (chunks to take first, steps to run), in the loop's order
        # of steps and of chunks (reversed: from the last rows)
        order = range(T - 1, -1, -1) if reverse else range(T)
        groups, taken = [], 0
        for t in order:
            rows = t * B if reverse else (t + 1) * B - 1
            j = _chunk_of(bounds, rows)
            need = self.count - j if reverse else j + 1
            if need > taken or not groups:
                groups.append([list(range(taken, max(need, taken))), 0])
                taken = max(need, taken)
            groups[-1][1] += 1
        self.groups = groups

    def chunk(self, k):
        """Compute the ``k``-th chunk in the loop's order."""
        j = self.count - 1 - k if self.reverse else k
        _projection_blocks(self.xa, self.wa, self.S2, self.r, self.bounds[j],
                           self.bounds[j + 1])

    def run(self, steps):
        """``steps(n)`` over the loop's groups of steps, each group's chunks taken first,
        with the chunks ahead computed beside it on ember's second thread."""
        tasks = _overlap.Tasks(self.chunk, self.count)

        def loop():
            for need, n in self.groups:
                for k in need:
                    tasks.take(k)
                steps(n)
        rows = self.xa.shape[0]
        _overlap.run_beside(loop, tasks, rows * self.xa.shape[1] * self.wa.shape[2] * 4)


def _chunk_of(bounds, row):
    """The index of the chunk of ``bounds`` holding ``row``."""
    j = 0
    while bounds[j + 1] <= row:
        j += 1
    return j


def _projection_rows(N, K, H, dt):
    """The rows per block of the input projection's float32 (N, K) @ (K, H) gate products
    where OpenBLAS's kernel for small matrices takes such blocks and not the whole
    (``_rnn_blas.row_block``; on the AVX-512 Xeon the whole projection of the LSTM step,
    (1024, 65) @ (65, 128) x 4, took 0.43-0.88 ms at best and up to 67 ms in the median
    of a loaded machine, in blocks of 64 rows 0.43-0.48 and 0.5-0.8 ms), or None. Only
    where that kernel sums each dot product as the general one does (one pass over ``K``
    in order: found for ``K`` up to 385 and gate widths a multiple of 16 -- the general
    kernel splits longer sums, and runs narrow widths' edges otherwise), so that the
    values are the whole product's bits."""
    if dt != np.float32 or K > _SAME_SUM_K or H % 16:
        return None
    return _row_block(N, H, K)


def _gates_transposed(w, H, out):
    """The transposed gates of ``w`` (4H, K) (PyTorch's order i, f, g, o) into ``out``
    (4, K, H), in the slots' order (g, f, i, o), the sigmoid gates' negated: NumPy's
    copies, three calls (for small gates; the weights of a (32, 128) step's product take
    BLAS's transposition, ~2x faster there)."""
    w3 = w.reshape(4, H, w.shape[1])
    out[0] = w3[2].T
    np.negative(w3[1::-1].transpose(0, 2, 1), out=out[1:3])  # f, i
    np.negative(w3[3].T, out=out[3])


def previous_hidden(acts):
    """The hidden state each row of the sequence started from, (N, Hout)."""
    T = acts.TC.shape[0]
    HH = acts.HH
    return (HH[1:] if acts.reverse else HH[:T]).reshape(-1, HH.shape[2])


def backward(gy, ghn, gcn, acts, w_hh, nc, need_h0, grads=None, gate_major=False):
    """Backpropagation through time over the padded forward's ``acts`` (``gy`` (N, H) or
    its (T, B, H) view, read in place): returns the gate gradients ``dG`` (N, 4H), in
    PyTorch's gate order, and the first state's gradients
    (``dh0`` None unless ``need_h0``); given ``grads`` ``(x, w_ih, needs)`` (the layer's
    input, input weight and ``rnn._param_grads``'s ``needs``), also the sequence's weight
    and input gradients computed beside the loop at more than one thread
    (``rnn_seq_grads``: a :class:`~ember.ops.rnn_seq_grads.SequenceGrads` whose
    ``results()`` they are), else None there. ``gate_major`` (where
    :func:`gate_major_case` says so; no ``grads`` then): ``dG`` is returned gate-major,
    (4, N, H), for :func:`gate_major_grads`."""
    S, TC, reverse = acts.S, acts.TC, acts.reverse
    T, B, H = TC.shape
    dt = S.dtype
    gy = gy.reshape(T, B, -1)
    f = S[_SLOT[1]]
    K = min(T, _CHUNK)
    A = np.empty((K, B, H), dt)  # (1 - tanh(c)**2) o, for a chunk of steps
    DER = np.empty((4, K, B, H), dt)  # the gates' derivatives, PyTorch's order
    if gate_major:
        # each step's gate gradients as four contiguous (B, H) blocks: the step's product
        # by gate reads its left operands in place (rows 4H apart: found 1.5-2x slower)
        dGg = _aligned((4, T, B, H), dt)
        dG = dG4 = dGg.transpose(1, 0, 2, 3)
    else:
        dG = _aligned((T, B, 4 * H), dt)
        dG4 = dG.reshape(T, B, 4, H).transpose(0, 2, 1, 3)  # a gate-major view of it
    D = np.empty((4, B, H), dt)
    D01, D2, D3 = D[:2], D[2], D[3]
    dh_b, dct, dc_b = np.empty((B, H), dt), np.empty((B, H), dt), np.empty((B, H), dt)
    dc = gcn
    dh = ghn
    w = w_hh if nc is None else _aligned(w_hh.shape, dt, w_hh)
    prod = _aligned((B, H), dt)
    blocks = _column_blocks(w, prod, nc)
    split = _split_by_gate(nc, B, H, w.shape[1])
    if split:
        # the product as the sum of the gates' products, dG_t's gate blocks against
        # w_hh's, in PyTorch's gate order: one stacked call, one reduction
        W4 = w.reshape(4, H, w.shape[1])
        O4 = _aligned((4, B, w.shape[1]), dt)
        reduce = np.add.reduce
    # ``gemm.matmul`` only where it would not run ``np.matmul`` itself (MKL's products)
    mm = _gemm.matmul if nc is None and _gemm._maybe_large((B, w.shape[0]), w.shape) and \
        _gemm.mkl_available() else np.matmul
    # slots 1 and 0 of S, (g, c_prev), and slot 3, i: the factors of dc for the
    # gradients of i, f and g
    GC = S[1::-1].transpose(1, 0, 2, 3)
    gates_i = S[_SLOT[0]]
    add, mul = np.add, np.multiply
    n = 0
    # the step-indexed views in step order (see ``forward``): the sequence's made once,
    # a chunk's factors' per chunk (first in the zip, so that the sequence's iterator is
    # not advanced past the chunk's last step)
    order = slice(None) if reverse else slice(None, None, -1)
    steps = zip(gy[order], GC[order], gates_i[order], TC[order], dG4[order], dG[order],
                f[order])
    DERt = DER.transpose(1, 0, 2, 3)
    beside = None if grads is None else _seq_grads.plan(
        dG.reshape(T * B, 4 * H), grads[0], previous_hidden(acts), grads[1], grads[2], B,
        reverse)

    def loop():
        nonlocal dh, dc, n
        # the step count after which ``beside``'s next block of rows is complete
        signal = -1 if beside is None else beside.steps_done(0)
        for a in (range(0, T, K) if reverse else range(T - K, -K, -K)):
            c0 = max(a, 0)
            ch = slice(c0, min(a + K, T))
            k = ch.stop - c0
            _factors(S, TC, ch, A[:k], DER[:, :k])
            views = zip(A[:k][order], DERt[:k][order], steps)
            for at, der, (gyt, gc, it, tc, dg4, dgt, ft) in views:
                dh = add(dh, gyt, dh_b)  # (outputs by position: see ``forward``)
                mul(at, dh, dct)
                if dc is not None:
                    add(dct, dc, dct)
                mul(dct, gc, D01)  # dc g, dc c_prev
                mul(dct, it, D2)  # dc i
                mul(dh, tc, D3)
                mul(D, der, dg4)
                n += 1
                if n == signal:
                    signal = beside.steps_done(n)
                if n == T:  # the last step's carried gradients are the first state's
                    dh = None
                    if need_h0:
                        dh = _aligned((B, H), dt)
                        if split:
                            mm(dg4, W4, O4)
                            reduce(O4, 0, None, dh)
                        else:
                            _product(dgt, w, dh, nc)
                    dc = mul(dct, ft)
                    break
                if split:
                    mm(dg4, W4, O4)
                    reduce(O4, 0, None, prod)
                else:
                    for wb, out in blocks:
                        mm(dgt, wb, out)
                dh = prod
                dc = mul(dct, ft, dc_b)
        if beside is not None:
            beside.finish()

    with single_blas(T):  # one small matrix product per step
        if beside is None:
            loop()
        else:
            _overlap.run_beside(loop, beside.tasks, beside.cost)
    if gate_major:
        return dGg.reshape(4, T * B, H), dh, dc
    if grads is None:
        return dG.reshape(T * B, 4 * H), dh, dc
    return dG.reshape(T * B, 4 * H), dh, dc, beside


def gate_major_case(nc, B, w_hh, x, w_ih, needs):
    """Whether the backward keeps the gate gradients gate-major (``backward``'s
    ``gate_major``) and :func:`gate_major_grads` computes the weights' and biases'
    gradients from them: at one ember thread, where the step's product runs by gate
    (``_split_by_gate``), float32, gate widths a multiple of 16, the input's gradient not
    asked (``dG @ w_ih`` sums over all four gates: one product of the (N, 4H) layout)
    and no product for MKL (``ember[mkl]``). Each gate's block of the weight products is
    then a block of rows of the whole product, at a multiple of the rows that keep its
    bits (``threads.row_grain``), kept only where it runs on the whole product's kernel
    (``threads.row_blocks_keep_kernel``: a block within the small-matrix kernel's size
    sums its rows in another order); the bias sums' blocks were found to be the whole
    sums' bits at those widths (tests/test_lstm_padded.py)."""
    H4, Hout = w_hh.shape
    H = H4 // 4
    if _threads.MANY or needs[0] or w_ih is None or x.dtype != np.float32 or \
            w_ih.dtype != np.float32 or not (needs[3] or needs[4] or needs[5] or needs[6]) \
            or not _split_by_gate(nc, B, H, Hout):
        return False
    grain = _threads.row_grain("f")
    if not grain or H % grain or H % 16:
        return False
    N = x.shape[0]
    widths = [k for k, need in ((x.shape[1], needs[3]), (Hout, needs[4])) if need]
    if not all(_threads.row_blocks_keep_kernel("f", H4 * N * k, H * N * k) for k in widths):
        return False
    return not (_gemm.mkl_available() and any(_gemm._maybe_large((H4, N), (N, k))
                                              for k in widths))


def gate_major_grads(dG, x, hp, needs):
    """``(dw_ih, dw_hh, db_ih, db_hh)`` (each None unless ``needs`` asks, in
    ``rnn._param_grads``'s order) from gate-major gate gradients ``dG`` (4, N, H): each
    gate's rows of the weight gradients ``dG[j].T @ x`` and ``dG[j].T @ hp`` in one
    stacked product each, the biases' ``ones @ dG[j]`` likewise -- the products of the
    (N, 4H) layout by blocks of their rows (``gate_major_case``)."""
    G, N, H = dG.shape
    dGT = dG.transpose(0, 2, 1)
    dw_ih = dw_hh = db_ih = db_hh = None
    if needs[3]:
        dw_ih = np.empty((G * H, x.shape[1]), np.result_type(dG, x))
        np.matmul(dGT, x, out=dw_ih.reshape(G, H, x.shape[1]))
    if needs[4]:
        dw_hh = np.empty((G * H, hp.shape[1]), np.result_type(dG, hp))
        np.matmul(dGT, hp, out=dw_hh.reshape(G, H, hp.shape[1]))
    if needs[5] or needs[6]:
        db = np.empty(G * H, dG.dtype)
        np.matmul(np.ones(N, dG.dtype), dG, out=db.reshape(G, H))
        db_ih = db if needs[5] else None
        # two leaves must not share one gradient array: a copy, not the same sum
        db_hh = (db * 1 if needs[5] else db) if needs[6] else None
    return dw_ih, dw_hh, db_ih, db_hh


def _split_by_gate(nc, B, H, Hout):
    """Whether the backward's recurrent product ``dG_t @ w_hh`` ((B, 4H) @ (4H, Hout)),
    which OpenBLAS's kernel for small matrices does not take whole (``nc``: it would run
    in column blocks), runs as the sum of its four gates' (B, H) @ (H, Hout) products,
    which that kernel takes: in a loop of the step's own calls 31-34 against 38-120 us
    for the column blocks of 32 at (32, 512) @ (512, 128) on the AVX-512 Xeon (torch's
    30-39; the layer's backward 0.96-1.00 of the blocks' in medians). The sum is then ordered
    by gate (each gate's 128 terms, then the four partial sums), where the blocks sum the
    512 terms in one pass: both float32 sums of the same terms, the same accuracy."""
    return nc is not None and _small_kernel(B, Hout, H)


def column_sums(a):
    """The sums of the columns of a 2-D array (the biases' gradients from ``dG``), as a
    product with a row of ones: BLAS's matrix-vector kernel reads ``a`` once, in rows,
    at about twice the speed of NumPy's reduction over the first axis (other dtypes than
    BLAS's: that reduction). ``gemm.sum_rows``: the same bits at any thread count."""
    return _gemm.sum_rows(a)


def _factors(S, TC, ch, A, DER):
    """The backward's step-independent factors for the steps ``ch``, into ``A``
    (``(1 - tanh(c)**2) o``) and ``DER`` (the gates' derivatives, ``s (1 - s)`` and
    ``1 - g**2``, PyTorch's order), in the general loop's order of operations."""
    one = _one(A.dtype)
    np.multiply(TC[ch], TC[ch], A)
    np.subtract(one, A, A)
    np.multiply(A, S[_SLOT[3], ch], A)
    # i and f in one call each (adjacent slots, as they are in PyTorch's order), then o
    for d, s in ((DER[:2], S[_SLOT[0]:_SLOT[1] - 1:-1, ch]), (DER[3], S[_SLOT[3], ch])):
        np.subtract(one, s, d)
        np.multiply(d, s, d)
    g2 = DER[2]
    g = S[_SLOT[2], ch]
    np.multiply(g, g, g2)
    np.subtract(one, g2, g2)


def _column_blocks(b, out, nc):
    """The (column block of ``b``, block of ``out``) pairs of ``out = a @ b`` in blocks
    of ``nc`` columns (None: the whole product)."""
    n = b.shape[1] if nc is None else nc
    return [(b[:, j:j + n], out[:, j:j + n]) for j in range(0, b.shape[1], n)]


def _product(a, b, out, nc):
    if nc is None:
        _gemm.matmul(a, b, out=out)
        return
    for j in range(0, b.shape[1], nc):
        np.matmul(a, b[:, j:j + nc], out=out[:, j:j + nc])
