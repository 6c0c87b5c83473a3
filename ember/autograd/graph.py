"""``torch.autograd.graph``: the graph's node type, gradient edges and version bumps.

Saved-tensor hooks (``saved_tensors_hooks``, ``save_on_cpu``,
``disable_saved_tensors_hooks``, ``allow_mutation_on_saved_tensors``) and
``register_multi_grad_hook`` are not implemented in ember yet.
"""
import contextlib
from collections import namedtuple

from ember.autograd.node import AccumulateGrad, Node

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "increment_version",
           "region_activation_memory_budget"]

GradientEdge = namedtuple("GradientEdge", ["node", "output_nr"])
GradientEdge.__doc__ = ("An edge of the backward graph: the node that computes a "
                        "gradient and which of its outputs it is.")


def get_gradient_edge(tensor):
    """The :class:`GradientEdge` that computes ``tensor``'s gradient (its ``grad_fn``
    output, or its ``AccumulateGrad`` node for a leaf)."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    if tensor.grad_fn is None:
        return GradientEdge(AccumulateGrad.of(tensor), 0)
    return GradientEdge(tensor.grad_fn, tensor._output_nr)


def increment_version(tensor):
    """Bump the version counter of ``tensor`` (or of each tensor of an iterable), as an
    in-place change would: saved copies of it become stale."""
    tensors = (tensor,) if hasattr(tensor, "_vc") else tuple(tensor)
    for t in tensors:
        t._vc[0] += 1


@contextlib.contextmanager
def region_activation_memory_budget(budget):
    """The activation-memory budget of torch.compile's min-cut partitioner for a region.
    Outside compile torch raises, and so does ember, whose compile has no partitioner."""
    raise RuntimeError("torch.autograd.graph.region_activation_memory_budget can only be "
                       "used inside a torch.compile region; it has no effect in eager mode.")
    yield  # pragma: no cover  (a generator, as a context manager)
