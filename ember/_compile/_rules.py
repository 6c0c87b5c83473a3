"""How a plan step finds its array vector-Jacobian product (see ``_plan``).

No derivative is stated here: the plan only looks rules up. A primitive declares its
array vjp on its class (``Primitive.vjp``: ``vjp(self, grads, inputs, outputs,
out=None)``, checked against the class's ``backward`` by ``tests/test_op_vjp.py``);
a call the capture records above the primitives (``view``, ``reshape``, ``getitem``,
``expand``...) carries the same rule without ``self`` on its function (``fn.vjp``).
A primitive whose ``vjp`` is None, and every primitive on complex tensors (whose
gradients are conjugated), runs its own Tensor-level ``backward`` once under
``no_grad`` on Tensors wrapping the arrays: the first-order formulas eager ember runs.

What :func:`vjp_for` returns is ``run(state, args, ys, gouts)``: ``state`` what the
op's forward left on its op object (a dict), ``args`` the positional arguments
forward received (arrays in place of tensors), ``ys`` its outputs, ``gouts`` one
gradient array (or None) per output; the result has one gradient array (or None) per
argument, before broadcast reduction (the plan does it). Given ``out`` (the buffers
``out(key, shape, dtype)`` of the plan's arena), the op writes its gradient
temporaries there.
"""
import numpy as np

from ember import _tensor
from ember.autograd.grad_mode import no_grad
from ember.autograd.saved import _SavedOutput

_make = _tensor._make

__all__ = ["vjp_for"]


def _backward(cls, edges):
    """``run`` from the class's Tensor-level ``backward`` (a fresh op object per call:
    a backward may change its own state)."""
    si, so = cls.save_inputs, cls.save_output
    outs_saved = getattr(cls, "saved_outputs", ())

    def run(state, args, ys, gouts):
        op = object.__new__(cls)
        if state:
            op.__dict__.update(state)
        op._edges = edges
        saved = [(_make(args[i]) if type(args[i]) is np.ndarray else args[i], None)
                 for i in si]
        if so:
            saved.append((ys[0], [0], 0, False, 0))
        # the outputs a several-output primitive keeps after its inputs (``_SavesOutputs``)
        saved += [_SavedOutput(ys[nr], [0], False, nr) for nr in outs_saved]
        op._saved = saved or None
        gs = [_make(np.zeros_like(y) if g is None else g) for g, y in zip(gouts, ys)]
        with no_grad():
            r = op.backward(*gs)
        if type(r) is not tuple:
            r = tuple(r) if type(r) is list else (r,)
        return [None if g is None else g._data for g in r]
    return run


def _declared(cls, edges, out):
    """``run`` from the class's array ``vjp``, on one op object kept for the step (the
    state of each call is put on it before the call; a vjp only reads its state)."""
    vjp = cls.vjp
    op = object.__new__(cls)
    op._edges = edges

    def run(state, args, ys, gouts):
        if state:
            op.__dict__ = state
        return vjp(op, gouts, args, ys, out)
    run.declared = (vjp, op, out)  # what the plan's backward may call without ``run``
    return run


def vjp_for(node, prim, needs, out=None):
    """``run`` for ``node`` (see the module docstring), or None when its op has no
    array gradient (a call above the primitives without ``vjp``). ``needs``: whether
    each positional argument wants a gradient."""
    if not prim:
        vjp = getattr(node.target, "vjp", None)
        if vjp is None:
            return None
        return lambda state, args, ys, gouts: vjp(gouts, args, ys, out)
    cls = node.target
    edges = tuple(1 if n else None for n in needs)
    if cls.vjp is None or any(v.dtype is not None and getattr(v.dtype, "is_complex", False)
                              for v in node.inputs):
        return _backward(cls, edges)
    return _declared(cls, edges, out)
