"""jit.trace: the IR, loud tracing, check_trace, sizes as computations, and traced
outputs against eager ember and against torch running the same weights."""
import sys
import threading
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.jit as jit
import ember.nn as nn
from ember._graph.ir import Graph
from ember.autograd import node as _node

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from jit_trace_zoo import copy_weights, models  # noqa: E402

HERE = __file__


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [z for y in x for z in _flat(y)]
    if isinstance(x, dict):
        return [z for y in x.values() for z in _flat(y)]
    return [x]


def _max_diff(a, b):
    return max(float(np.abs(np.asarray(p.detach().numpy(), np.float64) -
                            np.asarray(q.detach().numpy(), np.float64)).max())
               for p, q in zip(_flat(a), _flat(b)))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 8)
        self.fc2 = nn.Linear(8, 3)
        self.register_buffer("scale", ember.ones(3))

    def forward(self, x):
        x = x.view(x.size(0), -1)  # LINE_VIEW
        return self.fc2(ember.relu(self.fc1(x))) * self.scale


def _line(tag):
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if tag in line and "_line(" not in line:
                return i
    raise AssertionError(tag)


# ----- the IR ----------------------------------------------------------------------------
def test_graph_nodes_values_params_scopes_and_source():
    m = MLP().eval()
    t = jit.trace(m, ember.randn(2, 3, 4))
    g = t.graph
    assert isinstance(g, Graph)
    assert [n.op for n in g.nodes] == ["size", "view", "_Linear", "Relu", "_Linear", "Mul"]
    assert [v.name for v in g.inputs] == ["x"] and g.inputs[0].kind == "input"
    assert g.inputs[0].shape == (2, 3, 4) and g.inputs[0].dtype is ember.float32
    assert {k: v.kind for k, v in g.params.items()} == {
        "fc1.weight": "param", "fc1.bias": "param", "fc2.weight": "param",
        "fc2.bias": "param", "scale": "buffer"}
    size, view, lin1 = g.nodes[:3]
    assert size.attrs == {"dim": 0} and size.outputs[0].type == "int"
    assert size.outputs[0].data == 2
    assert view.inputs[1] is size.outputs[0]            # the size is an input of view
    assert view.outputs[0].shape == (2, 12)
    assert lin1.scope == "fc1" and lin1.inputs[1] is g.params["fc1.weight"]
    assert view.source == (HERE, _line("LINE_VIEW"))
    assert g.nodes[-1].scope == "" and g.outputs() == [g.nodes[-1].outputs[0]]
    text = str(g)   # torch's text: the size an int, the submodule calls methods
    assert "%x : Float(2, 3, 4, strides=[12, 4, 1]" in text
    assert "int = aten::size(%x, %3)" in text and f"{HERE}:{_line('LINE_VIEW')}" in text
    assert "Long(device=cpu) = prim::NumToTensor(%4)" in text   # torch's 0-d size
    # the view's result is named after the local ``input`` of Linear.forward that reads it,
    # as torch's tracer names it
    assert 'prim::CallMethod[name="forward"](%fc1, %input.1)' in text, text
    ir = str(t.inlined_graph)   # ember's IR: the submodules' nodes inlined, in scope
    assert "scope: fc1" in ir and f"{HERE}:{_line('LINE_VIEW')}" in ir


def test_constants_are_distinguished_and_graph_run_replays():
    c = ember.tensor([1.0, 2.0, 3.0])

    def f(x):
        return (x + c).sum(1)

    t = jit.trace(f, ember.randn(2, 3))
    g = t.graph
    assert [v.kind for v in g.constants] == ["constant"] and g.constants[0].data is c
    x = ember.randn(5, 3)
    out = g.run(x, params={})
    np.testing.assert_array_equal(out.numpy(), f(x).numpy())
    np.testing.assert_array_equal(t(x).numpy(), f(x).numpy())


def test_capture_leaves_the_op_paths_alone():
    # the capture is a mode on the mode stack: nothing is swapped in or restored
    add = ember.Tensor.__add__
    code = add.__code__
    apply = _node.Primitive.__dict__["apply"]
    size = ember.Tensor.size
    jit.trace(MLP().eval(), ember.randn(2, 12))
    assert ember.Tensor.__add__ is add and add.__code__ is code
    assert _node.Primitive.__dict__["apply"] is apply and ember.Tensor.size is size
    assert type(ember.randn(3, 4).size(0)) is int


def test_is_tracing_only_inside_the_trace_and_its_thread():
    seen = []

    def f(x):
        seen.append(jit.is_tracing())
        th = threading.Thread(target=lambda: seen.append(jit.is_tracing()))
        th.start()
        th.join()
        return x * 2

    assert not jit.is_tracing()
    jit.trace(f, ember.randn(2), check_trace=False)
    assert seen == [True, False]


# ----- sizes as computations -------------------------------------------------------------
class Flat(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 2)

    def forward(self, x):
        a = x.reshape(x.shape[0], -1)
        b = x.flatten(1)
        n = x.size(0) * x.size(1)
        c = x.view(n, -1).sum(-1).view(x.size(0), -1)
        return self.fc(a) + self.fc(b) + c.sum(-1, keepdim=True)


