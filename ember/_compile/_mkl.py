"""A compiled plan's linear layers with their MKL products' arguments found once per
layout.

``gemm.matmul``/``gemm.addmm`` decide per call whether a product goes to MKL and with
which transpose flags and leading dimensions (type, dtype, size, layout and alignment
tests: ~4 us a product, ~7 us for ``addmm``, against products of 50-500 us in a
training step). A plan's linear step sees arrays of the same layout on every call, so
each of its product sites (:class:`Site`) makes those tests once per layout
(shapes, strides, dtypes) and then calls MKL's ``cblas_?gemm`` with the same
arguments ``gemm`` would pass: the same call, so the same bits. Per call only what can
change between calls of one layout is checked: that MKL is still the library in use,
the operands' alignment and that the output shares no memory with them. Anything
else (no MKL, a product below its threshold, another layout) takes ``gemm``'s own
call.
"""
import numpy as np

from ember._compile import _fused
from ember._compile._linear import _rows_summed
from ember._compile._linear import vjp_products as _vjp_products
from ember._compile._linear import vjp_products_into as _vjp_products_into
from ember.backend import gemm as _gemm
from ember.ops import nn_fused

__all__ = ["Site", "linear_into", "linear_vjp", "is_linear", "use_sites"]

_ndarray = np.ndarray
_share = np.may_share_memory
_LINEAR_VJP = nn_fused._Linear.vjp
_LINEAR_FORWARD_OUT = nn_fused._Linear.forward_out


def is_linear(cls):
    """Whether the op class is a linear layer with ``_Linear``'s forward_out and vjp."""
    return getattr(cls, "vjp", None) is _LINEAR_VJP and \
        getattr(cls, "forward_out", None) is _LINEAR_FORWARD_OUT


def _prepare(a, b, out, bias):
    """``(lib, routine, ta, lda, tb, ldb, m, n, k, ldc)``: what ``gemm._mkl_matmul``
    passes MKL for ``a @ b`` (into ``out``, plus ``bias`` with ``beta = 1``) for arrays
    of this layout; False where it would not call MKL for them (``gemm`` runs it);
    None while MKL is not loaded yet (asked again next time)."""
    lib = _gemm._lib[0]
    if lib is None:
        return None
    if lib is False or type(a) is not _ndarray or type(b) is not _ndarray:
        return False
    dt = a.dtype
    if dt != b.dtype or dt.char not in "fd" or not dt.isnative or a.ndim != 2 or \
            b.ndim != 2:
        return False
    (m, k), (k2, n) = a.shape, b.shape
    flops = 2 * m * n * k
    limit = _gemm.THRESHOLD if n >= _gemm._NARROW else \
        min(_gemm.THRESHOLD, _gemm.NARROW_THRESHOLD)
    if not flops or k != k2 or flops < limit or max(m, n, k) > _gemm._INT_MAX:
        return False
    isz = dt.itemsize
    la = _gemm._layout(a.strides, m, k, isz)
    lb = _gemm._layout(b.strides, k, n, isz)
    if la is None or lb is None:
        return False
    if out is None:
        ldc = n
    else:
        if type(out) is not _ndarray or out.dtype != dt or out.shape != (m, n) or \
                not out.flags.writeable:
            return False
        lc = _gemm._layout(out.strides, m, n, isz)
        if lc is None or lc[0] != _gemm._NO_TRANS:
            return False
        ldc = lc[1]
    if bias is not None:
        # ``gemm.addmm``'s test for MKL's beta = 1 (a bias row or matrix of the dtype)
        if type(bias) is not _ndarray or bias.dtype != dt or bias.ndim > 2 or \
                np.broadcast_shapes(bias.shape, (m, n)) != (m, n):
            return False
    return lib, lib.gemm[dt], la[0], la[1], lb[0], lb[1], m, n, k, ldc


def _small(a, b):
    """Whether ``a @ b`` is a product of matrices below every MKL threshold ``gemm``
    has: ``_prepare`` would find it is not MKL's (``gemm`` runs it), so the site goes to
    ``gemm`` without building its layout key (a classifier's 10-column head)."""
    sa, sb = a.shape, b.shape
    return len(sa) == 2 and len(sb) == 2 and \
        2 * sa[0] * sa[1] * sb[-1] < min(_gemm.THRESHOLD, _gemm.NARROW_THRESHOLD)


