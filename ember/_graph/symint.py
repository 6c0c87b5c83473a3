"""Sizes read from a traced tensor: ``SymInt``, an ``int`` whose arithmetic a running
capture records, so that a trace keeps the computation instead of the number."""
import operator
import os
import sys
import threading

from ember import _tensor
from ember._graph.loud import _LOUD_MSGS, _warn

__all__ = ["SymInt", "TensorInt"]

_active = _tensor._mode_active


def _state():
    """The capture that should record a call made here, else None: the innermost
    visible one, started by this thread and not paused."""
    st = _tensor._mode_with("sym_size")
    if st is None or st.depth or st.thread != threading.get_ident():
        return None
    return st


# ----- traced ints -----------------------------------------------------------------------
class SymInt(int):
    """An ``int`` read from a traced tensor's shape: arithmetic on it and calls that
    receive it are recorded, so the trace keeps the computation, not the number."""

    def __new__(cls, n, value, trace=None):
        o = int.__new__(cls, n)
        o._value = value
        o._trace = trace  # a SymInt kept from an earlier trace is a plain number in this one
        return o

    def __reduce__(self):
        return (int, (int(self),))


_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _warns(size):
    """Whether ``size`` belongs to the trace recording now, one that warns where a size
    becomes a number (``jit.trace``, ``onnx.export``; ``compile`` and ``export`` note
    what they cannot record instead, and guard or check it)."""
    if not _active[0]:
        return False
    st = _state()
    return st is not None and size._trace is st and st.breaks is None


def _frozen_float(self):
    """A traced size met a float in user code (``int(x.size(2) * 0.5)``): the result is
    a plain Python number, a constant of the trace. Say so as PyTorch does when such a
    size is turned back into an int (a TracerWarning at the user's line). Inside ember
    an op given such a number recomputes it at each size, or warns itself
    (:func:`sizes_frozen`)."""
    if not _warns(self):
        return
    f = sys._getframe(2)
    if not f.f_code.co_filename.startswith(_EMBER_DIR):
        _warn(_LOUD_MSGS["__float__"], f)


def sizes_frozen(sizes):
    """An ember function turns traced sizes into numbers the trace keeps (an output size
    from ``output_ratio``): a TracerWarning at the user's line, as PyTorch's tracer gives
    at the ``int()`` in its functional code."""
    if not any(isinstance(s, SymInt) and _warns(s) for s in sizes):
        return
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_EMBER_DIR):
        f = f.f_back
    _warn(_LOUD_MSGS["__int__"], f)


def _int_binop(name, fn, reflected=False):
    def op(self, other):
        if not isinstance(other, int) or isinstance(other, bool):
            if isinstance(other, float):
                _frozen_float(self)
            return fn(other, int(self)) if reflected else fn(int(self), other)
        a, b = (other, self) if reflected else (self, other)
        if not _active[0]:  # no mode at all (a replay reading sizes a capture kept)
            return fn(int(a), int(b))
        st = _state()
        if st is None:
            return fn(int(a), int(b))
        return st.call(name, fn, fn, (a, b), {}, sym=True)
    op.__name__ = f"__{'r' if reflected else ''}{name.split('.')[1]}__"
    return op


for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("floordiv", operator.floordiv), ("mod", operator.mod)):
    setattr(SymInt, f"__{_name}__", _int_binop(f"int.{_name}", _fn))
    setattr(SymInt, f"__r{_name}__", _int_binop(f"int.{_name}", _fn, reflected=True))


def _sym_int(self):
    """``int(x.size(0))`` in user code: a plain number, a constant of the trace; PyTorch's
    tracer warns there (its sizes are 0-d tensors), and so does this."""
    if _warns(self):
        f = sys._getframe(1)
        if not f.f_code.co_filename.startswith(_EMBER_DIR):
            _warn(_LOUD_MSGS["__int__"], f)
    return int.__int__(self)


SymInt.__int__ = _sym_int


def _truediv(self, other):
    if isinstance(other, (int, float)) and not isinstance(other, bool):
        _frozen_float(self)
    return int.__truediv__(int(self), other)


def _rtruediv(self, other):
    if isinstance(other, (int, float)) and not isinstance(other, bool):
        _frozen_float(self)
    return int.__rtruediv__(int(self), other)


SymInt.__truediv__ = _truediv
SymInt.__rtruediv__ = _rtruediv


def _neg(x):
    return -x


def _sym_neg(self):
    st = _state()
    if st is None:
        return -int(self)
    return st.call("int.neg", _neg, _neg, (self,), {}, sym=True)


SymInt.__neg__ = _sym_neg


class TensorInt:
    """A traced 0-d integer tensor read where an int goes (a dim, an index, a count):
    the node a trace records for the read (PyTorch's ``aten::Int``), so a replay takes
    the value the tensor has then. With ``ndim``, the int is a dim of a tensor of that
    many dims, wrapped and range-checked at every run as eager checks it (the aten ops
    its TorchScript spelling feeds wrap negative dims themselves). ``v`` may also be a
    traced int already read (a dim read twice). Its TorchScript and ONNX spellings are
    this class's ``torchscript`` and ``onnx`` attributes (``ember.jit._codegen_ops``,
    ``ember.onnx._export_shape``)."""

    _op_name = "Int"

    def forward(self, v, ndim=None):
        """(the signature of the node's arguments, read by the IR's printer)"""

    @staticmethod
    def apply(v, ndim=None):
        from ember.ops._util import int_arg, wrap_dim
        return int_arg(v) if ndim is None else wrap_dim(v, ndim)


def _size(t, dim):
    """``t.size(dim)`` (the replay target of a recorded ``size`` node)."""
    return t.size(dim)
