"""``jit.script``'s frontend: a Python function's ast -> TorchScript source text.

:class:`FunctionCompiler` walks one function's ast (statements here, expressions in
:mod:`ember.jit._frontend_expr`), infers the TorchScript type of every value, and writes
the source in PyTorch's printed spelling (``torch.add(x, y)``, ``bool(t)`` conditions,
``annotate(List[Tensor], [])``, ``ops.prim.RaiseException(...)``), so that real
``torch.jit.load`` and ember's interpreter both read it. Anything it cannot compile
raises :class:`FrontendError` / :class:`NotSupportedError` naming the construct, the file
and the line — there is no fallback to running Python.
"""
import ast
import inspect
import textwrap

from ember.jit import _types as T
from ember.jit._frontend_expr import ExprMixin, Val

__all__ = ["FrontendError", "NotSupportedError", "FunctionCompiler", "parse_function"]


class FrontendError(RuntimeError):
    """Python source that ``jit.script`` cannot compile; names the file and line."""


class NotSupportedError(FrontendError):
    """A Python construct TorchScript does not support (``lambda``, ``with``, ``*args``...)."""


_UNSUPPORTED_STMTS = {
    ast.With: "with statements", ast.AsyncWith: "async with statements",
    ast.Try: "try blocks", ast.Global: "global variables", ast.Nonlocal: "nonlocal variables",
    ast.Delete: "del statements", ast.ClassDef: "class definitions",
    ast.FunctionDef: "nested function definitions",
    ast.AsyncFunctionDef: "async function definitions", ast.Import: "import statements",
    ast.ImportFrom: "import statements", ast.AsyncFor: "async for loops",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED_STMTS[ast.TryStar] = "try blocks"
if hasattr(ast, "Match"):
    _UNSUPPORTED_STMTS[ast.Match] = "match statements"


def parse_function(fn):
    """(ast.FunctionDef, file, first line) of a Python function's source."""
    fn = inspect.unwrap(fn)
    try:
        lines, first = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as e:
        raise FrontendError(
            f"jit.script could not get the source code of {getattr(fn, '__qualname__', fn)!r} "
            f"({e}); scripting needs the function's Python source") from None
    src = textwrap.dedent("".join(lines))
    tree = ast.parse(src)
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise FrontendError(f"expected a def in {file}:{first}")
    if isinstance(node, ast.AsyncFunctionDef):
        raise NotSupportedError(f"async functions are not supported:\n  File \"{file}\", "
                                f"line {first}")
    return node, file, first, src.splitlines()


def _has_continue(stmts):
    """Whether ``continue`` appears in ``stmts`` outside nested loops."""
    todo = list(stmts)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Continue):
            return True
        if isinstance(n, (ast.For, ast.While)):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return False


class Scope:
    """Python name -> (emitted name, type) for the locals of one block."""

    def __init__(self, vars=None):
        self.vars = dict(vars or {})

    def copy(self):
        return Scope(self.vars)


