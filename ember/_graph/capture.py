"""Records ember op calls into an :class:`ember._graph.ir.Graph` while a trace runs.

Design: the capture is a mode on the mode stack
-----------------------------------------------
A running capture is a mode (:class:`_Trace`) on ember's one stack of modes
(``ember.autograd._modes``). Every tensor op already asks that stack before its plain
path (``Primitive.apply`` and the fast closures check ``_modes.active[0]``), so the
capture's :meth:`_Trace.op` sees each primitive call that reaches it, records it as one
node and runs it below itself with ``cls.apply``. Modes pushed later sit above it: a
``vmap`` level entered inside the traced function turns each batched call into calls on
whole batches, and those are what the capture records, so the trace replays at other
batch sizes. Outside a capture nothing is swapped or installed: the plain paths run
with their one check.

A few calls are recorded one level above the primitives, as one node each, because
the primitives see their arguments already resolved: ``view``/``reshape``/``flatten``/
``unflatten`` (``-1`` and sizes read from the input), ``view_as``/``reshape_as``/
``expand``/``expand_as``, ``x[key]`` and ``x[key] = v`` (index tensors stay inputs,
not constants), ``F.embedding``, ``detach``, custom ``autograd.Function`` classes with a
``symbolic``, the random functions and the factories ``zeros``/``ones``/``full``/
``empty``/``*_like``/``arange`` (an LSTM's zero state has its input's batch size).
Those functions ask the stack themselves (``if _modes.active[0]`` and
``_modes.recorder()`` is a capture): the capture records them with :meth:`composite`
and runs them with itself hidden, so the primitives inside are not recorded. A
composite is recorded only when the capture is the innermost visible mode; under a
``vmap`` level its primitives go through the level and are recorded batched.

Sizes: ``Tensor.size``/``Tensor.shape`` of a traced tensor return :class:`SymInt`
(an ``int`` that remembers the ``size`` node it came from); arithmetic on them is
recorded (``int.mul``...), and a call that receives one records the dependency, so
``x.view(x.size(0), -1)`` replays at another batch size as PyTorch's trace does.
``Tensor.size``/``shape`` ask the stack for a mode with ``sym_size`` (one check of
``active[0]`` outside a capture).

Loud tracing: ``bool``/``int``/``float``/``item``/``tolist``/``numpy``/``len``/
iteration of a traced tensor, called from user code, emit :class:`TracerWarning` at
the user's file and line (``warnings.warn_explicit``): those Tensor methods tell the
visible modes (``python_value``). The same reads inside ember's own code (a 0-d tensor
given as a dim or an exponent, a check's number) are a graph break for a ``compile``
capture (:meth:`_Trace.break_on_read`): its graph would replay the example's number.
Under ``jit.trace`` a 0-d integer tensor read as an int by an op that hands it only to
recorded ops (``ember.ops._util.follows_int_reads``) is a node, ``Int`` (PyTorch's
``aten::Int``), which the op's node takes as an input, so a replay follows the value;
any other such read warns that the trace keeps it (:mod:`ember._graph.value_reads`).

What cannot be recorded faithfully fails loudly, naming the op and the user's line:
forward-mode AD computed beside the ops (``jvp``/``jacfwd`` while tangents are not a
mode of their own) and ``vmap``'s per-sample fallback loop (its length is the example's
batch size). A backward pass (``grad``/``backward`` inside the traced code) is recorded
op by op with a TracerWarning: its formulas read the sizes saved in the forward as
numbers, so the trace holds at the example's sizes.

Only the thread that started the trace records: the capture passes other threads'
calls on down unrecorded.
"""
import sys
import threading

import numpy as np

from ember import _tensor
from ember._graph.call_args import call_args
from ember._graph.ir import ArrayRef, Graph, Node, Ref, arg_names
from ember._graph.local_names import name_from_locals
from ember._graph.loud import _BACKWARD_MSG, TracerWarning, _warn
from ember._graph.names import NORM_CALLS, RANDOM_CALLS, RNN_CALLS
from ember._graph.symint import SymInt, TensorInt, _size, _state  # noqa: F401
from ember._graph.value_reads import _EMBER_DIR, _WRAPPERS, ValueReads
from ember.autograd import _modes

Tensor = _tensor.Tensor

__all__ = ["TracerWarning", "SymInt", "capture", "is_tracing", "current", "call_args"]


