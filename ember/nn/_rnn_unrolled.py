"""The recurrent cells and layers step by step in ember ops, in the order PyTorch's CPU
kernels (ATen's ``RNN.cpp``) run them, so that a graph recorded through them has
PyTorch's nodes and edges:

- a cell is ``linear(h, W_hh, b_hh) + gates_in`` and its gate math; the LSTM and GRU
  cut their gates with ``unsafe_chunk`` (one ``UnsafeSplitBackward0``);
- a layer projects the whole sequence's input once (``linear(x, W_ih, b_ih)``) and
  takes each step's rows from it: ``unbind(0)`` over a padded batch, ``narrow`` over a
  packed one, whose shrinking (or, backwards, growing) batch narrows and concatenates
  the state;
- a layer's outputs are stacked (padded) or concatenated (packed), a bidirectional
  layer joins its two directions along the last dim, and the layers' last states are
  stacked.

``ember.nn.functional_rnn`` runs these when a graph is being recorded; without one the
fused layers of ``ember.ops.rnn`` do the same arithmetic in fewer, larger steps. Where
it can, a layer runs as ``ember.ops.rnn_graph`` runs it: one fused kernel over the input
projection, under the same nodes as these steps record.
"""
from ember.nn import functional as F
from ember.ops import rnn_graph
from ember.ops.join import cat, stack, unsafe_pieces
from ember.ops.matmul_graph import _short_linear

__all__ = []


def _linear(x, w, b):
    """``F.linear``, on its short path straight away where it takes it (a cell's
    products: called twice per step of a Python loop over a cell)."""
    y = _short_linear(x, w, b)
    return F.linear(x, w, b) if y is None else y


# ----- one step: gates_in is the step's rows of linear(x, W_ih, b_ih) --------------------
def rnn_tanh_step(gi, h, p):
    """``tanh(linear(h, W_hh, b_hh) + gi)``."""
    return (_linear(h, p[1], p[3]) + gi).tanh()


def rnn_relu_step(gi, h, p):
    """``relu(linear(h, W_hh, b_hh) + gi)``."""
    return (_linear(h, p[1], p[3]) + gi).relu()


def lstm_step(gi, hc, p):
    """Gates ``i, f, g, o``; ``c' = f c + i g``, ``h' = o tanh(c')`` (times ``W_hr^T``
    with projections). ``hc`` is ``(h, c)``; returns ``(h', c')``."""
    h, c = hc
    i, f, g, o = unsafe_pieces(F.linear(h, p[1], p[3]) + gi, 4, 1)
    cy = f.sigmoid() * c + i.sigmoid() * g.tanh()
    hy = o.sigmoid() * cy.tanh()
    if p[4] is not None:
        hy = hy.matmul(p[4].t())
    return hy, cy


def gru_step(gi, h, p):
    """Gates ``r, z, n``: ``n = tanh(gi_n + r (W_hn h + b_hn))``, ``h' = (h - n) z + n``."""
    i_r, i_z, i_n = unsafe_pieces(gi, 3, 1)
    h_r, h_z, h_n = unsafe_pieces(F.linear(h, p[1], p[3]), 3, 1)
    r = (h_r + i_r).sigmoid()
    z = (h_z + i_z).sigmoid()
    n = (i_n + h_n * r).tanh()
    return (h - n) * z + n


STEPS = {"RNN_TANH": rnn_tanh_step, "RNN_RELU": rnn_relu_step, "LSTM": lstm_step,
         "GRU": gru_step}


def cell(mode, input, hx, w_ih, w_hh, b_ih, b_hh):
    """One step of a cell (``torch.lstm_cell`` and the others) from its input."""
    return STEPS[mode](_linear(input, w_ih, b_ih), hx, (w_ih, w_hh, b_ih, b_hh, None))


# ----- the state of an LSTM is a pair ----------------------------------------------------
def _out(hidden):
    return hidden[0] if isinstance(hidden, tuple) else hidden


