"""Calls in scripted code: ``torch.*`` / ``F.*`` / Tensor methods mapped to TorchScript
builtins in PyTorch's spelling, Python builtins (``len``, ``int``, ``min``...), list/dict/str
methods, ``jit`` helpers, submodule and method calls, and other script functions.

Every builtin name written here is one ember's interpreter resolves through the shared
table in :mod:`ember.jit._builtins` (TorchScript name -> ember callable).
"""
import ast
import builtins
import inspect
import math

from ember.jit import _types as T
from ember.jit._frontend_expr import Val, static

# TorchScript's ScalarType numbering (what `dtype=6` in printed code means)
DTYPE_CODES = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float16": 5,
               "float32": 6, "float64": 7, "complex64": 9, "complex128": 10, "bool": 11,
               "bfloat16": 15}
_CASTS = {"float": 6, "double": 7, "half": 5, "long": 4, "int": 3, "short": 2,
          "bool": 11, "byte": 0, "char": 1, "bfloat16": 15}

TENSOR_PROPS = {
    "shape": ("torch.size({})", T.list_of(T.INT)), "ndim": ("torch.dim({})", T.INT),
    "dtype": ("ops.prim.dtype({})", T.INT), "device": ("ops.prim.device({})", T.DEVICE),
    "T": ("torch.numpy_T({})", T.TENSOR), "mT": ("torch.mT({})", T.TENSOR),
    "requires_grad": ("ops.prim.requires_grad({})", T.BOOL),
    "is_cuda": ("ops.prim.is_cuda({})", T.BOOL), "data": ("ops.prim.data({})", T.TENSOR),
}

_INT_RESULT = {"dim", "numel", "ndimension", "nelement", "element_size", "get_device",
               "len"}
_BOOL_RESULT = {"is_contiguous", "is_floating_point", "equal", "allclose", "is_complex",
                "is_nonzero", "is_same_size", "is_grad_enabled"}
_PAIR_RESULT = {"sort", "topk", "kthvalue", "cummax", "cummin", "aminmax", "std_mean",
                "var_mean", "frexp", "slogdet"}
_PAIR_WITH_DIM = {"max", "min", "median", "mode", "nanmedian"}
_LIST_RESULT = {"split", "chunk", "unbind", "tensor_split", "split_with_sizes", "meshgrid",
                "broadcast_tensors", "unsafe_chunk", "unsafe_split", "hsplit", "vsplit"}
# methods whose sizes may be given as varargs: x.view(2, 3) is torch.view(x, [2, 3])
_VARARG_SIZE = {"view", "reshape", "permute", "repeat", "expand", "tile", "new_zeros",
                "new_ones", "new_empty", "flip"}
_SIZE_FACTORIES = {"zeros", "ones", "empty", "rand", "randn"}

# math.* as TorchScript spells it: the scalar overloads of aten ops (aten::sqrt.float)
_MATH_FLOAT = {"sqrt", "exp", "log", "log10", "sin", "cos", "tan", "tanh", "atan",
               "asin", "acos", "erf", "fabs", "log1p", "expm1", "pow", "atan2", "gamma",
               "lgamma", "copysign", "degrees", "radians", "fmod"}
_MATH_INT = {"floor", "ceil", "factorial", "gcd"}
_MATH_BOOL = {"isnan", "isinf", "isfinite"}


def _ns_of(obj):
    """'torch', 'F', 'linalg', 'math', 'jit' for the namespaces scripted code calls into."""
    import ember
    import ember.nn.functional as F
    table = [(ember, "torch"), (F, "F"), (math, "math")]
    for mod_name, key in (("linalg", "linalg"), ("jit", "jit"), ("special", "special"),
                          ("fft", "fft")):
        sub = getattr(ember, mod_name, None)
        if sub is not None:
            table.append((sub, key))
    for mod, key in table:
        if obj is mod:
            return key
    return None


