"""TorchScript types for ``jit.script``: how they are spelled, read from annotations and
inferred from Python values.

A type is a small immutable :class:`Ty`; ``str(ty)`` is TorchScript's own spelling
(``Tensor``, ``List[int]``, ``Optional[Tensor]``, ``Tuple[Tensor, int]``, a module's
qualified class name), which is what the generated source and the archive use.
"""
import ast
import typing

__all__ = ["Ty", "TENSOR", "INT", "FLOAT", "BOOL", "STR", "NONE", "NUMBER", "DEVICE",
           "list_of", "tuple_of", "dict_of", "optional", "unify", "type_of_value",
           "Final"]


class Ty:
    """A TorchScript type: ``kind`` is the head (``Tensor``, ``List``...), ``args`` its
    element types; ``module`` is the ember module for module types."""

    __slots__ = ("kind", "args", "module")

    def __init__(self, kind, args=(), module=None):
        self.kind = kind
        self.args = tuple(args)
        self.module = module

    def __eq__(self, other):
        return (isinstance(other, Ty) and self.kind == other.kind and self.args == other.args
                and self.module is other.module)

    def __hash__(self):
        return hash((self.kind, self.args, id(self.module)))

    def __repr__(self):
        return f"Ty({self})"

    def __str__(self):
        if self.kind == "Module":
            return self.module_name()
        if self.kind == "Class":
            from ember.jit._script_classes import qualname
            return qualname(self.module)
        if self.kind in ("List", "Optional"):
            return f"{self.kind}[{self.args[0]}]"
        if self.kind == "Tuple":
            return "Tuple[" + (", ".join(map(str, self.args)) or "()") + "]"
        if self.kind == "Dict":
            return f"Dict[{self.args[0]}, {self.args[1]}]"
        return self.kind

    def module_name(self):
        """The qualified TorchScript class name of a module type (``__torch__.Net``)."""
        return getattr(self.module, "_ember_script_qualname", None) or "__torch__.Module"

    @property
    def is_tensor(self):
        return self.kind == "Tensor"

    @property
    def is_scalar(self):
        return self.kind in ("int", "float", "bool", "number")

    @property
    def elem(self):
        return self.args[0]


TENSOR, INT, FLOAT, BOOL, STR = Ty("Tensor"), Ty("int"), Ty("float"), Ty("bool"), Ty("str")
NONE, NUMBER, DEVICE = Ty("NoneType"), Ty("number"), Ty("Device")
ANY = Ty("Any")


def list_of(t):
    return Ty("List", (t,))


def tuple_of(ts):
    return Ty("Tuple", ts)


def dict_of(k, v):
    return Ty("Dict", (k, v))


def optional(t):
    """``Optional[t]`` (``t`` itself when it is already optional or None)."""
    if t.kind in ("Optional", "NoneType"):
        return t
    return Ty("Optional", (t,))


def subtype(a, b):
    """Whether a value of type ``a`` may be used where ``b`` is expected."""
    if a == b or b == ANY:
        return True
    if b.kind == "Optional":
        return a.kind == "NoneType" or subtype(a, b.elem) or (
            a.kind == "Optional" and subtype(a.elem, b.elem))
    if b.kind == "number":
        return a.kind in ("int", "float")
    if b.kind == "float" and a.kind == "int":
        return False
    if a.kind == b.kind == "Tuple" and len(a.args) == len(b.args):
        return all(subtype(x, y) for x, y in zip(a.args, b.args))
    if a.kind == b.kind == "List":
        return a.elem == b.elem
    return False


def unify(a, b):
    """The type that holds both ``a`` and ``b`` (None when there is none), as TorchScript
    unifies the two sides of an ``if``: ``T`` and ``None`` give ``Optional[T]``."""
    if a == b:
        return a
    if a.kind == "NoneType":
        return optional(b)
    if b.kind == "NoneType":
        return optional(a)
    if a.kind == "Optional" and subtype(b, a):
        return a
    if b.kind == "Optional" and subtype(a, b):
        return b
    if a.kind == b.kind == "Tuple" and len(a.args) == len(b.args):
        parts = [unify(x, y) for x, y in zip(a.args, b.args)]
        if all(p is not None for p in parts):
            return tuple_of(parts)
    return None


# ---------------------------------------------------------------------------------------
# annotations
# ---------------------------------------------------------------------------------------
# ``jit.Final[T]``: a module attribute that scripted code reads as a constant
Final = typing.Final

_SIMPLE = {"int": INT, "float": FLOAT, "bool": BOOL, "str": STR, "Tensor": TENSOR,
           "None": NONE, "NoneType": NONE, "number": NUMBER, "device": DEVICE,
           "Device": DEVICE, "Any": ANY}
_GENERIC = {"List": "List", "list": "List", "Tuple": "Tuple", "tuple": "Tuple",
            "Dict": "Dict", "dict": "Dict", "Optional": "Optional", "Final": "Final",
            "Union": "Union"}


