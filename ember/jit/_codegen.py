"""IR -> TorchScript source: the ``forward`` of a traced module in PyTorch's spelling.

A primitive's TorchScript spelling is its class's ``torchscript`` attribute: a string
is the aten function called on the op's arguments (``"exp"`` writes ``torch.exp(x)``),
a callable ``f(em, node, *args, **kwargs)`` writes the expression
(``torch._convolution(...)``); the emitters here are attached to their classes with
``@emits(SomeOpClass)``. The calls recorded by name (``view``, ``size``, factories...:
``ember._graph.names.RECORDED_CALLS``) have their rows in :data:`EMIT`. An op with no
spelling raises ``NotImplementedError`` naming it and the user's line that made it,
never a silent omission.

The forward is one inlined function: parameters are read as ``self.<path>.<name>``
(``getattr(self.layers, "0")`` where a path segment is not an identifier), sizes are
plain ``int`` values, tensors that are neither inputs nor parameters are
``CONSTANTS.c<i>``.

The registry and :class:`Emitter` are in :mod:`ember.jit._codegen_emitter`, the emitters
in :mod:`ember.jit._codegen_ops`, which this module imports so that importing it
registers every spelling.
"""
import re

from ember._graph.ir import Ref
from ember.jit import (
    _codegen_dim_ops,  # noqa: F401  (the ops along a dim, and the int-argument calls')
    _codegen_ops,  # noqa: F401  (registers every op's emitter)
    _codegen_pool_ops,  # noqa: F401  (the pooling family's)
    _codegen_value_ops,  # noqa: F401  (and the data-shaped calls')
)
from ember.jit._codegen_calls import call_args, call_graph, plan_calls
from ember.jit._codegen_emitter import (
    EMIT,
    Emitter,
    _attr_chain,
    _ident,
    call,
    emits,
    emitter,
    literal,
)

__all__ = ["EMIT", "emits", "emitter", "forward_source", "function_source", "Emitter",
           "call", "literal"]


def _type_of(spec):
    if isinstance(spec, Ref):
        return "Tensor" if spec.value.type == "Tensor" else spec.value.type
    if isinstance(spec, tuple):
        return "Tuple[" + ", ".join(_type_of(s) for s in spec) + "]"
    if isinstance(spec, list):
        inner = {_type_of(s) for s in spec}
        return f"List[{inner.pop() if len(inner) == 1 else 'Tensor'}]"
    if isinstance(spec, dict):
        inner = {_type_of(s) for s in spec.values()}
        return f"Dict[str, {inner.pop() if len(inner) == 1 else 'Tensor'}]"
    if spec is None:
        return "NoneType"
    raise NotImplementedError(f"jit codegen: output of type {type(spec).__name__}")


def _unpack_inputs(em, spec, src):
    """Statements binding the nested input ``spec`` from the local ``src``."""
    if isinstance(spec, Ref):
        em.names[id(spec.value)] = src
    elif isinstance(spec, (tuple, list)):
        for i, s in enumerate(spec):
            name = em.tmp(f"{src}[{i}]", "_in")
            _unpack_inputs(em, s, name)
    elif isinstance(spec, dict):
        for k, s in spec.items():
            name = em.tmp(f"{src}[{literal(k)}]", "_in")
            _unpack_inputs(em, s, name)


def _result(em, spec):
    if isinstance(spec, Ref):
        return em.e(spec)
    if isinstance(spec, tuple):
        items = [_result(em, s) for s in spec]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(spec, list):
        return "[" + ", ".join(_result(em, s) for s in spec) + "]"
    if isinstance(spec, dict):
        return "{" + ", ".join(f"{literal(k)}: {_result(em, s)}" for k, s in spec.items()) + "}"
    if spec is None:
        return "None"
    raise NotImplementedError(f"jit codegen: output {spec!r}")


