"""The convolution's input gradient added into the plane by BLAS products: for each
kernel position, one ``sgemm`` with ``beta = 1`` (:func:`accumulate`), where a probe once
per shape (:func:`accumulation`) finds that it gives the bits of the columns' product and
its adds (:func:`ember.ops._conv_kernels._col2im_last`, docs/performance/cnn.md,
"fourteenth pass")."""
import numpy as np

from ember.backend import gemm as _gemm
from ember.ops import _rnn_blas


def position_weights(w, y, kp):
    """Each kernel position's weight ``(K, F, C)``, C-ordered, for :func:`accumulate`;
    None where that route does not run: other than float32 NumPy arrays, or a NaN or
    infinity in ``w`` (and, checked per block, in that block of ``y``). Where two NaNs
    meet, an add keeps the first one's sign and payload, and BLAS's ``C += A @ B`` may
    keep the other's; from finite operands every NaN is the same default NaN, so the
    bits agree."""
    if type(y) is not np.ndarray or type(w) is not np.ndarray or \
            y.dtype != np.float32 or w.dtype != np.float32 or not w.flags.c_contiguous \
            or not np.isfinite(w).all():
        return None
    f, c = w.shape[:2]
    return np.ascontiguousarray(w.reshape(f, c, kp).transpose(2, 0, 1))


# (C, columns, F, kernel positions, function) -> whether the products adding into the
# plane give the bits of the columns' product and its adds (probed once per shape)
ACCUMULATES = {}
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112  # CBLAS's enums


def accumulation(ys, sp, wk):
    """The BLAS ``sgemm`` (ctypes, :func:`ember.ops._rnn_blas.sgemm`) with which
    :func:`accumulate` gives :func:`ember.ops._conv_kernels._col2im_last`'s span-layout
    input gradient to the bit, or None (then the columns' product and its adds run).

    The two do the same arithmetic: each input element is zero plus each kernel
    position's dot product over the output channels, added in the positions' order.
    They give the same bits where a row of the (C, F) by (F, columns) product is the
    same as that row of the columns' (C*K, F) by (F, columns) product, and BLAS's
    ``C += A @ B`` rounds as an add of the product. That holds for OpenBLAS's SkylakeX
    kernels on the CNN's shapes; other kernels may round a product of fewer rows
    differently (docs/performance/cnn.md, "seventh pass": Haswell's remainder row
    tiles). So it is probed once per shape, with these operand layouts and random
    values, against ``ember.backend.gemm.matmul`` (the product the other way takes)."""
    kp, f, c = wk.shape
    ncols = ys.shape[1] * ys.shape[2]
    found = _rnn_blas.sgemm(c, ncols, f)
    if found is None:
        return None
    fn = found[0]
    key = (c, ncols, f, kp, id(fn))  # (the functions live on in _rnn_blas)
    ok = ACCUMULATES.get(key)
    if ok is None:
        rng = np.random.default_rng(0)
        w = rng.standard_normal((f, c * kp)).astype(np.float32)
        b = rng.standard_normal((f, ncols)).astype(np.float32)
        z = rng.standard_normal((c, ncols)).astype(np.float32)
        want = _gemm.matmul(w.T[None], b[None])[0].reshape(c, kp, ncols)
        wks = np.ascontiguousarray(w.reshape(f, c, kp).transpose(2, 0, 1))
        ok = True
        for k in range(kp):
            got = z.copy()
            fn(_ROW_MAJOR, _TRANS, _NO_TRANS, c, ncols, f, 1.0,
               _rnn_blas._address(wks[k]), c, _rnn_blas._address(b), ncols, 1.0,
               _rnn_blas._address(got), ncols)
            if not np.array_equal(got.view(np.uint32), (z + want[:, k]).view(np.uint32)):
                ok = False
                break
        ACCUMULATES[key] = ok
    return fn if ok else None


def accumulate(fn, wk, ys, buf, sp):
    """``buf[:, off:off + L] += wk[k].T @ ys`` for each kernel position ``k`` of
    :class:`ember.ops._conv_kernels._Span` ``sp`` (at ``off``), as one BLAS product each
    that adds into ``buf`` (``beta = 1``): no columns array and no separate adds. ``ys``
    (F, L, m) and ``buf`` (C, plane, m) are C-ordered float32, ``wk`` (K, F, C) from
    :func:`position_weights`.
    The products read and write a (C, L*m) stretch of ``buf`` that stays in cache, where
    the columns' product writes (C*K, L*m) that the adds then read back (2.6 MB a block
    of 16 samples for the CNN's second convolution)."""
    kp, f, c = wk.shape
    m = ys.shape[2]
    ncols, ld = sp.L * m, sp.plane * m
    pb, py = _rnn_blas._address(buf), _rnn_blas._address(ys)
    isz = buf.itemsize
    for k, (_, off) in enumerate(sp.offs):
        fn(_ROW_MAJOR, _TRANS, _NO_TRANS, c, ncols, f, 1.0, _rnn_blas._address(wk[k]), c,
           py, ncols, 1.0, pb + off * m * isz, ld)
