"""Identity ops that exist for the graph node they leave: the node that a module's
full backward hooks attach to (``BackwardHookFunctionBackward``, used by
``ember.nn.modules._hooks``), and the node that raises when the results of a
``once_differentiable`` backward are differentiated again (``DelayedError``, used by
``ember.autograd.function``)."""
from ember.autograd.node import Primitive
from ember.ops import _batch

__all__ = []


class _Identity(Primitive):
    """The identity on n tensors: the node that module backward hooks attach to."""

    _node_name = "BackwardHookFunctionBackward"
    batch = _batch.elementwise

    def forward(self, *arrays):
        # copies, not views: an in-place op inside the module must not change memory that
        # the caller's tensors (and the nodes that saved them) still own
        outs = tuple(a.copy() for a in arrays)
        return outs if type(self).n_outputs > 1 else outs[0]

    def backward(self, *grads):
        return grads if len(grads) > 1 else grads[0]

    def jvp(self, *tangents):
        return tangents if len(tangents) > 1 else tangents[0]


class _DelayedError(Primitive):
    """Stands in the graph of a ``once_differentiable`` backward's results; raises if reached."""

    _node_name = "DelayedError"
    batch = _batch.elementwise

    def forward(self, x):
        return x

    def backward(self, gy):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")