@pytest.mark.parametrize("batch", [1, 5])
def test_sizes_are_recorded_so_other_batch_sizes_run(batch):
    m = Flat()
    t = jit.trace(m, ember.randn(3, 3, 4))
    ops = [n.op for n in t.graph.nodes]
    assert "size" in ops and "int.mul" in ops and "flatten" in ops
    x = ember.randn(batch, 3, 4)
    np.testing.assert_allclose(t(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    assert "x.size(0)" in t.code and "torch.flatten(" in t.code


def test_a_frozen_python_int_is_a_constant_as_in_torch():
    def f(x):
        return x.view(int(x.shape[0]), -1)  # int() of a size is a plain number

    t = jit.trace(f, ember.randn(2, 6))
    assert "view(x, [2, -1])" in t.code.replace("torch.", "")


# ----- loud tracing ----------------------------------------------------------------------
def _warned(fn, x):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        jit.trace(fn, x, check_trace=False)
    return [(str(x.message), x.filename, x.lineno) for x in w
            if issubclass(x.category, jit.TracerWarning)]


@pytest.mark.parametrize("kind, words", [
    ("bool", "a Python boolean"), ("item", "a Python number"), ("tolist", "a Python list"),
    ("int", "a Python integer"), ("float", "a Python float"), ("numpy", "a NumPy array"),
    ("if", "a Python boolean")])
def test_tensor_to_python_warns_at_the_users_line(kind, words):
    def f(x):
        s = x.sum()
        if kind == "bool":
            v = bool(s > 0)  # LINE_bool
        elif kind == "item":
            v = s.item()  # LINE_item
        elif kind == "tolist":
            v = s.tolist()  # LINE_tolist
        elif kind == "int":
            v = int(s)  # LINE_int
        elif kind == "float":
            v = float(s)  # LINE_float
        elif kind == "numpy":
            v = float(s.detach().numpy())  # LINE_numpy
        elif kind == "if":
            v = 1.0
            if s > 0:  # LINE_if
                v = 2.0
        return x * v

    got = _warned(f, ember.randn(3))
    assert len(got) == 1, got
    msg, filename, lineno = got[0]
    assert msg.startswith(f"Converting a tensor to {words} might cause the trace to be "
                          "incorrect")
    assert "might not generalize to other inputs" in msg
    assert (filename, lineno) == (HERE, _line(f"LINE_{kind}"))
    assert issubclass(jit.TracerWarning, Warning)


def test_internal_reads_do_not_warn():
    m = nn.Embedding(10, 3)          # checks its indices' range internally
    assert _warned(m, ember.tensor([[1, 2], [3, 4]])) == []


def test_data_dependent_branch_is_right_on_the_example_and_frozen_after():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    x = ember.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jit.TracerWarning)
        t = jit.trace(f, x)
    np.testing.assert_array_equal(t(x).numpy(), f(x).numpy())
    # as PyTorch: the branch taken on the example is what the trace runs
    np.testing.assert_array_equal(t(-x).numpy(), (-x * 2).numpy())


# ----- check_trace -----------------------------------------------------------------------
class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls  # LINE_COUNTER


def test_check_trace_names_the_first_differing_node():
    with pytest.raises(jit.TracingCheckError) as e:
        jit.trace(Counter(), ember.randn(3))
    msg = str(e.value)
    assert msg.startswith("Tracing failed sanity checks!")
    assert "Mul" in msg and f"{HERE}:{_line('LINE_COUNTER')}" in msg
    assert isinstance(jit.trace(Counter(), ember.randn(3), check_trace=False)(ember.ones(2)),
                      ember.Tensor)


def test_nondeterministic_trace_warns_as_torch():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).train()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = jit.trace(m, ember.randn(64, 4))
    msgs = [str(x.message) for x in w if issubclass(x.category, jit.TracerWarning)]
    assert any("Trace had nondeterministic nodes" in s for s in msgs)
    a, b = t(ember.ones(64, 4)), t(ember.ones(64, 4))
    assert not np.array_equal((a == 0).numpy(), (b == 0).numpy())   # a new mask each run


# ----- inputs, outputs, module surface ---------------------------------------------------
def test_nested_inputs_and_outputs():
    def f(pair, d):
        a, b = pair
        return (a + d["k"], [b * 2]), {"s": a.sum()}

    ex = ((ember.randn(2), ember.randn(2)), {"k": ember.randn(2)})
    with pytest.raises(RuntimeError, match="strict=False"):
        jit.trace(f, ex)
    t = jit.trace(f, ex, strict=False)
    new = ((ember.randn(3), ember.randn(3)), {"k": ember.randn(3)})
    got, ref = t(*new), f(*new)
    assert isinstance(got[0], tuple) and isinstance(got[0][1], list) and set(got[1]) == {"s"}
    assert _max_diff(got, ref) == 0


def test_non_tensor_inputs_are_refused():
    with pytest.raises(TypeError, match="cannot be traced"):
        jit.trace(lambda x, n: x * n, (ember.randn(2), 3))


