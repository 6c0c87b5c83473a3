"""The table of ONNX op converters used by :func:`ember.onnx.load`.

Each converter is a small function ``f(cx, *inputs, **attributes)`` that computes one
ONNX node with ember ops (so gradients flow through an imported model). Optional
inputs that the node leaves out arrive as None; attributes arrive under their ONNX
names, so an attribute a converter does not know is a loud TypeError, never ignored.
"""
__all__ = ["IMPORTERS", "importer", "ImportContext"]

IMPORTERS = {}


def importer(*op_types, domain=""):
    """Register ``fn`` as the converter of the ONNX ops ``op_types`` in ``domain``."""
    def deco(fn):
        for op in op_types:
            IMPORTERS[(domain, op)] = fn
        return fn
    return deco


class ImportContext:
    """What a converter may need besides its inputs: the opset, the node, the runner."""

    __slots__ = ("opset", "node", "n_outputs", "runner", "training")

    def __init__(self, opset, node, n_outputs, runner, training=False):
        self.opset = opset
        self.node = node
        self.n_outputs = n_outputs
        self.runner = runner
        self.training = training
