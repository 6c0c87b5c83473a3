"""``matmul`` and ``linear`` recorded as PyTorch records them.

A user who looks at ``grad_fn``/``next_functions``, torchviz or a profiler sees the nodes
PyTorch's own decomposition leaves, not ember's single kernel:

- ``linear`` of a 2-D input: ``AddmmBackward0`` over (bias, input, ``TBackward0`` over the
  weight), or ``MmBackward0`` over (input, ``TBackward0``) without a bias; of a contiguous
  N-D input with a bias: ``ViewBackward0`` over that ``AddmmBackward0``, whose input is
  the ``ViewBackward0`` flattening the input; otherwise ``matmul(input, weight.t())``
  (plus ``AddBackward0`` for the bias);
- ``matmul`` of N-D operands: the larger operand folded into a matrix when PyTorch folds
  it (``MmBackward0``/``MvBackward0`` under ``UnsafeViewBackward0``), else both operands
  expanded to the broadcast batch (``ExpandBackward0``), reshaped to 3-D (a view, or
  ``CloneBackward0`` + ``UnsafeViewBackward0`` where a view is impossible), multiplied by
  ``BmmBackward0`` and brought to the result's shape by ``UnsafeViewBackward0``;
- ``bilinear``: ``TrilinearBackward0`` over the inputs flattened to matrices and the
  weight, reshaped to the result's shape (plus ``AddBackward0`` for the bias).

These graphs are built only where someone can see them: in eager mode (the profiler
included), when the call records a graph. Without a recorded graph (``no_grad``, inputs
that need no gradient), and under a transforming mode (a graph capture records one
``aten::linear``/``aten::matmul`` as PyTorch's tracer does; vmap and forward AD run
their own rules), one kernel runs instead. Each node's backward works on arrays on a
first-order pass, so the decomposition costs a few small nodes, not extra copies: the
weight's gradient comes out of the transposed product already in the weight's row-major
layout.
"""
import math
import weakref

import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd import _modes, _saved_hooks, anomaly
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.autograd.saved import _read_saved, _saved_inputs
from ember.backend import gemm as _gemm
from ember.backend import threads as _threads
from ember.ops import _jvp
from ember.ops import reduction as _reduction
from ember.ops._util import opmath
from ember.ops._views import _track as _track_view
from ember.ops.composite_node import records_graph, runs_node
from ember.ops.elementwise import Add
from ember.ops.product_saves import NOT_SAVED as _NOT_SAVED
from ember.ops.product_saves import factor_shapes as _shapes
from ember.ops.product_saves import pack_crossed as _pack_crossed
from ember.ops.product_saves import record_crossed as _record_crossed
from ember.ops.shape import (
    Expand,
    SqueezeDim,
    SqueezeInplace,
    T,
    Unsqueeze,
    View,
    reshape_nodes,
)
from ember.ops.shape import t as _t

__all__ = ["bilinear_graph", "linear_graph", "matmul_graph", "records_graph", "runs_node"]

_new = object.__new__
_sum_rows = _gemm.sum_rows
_active = _modes.active
_anomaly = anomaly.enabled
_hook_stack = _saved_hooks.stack


