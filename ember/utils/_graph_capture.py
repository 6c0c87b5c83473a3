"""One forward pass of a model, as a small list of ops with module scopes and output
shapes: what ``SummaryWriter.add_graph`` and ``ember.viz.draw_module`` draw.

It is read from the graph IR of ``ember.jit`` (the one capture layer that ``jit.trace``,
ONNX export and compile use): every recorded call is an op, with the module path it ran
in and the shape of its result, including ops on integers and sizes that autograd
never sees.
"""
import inspect
import re
from dataclasses import dataclass, field

from ember.autograd.grad_mode import no_grad
from ember.autograd.node import Primitive

__all__ = ["Captured", "CapturedOp", "capture", "op_name"]


@dataclass
class CapturedOp:
    """One op: ``kind`` is 'input', 'param', 'op' or 'output'."""
    key: int
    kind: str
    name: str           # the op's name (``addmm``) or the input/parameter's name
    scope: str          # ``Net/Linear[fc1]``; '' for inputs and outputs
    inputs: list = field(default_factory=list)  # keys of the ops it reads
    shape: tuple = None
    node_name: str = ""  # PyTorch's backward node name, e.g. ``AddmmBackward0``
    n_outputs: int = 1   # a call that returned a tuple (``lstm``): how many items
    input_items: list = field(default_factory=list)  # which item of each input op is read
    op_type: str = ""   # the graph's op kind when not ``aten::<name>`` (``prim::PythonOp``)


@dataclass
class Captured:
    """A captured forward pass; ``ops`` are in an order where inputs come first."""
    model_name: str
    ops: list


def op_name(node_name):
    """``AddmmBackward0`` -> ``addmm``; ``MaxPool2DWithIndicesBackward0`` ->
    ``max_pool2d_with_indices`` (the forward op's name, as ATen spells it)."""
    base = re.sub(r"Backward\d*$", "", node_name.rsplit("::", 1)[-1]) or node_name
    base = re.sub(r"(\d)D", r"\1d", base)  # MaxPool2DWithIndices: max_pool2d_with_indices
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).lower()


def _module_scopes(model):
    root = type(model).__name__
    scopes = {"": root}
    for name, m in model.named_modules():
        if name:
            parent, _, last = name.rpartition(".")
            scopes[name] = f"{scopes[parent]}/{type(m).__name__}[{last}]"
    return scopes


def capture(model, args):
    """Run ``model(*args)`` once (in eval mode, without building a gradient graph) under
    ``ember.jit``'s capture layer and return its ops."""
    from ember._graph.record import record as _record
    if not isinstance(args, (tuple, list)):
        args = (args,)
    names = _module_scopes(model)
    was_training = model.training
    model.train(False)
    try:
        with no_grad():
            graph = _record(model, tuple(args), model, False, False, python_ops=True)[0]
    finally:
        model.train(was_training)
    return _build(model, graph, names)


def _shape(v):
    return tuple(v.shape) if v.type == "Tensor" and v.shape is not None else None


def _build(model, graph, names):
    try:
        arg_names = [p.name for p in inspect.signature(model.forward).parameters.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        arg_names = []
    ops, keys = [], {}
    items = {}  # id(value) -> its index among a multi-output node's items
    for i, v in enumerate(graph.inputs):
        keys[id(v)] = len(ops)
        nm = arg_names[i] if i < len(arg_names) else f"input.{i}"
        ops.append(CapturedOp(len(ops), "input", nm, "", shape=_shape(v)))
    root = names[""]

    def source_key(v):
        """The op that made ``v``; parameters and constants get an op when first read."""
        if id(v) not in keys:
            if v.kind in ("param", "buffer"):
                owner, _, last = v.name.rpartition(".")
                scope = names.get(owner, root)
            else:
                last, scope = "constant", root
            keys[id(v)] = len(ops)
            ops.append(CapturedOp(len(ops), "param", last, scope, shape=_shape(v)))
        return keys[id(v)]

    from ember import jit
    aten = jit.aten_call_names(graph)
    for n in graph.nodes:
        ins = [source_key(v) for v in n.inputs]
        node_name = getattr(n.target, "_node_name", "") if isinstance(n.target, type) else ""
        name = aten.get(id(n)) or (op_name(node_name) if node_name else n.op.replace(".", "_"))
        op_type = ""
        if isinstance(n.target, type) and not issubclass(n.target, Primitive):
            # a custom autograd.Function: PyTorch's one prim::PythonOp node, named for it
            name, op_type, node_name = n.target.__name__, "prim::PythonOp", ""
        elif n.inplace and not name.endswith("_"):
            name += "_"     # ``relu_``: the user's in-place call, as PyTorch records it
        key = len(ops)
        for i, o in enumerate(n.outputs):
            keys[id(o)] = key
            items[id(o)] = i
        ops.append(CapturedOp(key, "op", name, names.get(n.scope, root), ins,
                              _shape(n.outputs[0]) if n.outputs else None, node_name,
                              len(n.outputs) if n.multi else 1,
                              [items.get(id(v), 0) for v in n.inputs], op_type))
    for i, v in enumerate(graph.outputs()):
        src = source_key(v)
        ops.append(CapturedOp(len(ops), "output", f"output.{i + 1}", "", [src], _shape(v),
                              input_items=[items.get(id(v), 0)]))
    return Captured(root, ops)
