"""Cross-entropy in a plan: ``log_softmax`` over a classifier's scores followed by
``nll_loss`` of its output (what ``cross_entropy`` records), run as two lean kernels
and one backward.

Eager ember runs the pair as two nodes; the plan keeps both steps and their
NumPy calls but:

- each forward runs without the layers around it (``opmath``'s dtype test,
  ``array_module``, the general target checks), on the layout eager's own fast branch
  takes (a C-ordered float32/float64 matrix of 32 or more rows of at most 64 classes,
  int64 targets all in range, no class weights, 'mean' or 'sum'); anything else calls
  the class's own ``forward``;
- the loss step's backward hands the scores their gradient directly: ``nll_loss``'s
  gradient has one nonzero per row (``v``, its coefficient times the incoming
  gradient), so every row sum that ``log_softmax``'s gradient ``gl - exp(y) * sum(gl)``
  takes is ``v`` exactly (adding zeros is exact). The same products ``exp(y) * v`` and
  the same differences (``0 * g - p`` off the targets, ``v - p`` on them) are computed
  without building the one-hot matrix or its sums: the same bits. Where ``v`` is zero
  or not finite (a zero's sign, a NaN's spread) both class formulas run as eagerly.
"""
import numpy as np

from ember._compile import _buffers
from ember._graph.ir import Ref
from ember.ops import losses, softmaxes

__all__ = ["fuse"]

_ndarray = np.ndarray
_all = np.logical_and.reduce
_finite = np.isfinite
_LOG_SOFTMAX_FORWARD = softmaxes.LogSoftmax.forward
_NLL_FORWARD = losses.NllLoss.forward
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_rows = {}  # n -> arange(n) (read only)


def _arange(n):
    r = _rows.get(n)
    if r is None:
        if len(_rows) > 64:
            _rows.clear()
        r = _rows[n] = np.arange(n)
        r.flags.writeable = False
    return r


class _LogSoftmaxStep:
    """The plan's op object for the pair's ``log_softmax`` (over dim 1 of a matrix): its
    forward leaves no state (the pair's backward reads none of it)."""

    def forward(self, x, axis):
        if type(x) is _ndarray and x.dtype in _FLOATS and x.ndim == 2 and axis == 1 and \
                32 <= x.shape[0] and 0 < x.shape[1] <= 64 and x.flags.c_contiguous:
            # eager's branch for short rows (softmaxes._shifted): the row maxima down a
            # transposed copy, then ``s - log(sum(exp(s)))``
            m = np.maximum.reduce(np.ascontiguousarray(x.T), axis=0).reshape(x.shape[0], 1)
            if _all(_finite(m), axis=None):
                # ``x - m`` flags an invalid value only for inf - inf (a NaN operand
                # flags none): with every row maximum finite it flags nothing, so
                # eager's ``errstate`` (a context manager, 2-3x these two calls) is not
                # needed
                s = x - m
            else:
                with np.errstate(invalid="ignore"):
                    s = x - m
            return s - np.log(np.exp(s).sum(axis=1, keepdims=True))
        out = _LOG_SOFTMAX_FORWARD(self, x, axis)
        self.__dict__.clear()  # (the class's forward leaves ``axis``: not needed)
        return out


class _NllLossStep:
    """The plan's op object for the pair's ``nll_loss``: state ``t``/``total`` from its
    own forward, the class's state where the class's forward ran."""

    def forward(self, x, t, w, ignore_index, reduction):
        if w is None and type(x) is _ndarray and type(t) is _ndarray and x.ndim == 2 and \
                t.ndim == 1 and t.dtype == np.int64 and t.shape[0] == x.shape[0] and \
                (reduction == "mean" or reduction == "sum") and \
                not 0 <= ignore_index < x.shape[1] and x.shape[0]:
            n, c = x.shape
            # every target a class (seen unsigned, a negative one is above any class),
            # so the ignore_index, outside them, is nowhere: NllLoss.forward's test
            if int(t.view(np.uint64).max()) < c:
                loss = -x[_arange(n), t]
                d = self.__dict__
                d.clear()
                d["t"] = t
                if reduction == "sum":
                    d["total"] = None
                    return np.asarray(loss.sum())
                total = x.dtype.type(n)
                d["total"] = total
                return np.asarray(loss.sum() / total)
        self.__dict__.clear()
        return _NLL_FORWARD(self, x, t, w, ignore_index, reduction)


_kernels = {}


