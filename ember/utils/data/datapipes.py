"""DataPipes: the base classes ``IterDataPipe`` / ``MapDataPipe``, registration of
functional forms (``@functional_datapipe("name")`` makes ``dp.name(...)`` build that
pipe), ``DataChunk``, and the typing and determinism switches of
``torch.utils.data``.

torch's library of built-in pipes (``Mapper``, ``Filter``, ...) lives in
``torch.utils.data.datapipes`` and is not provided; pipes defined by a program work.
"""
import functools
import inspect
import typing

from ember.utils.data.dataset import Dataset, IterableDataset

__all__ = ["IterDataPipe", "MapDataPipe", "DFIterDataPipe", "DataChunk",
           "functional_datapipe", "non_deterministic", "guaranteed_datapipes_determinism",
           "runtime_validation", "runtime_validation_disabled", "argument_validation"]

_flags = {"determinism": False, "runtime_validation": True}
_T_co = typing.TypeVar("_T_co", covariant=True)


class _Registry:
    """Functional forms by name: ``dp.<name>(*args)`` is ``cls(dp, *args)``."""

    functions = None

    @classmethod
    def register_datapipe_as_function(cls, function_name, cls_to_register,
                                      enable_df_api_tracing=False):
        if function_name in cls.functions:
            raise Exception(f"Unable to add DataPipe function name {function_name} as it is "
                            "already taken")
        cls.functions[function_name] = cls_to_register

    def __getattr__(self, name):
        fns = type(self).functions
        if fns is not None and name in fns:
            return functools.partial(fns[name], self)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __dir__(self):
        return list(super().__dir__()) + list(type(self).functions or ())


class IterDataPipe(_Registry, IterableDataset[_T_co]):
    """An iterable-style pipe stage; subclasses define ``__iter__`` (and, optionally,
    ``__len__``). ``IterDataPipe[T]`` declares the type of the items."""

    functions = {}

    def __iter__(self):
        # as torch: a stage without its own __iter__ is its own iterator (and needs a
        # __next__ to be iterated); it is not abstract, unlike IterableDataset
        return self


class MapDataPipe(_Registry, Dataset[_T_co]):
    """A map-style pipe stage; subclasses define ``__getitem__`` and ``__len__``."""

    functions = {}


class DFIterDataPipe(IterDataPipe):
    """An ``IterDataPipe`` whose items are data frames."""

    def _is_dfpipe(self):
        return True


def _item_type(cls, base):
    for klass in cls.__mro__:
        for b in getattr(klass, "__orig_bases__", ()):
            if typing.get_origin(b) is base and typing.get_args(b):
                return typing.get_args(b)[0]
    return typing.Any


class DataChunk(list):
    """A list of items that travels through a pipe as one item (a batch)."""

    def __init__(self, items):
        items = list(items)
        super().__init__(items)
        self.items = items

    def as_str(self, indent=""):
        return indent + "[" + ", ".join(str(i) for i in self) + "]"

    def raw_iterator(self):
        yield from self.items


class functional_datapipe:
    """Class decorator: ``@functional_datapipe("name")`` on an ``IterDataPipe`` (or
    ``MapDataPipe``) subclass makes ``pipe.name(*args)`` build it on ``pipe``."""

    def __init__(self, name, enable_df_api_tracing=False):
        self.name = name
        self.enable_df_api_tracing = enable_df_api_tracing

    def __call__(self, cls):
        target = cls.cls if isinstance(cls, non_deterministic) else cls
        if isinstance(target, type) and issubclass(target, IterDataPipe):
            IterDataPipe.register_datapipe_as_function(self.name, cls)
        elif isinstance(target, type) and issubclass(target, MapDataPipe):
            MapDataPipe.register_datapipe_as_function(self.name, cls)
        else:
            raise TypeError("`functional_datapipe` can only decorate IterDataPipe")
        return cls


class non_deterministic:
    """Mark an ``IterDataPipe`` class (or, given a function of the constructor's
    arguments, some of its instances) as non-deterministic: building one inside
    ``guaranteed_datapipes_determinism()`` raises TypeError."""

    cls = None

    def __init__(self, arg):
        if isinstance(arg, type):
            if not issubclass(arg, IterDataPipe):
                raise TypeError(f"Only `IterDataPipe` can be decorated with "
                                f"`non_deterministic`, but {arg.__name__} is found")
            self.cls = arg
        elif callable(arg):
            self.deterministic_fn = arg
        else:
            raise TypeError(f"{arg} can not be decorated by non_deterministic")

    def __call__(self, *args, **kwargs):
        if self.cls is not None:
            if _flags["determinism"]:
                raise TypeError(f"{self.cls.__name__} is non-deterministic, but you set "
                                "'guaranteed_datapipes_determinism'. You can turn off "
                                "determinism for this DataPipe if that is acceptable for "
                                "your application")
            return self.cls(*args, **kwargs)
        cls = args[0]
        if not (isinstance(cls, type) and issubclass(cls, IterDataPipe)):
            raise TypeError(f"Only `IterDataPipe` can be decorated, but {cls.__name__} is "
                            "found")
        self.cls = cls
        fn = self.deterministic_fn

        def build(*a, **kw):
            if _flags["determinism"] and fn(*a, **kw):
                raise TypeError(f"{cls.__name__} is non-deterministic with the inputs, but "
                                "you set 'guaranteed_datapipes_determinism'. You can turn off "
                                "determinism for this DataPipe if that is acceptable for "
                                "your application")
            return cls(*a, **kw)
        return build


class guaranteed_datapipes_determinism:
    """Within it (or after a plain call, until exit), non-deterministic pipes refuse to
    be built."""

    def __init__(self):
        self.prev = _flags["determinism"]
        _flags["determinism"] = True

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _flags["determinism"] = self.prev


class runtime_validation_disabled:
    """Within it, ``@runtime_validation`` does not check the items."""

    def __init__(self):
        self.prev = _flags["runtime_validation"]
        _flags["runtime_validation"] = False

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _flags["runtime_validation"] = self.prev


def _matches(item, hint):
    if hint is typing.Any:
        return True
    if typing.get_origin(hint) is not None or not isinstance(hint, type):
        from ember.jit import isinstance as _typed_isinstance
        try:
            return _typed_isinstance(item, hint)
        except RuntimeError:
            return True
    return isinstance(item, hint)


def runtime_validation(f):
    """Decorate an ``IterDataPipe.__iter__``: each item must be an instance of the
    pipe's declared item type (``IterDataPipe[T]``), else RuntimeError."""
    if f.__name__ != "__iter__":
        raise TypeError(f"Can not decorate function {f.__name__} with 'runtime_validation'")

    @functools.wraps(f)
    def wrapper(self):
        hint = _item_type(type(self), IterDataPipe)
        for item in f(self):
            if _flags["runtime_validation"] and not _matches(item, hint):
                raise RuntimeError(f"Expected an instance as subtype of {hint}, but found "
                                   f"{item}({type(item)})")
            yield item
    return wrapper


def argument_validation(f):
    """Decorate a pipe's ``__init__``: arguments annotated with a DataPipe class must be
    instances of it, else TypeError."""
    signature = inspect.signature(f)
    hints = typing.get_type_hints(f)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            hint = hints.get(name)
            base = typing.get_origin(hint) or hint
            if isinstance(base, type) and issubclass(base, (IterDataPipe, MapDataPipe)):
                if not isinstance(value, base):
                    raise TypeError(f"Expected argument '{name}' as a {base.__name__}, but "
                                    f"found {type(value)}")
        return f(*args, **kwargs)
    return wrapper