def _find_name(fn):
    """(namespace, name) of an ember function reached through an alias or import."""
    import ember
    import ember.nn.functional as F
    name = getattr(fn, "__name__", None)
    if name is None:
        return None
    for mod, key in ((F, "F"), (ember, "torch")):
        if getattr(mod, name, None) is fn:
            return key, name
    jit = getattr(ember, "jit", None)
    if jit is not None and getattr(jit, name, None) is fn:
        return "jit", name
    if getattr(math, name, None) is fn:
        return "math", name
    return None


def _args(fc, node):
    for a in node.args:
        if isinstance(a, ast.Starred):
            fc.unsupported(a, "starred arguments (*args) in calls")
    for k in node.keywords:
        if k.arg is None:
            fc.unsupported(k, "**kwargs in calls")
    return ([fc.rvalue(a) for a in node.args],
            {k.arg: fc.rvalue(k.value) for k in node.keywords})


def _join(codes, kwargs=None):
    parts = list(codes) + [f"{k}={v.code}" for k, v in (kwargs or {}).items()]
    return ", ".join(parts)


def compile_call(fc, node):
    func = node.func
    if isinstance(func, ast.Attribute):
        base = fc.expr(func.value)
        if not base.is_static:
            return value_method(fc, node, base, func.attr)
        if fc.owner is not None and fc.owner.is_module(base.obj):
            return fc.owner.call_method(fc, node, base, func.attr)
        obj = base.obj
        if not hasattr(obj, func.attr):
            fc.error(func, f"'{getattr(obj, '__name__', type(obj).__name__)}' has no "
                     f"attribute '{func.attr}'")
        ns = _ns_of(obj)
        target = getattr(obj, func.attr)
        key = (ns, func.attr) if ns else _find_name(target)
        return call_static(fc, node, target, key)
    v = fc.expr(func)
    if not v.is_static:
        fc.error(node, f"a value of type {v.ty} is not callable")
    if fc.owner is not None and fc.owner.is_module(v.obj):
        return fc.owner.call_method(fc, node, v, "forward")
    return call_static(fc, node, v.obj, _find_name(v.obj))


def call_static(fc, node, obj, key):
    if obj is getattr(builtins, getattr(obj, "__name__", ""), None) and key is None:
        return python_builtin(fc, node, obj.__name__)
    if key is not None:
        ns, name = key
        if ns == "jit":
            return jit_helper(fc, node, name)
        if ns == "math":
            return math_call(fc, node, name)
        if ns == "F":
            from ember.jit._script_functional import functional_call
            return functional_call(fc, node, name, obj)
        if ns in ("torch", "linalg", "special", "fft"):
            return torch_call(fc, node, name, ns)
    from ember.jit._module import ScriptFunction
    if isinstance(obj, ScriptFunction):
        return fc.owner_ctx().call_script_function(fc, node, obj)
    if inspect.isclass(obj):
        import ember
        if issubclass(obj, ember.nn.Module):
            fc.unsupported(node, f"creating modules ({obj.__name__}) inside scripted code")
        fc.error(node, f"Python class '{obj.__name__}' is not supported in scripted code "
                 "(only nn.Module subclasses can be scripted)", _nse())
    if inspect.isfunction(obj):
        return fc.owner_ctx().call_function(fc, node, obj)
    fc.error(node, f"calling the Python object {obj!r} is not supported in scripted code "
             "(only torch functions, script functions, modules and methods)", _nse())


def _nse():
    from ember.jit._frontend import NotSupportedError
    return NotSupportedError


