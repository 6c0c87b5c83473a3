"""A recurrent layer's weight and input gradients over the whole sequence, computed on
ember's second thread in blocks of rows while the backward's step loop is still
producing the gate gradients ``dG`` of the rows after them.

The weight gradients ``dG.T @ x`` and ``dG.T @ h`` sum over every row of the sequence,
so they cannot be split by rows of their result as the loop goes. But OpenBLAS's
blocked kernel itself sums in blocks of its inner dimension: for ``k`` terms it takes
``Q`` at a time while at least ``2 Q`` are left, then the rest in two near-halves rounded
up to its unroll (the last block: what is left), each block's sum added to the result
in order. The products of those blocks of rows, added in the same order, are therefore
the whole product's bits (measured on OpenBLAS's SkylakeX float32 kernel, ``Q`` = 448,
unroll 16: ``k`` from 300 to 3000, transposed ``dG``, results 48-256 columns wide). A
block's product is computed as soon as the loop has produced its rows -- the blocks of
the sequence's end first for a forward layer, whose backward runs from the last step --
and the partial results are added at the end. Only the blocks the loop reaches last are
left after it, split between the two threads.

The input's gradient ``dG @ w_ih`` is a product by rows: its rows are computed in the same
blocks, at the kernel's grain of rows (``threads.row_grain``), which keeps the whole
product's bits on the kernels where ember splits products in row blocks.

Where the kernel's blocks are not known (another kernel, float64, MKL's products) the
gradients are computed after the loop as before (``rnn._param_grads``).
"""
import threading

import numpy as np

from ember.backend import gemm as _gemm
from ember.backend import threads as _threads
from ember.ops import _rnn_blas
from ember.ops import rnn_overlap as _overlap

__all__ = ["plan", "recurrent_rows_beside", "k_blocks"]

# OpenBLAS's blocked kernel's blocks of the inner dimension, per core and dtype:
# (Q, unroll), see above (measured: tests/test_lstm_padded.py)
_K_BLOCKS = {"skylakex": {"f": (448, 16)}}


