"""The LSTM's whole-sequence numba kernels (``ember/ops/_lstm_numba.py``, the
``ember[fast]`` extra) driven over blocks of the batch's rows, one block per thread.

A padded batch's rows are independent all along the sequence: row ``r`` of step ``t``
reads only row ``r`` of step ``t - 1``. So the rows split into blocks that run the
whole sequence each, forward and backward, and two blocks run at once on ember's pool
(``threads.parallel_rows``) with one hand-off per pass -- not one per step, as a split of
each step's small product would need -- and without the GIL: the kernels are compiled
``nogil`` and call BLAS themselves.

The results are the one-thread results bit for bit: the elementwise work of a row is the
same whatever the block, and each step's product ``h @ W_hh^T`` over a block's rows
gives the whole product's rows where the blocks start at a multiple of the BLAS
kernel's grain of rows (``threads.row_grain``, measured per OpenBLAS kernel) and run on
the whole product's kernel (OpenBLAS's small-matrix kernel, which ``_rnn_blas``'s column
blocks keep to, or its blocked one); on MKL (``ember[mkl]``) at the grain measured for
its code branch (``gemm.mkl_row_grain``), each block at one MKL thread. Where that is not
known -- another kernel or branch -- the batch runs as one block.
"""
import numpy as np

from ember.backend import threads as _threads
from ember.backend.threads import single_blas
from ember.ops import _rnn_blas
from ember.ops._rnn_blas import aligned as _aligned

__all__ = ["forward", "backward"]


def _row_blocks(gemm, B, n, k):
    """``(units, grain, most)`` for :func:`_run`: the batch as ``units`` blocks of
    ``grain`` rows (the last one also takes the ``B % grain`` rows after them) that may
    run apart in at most ``most`` blocks, or ``(1, B, 1)`` where the blocks would not give
    the whole batch's bits or there is one thread. The step's (rows, k) @ (k, n) products
    run in column blocks of ``gemm[1]``; a row block keeps a column block's bits where it
    runs on the same one of OpenBLAS's kernels (``threads.row_blocks_keep_kernel``: the
    products are plain, neither operand transposed)."""
    if not _threads.MANY:
        return 1, B, 1
    mkl = gemm[0] is _rnn_blas._SGEMM.get("mkl")
    if mkl:  # (MKL's products: whole, at one MKL thread per block)
        from ember.backend.gemm import mkl_row_grain
        grain = mkl_row_grain("f", B, k, gemm[1])
    elif gemm[0] is _rnn_blas._SGEMM.get("numpy"):
        grain = _threads.row_grain("f")
    else:
        return 1, B, 1
    if grain <= 0 or B < 2 * grain:
        return 1, B, 1
    nc, units = gemm[1], B // grain
    most = _threads.get_num_threads()
    while most >= 2 and not mkl and not _threads.row_blocks_keep_kernel(
            "f", B * nc * k, units // most * grain * nc * k, plain=True):
        most -= 1
    if most < 2 or nc != n and not _threads.small_kernel_mnk("f"):
        # (column blocks are taken on kernels with a small-matrix kernel only)
        return 1, B, 1
    return units, grain, most


def _run(block, units, grain, B, cost, most=1):
    """``block(r0, r1)`` over row blocks covering ``range(B)``, up to ``most`` at once on
    the pool where ``units > 1`` (each block a multiple of ``grain`` rows from a multiple
    of it)."""
    if units == 1:
        block(0, B)
        return

    def rows(lo, hi):
        block(lo * grain, B if hi == units else hi * grain)
    _threads.parallel_rows(rows, units, cost, blas=True, most=most)


def forward(fused, gemm, S, bias, h0, c0, w_hh, bs, reverse):
    """``_lstm_forward_np`` over a padded batch by ``_lstm_numba.forward_seq``: the same
    buffers, except that the previous cell states ``Cp`` are a view of the states'
    buffer instead of a copy. Returns ``(M, C, (S, TC, Cp, Hp, M))``: the outputs, every
    step's cell state and what the backward keeps."""
    N, B, H, Hs = S.shape[0], bs[0], c0.shape[1], h0.shape[1]
    dt = S.dtype
    CC = np.empty((N + B, H), dt)  # c0, then each step's c (reversed: each step's, c0)
    C, Cp = (CC[:N], CC[B:]) if reverse else (CC[B:], CC[:N])
    (CC[N:] if reverse else CC[:B])[...] = c0
    TC, M = np.empty((N, H), dt), _aligned((N, Hs), dt)
    Hp = np.empty((N, Hs), dt)
    w_hhT = fused.transpose(w_hh)
    if w_hhT.ctypes.data % 64:
        w_hhT = _aligned(w_hhT.shape, dt, w_hhT)
    h0a = _aligned((B, Hs), dt, h0)
    bias = np.ascontiguousarray(bias)
    G = S.shape[1]
    units, grain, most = _row_blocks(gemm, B, G, Hs)

    def block(r0, r1):
        fused.forward_seq(gemm[0], gemm[1], S, bias, _aligned((r1 - r0, G), dt), w_hhT, h0a,
                          CC, TC, Hp, M, B, reverse, r0, r1 - r0)
    # BLAS at one thread even for one step: the kernels call it themselves, past
    # ``threads.matmul``'s choice of the products its threads keep the bits of
    with single_blas(2):
        _run(block, units, grain, B, N * G * Hs, most)
    return M, C, (S, TC, Cp, Hp, M)


def backward(fused, gemm, dG, S, TC, Cp, w_hh, gy, ghn, gcn, B, reverse, need_h0):
    """``_lstm_numba.backward_seq`` over the padded forward's activations, filling the
    gate gradients ``dG``; returns the first state's gradients ``(dh0, dc0)`` (``dh0``
    undefined unless ``need_h0``)."""
    H, G = TC.shape[1], S.shape[1]
    dt = S.dtype
    dh0 = _aligned((B, H), dt)
    dc, dc2 = np.empty_like(dh0), np.empty_like(dh0)
    w = w_hh if w_hh.flags.c_contiguous and not w_hh.ctypes.data % 64 else \
        _aligned(w_hh.shape, w_hh.dtype, w_hh)
    units, grain, most = _row_blocks(gemm, B, H, G)
    last = []

    def block(r0, r1):
        # (each block's rows of the carried gradients: contiguous row slices)
        rows = slice(r0, r1)
        out = fused.backward_seq(gemm[0], gemm[1], dG, S, TC, Cp, w, gy, ghn[rows], gcn[rows],
                                 dh0[rows], dc[rows], dc2[rows], B, reverse, need_h0, r0)
        last.append(out.ctypes.data == dc[rows].ctypes.data)
    with single_blas(2):  # (see ``forward``)
        _run(block, units, grain, B, S.shape[0] * G * H, most)
    return dh0, (dc if last[0] else dc2)
