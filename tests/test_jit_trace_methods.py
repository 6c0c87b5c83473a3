"""A traced module as PyTorch writes it: one method per submodule call (``.code`` and
``.graph`` on the submodules, ``forward1`` for a second call), calls of scripted
submodules kept as calls (their loops run at any length, and torch loads the archive),
the printed module and code as torch prints them; single-int sizes in ``jit.script``."""
import io
import re
import warnings

import numpy as np
import pytest
import torch

import ember


def _models(lib):
    nn = lib.nn

    class Gate(nn.Module):
        def forward(self, x):
            return -x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.dg = Gate()
            self.linear = nn.Linear(4, 4)
            self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

        def forward(self, x, h):
            y = self.linear(x)
            z = self.linear(y * 2)
            return lib.tanh(self.dg(z) + h) + self.seq(x)

    class Cell(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x, h):
            new_h = lib.tanh(self.linear(x) + h)
            return new_h, new_h

    return {"net": Net, "cell": Cell,
            "mlp": lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))}


EM, TM = _models(ember), _models(torch)


def _both(name):
    ember.manual_seed(0)
    torch.manual_seed(0)
    e, t = EM[name](), TM[name]()
    x, h = np.random.RandomState(0).rand(2, 3, 4).astype("float32")
    args_e = (ember.tensor(x), ember.tensor(h)) if name != "mlp" else (ember.tensor(x),)
    args_t = (torch.tensor(x), torch.tensor(h)) if name != "mlp" else (torch.tensor(x),)
    return ember.jit.trace(e, args_e), torch.jit.trace(t, args_t), args_e, args_t


def _codes(m):
    return {n: s.code for n, s in m.named_modules() if "forward" in s._c._method_names()} \
        if hasattr(m, "_c") else {n: s.code for n, s in m.named_modules()}


@pytest.mark.parametrize("name", ["net", "cell", "mlp"])
def test_traced_module_prints_and_writes_code_as_torch(name):
    te, tt, _, _ = _both(name)
    assert repr(te) == repr(tt)
    assert str(te) == str(tt)
    for path, sub in tt.named_modules():
        mine = te.get_submodule(path) if path else te
        assert repr(mine) == repr(sub), path
    # the root's code, and every submodule's: the same text where torch names values
    # by number (torch also names some after the caller's Python locals)
    assert te.code == tt.code or name == "net"
    assert te.linear.code if name != "mlp" else te._modules["0"].code
    for path, sub in tt.named_modules():
        mine = te.get_submodule(path) if path else te
        if "argument_1" in mine.code or path in ("", "seq"):
            continue
        assert mine.code.replace("argument_1", "x") == sub.code, path