def _dotted(node):
    """``a.b.c`` of an ast Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def type_from_ast(node, err):
    """The :class:`Ty` an annotation's ast spells (``typing`` names, PEP 585 ``list[int]``,
    ``X | None``, string annotations); ``err(node, msg)`` raises for anything else.
    ``Final[T]`` gives ``Ty("Final", (T,))``."""
    if isinstance(node, ast.Constant):
        if node.value is None:
            return NONE
        if isinstance(node.value, str):
            return type_from_ast(ast.parse(node.value, mode="eval").body, err)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        a, b = type_from_ast(node.left, err), type_from_ast(node.right, err)
        u = unify(a, b)
        if u is None:
            err(node, f"union type {ast.unparse(node)} is not supported")
        return u
    name = _dotted(node)
    if name is not None:
        last = name.rsplit(".", 1)[-1]
        if last in _SIMPLE:
            return _SIMPLE[last]
        if last == "Tensor":
            return TENSOR
        err(node, f"unknown type annotation '{name}'")
    if isinstance(node, ast.Subscript):
        head = _dotted(node.value)
        head = _GENERIC.get(head.rsplit(".", 1)[-1] if head else None)
        if head is None:
            err(node, f"unknown type annotation '{ast.unparse(node)}'")
        sl = node.slice
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if head == "Tuple" and len(items) == 1 and isinstance(items[0], ast.Tuple):
            return tuple_of([])
        args = [type_from_ast(x, err) for x in items]
        if head == "List":
            return list_of(args[0])
        if head == "Tuple":
            return tuple_of(args)
        if head == "Dict":
            return dict_of(args[0], args[1])
        if head == "Optional":
            return optional(args[0])
        if head == "Final":
            return Ty("Final", (args[0],))
        if head == "Union":
            t = args[0]
            for a in args[1:]:
                t = unify(t, a)
                if t is None:
                    err(node, f"union type {ast.unparse(node)} is not supported")
            return t
    err(node, f"unknown type annotation '{ast.unparse(node)}'")


def type_from_hint(hint):
    """The :class:`Ty` of a runtime typing object (``List[int]``, ``list[int]``,
    ``Optional[Tensor]``), or None when it is not a TorchScript type."""
    import ember
    if hint is int:
        return INT
    if hint is float:
        return FLOAT
    if hint is bool:
        return BOOL
    if hint is str:
        return STR
    if hint is type(None) or hint is None:
        return NONE
    if hint is ember.Tensor:
        return TENSOR
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is list and args:
        e = type_from_hint(args[0])
        return list_of(e) if e is not None else None
    if origin is tuple:
        parts = [type_from_hint(a) for a in args]
        return None if any(p is None for p in parts) else tuple_of(parts)
    if origin is dict and len(args) == 2:
        k, v = type_from_hint(args[0]), type_from_hint(args[1])
        return None if k is None or v is None else dict_of(k, v)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        parts = [type_from_hint(a) for a in args]
        if any(p is None for p in parts):
            return None
        t = parts[0]
        for p in parts[1:]:
            t = t if t is None else unify(t, p)
        return t
    if origin is typing.Final and args:
        return type_from_hint(args[0])
    from ember.jit import _script_classes
    if _script_classes.is_plain_class(hint):
        return _script_classes.class_type(hint)
    return None


def type_of_value(v):
    """The TorchScript type of a Python attribute value (None when it has none)."""
    import ember
    if isinstance(v, ember.Tensor):
        return TENSOR
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT
    if isinstance(v, float):
        return FLOAT
    if isinstance(v, str):
        return STR
    if v is None:
        return NONE
    if isinstance(v, tuple):
        parts = [type_of_value(x) for x in v]
        return None if any(p is None for p in parts) else tuple_of(parts)
    if isinstance(v, list):
        if not v:
            return None
        parts = {type_of_value(x) for x in v}
        return list_of(parts.pop()) if len(parts) == 1 and None not in parts else None
    if isinstance(v, dict):
        if not v:
            return None
        ks = {type_of_value(x) for x in v}
        vs = {type_of_value(x) for x in v.values()}
        if len(ks) == 1 and len(vs) == 1 and None not in ks | vs:
            return dict_of(ks.pop(), vs.pop())
        return None
    from ember.jit import _script_classes
    if _script_classes.is_plain_class(type(v)):
        return _script_classes.class_type(type(v), v)
    return None


def literal(v):
    """TorchScript source for a constant Python value (ints, floats as torch prints them,
    bools, strings, None, tuples and lists of those)."""
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        s = repr(v)
        return s[:-1] if s.endswith(".0") else s
    if isinstance(v, str):
        return _str_literal(v)
    if isinstance(v, tuple):
        inner = ", ".join(literal(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(literal(x) for x in v) + "]"
    raise TypeError(f"no TorchScript literal for {type(v).__name__}")


def _str_literal(s):
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 32:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
