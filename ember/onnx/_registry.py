"""The table of ONNX op converters used by :func:`ember.onnx.load`.

Each converter is a small function ``f(cx, *inputs, **attributes)`` that computes one
ONNX node with ember ops (so gradients flow through an imported model). Optional
inputs that the node leaves out arrive as None; attributes arrive under their ONNX
names, so an attribute a converter does not know is a loud TypeError, never ignored.
"""
import os

__all__ = ["IMPORTERS", "importer", "ImportContext", "node_label"]

IMPORTERS = {}


def importer(*op_types, domain=""):
    """Register ``fn`` as the converter of the ONNX ops ``op_types`` in ``domain``."""
    def deco(fn):
        for op in op_types:
            IMPORTERS[(domain, op)] = fn
        return fn
    return deco


def node_label(node):
    """How errors name a node: its op and its name (or, unnamed, its first output)."""
    if node.name:
        return f"{node.op_type} node {node.name!r}"
    if node.output:
        return f"{node.op_type} node (output {node.output[0]!r})"
    return f"{node.op_type} node"


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


class ImportContext:
    """What a converter may need besides its inputs: the opset, the node, the runner."""

    __slots__ = ("opset", "node", "n_outputs", "runner", "training")

    def __init__(self, opset, node, n_outputs, runner, training=False):
        self.opset = opset
        self.node = node
        self.n_outputs = n_outputs
        self.runner = runner
        self.training = training

    def reserve(self, shape, itemsize, what="output"):
        """Refuse, before anything is allocated, an output this machine cannot hold.

        Sizes declared by the file (ConstantOfShape's shape, Tile's repeats, Range's
        limit ...) are data, not promises: one larger than the machine's physical
        memory raises MemoryError naming the node, instead of NumPy overflowing or the
        process being killed while it fills the pages.
        """
        n = 1
        for d in shape:
            n *= max(int(d), 0)
        limit = _physical_memory()
        if limit is not None and n * itemsize > limit:
            raise MemoryError(
                f"ember.onnx: {node_label(self.node)}: its {what} of shape {list(shape)} "
                f"would take {n * itemsize:,} bytes, more than this machine's "
                f"{limit:,} bytes of memory")
