"""Fused primitives for the hot path of small networks: a linear layer as one node
and a ReLU with a faster kernel.

A chain of small ops (transpose, matmul, add) costs a
node, a saved tensor and a gradient temporary per op; these primitives do the same
math in one NumPy pass set. Their backward follows the house rule of
:mod:`ember.ops.normalization`: on a first-order pass it runs on arrays, reusing what
forward computed; when a graph of the gradient is being recorded (``create_graph``) it
is written in differentiable ember Tensor ops, so second derivatives are exact.

The public entry point is ``ember.nn.functional.linear``, which chooses these
primitives for the cases they cover and the general composites otherwise.
"""
import numpy as np

from ember._tensor import _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import gemm as _gemm
from ember.backend import threads as _threads
from ember.ops import _batch_nn
from ember.ops import reduction as _reduction
from ember.ops.unary import Relu, _relu_array, _relu_grad, _relu_grad_array
from ember.ops.unary import relu as _relu

__all__ = []


# ----- linear ------------------------------------------------------------------------------
def bias_grad(g2, x):
    """The bias's gradient from the rows ``g2`` of the output's gradient for the input
    ``x``, with the bits of the graph ``linear`` records when it runs with grad
    (``matmul_graph.linear_graph``): its ``Addmm`` node, for a matrix or a C-ordered input
    of more dims, sums the rows on BLAS (``gemm.sum_rows``); for another input the graph
    is a product and a broadcast ``add``, whose gradient is NumPy's sum over the leading
    dims."""
    if x.ndim != 2 and not x.flags.c_contiguous:
        return g2.sum(0)
    return _gemm.sum_rows(g2)


def weight_grad(g2, x, x2, mm):
    """The weight's gradient from the rows ``g2`` of the output's gradient and the
    input's rows ``x2`` (of the input ``x``), with the bits of the graph ``linear``
    records (``matmul_graph.linear_graph``): ``g2.T @ x2`` as its ``Addmm`` node
    computes it for a matrix or a C-ordered input; for another input the graph is an
    ``Mm`` of the folded input and the transposed weight, whose gradient is the
    transposed product ``(x2.T @ g2).T``, and BLAS's kernels (OpenBLAS's Haswell ones)
    do not always give a product and its transposed product the same bits. ``mm(a, b)``
    runs a product (``gemm.matmul`` or a compiled plan's own call)."""
    if x.ndim != 2 and not x.flags.c_contiguous:
        return mm(x2.T, g2).T
    return mm(g2.T, x2)


def linear_vjp(edges, g, x, w, out, mm_x, mm_w):
    """``_Linear``'s array gradients of ``x``, ``w`` and the bias (where ``edges`` ask
    for them) from the output's gradient ``g``; the input's into ``out(0, shape, dtype)``
    when given. ``mm_x(a, b, out=None)`` and ``mm_w`` run the two products (``gemm.matmul``,
    or a compiled plan's own calls with the same arguments)."""
    flat = x.ndim != 2
    g2 = g.reshape(-1, g.shape[-1]) if flat else g
    x2 = x.reshape(-1, x.shape[-1]) if flat and edges[1] is not None else x
    gx = gw = gb = None
    if edges[0] is not None:
        if out is None:
            def input_grad():
                r = mm_x(g2, w)
                return r.reshape(x.shape) if flat else r
        else:
            gx = out(0, x.shape, np.result_type(g.dtype, w.dtype))

            def input_grad():
                mm_x(g2, w, gx.reshape(-1, w.shape[1]) if flat else gx)
                return gx
        if edges[1] is not None and _threads.MANY and type(g2) is np.ndarray:
            # the two products at once, each whole at one BLAS thread (``threads.pair``)
            gx, gw = _threads.pair(input_grad, lambda: weight_grad(g2, x, x2, mm_w),
                                   g2.size * w.shape[1])
        else:
            gx = input_grad()
    if edges[1] is not None and gw is None:
        gw = weight_grad(g2, x, x2, mm_w)
    if len(edges) > 2 and edges[2] is not None:
        gb = bias_grad(g2, x)
    return [gx, gw, gb]


