"""One table: TorchScript builtin names (``torch.linear``, ``ops.prim.NumToTensor``) -> ember.

TorchScript code calls aten operators by their schema: ``torch.batch_norm(input, weight,
bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)``. Where a
schema differs from ember's Python API, an entry here adapts it; where it matches,
:func:`lookup` falls back to ember's own operator of the same name — only for a name
torch registers an ``aten`` operator for (:mod:`ember.jit._schema_names`), and only to
functions defined in ``ember.ops``, factories and random draws, or to an aten Tensor
method called on a Tensor; never file, process or global-state functions, never an
attribute of any other object. ``ops.aten.X`` is ``torch.X``.

Names that TorchScript code uses but ember cannot run (nested tensors, packed RNN
sequences) have entries that raise ``NotImplementedError`` naming them when called,
so an archive whose code merely mentions them in an untaken branch still loads.
jit-trace and jit-script add entries here (additive).
"""
import math
import operator
import re
import warnings

from ember._tensor import Tensor
from ember.jit import _limits
from ember.jit import _schema_names as _names

__all__ = ["TABLE", "lookup", "lookup_method", "known", "register", "DUNDER_OPS",
           "scalar_type", "SCALAR_TYPES"]

TABLE = {}

# torch.* names with double underscores that are ordinary TorchScript operators
DUNDER_OPS = {"__is__", "__isnot__", "__not__", "__contains__", "__getitem__", "__and__",
              "__or__", "__xor__", "__range_length", "__derive_index", "__round_to_zero_floordiv",
              "__interpolate", "__upsample", "__upsample_bilinear", "__lshift__", "__rshift__",
              "__iand__", "__ior__"}


def register(*names):
    """Decorator: ``@register("torch.linear")`` adds a builtin under each name."""
    def deco(fn):
        for n in names:
            TABLE[n] = fn
        return fn
    return deco


def _ember():
    import ember  # the torch namespace, looked up when a builtin is resolved
    return ember


def _Tensor():
    return Tensor


_FALLBACK_MODULES = ("ember.ops.", "ember.autograd.node", "ember._factory", "ember._random_ops",
                     "ember._legacy")
_NEVER = {"save", "load", "set_default_device", "set_default_dtype", "manual_seed", "seed",
          "set_rng_state", "get_rng_state", "set_num_threads", "set_num_interop_threads",
          "use_deterministic_algorithms", "set_default_tensor_type", "compile",
          "set_float32_matmul_precision", "from_numpy", "register_hook", "backward",
          "register_post_accumulate_grad_hook", "numpy", "share_memory_", "apply_", "map_",
          "map2_", "storage", "untyped_storage", "data_ptr", "tolist", "pin_memory",
          "set_", "requires_grad_", "retain_grad", "cuda", "Variable",
          # views with caller-chosen strides are not bounds-checked by NumPy: a file must
          # not be able to read memory outside its tensors
          "as_strided", "as_strided_", "as_subclass", "new", "type"}


def refused(name):
    """Names TorchScript code may not call in ember: file, seed, thread and global state."""
    short = name.rpartition(".")[2]
    return name.startswith(("torch.", "ops.aten.")) and short in _NEVER and name not in TABLE


# Tensor methods TorchScript has beyond the aten operators: x.float(), x.tolist() ...
_CAST_METHODS = {"byte", "char", "short", "int", "long", "half", "float", "double",
                 "bfloat16", "cfloat", "cdouble"}


def _aten(short):
    return short in _names.ATEN_METHODS or short in _names.ATEN_FUNCTIONS


def known(name):
    """Whether TorchScript has an operator ``name`` (``torch.X``, ``ops.prim.X``,
    ``ops.quantized.X``...): an entry of :data:`TABLE` or one of torch's schemas."""
    if name in TABLE:
        return True
    ns, _, short = name.rpartition(".")
    if ns in ("torch", "ops.aten"):
        return _aten(short)
    if ns == "ops.prim":
        return short in _names.PRIM
    return ns.startswith("ops.") and ns.count(".") == 1 and f"{ns[4:]}.{short}" in _names.OTHER


