"""Recurrent layers: RNN, LSTM and GRU over sequences, and their one-step cells.

Parameters, shapes, gate order and initialisation are PyTorch's. Recording a graph,
the layers record PyTorch's CPU graph step by step (``ember.nn._rnn_unrolled``; on the
CPU in float32 and float64 its nodes stand over one fused kernel per layer and
direction, ``ember.ops.rnn_graph``); otherwise (and for a float32 LSTM over a padded
batch, PyTorch's oneDNN node) each direction of each layer runs as one fused node
(``ember.ops.rnn``): the input projection of all time steps is one matmul, and each
step one matmul plus the gate math (NumPy, or numba kernels for float32 LSTMs and
GRUs).
"""
import math
import numbers
import warnings

from ember import _core as ember
from ember._tensor import Tensor, _mode_active
from ember.nn import _aten_ops as _cells
from ember.nn import functional_rnn as _functional_rnn
from ember.nn import init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.nn.utils.rnn import PackedSequence
from ember.ops import cell_graph as _cell_graph

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


class RNNBase(Module):
    """What RNN, LSTM and GRU share: parameters, checks, and the layer loop.

    ``mode`` is ``'RNN_TANH'``, ``'RNN_RELU'``, ``'LSTM'`` or ``'GRU'``. Parameters of
    layer ``k`` are ``weight_ih_l{k}`` (G*H, input), ``weight_hh_l{k}`` (G*H, H_out),
    ``bias_ih_l{k}``, ``bias_hh_l{k}`` (G*H) and, for an LSTM with ``proj_size``,
    ``weight_hr_l{k}`` (proj_size, H); the backward direction adds ``_reverse``. All
    start from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
    """

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: "
                            f"{type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: "
                            f"{type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        kw = {"device": device, "dtype": dtype}
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input_size = input_size if layer == 0 else real_hidden_size * num_directions
                suffix = "_reverse" if direction == 1 else ""
                params = [("weight_ih", (gate_size, layer_input_size)),
                          ("weight_hh", (gate_size, real_hidden_size))]
                if bias:
                    params += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    params.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for base, shape in params:
                    name = f"{base}_l{layer}{suffix}"
                    setattr(self, name, Parameter(ember.empty(shape, **kw)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n) if hasattr(self, n) else None
                for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """The parameters of each layer and direction, as lists."""
        return [[getattr(self, w) for w in ws] for ws in self._all_weights]

    def flatten_parameters(self):
        """A no-op (PyTorch packs the weights for cuDNN here)."""

    def reset_parameters(self):
        """Re-draw every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ----- checks (PyTorch's messages) -------------------------------------------------
    def check_input(self, input, batch_sizes):
        w = getattr(self, self._flat_weights_names[0])
        if input.dtype != w.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                             f"model: model.to({input.dtype})")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got "
                               f"{input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.size(-1)}")

    def get_expected_hidden_size(self, input, batch_sizes):
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, size)

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(tuple(expected_hidden_size), list(hx.shape)))

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return _select_batch(hx, permutation)

    # ----- the computation ---------------------------------------------------------------
    def _layer_weights(self):
        """(w_ih, w_hh, b_ih, b_hh, w_hr) for each layer and direction."""
        out = []
        for names in self._all_weights:
            ws = [getattr(self, n) for n in names]
            w_ih, w_hh = ws[0], ws[1]
            b_ih, b_hh = (ws[2], ws[3]) if self.bias else (None, None)
            w_hr = ws[-1] if self.proj_size > 0 else None
            out.append((w_ih, w_hh, b_ih, b_hh, w_hr))
        return out

    def _zeros(self, batch, size, input):
        return ember.zeros(self.num_layers * (2 if self.bidirectional else 1), batch, size,
                           dtype=input.dtype, device=input.device)

    def _flat_call(self, *args):
        """The layer's one functional call (``torch.lstm``'s layout): a graph capture
        records it as one node, whatever the sequence length and batch size."""
        return _functional_rnn.FUNCTIONS[self.mode](*args)

    def _forward(self, input, hx, name):
        lstm = self.mode == "LSTM"
        real = self.proj_size if self.proj_size > 0 else self.hidden_size
        flat = (self._flat_weights, self.bias, self.num_layers, self.dropout, self.training,
                self.bidirectional)
        if isinstance(input, PackedSequence):
            data, batch_sizes, sorted_indices, unsorted_indices = input
            if hx is not None:
                hx = self.permute_hidden(hx, sorted_indices)
                self.check_forward_args(data, hx, batch_sizes)
            else:
                self.check_input(data, batch_sizes)
            if hx is not None:
                _check_state_dtypes(hx if lstm else (hx,), data.dtype)
            # hx None: zeros of the largest batch, made inside the recorded call
            out = self._flat_call(data, batch_sizes, list(hx) if lstm and hx is not None
                                  else hx, *flat)
            hidden = (out[1], out[2]) if lstm else out[1]
            return (PackedSequence(out[0], batch_sizes, sorted_indices, unsorted_indices),
                    self.permute_hidden(hidden, unsorted_indices))
        if input.dim() not in (2, 3):
            tensor = " tensor" if self.mode.startswith("RNN") else ""
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D"
                             f"{tensor} instead")
        is_batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not is_batched:
            input = input.unsqueeze(batch_dim)
        if hx is not None and not lstm:
            if not is_batched and hx.dim() != 2:
                raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but "
                                   f"got {hx.dim()}-D tensor")
            if is_batched and hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                   f"{hx.dim()}-D tensor")
            if not is_batched:
                hx = hx.unsqueeze(1)
        elif hx is not None:
            want = 3 if is_batched else 2
            if hx[0].dim() != want or hx[1].dim() != want:
                kind = "batched 3-D" if is_batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D "
                                   f"but got ({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            if not is_batched:
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        batch = input.size(0) if self.batch_first else input.size(1)
        if hx is None:
            # sized by the input's batch (a traced size), as PyTorch's module does
            hx = self._zeros(batch, real, input)
            if lstm:
                hx = (hx, self._zeros(batch, self.hidden_size, input))
        self.check_forward_args(input, hx, None)
        steps = input.size(1) if self.batch_first else input.size(0)
        if steps == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        _check_state_dtypes(hx if lstm else (hx,), input.dtype)
        out = self._flat_call(input, list(hx) if lstm else hx, *flat, self.batch_first)
        output = out[0]
        hidden = (out[1], out[2]) if lstm else out[1]
        if not is_batched:
            output = output.squeeze(batch_dim)
            hidden = (out[1].squeeze(1), out[2].squeeze(1)) if lstm else out[1].squeeze(1)
        return output, hidden


def _select_batch(hx, permutation):
    # PyTorch's module reorders the state's batch with index_select, and so its node (a
    # graph capture records the permutation as an input of that node)
    return hx.index_select(1, permutation)


class RNN(RNNBase):
    """A multi-layer Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``
    (``nonlinearity='relu'`` for ReLU).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False)``. Input (L, N, H_in) (or
    (N, L, H_in) with ``batch_first``, or unbatched (L, H_in), or a
    :class:`~ember.nn.utils.rnn.PackedSequence`) and optional ``h_0`` (D * num_layers,
    N, H_out); returns ``(output, h_n)``.

    Example::

        >>> rnn = ember.nn.RNN(10, 20, 2)
        >>> output, hn = rnn(ember.randn(5, 3, 10), ember.randn(2, 3, 20))
        >>> output.shape, hn.shape
        (ember.Size([5, 3, 20]), ember.Size([2, 3, 20]))
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' "
                             "or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx, "RNN")


