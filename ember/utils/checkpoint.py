"""``torch.utils.checkpoint``: trade compute for memory by recomputing a function's
intermediate values during backward instead of keeping them.

Both of PyTorch's variants are here and give PyTorch's gradients:

- ``use_reentrant=True`` runs the function without a graph, then in backward runs it
  again with grad enabled and calls ``autograd.backward`` inside the outer pass (so the
  gradients of parameters used inside land in their ``.grad``; ``autograd.grad`` and
  ``backward(inputs=...)`` are refused, as in PyTorch).
- ``use_reentrant=False`` records one node whose inputs are the function's tensor
  arguments and every leaf the function reached (its parameters); backward recomputes
  the function and differentiates it with ``autograd.grad``. It works with
  ``autograd.grad``, keyword arguments and higher derivatives.

With ``preserve_rng_state`` (the default) the recomputation sees the generator state the
forward pass saw, so dropout draws the same mask twice.
"""
import warnings

from ember import _core as ember
from ember._random import get_rng_state, set_rng_state
from ember._tensor import Tensor
from ember.autograd import engine
from ember.autograd.function import Function
from ember.autograd.grad_mode import enable_grad
from ember.autograd.grad_mode import state as _grad_state

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointFunction", "CheckpointError",
           "detach_variable", "check_backward_validity", "noop_context_fn"]


class CheckpointError(RuntimeError):
    """The recomputation in backward did not reproduce the forward pass."""


def noop_context_fn():
    """The default ``context_fn``: no extra context around forward and recomputation."""
    import contextlib
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs):
    """Detached copies of ``inputs`` (a tuple) that keep each one's ``requires_grad``."""
    if not isinstance(inputs, tuple):
        raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    out = []
    for x in inputs:
        if isinstance(x, Tensor):
            y = x.detach()
            y.requires_grad = x.requires_grad
            out.append(y)
        else:
            out.append(x)
    return tuple(out)


def check_backward_validity(inputs):
    """Warn, as PyTorch does, when no tensor argument requires grad."""
    if not any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=3)


class _RngReplay:
    """Run a block with the generator at the state saved earlier, then put it back."""

    def __init__(self, state):
        self.state = state

    def __enter__(self):
        if self.state is not None:
            self.outer = get_rng_state()
            set_rng_state(self.state)

    def __exit__(self, *exc):
        if self.state is not None:
            set_rng_state(self.outer)


