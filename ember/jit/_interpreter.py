"""ember's TorchScript interpreter: parse, validate against an allowlist, compile to closures.

TorchScript source (what PyTorch writes under ``code/`` in an archive, and what
ember's trace and script produce) is a small, statically typed subset of Python.
This module never hands that text to ``exec``/``eval``/``compile``: it parses it
with :mod:`ast`, checks every node against what TorchScript can contain, and turns
the checked tree into nested Python closures, so a call runs no parser and no
tree walk. Names resolve only to ember builtins (``_builtins.TABLE``), the archive's
own classes and functions (``__torch__.*``), ``CONSTANTS.cN`` and a handful of
Python builtins; attributes resolve only through :func:`get_attr`, which knows
script modules, tensors and named tuples and nothing else. A hostile file can
therefore name ``os`` or ``__subclasses__`` but cannot reach them: loading fails
with :class:`ScriptSafetyError` before anything runs.
"""
import ast
import operator
import textwrap

from ember.jit import _limits
from ember.jit._builtins import raise_exception
from ember.jit._errors import ScriptError, ScriptSafetyError
from ember.jit._expressions import (
    _BINOPS,
    PY_BUILTIN_NAMES,
    RESERVED,
    check_attr_name,
    check_type,
    compile_expr,
    where,
)

__all__ = ["CompilationUnit", "ScriptSafetyError", "ScriptError", "compile_function"]

_BREAK, _CONTINUE = object(), object()


def set_attr(obj, name, value, at=""):
    setter = getattr(type(obj), "_jit_setattr", None)
    if setter is None:
        raise ScriptError(f"{at}: only module attributes can be assigned in TorchScript")
    setter(obj, name, value)


class _Return:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


# ----- the compiler ---------------------------------------------------------------------
class _FnCtx:
    """What the compiler knows while compiling one function: file, unit, local names."""

    def __init__(self, cu, filename, locals_, lines=None):
        self.cu, self.filename, self.locals = cu, filename, locals_
        self.lines = lines or ()


def _assigned_names(fdef):
    names = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names




