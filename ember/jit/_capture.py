"""Records ember op calls into an :class:`ember.jit._ir.Graph` while a trace runs.

Design: swap in recording versions only while a trace is active
----------------------------------------------------------------
Every tensor op in ember reaches NumPy through one of three doors: the classmethod
``Primitive.apply`` (views and ops with several outputs included, since
``ViewPrimitive.apply`` and ``linalg_decomp``'s override call it), and the two fast
closures that ``Primitive.unary_function`` / ``binary_function`` build for the hot
elementwise ops and operators. A per-call "are we tracing?" test in those paths
would be paid by every op of every program, so none is added: :func:`capture`
installs recording versions when a trace starts and restores the originals when it
ends. ``Primitive.apply`` is replaced on the class; the fast closures (listed by
``node._FAST_FUNCTIONS`` when they are made) get a recording ``__code__`` with the
same free variables, so every reference to them -- ``Tensor.__add__``, ``ember.exp``,
a module's private alias -- records without being found. Outside a trace the code
that runs is byte for byte the code that ran before (benchmarks/op_overhead.py at
parity, measured in docs/jit.md).

A few calls are recorded one level above the primitives, as one node each, because
the primitives see their arguments already resolved: ``view``/``reshape``/``flatten``/
``unflatten`` (``-1`` and sizes read from the input), ``view_as``/``reshape_as``/
``expand``/``expand_as``, ``x[key]`` and ``x[key] = v`` (index tensors stay inputs,
not constants), ``F.embedding``, and the factories ``zeros``/``ones``/``full``/
``empty``/``*_like``/``arange`` (an LSTM's zero state has its input's batch size).
Their references are swapped in the ``ember`` modules and on ``Tensor`` for the
duration of the trace, and the primitives they run inside are not recorded.

Sizes: ``Tensor.size``/``Tensor.shape`` of a traced tensor return :class:`SymInt`
(an ``int`` that remembers the ``size`` node it came from); arithmetic on them is
recorded (``int.mul``...), and a call that receives one records the dependency, so
``x.view(x.size(0), -1)`` replays at another batch size as PyTorch's trace does.

Loud tracing: ``bool``/``int``/``float``/``item``/``tolist``/``numpy``/``len``/
iteration of a traced tensor, called from user code, emit :class:`TracerWarning` at
the user's file and line (``warnings.warn_explicit``).

Only the thread that started the trace records; other threads run the originals.
"""
import operator
import os
import sys
import threading
import types
import warnings

from ember import _tensor
from ember.autograd import node as _node
from ember.autograd.function import Function
from ember.jit._ir import Graph, Node, Ref, arg_names

Tensor = _tensor.Tensor
Primitive = _node.Primitive

__all__ = ["TracerWarning", "SymInt", "capture", "is_tracing"]

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TracerWarning(Warning):
    """A trace may not generalize to other inputs (PyTorch's ``torch.jit.TracerWarning``)."""

    @staticmethod
    def ignore_lib_warnings():
        warnings.filterwarnings("ignore", category=TracerWarning, module="ember.(?!jit)")


_active = None  # the running _Trace, or None


def is_tracing():
    """True while ``jit.trace`` is running the traced function (in its thread)."""
    st = _active
    return st is not None and st.thread == threading.get_ident()


def _state():
    """The active trace if this call should record, else None."""
    st = _active
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


def _int_binop(name, fn, reflected=False):
    def op(self, other):
        if not isinstance(other, int) or isinstance(other, bool):
            return fn(other, int(self)) if reflected else fn(int(self), other)
        a, b = (other, self) if reflected else (self, other)
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


def _neg(x):
    return -x


def _sym_neg(self):
    st = _state()
    if st is None:
        return -int(self)
    return st.call("int.neg", _neg, _neg, (self,), {}, sym=True)


SymInt.__neg__ = _sym_neg


def _size(t, dim):
    """``t.size(dim)`` (the replay target of a recorded ``size`` node)."""
    return t.size(dim)


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


