"""The demo's MLP (``Sequential(Flatten, Linear, ReLU, Linear, ReLU, Linear)``) records
the ops the user wrote, as torch does: every Linear and every ReLU has its own node in
the ``grad_fn`` graph, its own profiler row and its own forward hook call, and the
output of a Linear inside the Sequential keeps ``retain_grad``. Each Linear is torch's
``AddmmBackward0`` over (bias, input, ``TBackward0`` over the weight), compared below
node by node, inputs in order.
"""
import numpy as np
import torch

import ember
from ember.examples.mnist import build_model


def _model(lib):
    model = build_model("mlp", 8, 8) if lib is ember else torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    return model


def _walk(fn):
    """(name, inputs in order) of ``fn`` down to the leaves."""
    if fn is None:
        return None
    return (fn.name(), tuple(_walk(f) for f, _ in fn.next_functions))


def _x():
    return np.random.default_rng(0).standard_normal((4, 1, 8, 8)).astype(np.float32)


def test_grad_fn_graph_of_demo_mlp_equals_torch():
    walks = []
    for lib in (ember, torch):
        out = _model(lib)(lib.tensor(_x()))
        walks.append(_walk(out.grad_fn))
    assert walks[0] == walks[1]
    # the ReLUs are there: Addmm <- Relu <- Addmm <- Relu <- Addmm
    assert repr(walks[0]).count("ReluBackward0") == 2
    assert repr(walks[0]).count("AddmmBackward0") == 3
    assert repr(walks[0]).count("TBackward0") == 3


def test_profiler_rows_of_demo_mlp_follow_torch():
    """ember's profiler rows, in order, are torch's rows with the names ember records
    (torch adds the ops its kernels call inside, ``aten::t``, ``aten::expand``...)."""
    seqs = []
    for lib in (ember, torch):
        model = _model(lib)
        x = lib.tensor(_x())
        with lib.profiler.profile() as prof:
            model(x)
        seqs.append([e.name for e in prof.events()])
    ember_names = set(seqs[0])
    assert ember_names >= {"aten::addmm", "aten::relu"}
    assert seqs[0] == [n for n in seqs[1] if n in ember_names]
    assert seqs[0].count("aten::relu") == 2


def test_forward_hooks_and_retain_grad_as_torch():
    records = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        model = _model(lib)
        with lib.no_grad():
            for p, q in zip(model.parameters(), records[0][2] if records else ()):
                p.copy_(lib.tensor(q))
        seen, kept = [], []

        def hook(mod, inp, out, seen=seen, kept=kept, lib=lib):
            seen.append((type(mod).__name__, out.grad_fn.name() if out.grad_fn else None))
            if isinstance(mod, lib.nn.Linear):
                out.retain_grad()
                kept.append(out)
        for m in model:
            m.register_forward_hook(hook)
        model(lib.tensor(_x())).sum().backward()
        records.append((seen, [k.grad.numpy() for k in kept],
                        [p.detach().numpy().copy() for p in model.parameters()]))
    (es, eg, _), (ts, tg, _) = records
    assert es == ts
    assert len(eg) == len(tg) == 3
    for a, b in zip(eg, tg):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_compiled_plan_of_demo_mlp_equals_eager():
    """``ember.compile`` still runs each ReLU in place over its Linear's output."""
    model = _model(ember)
    x = ember.tensor(_x())
    eager = model(x)
    compiled = ember.compile(model)
    np.testing.assert_array_equal(compiled(x).detach().numpy(), eager.detach().numpy())


def test_draw_module_of_demo_mlp_has_a_box_per_module():
    from ember.viz import draw_module
    src = draw_module(_model(ember), ember.tensor(_x())).source
    for label in ("Flatten[0]", "Linear[1]", "ReLU[2]", "Linear[3]", "ReLU[4]", "Linear[5]",
                  "linear\n(4, 256)", "relu\n(4, 256)", "relu\n(4, 128)", "linear\n(4, 10)"):
        assert label in src, label


def test_tensorboard_graph_of_demo_mlp_has_torchs_module_scopes(tmp_path):
    """``SummaryWriter.add_graph``: the ops sit in torch's module scopes (Flatten[0],
    Linear[1], ReLU[2]...), with torch's op types in each."""
    import torch.utils.tensorboard as ttb
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ember.utils.tensorboard import SummaryWriter
    graphs = []
    for lib, writer in ((ember, SummaryWriter), (torch, ttb.SummaryWriter)):
        path = str(tmp_path / lib.__name__)
        with writer(path) as w:
            w.add_graph(_model(lib), lib.tensor(_x()))
        ea = EventAccumulator(path)
        ea.Reload()
        graphs.append(ea.Graph())

    def ops_by_scope(g):
        out = {}
        for n in g.node:
            if n.op.startswith("aten::") and "/" in n.name:
                scope = n.name.rsplit("/", 1)[0].split("/", 1)[1]
                out.setdefault(scope, set()).add(n.op)
        return out
    e, t = (ops_by_scope(g) for g in graphs)
    assert set(e) == set(t) == {"Flatten[0]", "Linear[1]", "ReLU[2]", "Linear[3]", "ReLU[4]",
                                "Linear[5]"}
    for scope in ("ReLU[2]", "ReLU[4]"):
        assert e[scope] == t[scope] == {"aten::relu"}
