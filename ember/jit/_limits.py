"""Bounds on what TorchScript code can make ember compute: loading evaluates only
literals, and running refuses Python arithmetic whose result would be huge.

TorchScript's ``int`` is 64 bits and its ``str`` has no repetition operator, so
``9 ** 9 ** 9``, ``1 << 10 ** 10`` or ``"a" * 10 ** 10`` cost PyTorch nothing; ember's
interpreter computes on Python objects, which grow without limit. The operators here
compute the size of the result first and raise :class:`ScriptError` past a bound.
"""
import ast
import operator

from ember.jit._errors import ScriptError, ScriptSafetyError

__all__ = ["MAX_INT_BITS", "MAX_ELEMENTS", "pow_", "mul", "imul", "lshift", "literal_default"]

# a Python int of about a million decimal digits, a list or string of ten million items:
# far beyond any value a model computes, and cheap to refuse
MAX_INT_BITS = 1 << 22
MAX_ELEMENTS = 10 ** 7

_SEQ = (str, list, tuple, bytes)


def _too_big(what):
    raise ScriptError(f"TorchScript arithmetic refused: {what}; ember's interpreter bounds "
                      f"Python ints to {MAX_INT_BITS} bits and strings and lists to "
                      f"{MAX_ELEMENTS} items (TorchScript's own int is 64 bits)")


def _is_int(v):
    return isinstance(v, int)  # bool included: True ** n is small


def pow_(a, b):
    """``a ** b`` with the size of an integer result checked before computing it."""
    if _is_int(a) and _is_int(b) and b > 0 and abs(a) > 1:
        if (abs(a).bit_length() - 1) * b > MAX_INT_BITS:
            _too_big(f"{a} ** {b} has more than {MAX_INT_BITS} bits")
    return operator.pow(a, b)


def _check_mul(a, b):
    ta, tb = type(a), type(b)
    if ta in _SEQ or tb in _SEQ:
        seq, n = (a, b) if ta in _SEQ else (b, a)
        if _is_int(n) and n > 0 and len(seq) * n > MAX_ELEMENTS:
            _too_big(f"repeating a {type(seq).__name__} of {len(seq)} items {n} times")
    elif ta is int and tb is int and a.bit_length() + b.bit_length() > MAX_INT_BITS:
        _too_big(f"a product of {a.bit_length()} and {b.bit_length()} bit ints")


def mul(a, b):
    """``a * b`` with sequence repetition and integer products bounded."""
    _check_mul(a, b)
    return a * b


def imul(a, b):
    """``a *= b`` (in place where Python does it in place), bounded as :func:`mul`."""
    _check_mul(a, b)
    return operator.imul(a, b)


def lshift(a, b):
    """``a << b`` with the size of the result checked before computing it."""
    if _is_int(a) and _is_int(b) and a and b > 0 and a.bit_length() + b > MAX_INT_BITS:
        _too_big(f"{a.bit_length()} bit int << {b}")
    return operator.lshift(a, b)


# ----- defaults: literals only ---------------------------------------------------------------
_NAMES = {"inf": float("inf"), "nan": float("nan"), "infj": complex(0, float("inf")),
          "nanj": complex(0, float("nan"))}
_SCALARS = (bool, int, float, complex, str)


def _number(node):
    """A (possibly signed) numeric literal, or raise ValueError."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _number(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex)) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    raise ValueError


def _literal(node, ctx):
    if isinstance(node, ast.Constant) and (node.value is None or
                                           isinstance(node.value, _SCALARS)):
        if type(node.value) is int and not -2 ** 63 <= node.value <= 2 ** 63:
            raise ScriptError("integral constant out of range (TorchScript ints must fit "
                              "in a signed 64 bit integer)")
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_literal(e, ctx) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_literal(k, ctx): _literal(v, ctx) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        # a complex literal as TorchScript prints it: ``1.+2.j``
        re, im = _number(node.left), _number(node.right)
        if not isinstance(re, complex) and isinstance(im, complex) and not im.real:
            return re + im if isinstance(node.op, ast.Add) else re - im
        raise ValueError
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "CONSTANTS" and node.attr[:1] == "c" \
            and node.attr[1:].isdigit():
        i = int(node.attr[1:])
        if i >= len(ctx.cu.constants):
            raise ScriptError(f"CONSTANTS.{node.attr} is not in constants.pkl "
                              f"({len(ctx.cu.constants)} constants)")
        return ctx.cu.constants[i]
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.device" \
            and not node.keywords and 1 <= len(node.args) <= 2:
        from ember.jit._builtins import TABLE
        args = [_literal(a, ctx) for a in node.args]
        if isinstance(args[0], str) and (len(args) == 1 or _is_int(args[1])):
            return TABLE["torch.device"](*args)
        raise ValueError
    return _number(node)


def literal_default(name, node, ctx, where):
    """The value of a parameter's default, which must be a literal as TorchScript writes it.

    ``torch.jit.save`` prints defaults as numbers, strings, ``None``, ``inf``/``nan``,
    tuples and lists of them, ``CONSTANTS.cN`` (tensors) and ``torch.device("cpu")``;
    anything else (arithmetic, calls) is refused rather than evaluated while loading.
    """
    try:
        return _literal(node, ctx)
    except (ValueError, RecursionError):
        text = ast.unparse(node)
        text = text if len(text) <= 60 else text[:57] + "..."
        raise ScriptSafetyError(
            f"{where}: the default of parameter {name!r} ({text}) is not a literal; "
            "TorchScript archives write defaults as numbers, strings, None, tuples and "
            "lists of them, CONSTANTS.cN and torch.device(...), and ember evaluates "
            "nothing else while loading") from None
    except ScriptError as e:
        raise ScriptError(f"{where}: {e}") from None

