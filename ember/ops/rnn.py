"""Recurrent layers as fused primitives (packing and padding variable-length batches is in
``ember.ops.rnn_packing``).

One node covers one direction of one layer over a whole sequence (RNN, LSTM or GRU),
so a step costs a handful of NumPy calls instead of a dozen graph nodes. These layers
serve calls without a graph, graph captures and transforms, and eager calls that record
a graph, under PyTorch's step-by-step nodes (``ember.ops.rnn_graph``; op by op, as
``ember.nn._rnn_unrolled`` spells them, where those nodes cannot stand in); the float32
LSTM over a padded batch records PyTorch's oneDNN node (:class:`MkldnnLSTMLayer`).

Sequences are kept *packed*: the rows of every time step stacked time-major, with
``batch_sizes[t]`` rows at step ``t`` (non-increasing, PyTorch's ``PackedSequence``
layout); a padded ``(T, B, *)`` batch is the case ``batch_sizes == (B,) * T``.

The math of a layer is written once, over a tiny namespace (``_ArrayMath`` for NumPy
or CuPy arrays, ``_TensorMath`` for ember Tensors) that supplies ``cat``, ``sigmoid``
and ``tanh``; everything else is ``@``, ``*``, ``+``, slicing and ``.T``, which both
kinds of value share:

- forward runs on arrays and keeps the gate activations;
- a first-order backward (BPTT) runs the same derivative code on arrays, reusing them;
- when the gradient itself is being recorded (``create_graph``), forward is replayed
  in ember Tensor ops from the saved inputs and the derivative code runs on Tensors,
  so second derivatives are exact.

The LSTM, the layer most used, also has an array-only version of its forward and
first-order backward that works in place in whole-sequence buffers
(``_lstm_forward_np``/``_lstm_backward_np``, about 10% faster); the tests check both
paths against torch (first derivatives take it, second derivatives the generic one).
With numba installed (the ``ember[fast]`` extra), their float32 steps run one fused
kernel each (``ember/ops/_lstm_numba.py``) around the step's BLAS product; over a padded
batch without projection every step runs in one kernel call, which calls the BLAS
products itself (``ember/ops/_rnn_blas.py`` finds them). On OpenBLAS cores with a
small-matrix kernel the per-step products run in column blocks (``_rnn_blas``). Without
the kernels, a padded batch without projection runs ``ember.ops.rnn_lstm_padded``: the
same operations over a gate-major layout that needs fewer, contiguous NumPy calls.
"""
import functools
import itertools

import numpy as np

from ember._tensor import _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import fast_kernels as _fast_kernels
from ember.backend import gemm as _gemm
from ember.backend import threads as _threads
from ember.backend.threads import single_blas
from ember.ops import rnn_lstm_padded as _padded
from ember.ops import rnn_lstm_seq as _seq
from ember.ops import rnn_seq_grads as _seq_grads
from ember.ops._rnn_blas import aligned as _aligned
from ember.ops._rnn_blas import column_block as _column_block
from ember.ops.unary import _relu_grad_array

__all__ = []

# every product: arrays go to ember's GEMM (MKL when installed), Tensors to their matmul
_mm = _gemm.matmul


# ----- the two namespaces the layer math runs on ----------------------------------------
class _ArrayMath:
    def __init__(self, xp):
        self.xp = xp

    def cat(self, xs, axis=0):
        return xs[0] if len(xs) == 1 else self.xp.concatenate(xs, axis)

    def sigmoid(self, x):
        # exp overflows to inf for very negative x and 1 / inf is the right 0
        e = self.xp.negative(x)
        self.xp.exp(e, out=e)
        e += 1
        return self.xp.reciprocal(e, out=e)

    def tanh(self, x):
        return self.xp.tanh(x)

    def relu(self, x):
        return self.xp.maximum(0, x)  # (x kept where equal: relu(-0.0) is -0.0)

    def t(self, w, steps=2):
        # OpenBLAS multiplies a C-ordered right operand about 1.5x faster than a
        # transposed view, and the recurrent matmul runs at every step; for one step (a
        # cell) the copy would cost more than it saves
        return self.xp.ascontiguousarray(w.T) if steps > 1 else w.T


class _TensorMath:
    @staticmethod
    def cat(xs, axis=0):
        from ember.ops.join import cat
        return xs[0] if len(xs) == 1 else cat(xs, axis)

    @staticmethod
    def sigmoid(x):
        return x.sigmoid()

    @staticmethod
    def tanh(x):
        return x.tanh()

    @staticmethod
    def relu(x):
        return x.relu()

    @staticmethod
    def t(w, steps=2):
        return w.T


_TENSOR_MATH = _TensorMath()
_NP_MATH = _ArrayMath(np)