class CheckpointFunction(Function):
    """The reentrant checkpoint (``use_reentrant=True``) as an autograd Function."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.fwd_state = get_rng_state() if preserve_rng_state else None
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if not engine._is_checkpoint_valid():
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or "
                "passing an `inputs` parameter to .backward(). To resolve this error, you can "
                "either set use_reentrant=False, or call .backward() without passing the "
                "`inputs` argument.")
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        with _RngReplay(ctx.fwd_state):
            detached = detach_variable(tuple(inputs))
            with enable_grad():
                outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        outs, gs = [], []
        for o, g in zip(outputs, grads):
            if isinstance(o, Tensor) and o.requires_grad:
                outs.append(o)
                gs.append(g)
        if not outs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        ember.autograd.backward(outs, gs)
        return (None, None) + tuple(x.grad if isinstance(x, Tensor) else None
                                    for x in detached)


def _flatten(obj):
    """Tensors and other leaves of nested tuples, lists and dicts, and a rebuild function."""
    if isinstance(obj, (tuple, list)):
        parts = [_flatten(o) for o in obj]
        leaves = [x for p in parts for x in p[0]]
        kind = type(obj)

        def rebuild(flat):
            out, i = [], 0
            for sub, fn in parts:
                out.append(fn(flat[i:i + len(sub)]))
                i += len(sub)
            return kind(out) if kind in (tuple, list) else kind(*out)
        return leaves, rebuild
    if isinstance(obj, dict):
        keys = list(obj)
        inner, fn = _flatten([obj[k] for k in keys])
        return inner, lambda flat: type(obj)(zip(keys, fn(flat)))
    return [obj], lambda flat: flat[0]


def _leaves_reached(outputs, skip):
    """The leaf tensors that require grad and that ``outputs`` were computed from."""
    found, seen_nodes, seen_leaves = [], set(), set(id(t) for t in skip)
    stack = [o.grad_fn for o in outputs if isinstance(o, Tensor) and o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node in seen_nodes:
            continue
        seen_nodes.add(node)
        for e in node._edges:
            if type(e) is tuple:
                stack.append(e[0])
            elif e is not None and id(e) not in seen_leaves:
                seen_leaves.add(id(e))
                found.append(e)
    return found


class _NonReentrant(Function):
    """One node standing for the whole checkpointed call (``use_reentrant=False``).

    Its inputs are the call's tensor arguments followed by the leaves the function
    reached, so gradients flow to both through ordinary graph edges."""

    @staticmethod
    def forward(ctx, plan, *tensors):
        ctx.plan = plan
        ctx.n_args = plan["n_args"]
        ctx.save_for_backward(*tensors[:ctx.n_args])
        flat = plan.pop("outputs")
        ctx.out_meta = [(o.shape, o.dtype) if isinstance(o, Tensor) else None for o in flat]
        ctx.mark_non_differentiable(*[o for o, d in zip(flat, plan["diff"])
                                      if isinstance(o, Tensor) and not d])
        return tuple(flat)

    @staticmethod
    def backward(ctx, *grads):
        plan = ctx.plan
        args = tuple(ctx.saved_tensors)
        if not _grad_state.grad_enabled:
            # a first derivative only: the recomputed graph can start at detached copies;
            # under create_graph it must reach the real inputs for higher derivatives
            args = detach_variable(args)
        params = plan["leaves"]
        with _RngReplay(plan["rng"]):
            with enable_grad():
                out = _call(plan, args)
        flat, _ = _flatten(out)
        meta = [(o.shape, o.dtype) if isinstance(o, Tensor) else None for o in flat]
        if meta != ctx.out_meta:
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values have different metadata than during "
                f"the forward pass: outputs were {ctx.out_meta} and are now {meta}. The "
                "function must compute the same shapes and dtypes when it runs again.")
        outs, gs = [], []
        for o, g in zip(flat, grads):
            if isinstance(o, Tensor) and o.requires_grad and g is not None:
                outs.append(o)
                gs.append(g)
        targets = [a for a in args if a.requires_grad] + list(params)
        result = [None] * (len(args) + len(params))
        if outs and targets:
            got = ember.autograd.grad(outs, targets, gs, allow_unused=True,
                                      create_graph=_grad_state.grad_enabled)
            slots = [i for i, a in enumerate(args) if a.requires_grad]
            slots += list(range(len(args), len(args) + len(params)))
            for i, g in zip(slots, got):
                result[i] = g
        return (None,) + tuple(result)


def _call(plan, tensors):
    args = list(plan["args"])
    for i, t in zip(plan["tensor_pos"], tensors):
        args[i] = t
    return plan["function"](*args, **plan["kwargs"])


def _checkpoint_without_reentrant(function, preserve, args, kwargs):
    if not _grad_state.grad_enabled:
        return function(*args, **kwargs)
    tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    tensors = [args[i] for i in tensor_pos]
    plan = {"function": function, "args": list(args), "kwargs": kwargs,
            "tensor_pos": tensor_pos, "n_args": len(tensors),
            "rng": get_rng_state() if preserve else None}
    inner = detach_variable(tuple(tensors))
    # run once with a graph to learn which leaves the function reaches, then drop that
    # graph: only the outputs are kept, and backward builds the graph again
    out = _call(plan, inner)
    flat, rebuild = _flatten(out)
    plan["leaves"] = _leaves_reached(flat, inner)
    plan["diff"] = [isinstance(o, Tensor) and o.requires_grad for o in flat]
    plan["outputs"] = [o.detach() if isinstance(o, Tensor) else o for o in flat]
    if not any(t.requires_grad for t in tensors) and not plan["leaves"]:
        return rebuild(plan["outputs"])
    res = _NonReentrant.apply(plan, *tensors, *plan["leaves"])
    return rebuild(list(res))


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, early_stop=True, **kwargs):
    """Run ``function(*args, **kwargs)`` without keeping its intermediate values; they
    are recomputed when backward needs them. Gradients equal those of a plain call.

    ``use_reentrant`` should be given (PyTorch warns without it and then uses True).
    ``preserve_rng_state=False`` skips saving the generator state.

    >>> lin = ember.nn.Linear(3, 3)
    >>> x = ember.randn(2, 3, requires_grad=True)
    >>> checkpoint(lin, x, use_reentrant=False).sum().backward()
    """
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
            "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
            "exception. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    if context_fn is not noop_context_fn:
        raise NotImplementedError("checkpoint(context_fn=...): selective checkpointing "
                                  "contexts are not implemented in ember")
    if determinism_check not in ("default", "none"):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got "
                         f"{determinism_check}")
    return _checkpoint_without_reentrant(function, preserve, args, kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Split ``functions`` (an ``nn.Sequential`` or a list of callables) into ``segments``
    chunks and checkpoint every chunk but the last.

    >>> model = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.ReLU(), ember.nn.Linear(4, 1))
    >>> x = ember.randn(3, 4, requires_grad=True)
    >>> checkpoint_sequential(model, 2, x, use_reentrant=False).sum().backward()
    """
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should "
            "be passed explicitly. In version 2.9 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is recommended, but if you need to preserve "
            "the current default behavior, you can pass use_reentrant=True. Refer to docs for "
            "more details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    from ember.nn import Sequential  # nn sits above utils
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)


from ember.utils._checkpoint_settings import *  # noqa: E402,F401,F403
from ember.utils._checkpoint_settings import __all__ as _settings_all  # noqa: E402

__all__ += _settings_all
