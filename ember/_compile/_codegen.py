"""A plan's forward and backward written out as straight-line Python functions.

:class:`ember._compile._plan.Plan` describes a graph as a list of steps, each with
flags that say how it runs (a linear layer's product, a primitive on its arguments as
recorded, a ReLU over its input, a fused chain, a sum written over its operand...).
A loop over that list would test the same flags, read the same attributes and copy
the same argument lists on every call. Instead, this module writes the source of one
function per way of running the plan (forward with or without the tape, with or
without the arena's buffers; backward with or without them): one block per step,
holding only the statements that step's flags select, steps in the plan's order, the
slots of the plan's slot list (``env``) named by number. What may change from call to
call stays a run-time test, where it is one (a linear layer's input being a matrix,
a sum's operands having one shape); the flags, slot numbers, op objects, kernels and
buffers are fixed by the plan and bound once, as names in the function's globals.
A function that binds the forward buffers is made again when their layout changes
(``Plan.acquire``).

The source is kept on the function (``fn.source``) and in :mod:`linecache` under
``<ember plan ...>``, so a traceback through a generated function shows its lines;
``Plan.sources()`` returns every generated function's source for reading.
"""
import itertools
import linecache

import numpy as np

from ember import _tensor

__all__ = ["backward_function", "forward_function"]

_serial = itertools.count()


class _Writer:
    """Lines of one function's source and the objects its names are bound to."""

    def __init__(self, scope):
        self.lines = []
        self.scope = dict(scope)
        self.ids = {}
        self.done = set()  # steps already written with another's (a ReLU with its linear)

    def bind(self, obj, hint):
        """A global name of the generated function holding ``obj`` (one per object)."""
        name = self.ids.get(id(obj))
        if name is None:
            name = f"{hint}{len(self.ids)}"
            self.ids[id(obj)] = name
            self.scope[name] = obj
        return name

    def emit(self, depth, text):
        self.lines.append("    " * depth + text)

    def function(self, name, what):
        source = "\n".join(self.lines) + "\n"
        filename = f"<ember plan {what} {next(_serial)}>"
        exec(compile(source, filename, "exec"), self.scope)
        fn = self.scope[name]
        fn.source = source
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        return fn


def _scope():
    from ember._compile import _plan
    from ember._compile._linear import linear_step
    from ember._compile._rewrites import _scatter, _zero_unwritten
    return {"_ndarray": np.ndarray, "_as_array": _tensor._as_array, "np": np,
            "_linear_step": linear_step, "_scatter": _scatter,
            "_zero_unwritten": _zero_unwritten,
            "_accumulate": _plan._accumulate, "_accumulate_into": _plan._accumulate_into,
            "_sum_to": _plan._sum_to, "_distinct": _plan._distinct,
            "_owned": _buffers_owned()}


def _buffers_owned():
    from ember._compile import _buffers
    return _buffers.owned


def _args(w, st, k):
    """The source of ``st``'s positional arguments as a list literal (the slot values
    where its Refs are, its recorded constants elsewhere)."""
    refs = dict(st.refs)
    parts = []
    for i, a in enumerate(st.args):
        if i in refs:
            parts.append(f"env[{refs[i]}]")
        elif a is None or type(a) in (bool, int) or (type(a) is float and a == a and
                                                     a not in (float("inf"), float("-inf"))
                                                     and repr(a) != "-0.0"):
            parts.append(repr(a))
        else:
            parts.append(w.bind(a, f"a{k}_"))
    return "[" + ", ".join(parts) + "]"


def _kwargs(w, st, k):
    return f", **{w.bind(st.kwargs, f'kw{k}_')}" if st.kwargs else ""


def _out(o):
    return f"env[{o}] = out if type(out) is _ndarray else _as_array(out)"


def _primitive(w, d, st, k, record):
    """``op.forward`` on the arguments as recorded, its state onto the tape when its
    gradient is wanted (the walk's ``st.plain`` branch)."""
    op = w.bind(st.op, f"op{k}_")
    w.emit(d, f"args = {_args(w, st, k)}")
    w.emit(d, f"out = {op}.forward(*args{_kwargs(w, st, k)})")
    w.emit(d, _out(st.outs[0]))
    if record and st.grad:
        w.emit(d, f"state = {op}.__dict__")
        w.emit(d, f"tape[{st.index}] = (args, dict(state) if state else state)")


