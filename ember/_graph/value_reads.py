"""How a capture meets a traced tensor's values read as Python values: the
``TracerWarning`` at the user's line, a ``compile`` capture's graph break, and under
``jit.trace`` a 0-d integer tensor read as an int by an op that keeps it as data, which
is recorded as a node (:class:`~ember._graph.symint.TensorInt`, PyTorch's ``aten::Int``)
so that a replay follows the value. The methods of :class:`ValueReads` are those of the
running capture (:class:`ember._graph.capture._Trace`)."""
import os
import sys
import threading

from ember import _tensor
from ember._graph.loud import _LOUD_MSGS, _warn, _warn_at
from ember._graph.symint import SymInt, TensorInt

Tensor = _tensor.Tensor

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ember's nn modules: their forwards are the user's model, as PyTorch's are to its tracer
# (BatchNorm's ``1 / float(num_batches_tracked)``): a value read there warns as in user code
_MODULES_DIR = os.path.join(_EMBER_DIR, "nn", "modules") + os.sep

_WRAPPERS = frozenset(("wrapper", "wrapped", "named", "inner", "fn", "run", "forward",
                       "decorated", "<lambda>", "<genexpr>", "<listcomp>", "module_call",
                       "composite", "composite_locals", "call", "op"))


class ValueReads:
    """The value-read protocol of a capture (a mixin of its mode)."""

    def int_read(self, v, ndim=None):
        """An ember op reads the traced 0-d integer tensor ``v`` (or the traced int ``v``)
        where it takes an int (``int_arg``; a dim when ``ndim`` is given: ``wrap_dim``):
        under ``jit.trace`` (no ``breaks`` list), a :class:`TensorInt` node and its traced
        int, which the op's own node then takes as an input, so a replay follows the value
        (PyTorch's trace records ``aten::Int``). A ``compile`` capture returns None: the
        plain read that follows is its graph break (:meth:`break_on_read`)."""
        if self.breaks is not None or self._passes():
            return None
        if isinstance(v, Tensor):
            if not self._known(v):
                return None
            n = int(v._data)
            if ndim is None:
                return self._note_read(self.call("Int", TensorInt, TensorInt.apply, (v,), {},
                                                 sym=True))
        elif type(v) is SymInt and v._trace is self:
            if ndim is None:
                return v
            n = int(v)
        else:
            return None
        m = max(ndim, 1)
        if not -m <= n < m:
            return None  # (the plain read raises eager's IndexError)
        return self._note_read(self.call("Int", TensorInt, TensorInt.apply, (v, ndim), {},
                                         sym=True))

    def _note_read(self, out):
        """Keep where the read ``out`` was made: an op that turns the traced int into a
        plain number leaves its node unused (:meth:`warn_unused_reads`)."""
        fn, f = _ember_function(sys._getframe(2))
        where = None if f is None else (f.f_globals, f.f_code.co_filename, f.f_lineno)
        self.int_reads.append((out._value, fn, where))
        return out

    def warn_unused_reads(self, live):
        """After the trace: a read recorded by :meth:`int_read` whose traced int no kept
        node takes (the op made it a plain number, a constant of the trace) warns as a
        value read outside the recorded ops does (:meth:`warn_read`)."""
        for value, fn, where in self.int_reads:
            if id(value) in live:
                continue
            src = value.node.inputs[0] if value.node.inputs else value
            key = (fn,) + (where[1:] if where else ())
            if key in self.warned_frozen:
                continue
            self.warned_frozen.add(key)
            msg = (f"{fn}() computed with the values of the traced tensor %{src.name} "
                   "outside the recorded ops, so the trace keeps what it made of them as "
                   "constants: it might not generalize to other inputs!")
            if where is None:
                _warn(msg, None)
            else:
                _warn_at(msg, *where)

    def python_value(self, t, what):
        """A traced tensor became a Python value in user code: a TracerWarning there.
        An integer or boolean vector (lengths, split points, a mask) read so inside
        ember: the op's result keeps its values (:meth:`warn_read`)."""
        if self.thread != threading.get_ident() or id(t) not in self.tmap:
            return
        f = sys._getframe(3)  # python_value <- _python_value <- Tensor method <- caller
        where = f.f_code.co_filename
        if not where.startswith(_EMBER_DIR) or where.startswith(_MODULES_DIR):
            _warn(_LOUD_MSGS[what], f)
        elif self.depth:
            return
        elif self.breaks is not None:
            # compile: any value read inside ember's own code (a 0-d tensor passed as a
            # dim, size, exponent or margin; a check's number) would be replayed as the
            # example's, or its check skipped: the call runs eagerly instead
            self.break_on_read(t, what)
        elif t._data.dtype.kind in "iub" and (t._data.ndim or what in ("__index__", "__int__")
                                               or t._data.dtype.kind != "b" or
                                               self._compares_a_number(t)):
            # a vector's values (lengths, split points, offsets) as Python numbers, a 0-d
            # integer tensor given where a number goes (a dim, shift, size, ``alpha``,
            # ``p``: any read), or a comparison of one (``alpha != 1``: the branch
            # taken); any other 0-d bool read inside an op is most often a check that
            # raises instead
            self.warn_read(t)

    def _compares_a_number(self, t):
        """Whether the traced 0-d ``t`` was computed by one node from a 0-d integer tensor
        (``alpha != 1``, ``n < 0`` on a tensor given for a number)."""
        v = self.value_of(t)
        return v.kind == "node" and any(
            i.type == "Tensor" and i.shape == () and i.dtype is not None and
            i.dtype.name.startswith(("int", "uint")) for i in v.node.inputs)

    def break_on_read(self, t, what):
        """A capture for ``compile``: ``t``'s values became a Python value (``what``)
        inside ember's own code: a graph break naming the ember function and the
        user's line."""
        fn, f = _ember_function(sys._getframe(2))
        self.breaks.append((f"{fn}() read the values of the traced tensor "
                            f"%{self.value_of(t).name} as Python values ({what.strip('_')})",
                            (f.f_code.co_filename, f.f_lineno) if f is not None else None))

    def warn_read(self, t):
        """See :func:`values_read`: once per ember function and user line."""
        fn, f = _ember_function(sys._getframe(2))
        key = (fn, f.f_code.co_filename, f.f_lineno) if f is not None else (fn,)
        if key in self.warned_frozen:
            return
        self.warned_frozen.add(key)
        name = self.value_of(t).name
        _warn(f"{fn}() computed with the values of the traced tensor %{name} outside the "
              "recorded ops, so the trace keeps what it made of them as constants: it might "
              "not generalize to other inputs!", f)


def _ember_function(f):
    """The ember function the user called (past the decorators' wrappers and private
    helpers) among the ember frames from ``f`` outwards, and the first frame outside
    ember (the user's line; None if there is none)."""
    names = []
    while f is not None and f.f_code.co_filename.startswith(_EMBER_DIR):
        names.append(f.f_code.co_name)
        f = f.f_back
    fn = next((n for n in reversed(names) if n not in _WRAPPERS and n[0] != "_"),
              names[-1] if names else "an ember op")
    return fn, f
