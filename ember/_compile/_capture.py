"""One capture for compile and export: ``jit``'s ``_record`` run with every place a
tensor becomes a Python value (a :class:`TracerWarning`) and every side effect the
graph cannot replay (``backward``, ``optimizer.step``, ``zero_grad``) noted as a
graph break, plus the structural comparison that decides whether one graph serves
several sizes."""
import sys
import warnings

import numpy as np

from ember import _tensor
from ember._graph.capture import TracerWarning, is_tracing
from ember._graph.ir import ArrayRef, Ref
from ember._graph.record import record as _record

Tensor = _tensor.Tensor

__all__ = ["Extras", "GraphBreak", "TrainStep", "Unsupported", "capture_graph", "signature",
           "busy"]


class Unsupported(RuntimeError):
    """``fullgraph=True`` or ``export`` met something the capture cannot record
    (``torch._dynamo.exc.Unsupported``)."""


class GraphBreak:
    """Why a capture cannot be replayed: ``reason`` and the user's ``(file, line)``."""

    __slots__ = ("reason", "where")

    def __init__(self, reason, where=None):
        self.reason, self.where = reason, where

    def __str__(self):
        at = f" (at {self.where[0]}:{self.where[1]})" if self.where else ""
        return f"{self.reason}{at}"


def busy():
    """True when a jit trace or another capture is running in this thread (then compile
    runs eagerly, and an enclosing trace records the eager ops)."""
    return is_tracing()


def _user_where():
    from ember._graph.capture import _EMBER_DIR
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_EMBER_DIR):
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno) if f is not None else None


def _trace_counts():
    from ember._graph import capture as jc
    st = jc.current()
    return st, (len(st.graph.constants) if st is not None else 0)


class Event:
    """A call a captured function made that the graph does not hold: ``kind`` is
    ``"backward"``, ``"zero_grad"`` or ``"step"``; ``obj`` the optimizer or module (for
    a backward, the graph Values of its roots); ``n_consts`` how many constants the
    graph had before it (a later one is a tensor the graph did not compute, such as a
    ``.grad``)."""

    __slots__ = ("kind", "obj", "args", "kwargs", "n_consts", "where", "call")

    def __init__(self, kind, obj, args, kwargs, n_consts, where, call=None):
        self.kind, self.obj, self.args, self.kwargs = kind, obj, args, kwargs
        self.n_consts, self.where, self.call = n_consts, where, call


class _SideEffects:
    """Note the calls whose effect a replayed graph would skip (``backward``,
    ``zero_grad``, ``optimizer.step``) as events, running them unrecorded. A training
    step (:class:`TrainStep`) replays them around the plan; any other use of them is a
    graph break (the whole call then runs eagerly)."""

    def __init__(self, events):
        self.events = events
        self.undo = []
        self.root = None
        self.end_consts = None

    def _wrap(self, owner, name, kind):
        orig = owner.__dict__[name]
        side = self

        def wrapped(*args, **kwargs):
            st, nc = _trace_counts()
            ev = Event(kind, args[0] if kind == "zero_grad" else None, args, kwargs, nc,
                       _user_where(), orig)
            if kind == "backward" and st is not None:
                roots = args[0]
                ev.obj = [st.tmap[id(t)][1] if id(t) in st.tmap and st.tmap[id(t)][0] is t
                          else None for t in roots]
                if len(roots) == 1 and side.root is None:
                    side.root = roots[0]
            side.events.append(ev)
            if st is not None:
                st.depth += 1
            try:
                return orig(*args, **kwargs)
            finally:
                if st is not None:
                    st.depth -= 1
        setattr(owner, name, wrapped)
        self.undo.append((owner, name, orig))

    def __enter__(self):
        from ember.autograd import engine
        from ember.nn.modules.module import Module
        from ember.optim import optimizer
        self._wrap(engine, "_run_backward", "backward")
        self._wrap(Module, "zero_grad", "zero_grad")
        self._wrap(optimizer.Optimizer, "zero_grad", "zero_grad")
        events = self.events

        def pre(opt, a, k):
            st, nc = _trace_counts()
            events.append(Event("step", opt, a, k, nc, _user_where()))
            if st is not None:
                st.depth += 1

        def post(opt, a, k):
            st, _ = _trace_counts()
            if st is not None:
                st.depth -= 1
        self.hooks = (optimizer.register_optimizer_step_pre_hook(pre),
                      optimizer.register_optimizer_step_post_hook(post))
        return self

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()
        for owner, name, orig in reversed(self.undo):
            setattr(owner, name, orig)