def schema_name(name):
    """``torch.mro`` -> ``aten::mro``, ``ops.prim.X`` -> ``prim::X`` (for messages)."""
    ns, _, short = name.rpartition(".")
    if ns == "torch":
        return f"aten::{short}"
    if ns.startswith("ops.") and ns.count(".") == 1:
        return f"{ns[4:]}::{short}"
    return name


_UNRESOLVED = set()  # TorchScript operators that ember does not have


def lookup(name):
    """The ember callable for a TorchScript builtin name, or None when there is none.

    An explicit allowlist: the entries of :data:`TABLE`, and for the ``aten`` operators
    TorchScript has (``_schema_names``) ember's operator of the same name or, for the
    ``aten`` Tensor methods, the method called on a Tensor. Nothing else resolves.
    """
    fn = TABLE.get(name)
    if fn is not None:
        return fn
    if name.startswith("ops.aten."):
        return lookup("torch." + name[len("ops.aten."):])
    if not name.startswith("torch.") or name.count(".") != 1 or name in _UNRESOLVED:
        return None
    short = name[len("torch."):]
    if short.startswith("_") or short in _NEVER or not _aten(short):
        return None
    ember = _ember()
    obj = getattr(ember, short, None) if short in dir(ember) else None
    if obj is None and short.startswith("special_"):
        # aten's special_* operators (torch.special.* in Python) are ember.ops.special's
        from ember.ops import special
        obj = getattr(special, short, None)
    if callable(obj) and not isinstance(obj, type) and \
            getattr(obj, "__module__", "").startswith(_FALLBACK_MODULES):
        fn = _scalar_aware(short, obj)
    elif short in _names.ATEN_METHODS and callable(getattr(_Tensor(), short, None)):
        fn = _scalar_aware(short, _method_caller(short))
    else:
        _UNRESOLVED.add(name)  # a file naming it a million times asks once
        return None
    TABLE[name] = fn
    return fn


def lookup_method(name):
    """The callable for the Tensor method ``x.name(...)`` in TorchScript, or None.

    Only TorchScript's Tensor methods resolve: the ``aten`` operators whose first
    argument is ``self: Tensor`` and the dtype casts (``x.float()``).
    """
    if name.startswith("_") or name in _NEVER:
        return None
    if name in _CAST_METHODS:
        return _method_caller(name)
    if name not in _names.ATEN_METHODS:
        return None
    return lookup("torch." + name)


def is_tensor_method(name):
    """Whether TorchScript has a Tensor method ``name`` (ember may still lack it)."""
    return name in _names.ATEN_METHODS or name in _CAST_METHODS


def _method_caller(short):
    Tensor = _Tensor()

    def call(self, *args, **kwargs):
        if not isinstance(self, Tensor):  # never a method of some other Python object
            raise TypeError(f"TorchScript builtin torch.{short} expects a Tensor, not "
                            f"{type(self).__name__}")
        return getattr(self, short)(*_dtypes(args), **_kw(kwargs))
    call.__name__ = short
    return call


_PY_SCALAR = {"abs": abs, "round": lambda x: float(round(x)), "neg": operator.neg}


def _scalar_aware(short, fn):
    """Math on Python numbers (``torch.sqrt(E)`` on an int) uses :mod:`math`."""
    py = _PY_SCALAR.get(short) or getattr(math, short, None)
    Tensor = _Tensor()

    def call(*args, **kwargs):
        if py is not None and args and not isinstance(args[0], Tensor) \
                and isinstance(args[0], (int, float)) and not kwargs:
            return py(*args)
        return fn(*_dtypes(args), **_kw(kwargs))
    call.__name__ = short
    return call


# ----- dtype codes: TorchScript writes dtype=6 (c10::ScalarType) -------------------------
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
                6: "float32", 7: "float64", 8: "complex32", 9: "complex64", 10: "complex128",
                11: "bool", 15: "bfloat16"}