def test_submodules_have_code_graph_and_second_call_methods():
    te, tt, args_e, _ = _both("net")
    assert "torch.neg(argument_1)" in te.dg.code
    assert "def forward1(" in te.linear._jit_class.method_sources["forward1"]
    assert "(linear).forward1(" in te.code and "(linear).forward(" in te.code
    assert "torch.linear(" in te.linear.code and "weight = self.weight" in te.linear.code
    # the graphs print as torch's, but for value names (torch names some after its own
    # locals: %y, %x.1), the source line (torch's is inside its Linear, ember's the
    # user's call) and the classes' mangling (counted per process)
    def printed(g):
        ids = {}
        out = []
        for ln in str(g).splitlines():
            ln = re.sub(r" # .*$", "", re.sub(r"___torch_mangle_\d+\.", "", ln))
            out.append(re.sub(r"%([\w.]+)", lambda m: "%v" + ids.setdefault(m.group(1),
                                                                            str(len(ids))), ln))
        return out
    for path in ("dg", "linear"):
        assert printed(te.get_submodule(path).graph) == \
            printed(tt.get_submodule(path).graph), path
    assert "aten::neg(%argument_1)" in str(te.dg.graph)
    assert "aten::linear(" in str(te.linear.graph)
    assert [n.op for n in te.linear.graph.nodes] == ["_Linear"]   # the IR underneath
    with pytest.raises(RuntimeError, match="Trace submodules cannot be called"):
        te.linear(args_e[0])
    with pytest.raises(RuntimeError, match="Trace submodules cannot be called"):
        tt.linear(torch.rand(3, 4))
    # saved, loaded by torch: same results at another batch size
    buf = io.BytesIO()
    te.save(buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    x, h = np.random.RandomState(1).rand(2, 5, 4).astype("float32")
    want = te(ember.tensor(x), ember.tensor(h)).detach().numpy()
    np.testing.assert_allclose(loaded(torch.tensor(x), torch.tensor(h)).detach().numpy(),
                               want, rtol=1e-5, atol=1e-6)
    assert "(linear).forward1(" in loaded.code


def _loop_model(lib):
    nn = lib.nn

    class Cell(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x, h):
            return lib.tanh(self.linear(x) + h)

    class Loop(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = Cell()

        def forward(self, xs):
            h = lib.zeros(3, 4)
            for i in range(xs.size(0)):
                h = self.cell(xs[i], h)
            return h

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.loop = lib.jit.script(Loop())
            self.out = nn.Linear(4, 2)

        def forward(self, xs):
            return self.out(self.loop(xs)).relu()

    return Wrap()


def test_trace_through_a_scripted_loop_runs_at_any_length_and_torch_loads_it():
    ember.manual_seed(0)
    m = _loop_model(ember)
    xs = ember.rand(6, 3, 4)
    traced = ember.jit.trace(m, (xs,))
    assert "(loop).forward(xs, )" in traced.code
    buf = io.BytesIO()
    traced.save(buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    for n in (6, 2, 9):
        x = ember.rand(n, 3, 4)
        want = m(x).detach().numpy()
        np.testing.assert_allclose(traced(x).detach().numpy(), want, rtol=1e-6, atol=1e-6)
        got = loaded(torch.tensor(x.numpy())).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _factories(lib):
    nn = lib.nn

    class Zeros(nn.Module):
        def forward(self, x):
            return x + lib.zeros(3) + lib.zeros(2, 3)

    class Ones(nn.Module):
        def forward(self, x):
            return x * lib.ones(3) * lib.ones(2, 3)

    class Empty(nn.Module):
        def forward(self, x):
            return x + lib.empty(3) * 0 + lib.empty(2, 3) * 0

    class Rand(nn.Module):
        def forward(self, x):
            return x + lib.rand(3) * 0 + lib.rand(2, 3) * 0

    class Randn(nn.Module):
        def forward(self, x):
            return x + lib.randn(3) * 0 + lib.randn(2, 3) * 0

    return {"zeros": Zeros, "ones": Ones, "empty": Empty, "rand": Rand, "randn": Randn}


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "rand", "randn"])
def test_single_int_sizes_in_script(fn):
    x = np.ones(3, "float32")
    se = ember.jit.script(_factories(ember)[fn]())
    st = torch.jit.script(_factories(torch)[fn]())
    got = se(ember.tensor(x)).numpy()
    assert got.shape == tuple(st(torch.tensor(x)).shape) == (2, 3)
    if fn != "empty":  # empty's values are whatever the memory held (here times 0)
        np.testing.assert_array_equal(got, np.ones((2, 3), "float32"))
    buf = io.BytesIO()
    se.save(buf)
    buf.seek(0)
    assert tuple(torch.jit.load(buf)(torch.tensor(x)).shape) == (2, 3)


def _built_inside(lib, fill):
    def f(x):
        lin = lib.nn.Linear(4, 4)
        if fill == "zeros":
            lib.nn.init.zeros_(lin.bias)
        elif fill == "eye":
            lib.nn.init.eye_(lin.weight)
        return lin(x)
    return f


@pytest.mark.parametrize("fill", [None, "zeros", "eye"])
def test_a_module_built_inside_a_traced_function(fill):
    """Its initial fills are recorded as torch records them (``empty``, ``uniform_``,
    ``fill``): every call of the trace draws new parameters, the same numbers as torch's
    trace for the same seed. A fill ember writes outside its ops (``nn.init.eye_``)
    becomes a constant, with a TracerWarning at the user's line."""
    outs = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            t = lib.jit.trace(_built_inside(lib, fill), lib.ones(2, 4), check_trace=False)
        if lib is ember:
            mine = [w for w in rec if issubclass(w.category, ember.jit.TracerWarning)]
            assert bool(mine) == (fill == "eye")
            assert all(w.filename == __file__ and "nn.init wrote values" in str(w.message)
                       for w in mine)
        lib.manual_seed(1)
        outs.append([t(lib.ones(n, 4)).detach().numpy() for n in (2, 5)])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_a_scripted_module_called_by_a_traced_function_runs_its_loop():
    ember.manual_seed(0)
    loop = _loop_model(ember).loop
    traced = ember.jit.trace(lambda xs: loop(xs) * 2, (ember.rand(5, 3, 4),))
    for n in (5, 2):
        x = ember.rand(n, 3, 4)
        np.testing.assert_allclose(traced(x).detach().numpy(), (loop(x) * 2).detach().numpy(),
                                   rtol=1e-6)
    assert "not expressible in TorchScript" in traced.code and "not a submodule" in traced.code


def test_select_called_as_an_op_is_written():
    class M(ember.nn.Module):
        def forward(self, x):
            return x.select(0, 1) + x.select(1, -1)[:, None].sum()

    m = M()
    traced = ember.jit.trace(m, ember.rand(3, 3))
    buf = io.BytesIO()
    traced.save(buf)
    buf.seek(0)
    x = ember.rand(3, 3)
    got = torch.jit.load(buf)(torch.tensor(x.numpy())).numpy()
    np.testing.assert_allclose(got, m(x).numpy(), rtol=1e-6)


# ----- every submodule the trace called, over the jit and viz zoos -----------------------
def _zoo_cases():
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jit_trace_zoo
    import viz_zoo_models
    cases = {}
    ze, zt = jit_trace_zoo.models(ember), jit_trace_zoo.models(torch)
    for name in sorted(ze):
        cases["jit:" + name] = (ze[name][0], zt[name][0], ze[name][1], zt[name][1])
    for name in viz_zoo_models.ZOO:
        x = viz_zoo_models.example_input(name)
        cases["viz:" + name] = (lambda n=name: viz_zoo_models.build(ember, n),
                                lambda n=name: viz_zoo_models.build(torch, n),
                                lambda b, x=x: (ember.tensor(x),),
                                lambda b, x=x: (torch.tensor(x),))
    return cases


ZOO = _zoo_cases()


def _tensors(tree, lib):
    if isinstance(tree, (tuple, list)):
        return [t for x in tree for t in _tensors(x, lib)]
    if isinstance(tree, dict):
        return [t for x in tree.values() for t in _tensors(x, lib)]
    return [tree] if isinstance(tree, lib.Tensor) else []


def _distinct(values):
    out = []
    for v in values:
        if not any(v is u for u in out):
            out.append(v)
    return out


def _tensor_ops(graph):
    """The printed graph's tensor computations in order: ``(aten op, result type)`` for
    each aten call with a tensor result (``requires_grad`` left out: torch's traced
    convolution says 0 there), and its ``prim::CallMethod`` calls. What is left out
    differs by design: the int bookkeeping of sizes (torch turns each into a 0-d tensor,
    ``prim::NumToTensor``/``aten::Int``, and computes on those), constants, lists,
    attribute reads and value names."""
    out = []
    for ln in str(graph).splitlines():
        lhs, sep, rhs = ln.partition(" = ")
        m = re.match(r"(aten|prim)::\w+", rhs) if sep else None
        if m is None:
            continue
        size_math = re.search(r": Long\(requires_grad=\d, device=\w+\)$", lhs)
        if m.group(0) == "prim::CallMethod" or \
                (m.group(1) == "aten" and "requires_grad=" in lhs and not size_math):
            first = re.sub(r"^\s*%[\w.]+ : ", "", lhs).split(", %")[0]
            out.append((m.group(0), re.sub(r"requires_grad=\d, ", "", first)))
    return out


# submodules whose graphs compute differently from torch's, with the same values:
# torch's RNNCell kernel adds the two projections in place (``aten::add_``)
TENSOR_OPS_DIFFER = {("jit:dynamic_rnn", "cells.0"), ("jit:dynamic_rnn", "cells.1")}


def _renumbered(graph):
    """The printed graph's lines with values renumbered in order of appearance, without
    source lines (torch's are inside its modules), class manglings (counted per
    process) and ``requires_grad`` flags (torch's traced convolution says 0)."""
    ids = {}
    out = []
    for ln in str(graph).splitlines():
        ln = re.sub(r" # .*$", "", re.sub(r"___torch_mangle_\d+\.", "", ln))
        ln = re.sub(r"requires_grad=\d", "", ln)
        out.append(re.sub(r"%([\w.]+)", lambda m: "%v" + ids.setdefault(m.group(1),
                                                                        str(len(ids))), ln))
    return out


# submodules whose printed graph differs from torch's in more than value numbers: the
# RNN cells (above, and torch's cell takes its arguments and reads its weights in
# another order); attention, where torch computes on its sizes as 0-d tensors
# (``aten::mul(%bsz, %2)`` of a ``prim::NumToTensor``; ember's code on ints) and reads
# ``out_proj``'s parameters first
TEXT_DIFFERS = TENSOR_OPS_DIFFER | {
    ("jit:transformer", "enc.layers.0.self_attn"), ("jit:transformer", "enc.layers.1.self_attn"),
    ("viz:transformer_layer", "self_attn")}


@pytest.mark.parametrize("case", sorted(ZOO))
def test_every_called_submodule_has_code_graph_and_a_forward_that_runs(case):
    """As in PyTorch, each submodule the trace called has its own traced ``forward``
    (``.code``, ``.graph``; run through the compiled method, as torch's ``_c.forward``),
    and it gives on that call's inputs what the eager submodule gives; a submodule the
    trace never called has none (torch's errors)."""
    make_e, make_t, inputs_e, inputs_t = ZOO[case]
    ember.manual_seed(0)
    torch.manual_seed(0)
    m, tm = make_e().eval(), make_t().eval()
    tm.load_state_dict({k: torch.tensor(v.detach().numpy())
                        for k, v in m.state_dict().items()})
    args_e, args_t = inputs_e(2), inputs_t(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        te = ember.jit.trace(m, args_e, strict=False, check_trace=False)
        tt = torch.jit.trace(tm, args_t, strict=False, check_trace=False)
    # each submodule's inputs and output in an eager run (its first call)
    seen = {}

    def hook(path):
        def record(mod, args, kwargs, out):
            # copies: a later in-place op (ReLU(inplace=True)) must not change them
            seen.setdefault(path, ([t.detach().clone() for t in
                                    _distinct(_tensors((args, kwargs), ember))],
                                   [t.detach().clone() for t in _tensors(out, ember)]))
        return record
    handles = [s.register_forward_hook(hook(p), with_kwargs=True)
               for p, s in m.named_modules() if p]
    with ember.no_grad():
        m(*args_e)
    for h in handles:
        h.remove()
    called = [p for p, s in tt.named_modules() if p and "forward" in s._c._method_names()]
    assert called, case
    for path in called:
        sub = te.get_submodule(path)
        assert "def forward(self" in sub.code, path
        # torch's IR text (read off the code), not ember's IR printed as a fallback
        g = sub.graph
        assert g.printer is not None and str(g) == g.printer(), path
        assert str(g).startswith(f"graph(%self : {sub.qualified_name},"), path
        same = _tensor_ops(g) == _tensor_ops(tt.get_submodule(path).graph)
        assert same != ((case, path) in TENSOR_OPS_DIFFER), (path, str(g))
        same = _renumbered(g) == _renumbered(tt.get_submodule(path).graph)
        assert same != ((case, path) in TEXT_DIFFERS), (path, str(g))
        args, want = seen[path]
        # the method takes its arguments in the order its ops first read them, as
        # torch's does (an encoder's mask first): matched by shape and dtype
        pool, ordered = list(args), []
        for v in sub._jit_inlined_graphs["forward"].inputs:
            k = next(i for i, a in enumerate(pool) if tuple(a.shape) == tuple(v.shape) and
                     a.dtype == v.dtype)
            ordered.append(pool.pop(k))
        got = _tensors(sub._jit_method("forward")(*ordered), ember)
        assert got, path
        # the method returns the call's result flattened, without what the trace
        # dropped: each tensor it returns is the next matching one of the eager result
        rest = list(want)
        for g in got:
            while rest and not (tuple(rest[0].shape) == tuple(g.shape) and np.allclose(
                    rest[0].detach().numpy(), g.detach().numpy(), rtol=1e-5, atol=1e-6)):
                rest.pop(0)
            assert rest, (path, "output differs from eager")
            rest.pop(0)
    for path, _ in tt.named_modules():
        if path and path not in called:
            sub = te.get_submodule(path)
            with pytest.raises(AttributeError):
                _ = sub.code
            with pytest.raises(RuntimeError, match="Method 'forward' is not defined"):
                _ = sub.graph


def _rnn_attention(lib):
    nn = lib.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(4, 5, batch_first=True)
            self.lin = nn.Linear(5, 5)
            self.drop = nn.Dropout(0.1)
            self.att = nn.MultiheadAttention(5, 1, batch_first=True)
            self.idn = nn.Identity()
            self.unused = nn.Linear(2, 2)

        def forward(self, x):
            y, (h, c) = self.lstm(x)
            y = self.drop(self.lin(y))
            a, w = self.att(y, y, y)
            return a + h.transpose(0, 1) + c.sum(), self.idn(x)

    return M()


def test_lstm_attention_dropout_submodules_are_methods_as_torch_writes_them():
    ember.manual_seed(0)
    m, tm = _rnn_attention(ember).eval(), _rnn_attention(torch).eval()
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    x = np.random.RandomState(0).rand(2, 3, 4).astype("float32")
    te = ember.jit.trace(m, ember.tensor(x))
    tt = torch.jit.trace(tm, torch.tensor(x))

    def signature(code):
        return code.split(":\n")[0]
    for path in ("lstm", "lin", "drop", "att", "idn"):
        assert signature(te.get_submodule(path).code) == \
            signature(tt.get_submodule(path).code), path
    # the LSTM's (out, (h, c)) flattened and unpacked where torch.lstm is called; the
    # attention weights nothing used are not returned; the one argument passed thrice
    # (named as torch names them: after the Python locals holding them where they are read,
    # ``input`` in Linear.forward, ``h, c`` in the caller)
    assert "\n  input, h, c = torch.lstm(x, " in te.lstm.code
    assert "\n  input, h, c = torch.lstm(x, " in tt.lstm.code
    assert "-> Tuple[Tensor, Tensor, Tensor]:" in te.lstm.code
    assert "(att).forward(" in te.code
    # dropout in eval mode and an identity recorded nothing: written as torch writes
    # them (torch.dropout(x, p, False); a call of no arguments returning None)
    assert "return torch.dropout(argument_1, 0.1, False)" in te.drop.code
    assert te.idn.code == tt.idn.code == "def forward(self) -> NoneType:\n  return None\n"
    assert re.search(r"_\d+ = \(idn\)\.forward\(\)", te.code)
    assert re.search(r" = aten::dropout\(%argument_1, %\d+, %\d+\), scope: __module\.drop\n",
                     str(te.drop.graph))
    for path in ("unused", "att.out_proj"):   # never called
        with pytest.raises(AttributeError):
            _ = te.get_submodule(path).code
    buf = io.BytesIO()
    te.save(buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    x2 = np.random.RandomState(1).rand(3, 6, 4).astype("float32")
    want = m(ember.tensor(x2))
    for got in (te(ember.tensor(x2)), loaded(torch.tensor(x2))):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(),
                                       rtol=1e-5, atol=1e-6)
