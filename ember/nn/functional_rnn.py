"""ATen's multi-layer recurrent functions (``torch.lstm``, ``torch.gru``,
``torch.rnn_tanh``, ``torch.rnn_relu``): what ``nn.LSTM``/``GRU``/``RNN`` call.

Each has ATen's two overloads: ``(input, hx, params, has_biases, num_layers, dropout,
train, bidirectional, batch_first)`` over a padded batch, and ``(data, batch_sizes, hx,
params, has_biases, num_layers, dropout, train, bidirectional)`` over a packed one.
``params`` is the flat weight list (per layer and direction ``w_ih, w_hh[, b_ih,
b_hh][, w_hr]``); ``hx`` is ``[h_0, c_0]`` for the LSTM, ``h_0`` otherwise. ember also
takes ``hx=None`` for zeros of the right batch size (the packed form's default state).

Eager calls that record a graph record PyTorch's CPU graph step by step
(``ember.nn._rnn_unrolled``; for float32 and float64 on the CPU one fused kernel per
layer and direction under those nodes, ``ember.ops.rnn_graph``); without a graph each
layer runs as one fused primitive (``ember.ops.rnn``). A graph capture records each call as one
node (as PyTorch's tracer records ``aten::lstm``): the layers loop over the sequence's
time steps in Python, so recording their inside would keep the example's sequence
length and batch size.
"""
from ember import _core as ember_core
from ember import _tensor
from ember.autograd.grad_mode import is_grad_enabled as grad_enabled
from ember.nn import _rnn_unrolled
from ember.ops import join as ember_join
from ember.ops.rnn import LAYERS, MkldnnLSTMLayer

__all__ = ["lstm", "gru", "rnn_tanh", "rnn_relu"]

_mode_active, _mode_recorder = _tensor._mode_active, _tensor._mode_recorder


def _tensors(args):
    out = []
    for a in args:
        if isinstance(a, _tensor.Tensor):
            out.append(a)
        elif isinstance(a, (tuple, list)):
            out.extend(x for x in a if isinstance(x, _tensor.Tensor))
    return out


def split_args(args, name):
    """``(x, batch_sizes or None, hx, params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first)`` from either overload."""
    if len(args) != 9:
        raise TypeError(f"{name}() takes 9 positional arguments ({len(args)} given)")
    if isinstance(args[3], (list, tuple)):
        data, batch_sizes, hx, params, has_biases, num_layers, p, train, bidir = args
        return data, batch_sizes, hx, params, has_biases, num_layers, p, train, bidir, False
    x, hx, params, has_biases, num_layers, p, train, bidir, batch_first = args
    return x, None, hx, params, has_biases, num_layers, p, train, bidir, batch_first


def per_layer(mode, n_params, has_biases, num_layers, D, name):
    """How many of ``params`` each layer and direction holds."""
    per = 4 if has_biases else 2
    if mode == "LSTM" and n_params == num_layers * D * (per + 1):
        per += 1  # LSTM with projections: w_hr last
    if n_params != num_layers * D * per:
        raise RuntimeError(f"{name}: got {n_params} parameters for {num_layers} layer(s), "
                           f"{D} direction(s)")
    return per


_GATES = {"LSTM": 4, "GRU": 3}


def _check_gate_rows(mode, params, per, has_biases, name):
    """Every layer's input and hidden weights (and biases) with one row per gate unit,
    ``gates * hidden_size`` of them: PyTorch's kernels read that many rows whatever the
    tensor holds (a weight with a row too many gives the first rows' result, silently);
    ember's kernels would read them otherwise, so such a weight is refused."""
    g = _GATES.get(mode, 1)
    for k in range(0, len(params), per):
        w_ih, w_hh = params[k], params[k + 1]
        rows = w_hh.shape[0] if w_hh.dim() == 2 else -1
        shapes = [w_ih.shape, w_hh.shape] + ([params[k + 2].shape, params[k + 3].shape]
                                             if has_biases else [])
        if rows % g or w_ih.dim() != 2 or w_ih.shape[0] != rows or \
                (has_biases and any(tuple(t) != (rows,) for t in shapes[2:])):
            raise RuntimeError(
                f"{name}: the weights of layer {k // per} need {g} x hidden_size rows each "
                f"(weight_hh has {rows}); got shapes {[list(t) for t in shapes]}")