def _body(graph, arg_names, constant_offset=0, plan=None, call=None):
    """(typed parameters, lines) of a method running ``graph`` (or, with ``call``, one
    submodule call of it); the calls ``plan`` writes as methods become method calls."""
    em = Emitter(graph, constant_offset)
    params = []
    if call is None:
        for spec, name in zip(graph.input_spec, arg_names):
            params.append(f"{name}: {_type_of(spec)}")
            _unpack_inputs(em, spec, name)
        nodes, prefix = graph.nodes, ""
    else:
        for v, name in zip(call_args(call), arg_names):
            params.append(f"{name}: {_type_of(Ref(v))}")
            em.names[id(v)] = name
        nodes, prefix = call.nodes, call.path + "."
        for qn, v in graph.params.items():
            if qn.startswith(prefix):
                em.names[id(v)] = _attr_chain(qn[len(prefix):])
    children = plan.children.get(id(call) if call is not None else None, ()) if plan else ()
    first = {id(c.nodes[0]): c for c in children if c.nodes}
    covered = {id(n) for c in children for n in c.nodes}
    header = len(em.lines)
    locals_ = {}
    # calls that recorded no nodes: written after the node recorded before them (once
    # it is written here; at once when it is not this method's) and their arguments
    empty = [c for c in children if not c.nodes]
    waiting = {id(c.after) for c in empty if c.after is not None} & \
        {id(n) for n in nodes}
    _empty_calls(em, empty, waiting, plan, prefix, locals_, header)
    for node in nodes:
        if id(node) in first:
            child = first[id(node)]
            _call_line(em, child, plan, prefix, locals_, header)
            waiting -= {id(n) for n in child.nodes}
            _empty_calls(em, empty, waiting, plan, prefix, locals_, header)
            continue
        if id(node) in covered:
            continue
        if node.op == "CallMethod":
            out = _script_call(em, node, prefix, locals_, header)
        else:
            fn = emitter(node)
            if fn is None:
                where = f" (made at {node.source[0]}:{node.source[1]})" if node.source else ""
                raise NotImplementedError(f"jit: no TorchScript spelling for the traced op "
                                          f"'{node.op}'{where}; ember cannot write .code or "
                                          "save this trace")
            out = fn(em, node, *node.args, **node.kwargs)
        if node.multi and node.op == "CallMethod":
            names = _out_names(em, node.outputs)
            em.lines.append(f"{''.join(n + ', ' for n in names)}= {out}")
        elif node.multi:
            names = [em.name(v) for v in node.outputs]
            tmp = _ASSIGN_TMP.match(em.lines[-1]) if em.lines and isinstance(out, list) \
                else None
            if tmp and len(names) > 1 and \
                    out == [f"{tmp.group(1)}[{i}]" for i in range(len(names))]:
                # every item of a call's tuple, in order: unpacked where it is made, as
                # PyTorch writes ``input, h, c = torch.lstm(...)``
                em.lines[-1] = f"{', '.join(names)} = {tmp.group(2)}"
            elif isinstance(out, list):
                for n, expr in zip(names, out):
                    em.lines.append(f"{n} = {expr}")
            else:
                lhs = ", ".join(names) + ("," if len(names) == 1 else "")
                em.lines.append(f"{lhs} = {out}")
        else:
            em.lines.append(f"{em.name(node.outputs[0])} = {out}")
        waiting.discard(id(node))
        _empty_calls(em, empty, waiting, plan, prefix, locals_, header)
    if call is not None and call.dropout_p is not None and not call.nodes:
        out = em.tmp_name("_100000")
        em.lines.append(f"{out} = torch.dropout({arg_names[0]}, "
                        f"{literal(call.dropout_p)}, False)")
        em.names[id(call.inputs[0])] = out
    spec = graph.output_spec if call is None else plan.outputs[id(call)]
    em.lines.append(f"return {_result(em, spec)}")
    own = [qn[len(prefix):] for qn in graph.params if qn.startswith(prefix) and
           "." not in qn[len(prefix):] and qn[len(prefix):].isidentifier()]
    return params, _tidy(em.lines, header, locals_, own, arg_names)


def _module_local(em, path, prefix, locals_, header):
    """The local holding submodule ``path`` (``linear = self.linear``), made once; a
    placeholder as long as the name, until :func:`_tidy` writes the reads."""
    if not path.startswith(prefix) and prefix:
        raise NotImplementedError(f"jit codegen: module {path!r} is called from outside "
                                  "its parent's forward")
    rel = path[len(prefix):]
    name = locals_.get(rel)
    if name is None:
        real = _ident(rel.replace(".", "_"))
        name = locals_[rel] = "@" + real[1:] if _TEMP.fullmatch(real) else real
    return name


_TEMP = re.compile(r"\b_\d+\b")
_ASSIGN_TMP = re.compile(r"^(_t\d+) = (.*)$")
_ASSIGN = re.compile(r"^([A-Za-z_]\w*) = (.*)$")


