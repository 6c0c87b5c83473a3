"""Normalization: batch, layer, group and instance norm, and local response norm.

One fused primitive, :class:`Normalize`, computes ``(x - mean) / sqrt(var + eps) *
weight + bias`` over some axes in a single NumPy pass set, optionally updating running
statistics. Its backward is written in ember Tensor ops: on a first-order pass it
reuses the mean and inverse standard deviation from forward; when a graph of the
gradient is being recorded (``create_graph``) it recomputes them from the saved input
with differentiable ops, so second derivatives are exact.
"""
import numpy as np

from ember._tensor import _make, _mode_active, _mode_recorder
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import fast_kernels as _fast_kernels
from ember.backend.threads import parallel_rows
from ember.ops import _batch_nn
from ember.ops._util import opmath
from ember.ops.composite_node import call, records_graph

# the names torch also has at top level, with the same signature
__all__ = ["layer_norm", "group_norm", "rms_norm"]


def seq_moments(x, axes):
    """Mean and biased variance of the array ``x`` over ``axes`` (kept as size 1) in
    double, each sum taken one element at a time in memory order, as PyTorch's batch
    norm kernel: where the largest floats overflow, the order decides inf or NaN."""
    xm = array_module(x)
    xd = x.astype(np.float64)
    kshape = tuple(1 if i in axes else v for i, v in enumerate(x.shape))
    n = _prod(x.shape[a] for a in axes)

    def seq_mean(a):
        rows = xm.moveaxis(a, axes, tuple(range(-len(axes), 0))).reshape(-1, n)
        return (xm.cumsum(rows, axis=1)[:, -1] / n).reshape(kshape)
    with np.errstate(all="ignore"):
        mean = seq_mean(xd)
        return mean, seq_mean(xm.square(xd - mean))


