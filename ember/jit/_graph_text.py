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

from ember.jit._schema_names import ATEN_METHODS

__all__ = ["graph_text"]


# int arithmetic on sizes, as TorchScript's graph spells it
_INT_OPS = {ast.FloorDiv: "floordiv", ast.Mult: "mul", ast.Add: "add", ast.Sub: "sub",
            ast.Mod: "remainder"}
# parameters of ember's Python functions that the aten schema does not have
_PYTHON_ONLY = frozenset(("out", "return_indices"))
# ``memory_format`` arguments are ints in TorchScript's graph
_MEMORY_FORMATS = {"contiguous_format": 0, "preserve_format": 1, "channels_last": 2,
                   "channels_last_3d": 3}


def _type_name(x):
    if x is None:
        return "NoneType"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(x))


def _constant_value(x):
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            return repr(x)
        # PyTorch prints 17 significant digits (0.10000000000000001)
        return f"{x:.17g}" if x != int(x) or abs(x) >= 1e16 else f"{x:.0f}."
    if isinstance(x, str):
        return f'"{x}"'
    return str(x)


class _Printer:
    def __init__(self, module, ir, self_name, scope=()):
        from ember.jit._codegen import aten_call_names
        self.module, self.ir = module, ir
        # a submodule's graph: the nodes of its call are in its scope, written as the
        # chain of module calls down to it (``__module.layer1/__module.layer1.0``)
        self.scope = ", scope: " + "/".join("__module." + p for p in scope) if scope else ""
        self.lines = []
        self.n = len(ir.inputs) + 1
        self.self_name = self_name
        aten = aten_call_names(ir)
        self.pending = [(aten[id(n)], n) for n in ir.nodes if id(n) in aten]
        self.env = {"self": ("%" + self_name, _qualname(module))}
        self.objects = {"%" + self_name: module}  # value name -> the (sub)module it is
        self.taken = set()     # the attribute values' names given so far
        self.size_ints = {}    # a local holding a size -> its aten::Int values, in use order
        self.inline_sizes = {}  # id(a ``x.size(d)`` expression) -> its aten::Int value

    def fresh(self):
        self.n += 1
        return f"%{self.n}"

    def emit(self, name, type_, rhs, node=None, scoped=True):
        """One line; ``scoped``: in the call's scope (every node but attribute reads,
        method calls and the returned tuple, as PyTorch's tracer scopes them)."""
        src = self.scope if scoped else ""
        if node is not None and node.source:
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
            if e.id in self.size_ints:
                if not self.size_ints[e.id]:
                    raise NotImplementedError(f"graph text: the uses of {e.id}")
                return self.size_ints[e.id].pop(0), "int"
            if e.id not in self.env:
                raise NotImplementedError(f"graph text: unknown name {e.id}")
            return self.env[e.id]
        if isinstance(e, ast.Constant):
            return self.constant(e.value, user)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and \
                isinstance(e.operand, ast.Constant):
            return self.constant(-e.operand.value, user)
        if isinstance(e, ast.Attribute) and isinstance(e.ctx, ast.Load) and \
                not (isinstance(e.value, ast.Name) and e.value.id == "torch"):
            return self.get_attr(e.attr, self.value(e.value)[0])
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and \
                e.func.id == "getattr" and len(e.args) == 2 and \
                isinstance(e.args[1], ast.Constant):
            return self.get_attr(e.args[1].value, self.value(e.args[0])[0])
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and \
                e.func.id == "float" and len(e.args) == 1 and \
                isinstance(e.args[0], ast.Constant):
            return self.constant(float(e.args[0].value), user)   # float("-inf")
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                isinstance(e.func.value, ast.Name) and e.func.value.id == "torch" and \
                e.func.attr == "device" and len(e.args) == 1:
            name = self.emit(self.fresh(), "Device",
                             f'prim::Constant[value="{e.args[0].value}"]()')
            if user is not None:
                user.append(len(self.lines) - 1)
            return name, "Device"
        if isinstance(e, ast.BinOp) and type(e.op) in _INT_OPS:
            a, b = self.value(e.left), self.value(e.right)
            return self.emit(self.fresh(), "int", f"aten::{_INT_OPS[type(e.op)]}("
                             f"{a[0]}, {b[0]})"), "int"
        if _is_size(e):
            if id(e) in self.inline_sizes:
                return self.inline_sizes[id(e)], "int"
            return self.size_read(e, 1)[0], "int"
        if isinstance(e, ast.List):
            items = [self.value(x, user) for x in e.elts]
            kinds = {t for _, t in items} or {"int"}   # ``[]``: a 0-d tensor's size
            if len(kinds) != 1:
                raise NotImplementedError("graph text: a list of mixed types")
            kind = kinds.pop()
            if "(" in kind:   # tensors of a known type: a ``Tensor[]``
                kind = "Tensor"
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
                                 + ", ".join([obj] + [n for n, _ in args]) + ")",
                                 scoped=False), "Tensor"
        raise NotImplementedError(f"graph text: {ast.dump(e)[:60]}")

    def size_read(self, call, uses):
        """``x.size(d)`` read ``uses`` times, as PyTorch's tracer records it: the size
        made a 0-d tensor (``prim::NumToTensor``) and one ``aten::Int`` of it per use,
        each placed right after it (so the first use reads the last one)."""
        x = self.value(call.func.value)
        d = self.constant(call.args[0].value, None)
        size = self.emit(self.fresh(), "int", f"aten::size({x[0]}, {d[0]})")
        t = self.emit(self.fresh(), "Long(device=cpu)", f"prim::NumToTensor({size})")
        ints = [self.emit(self.fresh(), "int", f"aten::Int({t})") for _ in range(uses)]
        return ints[::-1]

    def constant(self, x, user):
        """A constant argument; ``user`` collects the line numbers of the constants of
        one aten call, which get its source line once its node is known."""
        if type(x).__name__ == "memory_format" and str(x).split(".")[-1] in _MEMORY_FORMATS:
            x = _MEMORY_FORMATS[str(x).split(".")[-1]]
        t = _type_name(x)
        if t is None:
            raise NotImplementedError(f"graph text: a constant of type {type(x).__name__}")
        rhs = "prim::Constant()" if x is None else \
            f"prim::Constant[value={_constant_value(x)}]()"
        name = self.emit(self.fresh(), t, rhs)
        if user is not None and x is not None:
            user.append(len(self.lines) - 1)
        return name, t

    def get_attr(self, attr, owner=None):
        """``owner.attr`` (``owner``: the value name of a module, ``self`` by default):
        the submodule or the parameter, read where the code reads it (PyTorch's graph
        reads ``self.layers`` again for each ``getattr(self.layers, "0")``)."""
        owner = owner or self.env["self"][0]
        mod = self.objects.get(owner)
        if mod is None:
            raise NotImplementedError(f"graph text: an attribute of {owner}")
        sub = mod._modules.get(attr)
        t = _qualname(sub) if sub is not None else "Tensor"
        base = attr if attr.isidentifier() else "_" + attr
        name = "%" + base
        k = 0
        while name in self.taken:
            k += 1
            name = f"%{base}.{k}"
        self.emit(name, t, f'prim::GetAttr[name="{attr}"]({owner})', scoped=False)
        self.taken.add(name)
        if sub is not None:
            self.objects[name] = sub
        return name, t

    def aten(self, fn, call):
        args = list(call.args)
        kwargs = {k.arg: k.value for k in call.keywords}
        target = _ember_function(fn)
        params = [] if target is None else \
            [p for p in inspect.signature(target).parameters.values()
             if p.name not in _PYTHON_ONLY and p.kind != p.VAR_KEYWORD and p.name[0] != "_"]
        if not any(p.kind == p.VAR_POSITIONAL for p in params) and \
                set(kwargs) <= {p.name for p in params}:
            # the arguments left at their defaults: PyTorch's graph writes every one
            for p in params[len(args):]:
                if p.name in kwargs:
                    args.append(kwargs.pop(p.name))
                elif p.default is not p.empty:
                    args.append(ast.Constant(p.default))
        # the rest as the code writes them, which is the schema's order (a factory's
        # ``dtype=6, layout=None, device=..., pin_memory=False``)
        args += kwargs.values()
        if fn.endswith("_like") and "memory_format" not in kwargs and kwargs:
            args.append(ast.Constant(None))   # the schema's last argument, at its default
        consts = []
        values = [self.value(a, consts) for a in args]
        names = [n for n, _ in values]
        if fn == "dropout" and not self.ir.nodes:
            # ``nn.Dropout`` in eval mode, which recorded nothing: its input's type
            t = values[0][1]
            return self.emit(self.fresh(), t, f"aten::{fn}(" + ", ".join(names) + ")"), t
        node = self.node_for(fn)   # after its arguments' nodes, as the trace ran them
        if node.inplace and fn + "_" in ATEN_METHODS:
            fn += "_"   # the user's in-place call (``relu_``), as PyTorch's graph names it
        if node.source:
            for i in consts:
                self.lines[i] += f" # {node.source[0]}:{node.source[1]}:0"
        outs = node.outputs
        rhs = f"aten::{fn}(" + ", ".join(names) + ")"
        if len(outs) != 1:
            # ``%a : T, %b : T = aten::lstm(...)``: the targets are named by the caller
            self.multi = [(self.fresh(), o.type_str()) for o in outs]
            src = self.scope + (f" # {node.source[0]}:{node.source[1]}:0"
                                if node.source else "")
            self.lines.append("  " + ", ".join(f"{n} : {t}" for n, t in self.multi) +
                              f" = {rhs}{src}")
            return None, None
        t = outs[0].type_str()
        # a value named after the user's local that held it prints under that name
        name = self.fresh() if outs[0].name.isdigit() else "%" + outs[0].name
        return self.emit(name, t, rhs, node), t

    # ----- statements -----------------------------------------------------------------
    def run(self, fdef):
        args = [a.arg for a in fdef.args.args]
        if len(args) - 1 != len(self.ir.inputs):
            raise NotImplementedError("graph text: nested inputs")
        head = [f"%{self.self_name} : {_qualname(self.module)}"]
        for a, v in zip(args[1:], self.ir.inputs):
            self.env[a] = ("%" + a, v.type_str())
            head.append(f"%{a} : {v.type_str()}")
        uses = {}
        for n in ast.walk(fdef):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                uses[n.id] = uses.get(n.id, 0) + 1
        for st in fdef.body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], ast.Name) and _is_size(st.value):
                # ``_0 = x.size(1)``: one ``aten::Int`` per later read of ``_0``
                self.size_ints[st.targets[0].id] = self.size_read(
                    st.value, uses.get(st.targets[0].id, 0))
                continue
            # a size read inside the statement is read before it (PyTorch's trace
            # reads it in the Python statement that computed it)
            for sub in ast.walk(st):
                if _is_size(sub):
                    self.inline_sizes[id(sub)] = self.size_read(sub, 1)[0]
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], ast.Name):
                self.env[st.targets[0].id] = self.value(st.value)
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], ast.Tuple):
                # ``_1, _2 = torch.gru(...)``: one call with several outputs
                self.multi = None
                self.value(st.value)
                names = [t.id for t in st.targets[0].elts if isinstance(t, ast.Name)]
                if self.multi is None or len(names) != len(self.multi):
                    raise NotImplementedError("graph text: unpacking")
                self.env.update(zip(names, self.multi))
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
                             ", ".join(n for n, _ in items) + ")", scoped=False)
        return self.value(e)[0]


def _is_size(e):
    """Whether ``e`` is ``<tensor>.size(<int>)``."""
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
        e.func.attr == "size" and len(e.args) == 1 and not e.keywords and \
        isinstance(e.args[0], ast.Constant) and type(e.args[0].value) is int


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


def graph_text(module, ir, code, path=None, calls=None):
    """PyTorch's printed graph of ``module``'s traced ``forward`` (``ir``, whose
    TorchScript is ``code``); ``path``: None for the traced module itself (``%self.1``),
    else the submodule's path in it (``%self``, its ops in scope ``__module.<path>``, or
    the chain of the module calls ``calls`` that led to it)."""
    tree = ast.parse(code)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise NotImplementedError("graph text: no forward")
    scope = calls or ([path] if path else [])
    return _Printer(module, ir, "self.1" if path is None else "self", scope).run(fdef)