def _array_math(a):
    xp = array_module(a)
    return _NP_MATH if xp is np else _ArrayMath(xp)


@functools.lru_cache(maxsize=256)
def _offsets(batch_sizes):
    return (0,) + tuple(itertools.accumulate(batch_sizes[:-1]))


# ----- one step of each cell: forward and its derivative --------------------------------
class _RNNCellMath:
    """``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``; both biases fold into the input
    projection."""
    has_c = False
    relu = False
    hp = 1  # where a step's activations keep the previous hidden state

    @staticmethod
    def input_bias(b_ih, b_hh):
        if b_ih is None:
            return b_hh
        return b_ih if b_hh is None else b_ih + b_hh

    @classmethod
    def step(cls, m, gx, h, c, w_hhT, b_hh, w_hrT):
        pre = gx + _mm(h, w_hhT)
        h2 = m.relu(pre) if cls.relu else m.tanh(pre)
        return h2, None, (h2, h)

    @classmethod
    def step_backward(cls, m, dh, dc, acts, w_hh, w_hr):
        h2, hp = acts
        dpre = dh * (h2 > 0) if cls.relu else dh * (1 - h2 * h2)
        return dpre, None, _mm(dpre, w_hh), None


class _ReLUCellMath(_RNNCellMath):
    relu = True


class _LSTMCellMath:
    """Gates ``i, f, g, o`` (in that order along the 4H axis); ``c' = f c + i g``,
    ``h' = o tanh(c')``, projected by ``W_hr`` when ``proj_size > 0``."""
    has_c = True
    hp = 4
    input_bias = staticmethod(_RNNCellMath.input_bias)

    @staticmethod
    def step(m, gx, h, c, w_hhT, b_hh, w_hrT):
        g = gx + _mm(h, w_hhT)
        H = c.shape[1]
        s = m.sigmoid(g)
        gg = m.tanh(g[:, 2 * H:3 * H])
        c2 = s[:, H:2 * H] * c + s[:, :H] * gg
        tc = m.tanh(c2)
        mm = s[:, 3 * H:] * tc
        h2 = mm if w_hrT is None else _mm(mm, w_hrT)
        return h2, c2, (s, gg, tc, c, h, mm)

    @staticmethod
    def step_backward(m, dh, dc, acts, w_hh, w_hr):
        s, gg, tc, cp, hp, mm = acts
        H = cp.shape[1]
        i, f, o = s[:, :H], s[:, H:2 * H], s[:, 3 * H:]
        dm = dh if w_hr is None else _mm(dh, w_hr)
        dct = dm * o * (1 - tc * tc) + dc
        dpre = m.cat([dct * gg * i * (1 - i), dct * cp * f * (1 - f),
                      dct * i * (1 - gg * gg), dm * tc * o * (1 - o)], 1)
        return dpre, None, _mm(dpre, w_hh), dct * f


class _GRUCellMath:
    """Gates ``r, z, n``: ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``,
    ``h' = (h - n) * z + n``; ``b_hh`` stays inside the recurrent term."""
    has_c = False
    hp = 3

    @staticmethod
    def input_bias(b_ih, b_hh):
        return b_ih

    @staticmethod
    def step(m, gx, h, c, w_hhT, b_hh, w_hrT):
        gh = _mm(h, w_hhT)
        if b_hh is not None:
            gh = gh + b_hh
        H = h.shape[1]
        rz = m.sigmoid(gx[:, :2 * H] + gh[:, :2 * H])
        nh = gh[:, 2 * H:]
        n = m.tanh(gx[:, 2 * H:] + rz[:, :H] * nh)
        h2 = (h - n) * rz[:, H:] + n
        return h2, None, (rz, n, nh, h)

    @staticmethod
    def step_backward(m, dh, dc, acts, w_hh, w_hr):
        rz, n, nh, hp = acts
        H = hp.shape[1]
        r, z = rz[:, :H], rz[:, H:]
        dnp = dh * (1 - z) * (1 - n * n)
        drz = m.cat([dnp * nh, dh * (hp - n)], 1) * rz * (1 - rz)
        dgh = m.cat([drz, dnp * r], 1)
        return m.cat([drz, dnp], 1), dgh, dh * z + _mm(dgh, w_hh), None


# ----- a layer: all steps of one direction ----------------------------------------------
def _enter(m, h, c, h0, c0, n, done):
    """The state rows that step over ``n`` rows reads. Forward direction: rows ``n:``
    have ended and their state is final (kept in ``done``); reverse direction: rows
    join, starting from ``h0``/``c0``."""
    rows = h.shape[0]
    if n < rows:
        done.append((h[n:], None if c is None else c[n:]))
        return h[:n], (None if c is None else c[:n])
    if n > rows:
        return m.cat([h, h0[rows:n]]), (None if c is None else m.cat([c, c0[rows:n]]))
    return h, c


