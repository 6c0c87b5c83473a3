"""NumPy's keyword spellings ``axis=`` and ``keepdims=`` for ``dim=`` and ``keepdim=``.

torch's argument parser accepts ``axis`` for ``dim`` and ``keepdims`` for ``keepdim`` on
every function and method it binds from C++ (``torch.sum(x, axis=1, keepdims=True)``,
``x.argmax(axis=1)``, ``torch.cat(ts, axis=1)``), but not on the ones torch writes in
Python (``torch.split``, ``torch.norm``, ``Tensor.unflatten``, most of
``torch.nn.functional``), which raise TypeError for them. :func:`install` gives ember's
ops the same: once every op is bound, each function with a ``dim`` or ``keepdim``
parameter in the torch namespaces that take the aliases is replaced, where it is
published, by a wrapper that renames the aliases before calling it. A call without
keyword arguments pays one extra Python call and nothing else.
"""
import functools
import inspect
import types

__all__ = ["install"]

_ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))

# functions torch defines in Python, outside its argument parser: no aliases there
_TORCH_PYTHON = {
    "torch": {"norm", "split", "unique", "unique_consecutive",
              # a composite the jit tracer swaps by identity; a wrapper would hide it
              "unflatten"},
    "Tensor": {"norm", "split", "unflatten"},
}
# torch.nn.functional is Python except these, which torch binds from C++
_FUNCTIONAL_NATIVE = {"cosine_similarity", "pairwise_distance"}


def _renamed(name, kwargs):
    """``kwargs`` with the NumPy spellings renamed; TypeError when both are given."""
    kwargs = dict(kwargs)
    for alias, real in _ALIASES:
        if alias in kwargs:
            if real in kwargs:
                raise TypeError(f"{name}() got multiple values for argument '{real}' "
                                f"(given as '{real}' and as its alias '{alias}')")
            kwargs[real] = kwargs.pop(alias)
    return kwargs


def _accepting(fn, params):
    """``fn`` behind a wrapper that renames the aliases of the parameters it has."""
    aliases = frozenset(alias for alias, real in _ALIASES if real in params)
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs and not aliases.isdisjoint(kwargs):
            kwargs = _renamed(name, kwargs)
        return fn(*args, **kwargs)
    wrapper._numpy_names = True
    return wrapper


def _candidate(fn):
    """The parameter names of a Python function taking ``dim`` or ``keepdim`` (and no
    parameter spelled like an alias), else None. A method that forwards ``*args,
    **kwargs`` to an op (``Tensor.sort``, ``Tensor.cumsum_``) names it in
    ``_forwards_to``; the op's parameters are the method's."""
    if not isinstance(fn, types.FunctionType) or getattr(fn, "_numpy_names", False):
        return None
    try:
        params = inspect.signature(getattr(fn, "_forwards_to", fn)).parameters
    except (TypeError, ValueError):
        return None
    if ("dim" in params or "keepdim" in params) and not (
            "axis" in params or "keepdims" in params):
        return params
    return None


def _wrap_namespace(items, skip, done, setter):
    for name, fn in items:
        if name.startswith("__") or name in skip:
            continue
        wrapped = done.get(id(fn))
        if wrapped is None:
            params = _candidate(fn)
            if params is None:
                continue
            wrapped = done[id(fn)] = (fn, _accepting(fn, params))
        setter(name, wrapped[1])


def install():
    """Accept ``axis=``/``keepdims=`` on ember's ops as torch does (see the module doc).

    Called once, by ``ember/__init__.py`` after every op is bound. The same function
    published under several names (``ember.sum`` and ``Tensor.sum``) gets one wrapper.
    """
    import ember
    from ember import _core, fft, linalg, special
    from ember._tensor import Tensor
    from ember.nn import functional

    done = {}

    def module_setter(mod):
        return lambda name, fn: setattr(mod, name, fn)

    _wrap_namespace(list(vars(ember).items()), _TORCH_PYTHON["torch"], done,
                    module_setter(ember))
    # ember._core holds the same functions for modules inside ember: same wrappers
    _wrap_namespace(list(vars(_core).items()), _TORCH_PYTHON["torch"], done,
                    module_setter(_core))
    _wrap_namespace(list(vars(Tensor).items()), _TORCH_PYTHON["Tensor"], done,
                    lambda name, fn: setattr(Tensor, name, fn))
    for mod in (linalg, fft, special):
        public = getattr(mod, "__all__", None) or [n for n in vars(mod) if n[0] != "_"]
        _wrap_namespace([(n, getattr(mod, n)) for n in public if hasattr(mod, n)], (), done,
                        module_setter(mod))
    _wrap_namespace([(n, getattr(functional, n)) for n in sorted(_FUNCTIONAL_NATIVE)], (),
                    done, module_setter(functional))
