"""``torch._dynamo._trace_wrapped_higher_order_op``: ``trace_wrapped`` calls its
function eagerly under ``no_grad``, as torch does outside dynamo's tracer."""
__all__ = ["trace_wrapped"]


def trace_wrapped(*args, fn, **kwargs):
    """``fn(*args, **kwargs)`` with grad mode off (the eager path of torch's op)."""
    from ember.autograd.grad_mode import no_grad
    with no_grad():
        return fn(*args, **kwargs)


def _transform_getitem(self, func, types, args=(), kwargs=None):
    from ember._factory import tensor as _tensor_of
    from ember._tensor import Tensor
    if func is Tensor.__getitem__:
        key = args[1] if isinstance(args[1], tuple) else (args[1],)
        if all(isinstance(k, (Tensor, int)) and not isinstance(k, bool) for k in key):
            # every index becomes a tensor and the result is gathered, not a view of
            # the indexed tensor, as torch's flex attention wants for its score_mod
            key = tuple(k if isinstance(k, Tensor) else _tensor_of(k) for k in key)
            out = func(args[0], key)
            return out.clone() if out._is_view() else out
    return func(*args, **(kwargs or {}))


def __getattr__(name):
    if name == "TransformGetItemToIndex":
        # torch's flex-attention mode: integer and tensor indices of ``x[...]`` index as
        # tensors
        from ember.overrides import TorchFunctionMode
        cls = type("TransformGetItemToIndex", (TorchFunctionMode,),
                   {"__module__": __name__, "__torch_function__": _transform_getitem,
                    "__doc__": "``x[i, j]`` with integer or tensor indices gathers."})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