def _final(m, h, c, done):
    """h_n and c_n: the last state of every row, as fresh arrays or Tensors."""
    hn = m.cat([h] + [d[0] for d in reversed(done)]) if done else h * 1
    cn = None
    if c is not None:
        cn = m.cat([c] + [d[1] for d in reversed(done)]) if done else c * 1
    return hn, cn


def _carry(m, dh, dc, ghn, gcn, n, h_parts, c_parts):
    """The gradient of the state rows that step over ``n`` rows wrote (the mirror of
    ``_enter``): rows that ended at this step take theirs from ``h_n``; rows that joined
    at the previous step hand theirs to ``h0`` (kept in ``h_parts``)."""
    if dh is None:
        return (ghn if n == ghn.shape[0] else ghn[:n],
                None if gcn is None else (gcn if n == gcn.shape[0] else gcn[:n]))
    rows = dh.shape[0]
    if n > rows:
        return m.cat([dh, ghn[rows:n]]), (None if dc is None else m.cat([dc, gcn[rows:n]]))
    if n < rows:
        h_parts.append(dh[n:])
        if dc is not None:
            c_parts.append(dc[n:])
        return dh[:n], (None if dc is None else dc[:n])
    return dh, dc


def _param_grads(dG, dGh, hp, x, w_ih, needs, dhs=None, mm=None, colsum=None, done=None):
    """Gradients of x, w_ih, w_hh, b_ih, b_hh, w_hr from the gate gradients of all steps
    (``dG`` on the input side, ``dGh`` on the recurrent side). Without ``w_ih`` the
    layer's input ``x`` is its input projection itself, whose gradient is ``dG``.
    ``colsum`` sums the rows of ``dG`` for the biases (default: ``.sum(0)``); ``done``:
    those of x, w_ih and w_hh computed already (``rnn_seq_grads``)."""
    def input_side():
        return ((dG if w_ih is None else _mm(dG, w_ih)) if needs[0] else None,
                _mm(dG.T, x) if needs[3] else None)

    def recurrent_side():
        return _mm(dGh.T, hp) if needs[4] else None
    if done is not None:
        dx, dw_ih, dw_hh = done
    elif _threads.MANY and needs[4] and (needs[3] or needs[0] and w_ih is not None) and \
            type(dG) is np.ndarray:
        a = _seq_grads.recurrent_rows_beside(dG, dGh, hp, x, w_ih, needs)
        if a:
            # the recurrent weight's first ``a`` rows on the input side (row blocks of
            # one product: its bits), so that the two sides are about as long
            dw_hh = np.empty((dGh.shape[1], hp.shape[1]), np.result_type(dGh, hp))
            dGhT = dGh.T

            # (at one BLAS thread also where ``pair`` runs the sides one after the other:
            # k past ``threads.same_bits_k`` changes the bits on BLAS's threads)
            def input_side_and_rows():
                with single_blas():
                    np.matmul(dGhT[:a], hp, out=dw_hh[:a])
                return input_side()

            def recurrent_rows():
                with single_blas():
                    np.matmul(dGhT[a:], hp, out=dw_hh[a:])
            (dx, dw_ih), _ = _threads.pair(input_side_and_rows, recurrent_rows,
                                           dG.size * min(x.shape[-1], hp.shape[-1]))
        else:
            # the weight gradients of the whole sequence at once, each product whole at
            # one BLAS thread (``threads.pair``): the recurrent side's beside the input
            # side's
            (dx, dw_ih), dw_hh = _threads.pair(input_side, recurrent_side,
                                               dG.size * min(x.shape[-1], hp.shape[-1]))
    else:
        (dx, dw_ih), dw_hh = input_side(), recurrent_side()
    colsum = colsum or (lambda a: a.sum(0))
    db_ih = colsum(dG) if needs[5] else None
    db_hh = None
    if needs[6]:
        # two leaves must not share one gradient array: a copy, not the same sum
        db_hh = colsum(dGh) if dGh is not dG or db_ih is None else db_ih * 1
    dw_hr = _mm(dhs.T, mm) if dhs is not None and needs[7] else None
    return dx, dw_ih, dw_hh, db_ih, db_hh, dw_hr


