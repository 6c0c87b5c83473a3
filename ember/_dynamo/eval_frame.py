"""``torch._dynamo.eval_frame``: ``OptimizedModule`` (what ``ember.compile`` returns
for a module), ``optimize`` and the entry points that need dynamo itself."""
from ember._compile import OptimizedModule  # noqa: F401

__all__ = ["OptimizedModule", "optimize", "optimize_assert", "explain", "export",
           "is_dynamo_supported", "is_inductor_supported", "innermost_fn"]


def is_dynamo_supported():
    """False: ember has no bytecode tracer (``ember.compile`` works without one)."""
    return False


def is_inductor_supported():
    """False: ember runs compiled plans as NumPy kernels, not inductor's code."""
    return False


def optimize(backend="inductor", *, nopython=False, dynamic=None, disable=False,
             **kwargs):
    """The decorator form of compile: ``optimize("eager")(fn)`` is ``ember.compile``."""
    from ember._legacy import compile as _compile

    def decorator(fn):
        return _compile(fn, fullgraph=nopython, dynamic=dynamic,
                        backend=backend if isinstance(backend, str) else "inductor",
                        disable=disable)
    return decorator


def optimize_assert(backend, *, export=False, dynamic=None, **kwargs):
    """``optimize(..., nopython=True)``."""
    return optimize(backend, nopython=True, dynamic=dynamic)


def explain(f, *extra_args, **extra_kwargs):
    """Report dynamo's graph breaks: dynamo-only."""
    from ember._dynamo import _no_dynamo
    raise _no_dynamo("explain")


def export(f, *extra_args, **extra_kwargs):
    """dynamo's own export: use ``ember.export.export``."""
    from ember._dynamo import _no_dynamo
    raise _no_dynamo("export (use torch.export.export)")


def innermost_fn(fn):
    """The original function under compile wrappers."""
    while hasattr(fn, "_orig_mod") or hasattr(fn, "_torchdynamo_orig_callable"):
        fn = getattr(fn, "_orig_mod", None) or fn._torchdynamo_orig_callable
    return fn
