"""A scripted function's TorchScript source as a graph in SSA form, for printing ``.code``.

PyTorch compiles a scripted function to a graph of single-assignment values (an ``if``
that assigns ``y`` in its branches becomes a node with one output, a loop's reassigned
variables become loop-carried values) and prints ``.code`` from that graph, not from the
text the user wrote. ember's frontend writes TorchScript source; :func:`build` reads it
back into the same shape of graph (values named after the variables that hold them,
nodes in evaluation order, blocks for branches and loop bodies, early returns moved into
``if`` outputs, constant integer arithmetic folded) so that :mod:`ember.jit._code_print`
can print what PyTorch prints. The same graph gives ``.graph``
(:mod:`ember.jit._script_graph`): each node also records what it computes (``info``)
and its statement's line, and the graph the debug-name events of PyTorch's compiler
(each variable read and assignment, then its SSA pass's names for branch and loop
outputs) that give values their ``.1``, ``.3``... suffixes. A construct this reader
does not model raises :class:`Unmodelled`, and ``.code`` then shows the source as
compiled.
"""
import ast

__all__ = ["Unmodelled", "Value", "Node", "Block", "build"]

# roots of dotted names that are functions, not objects whose methods are called
_FUNCTION_ROOTS = {"torch", "ops", "math"}
# ops with several results (a node with several outputs, not a tuple to unpack)
_MULTI_OUT = {"torch." + n for n in (
    "max", "min", "sort", "topk", "kthvalue", "mode", "median", "nanmedian", "lstm", "gru",
    "rnn_tanh", "rnn_relu", "lstm_cell", "var_mean", "std_mean", "aminmax", "frexp",
    "cummax", "cummin", "slogdet", "qr", "svd", "lu_unpack", "_unique2", "unique_dim",
    "unique_consecutive", "native_batch_norm", "native_layer_norm", "histogram",
    "_native_multi_head_attention", "_transformer_encoder_layer_fwd")}
# calls whose arguments include a type, printed as written
_TYPE_FIRST = {"annotate", "unchecked_cast"}
_INT_MAX = "9223372036854775807"


class Unmodelled(Exception):
    """The source uses a construct the SSA reader does not model."""


class Value:
    """One SSA value: a parameter, a block input, a constant or a node's output."""
    __slots__ = ("node", "name", "uses", "text", "target")

    def __init__(self, node=None, name=None, text=None):
        self.node, self.name, self.text = node, name, text
        self.uses = []   # (node, input offset)
        self.target = None   # the ast Name it was bound to first (for the IR's names)

    @property
    def is_const(self):
        return self.node is not None and self.node.kind == "const"


class Node:
    """An operation: ``kind`` is op/const/if/loop/unpack/return; ``fmt`` renders an op's
    right-hand side from its inputs' printed text."""
    __slots__ = ("kind", "inputs", "outputs", "blocks", "fmt", "block", "loop_kind", "pure",
                 "info", "where")

    def __init__(self, kind, inputs=(), n_out=1, fmt=None, names=None, pure=False):
        self.kind, self.fmt, self.blocks, self.block = kind, fmt, [], None
        self.loop_kind, self.pure = None, pure
        # what the op is, for the IR printer (ember.jit._script_graph): ("call", fn,
        # keyword names), ("attr", name), ("method", name), ("tuple",), ("list",)...
        self.info = None
        self.where = None   # (line, col) of the statement that made it (if/loop nodes)
        self.inputs = list(inputs)
        for i, v in enumerate(self.inputs):
            v.uses.append((self, i))
        names = names or [None] * n_out
        self.outputs = [Value(self, names[i]) for i in range(n_out)]

    @property
    def output(self):
        return self.outputs[0]

    def prev(self):
        """The node before this one in its block (None at the start)."""
        nodes = self.block.nodes
        i = len(nodes) if self.kind == "return" else self.block.index[id(self)]
        return nodes[i - 1] if i > 0 else None