def python_builtin(fc, node, name):
    if name in ("isinstance",):
        return isinstance_check(fc, node)
    if name == "getattr":
        if len(node.args) == 2:
            base = fc.expr(node.args[0])
            attr = fc.static_value(node.args[1])
            if isinstance(attr, str):
                fake = ast.copy_location(ast.Attribute(value=node.args[0], attr=attr,
                                                       ctx=ast.Load()), node)
                if base.is_static and fc.owner and fc.owner.is_module(base.obj):
                    return fc.owner.module_attr(fc, fake, base, attr)
                return fc.expr(fake)
        fc.unsupported(node, "getattr with a non-constant name")
    if name == "hasattr":
        base = fc.expr(node.args[0])
        attr = fc.static_value(node.args[1])
        ok = base.is_static and hasattr(base.obj, attr)
        return Val(repr(ok), T.BOOL, const=ok)
    if (name == "list" and len(node.args) == 1 and isinstance(node.args[0], ast.Call)
            and isinstance(node.args[0].func, ast.Name) and node.args[0].func.id == "range"):
        # list(range(...)) is the comprehension [i for i in range(...)]
        var = f"_range_item{fc.fresh()}"
        comp = ast.ListComp(elt=ast.Name(id=var, ctx=ast.Load()), generators=[
            ast.comprehension(target=ast.Name(id=var, ctx=ast.Store()), iter=node.args[0],
                              ifs=[], is_async=0)])
        return fc.expr_ListComp(ast.copy_location(comp, node))
    if name in ("range", "enumerate", "zip", "reversed"):
        fc.unsupported(node, f"{name}() outside a for loop header")
    if name == "len":
        arg = fc.expr(node.args[0])
        if arg.is_static:
            if fc.owner is not None and fc.owner.is_module(arg.obj):
                return Val(str(len(arg.obj)), T.INT)
            return Val(str(len(arg.obj)), T.INT)
        if arg.ty.kind == "Tuple":
            return Val(str(len(arg.ty.args)), T.INT)
        return Val(f"torch.len({arg.code})", T.INT)
    args, kwargs = _args(fc, node)
    if kwargs:
        fc.unsupported(node, f"keyword arguments to {name}()")
    if name == "sorted" and len(args) == 1 and args[0].ty.kind == "List":
        return Val(f"torch.sorted({args[0].code})", args[0].ty)
    if name in ("int", "float", "bool", "str"):
        if not args:
            return Val({"int": "0", "float": "0.", "bool": "False", "str": '""'}[name],
                       getattr(T, name.upper()))
        a = args[0]
        ty = {"int": T.INT, "float": T.FLOAT, "bool": T.BOOL, "str": T.STR}[name]
        if a.ty == ty:
            return a
        return Val(f"{name}({a.code})", ty)
    if name in ("min", "max"):
        if len(args) == 1:
            return Val(f"ops.prim.{name}({args[0].code})", args[0].ty.elem)
        if any(a.ty.is_tensor for a in args):
            fc.error(node, f"use torch.{name}imum for tensors, not {name}()")
        ty = T.FLOAT if any(a.ty == T.FLOAT for a in args) else T.INT
        code = args[0].code
        for a in args[1:]:
            code = f"ops.prim.{name}({code}, {a.code})"
        return Val(code, ty)
    if name == "abs":
        a = args[0]
        return Val(f"torch.abs({a.code})" if a.ty.is_tensor else f"ops.prim.abs({a.code})",
                   a.ty)
    if name == "round":
        return Val(f"torch.round({args[0].code})", T.FLOAT)
    if name == "print":
        return Val(f"print({_join(a.code for a in args)})", T.NONE)
    if name == "list":
        if args and args[0].ty.kind == "List":
            return Val(f"torch.list({args[0].code})", args[0].ty)
    if name == "divmod":
        a, b = args
        return Val(f"ops.prim.divmod({a.code}, {b.code})", T.tuple_of([a.ty, a.ty]))
    fc.error(node, f"the Python builtin {name}() is not supported in scripted code",
             _nse())


def isinstance_check(fc, node):
    v = fc.expr(node.args[0])
    cls = fc.static_value(node.args[1])
    classes = cls if isinstance(cls, tuple) else (cls,)
    if v.is_static:
        ok = isinstance(v.obj, classes)
        return Val(repr(ok), T.BOOL, const=ok)
    import ember
    want = {int: T.INT, float: T.FLOAT, bool: T.BOOL, str: T.STR, ember.Tensor: T.TENSOR}
    ok = False
    for c in classes:
        if c in want and want[c] == v.ty:
            ok = True
        if c is list and v.ty.kind == "List" or c is tuple and v.ty.kind == "Tuple" or \
                c is dict and v.ty.kind == "Dict":
            ok = True
    return Val(repr(ok), T.BOOL, const=ok)


