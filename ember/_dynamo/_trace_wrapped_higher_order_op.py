"""``torch._dynamo._trace_wrapped_higher_order_op``: ``trace_wrapped`` calls its
function eagerly under ``no_grad``, as torch does outside dynamo's tracer."""
__all__ = ["trace_wrapped"]


def trace_wrapped(*args, fn, **kwargs):
    """``fn(*args, **kwargs)`` with grad mode off (the eager path of torch's op)."""
    from ember.autograd.grad_mode import no_grad
    with no_grad():
        return fn(*args, **kwargs)


def __getattr__(name):
    if name == "TransformGetItemToIndex":
        # a TorchFunctionMode in torch (flex attention's score_mod indexing); ember's
        # operators do not dispatch through such modes, so entering it raises
        from ember.overrides import TorchFunctionMode
        cls = type("TransformGetItemToIndex", (TorchFunctionMode,),
                   {"__module__": __name__,
                    "__doc__": "torch's flex-attention indexing mode (raises when entered)."})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