class Block:
    """A list of nodes with inputs (loop bodies) and a return node for its outputs."""

    def __init__(self, builder=None):
        self.nodes, self.index, self.inputs = [], {}, []
        self.ret = None
        self.builder = builder

    def add(self, node):
        node.block = self
        if self.builder is not None:
            node.where = self.builder.line
        self.index[id(node)] = len(self.nodes)
        self.nodes.append(node)
        return node

    def finish(self, outputs):
        self.ret = Node("return", outputs, n_out=0)
        self.ret.block = self


def _is_temp(name):
    """ember's frontend names its own temporaries ``_0``, ``_1``...: no debug name."""
    return name.startswith("_") and name[1:].isdigit()


def _terminates(stmts):
    stmts = [s for s in stmts if not isinstance(s, ast.Pass)]
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and _terminates(last.body) and _terminates(last.orelse)


def _normalize(stmts):
    """Move the statements after an ``if`` with a returning branch into the branch that
    falls through (PyTorch's exit transform), recursively."""
    out = []
    stmts = [s for s in stmts if not isinstance(s, ast.Pass)]
    for i, s in enumerate(stmts):
        if isinstance(s, ast.If):
            body, orelse = list(s.body), list(s.orelse)
            rest = stmts[i + 1:]
            if _terminates(_normalize(body)) or _terminates(_normalize(orelse)):
                if not _terminates(_normalize(body)):
                    body = body + rest
                if not _terminates(_normalize(orelse)):
                    orelse = orelse + rest
                new = ast.If(test=s.test, body=_normalize(body), orelse=_normalize(orelse))
                ast.copy_location(new, s)
                out.append(new)
                return out
            new = ast.If(test=s.test, body=_normalize(body), orelse=_normalize(orelse))
            ast.copy_location(new, s)
            out.append(new)
        elif isinstance(s, (ast.For, ast.While)):
            if any(isinstance(n, (ast.Return, ast.Break, ast.Continue))
                   for b in s.body for n in ast.walk(b)):
                raise Unmodelled("return, break or continue inside a loop")
            out.append(s)
        else:
            out.append(s)
    return out


def _stored(stmts):
    """Names assigned in ``stmts``, in order of first assignment."""
    names = []
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in names:
                names.append(n.id)
    return names


def _loaded(stmts):
    """Names read in ``stmts``, in evaluation order of first read (approximately source
    order, which is evaluation order for the calls ember writes)."""
    found = []
    for s in stmts:
        for n in sorted((n for n in ast.walk(s) if isinstance(n, ast.Name)
                         and isinstance(n.ctx, ast.Load)),
                        key=lambda n: (n.lineno, n.col_offset)):
            if n.id not in found:
                found.append(n.id)
    return found


def _fold(fn, vals):
    """Integer and boolean arithmetic on constants, as PyTorch's constant propagation."""
    ops = {
        "torch.add": lambda a, b: a + b, "torch.sub": lambda a, b: a - b,
        "torch.mul": lambda a, b: a * b, "torch.floordiv": lambda a, b: a // b,
        "torch.lt": lambda a, b: a < b, "torch.gt": lambda a, b: a > b,
        "torch.le": lambda a, b: a <= b, "torch.ge": lambda a, b: a >= b,
        "torch.eq": lambda a, b: a == b, "torch.ne": lambda a, b: a != b,
        "torch.neg": lambda a: -a, "torch.__not__": lambda a: not a,
    }
    f = ops.get(fn)
    if f is None or any(type(v) not in (int, bool) for v in vals):
        return None
    try:
        return f(*vals)
    except (TypeError, ZeroDivisionError):
        return None   # left to raise when the code runs