class _Linear(Primitive):
    """``x @ w.T + b`` for ``x`` (*, in) with at least 2 dims, ``w`` (out, in) and ``b``
    (out) or None, all of one floating dtype (checked by the caller)."""
    save_inputs = (0, 1)
    _node_name = "AddmmBackward0"
    batch = _batch_nn.linear

    def forward(self, x, w, b):
        x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
        # the bias goes into the product (MKL's beta = 1, as PyTorch's addmm) or is
        # added in place after it
        out = _gemm.matmul(x2, w.T) if b is None else _gemm.addmm(b, x2, w.T)
        return out if x.ndim == 2 else out.reshape(*x.shape[:-1], w.shape[0])

    def backward(self, gy):
        x, w = self.saved_tensors
        if not _grad_state.grad_enabled:
            return self._backward_arrays(gy._data, x._data, w._data)
        return self._backward_tensors(gy, x, w)

    def _backward_tensors(self, gy, x, w):
        """The gradients in differentiable Tensor ops (a graph is being recorded)."""
        ex, ew, eb = self._edges
        flat = x._data.ndim != 2
        g2 = gy.reshape(-1, gy.shape[-1]) if flat else gy
        gx = gw = gb = None
        if ex is not None:
            gx = g2.matmul(w)
            if flat:
                gx = gx.reshape(x.shape)
        if ew is not None:
            gw = g2.mT.matmul(x.reshape(-1, x.shape[-1]) if flat else x)
        if eb is not None:
            gb = g2.sum(0) if flat and not x._data.flags.c_contiguous else \
                _reduction.sum_rows(g2)  # (``bias_grad``'s bits)
        return gx, gw, gb

    def _backward_arrays(self, g, x, w):
        ex, ew, eb = self._edges
        flat = x.ndim != 2
        if flat:
            g = g.reshape(-1, g.shape[-1])
        gx = gw = gb = None
        x2 = x.reshape(-1, x.shape[-1]) if flat and ew is not None else x
        if ex is not None and ew is not None and _threads.MANY and type(g) is np.ndarray:
            # the two products at once, each whole at one BLAS thread (``threads.pair``)
            gx, gw = _threads.pair(lambda: _gemm.matmul(g, w),
                                   lambda: weight_grad(g, x, x2, _gemm.matmul),
                                   g.size * w.shape[1])
            gx = _make(gx.reshape(x.shape) if flat else gx)
            gw = _make(gw)
        else:
            if ex is not None:
                gx = _gemm.matmul(g, w)
                gx = _make(gx.reshape(x.shape) if flat else gx)
            if ew is not None:
                # (out, in) straight from BLAS: a fresh C-ordered array the engine can
                # hand to .grad without a copy
                gw = _make(weight_grad(g, x, x2, _gemm.matmul))
        if eb is not None:
            gb = _make(bias_grad(g, x))
        return gx, gw, gb

    def jvp(self, tx, tw, tb):
        x, w, _ = self.fw_inputs
        out = None if tx is None else _Linear.apply(tx, w, None)
        if tw is not None:
            r = _Linear.apply(x, tw, None)
            out = r if out is None else out + r
        if tb is not None:
            out = tb if out is None else out + tb
        return out

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``); with ``out``, the input's gradient is
        written into a buffer, the weight's and bias's stay fresh (the user keeps them)."""
        return linear_vjp(self._edges, grads[0], inputs[0], inputs[1], out,
                          _gemm.matmul, _gemm.matmul)

    def forward_out(self, x, w, b, out):
        """``forward`` written into ``out(0, shape, dtype)`` (the compile plan's buffers;
        all of one floating dtype)."""
        n = w.shape[0]
        y = out(0, x.shape[:-1] + (n,), np.result_type(x.dtype, w.dtype))
        x2, y2 = (x, y) if x.ndim == 2 else (x.reshape(-1, x.shape[-1]), y.reshape(-1, n))
        if b is None:
            _gemm.matmul(x2, w.T, out=y2)
        else:
            _gemm.addmm(b, x2, w.T, out=y2)
        return y


class _LinearMm(_Linear):
    _node_name = "MmBackward0"


class _LinearView(_Linear):
    _node_name = "ViewBackward0"


class _LinearUnsafeView(_Linear):
    _node_name = "UnsafeViewBackward0"


class _LinearRelu(_Linear):
    """``relu(x @ w.T + b)`` as one node, the ReLU applied in place on the fresh product.
    Eager ember records a Linear and a ReLU as two nodes, as the user wrote them (a
    compiled plan runs the ReLU in place over the Linear's output); the exporters and
    batching rules keep this node's spelling for graphs that hold it."""
    save_output = True
    _node_name = "ReluBackward0"
    batch = _batch_nn.linear_relu

    def forward(self, x, w, b):
        out = _Linear.forward(self, x, w, b)
        return _relu_array(out, out)

    def backward(self, gy):
        x, w, y = self.saved_tensors
        if not _grad_state.grad_enabled:
            return self._backward_arrays(_relu_grad_array(gy._data, y._data), x._data,
                                         w._data)
        return self._backward_tensors(_relu_grad(gy, y), x, w)

    def jvp(self, *tangents):
        t = _Linear.jvp(self, *tangents)
        return None if t is None else _relu_grad(t, self.fw_output)

    # relu applied to the base class's output: the compile plan may run relu's fused
    # gradient loop, then the base class's vjp
    activation = Relu

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``): relu's, then the linear layer's."""
        g = grads[0]
        g = _relu_grad_array(g, outputs[0], None if out is None else
                             out("act", g.shape, g.dtype))
        return _Linear.vjp(self, (g,), inputs, outputs, out)

    def forward_out(self, x, w, b, out):
        """``forward`` written into ``out(0, shape, dtype)``."""
        y = _Linear.forward_out(self, x, w, b, out)
        return _relu_array(y, y)


# PyTorch's name for the node on top of linear's output: addmm / mm for a 2-D input,
# the view back to (*, out) for more dims; keyed by (input is 2-D, bias given)
_LINEAR_NODES = {(True, True): _Linear, (True, False): _LinearMm,
                 (False, True): _LinearView, (False, False): _LinearUnsafeView}


def fused_linear(input, weight, bias):
    """``input @ weight.T + bias`` as one node, for a floating ``input`` of 2 or more
    dims, a 2-D ``weight`` and a ``bias`` of shape (out_features,) or None, all of one
    dtype (the caller checks; ``ember.nn.functional.linear`` covers every other case)."""
    return _LINEAR_NODES[input._data.ndim == 2, bias is not None].apply(input, weight, bias)


# ----- relu ----------------------------------------------------------------------------------
def fused_relu(input):
    """``max(input, 0)`` (``torch.relu``): the same node as ``ember.relu``."""
    return _relu(input)