_CODE_OF = {v: k for k, v in SCALAR_TYPES.items()}


def scalar_type(v):
    """An ember dtype for a ScalarType code (ints pass through other values unchanged)."""
    if isinstance(v, int) and not isinstance(v, bool):
        from ember.backend import dtypes
        name = SCALAR_TYPES.get(v)
        if name is None or name not in dtypes._BY_NAME:
            raise NotImplementedError(f"TorchScript dtype code {v} has no ember dtype")
        return dtypes._BY_NAME[name]
    return v


def dtype_code(d):
    """The ScalarType code for an ember dtype (ember's writers use it)."""
    return _CODE_OF[d.name]


def _dtypes(args):
    return args


_DROP = ("layout", "pin_memory", "memory_format", "non_blocking", "copy")


def _kw(kwargs):
    if not kwargs:
        return kwargs
    out = {}
    for k, v in kwargs.items():
        if k in _DROP:
            continue
        out[k] = scalar_type(v) if k == "dtype" else v
    return out


def _is_t(x):
    return isinstance(x, Tensor)


# ----- arithmetic and comparisons on tensors or Python values ------------------------------
def _binary(name, py):
    def op(a, b, *rest, **kw):
        if not (_is_t(a) or _is_t(b)) and not rest and not kw:
            return py(a, b)
        return getattr(_ember(), name)(a, b, *rest, **kw)
    op.__name__ = name
    return op


