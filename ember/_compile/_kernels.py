"""Array vector-Jacobian products for the plan's backward (see ``_plan``).

``vjp(state, args, ys, gouts, needs) -> grads``: ``state`` is what the op's array
forward left on its op object (a dict), ``args`` the positional arguments forward
received (arrays in place of tensors), ``ys`` its outputs, ``gouts`` one gradient
array (or None) per output, ``needs`` a flag per argument; the result has one
gradient array (or None) per argument, before broadcast reduction (the plan does it).

The ops that dominate small networks (linear layers, cross entropy, ReLU/tanh/sigmoid,
arithmetic, means and sums, views, attention, the LSTM, convolution and pooling) have
kernels here written on arrays, reusing the array helpers of :mod:`ember.ops`. Every
other primitive gets :func:`_generic`: its own ``backward`` run once under ``no_grad``
on Tensors wrapping the arrays (the same first-order formulas eager ember runs).
"""
import numpy as np

from ember import _tensor
from ember.autograd.grad_mode import no_grad
from ember.ops import (
    attention,
    conv,
    elementwise,
    join,
    nn_fused,
    pooling,
    reduction,
    rnn,
    shape,
    unary,
)

_make = _tensor._make

__all__ = ["vjp_for"]


def _generic(cls):
    si, so = cls.save_inputs, cls.save_output

    def vjp(state, args, ys, gouts, needs):
        op = object.__new__(cls)
        if state:
            op.__dict__.update(state)
        op._edges = tuple(1 if n else None for n in needs)
        saved = [(_make(args[i]) if type(args[i]) is np.ndarray else args[i], None)
                 for i in si]
        if so:
            saved.append((ys[0], [0], 0, False, 0))
        op._saved = saved or None
        gs = [_make(np.zeros_like(y) if g is None else g) for g, y in zip(gouts, ys)]
        with no_grad():
            r = op.backward(*gs)
        if type(r) is not tuple:
            r = tuple(r) if type(r) is list else (r,)
        return [None if g is None else g._data for g in r]
    return vjp


# ----- linear layers and losses ------------------------------------------------------------
def _linear_grads(g, x, w, needs):
    flat = x.ndim != 2
    if flat:
        g = g.reshape(-1, g.shape[-1])
    gx = gw = gb = None
    if needs[0]:
        gx = np.matmul(g, w)
        if flat:
            gx = gx.reshape(x.shape)
    if needs[1]:
        gw = np.matmul(g.T, x.reshape(-1, x.shape[-1]) if flat else x)
    if len(needs) > 2 and needs[2]:
        gb = g.sum(0)
    return [gx, gw, gb]


def _linear(state, args, ys, gouts, needs):
    return _linear_grads(gouts[0], args[0], args[1], needs)


def _linear_relu(state, args, ys, gouts, needs):
    g = unary._relu_grad_array(gouts[0], ys[0])
    return _linear_grads(g, args[0], args[1], needs)


def _cross_entropy(state, args, ys, gouts, needs):
    g = gouts[0]
    gx = state["e"] / state["total"][:, None]
    gx[state["rows"], state["safe"]] -= 1
    if state["reduction"] == "mean":
        count = state["count"]
        g = g / count if count else g * 0
    if not state["all_valid"]:
        g = g * state["valid"]
    gx *= g[:, None] if g.ndim else g
    return [gx, None, None, None]


# ----- elementwise ---------------------------------------------------------------------------
def _relu(state, args, ys, gouts, needs):
    return [unary._relu_grad_array(gouts[0], ys[0])]


def _tanh(state, args, ys, gouts, needs):
    y = ys[0]
    d = y * y
    np.subtract(1, d, out=d)
    d *= gouts[0]
    return [d]


def _sigmoid(state, args, ys, gouts, needs):
    y = ys[0]
    d = 1 - y
    d *= y
    d *= gouts[0]
    return [d]