class _Builder:
    def __init__(self, source, self_var=False):
        self.source, self.self_var = source, self_var
        self.consts = []
        # the debug-name events of PyTorch's compiler, in its order (see _debug_names):
        # those of its emitter as the statements are read, then those of its SSA pass
        self.events, self.deferred = [], []
        self.named = set()
        self.line = None   # the line (of the compiled source) of the statement being read
        self.frames = []   # the names an enclosing block defines, per nested block

    def name_event(self, obj, name, deferred=False):
        (self.deferred if deferred else self.events).append((obj, name))
        self.named.add(id(obj))

    # -- values ------------------------------------------------------------------------
    def const(self, text, literal=True, folded=False):
        node = Node("const", n_out=1)
        node.info = ("const", literal, folded)
        node.where = self.line
        node.fmt = lambda ins, t=text: t
        self.consts.append(node)
        return node.output

    @staticmethod
    def op(block, fmt, inputs, pure=True, info=None):
        node = block.add(Node("op", inputs, 1, fmt, pure=pure))
        node.info = info
        return node.output

    @staticmethod
    def const_value(v):
        if not v.is_const:
            return None
        try:
            return ast.literal_eval(v.node.fmt(()))
        except (ValueError, SyntaxError):
            return None

    # -- expressions -------------------------------------------------------------------
    def expr(self, e, env, block):
        seg = ast.get_source_segment(self.source, e) or ast.unparse(e)
        if isinstance(e, ast.Constant):
            return self.const(seg)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and \
                isinstance(e.operand, ast.Constant):
            return self.const(seg)
        if isinstance(e, ast.Name):
            if e.id in ("inf", "nan") and e.id not in env:
                return self.const(e.id)
            if e.id not in env:
                raise Unmodelled(f"name {e.id}")
            if (e.id != "self" or self.self_var) and not _is_temp(e.id):
                self.name_event(object(), e.id)   # PyTorch's load of the variable
            return env[e.id]
        if isinstance(e, ast.Attribute):
            if _dotted_root(e) in _FUNCTION_ROOTS | {"__torch__", "CONSTANTS"}:
                return self.const(seg)
            obj = self.expr(e.value, env, block)
            attr = e.attr
            node = block.add(Node("op", [obj], 1, lambda ins, a=attr: f"{ins[0]}.{a}",
                                  names=[attr], pure=True))
            node.info = ("attr", attr)
            self.name_event(node.output, attr)
            return node.output
        if isinstance(e, ast.Tuple):
            vals = [self.expr(x, env, block) for x in e.elts]
            return self.op(block, lambda ins: "(" + ", ".join(ins) +
                           (",)" if len(ins) == 1 else ")"), vals, info=("tuple",))
        if isinstance(e, ast.List):
            vals = [self.expr(x, env, block) for x in e.elts]
            return self.op(block, lambda ins: "[" + ", ".join(ins) + "]", vals,
                           info=("list",))
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.Not, ast.USub)):
            v = self.expr(e.operand, env, block)
            fn = "torch.__not__" if isinstance(e.op, ast.Not) else "torch.neg"
            r = _fold(fn, [self.const_value(v)]) if v.is_const else None
            if r is not None:
                return self.const(repr(r), folded=True)
            return self.op(block, lambda ins, fn=fn: f"{fn}({ins[0]})", [v],
                           info=("call", fn, []))
        if isinstance(e, ast.Dict) and None not in e.keys:
            vals = []
            for k, x in zip(e.keys, e.values):
                vals += [self.expr(k, env, block), self.expr(x, env, block)]
            return self.op(block, lambda ins: "{" + ", ".join(
                f"{ins[i]}: {ins[i + 1]}" for i in range(0, len(ins), 2)) + "}", vals,
                info=("dict",))
        if isinstance(e, ast.Subscript):
            tuple_index = seg.startswith("(")
            base = self.expr(e.value, env, block)
            idx = self.expr(e.slice, env, block)

            def index(ins, t=tuple_index):
                b = ins[0]
                if t or not b.isidentifier():
                    b = f"({b})"
                return f"{b}[{ins[1]}]"
            return self.op(block, index, [base, idx], info=("index",))
        if isinstance(e, ast.Call):
            return self.call(e, env, block)
        raise Unmodelled(type(e).__name__)

    def call(self, e, env, block):
        f = e.func
        if (isinstance(f, ast.Name) and f.id in env) or _dotted_root(f) == "__torch__":
            # a script function (a value: its qualified name, or a local bound to it)
            if e.keywords:
                raise Unmodelled("keyword arguments of a script function call")
            fn = self.expr(f, env, block) if isinstance(f, ast.Name) else \
                self.const(ast.unparse(f))
            vals = [fn] + [self.expr(a, env, block) for a in e.args]
            return self.op(block, lambda ins: f"{ins[0]}(" +
                           "".join(f"{a}, " for a in ins[1:]) + ")", vals, pure=False,
                           info=("function",))
        if isinstance(f, ast.Name) or _dotted_root(f) in _FUNCTION_ROOTS:
            fn = ast.unparse(f)
            args = list(e.args)
            vals = []
            if fn in _TYPE_FIRST and args:
                vals.append(self.const(ast.get_source_segment(self.source, args[0])
                                       or ast.unparse(args[0])))
                args = args[1:]
            vals += [self.expr(a, env, block) for a in args]
            kws = [k.arg for k in e.keywords]
            vals += [self.expr(k.value, env, block) for k in e.keywords]
            consts = [self.const_value(v) for v in vals]
            if not kws and vals and all(v.is_const for v in vals):
                r = _fold(fn, consts)
                if r is not None:
                    return self.const(repr(r), folded=True)
            n_pos = len(vals) - len(kws)

            def render(ins, fn=fn, kws=kws, n_pos=n_pos):
                parts = list(ins[:n_pos]) + [f"{k}={v}" for k, v in zip(kws, ins[n_pos:])]
                return f"{fn}({', '.join(parts)})"
            if fn == "print":
                block.add(Node("op", vals, 0, render)).info = ("call", fn, kws)
                return None
            return self.op(block, render, vals, pure=_pure(fn), info=("call", fn, kws))
        if isinstance(f, ast.Attribute):
            if e.keywords:
                raise Unmodelled("keyword arguments of a method call")
            obj = self.expr(f.value, env, block)
            vals = [obj] + [self.expr(a, env, block) for a in e.args]
            return self.op(block, lambda ins, m=f.attr: f"({ins[0]}).{m}(" +
                           "".join(f"{a}, " for a in ins[1:]) + ")", vals, pure=False,
                           info=("method", f.attr))
        raise Unmodelled("call of " + type(f).__name__)

    # -- statements --------------------------------------------------------------------
    def frame_block(self, stmts, benv, body, env):
        """A loop body: its own frame of PyTorch's compiler, whose parents see ``env``."""
        self.frames.append(set(env))
        try:
            return self.block(stmts, benv, body, [])
        finally:
            self.frames.pop()

    def bind(self, env, name, v, fresh=True):
        """``fresh``: the value was computed by the assignment (not a variable read)."""
        if v is None:
            raise Unmodelled("assignment of a call without a value")
        if v.name is None and not _is_temp(name) and v.node is not None:
            v.name = name
        folded = v.is_const and v.node.info[2]   # a new constant, named by no one
        if fresh and id(v) not in self.named and not _is_temp(name) and not folded:
            self.name_event(v, name)
        if self.frames and name in self.frames[-1] and not _is_temp(name):
            # PyTorch's compiler reads a variable it assigns in a block from the
            # enclosing one (to check its type): one more load named after it
            self.name_event(object(), name)
        env[name] = v

    def block(self, stmts, env, block, after):
        """Emit ``stmts`` into ``block``; returns the returned value, or None when the
        statements fall through. ``after``: the statements that run after these."""
        for i, s in enumerate(stmts):
            rest = stmts[i + 1:] + after
            self.line = s.lineno
            if isinstance(s, ast.Return):
                return self.expr(s.value, env, block) if s.value is not None \
                    else self.const("None")
            if isinstance(s, ast.Assign):
                if len(s.targets) != 1:
                    raise Unmodelled("chained assignment")
                line = self.source.splitlines()[s.lineno - 1]
                self.assign(s.targets[0], s.value, env, block,
                            line.split(" = ", 1)[0].rstrip().endswith(","))
            elif isinstance(s, ast.Expr):
                # an unused result stays a node: printed ``_0 = call(...)`` unless pure
                self.expr(s.value, env, block)
            elif isinstance(s, ast.If):
                ret = self.if_(s, env, block, rest)
                if ret is not None:
                    return ret
            elif isinstance(s, ast.For):
                self.for_(s, env, block, rest)
            elif isinstance(s, ast.While):
                self.while_(s, env, block, rest)
            else:
                raise Unmodelled(type(s).__name__)
        return None

    def assign(self, target, value, env, block, trailing_comma=False):
        if isinstance(target, ast.Name):
            self.bind(env, target.id, self.expr(value, env, block),
                      not isinstance(value, ast.Name))
        elif isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name)
                                                   for t in target.elts):
            fresh = [True] * len(target.elts)
            if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
                vals = [self.expr(x, env, block) for x in value.elts]
                fresh = [not isinstance(x, ast.Name) for x in value.elts]
            else:
                names = [None if _is_temp(t.id) else t.id for t in target.elts]
                if isinstance(value, ast.Call) and not trailing_comma and \
                        ast.unparse(value.func) in _MULTI_OUT:
                    # an op with several results: ``a, b = torch.max(x, 1)``
                    out = self.expr(value, env, block)
                    node = out.node
                    node.outputs = [Value(node, n) for n in names]
                    vals = node.outputs
                else:
                    src = self.expr(value, env, block)
                    node = block.add(Node("unpack", [src], len(names), names=names))
                    vals = node.outputs
            for t, v, f in zip(target.elts, vals, fresh):
                self.bind(env, t.id, v, f)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            obj = self.expr(target.value, env, block)
            v = self.expr(value, env, block)
            block.add(Node("setattr", [obj, v], 0,
                           lambda ins, a=target.attr: f"{ins[0]}.{a} = {ins[1]}"))
        else:
            raise Unmodelled("assignment target " + type(target).__name__)

    @staticmethod
    def _order(names, after, assigned):
        """Outputs of a control-flow node: first those read afterwards, in order of
        first read, then the others, latest assigned first."""
        loads = _loaded(after)
        first = [n for n in loads if n in names]
        others = [n for n in reversed(assigned) if n in names and n not in first]
        return first + others

    def if_(self, s, env, block, after):
        cond = self.expr(s.test, env, block)
        c = self.const_value(cond)
        if isinstance(c, bool):
            return self.block(s.body if c else s.orelse, env, block, after)
        node = block.add(Node("if", [cond], 0))
        envs, rets = [], []
        for stmts in (s.body, s.orelse):
            b = Block(self)
            node.blocks.append(b)
            benv = dict(env)
            self.frames.append(set(env))
            rets.append(self.block(stmts, benv, b, after))
            self.frames.pop()
            envs.append(benv)
        self.line = s.lineno
        if (rets[0] is None) != (rets[1] is None):
            raise Unmodelled("a return in one branch only")
        if rets[0] is not None:
            out = Value(node)
            node.outputs = [out]
            node.blocks[0].finish([rets[0]])
            node.blocks[1].finish([rets[1]])
            return out
        assigned = _stored(s.body) + [n for n in _stored(s.orelse) if n not in _stored(s.body)]
        names = [n for n in assigned if n in envs[0] and n in envs[1]]
        names = self._order(names, after, assigned)
        node.outputs = [Value(node, None if _is_temp(n) else n) for n in names]
        for n, v in zip(names, node.outputs):
            if not _is_temp(n):
                self.name_event(v, n, deferred=True)
        for b, benv in zip(node.blocks, envs):
            b.finish([benv[n] for n in names])
        for n, v in zip(names, node.outputs):
            env[n] = v
        return None

    def _loop(self, kind, env, block, after, body_stmts, target, max_v, cond_v):
        # a ``while`` whose condition is a variable the body sets (PyTorch's printed
        # form): the condition is the loop's own, not a carried value
        assigned = [n for n in _stored(body_stmts) if n != target]
        names = self._order([n for n in assigned if n in env], after, assigned)
        node = Node("loop", [max_v, cond_v] + [env[n] for n in names], len(names),
                    names=[None if _is_temp(n) else n for n in names])
        node.loop_kind = kind
        block.add(node)
        body = Block(self)
        node.blocks.append(body)
        trip = Value(None, None if target is None or _is_temp(target) else target)
        if trip.name is not None:
            self.name_event(trip, trip.name)
        body.inputs = [trip] + [Value(None, n) for n in names]
        for n, bi, out in zip(names, body.inputs[1:], node.outputs):
            if not _is_temp(n):
                # PyTorch's SSA pass: the body's input, a load at the body's end and
                # the loop's output, each named after the variable
                for obj in (bi, object(), out):
                    self.name_event(obj, n, deferred=True)
        benv = dict(env)
        if target is not None:
            benv[target] = trip
        for n, v in zip(names, body.inputs[1:]):
            benv[n] = v
        return node, body, benv, names

    def for_(self, s, env, block, after):
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and
                it.func.id == "range" and len(it.args) == 1 and not it.keywords and
                isinstance(s.target, ast.Name)) or s.orelse:
            raise Unmodelled("a for loop other than over range(n)")
        max_v = self.expr(it.args[0], env, block)
        node, body, benv, names = self._loop("for", env, block, after, s.body,
                                             s.target.id, max_v,
                                             self.const("True", literal=False))
        if self.frame_block(s.body, benv, body, env) is not None:
            raise Unmodelled("return inside a loop")
        self.line = s.lineno
        body.finish([self.const("True", literal=False)] + [benv[n] for n in names])
        for n, v in zip(names, node.outputs):
            env[n] = v

    def while_(self, s, env, block, after):
        if s.orelse:
            raise Unmodelled("while ... else")
        max_v = self.const(_INT_MAX)   # before the condition, as PyTorch creates it
        at = len(self.consts)
        cond = self.expr(s.test, env, block)
        flag = s.test.id if isinstance(s.test, ast.Name) and \
            s.test.id in _stored(s.body) else None
        if flag is not None and flag in _loaded(after):
            raise Unmodelled("a while loop's condition variable read after the loop")
        node, body, benv, names = self._loop("while", env, block, after, s.body, flag,
                                             max_v, cond)
        if self.frame_block(s.body, benv, body, env) is not None:
            raise Unmodelled("return inside a loop")
        self.line = s.lineno
        # PyTorch compiles the condition once and copies it to the body's end: its
        # variable reads name nothing there
        events, consts = len(self.events), len(self.consts)
        again = self.expr(s.test, benv, body)
        del self.events[events:]
        # and its constants are those of the condition's first reading
        new = self.consts[consts:]
        del self.consts[consts:]
        self.consts[at:at] = new
        body.finish([again] + [benv[n] for n in names])
        for n, v in zip(names, node.outputs):
            env[n] = v


