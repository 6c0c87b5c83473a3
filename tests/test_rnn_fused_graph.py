"""Recurrent layers that record a graph run one fused kernel under PyTorch's step nodes
(ember/ops/rnn_graph.py): gradients against torch when only some inputs need them,
hooks and retain_grad on the outputs, repeated and partial backward passes, and a clear
error for hooks on the steps' inner nodes (which the engine never runs)."""
import dataclasses
import warnings

import numpy as np
import pytest
import torch
from oracle import cases, check
from test_nn_rnn import packed_case, rnn_case

import ember


def _only(case, *which):
    """``case`` with gradients for the inputs named in ``which`` only: "x", "h0", "c0",
    "w" (the weights), "b" (the biases)."""
    n_states = sum(len(s) == 3 for s in case.inputs[1:3]) if isinstance(case.inputs, list) \
        else 0
    flags = []
    for i, shape in enumerate(case.inputs):
        if i == 0:
            kind = "x"
        elif i <= n_states:
            kind = ("h0", "c0")[i - 1]
        else:
            kind = "b" if len(shape) == 1 else "w"
        flags.append(kind in which)
    return dataclasses.replace(case, name=f"{case.name}_only_{'_'.join(which)}",
                               requires_grad=flags)


PARTIAL = [
    _only(rnn_case("GRU_bidir", "GRU", state=True, bidirectional=True), "x"),
    _only(rnn_case("GRU_2layers", "GRU", state=True, num_layers=2), "h0"),
    _only(rnn_case("GRU", "GRU", state=True), "w"),
    _only(rnn_case("LSTM_f64", "LSTM", state=True), "c0"),
    _only(rnn_case("LSTM_f64_bidir", "LSTM", state=True, bidirectional=True), "h0", "b"),
    _only(rnn_case("RNN_relu", "RNN", state=True, nonlinearity="relu"), "x", "h0"),
    _only(packed_case("GRU_packed_bidir", "GRU", [3, 1, 2], enforce_sorted=False,
                      state=True, bidirectional=True), "h0"),
    _only(packed_case("LSTM_packed", "LSTM", [2, 3, 1], enforce_sorted=False, state=True),
          "c0", "w"),
    _only(packed_case("LSTM_packed_proj", "LSTM", [2, 3, 1], enforce_sorted=False,
                      state=True, proj_size=2), "x"),
]


@cases(PARTIAL)
def test_gradients_when_some_inputs_need_none(case):
    check(case)


def _layer(m, mode, packed):
    m.manual_seed(0)
    mod = getattr(m.nn, mode)(3, 4, num_layers=2, bidirectional=True).double()
    rng = np.random.default_rng(1)
    x = m.tensor(rng.standard_normal((3, 3, 3)), requires_grad=True)
    h0 = m.tensor(rng.standard_normal((4, 3, 4)), requires_grad=True)
    state = (h0, m.tensor(rng.standard_normal((4, 3, 4)))) if mode == "LSTM" else h0
    inp = m.nn.utils.rnn.pack_padded_sequence(x, [3, 1, 2], enforce_sorted=False) \
        if packed else x
    out, hidden = mod(inp, state)
    y = out.data if packed else out
    hn = hidden[0] if mode == "LSTM" else hidden
    return mod, x, h0, y, hn


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
def test_hooks_and_retain_grad_on_the_outputs(mode, packed):
    res = {}
    for m in (ember, torch):
        mod, x, h0, y, hn = _layer(m, mode, packed)
        seen = []
        y.register_hook(lambda g: g * 2)
        hn.register_hook(seen.append)
        y.retain_grad()
        hn.retain_grad()
        (y.sin().sum() + (hn * hn).sum()).backward()
        res[m] = [y.grad, hn.grad, seen[0], x.grad, h0.grad,
                  *[p.grad for p in mod.parameters()]]
    for a, b in zip(res[ember], res[torch]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
def test_backward_twice_and_partial_gradients(mode, packed):
    res = {}
    for m in (ember, torch):
        mod, x, h0, y, hn = _layer(m, mode, packed)
        loss = y.pow(2).sum() + hn.sum()
        loss.backward(retain_graph=True)
        loss.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
        _, x2, h02, y2, hn2 = _layer(m, mode, packed)
        g_h0, = m.autograd.grad(hn2.sum(), [h02])
        res[m] = [x.grad, h0.grad, g_h0, *[p.grad for p in mod.parameters()]]
    for a, b in zip(res[ember], res[torch]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


def test_hooks_on_inner_step_nodes_raise():
    y, _ = ember.nn.GRU(3, 4)(ember.randn(2, 3, 3, requires_grad=True))
    step = y.grad_fn.next_functions[0][0]
    inner = step.next_functions[0][0]
    assert (step.name(), inner.name()) == ("AddBackward0", "MulBackward0")
    for node in (step, inner):
        with pytest.raises(RuntimeError, match="one fused kernel"):
            node.register_hook(lambda gi, go: None)
        with pytest.raises(RuntimeError, match="one fused kernel"):
            node.register_prehook(lambda go: None)


@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
def test_saved_tensor_hooks_and_anomaly_mode_see_the_steps(mode):
    """Under saved-tensor hooks (which see each op's saved tensors) and anomaly mode
    (which keeps each op's traceback) the layer runs op by op: the same gradients, and
    the hooks see the steps' saved tensors."""
    def run(m, ctx):
        with ctx:
            mod, x, h0, y, hn = _layer(m, mode, True)
            (y.pow(2).sum() + hn.sum()).backward()
        return [x.grad, h0.grad, *[p.grad for p in mod.parameters()]]

    import contextlib
    want = run(torch, contextlib.nullcontext())
    packed = []

    def pack(t):
        packed.append(t)
        return t
    got = run(ember, ember.autograd.graph.saved_tensors_hooks(pack, lambda t: t))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    assert len(packed) > 100  # a dozen saved tensors a step, not one node's eight
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode warns that it is slow
        got = run(ember, ember.autograd.detect_anomaly())
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
