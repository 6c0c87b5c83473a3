"""Plain Python classes in ``jit.script``: objects of a user class held by a module
(directly, or in a list, tuple or dict) become values of a TorchScript class type, as
PyTorch compiles them.

A class's attribute types come from its ``__init__``: an annotated assignment
``self.x: T = ...`` gives ``T``; ``self.x = p`` of an annotated parameter ``p`` gives
``p``'s annotation; any other attribute is typed from the value the object holds. Scripted
code reads these attributes; the interpreter allows exactly the attributes registered here
(:func:`readable`). Methods of such classes are not compiled. Archives hold them as
TorchScript classes (``class X:`` with the attribute declarations under ``code/``, objects
pickled as ``__torch__`` objects), which ``torch.jit.load`` reads.
"""
import ast
import inspect
import textwrap
import typing

__all__ = ["is_plain_class", "class_type", "fields", "readable", "qualname",
           "classes_in", "known_classes"]

_FIELDS = {}    # class -> {attribute name: Ty}; filled as classes are met
_PENDING = set()


def is_plain_class(cls):
    """True for a user-defined Python class whose instances carry attributes: not a
    builtin, not one of ember's own types, not a module or tensor."""
    if not inspect.isclass(cls) or cls.__module__ == "builtins":
        return False
    if cls.__module__.split(".")[0] in ("ember", "torch", "numpy", "typing", "enum"):
        return False
    if issubclass(cls, (tuple, list, dict, BaseException)):
        return False
    return inspect.isfunction(inspect.getattr_static(cls, "__init__", None))


def qualname(cls):
    """The TorchScript spelling of a class type (``__torch__.pkg.mod.Name``)."""
    mod = cls.__module__ or "__main__"
    parts = [] if mod == "__main__" else mod.split(".")
    return ".".join(["__torch__"] + parts + [cls.__qualname__.replace(".<locals>.", "_")])


def class_type(cls, sample=None):
    """The :class:`~ember.jit._types.Ty` of ``cls`` (fields inferred on first use)."""
    from ember.jit import _types as T
    ty = T.Ty("Class", (), module=cls)
    if cls not in _FIELDS and cls not in _PENDING:
        _PENDING.add(cls)
        try:
            _FIELDS[cls] = _infer_fields(cls, sample)
        finally:
            _PENDING.discard(cls)
    elif cls in _FIELDS and sample is not None:
        _add_sample_fields(cls, sample)
    return ty


def fields(cls):
    """``{attribute: Ty}`` of a class seen by :func:`class_type`."""
    return _FIELDS.get(cls, {})


def known_classes():
    """The plain classes met so far."""
    return list(_FIELDS)


def readable(obj, name):
    """True when scripted code may read ``obj.name`` (a declared attribute of a plain
    class's object)."""
    return name in _FIELDS.get(type(obj), ())


def _hint_type(hint):
    from ember.jit import _types as T
    return T.type_from_hint(hint)


def _infer_fields(cls, sample):
    init = cls.__init__
    out = {}
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # unresolvable annotations: fall back to the values
        hints = {}
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError):
        tree = None
    from ember.jit import _types as T
    if tree is not None:
        fn = tree.body[0]
        params = {a.arg for a in fn.args.args[1:] + fn.args.kwonlyargs}
        selfname = fn.args.args[0].arg if fn.args.args else "self"
        for node in ast.walk(fn):
            target, ann, value = None, None, None
            if isinstance(node, ast.AnnAssign):
                target, ann, value = node.target, node.annotation, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == selfname):
                continue
            ty = None
            if ann is not None:
                try:
                    ty = _hint_type(eval(ast.unparse(ann), init.__globals__))  # noqa: S307
                except Exception:
                    ty = None
            if ty is None and isinstance(value, ast.Name) and value.id in params:
                # an unannotated parameter is a Tensor, as TorchScript types it
                ty = _hint_type(hints[value.id]) if value.id in hints else T.TENSOR
            if ty is not None:
                out.setdefault(target.attr, ty)
    _FIELDS[cls] = out
    if sample is not None:
        _add_sample_fields(cls, sample)
    return _FIELDS[cls]


def _add_sample_fields(cls, sample):
    from ember.jit import _types as T
    known = _FIELDS[cls]
    for name, value in vars(sample).items():
        if name.startswith("__"):
            continue
        ty = T.type_of_value(value)
        if name not in known:
            if ty is not None:
                known[name] = ty
            continue
        want = known[name]
        if not _fits(value, want):
            raise RuntimeError(f"Could not cast attribute '{name}' of {qualname(cls)} to "
                               f"type {want}: its value is a {type(value).__name__} "
                               f"({ty or 'not a TorchScript type'})")


def _fits(value, ty):
    """Whether a Python value can be held by an attribute of TorchScript type ``ty``."""
    from ember.jit import _types as T
    k = ty.kind
    if k == "Any":
        return True
    if k == "Optional":
        return value is None or _fits(value, ty.elem)
    if k == "List":
        return isinstance(value, list) and all(_fits(v, ty.elem) for v in value)
    if k == "Tuple":
        return (isinstance(value, tuple) and len(value) == len(ty.args)
                and all(_fits(v, t) for v, t in zip(value, ty.args)))
    if k == "Dict":
        return isinstance(value, dict) and all(
            _fits(a, ty.args[0]) and _fits(b, ty.args[1]) for a, b in value.items())
    if k == "Class":
        return isinstance(value, ty.module)
    if k == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    got = T.type_of_value(value)
    return got is not None and T.subtype(got, ty)


def classes_in(value, seen=None):
    """The plain classes whose objects ``value`` holds (through lists, tuples, dicts).
    Each container is visited once: a value may share one list many times over."""
    found = set() if seen is None else seen
    visited = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            if id(v) in visited:
                continue
            visited.add(id(v))
            stack.extend(v.keys() if isinstance(v, dict) else ())
            stack.extend(v.values() if isinstance(v, dict) else v)
        elif is_plain_class(type(v)):
            found.add(type(v))
    return found
