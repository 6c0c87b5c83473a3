"""``torch._dynamo._trace_wrapped_higher_order_op``: ``trace_wrapped`` calls its
function eagerly under ``no_grad``, as torch does outside dynamo's tracer."""
__all__ = ["trace_wrapped"]


def trace_wrapped(*args, fn, **kwargs):
    """``fn(*args, **kwargs)`` with grad mode off (the eager path of torch's op)."""
    from ember.autograd.grad_mode import no_grad
    with no_grad():
        return fn(*args, **kwargs)