def _layers(mode, args, name):
    if _mode_active[0]:
        from ember.autograd import _modes
        from ember.profiler._events import Recorder
        rec = _modes.find(Recorder)
        if rec is not None:  # one ``aten::lstm`` row, as PyTorch's profiler shows it
            ev = rec.begin("aten::" + name, [])
            try:
                return _run_layers(mode, args, name)
            finally:
                rec.end(ev)
    return _run_layers(mode, args, name)


def _run_layers(mode, args, name):
    import ember
    from ember.nn import functional as F
    (x, batch_sizes, hx, params, has_biases, num_layers, p, train, bidir,
     batch_first) = split_args(args, name)
    lstm = mode == "LSTM"
    D = 2 if bidir else 1
    per = per_layer(mode, len(params), has_biases, num_layers, D, name)
    if batch_sizes is not None:
        bs = tuple(int(b) for b in batch_sizes.tolist())
        batch = bs[0] if bs else 0
    else:
        if x.dim() != 3:
            raise RuntimeError(f"{name}: input must have 3 dimensions, got {x.dim()}")
        if batch_first:
            x = x.transpose(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        bs = (batch,) * steps
        x3 = x
        if _onednn_path(mode, x, batch_sizes, per):
            x = x.contiguous()   # PyTorch's kernel reads (T, B, I) rows in order
        else:
            x = x.reshape(steps * batch, x.shape[2])
    if hx is None:
        out_size = params[per - 1].shape[0] if per in (3, 5) else params[1].shape[1]
        z = ember.zeros(num_layers * D, batch, out_size, dtype=x.dtype, device=x.device)
        hx = [z, ember.zeros(num_layers * D, batch, params[1].shape[0] // 4, dtype=x.dtype,
                             device=x.device)] if lstm else z
    _check_gate_rows(mode, params, per, has_biases, name)
    h0, c0 = (hx[0], hx[1]) if lstm else (hx, None)
    for s in (h0, c0):
        if s is not None and (s.dim() != 3 or s.shape[0] != num_layers * D
                              or s.shape[1] != batch):
            raise RuntimeError(f"{name}: expected hidden state of size ({num_layers * D}, "
                               f"{batch}, *), got {list(s.shape)}")
    if bs and batch and x.dim() == 2 and _records_graph(x, h0, c0, params):
        return _unrolled(mode, x if batch_sizes is not None else x3, batch_sizes is not None,
                         bs, h0, c0, params, per, has_biases, num_layers, D, p, train,
                         batch_first)
    if x.dim() == 3:   # PyTorch's oneDNN path selects each layer's state
        hs = [h0.select(0, k) for k in range(num_layers * D)]
        cs = [c0.select(0, k) for k in range(num_layers * D)]
    else:
        hs, cs = h0.unbind(0), (c0.unbind(0) if lstm else None)
    hn, cn = [], []
    for layer in range(num_layers):
        ys = []
        last = layer == num_layers - 1
        for d in range(D):
            k = layer * D + d
            w = list(params[k * per:(k + 1) * per])
            b_ih, b_hh = (w[2], w[3]) if has_biases else (None, None)
            w_hr = w[-1] if per in (3, 5) else None
            if x.dim() == 3:   # PyTorch's oneDNN layer: (T, B, *) in and out, one node
                y, h, c = MkldnnLSTMLayer.apply(x, w[0], w[1], b_ih, b_hh, hs[k], cs[k],
                                                batch_sizes=bs, reverse=d == 1)
                out = (y, h, c)
            else:
                out = LAYERS[mode].apply(x, hs[k], cs[k] if lstm else None, w[0], w[1], b_ih,
                                         b_hh, w_hr, batch_sizes=bs, reverse=d == 1)
                y = out[0]
                if last and bs:   # PyTorch's output: the steps stacked (joined when packed)
                    y = ember.cat(y.split(bs)) if batch_sizes is not None else \
                        ember.stack(y.view(len(bs), batch, y.shape[-1]).unbind(0))
            ys.append(y)
            hn.append(out[1])
            if lstm:
                cn.append(out[2])
        x = ys[0] if D == 1 else ember.cat(ys, -1)
        if p and train and layer < num_layers - 1:
            x = F.dropout(x, p, True)
    if batch_sizes is None and x.dim() == 2:   # no time steps
        x = x.reshape(0, batch, x.shape[-1])
    if batch_first:   # PyTorch turns the LSTM's output back by a copy, the others' in place
        x = x.transpose(0, 1) if lstm else x.transpose_(0, 1)
    if lstm:
        return x, ember.stack(hn), ember.stack(cn)
    return x, ember.stack(hn)


def _records_graph(x, h0, c0, params):
    """Whether this call records a graph: then it runs step by step in ember ops
    (``ember.nn._rnn_unrolled``), recording PyTorch's nodes; otherwise each layer runs
    as one fused primitive. A graph capture or transform (an active mode) always takes
    the fused layers, which carry their rules."""
    if _mode_active[0] or not grad_enabled():
        return False
    return any(t is not None and t.requires_grad for t in (x, h0, c0, *params))


def _unrolled(mode, x, packed, bs, h0, c0, params, per, has_biases, num_layers, D, p, train,
              batch_first):
    """The call step by step (``ember.nn._rnn_unrolled``): the states split per layer
    and direction with ``unbind`` and the last ones stacked, as PyTorch's CPU path does."""
    from ember.nn import functional as F
    lstm = mode == "LSTM"
    weights = []
    for k in range(num_layers * D):
        w = list(params[k * per:(k + 1) * per])
        b_ih, b_hh = (w[2], w[3]) if has_biases else (None, None)
        weights.append((w[0], w[1], b_ih, b_hh, w[-1] if per in (3, 5) else None))
    if lstm:
        hiddens = list(zip(h0.unbind(0), c0.unbind(0)))
    else:
        hiddens = list(h0.unbind(0))
    drop = (lambda t: F.dropout(t, p, True)) if p and train else None
    y, finals = _rnn_unrolled.layers(mode, x, bs if packed else None, hiddens, weights,
                                     num_layers, D, drop)
    if batch_first:   # PyTorch turns the LSTM's output back by a copy, the others' in place
        y = y.transpose(0, 1) if lstm else y.transpose_(0, 1)
    if lstm:
        return y, ember_join.stack([h for h, _ in finals]), \
            ember_join.stack([c for _, c in finals])
    return y, ember_join.stack(finals)


def _onednn_path(mode, x, batch_sizes, per):
    """Whether PyTorch runs this call through its oneDNN LSTM kernel (its CPU build's
    choice, from the inputs alone: a float32 LSTM without projections over a padded
    batch, recording a graph), whose node is one layer over (T, B, *)."""
    return (mode == "LSTM" and batch_sizes is None and x.dtype == ember_core.float32
            and per in (2, 4) and x.numel() != 0 and grad_enabled() and not _mode_active[0])


def lstm(*args):
    """``torch.lstm``: the multi-layer LSTM over flat ``params``; returns ``(output,
    h_n, c_n)`` (see the module docstring for the two argument layouts)."""
    if _mode_active[0] and (m := _mode_recorder(_tensors(args))) is not None and \
            "lstm" not in m.unrolled:
        return m.composite("lstm", lstm, args, {})
    return _layers("LSTM", args, "lstm")


def gru(*args):
    """``torch.gru``: returns ``(output, h_n)`` (arguments as :func:`lstm`)."""
    if _mode_active[0] and (m := _mode_recorder(_tensors(args))) is not None and \
            "gru" not in m.unrolled:
        return m.composite("gru", gru, args, {})
    return _layers("GRU", args, "gru")


def rnn_tanh(*args):
    """``torch.rnn_tanh``: returns ``(output, h_n)`` (arguments as :func:`lstm`)."""
    if _mode_active[0] and (m := _mode_recorder(_tensors(args))) is not None and \
            "rnn_tanh" not in m.unrolled:
        return m.composite("rnn_tanh", rnn_tanh, args, {})
    return _layers("RNN_TANH", args, "rnn_tanh")


def rnn_relu(*args):
    """``torch.rnn_relu``: returns ``(output, h_n)`` (arguments as :func:`lstm`)."""
    if _mode_active[0] and (m := _mode_recorder(_tensors(args))) is not None and \
            "rnn_relu" not in m.unrolled:
        return m.composite("rnn_relu", rnn_relu, args, {})
    return _layers("RNN_RELU", args, "rnn_relu")


FUNCTIONS = {"LSTM": lstm, "GRU": gru, "RNN_TANH": rnn_tanh, "RNN_RELU": rnn_relu}
