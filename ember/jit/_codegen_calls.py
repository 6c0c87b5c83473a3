"""Which submodule calls of a traced ``forward`` become TorchScript method calls.

PyTorch writes a traced module as one method per submodule call: the root's
``forward`` reads ``linear = self.linear`` and calls ``(linear).forward(x, )``, and
``traced.linear.code`` is that call's own ``forward`` (``forward1``, ``forward2``... for
the second and later calls of the same submodule). The capture notes every submodule
call (:class:`ember._graph.capture.ModuleCall`); a call is written as a method when its
nodes read only its arguments, its own parameters and buffers, constants and each other,
and nothing outside it reads a value it made except through its result (a tensor or a
flat tuple of tensors). Any other call is written inline in its caller, as before.
"""
from ember._graph.ir import Graph, Ref

__all__ = ["Plan", "plan_calls"]


class Plan:
    """The calls written as methods: ``children[id(call or None)]`` lists the calls
    made directly by the root (``None``) or by a call, ``method[id(call)]`` names each
    call's method, ``owner[id(node)]`` is the outermost written call a node belongs to
    below its caller."""

    def __init__(self):
        self.children = {None: []}
        self.method = {}
        self.calls = []


def _flat_outputs(spec):
    if isinstance(spec, Ref):
        return [spec.value]
    if isinstance(spec, tuple) and spec and all(isinstance(s, Ref) for s in spec):
        return [s.value for s in spec]
    return None


def _writable(call, graph, users, out_ids):
    if call.inputs is None or not isinstance(call.nodes, list) or not call.nodes:
        return False
    outs = _flat_outputs(call.output_spec)
    if outs is None:
        return False
    mine = {id(n) for n in call.nodes}
    ins = {id(v) for v in call.inputs}
    prefix = call.path + "."
    made = set()
    for n in call.nodes:
        for v in n.inputs:
            if id(v) in ins or v.kind == "constant" or \
                    (v.node is not None and id(v.node) in mine):
                continue
            if v.kind in ("param", "buffer") and v.name.startswith(prefix):
                continue
            return False
        made.update(id(v) for v in n.outputs)
    out_set = {id(v) for v in outs}
    if any(id(v) not in made and id(v) not in ins for v in outs):
        return False
    for n in call.nodes:
        for v in n.outputs:
            if id(v) in out_set:
                continue
            if id(v) in out_ids or any(id(u) not in mine for u in users.get(id(v), ())):
                return False
    return True


def plan_calls(graph):
    """The :class:`Plan` for ``graph`` (a traced module's ``forward``)."""
    plan = Plan()
    users = graph.users()
    out_ids = {id(v) for v in graph.outputs()}
    enclosing = []  # (call, its node ids, written?) of the calls around the current one
    counts = {}
    for call in graph.calls:
        nodes = call.nodes if isinstance(call.nodes, list) else []
        if not nodes:
            continue
        ids = {id(n) for n in nodes}
        while enclosing and not ids <= enclosing[-1][1]:
            enclosing.pop()
        parent = enclosing[-1] if enclosing else None
        ok = parent is None or (parent[2] and call.path.startswith(parent[0].path + "."))
        ok = ok and _writable(call, graph, users, out_ids)
        enclosing.append((call, ids, ok))
        if not ok:
            continue
        k = counts.get(call.path, 0)
        counts[call.path] = k + 1
        plan.method[id(call)] = "forward" if k == 0 else f"forward{k}"
        plan.children.setdefault(id(parent[0]) if parent else None, []).append(call)
        plan.children.setdefault(id(call), [])
        plan.calls.append(call)
    return plan


def call_graph(root, call):
    """The IR of one written call, for ``traced.<submodule>.graph``: its arguments,
    its module's parameters (by their path below it), the constants it reads and its
    nodes."""
    g = Graph()
    g.nodes = list(call.nodes)
    g.inputs = list(call.inputs)
    prefix = call.path + "."
    read = {id(v) for n in call.nodes for v in n.inputs}
    g.params = {qn[len(prefix):]: v for qn, v in root.params.items()
                if qn.startswith(prefix) and id(v) in read}
    g.constants = [c for c in root.constants if id(c) in read]
    g.input_spec = tuple(Ref(v) for v in call.inputs)
    g.output_spec = call.output_spec
    return g
