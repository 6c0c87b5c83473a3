"""The short recording paths of ``linear`` and the RNN cells against the generic ones and
torch 2.13: the same nodes, edges, saved inputs, views and version counters as
``WeightT.apply`` + ``Addmm.apply`` leave; the same values, gradients, node names and
errors as torch; the generic path taken whenever something watches the graph."""
import numpy as np
import pytest
import torch

import ember
from ember.ops import matmul_graph as mg

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 3)).astype(np.float32)
W = RNG.standard_normal((4, 3)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)
WH = RNG.standard_normal((4, 4)).astype(np.float32)


def _leaves(m, x_grad=True):
    return (m.tensor(X, requires_grad=x_grad), m.tensor(W, requires_grad=True),
            m.tensor(B, requires_grad=True))


def _edge_kinds(edges):
    return [None if e is None else ("leaf", id(e)) if not isinstance(e, tuple) else
            (type(e[0]).__name__, e[1]) for e in edges]


@pytest.mark.parametrize("x_grad", [True, False])
def test_short_path_leaves_the_generic_nodes(x_grad):
    x, w, b = _leaves(ember, x_grad)
    short = mg._addmm_linear(x, w, b)
    wt = mg.WeightT.apply(w, 0, 1)
    generic = mg.Addmm.apply(b, x, wt)
    np.testing.assert_array_equal(short._data, generic._data)
    for a, g in ((short.grad_fn, generic.grad_fn),
                 (short.grad_fn._edges[2][0], generic.grad_fn._edges[2][0])):
        assert type(a) is type(g)
        assert a.__dict__.keys() == g.__dict__.keys()
        assert _edge_kinds(a._edges) == _edge_kinds(g._edges)
        assert a._n_in == g._n_in
        assert a.next_functions.__len__() == g.next_functions.__len__()
    assert short.grad_fn.bshape == generic.grad_fn.bshape
    assert short.grad_fn._edges[2][0].dims == wt.grad_fn.dims
    (sx, vx), (swt, vwt) = short.grad_fn._saved
    (gx, gvx), (gwt, gvwt) = generic.grad_fn._saved
    assert sx is x and gx is x and vx == gvx
    assert vwt == gvwt
    if x_grad:
        assert swt._base is w and swt._vc is w._vc
        np.testing.assert_array_equal(swt._data, gwt._data)
    else:  # the weight is kept only where the input needs a gradient (as PyTorch's)
        assert swt is None and gwt is None
    assert short._vc is not generic._vc and short._base is None


def test_linear_matches_torch_and_its_graph():
    got = []
    for m in (ember, torch):
        x, w, b = _leaves(m)
        y = m.nn.functional.linear(x, w, b)
        names = (y.grad_fn.name(), [f.name() if f else None
                                    for f, _ in y.grad_fn.next_functions],
                 y.grad_fn.next_functions[2][0].next_functions[0][0].name())
        (y * y).sum().backward()
        got.append((y.detach().numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy(),
                    names))
    e, t = got
    for a, b_ in zip(e[:4], t[:4]):
        np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-6)
    assert e[4] == t[4]


def test_saved_input_changed_in_place_is_still_caught():
    for m in (ember, torch):
        x, w, b = _leaves(m)
        y = m.nn.functional.linear(x, w, b)
        with m.no_grad():
            x.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_weight_changed_in_place_after_the_call_is_caught():
    for m in (ember, torch):
        x, w, b = _leaves(m)
        y = m.nn.functional.linear(x, w, b)
        with m.no_grad():
            w.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_saved_tensor_hooks_and_anomaly_take_the_generic_path():
    packed = []
    for m in (ember, torch):
        x, w, b = _leaves(m)
        log = []
        with m.autograd.graph.saved_tensors_hooks(lambda t, log=log: log.append(1) or t,
                                                  lambda t: t):
            m.nn.functional.linear(x, w, b).sum().backward()
        packed.append(len(log))
    assert packed[0] == packed[1] > 0
    with ember.autograd.detect_anomaly():
        x, w, b = _leaves(ember)
        y = ember.nn.functional.linear(x, w, b)
        assert getattr(y.grad_fn, "_trace", None)
        y.sum().backward()


def test_profiler_sees_the_same_rows():
    """Under the profiler (a mode) linear takes the generic path: torch's rows for the
    product, its transposed weight and their backward steps."""
    rows = []
    wanted = ("aten::t", "aten::addmm", "autograd::engine::evaluate_function: TBackward0",
              "autograd::engine::evaluate_function: AddmmBackward0")
    for m in (ember, torch):
        x, w, b = _leaves(m)
        with m.profiler.profile() as prof:
            m.nn.functional.linear(x, w, b).sum().backward()
        names = [e.name for e in prof.events()]
        rows.append({n for n in names if n in wanted})
    assert rows[0] == rows[1] == set(wanted)


