"""Print a scripted function's ``.code`` as PyTorch does: from its SSA graph.

The rules are PyTorch's Python printer's, described here in ember's words:

* a value is written inline into its single use when it is a constant, or when it has
  no variable name (or only feeds the end of its block), is used once, and is the value
  computed just before its user in the order an expression tree is evaluated (reading
  the user's inputs right to left while stepping back through the block);
* an inlined expression that makes a line of 40 or more characters (counting two
  spaces per indent level) is split out into its own assignment, together with the
  inlined inputs its user evaluates before it, so that evaluation order is kept;
* every other value is assigned to a name: its variable's name, or ``_`` numbered, made
  unique by appending ``0``, ``1``... to the name;
* an ``if`` with outputs assigns them at the end of each branch; a loop assigns its
  carried values before the loop (one line each) and at the end of each trip (one
  line); a ``while`` loop keeps its condition in a numbered name.

The graph comes from :mod:`ember.jit._code_ssa`.
"""
from ember.jit._code_ssa import Unmodelled, build

__all__ = ["ssa_code", "Unmodelled"]

_RESERVED = {
    "_", "aten", "attribute", "CONSTANTS", "fork", "getattr", "inf", "nan", "infj",
    "nanj", "ops", "__torch__", "torch", "annotate", "uninitialized",
    "unchecked_cast", "False", "None", "True", "and", "as", "assert", "async",
    "await", "break", "class", "continue", "def", "del", "elif", "else", "except",
    "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
    "print", "range", "len", "int", "float", "bool", "str", "list", "tuple", "dict",
    "isinstance", "hasattr",
}


