"""``RNNCell``'s step recorded in one call (``ember.ops.cell_graph.elman_step``) against
the general path (``_rnn_unrolled.cell``) and torch 2.13: the same nodes, edges, saved
values and version counters, the same bits forward and backward, torch's values, node
names and errors; the general path wherever something watches the graph."""
import numpy as np
import pytest
import torch

import ember
from ember.nn import _rnn_unrolled
from ember.ops import cell_graph

RNG = np.random.default_rng(0)


def _params(m, dtype, k=6, n=7):
    cell = m.nn.RNNCell(k, n, dtype=getattr(m, np.dtype(dtype).name))
    with m.no_grad():
        for p in cell.parameters():
            p.copy_(m.tensor(RNG.standard_normal(tuple(p.shape)).astype(dtype) * 0.4))
    return cell


def _copy(src, dst):
    with torch.no_grad():
        for (_, d), (_, s) in zip(dst.named_parameters(), src.named_parameters()):
            d.copy_(torch.from_numpy(s.detach().numpy().copy()))


def _walk(t):
    """The nodes under ``t`` in a fixed order, each with its edges."""
    out, stack, seen = [], [t.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        for e in node._edges:
            if type(e) is tuple:
                stack.append(e[0])
    return out


def _edge_kinds(edges):
    return [None if e is None else ("leaf", id(e)) if not isinstance(e, tuple) else
            (type(e[0]).__name__, e[1]) for e in edges]


def _saved_kinds(saved):
    return [(type(v[0]).__name__, len(v)) + tuple(x for x in v[1:] if type(x) is not list)
            for v in saved or ()]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("x_grad, h_grad", [(True, True), (False, False), (False, True)])
@pytest.mark.parametrize("m, k, n", [(5, 6, 7), (32, 64, 128)])
def test_step_leaves_the_general_paths_nodes(relu, dtype, x_grad, h_grad, m, k, n):
    cell = _params(ember, dtype, k, n)
    x = ember.tensor(RNG.standard_normal((m, k)).astype(dtype), requires_grad=x_grad)
    h = ember.tensor(RNG.standard_normal((m, n)).astype(dtype), requires_grad=h_grad)
    args = (x, h, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
    fused = cell_graph.elman_step(*args, relu)
    general = _rnn_unrolled.cell("RNN_RELU" if relu else "RNN_TANH", *args)
    np.testing.assert_array_equal(fused._data, general._data)
    assert fused._vc == general._vc and fused._base is None and fused._extra is None
    a_nodes, g_nodes = _walk(fused), _walk(general)
    assert [type(a) for a in a_nodes] == [type(g) for g in g_nodes]
    assert len(a_nodes) == 6
    for a, g in zip(a_nodes, g_nodes):
        assert a.__dict__.keys() == g.__dict__.keys(), type(a)
        assert _edge_kinds(a._edges) == _edge_kinds(g._edges)
        assert a._n_in == g._n_in and a._in_shapes == g._in_shapes
        assert _saved_kinds(a._saved) == _saved_kinds(g._saved)
    # the activation saves its own output array, with the output's counter
    (arr, vc, ver, rg, nr), = fused.grad_fn._saved
    assert arr is fused._data and vc is fused._vc and (ver, rg, nr) == (0, True, 0)
    # the gradients through both graphs, bit for bit
    grads = []
    for out in (fused, general):
        for t in (x, h, *cell.parameters()):
            t.grad = None
        (out * out).sum().backward()
        grads.append([t.grad.numpy().copy() for t in (x, h, *cell.parameters())
                      if t.grad is not None])
    assert len(grads[0]) == len(grads[1]) == 4 + x_grad + h_grad
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loop_gradients_equal_the_general_path_and_torch(nonlinearity, dtype, monkeypatch):
    xs = RNG.standard_normal((4, 3, 6)).astype(dtype)
    h0 = RNG.standard_normal((3, 7)).astype(dtype)
    ember.manual_seed(0)
    ecell = ember.nn.RNNCell(6, 7, nonlinearity=nonlinearity,
                             dtype=getattr(ember, np.dtype(dtype).name))
    calls = []
    fused = cell_graph.elman_step
    got = {}
    for short in (True, False):
        monkeypatch.setattr(cell_graph, "elman_step",
                            (lambda *a: calls.append(1) or fused(*a)) if short else
                            (lambda *a: None))
        ecell.zero_grad()
        x = ember.tensor(xs, requires_grad=True)
        h = ember.tensor(h0, requires_grad=True)
        for t in range(xs.shape[0]):
            h = ecell(x[t], h)
        names = [h.grad_fn.name(), h.grad_fn.next_functions[0][0].name(),
                 [f.name() for f, _ in h.grad_fn.next_functions[0][0].next_functions]]
        h.pow(2).sum().backward()
        got[short] = [h.detach().numpy(), x.grad.numpy()] + \
            [p.grad.numpy().copy() for p in ecell.parameters()] + [names]
    assert len(calls) == xs.shape[0]
    for a, b in zip(got[True][:-1], got[False][:-1]):
        np.testing.assert_array_equal(a, b)

    tcell = torch.nn.RNNCell(6, 7, nonlinearity=nonlinearity,
                             dtype=getattr(torch, np.dtype(dtype).name))
    _copy(ecell, tcell)
    x = torch.tensor(xs, requires_grad=True)
    h = torch.tensor(h0, requires_grad=True)
    for t in range(xs.shape[0]):
        h = tcell(x[t], h)
    names = [h.grad_fn.name(), h.grad_fn.next_functions[0][0].name(),
             [f.name() for f, _ in h.grad_fn.next_functions[0][0].next_functions]]
    h.pow(2).sum().backward()
    want = [h.detach().numpy(), x.grad.numpy()] + [p.grad.numpy() for p in tcell.parameters()]
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    for a, b in zip(got[True][:-1], want):
        np.testing.assert_allclose(a, b, **tol)
    assert got[True][-1] == names


def test_weight_changed_after_the_step_is_caught_as_in_torch():
    errors = []
    for m in (ember, torch):
        cell = m.nn.RNNCell(3, 4)
        h = cell(m.ones(2, 3, requires_grad=True), m.zeros(2, 4, requires_grad=True))
        with m.no_grad():
            cell.weight_hh.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
            h.sum().backward()
        errors.append(type(info.value))
    assert errors[0] is errors[1]


def test_output_changed_in_place_is_caught_as_in_torch():
    for m in (ember, torch):
        cell = m.nn.RNNCell(3, 4)
        h = cell(m.ones(2, 3), m.zeros(2, 4))
        with m.no_grad():
            h.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            h.sum().backward()


def _count(monkeypatch):
    calls = []
    fused = cell_graph.elman_step
    monkeypatch.setattr(cell_graph, "elman_step",
                        lambda *a: calls.append(fused(*a) is not None) or None)
    return calls


def test_watched_graphs_take_the_general_path(monkeypatch):
    """Under the profiler, anomaly mode and saved-tensor hooks (and without grad mode)
    the step answers None: the general path records it, as torch shows it."""
    calls = _count(monkeypatch)
    cell = ember.nn.RNNCell(3, 4)
    x, h = ember.ones(2, 3), ember.zeros(2, 4)
    cell(x, h)
    assert calls == [True]
    del calls[:]
    with ember.profiler.profile() as prof:
        cell(x, h).sum().backward()
    assert "aten::addmm" in {e.name for e in prof.events()}
    with ember.autograd.detect_anomaly(check_nan=False):
        cell(x, h)
    log = []
    with ember.autograd.graph.saved_tensors_hooks(lambda t: log.append(1) or t, lambda t: t):
        cell(x, h)
    assert log
    with ember.no_grad():
        assert cell(x, h).grad_fn is None
    assert not any(calls)


@pytest.mark.parametrize("kind", ["no_bias", "frozen", "unbatched", "float16_state"])
def test_other_cells_and_calls_match_torch(kind, monkeypatch):
    calls = _count(monkeypatch)
    got = []
    values = [RNG.standard_normal(s).astype(np.float32) for s in ((4, 3), (4, 4), 4, 4)]
    for m in (ember, torch):
        cell = m.nn.RNNCell(3, 4, bias=kind != "no_bias")
        with m.no_grad():
            for p, v in zip(cell.parameters(), values):
                p.copy_(m.tensor(v))
        if kind == "frozen":
            cell.weight_hh.requires_grad_(False)
        leaf = m.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 6, requires_grad=True)
        x, h = leaf, m.zeros(2, 4)
        if kind == "unbatched":
            x, h = x[0], h[0]
        if kind == "float16_state":
            with pytest.raises(RuntimeError) as info:
                cell(x, h.half())
            got.append(str(info.value))
            continue
        y = cell(x, h)
        y.pow(2).sum().backward()
        got.append((y.detach().numpy(), leaf.grad.numpy(), y.grad_fn.name()))
    if kind == "float16_state":
        assert got[0] == got[1]
    else:
        np.testing.assert_allclose(got[0][0], got[1][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-5, atol=1e-6)
        assert got[0][2] == got[1][2]
    assert not any(calls)


def test_arrays_split_over_threads_take_the_ops_own_kernels(monkeypatch):
    """At two threads a step whose sum is large enough for ember's split kernels runs
    ``Add`` and ``tanh`` as the ops do: the general path's bits. (The split size is
    lowered here so that the products stay small, one-thread ``np.matmul`` calls.)"""
    from ember.backend import threads
    calls = []
    binary = threads.binary
    monkeypatch.setattr(threads, "binary", lambda *a: calls.append(1) or binary(*a))
    monkeypatch.setattr(threads, "SPLIT_ELEMENTS", 1024)
    prev = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        cell = _params(ember, np.float32, 8, 64)
        x = ember.tensor(RNG.standard_normal((64, 8)).astype(np.float32))
        h = ember.tensor(RNG.standard_normal((64, 64)).astype(np.float32))
        args = (x, h, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
        fused = cell_graph.elman_step(*args, False)
        general = _rnn_unrolled.cell("RNN_TANH", *args)
    finally:
        ember.set_num_threads(prev)
    assert len(calls) == 2  # both sums went to the split kernel
    np.testing.assert_array_equal(fused._data, general._data)
    assert fused.grad_fn.name() == general.grad_fn.name() == "TanhBackward0"
