"""The parts of ``torch.jit`` that act in eager Python: ``fork``/``wait`` and their
``Future``, ``Attribute``, ``interface``, ``isinstance``, ``script_if_tracing``, and the
fusion settings (ember's interpreter fuses nothing, so these only record).
"""
import builtins
import collections
import typing
import warnings

__all__ = ["Future", "fork", "wait", "Attribute", "interface", "isinstance",
           "script_if_tracing", "set_fusion_strategy", "enable_onednn_fusion",
           "onednn_fusion_enabled", "strict_fusion"]


class Future:
    """The result of :func:`fork`: ``wait()``/``value()`` return it, ``then(fn)`` chains
    a callback future. ember runs the forked call at once, so the future is done."""

    def __init__(self, *, devices=None):
        self._done, self._value, self._error, self._callbacks = False, None, None, []

    def done(self):
        return self._done

    def wait(self):
        """The result (the call's exception is raised here)."""
        if not self._done:
            raise RuntimeError("Future.wait() on a future that has no result (call "
                               "set_result first)")
        if self._error is not None:
            raise self._error
        return self._value

    def value(self):
        return self.wait()

    def set_result(self, result):
        if self._done:
            raise RuntimeError("Future can only be marked completed once.")
        self._done, self._value = True, result
        for cb in self._callbacks:
            cb(self)

    def set_exception(self, result):
        self._done, self._error = True, result
        for cb in self._callbacks:
            cb(self)

    def then(self, callback):
        """A future of ``callback(self)`` once this one is done."""
        out = Future()

        def run(fut):
            try:
                out.set_result(callback(fut))
            except Exception as e:  # the chained future carries the error
                out.set_exception(e)
        self.add_done_callback(run)
        return out

    def add_done_callback(self, callback):
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)


def fork(func, *args, **kwargs):
    """Call ``func(*args, **kwargs)`` and return a :class:`Future` of its result (torch
    may run it on another thread; ember runs it now, which gives the same values)."""
    fut = Future()
    try:
        fut.set_result(func(*args, **kwargs))
    except Exception as e:  # raised again by wait(), as torch does
        fut.set_exception(e)
    return fut


def wait(future):
    """The result of a :class:`Future` from :func:`fork`."""
    return future.wait()


Attribute = collections.namedtuple("Attribute", ["value", "type"])
Attribute.__doc__ = ("``torch.jit.Attribute(value, type)``: a module attribute with its "
                     "TorchScript type; in eager Python just the value and its type.")


def interface(obj):
    """Mark a class as a TorchScript interface; in Python the class is unchanged."""
    if not builtins.isinstance(obj, type):
        raise RuntimeError("interface must be applied to a class")
    obj.__torch_script_interface__ = True
    return obj


def isinstance(obj, target_type):
    """``isinstance`` that understands ``List[int]``, ``Dict[str, Tensor]``,
    ``Tuple[...]``, ``Optional[...]`` and ``Union[...]``, checking the elements."""
    origin = typing.get_origin(target_type)
    args = typing.get_args(target_type)
    if target_type in (list, dict, tuple, list, dict, tuple):
        name = getattr(target_type, "__name__", str(target_type)).lower()
        raise RuntimeError(f"Attempted to use {name} without a contained type. Please add a "
                           f"contained type, e.g. {name}[int]")
    if origin is None:
        if target_type is typing.Any:
            return True
        if target_type is None or target_type is type(None):
            return obj is None
        return builtins.isinstance(obj, target_type)
    if origin is typing.Union or getattr(origin, "__name__", "") == "UnionType":
        return any(isinstance(obj, a) for a in args)
    if origin is list:
        return builtins.isinstance(obj, list) and all(isinstance(o, args[0]) for o in obj)
    if origin is dict:
        return builtins.isinstance(obj, dict) and all(
            isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items())
    if origin is tuple:
        if not builtins.isinstance(obj, tuple):
            return False
        return len(obj) == len(args) and all(isinstance(o, a) for o, a in zip(obj, args))
    return builtins.isinstance(obj, origin)


def script_if_tracing(fn):
    """``fn``, run as Python. torch scripts ``fn`` when it is called during tracing, to
    keep its control flow in the trace; ember's trace records ops only, so under
    ``ember.jit.trace`` the branch taken is recorded and a ``TracerWarning`` says so."""
    import functools

    from ember._graph import capture as _capture

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _capture.is_tracing():
            warnings.warn(f"script_if_tracing({fn.__name__}): ember's trace records the "
                          "ops this call runs; its control flow is not kept (torch scripts "
                          "it)", _capture.TracerWarning, stacklevel=2)
        return fn(*args, **kwargs)
    wrapper.__original_fn = fn
    return wrapper


_fusion = {"strategy": [("STATIC", 2), ("DYNAMIC", 10)], "onednn": False}


def set_fusion_strategy(strategy):
    """Record the fusion strategy (a list of ("STATIC"|"DYNAMIC", depth)); returns the
    previous one. ember's interpreter does not fuse."""
    for kind, depth in strategy:
        if kind not in ("STATIC", "DYNAMIC"):
            raise RuntimeError(f"Expected STATIC or DYNAMIC, got {kind}")
        int(depth)
    old, _fusion["strategy"] = _fusion["strategy"], [tuple(s) for s in strategy]
    return old


def enable_onednn_fusion(enabled):
    """Record whether oneDNN fusion is wanted (ember has no oneDNN)."""
    _fusion["onednn"] = bool(enabled)


def onednn_fusion_enabled():
    return _fusion["onednn"]


class strict_fusion:
    """In scripted code, an assertion that the region fuses; in eager Python it warns
    that it only works in script mode, as torch does."""

    def __init__(self):
        from ember.jit import is_scripting
        if not is_scripting():
            warnings.warn("Only works in script mode", stacklevel=2)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