def _add(state, args, ys, gouts, needs):
    g = gouts[0]
    return [g, g]


def _sub(state, args, ys, gouts, needs):
    g = gouts[0]
    return [g, -g if needs[1] else None]


def _mul(state, args, ys, gouts, needs):
    g = gouts[0]
    a, b = args
    return [g * b if needs[0] else None, g * a if needs[1] else None]


def _div(state, args, ys, gouts, needs):
    g = gouts[0]
    a, b = args
    ga = g / b if needs[0] else None
    gb = None
    if needs[1]:
        gb = -g * (a / b / b)  # the eager Div's order, so compiled gradients are bitwise
    return [ga, gb]


def _restore(g, in_shape, axes, keepdim):
    if not keepdim:
        g = np.expand_dims(g, tuple(sorted(a % len(in_shape) for a in axes)))
    return np.broadcast_to(g, in_shape)


def _mean(state, args, ys, gouts, needs):
    in_shape, axes, keepdim, dt = state["meta"]
    g = gouts[0].astype(dt, copy=False) / dt.type(state["n"])
    return [_restore(np.asarray(g, dt), in_shape, axes, keepdim)]


# ----- views ----------------------------------------------------------------------------------
def _reshape_back(state, args, ys, gouts, needs):
    return [gouts[0].reshape(args[0].shape)]


def _permute(state, args, ys, gouts, needs):
    return [gouts[0].transpose(np.argsort(state["dims"]))]


def _transpose(state, args, ys, gouts, needs):
    return [gouts[0].swapaxes(*state["dims"])]


def _unbind(state, args, ys, gouts, needs):
    return [np.stack([np.zeros_like(y) if g is None else g for g, y in zip(gouts, ys)],
                     state["dim"])]


def _is_basic(key):
    key = key if type(key) is tuple else (key,)
    return all(k is None or k is Ellipsis or type(k) in (int, slice) or isinstance(k, int)
               for k in key)


def _getitem(state, args, ys, gouts, needs):
    x, key = args[0], args[1]
    gx = np.zeros(x.shape, x.dtype)
    if _is_basic(key):
        gx[key] = gouts[0]
    else:
        np.add.at(gx, key, gouts[0])
    return [gx]


# ----- attention, recurrent layers, convolution, pooling --------------------------------------
def _sdpa(state, args, ys, gouts, needs):
    q, k, v = args[0], args[1], args[2]
    a, dm, scale = state["a"], state["dmask"], state["scale"]
    g = gouts[0]
    gq = gk = gv = gb = None
    if needs[2]:
        gv = np.matmul((a if dm is None else a * dm).swapaxes(-1, -2), g)
    if needs[0] or needs[1] or needs[3]:
        gs = np.matmul(g, v.swapaxes(-1, -2))
        if dm is not None:
            gs *= dm
        gs -= np.einsum("...ij,...ij->...i", gs, a)[..., None]
        gs *= a
        if needs[0]:
            gq = np.matmul(gs, k)
            gq *= scale
        if needs[1]:
            gk = np.matmul(gs.swapaxes(-1, -2), q)
            gk *= scale
        if needs[3]:
            gb = gs
    return [gq, gk, gv, gb, None, None, None]


def _lstm(state, args, ys, gouts, needs):
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = args[:8]
    gy, ghn, gcn = (np.zeros_like(y) if g is None else g for g, y in zip(gouts, ys))
    grads = rnn._lstm_backward_np(np, gy, ghn, gcn, state["_acts"], x, w_ih, w_hh, w_hr,
                                  state["bs"], state["reverse"], list(needs) + [False] * 2)
    return list(grads)