class Addmm(Primitive):
    """``bias + mat1 @ mat2`` for matrices ``mat1`` (n, k), ``mat2`` (k, m) and a
    ``bias`` of shape (m,): ``linear``'s kernel, with PyTorch's inputs in PyTorch's order
    (``mat2`` is the transposed weight). ``mat1`` is kept for backward only where
    ``mat2`` requires grad, ``mat2`` only where ``mat1`` does (``product_saves``)."""
    save_inputs = (1, 2)
    _crossed = (2, 1)
    small = 0  # ``_backward_small``'s answer, set where the node is made
    _record = _record_crossed
    _pack_saved = _pack_crossed

    def forward(self, b, x, wt):
        out = _gemm.addmm(b, x, wt)
        # a bias of another shape broadcast to (n, m) (torch's addmm takes any)
        self.bshape = None if b.shape == out.shape[1:] else b.shape
        self.small = 0  # (``_addmm_linear`` decides it for its nodes)
        return out

    def _bias_grad(self, gy):
        if self.bshape is None:
            return _reduction.sum_rows(gy)  # (the bits of the array path's ``_sum_rows``)
        return gy.sum_to_size(self.bshape) if self.bshape else gy.sum()

    def backward(self, gy):
        x, wt = _read_saved(self)
        eb, ex, ew = self._edges
        if not _grad_state.grad_enabled:
            g = gy._data
            xa = None if x is None else x._data
            wa = None if wt is None else wt._data
            small = self.small
            if small and type(g) is np.ndarray and (small == 1 or _threads.blas_held()):
                # the products ``_addmm_linear`` found small when it made this node
                if _shapes(g, xa, wa) is not None:
                    return _small_products(g, xa, wa, eb, ex, ew)
            if type(g) is np.ndarray and self.bshape is None and ew is not None:
                r = _small_grads(g, xa, wa, eb, ex, ew)
                if r is not None:
                    return r
            if _threads.MANY and ex is not None and ew is not None and \
                    type(g) is np.ndarray:
                mkn = _shapes(g, xa, wa)
                if mkn is not None:
                    gx, gw = _input_and_weight_grads(g, xa, wa, mkn)
                    return (_make(_sum_rows(g)) if eb is not None and self.bshape is None
                            else self._bias_grad(gy) if eb is not None else None, _make(gx),
                            self._mat2_grad(ew, gw))
            # (the bias's sum of rows as a BLAS product, ``gemm.sum_rows``)
            return (_make(_sum_rows(g)) if eb is not None and self.bshape is None and
                    type(g) is np.ndarray else
                    _make(g.sum(0)) if eb is not None and self.bshape is None else
                    self._bias_grad(gy) if eb is not None else None,
                    _make(_gemm.matmul(g, wa.T)) if ex is not None else None,
                    self._mat2_grad(ew, _gemm.matmul(g.T, xa)) if ew is not None else None)
        return (self._bias_grad(gy) if eb is not None else None,
                gy.matmul(wt.mT) if ex is not None else None,
                gy.mT.matmul(x).mT if ew is not None else None)

    def _array_grads(self, gy, g):
        """``backward``'s first-order branch on the gradient's array
        (``Node._array_grads``): the same products in the same order, each gradient a new
        array; None for a broadcast bias or saved inputs that changed or were packed."""
        if self.bshape is not None:
            return None
        saved = _saved_inputs(self)
        if saved is None:
            return None
        x, w = saved
        xa = None if x is None else x._data
        wa = None if w is None else w._data
        if xa is not None and type(xa) is not np.ndarray or \
                wa is not None and type(wa) is not np.ndarray:
            return None
        eb, ex, ew = self._edges
        mkn = _shapes(g, xa, wa)
        small = self.small
        if small and (small == 1 or _threads.blas_held()):
            if mkn is not None:
                return _small_arrays(g, xa, wa, eb, ex, ew)
        if ew is not None and mkn is not None:
            m, k, n = mkn
            if _direct((m, k), (k, n)):
                if not (_gemm._maybe_large((n, m), (m, k)) or
                        ex is not None and _gemm._maybe_large((m, n), (n, k))):
                    return _small_arrays(g, xa, wa, eb, ex, ew)
        if _threads.MANY and ex is not None and ew is not None and mkn is not None and \
                type(g) is np.ndarray:
            gx, gw = _input_and_weight_grads(g, xa, wa, mkn)
            return (_rows_summed(g) if eb is not None else None, gx,
                    self._mat2_array(ew, gw))
        return (_rows_summed(g) if eb is not None else None,
                _gemm.matmul(g, wa.T) if ex is not None else None,
                self._mat2_array(ew, _gemm.matmul(g.T, xa)) if ew is not None else None)

    @staticmethod
    def _mat2_array(edge, gw):
        """``_mat2_grad`` as an array (``gw.T``, with ``gw`` handed to ``WeightT``)."""
        if edge is None:
            return None
        if type(edge) is tuple and type(edge[0]) is WeightT:
            edge[0].fresh = gw
        return gw.T

    @staticmethod
    def _mat2_grad(edge, gw):
        """``gw.T``, the gradient of ``mat2`` from the row-major product ``gw`` (g.T @ x):
        when ``mat2`` is linear's transposed weight, its ``TBackward0`` hands ``gw``
        itself on to the weight, so ``.grad`` gets BLAS's array without a copy."""
        if edge is None:
            return None
        if type(edge) is tuple and type(edge[0]) is WeightT:
            edge[0].fresh = gw
        return _make(gw.T)

    def jvp(self, tb, tx, tw):
        _, x, wt = self.fw_inputs
        out = tb
        for t in (None if tx is None else tx.matmul(wt), None if tw is None else x.matmul(tw)):
            if t is not None:
                out = t if out is None else out + t
        if out is tb and tb is not None:    # a broadcast bias's tangent alone
            out = tb.expand(x.shape[0], wt.shape[1])
        return out