def jit_helper(fc, node, name):
    if name == "is_scripting":
        return Val("True", T.BOOL, const=True)
    if name == "is_tracing":
        return Val("False", T.BOOL, const=False)
    if name == "annotate":
        ty = fc.ann_type(node.args[1 - 1])
        v = fc.rvalue(node.args[1], hint=ty)
        return Val(f"annotate({ty}, {v.code})", ty)
    if name == "isinstance":
        return isinstance_check(fc, node)
    fc.error(node, f"jit.{name} cannot be called inside scripted code", _nse())


def math_call(fc, node, name):
    args, _ = _args(fc, node)
    if name in ("pi", "e", "inf", "nan", "tau"):
        return Val(T.literal(getattr(math, name)), T.FLOAT)
    codes = ", ".join(a.code for a in args)
    for a in args:
        if not a.ty.is_scalar:
            fc.error(node, f"math.{name} takes numbers, not {a.ty}")
    if name in _MATH_FLOAT:
        return Val(f"torch.{name}({codes})", T.FLOAT)
    if name in _MATH_INT:
        return Val(f"torch.{name}({codes})", T.INT)
    if name in _MATH_BOOL:
        return Val(f"torch.{name}({codes})", T.BOOL)
    fc.error(node, f"math.{name} is not supported in scripted code", _nse())


def result_type(name, args, kwargs):
    if name in _INT_RESULT:
        return T.INT
    if name in _BOOL_RESULT:
        return T.BOOL
    if name == "item":
        return T.NUMBER
    if name in ("size", "stride"):
        return T.INT if len(args) > 1 or "dim" in kwargs else T.list_of(T.INT)
    if name in _PAIR_RESULT:
        return T.tuple_of([T.TENSOR, T.TENSOR])
    if name in _PAIR_WITH_DIM:
        rest = args[1:]
        if (rest and rest[0].ty == T.INT) or "dim" in kwargs:
            return T.tuple_of([T.TENSOR, T.TENSOR])
        return T.TENSOR
    if name in _LIST_RESULT:
        return T.list_of(T.TENSOR)
    if name == "tolist":
        return None
    return T.TENSOR


def torch_call(fc, node, name, ns):
    import ember
    if name in ("tensor", "as_tensor") and node.args:
        args, kwargs = _args(fc, node)
        return Val(f"torch.{name}({_join([a.code for a in args], kwargs)})", T.TENSOR)
    args, kwargs = _args(fc, node)
    if name in _SIZE_FACTORIES and args and all(a.ty == T.INT for a in args):
        args = [Val("[" + ", ".join(a.code for a in args) + "]", T.list_of(T.INT))]
    if name in ("is_grad_enabled",):
        return Val("torch.is_grad_enabled()", T.BOOL)
    if ns == "torch" and not callable(getattr(ember, name, None)):
        fc.error(node, f"torch.{name} is not a function")
    prefix = "torch." if ns == "torch" else f"torch.{ns}_"
    ty = result_type(name, args, kwargs)
    return Val(f"{prefix}{name}({_join([a.code for a in args], kwargs)})", ty)


