"""``torch.compiler``: the questions libraries ask about compilation, answered for
``ember.compile`` (see docs/compile.md).

``is_compiling()`` is True while ember captures a function for ``ember.compile`` or
``jit.trace`` (the code then runs once to be recorded, as under dynamo's tracing);
``disable`` and ``allow_in_graph`` return the function itself, which ember's capture
then records as the ops it calls; features that exist only in dynamo's bytecode
tracer (cache artifacts, stances other than the default) raise.
"""
__all__ = ["compile", "reset", "allow_in_graph", "assume_constant_result", "disable",
           "is_compiling", "is_dynamo_compiling", "is_exporting", "list_backends",
           "cudagraph_mark_step_begin", "substitute_in_graph", "set_stance",
           "wrap_numpy", "save_cache_artifacts", "load_cache_artifacts",
           "set_default_backend", "get_default_backend", "nested_compile_region"]

_default_backend = ["inductor"]


def compile(*args, **kwargs):
    """``torch.compile`` under its ``torch.compiler`` name."""
    from ember._legacy import compile as _compile
    return _compile(*args, **kwargs)


def reset():
    """Forget compiled code; ember keeps no process-wide compile cache (each compiled
    function holds its own plans), so there is nothing global to clear."""


def is_compiling():
    """True while ember captures a function (``ember.compile``, ``jit.trace``)."""
    from ember._compile._capture import busy
    return bool(busy())


is_dynamo_compiling = is_compiling


def is_exporting():
    """True while ``ember.export.export`` runs the program to capture it."""
    import sys
    export = sys.modules.get("ember.export")
    code = getattr(getattr(export, "export", None), "__code__", None)
    frame = sys._getframe(1)
    while code is not None and frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _identity_decorator(fn=None, **_):
    if fn is None:
        return lambda f: f
    return fn


def disable(fn=None, recursive=True, *, reason=None):
    """Run ``fn`` without compiling it: ember records whatever eager ops it calls,
    so the function itself is returned (as a decorator too: ``@disable``)."""
    if fn is None:
        return lambda f: f
    return fn


def allow_in_graph(fn):
    """Mark ``fn`` as traceable as a whole; ember's capture always records its ops."""
    return fn


def assume_constant_result(fn):
    """Mark ``fn``'s result as a constant; ember's capture guards on values it reads."""
    return fn


def substitute_in_graph(original_fn, *, can_constant_fold_through=False,
                        skip_signature_check=False):
    """Register a Python replacement for ``original_fn`` for dynamo's tracer: ember's
    capture records the original's ops, so the decorated polyfill is returned unused."""
    def decorator(fn):
        return fn
    return decorator


def nested_compile_region(fn=None):
    """Mark a region to be compiled once and reused; ember runs it as written."""
    return _identity_decorator(fn)


def list_backends(exclude_tags=("debug", "experimental")):
    """The backends ``compile`` accepts (ember runs all of them as its own plan)."""
    return ["inductor"] if exclude_tags else ["aot_eager", "eager", "inductor"]


def set_default_backend(backend):
    """Set the backend ``compile`` uses when none is named."""
    if backend is not None and backend not in ("inductor", "eager", "aot_eager"):
        raise ValueError(f"ember.compile has no backend {backend!r}")
    _default_backend[0] = backend or "inductor"


def get_default_backend():
    """The backend ``compile`` uses when none is named."""
    return _default_backend[0]


def cudagraph_mark_step_begin():
    """Mark the start of a step for CUDA graph trees; ember records no CUDA graphs, so
    there is no step to mark."""


def set_stance(stance="default", *, skip_guard_eval_unsafe=False, force_backend=None):
    """Only the default stance: the others change how dynamo's frame evaluation
    recompiles, which ember does not have."""
    if stance != "default" or skip_guard_eval_unsafe or force_backend is not None:
        raise NotImplementedError(f"torch.compiler.set_stance({stance!r}) needs dynamo's "
                                  "frame evaluation, which ember does not have")
    import contextlib
    return contextlib.nullcontext()


def wrap_numpy(fn):
    """Let ``fn`` (written for NumPy arrays) take and return tensors."""
    import functools

    import numpy as np

    from ember._tensor import Tensor
    from ember.func._tree import tree_map

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        to_np = (lambda x: x.numpy() if isinstance(x, Tensor) else x)
        out = fn(*tree_map(to_np, list(args)), **{k: tree_map(to_np, v)
                                                  for k, v in kwargs.items()})
        from ember._factory import as_tensor
        return tree_map(lambda x: as_tensor(x) if isinstance(x, np.ndarray) else x, out)
    return wrapped


def save_cache_artifacts():
    """Serialize compile caches: ember's plans are not serializable."""
    raise NotImplementedError("torch.compiler.save_cache_artifacts: ember's compiled "
                              "plans live in memory only")


def load_cache_artifacts(serialized_artifacts):
    """See :func:`save_cache_artifacts`."""
    raise NotImplementedError("torch.compiler.load_cache_artifacts: ember's compiled "
                              "plans live in memory only")