def _input_and_weight_grads(g, xa, wa, mkn):
    """``(g @ wa.T, g.T @ xa)`` at more than one ember thread: the two products at once,
    each whole at one BLAS thread (``threads.pair``), where they are large enough."""
    m, k, n = mkn
    return _threads.pair(lambda: _gemm.matmul(g, wa.T), lambda: _gemm.matmul(g.T, xa),
                         m * k * n)


def _small_grads(g, x, wt, eb, ex, ew):
    """``Addmm``'s first-order gradients straight from ``np.matmul`` where
    ``gemm.matmul`` would run it anyway (both products, ``g @ wt.T`` and ``g.T @ x``,
    have ``m * n * k`` of ``x @ wt``, too small for ember's threads, and each is too
    small for MKL), so a recurrent cell's step pays none of ``gemm``'s dispatch; None
    elsewhere. ``x`` or ``wt`` is None where it was not saved (its partner needs no
    gradient)."""
    if g.itemsize == 2:  # float16/bfloat16: ``gemm``'s products, summed in float32
        return None
    mkn = _shapes(g, x, wt)
    if mkn is None:
        return None
    m, k, n = mkn
    if not _direct((m, k), (k, n)):
        return None
    # MKL's size rule reads the shapes, not only m * n * k: a long batch's ``g.T @ x``
    # (k = 4096 rows summed) may go to MKL where ``x @ wt`` does not
    if _gemm._maybe_large((n, m), (m, k)) or \
            ex is not None and _gemm._maybe_large((m, n), (n, k)):
        return None
    return _small_products(g, x, wt, eb, ex, ew)


def _small_products(g, x, wt, eb, ex, ew):
    """``_small_grads``'s gradients, its checks made."""
    gw = np.matmul(g.T, x) if ew is not None else None
    return (_make(_sum_rows(g)) if eb is not None else None,
            _make(np.matmul(g, wt.T)) if ex is not None else None,
            Addmm._mat2_grad(ew, gw))


def _small_arrays(g, x, wt, eb, ex, ew):
    """``_small_products`` as arrays (``Addmm._array_grads``)."""
    gw = np.matmul(g.T, x) if ew is not None else None
    return (_rows_summed(g) if eb is not None else None,
            np.matmul(g, wt.T) if ex is not None else None,
            Addmm._mat2_array(ew, gw))


_ones = {}  # (rows, dtype char) -> a read-only vector of ones, for ``_rows_summed``


def _rows_summed(g):
    """``gemm.sum_rows(g)``: the same product ``ones @ g`` where it takes that way, on a
    vector of ones kept between calls (a recurrent cell's backward sums two biases' rows
    per step, an MLP's each layer's, each time of the same length)."""
    if type(g) is np.ndarray and g.ndim == 2 and g.shape[0] > 1 and \
            g.dtype.char in "fd" and g.dtype.isnative:
        key = (g.shape[0], g.dtype.char)
        ones = _ones.get(key)
        if ones is None:
            if len(_ones) >= 16:
                _ones.clear()
            ones = _ones[key] = np.ones(g.shape[0], g.dtype)
            ones.flags.writeable = False
        return _sum_rows(g, ones)
    return _sum_rows(g)


def _backward_small(xs, ws, x_grad):
    """``Addmm.small`` for a product ``x @ wt`` that ``_direct`` runs on ``np.matmul``:
    0 where a gradient's product may go to MKL, else 1, or 2 where ember's threads would
    hold BLAS at one thread around it at more than one thread (``_direct``)."""
    (m, k), n = xs, ws[1]
    if _gemm._maybe_large((n, m), (m, k)) or x_grad and _gemm._maybe_large((m, n), (n, k)):
        return 0
    return 1 if m * k * n < _BLAS_THREADED_MNK else 2


