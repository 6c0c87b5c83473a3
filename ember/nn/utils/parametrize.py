"""``torch.nn.utils.parametrize``: make a module's parameter a function of other tensors.

``register_parametrization(module, "weight", P)`` moves the parameter to
``module.parametrizations.weight.original`` and makes ``module.weight`` a property that
returns ``P(original)``, computed on every access (or once per ``cached()`` block). The
module's class is swapped for a subclass ``Parametrized<Class>`` that carries the
property, as in PyTorch, so ``state_dict`` keys match PyTorch's
(``parametrizations.weight.original``).
"""
import collections.abc
import contextlib
from copy import deepcopy

from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad
from ember.nn.modules.container import ModuleDict, ModuleList
from ember.nn.parameter import Parameter
from ember.nn.utils._lazy import refuse_uninitialized

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized", "cached",
           "ParametrizationList", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

_cache_depth = [0]
_cache = {}


@contextlib.contextmanager
def cached():
    """Compute each parametrized tensor once inside the block and reuse it."""
    _cache_depth[0] += 1
    try:
        yield
    finally:
        _cache_depth[0] -= 1
        if not _cache_depth[0]:
            _cache.clear()


def _register_tensor(module, name, x):
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _assign(dst, src):
    """PyTorch's ``Tensor.set_`` for what parametrizations need: ``dst`` takes ``src``'s
    values, shape and dtype, staying the same Python object (the registered parameter)."""
    dst._data = src._data
    dst._vc[0] += 1


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, and its original value(s) as ``original``
    (or ``original0``, ``original1``... when ``right_inverse`` returns several)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        new = original
        with no_grad():
            for m in reversed(self):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, Tensor) and not isinstance(new, collections.abc.Sequence):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change the "
                                 f"dtype.\noriginal.dtype: {original.dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            with no_grad():
                if new is not original:
                    _assign(original, new)
            _register_tensor(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the sequence "
                                     f"with type {type(part).__name__}.")
                if isinstance(original, Parameter):
                    part = Parameter(part, original.requires_grad)
                part.requires_grad_(original.requires_grad)
                _register_tensor(self, f"original{i}", part)
        if not self.unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError("A parametrization must return a tensor. Got "
                                 f"{type(z).__name__}.")
            if z.dtype != dtype:
                raise ValueError("Registering a parametrization may not change the dtype of the "
                                 f"tensor, unless `unsafe` flag is enabled.\nunparametrized dtype: "
                                 f"{dtype}\nparametrized dtype: {z.dtype}")
            if z.shape != shape:
                raise ValueError("Registering a parametrization may not change the shape of the "
                                 f"tensor, unless `unsafe` flag is enabled.\nunparametrized shape: "
                                 f"{shape}\nparametrized shape: {z.shape}")

    def right_inverse(self, value):
        """Set the original tensor(s) so that the parametrization gives ``value``."""
        with no_grad():
            for m in reversed(self):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement "
                                       "right_inverse.")
                value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _assign(self.original, value)
            else:
                if not isinstance(value, collections.abc.Sequence):
                    raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                     f"{type(value).__name__}.")
                if len(value) != self.ntensors:
                    raise ValueError("'right_inverse' must return a sequence of tensors of length "
                                     f"{self.ntensors}. Got a sequence of length {len(value)}.")
                for i, t in enumerate(value):
                    _assign(getattr(self, f"original{i}"), t)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in list(self)[1:]:
            x = m(x)
        return x


def _deepcopy(self, memo):
    obj = memo.get(id(self))
    if obj is not None:
        return obj
    replica = self.__new__(self.__class__)
    memo[id(self)] = replica
    replica.__dict__ = deepcopy(self.__dict__, memo)
    return replica


def _refuse_pickle(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through "
                       "state_dict(). See:\nhttps://pytorch.org/tutorials/beginner/"
                       "saving_loading_models.html#saving-loading-a-general-checkpoint-for-"
                       "inference-and-or-resuming-training")


