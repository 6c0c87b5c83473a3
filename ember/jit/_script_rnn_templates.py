"""TorchScript templates for ember's recurrent modules (RNN/LSTM/GRU and their cells),
written with the builtins PyTorch's own scripted modules call (``torch.lstm``,
``torch.gru``, ``torch.rnn_tanh_cell``...), so the saved code runs in libtorch."""
from ember.jit import _types as T

__all__ = ["RNN_TEMPLATES"]


def _methods(text):
    from ember.jit._script_templates import TemplateMethod
    m = TemplateMethod(text)
    return {m.name: m}


def _unsupported(what):
    from ember.jit._frontend import NotSupportedError
    raise NotSupportedError(f"jit.script of {what} is not supported yet")


def _cell(m):
    kind = type(m).__name__
    if kind == "RNNCell":
        op = "rnn_tanh_cell" if m.nonlinearity == "tanh" else "rnn_relu_cell"
    else:
        op = {"LSTMCell": "lstm_cell", "GRUCell": "gru_cell"}[kind]
    b = "self.bias_ih, self.bias_hh" if m.bias else "None, None"
    zeros = (f"torch.zeros([torch.size(input0, 0), {m.hidden_size}], "
             "dtype=ops.prim.dtype(input0), device=ops.prim.device(input0))")
    if kind != "LSTMCell":
        return _methods(f"""
def forward(self, input: Tensor, hx: Optional[Tensor]=None) -> Tensor:
  is_batched = torch.eq(torch.dim(input), 2)
  if is_batched:
    input0 = input
  else:
    input0 = torch.unsqueeze(input, 0)
  if torch.__is__(hx, None):
    hx0 = {zeros}
  else:
    hx1 = unchecked_cast(Tensor, hx)
    if is_batched:
      hx0 = hx1
    else:
      hx0 = torch.unsqueeze(hx1, 0)
  ret = torch.{op}(input0, hx0, self.weight_ih, self.weight_hh, {b})
  if is_batched:
    ret0 = ret
  else:
    ret0 = torch.squeeze(ret, 0)
  return ret0
""")
    return _methods(f"""
def forward(self, input: Tensor, hx: Optional[Tuple[Tensor, Tensor]]=None) -> Tuple[Tensor, Tensor]:
  is_batched = torch.eq(torch.dim(input), 2)
  if is_batched:
    input0 = input
  else:
    input0 = torch.unsqueeze(input, 0)
  if torch.__is__(hx, None):
    z = {zeros}
    h0 = z
    c0 = z
  else:
    hx1 = unchecked_cast(Tuple[Tensor, Tensor], hx)
    if is_batched:
      h0 = hx1[0]
      c0 = hx1[1]
    else:
      h0 = torch.unsqueeze(hx1[0], 0)
      c0 = torch.unsqueeze(hx1[1], 0)
  ret = torch.lstm_cell(input0, [h0, c0], self.weight_ih, self.weight_hh, {b})
  if is_batched:
    out = ret
  else:
    out = (torch.squeeze(ret[0], 0), torch.squeeze(ret[1], 0))
  return out
""")


def _rnn(m):
    mode = m.mode
    if getattr(m, "proj_size", 0):
        _unsupported("LSTM with proj_size")
    if mode == "LSTM":
        op = "lstm"
    elif mode == "GRU":
        op = "gru"
    else:
        op = "rnn_tanh" if mode == "RNN_TANH" else "rnn_relu"
    d = 2 if m.bidirectional else 1
    weights = "[" + ", ".join(f"self.{n}" for n in m._flat_weights_names) + "]"
    bdim = 0 if m.batch_first else 1
    zeros = (f"torch.zeros([{m.num_layers * d}, torch.size(input0, {bdim}), "
             f"{m.hidden_size}], dtype=ops.prim.dtype(input0), "
             "device=ops.prim.device(input0))")
    args = (f"{weights}, {m.bias}, {m.num_layers}, {T.literal(float(m.dropout))}, "
            f"self.training, {m.bidirectional}, {m.batch_first}")
    lstm_ret, pair = "Tuple[Tensor, Tuple[Tensor, Tensor]]", "Tuple[Tensor, Tensor]"
    head = f"""
  is_batched = torch.eq(torch.dim(input), 3)
  if is_batched:
    input0 = input
  else:
    input0 = torch.unsqueeze(input, {bdim})"""
    if mode == "LSTM":
        return _methods(f"""
def forward(self, input: Tensor, hx: Optional[Tuple[Tensor, Tensor]]=None) -> {lstm_ret}:{head}
  if torch.__is__(hx, None):
    z = {zeros}
    h0 = z
    c0 = z
  else:
    hx1 = unchecked_cast(Tuple[Tensor, Tensor], hx)
    if is_batched:
      h0 = hx1[0]
      c0 = hx1[1]
    else:
      h0 = torch.unsqueeze(hx1[0], 1)
      c0 = torch.unsqueeze(hx1[1], 1)
  output, hn, cn = torch.lstm(input0, [h0, c0], {args})
  if is_batched:
    out = (output, (hn, cn))
  else:
    out = (torch.squeeze(output, {bdim}), (torch.squeeze(hn, 1), torch.squeeze(cn, 1)))
  return out
""")
    return _methods(f"""
def forward(self, input: Tensor, hx: Optional[Tensor]=None) -> {pair}:{head}
  if torch.__is__(hx, None):
    h0 = {zeros}
  else:
    hx1 = unchecked_cast(Tensor, hx)
    if is_batched:
      h0 = hx1
    else:
      h0 = torch.unsqueeze(hx1, 1)
  output, hn = torch.{op}(input0, h0, {args})
  if is_batched:
    out = (output, hn)
  else:
    out = (torch.squeeze(output, {bdim}), torch.squeeze(hn, 1))
  return out
""")


RNN_TEMPLATES = {"RNNCell": _cell, "LSTMCell": _cell, "GRUCell": _cell, "RNN": _rnn,
                 "LSTM": _rnn, "GRU": _rnn}
