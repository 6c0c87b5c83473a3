"""Legacy PyTorch spellings that real programs still use: ``torch.FloatTensor(...)``,
``Variable``, thread settings, ``torch.compile`` and friends."""
import math

from ember._tensor import Tensor
from ember.backend import dtypes as _dt
from ember.backend import threads as _intra

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
           "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor", "Variable",
           "set_num_threads", "get_num_threads", "set_num_interop_threads",
           "get_num_interop_threads", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "set_float32_matmul_precision",
           "get_float32_matmul_precision", "compile", "is_floating_point", "is_nonzero",
           "typename", "set_default_tensor_type", "is_same_size", "is_signed",
           "is_inference", "is_neg", "resolve_neg"]


class _LegacyType(type):
    """The type of ``torch.FloatTensor`` and its siblings (torch's ``tensortype``).

    Calling one builds a tensor of its dtype, as torch's legacy constructor does:
    ``FloatTensor()`` is empty, ``FloatTensor(2, 3)`` or ``FloatTensor(Size([2, 3]))``
    is uninitialized of that shape, ``FloatTensor([[1, 2]])`` (a list, tuple, range or
    NumPy array) holds that data cast to the dtype, ``FloatTensor(t)`` is an alias of a
    tensor ``t`` of that very dtype and device, and ``FloatTensor(storage)`` sees an
    untyped storage's bytes as that dtype. The only keyword is ``device``, which must
    be of the type's kind. ``isinstance(t, FloatTensor)`` checks the dtype and kind.
    """

    _cuda = False

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls._dtype and obj.is_cuda == cls._cuda

    def __repr__(cls):
        return f"<class 'torch.{'cuda.' if cls._cuda else ''}{cls.__name__}'>"

    @property
    def dtype(cls):
        return cls._dtype

    @property
    def is_cuda(cls):
        return cls._cuda

    @property
    def is_sparse(cls):
        return False

    @property
    def layout(cls):
        from ember.sparse import strided
        return strided

    def __call__(cls, *args, **kwargs):
        return _legacy_new(cls, args, kwargs)


def _type_name(obj):
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _is_size_int(x):
    import numpy as np
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _legacy_new(cls, args, kwargs):
    """``cls(*args, **kwargs)`` for a legacy tensor type (see :class:`_LegacyType`)."""
    import numpy as np

    from ember import _factory
    from ember._tensor import Size, _make
    from ember.backend import as_device
    from ember.storage import UntypedStorage
    kind = "cuda" if cls._cuda else "cpu"
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"new() received an invalid combination of arguments - got unexpected "
                        f"keyword argument(s) {', '.join(map(repr, kwargs))}; "
                        f"{cls!r} takes sizes or data, and device=")
    device = as_device(device)
    if device is not None and device.type != kind:
        raise RuntimeError(f"legacy constructor expects device type: {kind} but device type: "
                           f"{device.type} was passed")
    device = device or kind
    dtype = cls._dtype
    if len(args) == 1 and not _is_size_int(args[0]):
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not dtype or data.device.type != kind:
                raise TypeError(f"{cls!r} expected a tensor of dtype {dtype} on {kind} (got "
                                f"dtype {data.dtype} on {data.device}); convert it with "
                                f"t.to({dtype})")
            return data.view_as(data)  # an alias: same memory, same autograd history
        if isinstance(data, UntypedStorage):
            if kind != "cpu":
                raise TypeError(f"{cls!r}: expected a CUDA storage (got a CPU one)")
            if dtype.np.kind not in "biufc":
                raise NotImplementedError(f"{cls!r} over a storage is not implemented in ember")
            if data.nbytes() % dtype.itemsize:
                raise RuntimeError(f"the storage's {data.nbytes()} bytes are not a whole number "
                                   f"of {dtype} elements ({dtype.itemsize} bytes each)")
            return _make(data._bytes.view(dtype.np))
        if isinstance(data, Size):
            return _factory.empty(tuple(data), dtype=dtype, device=device)
        if isinstance(data, str):
            raise TypeError("new(): invalid data type 'str'")
        if not isinstance(data, (list, tuple, range, np.ndarray)):
            raise TypeError(f"new(): data must be a sequence (got {_type_name(data)})")
        return _factory.tensor(data, dtype=dtype, device=device)
    for i, size in enumerate(args):
        if not _is_size_int(size):
            raise TypeError(f"new(): argument 'size' failed to unpack the object at pos {i + 1} "
                            f"with error \"type must be tuple of ints, but got "
                            f"{_type_name(size)}\"")
    return _factory.empty(tuple(int(n) for n in args) if args else (0,), dtype=dtype,
                          device=device)


def _legacy(name, dtype):
    return _LegacyType(name, (), {"_dtype": dtype, "__module__": "ember",
                                  "__doc__": f"``torch.{name}``: a {dtype} tensor (see "
                                             "the legacy constructor forms above)."})


