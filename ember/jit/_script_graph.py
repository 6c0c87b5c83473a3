"""A scripted function's or method's ``.graph`` printed as PyTorch prints its IR:

    graph(%x.1 : Tensor,
          %n.1 : int):
      %9 : int = prim::Constant[value=1]()
      %5 : bool = prim::Constant[value=1]()
      %x : Tensor = prim::Loop(%n.1, %5, %x.1)
        block0(%i.1 : int, %x.11 : Tensor):
          %x.5 : Tensor = aten::add(%x.11, %i.1, %9)
          -> (%5, %x.5)
      return (%x)

It is printed from the SSA graph that :mod:`ember.jit._code_ssa` reads off the compiled
TorchScript (the graph ``.code`` is printed from), with PyTorch's conventions:

* constants are pooled (one node per value and type) and hoisted to the top: first
  those PyTorch's passes create inside loops (the loop's ``True``, a default argument
  used in a loop), latest first; then the other default arguments, latest first; then
  the constants the code writes, in the order it writes them;
* an aten call writes every argument of its schema, those left at their defaults as
  constants (``aten::add(%x, %y, %alpha)``, ``aten::sum(%x, %dtype)``);
* values keep the names of the variables that held them, made unique the way
  PyTorch's compiler names them: each read of a variable and each assignment names a
  value, and a name taken again moves its old holder to ``name.<k>``, ``k`` odd and
  growing per name (``%x.1``, ``%x.3``...); the values with no variable are numbered;
* calls, ``prim::If``/``prim::Loop`` and the constants the code writes carry a
  source-range comment (``# file.py:3:4``): the user's line and the column of the
  statement that wrote them, which the frontend records for each compiled line
  (:class:`SourceText`); PyTorch's column is the expression's.

Constructs it does not model raise :class:`ember.jit._code_ssa.Unmodelled` (``.graph``
then prints the code).
"""
import ast

from ember.jit._code_ssa import Unmodelled, build

__all__ = ["graph_text", "SourceText"]

_SCALARS = ("int", "float", "bool")
# int and float arithmetic and comparisons keep their aten names on scalars
_COMPARE = {"lt", "gt", "le", "ge", "eq", "ne", "__not__"}
# the aten calls printed, with the argument counts (as the code writes them) that make
# a full call of the schema TorchScript picks, once the defaults of _DEFAULTS are filled
# in: another call, or another count, is not modelled (arguments would be missing)
_ARITY = {
    **dict.fromkeys(("neg", "relu", "tanh", "sigmoid", "sin", "cos", "exp", "log", "abs",
                     "sqrt", "t", "__not__", "dim", "numel", "is_floating_point", "sum",
                     "mean", "zeros", "ones", "rand", "randn", "empty", "zeros_like",
                     "ones_like", "unbind"), {1}),
    **dict.fromkeys(("mul", "div", "matmul", "mm", "bmm", "gt", "lt", "ge", "le", "eq",
                     "ne", "reshape", "view", "append", "unsqueeze", "floordiv",
                     "remainder", "pow", "maximum", "minimum", "__and__", "__or__",
                     "expand_as", "view_as", "type_as", "chunk", "softmax", "log_softmax",
                     "split"), {2}),
    **dict.fromkeys(("select", "linear", "transpose", "where", "addmm"), {3}),
    "add": {2, 3}, "sub": {2, 3}, "size": {1, 2}, "squeeze": {1, 2}, "cat": {1, 2},
    "stack": {1, 2}, "flatten": {1, 3},
}
# functions whose result is not a Tensor
_RESULT = {"size": None, "len": "int", "bool": "bool", "int": "int", "float": "float",
           "dim": "int", "numel": "int", "chunk": "Tensor[]", "split": "Tensor[]",
           "unbind": "Tensor[]", "is_floating_point": "bool", "item": "Scalar"}
# builtins that are aten operators of another spelling
_BUILTINS = {"bool": "aten::Bool", "int": "aten::Int", "float": "aten::Float",
             "len": "aten::len", "print": "prim::Print"}