class Normalize(Primitive):
    """``(x - mean) * rsqrt(var + eps) * w + b`` with mean and (biased) var over ``axes``.

    ``w`` and ``b`` (or None) broadcast against ``x``. ``stats``, when given, is a
    :class:`_RunningStats` updated in place with the batch mean and unbiased variance.
    Common layouts (:func:`_layout`) run in blocks of rows that stay in cache, with the
    row sums and dot products as BLAS matrix-vector products.
    """
    save_inputs = (0, 1)
    broadcasts = True
    _node_name = "NativeBatchNormBackward0"
    n_inputs = 3   # input, weight, bias (None when there is none), as PyTorch lists them
    _overflow_is_nan = False  # batch and instance norm give 0 there, as PyTorch's do
    _nan_in_double = True  # and for float64 input too
    batch = _batch_nn.normalize

    def forward(self, x, w, b, axes, eps, stats=None):
        self.axes, self.eps = axes, eps
        self.b_shape = None if b is None else b.shape
        n = _prod(x.shape[a] for a in axes)
        self.layout = lay = _layout(x, w, b, axes)
        if lay is not None:
            out, mean, var = _FORWARD[lay[0]](x, w, b, eps, lay)
            kshape = tuple(1 if i in axes else v for i, v in enumerate(x.shape))
            mean, var = mean.reshape(kshape), var.reshape(kshape)
            self.mean, self.invstd = mean, 1.0 / array_module(x).sqrt(var + eps)
        else:
            xm = array_module(x)
            mean = x.mean(axis=axes, keepdims=True)
            out = x - mean
            var = _sum_prod(out, out, axes) / max(n, 1)
            invstd = 1.0 / xm.sqrt(var + eps)
            self.mean, self.invstd = mean, invstd
            out *= invstd
            if w is not None:
                out *= w
            if b is not None:
                out += b
        nan_rule = self._overflow_is_nan and (x.dtype != np.float64 or self._nan_in_double)
        if not nan_rule and x.dtype in (np.float32, np.float64) and n and \
                not (array_module(x).isfinite(mean).all() and array_module(x).isfinite(var).all()):
            out, mean, var = self._double_stats(x, w, b, axes, eps)
        if nan_rule:
            xm = array_module(x)
            overflow = xm.isinf(var)
            if overflow.any():
                # PyTorch's row moments overflow to NaN where the variance overflows, not
                # to an infinite variance and a zero output
                out = xm.where(overflow.reshape(self.mean.shape), xm.nan, out).astype(
                    out.dtype, copy=False)
                self.invstd = xm.where(overflow.reshape(self.mean.shape), xm.nan,
                                       self.invstd).astype(self.invstd.dtype, copy=False)
        if stats is not None:
            stats.update(mean, var * (n / (n - 1)) if n > 1 else var * np.nan)
        return out

    def _double_stats(self, x, w, b, axes, eps):
        """Batch and instance norm (and group norm of float64) as PyTorch computes them
        when the statistics overflow (or hold NaN): moments in double, then in x's dtype
        ``x * alpha + beta`` with ``alpha = invstd * w`` and ``beta = b - mean * alpha``,
        so huge values give finite results where ``(x - mean) * invstd`` gives inf * 0."""
        xm = array_module(x)
        mean, var = seq_moments(x, axes)
        with np.errstate(all="ignore"):
            mean, var = mean.astype(x.dtype), var.astype(x.dtype)
            invstd = (1.0 / xm.sqrt(var + eps)).astype(x.dtype)
            alpha = invstd if w is None else invstd * w
            beta = -mean * alpha if b is None else b - mean * alpha
            self.mean, self.invstd = mean, invstd
            return x * alpha + beta, mean, var

    def _saved_xw(self):
        return self.saved_tensors

    def backward(self, gy):
        x, w = self._saved_xw()
        if not _grad_state.grad_enabled:
            need = tuple(e is not None for e in self._edges[:3])
            if self.layout is not None:
                gx, gw, gb = _BACKWARD[self.layout[0]](
                    gy._data, x._data, None if w is None else w._data, self.mean, self.invstd,
                    need, self.layout, self.b_shape)
                if gw is not None:
                    gw = gw.reshape(w.shape)
                if gb is not None:
                    gb = gb.reshape(self.b_shape)
                return (_wrap(gx), _wrap(gw), _wrap(gb)) + (None,) * 3
            return self._backward_arrays(gy._data, x._data, None if w is None else w._data)
        # recorded (create_graph): the statistics recomputed in differentiable ops
        axes = self.axes
        e = self._edges
        mean = x.mean(axes, keepdim=True)
        xc = x - mean
        invstd = ((xc * xc).mean(axes, keepdim=True) + self.eps).rsqrt()
        xhat = xc * invstd
        g = gy * w if w is not None else gy
        gx = gw = gb = None
        if e[0] is not None:
            gx = (g - g.mean(axes, keepdim=True)
                  - xhat * (g * xhat).mean(axes, keepdim=True)) * invstd
        if e[1] is not None:
            gw = gy * xhat
        if e[2] is not None:
            gb = gy
        return gx, gw, gb, None, None, None

    def _backward_arrays(self, gy, x, w):
        """The first-order gradients in fused array code (no graph is being recorded):
        two full-size temporaries, the reductions as einsum contractions."""
        axes = self.axes
        e = self._edges
        xm = array_module(x)
        n = max(_prod(x.shape[a] for a in axes), 1)
        xhat = x - self.mean
        xhat *= self.invstd
        gx = gw = gb = None
        if e[1] is not None:
            gw = _make(_sum_prod(gy, xhat, _reduced_axes(x.shape, w.shape)).reshape(w.shape))
        if e[2] is not None:
            gb = _make(_sum_to(gy, self.b_shape))
        if e[0] is not None:
            g = gy * w if w is not None else gy
            a = g.sum(axis=axes, keepdims=True)
            a /= n
            c = _sum_prod(g, xhat, axes)
            c /= n
            gx = xhat
            gx *= c
            gx += a
            xm.subtract(g, gx, out=gx)
            gx *= self.invstd
            gx = _make(gx)
        return gx, gw, gb, None, None, None

    def jvp(self, tx, tw, tb, *_):
        # d xhat = invstd (dxc - xhat mean(xhat dxc)), with the statistics recomputed in
        # Tensor ops (as backward does) so the tangent stays differentiable
        x, w = self.fw_inputs[:2]
        axes = self.axes
        xc = x - x.mean(axes, keepdim=True)
        invstd = ((xc * xc).mean(axes, keepdim=True) + self.eps).rsqrt()
        xhat = xc * invstd
        out = None
        if tx is not None:
            dxc = tx - tx.mean(axes, keepdim=True)
            out = (dxc - xhat * (xhat * dxc).mean(axes, keepdim=True)) * invstd
            if w is not None:
                out = out * w
        if tw is not None:
            out = xhat * tw if out is None else out + xhat * tw
        if tb is not None:
            out = tb if out is None else out + tb
        return out


def _wrap(a):
    return None if a is None else _make(a)


# ----- blocked layouts -------------------------------------------------------------------
#
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


