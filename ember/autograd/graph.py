"""``torch.autograd.graph``: the graph's node type, gradient edges and version bumps.

Saved-tensor hooks: ``saved_tensors_hooks`` (every tensor a node saves for backward
goes through ``pack_hook`` when the node is recorded and through ``unpack_hook`` when
backward reads it), ``save_on_cpu`` (those hooks moving saved tensors to the CPU) and
``disable_saved_tensors_hooks``. ``allow_mutation_on_saved_tensors`` and
``register_multi_grad_hook`` are not implemented in ember yet.
"""
import contextlib
from collections import namedtuple

from ember.autograd import _saved_hooks
from ember.autograd.node import AccumulateGrad, Node

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "increment_version",
           "region_activation_memory_budget", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks"]

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


class saved_tensors_hooks:
    """Context manager: while it is active, each tensor an operation saves for backward
    is stored as ``pack_hook(tensor)``, and backward reads it back as
    ``unpack_hook(packed)`` (which must return a Tensor). Nested contexts use the
    innermost pair. Saved tensors are still checked against in-place changes."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        if _saved_hooks.disabled[0] is not None:
            raise RuntimeError(_saved_hooks.disabled[0])
        _saved_hooks.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _saved_hooks.stack.pop()


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are kept on the CPU (copied there from an accelerator, into pinned
    memory when ``pin_memory`` and CUDA is available) and moved back to their device when
    backward needs them. A CPU tensor is kept as it is."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        from ember import _factory, cuda

        def pack_to_cpu(tensor):
            if not pin_memory:
                return tensor.device, tensor.cpu()
            packed = _factory.empty(tensor.size(), dtype=tensor.dtype,
                                    pin_memory=cuda.is_available() and not tensor.is_sparse)
            packed.copy_(tensor)
            return tensor.device, packed

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """While active, entering :class:`saved_tensors_hooks` raises
    ``RuntimeError(error_message)`` (hooks already active keep working, as in PyTorch)."""
    before = _saved_hooks.disabled[0]
    _saved_hooks.disabled[0] = error_message
    try:
        yield
    finally:
        _saved_hooks.disabled[0] = before