def k_blocks(k, char):
    """The blocks of the inner dimension (``k`` terms) OpenBLAS's blocked kernel sums
    one after the other for NumPy's products of dtype ``char``, as (lo, hi) pairs, or
    None where unknown."""
    core = _rnn_blas.core_name()
    q = _K_BLOCKS.get(core, {}).get(char)
    if q is None:
        return None
    q, u = q
    bounds, lo = [], 0
    while lo < k:
        n = k - lo
        if n >= 2 * q:
            n = q
        elif n > q:
            n = (n // 2 + u - 1) // u * u
        bounds.append((lo, lo + n))
        lo += n
    return bounds


def plan(dG, x, hp, w_ih, needs, B, reverse):
    """A :class:`SequenceGrads` for the gradients ``needs`` asks of the padded layer's
    backward (``x``'s ``needs[0]``, ``w_ih``'s ``needs[3]``, ``w_hh``'s ``needs[4]``) at
    more than one thread, or None: the gradients after the loop (one thread; no core to
    spare (``threads.cores_to_spare``); another
    kernel or dtype; MKL's products; the sequence one block long; a block's product
    small enough for OpenBLAS's small-matrix kernel, which sums otherwise)."""
    if not _threads.MANY or not (needs[3] or needs[4]) or w_ih is None or \
            not _threads.cores_to_spare():  # (``pair`` would run one side after the other)
        return None
    arrays = (dG, x, hp, w_ih)
    if any(type(a) is not np.ndarray or a.dtype != np.float32 or not a.flags.c_contiguous
           for a in arrays):
        return None
    N, G = dG.shape
    if _gemm.mkl_available() and _gemm._maybe_large((G, N), (N, x.shape[1])):
        return None
    blocks = k_blocks(N, "f")
    if blocks is None or len(blocks) < 2:
        return None
    least = _threads.small_kernel_mnk("f")
    widths = [c for c, need in ((x.shape[1], needs[3]), (hp.shape[1], needs[4])) if need]
    if any(G * (hi - lo) * c <= least for lo, hi in blocks for c in widths):
        return None
    dx = bool(needs[0])
    if dx:
        grain = _threads.row_grain("f")
        whole = N * G * w_ih.shape[1]
        if not grain or any(lo % grain or hi - lo < grain or not _threads.row_blocks_keep_kernel(
                "f", whole, (hi - lo) * G * w_ih.shape[1], plain=True) for lo, hi in blocks):
            return None
    return SequenceGrads(dG, x, hp, w_ih, (dx, bool(needs[3]), bool(needs[4])), B, reverse,
                         blocks)


class SequenceGrads:
    """The gradients of ``x`` (``dG @ w_ih``), ``w_ih`` (``dG.T @ x``) and ``w_hh``
    (``dG.T @ hp``) in blocks of rows (:func:`plan`): the loop reports its progress
    (:meth:`steps_done`), ember's second thread computes each block's products once
    its rows are there (``rnn_overlap.Tasks``), :meth:`finish` takes what is left and
    adds the weight gradients' blocks in order."""

    def __init__(self, dG, x, hp, w_ih, wanted, B, reverse, blocks):
        self.dG, self.x, self.hp, self.w_ih = dG, x, hp, w_ih
        self.B, self.reverse, self.blocks = B, reverse, blocks
        N, G = dG.shape
        want_x, want_ih, want_hh = wanted
        self.dx = np.empty((N, w_ih.shape[1]), dG.dtype) if want_x else None
        self.parts = {"ih": [np.empty((G, x.shape[1]), dG.dtype) for _ in blocks] if
                      want_ih else None,
                      "hh": [np.empty((G, hp.shape[1]), dG.dtype) for _ in blocks] if
                      want_hh else None}
        # the blocks in the order the loop completes them (a forward layer's backward
        # runs from the last step), each block's items in the helper's order
        self.order = list(range(len(blocks)))
        if not reverse:
            self.order.reverse()
        self.ready = [threading.Event() for _ in blocks]
        self.signalled = 0  # blocks of ``order`` whose rows are all there
        kinds = [k for k, w in (("hh", want_hh), ("ih", want_ih), ("x", want_x)) if w]
        rows = (0, G)  # all of a partial product's rows
        self.items = [(kind, j, rows) for j in self.order for kind in kinds]
        last = self.order[-1]
        a = self._rows_on_the_loop(last, wanted) if want_hh else 0
        if a:
            # the block left after the loop: its dW_hh in two row blocks, the first ``a``
            # rows taken by the loop's thread after its other products of the block (it
            # takes them from the list's end), so that the two threads end together
            i = self.items.index(("hh", last, rows))
            self.items[i:i + 1] = [("hh", last, (a, G)), ("hh", last, (0, a))]
        self.tasks = _overlap.Tasks(self._item, len(self.items),
                                    [self.ready[j] for _, j, _ in self.items])
        cols = (w_ih.shape[1] if want_x else 0) + (x.shape[1] if want_ih else 0) + \
            (hp.shape[1] if want_hh else 0)
        self.cost = N * G * cols

    def _rows_on_the_loop(self, j, wanted):
        """The rows of block ``j``'s ``dW_hh`` product for the loop's thread, beside that
        block's other products, so that both threads have about the same multiply-adds
        after the loop; 0 where its own products are as many already or where a row block
        would change the bits (off the kernel's grain of rows, or small enough for
        OpenBLAS's small-matrix kernel)."""
        lo, hi = self.blocks[j]
        G = self.dG.shape[1]
        n = self.hp.shape[1]
        own = (hi - lo) * G * ((self.w_ih.shape[1] if wanted[0] else 0) +
                               (self.x.shape[1] if wanted[1] else 0))
        grain = _threads.row_grain("f")
        if not grain:
            return 0
        a = ((hi - lo) * G * n - own) // (2 * (hi - lo) * n) // grain * grain
        whole = (hi - lo) * G * n
        if a < grain or G - a < grain or not all(
                _threads.row_blocks_keep_kernel("f", whole, r * (hi - lo) * n)
                for r in (a, G - a)):
            return 0
        return a

    def _item(self, k):
        kind, j, (r0, r1) = self.items[k]
        lo, hi = self.blocks[j]
        dG = self.dG
        if kind == "x":
            np.matmul(dG[lo:hi], self.w_ih, out=self.dx[lo:hi])
        else:
            np.matmul(dG[lo:hi, r0:r1].T, (self.x if kind == "ih" else self.hp)[lo:hi],
                      out=self.parts[kind][j][r0:r1])

    def steps_done(self, steps):
        """The loop has produced the gate gradients of its first ``steps`` steps (in its
        order): the blocks now complete may start. Returns the number of steps after
        which the next block will be complete (-1: none left), for the loop to call this
        again then."""
        rows = steps * self.B
        N = self.dG.shape[0]
        while self.signalled < len(self.order):
            lo, hi = self.blocks[self.order[self.signalled]]
            need = hi if self.reverse else N - lo  # the rows the loop must have produced
            if need > rows:
                return -(-need // self.B)
            self.ready[self.order[self.signalled]].set()
            self.signalled += 1
        return -1

    def finish(self):
        """Every item, the last ones in the loop's order taken here first (the helper
        takes them from the other end), then the weight gradients' blocks added in the
        kernel's order."""
        for k in range(len(self.items) - 1, -1, -1):
            self.tasks.take(k)
        for kind in ("ih", "hh"):
            parts = self.parts[kind]
            if parts is not None:
                for p in parts[1:]:
                    np.add(parts[0], p, out=parts[0])

    def results(self):
        """(dx, dw_ih, dw_hh), None for those not asked."""
        ih, hh = self.parts["ih"], self.parts["hh"]
        return self.dx, None if ih is None else ih[0], None if hh is None else hh[0]


def recurrent_rows_beside(dG, dGh, hp, x, w_ih, needs):
    """The rows of the recurrent weight's gradient ``dGh.T @ hp`` that ``rnn._param_grads``
    computes on the input side's thread so that both of ``threads.pair``'s sides have
    about the same multiply-adds (the input side: ``dG @ w_ih`` and ``dG.T @ x``), or 0:
    the product whole on its own side. Row blocks are taken only where they give the whole
    product's bits -- NumPy's BLAS (not MKL's products, ``ember[mkl]``), blocks at its
    kernel's grain of rows (``threads.row_grain``), each on the whole product's kernel
    (``threads.row_blocks_keep_kernel``: a block within the small-matrix kernel's size
    would sum otherwise) -- and the whole product is what the one-thread route computes
    (``gemm.matmul`` takes no other layout for it)."""
    N, G = dGh.shape
    n = hp.shape[1]
    if type(dGh) is not np.ndarray or type(hp) is not np.ndarray or dGh.dtype != hp.dtype or \
            dGh.dtype.char not in "fd" or hp.flags.f_contiguous and not hp.flags.c_contiguous:
        return 0
    if _gemm.mkl_available() and _gemm._maybe_large((G, N), (N, n)):
        return 0
    grain = _threads.row_grain(dGh.dtype.char)
    if not grain:
        return 0
    other = (dG.size * w_ih.shape[1] if needs[0] and w_ih is not None else 0) + \
        (dG.size * x.shape[-1] if needs[3] else 0)
    whole = G * N * n
    a = (whole - other) // (2 * N * n) // grain * grain  # rows: half the difference
    if a < grain or G - a < grain:
        return 0
    char = dGh.dtype.char
    if not (_threads.row_blocks_keep_kernel(char, whole, a * N * n) and
            _threads.row_blocks_keep_kernel(char, whole, (G - a) * N * n)):
        return 0
    return a
