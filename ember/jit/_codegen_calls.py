"""Which submodule calls of a traced ``forward`` become TorchScript method calls.

PyTorch writes a traced module as one method per submodule call: the root's
``forward`` reads ``linear = self.linear`` and calls ``(linear).forward(x, )``, and
``traced.linear.code`` is that call's own ``forward`` (``forward1``, ``forward2``... for
the second and later calls of the same submodule). The capture notes every submodule
call (:class:`ember._graph.capture.ModuleCall`); a call is written as a method when its
nodes read only its arguments, its own parameters and buffers, constants and each other,
and nothing outside it reads a value it made except through its result. The method
returns the tensors of that result flattened, leaving out those nothing outside the call
reads, as PyTorch writes a traced call: ``nn.LSTM``'s ``(out, (h, c))`` is
returned as ``(out, h, c)``, ``nn.MultiheadAttention``'s unused weights not at all. A
call that recorded no nodes is written as PyTorch writes it: ``nn.Dropout`` in eval mode
as ``torch.dropout(argument_1, p, False)``, any other (``nn.Identity``) as a method of
no arguments returning None, its caller reading the argument itself. Any other call is
written inline in its caller, as before.
"""
from ember._graph.ir import Graph, Ref

__all__ = ["Plan", "plan_calls", "call_args", "call_graph", "written_outputs"]


class Plan:
    """The calls written as methods: ``children[id(call or None)]`` lists the calls
    made directly by the root (``None``) or by a call, ``method[id(call)]`` names each
    call's method, ``owner[id(node)]`` is the outermost written call a node belongs to
    below its caller."""

    def __init__(self):
        self.children = {None: []}
        self.method = {}
        self.calls = []
        self.outputs = {}   # id(call): what its method returns (a Ref or a tuple of Refs)
        self.passthrough = set()   # id(call): no nodes, no dropout: ``forward(self)``


def _leaves(spec, out):
    if isinstance(spec, Ref):
        out.append(spec.value)
    elif isinstance(spec, (tuple, list)):
        for s in spec:
            if not _leaves(s, out):
                return False
    elif spec is not None:
        return False
    return True


def written_outputs(call, alive, users=None, out_ids=()):
    """What the method of ``call`` returns: its result's tensors flattened, those the
    trace dropped (not in ``alive``, the ids of the values the graph still makes) left
    out, and with ``users`` (``Graph.users()``) those nothing outside the call reads
    (PyTorch's traced ``nn.GRU`` returns only the output its caller used); a Ref, a
    tuple of Refs, or None when the result cannot be written."""
    leaves = []
    if call.output_spec is None or not _leaves(call.output_spec, leaves):
        return None
    ins = {id(v) for v in call.inputs}
    if users is not None and isinstance(call.nodes, list):
        mine = {id(n) for n in call.nodes}
        alive = {id(v) for v in leaves if id(v) in out_ids or
                 any(id(u) not in mine for u in users.get(id(v), ()))}
    live = [v for v in leaves if v.kind != "node" or id(v) in alive or id(v) in ins]
    if not live:
        return None
    return Ref(live[0]) if len(live) == 1 else tuple(Ref(v) for v in live)


def call_args(call):
    """The arguments of a written call's method: its input values, each once (a value
    passed twice, ``attn(y, y, y)``, is one argument, as PyTorch writes it), in the
    order its nodes first read them (PyTorch's traced ``TransformerEncoder`` takes the
    mask it converts first before the input)."""
    out = []
    for v in call.inputs:
        if not any(v is u for u in out):
            out.append(v)
    if isinstance(call.nodes, list) and call.nodes:
        first = {}
        for i, n in enumerate(call.nodes):
            for v in n.inputs:
                first.setdefault(id(v), i)
        out.sort(key=lambda v: first.get(id(v), len(call.nodes)))
    return out


def _writable(call, graph, users, out_ids, alive):
    if call.inputs is None or not isinstance(call.nodes, list):
        return False
    spec = written_outputs(call, alive, users, out_ids)
    if spec is None:
        return False
    outs = [spec.value] if isinstance(spec, Ref) else [r.value for r in spec]
    if not call.nodes:   # nothing recorded: the call returns (some of) its arguments
        return all(any(v is u for u in call.inputs) for v in outs)
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
    alive = {id(v) for n in graph.nodes for v in n.outputs}
    enclosing = []  # (call, its node ids, written?) of the calls around the current one
    counts = {}
    for call in graph.calls:
        nodes = call.nodes if isinstance(call.nodes, list) else []
        ids = {id(n) for n in nodes}
        if not nodes:
            # no nodes to place it: inside the innermost enclosing call that made or
            # received its arguments (the root when none did)
            while enclosing and not _inside(call, enclosing[-1]):
                enclosing.pop()
        else:
            while enclosing and not ids <= enclosing[-1][1]:
                enclosing.pop()
        parent = enclosing[-1] if enclosing else None
        ok = parent is None or (parent[2] and call.path.startswith(parent[0].path + "."))
        ok = ok and _writable(call, graph, users, out_ids, alive)
        if nodes:
            enclosing.append((call, ids, ok))
        if not ok:
            continue
        plan.outputs[id(call)] = written_outputs(call, alive, users, out_ids)
        if not nodes and call.dropout_p is None:
            plan.passthrough.add(id(call))
        k = counts.get(call.path, 0)
        counts[call.path] = k + 1
        plan.method[id(call)] = "forward" if k == 0 else f"forward{k}"
        plan.children.setdefault(id(parent[0]) if parent else None, []).append(call)
        plan.children.setdefault(id(call), [])
        plan.calls.append(call)
    return plan


def _inside(call, outer):
    """Whether ``outer`` (call, its node ids, written?) made or received every argument
    of ``call``, a call that recorded no nodes, and ``call`` is its submodule's."""
    c, ids, _ = outer
    if not call.path.startswith(c.path + "."):
        return False
    return all(any(v is u for u in c.inputs or ()) or (v.node is not None and
                                                      id(v.node) in ids)
               for v in call.inputs)


def call_graph(root, call, outputs=None, passthrough=False):
    """The IR of one written call, for ``traced.<submodule>.graph``: its arguments,
    its module's parameters (by their path below it), the constants it reads and its
    nodes."""
    g = Graph()
    g.nodes = list(call.nodes)
    g.inputs = call_args(call)
    prefix = call.path + "."
    read = {id(v) for n in call.nodes for v in n.inputs}
    g.params = {qn[len(prefix):]: v for qn, v in root.params.items()
                if qn.startswith(prefix) and id(v) in read}
    g.constants = [c for c in root.constants if id(c) in read]
    g.input_spec = tuple(Ref(v) for v in g.inputs)
    g.output_spec = call.output_spec if outputs is None else outputs
    if passthrough:  # ``def forward(self) -> NoneType``
        g.inputs, g.input_spec, g.output_spec = [], (), None
    return g