class TrainStep:
    """A captured call that runs ``backward()`` on a value of its graph (with
    ``zero_grad`` before and ``optimizer.step`` after, if any): ``pre`` and ``post``
    are the events to run around the plan; the graph's last output is the root."""

    __slots__ = ("pre", "post")

    def __init__(self, pre, post):
        self.pre, self.post = pre, post


def _as_train_step(events, end_consts, root_value):
    """A :class:`TrainStep` when ``events`` make a training step the plan can run, else
    the :class:`GraphBreak` saying why not."""
    back = [e for e in events if e.kind == "backward"]
    if not back:
        e = events[0]
        what = "Module.zero_grad()/Optimizer.zero_grad()" if e.kind == "zero_grad" \
            else f"{type(e.obj).__name__}.step()"
        return GraphBreak(f"{what} inside a compiled function without a backward() (its "
                          "effect is not part of the captured graph)", e.where)
    if len(back) != 1:
        return GraphBreak("backward()/autograd.grad() called more than once inside a "
                          "compiled function", back[1].where)
    b = back[0]
    roots, grad_roots, retain_graph, create_graph, inputs, accumulate = b.args[:6]
    why = None
    if not accumulate or inputs is not None:
        why = "autograd.grad() or backward(inputs=...) inside a compiled function"
    elif create_graph or retain_graph:
        why = "backward(create_graph=True or retain_graph=True) inside a compiled function"
    elif len(roots) != 1 or root_value is None or b.obj[0] is not root_value:
        why = "backward() of a tensor the graph did not compute"
    elif grad_roots[0] is None or not bool((grad_roots[0]._data == 1).all()):
        why = "backward(gradient) with a gradient other than ones"
    elif end_consts != b.n_consts:
        why = ("tensors the graph did not compute (such as .grad) used after backward() "
               "inside a compiled function")
    if why is not None:
        return GraphBreak(why, b.where)
    i = events.index(b)
    for e in events[:i]:
        if e.kind == "step":
            return GraphBreak("optimizer.step() before backward() inside a compiled function",
                              e.where)
    for e in events:
        if e.kind == "step" and (e.args or e.kwargs):
            return GraphBreak("optimizer.step(closure) inside a compiled function", e.where)
    return TrainStep(events[:i], events[i + 1:])


class Extras:
    """What a capture returns beyond the user's result, kept as extra graph outputs so
    dead-code elimination keeps them: ``root`` (a training step's backward root, or
    None) and ``writes``: where tensors that existed before the call were changed in
    place (``("input", i)`` for the i-th flat tensor argument, ``("tensor", t)`` for a
    parameter, buffer or closure tensor), each replay writing the new value back."""

    __slots__ = ("root", "writes")

    def __init__(self, root, writes):
        self.root, self.writes = root, writes