class _LegacyCudaType(_LegacyType):
    """``torch.cuda.FloatTensor`` and friends."""


def _legacy_cuda(name, dtype):
    """``torch.cuda.FloatTensor`` and friends: the names exist everywhere (programs test
    ``isinstance`` against them or pass them to ``.type()``); making one needs a GPU."""
    return _LegacyCudaType(name, (), {"_dtype": dtype, "_cuda": True, "__module__": "ember.cuda",
                                      "__doc__": f"``torch.cuda.{name}``: a {dtype} tensor "
                                                 "on the GPU."})


_CUDA_TYPES = ("FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
               "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor")


FloatTensor = _legacy("FloatTensor", _dt.float32)
DoubleTensor = _legacy("DoubleTensor", _dt.float64)
HalfTensor = _legacy("HalfTensor", _dt.float16)
LongTensor = _legacy("LongTensor", _dt.int64)
IntTensor = _legacy("IntTensor", _dt.int32)
ShortTensor = _legacy("ShortTensor", _dt.int16)
CharTensor = _legacy("CharTensor", _dt.int8)
ByteTensor = _legacy("ByteTensor", _dt.uint8)
BoolTensor = _legacy("BoolTensor", _dt.bool)


class _VariableMeta(type):
    # as in PyTorch, ``isinstance(t, Variable)`` holds for every Tensor (torchviz checks it)
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)

    def __call__(cls, tensor, requires_grad=False, volatile=False):
        if requires_grad:
            tensor.requires_grad_(True)
        return tensor


class Variable(metaclass=_VariableMeta):
    """The pre-0.4 wrapper: ``Variable(t)`` returns ``t`` itself, with ``requires_grad``
    set; every Tensor is an instance."""


_threads = {"inter": 1, "deterministic": False, "precision": "highest"}


def set_num_threads(n):
    """Use ``n`` threads for ember's split kernels and, with threadpoolctl
    (``ember[fast]``), for NumPy's BLAS (``ember.backend.threads``)."""
    _intra.set_num_threads(n)


def get_num_threads():
    """The intra-op thread count (``OMP_NUM_THREADS``, else ``OPENBLAS_NUM_THREADS``,
    else the cores available, until ``set_num_threads``)."""
    return _intra.get_num_threads()


def set_num_interop_threads(n):
    _threads["inter"] = int(n)


def get_num_interop_threads():
    return _threads["inter"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """ember's CPU ops are deterministic already; the flag is recorded."""
    _threads["deterministic"] = bool(mode)
    _threads["warn_only"] = bool(mode) and bool(warn_only)


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
    """``torch.compile``: capture on the first call, replay the IR while guards hold
    (``ember._compile``; see docs/compile.md)."""
    from ember._compile import compile as _compile
    return _compile(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                    options=options, disable=disable)


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


# Tensor predicates and no-op methods that device-generic programs call

def _false_property(name, what):
    prop = property(lambda self: False,
                    doc=f"``Tensor.{name}``: False (ember has no {what} tensors).")
    setattr(Tensor, name, prop)


for _name, _what in (("is_xpu", "XPU"), ("is_mps", "MPS"), ("is_meta", "meta"),
                     ("is_mtia", "MTIA"), ("is_ipu", "IPU"), ("is_xla", "XLA"),
                     ("is_vulkan", "Vulkan"), ("is_maia", "MAIA"), ("is_mkldnn", "MKL-DNN"),
                     ("is_quantized", "quantized"), ("is_nested", "nested"),
                     ("is_sparse", "sparse COO"), ("is_sparse_csr", "sparse CSR")):
    if not hasattr(Tensor, _name):
        _false_property(_name, _what)


def _is_signed(self):
    """True unless the dtype is unsigned (uint8) or bool."""
    return self.dtype not in (_dt.uint8, _dt.bool)


def _get_device(self):
    """The CUDA device index, or -1 for a CPU tensor."""
    if not self.is_cuda:
        return -1
    return self.device.index or 0


def _is_pinned(self, device=None):
    """False: ember has no page-locked host memory."""
    return False


def _pin_memory(self, device=None):
    """PyTorch pins host memory for an accelerator; without one it raises, as PyTorch
    does. With CuPy's GPU it returns ``self`` (ember has no page-locked memory)."""
    from ember import cuda
    if not cuda.is_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")
    return self


def _share_memory_(self):
    """``self``: worker processes of ember's DataLoader receive copies."""
    return self


def _is_shared(self):
    return False


def _is_inference(self):
    """False: ember's inference_mode does not mark tensors."""
    return False


def _is_same_size(self, other):
    """``self.shape == other.shape``."""
    return self.shape == other.shape


def _is_neg(self):
    return False


def _resolve(self):
    """``self``: ember has no lazy conjugate/negative views."""
    return self


def _output_nr(self):
    """The index of this tensor among the outputs of the node that made it."""
    return self._output_nr


for _name, _fn in (("is_signed", _is_signed), ("get_device", _get_device),
                   ("is_pinned", _is_pinned), ("pin_memory", _pin_memory),
                   ("share_memory_", _share_memory_), ("is_shared", _is_shared),
                   ("is_inference", _is_inference), ("is_same_size", _is_same_size),
                   ("is_neg", _is_neg), ("resolve_neg", _resolve), ("is_nonzero", is_nonzero)):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _fn)