def _layer_forward(m, cell, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs, reverse):
    """Run one direction over packed ``x`` (N, I); returns (y, h_n, c_n, acts). With
    ``w_ih`` None, ``x`` is the input projection (N, G) without its bias ``b_ih``."""
    T = len(bs)
    gx = x if w_ih is None else _mm(x, m.t(w_ih, T))
    bias = cell.input_bias(b_ih, b_hh)
    if bias is not None:
        gx = gx + bias
    w_hhT = m.t(w_hh, T)
    w_hrT = None if w_hr is None else m.t(w_hr, T)
    offs = _offsets(bs)
    steps = range(T - 1, -1, -1) if reverse else range(T)
    n0 = bs[steps[0]]
    h = h0 if n0 == h0.shape[0] else h0[:n0]
    c = None
    if cell.has_c:
        c = c0 if n0 == c0.shape[0] else c0[:n0]
    ys = [None] * T
    acts = [None] * T
    done = []
    with single_blas(T):  # one small matrix product per step
        for t in steps:
            n, o = bs[t], offs[t]
            h, c = _enter(m, h, c, h0, c0, n, done)
            h, c, acts[t] = cell.step(m, gx[o:o + n], h, c, w_hhT, b_hh, w_hrT)
            ys[t] = h
    hn, cn = _final(m, h, c, done)
    return m.cat(ys), hn, cn, acts


def _layer_backward(m, cell, gy, ghn, gcn, acts, x, w_ih, w_hh, w_hr, bs, reverse, needs):
    """Backpropagation through time: gradients of (x, h0, c0, w_ih, w_hh, b_ih, b_hh,
    w_hr) given those of (y, h_n, c_n)."""
    T = len(bs)
    offs = _offsets(bs)
    dgx = [None] * T
    dgh = [None] * T
    dhs = [None] * T
    h_parts, c_parts = [], []
    dh = dc = None
    with single_blas(T):  # one small matrix product per step
        for t in (range(T) if reverse else range(T - 1, -1, -1)):
            n, o = bs[t], offs[t]
            dh, dc = _carry(m, dh, dc, ghn, gcn, n, h_parts, c_parts)
            dh = dh + gy[o:o + n]
            dhs[t] = dh
            dgx[t], dgh[t], dh, dc = cell.step_backward(m, dh, dc, acts[t], w_hh, w_hr)
    dh0 = m.cat([dh] + h_parts[::-1])
    dc0 = m.cat([dc] + c_parts[::-1]) if dc is not None else None
    dG = m.cat(dgx)
    dGh = dG if dgh[0] is None else m.cat(dgh)
    hp = m.cat([a[cell.hp] for a in acts])
    proj = w_hr is not None
    dx, dw_ih, dw_hh, db_ih, db_hh, dw_hr = _param_grads(
        dG, dGh, hp, x, w_ih, needs, m.cat(dhs) if proj else None,
        m.cat([a[5] for a in acts]) if proj else None)
    return dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dw_hr


# ----- the LSTM on arrays, in place: the hot path of a first-order pass -----------------
_FUSED = {}  # "lstm": the numba kernels' module, or None without numba (tried once)


def _lstm_kernels(xp, *arrays):
    """numba's per-step LSTM kernels (``ember/ops/_lstm_numba.py``, the ``ember[fast]``
    extra) when every array is float32 on NumPy, else None: the NumPy loop runs. numba
    is imported here, the first time an LSTM layer runs, never at ``import ember``."""
    if xp is not np or any(a is not None and a.dtype != np.float32 for a in arrays):
        return None
    return _fast_kernels.load(_FUSED, "lstm", "ember.ops._lstm_numba")


def _seq_gemm(fused, bs, rows, w_hr, n, k):
    """``(BLAS function, column block)`` for the whole-sequence kernels' (rows, k) @ (k, n)
    products (``_lstm_numba.sgemm``) where those kernels apply -- a padded batch (``rows``
    at every step), no projection --, else None: the per-step loop runs."""
    if w_hr is not None or not bs or bs[0] != rows or bs[-1] != rows:
        return None
    return fused.sgemm(rows, n, k)


def _blocks(xp, S, h0, w_hh, m, n, k):
    """The column block width of the NumPy loop's per-step (m, k) @ (k, n) products
    (``_rnn_blas.column_block``), or None: one ``matmul`` each."""
    if xp is not np or S.dtype != np.float32 or w_hh.dtype != np.float32 or \
            h0.dtype != np.float32:
        return None
    return _column_block(m, n, k)


def _blocked(nc, buf=None):
    """``a @ b`` as column blocks of width ``nc``, into (the first rows of) ``buf``, or
    into a new aligned array each time without it."""
    def mm(a, b):
        out = _aligned((a.shape[0], b.shape[1]), a.dtype) if buf is None else \
            buf[:a.shape[0]]
        for j in range(0, b.shape[1], nc):
            np.matmul(a, b[:, j:j + nc], out=out[:, j:j + nc])
        return out
    return mm


