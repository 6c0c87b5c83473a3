"""A recurrent layer run as one fused kernel that shows PyTorch's step-by-step graph.

PyTorch's CPU kernels run a layer op by op, so its graph holds a dozen nodes per time
step (``ember.nn._rnn_unrolled`` spells them in ember ops). Running those ops one by
one in Python costs more than their arithmetic. Here one direction of one layer runs
as the fused kernel of ``ember.ops.rnn`` over the layer's input projection (the real
``linear``, whose nodes stay real), and the step nodes are built around it as PyTorch
records them:

- every inner node (:class:`_Shown`) holds only what ``name()`` and ``next_functions``
  show: its class is named as PyTorch's, its edges are PyTorch's edges, ``None`` where
  an input needs no gradient;
- the nodes whose outputs leave the layer (each step's output, the last ``c`` of an
  LSTM, the joined last states of a packed batch) are the engine's way in: each hands
  its gradient to one hidden node, the fused kernel's backward, which needs them all
  (it runs after every one has) and returns the gradients of the input projection,
  the first states and the recurrent weights in one backpropagation through time.

The engine never reaches the inner nodes, so hooks on them could not run: registering
one raises. Second derivatives replay the fused layer in Tensor ops (``ember.ops.rnn``).
The caller takes this path only where it shows all there is to see: grad mode on, no
graph capture or transform, no saved-tensor hooks (which see each op's saved tensors)
and no anomaly mode (which keeps each op's traceback).
"""
import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd import anomaly
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import AccumulateGrad, Node, _hook_stack, _new
from ember.ops import rnn as _rnn

__all__ = []


class _Shown(Node):
    """A node of a fused layer's graph as PyTorch shows it (``_shown``: its edges)."""
    __slots__ = ("_shown",)  # no instance dict: a layer makes thousands of these

    @property
    def next_functions(self):
        return tuple((None, 0) if e is None else e if type(e) is tuple else
                     (AccumulateGrad.of(e), 0) for e in self._shown)

    def register_hook(self, fn):
        raise RuntimeError(
            f"{self.name()} is a step of a recurrent layer that ember runs as one fused "
            "kernel; hooks on its steps' nodes are not supported. Register the hook on the "
            "layer's outputs or inputs, or on the cell (nn.LSTMCell, nn.GRUCell) in a loop.")

    register_prehook = register_hook

    def backward(self, gy):
        # an output of the layer: its gradient goes to the fused backward as it is
        return (gy,)


def _kind(name):
    return type(name, (_Shown,), {"_node_name": name, "__slots__": ()})


_ADD, _SUB, _MUL, _ADDMM, _MM, _T, _SPLIT, _UNBIND, _SLICE, _CAT, _SIGMOID, _TANH, \
    _RELU = (_kind(n + "Backward0") for n in (
        "Add", "Sub", "Mul", "Addmm", "Mm", "T", "UnsafeSplit", "Unbind", "Slice", "Cat",
        "Sigmoid", "Tanh", "Relu"))


def _edge(t):
    """How a node lists Tensor ``t`` among its inputs (None: no gradient)."""
    if t is None or not t._requires_grad:
        return None
    fn = t.grad_fn
    return t if fn is None else (fn, t._output_nr)


def _node(kind, *edges):
    """The edge of a new node's output; None (no node) where no input needs a gradient."""
    for e in edges:
        if e is not None:
            n = _new(kind)
            n._edges = ()
            n._shown = edges
            return (n, 0)
    return None


def _pieces(kind, e, k):
    if e is None:
        return [None] * k
    n = _new(kind)
    n._edges = ()
    n._shown = (e,)
    return [(n, j) for j in range(k)]


# ----- one step, as ember.nn._rnn_unrolled writes it ------------------------------------
def _linear(h, w, b):
    """``linear(h, w, b)``: Addmm over (b, h, w.t()), or Mm over (h, w.t())."""
    wt = _node(_T, w)
    return _node(_MM, h, wt) if b is False else _node(_ADDMM, b, h, wt)


def _rnn_tanh(gi, h, p):
    return _node(_TANH, _node(_ADD, _linear(h, p[1], p[3]), gi))


def _rnn_relu(gi, h, p):
    return _node(_RELU, _node(_ADD, _linear(h, p[1], p[3]), gi))