if not hasattr(Tensor, "output_nr"):
    Tensor.output_nr = property(_output_nr, doc=_output_nr.__doc__)

is_same_size = _is_same_size
is_signed = _is_signed
is_inference = _is_inference
is_neg = _is_neg
resolve_neg = _resolve


# constants and aliases PyTorch keeps for NumPy-style and older spellings

pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None
__all__ += ["pi", "e", "inf", "nan", "newaxis", "detach", "get_device"]


def detach(input):
    """``input.detach()``."""
    return input.detach()


def get_device(input):
    """``input.get_device()``: -1 on the CPU."""
    return input.get_device()


def _new(self, *args, device=None):
    """Legacy ``x.new(...)``: ``x.new(2, 3)`` is an uninitialised tensor with ``x``'s dtype
    and device, ``x.new(data)`` a tensor of ``data`` with them."""
    from ember import _factory
    dev = self.device if device is None else device
    if len(args) == 1 and not isinstance(args[0], int):
        if isinstance(args[0], Tensor):
            return args[0].to(self.dtype)
        return _factory.tensor(args[0], dtype=self.dtype, device=dev)
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    # (no sizes: an empty 1-D tensor, as PyTorch's ``x.new()``)
    return _factory.empty(*(args or (0,)), dtype=self.dtype, device=dev)


def _apply_(self, callable):
    """Apply a Python function to each element in place (cpu tensors, no autograd)."""
    import numpy as np
    if self._requires_grad:
        raise RuntimeError("apply_ is only implemented on CPU tensors that do not require "
                           "grad")
    flat = self.numpy().reshape(-1)
    flat[...] = np.array([callable(v) for v in flat.tolist()], dtype=flat.dtype)
    self._vc[0] += 1
    return self


def _map_(self, tensor, callable):
    """``self[i] = callable(self[i], tensor[i])`` for each element, in place (cpu)."""
    import numpy as np
    if self._requires_grad:
        raise RuntimeError("map_ is only implemented on CPU tensors that do not require grad")
    other = np.broadcast_to(tensor.numpy(), self.shape).reshape(-1).tolist()
    flat = self.numpy().reshape(-1)
    flat[...] = np.array([callable(a, b) for a, b in zip(flat.tolist(), other)],
                         dtype=flat.dtype)
    self._vc[0] += 1
    return self


for _name, _fn in (("new", _new), ("apply_", _apply_), ("map_", _map_)):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _fn)
for _name, _fn in (("volatile", lambda self: False),):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, property(_fn))

# PyTorch's alias names for methods ember has under another name. This module is
# imported before the op families bind their methods, so the aliases look the target
# up when called.
_ALIASES = {"arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh", "arccosh_": "acosh_",
            "arcsinh_": "asinh_", "arctanh_": "atanh_", "arctan2_": "atan2_",
            "less_": "lt_", "less_equal_": "le_", "greater_": "gt_", "greater_equal_": "ge_",
            "not_equal_": "ne_", "swapaxes_": "transpose_", "swapdims_": "transpose_"}


def _alias(alias, target):
    def method(self, *args, **kwargs):
        return getattr(self, target)(*args, **kwargs)
    method.__name__ = alias
    method.__doc__ = f"Alias for :meth:`Tensor.{target}`."
    return method


for _name, _target in _ALIASES.items():
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _alias(_name, _target))

# torch.exp_(t) and friends: the in-place Tensor methods as functions
_INPLACE_FUNCTIONS = [
    "abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
    "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_",
    "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_", "exp_",
    "expm1_", "fix_", "floor_", "frac_", "log10_", "log1p_", "log2_", "log_", "logit_",
    "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_",
    "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_",
    "xlogy_", "addmv_", "detach_", "arccosh", "arcsinh", "arctanh"]


def _function(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = name
    fn.__doc__ = f"``torch.{name}(input, ...)``: ``input.{name}(...)``."
    return fn


for _name in _INPLACE_FUNCTIONS:
    globals()[_name] = _function(_name)
__all__ += _INPLACE_FUNCTIONS


cuda_legacy_types = {name: _legacy_cuda(name, globals()[name]._dtype) for name in _CUDA_TYPES}
