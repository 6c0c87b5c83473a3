"""What users see of PyTorch's profiling executor on a scripted module's calls.

PyTorch runs a scripted method's first call as written (recording shapes), and from
the second call on, with grad mode enabled and some input or parameter requiring grad,
runs it as one differentiable graph: each output tensor's ``grad_fn`` is a single
``DifferentiableGraphBackward`` node whose ``next_functions`` are the gradient edges of
the tensors that require grad (the parameters' and inputs' ``AccumulateGrad`` nodes).

ember runs every call with its ordinary autograd graph and, from the second call on,
puts one :class:`DifferentiableGraph` node over it: its backward asks the inner graph
for the gradients of the tensors requiring grad, so gradients are those of the code.
Calls made from inside scripted code are part of the outer call, as in PyTorch.
"""
import threading

from ember.autograd.function import Function

__all__ = ["run_scripted"]

_state = threading.local()


class _Outputs:
    """The inner outputs a DifferentiableGraph node stands for (not a tensor argument)."""
    __slots__ = ("tensors",)

    def __init__(self, tensors):
        self.tensors = tensors


class DifferentiableGraph(Function):
    """One node for a scripted call's whole graph (``DifferentiableGraphBackward``)."""

    @staticmethod
    def forward(ctx, outputs, *leaves):
        ctx.inner = outputs.tensors
        ctx.n_leaves = len(leaves)
        ctx.save_for_backward(*leaves)
        return tuple(t.detach() for t in outputs.tensors)

    @staticmethod
    def backward(ctx, *grads):
        from ember import autograd
        from ember.autograd.grad_mode import is_grad_enabled
        leaves = ctx.saved_tensors
        pairs = [(o, g) for o, g in zip(ctx.inner, grads) if g is not None]
        if not pairs:
            return (None,) * (1 + ctx.n_leaves)
        got = autograd.grad([o for o, _ in pairs], list(leaves),
                            grad_outputs=[g for _, g in pairs], retain_graph=True,
                            create_graph=is_grad_enabled(), allow_unused=True)
        return (None,) + tuple(got)


def _tensors(obj, out):
    from ember._tensor import Tensor
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors(x, out)
    return out


def _replace(obj, table):
    from ember._tensor import Tensor
    if isinstance(obj, Tensor):
        return table.get(id(obj), obj)
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(_replace(x, table) for x in obj)
    if isinstance(obj, list):
        return [_replace(x, table) for x in obj]
    if isinstance(obj, dict):
        return {k: _replace(v, table) for k, v in obj.items()}
    return obj


def run_scripted(counts, key, fn, args, kwargs, params=()):
    """Call ``fn(*args, **kwargs)``: a scripted method or function counted in ``counts``
    under ``key``; from its second call on, outputs hang from one
    ``DifferentiableGraphBackward`` node when gradients are being recorded."""
    if getattr(_state, "inside", False):
        return fn(*args, **kwargs)
    calls = counts.get(key, 0)
    counts[key] = calls + 1
    _state.inside = True
    try:
        out = fn(*args, **kwargs)
    finally:
        _state.inside = False
    from ember.autograd.grad_mode import is_grad_enabled
    if calls == 0 or not is_grad_enabled():
        return out
    leaves, seen = [], set()
    for t in _tensors((args, kwargs), []) + list(params):
        if t.requires_grad and id(t) not in seen:
            seen.add(id(t))
            leaves.append(t)
    inner, seen = [], set()
    for t in _tensors(out, []):
        if t.grad_fn is not None and id(t) not in seen:
            seen.add(id(t))
            inner.append(t)
    if not leaves or not inner:
        return out
    wrapped = DifferentiableGraph.apply(_Outputs(inner), *leaves)
    if not isinstance(wrapped, tuple):
        wrapped = (wrapped,)
    return _replace(out, {id(o): w for o, w in zip(inner, wrapped)})