def _lstm(gi, hc, p):
    h, c = hc
    i, f, g, o = _pieces(_SPLIT, _node(_ADD, _linear(h, p[1], p[3]), gi), 4)
    cy = _node(_ADD, _node(_MUL, _node(_SIGMOID, f), c),
               _node(_MUL, _node(_SIGMOID, i), _node(_TANH, g)))
    hy = _node(_MUL, _node(_SIGMOID, o), _node(_TANH, cy))
    if p[4] is not False:
        hy = _node(_MM, hy, _node(_T, p[4]))
    return [hy, cy]


def _gru(gi, h, p):
    i_r, i_z, i_n = _pieces(_SPLIT, gi, 3)
    h_r, h_z, h_n = _pieces(_SPLIT, _linear(h, p[1], p[3]), 3)
    r = _node(_SIGMOID, _node(_ADD, h_r, i_r))
    z = _node(_SIGMOID, _node(_ADD, h_z, i_z))
    n = _node(_TANH, _node(_ADD, i_n, _node(_MUL, h_n, r)))
    return _node(_ADD, _node(_MUL, _node(_SUB, h, n), z), n)


_STEPS = {"RNN_TANH": _rnn_tanh, "RNN_RELU": _rnn_relu, "LSTM": _lstm, "GRU": _gru}


# an LSTM's state is a list [h, c] of edges (an edge itself may be a tuple)
def _narrow(hidden):
    if type(hidden) is list:
        return [_node(_SLICE, s) for s in hidden]
    return _node(_SLICE, hidden)


def _concat(parts):
    if type(parts[0]) is list:
        return [_node(_CAT, *[p[k] for p in parts]) for k in range(len(parts[0]))]
    return _node(_CAT, *parts)


def _first(hidden):
    return hidden[0] if type(hidden) is list else hidden