for _n, _py in (("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt),
                ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                ("mul", _limits.mul), ("remainder", lambda a, b: a % b),
                ("fmod", math.fmod), ("pow", _limits.pow_), ("atan2", math.atan2),
                ("floor_divide", operator.floordiv)):
    TABLE["torch." + _n] = _binary(_n, _py)
TABLE["torch.floordiv"] = operator.floordiv
TABLE["torch.__round_to_zero_floordiv"] = lambda a, b: int(a / b)


@register("torch.add")
def _add(a, b, alpha=1):
    if not (_is_t(a) or _is_t(b)):
        return a + b * alpha if alpha != 1 else a + b
    return _ember().add(a, b, alpha=alpha)


@register("torch.sub")
def _sub(a, b, alpha=1):
    if not (_is_t(a) or _is_t(b)):
        return a - b * alpha
    return _ember().sub(a, b, alpha=alpha)


@register("torch.rsub")
def _rsub(a, b, alpha=1):
    return _ember().sub(b, a, alpha=alpha) if _is_t(a) or _is_t(b) else b - a * alpha


@register("torch.div")
def _div(a, b, rounding_mode=None):
    if not (_is_t(a) or _is_t(b)):
        if rounding_mode == "floor":
            return a // b
        if rounding_mode == "trunc":
            return float(math.trunc(a / b))
        return a / b
    return _ember().div(a, b, rounding_mode=rounding_mode)


@register("torch.neg")
def _neg(a):
    return -a


for _n in ("add_", "sub_", "mul_", "div_"):
    TABLE["torch." + _n] = (lambda m: lambda a, b, **kw: getattr(a, m)(b, **kw))(_n)

# ----- the TorchScript language's own operators --------------------------------------------
TABLE.update({
    "torch.__is__": operator.is_, "torch.__isnot__": operator.is_not,
    "torch.__not__": operator.not_, "torch.__contains__": lambda c, x: x in c,
    "torch.__getitem__": operator.getitem, "torch.__and__": lambda a, b: a and b if not
    _is_t(a) else a & b, "torch.__or__": lambda a, b: a or b if not _is_t(a) else a | b,
    "torch.__xor__": operator.xor, "torch.len": len, "torch.list": list,
    "torch.append": lambda lst, x: (lst.append(x), lst)[1],
    "torch.format": lambda fmt, *args: safe_format(fmt, *args),
    "torch.warn": lambda msg, stacklevel=2: warnings.warn(msg, stacklevel=2),
    "torch.__range_length": lambda lo, hi, step: max(0, -(-(hi - lo) // step)) if step > 0
    else max(0, -(-(lo - hi) // -step)),
    "torch.__derive_index": lambda i, start, step: start + i * step,
    "torch.is_grad_enabled": lambda: _ember().is_grad_enabled(),
    "torch.is_autocast_enabled": lambda *a: False,
    "torch.is_autocast_cpu_enabled": lambda: False,
    "torch.device": lambda spec, index=None: _ember().device(spec if index is None
                                                           else f"{spec}:{index}"),
    "torch.keys": lambda d: list(d.keys()), "torch.values": lambda d: list(d.values()),
    "torch.items": lambda d: list(d.items()),
    "torch.copy": lambda x: list(x) if isinstance(x, list) else x.copy(),
    "torch.extend": lambda lst, other: lst.extend(other),
    "torch.insert": lambda lst, i, x: lst.insert(i, x),
    "torch.pop": lambda c, *k: c.pop(*k),
    "torch.get": lambda d, k, default=None: d.get(k, default),
    "torch.sqrt_": lambda x: x.sqrt_(),
    "torch.str": str, "torch.Float": float, "torch.Int": int, "torch.Bool": bool,
    "torch.ScalarImplicit": lambda t: t.item(), "torch.FloatImplicit": lambda t: t.item(),
    "torch.IntImplicit": lambda t: int(t.item()),
    "math.sqrt": math.sqrt, "math.exp": math.exp, "math.log": math.log, "math.pi": math.pi,
    "math.inf": math.inf, "math.floor": math.floor, "math.ceil": math.ceil,
    "math.isnan": math.isnan, "math.isinf": math.isinf, "math.pow": math.pow,
})


def safe_format(fmt, *args):
    """``"...{}...".format(*args)`` without ``{0.attr}`` / ``{0[key]}`` fields (Python's
    format mini-language can walk attributes: a file must not read ember's globals)."""
    import string
    out, auto = [], 0
    for literal, field, spec, conv in string.Formatter().parse(fmt):
        out.append(literal)
        if field is None:
            continue
        if field == "":
            index, auto = auto, auto + 1
        elif field.isdigit():
            index = int(field)
        else:
            raise ValueError(f"TorchScript format field {{{field}}} is not supported (only "
                             "{} and {N})")
        if "{" in (spec or ""):
            raise ValueError("nested format fields are not supported in TorchScript format")
        if any(int(n) > _limits.MAX_ELEMENTS for n in re.findall(r"\d+", spec or "")):
            raise ValueError(f"TorchScript format spec {spec!r} asks for more than "
                             f"{_limits.MAX_ELEMENTS} characters")
        value = args[index]
        value = repr(value) if conv == "r" else str(value) if conv == "s" else value
        out.append(format(value, spec or ""))
    return "".join(out)


@register("torch.__getitem__")
def _getitem(c, i):
    return c[i]


@register("torch.dim")
def _dim(x):
    return x.dim()


@register("torch.numel")
def _numel(x):
    return x.numel()


@register("torch.size")
def _size(x, dim=None):
    return list(x.shape) if dim is None else x.shape[dim]


@register("torch.slice")
def _slice(x, *args, **kw):
    if isinstance(x, (list, str, tuple)):
        start, end, step = (list(args) + [None, None, 1])[:3]
        start, end, step = kw.get("start", start), kw.get("end", end), kw.get("step", step)
        return x[slice(start, end, step)]
    dim, start, end, step = (list(args) + [0, None, None, 1][len(args):])[:4]
    dim = kw.get("dim", dim)
    start, end, step = kw.get("start", start), kw.get("end", end), kw.get("step", step)
    idx = [slice(None)] * x.dim()
    idx[dim] = slice(start, end, step)
    return x[tuple(idx)]


@register("torch.sorted")
def _sorted(x):
    return sorted(x)


@register("torch.select")
def _select(x, dim, index=None):
    if index is None:  # list select
        return x[dim]
    return x.select(dim, index)


@register("torch.min", "ops.prim.min")
def _min(a, *rest, **kw):
    if not _is_t(a):
        return min(a) if not rest else min(a, *rest)
    return _ember().min(a, *rest, **kw)


@register("torch.max", "ops.prim.max")
def _max(a, *rest, **kw):
    if not _is_t(a):
        return max(a) if not rest else max(a, *rest)
    return _ember().max(a, *rest, **kw)


def _list_or_tensor(name):
    def op(x, *args, **kw):
        if isinstance(x, list):
            return getattr(x, name)(*args, **kw)
        if not isinstance(x, Tensor):
            raise TypeError(f"TorchScript builtin torch.{name} takes a list or a Tensor, "
                            f"not {type(x).__name__}")
        ember = _ember()
        return getattr(ember, name)(x, *args, **kw) if hasattr(ember, name) else \
            getattr(x, name)(*args, **kw)
    op.__name__ = name
    return op


for _n in ("sort", "count", "remove", "reverse", "clear"):
    TABLE["torch." + _n] = _list_or_tensor(_n)


@register("torch.any")
def _any(x, *args, **kw):
    return any(x) if isinstance(x, list) else _ember().any(x, *args, **kw)


@register("torch.all")
def _all(x, *args, **kw):
    return all(x) if isinstance(x, list) else _ember().all(x, *args, **kw)


# ----- ops.prim ----------------------------------------------------------------------------
_EXCEPTIONS = {"builtins." + e.__name__: e for e in (
    ValueError, RuntimeError, TypeError, AssertionError, IndexError, KeyError,
    NotImplementedError, AttributeError, ZeroDivisionError, StopIteration)}


def raise_exception(msg, cls_name=None):
    """``ops.prim.RaiseException(msg, "builtins.ValueError")``: raise that builtin exception
    (any other class name raises RuntimeError; no class is looked up by name)."""
    raise _EXCEPTIONS.get(cls_name, RuntimeError)(msg)


TABLE.update({
    "ops.prim.NumToTensor": lambda v: _ember().scalar_tensor(v, dtype=_ember().int64)
    if isinstance(v, int) and not isinstance(v, bool) else _ember().scalar_tensor(v),
    "ops.prim.dtype": lambda x: dtype_code(x.dtype), "ops.prim.device": lambda x: x.device,
    "ops.prim.type": lambda d: d.type, "ops.prim.requires_grad": lambda x: x.requires_grad,
    "ops.prim.is_nested": lambda x: False, "ops.prim.is_cuda": lambda x: x.is_cuda,
    "ops.prim.is_sparse": lambda x: False, "ops.prim.is_quantized": lambda x: False,
    "ops.prim.is_mkldnn": lambda x: False, "ops.prim.is_meta": lambda x: False,
    "ops.prim.layout": lambda x: 0, "ops.prim.RaiseException": raise_exception,
    "ops.prim.unchecked_unwrap_optional": lambda x: x, "ops.prim.data": lambda x: x.detach(),
    "ops.prim.shape": lambda x: list(x.shape), "ops.prim.name": lambda x: None,
    "ops.prim.grad": lambda x: x.grad, "ops.prim.index": lambda d: d.index,
    "ops.prim.abs": abs, "ops.prim.is_xpu": lambda x: False, "ops.prim.is_mps": lambda x: False,
    "ops.prim.is_vulkan": lambda x: False, "ops.prim.is_ipu": lambda x: False,
    "ops.prim.is_maia": lambda x: False, "ops.prim.is_xla": lambda x: False,
    "ops.prim.is_mtia": lambda x: False,
})


def _not_in_ember(name, why):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"TorchScript builtin {name} is not supported by ember: "
                                  f"{why}")
    fn.__name__ = name
    return fn


for _n in ("_nested_tensor_from_mask", "_nested_tensor_from_mask_left_aligned",
           "to_padded_tensor", "_nested_tensor_from_tensor_list", "nested_tensor"):
    TABLE["torch." + _n] = _not_in_ember("torch." + _n, "ember has no nested tensors")