def _lstm_forward_seq(fused, gemm, S, bias, h0, c0, w_hh, bs, reverse):
    """``_lstm_forward_np`` over a padded batch as numba kernel calls (``rnn_lstm_seq``)."""
    M, C, acts = _seq.forward(fused, gemm, S, bias, h0, c0, w_hh, bs, reverse)
    B, N = bs[0], S.shape[0]
    last = slice(0, B) if reverse else slice(N - B, N)
    hn, cn = _final(_NP_MATH, M[last], C[last], [])
    return M, hn, cn, acts


def _padded_case(xp, S, h0, c0, w_hh, w_hr, bs):
    """Whether ``ember.ops.rnn_lstm_padded`` runs the layer: NumPy arrays, a padded
    batch (all rows at every step), no projection, and no numba kernels for them."""
    return xp is np and w_hr is None and bs[0] == bs[-1] == h0.shape[0] and \
        _lstm_kernels(xp, S, h0, c0, w_hh) is None


def _lstm_forward_np(xp, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs, reverse):
    """``_layer_forward`` for the LSTM on arrays, writing into whole-sequence buffers:
    S (gate activations i, f, g, o), TC (tanh c), Cp/Hp (each row's previous state),
    M (o * tanh c) and Y."""
    if _padded_case(xp, x, h0, c0, w_hh, w_hr, bs):
        nc = _blocks(xp, x, h0, w_hh, h0.shape[0], w_hh.shape[0], h0.shape[1])
        return _padded.forward(x, w_ih, _RNNCellMath.input_bias(b_ih, b_hh), h0, c0, w_hh,
                               len(bs), reverse, nc)
    # (the input projection is as fast with W_ih transposed in place as with a copy)
    S = xp.array(x, order="C") if w_ih is None else _mm(x, w_ih.T)
    bias = _RNNCellMath.input_bias(b_ih, b_hh)
    if bias is not None:
        fused = _lstm_kernels(xp, S, h0, c0, w_hh, bias)
        gemm = None if fused is None else _seq_gemm(fused, bs, h0.shape[0], w_hr, S.shape[1],
                                                    h0.shape[1])
        if gemm is not None:
            return _lstm_forward_seq(fused, gemm, S, bias, h0, c0, w_hh, bs, reverse)
    if bias is not None:
        S += bias
    N, H, Hout, dt = x.shape[0], c0.shape[1], h0.shape[1], S.dtype
    T = len(bs)
    # the per-step product in column blocks (``_rnn_blas``), on aligned operands
    nc = _blocks(xp, S, h0, w_hh, h0.shape[0], 4 * H, Hout)
    TC, C, Cp = (xp.empty((N, H), dt) for _ in range(3))
    M = xp.empty((N, H), dt) if nc is None else _aligned((N, H), dt)
    Hp = xp.empty((N, Hout), dt)
    Y = M if w_hr is None else xp.empty((N, Hout), dt)
    w_hhT = xp.ascontiguousarray(w_hh.T) if nc is None else _aligned((Hout, 4 * H), dt,
                                                                     w_hh.T)
    mm = _mm if nc is None else _blocked(nc, _aligned((h0.shape[0], 4 * H), dt))
    w_hrT = None if w_hr is None else xp.ascontiguousarray(w_hr.T)
    offs = _offsets(bs)
    steps = range(T - 1, -1, -1) if reverse else range(T)
    n0 = bs[steps[0]]
    h, c = h0[:n0], c0[:n0]
    if nc is not None:
        h = _aligned(h.shape, dt, h)
    done = []
    fused = _lstm_kernels(xp, S, h0, c0)
    if fused is not None:  # one compiled specialization: C-ordered arrays
        h, c = xp.ascontiguousarray(h), xp.ascontiguousarray(c)
    else:
        TG = xp.empty((max(bs), H), dt)  # the tanh gate of a step
    with single_blas(T):  # one small matrix product per step
        for t in steps:
            n, o = bs[t], offs[t]
            h, c = _enter(_NP_MATH if xp is np else _ArrayMath(xp), h, c, h0, c0, n, done)
            sl = slice(o, o + n)
            if fused is not None:
                fused.forward_step(S, mm(h, w_hhT), h, c, C, TC, Cp, Hp, M, o)
                if w_hr is not None:
                    _mm(M[sl], w_hrT, out=Y[sl])
                c, h = C[sl], Y[sl]
                continue
            g = S[sl]
            g += mm(h, w_hhT)
            Hp[sl] = h
            Cp[sl] = c
            gq = g[:, 2 * H:3 * H]
            tg = xp.tanh(gq, out=TG[:n])
            xp.negative(g, out=g)  # sigmoid in place, then the g quarter gets its tanh
            xp.exp(g, out=g)
            g += 1
            xp.reciprocal(g, out=g)
            gq[...] = tg
            c = C[sl]
            xp.multiply(g[:, H:2 * H], Cp[sl], out=c)
            tg *= g[:, :H]
            c += tg
            tc = TC[sl]
            xp.tanh(c, out=tc)
            xp.multiply(g[:, 3 * H:], tc, out=M[sl])
            if w_hr is not None:
                _mm(M[sl], w_hrT, out=Y[sl])
            h = Y[sl]
    hn, cn = _final(_NP_MATH if xp is np else _ArrayMath(xp), h, c, done)
    return Y, hn, cn, (S, TC, Cp, Hp, M)


