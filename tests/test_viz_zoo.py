"""Pictures of the zoo (``tests/viz_zoo_models.py``: the demo's MLP and CNN, a ResNet
basic block, an LSTM language model, a Transformer encoder layer, a model with a custom
``autograd.Function``) checked against the real tools on torch, same model, same weights:

- ``ember.viz.make_dot`` DOT text equals the real torchviz's on torch (object ids
  numbered by first appearance);
- the real, unmodified torchviz run on ember tensors (``python -m ember run``) gives the
  same DOT text;
- ``SummaryWriter.add_graph``'s GraphDef, read back with TensorBoard's reader, has the
  nodes (module scope and op type), the edges and the input/output nodes of torch's
  ``add_graph``. Node names are compared without the value names of PyTorch's tracer
  (``Linear[1]/input.5`` is ember's ``Linear[1]/linear``), and torch's ``prim::Constant``
  and ``prim::ListConstruct`` nodes (its traced non-tensor arguments) are left out;
- ``draw_module`` draws one frame per module call.

Where ember's picture still differs the model is listed below with the reason; the test
fails when a listed model starts to match, so the lists only shrink.
"""
import json
import os
import re
import subprocess
import sys

import pytest
import torch
import torch.utils.tensorboard as ttb
import torchviz
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import ember
from ember.utils.tensorboard import SummaryWriter
from ember.viz import draw_module, make_dot

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import viz_zoo_models as Z  # noqa: E402

# models whose backward-graph DOT differs from torchviz's on torch, and why
DOT_DIFFERS = {
}
# models whose GraphDef differs from torch's add_graph, and why
GRAPHDEF_DIFFERS = {}
# torch's own add_graph cannot draw these (so there is nothing to compare with)
TORCH_ADD_GRAPH_FAILS = {
    "transformer_layer": "torch.jit.trace's check fails on TransformerEncoderLayer in eval "
                         "mode (TracingCheckError: graphs differ across invocations)",
}


def _norm(src):
    # node ids are object ids: number them in order of first appearance
    ids = {}
    return re.sub(r"\b\d{6,}\b", lambda m: ids.setdefault(m.group(0), f"n{len(ids)}"), src)


@pytest.fixture(scope="module")
def zoo():
    """{name: (weights, torchviz DOT of torch's loss)}."""
    out = {}
    for name in Z.ZOO:
        state = Z.weights(name)
        m = Z.model(torch, name, state)
        y = Z.loss(torch, name, m)
        out[name] = state, _norm(torchviz.make_dot(y, params=dict(m.named_parameters()))
                                 .source)
    return out


def test_make_dot_equals_torchviz_on_torch(zoo):
    equal = {}
    for name, (state, want) in zoo.items():
        m = Z.model(ember, name, state)
        got = _norm(make_dot(Z.loss(ember, name, m), params=dict(m.named_parameters())).source)
        equal[name] = got == want
    assert equal == {name: name not in DOT_DIFFERS for name in Z.ZOO}


_SCRIPT = """import json, sys
import numpy as np
import torch
from torchviz import make_dot
sys.path.insert(0, {here!r})
import viz_zoo_models as Z
out = {{}}
for name in Z.ZOO:
    data = np.load({weights!r} + name + ".npz")
    m = Z.model(torch, name, dict(data))
    y = Z.loss(torch, name, m)
    out[name] = make_dot(y, params=dict(m.named_parameters())).source
print(json.dumps(out))
"""