def _fwd_rows(x, w, b, eps, lay):
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

        def run_k(lo, hi):
            for sl in blocks[lo:hi]:
                k.forward_rows(x2[sl], wk, bk, b2 is not None, eps, out[sl], mean[sl],
                               var[sl])
        parallel_rows(run_k, len(blocks), 8 * M * D, xm)
        return out.reshape(x.shape), mean, var
    ones = xm.ones(D, dtype=x.dtype)

    def run(lo, hi):  # rows are independent: blocks go to the intra-op threads
        for sl in blocks[lo:hi]:
            xb, ob = x2[sl], out[sl]
            m = xb @ ones
            m /= D
            xm.subtract(xb, m[:, None], out=ob)
            v = _rows_dot(ob, ob)
            v /= D
            ob *= (1.0 / xm.sqrt(v + eps))[:, None]
            if w2 is not None:
                ob *= w2
            if b2 is not None:
                ob += b2
            mean[sl], var[sl] = m, v
    parallel_rows(run, len(blocks), 8 * M * D, xm, blas=True)
    return out.reshape(x.shape), mean, var


def _bwd_rows(gy, x, w, mean, invstd, need, lay, b_shape):
    _, M, D = lay
    xm = array_module(x)
    x2, g2 = x.reshape(M, D), gy.reshape(M, D)
    mean, invstd = mean.reshape(M), invstd.reshape(M)
    w2 = None if w is None else w.reshape(D)
    ones = xm.ones(D, dtype=x.dtype)
    gx = xm.empty((M, D), dtype=x.dtype) if need[0] else None
    gw = xm.zeros(D, dtype=x.dtype) if need[1] else None
    gb = xm.zeros(D, dtype=x.dtype) if need[2] else None
    blocks = _blocks(M, D * x.itemsize)
    # each block's share of gw and gb, added up in block order afterwards: the same sums
    # in the same order whether the blocks ran on one thread or several
    parts_w, parts_b = [None] * len(blocks), [None] * len(blocks)
    k = _row_kernels(x2, g2, w2)
    if k is not None:
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
        parallel_rows(_bwd_rows_blocks(g2, x2, w2, mean, invstd, ones, gx, gw, gb, blocks,
                                       parts_w, parts_b, D, xm),
                      len(blocks), 12 * M * D, xm, blas=True)
    for pw, pb in zip(parts_w, parts_b):
        if gw is not None:
            gw += pw
        if gb is not None:
            gb += pb
    return (None if gx is None else gx.reshape(x.shape)), gw, gb


def _bwd_rows_blocks(g2, x2, w2, mean, invstd, ones, gx, gw, gb, blocks, parts_w, parts_b,
                     D, xm):
    """The NumPy blocks of :func:`_bwd_rows`: ``run(lo, hi)`` for ``parallel_rows``."""
    x = x2

    def run(lo, hi):
        for i in range(lo, hi):
            sl = blocks[i]
            gyb, r = g2[sl], invstd[sl]
            if gb is not None:
                parts_b[i] = xm.ones(gyb.shape[0], dtype=x.dtype) @ gyb
            if gx is None and gw is None:
                continue
            xc = x2[sl] - mean[sl, None]
            q = gyb * xc
            if gw is not None:
                parts_w[i] = r @ q
            if gx is None:
                continue
            wv = ones if w2 is None else w2
            a = gyb @ wv  # sum(g)
            c = q @ wv  # sum(g * xc)
            gxb = gx[sl]
            if w2 is None:
                xm.multiply(gyb, r[:, None], out=gxb)
            else:
                xm.multiply(gyb, w2, out=gxb)
                gxb *= r[:, None]
            xc *= (r * r * r * c / D)[:, None]
            gxb -= xc
            gxb -= (r * a / D)[:, None]
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


def _sum_prod(a, b, axes):
    """``(a * b).sum(axes, keepdims=True)`` without the temporary product."""
    nd = a.ndim
    letters = "abcdefghijklmnopqrstuvwxyz"[:nd]
    out = "".join(c for i, c in enumerate(letters) if i not in axes)
    r = array_module(a).einsum(f"{letters},{letters}->{out}", a, b)
    return r.reshape(tuple(1 if i in axes else s for i, s in enumerate(a.shape)))


def _reduced_axes(full, shape):
    """The axes of ``full`` that a tensor of ``shape`` is broadcast along."""
    lead = len(full) - len(shape)
    return tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                      if s == 1 and full[i + lead] != 1)


def _sum_to(g, shape):
    """``g`` summed down to ``shape``, which broadcasts to ``g.shape``."""
    axes = _reduced_axes(g.shape, shape)
    return g.sum(axis=axes).reshape(shape) if axes else g


