"""Automatic differentiation: ``backward``, ``grad``, grad modes, and user Functions."""
import numpy as np

from ember._legacy import Variable  # the pre-0.4 spelling, still in many programs
from ember._tensor import Tensor, _make
from ember.autograd import (
    anomaly,
    forward_ad,  # torch.autograd.forward_ad (double-vjp tangents)
    functional,
    grad_mode,
    profiler,  # torch.autograd.profiler
)
from ember.autograd.anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from ember.autograd.engine import (
    _is_checkpoint_valid,  # noqa: F401  (torch.autograd._is_checkpoint_valid)
    run_backward,
)
from ember.autograd.function import Function, FunctionCtx, once_differentiable
from ember.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from ember.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = ["Variable", "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode",
           "is_grad_enabled", "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "anomaly", "grad_mode", "Function", "FunctionCtx", "once_differentiable",
           "gradcheck", "gradgradcheck", "GradcheckError", "functional", "profiler", "forward_ad"]


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def _grads_tuple(x):
    x = _as_tuple(x)
    for g in x or ():
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got "
                            f"{type(g).__name__}")
    return x


def _make_grads(outputs, grad_outputs, is_grads_batched=False):
    from ember._factory import ones_like
    grads = []
    for i, out in enumerate(outputs):
        g = None if grad_outputs is None else grad_outputs[i]
        if g is None:
            if out._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if out._data.dtype.kind not in "fV":
                raise RuntimeError("grad can be implicitly created only for real scalar outputs "
                                   f"but got {out.dtype}")
            d = out._data
            # (``ones_like``'s own work, for the one-element array every backward() starts from)
            g = _make(np.ones(d.shape, d.dtype)) if type(d) is np.ndarray and \
                d.dtype.kind == "f" else ones_like(out)
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got "
                            f"{type(g).__name__}")
        elif g._data.shape != out._data.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] "
                f"has a shape of {out.shape}.")
        elif g._data.dtype != out._data.dtype:
            g = g.to(out.dtype)  # PyTorch casts a root's gradient to the root's dtype
        grads.append(g)
    return grads


def _check_roots(outputs):
    for i, out in enumerate(outputs):
        if not out._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Compute the sum of gradients of ``tensors`` w.r.t. graph leaves into their ``.grad``."""
    tensors = _as_tuple(tensors)
    grad_tensors = _grads_tuple(grad_tensors if grad_tensors is not None else grad_variables)
    if grad_tensors is not None and len(grad_tensors) != len(tensors):
        raise RuntimeError(f"grad_tensors has {len(grad_tensors)} tensors but tensors has "
                           f"{len(tensors)}")
    if retain_graph is None:
        retain_graph = create_graph
    inputs = _as_tuple(inputs)
    if inputs is not None and len(inputs) == 0:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    _check_roots(tensors)
    grads = _make_grads(tensors, grad_tensors)
    # non-leaf ``inputs`` get their gradient in ``.grad`` too, as in PyTorch
    handles = [t.grad_fn._add_tensor_pre_hook(t._output_nr, _accumulator(t, create_graph))
               for t in inputs or () if t.grad_fn is not None]
    try:
        run_backward(tensors, grads, retain_graph, create_graph, inputs=inputs,
                     accumulate=True)
    finally:
        for h in handles:
            h.remove()


def _accumulator(t, create_graph):
    def hook(g):
        if not create_graph:
            g = g.detach()
        t._grad = (g if create_graph else g.clone()) if t._grad is None else t._grad + g
    hook._is_retain = True  # runs after the user's hooks, like .grad accumulation
    return hook


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """``is_grads_batched=True``: one backward pass per row of the grad_outputs' leading
    dim (ember's vmap has no batching rules for backward ops, so this is a loop), stacked."""
    from ember.ops.join import stack
    outputs = _as_tuple(outputs)
    grad_outputs = _grads_tuple(grad_outputs)
    if grad_outputs is None or any(g is None for g in grad_outputs):
        raise RuntimeError("autograd.grad(is_grads_batched=True) needs a batched grad_output "
                           "for every output")
    n = grad_outputs[0].shape[0]
    rows = [grad(outputs, inputs, [g[b] for g in grad_outputs], retain_graph=True,
                 create_graph=create_graph, allow_unused=allow_unused,
                 materialize_grads=materialize_grads) for b in range(n)]
    return tuple(None if col[0] is None else stack(list(col)) for col in zip(*rows))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Return the gradients of ``outputs`` w.r.t. ``inputs`` (without touching ``.grad``)."""
    if is_grads_batched:
        return _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    grad_outputs = _grads_tuple(grad_outputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True")
    if grad_outputs is not None and len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad_outputs has {len(grad_outputs)} tensors but outputs has "
                           f"{len(outputs)}")
    for t in inputs:
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    _check_roots(outputs)
    grads = _make_grads(outputs, grad_outputs)
    result = run_backward(outputs, grads, retain_graph, create_graph, inputs=inputs,
                          accumulate=False, allow_unused=allow_unused)
    for i, (r, inp) in enumerate(zip(result, inputs)):
        if r is None:
            if materialize_grads:
                from ember._factory import zeros_like
                result[i] = zeros_like(inp)
            elif not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
    return tuple(result)
from ember.autograd import graph  # noqa: E402,F401  (torch.autograd.graph)
from ember.autograd._threads import (  # noqa: E402,F401
    is_multithreading_enabled,
    set_multithreading_enabled,
    variable,
)