def capture_graph(fn, args, module, others=(), whole_rnn=False):
    """Run ``fn(*args)`` once, recorded. Returns ``(graph or None, eager output,
    [GraphBreak], TrainStep or None, Extras or None)``: with any break the graph is None
    and the output is the eager one (computed by this very run, so it is correct).
    With extras the graph returns ``(output, root, (written tensors...))``.
    ``others``: tensors besides the module's and the arguments whose in-place change
    must be replayed (a compiled function's closure tensors). ``whole_rnn``: the
    recurrent layers are one node each (``export``'s graph runs them at any length)
    rather than their steps (``compile``'s array plans)."""
    box, breaks, events, unfaithful = [], [], [], []
    side = _SideEffects(events)
    flat_args = []
    _flat_tensors(args, flat_args)
    cands = [(("input", i), t) for i, t in enumerate(flat_args)]
    if module is not None:
        cands += [(("tensor", t), t) for t in module.parameters()]
        cands += [(("tensor", t), t) for t in module.buffers() if t is not None]
    cands += [(("tensor", t), t) for t in others]
    written = []
    # what a replay's write-back cannot redo: an in-place change of a tensor's sizes or
    # strides (``transpose_``, ``resize_``) or of its autograd history (``x.mul_(y)`` on
    # a tensor that requires grad rebases ``x.grad_fn``); held before the call
    before = {id(t): (t, t._data.shape, t._data.strides, t.grad_fn) for _, t in cands}

    from ember._graph import capture as jc

    def run(*a):
        st = jc.current()
        st.breaks = unfaithful
        st.whole_rnn = whole_rnn
        box.append(fn(*a))
        side.end_consts = len(st.graph.constants)
        done = set()
        for key, t in cands:
            e = st.tmap.get(id(t))
            _, shape, strides, grad_fn = before[id(t)]
            if t._data.shape != shape or t._data.strides != strides:
                unfaithful.append(("an in-place change of the sizes or strides of a tensor "
                                   "that existed before the call (transpose_, resize_...)",
                                   e[1].node.source if e is not None and e[1].node else None))
            if e is not None and e[0] is t and e[1].kind == "node" and id(t) not in done:
                done.add(id(t))
                written.append((key, t))
                if t.grad_fn is not grad_fn:
                    unfaithful.append((f"an in-place change recorded in the autograd "
                                       f"history of a tensor that existed before the call "
                                       f"({e[1].node.op})", e[1].node.source))
        if side.root is not None or written:
            return (box[0], side.root, tuple(t for _, t in written))
        return box[0]

    graph = None
    with warnings.catch_warnings(record=True) as seen, side:
        warnings.simplefilter("always", TracerWarning)
        try:
            graph, _, _ = _record(run, args, module, False, False)
        except (RuntimeError, NotImplementedError) as e:
            if not box:
                raise
            breaks.append(GraphBreak(f"the output cannot be captured: {e}"))
    # what the capture could not record (a vmap per-sample loop...): this call ran
    # eagerly from there on, and its graph would replay constants
    breaks.extend(GraphBreak(why, where) for why, where in unfaithful)
    for w in seen:
        if issubclass(w.category, TracerWarning):
            breaks.append(GraphBreak(str(w.message).split(" might cause")[0],
                                     (w.filename, w.lineno)))
        else:  # the user's own warnings are shown as usual
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    extras = None
    if graph is not None and (side.root is not None or written):
        spec = graph.output_spec
        extras = Extras(spec[1].value if side.root is not None else None,
                        [(key, r.value) for (key, _), r in zip(written, spec[2])])
    train = None
    if events:
        train = _as_train_step(events, side.end_consts,
                               extras.root if extras is not None else None)
        if isinstance(train, GraphBreak):
            breaks.append(train)
            train = None
    if graph is not None:
        for n in graph.nodes:
            if n.target is None:
                breaks.append(GraphBreak(f"op {n.op} has no replayable target", n.source))
    if breaks:
        return None, box[0], breaks, None, None
    return graph, box[0], breaks, train, extras


def _flat_tensors(tree, out):
    if isinstance(tree, Tensor):
        out.append(tree)
    elif isinstance(tree, (tuple, list)):
        for x in tree:
            _flat_tensors(x, out)
    elif isinstance(tree, dict):
        for x in tree.values():
            _flat_tensors(x, out)
    return out


def _strip(tree):
    t = type(tree)
    if t is Ref:
        return "%" + tree.value.name
    if t is ArrayRef:
        return ("%" + tree.value.name, tree.shape)
    if t in (tuple, list):
        return tuple(_strip(x) for x in tree)
    if t is dict:
        return tuple((k, _strip(x)) for k, x in tree.items())
    if t is slice:
        return ("slice", _strip(tree.start), _strip(tree.stop), _strip(tree.step))
    if isinstance(tree, np.ndarray):
        return ("array", tree.shape, tree.dtype.str, tree.tobytes())
    return repr(tree)


def _constant(c):
    """A graph constant's shape and values: two captures whose constants differ in value
    (a result the capture could not record, computed from each call's data) are two
    graphs, whatever their shapes."""
    d = getattr(c.data, "_data", c.data)
    if isinstance(d, np.ndarray):
        return (tuple(c.shape or ()), d.dtype.str, d.tobytes())
    return (tuple(c.shape or ()), repr(d))


def signature(graph):
    """The graph's structure without its sizes: ops, the literal arguments each call
    was made with, the constants (shapes and values) and the output structure. Two
    captures at different sizes with equal signatures compute their sizes from the inputs
    (``x.size(0)`` recorded as a node), so one graph serves both."""
    return (tuple((n.op, n.multi, _strip(n.args), _strip(n.kwargs)) for n in graph.nodes),
            tuple(_constant(c) for c in graph.constants),
            _strip(graph.output_spec), _strip(graph.input_spec))