class _Trace:
    """The state of one running trace: the graph being built and the maps from live
    tensors (and their arrays) to graph Values."""

    def __init__(self, module_names=None, snapshot=False):
        self.graph = Graph()
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
        if isinstance(tree, Size):
            return self.encode(tuple(tree), inputs)
        if t is slice:
            (a, b, c), (pa, pb, pc) = self.encode((tree.start, tree.stop, tree.step), inputs)
            return slice(a, b, c), slice(pa, pb, pc)
        return tree, tree

    # ----- nodes ------------------------------------------------------------------------
    def call(self, op, target, run, args, kwargs, sym=False):
        """Run ``run(*args, **kwargs)`` unrecorded inside, and record it as one node."""
        pre = self.begin(args, kwargs)
        self.depth += 1
        try:
            out = run(*pre[3], **pre[4])
        finally:
            self.depth -= 1
        return self.finish(op, target, pre, out, sym)

    def begin(self, args, kwargs):
        """Encode a call's arguments (before it runs: an in-place op changes them)."""
        inputs = []
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
        key = (id(v), dim)
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


# ----- recording versions of the doors ---------------------------------------------------
_ORIG_APPLY = Primitive.__dict__["apply"].__func__


def _apply_rec(cls, *args, **params):
    st = _state()
    if st is None:
        return _ORIG_APPLY(cls, *args, **params)
    return st.call(_op_key(cls), cls, lambda *a, **k: _ORIG_APPLY(cls, *a, **k), args, params)


def _op_key(cls):
    """The IR op name of a primitive: ember's own class name (``Add``), which stays
    stable whatever name the class shows PyTorch users (``AddBackward0``)."""
    return cls.__dict__.get("_op_name") or cls.__name__


def _function_apply_rec(cls, *args, **kwargs):
    """A custom ``autograd.Function`` with a ``symbolic`` (its ONNX spelling) is recorded
    as one node, so that exporters can call it; others are recorded op by op."""
    run = Function.__dict__["apply"].__func__ if _ORIG_FUNCTION_APPLY is None else \
        _ORIG_FUNCTION_APPLY
    st = _state()
    if st is None or getattr(cls, "symbolic", None) is None:
        return run(cls, *args, **kwargs)
    return st.call(cls.__name__, cls, lambda *a, **k: run(cls, *a, **k), args, kwargs)


def _unary_template(cls, forward, multi):
    def f(x):
        if not isinstance(x, Tensor):
            # this code runs with node.py's globals: builtins only
            raise TypeError(f"{getattr(cls, '_op_name', cls.__name__).lower()}(): argument "
                            f"'input' must be Tensor, not {type(x).__name__}")
        _ = (forward, multi)  # the same free variables as the fast closure
        return cls.apply(x)
    return f


def _binary_template(cls, forward, reflected):
    def f(a, b):
        if reflected:
            a, b = b, a
        # runs with node.py's globals (the closure's): Tensor, _PLAIN, _check_operand
        for x in (a, b):
            if not isinstance(x, Tensor) and type(x) not in _PLAIN and forward:
                _check_operand(cls, x)
        return cls.apply(a, b)
    return f


_TEMPLATES = {("cls", "forward", "multi"): _unary_template(None, None, None).__code__,
              ("cls", "forward", "reflected"): _binary_template(None, None, None).__code__}


_PLAIN = _node._PLAIN
_check_operand = _node._check_operand


def _call_rec(self, *args, **kwargs):
    st = _active
    if st is None or st.thread != threading.get_ident():
        return _ORIG_CALL(self, *args, **kwargs)
    name = st.module_names.get(id(self))
    st.scopes.append(name if name is not None else type(self).__name__)
    saved = st.scopes
    if name is not None:
        st.scopes = [name]  # a qualified name is the whole path
    try:
        return _ORIG_CALL(self, *args, **kwargs)
    finally:
        st.scopes = saved
        saved.pop()


def _composite(op, fn):
    def wrapper(*args, **kwargs):
        st = _state()
        if st is None:
            return fn(*args, **kwargs)
        return st.call(op, fn, fn, args, kwargs)
    wrapper.__name__ = getattr(fn, "__name__", op)
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


def _composites():
    from ember import _factory
    from ember.nn import functional as F
    from ember.ops import indexing, shape
    table = {"view": shape.view, "reshape": shape.reshape, "flatten": shape.flatten,
             "getitem": indexing.getitem, "embedding": F.embedding,
             "view_as": shape.view_as, "reshape_as": shape.reshape_as,
             "expand": shape.expand, "expand_as": shape.expand_as,
             "unflatten": shape.unflatten, "detach": Tensor.detach}
    for name in ("zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
                 "empty_like", "arange"):
        table[name] = getattr(_factory, name)
    from ember import _random_ops
    for name in RANDOM_OPS:
        if not name.endswith("_"):
            table[name] = getattr(_random_ops, name)
    return table


