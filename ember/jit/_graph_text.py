"""A traced module's ``.graph`` printed as PyTorch prints its traced graph:

    graph(%self.1 : __torch__.Cell,
          %x : Float(3, 4, strides=[4, 1], requires_grad=0, device=cpu)):
      %linear : __torch__.torch.nn.modules.linear.Linear = prim::GetAttr[name="linear"](%self.1)
      %5 : Tensor = prim::CallMethod[name="forward"](%linear, %x)
      %6 : int = prim::Constant[value=1]() # cell.py:7:0
      %7 : Float(3, 4, strides=[4, 1], requires_grad=1, device=cpu) = aten::add(%5, %x, %6) # ...

It is read off the TorchScript ``forward`` that ember writes for the trace (the same
submodule calls, attribute reads and aten calls PyTorch's graph holds), with each aten
call's result type and source line taken from the trace's IR node, and the arguments an
aten call leaves at their defaults written as constants (from ember's signature of the
function, which follows the aten schema). What this reading does not cover (sizes turned
into tensors, tensor constants, int arithmetic, loops) raises ``NotImplementedError``:
``.graph`` then prints ember's IR instead (``ember._graph.ir.Graph.printer``).
"""
import ast
import inspect

__all__ = ["graph_text"]


def _type_name(x):
    if x is None:
        return "NoneType"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(x))


def _constant_value(x):
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, float):
        return repr(x) if x != int(x) or abs(x) >= 1e16 else f"{x:.0f}."
    if isinstance(x, str):
        return f'"{x}"'
    return str(x)