def _direct(xs, ws, one=False):
    """Whether ``gemm.matmul`` runs ``x @ wt`` of these shapes as ``np.matmul`` (its
    ``_numpy_matmul``), and so the backward's two products of the same ``m * n * k``:
    too small for MKL, and at one thread (or asked as at one: ``one``), or too small for
    ``ember.backend.threads`` to hold BLAS at one thread around it."""
    mnk = xs[0] * xs[1] * ws[1]
    return mnk < _SMALL_MNK and not _gemm._maybe_large(xs, ws) and \
        (mnk < _BLAS_THREADED_MNK or one or _threads.get_num_threads() < 2)


_SMALL_MNK = 1 << 21  # (ember.backend.threads splits products from this size)
_BLAS_THREADED_MNK = 1 << 18  # (and holds BLAS at one thread around those from this one)


class WeightT(T):
    """``weight.t()`` inside ``linear`` (PyTorch's ``TBackward0``). On a first-order pass
    the gradient ``Addmm`` computes for it is the transpose of a fresh row-major array;
    this node hands that array on (the weight's gradient in its own layout, which the
    engine stores as ``.grad`` without copying) instead of a transposed view of it."""
    _node_name = "TBackward0"
    _op_name = "Transpose"
    vjp = None  # eager graphs only: compiled plans run linear as one kernel
    fresh = None

    def backward(self, gy):
        fresh, self.fresh = self.fresh, None
        if fresh is not None and gy._data.base is fresh and not _grad_state.grad_enabled:
            return _make(fresh), None, None
        return T.backward(self, gy)

    def _array_grads(self, gy, g):
        """``backward``'s hand-on of ``Addmm``'s fresh array (``Node._array_grads``);
        None, leaving ``fresh`` for ``backward``, for any other gradient."""
        fresh = self.fresh
        if fresh is not None and g.base is fresh:
            self.fresh = None
            return fresh, None, None
        return None


class UnsafeView(Primitive):
    """``_unsafe_view``: a reshape of a fresh result that is not recorded as a view of it
    (how PyTorch's ``matmul`` and ``reshape``-with-copy end)."""
    _node_name = "UnsafeViewBackward0"
    jvp = _jvp.linear(0)

    def forward(self, x, shape):
        self.in_shape = x.shape
        return x.reshape(shape)

    def backward(self, gy):
        return gy.reshape(self.in_shape), None


def _reshape(x, shape):
    """PyTorch's ``reshape``, with its nodes (``ember.ops.shape.reshape_nodes``)."""
    return reshape_nodes(x, shape)


def _contiguous(x):
    from ember.ops.conversion import Clone
    return x if x._data.flags.c_contiguous else Clone.apply(x)


def _should_fold(a, b):
    """PyTorch's rule for multiplying an N-D operand folded into one matrix (mm/mv)
    rather than by a batched product."""
    na, nb = a._data.ndim, b._data.ndim
    if na >= nb:
        big, small_rg = a._data, b._requires_grad
        dim_small = nb
    else:
        big, small_rg = np.swapaxes(b._data, -1, -2), a._requires_grad
        dim_small = na
    if not (big.ndim >= 3 and dim_small <= 2):
        return False
    if small_rg:
        # folding makes the small operand's gradient one product, not a batch of them
        return True
    if na == 2:
        return False
    if big.size == 0:
        return True
    sh, st = big.shape, big.strides
    return all(st[i] == st[i + 1] * sh[i + 1] for i in range(big.ndim - 2))