def _lstm_backward_np(xp, gy, ghn, gcn, acts, x, w_ih, w_hh, w_hr, bs, reverse, needs):
    """``_layer_backward`` for the LSTM on arrays, writing the gate gradients of every
    step into one buffer."""
    if isinstance(acts, _padded.Acts):
        H = acts.TC.shape[2]
        nc = _blocks(xp, acts.S, acts.TC, w_hh, ghn.shape[0], H, 4 * H)
        if _padded.gate_major_case(nc, ghn.shape[0], w_hh, x, w_ih, needs):
            dG, dh0, dc0 = _padded.backward(gy, ghn, gcn, acts, w_hh, nc, needs[1],
                                            gate_major=True)
            grads = _padded.gate_major_grads(dG, x, _padded.previous_hidden(acts), needs)
            return (None, dh0 if needs[1] else None, dc0 if needs[2] else None) + grads + \
                (None,)
        dG, dh0, dc0, beside = _padded.backward(gy, ghn, gcn, acts, w_hh, nc, needs[1],
                                                (x, w_ih, needs))
        grads = _param_grads(dG, dG, _padded.previous_hidden(acts), x, w_ih, needs,
                             colsum=_padded.column_sums,
                             done=None if beside is None else beside.results())
        return (grads[0], dh0 if needs[1] else None, dc0 if needs[2] else None) + grads[1:]
    S, TC, Cp, Hp, M = acts
    m = _NP_MATH if xp is np else _ArrayMath(xp)
    H = TC.shape[1]
    dG = _aligned(S.shape, S.dtype) if xp is np else xp.empty_like(S)
    dhs = None if w_hr is None else xp.empty_like(Hp)
    T = len(bs)
    offs = _offsets(bs)
    h_parts, c_parts = [], []
    dh = dc = None
    nc = _blocks(xp, S, TC, w_hh, ghn.shape[0], H, 4 * H)
    mm = _mm if nc is None else _blocked(nc)  # (a new array a step: rows may be kept)
    w_hh_b = w_hh if nc is None else _aligned(w_hh.shape, w_hh.dtype, w_hh)
    fused = _lstm_kernels(xp, S, gy, ghn, gcn, w_hh)
    if fused is not None:  # one compiled specialization: C-ordered arrays
        gy, ghn, gcn = (None if a is None else xp.ascontiguousarray(a) for a in (gy, ghn, gcn))
        n0 = ghn.shape[0]
        gemm = _seq_gemm(fused, bs, n0, w_hr, H, 4 * H)
        if gemm is not None and gcn is not None:  # every step in one kernel call
            dh0, dc0 = _seq.backward(fused, gemm, dG, S, TC, Cp, w_hh, gy, ghn, gcn, n0,
                                     reverse, needs[1])
            grads = _param_grads(dG, dG, Hp, x, w_ih, needs)
            # the first state's gradients only where asked for (dh0 was not computed)
            return (grads[0], dh0 if needs[1] else None, dc0 if needs[2] else None) + \
                grads[1:]
    if fused is None:
        # the step's temporaries live in buffers of the batch's rows; a padded batch
        # keeps no rows of the carried gradients between steps (``_carry``), so those
        # live in buffers too
        B0, dt = ghn.shape[0], S.dtype
        dh_b, dct_b = xp.empty((B0, gy.shape[1]), dt), xp.empty((B0, H), dt)
        der_b = xp.empty((B0, 4 * H), dt)
        reuse = bs[0] == B0 == bs[-1]
        dc_b = xp.empty((B0, H), dt) if reuse else None
        if reuse and nc is not None:
            mm = _blocked(nc, _aligned((B0, H), dt))
    with single_blas(T):  # one small matrix product per step
        for t in (range(T) if reverse else range(T - 1, -1, -1)):
            n, o = bs[t], offs[t]
            dh, dc = _carry(m, dh, dc, ghn, gcn, n, h_parts, c_parts)
            sl = slice(o, o + n)
            if fused is not None:
                if dhs is not None:
                    dh = dh + gy[sl]
                    dhs[sl] = dh
                    dh = _mm(dh, w_hr)
                dc_prev = xp.empty((n, H), S.dtype)
                fused.backward_step(dG, S, TC, Cp, dh, gy, dhs is None, dc, dc_prev, o)
                dh, dc = mm(dG[sl], w_hh_b), dc_prev
                continue
            dh = xp.add(dh, gy[sl], out=dh_b[:n])
            if dhs is not None:
                dhs[sl] = dh
                dh = _mm(dh, w_hr)
            s, tc, d = S[sl], TC[sl], dG[sl]
            dct = xp.multiply(tc, tc, out=dct_b[:n])
            xp.subtract(1, dct, out=dct)
            dct *= s[:, 3 * H:]
            dct *= dh
            dct += dc
            xp.multiply(dct, s[:, 2 * H:3 * H], out=d[:, :H])
            xp.multiply(dct, Cp[sl], out=d[:, H:2 * H])
            xp.multiply(dct, s[:, :H], out=d[:, 2 * H:3 * H])
            xp.multiply(dh, tc, out=d[:, 3 * H:])
            der = der_b[:n]  # s (1 - s) for the sigmoid gates, 1 - g**2 for the tanh one
            xp.subtract(1, s, out=der)
            der *= s
            dq = der[:, 2 * H:3 * H]
            xp.multiply(s[:, 2 * H:3 * H], s[:, 2 * H:3 * H], out=dq)
            xp.subtract(1, dq, out=dq)
            d *= der
            dh = mm(d, w_hh_b)
            dc = xp.multiply(dct, s[:, H:2 * H], out=dc_b[:n] if reuse else None)
    dh0 = m.cat([dh] + h_parts[::-1])
    dc0 = m.cat([dc] + c_parts[::-1])
    dx, dw_ih, dw_hh, db_ih, db_hh, dw_hr = _param_grads(dG, dG, Hp, x, w_ih, needs, dhs, M)
    return dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dw_hr