class _Printer:
    def __init__(self, module, ir, self_name, scope=""):
        from ember.jit._codegen import aten_call_names
        self.module, self.ir = module, ir
        # a submodule's graph: its ops are in the module's scope, ``__module.<path>``
        self.scope = f", scope: __module.{scope}" if scope else ""
        self.lines = []
        self.n = len(ir.inputs) + 1
        self.self_name = self_name
        aten = aten_call_names(ir)
        self.pending = [(aten[id(n)], n) for n in ir.nodes if id(n) in aten]
        self.env = {"self": ("%" + self_name, _qualname(module))}

    def fresh(self):
        self.n += 1
        return f"%{self.n}"

    def emit(self, name, type_, rhs, node=None):
        src = ""
        if node is not None:
            src = self.scope
            if node.source:
                src += f" # {node.source[0]}:{node.source[1]}:0"
        self.lines.append(f"  {name} : {type_} = {rhs}{src}")
        return name

    def node_for(self, fn):
        for i, (name, n) in enumerate(self.pending):
            if name == fn:
                del self.pending[:i + 1]
                return n
        raise NotImplementedError(f"graph text: no traced node for torch.{fn}")

    # ----- expressions ----------------------------------------------------------------
    def value(self, e, user=None):
        """(name, type) of an expression's value, its lines emitted."""
        if isinstance(e, ast.Name):
            if e.id not in self.env:
                raise NotImplementedError(f"graph text: unknown name {e.id}")
            return self.env[e.id]
        if isinstance(e, ast.Constant):
            return self.constant(e.value, user)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and \
                isinstance(e.operand, ast.Constant):
            return self.constant(-e.operand.value, user)
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and \
                e.value.id == "self":
            return self.get_attr(e.attr)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and \
                e.func.id == "getattr" and len(e.args) == 2 and \
                isinstance(e.args[0], ast.Name) and e.args[0].id == "self":
            return self.get_attr(e.args[1].value)
        if isinstance(e, ast.List):
            items = [self.value(x, user) for x in e.elts]
            kinds = {t for _, t in items}
            if len(kinds) != 1:
                raise NotImplementedError("graph text: a list of mixed types")
            kind = kinds.pop()
            return self.emit(self.fresh(), f"{kind}[]", "prim::ListConstruct(" +
                             ", ".join(n for n, _ in items) + ")"), f"{kind}[]"
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            f = e.func
            if isinstance(f.value, ast.Name) and f.value.id == "torch":
                return self.aten(f.attr, e)
            if f.attr == "forward" or (isinstance(f.value, ast.Name) and
                                       self.env.get(f.value.id, ("", ""))[1].startswith(
                                           "__torch__")):
                obj, _ = self.value(f.value)
                args = [self.value(a) for a in e.args]
                return self.emit(self.fresh(), "Tensor", f'prim::CallMethod[name="{f.attr}"]('
                                 + ", ".join([obj] + [n for n, _ in args]) + ")"), "Tensor"
        raise NotImplementedError(f"graph text: {ast.dump(e)[:60]}")

    def constant(self, x, user):
        """A constant argument; ``user`` collects the line numbers of the constants of
        one aten call, which get its source line once its node is known."""
        t = _type_name(x)
        if t is None:
            raise NotImplementedError(f"graph text: a constant of type {type(x).__name__}")
        rhs = "prim::Constant()" if x is None else \
            f"prim::Constant[value={_constant_value(x)}]()"
        name = self.emit(self.fresh(), t, rhs)
        if user is not None and x is not None:
            user.append(len(self.lines) - 1)
        return name, t

    def get_attr(self, attr):
        key = f"self.{attr}"
        if key in self.env:
            return self.env[key]
        sub = self.module._modules.get(attr)
        t = _qualname(sub) if sub is not None else "Tensor"
        name = "%" + (attr if attr.isidentifier() else "_" + attr)
        self.emit(name, t, f'prim::GetAttr[name="{attr}"]({self.env["self"][0]})')
        self.env[key] = (name, t)
        return name, t

    def aten(self, fn, call):
        args = list(call.args)
        kwargs = {k.arg: k.value for k in call.keywords}
        target = _ember_function(fn)
        if target is not None:
            # the arguments left at their defaults: PyTorch's graph writes every one
            params = [p for p in inspect.signature(target).parameters.values()
                      if p.name != "out" and p.kind != p.VAR_KEYWORD]
            if any(p.kind == p.VAR_POSITIONAL for p in params):
                raise NotImplementedError(f"graph text: torch.{fn}'s arguments")
            for p in params[len(args):]:
                if p.name in kwargs:
                    args.append(kwargs.pop(p.name))
                elif p.default is not p.empty:
                    args.append(ast.Constant(p.default))
        if kwargs:
            raise NotImplementedError(f"graph text: keywords of torch.{fn}")
        consts = []
        values = [self.value(a, consts) for a in args]
        names = [n for n, _ in values]
        if fn == "dropout" and not self.ir.nodes:
            # ``nn.Dropout`` in eval mode, which recorded nothing: its input's type
            t = values[0][1]
            return self.emit(self.fresh(), t, f"aten::{fn}(" + ", ".join(names) + ")" +
                             self.scope), t
        node = self.node_for(fn)   # after its arguments' nodes, as the trace ran them
        if node.source:
            for i in consts:
                self.lines[i] += f" # {node.source[0]}:{node.source[1]}:0"
        outs = node.outputs
        if len(outs) != 1:
            raise NotImplementedError(f"graph text: torch.{fn} with several outputs")
        t = outs[0].type_str()
        # a value named after the user's local that held it prints under that name
        name = self.fresh() if outs[0].name.isdigit() else "%" + outs[0].name
        return self.emit(name, t, f"aten::{fn}(" + ", ".join(names) + ")", node), t

    # ----- statements -----------------------------------------------------------------
    def run(self, fdef):
        args = [a.arg for a in fdef.args.args]
        if len(args) - 1 != len(self.ir.inputs):
            raise NotImplementedError("graph text: nested inputs")
        head = [f"%{self.self_name} : {_qualname(self.module)}"]
        for a, v in zip(args[1:], self.ir.inputs):
            self.env[a] = ("%" + a, v.type_str())
            head.append(f"%{a} : {v.type_str()}")
        for st in fdef.body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], ast.Name):
                self.env[st.targets[0].id] = self.value(st.value)
            elif isinstance(st, ast.Return):
                ret = self.result(st.value)
            else:
                raise NotImplementedError(f"graph text: {type(st).__name__}")
        body = "\n".join(self.lines)
        return ("graph(" + ",\n      ".join(head) + "):\n" + body +
                ("\n" if body else "") + f"  return ({ret})\n")

    def result(self, e):
        if isinstance(e, ast.Tuple):
            items = [self.value(x) for x in e.elts]
            t = "(" + ", ".join(t for _, t in items) + ")"
            return self.emit(self.fresh(), t, "prim::TupleConstruct(" +
                             ", ".join(n for n, _ in items) + ")")
        return self.value(e)[0]


def _qualname(module):
    """``__torch__.<class>`` of a script module (or a submodule of one)."""
    return module.qualified_name


def _ember_function(fn):
    import ember
    target = getattr(ember, fn, None)
    if target is None:
        import ember.nn.functional as F
        target = getattr(F, fn, None)
    try:
        inspect.signature(target)
    except (TypeError, ValueError):
        return None
    return target


def graph_text(module, ir, code, path=None):
    """PyTorch's printed graph of ``module``'s traced ``forward`` (``ir``, whose
    TorchScript is ``code``); ``path``: None for the traced module itself (``%self.1``),
    else the submodule's path in it (``%self``, its ops in scope ``__module.<path>``)."""
    tree = ast.parse(code)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise NotImplementedError("graph text: no forward")
    return _Printer(module, ir, "self.1" if path is None else "self", path or "").run(fdef)
