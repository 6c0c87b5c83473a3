"""One forward pass of a model, captured as a small list of ops with module scopes and
output shapes: what ``SummaryWriter.add_graph`` and ``ember.viz.draw_module`` draw.

The capture reads ember's autograd graph (``grad_fn`` and its edges), so it sees every
op that takes part in differentiation: float inputs are made to require grad for the
capture, and ops on non-differentiable values only (integer indices, buffers updated in
place) are not shown. Module scopes come from forward hooks: when a module returns,
the ops reachable from its outputs that no inner module claimed are its own.

``capture(model, args)`` is the one function the drawing code depends on; it is meant
to be switched to the graph capture IR of ``ember.jit`` when that lands.
"""
import contextlib
import inspect
import re
from dataclasses import dataclass, field

from ember import _tensor
from ember.autograd.grad_mode import enable_grad
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


def _tensors(x):
    if isinstance(x, _tensor.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


@contextlib.contextmanager
def _recording_shapes(shapes):
    # Nodes do not keep their output's shape; for the length of one capture the record
    # step of every primitive notes it (restored on exit, also on error).
    record, record_many = Primitive._record, Primitive._record_many

    def _record(self, args, out):
        t = record(self, args, out)
        shapes[id(self)] = (self, tuple(t.shape))
        return t

    def _record_many(self, args, out):
        ts = record_many(self, args, out)
        shapes[id(self)] = (self, tuple(ts[0].shape))
        return ts

    Primitive._record, Primitive._record_many = _record, _record_many
    try:
        yield
    finally:
        Primitive._record, Primitive._record_many = record, record_many


def _edges(node):
    return getattr(node, "_edges", ()) or ()


def _claim(outputs, scope, scopes):
    """Give ``scope`` to every node reachable from ``outputs`` that has none yet."""
    stack = [t.grad_fn for t in outputs if t.grad_fn is not None]
    while stack:
        n = stack.pop()
        if id(n) in scopes:
            continue
        scopes[id(n)] = scope
        for e in _edges(n):
            if type(e) is tuple and id(e[0]) not in scopes:
                stack.append(e[0])


def _module_scopes(model):
    root = type(model).__name__
    scopes = {"": root}
    for name, m in model.named_modules():
        if name:
            parent, _, last = name.rpartition(".")
            scopes[name] = f"{scopes[parent]}/{type(m).__name__}[{last}]"
    return scopes


def capture(model, args):
    """Run ``model(*args)`` once (in eval mode, grad enabled) and return its ops."""
    if not isinstance(args, (tuple, list)):
        args = (args,)
    names = _module_scopes(model)
    inputs = []
    for a in args:
        if isinstance(a, _tensor.Tensor) and a.is_floating_point():
            a = a.detach().requires_grad_(True)
        inputs.append(a)
    scopes, shapes, handles = {}, {}, []
    for mname, m in model.named_modules():
        if mname:  # the root claims what is left after the forward
            def hook(mod, _args, out, scope=names[mname]):
                _claim(_tensors(out), scope, scopes)
            handles.append(m.register_forward_hook(hook))
    was_training = model.training
    model.train(False)
    try:
        with enable_grad(), _recording_shapes(shapes):
            out = model(*inputs)
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()
    outs = _tensors(out)
    _claim(outs, names[""], scopes)
    return _build(model, inputs, outs, scopes, shapes, names)


def _build(model, inputs, outs, scopes, shapes, names):
    try:
        arg_names = [p.name for p in inspect.signature(model.forward).parameters.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        arg_names = []
    ops, keys = [], {}
    for i, a in enumerate(inputs):
        if isinstance(a, _tensor.Tensor):
            key = keys[id(a)] = len(ops)
            nm = arg_names[i] if i < len(arg_names) else f"input.{i}"
            ops.append(CapturedOp(key, "input", nm, "", shape=tuple(a.shape)))
    param_names = {}
    for pname, p in model.named_parameters():
        owner, _, last = pname.rpartition(".")
        param_names[id(p)] = (last, names.get(owner, names[""]))

    def leaf_key(t):
        if id(t) not in keys:
            last, scope = param_names.get(id(t), ("constant", names[""]))
            keys[id(t)] = len(ops)
            ops.append(CapturedOp(len(ops), "param", last, scope, shape=tuple(t.shape)))
        return keys[id(t)]

    # post-order walk: an op is emitted after everything it reads
    stack = [(t.grad_fn, False) for t in reversed(outs) if t.grad_fn is not None]
    while stack:
        n, ready = stack.pop()
        if id(n) in keys:
            continue
        if not ready:
            stack.append((n, True))
            for e in reversed(list(_edges(n))):
                if type(e) is tuple and id(e[0]) not in keys:
                    stack.append((e[0], False))
            continue
        ins = []
        for e in _edges(n):
            if e is None:
                continue
            ins.append(keys[id(e[0])] if type(e) is tuple else leaf_key(e))
        node_name = n.name()
        keys[id(n)] = len(ops)
        shape = shapes.get(id(n), (None, None))[1]
        ops.append(CapturedOp(len(ops), "op", op_name(node_name),
                              scopes.get(id(n), names[""]), ins, shape, node_name))
    for i, t in enumerate(outs):
        src = keys.get(id(t.grad_fn)) if t.grad_fn is not None else keys.get(id(t))
        ops.append(CapturedOp(len(ops), "output", f"output.{i + 1}", "",
                              [] if src is None else [src], tuple(t.shape)))
    return Captured(names[""], ops)
