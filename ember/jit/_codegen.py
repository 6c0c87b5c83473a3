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
from ember._graph.ir import Ref
from ember.jit import _codegen_ops  # noqa: F401  (registers every op's emitter)
from ember.jit._codegen_emitter import EMIT, Emitter, _ident, call, emits, emitter, literal

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


def _body(graph, arg_names, constant_offset=0):
    em = Emitter(graph, constant_offset)
    params = []
    for spec, name in zip(graph.input_spec, arg_names):
        params.append(f"{name}: {_type_of(spec)}")
        _unpack_inputs(em, spec, name)
    for node in graph.nodes:
        fn = emitter(node)
        if fn is None:
            where = f" (made at {node.source[0]}:{node.source[1]})" if node.source else ""
            raise NotImplementedError(f"jit: no TorchScript spelling for the traced op "
                                      f"'{node.op}'{where}; ember cannot write .code or save "
                                      "this trace")
        out = fn(em, node, *node.args, **node.kwargs)
        if node.multi:
            names = [em.name(v) for v in node.outputs]
            if isinstance(out, list):
                for n, expr in zip(names, out):
                    em.lines.append(f"{n} = {expr}")
            else:
                em.lines.append(f"{', '.join(names)} = {out}")
        else:
            em.lines.append(f"{em.name(node.outputs[0])} = {out}")
    em.lines.append(f"return {_result(em, graph.output_spec)}")
    return params, em.lines


def _arg_names(graph):
    if graph.arg_names is not None and all(n.isidentifier() and n != "self"
                                           for n in graph.arg_names):
        return [_ident(n) for n in graph.arg_names]
    names = []
    for spec in graph.input_spec:
        v = spec.value if isinstance(spec, Ref) else None
        names.append(_ident(v.name) if v is not None else f"argument_{len(names) + 1}")
    return names


def forward_source(graph, name="forward", constant_offset=0):
    """The TorchScript ``def forward(self, ...)`` running ``graph``."""
    params, lines = _body(graph, _arg_names(graph), constant_offset)
    head = ",\n    ".join(["self"] + params)
    ret = _type_of(graph.output_spec)
    return f"def {name}({head}) -> {ret}:\n" + "".join(f"  {ln}\n" for ln in lines)


def module_sources(graphs):
    """(``{method name: source}``, constants) for a traced module's graphs; the
    constants of all methods share one ``CONSTANTS`` table."""
    methods, constants = {}, []
    for name, g in graphs.items():
        offset = len(constants)
        methods[name] = forward_source(g, name, offset)
        constants += [c.data for c in g.constants]
    return methods, constants


def function_source(graph, name):
    """A free TorchScript function running ``graph`` (a traced function)."""
    if graph.params:
        raise NotImplementedError("jit codegen: a traced function that reads module "
                                  "parameters (trace the module instead)")
    params, lines = _body(graph, _arg_names(graph))
    ret = _type_of(graph.output_spec)
    return f"def {_ident(name)}({', '.join(params)}) -> {ret}:\n" + \
        "".join(f"  {ln}\n" for ln in lines)