def matmul_graph(a, b):
    """``a @ b`` recorded with PyTorch's nodes (see the module's docstring); the caller
    has checked the operands (``ember.ops.linalg._matmul_check``)."""
    from ember.ops.linalg import Bmm, Dot, Mm, Mv
    na, nb = a._data.ndim, b._data.ndim
    if na == 1 and nb == 1:
        return Dot.apply(a, b)
    if na == 2 and nb == 1:
        return Mv.apply(a, b)
    if na == 1 and nb == 2:
        return SqueezeInplace.apply(Mm.apply(Unsqueeze.apply(a, 0), b), (0,))
    if na == 2 and nb == 2:
        return Mm.apply(a, b)
    if _should_fold(a, b):
        transpose = nb > na
        if transpose:
            t1 = b.mT
            t2 = _t(a) if na == 2 else a
        else:
            t1, t2 = a, b
        shape1 = t1._data.shape
        out_shape = shape1[:-1]
        folded = _reshape(t1, (math.prod(out_shape), shape1[-1]))
        if t2._data.ndim == 2:
            out = UnsafeView.apply(Mm.apply(folded, t2), out_shape + (t2._data.shape[1],))
            return _contiguous(out.mT) if transpose else out
        return UnsafeView.apply(Mv.apply(folded, t2), out_shape)
    sa, sb = a._data.shape, b._data.shape
    n = sa[-2] if na > 1 else 1
    m1 = sa[-1]
    m2 = sb[-2] if nb > 1 else sb[0]
    p = sb[-1] if nb > 1 else 1
    batch = tuple(np.broadcast_shapes(sa[:max(na - 2, 0)], sb[:max(nb - 2, 0)]))
    count = math.prod(batch)
    a3 = _reshape(Expand.apply(a, batch + (n, m1)), (count, n, m1))
    if nb == 1:
        b3 = Unsqueeze.apply(_reshape(Expand.apply(b, batch + (m2,)), (count, m2)), 2)
    else:
        b3 = _reshape(Expand.apply(b, batch + (m2, p)), (count, m2, p))
    out_shape = batch + ((n,) if na > 1 else ()) + ((p,) if nb > 1 else ())
    out = Bmm.apply(a3, b3)
    if nb == 1:
        out = SqueezeDim.apply(out, (2,))
    return UnsafeView.apply(out, out_shape)


def linear_graph(x, w, b):
    """``linear`` recorded with PyTorch's nodes, for a floating input of 2 or more dims, a
    2-D weight and a bias of shape (out_features,) or None, all of one dtype."""
    shape = x._data.shape
    if len(shape) == 2 and b is not None and w._requires_grad and not _active[0] and \
            not _anomaly[0] and not _hook_stack and type(x._data) is np.ndarray and \
            type(w._data) is np.ndarray and type(b._data) is np.ndarray and \
            b._data.shape == w._data.shape[:1]:
        # (a bias of another shape that broadcasts to the result takes Addmm.apply)
        return _addmm_linear(x, w, b)
    if b is not None and len(shape) > 2 and w._requires_grad and not _active[0] and \
            not _anomaly[0] and not _hook_stack and type(x._data) is np.ndarray and \
            x._data.flags.c_contiguous and type(w._data) is np.ndarray and \
            type(b._data) is np.ndarray and b._data.shape == w._data.shape[:1]:
        # the same nodes as below (a View, WeightT and Addmm, a View back), the middle two
        # made by ``_addmm_linear`` without their generic argument handling
        flat = View.apply(x, (math.prod(shape[:-1]), shape[-1]))
        return View.apply(_addmm_linear(flat, w, b), shape[:-1] + (w._data.shape[0],))
    wt = WeightT.apply(w, 0, 1)
    if len(shape) == 2:
        if b is None:
            from ember.ops.linalg import Mm
            return Mm.apply(x, wt)
        return Addmm.apply(b, x, wt)
    if b is not None and x._data.flags.c_contiguous:
        flat = View.apply(x, (math.prod(shape[:-1]), shape[-1]))
        return View.apply(Addmm.apply(b, flat, wt), shape[:-1] + (w._data.shape[0],))
    out = matmul_graph(x, wt)
    return out if b is None else _BiasAdd.apply(out, b)


def _short_linear(x, w, b):
    """``linear(x, w, b)`` made by ``_addmm_linear`` when that is what ``linear`` would
    do (a 2-D floating input, a 2-D weight that requires grad and a bias, NumPy arrays of
    one dtype and matching sizes, grad mode on, nothing watching the graph being made);
    None otherwise, and the caller calls ``linear``. For loops that call ``linear`` per
    step (the RNN cells)."""
    if b is None or not _grad_state.grad_enabled or _active[0] or _anomaly[0] or \
            _hook_stack or not (isinstance(x, Tensor) and isinstance(w, Tensor) and
                                isinstance(b, Tensor)) or not w._requires_grad:
        return None
    xd, wd, bd = x._data, w._data, b._data
    if type(xd) is not np.ndarray or type(wd) is not np.ndarray or \
            type(bd) is not np.ndarray:
        return None
    dt = xd.dtype
    if xd.ndim != 2 or wd.ndim != 2 or xd.shape[1] != wd.shape[1] or wd.dtype != dt or \
            dt.kind != "f" or bd.dtype != dt or bd.shape != wd.shape[:1]:
        return None
    return _addmm_linear(x, w, b)


