"""Parameter and Buffer: tensors that a Module registers as its state."""
from ember._tensor import Tensor, _make

__all__ = ["Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]


def _alias(data):
    """A new leaf handle on ``data``'s memory (and version counter), outside any graph."""
    t = _make(data._data, False)
    t._vc = data._vc
    return t


class Parameter(Tensor):
    """A Tensor that is a module parameter (PyTorch's ``torch.nn.Parameter``).

    Assigning a Parameter as a Module attribute registers it: it then appears in
    ``module.parameters()`` and the ``state_dict``. ``Parameter(t)`` shares ``t``'s
    memory and is a graph leaf.

    Args:
        data (Tensor): parameter tensor (default: an empty tensor).
        requires_grad (bool): whether the parameter requires gradient (default True).

    Example::

        >>> p = ember.nn.Parameter(ember.zeros(2))
        >>> p
        Parameter containing:
        tensor([0., 0.], requires_grad=True)
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            from ember._factory import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): argument 'data' must be Tensor, not "
                            f"{type(data).__name__}")
        t = _alias(data).as_subclass(cls)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (self._host(), self._requires_grad, str(self.device),
                                     dict(self.__dict__)))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        import copy
        result = type(self)(_make(self._data.copy(), False), self._requires_grad)
        if self._grad is not None:
            result._grad = self._grad.__deepcopy__(memo)
        result.__dict__.update(copy.deepcopy(self.__dict__, memo))
        memo[id(self)] = result
        return result


def _rebuild_parameter(array, requires_grad, device, attrs):
    from ember._factory import _rebuild_tensor
    p = Parameter(_rebuild_tensor(array, False, device), requires_grad)
    p.__dict__.update(attrs)
    return p


class Buffer(Tensor):
    """A Tensor that a Module registers as a buffer when assigned as an attribute.

    PyTorch's ``torch.nn.Buffer``: ``self.running = nn.Buffer(t)`` is the same as
    ``self.register_buffer('running', t)``; ``persistent=False`` keeps the buffer out
    of the ``state_dict``. The module stores a plain Tensor sharing ``data``'s memory.
    """

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            from ember._factory import empty
            data = empty(0)
        t = _alias(data).as_subclass(cls)
        t._requires_grad = data._requires_grad
        t.persistent = persistent
        return t

    def __init__(self, data=None, *, persistent=True):
        pass


class _UninitializedMixin:
    """What UninitializedParameter and UninitializedBuffer share: no shape yet, and
    ``materialize(shape)`` turns the object itself into an ordinary one."""

    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        """Give the tensor ``shape`` (uninitialized values) and make it the ordinary
        class; the object stays the same, so optimizers holding it see the change."""
        from ember._factory import empty
        data = empty(shape, device=device or self.device, dtype=dtype or self.dtype)
        self._data = data._data
        self._vc[0] += 1
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return f"<{type(self).__name__}>"


class UninitializedParameter(_UninitializedMixin, Parameter):
    """A parameter whose shape a lazy module learns from its first input
    (PyTorch's ``torch.nn.parameter.UninitializedParameter``). Until
    ``materialize`` it holds no elements."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        from ember._factory import empty
        return Parameter.__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class _MaterializedBuffer(Tensor):
    """What an UninitializedBuffer becomes: a plain Tensor (a subclass only because
    Python cannot turn an object with a ``__dict__`` back into a slotted Tensor)."""


class UninitializedBuffer(_UninitializedMixin, Tensor):
    """A buffer whose shape a lazy module learns from its first input."""

    cls_to_become = _MaterializedBuffer

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        from ember._factory import empty
        t = _alias(empty(0, device=device, dtype=dtype)).as_subclass(cls)
        t.persistent = persistent
        return t

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass


def is_lazy(param):
    """Whether ``param`` is still an uninitialized parameter or buffer."""
    return isinstance(param, _UninitializedMixin)