def _rnn_cell(cell):
    """One step of an RNN layer (``nn.RNNCell``): gradients of (x, h0, -, w_ih, w_hh,
    b_ih, b_hh, -) on arrays, eager ember's formulas without its per-step lists."""
    generic = _generic(cell)

    def vjp(state, args, ys, gouts, needs):
        x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = args[:8]
        bs = state["bs"]
        if len(bs) != 1 or c0 is not None or w_hr is not None or bs[0] != h0.shape[0]:
            return generic(state, args, ys, gouts, needs)
        gy, ghn = gouts
        dh = ghn if gy is None else (gy if ghn is None else ghn + gy)
        h2, hp = state["_acts"][0]
        if cell.cell.relu:
            dpre = unary._relu_grad_array(dh, h2)
        else:
            dpre = h2 * h2
            np.subtract(1, dpre, out=dpre)
            dpre *= dh
        out = [None] * 8
        if needs[0]:
            out[0] = dpre @ w_ih
        if needs[1]:
            out[1] = dpre @ w_hh
        if needs[3]:
            out[3] = dpre.T @ x
        if needs[4]:
            out[4] = dpre.T @ hp
        if needs[5] or needs[6]:
            db = dpre.sum(0)
            out[5] = db if needs[5] else None
            out[6] = (db * 1 if needs[5] else db) if needs[6] else None
        return out
    return vjp


def _conv(state, args, ys, gouts, needs):
    x, w = args[0], args[1]
    g = state["g"]
    gy = gouts[0]
    gx = object.__new__(conv.ConvInput).forward(gy, w, None, g) if needs[0] else None
    gw = object.__new__(conv.ConvWeight).forward(x, gy, g) if needs[1] else None
    gb = gy.sum((0,) + tuple(range(2, 2 + g.nd))) if needs[2] else None
    return [gx, gw, gb, None]


def _maxpool(state, args, ys, gouts, needs):
    return [object.__new__(pooling.PoolScatter).forward(gouts[0], state["arg"], state["g"]),
            None]


_PRIMS = {
    nn_fused._Linear: _linear, nn_fused._LinearMm: _linear, nn_fused._LinearView: _linear,
    nn_fused._LinearUnsafeView: _linear, nn_fused._LinearRelu: _linear_relu,
    nn_fused._CrossEntropy: _cross_entropy,
    unary.Relu: _relu,
    elementwise.Add: _add, elementwise.Sub: _sub, elementwise.Mul: _mul,
    elementwise.Div: _div,
    reduction.Mean: _mean, reduction.MeanDim: _mean,
    shape.View: _reshape_back, shape.Permute: _permute, shape.Transpose: _transpose,
    join.Unbind: _unbind,
    attention.ScaledDotProductAttention: _sdpa, rnn.LSTMLayer: _lstm,
    conv.Conv: _conv, pooling.MaxPool: _maxpool,
    rnn.RNNTanhLayer: _rnn_cell(rnn.RNNTanhLayer), rnn.RNNReluLayer: _rnn_cell(rnn.RNNReluLayer),
}

# the one-input ops ``ember.ops.unary`` declares from a table (classes made there)
_BY_NAME = {"Tanh": _tanh, "Sigmoid": _sigmoid}

# calls recorded above the primitives (by name) that carry a gradient
_FUNCTIONS = {"view": _reshape_back, "reshape": _reshape_back, "flatten": _reshape_back,
              "unflatten": _reshape_back, "view_as": _reshape_back,
              "reshape_as": _reshape_back, "getitem": _getitem,
              "expand": lambda st, a, y, g, n: [g[0]],
              "expand_as": lambda st, a, y, g, n: [g[0], None]}


def vjp_for(node, prim):
    """The vector-Jacobian product of ``node``'s op, or None when there is none."""
    if not prim:
        return _FUNCTIONS.get(node.op)
    cls = node.target
    if any(v.dtype is not None and getattr(v.dtype, "is_complex", False) for v in node.inputs):
        return _generic(cls)  # the conjugates of complex gradients: the op's own formulas
    f = _PRIMS.get(cls)
    if f is None:
        f = _PRIMS[cls] = _BY_NAME.get(cls._op_name) or _generic(cls)
    return f
