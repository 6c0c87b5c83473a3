"""Backward node names against torch over every oracle table: for each case, the node
that produced the first differentiable output has PyTorch's ``name()`` and class name,
and its ``next_functions`` has PyTorch's length.

Cases where ember's graph has a different top node (a composite op whose last step is
another primitive, a fused torch kernel ember writes as several ops) are listed in
``node_name_gaps.txt``; the test fails when a listed case starts to match (remove it)
and when an unlisted one stops matching.

The whole graph is compared too: from the top node down to the ``AccumulateGrad``
leaves, every node's name and its ``next_functions`` (which node, which of its outputs,
or None) in order. Cases whose graphs differ are listed in ``node_graph_gaps.txt`` under
the same rule. In both lists a line may carry its reason after a ``#``.
``python tests/test_node_names.py`` rewrites both lists (keeping the reasons).
"""
import functools
import glob
import importlib
import os
import sys
import warnings

import numpy as np
import torch

import ember

HERE = os.path.dirname(os.path.abspath(__file__))
GAPS = os.path.join(HERE, "node_name_gaps.txt")
GRAPH_GAPS = os.path.join(HERE, "node_graph_gaps.txt")
sys.path.insert(0, HERE)
from oracle import Case, _outputs, _tensors, make_inputs  # noqa: E402


def _tables():
    seen = set()
    for path in sorted(glob.glob(os.path.join(HERE, "test_*.py"))):
        modname = os.path.basename(path)[:-3]
        if modname == "test_node_names":
            continue
        mod = importlib.import_module(modname)
        for table, v in list(vars(mod).items()):
            if isinstance(v, list) and v and all(isinstance(c, Case) for c in v):
                for c in v:
                    if id(c) not in seen:
                        seen.add(id(c))
                        yield f"{modname}::{table}::{c.name}", c