def test_real_torchviz_on_ember_equals_torchviz_on_torch(zoo, tmp_path):
    import numpy as np
    for name, (state, _) in zoo.items():
        np.savez(tmp_path / f"{name}.npz", **state)
    script = tmp_path / "draw.py"
    script.write_text(_SCRIPT.format(here=HERE, weights=str(tmp_path) + os.sep))
    run = subprocess.run([sys.executable, "-m", "ember", "run", str(script)],
                         capture_output=True, text=True, timeout=240,
                         env={**os.environ, "PYTHONPATH": ROOT}, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    drawn = json.loads(run.stdout.strip().splitlines()[-1])
    equal = {name: _norm(drawn[name]) == want for name, (_, want) in zoo.items()}
    assert equal == {name: name not in DOT_DIFFERS for name in Z.ZOO}


def _graph_def(lib, writer, name, state, path):
    m = Z.model(lib, name, state)
    with writer(path) as w:
        w.add_graph(m, lib.tensor(Z.example_input(name)))
    ea = EventAccumulator(path)
    ea.Reload()
    return ea.Graph()


def _canonical(g):
    """(nodes, edges) of a GraphDef with the tracer's value names taken out: a node is
    (scope, op type, k) for the k-th such node, a parameter (scope, attribute), an input
    or output ("input"/"output", k); constants and lists are passed through."""
    nodes = {n.name: n for n in g.node}
    canon, seen = {}, {}
    for n in g.node:
        if n.op == "IO Node":
            kind = n.name.split("/", 1)[0]
            key = (kind, seen.setdefault(kind, [0])[0])
            seen[kind][0] += 1
        elif n.op == "prim::GetAttr":
            # torch: Net/Linear[fc1]/weight/weight.1; ember: Net/Linear[fc1]/weight
            parts = n.name.split("/")
            if len(parts) > 2 and re.sub(r"\.\d+$", "", parts[-1]) == parts[-2]:
                parts = parts[:-1]
            key = ("param", "/".join(parts[1:-1]), parts[-1])
        elif n.op in ("prim::Constant", "prim::ListConstruct"):
            continue
        else:
            scope = n.name.rsplit("/", 1)[0].split("/", 1)[-1]
            k = seen.setdefault((scope, n.op), [0])
            key = (scope, n.op, k[0])
            k[0] += 1
        canon[n.name] = key

    def sources(name):
        n = nodes.get(name)
        if n is None:
            return []
        if n.op == "prim::ListConstruct":
            return [s for i in n.input for s in sources(i)]
        if n.op == "prim::Constant":
            return []
        return [canon[name]]
    edges = []
    for n in g.node:
        if n.name in canon and n.op != "prim::GetAttr":
            edges += [(s, canon[n.name]) for i in n.input for s in sources(i)]
    return sorted(map(repr, canon.values())), sorted(map(repr, edges))


def test_add_graph_graph_def_equals_torchs(zoo, tmp_path):
    equal = {}
    for name, (state, _) in zoo.items():
        if name in TORCH_ADD_GRAPH_FAILS:
            with pytest.raises(torch.jit.TracingCheckError):
                _graph_def(torch, ttb.SummaryWriter, name, state, str(tmp_path / f"t{name}"))
            # ember draws it all the same, every op in a module scope
            g = _graph_def(ember, SummaryWriter, name, state, str(tmp_path / f"e{name}"))
            assert any(n.op == "aten::layer_norm" for n in g.node)
            continue
        t = _canonical(_graph_def(torch, ttb.SummaryWriter, name, state,
                                  str(tmp_path / f"t{name}")))
        e = _canonical(_graph_def(ember, SummaryWriter, name, state,
                                  str(tmp_path / f"e{name}")))
        equal[name] = e == t
    assert equal == {name: name not in GRAPHDEF_DIFFERS for name in Z.ZOO
                     if name not in TORCH_ADD_GRAPH_FAILS}


def _module_calls(model, x):
    """The module calls of ``model(x)`` (not the model's own) that run an op: a call
    returning its input untouched (Dropout in eval mode; not an in-place ReLU) draws
    nothing."""
    calls = []

    def hook(mod, inputs, out, name):
        if not (len(inputs) == 1 and out is inputs[0] and not getattr(mod, "inplace", 0)):
            calls.append(name)
    hooks = [m.register_forward_hook(lambda mod, i, o, n=n: hook(mod, i, o, n))
             for n, m in model.named_modules() if n]
    try:
        with ember.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return calls


# the Transformer layer in eval mode takes PyTorch's fast path, which calls none of its
# attention's submodules (as torch's): the frames are not one per hooked call there
@pytest.mark.parametrize("name", [n for n in Z.ZOO if n != "transformer_layer"])
def test_draw_module_draws_a_frame_per_module_call(name):
    m = Z.model(ember, name, Z.weights(name))
    x = ember.tensor(Z.example_input(name))
    src = draw_module(m, x).source
    # a frame's label is its module path below the model: Block[b]/Linear[fc]
    labels = [lb.rsplit("/", 1)[-1] for lb in re.findall(r"\blabel=\"([^\"]+\])\"", src)]
    want = [f"{type(m.get_submodule(n)).__name__}[{n.rsplit('.', 1)[-1]}]"
            for n in _module_calls(m, x)]
    assert sorted(labels) == sorted(want)