def test_rnn_cell_loop_matches_torch():
    got = []
    for m in (ember, torch):
        m.manual_seed(0)
        cell = m.nn.RNNCell(3, 4)
        with m.no_grad():
            for p, v in zip(cell.parameters(), (W, WH, B, B[::-1])):
                p.copy_(m.tensor(np.ascontiguousarray(v, np.float32)))
        xs = m.tensor(np.stack([X, X * 0.5, -X]), requires_grad=True)
        h = m.zeros(5, 4)
        for t in range(3):
            h = cell(xs[t], h)
        names = [h.grad_fn.name(), h.grad_fn.next_functions[0][0].name()]
        h.pow(2).mean().backward()
        got.append([h.detach().numpy(), xs.grad.numpy()] +
                   [p.grad.numpy() for p in cell.parameters()] + [names])
    e, t = got
    for a, b_ in zip(e[:-1], t[:-1]):
        np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-6)
    assert e[-1] == t[-1]


@pytest.mark.parametrize("x_shape, h_shape", [((5, 2), (5, 4)), ((5, 3), (6, 4)),
                                              ((5, 3), (5, 5)), ((5, 3, 1), (5, 4))])
def test_rnn_cell_errors_match_torch(x_shape, h_shape):
    errors = []
    for m in (ember, torch):
        cell = m.nn.RNNCell(3, 4)
        with pytest.raises((RuntimeError, ValueError)) as info:
            cell(m.zeros(*x_shape), m.zeros(*h_shape))
        errors.append((info.type, str(info.value)))
    assert errors[0] == errors[1]


def test_rnn_cell_dtype_mismatch_matches_torch():
    errors = []
    for m in (ember, torch):
        cell = m.nn.RNNCell(3, 4)
        with pytest.raises(RuntimeError) as info:
            cell(m.zeros(5, 3), m.zeros(5, 4, dtype=m.float64))
        errors.append(str(info.value))
    assert errors[0] == errors[1]


class _Twice:
    """A parametrization: the weight used is twice the one stored."""

    def __init__(self, m):
        class P(m.nn.Module):
            def forward(self, w):
                return w * 2
        self.module = P()


@pytest.mark.parametrize("kind", ["parametrized", "no_bias", "subclass"])
def test_cells_that_are_not_plain_read_their_parameters_as_modules_do(kind):
    got = []
    for m in (ember, torch):
        m.manual_seed(0)
        if kind == "subclass":
            class Cell(m.nn.RNNCell):
                pass
            cell = Cell(3, 4)
        else:
            cell = m.nn.RNNCell(3, 4, bias=kind != "no_bias")
        with m.no_grad():
            cell.weight_ih.copy_(m.tensor(W))
            cell.weight_hh.copy_(m.tensor(WH))
            if cell.bias_ih is not None:
                cell.bias_ih.copy_(m.tensor(B))
                cell.bias_hh.copy_(m.tensor(B[::-1].copy()))
        if kind == "parametrized":
            m.nn.utils.parametrize.register_parametrization(cell, "weight_hh",
                                                            _Twice(m).module)
        x = m.tensor(X, requires_grad=True)
        h = cell(x, cell(x * 0.5, m.zeros(5, 4)))
        h.sum().backward()
        got.append((h.detach().numpy(), x.grad.numpy()))
    for a, b_ in zip(*got):
        np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-6)


def test_torch_function_mode_sees_the_public_calls_only():
    """Under a TorchFunctionMode (a mode: the short paths step aside) a cell step's
    products are reported as ``linear``, as before the short paths existed."""
    from ember.nn import _rnn_unrolled
    from ember.overrides import TorchFunctionMode
    log = []

    class Log(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            log.append(func.__name__)
            return func(*args, **(kwargs or {}))

    x, w, b = _leaves(ember)
    wh = ember.nn.Parameter(ember.tensor(WH))
    h = ember.zeros(5, 4)
    with Log():
        _rnn_unrolled.cell("RNN_TANH", x, h, w, wh, b, b)
    assert log == ["linear", "linear", "add", "tanh"]


@pytest.mark.parametrize("bias_shape", [(1, 4), (5, 4), (), (1,)])
def test_linear_with_a_broadcast_bias_matches_torch(bias_shape):
    got = []
    bias = RNG.standard_normal(bias_shape).astype(np.float32)
    for m in (ember, torch):
        x, w, _ = _leaves(m)
        b = m.tensor(bias, requires_grad=True)
        y = m.nn.functional.linear(x, w, b)
        (y * y).sum().backward()
        got.append((y.grad_fn.name(), y.detach().numpy(), x.grad.numpy(), w.grad.numpy(),
                    b.grad.numpy()))
    e, t = got
    assert e[0] == t[0]
    for a, b_ in zip(e[1:], t[1:]):
        assert a.shape == b_.shape
        np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-5)