def written_as_constant(t, what):
    """``t``'s memory was filled outside the recorded ops (``nn.init.constant_``,
    ``orthogonal_``...): while a trace in this thread knows ``t``, it keeps the values
    written as a constant from here on, and says so with a ``TracerWarning`` at the
    user's line."""
    tr = current()
    if tr is None or tr._passes() or not tr._known(t):
        return
    _warn(f"{what} wrote values into a traced tensor outside the recorded ops; the trace "
          "keeps them as a constant, so they are the same on every call (PyTorch records "
          "its fills as ops)", _user_frame())
    v = tr.graph.add_constant(_tensor._make(t._data.copy()), _meta(t))
    tr.tmap[id(t)] = (t, v)
    tr.amap[id(t._data)] = (t._data, v)


def values_read(t):
    """An ember function computes with ``t``'s values outside the recorded ops (on its
    array or as Python numbers, a result made with no node): while a trace in this
    thread knows ``t``, its result is a constant of the trace; say so with a
    ``TracerWarning`` at the user's line, naming the function and the value."""
    if not _tensor._mode_active[0] or not isinstance(t, Tensor):
        return
    tr = current()
    if tr is None or tr._passes() or not tr._known(t):
        return
    tr.warn_read(t)


def branch_on_values(t, what):
    """An ember function chooses its computation or a size from ``t``'s values outside
    the recorded ops (``TransformerEncoder``'s left-aligned padding mask, the count of
    RReLU's draws): a capture for
    ``compile`` (one with a ``breaks`` list) notes a graph break, so the call runs
    eagerly and no graph replays the branch taken at the example for other values;
    ``jit.trace`` keeps the branch silently, as PyTorch's tracer does."""
    if not _tensor._mode_active[0] or not isinstance(t, Tensor):
        return
    tr = current()
    if tr is None or tr.breaks is None or tr._passes() or not tr._known(t):
        return
    f = _user_frame(2)
    tr.breaks.append((f"a branch on the values of {what}",
                      (f.f_code.co_filename, f.f_lineno) if f is not None else None))


def current():
    """The innermost capture on the mode stack started by this thread, or None."""
    me = threading.get_ident()
    for m in reversed(_modes.stack):
        if type(m) is _Trace and m.thread == me:
            return m
    return None


def is_tracing():
    """True while ``jit.trace`` is running the traced function (in its thread)."""
    return current() is not None


