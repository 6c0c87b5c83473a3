"""Batched tensors: what ``vmap`` hands to ``func`` in place of its batched inputs.

A batched tensor is an ordinary ember :class:`~ember.Tensor` (class :class:`BatchedTensor`)
whose ``_data`` is a :class:`BArr` instead of an array.  A ``BArr`` holds

* ``value``: the *underlying* tensor, the whole batch with the batch dim in front; it is a
  plain tensor, or for nested ``vmap`` a batched tensor of an outer level, and it is what
  autograd records (so the graph, and any backward through it, is the batched one);
* ``level``: which ``vmap`` call the batch dim belongs to (levels grow inwards);
* the *logical* (per-sample) ``shape``, ``dtype`` and ``ndim`` that ``func`` sees.

Every ember op reaches NumPy through ``Primitive.apply`` or the two fast closures of
``ember.autograd.node``, and each of them first asks the mode stack
(``ember.autograd._modes``).  Each running ``vmap`` level is a mode on it
(:class:`_LevelMode`): an op with no argument batched at that level goes on down; an op
with one runs the op's batching rule.  A rule calls ordinary ember ops on the underlying
tensors (those calls go to the modes below, which is how nested levels unwind) and wraps
the result.  An op without a rule raises
:class:`NoRule`, and so does any other code that reaches for a batched tensor's array
(``.numpy()``, ``.item()``, NumPy on ``_data``): ``vmap`` then falls back to its
per-sample loop and names the op in a warning -- never a silently wrong batch.

Forward AD meets vmap on the same stack.  A forward-AD level below a vmap level keeps its
tangents on the underlying tensors (the rules' ops carry them).  A level above one keeps
them on the batched tensors; an op whose primal is batched is then computed beneath the
vmap levels (:func:`jvp_beneath`), and :func:`lift` and ``grads`` carry tangents across
the batched/underlying boundary.
"""
import math
import os
import sys
import threading

import numpy as np

from ember._tensor import Tensor
from ember.autograd import _modes

_new = object.__new__


class NoRule(Exception):
    """Raised inside a batched call for an op that has no batching rule."""

    def __init__(self, what):
        super().__init__(what)
        self.what = what


class RandomnessError(RuntimeError):
    """A random op inside ``vmap(..., randomness='error')``."""


class Refused(RuntimeError):
    """A call PyTorch's vmap refuses on principle: a result whose shape depends on each
    sample's values (nonzero, unique, a batched boolean mask), or running statistics
    updated in place by a batch they are not batched with.  ``vmap`` raises it instead of
    running its per-sample loop, whose answer would exist only when the samples happen
    to agree."""


class _NoAttr(NoRule, AttributeError):
    """A missing array attribute: also an AttributeError, so ``hasattr`` probes (is this
    a CuPy array?) answer False instead of failing."""


class Level:
    """One running ``vmap``: its id, batch size and randomness mode.  The outermost one
    also keeps ``undo``: the memory its batched call writes in place, as it was before
    (see :func:`note_writes`)."""

    __slots__ = ("id", "size", "randomness", "rng_state", "thread", "mode", "undo")

    def __init__(self, id_, size, randomness):
        self.id, self.size, self.randomness = id_, size, randomness
        self.rng_state = self.mode = self.undo = None
        self.thread = threading.get_ident()


levels = []  # the running vmaps, outermost first
_next_id = [0]


