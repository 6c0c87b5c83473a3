"""The registry of ember's TorchScript spellings and the :class:`Emitter` they write with.

A primitive's TorchScript spelling is its class's ``torchscript`` attribute: a string
is the aten function called on the op's arguments (``"exp"`` writes ``torch.exp(x)``),
a callable ``f(em, node, *args, **kwargs)`` writes the expression; emitters are attached
to their classes with ``@emits(SomeOpClass)``. The calls recorded by name (``view``,
``size``, factories...: ``ember._graph.names.RECORDED_CALLS``) have their rows in
:data:`EMIT`. The emitters themselves are in ``ember/jit/_codegen_ops.py``; writing a
whole graph is ``ember/jit/_codegen.py``, which imports them all.
"""
import math

import numpy as np

from ember._graph.ir import Ref
from ember._graph.names import RECORDED_CALLS, spelling
from ember.jit import _builtins_trace  # noqa: F401  (rows the generated code needs)

__all__ = ["EMIT", "emits", "emitter", "call", "literal", "Emitter"]

# rows of the recorded calls that are not primitives, by the name the capture records
EMIT = {}


def emits(*targets):
    """Decorator: attach one emitter to each target: a primitive class gets it as its
    ``torchscript`` spelling; a string names a call the capture records by name."""
    def deco(fn):
        for t in targets:
            if isinstance(t, str):
                if t not in RECORDED_CALLS:
                    raise ValueError(f"ember.jit: {t!r} is not a call the capture records")
                EMIT[t] = fn
            else:
                if t.__dict__.get("torchscript") is not None:
                    raise TypeError(f"ember.jit: {t._op_name} already has a TorchScript "
                                    "spelling")
                t.torchscript = fn
        return fn
    return deco


def _ident(name):
    s = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return s if s and not s[0].isdigit() else "_" + s


class Emitter:
    """Names values and renders arguments while one graph is written out."""

    def __init__(self, graph, constant_offset=0):
        self.graph = graph
        self.names = {}
        self.lines = []
        self._tmp = 0
        for i, c in enumerate(graph.constants):
            self.names[id(c)] = f"CONSTANTS.c{i + constant_offset}"
        for qn, v in graph.params.items():
            self.names[id(v)] = _attr_chain(qn)

    def tmp(self, expr, hint="_t"):
        """Assign ``expr`` to a fresh local; returns its name."""
        self._tmp += 1
        name = f"{hint}{self._tmp}"
        self.lines.append(f"{name} = {expr}")
        return name

    def tmp_name(self, hint="_t"):
        """A fresh local name."""
        self._tmp += 1
        return f"{hint}{self._tmp}"

    def name(self, v):
        n = self.names.get(id(v))
        if n is None:
            if v.kind == "node" and not v.name.isdigit():
                n = self._local_name(v.name)
            else:
                n = _ident(v.name)
            self.names[id(v)] = n
        return n

    def _local_name(self, debug):
        """A value named after the user's local (``a`` or ``a.1``) is written under that
        local's name, made unique in the function by appending 0, 1... as PyTorch
        prints code."""
        base = _ident(debug.split(".", 1)[0])
        used = set(self.names.values())
        name, k = base, 0
        while name in used or name in ("self", "torch", "ops", "CONSTANTS"):
            name, k = f"{base}{k}", k + 1
        return name

    def e(self, x):
        """TorchScript source for an argument (a Ref, a number, a list...)."""
        if isinstance(x, Ref):
            return self.name(x.value)
        return literal(x, self)

    def ints(self, xs):
        """An ``int[]`` argument: ``[_0, -1]``."""
        if isinstance(xs, (int, Ref)):
            xs = (xs,)
        return "[" + ", ".join(self.e(x) for x in xs) + "]"


def literal(x, em=None):
    """A Python value as a TorchScript literal."""
    if x is None or isinstance(x, bool):
        return repr(x)
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if math.isinf(x):
            return 'float("inf")' if x > 0 else 'float("-inf")'
        if math.isnan(x):
            return 'float("nan")'
        return repr(x)
    if isinstance(x, str):
        return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(x, (tuple, list)):
        return "[" + ", ".join(em.e(v) if em is not None else literal(v) for v in x) + "]"
    from ember.backend.dtypes import dtype
    if isinstance(x, dtype):
        from ember.jit._builtins import dtype_code
        return str(dtype_code(x))
    if type(x).__name__ == "device":
        return f'torch.device("{x}")'
    raise NotImplementedError(f"jit codegen: no TorchScript literal for {type(x).__name__} "
                              f"{x!r}")


def _attr_chain(qualname):
    out = "self"
    for part in qualname.split("."):
        out = f"{out}.{part}" if part.isidentifier() else f'getattr({out}, "{part}")'
    return out


def emitter(node):
    """The function writing ``node``'s expression, or None: its primitive's
    ``torchscript`` spelling (a string becomes a call of that aten function on the
    recorded arguments) or the row of a call recorded by name."""
    if not isinstance(node.target, type):  # a call recorded by name
        return EMIT.get(node.op)
    spell = spelling(node.target, "torchscript")
    if isinstance(spell, str):
        return lambda em, node, *args, **kwargs: call(em, f"torch.{spell}", args, kwargs)
    return spell


def call(em, fn, args, kwargs):
    """``fn(args..., key=value...)`` in TorchScript."""
    parts = [em.e(a) for a in args] + [f"{k}={em.e(v)}" for k, v in kwargs.items()]
    return f"{fn}({', '.join(parts)})"
