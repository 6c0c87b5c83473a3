"""Immutability for ember's shared objects (dtypes, devices, layouts, memory formats,
storage types, ``Size``): one instance of each is shared by the whole process, so a
change to one, by a bug or by a hostile file, would silently corrupt every later
computation. Their classes and instances refuse ``setattr`` and ``delattr``."""

__all__ = ["FrozenClass", "Frozen"]


class FrozenClass(type):
    """A class that takes no new or changed attributes after its definition."""

    def __setattr__(cls, name, value):
        raise AttributeError(f"{cls.__module__}.{cls.__qualname__} is immutable: cannot "
                             f"set {name!r}")

    def __delattr__(cls, name):
        raise AttributeError(f"{cls.__module__}.{cls.__qualname__} is immutable: cannot "
                             f"delete {name!r}")


class Frozen(metaclass=FrozenClass):
    """Base of immutable instances: ``__init__`` fills slots with ``self._set(...)``."""

    __slots__ = ()

    def _set(self, **values):
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"{self!r} is immutable: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"{self!r} is immutable: cannot delete {name!r}")
