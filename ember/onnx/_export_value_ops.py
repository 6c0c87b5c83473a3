"""ONNX converters of calls a trace records whole because their output's shape follows
the values of an integer or boolean argument (``ember._graph.names.VALUE_CALLS``):
``masked_select`` as ``Compress`` over the broadcast operands, ``one_hot`` as
``OneHot`` (its width ``ReduceMax + 1`` without ``num_classes``). The shapes are
computed by the runtime, so the exported model follows the mask or the indices.
The others (``bincount``, ``gcd``/``lcm``, ``segment_reduce``, ``tensor_split`` at a
tensor, ``ctc_loss``) have no ONNX operator and raise ``UnsupportedOnnxExport``.

``ember.onnx._export_ops`` imports this module, so importing it registers these too.
"""
import numpy as np

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
