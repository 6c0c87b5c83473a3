"""The registry of ember's ONNX converters and the helpers they share.

A primitive's ONNX spelling is its class's ``onnx`` attribute: a string is one ONNX
node of that type over the op's operands (:func:`one_node`), a callable is a converter
``f(g, node, *args, **kwargs)``, attached to its class with ``@exports(SomeOpClass)``.
Calls the capture records above the primitives (``view``, ``x[key]``, factories, sizes:
``ember._graph.names.RECORDED_CALLS``) have no class, so their converters stay in
:data:`EXPORTERS`, keyed by those names.

The converters themselves live in ``ember/onnx/_export_ops.py`` (elementwise, linear
algebra, reductions, orderings), ``ember/onnx/_export_shape.py`` (shapes, joins,
indexing, creation), ``ember/onnx/_export_losses.py`` (losses) and
``ember/onnx/_export_nn.py`` (convolution, pooling, normalization, attention,
recurrent layers, random ops); importing ``ember.onnx._export_ops`` registers them all.
"""

import numpy as np

from ember._graph.ir import Ref
from ember._graph.names import RECORDED_CALLS, spelling
from ember.onnx._export import UnsupportedOnnxExport

__all__ = ["EXPORTERS", "exports", "converter", "one_node", "custom_symbolic",
           "exportable_ops"]

# converters of the recorded calls that are not primitives, by the name the capture
# records them under
EXPORTERS = {}


def exports(*targets):
    """Attach one converter to each target: a primitive class gets it as its ``onnx``
    spelling; a string names a call the capture records by name (``"view"``)."""
    def deco(fn):
        for t in targets:
            if isinstance(t, str):
                if t not in RECORDED_CALLS:
                    raise ValueError(f"ember.onnx: {t!r} is not a call the capture records")
                EXPORTERS[t] = fn
            else:
                if t.__dict__.get("onnx") is not None:
                    raise TypeError(f"ember.onnx: {t._op_name} already has an ONNX spelling")
                t.onnx = fn
        return fn
    return deco


def converter(node):
    """The converter for a graph node, or None: its primitive's ``onnx`` spelling, the
    row of a call recorded by name, or a custom ``autograd.Function``'s ``symbolic``."""
    target = node.target
    if not isinstance(target, type):  # a call recorded by name
        return EXPORTERS.get(node.op)
    spell = spelling(target, "onnx")
    if isinstance(spell, str):
        return lambda g, node, *args, **kwargs: one_node(g, node, spell, args, kwargs)
    if spell is None and getattr(target, "symbolic", None) is not None:
        return custom_symbolic
    return spell


def exportable_ops():
    """Sorted names of the ops ``export`` can write: primitives with an ONNX spelling
    and the calls recorded by name that have a converter."""
    from ember.autograd.node import Primitive
    names, stack, seen = set(EXPORTERS), [Primitive], set()
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                if spelling(sub, "onnx") is not None:
                    names.add(sub._op_name)
    return sorted(names)


def _input_types(g, op_type):
    """The element types ONNX's schema of ``op_type`` accepts for its first input."""
    schema = g.onnx.defs.get_schema(op_type, g.opset)
    name = schema.inputs[0].type_str
    for c in schema.type_constraints:
        if c.type_param_str == name:
            return set(c.allowed_type_strs)
    return {name}


def one_node(g, node, op_type, args, kwargs):
    """One ONNX node of ``op_type`` over the call's operands (traced tensors and sizes,
    Python numbers as constants). ONNX does not promote, so the operands are brought to
    one dtype first: the result's (``x + 1.5`` on an int tensor, ``exp`` of one), or for
    a bool result of non-bool operands (a comparison) their own, unless the operator
    takes only the result's type (``And`` of float tensors casts them to bool)."""
    if kwargs or any(not isinstance(a, (Ref, bool, int, float)) for a in args):
        raise UnsupportedOnnxExport(f"{node.op} with these arguments (its ONNX spelling "
                                    f"{op_type} takes tensors and numbers only)")
    refs = [a for a in args if isinstance(a, Ref)]
    out_dt = np.dtype(node.outputs[0].dtype.np)
    target = out_dt
    if out_dt == np.bool_ and refs:
        own = np.result_type(*[g.np_dtype(r) for r in refs])
        if any(isinstance(a, float) for a in args) and own.kind in "iub":
            own = np.dtype(np.float32)
        if f"tensor({_proto_name(own)})" in _input_types(g, op_type):
            target = own
    names = []
    for a in args:
        if isinstance(a, Ref):
            name = g.tensor(a)
            if g.np_dtype(a) != target:
                name = g.op("Cast", [name], to=g.elem_type(target))
            names.append(name)
        else:
            names.append(g.tensor(a, dtype=target))
    return g.op(op_type, names, n_outputs=len(node.outputs))


def _proto_name(dt):
    return {"f": {2: "float16", 4: "float", 8: "double"}, "b": {1: "bool"},
            "u": {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"},
            "i": {1: "int8", 2: "int16", 4: "int32", 8: "int64"}}.get(
                dt.kind, {}).get(dt.itemsize, str(dt))


def _axes(g, axes, hint="axes"):
    return g.const(np.asarray(list(axes), np.int64), hint)


def _rank(ref):
    return len(ref.value.shape)


def _cast_to(g, name, dt, ref=None):
    """``name`` cast to NumPy dtype ``dt`` unless the value ``ref`` already has it."""
    if ref is not None and isinstance(ref, Ref) and g.np_dtype(ref) == dt:
        return name
    return g.op("Cast", [name], to=g.elem_type(np.dtype(dt)))


def _reduce_axes(g, onnx_op, x, axes, keepdim):
    axes = list(range(_rank(x))) if axes is None else list(axes)
    if onnx_op in ("ReduceSum",) or g.opset >= 18:
        return g.op(onnx_op, [g.tensor(x), _axes(g, axes)], keepdims=int(bool(keepdim)))
    return g.op(onnx_op, [g.tensor(x)], axes=axes, keepdims=int(bool(keepdim)))


# ---- custom autograd.Function with symbolic() ---------------------------------------------

class _SymbolicGraph:
    """The ``g`` PyTorch passes to ``Function.symbolic``: ``g.op("Name", *inputs,
    attr_f=1.0, attr_i=2, attr_s="x", attr_t=tensor, outputs=n)``."""

    def __init__(self, builder):
        self._b = builder

    def op(self, name, *inputs, outputs=1, **attrs):
        domain = ""
        if "::" in name:
            domain, name = name.split("::", 1)
            domain = "" if domain == "onnx" else domain
        plain = {}
        for k, v in attrs.items():
            base = k.rsplit("_", 1)[0] if k[-2:] in ("_f", "_i", "_s", "_t") else k
            if k.endswith("_t"):
                v = self._b.onnx.numpy_helper.from_array(np.asarray(v.detach().numpy()
                                                                    if hasattr(v, "detach")
                                                                    else v))
            plain[base] = v
        ins = [self._b.tensor(i) if isinstance(i, Ref) else i for i in inputs]
        return self._b.op(name, ins, n_outputs=outputs, domain=domain, **plain)


def custom_symbolic(g, node, *args, **kwargs):
    """The converter of a custom ``autograd.Function`` that defines ``symbolic``: calls it
    with a PyTorch-style ``g`` and returns the ONNX names of its outputs."""
    fn = node.target.symbolic
    out = fn(_SymbolicGraph(g), *args, **kwargs)
    return out if isinstance(out, (list, tuple)) else [out]
