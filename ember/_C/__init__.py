"""``torch._C``: the few names of PyTorch's C++ extension module that pure-Python
libraries touch. Everything else raises AttributeError naming itself: ember has no
C++ core."""
from ember._C import _nn  # noqa: F401

__all__ = ["_log_api_usage_once", "_TensorMeta", "_get_tracing_state", "Generator",
           "_disabled_torch_function_impl", "_nn", "_get_cpp_backtrace",
           "_cuda_getDeviceCount", "_set_grad_enabled", "ScriptModule", "ScriptFunction",
           "_TensorBase", "TensorBase", "PyTorchFileReader"]

_api_usage = set()  # the keys logged, as torch's once-only usage logger keeps


def _log_api_usage_once(event):
    """Record that an API was used (torch sends it to its usage logger, off by
    default); ember keeps the set of keys in ``_api_usage``."""
    _api_usage.add(str(event))


def _get_tracing_state():
    """A truthy state while ``jit.trace`` records, else None."""
    from ember.jit import is_tracing
    return True if is_tracing() else None


def _cuda_getDeviceCount():
    """The number of CUDA devices ember sees."""
    from ember.cuda import device_count
    return device_count()


def _set_grad_enabled(mode):
    """Turn gradient recording on or off."""
    from ember.autograd.grad_mode import set_grad_enabled
    set_grad_enabled(mode)


def _get_cpp_backtrace(frames_to_skip=0, maximum_number_of_frames=64):
    """ember has no C++ frames: the empty backtrace."""
    return ""


def _disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """The ``__torch_function__`` that subclasses set to opt out of the protocol: the
    function runs on its arguments as given."""
    return func(*args, **(kwargs or {}))


def __getattr__(name):
    if name == "_TensorMeta":  # the metaclass of Tensor
        from ember._tensor import Tensor
        return type(Tensor)
    if name in ("_TensorBase", "TensorBase"):
        from ember._tensor import Tensor
        return Tensor
    if name == "Generator":
        from ember._random import Generator
        return Generator
    if name in ("DisableTorchFunction", "DisableTorchFunctionSubclass",
                "_is_torch_function_mode_enabled"):
        from ember import _torch_function
        return getattr(_torch_function, name.lstrip("_"))
    if name == "PyTorchFileReader":
        from ember._C._serialization import PyTorchFileReader
        return PyTorchFileReader
    if name in ("ScriptModule", "ScriptFunction"):
        import ember.jit as jit
        return getattr(jit, name)
    raise AttributeError(f"module 'torch._C' has no attribute '{name}': PyTorch's C++ "
                         "extension module has no counterpart in ember beyond the names in "
                         "ember._C")