class CompilationUnit:
    """The classes, functions and constants of one archive (or one scripted/traced model).

    ``define(source, qualified_prefix, filename)`` parses one code file;
    classes become :class:`ScriptClass` entries keyed by qualified name
    (``__torch__.torch.nn.modules.linear.Linear``), top-level defs become callables.
    """

    def __init__(self, constants=()):
        self.classes = {}
        self.functions = {}
        self.function_sources = {}
        self.constants = list(constants)
        self.missing = []  # (builtin name, where) of operators ember lacks
        self.method_calls = []  # (method name, where) of every `value.name(...)`

    def define(self, source, prefix, filename="<torchscript>"):
        try:
            self._define(source, prefix, filename)
        except RecursionError:
            # Python's own stack bounds the depth; refuse instead of a bare RecursionError
            raise ScriptError(f"{filename}: TorchScript code is nested too deeply (an "
                              "expression or block deeper than Python's recursion limit); "
                              "ember refuses to compile it") from None

    def _define(self, source, prefix, filename):
        try:
            tree = ast.parse(source, filename=filename)
        except SyntaxError as e:
            raise ScriptError(f"{filename}, line {e.lineno}: TorchScript code cannot be "
                              f"parsed ({e.msg})") from None
        lines = source.splitlines()
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self._define_class(node, prefix, filename, lines)
            elif isinstance(node, ast.FunctionDef):
                qual = f"{prefix}.{node.name}"
                self.functions[qual] = compile_function(self, node, filename, lines=lines)
                self.function_sources[qual] = _segment(lines, node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names]
                if all(n.startswith("__torch__") or n in ("typing", "torch") for n in names) \
                        and (not isinstance(node, ast.ImportFrom) or
                             (node.module or "").split(".")[0] in ("typing", "__torch__")):
                    continue  # type-only imports PyTorch may write
                raise ScriptSafetyError(f"{where(_FnCtx(self, filename, ()), node)}: "
                                        f"TorchScript code imports {names}; refused")
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue
            else:
                raise ScriptSafetyError(f"{filename}, line {node.lineno}: a top-level "
                                        f"{type(node).__name__} statement is not TorchScript")

    def _define_class(self, node, prefix, filename, lines):
        from ember.jit._module import ScriptClass
        qual = f"{prefix}.{node.name}"
        ctx = _FnCtx(self, filename, ())
        bases = [ast.unparse(b) for b in node.bases]
        kind = "module" if bases == ["Module"] else "namedtuple" if bases == ["NamedTuple"] \
            else "class" if not bases else "interface" if bases == ["Interface"] \
            else "enum" if bases == ["Enum"] else None
        if kind is None:
            raise ScriptSafetyError(f"{where(ctx, node)}: class {node.name} derives from "
                                    f"{bases}; TorchScript classes derive from Module, "
                                    "NamedTuple, Enum or nothing")
        if node.decorator_list:
            raise ScriptSafetyError(f"{where(ctx, node)}: decorators are not TorchScript")
        cls = ScriptClass(qual, kind)
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                cls.methods[item.name] = compile_function(self, item, filename, method_of=cls,
                                                          lines=lines)
                cls.method_sources[item.name] = textwrap.dedent(_segment(lines, item))
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                check_type(item.annotation, ctx)
                cls.declare(item.target.id, item.annotation,
                            _literal(item.value, ctx) if item.value is not None else None,
                            item.value is not None)
            elif isinstance(item, ast.Assign) and len(item.targets) == 1:
                tgt = item.targets[0]
                if isinstance(tgt, ast.Name) and tgt.id in ("__parameters__", "__buffers__"):
                    setattr(cls, tgt.id.strip("_"), list(_literal(item.value, ctx)))
                elif (isinstance(tgt, ast.Subscript) and isinstance(tgt.value, ast.Name)
                      and tgt.value.id == "__annotations__"):
                    key = _literal(tgt.slice, ctx)
                    check_type(item.value, ctx)
                    cls.declare(key, item.value, None, False)
                elif kind == "enum" and isinstance(tgt, ast.Name):
                    cls.declare(tgt.id, None, _literal(item.value, ctx), True)
                else:
                    raise ScriptSafetyError(f"{where(ctx, item)}: {ast.unparse(item)!r} is "
                                            "not a TorchScript class declaration")
            elif isinstance(item, ast.Pass) or (isinstance(item, ast.Expr) and
                                                isinstance(item.value, ast.Constant)):
                continue
            else:
                raise ScriptSafetyError(f"{where(ctx, item)}: {type(item).__name__} in a "
                                        "class body is not TorchScript")
        cls.source = _segment(lines, node)
        self.classes[qual] = cls
        return cls

    def warn_missing(self, what, stacklevel=3):
        """One warning naming every operator the code uses that ember lacks."""
        if self.missing:
            import warnings
            names = sorted({n for n, _ in self.missing})
            first = {n: w for n, w in reversed(self.missing)}
            listed = "; ".join(f"{n} ({first[n]})" for n in names)
            warnings.warn(f"{what} uses TorchScript operators that ember does not support: "
                          f"{listed}. Code that reaches them raises NotImplementedError.",
                          stacklevel=stacklevel)

    def check_methods(self):
        """Refuse ``value.name(...)`` where no TorchScript value has a method ``name``: not
        a Tensor method, not a list, dict or str method, not a method of the unit's own
        classes (torch refuses such a call when it loads the code). For a unit that holds
        every class its code calls (an archive), once all its files are defined."""
        from ember.jit import _builtins
        from ember.jit._expressions import CONTAINER_METHODS
        own = {m for cls in self.classes.values() for m in cls.methods}
        for name, at in self.method_calls:
            if not (name in own or name in CONTAINER_METHODS or
                    _builtins.is_tensor_method(name)):
                raise ScriptSafetyError(f"{at}: no TorchScript value has a method {name!r} "
                                        "(not a Tensor, list, dict or str method, nor a "
                                        "method of this code's classes)")

    def resolve(self, qual, where):
        """A ``__torch__.*`` name: a function, a class, or an error naming it."""
        if qual in self.functions:
            return self.functions[qual]
        if qual in self.classes:
            return self.classes[qual].constructor()
        raise ScriptError(f"{where}: {qual} is not defined in this archive")


def _segment(lines, node):
    return "\n".join(lines[node.lineno - 1:node.end_lineno])