def _narrow(hidden, start, stop):
    if isinstance(hidden, tuple):
        return tuple(s.narrow(0, start, stop - start) for s in hidden)
    return hidden.narrow(0, start, stop - start)


def _concat(parts):
    if isinstance(parts[0], tuple):
        return tuple(cat([p[k] for p in parts], 0) for k in range(len(parts[0])))
    return cat(list(parts), 0)


# ----- layers ----------------------------------------------------------------------------
def _padded_layer(step, x, hidden, p, reverse):
    """One direction over a padded (T, B, I) ``x``: ``(stacked outputs, last state)``."""
    steps = F.linear(x, p[0], p[2]).unbind(0)
    if reverse:
        steps = steps[::-1]
    outs = []
    for gi in steps:
        hidden = step(gi, hidden, p)
        outs.append(_out(hidden))
    if reverse:
        outs.reverse()
    return stack(outs, 0), hidden


def _packed_layer(step, data, bs, hidden, p):
    """Forwards over packed rows: a row's state leaves the batch when its sequence ends;
    the last states are joined longest sequence first."""
    gi = F.linear(data, p[0], p[2])
    outs, ended = [], []
    offset, last = 0, bs[0]
    for n in bs:
        rows = gi.narrow(0, offset, n)
        offset += n
        if n < last:
            ended.append(_narrow(hidden, n, last))
            hidden = _narrow(hidden, 0, n)
        last = n
        hidden = step(rows, hidden, p)
        outs.append(_out(hidden))
    ended.append(hidden)
    return cat(outs, 0), _concat(ended[::-1])


def _packed_reverse_layer(step, data, bs, hidden0, p):
    """Backwards over packed rows: a row's state joins from ``hidden0`` when its
    sequence's last step comes up."""
    gi = F.linear(data, p[0], p[2])
    outs = []
    offset, last = data.shape[0], bs[-1]
    hidden = _narrow(hidden0, 0, last)
    for n in reversed(bs):
        if n > last:
            hidden = _concat([hidden, _narrow(hidden0, last, n)])
        rows = gi.narrow(0, offset - n, n)
        offset -= n
        last = n
        hidden = step(rows, hidden, p)
        outs.append(_out(hidden))
    return cat(outs[::-1], 0), hidden


def layers(mode, x, bs, hiddens, params, num_layers, D, dropout):
    """All layers and directions: ``x`` is (T, B, I) when ``bs`` is None, else packed
    rows with batch sizes ``bs``; ``hiddens[k]`` is layer-direction ``k``'s first state
    (a pair for the LSTM) and ``params[k]`` its ``(w_ih, w_hh, b_ih, b_hh, w_hr)``;
    ``dropout`` is applied between layers (a function, or None). Returns the last
    layer's output and the list of last states."""
    step = STEPS[mode]
    fused = rnn_graph.usable(x, *[t for h in hiddens for t in
                                  (h if isinstance(h, tuple) else (h,))],
                             *[t for p in params for t in p])
    finals = []
    for layer in range(num_layers):
        ys = []
        for d in range(D):
            k = layer * D + d
            if fused:
                outs, h = rnn_graph.layer(mode, F.linear(x, params[k][0], params[k][2]), bs,
                                          hiddens[k], params[k], d == 1)
                y = stack(outs, 0) if bs is None else cat(outs, 0)
            elif bs is None:
                y, h = _padded_layer(step, x, hiddens[k], params[k], d == 1)
            elif d == 0:
                y, h = _packed_layer(step, x, bs, hiddens[k], params[k])
            else:
                y, h = _packed_reverse_layer(step, x, bs, hiddens[k], params[k])
            ys.append(y)
            finals.append(h)
        x = ys[0] if D == 1 else cat(ys, ys[0].dim() - 1)
        if dropout is not None and layer < num_layers - 1:
            x = dropout(x)
    return x, finals
