"""The GRU's per-step elementwise work as two numba kernels (the ``ember[fast]`` extra),
beside the LSTM's (``ember/ops/_lstm_numba.py``, whose ``exp``/``tanh`` polynomials and
import rules these share).

Each time step of ``ember.ops.rnn_gru.forward`` is one BLAS product (``h @ W_hh^T``)
followed by :func:`forward_step`: ``r``, ``z``, ``n`` and the new state, row by
row (a loop per quantity). Each step of its backward is :func:`backward_step` (the gate
derivatives, on the input side and on the recurrent side, and the state gradient that
skips the product) followed by one BLAS product (``dGh @ W_hh``).
"""
import numpy as np

from ember.ops._lstm_numba import _fwd_jit, _jit, _sigmoid, _tanh

__all__ = ["forward_step", "backward_step"]

_ONE = np.float32(1.0)


@_fwd_jit
def forward_step(S, P, b, h, NH, Hp, Y, o):
    """One GRU step over rows ``o:o+n`` of the sequence buffers, ``n = len(h)``.

    ``S`` holds the input projections and receives ``r``, ``z``, ``n``; ``P`` is
    ``h @ W_hh^T`` and ``b`` the recurrent bias; ``h`` is the previous state (copied into
    ``Hp``); ``NH`` receives ``W_hn h + b_hn`` and ``Y`` the new state."""
    n, H = h.shape
    # one loop per quantity: a loop that reads the state while writing the output (a
    # view of the same buffer one step on) does not vectorize
    for r in range(n):
        row = o + r
        for j in range(H):
            S[row, j] = _sigmoid(S[row, j] + (P[r, j] + b[j]))
        for j in range(H):
            S[row, H + j] = _sigmoid(S[row, H + j] + (P[r, H + j] + b[H + j]))
        for j in range(H):
            nh = P[r, 2 * H + j] + b[2 * H + j]
            NH[row, j] = nh
            S[row, 2 * H + j] = _tanh(S[row, 2 * H + j] + S[row, j] * nh)
        for j in range(H):
            hp = h[r, j]
            Hp[row, j] = hp
            ng = S[row, 2 * H + j]
            Y[row, j] = (hp - ng) * S[row, H + j] + ng


@_jit
def backward_step(dG, dGh, S, NH, Hp, dh, gy, add_gy, dh_out, o):
    """The gate gradients of rows ``o:o+n``: ``dG`` on the input side, ``dGh`` on the
    recurrent side (the ``n`` gate's scaled by ``r``), from ``dh`` (plus ``gy``'s rows
    when ``add_gy``); ``dh_out`` receives ``dh * z``, the part of the previous state's
    gradient that skips the recurrent product."""
    n, H = dh_out.shape
    for r in range(n):
        row = o + r
        for j in range(H):
            d = dh[r, j] + gy[row, j] if add_gy else dh[r, j]
            rg = S[row, j]
            z = S[row, H + j]
            ng = S[row, 2 * H + j]
            dn = d * (_ONE - z) * (_ONE - ng * ng)
            dr = dn * NH[row, j] * (rg * (_ONE - rg))
            dz = d * (Hp[row, j] - ng) * (z * (_ONE - z))
            dG[row, j] = dr
            dG[row, H + j] = dz
            dG[row, 2 * H + j] = dn
            dGh[row, j] = dr
            dGh[row, H + j] = dz
            dGh[row, 2 * H + j] = dn * rg
            dh_out[r, j] = d * z