class _Printer:
    def __init__(self):
        self.lines = []
        self.level = 0
        self.used = set()
        self.next_id = {}
        self.names = {}     # id(value) -> assigned name
        self.exprs = {}     # id(value) -> inlined expression text
        self.inline = set()  # id(node) of nodes written inline
        self.split_seen = {}

    # -- names -------------------------------------------------------------------------
    def gen_name(self, candidate):
        name = candidate
        while name in self.used or name in _RESERVED:
            n = self.next_id.get(name, 0)
            self.next_id[name] = n + 1
            name = candidate + str(n)
        self.used.add(name)
        return name

    def name_values(self, values):
        for v in values:
            base = v.name if v.name else "_"
            self.names[id(v)] = self.gen_name(base)

    def use(self, v):
        if id(v) in self.names:
            return self.names[id(v)]
        return self.exprs[id(v)]

    def alias(self, v, w):
        if id(w) in self.names:
            self.names[id(v)] = self.names[id(w)]
        else:
            self.exprs[id(v)] = self.exprs[id(w)]

    # -- deciding what is inlined --------------------------------------------------------
    @staticmethod
    def can_inline(v):
        n = v.node
        if n is None or n.kind != "op" or len(n.outputs) != 1 or len(v.uses) != 1:
            return False
        user, offset = v.uses[0]
        if v.name is not None and user.kind != "return":
            return False
        if user.kind == "loop" and offset >= 2:
            return False
        return True

    def scan_value(self, point, v):
        n = v.node
        if n is not None and n is point and self.can_inline(v):
            point = self.scan_node(point)
            self.inline.add(id(n))
        elif v.is_const:
            self.inline.add(id(n))
        return point

    def scan_node(self, n):
        if id(n) in self.inline:
            return n
        for b in n.blocks:
            self.scan_block(b)
        point = n.prev()
        for v in reversed(n.inputs):
            point = self.scan_value(point, v)
        return point

    def scan_block(self, b):
        self.scan_node(b.ret)
        for n in reversed(b.nodes):
            self.scan_node(n)

    # -- writing -----------------------------------------------------------------------
    def emit(self, text):
        self.lines.append("  " * self.level + text)

    def long(self, text):
        return len(text) + self.level * 2 >= 40

    def define(self, node, expr):
        self.name_values(node.outputs)
        if node.outputs:
            self.emit(", ".join(self.use(v) for v in node.outputs) + " = " + expr)
        else:
            self.emit(expr)

    def split_long(self, v):
        todo = []
        user, offset = v.uses[0]
        self.scan_long(user, offset, todo)
        for w in reversed(todo):
            self.define(w.node, self.use(w))

    def scan_long(self, user, offset, todo):
        seen = self.split_seen.get(id(user))
        stop = seen + 1 if seen is not None else 0
        for i in range(offset, stop - 1, -1):
            w = user.inputs[i]
            if w.node is not None and w.node.kind == "op" and id(w.node) in self.inline:
                todo.append(w)
        self.split_seen[id(user)] = offset
        if seen is None and id(user) in self.inline:
            u, off = user.output.uses[0]
            self.scan_long(u, off - 1, todo)

    def assignment(self, lhs, rhs):
        if lhs:
            self.emit(", ".join(self.use(v) for v in lhs) + " = " +
                      ", ".join(self.use(v) for v in rhs))

    def print_block(self, b, has_other):
        if not has_other and not b.nodes:
            self.emit("pass")
        for n in b.nodes:
            self.print_node(n)

    def print_node(self, n):
        if n.kind == "return":
            if n.inputs:
                self.emit("return " + ", ".join(self.use(v) for v in n.inputs))
        elif n.kind == "if":
            self.name_values(n.outputs)
            self.emit(f"if {self.use(n.inputs[0])}:")
            for i, b in enumerate(n.blocks):
                if i:
                    self.emit("else:")
                self.level += 1
                self.print_block(b, bool(n.outputs))
                self.assignment(n.outputs, b.ret.inputs)
                self.level -= 1
        elif n.kind == "loop":
            self.print_loop(n)
        elif n.kind == "unpack":
            self.name_values(n.outputs)
            self.emit(", ".join(self.use(v) for v in n.outputs) + ", = " +
                      self.use(n.inputs[0]))
        elif n.kind == "setattr":
            self.emit(n.fmt([self.use(v) for v in n.inputs]))
        else:
            text = n.fmt([self.use(v) for v in n.inputs])
            if id(n) not in self.inline or (n.kind == "const" and self.long(text)):
                self.define(n, text)
            else:
                self.exprs[id(n.output)] = text
                if self.long(text):
                    self.split_long(n.output)

    def print_loop(self, n):
        body = n.blocks[0]
        self.name_values(n.outputs)
        for bi, out in zip(body.inputs[1:], n.outputs):
            self.alias(bi, out)
        for out, init in zip(n.outputs, n.inputs[2:]):
            self.emit(f"{self.use(out)} = {self.use(init)}")
        trip = body.inputs[0]
        self.name_values([trip])
        if n.loop_kind == "for":
            self.emit(f"for {self.use(trip)} in range({self.use(n.inputs[0])}):")
            carried_in, carried_out = body.inputs[1:], body.ret.inputs[1:]
        else:
            self.assignment([trip], [n.inputs[1]])
            self.emit(f"while {self.use(trip)}:")
            carried_in, carried_out = body.inputs, body.ret.inputs
        self.level += 1
        self.print_block(body, bool(carried_in))
        self.assignment(carried_in, carried_out)
        self.level -= 1


def ssa_code(source):
    """PyTorch's printed form of one TorchScript ``def`` (its header kept as written).

    Raises :class:`Unmodelled` for constructs the SSA reader does not model."""
    graph, fdef = build(source)
    p = _Printer()
    for name, v in graph.params:
        p.names[id(v)] = p.gen_name(name)
    lines = source.splitlines()
    header = lines[:fdef.body[0].lineno - 1]
    # a parameter a line, indented four spaces (a loaded file's class indent removed)
    header = header[:1] + ["    " + ln.strip() for ln in header[1:]]
    p.scan_block(graph.body)
    p.level = 1
    for c in graph.consts:
        if c.output.uses:
            text = c.fmt(())
            if id(c) in p.inline and not p.long(text):
                p.exprs[id(c.output)] = text
            else:
                p.define(c, text)
    p.print_block(graph.body, bool(graph.body.ret.inputs))
    p.print_node(graph.body.ret)
    return "\n".join(header + p.lines)