def _top(lib, case, arrays, rg):
    ins = _tensors(arrays, rg)[0 if lib is ember else 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = _outputs((case.graph_fn or case.fn)(lib, *ins))
    fns = [o.grad_fn for o in outs if isinstance(o, (ember.Tensor, torch.Tensor))
           and o.grad_fn is not None]
    return fns[0] if fns else None


def graph(fn):
    """The graph below node ``fn`` as a tuple, one entry per node in breadth-first order:
    ``(name, ((child's index, input_nr) or None, ...))``; equal tuples mean equal graphs
    (names, edges, their order and which nodes are shared)."""
    index, queue, rows = {id(fn): 0}, [fn], []
    for node in queue:          # grows as new nodes are found
        kids = []
        for child, nr in node.next_functions:
            if child is None:
                kids.append(None)
                continue
            if id(child) not in index:
                index[id(child)] = len(queue)
                queue.append(child)
            kids.append((index[id(child)], nr))
        rows.append((node.name(), tuple(kids)))
    return tuple(rows)


def graph_diff(e, t):
    """The first node where two :func:`graph` tuples part, as text."""
    for i, (a, b) in enumerate(zip(e, t)):
        if a != b:
            return f"node {i}: ember {a} torch {b}"
    return f"ember has {len(e)} nodes, torch {len(t)}"


@functools.lru_cache(maxsize=1)
def survey():
    """{case id: (ember's name, torch's name, ember's edges, torch's edges, graphs equal)}
    for every case whose torch output has a graph."""
    out = {}
    for key, case in _tables():
        arrays = make_inputs(case)
        rg = case.requires_grad
        if rg is None:
            rg = [isinstance(a, np.ndarray) and a.dtype.kind == "f" and case.grad
                  for a in arrays]
        try:
            t = _top(torch, case, arrays, rg)
            if t is None:
                continue
            e = _top(ember, case, arrays, rg)
        except Exception as err:  # a case made to raise (an error table)
            out[key] = (f"raised {type(err).__name__}", "", 0, 0, False)
            continue
        out[key] = (e.name() if e is not None else None, t.name(),
                    len(e.next_functions) if e is not None else -1, len(t.next_functions),
                    e is not None and graph(e) == graph(t))
        if e is not None:
            assert type(e).__name__ == e.name().rsplit("::", 1)[-1], key
    return out


def _gaps(result):
    return sorted(k for k, (en, tn, *_) in result.items() if en != tn)


def _graph_gaps(result):
    return sorted(k for k, r in result.items() if not r[4])


def read_gaps(path):
    """{case id: reason or ''} from a gaps file (``id  # reason`` lines)."""
    out = {}
    for line in open(path):
        key, _, why = line.partition("#")
        if key.strip():
            out[key.strip()] = why.strip()
    return out


def write_gaps(path, keys):
    """Rewrite a gaps file with ``keys``, keeping the reasons already written there."""
    old = read_gaps(path) if os.path.exists(path) else {}
    with open(path, "w") as f:
        for k in keys:
            f.write(f"{k}  # {old[k]}\n" if old.get(k) else f"{k}\n")


def test_node_names_equal_torch_over_oracle_tables():
    result = survey()
    known = set(read_gaps(GAPS))
    gaps = set(_gaps(result))
    equal = len(result) - len(gaps)
    print(f"\nnode names: {equal} of {len(result)} oracle cases equal torch's")
    assert not gaps - known, f"new differences from torch: {sorted(gaps - known)}"
    assert not known - gaps - {k for k in known if k not in result}, \
        f"now equal to torch, remove from node_name_gaps.txt: {sorted(known & set(result) - gaps)}"
    assert equal >= 1680
    # where the names agree, the number of inputs agrees too (no trailing (None, 0))
    edges = sorted(k for k, (en, tn, ne, nt, _) in result.items() if en == tn and ne != nt)
    assert len(edges) <= 1, edges


def test_whole_graphs_equal_torch_over_oracle_tables():
    """Every node from the output down to the leaves, with its edges in order."""
    result = survey()
    known = set(read_gaps(GRAPH_GAPS))
    gaps = set(_graph_gaps(result))
    print(f"\nwhole graphs: {len(result) - len(gaps)} of {len(result)} oracle cases equal "
          "torch's")
    assert not gaps - known, f"new differences from torch: {sorted(gaps - known)}"
    assert not known & set(result) - gaps, \
        f"now equal to torch, remove from node_graph_gaps.txt: {sorted(known & set(result) - gaps)}"



def _index_cases():
    full = slice(None)
    return [(0,), (-1,), (0, full), (full, 2), (full, 0, full), (0, Ellipsis), (Ellipsis, 1),
            (1, 2, 3), (slice(1, 3), 2), (0, slice(1, 3)), (slice(1, 3),), (full, None),
            (0, None), (Ellipsis,), (slice(0, 3),), (slice(None), slice(0, 4)),
            (slice(-3, None),), (None, Ellipsis, 0)]


def test_basic_index_node_names_as_torch():
    """``x[0]``, ``x[:, 2]``, ``x[None]``, ``x[...]``...: torch's last node is that of
    the last index item that does something (select, slice, unsqueeze; alias if none)."""
    for idx in _index_cases():
        names = []
        for lib in (ember, torch):
            x = lib.zeros(3, 4, 5, requires_grad=True)
            fn = x[idx].grad_fn
            names.append((fn.name(), len(fn.next_functions)))
        assert names[0] == names[1], idx


def test_composite_names_are_declared_on_the_functions():
    """The name is declared where the composite is defined, and only a node the call
    made is named (an in-place call keeps its node)."""
    F = ember.nn.functional
    cases = [
        (lambda m, x: m.nn.functional.mse_loss(x, m.zeros(3, 4)), "MseLossBackward0"),
        (lambda m, x: m.nn.functional.nll_loss(x, m.tensor([0, 1, 2])), "NllLossBackward0"),
        (lambda m, x: m.nn.functional.embedding(m.tensor([[0, 2]]), x), "EmbeddingBackward0"),
        (lambda m, x: m.nn.functional.gelu(x), "GeluBackward0"),
    ]
    for fn, name in cases:
        for lib in (ember, torch):
            out = fn(lib, lib.ones(3, 4, requires_grad=True))
            assert out.grad_fn.name() == name and type(out.grad_fn).__name__ == name
    x = ember.ones(3, 4, requires_grad=True) * 1
    node = x.grad_fn
    assert F.elu(x, inplace=True).grad_fn is not None and type(node).__name__ == "MulBackward0"

if __name__ == "__main__":
    res = survey()
    write_gaps(GAPS, _gaps(res))
    write_gaps(GRAPH_GAPS, _graph_gaps(res))
    print(f"names: {len(res) - len(_gaps(res))} of {len(res)} equal; wrote {GAPS}")
    print(f"graphs: {len(res) - len(_graph_gaps(res))} of {len(res)} equal; wrote {GRAPH_GAPS}")
    for k, (en, tn, ne, nt, _) in sorted(res.items()):
        if en == tn and ne != nt:
            print("edges differ:", k, en, ne, nt)