class Site:
    """One product of a plan step (``a @ b``, or ``bias + a @ b``), its MKL arguments
    kept per layout."""

    __slots__ = ("memo",)

    def __init__(self):
        self.memo = {}

    def _args(self, a, b, out, bias):
        key = (a.shape, a.strides, a.dtype, b.shape, b.strides, b.dtype,
               None if out is None else (out.shape, out.strides, out.dtype),
               None if bias is None else (bias.shape, bias.dtype))
        memo = self.memo
        p = memo.get(key)
        if p is None:
            p = _prepare(a, b, out, bias)
            if p is not None:
                if len(memo) > 16:
                    memo.clear()
                memo[key] = p
        if not p or p[0] is not _gemm._lib[0] or not (a.flags.aligned and b.flags.aligned):
            return None
        if out is not None and (not out.flags.aligned or _share(out, a) or _share(out, b)
                                or (bias is not None and _share(out, bias))):
            return None
        return p

    def matmul(self, a, b, out=None):
        """``gemm.matmul(a, b, out)``."""
        p = self._args(a, b, out, None) if _gemm._lib[0] is not False and \
            type(a) is _ndarray and type(b) is _ndarray and not _small(a, b) else None
        if p is None:
            return _gemm.matmul(a, b, out)
        lib, f, ta, lda, tb, ldb, m, n, k, ldc = p
        c = np.empty((m, n), a.dtype) if out is None else out
        ptr = lib.ptr
        f(_gemm._ROW_MAJOR, ta, tb, m, n, k, 1.0, ptr(a), lda, ptr(b), ldb, 0.0, ptr(c),
          ldc)
        return c

    def addmm(self, bias, a, b, out=None):
        """``gemm.addmm(bias, a, b, out)``."""
        p = self._args(a, b, out, bias) if _gemm._lib[0] is not False and \
            type(a) is _ndarray and type(b) is _ndarray and type(bias) is _ndarray and \
            not _small(a, b) else None
        if p is None:
            return _gemm.addmm(bias, a, b, out)
        lib, f, ta, lda, tb, ldb, m, n, k, ldc = p
        c = np.empty((m, n), a.dtype) if out is None else out
        c[...] = bias  # the product added to it (beta = 1), as ``gemm.addmm`` on MKL
        ptr = lib.ptr
        f(_gemm._ROW_MAJOR, ta, tb, m, n, k, 1.0, ptr(a), lda, ptr(b), ldb, 1.0, ptr(c),
          ldc)
        return c


def linear_into(forward_out, act=None):
    """A linear step's ``forward_out(x, w, b, out)`` (``_Linear.forward_out``, bound to
    the step's op) with its product on a :class:`Site`: the same calls.

    ``act``: the step of an activation written over the layer's output (a ReLU read by
    nothing else, ``_rewrites._fuse``); ``into`` then returns the activation's output.
    Where ``gemm.addmm`` would add the bias after the product (MKL not in use) and numba
    is present, the bias and the activation are one loop over the product
    (:func:`ember._compile._fused.bias_act_loop`: the same sums, the same activation, one
    pass fewer); elsewhere the activation's own ``inplace`` runs after the product."""
    site = Site()
    loop = None if act is None else _fused.bias_act_loop(act.node.target)
    over = None if act is None else act.inplace

    def into(x, w, b, out):
        n = w.shape[0]
        y = out(0, x.shape[:-1] + (n,), np.result_type(x.dtype, w.dtype))
        x2, y2 = (x, y) if x.ndim == 2 else (x.reshape(-1, x.shape[-1]), y.reshape(-1, n))
        if b is None:
            site.matmul(x2, w.T, y2)
        elif loop is not None and _gemm._lib[0] is False and type(b) is _ndarray and \
                y2.dtype.char in "fd" and x2.dtype == y2.dtype and not _share(y2, b):
            # ``gemm.addmm`` without MKL: ``matmul`` into ``y2``, then the bias added
            _gemm.matmul(x2, w.T, y2)
            if loop(y2, b):
                return y
            _gemm._add_rows(y2, b)
        else:
            site.addmm(b, x2, w.T, y2)
        return y if over is None else over(y)
    into.act = act  # (the generated forward then gives the ReLU's step this output)
    return into


def linear_vjp():
    """``_Linear.vjp(self, grads, inputs, outputs, out)`` with its two products on
    :class:`Site` objects of the step: the same calls in the same order."""
    sx, sw = Site(), Site()
    routes = {}  # (see ``_linear.vjp_products``)

    def vjp(self, grads, inputs, outputs, out=None):
        # products on NumPy's own call, found once per layout
        if out is None:
            r = _vjp_products(routes, self._edges, grads[0], inputs[0], inputs[1])
        else:
            r = _vjp_products_into(routes, self._edges, grads[0], inputs[0], inputs[1], out)
        if r is not None:
            return r
        edges = self._edges
        if len(edges) > 2 and edges[2] is not None and type(grads[0]) is _ndarray and \
                type(inputs[0]) is _ndarray and (inputs[0].ndim == 2 or
                                                 inputs[0].flags.c_contiguous):
            # the bias's rows summed on a kept vector of ones: ``nn_fused.bias_grad``'s
            # ``gemm.sum_rows`` (the same product) without a fresh vector per call
            r = nn_fused.linear_vjp(edges[:2], grads[0], inputs[0], inputs[1], out,
                                    sx.matmul, sw.matmul)
            g = grads[0]
            r[2] = _rows_summed(g if g.ndim == 2 else g.reshape(-1, g.shape[-1]))
            return r
        return nn_fused.linear_vjp(edges, grads[0], inputs[0], inputs[1], out,
                                   sx.matmul, sw.matmul)
    return vjp


def use_sites(plan):
    """A linear layer's backward (``_Linear.vjp``) with its products' MKL arguments
    found once per layout (:class:`Site`): the declared vjp the backward calls, and the one
    writing the input's gradient into the arena. The same calls, so the same bits."""
    for st in plan.grad_steps:
        if st.declared is None or not st.prim or not is_linear(st.node.target):
            continue
        vjp = linear_vjp()
        _, op, out = st.declared
        st.declared = (vjp, op, out)
        if st.bvjp is not None:
            bop = object.__new__(st.node.target)
            bop._edges = op._edges
            site = plan.arena.site(("g", st.index))

            def run(state, args, ys, gouts, vjp=vjp, bop=bop, site=site):
                if state:
                    bop.__dict__ = state
                return vjp(bop, gouts, args, ys, site)
            st.bvjp = run