def _addmm_linear(x, w, b):
    """``linear_graph``'s most common call (a batch of rows, a weight that requires grad, a
    bias, NumPy arrays, no mode, anomaly mode or saved-tensor hook watching) with its two
    nodes made here: the same ``WeightT`` and ``Addmm`` nodes, edges, saved inputs and
    output tensors that ``WeightT.apply(w, 0, 1)`` and ``Addmm.apply(b, x, wt)`` leave,
    without their generic argument handling (the RNN cell loop and MLPs call it per
    step)."""
    node, out = _addmm_node(x, w, b)
    t = _new(Tensor)
    t._data = out
    t._grad = t._base = t._extra = None
    t._output_nr = 0
    t._vc = [0]
    t._requires_grad = True
    t.grad_fn = node
    return t


def _addmm_node(x, w, b):
    """``_addmm_linear``'s ``AddmmBackward0`` node and output array, without the output
    Tensor (``cell_graph.elman_step`` adds the two products at once and keeps neither
    Tensor)."""
    # WeightT.apply(w, 0, 1): a view of the weight, one edge (the dims are no edges)
    tn = _new(WeightT)
    tn.dims = (0, 1)
    fn = w.grad_fn
    tn._edges = [w if fn is None else (fn, w._output_nr), None, None]
    tn._n_in = 1
    wtd = w._data.swapaxes(0, 1)
    wt = _new(Tensor)
    wt._data = wtd
    wt._grad = wt._extra = None
    wt._requires_grad = True
    wt.grad_fn = tn
    wt._output_nr = 0
    base = w if w._base is None else w._base
    wt._base = base
    wt._vc = w._vc
    if base.grad_fn is not None:
        _track_view(base, wt)
    # Addmm.apply(b, x, wt)
    xd, bd = x._data, b._data
    xg = x._requires_grad
    # ``_direct``'s answer and ``_backward_small``'s, kept per shapes and what else they
    # read (the size limits and the thread count), as a cell's loop asks the same twice
    # per step
    key = (xd.shape, wtd.shape, xg, _gemm.THRESHOLD, _gemm.NARROW_THRESHOLD,
           _thread_state["threads"], _SMALL_MNK, _BLAS_THREADED_MNK)
    plan = _linear_plans.get(key)
    if plan is None:
        direct = _direct(xd.shape, wtd.shape)
        # (the backward's answer is asked as at one thread: at more, it takes the small
        # route only while BLAS is held at one thread, ``threads.blas_held``)
        plan = (direct, _backward_small(xd.shape, wtd.shape, xg)
                if direct or _direct(xd.shape, wtd.shape, True) else 0)
        if len(_linear_plans) >= 64:
            _linear_plans.clear()
        _linear_plans[key] = plan
    # (float16/bfloat16, the 2-byte floats, take ``gemm.addmm``: computed in float32)
    same = bd.dtype == xd.dtype and xd.itemsize != 2
    if plan[0] and same:
        # ``gemm.addmm``'s own steps for a product too small for MKL or ember's threads
        # (a recurrent cell's step), without its dispatch
        out = _rows_times_weight_t(xd, w._data)
        if out is None:
            out = _gemm._numpy_matmul(xd, wtd, None)
        if out.size < _gemm.ADD_ROWS_TILED:
            out += bd  # (``gemm._add_rows``'s own sum for a product this small)
        else:
            _gemm._add_rows(out, bd)
    else:
        out = _gemm.addmm(bd, xd, wtd)
    node = _new(Addmm)
    node.bshape = None  # the bias has the output's row shape (``_fusable_linear``)
    eb = ex = None
    if b._requires_grad:
        fn = b.grad_fn
        eb = b if fn is None else (fn, b._output_nr)
    if xg:
        fn = x.grad_fn
        ex = x if fn is None else (fn, x._output_nr)
    # whether the first-order backward may run its products straight on ``np.matmul``
    # (``_small_grads``'s test, made once here): 1 at any thread count, 2 at one thread
    # or with BLAS held at one
    node.small = plan[1] if same else 0
    node._edges = [eb, ex, (tn, 0)]
    # the input is read by the weight's gradient (always wanted here), the transposed
    # weight only by the input's (``product_saves``)
    node._saved = [(x, x._vc[0]), (wt, wt._vc[0]) if xg else _NOT_SAVED]
    return node, out


