"""The GRU layer on arrays in whole-sequence buffers, its steps' elementwise work in
numba kernels (``ember/ops/_gru_numba.py``, the ``ember[fast]`` extra): the float32 hot
path of :class:`ember.ops.rnn.GRULayer`. Elsewhere (float64, other devices, no numba)
the layer runs ``ember.ops.rnn``'s generic loop, which these functions hand over to.
"""
import numpy as np

from ember.backend import fast_kernels as _fast_kernels
from ember.backend.threads import single_blas
from ember.ops import rnn as _rnn

__all__ = ["forward", "backward"]


class _Buffers(tuple):
    """The activations the kernels keep: (S: r, z, n; NH: W_hn h + b_hn; Hp: h before
    each step)."""
    __slots__ = ()


def _kernels(xp, *arrays):
    """numba's GRU kernels when every array is float32 on NumPy, else None (imported on
    first use, as the LSTM's are)."""
    if xp is not np or any(a is not None and a.dtype != np.float32 for a in arrays):
        return None
    return _fast_kernels.load(_rnn._FUSED, "gru", "ember.ops._gru_numba")


def forward(xp, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, bs, reverse):
    """``_layer_forward`` for the GRU: (y, h_n, None, activations)."""
    k = _kernels(xp, x, h0, w_hh)
    if k is None:
        return _rnn._layer_forward(_rnn._array_math(x), _rnn._GRUCellMath, x, h0, c0, w_ih,
                                   w_hh, b_ih, b_hh, w_hr, bs, reverse)
    mm = _rnn._mm
    S = np.array(x, order="C") if w_ih is None else mm(x, np.ascontiguousarray(w_ih.T))
    if b_ih is not None:
        S += b_ih
    N, H = x.shape[0], h0.shape[1]
    NH, Hp, Y = (np.empty((N, H), np.float32) for _ in range(3))
    w_hhT = np.ascontiguousarray(w_hh.T)
    b = np.zeros(3 * H, np.float32) if b_hh is None else np.ascontiguousarray(b_hh)
    T = len(bs)
    offs = _rnn._offsets(bs)
    steps = range(T - 1, -1, -1) if reverse else range(T)
    h = np.ascontiguousarray(h0[:bs[steps[0]]])
    done = []
    with single_blas(T):  # one small matrix product per step
        for t in steps:
            n, o = bs[t], offs[t]
            h = _rnn._enter(_rnn._NP_MATH, h, None, h0, None, n, done)[0]
            k.forward_step(S, mm(h, w_hhT), b, h, NH, Hp, Y, o)
            h = Y[o:o + n]
    hn = _rnn._final(_rnn._NP_MATH, h, None, done)[0]
    return Y, hn, None, _Buffers((S, NH, Hp))


def backward(xp, gy, ghn, gcn, acts, x, w_ih, w_hh, w_hr, bs, reverse, needs):
    """``_layer_backward`` for the GRU from ``forward``'s activations."""
    if type(acts) is not _Buffers:
        return _rnn._layer_backward(_rnn._array_math(x), _rnn._GRUCellMath, gy, ghn, gcn, acts,
                                    x, w_ih, w_hh, w_hr, bs, reverse, needs)
    k = _kernels(xp, x)
    S, NH, Hp = acts
    mm = _rnn._mm
    gy, ghn = np.ascontiguousarray(gy), np.ascontiguousarray(ghn)
    dG, dGh = np.empty_like(S), np.empty_like(S)
    T = len(bs)
    offs = _rnn._offsets(bs)
    h_parts = []
    dh = None
    with single_blas(T):  # one small matrix product per step
        for t in (range(T) if reverse else range(T - 1, -1, -1)):
            n, o = bs[t], offs[t]
            dh = _rnn._carry(_rnn._NP_MATH, dh, None, ghn, None, n, h_parts, [])[0]
            out = np.empty((n, Hp.shape[1]), np.float32)
            k.backward_step(dG, dGh, S, NH, Hp, dh, gy, True, out, o)
            out += mm(dGh[o:o + n], w_hh)
            dh = out
    dh0 = _rnn._NP_MATH.cat([dh] + h_parts[::-1])
    dx, dw_ih, dw_hh, db_ih, db_hh, _ = _rnn._param_grads(dG, dGh, Hp, x, w_ih, needs)
    return dx, dh0, None, dw_ih, dw_hh, db_ih, db_hh, None