# ----- the layers' graphs, as ember.nn._rnn_unrolled's layers record them ----------------
def _padded_graph(step, gi, T, hidden, p, reverse):
    """(each step's output edge in time order, the last state's edge)."""
    rows = _pieces(_UNBIND, gi, T)
    outs = [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        hidden = step(rows[t], hidden, p)
        outs[t] = _first(hidden)
    return outs, hidden, None


def _packed_graph(step, gi, bs, hidden, p):
    outs, ended = [], []
    last = bs[0]
    for n in bs:
        if n < last:
            ended.append(_narrow(hidden))
            hidden = _narrow(hidden)
        last = n
        hidden = step(_node(_SLICE, gi), hidden, p)
        outs.append(_first(hidden))
    ended.append(hidden)
    return outs, hidden, _concat(ended[::-1])


def _packed_reverse_graph(step, gi, bs, hidden0, p):
    outs = [None] * len(bs)
    last = bs[-1]
    hidden = _narrow(hidden0)
    for t in range(len(bs) - 1, -1, -1):
        n = bs[t]
        if n > last:
            hidden = _concat([hidden, _narrow(hidden0)])
        last = n
        hidden = step(_node(_SLICE, gi), hidden, p)
        outs[t] = _first(hidden)
    return outs, hidden, None


# ----- the fused kernel under them ------------------------------------------------------
class _FusedSteps:
    """The fused layer as the hidden node under a layer's graph: outputs ``0..T-1`` are
    the steps' outputs (in time order), ``T`` the joined last ``h`` and ``T + 1`` the last
    ``c`` (where those are nodes of their own); backward joins the steps' gradients into
    the packed layout and runs the fused backpropagation through time."""
    __slots__ = ()
    _custom_zeros = True  # missing gradients are zeros, filled here
    # eager graphs only: captures and compiled plans run the layer's own op
    vjp = onnx = torchscript = None

    def backward(self, *grads):
        bs = self.bs
        T = len(bs)
        (H, dt), h_meta, c_meta = self._meta
        ghn = _make(np.zeros(*h_meta)) if grads[T] is None else grads[T]
        gcn = None
        if c_meta is not None:
            gcn = _make(np.zeros(*c_meta)) if grads[T + 1] is None else grads[T + 1]
        if _grad_state.grad_enabled:   # the gradient is being recorded: Tensor ops
            from ember.ops.join import cat
            gy = cat([_make(np.zeros((n, H), dt)) if g is None else g
                      for g, n in zip(grads[:T], bs)], 0)
        else:
            parts = [np.zeros((n, H), dt) if g is None else g._data
                     for g, n in zip(grads[:T], bs)]
            gy = _make(np.concatenate(parts) if T > 1 else parts[0])
        return self._grads(self.saved_tensors, [e is not None for e in self._edges], gy, ghn,
                           gcn)


_LAYERS = {mode: type(cls.__name__ + "Steps", (_FusedSteps, cls), {})
           for mode, cls in _rnn.LAYERS.items()}
FUSED_LAYERS = tuple(_LAYERS.values())  # (the exporters' and vmap's exemption lists)


def _tensor(arr, edge):
    t = _make(arr, edge is not None)
    if edge is not None:
        t.grad_fn, t._output_nr = edge
    return t


def _enter(edge, layer, k):
    """Make the node of ``edge`` the way into output ``k`` of the fused ``layer``."""
    if edge is not None:
        edge[0]._edges = ((layer, k),)


def layer(mode, gi, bs, hidden, p, reverse):
    """One direction of one layer over its input projection ``gi`` (``linear(x, W_ih,
    b_ih)``: (T, B, G) when ``bs`` is None, else the packed rows with batch sizes
    ``bs``), from ``hidden`` (``h``, or ``(h, c)`` for the LSTM) with ``p = (w_ih, w_hh,
    b_ih, b_hh, w_hr)``. Returns ``(steps' outputs in time order, last state)``, the
    graph ``ember.nn._rnn_unrolled``'s layers record around them; the caller stacks
    (padded) or joins (packed) the outputs."""
    lstm = mode == "LSTM"
    h0, c0 = hidden if lstm else (hidden, None)
    _, w_hh, _, b_hh, w_hr = p
    padded = bs is None
    if padded:
        T, B = gi._data.shape[:2]
        bs = (B,) * T
        rows = gi.reshape(T * B, gi._data.shape[2])
    else:
        T, rows = len(bs), gi
    args = (rows, h0, c0, None, w_hh, None, b_hh, w_hr)
    node = _new(_LAYERS[mode])
    out = node.forward(*[None if a is None else a._data for a in args], batch_sizes=bs,
                       reverse=reverse)
    y, hn = out[0], out[1]
    cn = out[2] if lstm else None
    node._edges_of(args)
    node.n_outputs = T + 2
    dt = y.dtype
    node._meta = ((y.shape[1], dt), (hn.shape, dt), None if cn is None else (cn.shape, dt))

    # the graph, over edges: the parameters' as the step functions read them
    shown = (None, _edge(w_hh), None, False if b_hh is None else _edge(b_hh),
             False if w_hr is None else _edge(w_hr))
    state = [_edge(h0), _edge(c0)] if lstm else _edge(h0)
    step = _STEPS[mode]
    if padded:
        outs, last, joined = _padded_graph(step, _edge(gi), T, state, shown, reverse)
    elif not reverse:
        outs, last, joined = _packed_graph(step, _edge(gi), bs, state, shown)
    else:
        outs, last, joined = _packed_reverse_graph(step, _edge(gi), bs, state, shown)

    offs = _rnn._offsets(bs)
    ys = []
    for t, e in enumerate(outs):
        _enter(e, node, t)
        ys.append(_tensor(y[offs[t]:offs[t] + bs[t]], e))
    if joined is None:   # the last state is the last step's output (and its c)
        h_last = ys[0] if reverse else ys[-1]
        if lstm:
            _enter(last[1], node, T + 1)
            final = (h_last, _tensor(cn, last[1]))
        else:
            final = h_last
    elif lstm:
        _enter(joined[0], node, T)
        _enter(joined[1], node, T + 1)
        final = (_tensor(hn, joined[0]), _tensor(cn, joined[1]))
    else:
        _enter(joined, node, T)
        final = _tensor(hn, joined)
    return ys, final


def usable(*tensors):
    """Whether layers over these Tensors may run here: NumPy arrays of one dtype,
    float32 or float64 (the op-by-op path handles the rest, and its errors), with no
    saved-tensor hooks or anomaly mode to see each op."""
    if _hook_stack or anomaly.enabled[0]:
        return False
    dt = None
    for t in tensors:
        if t is None:
            continue
        if not isinstance(t, Tensor) or type(t._data) is not np.ndarray:
            return False
        d = t._data.dtype
        if d not in _FLOATS or (dt is not None and d != dt):
            return False
        dt = d
    return True


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