def _pair_kernel():
    """The joined backward's loop after ``r = exp(y)`` (numba, built on first use; None
    without numba): per element ``p = r * v``, then ``v - p`` at the row's target and
    ``0 * g - p`` elsewhere -- what the NumPy branch computes with ``multiply``, a
    gather of the targets' products, ``subtract`` and a scatter, each a float operation
    of the array's dtype (numba compiles without fast-math: no fused multiply-add),
    so the same bits. The targets are in range (the lean NLL forward checked them)."""
    if "pair" in _kernels:
        return _kernels["pair"]
    from ember._compile import _fused
    numba = _fused._numba().get("numba")
    kernel = None
    if numba is not None:
        from ember._compile._jit import njit

        def loop(r, t, v, zg):
            n, c = r.shape
            for i in range(n):
                ti = t[i]
                for j in range(c):
                    p = r[i, j] * v
                    r[i, j] = v - p if j == ti else zg - p
        kernel = njit(loop, nogil=True)
    _kernels["pair"] = kernel
    return kernel


def _pair_vjp(axis):
    """``run(state, args, ys, gouts)`` of the loss step, returning the scores' gradient
    in the place of the log-probabilities' (see the module docstring)."""
    ls = object.__new__(softmaxes.LogSoftmax)
    ls.axis = axis
    nll_vjp = losses.NllLoss.vjp
    ls_vjp = softmaxes.LogSoftmax.vjp

    def run(state, args, ys, gouts):
        g = gouts[0]
        y = args[0]
        if state and "t" in state and type(g) is _ndarray and g.ndim == 0 and \
                g.dtype == y.dtype:
            t, total = state["t"], state["total"]
            dt = y.dtype.type
            # the one-hot entry eager scatters (its coefficient in the gradient's
            # dtype) times the gradient, and the zeros times it
            coef = dt(-1) if total is None else dt(-1 / total)
            v = coef * g
            if np.isfinite(v) and v != 0:
                r = np.exp(y)
                kernel = _pair_kernel()
                if kernel is not None and r.ndim == 2 and r.flags.c_contiguous and \
                        t.ndim == 1 and t.shape[0] == r.shape[0]:
                    # the three passes and two fancy indexings below as one loop over
                    # ``r``: per element the same product and the same difference
                    kernel(r, t, v, dt(0) * g)
                    return [r, None, None, None, None]
                rows = _arange(y.shape[0])
                np.multiply(r, v, out=r)
                on = r[rows, t]
                np.subtract(dt(0) * g, r, out=r)
                r[rows, t] = v - on
                return [r, None, None, None, None]
        # the two class formulas, as eagerly
        nll = object.__new__(losses.NllLoss)
        if state and "t" in state:
            t = state["t"]
            nll.rows, nll.safe, nll.wt = _arange(t.shape[0]), t, None
            nll.reduction = "sum" if state["total"] is None else "mean"
            nll.shape, nll.c = y.shape, y.shape[1]
            nll.total = state["total"]
        elif state:
            nll.__dict__.update(state)
        gl = nll_vjp(nll, gouts, args, ys)[0]
        gx = ls_vjp(ls, [gl], [None], [y])[0]
        return [gx, None, None, None, None]
    return run


def fuse(plan):
    """Give each ``log_softmax`` -> ``nll_loss`` pair of ``plan`` (the log-probabilities
    read by the loss alone, neither a graph output) the lean op objects and the
    joined backward."""
    readers = _buffers.slot_readers(plan)
    by_input = {}
    for st in plan.steps:
        for s in st.in_slots:
            by_input.setdefault(s, []).append(st)
    for a in plan.steps:
        if a.node.target is not softmaxes.LogSoftmax or not a.plain or not a.grad or \
                a.kwargs or len(a.args) != 2 or type(a.node.args[0]) is not Ref or \
                type(a.args[1]) is not int or len(a.outs) != 1:
            continue
        xv = a.node.args[0].value
        if xv.shape is None or len(xv.shape) != 2 or a.args[1] != 1 or \
                xv.dtype is None or not xv.dtype.is_floating_point or \
                getattr(xv.dtype, "is_complex", False):
            continue
        y = a.outs[0]
        if readers.get(y) != 1:
            continue
        b = by_input[y][0]
        if b.node.target is not losses.NllLoss or not b.plain or not b.grad or \
                b.kwargs or len(b.args) != 5 or type(b.node.args[0]) is not Ref or \
                b.refs[0] != (0, y) or any(i != 0 and b.needs[i] for i, _ in b.refs) or \
                b.scatter or b.bias is not None:
            continue
        a.op = _LogSoftmaxStep()
        b.op = _NllLossStep()
        vjp = _pair_vjp(1)
        b.vjp = b.bvjp = vjp
        b.declared = None
        # the scores' gradient is the loss step's result: the log-probabilities get
        # none, so their own step's backward is passed over
        b.wanted = [(0, a.refs[0][1])]
