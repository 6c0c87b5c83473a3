"""``torch.nn.utils.prune``: zero out parts of a parameter through a mask.

Pruning ``module.weight`` moves the parameter to ``weight_orig``, adds a buffer
``weight_mask`` and makes ``weight`` a plain attribute ``weight_orig * weight_mask``,
recomputed by a forward pre-hook (the method object itself). Pruning again combines the
new mask with the old one (a ``PruningContainer``); ``remove`` makes the pruned values
permanent. Masks are chosen as PyTorch chooses them (``topk``/``kthvalue`` of the same
scores, random draws from the same generator), so after the same seed ember and PyTorch
prune the same entries.
"""
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ember import _core as ember
from ember.nn.utils._lazy import refuse_uninitialized
from ember.nn.utils.convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """A way of choosing which entries of a tensor to prune (``compute_mask``)."""

    _tensor_name = None

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask for ``t``, given the current one (``default_mask``)."""

    def apply_mask(self, module):
        """``<name>_orig * <name>_mask`` for the tensor this method prunes."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` in place with a new ``cls(*args, **kwargs)``."""
        refuse_uninitialized([getattr(module, name, None)], "prune")
        old, found = None, 0
        for k, hook in list(module._forward_pre_hooks.items()):
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                old = hook
                found += 1
                del module._forward_pre_hooks[k]
        if found > 1:
            raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor "
                                 f"{name} of module {module}. Use a PruningContainer.")
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old is not None:
            if isinstance(old, PruningContainer):
                old.add_pruning_method(method)
                method = old
            else:
                container = PruningContainer(old)
                container.add_pruning_method(method)
                method = container
        orig = getattr(module, name)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise AssertionError(f"importance_scores should have the same shape as "
                                     f"parameter {name} of {module}")
        else:
            importance_scores = orig
        if not isinstance(method, PruningContainer):
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ember.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if not isinstance(method, PruningContainer):
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` with this method's mask applied (``importance_scores`` rank entries)."""
        if importance_scores is not None and importance_scores.shape != t.shape:
            raise AssertionError("importance_scores should have the same shape as tensor t")
        scores = importance_scores if importance_scores is not None else t
        default_mask = default_mask if default_mask is not None else ember.ones_like(t)
        return t * self.compute_mask(scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: ``<name>`` becomes a parameter holding the pruned
        values, ``<name>_orig`` and ``<name>_mask`` go away."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be "
                                 "removed")
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


class PruningContainer(BasePruningMethod):
    """The pruning methods applied in turn to one tensor; each new one only looks at the
    entries (or channels) the earlier ones kept."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError("Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer. Found "
                             f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        method = self._pruning_methods[-1]
        mask = default_mask
        new_mask = default_mask.clone()
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            slc = mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("Pruning methods of PRUNING_TYPE 'structured' need to "
                                     "have the attribute `dim` defined.")
            n = t.dim()
            dim = method.dim + n if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor of dimension {n}")
            keep = mask.sum(dim=[d for d in range(n) if d != dim]) != 0
            slc = [slice(None)] * n
            slc[dim] = keep
            slc = tuple(slc)
        elif kind == "global":
            slc = (slice(None),) * t.dim()
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        partial = method.compute_mask(t[slc], default_mask=mask[slc])
        new_mask[slc] = partial.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing (the mask is all ones)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _validate_amount_init(amount):
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or \
            (not isinstance(amount, numbers.Integral) and (float(amount) > 1.0
                                                          or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         "non-negative integer")


def _validate_amount(amount, size):
    if isinstance(amount, numbers.Integral) and amount > size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to "
                         f"prune={size}")


def _n_to_prune(amount, size):
    # Python's round, as PyTorch uses (half to even)
    return amount if isinstance(amount, numbers.Integral) else round(amount * size)


def _validate_structured(t):
    if len(t.shape) <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. "
                         f"Found tensor of shape {t.shape} with {len(t.shape)} dims")


def _zero_at(mask, flat_indices):
    flat = mask.reshape(-1)
    flat[flat_indices] = 0
    return flat.reshape(mask.shape)


class RandomUnstructured(BasePruningMethod):
    """Prune ``amount`` entries (a count or a fraction) chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        size = t.numel()
        k = _n_to_prune(self.amount, size)
        _validate_amount(self.amount, size)
        mask = default_mask.clone()
        if k != 0:
            prob = ember.rand_like(t)
            mask = _zero_at(mask, ember.topk(prob.reshape(-1), k=k).indices)
        return mask

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prune the ``amount`` entries of smallest absolute value."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        size = t.numel()
        k = _n_to_prune(self.amount, size)
        _validate_amount(self.amount, size)
        mask = default_mask.clone()
        if k != 0:
            small = ember.topk(ember.abs(t).reshape(-1), k=k, largest=False)
            mask = _zero_at(mask, small.indices)
        return mask

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channel_mask(t, dim, keep):
    mask = ember.zeros_like(t)
    slc = [slice(None)] * t.dim()
    slc[dim] = keep
    mask[tuple(slc)] = 1
    return mask


class RandomStructured(BasePruningMethod):
    """Prune ``amount`` whole channels along ``dim``, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured(t)
        size = t.shape[self.dim]
        k = _n_to_prune(self.amount, size)
        _validate_amount(self.amount, size)
        if k == 0:
            return default_mask
        prob = ember.rand(size)
        threshold = ember.kthvalue(prob, k=k).values
        mask = _channel_mask(t, self.dim, prob > threshold)
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prune the ``amount`` channels along ``dim`` of smallest ``n``-norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _validate_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured(t)
        size = t.shape[self.dim]
        k = _n_to_prune(self.amount, size)
        _validate_amount(self.amount, size)
        if k == 0:
            return default_mask
        dim = self.dim + t.dim() if self.dim < 0 else self.dim
        dims = [d for d in range(t.dim()) if d != dim]
        norm = ember.norm(t, p=self.n, dim=dims) if len(dims) <= 2 else \
            ember.linalg.vector_norm(t, ord=self.n, dim=dims)
        keep = ember.topk(norm, k=size - k, largest=True).indices
        mask = _channel_mask(t, dim, keep)
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prune where a given mask is 0."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError("the mask must have the shape of the tensor")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Add the pruning machinery to ``module.<name>`` without pruning anything."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune ``amount`` random entries of ``module.<name>``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.<name>`` smallest in absolute value
    (of ``importance_scores`` when given)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the ``amount`` channels along ``dim`` with the smallest ``n``-norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the entries of several tensors ranked together: ``parameters`` is an
    iterable of ``(module, name)``; ``pruning_method`` an unstructured method class."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([importance_scores.get((m, n), getattr(m, n))
                                   for m, n in parameters])
    default_mask = parameters_to_vector([getattr(m, n + "_mask", ember.ones_like(getattr(m, n)))
                                         for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final = container.compute_mask(scores, default_mask)
    pointer = 0
    for m, n in parameters:
        param = getattr(m, n)
        count = param.numel()
        custom_from_mask(m, n, mask=final[pointer:pointer + count].view_as(param))
        pointer += count


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` where ``mask`` is 0."""
    CustomFromMask.apply(module, name, mask=mask)
    return module


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent and drop the mask and hook."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     "can be removed")


def is_pruned(module):
    """Whether any submodule of ``module`` has a pruning hook."""
    for _, sub in module.named_modules():
        for hook in sub._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False
