"""``torch._C._nn``: ``_parse_to``, the argument parser of ``Module.to``/``Tensor.to``."""
__all__ = ["_parse_to"]


def _parse_to(*args, **kwargs):
    """``(device, dtype, non_blocking, memory_format)`` from ``to()``'s arguments; a
    part not given is None (``non_blocking`` False)."""
    from ember.ops.conversion import _parse_to as parse
    non_blocking = bool(kwargs.pop("non_blocking", False))
    memory_format = kwargs.pop("memory_format", None)
    given_device = "device" in kwargs or any(not _is_dtype_like(a) for a in args)
    given_dtype = "dtype" in kwargs or any(_is_dtype_like(a) or _is_tensor(a) for a in args)
    if len(args) > 1 and isinstance(args[-1], bool):  # to(device, dtype, non_blocking)
        *args, non_blocking = args
    dtype, device, _ = parse(tuple(args), dict(kwargs))
    return (device if given_device else None, dtype if given_dtype else None,
            non_blocking, memory_format)


def _is_tensor(a):
    from ember._tensor import Tensor
    return isinstance(a, Tensor)


def _is_dtype_like(a):
    from ember.backend.dtypes import dtype
    return isinstance(a, dtype)