class _LayerNorm(Normalize):
    _node_name = "NativeLayerNormBackward0"
    _overflow_is_nan = True
    forward = opmath(Normalize.forward)


class _GroupNorm(Normalize):
    _node_name = "NativeGroupNormBackward0"
    _overflow_is_nan = True
    _nan_in_double = False  # PyTorch's double moments keep an infinite variance: x * 0 + b


def _prod(xs):
    n = 1
    for v in xs:
        n *= v
    return n


def _channel_view(t, nd):
    """A per-channel vector (C,) as (1, C, 1, ...) for an input of ``nd`` dims."""
    return None if t is None else t.reshape((1, -1) + (1,) * (nd - 2))


def _check_channel_vec(name, t, c):
    if t is not None and t.numel() != c:
        raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-05):
    """Batch normalization over dim 1 of (N, C, *): in training, normalize with the batch
    statistics and update ``running_mean`` / ``running_var`` in place (``momentum`` is the
    weight of the new batch; the running variance is unbiased); in eval, use the running
    statistics.

    >>> x = ember.randn(8, 3)
    >>> batch_norm(x, None, None, training=True).mean(0).abs().max() < 1e-6
    tensor(True)
    """
    if input.dim() == 1 and input.numel() == 0:  # PyTorch sees no channels: nothing to do
        for name, t in (("running_mean", running_mean), ("running_var", running_var),
                        ("weight", weight), ("bias", bias)):
            _check_channel_vec(name, t, 0)
        return input.clone()
    if input.dim() < 2:
        raise IndexError(f"batch_norm: dimension 1 (the channels) is out of range for a "
                         f"{input.dim()}-D input; expected 2D or higher input")
    c = input.shape[1]
    nd = input.dim()
    _check_channel_vec("running_mean", running_mean, c)
    _check_channel_vec("running_var", running_var, c)
    _check_channel_vec("weight", weight, c)
    _check_channel_vec("bias", bias, c)
    if training:
        size = input.numel() // c if c else 0
        if size == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {input.shape!r}".replace("ember.Size",
                                                                  "torch.Size"))
        axes = (0,) + tuple(range(2, nd))
        stats = None
        if running_mean is not None or running_var is not None:
            stats = _RunningStats(running_mean, running_var, momentum)
        if records_graph(input, weight, bias):
            from ember.ops.normalization_nodes import _BatchNorm
            return _BatchNorm.apply(input, weight, bias, axes, eps, stats)
        return Normalize.apply(input, _channel_view(weight, nd), _channel_view(bias, nd),
                               axes, eps, stats)
    if running_mean is None:
        raise RuntimeError("running_mean must be defined in evaluation mode")
    if running_var is None:
        raise RuntimeError("running_var must be defined in evaluation mode")
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None and \
            "batch_norm" not in m.unrolled:
        # a graph capture records eval-mode batch norm as one call (PyTorch's
        # aten::batch_norm), not as the affine map below
        return m.composite_locals("batch_norm", batch_norm, locals())
    # torch runs one kernel in eval mode too (NativeBatchNormBackward0)
    from ember.ops.normalization_nodes import _BatchNormEval
    return call(_BatchNormEval, input, weight, bias, running_mean, running_var, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Layer normalization over the last ``len(normalized_shape)`` dims, with elementwise
    ``weight`` and ``bias`` of shape ``normalized_shape``.

    >>> layer_norm(ember.randn(2, 5), (5,)).mean(-1).abs().max() < 1e-6
    tensor(True)
    """
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    shape = tuple(int(s) for s in normalized_shape)
    n = len(shape)
    if n == 0 or tuple(input.shape[input.dim() - n:]) != shape or input.dim() < n:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {list(t.shape)} and normalized_shape = "
                               f"{list(shape)}")
    axes = tuple(range(input.dim() - n, input.dim()))
    return _LayerNorm.apply(input, weight, bias, axes, eps, None)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalization over the last ``len(normalized_shape)`` dims:
    ``x * rsqrt(mean(x**2) + eps) * weight``; ``eps`` defaults to the dtype's epsilon."""
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    shape = tuple(int(s) for s in normalized_shape)
    n = len(shape)
    if n == 0 or input.dim() < n or tuple(input.shape[input.dim() - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(weight.shape)} and normalized_shape = "
                           f"{list(shape)}")
    if eps is None:
        eps = float(np.finfo(input._data.dtype).eps) if input.is_floating_point() else 0.0
    from ember.ops.elementwise import AddScalar
    dims = tuple(range(input.dim() - n, input.dim()))
    # PyTorch's steps (pow, mean, add.Scalar, rsqrt, mul), so the graph is its graph
    ms = input.pow(2).mean(dims, keepdim=True)
    out = input * AddScalar.apply(ms, eps).rsqrt()
    return out * weight if weight is not None else out


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    """Group normalization: the C channels of (N, C, *) split into ``num_groups`` groups,
    each normalized over its channels and spatial dims; per-channel ``weight``/``bias``."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    n, c = input.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    _check_channel_vec("weight", weight, c)
    _check_channel_vec("bias", bias, c)
    if records_graph(input, weight, bias):
        from ember.ops.normalization_nodes import _GroupNormNode
        return _GroupNormNode.apply(input, weight, bias, num_groups, eps)
    rest = tuple(input.shape[2:])
    x = input.reshape((n, num_groups, c // num_groups) + rest)
    nd = x.dim()
    wshape = (1, num_groups, c // num_groups) + (1,) * len(rest)
    w = None if weight is None else weight.reshape(wshape)
    b = None if bias is None else bias.reshape(wshape)
    out = _GroupNorm.apply(x, w, b, tuple(range(2, nd)), eps, None)
    return out.reshape(tuple(input.shape))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    """Instance normalization: each (sample, channel) plane normalized over its spatial
    dims; running statistics, if given, are updated with the mean over the batch."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher input (got {input.dim()}D input)")
    n, c = input.shape[:2]
    nd = input.dim()
    _check_channel_vec("weight", weight, c)
    _check_channel_vec("bias", bias, c)
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if _prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input "
                         f"size {list(input.shape)}")
    axes = tuple(range(2, nd))
    stats = None
    if running_mean is not None or running_var is not None:
        _check_channel_vec("running_mean", running_mean, c)
        _check_channel_vec("running_var", running_var, c)
        stats = _RunningStats(running_mean, running_var, momentum, per_instance=True)
    if records_graph(input, weight, bias):
        # PyTorch's graph: batch norm of the input viewed as one sample of N*C channels,
        # over the parameters repeated per sample, viewed back
        x = input.contiguous().view((1, n * c) + tuple(input.shape[2:]))
        w = None if weight is None else weight.repeat(n)
        b = None if bias is None else bias.repeat(n)
        from ember.ops.normalization_nodes import _BatchNorm
        out = _BatchNorm.apply(x, w, b, (0,) + axes, eps, stats)
        return out.view(tuple(input.shape))
    return Normalize.apply(input, _channel_view(weight, nd), _channel_view(bias, nd), axes,
                           eps, stats)


