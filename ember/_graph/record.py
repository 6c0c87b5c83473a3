"""Running a function once under a capture: its example inputs bound as graph inputs, a
module's parameters and buffers as graph parameters, its result as the graph's outputs.
Shared by ``jit.trace``, ``onnx.export``, ``compile``/``export`` and the graph pictures."""
import inspect

from ember import _tensor
from ember._graph.capture import _meta, capture
from ember._graph.ir import Ref

Tensor = _tensor.Tensor

__all__ = ["record", "arg_names", "rebuild"]


def arg_names(fn, n):
    """Names of the first ``n`` positional parameters of ``fn`` (``input_i`` beyond)."""
    try:
        ps = [p.name for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        ps = []
    if ps and ps[0] == "self" and not inspect.ismethod(fn):
        ps = ps[1:]
    return [ps[i] if i < len(ps) else f"input_{i}" for i in range(n)]


def _bind_inputs(st, tree, name):
    """Register the example inputs as graph inputs; returns their structure with Refs."""
    if isinstance(tree, Tensor):
        v = st.graph.add_input(name, _meta(tree))
        st.register(tree, v)
        return Ref(v)
    if isinstance(tree, (tuple, list)):
        return rebuild(tree, [_bind_inputs(st, x, name) for x in tree])
    if isinstance(tree, dict):
        return {k: _bind_inputs(st, x, name) for k, x in tree.items()}
    raise TypeError(f"Type '{type(tree).__name__}' cannot be traced. Only Tensors and "
                    "(possibly nested) Lists, Dicts, and Tuples of Tensors can be traced")


def _bind_outputs(st, tree, strict, frame):
    if isinstance(tree, Tensor):
        return Ref(st.value_of(tree))
    if isinstance(tree, (tuple, list, dict)) and strict and not isinstance(tree, tuple):
        kind = "list" if isinstance(tree, list) else "dict"
        raise RuntimeError(
            f"Encountering a {kind} at the output of the tracer might cause the trace to be "
            "incorrect, this is only valid if the container structure does not change based "
            "on the module's inputs. Consider using a constant container instead (e.g. for "
            "`list`, use a `tuple` instead. for `dict`, use a `NamedTuple` instead). If you "
            "absolutely need this and know the side effects, pass strict=False to trace() to "
            "allow this behavior.")
    if isinstance(tree, (tuple, list)):
        return rebuild(tree, [_bind_outputs(st, x, strict, frame) for x in tree])
    if isinstance(tree, dict):
        return {k: _bind_outputs(st, x, strict, frame) for k, x in tree.items()}
    if tree is None:
        return None
    raise RuntimeError(f"Only tensors, lists, tuples of tensors, or dictionary of tensors can "
                       f"be output from traced functions, got {type(tree).__name__}")


def rebuild(like, items):
    """A sequence of ``like``'s type (tuple, list or namedtuple) holding ``items``."""
    if isinstance(like, tuple) and hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def record(fn, args, module, strict, snapshot, script_calls=False, python_ops=False):
    """(graph, eager outputs, snapshots) of running ``fn(*args)`` once, recorded.
    ``script_calls``: a call of a TorchScript submodule is one ``CallMethod`` node;
    ``python_ops``: a custom ``autograd.Function`` call is one node."""
    names = {}
    if module is not None:
        names = {id(m): n for n, m in module.named_modules()}
    with capture(names, snapshot, script_calls, python_ops) as st:
        g = st.graph
        if module is not None:
            for qn, p in module.named_parameters():
                st.register(p, g.add_param(qn, "param", _meta(p), p))
            for qn, b in module.named_buffers():
                if b is not None:
                    st.register(b, g.add_param(qn, "buffer", _meta(b), b))
        g.arg_names = arg_names(fn, len(args))
        g.input_spec = tuple(_bind_inputs(st, a, n) for a, n in zip(args, g.arg_names))
        out = fn(*args)
        g.output_spec = _bind_outputs(st, out, strict, None)
    g.eliminate_dead_code()
    if st.int_reads:
        st.warn_unused_reads({id(v) for n in g.nodes for v in n.inputs} |
                             {id(v) for v in g.outputs()})
    return g, out, st.snapshots