# ----- loud tracing ----------------------------------------------------------------------
_LOUD = {
    "__bool__": "a Python boolean", "__int__": "a Python integer",
    "__float__": "a Python float", "__index__": "a Python index", "item": "a Python number",
    "tolist": "a Python list", "numpy": "a NumPy array", "__array__": "a NumPy array",
}
_TAIL = (" might cause the trace to be incorrect. We can't record the data flow of Python "
         "values, so this value will be treated as a constant in the future. This means that "
         "the trace might not generalize to other inputs!")
_LEN_MSG = ("Using len to get tensor shape might cause the trace to be incorrect. Recommended "
            "usage would be tensor.shape[0]. Passing a tensor of different shape might lead to "
            "errors or silently give incorrect results.")
_ITER_MSG = ("Iterating over a tensor might cause the trace to be incorrect. Passing a tensor "
             "of different shape won't change the number of iterations executed (and might "
             "lead to errors or silently give incorrect results).")


def _warn(msg, frame):
    if frame is None:
        warnings.warn(msg, TracerWarning, stacklevel=3)
        return
    g = frame.f_globals
    warnings.warn_explicit(msg, TracerWarning, frame.f_code.co_filename, frame.f_lineno,
                           module=g.get("__name__"),
                           registry=g.setdefault("__warningregistry__", {}),
                           module_globals=g)