class LSTM(RNNBase):
    """A multi-layer long short-term memory RNN.

    Gates (in the order of the rows of ``weight_ih``/``weight_hh``): ``i = sigmoid``,
    ``f = sigmoid``, ``g = tanh``, ``o = sigmoid`` of ``x W_ih^T + b_ih + h W_hh^T +
    b_hh``; ``c' = f * c + i * g``, ``h' = o * tanh(c')``, then ``h' W_hr^T`` when
    ``proj_size > 0``. Takes ``(input, (h_0, c_0))`` and returns
    ``(output, (h_n, c_n))``; shapes as :class:`RNN`, ``c`` of size ``hidden_size``.

    Example::

        >>> lstm = ember.nn.LSTM(10, 20, 2)
        >>> output, (hn, cn) = lstm(ember.randn(5, 3, 10))
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return _select_batch(hx[0], permutation), _select_batch(hx[1], permutation)

    def forward(self, input, hx=None):
        return self._forward(input, hx, "LSTM")


class GRU(RNNBase):
    """A multi-layer gated recurrent unit RNN.

    Gates (rows of the weights in this order): ``r = sigmoid(W_ir x + b_ir + W_hr h +
    b_hr)``, ``z`` likewise, ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``;
    ``h' = (1 - z) * n + z * h``. Arguments, inputs and outputs as :class:`RNN`.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx, "GRU")


