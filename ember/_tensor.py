"""The Tensor: a thin handle on an array plus its place in the autograd graph.

Math methods and operators are bound onto this class by ``ember.ops`` (see
``ember.ops._bind``); this file holds only state, conversions and autograd plumbing.
"""
import operator as _operator
import warnings
from numbers import Number as _Number

import numpy as np

from ember.backend import CPU, device_of
from ember.backend import complex32 as _c32
from ember.backend import dtypes as _dt
from ember.backend._frozen import FrozenClass
from ember.backend.meta import MetaArray as _MetaArray

__all__ = ["Tensor", "Size"]

_FROM_NP = _dt.FROM_NP
_ndarray = np.ndarray
_new = object.__new__

# The state of the mode stack (``ember.autograd._modes`` works on these very objects). It
# lives here, below every other module, because Tensor's own methods consult it: under a
# graph capture ``size``/``shape`` return traced ints and turning a tensor into a Python
# value is reported. Outside any mode that costs one check of ``_mode_active[0]``.
_mode_stack = []
_mode_active = [0]


def _mode_with(attr):
    """The innermost mode the current call can see that has ``attr``, or None."""
    i = _mode_active[0]
    while i:
        i -= 1
        m = _mode_stack[i]
        if hasattr(m, attr):
            return m
    return None


def _mode_recorder(values=None):
    """The visible mode that records composite functions (a graph capture) if it is the
    innermost one, or if every visible mode above it is ``transparent`` to a call with
    the argument ``values``; else None (see ``ember.autograd._modes.recorder``)."""
    n = _mode_active[0]
    while n:
        n -= 1
        m = _mode_stack[n]
        if m.composites:
            return m
        if values is None or not m.transparent(values):
            return None
    return None


def _python_value(t, what):
    """``t`` becomes a Python value (``what`` names the conversion): tell the modes."""
    m = _mode_with("python_value")
    if m is not None:
        m.python_value(t, what)


class Size(tuple, metaclass=FrozenClass):
    """A tensor's shape: a tuple that prints as ``ember.Size([2, 3])``. Immutable, class
    included (it is shared by every tensor's ``.shape``)."""

    __slots__ = ()

    def __repr__(self):
        return f"ember.Size({list(self)})"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))


class _Extra:
    """Rarely used per-tensor state, allocated on first use to keep tensors small."""

    __slots__ = ("hooks", "retains_grad", "post_acc_hooks", "grad_accumulator", "name",
                 "retain_handle", "conj", "fw_grad")

    def __init__(self):
        self.hooks = None
        self.retains_grad = False
        self.post_acc_hooks = None
        self.grad_accumulator = None
        self.name = None
        self.retain_handle = None
        self.conj = False  # PyTorch's conjugate bit, set by conj() (ember computes the values)
        self.fw_grad = None  # {forward-AD level: tangent or None}: see autograd.forward_ad


def _as_array(data):
    if isinstance(data, np.generic):
        return np.asarray(data)
    if hasattr(data, "__cuda_array_interface__") or type(data) is _MetaArray:
        return data
    return np.asarray(data)


def _make(data, requires_grad=False):
    """Wrap an array in a new Tensor without copying (the internal constructor)."""
    if type(data) is not _ndarray:
        data = _as_array(data)
    t = _new(Tensor)
    t._data = data
    t._requires_grad = requires_grad
    t._grad = None
    t.grad_fn = None
    t._output_nr = 0
    t._vc = [0]
    t._base = None
    t._extra = None
    return t