def _loud(name, orig, msg):
    def method(self, *args, **kwargs):
        st = _active
        if st is not None and st.thread == threading.get_ident() and id(self) in st.tmap:
            f = sys._getframe(1)
            if not f.f_code.co_filename.startswith(_EMBER_DIR):
                _warn(msg, f)
        return orig(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = orig.__doc__
    return method


def _size_rec(self, dim=None):
    st = _state()
    if st is None or id(self) not in st.tmap:
        return _ORIG_SIZE(self, dim)
    if dim is None:
        return Size(st.size(self, d) for d in range(self._data.ndim))
    return st.size(self, self._wrap_dim(dim))


def _shape_rec(self):
    return _size_rec(self)


_ORIG_SIZE = Tensor.size
_ORIG_CALL = None  # nn.Module.__call__, filled on first capture (nn imports jit lazily)
_ORIG_FUNCTION_APPLY = None  # autograd.Function.apply, filled on first capture


# ----- installing and removing -----------------------------------------------------------
class capture:
    """Context manager: record ember calls made in this thread into ``self.trace.graph``."""

    _lock = threading.Lock()

    def __init__(self, module_names=None, snapshot=False):
        self.trace = _Trace(module_names, snapshot)
        self._undo = []

    def __enter__(self):
        global _active, _ORIG_CALL
        if not capture._lock.acquire(blocking=False):
            raise RuntimeError("jit.trace: another trace is running (nested or in another "
                               "thread); ember traces one function at a time")
        try:
            from ember.nn.modules.module import Module
            if _ORIG_CALL is None:
                _ORIG_CALL = Module.__dict__["__call__"]
            self._set(Primitive, "apply", classmethod(_apply_rec))
            self._set(Module, "__call__", _call_rec)
            global _ORIG_FUNCTION_APPLY
            if _ORIG_FUNCTION_APPLY is None:
                _ORIG_FUNCTION_APPLY = Function.__dict__["apply"].__func__
            self._set(Function, "apply", classmethod(_function_apply_rec))
            for f in list(_node._FAST_FUNCTIONS):
                code = _TEMPLATES[f.__code__.co_freevars]
                self._undo.append((f, "__code__", f.__code__))
                f.__code__ = code
            self._swap_functions()
            self._set(Tensor, "size", _size_rec)
            self._set(Tensor, "shape", property(_shape_rec))
            for name, what in _LOUD.items():
                orig = Tensor.__dict__[name]
                self._set(Tensor, name, _loud(name, orig, f"Converting a tensor to {what}"
                                                          + _TAIL))
            self._set(Tensor, "__len__", _loud("__len__", Tensor.__dict__["__len__"], _LEN_MSG))
            self._set(Tensor, "__iter__", _loud("__iter__", Tensor.__dict__["__iter__"],
                                                _ITER_MSG))
        except BaseException:
            self._restore()
            capture._lock.release()
            raise
        _active = self.trace
        return self.trace

    def __exit__(self, *exc):
        global _active
        _active = None
        self._restore()
        capture._lock.release()

    def _set(self, obj, name, value):
        self._undo.append((obj, name, obj.__dict__[name]))
        setattr(obj, name, value)

    def _restore(self):
        for obj, name, old in reversed(self._undo):
            setattr(obj, name, old)
        self._undo = []

    def _swap_functions(self):
        """Replace the composite functions by recording wrappers wherever ember refers
        to them (module globals and Tensor methods)."""
        table = _composites()
        wrappers = {id(fn): (fn, _composite(op, fn)) for op, fn in table.items()}
        for modname, mod in list(sys.modules.items()):
            if not (modname == "ember" or modname.startswith("ember.")) or \
                    modname.startswith("ember.jit") or not isinstance(mod, types.ModuleType):
                continue
            d = mod.__dict__
            for k, val in list(d.items()):
                w = wrappers.get(id(val))
                if w is not None and w[0] is val:
                    self._set(mod, k, w[1])
        from ember.ops import _inplace
        for name, make in (("commit", _commit_rec), ("source_for", _source_for_rec)):
            orig = getattr(_inplace, name)
            w = make(orig)
            for modname, mod in list(sys.modules.items()):
                if modname.startswith("ember") and isinstance(mod, types.ModuleType) and \
                        mod.__dict__.get(name) is orig:
                    self._set(mod, name, w)
        self._set(Tensor, "__setitem__", _setitem_rec(Tensor.__dict__["__setitem__"]))
        for name in RANDOM_OPS:
            if name.endswith("_"):
                self._set(Tensor, name, _random_inplace(name, Tensor.__dict__[name]))
        for k, val in list(Tensor.__dict__.items()):
            w = wrappers.get(id(val))
            if w is not None and w[0] is val:
                self._set(Tensor, k, w[1])


def _setitem_rec(orig):
    """``x[key] = value`` while tracing: recorded as ``setitem`` (a new value: ``x``
    with the region replaced), which ``x`` stands for from then on."""
    def run(x, key, value):
        y = x.clone()
        orig(y, key, value)
        return y

    def setitem(self, key, value):
        st = _state()
        if st is None:
            return orig(self, key, value)
        out = st.call("setitem", run, run, (self, key, value), {})
        st.depth += 1
        try:
            orig(self, key, value)
        finally:
            st.depth -= 1
        st.inplace(self, out)
    return setitem


def _random_inplace(op, fn):
    """A random in-place fill (``bernoulli_``...) while tracing: recorded as a node whose
    replay fills a fresh copy (so replays draw new values, as PyTorch's trace does)."""
    def functional(x, *args, **kwargs):
        y = x.clone()
        fn(y, *args, **kwargs)
        return y
    functional.__name__ = op

    def method(self, *args, **kwargs):
        st = _state()
        if st is None or id(self) not in st.tmap:
            return fn(self, *args, **kwargs)
        pre = st.begin((self,) + args, kwargs)
        st.depth += 1
        try:
            out = fn(self, *args, **kwargs)
        finally:
            st.depth -= 1
        st.finish(op, functional, pre, out)
        st.inplace(self, out)
        return out
    method.__name__ = op
    method.__doc__ = fn.__doc__
    return method


RANDOM_OPS = ("bernoulli_", "uniform_", "normal_", "random_", "exponential_", "geometric_",
              "cauchy_", "log_normal_", "rand", "randn", "randint", "rand_like", "randn_like",
              "randint_like", "bernoulli", "normal", "multinomial", "poisson", "randperm")


def _source_for_rec(orig):
    """``_inplace.source_for`` while tracing: a private copy of the old values is the
    same graph value as the tensor it copies."""
    def source_for(t, copies_self, args=()):
        src = orig(t, copies_self, args)
        st = _state()
        if st is not None and src is not t and id(t) in st.tmap:
            st.tmap[id(src)] = (src, st.value_of(t))
        return src
    return source_for


def _commit_rec(orig):
    """``_inplace.commit`` while tracing: the write itself is not recorded (the value
    was computed out of place by recorded ops); ``t`` now stands for that value."""
    def commit(t, result):
        st = _state()
        if st is None:
            return orig(t, result)
        st.depth += 1
        try:
            out = orig(t, result)
        finally:
            st.depth -= 1
        st.inplace(t, result)
        return out
    return commit