def _run(w, d, st, k, record, arena):
    s = w.bind(st, f"st{k}_")
    call = f"{s}.run(env, slots, arena)" if arena else f"{s}.run(env, slots)"
    if record and st.grad:
        w.emit(d, f"tape[{st.index}] = {call}")
    else:
        w.emit(d, call)


def _add_into(w, d, st, k, record):
    """A sum written over its first operand (``_plan._fuse``); returns the depth of the
    block run when the operands do not qualify."""
    a, b, fn, drop = st.add_into
    f = w.bind(fn, f"over{k}_")
    w.emit(d, f"a, b = env[{a}], env[{b}]")
    w.emit(d, "if type(a) is _ndarray and type(b) is _ndarray and a.shape == b.shape "
              "and a.dtype == b.dtype:")
    w.emit(d + 1, f"env[{st.outs[0]}] = {f}(a, b)")
    if drop:
        # ``b`` is read by the sum alone and its producer's backward reads neither it
        # nor state: released here, as eager ember drops it after the sum (a cell's
        # input product: one array fewer held per call until the backward). The sum's
        # backward reads its operands' shape and dtype only: ``a``'s are ``b``'s
        w.emit(d + 1, f"env[{b}] = None")
        w.emit(d + 1, "b = a")
    if record and st.grad:
        w.emit(d + 1, f"tape[{st.index}] = ([a, b], None)")
    w.emit(d, "else:")
    return d + 1


def _linear(w, d, st, k, record):
    """A linear layer's product on a batch of rows (``_linear_step``); returns the depth
    of the block run otherwise."""
    x, wt, b = st.linear
    s = w.bind(st, f"st{k}_")
    w.emit(d, f"x = env[{x}]")
    w.emit(d, "if type(x) is _ndarray and x.ndim == 2:")
    if record:
        w.emit(d + 1, f"w, b = env[{wt}], env[{b}]")
        w.emit(d + 1, f"out = _linear_step({s}, b, x, w, kept)")
    else:
        w.emit(d + 1, f"out = _linear_step({s}, env[{b}], x, env[{wt}], kept)")
    w.emit(d + 1, _out(st.outs[0]))
    if record and st.grad:
        w.emit(d + 1, f"tape[{st.index}] = ([x, w, b], None)")
    w.emit(d, "else:")
    return d + 1


def _inplace(w, d, st, k, record):
    """A ReLU or tanh written over its input (``_plan._fuse``; what ``_Step.run`` does
    for it: its one argument is a Ref, its tape entry that argument)."""
    f = w.bind(st.inplace, f"inplace{k}_")
    w.emit(d, f"x = env[{st.refs[0][1]}]")
    w.emit(d, f"env[{st.outs[0]}] = {f}(x)")
    if record and st.grad:
        w.emit(d, f"tape[{st.index}] = ([x], None)")


def _step_heap(w, st, k, record):
    """One step of the forward without the arena's buffers: a sum written over its
    operand, a linear layer's product on a batch of rows, a primitive on its arguments
    as recorded, a ReLU or tanh over its input, else the step's general ``run``."""
    d = 1
    if st.add_into is not None:
        d = _add_into(w, d, st, k, record)
    if st.linear is not None:
        d = _linear(w, d, st, k, record)
    if st.plain:
        _primitive(w, d, st, k, record)
    elif st.inplace is not None:
        _inplace(w, d, st, k, record)
    else:
        _run(w, d, st, k, record, False)