class BArr:
    """The ``_data`` of a batched tensor (see the module docstring).  It answers the
    metadata questions ember's Python code asks (shape, dtype, ndim, size) with the
    per-sample values, and raises :class:`NoRule` for anything that needs the numbers."""

    __slots__ = ("value", "level", "shape", "dtype", "ndim", "size")
    __array_ufunc__ = None  # NumPy ufuncs on it raise TypeError instead of guessing

    def __init__(self, value, level):
        d = value._data
        self.value, self.level = value, level
        self.shape = tuple(d.shape[1:])
        self.dtype = d.dtype
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def strides(self):
        # the strides of a contiguous per-sample tensor: ember reads them only to lay out
        # new tensors ``like`` this one
        st, acc = [], self.dtype.itemsize
        for n in reversed(self.shape):
            st.append(acc)
            acc *= max(n, 1)
        return tuple(reversed(st))

    @property
    def flags(self):
        # contiguous underneath with the batch in front: each sample is contiguous too
        return self.value._data.flags

    def reshape(self, *shape):
        # asked only by ``ops.shape._try_view`` (can this be a view?): the answer is
        # whether the underlying tensor can be viewed with the batch in front
        from ember.ops.shape import _try_view
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if tuple(shape) == self.shape or (self.ndim == 1 and tuple(shape) == (-1,)):
            return self  # no change of shape (an index array's ``reshape(-1)``)
        inner = self.value._data
        full = (inner.shape[0],) + tuple(shape)
        if type(inner) is BArr:  # nested: viewable if the outer level's array is
            inner.reshape(full)
        elif _try_view(inner, full) is None:
            raise ValueError("not viewable")
        return self

    def min(self):
        # index bounds checks (``ops.indexing.parse_index``): over every sample at once
        return self.value._data.min()

    def max(self):
        return self.value._data.max()

    def copy(self):
        return BArr(self.value.clone(), self.level)

    def __setitem__(self, key, src):
        # the write of an in-place op (``ops._inplace.commit``): done in place on the
        # underlying tensor, so views and versions behave as outside vmap
        from ember._tensor import _make
        if key is not Ellipsis:
            raise NoRule("an indexed write into a batched tensor's array")
        if type(src) is BArr and src.level == self.level:
            self.value.copy_(src.value)
        elif type(src) is np.ndarray:
            self.value.copy_(_make(src))
        else:
            raise NoRule("an in-place write into a batched tensor")

    def __array__(self, *args, **kwargs):
        raise NoRule(_culprit("reads a batched tensor's values (item(), tolist(), numpy(), "
                              "bool(), data-dependent Python control flow)"))

    def __getattr__(self, name):
        raise _NoAttr(_culprit(f"uses array attribute .{name} of a batched tensor"))

    def __getitem__(self, key):
        raise NoRule(_culprit("indexes a batched tensor's array"))

    def __len__(self):
        raise NoRule(_culprit("takes len() of a batched tensor's array"))

    def __iter__(self):
        raise NoRule(_culprit("iterates over a batched tensor's array"))

    def __bool__(self):
        raise NoRule(_culprit("takes bool() of a batched tensor"))


_EMBER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _culprit(what):
    """Name the ember function the user called that ``what`` (reaching for a batched
    tensor's array, which no rule covers): the outermost of the ember frames on top of
    the stack."""
    f = sys._getframe(2)
    while f is not None and not f.f_code.co_filename.startswith(_EMBER) and \
            "site-packages" in f.f_code.co_filename:
        f = f.f_back  # NumPy's Python wrappers (np.argsort ...) between ember and us
    name = None
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_EMBER):
            break
        if fn.endswith("_tensor.py"):
            if not f.f_code.co_name.startswith("_") or f.f_code.co_name.startswith("__"):
                name = f"Tensor.{f.f_code.co_name}"
        elif not fn.endswith("_batched.py"):
            mod = f.f_globals.get("__name__", "")
            name = f"{mod}.{f.f_code.co_name}"
        f = f.f_back
    return f"{name} (it {what})" if name else f"code that {what}"


class BatchedTensor(Tensor):
    """A tensor inside ``vmap``: per-sample shape outside, the whole batch underneath."""

    __slots__ = ()

    def __repr__(self):
        d = self._data
        return f"BatchedTensor(lvl={d.level}, bdim=0, value=\n{d.value!r})"

    @property
    def requires_grad(self):
        return self._data.value.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        self._data.value.requires_grad_(requires_grad)
        self._requires_grad = bool(requires_grad)
        return self

    def detach(self):
        d = self._data
        return wrap(d.value.detach(), d.level)

    def backward(self, *args, **kwargs):
        raise RuntimeError("vmap: backward() of a batched tensor is not supported inside "
                           "vmap; use ember.func.grad or ember.func.vjp inside the function")


def wrap(value, level):
    """A batched tensor at ``level`` over ``value`` (batch dim 0 of ``value``)."""
    t = _new(BatchedTensor)
    t._data = BArr(value, level)
    t._requires_grad = value._requires_grad
    t._grad = t._base = t._extra = None
    t.grad_fn = value.grad_fn
    t._output_nr = 0
    t._vc = [0]
    return t


