"""``torch.fx._symbolic_trace``: ``is_fx_tracing`` (never: ember has no symbolic
tracer) and the names of :mod:`ember.fx`."""
from ember.fx import Tracer, symbolic_trace, wrap  # noqa: F401

__all__ = ["is_fx_tracing", "Tracer", "symbolic_trace", "wrap"]


def is_fx_tracing():
    """False: ember has no fx symbolic tracer, so code never runs under one."""
    return False
