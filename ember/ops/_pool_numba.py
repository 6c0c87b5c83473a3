"""Max pooling over windows that lie wholly inside a 2-d input as numba kernels (the
``ember[fast]`` extra): one pass over the input instead of several NumPy passes per
kernel position.

Imported lazily by :mod:`ember.ops.pooling` the first time such a float max pool runs;
without numba that import fails and the NumPy loops run unchanged. The kernels give the
NumPy loops' values to the bit: each window's maximum as NumPy's ``maximum`` folds it
(a NaN wins; of equal values, signed zeros included, the later one), the first position
holding a strictly larger value as its index (the last NaN where there is one, as in
PyTorch), and in the gradient each window's value at its index and ``gy * 0`` at the
others (``0`` when the gradient has infinities or NaNs), zeros where no window reaches.
"""
import numba  # noqa: F401  (first: without numba this module fails to import at once)

from ember.backend.numba_jit import njit as _jit

__all__ = ["max_pool2d", "max_pool2d_scatter", "max_pool2x2", "max_pool2x2_scatter"]


@_jit
def max_pool2d(x, kh, kw, sh, sw, dh, dw, best, arg, lo, hi):
    """Rows ``lo:hi`` of ``x`` (R, H, W): window maxima into ``best`` (R, OH, OW) and the
    kernel position (row-major) of each into ``arg``."""
    oh, ow = best.shape[1], best.shape[2]
    for r in range(lo, hi):
        for i in range(oh):
            h0 = i * sh
            for j in range(ow):
                w0 = j * sw
                b = x[r, h0, w0]
                a = 0
                k = 0
                for p in range(kh):
                    for q in range(kw):
                        if k:
                            v = x[r, h0 + p * dh, w0 + q * dw]
                            if v > b or v != v:
                                a = k
                            if not (b > v or b != b):
                                b = v
                        k += 1
                best[r, i, j] = b
                arg[r, i, j] = a


@_jit
def max_pool2d_scatter(gy, arg, kh, kw, sh, sw, dh, dw, finite, zero, out, lo, hi):
    """Rows ``lo:hi`` of the gradient of :func:`max_pool2d` for windows that do not
    overlap: ``out`` (R, H, W) gets each window's ``gy`` at its maximum's position and
    ``gy * 0`` (``zero`` when not ``finite``) at the others, and ``zero`` in the rows
    and columns past the last window; gaps between windows (a stride longer than the
    window) are left as they are (the caller passes zeros)."""
    oh, ow = gy.shape[1], gy.shape[2]
    h, w = out.shape[1], out.shape[2]
    for r in range(lo, hi):
        for i in range(oh):
            h0 = i * sh
            for j in range(ow):
                w0 = j * sw
                g = gy[r, i, j]
                a = arg[r, i, j]
                z = g * 0 if finite else zero
                k = 0
                for p in range(kh):
                    for q in range(kw):
                        out[r, h0 + p * dh, w0 + q * dw] = g if k == a else z
                        k += 1
        # the rows and columns past the last window (floor mode): no gradient
        for y in range(oh * sh, h):
            for x in range(w):
                out[r, y, x] = zero
        for y in range(min(oh * sh, h)):
            for x in range(ow * sw, w):
                out[r, y, x] = zero


@_jit
def max_pool2x2(x, best, arg, lo, hi):
    """:func:`max_pool2d` for 2x2 windows with stride 2 (the common pool): each window
    read as two pairs of adjacent values from two rows, branch-free."""
    oh, ow = best.shape[1], best.shape[2]
    for r in range(lo, hi):
        for i in range(oh):
            r0 = x[r, 2 * i]
            r1 = x[r, 2 * i + 1]
            bo = best[r, i]
            ao = arg[r, i]
            for j in range(ow):
                b = r0[2 * j]
                v = r0[2 * j + 1]
                a = 1 if (v > b or v != v) else 0
                b = b if (b > v or b != b) else v
                v = r1[2 * j]
                a = 2 if (v > b or v != v) else a
                b = b if (b > v or b != b) else v
                v = r1[2 * j + 1]
                a = 3 if (v > b or v != v) else a
                b = b if (b > v or b != b) else v
                bo[j] = b
                ao[j] = a


@_jit
def max_pool2x2_scatter(gy, arg, finite, zero, out, lo, hi):
    """:func:`max_pool2d_scatter` for 2x2 windows with stride 2."""
    oh, ow = gy.shape[1], gy.shape[2]
    h, w = out.shape[1], out.shape[2]
    for r in range(lo, hi):
        for i in range(oh):
            o0 = out[r, 2 * i]
            o1 = out[r, 2 * i + 1]
            gr = gy[r, i]
            ar = arg[r, i]
            for j in range(ow):
                g = gr[j]
                a = ar[j]
                z = g * 0 if finite else zero
                o0[2 * j] = g if a == 0 else z
                o0[2 * j + 1] = g if a == 1 else z
                o1[2 * j] = g if a == 2 else z
                o1[2 * j + 1] = g if a == 3 else z
        for y in range(oh * 2, h):
            for x in range(w):
                out[r, y, x] = zero
        for y in range(min(oh * 2, h)):
            for x in range(ow * 2, w):
                out[r, y, x] = zero