def _step_arena(w, st, k, record):
    """One step of the forward with the arena's buffers: a fused chain's kernel (its
    members' arguments onto the tape), a primitive into its buffer or on its arguments
    as recorded, a ReLU or tanh over its input, else the step's general ``run``."""
    if st.skip:
        return
    g = st.group
    if g is not None:
        gr = w.bind(g, f"group{k}_")
        w.emit(1, f"{gr}.run(env, arena, colors)")
        if record:
            for m in g.steps:
                if m.grad:
                    w.emit(1, f"tape[{m.index}] = ({_args(w, m, f'{k}m{m.index}_')}, None)")
        return
    if st.plain:
        if st.color is not None:
            into = w.bind(st.into, f"into{k}_")
            buf = w.bind(st.buffer, f"buffer{k}_")
            w.emit(1, f"args = {_args(w, st, k)}")
            w.emit(1, f"env[{st.outs[0]}] = {into}(*args, out={buf})")
            if record and st.grad:
                w.emit(1, f"tape[{st.index}] = (args, None)")
            act = getattr(st.into, "act", None)
            if act is not None:  # the ReLU over this output, run by ``into`` itself
                w.emit(1, f"x = env[{act.refs[0][1]}]")
                w.emit(1, f"env[{act.outs[0]}] = x")
                if record and act.grad:
                    w.emit(1, f"tape[{act.index}] = ([x], None)")
                w.done.add(act.index)
            return
        _primitive(w, 1, st, k, record)
        return
    if st.inplace is not None and not st.nested:
        if st.index not in w.done:
            _inplace(w, 1, st, k, record)
        return
    _run(w, 1, st, k, record, True)


def forward_function(plan, arena, record):
    """``plan``'s forward as one function ``forward(inputs, params, arena)`` returning
    ``(env, tape)`` as :meth:`Plan.forward` does: ``arena`` says whether the forward
    buffers are used (the plan's current layout, ``plan.mode``), ``record`` whether the
    tape is kept."""
    w = _Writer(_scope())
    w.scope["slots"] = plan.slots
    w.emit(0, "def forward(inputs, params, arena):")
    w.emit(1, f"env = [None] * {plan.n_slots}")
    for k, s in enumerate(plan.input_slots):
        w.emit(1, f"env[{s}] = inputs[{k}]")
    for k, s in enumerate(plan.param_slots):
        w.emit(1, f"env[{s}] = params[{k}]")
    for s, a in plan.const:
        c = w.bind(a, "const")
        w.emit(1, f"env[{s}] = {c}._data" if isinstance(a, _tensor.Tensor) else
               f"env[{s}] = {c}")
    if record:
        w.emit(1, f"tape = [None] * {len(plan.steps)}")
    if arena:
        w.scope["colors"] = plan.colors
        for k, st in enumerate(plan.steps):
            _step_arena(w, st, k, record)
    else:
        w.emit(1, "kept = {}" if plan.kept_weights else "kept = None")
        for k, st in enumerate(plan.steps):
            _step_heap(w, st, k, record)
    w.emit(1, "return env, tape" if record else "return env, None")
    return w.function("forward", "forward")


def _vjp_call(w, d, st, k, arena):
    """The statements giving ``grads`` for one step: its vjp into the arena's buffers,
    else its class's declared vjp (a linear layer sharing the bias gradient of the
    one before it: ``_plan._biases``), else its rule's vjp."""
    if arena and st.bvjp is not None:
        w.emit(d, f"grads = {w.bind(st.bvjp, f'bvjp{k}_')}(state, args, ys, gouts)")
    elif st.declared is not None:
        vjp, op, out = st.declared
        v, o = w.bind(vjp, f"vjp{k}_"), w.bind(op, f"op{k}_")
        out = w.bind(out, f"out{k}_")
        if st.bias is not None:
            bare = w.bind(st.bias, f"bare{k}_")
            w.emit(d, "if g is bias_of and not state:")
            w.emit(d + 1, f"grads = {v}({bare}, gouts, args, ys, {out})")
            w.emit(d + 1, "grads[2] = bias.copy()")
            w.emit(d, "else:")
            d += 1
        w.emit(d, "if state:")
        w.emit(d + 1, f"{o}.__dict__ = state")
        w.emit(d, f"grads = {v}({o}, gouts, args, ys, {out})")
        if st.bias is not None:
            w.emit(d, "bias_of, bias = g, grads[2]")
    else:
        w.emit(d, f"grads = {w.bind(st.vjp, f'vjp{k}_')}(state, args, ys, gouts)")


