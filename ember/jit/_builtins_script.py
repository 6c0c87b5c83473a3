"""Builtins that ``jit.script``'s templates call and jit-load's table lacks (additive rows
of :data:`ember.jit._builtins.TABLE`): the single-step RNN cells."""
from ember.jit._builtins import TABLE


def _F():
    import ember.nn.functional as F
    return F


def _rnn_cell(act):
    def cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
        F = _F()
        return act(F.linear(input, w_ih, b_ih) + F.linear(hx, w_hh, b_hh))
    return cell


def _lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    F = _F()
    h, c = hx
    gates = F.linear(input, w_ih, b_ih) + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, 1)
    c1 = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c1.tanh(), c1


def _gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    F = _F()
    gi = F.linear(input, w_ih, b_ih).chunk(3, 1)
    gh = F.linear(hx, w_hh, b_hh).chunk(3, 1)
    r = (gi[0] + gh[0]).sigmoid()
    z = (gi[1] + gh[1]).sigmoid()
    n = (gi[2] + r * gh[2]).tanh()
    return (1 - z) * n + z * hx


for _name, _fn in (("torch.rnn_tanh_cell", _rnn_cell(lambda t: t.tanh())),
                   ("torch.rnn_relu_cell", _rnn_cell(lambda t: t.relu())),
                   ("torch.lstm_cell", _lstm_cell), ("torch.gru_cell", _gru_cell)):
    TABLE.setdefault(_name, _fn)


def _set_item(container, key, value):
    container[key] = value
    return container


def _index(x, indices):
    if len(indices) != 1 or indices[0] is None:
        raise NotImplementedError("aten::index with other than one tensor index at dim 0 "
                                  "is not supported by ember's TorchScript interpreter")
    return x[indices[0]]


for _name, _fn in (("torch._set_item", _set_item), ("torch.clear", lambda c: c.clear()),
                   ("torch.numpy_T", lambda x: x.T), ("torch.index", _index)):
    TABLE.setdefault(_name, _fn)
