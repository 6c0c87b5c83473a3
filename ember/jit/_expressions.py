"""Expressions of ember's TorchScript interpreter: each validated node becomes a closure.

Used by :mod:`ember.jit._interpreter`; see its docstring for the safety model.
"""
import ast
import operator

from ember.jit import _builtins, _builtins_nn, _limits  # noqa: F401  (_nn registers entries)
from ember.jit._errors import ScriptError, ScriptSafetyError

# `**`, `*` and `<<` check the size of their result first (see ember.jit._limits)
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: _limits.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: _limits.pow_, ast.MatMult: operator.matmul, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: _limits.lshift,
           ast.RShift: operator.rshift}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
           ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Is: operator.is_, ast.IsNot: operator.is_not,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_UNOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
          ast.Not: operator.not_}

# names a TorchScript type annotation may use (types are checked, never evaluated)
TYPE_NAMES = {"Tensor", "int", "float", "bool", "str", "complex", "List", "Dict", "Tuple",
              "Optional", "NoneType", "Final", "Any", "Union", "Device", "number", "Future",
              "Module", "Enum", "NamedTuple", "Callable", "Generator", "Storage", "Stream",
              "Layout", "ScalarType", "MemoryFormat", "QScheme", "Await", "RRef", "Scalar",
              "device", "dtype", "Capsule", "Quantizer", "Object", "Type", "NumberType"}
_TYPE_ROOTS = {"__torch__", "torch", "ops", "typing"}
RESERVED = {"torch", "ops", "__torch__", "CONSTANTS", "math"}


def bad_name(p):
    """A dunder path part other than ``__torch__`` and torch's ``___torch_mangle_N``."""
    return p.startswith("__") and p != "__torch__" and not (
        p.startswith("___torch_mangle_") and p[16:].isdigit())


def where(ctx, node):
    return f"{ctx.filename}, line {getattr(node, 'lineno', '?')}"