_MUTATING = {"append", "insert", "extend", "clear", "pop", "remove", "_set_item",
             "__setitem__", "setdefault", "update", "warn", "manual_seed", "backward",
             "RaiseException", "sort", "reverse"}


def _pure(fn):
    """Whether a call only computes its result (so an unused one is dropped, as
    PyTorch's dead code elimination does)."""
    last = fn.rsplit(".", 1)[-1]
    if last.endswith("_") and not last.endswith("__") or last in _MUTATING:
        return False
    return fn not in ("print", "uninitialized") and "rand" not in last \
        and "dropout" not in last


def _dce(block):
    """Drop pure nodes whose results are unused, last first."""
    changed = True
    while changed:
        changed = False
        for n in list(reversed(block.nodes)):
            for b in n.blocks:
                _dce(b)
            if n.kind == "op" and n.pure and n.outputs and not any(v.uses
                                                                   for v in n.outputs):
                for i, v in enumerate(n.inputs):
                    v.uses.remove((n, i))
                block.nodes.remove(n)
                changed = True
    block.index = {id(n): i for i, n in enumerate(block.nodes)}


def _dotted_root(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class Graph:
    """A function's parameters (names), body block and constants."""

    def __init__(self, params, body, consts, events=()):
        self.params, self.body, self.consts = params, body, consts
        self.events = list(events)


def build(source, self_var=False):
    """The SSA graph of one TorchScript ``def`` (ember's compiled source). ``self_var``:
    ``self`` is a variable the code reads (a loaded file's code), not the module."""
    tree = ast.parse(source)
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        raise Unmodelled("expected one def")
    fdef = tree.body[0]
    b = _Builder(source, self_var)
    params = [a.arg for a in fdef.args.args]
    env = {}
    values = []
    for p in params:
        v = Value(None, p)
        env[p] = v
        values.append(v)
        b.name_event(v, p)
    body = Block(b)
    stmts = _normalize(fdef.body)
    ret = b.block(stmts, env, body, [])
    body.finish([ret] if ret is not None else [b.const("None")])
    _dce(body)
    return Graph(list(zip(params, values)), body, b.consts, b.events + b.deferred), fdef