def _inline(body):
    """A temporary used once is written inside its single use when it is the statement
    just before (so the order of evaluation is kept) and its expression is short (under
    40 characters with the indent, PyTorch's limit), as PyTorch prints code."""
    uses = {}
    for ln in body:
        m = _ASSIGN.match(ln)
        for t in _TEMP.findall(m.group(2) if m else ln):
            uses[t] = uses.get(t, 0) + 1
    out = []  # [target or None, expression or whole line]
    for ln in body:
        m = _ASSIGN.match(ln)
        if m:
            target, expr = m.group(1), m.group(2)
        elif ln.startswith("return "):
            target, expr = "return", ln[7:]
        else:
            out.append([None, ln])
            continue
        found = _TEMP.findall(expr)
        if target == "return" and not found and expr.isidentifier():
            # a value named after a local is written inline only where it is returned
            # as it is (PyTorch keeps the names of the values it does not return)
            found = [expr]
            uses.setdefault(expr, sum(len(re.findall(rf"(?<![\w.]){expr}\b", ln))
                                      for ln in body) - 1)
        for t in reversed(found):
            prev = out[-1] if out else None
            if prev is None or prev[0] != t or uses.get(t) != 1 or len(prev[1]) + 2 >= 40:
                break
            out.pop()
            expr = re.sub(rf"\b{t}\b", lambda _m, e=prev[1]: e, expr, count=1)
        out.append([target, expr])
    return [e if t is None else (f"return {e}" if t == "return" else f"{t} = {e}")
            for t, e in out]


def _tidy(lines, header, locals_, own_params, args):
    """PyTorch's layout of a method body: the submodules and own parameters it reads
    bound first (``weight = self.weight``; the last read first, as PyTorch writes
    them), temporaries inlined (:func:`_inline`) and numbered ``_0, _1...`` in order."""
    body = lines[header:]
    reads = dict(locals_)
    taken = set(args)
    for p in own_params:
        if p not in taken and re.search(rf"\bself\.{p}\b", "\n".join(body)):
            body = [re.sub(rf"\bself\.{p}\b", p, ln) for ln in body]
            reads[p] = p
    text = "\n".join(body)  # in the order the calls ran
    first = {ph: (re.search(rf"(?<![\w.@]){re.escape(ph)}(?!\w)", text) or
                  re.search(re.escape(ph), text)).start() for ph in reads.values()}
    order = sorted(reads.items(), key=lambda kv: first[kv[1]], reverse=True)
    body = _inline(body)
    real = {ph: (ph if not ph.startswith("@") else "_" + ph[1:]) for ph in reads.values()}
    taken |= set(real.values())
    names, counter = {}, [0]

    def rename(m):
        old = m.group(0)
        if old not in names:
            while f"_{counter[0]}" in taken:
                counter[0] += 1
            names[old] = f"_{counter[0]}"
            counter[0] += 1
        return names[old]
    body = [_TEMP.sub(rename, ln) for ln in body]
    head = [f"{real[ph]} = {_attr_chain(rel)}" for rel, ph in order]
    out = lines[:header] + head + body
    for ph, r in real.items():
        if ph != r:
            out = [ln.replace(ph, r) for ln in out]
    return out


def _out_names(em, values, unnamed=False):
    """Names for the values a call returns (a fresh one where a value is named already;
    ``unnamed``: a numbered one where a value has a local's name)."""
    names = []
    for v in values:
        if id(v) in em.names:
            names.append(em.tmp_name())
        elif unnamed and not v.name.isdigit():
            names.append(em.tmp_name("_100000"))
            em.names[id(v)] = names[-1]
        else:
            names.append(em.name(v))
    return names


def _empty_calls(em, pending, waiting, plan, prefix, locals_, header):
    """Write, in the order they ran, the calls of ``pending`` (calls that recorded no
    nodes) whose node before them (``waiting``: the ids of those not yet written) and
    arguments are written; what they return is the argument itself, read under the
    call's result name from here on (``(drop).forward(_0, )`` feeds the next call)."""
    while pending:
        child = pending[0]
        if (child.after is not None and id(child.after) in waiting) or \
                not all(v.kind != "node" or id(v) in em.names for v in child.inputs):
            return
        pending.pop(0)
        _call_line(em, child, plan, prefix, locals_, header, rename=True)


def _call_line(em, child, plan, prefix, locals_, header, rename=False):
    local = _module_local(em, child.path, prefix, locals_, header)
    if id(child) in plan.passthrough:
        # PyTorch's trace keeps the call, without arguments; the caller reads the
        # argument itself
        em.lines.append(f"{em.tmp_name('_100000')} = ({local}).{plan.method[id(child)]}()")
        return
    args = "".join(f"{em.name(v)}, " for v in call_args(child))
    expr = f"({local}).{plan.method[id(child)]}({args})"
    spec = plan.outputs[id(child)]
    values = [spec.value] if isinstance(spec, Ref) else [r.value for r in spec]
    # fresh temporaries (``_tidy`` numbers every ``_<n>`` in order of appearance)
    # what a traced submodule call returns has no local's name: PyTorch makes the call's
    # output after the op inside that was named
    names = [em.tmp_name("_100000") for _ in values] if rename else \
        _out_names(em, values, unnamed=True)
    if isinstance(spec, Ref):
        em.lines.append(f"{names[0]} = {expr}")
    else:
        em.lines.append(f"{''.join(n + ', ' for n in names)}= {expr}")
    if rename:
        for v, n in zip(values, names):
            em.names[id(v)] = n


