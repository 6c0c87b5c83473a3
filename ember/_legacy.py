"""Legacy PyTorch spellings that real programs still use: ``torch.FloatTensor(...)``,
``Variable``, thread settings, ``torch.compile`` and friends."""
import warnings

from ember._tensor import Tensor
from ember.backend import dtypes as _dt

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
           "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor", "Variable",
           "set_num_threads", "get_num_threads", "set_num_interop_threads",
           "get_num_interop_threads", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "set_float32_matmul_precision",
           "get_float32_matmul_precision", "compile", "is_floating_point", "is_nonzero",
           "typename", "set_default_tensor_type"]


class _LegacyType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls._dtype and not obj.is_cuda


def _legacy(name, dtype):
    def __new__(cls, *args, device=None):
        from ember import _factory
        if len(args) == 1 and not isinstance(args[0], int):
            if isinstance(args[0], Tensor):
                return args[0].to(dtype)
            return _factory.tensor(args[0], dtype=dtype)
        return _factory.empty(*args, dtype=dtype)
    return _LegacyType(name, (), {"__new__": __new__, "_dtype": dtype,
                                  "__doc__": f"``torch.{name}``: a {dtype} tensor."})


FloatTensor = _legacy("FloatTensor", _dt.float32)
DoubleTensor = _legacy("DoubleTensor", _dt.float64)
HalfTensor = _legacy("HalfTensor", _dt.float16)
LongTensor = _legacy("LongTensor", _dt.int64)
IntTensor = _legacy("IntTensor", _dt.int32)
ShortTensor = _legacy("ShortTensor", _dt.int16)
CharTensor = _legacy("CharTensor", _dt.int8)
ByteTensor = _legacy("ByteTensor", _dt.uint8)
BoolTensor = _legacy("BoolTensor", _dt.bool)


def Variable(tensor, requires_grad=False, volatile=False):
    """The pre-0.4 wrapper: returns ``tensor`` itself, with ``requires_grad`` set."""
    if requires_grad:
        tensor.requires_grad_(True)
    return tensor


_threads = {"intra": 1, "inter": 1, "deterministic": False, "precision": "highest"}


def set_num_threads(n):
    """Accepted for compatibility; NumPy's BLAS decides its own threads."""
    _threads["intra"] = int(n)


def get_num_threads():
    return _threads["intra"]


def set_num_interop_threads(n):
    _threads["inter"] = int(n)


def get_num_interop_threads():
    return _threads["inter"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """ember's CPU ops are deterministic already; the flag is recorded."""
    _threads["deterministic"] = bool(mode)


def are_deterministic_algorithms_enabled():
    return _threads["deterministic"]


def set_float32_matmul_precision(precision):
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}")
    _threads["precision"] = precision


def get_float32_matmul_precision():
    return _threads["precision"]


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
            options=None, disable=False):
    """``torch.compile``: ember runs eagerly, so this returns ``model`` unchanged."""
    if model is None:
        return lambda m: m
    warnings.warn("ember.compile: ember runs eagerly; the model is returned unchanged",
                  UserWarning, stacklevel=2)
    return model


def is_floating_point(input):
    """True for float16/32/64 tensors."""
    return input.is_floating_point()


def is_nonzero(input):
    """The truth value of a one-element tensor."""
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


def typename(obj):
    """``'torch.FloatTensor'``-style name of a tensor, else the Python type's name."""
    if isinstance(obj, Tensor):
        return obj.type()
    return type(obj).__module__ + "." + type(obj).__qualname__


def set_default_tensor_type(t):
    """Legacy: ``torch.DoubleTensor`` (or its name) sets the default float dtype."""
    name = t if isinstance(t, str) else t.__name__
    name = name.split(".")[-1]
    mapping = {"FloatTensor": _dt.float32, "DoubleTensor": _dt.float64,
               "HalfTensor": _dt.float16}
    if name not in mapping:
        raise TypeError(f"invalid type {t!r} for set_default_tensor_type")
    _dt.set_default_dtype(mapping[name])