class FunctionCompiler(ExprMixin):
    """Compiles one Python function (or method of ``owner``) to TorchScript source.

    ``owner`` is the ModuleCompiler (for ``self.x`` and method calls) or None for a free
    function; ``resolver`` turns free names into Python values (globals, closure)."""

    def __init__(self, fn, owner=None, name=None, is_method=False):
        self.fn = inspect.unwrap(fn)
        self.owner = owner
        self.node, self.file, self.first, self.src_lines = parse_function(fn)
        self.name = name or self.node.name
        self.is_method = is_method
        self.lines = []
        # the user's (line, column) of each line in self.lines: the statement that
        # wrote it, in the file (dedenting a method's source moved its columns)
        self.line_of = []
        self.cur_line = None
        first_line = self.src_lines[0] if self.src_lines else ""
        try:
            raw = inspect.getsourcelines(self.fn)[0][0]
            self.col0 = len(raw) - len(raw.lstrip()) - (len(first_line) -
                                                        len(first_line.lstrip()))
        except (OSError, TypeError, IndexError):
            self.col0 = 0
        self.depth = 1
        self.tmp = 0
        self.scope = Scope()
        self.ret_types = []
        self.terminated = False
        self.globals = getattr(self.fn, "__globals__", {})
        try:
            cv = inspect.getclosurevars(self.fn)
            self.closure = dict(cv.nonlocals)
        except (TypeError, ValueError):
            self.closure = {}
        self.used_names = {n.id for n in ast.walk(self.node) if isinstance(n, ast.Name)}
        self.params = []
        self.ret_ann = None

    # -- errors -----------------------------------------------------------------------
    def where(self, node):
        line = self.first + getattr(node, "lineno", 1) - 1
        text = ""
        idx = getattr(node, "lineno", 1) - 1
        if 0 <= idx < len(self.src_lines):
            text = "\n    " + self.src_lines[idx].strip()
        return f"  File \"{self.file}\", line {line}, in {self.node.name}{text}"

    def error(self, node, msg, cls=FrontendError):
        raise cls(f"{msg}:\n{self.where(node)}")

    def unsupported(self, node, what):
        raise NotSupportedError(f"{what} aren't supported:\n{self.where(node)}")

    # -- emission ---------------------------------------------------------------------
    def emit(self, text):
        self.lines.append("  " * self.depth + text)
        self.line_of.extend([self.cur_line] * (text.count("\n") + 1))

    def fresh(self):
        while True:
            name = f"_{self.tmp}"
            self.tmp += 1
            if name not in self.used_names:
                return name

    def emit_tmp(self, code):
        name = self.fresh()
        self.emit(f"{name} = {code}")
        return name

    # -- signature --------------------------------------------------------------------
    def compile(self, arg_types=None):
        """Compile the body; ``arg_types`` overrides the parameter types (by name)."""
        a = self.node.args
        if a.vararg is not None or a.kwarg is not None:
            what = "*args" if a.vararg is not None else "**kwargs"
            self.error(self.node, f"{what} in a scripted function's signature aren't "
                       "supported", NotSupportedError)
        if a.kwonlyargs or a.posonlyargs:
            self.error(self.node, "keyword-only and positional-only arguments aren't "
                       "supported", NotSupportedError)
        args = list(a.args)
        if self.is_method:
            if not args:
                self.error(self.node, "a method needs a self argument")
            args = args[1:]
        defaults = [None] * (len(args) - len(a.defaults)) + list(a.defaults)
        for arg, dflt in zip(args, defaults):
            if arg_types and arg.arg in arg_types:
                ty = arg_types[arg.arg]
            elif arg.annotation is not None:
                ty = self.ann_type(arg.annotation)
            elif dflt is not None and isinstance(dflt, ast.Constant) and dflt.value is not None:
                # TorchScript types an unannotated parameter Tensor; a constant default
                # of another type would be a type error there, so it is read from it
                ty = T.type_of_value(dflt.value) or T.TENSOR
            else:
                ty = T.TENSOR
            dcode = None
            if dflt is not None:
                dcode = self.default_code(dflt, ty)
            self.params.append((arg.arg, ty, dcode))
            self.scope.vars[arg.arg] = (arg.arg, ty)
        if self.node.returns is not None:
            self.ret_ann = self.ann_type(self.node.returns)
        body = self.node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        self.block(body)
        if not self.terminated and self.ret_types and self.return_type.kind not in (
                "NoneType", "Optional"):
            self.error(self.node, f"function '{self.node.name}' returns {self.return_type} "
                       "on some paths but does not return along all paths")
        if not self.terminated and self.ret_types and self.return_type.kind == "Optional":
            self.emit("return None")
        if not self.lines:
            self.emit("pass")
        return self

    def compile_signature_only(self):
        """Types of the parameters and the annotated return, without the body (for
        ``@jit.ignore`` / ``@jit.unused`` methods)."""
        body = self.node.body
        self.node.body = [ast.Pass()]
        try:
            self.compile()
        finally:
            self.node.body = body
        return self

    def owner_ctx(self):
        """The compile context shared by the whole ``jit.script`` call."""
        return self.owner.ctx

    def default_code(self, node, ty):
        try:
            value = ast.literal_eval(node)
        except ValueError:
            self.error(node, "a default argument must be a constant")
        if value is None and ty.kind not in ("Optional", "NoneType"):
            self.error(node, f"default None for a parameter of type {ty}; annotate it "
                       f"Optional[{ty}]")
        return T.literal(value)

    def ann_type(self, node):
        try:
            ty = T.type_from_ast(node, self._ann_error)
        except FrontendError:
            # a name TorchScript resolves in the function's globals: a plain class, or
            # an alias of a typing construct (``Recipe = Tuple[List[int], int]``)
            ty = self._resolved_ann(node)
            if ty is None:
                raise
        if ty.kind == "Final":
            ty = ty.elem
        return ty

    def _resolved_ann(self, node):
        try:
            hint = eval(ast.unparse(node), dict(self.globals))  # noqa: S307
        except Exception:
            return None
        return T.type_from_hint(hint)

    def _ann_error(self, node, msg):
        self.error(node, msg)

    @property
    def return_type(self):
        if self.ret_ann is not None:
            return self.ret_ann
        if not self.ret_types:
            return T.NONE
        ty = self.ret_types[0]
        for t in self.ret_types[1:]:
            u = T.unify(ty, t)
            if u is None:
                self.error(self.node, f"previous return statement returned a value of type "
                           f"{ty} but a later one returns {t}")
            ty = u
        return ty

    def signature(self, self_type=None):
        """``def name(self: Q,\\n    x: Tensor) -> Tensor:`` as torch prints it."""
        parts = []
        if self.is_method:
            parts.append(f"self: {self_type}" if self_type else "self")
        for name, ty, dcode in self.params:
            parts.append(f"{name}: {ty}" + (f"={dcode}" if dcode is not None else ""))
        return f"def {self.name}(" + ",\n    ".join(parts) + f") -> {self.return_type}:"

    def source(self, self_type=None, indent=0):
        pad = "  " * indent
        head = self.signature(self_type).replace("\n", "\n" + pad)
        ret = self.return_type
        lines = [ln if "@RET@" not in ln else
                 (ln.replace("uninitialized(@RET@)", "None") if ret == T.NONE
                  else ln.replace("@RET@", str(ret))) for ln in self.lines]
        from ember.jit._script_graph import SourceText
        text = pad + head + "\n" + "\n".join(pad + ln for ln in lines) + "\n"
        return SourceText(text, self.file, [None] * (head.count("\n") + 1) +
                          self.line_of if len(self.line_of) == len(lines) else None)

    # -- statements -------------------------------------------------------------------
    def block(self, stmts):
        for s in stmts:
            if self.terminated:
                break
            self.stmt(s)

    def stmt(self, node):
        for cls, what in _UNSUPPORTED_STMTS.items():
            if isinstance(node, cls):
                self.unsupported(node, what)
        meth = getattr(self, "stmt_" + type(node).__name__, None)
        if meth is None:
            self.unsupported(node, f"{type(node).__name__} statements")
        saved = self.cur_line
        if hasattr(node, "lineno"):   # (a signature-only compile's body has none)
            self.cur_line = (self.first + node.lineno - 1, self.col0 + node.col_offset)
        meth(node)
        self.cur_line = saved

    def stmt_Pass(self, node):
        self.emit("pass")

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant):
            return
        v = self.expr(node.value)
        if not v.is_static and v.code != "None":
            self.emit(v.code)

    def stmt_Return(self, node):
        if node.value is None:
            v = Val("None", T.NONE)
        else:
            v = self.rvalue(node.value)
        if self.ret_ann is not None and not T.subtype(v.ty, self.ret_ann):
            self.error(node, f"return value of type {v.ty} does not match the annotated "
                       f"return type {self.ret_ann}")
        self.ret_types.append(v.ty)
        self.emit(f"return {v.code}")
        self.terminated = True

    def stmt_Raise(self, node):
        exc = node.exc
        if exc is None:
            self.unsupported(node, "bare raise statements")
        name, msg = "Exception", Val('""', T.STR)
        target = exc.func if isinstance(exc, ast.Call) else exc
        obj = self.static_value(target)
        if not (isinstance(obj, type) and issubclass(obj, BaseException)):
            self.error(node, "raise needs an exception class or an exception built from one")
        name = obj.__name__
        if isinstance(exc, ast.Call) and exc.args:
            msg = self.rvalue(exc.args[0])
            if msg.ty != T.STR:
                msg = Val(f"str({msg.code})", T.STR)
        self.emit(f'ops.prim.RaiseException({msg.code}, "builtins.{name}")')
        # TorchScript's loader wants every path to end in a return: an unreachable one
        # typed as the function returns (filled in by source())
        self.emit("return uninitialized(@RET@)")
        self.terminated = True

    def stmt_Assert(self, node):
        cond = self.cond(node.test)
        if cond.const is True:
            return
        if node.msg is not None:
            m = self.rvalue(node.msg)
            msg = (f'"AssertionError: {m.code[1:]}' if m.code.startswith('"')
                   else f'torch.add("AssertionError: ", {m.code})')
        else:
            msg = '"AssertionError: "'
        self.emit(f"if {cond.code}:")
        self.emit("  pass")
        self.emit("else:")
        self.emit(f"  ops.prim.RaiseException({msg})")

    def stmt_Break(self, node):
        self.emit("break")
        self.terminated = True

    def stmt_Continue(self, node):
        self.emit("continue")
        self.terminated = True

    # -- assignment -------------------------------------------------------------------
    def stmt_Assign(self, node):
        if len(node.targets) > 1:
            v = self.rvalue(node.value)
            tmp = self.emit_tmp(v.code)
            v = Val(tmp, v.ty)
            for t in node.targets:
                self.assign(t, v)
            return
        self.assign(node.targets[0], None, node.value)

    def stmt_AnnAssign(self, node):
        ty = self.ann_type(node.annotation)
        if node.value is None:
            self.error(node, "an annotated name needs a value in TorchScript")
        v = self.rvalue(node.value, hint=ty)
        if (ty.kind == "Optional" and isinstance(node.target, ast.Name)
                and v.ty.kind not in ("Optional", "NoneType")
                and node.target.id not in self.scope.vars and T.subtype(v.ty, ty)):
            # a first binding of an Optional name to a T: declared with its type, as
            # TorchScript writes it (torch's annotate() would type the name as T)
            self.emit(f"{node.target.id} : {ty} = {v.code}")
            self.scope.vars[node.target.id] = (node.target.id, ty)
            return
        if v.ty != ty or self.empty_literal(node.value):
            if not T.subtype(v.ty, ty) and not self.empty_literal(node.value):
                self.error(node, f"variable annotated {ty} is assigned a value of type {v.ty}")
            v = Val(f"annotate({ty}, {v.code})", ty)
        self.assign(node.target, v)

    @staticmethod
    def empty_literal(node):
        return isinstance(node, (ast.List, ast.Dict)) and not (
            getattr(node, "elts", None) or getattr(node, "keys", None))

    def assign(self, target, v, value_node=None):
        if isinstance(target, ast.Name):
            if v is None and isinstance(value_node, (ast.Name, ast.Attribute)):
                # ``backend = SomeClass``: an alias of a class, resolved at compile time
                first = self.expr(value_node)
                if first.is_static and inspect.isclass(first.obj):
                    v = first
            if v is None:
                v = self.rvalue(value_node)
            self.bind(target, target.id, v)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if v is None:
                v = self.rvalue(value_node)
            self.unpack(target, v)
        elif isinstance(target, ast.Subscript):
            if v is None:
                v = self.rvalue(value_node)
            self.assign_subscript(target, v)
        elif isinstance(target, ast.Attribute):
            if v is None:
                v = self.rvalue(value_node)
            self.assign_attr(target, v)
        elif isinstance(target, ast.Starred):
            self.unsupported(target, "starred assignments")
        else:
            self.unsupported(target, f"assignments to {type(target).__name__}")

    def bind(self, node, name, v):
        if v.is_static:
            # a compile-time value (a module, a namespace): remembered, not emitted
            self.scope.vars[name] = (None, v)
            return
        old = self.scope.vars.get(name)
        emitted = name
        if old is not None and old[0] is not None:
            declared = old[1]
            base = old[2] if len(old) > 2 else None
            if base is not None:
                emitted, declared = base
            if not T.subtype(v.ty, declared):
                self.error(node, f"variable '{name}' previously had type {declared} but is "
                           f"now being assigned a value of type {v.ty}")
            self.emit(f"{emitted} = {v.code}")
            if declared.kind == "Optional" and v.ty.kind not in ("Optional", "NoneType"):
                # the variable now holds a T: later uses see it refined, as in TorchScript
                new = self.fresh()
                self.emit(f"{new} = unchecked_cast({declared.elem}, {emitted})")
                self.scope.vars[name] = (new, declared.elem, (emitted, declared))
                return
            self.scope.vars[name] = (emitted, declared)
            return
        self.emit(f"{emitted} = {v.code}")
        self.scope.vars[name] = (emitted, v.ty)

    def unpack(self, target, v):
        n = len(target.elts)
        if v.ty is not None and v.ty.kind == "Tuple":
            if len(v.ty.args) != n:
                self.error(target, f"cannot unpack a tuple of {len(v.ty.args)} values into "
                           f"{n} names")
            types = list(v.ty.args)
        elif v.ty is not None and v.ty.kind == "List":
            types = [v.ty.elem] * n
        else:
            self.error(target, f"cannot unpack a value of type {v.ty}")
        names = []
        for elt, ty in zip(target.elts, types):
            if not isinstance(elt, ast.Name):
                self.unsupported(elt, "nested unpacking targets")
            old = self.scope.vars.get(elt.id)
            if old is not None and old[0] is not None and not T.subtype(ty, old[1]):
                self.error(elt, f"variable '{elt.id}' previously had type {old[1]} but is now "
                           f"being assigned a value of type {ty}")
            names.append(elt.id)
        self.emit(", ".join(names) + f" = {v.code}")
        for name, ty in zip(names, types):
            old = self.scope.vars.get(name)
            self.scope.vars[name] = (name, old[1] if old and old[0] else ty)

    def assign_attr(self, target, v):
        if not (self.is_method and isinstance(target.value, ast.Name)
                and target.value.id == "self"):
            self.unsupported(target, "assignments to attributes other than self.<name>")
        ty = self.owner.attr_type_for_store(self, target, target.attr, v)
        if not T.subtype(v.ty, ty):
            self.error(target, f"attribute '{target.attr}' has type {ty}, cannot assign {v.ty}")
        self.emit(f"self.{target.attr} = {v.code}")

    def stmt_AugAssign(self, node):
        t = node.target
        if isinstance(t, (ast.Attribute, ast.Subscript)):
            cur = self.rvalue(t)
            rhs = self.rvalue(node.value)
            if cur.ty.is_tensor:
                # in place, as Python's += on a tensor (the attribute/item is the same tensor)
                op = self.BINOPS[type(node.op)]
                op = "floor_divide" if isinstance(node.op, ast.FloorDiv) else op
                self.emit(f"torch.{op}_({cur.code}, {rhs.code})")
                return
            self.assign(t, self.binop(node, node.op, cur, rhs))
            return
        if not isinstance(t, ast.Name):
            self.unsupported(node, f"augmented assignments to {type(t).__name__}")
        cur = self.expr(t)
        rhs = self.rvalue(node.value)
        if cur.ty.is_tensor:
            op = self.BINOPS[type(node.op)]
            if isinstance(node.op, ast.FloorDiv):
                op = "floor_divide"
            self.emit(f"torch.{op}_({cur.code}, {rhs.code})")
            return
        res = self.binop(node, node.op, cur, rhs)
        self.bind(node, t.id, res)

    def assign_subscript(self, target, v):
        base = self.rvalue(target.value)
        if base.ty.kind in ("List", "Dict"):
            idx = self.rvalue(target.slice)
            self.emit(f"torch._set_item({base.code}, {idx.code}, {v.code})")
            return
        if base.ty.is_tensor:
            view = self.index_tensor(target, base, target.slice)
            if v.ty.is_tensor:
                self.emit(f"torch.copy_({view.code}, {v.code})")
            else:
                self.emit(f"torch.fill_({view.code}, {v.code})")
            return
        self.error(target, f"cannot assign to an item of a value of type {base.ty}")

    # -- control flow -----------------------------------------------------------------
    def sub_block(self, stmts, scope):
        """Compile ``stmts`` one level deeper in ``scope``; (scope, terminated)."""
        saved_scope, saved_term = self.scope, self.terminated
        self.scope, self.terminated = scope, False
        self.depth += 1
        start = len(self.lines)
        self.block(stmts)
        if len(self.lines) == start:
            self.emit("pass")
        self.depth -= 1
        out = (self.scope, self.terminated)
        self.scope, self.terminated = saved_scope, saved_term
        return out

    def stmt_If(self, node):
        cond = self.cond(node.test)
        if cond.const is not None:
            # decided at compile time (is_scripting, isinstance, `x is None` on a
            # non-optional): only the branch taken is compiled, as TorchScript does
            self.block(node.body if cond.const else node.orelse)
            return
        then_scope = self.scope.copy()
        else_scope = self.scope.copy()
        for name, (emitted, ty) in cond.refine.items():
            then_scope.vars[name] = (emitted, ty, self.scope.vars[name][:2])
        for name, (emitted, ty) in cond.refine_else.items():
            else_scope.vars[name] = (emitted, ty, self.scope.vars[name][:2])
        self.emit(f"if {cond.code}:")
        refine_lines = cond.refine_lines
        for name in cond.refine:
            self.lines.append("  " * (self.depth + 1) + refine_lines[name])
        s1, t1 = self.sub_block(node.body, then_scope)
        self.emit("else:")
        for name in cond.refine_else:
            self.lines.append("  " * (self.depth + 1) + cond.refine_lines[name])
        s2, t2 = self.sub_block(node.orelse, else_scope)
        self.merge(node, s1, t1, s2, t2)
        if t1 != t2:
            # `if x is None: return ...` refines x for the rest of the block
            live = cond.refine_else if t1 else cond.refine
            for name, (_, ty) in live.items():
                entry = self.scope.vars.get(name)
                if entry is None or entry[0] is None or entry[1].kind != "Optional":
                    continue
                new = self.fresh()
                self.emit(f"{new} = unchecked_cast({ty}, {entry[0]})")
                self.scope.vars[name] = (new, ty, entry[:2])

    def merge(self, node, s1, t1, s2, t2):
        if t1 and t2:
            self.terminated = True
            return
        if t1 or t2:
            live = s2 if t1 else s1
            for name, entry in live.vars.items():
                self.scope.vars[name] = entry[:2] if len(entry) > 2 and (
                    name not in self.scope.vars) else self._unrefined(entry)
            return
        merged = {}
        for name in set(s1.vars) & set(s2.vars):
            a, b = self._unrefined(s1.vars[name]), self._unrefined(s2.vars[name])
            if a[0] is None or b[0] is None:
                if a[0] is None and b[0] is None and a[1].obj is b[1].obj:
                    merged[name] = a
                continue
            if a[0] != b[0]:
                continue
            u = T.unify(a[1], b[1])
            if u is None:
                continue
            merged[name] = (a[0], u)
        for name, entry in self.scope.vars.items():
            if name not in merged:
                merged[name] = self._unrefined(entry)
        self.scope.vars = merged
        # refined on both sides (`if d is None: d = {...}`): still refined after the if
        for name in set(s1.vars) & set(s2.vars):
            a, b = s1.vars[name], s2.vars[name]
            if len(a) > 2 and len(b) > 2 and a[2] == b[2] and a[1] == b[1] and \
                    merged.get(name) == a[2]:
                new = self.fresh()
                self.emit(f"{new} = unchecked_cast({a[1]}, {a[2][0]})")
                self.scope.vars[name] = (new, a[1], a[2])

    @staticmethod
    def _unrefined(entry):
        if len(entry) > 2:
            return entry[2]
        return entry

    def stmt_While(self, node):
        if node.orelse:
            self.unsupported(node, "while ... else loops")
        saved = len(self.lines)
        cond = self.cond(node.test)
        if cond.const is False:
            return
        pre = self.lines[saved:]
        if pre and _has_continue(node.body):
            self.unsupported(node, "continue in a while loop whose condition needs "
                             "statements (and/or, comparisons chains)")
        if pre:
            del self.lines[saved:]
            flag = self.fresh()
            self.lines.extend(pre)
            self.emit(f"{flag} = {cond.code}")
            self.emit(f"while {flag}:")
            body_scope, _ = self.loop_body(node.body, recompute=(node.test, flag))
        else:
            self.emit(f"while {cond.code}:")
            self.loop_body(node.body)

    def loop_body(self, stmts, recompute=None, prologue=(), binds=None, body_fn=None):
        """Compile a loop body one level deeper; names first bound inside it are not
        visible after the loop, and loop-carried names keep their type."""
        scope = self.scope.copy()
        for name, entry in (binds or {}).items():
            old = scope.vars.get(name)
            if old is not None and old[0] is not None and old[1] != entry[1]:
                self.error(stmts[0] if stmts else None, f"loop variable '{name}' previously "
                           f"had type {old[1]} but is now {entry[1]}")
            scope.vars[name] = entry
        saved_scope, saved_term = self.scope, self.terminated
        self.scope, self.terminated = scope, False
        self.depth += 1
        start = len(self.lines)
        for ln in prologue:
            self.emit(ln)
        if body_fn is not None:
            body_fn()
        else:
            self.block(stmts)
        if recompute is not None and not self.terminated:
            test, flag = recompute
            c = self.cond(test)
            self.emit(f"{flag} = {c.code}")
        if len(self.lines) == start:
            self.emit("pass")
        self.depth -= 1
        body_scope = self.scope
        self.scope, self.terminated = saved_scope, saved_term
        for name in list(body_scope.vars):
            if name in self.scope.vars and body_scope.vars[name] is not self.scope.vars[name]:
                entry = self._unrefined(body_scope.vars[name])
                old = self._unrefined(self.scope.vars[name])
                if old[0] is not None and entry[0] is not None and \
                        not T.subtype(entry[1], old[1]):
                    self.error(stmts[0] if stmts else self.node, f"variable '{name}' changes "
                               f"type from {old[1]} to {entry[1]} inside a loop")
        return body_scope, None

    def stmt_For(self, node):
        if node.orelse:
            self.unsupported(node, "for ... else loops")
        self.for_loop(node)