def _script_call(em, node, prefix, locals_, header):
    """A call of a TorchScript submodule (``CallMethod``): ``(loop).forward(xs, )``."""
    target = node.target
    if target.path is None:
        raise NotImplementedError("jit codegen: a traced function calls a TorchScript module "
                                  "that is not a submodule of the traced module; trace a "
                                  "module that holds it to write or save its code")
    local = _module_local(em, target.path, prefix, locals_, header)
    args = "".join(f"{em.e(a)}, " for a in node.args[1:])
    if node.kwargs:
        raise NotImplementedError(f"jit codegen: keyword arguments to {target.path}")
    return f"({local}).{target.method}({args})"


def _sub_arg_names(call):
    names = []
    for i, v in enumerate(call_args(call)):
        n = _ident(v.name) if v.kind == "input" else f"argument_{i + 1}"
        names.append(n if n not in names else f"argument_{i + 1}")
    return names


def _arg_names(graph):
    if graph.arg_names is not None and all(n.isidentifier() and n != "self"
                                           for n in graph.arg_names):
        return [_ident(n) for n in graph.arg_names]
    names = []
    for spec in graph.input_spec:
        v = spec.value if isinstance(spec, Ref) else None
        names.append(_ident(v.name) if v is not None else f"argument_{len(names) + 1}")
    return names


def forward_source(graph, name="forward", constant_offset=0, plan=None):
    """The TorchScript ``def forward(self, ...)`` running ``graph``."""
    params, lines = _body(graph, _arg_names(graph), constant_offset, plan)
    head = ",\n    ".join(["self"] + params)
    ret = _type_of(graph.output_spec)
    return f"def {name}({head}) -> {ret}:\n" + "".join(f"  {ln}\n" for ln in lines)


def _call_source(graph, call, name, plan):
    if id(call) in plan.passthrough:
        return f"def {name}(self) -> NoneType:\n  return None\n"
    params, lines = _body(graph, _sub_arg_names(call), 0, plan, call)
    head = ",\n    ".join(["self"] + params)
    ret = _type_of(plan.outputs[id(call)])
    return f"def {name}({head}) -> {ret}:\n" + "".join(f"  {ln}\n" for ln in lines)


def module_sources(graphs):
    """(``{submodule path: {method name: source}}``, constants, ``{(path, method):
    graph}``) for a traced module's graphs: the constants of all methods share one
    ``CONSTANTS`` table; ``forward``'s submodule calls are methods of their modules,
    as PyTorch writes a trace (``ember.jit._codegen_calls``)."""
    methods, constants, sub_graphs = {"": {}}, [], {}
    for name, g in graphs.items():
        offset = len(constants)
        plan = plan_calls(g) if name == "forward" and offset == 0 else None
        methods[""][name] = forward_source(g, name, offset, plan)
        if plan is not None:
            for c in plan.calls:
                m = plan.method[id(c)]
                methods.setdefault(c.path, {})[m] = _call_source(g, c, m, plan)
                sub_graphs[(c.path, m)] = call_graph(g, c, plan.outputs[id(c)],
                                                     id(c) in plan.passthrough)
        constants += [c.data for c in g.constants]
    return methods, constants, sub_graphs


def function_source(graph, name):
    """A free TorchScript function running ``graph`` (a traced function)."""
    if graph.params:
        raise NotImplementedError("jit codegen: a traced function that reads module "
                                  "parameters (trace the module instead)")
    params, lines = _body(graph, _arg_names(graph))
    ret = _type_of(graph.output_spec)
    head = ",\n    ".join(params)   # one parameter a line, as PyTorch prints a signature
    return f"def {_ident(name)}({head}) -> {ret}:\n" + \
        "".join(f"  {ln}\n" for ln in lines)


def aten_call_names(graph):
    """{id(node): the aten function PyTorch's tracer records for it} (``linear``,
    ``_convolution``, ``max_pool2d``): the function ``ember.jit`` writes for the node in
    TorchScript, the outermost call of its expression. Nodes without a TorchScript
    spelling are named from their backward node instead (see :func:`op_name`)."""
    import re

    from ember.jit._codegen_emitter import Emitter, emitter
    em = Emitter(graph)
    out = {}
    for n in graph.nodes:
        fn = emitter(n)
        if fn is None:
            continue
        try:
            expr = fn(em, n, *n.args, **n.kwargs)
        except NotImplementedError:  # no TorchScript form for these arguments
            continue
        m = re.match(r"[\w.]*?(\w+)\(", expr.strip()) if isinstance(expr, str) else None
        if m:
            out[id(n)] = m.group(1)
        elif isinstance(expr, list):  # several outputs: the call recorded by name (lstm)
            out[id(n)] = n.op
    return out