def value_method(fc, node, base, name):
    ty = base.ty
    if ty.is_tensor:
        return tensor_method(fc, node, base, name)
    args, kwargs = _args(fc, node)
    codes = [base.code] + [a.code for a in args]
    if ty.kind == "List":
        elem = ty.elem
        if name == "append":
            if not T.subtype(args[0].ty, elem):
                fc.error(node, f"cannot append a value of type {args[0].ty} to a {ty}")
            return Val(f"torch.append({_join(codes)})", ty)
        simple = {"pop": elem, "insert": T.NONE, "extend": T.NONE, "index": T.INT,
                  "clear": T.NONE, "reverse": T.NONE, "remove": T.NONE, "count": T.INT,
                  "copy": ty}
        if name in simple:
            return Val(f"torch.{name}({_join(codes)})", simple[name])
    elif ty.kind == "Dict":
        k, v = ty.args
        table = {"keys": T.list_of(k), "values": T.list_of(v),
                 "items": T.list_of(T.tuple_of([k, v])), "pop": v, "clear": T.NONE,
                 "update": T.NONE, "copy": ty, "setdefault": v}
        if name == "get":
            return Val(f"torch.get({_join(codes)})", v if len(args) > 1 else T.optional(v))
        if name in table:
            return Val(f"torch.{name}({_join(codes)})", table[name])
    elif ty.kind == "str":
        if name == "format":
            return Val(f"torch.format({_join(codes)})", T.STR)
        strs = {"split": T.list_of(T.STR), "join": T.STR, "lower": T.STR, "upper": T.STR,
                "strip": T.STR, "startswith": T.BOOL, "endswith": T.BOOL, "replace": T.STR,
                "find": T.INT, "isdigit": T.BOOL}
        if name in strs:
            return Val(f"torch.{name}({_join(codes)})", strs[name])
    fc.error(node, f"'{ty}' object has no method '{name}' in scripted code")


def tensor_method(fc, node, base, name):
    import ember
    args, kwargs = _args(fc, node)
    if name in _CASTS and not args and not kwargs:
        return Val(f"torch.to({base.code}, {_CASTS[name]})", T.TENSOR)
    if name == "to":
        codes = [base.code] + [a.code for a in args]
        return Val(f"torch.to({_join(codes, kwargs)})", T.TENSOR)
    if name in ("tolist", "numpy", "__array__", "data_ptr", "backward", "register_hook"):
        fc.error(node, f"Tensor.{name}() is not supported in scripted code", _nse())
    if name in _VARARG_SIZE and args and all(a.ty == T.INT for a in args):
        args = [Val("[" + ", ".join(a.code for a in args) + "]", T.list_of(T.INT))]
    if not hasattr(ember.Tensor, name):
        fc.error(node, f"'Tensor' object has no attribute or method '{name}'")
    ty = result_type(name, [base] + args, kwargs)
    if name == "size" and not args and not kwargs:
        return Val(f"torch.size({base.code})", ty)
    codes = [base.code] + [a.code for a in args]
    return Val(f"torch.{name}({_join(codes, kwargs)})", ty)


def bind_call(fc, node, params, args, kwargs, what):
    """Order ``args``/``kwargs`` by a compiled callee's ``params``
    ([(name, type, default code)]); missing ones take their defaults."""
    out = []
    if len(args) > len(params):
        fc.error(node, f"{what} takes {len(params)} arguments but {len(args)} were given")
    given = {}
    for (pname, _, _), a in zip(params, args):
        given[pname] = a
    for k, v in kwargs.items():
        if k not in [p[0] for p in params]:
            fc.error(node, f"{what} has no argument named '{k}'")
        if k in given:
            fc.error(node, f"{what} got multiple values for argument '{k}'")
        given[k] = v
    last = max([i for i, p in enumerate(params) if p[0] in given], default=-1)
    for i, (pname, pty, dcode) in enumerate(params):
        if pname in given:
            a = given[pname]
            if (pty.kind == "List" and a.ty.kind == "Tuple"
                    and all(T.subtype(e, pty.elem) for e in a.ty.args)):
                # a tuple passed for a List parameter becomes a list of its items
                items = ", ".join(f"({a.code})[{j}]" for j in range(len(a.ty.args)))
                a = Val(f"annotate({pty}, [{items}])", pty)
            if not T.subtype(a.ty, pty):
                fc.error(node, f"{what}: argument '{pname}' expects a value of type {pty} "
                         f"but got {a.ty}")
            out.append(a.code)
        elif dcode is not None:
            if i < last:
                out.append(dcode)
        else:
            fc.error(node, f"{what} is missing a value for argument '{pname}'")
    return out


__all__ = ["compile_call", "static", "DTYPE_CODES", "TENSOR_PROPS", "bind_call"]
