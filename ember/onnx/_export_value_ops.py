"""ONNX converters of calls a trace records whole because their output's shape follows
the values of an integer or boolean argument (``ember._graph.names.VALUE_CALLS``):
``masked_select`` as ``Compress`` over the broadcast operands, ``one_hot`` as
``OneHot`` (its width ``ReduceMax + 1`` without ``num_classes``). The shapes are
computed by the runtime, so the exported model follows the mask or the indices.
The others (``bincount``, ``gcd``/``lcm``, ``segment_reduce``, ``tensor_split`` at a
tensor, ``ctc_loss``) have no ONNX operator and raise ``UnsupportedOnnxExport``.
Of the calls recorded whole because they compute on their input's values
(``DATA_CALLS``), ``unique`` is ONNX's ``Unique``.

``ember.onnx._export_ops`` imports this module, so importing it registers these too.
"""
import numpy as np

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