_linear_plans = {}  # ``_addmm_linear``'s answers of ``_direct`` and ``_backward_small``
_thread_state = _threads._state


# OpenBLAS runs a few rows times the transpose of a small row-major weight (``x @ w.T``,
# a recurrent cell's input product, 32x64x128) at about half the speed of the same
# product with the transpose copied to row-major order (10.8 against 4.9 us), and copying
# it per call costs what it saves (5.3 us). So the copy is kept between calls, for as
# long as the weight's bytes are the ones it was made from: every call compares them
# (1.6 us for 128x64 float32), since a write through ``.data`` or a NumPy view changes
# the array without its version. The bits of the two products agree for float32 with
# 19-32 rows, k < 128 and n a multiple of 64 up to 512 (21336 draws over that range, all
# equal; fewer rows or other n differ in places), so only those products take this way
# (tests/test_rnn_step_paths.py checks the bits). Larger k gains less than the compare
# costs (128x128: a 4.6 us compare for about 5 us).
_WT_ROWS = (19, 32)
_WT_K = 128
_WT_N = (64, 512)
_WT_KEEP = 8  # weights whose copies are kept at once
_wt_copies = {}  # id(weight array) -> (weak reference to it, its bytes, its copy)


def _rows_times_weight_t(x, w):
    """``x @ w.T`` through a kept row-major copy of ``w.T`` (see above), or None where
    the product does not take that way."""
    m, k = x.shape
    n = w.shape[0]
    if not (_WT_ROWS[0] <= m <= _WT_ROWS[1] and k < _WT_K and _WT_N[0] <= n <= _WT_N[1]
            and n % 64 == 0) or x.dtype.char != "f" or w.dtype.char != "f" or \
            not x.flags.c_contiguous or not w.flags.c_contiguous or \
            not x.dtype.isnative or not w.dtype.isnative or \
            not _threads.copy_keeps_bits():  # (other kernels: other bits, threads.py)
        return None
    return _kept_product(x, w)


def _kept_product(x, w):
    """``_rows_times_weight_t``'s product, its range checked by the caller."""
    now = w.tobytes()
    kept = _wt_copies.get(id(w))
    if kept is None or kept[0]() is not w or kept[1] != now:
        if len(_wt_copies) >= _WT_KEEP:
            _wt_copies.clear()
        kept = _wt_copies[id(w)] = (weakref.ref(w), now, np.ascontiguousarray(w.T))
    return np.matmul(x, kept[2])


def linear_rows(b, x, w, kept=None, key=None):
    """``gemm.addmm(b, x, w.T)``: ``linear`` on a batch of rows ``x`` (arrays; a compiled
    plan's linear steps), its product through the kept row-major copy of ``w.T`` where
    ``_rows_times_weight_t`` takes it (the same bits), else as ``gemm.addmm``.

    ``kept`` (a dict, with ``key`` naming ``w`` in it): row-major copies of ``w.T`` made
    once per plan run and reused by every linear step reading ``w`` (no write can reach
    a weight between a plan's products), over the range :func:`_copy_keeps_bits`
    allows: no byte compare per product, and the hidden product of a recurrent cell
    (k = 128) too."""
    if type(x) is np.ndarray and x.ndim == 2 and type(w) is np.ndarray and \
            type(b) is np.ndarray and w.ndim == 2 and b.shape == w.shape[:1] and \
            b.dtype == x.dtype and _direct(x.shape, (w.shape[1], w.shape[0])):
        # gemm.addmm's own steps for a product it runs on ``np.matmul`` (``_direct``)
        out = None
        if kept is not None:
            wc = kept.get(key)
            if wc is None:
                wc = kept[key] = np.ascontiguousarray(w.T) if _copy_keeps_bits(x, w) \
                    else False
            if wc is not False and _copy_keeps_bits(x, w):
                out = np.matmul(x, wc)
        elif x.shape[1] < _WT_K and _WT_ROWS[0] <= x.shape[0] <= _WT_ROWS[1]:
            out = _rows_times_weight_t(x, w)
        if out is None:
            out = _gemm._numpy_matmul(x, w.T, None)
        _gemm._add_rows(out, b)
        return out
    return _gemm.addmm(b, x, w.T)