def level_of(x):
    """The level of ``x``'s outermost batch (a tensor or a raw array), or None."""
    d = x._data if isinstance(x, Tensor) else x
    return d.level if type(d) is BArr else None


def unwrap(x, lvl):
    """``(underlying, True)`` if ``x`` is batched at level ``lvl``, else ``(x, False)``."""
    if isinstance(x, Tensor):
        d = x._data
        if type(d) is BArr and d.level == lvl:
            return d.value, True
    return x, False


def is_batched(x):
    return isinstance(x, Tensor) and type(x._data) is BArr


def _top(args, params):
    top = None
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            if type(d) is BArr and (top is None or d.level > top):
                top = d.level
        elif type(a) is BArr:
            if top is None or a.level > top:
                top = a.level
        elif type(a) is tuple or type(a) is list:
            for b in a:
                d = b._data if isinstance(b, Tensor) else b
                if type(d) is BArr and (top is None or d.level > top):
                    top = d.level
    if params:
        for a in params.values():
            if isinstance(a, Tensor) and type(a._data) is BArr:
                if top is None or a._data.level > top:
                    top = a._data.level
    return top


def level(lvl_id):
    for lv in levels:
        if lv.id == lvl_id:
            return lv
    raise RuntimeError(f"vmap: a batched tensor of level {lvl_id} escaped its vmap; return it "
                       "from the vmapped function instead of keeping it")


class _LevelMode(_modes.Mode):
    """A running ``vmap`` level on the mode stack: a call with an argument batched at
    this level runs the op's batching rule (``cls.batch``); any other call goes on down.
    A rule's own calls on the underlying tensors go to the modes below (outer levels,
    forward-AD levels entered outside this vmap, capture, the profiler)."""

    def __init__(self, lv):
        self.lv = lv

    def transparent(self, values):
        # a composite function with no argument batched at this level (a graph capture
        # below may record it as one node, hiding this level: it would pass every op)
        return _top(tuple(values), None) != self.lv.id

    def op(self, cls, args, params):
        if _top(args, params) != self.lv.id:
            return cls.apply(*args, **params)
        rule = cls.batch  # the op's own rule (ember.ops._batch); a plain function
        if rule is None:
            raise NoRule(cls._op_name)
        return rule(cls, self.lv.id, args, params)

    def function(self, cls, args, kwargs, below):
        # a custom autograd.Function has no batching rule: vmap runs it per sample
        for a in list(args) + list(kwargs.values()):
            if is_batched(a) and _chain_has(a, self.lv.id):
                raise NoRule(f"autograd.Function {cls.__name__}")
        return below()

    def routed_call(self, fn, args, kwargs):
        # the function-level rules (``_function_rules``): composites that read values
        if self.lv.thread != threading.get_ident():
            return NotImplemented
        from ember.func._function_rules import rule_for
        rule = rule_for(fn)
        if rule is None:
            return NotImplemented
        return rule(*args, **kwargs)


def _chain_has(x, lvl_id):
    d = x._data
    while type(d) is BArr:
        if d.level == lvl_id:
            return True
        d = d.value._data
    return False


def _chain(x):
    """The running levels ``x`` is batched at, outermost first."""
    ids = []
    d = x._data if isinstance(x, Tensor) else None
    while type(d) is BArr:
        ids.append(d.level)
        d = d.value._data
    return [level(i) for i in reversed(ids)]


def push(size, randomness):
    """Enter a vmap level: a mode of its own on the mode stack."""
    _next_id[0] += 1
    lv = Level(_next_id[0], size, randomness)
    if not levels:
        lv.undo = {}
    levels.append(lv)
    lv.mode = _LevelMode(lv)
    _modes.push(lv.mode)
    return lv


def pop(lv):
    _modes.pop(lv.mode)
    levels.remove(lv)