# the arguments a schema fills in when a call leaves them out: name -> (arity as
# written -> the constants appended), for the overload TorchScript picks
_NONE4 = (None, None, None, None)
_DEFAULTS = {
    "sum": {1: (None,)}, "mean": {1: (None,)}, "softmax": {2: (None,)},
    "log_softmax": {2: (None,)}, "chunk": {2: (0,)}, "cat": {1: (0,)}, "stack": {1: (0,)},
    "zeros": {1: _NONE4}, "ones": {1: _NONE4}, "empty": {1: _NONE4 + (None,)},
    "rand": {1: _NONE4}, "randn": {1: _NONE4}, "zeros_like": {1: _NONE4 + (None,)},
    "ones_like": {1: _NONE4 + (None,)}, "split": {2: (0,)}, "unbind": {1: (0,)},
    "squeeze": {}, "flatten": {1: (0, -1)}, "transpose": {}, "matmul": {},
    "sigmoid": {}, "tanh": {}, "relu": {},
}


class SourceText(str):
    """Compiled TorchScript source that remembers, for each of its lines, the line of
    the user's file whose statement wrote it (None for the signature), so that
    ``.graph`` can print PyTorch's source-range comments."""

    def __new__(cls, text, file=None, lines=None):
        s = super().__new__(cls, text)
        s.file, s.lines = file, lines
        return s

    def __reduce__(self):
        return (SourceText, (str(self), self.file, self.lines))


def _const_type(text):
    if text == "None":
        return "NoneType", None
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if text in ("inf", "nan"):
            return "float", float(text)
        raise Unmodelled(f"graph: constant {text}") from None
    t = {bool: "bool", int: "int", float: "float", str: "str"}.get(type(v))
    if t is None:
        raise Unmodelled(f"graph: constant {text}")
    return t, v


def _const_text(t, v):
    if v is None:
        return "prim::Constant()"
    if t == "bool":
        return f"prim::Constant[value={int(v)}]()"
    if t == "float":
        if v != v or v in (float("inf"), float("-inf")):
            s = repr(v)
        else:
            s = f"{v:.17g}" if v != int(v) or abs(v) >= 1e16 else f"{v:.0f}."
            if "e" not in s and "." not in s:
                s += "."
        return f"prim::Constant[value={s}]()"
    if t == "str":
        return f'prim::Constant[value="{v}"]()'
    return f"prim::Constant[value={v}]()"


def _annotation(text):
    """TorchScript's printed type of a parameter annotation."""
    text = text.strip().replace("torch.Tensor", "Tensor")
    if text.startswith("List[") and text.endswith("]"):
        return _annotation(text[5:-1]) + "[]"
    if text.startswith("Tuple[") and text.endswith("]"):
        return "(" + ", ".join(_annotation(p) for p in _split(text[6:-1])) + ")"
    if text.startswith("Optional[") and text.endswith("]"):
        return _annotation(text[9:-1]) + "?"
    return text


