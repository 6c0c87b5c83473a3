"""Backward formulas on NumPy arrays, where that is all their Tensor ops would do.

A backward formula is written in Tensor ops (``gy * cj(b)``), so that with
``create_graph`` it records a graph of its own. Without one (grad mode off in the
engine) and with no mode watching ops, each of those Tensor ops only calls its
primitive's ``forward`` on the arrays and wraps the result in a new Tensor; on a small
tensor the dispatch and the Tensor cost as much as the arithmetic. The hot formulas
(add, sub, mul, div, exp, sin, tanh ...) therefore also have an array form that calls
the same ``forward`` functions in the same order and wraps only the final result:
the same NumPy calls, so the same values, bit for bit, and the same gradient Tensor.

:func:`array` decides, per node, whether the array form may run, and :func:`operand`
(or :func:`times`) whether each other operand may join it; when either answers None the
formula runs in Tensor ops as before.
"""
import numpy as np

from ember._tensor import Tensor, _mode_active
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import _wrap as wrap  # (the Tensor an op returns)
from ember.backend import threads as _threads

_ndarray = np.ndarray

# Tensor subclasses that change nothing a formula calls (``nn.Parameter``: construction,
# repr, pickling and copying only): ``gy * t`` or ``t.cos()`` on one of them runs the same
# primitive as on a Tensor. A subclass defining anything else (an operator, a method,
# ``__torch_function__``) keeps the Tensor ops
_PLAIN = {Tensor: True}
_HARMLESS = frozenset(("__new__", "__init__", "__repr__", "__reduce_ex__", "__reduce__",
                       "__deepcopy__", "__copy__", "__dict__", "__doc__", "__module__",
                       "__qualname__", "__slots__", "__weakref__", "__annotations__",
                       "__firstlineno__", "__static_attributes__"))


def _plain_type(tt):
    ok = _PLAIN.get(tt)
    if ok is None:
        ok = issubclass(tt, Tensor)
        if ok:
            for c in tt.__mro__:
                if c is Tensor:
                    break
                if not _HARMLESS.issuperset(vars(c)):
                    ok = False
                    break
        _PLAIN[tt] = ok
    return ok


def array(gy):
    """``gy``'s array when backward formulas of ``gy`` may run on arrays (see the
    module's docstring): grad mode off, no mode active, and ``gy`` a Tensor on a real
    floating NumPy array below the size the elementwise ops split over threads (so
    that one NumPy call is what each Tensor op would make). None otherwise."""
    if _mode_active[0] or _grad_state.grad_enabled:
        return None
    tg = type(gy)
    if tg is not Tensor and not _plain_type(tg):
        return None
    g = gy._data
    return g if _threads.unsplit_float(g) else None


def operand(t, g):
    """``t``'s array when it may meet ``g`` (from :func:`array`) on arrays: ``t`` a
    Tensor on a NumPy array of ``g``'s dtype, of no more elements (a formula's operand
    broadcasts to the gradient's shape); None otherwise."""
    tt = type(t)
    if tt is not Tensor and not _plain_type(tt):
        return None
    d = t._data
    if type(d) is not _ndarray or d.dtype is not g.dtype and d.dtype != g.dtype or \
            d.size > g.size:
        return None
    return d


def times(g, t):
    """``gy * t`` (``Mul`` on two arrays of one dtype: one NumPy product) as a new
    Tensor, from ``gy``'s array ``g`` (:func:`array`); None when ``t`` is no
    :func:`operand` (the formula then runs in Tensor ops)."""
    d = operand(t, g)
    return None if d is None else wrap(g * d)