def dotted(node):
    """``a.b.c`` as a list of names, or None when the chain is not all names."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def check_type(node, ctx):
    """Validate a type annotation: identifiers, subscripts and ``__torch__`` paths only."""
    if node is None:
        return
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
        return
    if isinstance(node, ast.Name):
        if node.id in TYPE_NAMES:
            return
    elif isinstance(node, ast.Attribute):
        parts = dotted(node)
        if parts and parts[0] in _TYPE_ROOTS and not any(bad_name(p) for p in parts):
            return
    elif isinstance(node, ast.Subscript):
        check_type(node.value, ctx)
        sl = node.slice
        for elt in (sl.elts if isinstance(sl, ast.Tuple) else [sl]):
            check_type(elt, ctx)
        return
    elif isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            check_type(elt, ctx)
        return
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        check_type(node.left, ctx)
        check_type(node.right, ctx)
        return
    raise ScriptSafetyError(f"{where(ctx, node)}: {ast.unparse(node)!r} is not a "
                            "TorchScript type")


def check_attr_name(name, node, ctx):
    if name.startswith("__"):
        raise ScriptSafetyError(f"{where(ctx, node)}: access to attribute {name!r} is "
                                "refused (dunder attributes are outside TorchScript)")


# ----- runtime doors from script values to Python objects --------------------------------
_TENSOR_ATTRS = {"shape", "dtype", "device", "is_cuda", "requires_grad", "grad", "data", "T",
                 "mT", "H", "mH", "ndim", "is_leaf", "layout", "real", "imag", "is_sparse",
                 "is_quantized", "is_meta", "is_nested"}


def get_attr(obj, name, at=""):
    """``obj.name`` in TorchScript: script modules, tensors and named tuples only."""
    jit_attr = getattr(type(obj), "_jit_attr", None)
    if jit_attr is not None:
        return jit_attr(obj, name)
    from ember._tensor import Tensor
    if isinstance(obj, Tensor):
        if name in _TENSOR_ATTRS:
            return getattr(obj, name, False) if name.startswith("is_") else getattr(obj, name)
    elif isinstance(obj, tuple) and name in getattr(type(obj), "_fields", ()):
        return getattr(obj, name)
    else:
        from ember.jit._script_classes import readable
        if readable(obj, name):
            return obj.__dict__[name]
    raise ScriptError(f"{at}: a TorchScript value of type {type(obj).__name__} has no "
                      f"attribute {name!r} that ember's interpreter allows")


_LIST_METHODS = {"append", "extend", "insert", "pop", "remove", "index", "count", "clear",
                 "reverse", "copy", "sort"}
_DICT_METHODS = {"keys", "values", "items", "get", "pop", "setdefault", "update", "clear",
                 "copy", "popitem"}
_STR_METHODS = {"format", "join", "split", "strip", "lower", "upper", "startswith",
                "endswith", "replace", "find", "isdigit", "lstrip", "rstrip", "count"}
CONTAINER_METHODS = _LIST_METHODS | _DICT_METHODS | _STR_METHODS


# tensor methods that reach memory, hooks or callables: refused wherever they appear
_REFUSED_METHODS = {"as_strided", "as_strided_", "as_subclass", "register_hook",
                    "register_post_accumulate_grad_hook", "numpy", "apply_", "map_", "map2_",
                    "backward", "set_", "share_memory_", "storage", "untyped_storage",
                    "data_ptr"}


def call_method(obj, name, args, kwargs, at=""):
    """``obj.name(*args)`` in TorchScript: module methods, tensor ops, container methods."""
    script_method = getattr(type(obj), "_jit_method", None)
    if script_method is not None:
        return script_method(obj, name)(*args, **kwargs)
    from ember._tensor import Tensor
    if isinstance(obj, Tensor):
        fn = _builtins.lookup_method(name)
        if fn is None:
            if _builtins.is_tensor_method(name):
                raise NotImplementedError(f"{at}: tensor method {name!r} is not in ember's "
                                          "TorchScript builtin table")
            raise ScriptError(f"{at}: 'Tensor' object has no attribute or method {name!r} "
                              "in TorchScript")
        return fn(obj, *args, **kwargs)
    allowed = (_LIST_METHODS if isinstance(obj, list) else _DICT_METHODS
               if isinstance(obj, dict) else _STR_METHODS if isinstance(obj, str) else ())
    if name in allowed:
        if name == "format":
            return _builtins.safe_format(obj, *args)
        return getattr(obj, name)(*args, **kwargs)
    raise ScriptError(f"{at}: a TorchScript value of type {type(obj).__name__} has no method "
                      f"{name!r} that ember's interpreter allows")


def _isinstance(value, type_node):
    """``isinstance(x, T)`` for a TorchScript type expression."""
    from ember._tensor import Tensor
    t = ast.unparse(type_node) if isinstance(type_node, ast.AST) else type_node
    base = t.split("[", 1)[0].strip()
    if isinstance(type_node, ast.Tuple):
        return any(_isinstance(value, e) for e in type_node.elts)
    checks = {"Tensor": lambda v: isinstance(v, Tensor),
              "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "float": lambda v: isinstance(v, float), "bool": lambda v: isinstance(v, bool),
              "str": lambda v: isinstance(v, str), "List": lambda v: isinstance(v, list),
              "Tuple": lambda v: isinstance(v, tuple), "Dict": lambda v: isinstance(v, dict),
              "NoneType": lambda v: v is None, "None": lambda v: v is None,
              "Optional": lambda v: True}
    if base in checks:
        return checks[base](value)
    qual = getattr(type(value), "_jit_qualname", None)
    if qual is None and hasattr(value, "_jit_class"):
        qual = value._jit_class.qualname
    return qual == t


# ----- compiling expressions ---------------------------------------------------------------
def _const(v):
    return lambda env: v


def compile_expr(node, ctx):
    """A closure ``f(env)`` computing ``node``; validates as it goes."""
    m = _EXPR.get(type(node))
    if m is None:
        raise ScriptSafetyError(f"{where(ctx, node)}: a {type(node).__name__} expression is "
                                "not TorchScript; ember refuses to run it")
    return m(node, ctx)


def _e_constant(node, ctx):
    v = node.value
    if not (v is None or isinstance(v, (bool, int, float, str, complex)) or v is Ellipsis):
        raise ScriptSafetyError(f"{where(ctx, node)}: constant {v!r} is not TorchScript")
    if type(v) is int and not -2 ** 63 <= v <= 2 ** 63:  # 2**63 for -2**63 spelled -(2**63)
        raise ScriptError(f"{where(ctx, node)}: integral constant out of range (TorchScript "
                          "ints must fit in a signed 64 bit integer)")
    return _const(v)


_NAME_CONSTS = {"inf": float("inf"), "nan": float("nan")}


def _e_name(node, ctx):
    name = node.id
    if name in ctx.locals:
        # a KeyError here (used before assignment) is named by the statement's note
        return operator.itemgetter(name)
    if name in _NAME_CONSTS:
        return _const(_NAME_CONSTS[name])
    if name in _SIMPLE_BUILTINS:
        return _const(_SIMPLE_BUILTINS[name])
    raise ScriptSafetyError(f"{where(ctx, node)}: name {name!r} is not allowed in TorchScript "
                            "code (only ember builtins, the archive's own classes and "
                            "functions, and int/float/bool/len/... are)")


def _global_chain(parts, node, ctx):
    """``torch.x``, ``ops.prim.x``, ``math.x``, ``__torch__.a.b``, ``CONSTANTS.cN``."""
    root = parts[0]
    full = ".".join(parts)
    if root == "CONSTANTS":
        if len(parts) != 2 or not parts[1].startswith("c") or not parts[1][1:].isdigit():
            raise ScriptSafetyError(f"{where(ctx, node)}: {full} is not a constant reference")
        i = int(parts[1][1:])
        if i >= len(ctx.cu.constants):
            raise ScriptError(f"{where(ctx, node)}: {full} is not in constants.pkl "
                              f"({len(ctx.cu.constants)} constants)")
        return _const(ctx.cu.constants[i])
    for p in parts[1:]:
        if bad_name(p) and not (root == "torch" and p in _builtins.DUNDER_OPS):
            raise ScriptSafetyError(f"{where(ctx, node)}: {full}: dunder names are refused")
    if root == "__torch__":
        cu, at = ctx.cu, where(ctx, node)
        cache = []

        def lazy(env):
            if not cache:
                cache.append(cu.resolve(full, at))
            return cache[0]
        return lazy
    if _builtins.refused(full):
        raise ScriptSafetyError(f"{where(ctx, node)}: {full} (files, seeds, threads or "
                                "global settings) is refused in TorchScript code")
    fn = _builtins.lookup(full)
    if fn is None and not _builtins.known(full):
        raise ScriptSafetyError(f"{where(ctx, node)}: Unknown builtin op: "
                                f"{_builtins.schema_name(full)}: {full} is not a TorchScript "
                                "operator, and names in TorchScript code resolve only to "
                                "TorchScript's operators and ember's builtin table")
    if fn is None:
        # an operator ember lacks: loading goes on (PyTorch's own library code names many
        # operators in branches a model never takes), the unit lists it for a warning,
        # and reaching it raises
        line = ""
        if 0 < getattr(node, "lineno", 0) <= len(ctx.lines):
            line = f"; the line reads: {ctx.lines[node.lineno - 1].strip()}"
        msg = (f"{where(ctx, node)}: TorchScript builtin {full} is not supported by ember "
               f"(no entry in ember.jit._builtins){line}")
        ctx.cu.missing.append((full, where(ctx, node)))
        fn = _missing(full, msg)
    return _const(fn)


def _missing(name, msg):
    def missing(*args, **kwargs):
        raise NotImplementedError(msg)
    missing.__name__ = name
    return missing


def _e_attribute(node, ctx):
    parts = dotted(node)
    if parts is not None and parts[0] in RESERVED and parts[0] not in ctx.locals:
        return _global_chain(parts, node, ctx)
    check_attr_name(node.attr, node, ctx)
    obj = compile_expr(node.value, ctx)
    name, at = node.attr, where(ctx, node)

    def attr(env):
        o = obj(env)
        d = getattr(o, "__dict__", None)
        if d is not None and "_jit_class" in d:
            params = d["_parameters"]  # the common case: self.weight
            if name in params:
                return params[name]
            return o._jit_attr(name)
        return get_attr(o, name, at)
    return attr


def _args(node, ctx):
    for a in node.args:
        if isinstance(a, ast.Starred):
            raise ScriptSafetyError(f"{where(ctx, node)}: *args calls are not TorchScript")
    for k in node.keywords:
        if k.arg is None:
            raise ScriptSafetyError(f"{where(ctx, node)}: **kwargs calls are not TorchScript")
    args = [compile_expr(a, ctx) for a in node.args]
    kws = [(k.arg, compile_expr(k.value, ctx)) for k in node.keywords]
    return args, kws


def _invoke(fn, args, kws):
    """Closure calling ``fn`` (a closure giving the callee) with compiled arguments."""
    n = len(args)
    if kws:
        def call_kw(env):
            return fn(env)(*[a(env) for a in args], **{k: v(env) for k, v in kws})
        return call_kw
    if n == 1:
        a0, = args
        return lambda env: fn(env)(a0(env))
    if n == 2:
        a0, a1 = args
        return lambda env: fn(env)(a0(env), a1(env))
    if n == 3:
        a0, a1, a2 = args
        return lambda env: fn(env)(a0(env), a1(env), a2(env))
    return lambda env: fn(env)(*[a(env) for a in args])


def _invoke_const(f, args, kws):
    """Like :func:`_invoke` for a callee known when compiling (a builtin)."""
    n = len(args)
    if kws:
        def call_kw(env):
            return f(*[a(env) for a in args], **{k: v(env) for k, v in kws})
        return call_kw
    if n == 0:
        return lambda env: f()
    if n == 1:
        a0, = args
        return lambda env: f(a0(env))
    if n == 2:
        a0, a1 = args
        return lambda env: f(a0(env), a1(env))
    if n == 3:
        a0, a1, a2 = args
        return lambda env: f(a0(env), a1(env), a2(env))
    return lambda env: f(*[a(env) for a in args])


def _e_call(node, ctx):
    func = node.func
    if isinstance(func, ast.Name) and func.id not in ctx.locals:
        special = _SPECIAL_CALLS.get(func.id)
        if special is not None:
            return special(node, ctx)
    if isinstance(func, ast.Attribute):
        parts = dotted(func)
        if not (parts is not None and parts[0] in RESERVED and parts[0] not in ctx.locals):
            # a method call on a value: script module method, tensor op, container method
            check_attr_name(func.attr, func, ctx)
            if func.attr in _REFUSED_METHODS:
                raise ScriptSafetyError(f"{where(ctx, node)}: the tensor method "
                                        f"{func.attr!r} is refused in TorchScript code")
            obj = compile_expr(func.value, ctx)
            args, kws = _args(node, ctx)
            name, at = func.attr, where(ctx, node)
            ctx.cu.method_calls.append((name, at))
            if not kws and len(args) == 1:
                a0, = args

                def meth1(env):
                    o = obj(env)
                    d = getattr(o, "__dict__", None)
                    if d is not None and "_jit_class" in d:
                        fn = d["_jit_class"].methods.get(name)
                        if fn is not None:
                            return fn(o, a0(env))
                    return call_method(o, name, (a0(env),), {}, at)
                return meth1

            def meth(env):
                return call_method(obj(env), name, [a(env) for a in args],
                                   {k: v(env) for k, v in kws}, at)
            return meth
        callee = _global_chain(parts, func, ctx)
        args, kws = _args(node, ctx)
        if parts[0] != "__torch__":
            return _invoke_const(callee({}), args, kws)
        return _invoke(callee, args, kws)
    callee = compile_expr(func, ctx)
    args, kws = _args(node, ctx)
    return _invoke(callee, args, kws)


def _e_binop(node, ctx):
    op = _BINOPS[type(node.op)]
    left, right = compile_expr(node.left, ctx), compile_expr(node.right, ctx)
    return lambda env: op(left(env), right(env))


def _e_unaryop(node, ctx):
    op = _UNOPS[type(node.op)]
    operand = compile_expr(node.operand, ctx)
    return lambda env: op(operand(env))


def _e_boolop(node, ctx):
    values = [compile_expr(v, ctx) for v in node.values]
    if isinstance(node.op, ast.And):
        def and_(env):
            r = True
            for v in values:
                r = v(env)
                if not r:
                    return r
            return r
        return and_

    def or_(env):
        r = False
        for v in values:
            r = v(env)
            if r:
                return r
        return r
    return or_


def _e_compare(node, ctx):
    left = compile_expr(node.left, ctx)
    ops = [_CMPOPS[type(o)] for o in node.ops]
    rights = [compile_expr(c, ctx) for c in node.comparators]
    if len(ops) == 1:
        op, right = ops[0], rights[0]
        return lambda env: op(left(env), right(env))

    def chain(env):
        a = left(env)
        for op, r in zip(ops, rights):
            b = r(env)
            if not op(a, b):
                return False
            a = b
        return True
    return chain


def _e_ifexp(node, ctx):
    test, body, orelse = (compile_expr(node.test, ctx), compile_expr(node.body, ctx),
                          compile_expr(node.orelse, ctx))
    return lambda env: body(env) if test(env) else orelse(env)


def _e_subscript(node, ctx):
    obj, key = compile_expr(node.value, ctx), compile_expr(node.slice, ctx)
    return lambda env: obj(env)[key(env)]


def _e_slice(node, ctx):
    parts = [compile_expr(p, ctx) if p is not None else _const(None)
             for p in (node.lower, node.upper, node.step)]
    lo, hi, st = parts
    return lambda env: slice(lo(env), hi(env), st(env))


def _e_tuple(node, ctx):
    elts = [compile_expr(e, ctx) for e in node.elts]
    return lambda env: tuple([e(env) for e in elts])


def _e_list(node, ctx):
    elts = [compile_expr(e, ctx) for e in node.elts]
    return lambda env: [e(env) for e in elts]


def _e_dict(node, ctx):
    if any(k is None for k in node.keys):
        raise ScriptSafetyError(f"{where(ctx, node)}: **dict displays are not TorchScript")
    items = [(compile_expr(k, ctx), compile_expr(v, ctx)) for k, v in zip(node.keys,
                                                                          node.values)]
    return lambda env: {k(env): v(env) for k, v in items}


_EXPR = {ast.Constant: _e_constant, ast.Name: _e_name, ast.Attribute: _e_attribute,
         ast.Call: _e_call, ast.BinOp: _e_binop, ast.UnaryOp: _e_unaryop,
         ast.BoolOp: _e_boolop, ast.Compare: _e_compare, ast.IfExp: _e_ifexp,
         ast.Subscript: _e_subscript, ast.Slice: _e_slice, ast.Tuple: _e_tuple,
         ast.List: _e_list, ast.Dict: _e_dict}


# ----- Python builtins TorchScript code may call ---------------------------------------------
def _to_int(v):
    return int(v)


_SIMPLE_BUILTINS = {"int": _to_int, "float": float, "bool": bool, "len": len, "str": str,
                    "range": range, "min": min, "max": max, "abs": abs, "round": round,
                    "list": list, "tuple": tuple, "dict": dict, "enumerate": enumerate,
                    "zip": zip, "sum": sum, "all": all, "any": any, "divmod": divmod,
                    "ord": ord, "chr": chr, "sorted": sorted, "reversed": reversed,
                    "complex": complex, "hash": hash}


def _c_annotate(node, ctx):
    if len(node.args) != 2 or node.keywords:
        raise ScriptError(f"{where(ctx, node)}: annotate(T, value) takes two arguments")
    check_type(node.args[0], ctx)
    return compile_expr(node.args[1], ctx)


def _c_uninitialized(node, ctx):
    if len(node.args) != 1:
        raise ScriptError(f"{where(ctx, node)}: uninitialized(T) takes one argument")
    check_type(node.args[0], ctx)
    return _const(None)


def _c_isinstance(node, ctx):
    if len(node.args) != 2:
        raise ScriptError(f"{where(ctx, node)}: isinstance(x, T) takes two arguments")
    check_type(node.args[1], ctx)
    value, tnode = compile_expr(node.args[0], ctx), node.args[1]
    return lambda env: _isinstance(value(env), tnode)


def _c_getattr(node, ctx):
    if len(node.args) != 2 or not isinstance(node.args[1], ast.Constant) \
            or not isinstance(node.args[1].value, str):
        raise ScriptSafetyError(f"{where(ctx, node)}: getattr needs a constant attribute name")
    name = node.args[1].value
    check_attr_name(name, node, ctx)
    obj, at = compile_expr(node.args[0], ctx), where(ctx, node)
    return lambda env: get_attr(obj(env), name, at)


def _c_hasattr(node, ctx):
    if len(node.args) != 2 or not isinstance(node.args[1], ast.Constant):
        raise ScriptSafetyError(f"{where(ctx, node)}: hasattr needs a constant attribute name")
    name = node.args[1].value
    check_attr_name(name, node, ctx)
    obj, at = compile_expr(node.args[0], ctx), where(ctx, node)

    def has(env):
        try:
            get_attr(obj(env), name, at)
            return True
        except (ScriptError, AttributeError):
            return False
    return has


def _c_print(node, ctx):
    args, _ = _args(node, ctx)
    return lambda env: print(*[a(env) for a in args])


_SPECIAL_CALLS = {"annotate": _c_annotate, "unchecked_cast": _c_annotate,
                  "uninitialized": _c_uninitialized, "isinstance": _c_isinstance,
                  "getattr": _c_getattr, "hasattr": _c_hasattr, "print": _c_print}

PY_BUILTIN_NAMES = set(_SIMPLE_BUILTINS) | set(_SPECIAL_CALLS) | set(_NAME_CONSTS)