def note_writes(targets):
    """Keep what the memory of ``targets`` (tensors about to be written in place) holds
    now, once per array, for :func:`undo_writes`.  A batched call that fails part-way
    (an op without a rule) is run again as a per-sample loop; the writes it had done
    (a module's ``num_batches_tracked += 1``, running statistics) would otherwise land
    twice."""
    if not levels or levels[0].undo is None:
        return
    undo = levels[0].undo
    for t in targets:
        if not isinstance(t, Tensor):
            continue
        counters = [t._vc]
        d = t._data
        while type(d) is BArr:
            counters.append(d.value._vc)
            d = d.value._data
        if isinstance(d, np.ndarray) and id(d) not in undo:
            undo[id(d)] = (d, d.copy(), [(c, c[0]) for c in counters])


def undo_writes(lv):
    """Put back the memory (and version counters) the batched call of the outermost
    level ``lv`` wrote in place, latest first."""
    for d, saved, counters in reversed(list((lv.undo or {}).values())):
        d[...] = saved
        for c, version in counters:
            c[0] = version
    lv.undo = None


# ----- lifting: a tensor batched at every running level ----------------------------------
def lift(x, lvls=None):
    """``x`` batched at every level in ``lvls`` (default: all running vmaps); levels it
    lacks get the batch by expansion (a stride-0 view, no copy).  ``grad`` inside ``vmap``
    lifts the inputs it differentiates, so that each sample gets its own gradient.  The
    lifted tensor keeps ``x``'s tangents at the forward-AD levels above the new batch
    (the same per sample)."""
    lvls = levels if lvls is None else lvls
    if not lvls:
        return x
    top = lvls[-1]
    lv = level_of(x)
    if lv == top.id:
        inner = lift(x._data.value, lvls[:-1])
        if inner is x._data.value:
            return x
        out = wrap(inner, top.id)
    else:
        y = lift(x, lvls[:-1])
        with _modes.hidden(top.mode):  # levels above the new batch see no op here
            e = y.unsqueeze(0).expand((top.size,) + tuple(y.shape))
        out = wrap(e, top.id)
    _carry_tangents(x, out, top.mode, same=True)
    return out


def _fw_above(mode, t):
    """``(level, tangent)`` for each forward-AD level above ``mode`` on the stack at which
    ``t`` has a tangent."""
    ex = t._extra
    if ex is None or not ex.fw_grad:
        return ()
    stack = _modes.stack
    at = stack.index(mode) if mode in stack else -1
    return [(lvl, tan) for lvl, tan in ex.fw_grad.items()
            if tan is not None and lvl in stack and stack.index(lvl) > at]


def _carry_tangents(src, dst, mode, same=False):
    """Give ``dst`` (``src`` batched at ``mode``'s level) ``src``'s tangents at the
    forward-AD levels above ``mode``: the same tangent (``same``, for a lifted tensor)
    or ``src``'s tangent batched at the level (``dst`` wraps ``src``)."""
    from ember.autograd import forward_ad
    for lvl, tan in _fw_above(mode, src):
        forward_ad._set(dst, tan if same else _wrap_up(tan, mode.lv), lvl)


def _wrap_up(t, lv):
    """``wrap(t, lv)`` for a tensor whose tangents at forward-AD levels above ``lv`` were
    computed on the whole batch: the wrapper gets them batched (and so on for the
    tangents' own tangents)."""
    w = wrap(t, lv.id)
    _carry_tangents(t, w, lv.mode)
    return w


def _view_at(x, flvl):
    """``x`` unwrapped through the vmap levels above the forward-AD level ``flvl``: the
    tensor that holds ``x``'s tangent at ``flvl``."""
    stack = _modes.stack
    at = stack.index(flvl)
    while isinstance(x, Tensor) and type(x._data) is BArr and \
            stack.index(level(x._data.level).mode) > at:
        x = x._data.value
    return x


def _collect(x, ids, top, seen):
    """The vmap levels below stack index ``top`` that ``x``, or a tangent reachable from
    it at a level below ``top``, is batched at."""
    from ember.autograd import forward_ad
    stack = _modes.stack
    while isinstance(x, Tensor) and id(x) not in seen:
        seen.add(id(x))
        ex = x._extra
        if ex is not None and ex.fw_grad:
            for lvl, tan in list(ex.fw_grad.items()):
                if tan is not None and type(lvl) is forward_ad._Level and lvl in stack \
                        and stack.index(lvl) <= top:
                    _collect(tan, ids, top, seen)
        d = x._data
        if type(d) is not BArr:
            return
        if stack.index(level(d.level).mode) < top:
            ids.add(d.level)
        x = d.value


