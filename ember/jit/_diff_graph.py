"""What users see of PyTorch's profiling executor on a scripted module's calls.

PyTorch runs a scripted method's first call as written (recording shapes), and from
the second call on, with grad mode enabled and some input or parameter requiring grad,
runs it as one differentiable graph: each output tensor's ``grad_fn`` is a single
``DifferentiableGraphBackward`` node whose ``next_functions`` are the gradient edges of
the tensors that require grad (the parameters' and inputs' ``AccumulateGrad`` nodes).

ember runs every call with its ordinary autograd graph and, from the second call on,
puts one :class:`DifferentiableGraph` node over it: its backward asks the inner graph
for the gradients of the tensors requiring grad, so gradients are those of the code.
Calls made from inside scripted code are part of the outer call, as in PyTorch; calls
seen by a graph capture (``jit.trace`` through a scripted module) are left as they ran.
"""
import threading

from ember.autograd.function import Function

__all__ = ["run_scripted"]

_state = threading.local()


class DifferentiableGraph(Function):
    """One node for a scripted call's whole graph (``DifferentiableGraphBackward``)."""

    @staticmethod
    def forward(ctx, *leaves):
        # the inner outputs come beside the arguments, so that the node's edges are
        # the leaves' alone (PyTorch's next_functions)
        ctx.inner = _state.pending
        ctx.save_for_backward(*leaves)
        return tuple(t.detach() for t in ctx.inner)

    @staticmethod
    def backward(ctx, *grads):
        from ember import autograd
        from ember.autograd.grad_mode import is_grad_enabled
        leaves = ctx.saved_tensors
        pairs = [(o, g) for o, g in zip(ctx.inner, grads) if g is not None]
        if not pairs:
            return (None,) * len(leaves)
        got = autograd.grad([o for o, _ in pairs], list(leaves),
                            grad_outputs=[g for _, g in pairs], retain_graph=True,
                            create_graph=is_grad_enabled(), allow_unused=True)
        return tuple(got)


# PyTorch's name() for the node, C++ namespace included (a tensor prints the last part)
DifferentiableGraph._backward_cls._node_name = \
    "torch::jit::(anonymous namespace)::DifferentiableGraphBackward"


def _tensors(obj):
    from ember._tensor import Tensor
    from ember.utils._pytree import tree_leaves
    return [x for x in tree_leaves(obj) if isinstance(x, Tensor)]


def _replace(obj, table):
    from ember._tensor import Tensor
    from ember.utils._pytree import tree_map_only
    return tree_map_only(Tensor, lambda t: table.get(id(t), t), obj)


def run_scripted(counts, key, fn, args, kwargs, params=()):
    """Call ``fn(*args, **kwargs)``: a scripted method or function counted in ``counts``
    under ``key``; from its second call on, outputs hang from one
    ``DifferentiableGraphBackward`` node when gradients are being recorded.

    The count is kept per pattern of tensor arguments requiring grad."""
    if getattr(_state, "inside", False):
        return fn(*args, **kwargs)
    # PyTorch profiles again (runs as written) for each new pattern of inputs that
    # require grad
    key = (key, tuple(t.requires_grad for t in _tensors((args, kwargs))))
    calls = counts.get(key, 0)
    counts[key] = calls + 1
    _state.inside = True
    try:
        out = fn(*args, **kwargs)
    finally:
        _state.inside = False
    from ember._graph.capture import current
    from ember.autograd.grad_mode import is_grad_enabled
    if calls == 0 or not is_grad_enabled() or current() is not None:
        # a graph capture (jit.trace, export) records the call as it ran
        return out
    leaves, seen = [], set()
    for t in _tensors((args, kwargs)) + list(params):
        if t.requires_grad and id(t) not in seen:
            seen.add(id(t))
            leaves.append(t)
    inner, seen = [], set()
    for t in _tensors(out):
        if t.grad_fn is not None and id(t) not in seen:
            seen.add(id(t))
            inner.append(t)
    if not leaves or not inner:
        return out
    _state.pending = inner
    try:
        wrapped = DifferentiableGraph.apply(*leaves)
    finally:
        _state.pending = None
    if not isinstance(wrapped, tuple):
        wrapped = (wrapped,)
    return _replace(out, {id(o): w for o, w in zip(inner, wrapped)})