def _gather(w, d, i, s, arena):
    """Gradient ``i`` of the step, reduced to its input's shape and dtype, added to
    slot ``s``'s (into the arena's buffer, or into a sum made here)."""
    w.emit(d, f"g = grads[{i}]")
    w.emit(d, "if g is not None:")
    d += 1
    w.emit(d, f"a = args[{i}]")
    w.emit(d, "if g.shape != a.shape:")
    w.emit(d + 1, "g = _sum_to(g, a.shape)")
    w.emit(d, "if g.dtype != a.dtype:")
    w.emit(d + 1, "g = g.astype(a.dtype)")
    w.emit(d, f"prev = G.get({s})")
    w.emit(d, "if prev is None:")
    w.emit(d + 1, f"G[{s}] = g")
    if arena:
        w.emit(d, "else:")
        w.emit(d + 1, f"_accumulate_into(G, {s}, g, arena)")
        return
    w.emit(d, f"elif sums.get({s}) is prev and type(prev) is _ndarray and "
              "type(g) is _ndarray and g.shape == prev.shape and g.dtype == prev.dtype:")
    w.emit(d + 1, "np.add(prev, g, out=prev)")
    w.emit(d, "else:")
    w.emit(d + 1, f"G[{s}] = sums[{s}] = prev + g")


def backward_function(plan, arena):
    """``plan``'s backward as one function ``backward(env, tape, out_grads, arena)``
    returning the leaves' gradients as :meth:`Plan.backward` does; ``arena`` says
    whether its gradient temporaries go to the arena's buffers."""
    w = _Writer(_scope())
    w.emit(0, "def backward(env, tape, out_grads, arena):")
    w.emit(1, "G = {}")
    w.emit(1, "pop = G.pop")
    w.emit(1, "firsts = {}")
    w.emit(1, "unfilled = {}")
    w.emit(1, "sums = {}")
    # slots whose arena buffer ``_scatter`` writes row by row without zero-filling it:
    # where such a gradient is read, the rows never written are zeroed first
    scattered = {st.wanted[0][1] for st in plan.grad_steps if st.scatter} if arena else set()

    def unwritten(d, s, g):
        if s in scattered:
            w.emit(d, f"if {g} is not None and {s} in unfilled:")
            w.emit(d + 1, f"_zero_unwritten({g}, unfilled.pop({s}))")
    w.emit(1, "bias_of = bias = None")
    w.emit(1, "g = None")
    for k, s in enumerate(plan.out_slots):
        w.emit(1, f"g = out_grads[{k}]")
        w.emit(1, "if g is not None:")
        w.emit(2, f"_accumulate(G, {s}, g)")
    for k, st in enumerate(plan.grad_steps):
        outs = st.outs
        w.emit(1, f"# {st.node.op} (step {st.index})")
        if len(outs) == 1:
            w.emit(1, f"g = pop({outs[0]}, None)")
            unwritten(1, outs[0], "g")
            w.emit(1, "if g is not None:")
            w.emit(2, "gouts = [g]")
            w.emit(2, f"ys = [env[{outs[0]}]]")
        else:
            w.emit(1, "gouts = [" + ", ".join(f"pop({s}, None)" for s in outs) + "]")
            for j, s in enumerate(outs):
                unwritten(1, s, f"gouts[{j}]")
            w.emit(1, "if " + " or ".join(f"gouts[{j}] is not None"
                                          for j in range(len(outs))) + ":")
            w.emit(2, "ys = [" + ", ".join(f"env[{s}]" for s in outs) + "]")
        d = 2
        w.emit(d, f"args, state = tape[{st.index}]")
        if st.scatter:
            w.emit(d, f"if not _scatter(G, {w.bind(st, f'st{k}_')}, args, g, arena, firsts, "
                      "unfilled):")
            d += 1
        elif st.feeds is not None:  # a view of ``x[i]``: its gradient into x's
            w.emit(d, f"if not _scatter(G, {w.bind(st.feeds, f'sf{k}_')}, "
                      f"tape[{st.feeds.index}][0], g, arena, firsts, unfilled, True):")
            d += 1
        _vjp_call(w, d, st, k, arena)
        for i, s in st.wanted:
            _gather(w, d, i, s, arena)
    for s in plan.leaf_slots:
        unwritten(1, s, f"G.get({s})")
    w.emit(1, "leaf = [" + "".join(f"G.get({s}), " for s in plan.leaf_slots) + "]")
    if arena:
        w.emit(1, "leaf = [g.copy() if _owned(arena, g) else g for g in leaf]")
    if len(plan.leaf_slots) > 1:
        w.emit(1, "leaf = _distinct(leaf)")
    w.emit(1, "return leaf")
    return w.function("backward", "backward")
