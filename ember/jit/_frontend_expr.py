"""Expressions, conditions and loops of ``jit.script``'s frontend (mixed into
:class:`ember.jit._frontend.FunctionCompiler`)."""
import ast
import builtins

from ember.jit import _types as T

_NO = object()


class Val:
    """A compiled expression: its TorchScript ``code`` and type ``ty``; ``obj`` is the
    compile-time Python value (a module, a namespace, a function, a constant) when it has
    one; ``const`` is a condition decided at compile time."""

    __slots__ = ("code", "ty", "obj", "const", "refine", "refine_else", "refine_lines")

    def __init__(self, code, ty, obj=_NO, const=None):
        self.code, self.ty, self.obj, self.const = code, ty, obj, const
        self.refine, self.refine_else, self.refine_lines = {}, {}, {}

    @property
    def is_static(self):
        return self.obj is not _NO and self.ty is None


def static(obj, code=None):
    return Val(code, None, obj)


_CMP = {ast.Gt: "gt", ast.Lt: "lt", ast.GtE: "ge", ast.LtE: "le", ast.Eq: "eq",
        ast.NotEq: "ne"}
_FLIP = {"gt": "lt", "lt": "gt", "ge": "le", "le": "ge", "eq": "eq", "ne": "ne"}


class ExprMixin:
    BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
              ast.FloorDiv: "floordiv", ast.Mod: "remainder", ast.Pow: "pow",
              ast.MatMult: "matmul", ast.BitAnd: "__and__", ast.BitOr: "__or__",
              ast.BitXor: "__xor__", ast.LShift: "__lshift__", ast.RShift: "__rshift__"}

    # -- entry points -----------------------------------------------------------------
    def expr(self, node, hint=None):
        meth = getattr(self, "expr_" + type(node).__name__, None)
        if meth is None:
            what = {"Lambda": "lambdas", "GeneratorExp": "generator expressions",
                    "Set": "set literals", "SetComp": "set comprehensions",
                    "DictComp": "dict comprehensions", "Yield": "yield expressions",
                    "YieldFrom": "yield expressions", "Await": "await expressions",
                    "Starred": "starred expressions", "NamedExpr": "assignment expressions",
                    }.get(type(node).__name__, f"{type(node).__name__} expressions")
            self.unsupported(node, what)
        if hint is not None and isinstance(node, (ast.List, ast.Dict)):
            return meth(node, hint)
        return meth(node)

    def rvalue(self, node, hint=None):
        """A runtime value: compile-time constants become literals."""
        v = self.expr(node, hint)
        return self.to_runtime(node, v)

    def to_runtime(self, node, v):
        if not v.is_static:
            return v
        obj = v.obj
        ty = T.type_of_value(obj) if not isinstance(obj, (list, dict)) else None
        if ty is not None and ty.kind != "Tensor":
            return Val(T.literal(obj), ty)
        dt = self.dtype_code(obj)
        if dt is not None:
            return Val(str(dt), T.INT)
        if self.owner is not None and self.owner.is_module(obj):
            self.error(node, f"module '{type(obj).__name__}' cannot be used as a value "
                       "(call it, or iterate it in a for loop)")
        self.error(node, f"python value of type '{type(obj).__name__}' cannot be used as a "
                   "value in scripted code")

    @staticmethod
    def dtype_code(obj):
        import ember
        if isinstance(obj, ember.dtype):
            from ember.jit._script_calls import DTYPE_CODES
            return DTYPE_CODES.get(str(obj).replace("ember.", "").replace("torch.", ""))
        return None

    # -- leaves -----------------------------------------------------------------------
    def expr_Constant(self, node):
        v = node.value
        if v is Ellipsis:
            return Val("...", T.Ty("ellipsis"))
        ty = T.type_of_value(v)
        if ty is None:
            self.unsupported(node, f"constants of type {type(v).__name__}")
        # `if False:` / `while True:` are decided at compile time, as TorchScript folds them
        return Val(T.literal(v), ty, const=v if isinstance(v, bool) else None)

    def expr_Name(self, node):
        entry = self.scope.vars.get(node.id)
        if entry is not None:
            if entry[0] is None:
                return entry[1]
            return Val(entry[0], entry[1])
        if self.is_method and node.id == "self":
            return self.owner.self_val()
        return static(self.lookup(node, node.id))

    def lookup(self, node, name):
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        self.error(node, f"undefined value {name}")

    def static_value(self, node):
        v = self.expr(node)
        return v.obj if v.is_static else None

    # -- attributes -------------------------------------------------------------------
    def expr_Attribute(self, node):
        base = self.expr(node.value)
        attr = node.attr
        if base.is_static:
            obj = base.obj
            if self.owner is not None and self.owner.is_module(obj):
                return self.owner.module_attr(self, node, base, attr)
            if not hasattr(obj, attr):
                self.error(node, f"'{type(obj).__name__}' has no attribute '{attr}'")
            return static(getattr(obj, attr))
        ty = base.ty
        if ty.kind == "Tuple" and len(ty.args) == 2 and attr in ("values", "indices"):
            # torch.return_types of max/min/sort/topk...: (values, indices)
            i = 0 if attr == "values" else 1
            return Val(f"({base.code})[{i}]", ty.args[i])
        if ty.is_tensor:
            from ember.jit._script_calls import TENSOR_PROPS
            if attr in TENSOR_PROPS:
                code, rty = TENSOR_PROPS[attr]
                return Val(code.format(base.code), rty)
            self.error(node, f"Tensor attribute '{attr}' is not supported in scripted code")
        if ty.kind == "Class":
            from ember.jit._script_classes import fields
            fty = fields(ty.module).get(attr)
            if fty is None:
                self.error(node, f"'{ty}' object has no attribute '{attr}' usable in scripted "
                           "code (attributes are typed from its __init__; methods of plain "
                           "classes are not compiled by ember)")
            return Val(f"{base.code}.{attr}", fty)
        self.error(node, f"'{ty}' object has no attribute '{attr}'")

    # -- operators --------------------------------------------------------------------
    def expr_BinOp(self, node):
        a, b = self.rvalue(node.left), self.rvalue(node.right)
        return self.binop(node, node.op, a, b)

    def binop(self, node, op, a, b):
        name = self.BINOPS.get(type(op))
        if name is None:
            self.unsupported(node, f"the {type(op).__name__} operator")
        ta, tb = a.ty, b.ty
        for t in (ta, tb):
            if t.kind in ("Optional", "NoneType"):
                self.error(node, f"unsupported operand type {t} for {type(op).__name__}: "
                           "refine it with `is not None` first")
        if ta.is_tensor or tb.is_tensor:
            if name == "floordiv":
                name = "floor_divide"
            if not ta.is_tensor and name in ("add", "mul", "__and__", "__or__", "__xor__"):
                a, b = b, a
            elif not ta.is_tensor and name == "sub":
                return Val(f"torch.rsub({b.code}, {a.code})", T.TENSOR)
            elif not ta.is_tensor and name == "div":
                return Val(f"torch.mul(torch.reciprocal({b.code}), {a.code})", T.TENSOR)
            elif not ta.is_tensor and name not in ("pow",):
                a = Val(f"torch.tensor({a.code})", T.TENSOR)
            return Val(f"torch.{name}({a.code}, {b.code})", T.TENSOR)
        if ta.is_scalar and tb.is_scalar:
            if name == "div":
                rty = T.FLOAT
            elif T.FLOAT in (ta, tb):
                rty = T.FLOAT
            elif ta.kind == "number" or tb.kind == "number":
                rty = T.NUMBER
            elif name in ("__and__", "__or__", "__xor__") and ta == tb == T.BOOL:
                rty = T.BOOL
            else:
                rty = T.INT
            if name == "pow" and rty == T.INT:
                rty = T.FLOAT if "-" in b.code else T.INT
            return Val(f"torch.{name}({a.code}, {b.code})", rty)
        if name == "add" and ta == tb and ta.kind in ("str", "List"):
            return Val(f"torch.add({a.code}, {b.code})", ta)
        if name == "mul" and ta.kind in ("List", "str") and tb == T.INT:
            return Val(f"torch.mul({a.code}, {b.code})", ta)
        self.error(node, f"unsupported operand types for {type(op).__name__}: {ta} and {tb}")

    def expr_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            c = self.cond(node.operand)
            if c.const is not None:
                return Val(repr(not c.const), T.BOOL, const=not c.const)
            return Val(f"torch.__not__({c.code})", T.BOOL)
        v = self.rvalue(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            if v.code.replace(".", "", 1).isdigit() or v.code in ("inf",):
                return Val("-" + v.code, v.ty)
            return Val(f"torch.neg({v.code})", v.ty)
        if isinstance(node.op, ast.Invert):
            return Val(f"torch.bitwise_not({v.code})" if v.ty.is_tensor
                       else f"torch.__invert__({v.code})", v.ty)
        self.unsupported(node, f"the {type(node.op).__name__} operator")

    def expr_Compare(self, node):
        if len(node.ops) > 1:
            # a < b < c is (a < b) and (b < c), b evaluated once
            parts, left = [], node.left
            for op, right in zip(node.ops, node.comparators):
                parts.append(ast.Compare(left=left, ops=[op], comparators=[right]))
                left = right
            return self.expr(ast.copy_location(ast.BoolOp(op=ast.And(), values=parts), node))
        op, right = node.ops[0], node.comparators[0]
        if isinstance(op, (ast.Is, ast.IsNot)):
            return self.is_none(node, node.left, right, isinstance(op, ast.IsNot))
        a, b = self.rvalue(node.left), self.rvalue(right)
        if isinstance(op, (ast.In, ast.NotIn)):
            if b.ty.kind not in ("List", "Dict", "str"):
                self.error(node, f"'in' needs a list, dict or str on the right, not {b.ty}")
            code = f"torch.__contains__({b.code}, {a.code})"
            if isinstance(op, ast.NotIn):
                code = f"torch.__not__({code})"
            return Val(code, T.BOOL)
        name = _CMP[type(op)]
        if a.ty.is_tensor or b.ty.is_tensor:
            if not a.ty.is_tensor:
                a, b, name = b, a, _FLIP[name]
            return Val(f"torch.{name}({a.code}, {b.code})", T.TENSOR)
        return Val(f"torch.{name}({a.code}, {b.code})", T.BOOL)

    def is_none(self, node, left, right, negate):
        if not (isinstance(right, ast.Constant) and right.value is None):
            self.unsupported(node, "'is' comparisons other than 'is None' / 'is not None'")
        v = self.expr(left)
        if v.is_static:
            const = (v.obj is None) != negate
            return Val(repr(const), T.BOOL, const=const)
        if v.ty.kind == "NoneType":
            return Val(repr(not negate), T.BOOL, const=not negate)
        if v.ty.kind != "Optional":
            return Val(repr(negate), T.BOOL, const=negate)
        code = f"torch.__isnot__({v.code}, None)" if negate else f"torch.__is__({v.code}, None)"
        out = Val(code, T.BOOL)
        if isinstance(left, ast.Name) and left.id in self.scope.vars:
            new = self.fresh()
            out.refine_lines[left.id] = f"{new} = unchecked_cast({v.ty.elem}, {v.code})"
            target = out.refine if negate else out.refine_else
            target[left.id] = (new, v.ty.elem)
        return out

    def cond(self, node):
        """A condition as a TorchScript bool (``bool(t)`` for tensors)."""
        v = self.expr(node)
        if v.const is not None:
            return v
        if v.is_static:
            obj = v.obj
            if isinstance(obj, (bool, int, float, str)) or obj is None:
                return Val(repr(bool(obj)), T.BOOL, const=bool(obj))
            self.error(node, f"a {type(obj).__name__} cannot be used as a condition")
        if v.ty == T.BOOL:
            return v
        if v.ty.kind in ("Tensor", "int", "float", "number"):
            return Val(f"bool({v.code})", T.BOOL)
        self.error(node, f"expected a bool expression for a condition but found {v.ty}")

    def expr_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        first = self.cond(node.values[0])
        if len(node.values) > 2:
            rest = ast.copy_location(ast.BoolOp(op=node.op, values=node.values[1:]), node)
        else:
            rest = node.values[1]
        if first.const is not None:
            if first.const == is_and:
                return self.cond(rest)
            return Val(repr(first.const), T.BOOL, const=first.const)
        out = self.fresh()
        self.emit(f"if {first.code}:")
        scope_save = self.scope
        self.scope = self.scope.copy()
        if is_and:
            for name, entry in first.refine.items():
                self.scope.vars[name] = (entry[0], entry[1], scope_save.vars[name][:2])
        self.depth += 1
        for name in first.refine:
            self.emit(first.refine_lines[name])
        second = self.cond(rest) if is_and else None
        self.emit(f"{out} = {second.code}" if is_and else f"{out} = True")
        self.depth -= 1
        self.emit("else:")
        self.depth += 1
        if not is_and:
            second = self.cond(rest)
        self.emit(f"{out} = {second.code}" if not is_and else f"{out} = False")
        self.depth -= 1
        self.scope = scope_save
        res = Val(out, T.BOOL)
        if is_and:
            # the names first and second refine are refined again where the result holds
            for src in (first, second):
                for name, (_, ty) in src.refine.items():
                    if name in self.scope.vars and self.scope.vars[name][0] is not None:
                        new = self.fresh()
                        res.refine[name] = (new, ty)
                        res.refine_lines[name] = (
                            f"{new} = unchecked_cast({ty}, {self.scope.vars[name][0]})")
        return res

    def expr_IfExp(self, node):
        c = self.cond(node.test)
        if c.const is not None:
            return self.rvalue(node.body if c.const else node.orelse)
        out = self.fresh()
        self.emit(f"if {c.code}:")
        a = self._refined_branch(node.body, c, c.refine, out)
        self.emit("else:")
        b = self._refined_branch(node.orelse, c, c.refine_else, out)
        u = T.unify(a.ty, b.ty)
        if u is None:
            self.error(node, f"the two sides of a conditional expression have types {a.ty} "
                       f"and {b.ty}")
        return Val(out, u)

    def _refined_branch(self, expr_node, c, refine, out):
        saved = self.scope
        self.scope = self.scope.copy()
        self.depth += 1
        for name, (emitted, ty) in refine.items():
            self.emit(c.refine_lines[name])
            self.scope.vars[name] = (emitted, ty, saved.vars[name][:2])
        v = self.rvalue(expr_node)
        self.emit(f"{out} = {v.code}")
        self.depth -= 1
        self.scope = saved
        return v

    # -- literals ---------------------------------------------------------------------
    def expr_Tuple(self, node):
        vals = [self.rvalue(e) for e in node.elts]
        inner = ", ".join(v.code for v in vals)
        code = f"({inner},)" if len(vals) == 1 else f"({inner})"
        return Val(code, T.tuple_of([v.ty for v in vals]))

    def expr_List(self, node, hint=None):
        vals = [self.rvalue(e) for e in node.elts]
        code = "[" + ", ".join(v.code for v in vals) + "]"
        if not vals:
            if hint is not None and hint.kind == "List":
                return Val(code, hint)
            return Val("annotate(List[Tensor], [])", T.list_of(T.TENSOR))
        ty = vals[0].ty
        for v in vals[1:]:
            u = T.unify(ty, v.ty)
            if u is None:
                self.error(node, f"list items have different types: {ty} and {v.ty}")
            ty = u
        return Val(code, T.list_of(ty))

    def expr_Dict(self, node, hint=None):
        if any(k is None for k in node.keys):
            self.unsupported(node, "dict unpacking (**)")
        ks = [self.rvalue(k) for k in node.keys]
        vs = [self.rvalue(v) for v in node.values]
        code = "{" + ", ".join(f"{k.code}: {v.code}" for k, v in zip(ks, vs)) + "}"
        if not ks:
            if hint is not None and hint.kind == "Dict":
                return Val(code, hint)
            return Val("annotate(Dict[str, Tensor], {})", T.dict_of(T.STR, T.TENSOR))
        return Val(code, T.dict_of(ks[0].ty, vs[0].ty))

    def expr_JoinedStr(self, node):
        fmt, args = [], []
        for part in node.values:
            if isinstance(part, ast.Constant):
                fmt.append(part.value.replace("{", "{{").replace("}", "}}"))
            else:
                if part.format_spec is not None or part.conversion not in (-1, None):
                    self.unsupported(part, "f-string format specs and conversions")
                fmt.append("{}")
                args.append(self.rvalue(part.value).code)
        return Val("torch.format(" + ", ".join([T.literal("".join(fmt))] + args) + ")",
                   T.STR)

    def expr_ListComp(self, node):
        if len(node.generators) != 1 or node.generators[0].ifs or \
                node.generators[0].is_async:
            self.unsupported(node, "list comprehensions with several for clauses or ifs")
        gen = node.generators[0]
        out = self.fresh()
        mark = len(self.lines)
        self.emit(f"{out} = LIST_PLACEHOLDER")
        holder = {}

        def body():
            v = self.rvalue(node.elt)
            holder["ty"] = v.ty
            self.emit(f"torch.append({out}, {v.code})")

        fake = ast.copy_location(ast.For(target=gen.target, iter=gen.iter, body=[],
                                         orelse=[]), node)
        self.for_loop(fake, body_fn=body)
        ty = holder.get("ty", T.TENSOR)
        self.lines[mark] = self.lines[mark].replace("LIST_PLACEHOLDER",
                                                    f"annotate(List[{ty}], [])")
        return Val(out, T.list_of(ty))

    def expr_DictComp(self, node):
        if len(node.generators) != 1 or node.generators[0].ifs or \
                node.generators[0].is_async:
            self.unsupported(node, "dict comprehensions with several for clauses or ifs")
        gen = node.generators[0]
        out = self.fresh()
        mark = len(self.lines)
        self.emit(f"{out} = DICT_PLACEHOLDER")
        holder = {}

        def body():
            k, v = self.rvalue(node.key), self.rvalue(node.value)
            holder["ty"] = (k.ty, v.ty)
            self.emit(f"torch._set_item({out}, {k.code}, {v.code})")

        fake = ast.copy_location(ast.For(target=gen.target, iter=gen.iter, body=[],
                                         orelse=[]), node)
        self.for_loop(fake, body_fn=body)
        kt, vt = holder.get("ty", (T.STR, T.TENSOR))
        self.lines[mark] = self.lines[mark].replace("DICT_PLACEHOLDER",
                                                    f"annotate(Dict[{kt}, {vt}], {{}})")
        return Val(out, T.dict_of(kt, vt))

    # -- subscripts -------------------------------------------------------------------
    def expr_Subscript(self, node):
        base = self.expr(node.value)
        if base.is_static:
            obj = base.obj
            if self.owner is not None and self.owner.is_module(obj):
                return self.owner.module_index(self, node, base, node.slice)
            idx = self.static_value(node.slice)
            try:
                return static(obj[idx])
            except Exception:
                self.error(node, f"cannot index a python {type(obj).__name__} here")
        ty = base.ty
        if ty.is_tensor:
            return self.index_tensor(node, base, node.slice)
        if isinstance(node.slice, ast.Slice):
            s = node.slice
            if s.step is not None:
                if ty.kind not in ("List", "str"):
                    self.unsupported(node, f"slices with a step on {ty}")
                parts = [self.rvalue(e).code if e is not None else "None"
                         for e in (s.lower, s.upper, s.step)]
                return Val(f"torch.slice({base.code}, {', '.join(parts)})", ty)
            if ty.kind == "Tuple":
                lo = self.static_value(s.lower) if s.lower else 0
                hi = self.static_value(s.upper) if s.upper else len(ty.args)
                parts = list(range(len(ty.args)))[lo:hi]
                inner = ", ".join(f"({base.code})[{i}]" for i in parts)
                return Val(f"({inner},)" if len(parts) == 1 else f"({inner})",
                           T.tuple_of([ty.args[i] for i in parts]))
            args = [base.code, self.rvalue(s.lower).code if s.lower else "0"]
            if s.upper is not None:
                args.append(self.rvalue(s.upper).code)
            return Val(f"torch.slice({', '.join(args)})", ty)
        idx = self.rvalue(node.slice)
        if ty.kind == "List":
            return Val(f"{base.code}[{idx.code}]", ty.elem)
        if ty.kind == "Dict":
            return Val(f"{base.code}[{idx.code}]", ty.args[1])
        if ty.kind == "Tuple":
            i = self.static_value(node.slice)
            if not isinstance(i, int):
                try:
                    i = int(idx.code)
                except ValueError:
                    self.error(node, "a tuple index must be a constant integer")
            return Val(f"({base.code})[{i}]", ty.args[i])
        if ty.kind == "str":
            return Val(f"torch.__getitem__({base.code}, {idx.code})", T.STR)
        self.error(node, f"'{ty}' object is not subscriptable")

    def index_tensor(self, node, base, sl):
        items = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        code = base.code
        ell = [i for i, it in enumerate(items) if isinstance(it, ast.Constant)
               and it.value is Ellipsis]
        if len(ell) > 1:
            self.error(node, "an index can only have a single ellipsis")
        front = items[:ell[0]] if ell else items
        back = items[ell[0] + 1:] if ell else []
        tensor_idx = []
        dim = 0
        for it in front:
            code, dim = self._index_one(it, code, dim, 1, tensor_idx)
        dim = -1
        for it in reversed(back):
            code, dim = self._index_one(it, code, dim, -1, tensor_idx)
        if tensor_idx:
            if code != base.code or any(d < 0 for d, _ in tensor_idx):
                self.unsupported(node, "tensor indices mixed with ints, partial slices, "
                                 "None or ... (only tensors and full ':' slices)")
            dims = dict(tensor_idx)
            entries = [dims.get(d, "None") for d in range(max(dims) + 1)]
            code = f"torch.index({code}, annotate(List[Optional[Tensor]], " \
                   f"[{', '.join(entries)}]))"
        return Val(code, T.TENSOR)

    def _index_one(self, it, code, dim, step, tensor_idx):
        if isinstance(it, ast.Slice):
            if it.lower is None and it.upper is None and it.step is None:
                return code, dim + step
            lo = self.rvalue(it.lower).code if it.lower is not None else "None"
            hi = self.rvalue(it.upper).code if it.upper is not None else "None"
            st = self.rvalue(it.step).code if it.step is not None else "1"
            args = [code, str(dim), lo, hi, st]
            while len(args) > 2 and args[-1] == ("1" if len(args) == 5 else "None"):
                args.pop()
            return f"torch.slice({', '.join(args)})", dim + step
        if isinstance(it, ast.Constant) and it.value is None:
            return f"torch.unsqueeze({code}, {dim})", dim + step
        v = self.rvalue(it)
        if v.ty == T.INT:
            return f"torch.select({code}, {dim}, {v.code})", dim if step > 0 else dim
        if v.ty.is_tensor:
            tensor_idx.append((dim, v.code))
            return code, dim + step
        self.error(it, f"cannot index a tensor with a value of type {v.ty}")

    # -- calls ------------------------------------------------------------------------
    def expr_Call(self, node):
        from ember.jit._script_calls import compile_call
        return compile_call(self, node)

    # -- for loops --------------------------------------------------------------------
    def for_loop(self, node, body_fn=None):
        from ember.jit._script_loops import compile_for
        compile_for(self, node, body_fn)