class Tensor:
    """A multi-dimensional array that records the ops done on it for autograd.

    ``ember.Tensor(2, 3)`` makes an uninitialised float tensor of that shape and
    ``ember.Tensor([1, 2])`` a float tensor from data, as ``torch.Tensor`` does; use
    ``ember.tensor(data)`` to infer the dtype from the data.
    """

    __slots__ = ("_data", "_requires_grad", "_grad", "grad_fn", "_output_nr", "_vc", "_base",
                 "_extra", "__weakref__")
    __array_ufunc__ = None  # NumPy defers to our reflected operators
    __array_priority__ = 1000

    def __new__(cls, *args, device=None):
        from ember import _factory
        if len(args) == 1 and not isinstance(args[0], int):
            data = args[0]
            if isinstance(data, Tensor):
                return data
            t = _factory.tensor(data, dtype=_dt.get_default_dtype(), device=device)
        else:
            t = _factory.empty(*(args or (0,)), device=device)  # Tensor(): empty 1-D
        if cls is not Tensor:
            t = t.as_subclass(cls)
        return t

    def __init__(self, *args, **kwargs):
        pass

    def as_subclass(self, cls):
        """A tensor of class ``cls`` sharing this one's data and autograd state."""
        t = _new(cls)
        for k in Tensor.__slots__[:-1]:
            setattr(t, k, getattr(self, k))
        return t

    # ----- metadata -------------------------------------------------------------------
    @property
    def shape(self):
        if _mode_active[0]:
            m = _mode_with("sym_size")
            if m is not None:
                return m.sym_size(self, None)
        return Size(self._data.shape)

    def size(self, dim=None):
        """The shape, or its length along ``dim``."""
        if _mode_active[0]:
            m = _mode_with("sym_size")
            if m is not None:
                return m.sym_size(self, dim)
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[self._wrap_dim(dim)]

    @property
    def dtype(self):
        return _FROM_NP[self._data.dtype]

    @property
    def device(self):
        d = self._data
        return CPU if type(d) is _ndarray else device_of(d)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    @property
    def is_meta(self):
        """True for a tensor on the ``meta`` device (shape and dtype, no data)."""
        return type(self._data) is _MetaArray

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        """Number of dimensions."""
        return self._data.ndim

    ndimension = dim

    def numel(self):
        """Number of elements."""
        if _mode_active[0] and _mode_with("sym_size") is not None:
            return self.shape.numel()  # traced sizes: a count that replays at other shapes
        return self._data.size

    nelement = numel

    def element_size(self):
        """Bytes per element."""
        return self._data.itemsize

    @property
    def itemsize(self):
        return self._data.itemsize

    @property
    def nbytes(self):
        return self._data.nbytes

    def is_floating_point(self):
        """True for float16/32/64, bfloat16 and float8 tensors."""
        d = self._data.dtype
        return d.kind == "f" or d.kind == "V" and d.names is None

    def is_complex(self):
        """True for complex32/64/128 tensors."""
        d = self._data.dtype
        return d.kind == "c" or d.kind == "V" and d.names is not None

    def is_contiguous(self, memory_format=None):
        """True if the elements lie in row-major order without gaps."""
        return self._data.flags.c_contiguous

    def stride(self, dim=None):
        """Strides in elements (not bytes), as PyTorch reports them."""
        isz = self._data.itemsize
        st = tuple(s // isz for s in self._data.strides)
        return st if dim is None else st[self._wrap_dim(dim)]

    def storage_offset(self):
        from ember.storage import _memory_root
        base = _memory_root(self._data)
        off = self._data.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return off // self._data.itemsize

    def data_ptr(self):
        d = self._data
        if type(d) is _ndarray:
            return d.__array_interface__["data"][0]
        return d.data.ptr

    def _wrap_dim(self, dim):
        if type(dim) is not int:
            dim = _operator.index(dim)  # (a 0-d integer tensor, as torch takes one)
        n = self._data.ndim
        m = max(n, 1)
        if not -m <= dim < m:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-m}, {m - 1}], "
                f"but got {dim})")
        return dim + n if dim < 0 else dim

    _TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                   "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor",
                   "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor",
                   "complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor",
                   "bfloat16": "BFloat16Tensor", "uint16": "UInt16Tensor",
                   "uint32": "UInt32Tensor", "uint64": "UInt64Tensor",
                   "float8_e4m3fn": "Float8_e4m3fnTensor", "float8_e5m2": "Float8_e5m2Tensor",
                   "float8_e4m3fnuz": "Float8_e4m3fnuzTensor",
                   "float8_e5m2fnuz": "Float8_e5m2fnuzTensor",
                   "float8_e8m0fnu": "Float8_e8m0fnuTensor"}

    def _type_name(self):
        prefix = "torch.cuda." if self.is_cuda else "torch."
        return prefix + Tensor._TYPE_NAMES[self.dtype.name]

    def type(self, dtype=None, non_blocking=False):
        """With no argument, the legacy type name (``'torch.FloatTensor'``); else a cast,
        to a dtype or a legacy name such as ``'torch.DoubleTensor'``."""
        if dtype is None:
            return self._type_name()
        if isinstance(dtype, str):
            for pre, dev in (("torch.cuda.", "cuda"), ("ember.cuda.", "cuda"), ("torch.", "cpu"),
                             ("ember.", "cpu")):
                if dtype.startswith(pre):
                    name = dtype[len(pre):]
                    for dt_name, tname in Tensor._TYPE_NAMES.items():
                        if tname == name:
                            return self.to(device=dev, dtype=_dt._BY_NAME[dt_name])
            raise ValueError(f"invalid type: '{dtype}'")
        if isinstance(dtype, type):
            # a legacy type class (torch.FloatTensor, torch.cuda.LongTensor) or Tensor itself
            legacy = getattr(dtype, "_dtype", None)
            if legacy is not None:
                return self.to(device="cuda" if getattr(dtype, "_cuda", False) else "cpu",
                               dtype=legacy)
            if issubclass(dtype, Tensor):
                return self.to(_dt.get_default_dtype())
            raise ValueError(f"invalid type: '{dtype.__name__}'")
        return self.to(dtype)

    # ----- autograd state -------------------------------------------------------------
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        """Set whether autograd records ops on this leaf; returns self."""
        if self.grad_fn is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        if requires_grad and self._data.dtype.kind not in "fcV":
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def grad(self):
        if self.grad_fn is not None and not (self._extra and self._extra.retains_grad):
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor.", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got "
                                f"grad of type {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(f"assigned grad has data of a different size: "
                                   f"{list(value.shape)} vs {list(self.shape)}")
            if value.dtype is not self.dtype:
                raise RuntimeError("assigned grad has data of a different type")
        self._grad = value

    @property
    def retains_grad(self):
        return bool(self._extra and self._extra.retains_grad)

    @property
    def _version(self):
        return self._vc[0]

    def _is_view(self):
        """True for a view of another tensor (``_base``), as PyTorch's private method."""
        return self._base is not None

    @property
    def data(self):
        """A tensor sharing this one's storage, detached from the graph."""
        t = _make(self._data, False)
        return t

    @data.setter
    def data(self, value):
        self._data = value._data

    @property
    def name(self):
        return self._extra.name if self._extra else None

    def _get_extra(self):
        if self._extra is None:
            self._extra = _Extra()
        return self._extra

    def detach(self):
        """A new tensor sharing storage (and version counter), outside the graph.

        As in PyTorch it is not a view (``_base`` is None): an in-place change of it
        bumps the shared version, so a backward that needs the old values fails.
        """
        if _mode_active[0] and (m := _mode_recorder()) is not None:
            return m.composite("detach", Tensor.detach, (self,), {})
        t = _make(self._data, False)
        t._vc = self._vc
        return t

    def detach_(self):
        """Detach this tensor from the graph in place, making it a leaf."""
        if self._base is not None and self._requires_grad:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self.grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    def retain_grad(self):
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if self.grad_fn is None:
            if not self._requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        extra = self._get_extra()
        if extra.retains_grad:
            return
        extra.retains_grad = True
        import weakref
        ref = weakref.ref(self)

        def retain(grad):
            t = ref()
            if t is not None:
                # a copy, as PyTorch: the gradient may be the user's grad_output or a leaf's
                t._grad = grad.detach().clone() if t._grad is None else \
                    t._grad.detach() + grad.detach()
            return grad
        retain._is_retain = True
        extra.retain_handle = self.grad_fn._add_tensor_pre_hook(self._output_nr, retain)

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; may return a new one."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return self.grad_fn._add_tensor_pre_hook(self._output_nr, hook)
        from ember.autograd.node import _Handle
        extra = self._get_extra()
        if extra.hooks is None:
            extra.hooks = []
        extra.hooks.append(hook)
        return _Handle(extra.hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` after this leaf's ``.grad`` has been accumulated."""
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        from ember.autograd.node import _Handle
        extra = self._get_extra()
        if extra.post_acc_hooks is None:
            extra.post_acc_hooks = []
        extra.post_acc_hooks.append(hook)
        return _Handle(extra.post_acc_hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into the ``.grad`` of graph leaves."""
        from ember.autograd import backward
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    # ----- Python protocol ------------------------------------------------------------
    def __len__(self):
        if _mode_active[0]:
            _python_value(self, "__len__")
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if _mode_active[0]:
            _python_value(self, "__iter__")
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __contains__(self, element):
        # as torch: `x in t` is `(x == t).any()`, broadcasting a tensor `x` against `t`
        # (so `tensor([5, 4]) in t` asks whether any element matches), never iteration
        if isinstance(element, (Tensor, _Number)):
            return bool((element == self).any().item())
        raise RuntimeError("Tensor.__contains__ only supports Tensor or scalar, but you "
                           f"passed in a {type(element)}.")

    def __bool__(self):
        if _mode_active[0]:
            _python_value(self, "__bool__")
        if type(self._data) is _MetaArray:
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data)

    def __float__(self):
        if _mode_active[0]:
            _python_value(self, "__float__")
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(self.item())

    def __int__(self):
        if _mode_active[0]:
            _python_value(self, "__int__")
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self.item())

    def __index__(self):
        if _mode_active[0]:
            _python_value(self, "__index__")
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    __hash__ = object.__hash__

    def item(self):
        """The single value as a Python number."""
        if _mode_active[0]:
            _python_value(self, "item")
        if type(self._data) is _MetaArray:
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted "
                               "to Scalar")
        return self._host_numbers().item()

    def tolist(self):
        """The data as (nested) Python lists of numbers."""
        if _mode_active[0]:
            _python_value(self, "tolist")
        return self._host_numbers().tolist()

    def _host(self):
        d = self._data
        return d if type(d) is _ndarray else d.get()

    def _host_numbers(self):
        """The host array in a dtype whose ``item``/``tolist`` give Python numbers."""
        d = self._host()
        if d.dtype.kind == "V":
            return _c32.to_c64(d) if d.dtype.names else d.astype(np.float32)
        return d

    def numpy(self, force=False):
        """A NumPy array sharing this tensor's memory (cpu tensors only)."""
        if _mode_active[0]:
            _python_value(self, "numpy")
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if self._extra is not None and self._extra.conj and not force:
            raise RuntimeError("Can't call numpy() on Tensor that has conjugate bit set. Use "
                               "tensor.resolve_conj().numpy() instead.")
        if self._data.dtype.names:
            raise TypeError("Got unsupported ScalarType ComplexHalf")
        if type(self._data) is not _ndarray:
            if not force:
                raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use "
                                "Tensor.cpu() to copy the tensor to host memory first.")
            return self._data.get()
        return self._data

    def __array__(self, dtype=None, copy=None):
        if _mode_active[0]:
            _python_value(self, "__array__")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        from ember._tensor_str import tensor_repr
        return tensor_repr(self)

    def __format__(self, spec):
        if self._data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, proto):
        from ember._factory import _rebuild_tensor
        return (_rebuild_tensor, (self._host(), self._requires_grad, str(self.device)))

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.")
        if id(self) in memo:
            return memo[id(self)]
        t = _make(self._data.copy(), self._requires_grad)
        if type(self) is not Tensor:
            t = t.as_subclass(type(self))
            if hasattr(self, "__dict__"):
                import copy
                t.__dict__.update(copy.deepcopy(self.__dict__, memo))
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t