def _inject_class(module):
    cls = module.__class__
    attrs = {"__getstate__": _refuse_pickle}
    if not hasattr(cls, "__deepcopy__"):
        attrs["__deepcopy__"] = _deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), attrs)


def _inject_property(module, name):
    def get(self):
        plist = self.parametrizations[name]
        if _cache_depth[0]:
            key = (id(self), name)
            value = _cache.get(key)
            if value is None:
                value = _cache[key] = plist()
            return value
        return plist()

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(module.__class__, name, property(get, set_))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make ``module.<tensor_name>`` return ``parametrization(original)``.

    Registering again on the same name chains parametrizations. ``parametrization``
    may define ``right_inverse`` (used at registration and on assignment) and may
    return several tensors from it (then ``forward`` takes that many). The module's
    training mode is passed on to the parametrization.

    >>> class Symmetric(ember.nn.Module):
    ...     def forward(self, x):
    ...         return x.triu() + x.triu(1).transpose(-1, -2)
    >>> m = register_parametrization(ember.nn.Linear(3, 3), "weight", Symmetric())
    >>> bool((m.weight == m.weight.T).all())
    True
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(x).__name__}.")
            if x.dtype != y.dtype:
                raise ValueError("Registering a parametrization may not change the dtype of the "
                                 "tensor, unless the `unsafe` flag is enabled.\n"
                                 f"module.{tensor_name}.dtype: {y.dtype}\n"
                                 f"parametrization(module.{tensor_name}).dtype: {x.dtype}")
            if x.shape != y.shape:
                raise ValueError("Registering a parametrization may not change the shape of the "
                                 "tensor, unless the `unsafe` flag is enabled.\n"
                                 f"module.{tensor_name}.shape: {y.shape}\n"
                                 f"parametrization(module.{tensor_name}).shape: {x.shape}")
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        refuse_uninitialized([original], "register_parametrization", RuntimeError)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has any parametrization (or one on ``tensor_name``)."""
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if plists is None or not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Remove the parametrizations on ``tensor_name``: the tensor becomes a plain
    parameter again, holding the parametrized value (``leave_parametrized=True``) or
    the original one."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            if t.dtype != original.dtype:
                # the parameter keeps its identity (optimizers hold it): PyTorch's set_
                # refuses to change its dtype, and so does ember
                raise RuntimeError(
                    f"remove_parametrizations(leave_parametrized=True): the parametrized "
                    f"'{tensor_name}' has dtype {t.dtype} but its original has "
                    f"{original.dtype}, and the original tensor, kept for optimizers "
                    "holding it, cannot change dtype. Use leave_parametrized=False, or a "
                    "parametrization that keeps the dtype.")
            with no_grad():
                # the parameter object stays the same, so optimizers keep working
                _assign(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a "
                             "tensor that is parametrized in terms of a sequence of tensors.")
        with no_grad():
            t = getattr(module, tensor_name)
        if plist.original0.requires_grad:
            original = Parameter(t.detach(), True)
        else:
            original = t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_tensor(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The module's class as it was before any parametrization was registered."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Copy the parametrizations (and their original tensors) of ``from_module`` onto
    ``to_module``, for one tensor or all of them."""
    if not is_parametrized(from_module):
        return to_module
    names = [tensor_name] if tensor_name is not None else list(from_module.parametrizations)
    if tensor_name is not None and tensor_name not in from_module.parametrizations:
        raise AssertionError(f"{tensor_name} is not parametrized in {from_module}")
    for name in names:
        plist = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for p in plist:
            register_parametrization(to_module, name, p)
        with no_grad():
            if plist.is_tensor:
                _assign(to_module.parametrizations[name].original, plist.original)
            else:
                for i in range(plist.ntensors):
                    _assign(getattr(to_module.parametrizations[name], f"original{i}"),
                            getattr(plist, f"original{i}"))
    return to_module