def _down(x, lvls, group):
    """``x`` lifted to ``lvls`` and taken to the bottom, carrying its tangents at the
    forward-AD levels of ``group`` (and their own tangents) as tangents of the whole
    batch."""
    from ember.autograd import forward_ad
    stack = _modes.stack
    xl = lift(x, lvls)
    b = bottom(xl)
    found, kept = [], []
    for flvl in group:
        has, own = forward_ad._own(b, flvl)
        if has and own is not None:
            kept.append((flvl, own))  # computed on the whole batch already
            continue
        t = forward_ad.get_tangent(_view_at(xl, flvl), flvl)
        if t is None:
            continue
        at = stack.index(flvl)
        found.append((flvl, _down(t, [lv for lv in lvls if stack.index(lv.mode) < at],
                                  [g for g in group if stack.index(g) < at])))
    if not found:
        return b
    d = forward_ad._alias(b, group[0])
    for flvl, tb in kept:
        forward_ad._set(d, tb, flvl)
    for flvl, tb in found:
        forward_ad._set(d, forward_ad._fit(tb, d), flvl)
    return d


def _up(o):
    """Give each batched tensor in ``o``'s chain the tangents, at the forward-AD levels
    above its level, that were computed for ``o``'s bottom on the whole batch."""
    from ember.autograd import forward_ad
    chain = []
    while isinstance(o, Tensor) and type(o._data) is BArr:
        chain.append(o)
        o = o._data.value
    for w in reversed(chain):
        lv = level(w._data.level)
        for flvl, tan in _fw_above(lv.mode, w._data.value):
            has, own = forward_ad._own(w, flvl)
            if not has or own is None:
                forward_ad._set(w, _wrap_up(tan, lv), flvl)


def jvp_beneath(flvl, cls, args, params, tangents):
    """Forward AD (level ``flvl``) of an op whose primal inputs are batched by vmap levels
    below ``flvl``. The op runs on whole batches: its inputs are lifted to every level
    involved and taken to the bottom as duals, carrying their tangents at ``flvl`` and at
    every forward-AD level between the lowest of those vmap levels and ``flvl`` (the
    *group*); the group then moves beneath those vmap levels, in its order, for the
    call, so the batching rules run the op on the batch and each level of the group
    computes its tangents there with the op's own ``jvp`` (the inner levels' tangent
    computations seen by the outer ones, as above). The outputs get them back batched."""
    from ember.autograd import forward_ad
    stack = _modes.stack
    top = stack.index(flvl)
    ids, seen = set(), set()
    for x in list(args) + [t for t in tangents if t is not None]:
        _collect(x, ids, top, seen)
    lvls = [lv for lv in levels if lv.id in ids]
    low = stack.index(lvls[0].mode)
    group = [m for m in stack[low + 1:top + 1] if type(m) is forward_ad._Level]
    new = list(args)
    for i, a in enumerate(args):
        if isinstance(a, Tensor) and (tangents[i] is not None or len(group) > 1):
            new[i] = rewrap(_down(a, lvls, group), lvls)
    with _modes.beneath(group, lvls[0].mode):
        res = cls.apply(*new, **params)
    for o in (res if type(res) is tuple else (res,)):
        if isinstance(o, Tensor) and type(o._data) is BArr:
            _up(o)
    return res


def bottom(x):
    """The plain tensor under every batch level of ``x`` (all batch dims in front)."""
    while isinstance(x, Tensor) and type(x._data) is BArr:
        x = x._data.value
    return x


def rewrap(t, lvls=None):
    """Inverse of :func:`bottom` for a tensor batched at every level in ``lvls``."""
    for lv in (levels if lvls is None else lvls):
        t = wrap(t, lv.id)
    return t


def _rewrap_carrying(t, lvls=None):
    """:func:`rewrap` of a result computed at the bottom, whose tangents at forward-AD
    levels above a level become the wrapper's tangents there (batched)."""
    for lv in (levels if lvls is None else lvls):
        t = _wrap_up(t, lv)
    return t