# ----- the trace -------------------------------------------------------------------------
def _meta(t):
    d = t._data
    isz = d.itemsize
    return {"shape": tuple(d.shape), "dtype": t.dtype,
            "strides": tuple(s // isz for s in d.strides), "requires_grad": t._requires_grad}


def _user_frame(start=2):
    """The innermost frame outside the ember package (where the user's code is)."""
    f = sys._getframe(start)
    while f is not None and f.f_code.co_filename.startswith(_EMBER_DIR):
        f = f.f_back
    return f


class ModuleCall:
    """One call of a submodule seen by a capture: its qualified ``path``, the Values of
    its tensor (and traced int) arguments in order (None when one was a constant), the
    nodes recorded while it ran and its result as a tree of Refs (a None inside a tuple
    stays None; the whole is None when it returned something else)."""

    __slots__ = ("path", "inputs", "nodes", "output_spec", "after", "dropout_p")

    def __init__(self, path, inputs, start, after=None):
        self.path, self.inputs, self.nodes, self.output_spec = path, inputs, start, None
        # the last node recorded before the call: where a call that records no nodes
        # (``nn.Dropout`` in eval mode) is written
        self.after = after
        # ``p`` of an ``nn.Dropout`` that recorded nothing (eval mode): PyTorch's trace
        # writes its call as ``torch.dropout(x, p, False)``
        self.dropout_p = None


class ScriptCall:
    """The target of a ``CallMethod`` node: calls a TorchScript module's ``forward``."""

    def __init__(self, module, path, method="forward"):
        self.module, self.path, self.method = module, path, method
        self.__name__ = method

    def __call__(self, module, *args, **kwargs):
        return self.module(*args, **kwargs)


def _plain_call_of(call):
    def run(module, *args, **kwargs):
        return call(module, args, kwargs)
    return run


def _flat_leaves(tree):
    if isinstance(tree, (tuple, list)):
        for x in tree:
            yield from _flat_leaves(x)
    elif isinstance(tree, dict):
        for x in tree.values():
            yield from _flat_leaves(x)
    else:
        yield tree


class _Trace(ValueReads, _modes.Mode):
    """One running capture, a mode on the mode stack: the graph being built and the maps
    from live tensors (and their arrays) to graph Values. ``depth`` > 0 pauses it (the
    calls then go on down unrecorded)."""

    composites = True

    def __init__(self, module_names=None, snapshot=False, script_calls=False,
                 python_ops=False):
        self.graph = Graph()
        self.script_calls = script_calls
        # jit.trace (the capture that records script calls) names a value after the
        # caller's local that holds it when an op reads it, as PyTorch's tracer does
        self.name_locals = script_calls
        self.local_names = {}   # local name -> the Value named after it last
        self.local_suffix = {}  # local name -> the last suffix given (``a.1``, ``a.2``)
        # a custom autograd.Function is one node (PyTorch's prim::PythonOp), not the ops
        # its forward runs: for the pictures, which show what the user called
        self.python_ops = python_ops
        self.calls_open = []  # ids of the module calls running, innermost last
        self.thread = threading.get_ident()
        self.depth = 0
        self.tmap = {}   # id(tensor) -> (tensor, Value); the tensor kept alive
        self.amap = {}   # id(array) -> (array, Value): aliases made without an op (.data)
        self.sizes = {}  # (id(Value), dim) -> SymInt
        self.views = {}  # id(base tensor) -> [views recorded]
        self.stale = set()
        self.scopes = []
        self.module_names = module_names or {}
        self.snapshot = snapshot
        self.snapshots = {}  # id(Value) -> array copy, for check_trace
        self.breaks = None  # a list: note what cannot be recorded instead of failing
        self.whole_rnn = False  # with breaks: recurrent layers still one node (export)
        self.warned_backward = False
        self.loose = False  # the call being encoded has an int/bool array of no value
        self.warned_frozen = set()
        self.int_reads = []  # (value, ember function, where) of each traced int read

    # ----- values -----------------------------------------------------------------------
    def register(self, t, v):
        self.tmap[id(t)] = (t, v)
        self.amap[id(t._data)] = (t._data, v)
        if self.snapshot and v.kind == "node":
            self.snapshots[id(v)] = t._data.copy()

    def value_of(self, t):
        e = self.tmap.get(id(t))
        if e is not None and e[0] is t:
            if id(t) in self.stale:
                raise NotImplementedError(
                    "jit.trace: this tensor is a view (or the base of a view) that was changed "
                    "in place through another view while tracing; ember's tracer does not "
                    "follow writes through views. Clone before writing in place.")
            return e[1]
        d = t._data
        e = self.amap.get(id(d))
        if e is not None and e[0] is d:
            # the same array as a traced tensor (``.data``, ``detach``): the same value
            self.tmap[id(t)] = (t, e[1])
            return e[1]
        base = getattr(d, "base", None)
        for _ in range(4):
            if base is None:
                break
            if id(base) in self.amap and self.amap[id(base)][0] is base:
                f = _user_frame()
                _warn("A tensor derived from a traced tensor outside ember's recorded ops is "
                      "used as a constant; the trace might not generalize to other inputs!", f)
                break
            base = getattr(base, "base", None)
        v = self.graph.add_constant(t, _meta(t))
        self.tmap[id(t)] = (t, v)
        return v

    def encode(self, tree, inputs):
        """(tree with Refs in place of tensors and traced ints, plain tree to run)."""
        t = type(tree)
        if t is Tensor or isinstance(tree, Tensor):
            v = self.value_of(tree)
            if self.name_locals and v.kind == "node" and v.name.isdigit():
                name_from_locals(self, tree, v, sys._getframe(1))
            inputs.append(v)
            return Ref(v), tree
        if t is SymInt:
            if tree._trace is not self:
                return int(tree), int(tree)
            inputs.append(tree._value)
            return Ref(tree._value), int(tree)
        if t is tuple or t is list:
            pairs = [self.encode(x, inputs) for x in tree]
            return t(p[0] for p in pairs), t(p[1] for p in pairs)
        if t is dict:
            pairs = {k: self.encode(x, inputs) for k, x in tree.items()}
            return ({k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()})
        if isinstance(tree, tuple) and hasattr(tree, "_fields"):
            pairs = [self.encode(x, inputs) for x in tree]
            return t(*(p[0] for p in pairs)), t(*(p[1] for p in pairs))
        if t is np.ndarray:
            return self._encode_array(tree, inputs), tree
        if isinstance(tree, Size):
            return self.encode(tuple(tree), inputs)
        if t is slice:
            (a, b, c), (pa, pb, pc) = self.encode((tree.start, tree.stop, tree.step), inputs)
            return slice(a, b, c), slice(pa, pb, pc)
        return tree, tree

    def _encode_array(self, a, inputs):
        """An array argument of a primitive (an index, a mask, lengths...): when it is a
        traced tensor's array, or that array seen with another shape, an
        :class:`ArrayRef` input of the node (PyTorch records such a tensor as an input
        of its op); otherwise the array itself, a constant of the call."""
        e = self.amap.get(id(a))
        if e is not None and e[0] is a:
            inputs.append(e[1])
            return ArrayRef(e[1])
        if a.base is None:
            if a.dtype.kind in "iub":
                self.loose = True
            return a
        ptr = a.__array_interface__["data"][0]
        for k, v in reversed(self.amap.values()):
            if k.dtype != a.dtype or k.size != a.size or \
                    k.__array_interface__["data"][0] != ptr:
                continue
            if k.shape == a.shape and k.strides == a.strides:
                inputs.append(v)
                return ArrayRef(v)
            if k.flags.c_contiguous and a.flags.c_contiguous:
                inputs.append(v)
                return ArrayRef(v, (-1,) if a.ndim == 1 else a.shape)
        if a.dtype.kind in "iub":
            self.loose = True
        return a

    def _warn_frozen(self, op, inputs):
        """An integer or boolean array that is no traced value reached ``op``: when the
        ember function the user called has a traced integer or boolean tensor argument
        that is not an input of the node, the array was computed from it outside the
        recorded ops and the trace keeps its values. Say so, naming that argument, at
        the user's line (once per op and argument)."""
        f, frames = sys._getframe(2), []
        while f is not None and f.f_code.co_filename.startswith(_EMBER_DIR):
            frames.append(f)
            f = f.f_back
        if not frames:
            return
        # the function the user called, past the decorators' wrappers
        outer = next((x for x in reversed(frames) if x.f_code.co_name not in _WRAPPERS and
                      x.f_code.co_name[0] != "_"), frames[-1])
        co = outer.f_code
        n = co.co_argcount + co.co_kwonlyargcount + bool(co.co_flags & 4) + \
            bool(co.co_flags & 8)
        ins = {id(v) for v in inputs}
        # (a tensor read as an int by an input node is an input too: ``index_select``'s dim)
        ins.update(id(v.node.inputs[0]) for v in inputs
                   if v.node is not None and v.node.target is TensorInt)
        for name in co.co_varnames[:n]:
            for t in _flat_leaves(outer.f_locals.get(name)):
                if not isinstance(t, Tensor) or t._data.dtype.kind not in "iub" or \
                        not self._known(t) or id(self.value_of(t)) in ins:
                    continue
                key = (op, co.co_name, name)
                if key in self.warned_frozen:
                    continue
                self.warned_frozen.add(key)
                _warn(f"{op}: the values of the traced tensor argument '{name}' of "
                      f"{co.co_name}() are recorded as a constant of the op, not as its "
                      "input, so the trace might not generalize to other inputs!", f)

    # ----- nodes ------------------------------------------------------------------------
    def call(self, op, target, run, args, kwargs, sym=False):
        """Run ``run(*args, **kwargs)`` unrecorded inside, and record it as one node."""
        pre = self.begin(args, kwargs)
        if self.loose:
            self.loose = False
            self._warn_frozen(op, pre[2])
        with _modes.hidden(self):
            out = run(*pre[3], **pre[4])
        return self.finish(op, target, pre, out, sym)

    # ----- the mode protocol (see ember.autograd._modes) ------------------------------
    def _passes(self):
        return self.depth or self.thread != threading.get_ident()

    def op(self, cls, args, params):
        """A primitive call reaching the capture: one node, run below."""
        if self._passes():
            return cls.apply(*args, **params)
        return self.call(_op_key(cls), cls, cls.apply, args, params)

    def node(self, node, grads, below):
        """A backward step (``grad``/``backward`` inside the traced code): its ops are
        recorded as they run, but the sizes its formula saved in the forward are plain
        numbers, so say once, at the user's line, that the trace is tied to them."""
        if not self._passes() and not self.warned_backward:
            self.warned_backward = True
            _warn(_BACKWARD_MSG, _user_frame(2))
        return below()

    def composite(self, op, fn, args, kwargs, run=None):
        """A composite function (``view``, ``x[key]``, a factory...) called while this
        capture is the innermost visible mode: one node, its inside unrecorded."""
        run = fn if run is None else run
        if self._passes():
            with _modes.hidden(self):
                return run(*args, **kwargs)
        return self.call(op, fn, run, args, kwargs)

    @property
    def unrolled(self):
        """Composite names recorded by their primitives instead of as one node. A capture
        for ``compile`` (one with a ``breaks`` list) guards its graphs on the input sizes,
        so it records the recurrent layers step by step, which its array plans run; a
        trace for ``jit``/``onnx``/``export`` records each as one node."""
        if self.breaks is None:
            return ()
        # compiled plans run eval-mode batch norm as its affine map, which they fuse
        return (NORM_CALLS if self.whole_rnn else RNN_CALLS + NORM_CALLS)

    def composite_locals(self, op, fn, given):
        """:meth:`composite` for a function with defaults: ``given`` is its ``locals()``
        on entry (see :func:`call_args`)."""
        args, kwargs = call_args(fn, given)
        return self.composite(op, fn, args, kwargs)

    def sym_size(self, t, dim):
        """``t.size(dim)`` / ``t.shape`` (dim None): traced ints for a traced tensor."""
        if self._passes() or not self._known(t):
            if dim is None:
                return Size(t._data.shape)
            return t._data.shape[t._wrap_dim(dim)]
        if dim is None:
            return Size(self.size(t, d) for d in range(t._data.ndim))
        return self.size(t, t._wrap_dim(dim))

    def _known(self, t):
        """Whether ``t`` is a traced value (itself, or a tensor over a traced array, as
        the engine makes for gradients)."""
        e = self.tmap.get(id(t))
        if e is not None and e[0] is t:
            return True
        d = t._data
        e = self.amap.get(id(d))
        return e is not None and e[0] is d

    def module_call(self, module, call, args, kwargs):
        """An ``nn.Module`` call: the nodes its forward records carry its scope name, and
        the call itself is noted (:class:`ModuleCall`) so TorchScript can write it as a
        method call of that submodule. With ``script_calls`` (``jit.trace``), a call of a
        compiled TorchScript module is one node that runs its code, as PyTorch's tracer
        records ``prim::CallMethod``: its loops and branches stay as written."""
        if self.thread != threading.get_ident():
            return call(module, args, kwargs)
        name = self.module_names.get(id(module))
        if self.script_calls and not self.depth and name != "" and \
                getattr(module, "_jit_class", None) is not None:
            return self.call("CallMethod", ScriptCall(module, name), _plain_call_of(call),
                             (module,) + tuple(args), kwargs)
        self.scopes.append(name if name is not None else type(module).__name__)
        saved = self.scopes
        if name is not None:
            self.scopes = [name]  # a qualified name is the whole path
        rec = self._begin_call(name, args, kwargs) if name and not self.depth else None
        try:
            out = call(module, args, kwargs)
        except BaseException:
            if rec is not None:
                self.calls_open.pop()
            raise
        finally:
            self.scopes = saved
            saved.pop()
        if rec is not None:
            self._end_call(rec, out)
            from ember.nn.modules.dropout import Dropout
            if not rec.nodes and not module.training and type(module) is Dropout:
                rec.dropout_p = float(module.p)
        return out

    def _begin_call(self, name, args, kwargs):
        ins = []
        for a in _flat_leaves((args, kwargs)):
            if isinstance(a, SymInt) and a._trace is self:
                ins.append(a._value)
            elif isinstance(a, Tensor):
                if not self._known(a):
                    ins = None  # a constant argument: the call is written inline
                    break
                ins.append(self.value_of(a))
        nodes = self.graph.nodes
        rec = ModuleCall(name, ins, len(nodes), nodes[-1] if nodes else None)
        self.graph.calls.append(rec)
        self.calls_open.append(id(rec))
        return rec

    def _end_call(self, rec, out):
        self.calls_open.pop()
        rec.nodes = self.graph.nodes[rec.nodes:]
        try:
            rec.output_spec = self._out_refs(out)
        except (TypeError, NotImplementedError):
            rec.output_spec = None

    def _out_refs(self, out):
        if isinstance(out, Tensor) and self._known(out):
            return Ref(self.value_of(out))
        if type(out) is tuple:
            # None inside a result (MultiheadAttention's weights with need_weights=False)
            # is left out of the method PyTorch writes for the call
            return tuple(None if o is None else self._out_refs(o) for o in out)
        raise TypeError("not a tensor or a tuple of tensors")

    def setitem(self, orig, x, key, value):
        """``x[key] = value``: recorded as ``setitem`` (a new value: ``x`` with the region
        replaced), which ``x`` stands for from then on."""
        if self._passes():
            with _modes.hidden(self):
                return orig(x, key, value)

        def run(x, key, value):
            y = x.clone()
            orig(y, key, value)
            return y
        out = self.call("setitem", run, run, (x, key, value), {})
        with _modes.hidden(self):
            orig(x, key, value)
        self.inplace(x, out)

    def random_inplace(self, op, fn, x, args, kwargs):
        """A random in-place fill (``bernoulli_``...): recorded as a node whose replay
        fills a fresh copy (so replays draw new values, as PyTorch's trace does)."""
        if self._passes() or not self._known(x):
            with _modes.hidden(self):
                return fn(x, *args, **kwargs)

        def functional(x, *args, **kwargs):
            y = x.clone()
            fn(y, *args, **kwargs)
            return y
        functional.__name__ = op
        # kept when its result goes unused (a fill overwritten later): its draw moves
        # the generator, which later draws of a replay depend on, as in PyTorch
        functional._side_effect = True
        pre = self.begin((x,) + tuple(args), kwargs)
        with _modes.hidden(self):
            out = fn(x, *args, **kwargs)
        self.finish(op, functional, pre, out)
        self.inplace(x, out)
        return out

    def random_inplace_locals(self, op, fn, given):
        """:meth:`random_inplace` for ``fn(self, ...)`` whose ``locals()`` on entry are
        ``given``."""
        args, kwargs = call_args(fn, given)
        return self.random_inplace(op, fn, args[0], args[1:], kwargs)

    def commit(self, orig, t, result):
        """An in-place write (``_inplace.commit``): not recorded (the value was computed
        out of place by recorded ops); ``t`` now stands for that value. The capture is
        paused, not hidden, while it runs: modes above it (a vmap level) still see it."""
        if self.thread != threading.get_ident():
            self.depth += 1  # (``commit`` asks for the mode again: a paused one passes)
            try:
                return orig(t, result)
            finally:
                self.depth -= 1
        self.depth += 1
        try:
            out = orig(t, result)
        finally:
            self.depth -= 1
        self.inplace(t, result)
        return out

    def alias(self, copy, t):
        """``copy`` is a private copy of ``t``'s old values (``_inplace.source_for``):
        the same graph value."""
        if not self._passes() and id(t) in self.tmap:
            self.tmap[id(copy)] = (copy, self.value_of(t))

    def unrecordable(self, what):
        """A transform above is about to do something a graph cannot replay."""
        if not self._passes():
            self.unfaithful(what)

    def unfaithful(self, what):
        """``what`` cannot be recorded so that it replays on other inputs (recording it
        would keep the example's values or sizes as constants). ``jit.trace`` fails; a
        capture with a ``breaks`` list (``compile``) notes it there and stops recording,
        so the call finishes eagerly and the graph is not used."""
        f = _user_frame(3)
        where = (f.f_code.co_filename, f.f_lineno) if f is not None else None
        if self.breaks is not None:
            self.breaks.append((f"cannot record {what}", where))
            self.depth += 1
            return
        at = f" (at {where[0]}:{where[1]})" if where else ""
        raise NotImplementedError(f"jit.trace: cannot record {what}{at}; the graph would "
                                  "replay the example's values as constants")

    def begin(self, args, kwargs):
        """Encode a call's arguments (before it runs: an in-place op changes them)."""
        inputs = []
        self.loose = False
        eargs, pargs = self.encode(args, inputs)
        ekw, pkw = self.encode(kwargs, inputs)
        return eargs, ekw, inputs, pargs, pkw

    def finish(self, op, target, pre, out, sym=False):
        """Record the node for a call encoded by :meth:`begin` that returned ``out``."""
        eargs, ekw, inputs = pre[:3]
        f = _user_frame()
        source = (f.f_code.co_filename, f.f_lineno) if f is not None else None
        names = arg_names(target, len(eargs))
        attrs = {names[i]: a for i, a in enumerate(eargs) if not _has_ref(a)}
        attrs.update((k, a) for k, a in ekw.items() if not _has_ref(a))
        node = Node(op, target, eargs, ekw, inputs, attrs, ".".join(
            s for s in self.scopes if s), source)
        g = self.graph
        if sym:
            (v,) = g.add_node(node, [{"type": "int", "data": out}])
            return SymInt(out, v, self)
        if isinstance(out, Tensor):
            (v,) = g.add_node(node, [_meta(out)])
            self.register(out, v)
            self._note_view(out)
            return out
        if isinstance(out, (tuple, list)) and all(isinstance(o, Tensor) for o in out):
            node.multi = True
            vs = g.add_node(node, [_meta(o) for o in out])
            for o, v in zip(out, vs):
                self.register(o, v)
                self._note_view(o)
            return out
        raise NotImplementedError(f"jit.trace: {op} returned {type(out).__name__}, which the "
                                  "tracer cannot record")

    def _note_view(self, t):
        base = t._base
        if base is not None:
            self.views.setdefault(id(base), []).append(t)

    def size(self, t, dim):
        v = self.value_of(t)
        # one size node per value and module call: a size read inside a submodule's
        # forward stays that method's own (a written method call is self-contained)
        key = (id(v), dim, self.calls_open[-1] if self.calls_open else None)
        s = self.sizes.get(key)
        if s is None:
            n = t._data.shape[dim]
            inputs = [v]
            f = _user_frame()
            node = Node("size", _size, (Ref(v), dim), {}, inputs, {"dim": dim},
                        ".".join(x for x in self.scopes if x),
                        (f.f_code.co_filename, f.f_lineno) if f is not None else None)
            (out,) = self.graph.add_node(node, [{"type": "int", "data": n}])
            s = self.sizes[key] = SymInt(n, out, self)
        return s

    def inplace(self, t, result):
        """``t`` now holds ``result``'s value (after an in-place op)."""
        v = self.value_of(result)
        e = self.tmap.get(id(t))
        n = v.node if v.kind == "node" else None
        if e is not None and e[0] is t and n is not None and n.inputs and n.inputs[0] is e[1]:
            n.inplace = True   # ``t.relu_()``: a node on t's old value, written into t
        base = t._base if t._base is not None else t
        family = [base] + self.views.get(id(base), [])
        for other in family:
            if other is not t:
                self.stale.add(id(other))
        self.stale.discard(id(t))
        self.tmap[id(t)] = (t, v)
        self.amap[id(t._data)] = (t._data, v)
        if self.snapshot:
            self.snapshots[id(v)] = t._data.copy()


def _has_ref(tree):
    if isinstance(tree, Ref):
        return True
    if isinstance(tree, slice):
        return _has_ref((tree.start, tree.stop, tree.step))
    if isinstance(tree, (tuple, list)):
        return any(_has_ref(x) for x in tree)
    if isinstance(tree, dict):
        return any(_has_ref(x) for x in tree.values())
    return False


Size = _tensor.Size


# ----- helpers of the mode -------------------------------------------------------------
def _op_key(cls):
    """The IR op name of a primitive: ember's own class name (``Add``), which stays
    stable whatever name the class shows PyTorch users (``AddBackward0``)."""
    return cls.__dict__.get("_op_name") or cls.__name__


# ----- starting and ending -------------------------------------------------------------
class capture:
    """Context manager: record ember calls made in this thread into ``self.trace.graph``
    (the trace is a mode on the mode stack while the block runs)."""

    def __init__(self, module_names=None, snapshot=False, script_calls=False,
                 python_ops=False):
        self.trace = _Trace(module_names, snapshot, script_calls, python_ops)

    def __enter__(self):
        if current() is not None:
            raise RuntimeError("jit.trace: another trace is running in this thread (nested); "
                               "ember traces one function at a time per thread")
        _modes.push(self.trace)
        return self.trace

    def __exit__(self, *exc):
        _modes.pop(self.trace)
        return False


RANDOM_OPS = RANDOM_CALLS  # the random calls recorded as one node each
