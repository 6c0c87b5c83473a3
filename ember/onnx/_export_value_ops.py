"""ONNX converters of calls a trace records whole because their output's shape follows
the values of an integer or boolean argument (``ember._graph.names.VALUE_CALLS``):
``masked_select`` as ``Compress`` over the broadcast operands, ``one_hot`` as
``OneHot`` (its width ``ReduceMax + 1`` without ``num_classes``). The shapes are
computed by the runtime, so the exported model follows the mask or the indices.
The others (``bincount``, ``gcd``/``lcm``, ``segment_reduce``, ``tensor_split`` at a
tensor, ``ctc_loss``) have no ONNX operator and raise ``UnsupportedOnnxExport``.
Of the calls recorded whole because they compute on their input's values
(``DATA_CALLS``), ``unique`` is ONNX's ``Unique`` and ``isin`` an ``Equal`` of each
element with every test element.

``ember.onnx._export_ops`` imports this module, so importing it registers these too.
"""
import numpy as np

from ember._graph.ir import Ref
from ember.onnx._export import UnsupportedOnnxExport
from ember.onnx._export_registry import exports


def _flat(g, x):
    return g.op("Reshape", [x, g.const(np.asarray([-1], np.int64), "flat")])


@exports("masked_select")
def _masked_select(g, node, input, mask):
    x, m = g.tensor(input), g.tensor(mask)
    # ONNX's Expand broadcasts both ways: each operand to the common shape
    x = g.op("Expand", [x, g.op("Shape", [m])])
    m = g.op("Expand", [m, g.op("Shape", [x])])
    return g.op("Compress", [_flat(g, x), _flat(g, m)], axis=0)


@exports("one_hot")
def _one_hot(g, node, tensor, num_classes=-1):
    i = g.tensor(tensor)
    if num_classes == -1:
        depth = g.op("Add", [g.op("ReduceMax", [i], keepdims=0),
                             g.const(np.asarray(1, np.int64), "one")])
    else:
        depth = g.const(np.asarray(num_classes, np.int64), "depth")
    return g.op("OneHot", [i, depth, g.const(np.asarray([0, 1], np.int64), "values")],
                axis=-1)


@exports("unique")
def _unique(g, node, input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """ONNX Unique (sorted): the distinct values of the flattened input, or the distinct
    slices along ``dim``; the inverse of a flattened input takes the input's shape."""
    if g.opset < 11:
        raise UnsupportedOnnxExport("unique (ONNX has Unique from opset 11)")
    if g.np_dtype(input).kind not in "iuf" or dim is not None and not g.shape(input):
        raise UnsupportedOnnxExport(f"unique of {g.np_dtype(input)} or of a 0-d tensor along a dim")
    x = g.tensor(input)
    attrs = {"sorted": 1} if dim is None else {"sorted": 1, "axis": dim % len(g.shape(input))}
    values, _, inverse, counts = g.op("Unique", [x], n_outputs=4, **attrs)
    out = [values]
    if return_inverse:
        out.append(inverse if dim is not None else
                   g.op("Reshape", [inverse, g.op("Shape", [x])]))
    if return_counts:
        out.append(counts)
    return out if len(out) > 1 else out[0]


@exports("isin")
def _isin(g, node, elements, test_elements, assume_unique=False, invert=False):
    """Each element against every test element (Equal with the tests flattened along a
    new last axis), any of them (ReduceMax over integers: ONNX reduces no booleans)."""
    dts = [g.np_dtype(x) if isinstance(x, Ref) else None for x in (elements, test_elements)]
    if any(d is not None and d.kind not in "iuf" for d in dts):
        raise UnsupportedOnnxExport("isin of non-numeric tensors")
    # a Python number takes the tensor's dtype (a float number with integers: float32)
    common = np.result_type(*[d for d in dts if d is not None])
    if common.kind in "iu" and any(isinstance(x, float) for x in (elements, test_elements)):
        common = np.dtype(np.float32)
    e, t = (g.tensor(x, dtype=common) if d is None else
            g.tensor(x) if d == common else g.op("Cast", [g.tensor(x)], to=g.elem_type(common))
            for x, d in zip((elements, test_elements), dts))
    hits = g.op("Equal", [g.op("Unsqueeze", [e, g.const(np.asarray([-1], np.int64), "axes")]),
                          _flat(g, t)])
    as_int = g.op("Cast", [hits], to=g.elem_type(np.dtype(np.int32)))
    axes = g.const(np.asarray([-1], np.int64), "axes")
    # a test tensor with no elements: ReduceMax of nothing is the lowest int32 (no hit)
    found = g.op("ReduceMax", [as_int, axes], keepdims=0) if g.opset >= 18 else \
        g.op("ReduceMax", [as_int], keepdims=0, axes=[-1])
    found = g.op("Greater", [found, g.const(np.asarray(0, np.int32), "zero")])
    return g.op("Not", [found]) if invert else found
