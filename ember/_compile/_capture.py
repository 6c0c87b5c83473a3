"""One capture for compile and export: ``jit``'s ``_record`` run with every place a
tensor becomes a Python value (a :class:`TracerWarning`) and every side effect the
graph cannot replay (``backward``, ``optimizer.step``, ``zero_grad``) noted as a
graph break, plus the structural comparison that decides whether one graph serves
several sizes."""
import sys
import warnings

import numpy as np

from ember import _tensor
from ember.jit._capture import TracerWarning, capture, is_tracing
from ember.jit._ir import Ref
from ember.jit._trace import _record

Tensor = _tensor.Tensor

__all__ = ["GraphBreak", "Unsupported", "capture_graph", "signature", "busy"]


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
    """True when a jit trace or another capture is running (then compile runs eagerly,
    and an enclosing trace records the eager ops)."""
    return is_tracing() or capture._lock.locked()


def _user_where():
    from ember.jit._capture import _EMBER_DIR
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_EMBER_DIR):
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno) if f is not None else None


class _SideEffects:
    """Patch the calls whose effect a replayed graph would skip, so a capture that
    makes them is a graph break (the whole call then runs eagerly)."""

    def __init__(self, breaks):
        self.breaks = breaks
        self.undo = []

    def _wrap(self, owner, name, label):
        orig = owner.__dict__[name]
        breaks = self.breaks

        def wrapped(*args, **kwargs):
            breaks.append(GraphBreak(f"{label} inside a compiled function (its effect is not "
                                     "part of the captured graph)", _user_where()))
            return orig(*args, **kwargs)
        setattr(owner, name, wrapped)
        self.undo.append((owner, name, orig))

    def __enter__(self):
        from ember.autograd import engine
        from ember.nn.modules.module import Module
        from ember.optim import optimizer
        self._wrap(engine, "_run_backward", "backward()/autograd.grad()")
        self._wrap(Module, "zero_grad", "Module.zero_grad()")
        self._wrap(optimizer.Optimizer, "zero_grad", "Optimizer.zero_grad()")
        breaks = self.breaks
        self.hook = optimizer.register_optimizer_step_pre_hook(
            lambda opt, a, k: breaks.append(GraphBreak(
                f"{type(opt).__name__}.step() inside a compiled function (a parameter "
                "update is not part of the captured graph)", _user_where())))
        return self

    def __exit__(self, *exc):
        self.hook.remove()
        for owner, name, orig in reversed(self.undo):
            setattr(owner, name, orig)


def capture_graph(fn, args, module):
    """Run ``fn(*args)`` once, recorded. Returns ``(graph or None, eager output,
    [GraphBreak])``: with any break the graph is None and the output is the eager one
    (computed by this very run, so it is correct)."""
    box, breaks = [], []

    def run(*a):
        box.append(fn(*a))
        return box[0]

    graph = None
    with warnings.catch_warnings(record=True) as seen, _SideEffects(breaks):
        warnings.simplefilter("always", TracerWarning)
        try:
            graph, _, _ = _record(run, args, module, False, False)
        except (RuntimeError, NotImplementedError) as e:
            if not box:
                raise
            breaks.append(GraphBreak(f"the output cannot be captured: {e}"))
    for w in seen:
        if issubclass(w.category, TracerWarning):
            breaks.append(GraphBreak(str(w.message).split(" might cause")[0],
                                     (w.filename, w.lineno)))
        else:  # the user's own warnings are shown as usual
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if graph is not None:
        for n in graph.nodes:
            if n.target is None:
                breaks.append(GraphBreak(f"op {n.op} has no replayable target", n.source))
    return (None if breaks else graph), box[0], breaks


def _strip(tree):
    t = type(tree)
    if t is Ref:
        return "%" + tree.value.name
    if t in (tuple, list):
        return tuple(_strip(x) for x in tree)
    if t is dict:
        return tuple((k, _strip(x)) for k, x in tree.items())
    if t is slice:
        return ("slice", _strip(tree.start), _strip(tree.stop), _strip(tree.step))
    if isinstance(tree, np.ndarray):
        return ("array", tree.shape, tree.dtype.str, tree.tobytes())
    return repr(tree)


def signature(graph):
    """The graph's structure without its sizes: ops, the literal arguments each call
    was made with, the constants' shapes and the output structure. Two captures at
    different sizes with equal signatures compute their sizes from the inputs (``x.size(0)``
    recorded as a node), so one graph serves both."""
    return (tuple((n.op, n.multi, _strip(n.args), _strip(n.kwargs)) for n in graph.nodes),
            tuple(tuple(c.shape or ()) for c in graph.constants),
            _strip(graph.output_spec), _strip(graph.input_spec))