# ----- cells --------------------------------------------------------------------------
class RNNCellBase(Module):
    """What the cells share: ``weight_ih`` (chunks*H, input), ``weight_hh`` (chunks*H, H),
    ``bias_ih``/``bias_hh`` (chunks*H), all from U(-1/sqrt(H), 1/sqrt(H))."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        kw = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(ember.empty((num_chunks * hidden_size, input_size), **kw))
        self.weight_hh = Parameter(ember.empty((num_chunks * hidden_size, hidden_size), **kw))
        if bias:
            self.bias_ih = Parameter(ember.empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(ember.empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = self.__dict__.get("nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def reset_parameters(self):
        """Re-draw every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, name, input, hx, n_states):
        """Checks, batching and default states: (input, states, is_batched)."""
        if n_states == 1 and type(input) is Tensor and type(hx) is Tensor and \
                not _mode_active[0]:
            # the loop's common call, a batch and its state of the right sizes and dtype,
            # checked in one go (a capture's symbolic sizes take the checks below)
            x, h = input._data, hx._data
            xs, hs = x.shape, h.shape
            if len(xs) == 2 and len(hs) == 2 and xs[1] == self.input_size and \
                    hs[0] == xs[0] and hs[1] == self.hidden_size and \
                    x.dtype == h.dtype == self.weight_ih._data.dtype:
                return input, [hx], True
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             "instead")
        if hx is not None:
            states = list(hx) if n_states == 2 else [hx]
            for i, value in enumerate(states):
                if value.dim() not in (1, 2):
                    what = f"hx[{i}]" if n_states == 2 else "hidden"
                    raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got "
                                     f"{value.dim()}D instead")
            if n_states == 2 and len(states) != 2:
                raise RuntimeError("lstm_cell expects two hidden states")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = ember.zeros(input.size(0), self.hidden_size, dtype=input.dtype,
                                device=input.device)
            states = [zeros] * n_states
        elif not is_batched:
            states = [s.unsqueeze(0) for s in states]
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} "
                               f"expected {self.input_size}")
        for i, s in enumerate(states):
            if input.size(0) != s.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} "
                                   f"batch size {s.size(0)}")
            if s.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {s.size(1)}, "
                                   f"expected {self.hidden_size}")
        if input.dtype != self.weight_ih.dtype:
            raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                               f"{_short(input.dtype)} and {_short(self.weight_ih.dtype)}")
        _check_state_dtypes(states, input.dtype)
        return input, states, is_batched

    def _cell(self, kernel, input, *state):
        state = state[0] if len(state) == 1 else state
        if type(self) in _PLAIN_CELLS:
            # the parameters straight from their dict (a parametrized cell's class is
            # another: its properties compute them), else from Module.__getattr__
            p = self._parameters
            w_ih, w_hh = p.get("weight_ih"), p.get("weight_hh")
            b_ih, b_hh = p.get("bias_ih"), p.get("bias_hh")
            if w_ih is not None and w_hh is not None and b_ih is not None and \
                    b_hh is not None:
                return kernel(input, state, w_ih, w_hh, b_ih, b_hh)
        return kernel(input, state, self.weight_ih, self.weight_hh, self.bias_ih,
                      self.bias_hh)


def _check_state_dtypes(states, dtype):
    for s in states:
        if s is not None and s.dtype != dtype:
            raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                               f"{_short(s.dtype)} and {_short(dtype)}")


def _short(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half"}.get(dtype.name,
                                                                            dtype.name)


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``
    (``nonlinearity='relu'`` for ReLU). Input (N, input_size) or (input_size,), ``hx``
    of the matching (N, hidden_size) or (hidden_size,), zeros when omitted.

    Example::

        >>> cell = ember.nn.RNNCell(10, 20)
        >>> h = cell(ember.randn(3, 10))
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device,
                         dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, (h,), is_batched = self._prepare("RNNCell", input, hx, 1)
        if is_batched and type(self) is RNNCell and not _mode_active[0]:
            # a Python loop's step: its six nodes made in one call where that is what
            # the general path below records (``ember.ops.cell_graph``)
            p = self._parameters
            nonlinearity = self.nonlinearity
            if nonlinearity == "tanh" or nonlinearity == "relu":
                w_ih, w_hh = p.get("weight_ih"), p.get("weight_hh")
                if w_ih is not None and w_hh is not None:
                    ret = _cell_graph.elman_step(input, h, w_ih, w_hh, p.get("bias_ih"),
                                                 p.get("bias_hh"), nonlinearity == "relu")
                    if ret is not None:
                        return ret
        if self.nonlinearity == "tanh":
            kernel = _cells.rnn_tanh_cell
        elif self.nonlinearity == "relu":
            kernel = _cells.rnn_relu_cell
        else:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        ret = self._cell(kernel, input, h)
        return ret if is_batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: returns ``(h', c')`` (gates i, f, g, o as in :class:`LSTM`).
    ``hx`` is ``(h, c)``, zeros when omitted."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        input, (h, c), is_batched = self._prepare("LSTMCell", input, hx, 2)
        h2, c2 = self._cell(_cells.lstm_cell, input, h, c)
        if not is_batched:
            return h2.squeeze(0), c2.squeeze(0)
        return h2, c2


class GRUCell(RNNCellBase):
    """One GRU step (gates r, z, n as in :class:`GRU`); returns ``h'``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        input, (h,), is_batched = self._prepare("GRUCell", input, hx, 1)
        ret = self._cell(_cells.gru_cell, input, h)
        return ret if is_batched else ret.squeeze(0)


_PLAIN_CELLS = (RNNCell, LSTMCell, GRUCell)
