"""``torch.overrides``: the ``__torch_function__`` protocol helpers.

``has_torch_function`` / ``handle_torch_function`` implement the protocol for
functions written against it (a library's own functions that let tensor-like
arguments take over): arguments whose type defines ``__torch_function__`` are
asked in order, subclasses before their bases, and the first answer other than
``NotImplemented`` wins. ember's own operators do not dispatch through the
protocol; a ``TorchFunctionMode`` (``ember/_torch_function.py``) sees the public
calls made while it is entered.
"""
__all__ = ["has_torch_function", "has_torch_function_unary",
           "has_torch_function_variadic", "handle_torch_function", "is_tensor_like",
           "is_tensor_method_or_property", "TorchFunctionMode",  # noqa: F822
           "is_torch_function_mode_enabled", "get_ignored_functions",  # noqa: F822
           "get_overridable_functions", "get_testing_overrides", "wrap_torch_function"]


def _overrides(obj):
    from ember._tensor import Tensor
    tf = getattr(type(obj), "__torch_function__", None)
    if tf is None:
        return False
    default = getattr(Tensor, "__torch_function__", None)
    return getattr(tf, "__func__", tf) is not getattr(default, "__func__", default)


def _mode():
    from ember import _tensor
    if not _tensor._mode_active[0]:
        return None
    from ember import _torch_function
    return _torch_function._innermost()


def has_torch_function(relevant_args):
    """True if an argument's type defines its own ``__torch_function__`` or a
    ``TorchFunctionMode`` is active."""
    return any(_overrides(a) for a in relevant_args) or _mode() is not None


def has_torch_function_unary(obj):
    """:func:`has_torch_function` for one argument."""
    return _overrides(obj) or _mode() is not None


def has_torch_function_variadic(*args):
    """:func:`has_torch_function` over ``args``."""
    return has_torch_function(args)


def _overloaded_args(relevant_args):
    types, found = [], []
    for arg in relevant_args:
        t = type(arg)
        if t in types or not _overrides(arg):
            continue
        # subclasses go before their bases, otherwise first come first served
        index = next((i for i, o in enumerate(found) if issubclass(t, type(o))), len(found))
        found.insert(index, arg)
        types.append(t)
    return found


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Call ``__torch_function__`` of the active mode, else of the overloaded arguments
    until one answers."""
    mode = _mode()
    if mode is not None:
        from ember import _torch_function
        return _torch_function._call_mode(mode, public_api, args, kwargs)
    overloaded = _overloaded_args(relevant_args)
    types = tuple(type(a) for a in overloaded)
    for arg in overloaded:
        result = type(arg).__torch_function__(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    name = getattr(public_api, "__module__", "") + "." + getattr(public_api, "__name__", "")
    raise TypeError(f"no implementation found for '{name}' on types that implement "
                    f"__torch_function__: {[type(a) for a in overloaded]}")


def wrap_torch_function(dispatcher):
    """Decorator: the function dispatches through ``__torch_function__`` of the
    arguments ``dispatcher(*args, **kwargs)`` names."""
    import functools

    def inner(func):
        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)
        return wrapped
    return inner


def is_tensor_like(inp):
    """True for a tensor or an object whose type defines ``__torch_function__``."""
    from ember._tensor import Tensor
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


def is_tensor_method_or_property(func):
    """True if ``func`` is a method or property of ``Tensor``."""
    from ember._tensor import Tensor
    name = getattr(func, "__name__", None)
    return name is not None and getattr(Tensor, name, None) is func


def __getattr__(name):
    # the mode lives beside the mode stack; imported on first use
    if name in ("TorchFunctionMode", "is_torch_function_mode_enabled",
                "_is_torch_function_mode_enabled"):
        from ember import _torch_function
        return getattr(_torch_function, name.lstrip("_"))
    raise AttributeError(f"module 'torch.overrides' has no attribute '{name}'")


def _no_table(what):
    raise NotImplementedError(f"torch.overrides.{what} is not implemented in ember (its "
                              "operators do not dispatch through __torch_function__)")


def get_ignored_functions():
    """Not in ember (see :class:`TorchFunctionMode`)."""
    _no_table("get_ignored_functions")


def get_overridable_functions():
    """Not in ember (see :class:`TorchFunctionMode`)."""
    _no_table("get_overridable_functions")


def get_testing_overrides():
    """Not in ember (see :class:`TorchFunctionMode`)."""
    _no_table("get_testing_overrides")