class _Layer(Primitive):
    """One direction of one recurrent layer over packed ``x``.

    ``apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, batch_sizes=..., reverse=...)``
    with ``x`` (N, I), ``h0`` (B, H_out), ``c0`` (B, H) or None, biases and ``w_hr``
    optional; returns ``y`` (N, H_out), ``h_n`` and (LSTM) ``c_n``.
    """
    save_inputs = (0, 1, 2, 3, 4, 5, 6, 7)
    cell = None
    n_outputs = 2
    # no profiler row of its own: it runs inside ``aten::lstm``/``gru``/``rnn_*``, as
    # PyTorch's layers run inside theirs
    profiler_name = None
    fast = None  # (forward, backward) specialised for arrays, or None

    def forward(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, batch_sizes, reverse):
        self.bs, self.reverse = batch_sizes, reverse
        if self.fast is not None:
            y, hn, cn, self._acts = self.fast[0](array_module(x), x, h0, c0, w_ih, w_hh, b_ih,
                                                 b_hh, w_hr, batch_sizes, reverse)
        else:
            y, hn, cn, self._acts = _layer_forward(_array_math(x), self.cell, x, h0, c0, w_ih,
                                                   w_hh, b_ih, b_hh, w_hr, batch_sizes,
                                                   reverse)
        return (y, hn, cn) if self.cell.has_c else (y, hn)

    def backward(self, gy, ghn, gcn=None):
        return self._grads(self.saved_tensors, [e is not None for e in self._edges], gy, ghn,
                           gcn)

    def _grads(self, saved, needs, gy, ghn, gcn):
        """The inputs' gradients from the saved inputs (in this class's order)."""
        cell, bs, rev = self.cell, self.bs, self.reverse
        if _grad_state.grad_enabled:
            # the gradient is being recorded: replay forward in Tensor ops so that the
            # activations, and so the gradient, are differentiable functions of the inputs
            m = _TENSOR_MATH
            x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = saved
            acts = _layer_forward(m, cell, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs,
                                  rev)[3]
            return _layer_backward(m, cell, gy, ghn, gcn, acts, x, w_ih, w_hh, w_hr, bs, rev,
                                   needs)
        x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = [None if t is None else t._data
                                                   for t in saved]
        gcn = None if gcn is None else gcn._data
        if self.fast is not None:
            grads = self.fast[1](array_module(x), gy._data, ghn._data, gcn, self._acts, x,
                                 w_ih, w_hh, w_hr, bs, rev, needs)
        else:
            grads = _layer_backward(_array_math(x), cell, gy._data, ghn._data, gcn,
                                    self._acts, x, w_ih, w_hh, w_hr, bs, rev, needs)
        return tuple(None if g is None else _make(g) for g in grads)

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``): the array backward from the activations
        forward kept; one step of an RNN cell without the per-step lists."""
        x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = inputs[:8]
        needs = [e is not None for e in self._edges]
        bs = self.bs
        if self.cell in (_RNNCellMath, _ReLUCellMath) and len(bs) == 1 and c0 is None and \
                w_hr is None and bs[0] == h0.shape[0]:
            return self._cell_vjp(grads, x, w_ih, w_hh, needs)
        xp = array_module(x)
        gy, ghn, gcn = (list(xp.zeros_like(y) if g is None else g
                             for g, y in zip(grads, outputs)) + [None])[:3]
        if self.fast is not None:
            grads = self.fast[1](xp, gy, ghn, gcn, self._acts, x, w_ih, w_hh, w_hr, bs,
                                 self.reverse, needs)
        else:
            grads = _layer_backward(_array_math(x), self.cell, gy, ghn, gcn, self._acts, x,
                                    w_ih, w_hh, w_hr, bs, self.reverse, needs)
        return list(grads)

    def _cell_vjp(self, grads, x, w_ih, w_hh, needs):
        gy, ghn = grads
        dh = ghn if gy is None else (gy if ghn is None else ghn + gy)
        h2, hp = self._acts[0]
        if self.cell.relu:
            dpre = _relu_grad_array(dh, h2)
        else:
            dpre = h2 * h2
            np.subtract(1, dpre, out=dpre)
            dpre *= dh
        res = [None] * 8
        if needs[0]:
            res[0] = _mm(dpre, w_ih)
        if needs[1]:
            res[1] = _mm(dpre, w_hh)
        if needs[3]:
            res[3] = _mm(dpre.T, x)
        if needs[4]:
            res[4] = _mm(dpre.T, hp)
        if needs[5] or needs[6]:
            db = dpre.sum(0)
            res[5] = db if needs[5] else None
            res[6] = (db * 1 if needs[5] else db) if needs[6] else None
        return res


class RNNTanhLayer(_Layer):
    cell = _RNNCellMath


class RNNReluLayer(_Layer):
    cell = _ReLUCellMath


class LSTMLayer(_Layer):
    cell = _LSTMCellMath
    n_outputs = 3
    fast = (_lstm_forward_np, _lstm_backward_np)


def _gru_forward(*args):
    from ember.ops import rnn_gru
    return rnn_gru.forward(*args)


def _gru_backward(*args):
    from ember.ops import rnn_gru
    return rnn_gru.backward(*args)


class GRULayer(_Layer):
    cell = _GRUCellMath
    fast = (_gru_forward, _gru_backward)  # float32: numba kernels (ember.ops.rnn_gru)


class MkldnnLSTMLayer(LSTMLayer):
    """One direction of one LSTM layer as PyTorch's oneDNN kernel takes it (the node its
    CPU build records for a float32 LSTM): ``apply(x, w_ih, w_hh, b_ih, b_hh, h0, c0,
    batch_sizes=..., reverse=...)`` over ``x`` (T, B, I), returning ``y`` (T, B, H),
    ``h_n`` and ``c_n``; the arithmetic is :class:`LSTMLayer`'s. Eager only: a graph
    capture records the LSTM call (or :class:`LSTMLayer`) instead."""
    _node_name = "MkldnnRnnLayerBackward0"
    save_inputs = (0, 1, 2, 3, 4, 5, 6)
    vjp = None
    onnx = None
    torchscript = None

    def forward(self, x, w_ih, w_hh, b_ih, b_hh, h0, c0, batch_sizes, reverse):
        T, B = x.shape[:2]
        y, hn, cn = LSTMLayer.forward(self, x.reshape(T * B, x.shape[2]), h0, c0, w_ih, w_hh,
                                      b_ih, b_hh, None, batch_sizes, reverse)
        return y.reshape(T, B, y.shape[-1]), hn, cn

    def backward(self, gy, ghn, gcn=None):
        x3, w_ih, w_hh, b_ih, b_hh, h0, c0 = self.saved_tensors
        e = [e is not None for e in self._edges] + [False] * 7
        saved = (x3.reshape(-1, x3.shape[-1]), h0, c0, w_ih, w_hh, b_ih, b_hh, None)
        needs = [e[0], e[5], e[6], e[1], e[2], e[3], e[4], False]
        if _grad_state.grad_enabled or not isinstance(self._acts, _padded.Acts):
            gy = gy.reshape(-1, gy.shape[-1])
        # (else the padded loop reads gy's (T, B, H) steps in place: the gradient of a
        # batch-first output arrives transposed, which the reshape would copy)
        g = self._grads(saved, needs, gy, ghn, gcn)
        gx = None if g[0] is None else g[0].reshape(x3.shape)
        return gx, g[3], g[4], g[5], g[6], g[1], g[2]


LAYERS = {"RNN_TANH": RNNTanhLayer, "RNN_RELU": RNNReluLayer, "LSTM": LSTMLayer,
          "GRU": GRULayer}