# ``x @ w.T`` on a row-major copy of ``w.T`` has the bits of ``gemm``'s product on the
# transposed weight for float32 with 19-32 rows and n a multiple of 64 up to 512: for
# k < 128 (see ``_rows_times_weight_t``), and for 128 <= k <= 256 with n >= 128, where
# ``gemm`` runs ``_by_transpose`` (on this machine's OpenBLAS every draw of m = 19-32,
# k = 128-256 in steps of 3 and 8, n = 128-512 in steps of 64 agreed; with 2-9 rows
# they differ in places). tests/test_compile_cell_loop.py checks the bits at the edges.
_WT_K_MAX = 256


def _copy_keeps_bits(x, w):
    """Whether ``x @ w.T`` on a row-major copy of ``w.T`` has the bits of the product
    ``gemm`` computes on the transposed weight (the range above)."""
    m, k = x.shape
    n = w.shape[0]
    if not (_WT_ROWS[0] <= m <= _WT_ROWS[1] and _WT_N[0] <= n <= _WT_N[1] and n % 64 == 0) \
            or k >= _WT_K and not (k <= _WT_K_MAX and n >= 128) or \
            x.dtype.char != "f" or w.dtype.char != "f" or not x.flags.c_contiguous or \
            not w.flags.c_contiguous or not x.dtype.isnative or not w.dtype.isnative:
        return False
    return w.shape[1] == k and _threads.copy_keeps_bits()


class _BiasAdd(Add):
    """``product + bias`` written into the product's array: ``linear``'s bias added in
    place to the fresh result of its ``matmul``, as PyTorch's ``add_`` there (no second
    product-sized array; the product is ``linear``'s own temporary, seen by no one)."""
    _node_name = "AddBackward0"
    _op_name = "Add"  # the same op as Add (its spellings and messages), computed in place
    profiler_name = "aten::add_"
    # eager only (captures record ``linear``): the compile plan's array pieces, which
    # may run ``forward`` on arrays others hold, are Add's alone
    vjp = forward_out = fused = None

    def forward(self, a, b):
        if type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype and \
                a.flags.writeable and np.broadcast_shapes(a.shape, b.shape) == a.shape:
            a += b
            return a
        return Add.forward(self, a, b)


class Trilinear(Primitive):
    """``_trilinear`` as ``bilinear`` calls it: ``out[n, o] = sum_ij x1[n, i] w[o, i, j]
    x2[n, j]`` for matrices ``x1`` (n, in1), ``x2`` (n, in2) and ``w`` (out, in1, in2)."""
    _node_name = "TrilinearBackward0"
    save_inputs = (0, 1, 2)

    @opmath  # (float16/bfloat16 summed in float32 and rounded once, as the composite)
    def forward(self, x1, w, x2):
        # the order of the composite (x1 @ w per output, then a sum against x2)
        t = np.matmul(x1[:, None, None, :], w)[:, :, 0, :]
        return (t * x2[:, None, :]).sum(-1, dtype=t.dtype)

    def backward(self, gy):
        from ember.ops._einsum import einsum
        x1, w, x2 = self.saved_tensors
        e = self._edges
        return (einsum("no,oij,nj->ni", gy, w, x2) if e[0] is not None else None,
                einsum("no,ni,nj->oij", gy, x1, x2) if e[1] is not None else None,
                einsum("no,oij,ni->nj", gy, w, x1) if e[2] is not None else None)

    jvp = _jvp.multilinear(0, 1, 2)


def bilinear_graph(x1, x2, w, b):
    """``bilinear`` recorded with PyTorch's nodes: the inputs reshaped to matrices, one
    ``TrilinearBackward0``, the result reshaped back, the bias added."""
    out_shape = tuple(x1.shape[:-1]) + (w.shape[0],)
    out = Trilinear.apply(x1.reshape(-1, x1.shape[-1]), w, x2.reshape(-1, x2.shape[-1]))
    out = out.reshape(out_shape)
    return out if b is None else out + b