def test_traced_module_shares_parameters_state_dict_and_mode():
    m = MLP().eval()
    t = jit.trace(m, ember.randn(2, 12))
    assert [(n, id(p)) for n, p in t.named_parameters()] == \
        [(n, id(p)) for n, p in m.named_parameters()]
    assert list(t.state_dict()) == list(m.state_dict())
    with ember.no_grad():
        m.fc2.bias.add_(1.0)                     # shared, not copied
    x = ember.randn(4, 12)
    np.testing.assert_array_equal(t(x).detach().numpy(), m(x).detach().numpy())
    assert t.train() is t and t.training and t.eval() is t and not t.training
    assert "torch.linear(" in t.fc1.code and t.inlined_graph.nodes is t.graph.nodes


def test_trace_module_and_other_methods():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x)

        def twice(self, x):
            return self.fc(x) * 2

    m = Two()
    t = jit.trace_module(m, {"forward": ember.randn(2, 3), "twice": ember.randn(2, 3)})
    x = ember.randn(4, 3)
    np.testing.assert_allclose(t.twice(x).detach().numpy(), m.twice(x).detach().numpy())


# ----- the zoo against eager ember and against torch with the same weights ---------------
ZOO_E, ZOO_T = models(ember), models(torch)


@pytest.mark.parametrize("name", sorted(ZOO_E))
def test_zoo_traced_matches_eager_and_torch(name):
    make_e, inputs_e = ZOO_E[name]
    make_t, inputs_t = ZOO_T[name]
    ember.manual_seed(0)
    m = make_e().eval()
    tm = make_t().eval()
    copy_weights(m, tm, torch)
    traced = jit.trace(m, inputs_e(2), strict=False)
    for b in (2, 3):
        got = traced(*inputs_e(b))
        assert _max_diff(got, m(*inputs_e(b))) <= 1e-6
        with torch.no_grad():
            ref = tm(*inputs_t(b))
        assert _max_diff(got, ref) <= 2e-5


def test_an_op_without_torchscript_spelling_still_runs_and_save_names_it(tmp_path):
    class Put(nn.Module):
        def forward(self, x):
            y = x * 1
            y[:, 0] = 5.0  # LINE_SETITEM
            return y

    m = Put()
    t = jit.trace(m, ember.randn(2, 3))
    x = ember.randn(4, 3)
    np.testing.assert_array_equal(t(x).numpy(), m(x).numpy())
    with pytest.raises(NotImplementedError, match="'setitem'") as e:
        t.save(str(tmp_path / "m.pt"))
    assert f"{HERE}:{_line('LINE_SETITEM')}" in str(e.value)


def test_an_exception_while_tracing_restores_everything():
    def bad(x):
        x * 2
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        jit.trace(bad, ember.randn(2))
    assert type(ember.randn(3).size(0)) is int and not jit.is_tracing()
    assert jit.trace(lambda x: x + 1, ember.randn(2))(ember.zeros(1)).item() == 1.0


def test_check_inputs_outputs_that_are_inputs_and_gradients():
    m = nn.Linear(3, 2)
    t = jit.trace(m, ember.randn(2, 3), check_inputs=[(ember.randn(5, 3),)])
    t(ember.randn(4, 3)).sum().backward()
    assert m.weight.grad is not None                      # autograd through the replay
    f = jit.trace(lambda x, y: (x, y * 2), (ember.randn(2), ember.randn(2)))
    a = ember.randn(3)
    assert f(a, a)[0] is a


def test_a_traced_module_inside_another_trace():
    inner = jit.trace(nn.Sequential(nn.Linear(3, 4), nn.ReLU()), ember.randn(2, 3))

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner
            self.fc = nn.Linear(4, 1)

        def forward(self, x):
            return self.fc(self.inner(x))

    o = Outer()
    t = jit.trace(o, ember.randn(2, 3))
    assert set(t.graph.params) == {"inner.0.weight", "inner.0.bias", "fc.weight", "fc.bias"}
    x = ember.randn(6, 3)
    np.testing.assert_array_equal(t(x).detach().numpy(), o(x).detach().numpy())


def test_namedtuple_output_keeps_its_type():
    f = jit.trace(lambda x: x.max(1), ember.randn(3, 4))
    x = ember.randn(5, 4)
    got, ref = f(x), x.max(1)
    assert type(got) is type(ref) and _max_diff(got, ref) == 0
    assert "torch.max(x, 1, False)" in f.code


def test_tracer_warning_from_python_dash_c():
    # code given by ``python -c`` lives in a ``__main__`` whose loader (the builtin
    # importer) refuses to look for source: the warning is still given, the trace made
    import subprocess
    code = ("import ember\n"
            "def f(x): return x * int(x.size(1))\n"
            "t = ember.jit.trace(f, ember.randn(2, 3))\n"
            "print(tuple(t(ember.randn(2, 3)).shape))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2, 3)"
    assert "TracerWarning: Converting a tensor to a Python integer" in r.stderr