def _split(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += 1 if ch in "[(" else -1 if ch in "])" else 0
        cur += ch
    return parts + [cur] if cur.strip() else parts


def _debug_names(events):
    """The final debug name of each named value: PyTorch's rule that a name given to a
    second value moves the first to ``name.<k>`` (``k`` from the name's own counter,
    which steps by two), replayed over the naming events in order."""
    owner, name_of, counter = {}, {}, {}

    def give(obj, name):
        old = name_of.pop(id(obj), None)
        if old is not None and owner.get(old) is obj:
            del owner[old]
        prev = owner.get(name)
        if prev is not None and prev is not obj:
            base, k = name, 1
            head, dot, tail = name.rpartition(".")
            if dot and tail.isdigit():
                base, k = head, int(tail)
            if base in counter:
                k = max(k, counter[base] + 1)
            while True:
                cand = f"{base}.{k}"
                k += 1
                if cand not in owner:
                    break
            counter[base] = k
            give(prev, cand)
        owner[name] = obj
        name_of[id(obj)] = name

    for obj, name in events:
        give(obj, name)
    return name_of


class _Printer:
    def __init__(self, graph, fdef, attr_type, method_type, function_type, positions):
        self.graph, self.attr_type, self.method_type = graph, attr_type, method_type
        self.function_type = function_type
        self.positions = positions
        self.debug = _debug_names(graph.events)
        self.types, self.names = {}, {}
        self.lines = []
        self.n = 0
        self.pool = {}        # (type, value) -> (value name, its group)
        self.created = {id(c): i for i, c in enumerate(graph.consts)}
        self.const_lines = {"function": [], "block": [], "default": [], "literal": []}
        self.functions = {}   # id(value) -> the qualified name of the script function
        annotations = {a.arg: ast.unparse(a.annotation) if a.annotation is not None
                       else "Tensor" for a in fdef.args.args}
        self.head = []
        for name, v in graph.params:
            t = _annotation(annotations[name]) if name != "self" else attr_type(None)
            self.types[id(v)] = t
            self.head.append(f"%{self.name(v)} : {t}")
        self.block_depth = 0

    def name(self, v):
        if id(v) not in self.names:
            d = self.debug.get(id(v))
            if d is None:
                self.n += 1
                d = str(self.n)
            self.names[id(v)] = d
        return self.names[id(v)]

    def where(self, node):
        """The source-range comment of a node: its statement's place in the user's
        file."""
        if self.positions is None or node is None or node.where is None:
            return ""
        file, lines = self.positions
        at = lines[node.where - 1] if 0 < node.where <= len(lines) else None
        return f" # {file}:{at[0]}:{at[1]}" if at else ""

    def ref(self, v):
        return "%" + self.name(v)

    def emit(self, level, text):
        self.lines.append("  " * level + text)

    # -- constants ---------------------------------------------------------------------
    def constant(self, t, v, kind, value=None):
        """The pooled constant of type ``t`` and value ``v`` (its value name)."""
        key = (t, repr(v))
        if key in self.pool:
            name, k = self.pool[key]
            if kind == "literal" and k != "literal":
                # a written constant of the same value: pooled where the code writes it
                line = next(ln for ln in self.const_lines[k]
                            if ln[1].startswith(name + " "))
                self.const_lines[k].remove(line)
                src = self.where(value.node) if value is not None else ""
                self.const_lines["literal"].append(
                    (self.created.get(id(value.node), 0) if value is not None else 0,
                     line[1] + src))
                self.pool[key] = (name, "literal")
            return name
        if value is not None and id(value) in self.debug:
            name = "%" + self.name(value)
        else:
            self.n += 1
            name = f"%{self.n}"
        self.pool[key] = (name, kind)
        order = self.created.get(id(value.node), 0) if value is not None else 0
        # written constants and the loop's own have a source range, defaults none
        src = self.where(value.node) if value is not None and \
            not value.node.info[2] else ""
        self.const_lines[kind].append((order,
                                       f"{name} : {t} = {_const_text(t, v)}{src}"))
        return name

    def value(self, v, level, kind=None):
        """The printed name of ``v``, its type recorded; ``kind``: the pooled group of
        a constant (its own by default)."""
        n = v.node
        if n is not None and n.kind == "const" and n.fmt(()).startswith("__torch__."):
            # a script function, called by ``prim::CallFunction``
            qual = n.fmt(())
            self.types[id(v)] = "Function"
            key = ("Function", qual)
            if key not in self.pool:
                self.n += 1
                self.pool[key] = (f"%{self.n}", "function")
                self.const_lines["function"].append(
                    (0, f'%{self.n} : Function = prim::Constant[name="'
                        f'{qual.rsplit(".", 1)[1]}"]()'))
            self.functions[id(v)] = qual
            return self.pool[key][0]
        if n is not None and n.kind == "const":
            t, c = _const_type(n.fmt(()))
            kind = kind or ("literal" if n.info[1] else "block")
            self.types[id(v)] = t
            return self.constant(t, c, kind, v)
        return self.ref(v)

    # -- nodes -------------------------------------------------------------------------
    def block(self, b, level):
        for n in b.nodes:
            self.node(n, level)

    def node(self, n, level):
        if n.kind == "if":
            self.if_(n, level)
        elif n.kind == "loop":
            self.loop(n, level)
        elif n.kind == "unpack":
            src = n.inputs[0]
            ins = self.value(src, level)
            st = self.types.get(id(src), "Tensor[]")
            if st.endswith("[]"):
                ts, op = [st[:-2]] * len(n.outputs), "prim::ListUnpack"
            elif st.startswith("("):
                ts, op = [p.strip() for p in _split(st[1:-1])], "prim::TupleUnpack"
            else:
                raise Unmodelled(f"graph: unpacking a {st}")
            self.outputs(n, ts, f"{op}({ins})", level)
        elif n.kind == "setattr":
            obj, v = (self.value(x, level) for x in n.inputs)
            attr = n.fmt(["", ""]).split(".", 1)[1].split(" ", 1)[0]
            self.emit(level, f' = prim::SetAttr[name="{attr}"]({obj}, {v})')
        elif n.kind == "op":
            self.op(n, level)
        else:
            raise Unmodelled(f"graph: a {n.kind} node")

    def outputs(self, n, types, rhs, level):
        for v, t in zip(n.outputs, types):
            self.types[id(v)] = t
        lhs = ", ".join(f"{self.ref(v)} : {t}" for v, t in zip(n.outputs, types))
        # calls have a source range; the nodes PyTorch's compiler adds around them none
        src = self.where(n) if n.info is not None and \
            n.info[0] in ("call", "method", "function") else ""
        self.emit(level, (f"{lhs} = {rhs}" if n.outputs else f" = {rhs}") + src)

    def op(self, n, level):
        info = n.info
        if info is None:
            raise Unmodelled("graph: an op without its kind")
        ins = [self.value(v, level) for v in n.inputs]
        tys = [self.types.get(id(v), "Tensor") for v in n.inputs]
        kind = info[0]
        if kind == "attr":
            t = self.attr_type(info[1]) if tys[0] == self.attr_type(None) else None
            if t is None:
                raise Unmodelled(f"graph: attribute {info[1]} of a {tys[0]}")
            return self.outputs(n, [t], f'prim::GetAttr[name="{info[1]}"]({ins[0]})',
                                level)
        if kind == "method":
            t = self.method_type(tys[0], info[1])
            return self.outputs(n, [t], f'prim::CallMethod[name="{info[1]}"]('
                                + ", ".join(ins) + ")", level)
        if kind == "tuple":
            return self.outputs(n, ["(" + ", ".join(tys) + ")"],
                                "prim::TupleConstruct(" + ", ".join(ins) + ")", level)
        if kind == "list":
            item = tys[0] if tys else "int"
            if any(t != item for t in tys):
                raise Unmodelled("graph: a list of mixed types")
            return self.outputs(n, [item + "[]"],
                                "prim::ListConstruct(" + ", ".join(ins) + ")", level)
        if kind == "call":
            return self.call(n, info[1], info[2], ins, tys, level)
        if kind == "function" and id(n.inputs[0]) in self.functions:
            t = self.function_type(self.functions[id(n.inputs[0])])
            return self.outputs(n, [t], "prim::CallFunction(" + ", ".join(ins) + ")",
                                level)
        raise Unmodelled(f"graph: a {kind} expression")

    def call(self, n, fn, kws, ins, tys, level):
        if fn in _BUILTINS:
            op, t = _BUILTINS[fn], _RESULT.get(fn)
        elif fn.startswith("torch.") and fn.count(".") == 1:
            name = fn[6:]
            op = "aten::" + name
            scalar = tys and all(t in _SCALARS for t in tys)
            if scalar:
                t = "bool" if name in _COMPARE else \
                    "float" if "float" in tys else "int"
            elif name == "size":
                t = "int" if len(ins) == 2 else "int[]"
            elif name == "append":
                t = tys[0]
            elif name in _COMPARE and tys and tys[0] != "Tensor":
                t = "bool"
            else:
                t = _RESULT.get(name, "Tensor")
            if name in ("add_", "sub_"):
                name = name[:-1]   # as add and sub: the in-place overload's arguments
            if len(ins) not in _ARITY.get(name, ()) or kws:
                raise Unmodelled(f"graph: a call of {fn} with {len(ins)} arguments")
            if not scalar:
                if name in ("add", "sub") and len(ins) == 2 and tys[0] == "Tensor":
                    ins.append(self.constant("int", 1, self.default_kind()))
                else:
                    for c in _DEFAULTS.get(name, {}).get(len(ins), ()):
                        ins.append(self.constant("NoneType" if c is None else "int", c,
                                                 self.default_kind()))
        else:
            raise Unmodelled(f"graph: a call of {fn}")
        if t is None or t == "Scalar":
            raise Unmodelled(f"graph: the result type of {fn}")
        rhs = f"{op}(" + ", ".join(ins) + ")"
        if not n.outputs:
            return self.emit(level, " = " + rhs + self.where(n))
        self.outputs(n, [t] * len(n.outputs) if len(n.outputs) > 1 else [t], rhs, level)

    def default_kind(self):
        return "block" if self.block_depth else "default"

    def if_(self, n, level):
        cond = self.value(n.inputs[0], level)
        at = len(self.lines)
        self.emit(level, "")
        self.block_depth += 1
        outs = []
        for i, b in enumerate(n.blocks):
            self.emit(level + 1, f"block{i}():")
            self.block(b, level + 2)
            rets = [self.value(v, level + 2) for v in b.ret.inputs]
            outs.append([self.types.get(id(v), "Tensor") for v in b.ret.inputs])
            self.emit(level + 2, "-> (" + ", ".join(rets) + ")")
        self.block_depth -= 1
        types = [a if a == b else _unify(a, b) for a, b in zip(*outs)]
        for v, t in zip(n.outputs, types):
            self.types[id(v)] = t
        lhs = ", ".join(f"{self.ref(v)} : {t}" for v, t in zip(n.outputs, types))
        self.lines[at] = "  " * level + (f"{lhs} = " if lhs else " = ") + \
            f"prim::If({cond})" + self.where(n)

    def loop(self, n, level):
        self.block_depth += 1
        # the condition, when constant, is pooled with the loop's own constants
        ins = [self.value(v, level, "block" if i == 1 else None)
               for i, v in enumerate(n.inputs)]
        body = n.blocks[0]
        types = [self.types.get(id(v), "Tensor") for v in n.inputs[2:]]
        self.types[id(body.inputs[0])] = "int"
        for v, t in zip(body.inputs[1:], types):
            self.types[id(v)] = t
        for v, t in zip(n.outputs, types):
            self.types[id(v)] = t
        lhs = ", ".join(f"{self.ref(v)} : {t}" for v, t in zip(n.outputs, types))
        self.emit(level, (f"{lhs} = " if lhs else " = ") +
                  "prim::Loop(" + ", ".join(ins) + ")" + self.where(n))
        self.emit(level + 1, "block0(" + ", ".join(
            f"{self.ref(v)} : {self.types[id(v)]}" for v in body.inputs) + "):")
        self.block(body, level + 2)
        rets = [self.value(v, level + 2) for v in body.ret.inputs]
        self.emit(level + 2, "-> (" + ", ".join(rets) + ")")
        self.block_depth -= 1

    def text(self):
        ret = [self.value(v, 1) for v in self.graph.body.ret.inputs]
        # written constants in the order the code creates them; PyTorch's own, latest
        # first
        consts = [ln for _, ln in reversed(self.const_lines["block"])] + \
            [ln for _, ln in reversed(self.const_lines["default"])] + \
            [ln for _, ln in self.const_lines["function"]] + \
            [ln for _, ln in sorted(self.const_lines["literal"], key=lambda x: x[0])]
        body = ["  " + c for c in consts] + self.lines
        return ("graph(" + ",\n      ".join(self.head) + "):\n" + "\n".join(body) +
                ("\n" if body else "") + "  return (" + ", ".join(ret) + ")\n")


def _unify(a, b):
    if "NoneType" in (a, b):
        other = b if a == "NoneType" else a
        return other if other.endswith("?") else other + "?"
    raise Unmodelled(f"graph: branches of types {a} and {b}")


def _result_type(source):
    """The annotated result type of a ``def``'s source (``Tensor`` when none)."""
    fdef = ast.parse(source).body[0]
    return _annotation(ast.unparse(fdef.returns)) if fdef.returns is not None else "Tensor"


def _no_method(type_, name):
    raise Unmodelled(f"graph: method {name} of a {type_}")


def graph_text(source, attr_type=None, method_type=None, self_var=False,
               function_sources=None, positions=None):
    """PyTorch's printed IR of one compiled TorchScript ``def``. ``attr_type(name)``:
    the type of ``self.<name>`` (``attr_type(None)``: ``self``'s own type);
    ``method_type(type, name)``: the result type of a method called on a value of
    ``type``; ``self_var``: see :func:`ember.jit._code_ssa.build`;
    ``function_sources``: qualified name -> source of the script functions it calls;
    ``positions``: (file, the user's (line, column) of each source line), for the
    source-range comments (by default those a :class:`SourceText` carries).
    Raises
    :class:`Unmodelled` for what it does not model."""
    graph, fdef = build(source, self_var)
    def function_type(qual):
        src = (function_sources or {}).get(qual)
        if src is None:
            raise Unmodelled(f"graph: the script function {qual}")
        return _result_type(src)
    if positions is None and getattr(source, "lines", None) is not None:
        positions = (source.file, source.lines)
    p = _Printer(graph, fdef, attr_type or (lambda name: None),
                 method_type or _no_method, function_type, positions)
    p.lines = []
    p.block(graph.body, 1)
    return p.text()