def grads(outputs, inputs, grad_outputs, create_graph, autograd_grad):
    """``autograd.grad`` inside vmap: one backward over the underlying batched graph.
    Outputs and cotangents are lifted to every running level (a per-sample cotangent
    is the same for every sample), the inputs were lifted by ``grad``'s tracking, and the
    per-sample gradients come back batched."""
    import ember
    if not any(is_batched(t) for t in list(outputs) + list(inputs)):
        # a graph built outside every running vmap, batched cotangents (jacrev, vmap of a
        # vjp): one backward whose formulas run on the batched cotangents through their
        # batching rules, linear in the cotangent, so each sample gets its own gradient
        return _grads_of_batched_cotangents(outputs, inputs, grad_outputs, create_graph,
                                            autograd_grad)
    outs, gos = [], []
    for o, g in zip(outputs, grad_outputs):
        if o.requires_grad:
            outs.append(bottom(lift(o)))
            gos.append(bottom(lift(g)))
    flat = []
    for x in inputs:
        if lift(x) is not x:
            # a tensor missing a batch level is shared by the samples: the graph holds it
            # once, so its per-sample gradients are not separable (jvp's double-vjp trick
            # differentiates w.r.t. such a tensor): the per-sample loop is exact
            raise NoRule("autograd.grad with respect to a tensor shared by the samples")
        flat.append(bottom(x))
    if outs:
        res = autograd_grad(outs, flat, gos, retain_graph=True, create_graph=create_graph,
                            allow_unused=True)
    else:
        res = [None] * len(flat)
    out = []
    for r, x in zip(res, inputs):
        if r is None:
            out.append(ember.zeros_like(x))
            continue
        out.append(_rewrap_carrying(r if create_graph else r.detach()))
    return out


def _grads_of_batched_cotangents(outputs, inputs, grad_outputs, create_graph, autograd_grad):
    import ember
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if pairs:
        # recorded as for create_graph: the backward formulas then run in Tensor ops,
        # which meet the batched cotangents through batching rules (their first-order
        # paths work on raw arrays, which a batched tensor does not lend)
        res = autograd_grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs],
                            retain_graph=True, create_graph=True, allow_unused=True)
    else:
        res = [None] * len(inputs)
    out = []
    for r, x in zip(res, inputs):
        if r is None:
            out.append(ember.zeros_like(x))
        else:
            out.append(r if create_graph else r.detach())
    return out


# ----- randomness ---------------------------------------------------------------------------
def rng_state():
    import ember
    return ember.get_rng_state()


def random_rule(name, orig):
    """The rule of a random factory (``orig``: the factory itself) under the running
    vmaps' ``randomness``: 'error' raises, 'same' draws one per-sample tensor, 'different'
    draws one per sample at each level that asks for it."""
    def draw(*args, **kwargs):
        if not levels or levels[0].thread != threading.get_ident():
            return orig(*args, **kwargs)  # another thread's draws are its own business
        if any(lv.randomness == "error" for lv in levels):
            raise RandomnessError("vmap: called random operation while in randomness error mode. "
                               "Please either use the 'same' or 'different' randomness flags "
                               "on vmap or perform the randomness operation out of vmap")
        diff = [lv for lv in levels if lv.randomness == "different"]
        if name == "_noise":  # (input, shape, q) of nn.functional's dropout masks
            inp, shape, q = args
            args = (_plain_like(inp), tuple(lv.size for lv in diff) + tuple(shape), q)
        elif name.endswith("_like"):
            inp = args[0]
            shape = tuple(lv.size for lv in diff) + tuple(inp.shape)
            like = _plain_like(inp, shape)
            args = (like,) + args[1:]
        else:
            size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
            if "size" in kwargs:
                size = kwargs.pop("size")
            args = (tuple(lv.size for lv in diff) + tuple(size),)
        for lv in levels:
            if lv.rng_state is not None and not _same_state(lv.rng_state):
                raise NoRule("a random operation without a batching rule")
        out = orig(*args, **kwargs)
        for lv in levels:
            lv.rng_state = rng_state()
        return rewrap(out, diff)
    return draw


def _plain_like(inp, shape=None):
    import ember
    return ember.empty(tuple(inp.shape) if shape is None else shape, dtype=inp.dtype)


def _same_state(state):
    # on the arrays: vmap's bookkeeping is no op of the user's (a profiler records none)
    return bool(np.array_equal(state._data, rng_state()._data))