def _literal(node, ctx):
    """A constant expression in a class body (lists, tuples, numbers, strings)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise ScriptSafetyError(f"{where(ctx, node)}: {ast.unparse(node)!r} is not a "
                                "constant") from None


def compile_function(cu, fdef, filename, method_of=None, lines=None):
    """Compile one validated ``def`` into a Python callable (closures, no exec)."""
    ctx = _FnCtx(cu, filename, _assigned_names(fdef), lines)
    ctx.fname = fdef.name
    a = fdef.args
    if a.vararg or a.kwarg or a.posonlyargs or fdef.decorator_list:
        raise ScriptSafetyError(f"{where(ctx, fdef)}: *args, **kwargs and decorators are "
                                "not TorchScript")
    for arg in a.args + a.kwonlyargs:
        if method_of is None or arg is not a.args[0]:
            check_type(arg.annotation, ctx)
    check_type(fdef.returns, ctx)
    params = [x.arg for x in a.args]
    kwonly = [x.arg for x in a.kwonlyargs]
    defaults = {}  # literals only: nothing in the file is evaluated while loading
    for arg, d in zip(a.args[len(a.args) - len(a.defaults):], a.defaults):
        defaults[arg.arg] = _limits.literal_default(arg.arg, d, ctx, where(ctx, d))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        if d is not None:
            defaults[arg.arg] = _limits.literal_default(arg.arg, d, ctx, where(ctx, d))
    body = _block(fdef.body, ctx)
    name = fdef.name
    nparams = len(params)
    allnames = params + kwonly

    def bind(args, kwargs):
        """The frame for a call with keywords or defaults (checked as Python does)."""
        if len(args) > nparams:
            raise TypeError(f"{name}() takes {nparams} positional arguments but "
                            f"{len(args)} were given")
        env = dict(zip(params, args))
        for k, v in kwargs.items():
            if k not in allnames or k in env:
                raise TypeError(f"{name}() got an unexpected or repeated argument {k!r}")
            env[k] = v
        for k in allnames:
            if k not in env:
                if k not in defaults:
                    raise TypeError(f"{name}() missing required argument {k!r}")
                env[k] = defaults[k]
        return env

    # the common calls (all arguments positional) build the frame without a loop
    if nparams == 1:
        p0, = params

        def call(*args, **kwargs):
            env = {p0: args[0]} if len(args) == 1 and not kwargs else bind(args, kwargs)
            r = body(env)
            return r.value if r is not None else None
    elif nparams == 2:
        p0, p1 = params

        def call(*args, **kwargs):
            env = {p0: args[0], p1: args[1]} if len(args) == 2 and not kwargs else \
                bind(args, kwargs)
            r = body(env)
            return r.value if r is not None else None
    else:
        def call(*args, **kwargs):
            env = dict(zip(params, args)) if len(args) == nparams and not kwargs else \
                bind(args, kwargs)
            r = body(env)
            return r.value if r is not None else None

    call.__name__ = name
    call.__qualname__ = name
    call._jit_where = f"{filename}, in {name}"
    call._jit_params = params
    return call


def _note(e, tag, line):
    """Name the TorchScript file, line and function once per function on the error."""
    if not any(n.endswith(tag) for n in getattr(e, "__notes__", ())):
        e.add_note(f"TorchScript: line {line} of {tag}")


_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Pass, ast.Assert)


def _guard(fn, tag, line):
    """Wrap a statement so that an error raised in it names its TorchScript line."""
    def guarded(env):
        try:
            return fn(env)
        except Exception as e:
            _note(e, tag, line)
            raise
    return guarded


def _block(stmts, ctx):
    """One closure running a statement list; it returns a _Return/_BREAK/_CONTINUE or None.

    Errors are annotated inside each statement (try costs nothing until it raises), so
    the loop here carries no bookkeeping.
    """
    fns = [_stmt(s, ctx) for s in stmts]
    if len(fns) == 1:
        return fns[0]
    if all(isinstance(s, _SIMPLE) for s in stmts):
        def run_simple(env):
            for s in fns:
                s(env)
        return run_simple

    def run(env):
        for s in fns:
            r = s(env)
            if r is not None:
                return r
        return None
    return run


def _assign_target(node, ctx):
    """A closure ``store(env, value)`` for an assignment target."""
    if isinstance(node, ast.Name):
        name = node.id
        if name in PY_BUILTIN_NAMES or name in RESERVED:
            raise ScriptSafetyError(f"{where(ctx, node)}: assigning to {name!r}")

        def store(env, v):
            env[name] = v
        return store
    if isinstance(node, (ast.Tuple, ast.List)):
        stores = [_assign_target(e, ctx) for e in node.elts]
        n = len(stores)

        def store_tuple(env, v):
            if len(v) != n:
                raise ValueError(f"expected {n} values to unpack, got {len(v)}")
            for s, x in zip(stores, v):
                s(env, x)
        return store_tuple
    if isinstance(node, ast.Subscript):
        obj = compile_expr(node.value, ctx)
        key = compile_expr(node.slice, ctx)

        def store_item(env, v):
            obj(env)[key(env)] = v
        return store_item
    if isinstance(node, ast.Attribute):
        check_attr_name(node.attr, node, ctx)
        obj = compile_expr(node.value, ctx)
        attr = node.attr
        at = where(ctx, node)

        def store_attr(env, v):
            set_attr(obj(env), attr, v, at)
        return store_attr
    raise ScriptSafetyError(f"{where(ctx, node)}: cannot assign to {ast.unparse(node)!r}")


def _stmt(node, ctx):
    tag, line = f"{ctx.filename}, in {getattr(ctx, 'fname', '?')}", node.lineno
    fn = _stmt_raw(node, ctx, tag, line)
    if isinstance(node, (ast.If, ast.For, ast.While)) or getattr(fn, "_guarded", False):
        return fn
    return _guard(fn, tag, line)


def _stmt_raw(node, ctx, tag, line):
    if isinstance(node, ast.Assign):
        value = compile_expr(node.value, ctx)
        stores = [_assign_target(t, ctx) for t in node.targets]
        if len(stores) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id

            def assign_name(env):
                try:
                    env[name] = value(env)
                except Exception as e:
                    _note(e, tag, line)
                    raise
            assign_name._guarded = True
            return assign_name
        if len(stores) == 1:
            store = stores[0]

            def assign(env):
                store(env, value(env))
            return assign

        def assign_many(env):
            v = value(env)
            for s in stores:
                s(env, v)
        return assign_many
    if isinstance(node, ast.AnnAssign):
        check_type(node.annotation, ctx)
        if node.value is None:
            return lambda env: None
        value = compile_expr(node.value, ctx)
        store = _assign_target(node.target, ctx)
        return lambda env: store(env, value(env))
    if isinstance(node, ast.AugAssign):
        op = _BINOPS.get(type(node.op))
        if op is None or not isinstance(node.target, ast.Name):
            raise ScriptSafetyError(f"{where(ctx, node)}: unsupported augmented assignment")
        name = node.target.id
        value = compile_expr(node.value, ctx)
        iop = {operator.add: operator.iadd, operator.sub: operator.isub,
               _limits.mul: _limits.imul, operator.truediv: operator.itruediv}.get(op, op)

        def aug(env):
            env[name] = iop(env[name], value(env))
        return aug
    if isinstance(node, ast.Expr):
        value = compile_expr(node.value, ctx)

        def expr_stmt(env):
            try:
                value(env)
            except Exception as e:
                _note(e, tag, line)
                raise
        expr_stmt._guarded = True
        return expr_stmt
    if isinstance(node, ast.Return):
        if node.value is None:
            return lambda env: _Return(None)
        value = compile_expr(node.value, ctx)

        def return_stmt(env):
            try:
                return _Return(value(env))
            except Exception as e:
                _note(e, tag, line)
                raise
        return_stmt._guarded = True
        return return_stmt
    if isinstance(node, ast.If):
        test = _guard(compile_expr(node.test, ctx), tag, line)
        body = _block(node.body, ctx)
        orelse = _block(node.orelse, ctx) if node.orelse else None

        def if_stmt(env):
            if test(env):
                return body(env)
            if orelse is not None:
                return orelse(env)
            return None
        return if_stmt
    if isinstance(node, ast.For):
        if node.orelse:
            raise ScriptSafetyError(f"{where(ctx, node)}: for/else is not TorchScript")
        it = _guard(compile_expr(node.iter, ctx), tag, line)
        store = _assign_target(node.target, ctx)
        body = _block(node.body, ctx)

        def for_stmt(env):
            for v in _iterable(it(env)):
                store(env, v)
                r = body(env)
                if r is not None:
                    if r is _BREAK:
                        break
                    if r is _CONTINUE:
                        continue
                    return r
            return None
        return for_stmt
    if isinstance(node, ast.While):
        if node.orelse:
            raise ScriptSafetyError(f"{where(ctx, node)}: while/else is not TorchScript")
        test = _guard(compile_expr(node.test, ctx), tag, line)
        body = _block(node.body, ctx)

        def while_stmt(env):
            while test(env):
                r = body(env)
                if r is not None:
                    if r is _BREAK:
                        break
                    if r is _CONTINUE:
                        continue
                    return r
            return None
        return while_stmt
    if isinstance(node, ast.Pass):
        return lambda env: None
    if isinstance(node, ast.Break):
        return lambda env: _BREAK
    if isinstance(node, ast.Continue):
        return lambda env: _CONTINUE
    if isinstance(node, ast.Assert):
        test = compile_expr(node.test, ctx)
        msg = compile_expr(node.msg, ctx) if node.msg is not None else (lambda env: "")

        def assert_stmt(env):
            if not test(env):
                raise AssertionError(msg(env))
        return assert_stmt
    if isinstance(node, ast.Raise):
        exc = compile_expr(node.exc, ctx) if node.exc is not None else (lambda env: "")
        return lambda env: raise_exception(exc(env), "builtins.RuntimeError")
    raise ScriptSafetyError(f"{where(ctx, node)}: a {type(node).__name__} statement is not "
                            "TorchScript; ember refuses to run it")


def _iterable(v):
    if isinstance(v, (list, tuple, range, str)):
        return v
    if isinstance(v, dict):
        return list(v)
    from ember._tensor import Tensor
    if isinstance(v, Tensor):
        return list(v.unbind(0))
    raise ScriptError(f"cannot iterate over a TorchScript value of type {type(v).__name__}")