class _RunningStats:
    """Running-statistics buffers that :class:`Normalize` blends the batch statistics into.

    ``per_instance``: the statistics are per (sample, channel) and averaged over the
    batch first (instance norm).
    """

    def __init__(self, running_mean, running_var, momentum, per_instance=False):
        self.tensors = (running_mean, running_var)
        self.momentum = momentum
        self.per_instance = per_instance

    def update(self, mean, unbiased_var):
        m = self.momentum
        for t, v in zip(self.tensors, (mean, unbiased_var)):
            if t is None:
                continue
            c = t._data.shape[0]
            v = v.reshape(-1, c).mean(0) if self.per_instance else v.reshape(c)
            arr = t._data
            if type(arr) is not type(v):
                from ember.backend import device_of
                raise RuntimeError("Expected all tensors to be on the same device, but found "
                                   f"at least two devices, {device_of(v)} and {t.device}!")
            arr *= 1 - m
            arr += (m * v).astype(arr.dtype)
            t._vc[0] += 1


def local_response_norm(input, size, alpha=0.0001, beta=0.75, k=1.0):
    """Local response normalization across channels: ``x / (k + alpha/size * sum of x**2
    over ``size`` neighbouring channels) ** beta``."""
    from ember.ops.padding import constant_pad_nd
    from ember.ops.pooling import avg_pool2d, avg_pool3d
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
    if input.numel() == 0:
        return input * 1
    # PyTorch's steps, so that the graph is its graph: the squares get one unit dim,
    # zero padding of size//2 channels before and (size-1)//2 after, an average over
    # windows of ``size`` channels, and the unit dim squeezed away again
    div = input * input
    if dim == 3:
        div = constant_pad_nd(div.unsqueeze(1), (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = tuple(input.shape)
        div = div.view(sizes[0], 1, sizes[1], sizes[2], -1)
        div = constant_pad_nd(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1).view(sizes)
    return input / (div * alpha + k) ** beta
