"""An Elman cell's step (``RNNCell``, tanh or ReLU) recorded in one call.

A Python loop over ``RNNCell`` records, per step, the graph ``torch.rnn_tanh_cell``
leaves: ``TanhBackward0`` (or ``ReluBackward0``) over ``AddBackward0`` over two
``AddmmBackward0`` (``linear(h, W_hh, b_hh)`` and ``linear(x, W_ih, b_ih)``, each over
its ``TBackward0``). :func:`elman_step` makes those six nodes directly, with the edges,
saved values, views and version counters that ``linear``'s short path
(``matmul_graph._addmm_linear``), ``Add`` and ``tanh``/``relu`` leave, and the same
arrays: only the argument handling between them is skipped. It runs only where that is
what the general path would do; anywhere else it answers None and the caller takes the
general path (``_rnn_unrolled.cell``).
"""
import numpy as np

from ember._tensor import Tensor
from ember.autograd import _modes, _saved_hooks, anomaly
from ember.autograd.grad_mode import state as _grad_state
from ember.backend import threads as _threads
from ember.ops.activations import Relu, _relu_array
from ember.ops.arithmetic import Add
from ember.ops.matmul_graph import _addmm_node
from ember.ops.unary import tanh as _tanh

__all__ = []

_new = object.__new__
_nd = np.ndarray
_active = _modes.active
_anomaly = anomaly.enabled
_hook_stack = _saved_hooks.stack
_Tanh = _tanh.primitive
_tanh_forward = _Tanh.forward
_relu_forward = Relu.forward
_add_forward = Add.forward


def elman_step(x, h, w_ih, w_hh, b_ih, b_hh, relu):
    """``tanh(linear(h, w_hh, b_hh) + linear(x, w_ih, b_ih))`` (``relu`` for ReLU) with
    PyTorch's nodes, for a batch ``x`` (m, k) and state ``h`` (m, n) of one floating
    dtype, NumPy arrays, weights that require grad and both biases, grad mode on and
    nothing watching the graph being made (no mode, anomaly mode or saved-tensor hook);
    None otherwise."""
    if not _grad_state.grad_enabled or _active[0] or _anomaly[0] or _hook_stack or \
            b_ih is None or b_hh is None or not (w_ih._requires_grad and
                                                 w_hh._requires_grad):
        return None
    xd, hd, wi, wh, bi, bh = x._data, h._data, w_ih._data, w_hh._data, b_ih._data, \
        b_hh._data
    if type(xd) is not _nd or type(hd) is not _nd or type(wi) is not _nd or \
            type(wh) is not _nd or type(bi) is not _nd or type(bh) is not _nd:
        return None
    dt = xd.dtype
    if dt.kind != "f" or hd.dtype != dt or wi.dtype != dt or wh.dtype != dt or \
            bi.dtype != dt or bh.dtype != dt:
        return None
    xs, hs, ws = xd.shape, hd.shape, wh.shape
    # (the cell has checked the batch against its sizes; the parameters may be others)
    if len(xs) != 2 or len(hs) != 2 or wi.shape != (hs[1], xs[1]) or \
            ws != (hs[1], hs[1]) or bi.shape != ws[:1] or bh.shape != ws[:1] or \
            hs[0] != xs[0]:
        return None
    gi, gi_out = _addmm_node(x, w_ih, b_ih)
    hh, s = _addmm_node(h, w_hh, b_hh)
    # AddBackward0 over both products (both require grad: their weights do). Its output
    # Tensor is seen by no one (the activation's node keeps its own output), nor are
    # the products' (only their nodes and arrays are made), so only the node is made
    add = _new(Add)
    add._edges = ((hh, 0), (gi, 0))
    if dt.itemsize >= 4 and (not _threads.MANY or s.size < _threads.SPLIT_ELEMENTS):
        # the sum and the activation written over the product's fresh array, which no
        # one else holds (its Tensor is dropped here; the nodes keep none of it): the
        # same sums and the same activation, two arrays fewer per step
        s += gi_out
        if relu:
            node = _new(Relu)
            out = _relu_array(s, s)
        else:
            node = _new(_Tanh)
            out = np.tanh(s, out=s)
    else:  # half precision, or arrays the ops split over ember's threads: the ops' own
        s = _add_forward(add, s, gi_out)
        if relu:
            node = _new(Relu)
            out = _relu_forward(node, s)
        else:
            node = _new(_Tanh)
            out = _tanh_forward(node, s)
    node._edges = ((add, 0),)
    t = _new(Tensor)
    t._data = out
    t._grad = t._base = t._extra = None
    t._output_nr = 0
    t._vc = vc = [0]
    t._requires_grad = True
    t.grad_fn = node
    node._saved = [(out, vc, 0, True, 0)]  # the saved output, as ``_record`` keeps it
    return t
