"""``ember.compile``: capture once, then run the captured graph as an array plan
(``_plan``) while the guards hold; a training step (``backward`` and
``optimizer.step()`` inside the call) runs its backward and update in the same replay.

A call is split into its tensor arguments (passed to the graph) and its other
arguments (baked into the capture and guarded by value). The guards of one cache
entry are: the other arguments, grad mode, each module's ``training``, the identity
and ``requires_grad`` of every parameter and buffer, and per tensor input its rank,
dtype, ``requires_grad``, whether it is contiguous (a capture keeps a ``contiguous()``
of a contiguous input as no copy) and sizes — where a size that differed between two calls
and gave the same graph structure both times is symbolic (any value from 2 up passes:
0 and 1 are specialised, as an op's own branch on them is not in the graph). A
module or function called again with tensors only (a training step: none), where
every object those guards read is the one its last (or last but one) call read, takes
that call's entry without computing them (:func:`_same_as`).
"""
import warnings

import numpy as np

from ember import _logging, _tensor
from ember._compile import _plan
from ember._compile._capture import Unsupported, busy, capture_graph, signature
from ember._compile._guards import (
    _const_key,
    _free_objects,
    _global_hooks,
    _hook_key,
    _same_as,
    _snapshot,
    _tree,
)
from ember._graph import ir as _ir
from ember.autograd import engine as _engine
from ember.autograd import grad_mode
from ember.autograd.grad_mode import state as _grad_state
from ember.backend import blas_hold as _blas_hold
from ember.backend import threads as _threads
from ember.nn.modules.module import Module

Tensor = _tensor.Tensor
_mode_stack = _tensor._mode_stack

__all__ = ["CompiledFunction", "OptimizedModule", "config"]


class _Config:
    """``torch._dynamo.config``'s knobs that ember honours, and ember's own:
    ``reuse_buffers`` (default True): plans write into buffers kept across calls and
    run elementwise chains fused (see ``_buffers``, ``_fused``); False allocates per
    op, as eagerly (for measuring the difference)."""

    cache_size_limit = 8
    reuse_buffers = True


config = _Config()


def _step_one_pass(opt):
    """``opt.step()`` (its hooks, counters, state and ``param_groups`` stay the
    optimizer's) with its per-parameter update (``apply_single``) asked to run as one
    pass over memory where it can (SGD, Adam, AdamW with numba: the same values)."""
    if "_one_pass" in getattr(opt, "__dict__", ()):
        return opt.step()
    opt._one_pass = True
    try:
        return opt.step()
    finally:
        del opt._one_pass
_MEMO_LIMIT = 64  # guard sets remembered per compiled function (varying sizes: more)
_BACKENDS = (None, "inductor", "eager", "aot_eager")
_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _tensor_tree(x):
    if isinstance(x, Tensor):
        return True
    if isinstance(x, (tuple, list)):
        return len(x) > 0 and all(_tensor_tree(i) for i in x)
    if isinstance(x, dict):
        return len(x) > 0 and all(_tensor_tree(i) for i in x.values())
    return False


def _flat(x, out):
    if isinstance(x, Tensor):
        out.append(x)
    elif isinstance(x, dict):
        for v in x.values():
            _flat(v, out)
    else:
        for v in x:
            _flat(v, out)
    return out


_PLAIN = (bool, int, float, str, type(None))
_PLAIN_TYPES = frozenset(_PLAIN)
# a module's hook dictionaries: a hook runs inside the call, so the capture records what
# it does; one added or removed after the capture is a new guard set
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
               "_backward_pre_hooks", "_backward_hooks")


class _Entry:
    __slots__ = ("key", "specs", "graph", "breaks", "dynamic", "plan", "why_unplanned",
                 "param_tensors", "train", "extras", "one", "fixed_leaves", "n_user",
                 "returned")

    def __init__(self, key, specs, graph, breaks, train=None):
        self.key, self.specs, self.graph, self.breaks = key, specs, graph, breaks
        self.train = train
        self.extras = None
        self.dynamic = False
        self.plan = self.why_unplanned = self.param_tensors = None
        # one differentiable tensor returned and nothing written back (a cell): the
        # repeated call's replay (``_replay_one``); the leaves that are no arguments
        self.one = False
        self.fixed_leaves = None
        self.n_user = None  # a training step's count of the user's outputs (``_n_user``)
        # (flat output, tensor argument) pairs where the capture call returned the
        # argument itself (``x.add_(y)`` returns ``x``): a replay returns it too
        self.returned = ()

    def failed(self, key, specs):
        """The first guard this call fails, in words, or None when all hold."""
        if key != self.key:
            names = ("argument structure", "non-tensor arguments", "grad mode",
                     "module attributes (training...)", "parameter identity/requires_grad")
            for name, a, b in zip(names, key, self.key):
                if a != b:
                    return f"{name} changed ({b!r} -> {a!r})" if name in (
                        "grad mode", "non-tensor arguments") else f"{name} changed"
            return "guards changed"
        for i, ((shape, dtype, rg, c), (s2, d2, r2, c2)) in enumerate(zip(specs, self.specs)):
            if dtype != d2:
                return f"tensor input {i}: dtype mismatch, expected {d2}, got {dtype}"
            if rg != r2:
                return f"tensor input {i}: requires_grad mismatch, expected {r2}, got {rg}"
            if c != c2:
                return f"tensor input {i}: stride mismatch, expected " \
                    f"{'' if c2 else 'non-'}contiguous, got {'' if c else 'non-'}contiguous"
            if len(shape) != len(s2):
                return f"tensor input {i}: rank mismatch, expected {len(s2)}, got {len(shape)}"
            for d, (a, b) in enumerate(zip(shape, s2)):
                if b is not None and a != b:
                    return f"tensor input {i}: size mismatch at index {d}, expected {b}, got {a}"
                if b is None and a < 2:
                    # a symbolic size stands for 2 and up: an op's own branch on an
                    # empty or one-element dimension (a check that raises, a shortcut)
                    # reads the size as a number, which the graph does not record
                    return f"tensor input {i}: size {a} at index {d} is specialised " \
                        "(a symbolic size is 2 or more)"
        return None


class CompiledFunction:
    """A function (or a module's call) compiled by :func:`compile`."""

    def __init__(self, fn, module=None, fullgraph=False, dynamic=None):
        self._fn, self._module = fn, module
        self.fullgraph, self.dynamic = fullgraph, dynamic
        self._cache = []
        self._hits = {}  # (guards, specs) -> the cache entry they select (see __call__)
        self._last = []  # what :meth:`_same_as_last` compares a module's call with
        self._warned = False
        self._warned_recorded = False
        self.stats = {"captures": 0, "replays": 0, "eager": 0}

    def _guard_key(self, args, kwargs):
        if not kwargs and all(type(a) is Tensor for a in args):
            # the common call (tensors only): the same key as below, built directly
            consts, struct = (), (len(args), (), tuple(range(len(args))))
        else:
            consts = tuple((i, _const_key(a)) for i, a in enumerate(args)
                           if not _tensor_tree(a))
            consts += tuple((k, _const_key(v)) for k, v in sorted(kwargs.items())
                            if not _tensor_tree(v))
            struct = (len(args), tuple(sorted(kwargs)),
                      tuple(i for i, a in enumerate(args) if _tensor_tree(a)))
        if self._module is not None:
            m = self._module
            # a module without children (a cell, a layer) is its own tree
            subs = _tree(m, [], set()) if m._modules else [m]
            free = ()
        else:
            free = _free_objects(self._fn)
            subs, seen = [], set()
            for _, o in free:
                if isinstance(o, Module):
                    _tree(o, subs, seen)
            free = tuple((n, id(o)) for n, o in free)
        # every submodule's plain Python attributes (``training``, ``self.scale = 2.0``...),
        # its parameters' identity and requires_grad, its buffers' identity: one pass over
        # the submodules, as this key is computed on every call
        plain = _PLAIN_TYPES
        training, params, bufs = [], [], []
        for s in subs:
            d = s.__dict__
            training.append(tuple([(k, v) for k, v in d.items() if type(v) in plain]))
            training.append(_hook_key([d[h] for h in _HOOK_DICTS if h in d]))
            params += [(id(p), p._requires_grad) for p in d["_parameters"].values()
                       if p is not None]
            bufs += [id(b) for b in d["_buffers"].values() if b is not None]
        training.append(_hook_key(_global_hooks()))
        training = tuple(training)
        params = tuple(params) + tuple(bufs) + free
        return (struct, consts, grad_mode.is_grad_enabled(), training, params)

    def _same_as_last(self, args):
        """The cache entry one of the last two calls chose when this call's guards are
        provably the ones it had (see :func:`_snapshot`), else None (the guards are then
        computed and compared as usual). For a module or function called with tensors
        only."""
        last = self._last
        e = _same_as(last[0], args)
        if e is None and len(last) > 1:
            e = _same_as(last[1], args)
            if e is not None:  # the set a loop calls with most often is tried first
                last.reverse()
        return e

    def _tensor_args(self, args, kwargs):
        """The tensor arguments in order (``_split``'s first result, without its closure)."""
        if not kwargs and all(type(a) is Tensor for a in args):
            return args
        return tuple(a for a in args if _tensor_tree(a)) + \
            tuple(kwargs[k] for k in sorted(kwargs) if _tensor_tree(kwargs[k]))

    def _split(self, args, kwargs):
        """(tensor arguments in order, a function of them running the user's call)."""
        tpos = [i for i, a in enumerate(args) if _tensor_tree(a)]
        tkeys = [k for k in sorted(kwargs) if _tensor_tree(kwargs[k])]
        targs = tuple(args[i] for i in tpos) + tuple(kwargs[k] for k in tkeys)

        def call(*t):
            full = list(args)
            for i, v in zip(tpos, t):
                full[i] = v
            kw = dict(kwargs)
            for k, v in zip(tkeys, t[len(tpos):]):
                kw[k] = v
            return self._fn(*full, **kw)
        return targs, call

    def _params(self):
        m = self._module
        if m is None:
            return {}
        p = dict(m.named_parameters())
        p.update((k, b) for k, b in m.named_buffers() if b is not None)
        return p

    def __call__(self, *args, **kwargs):
        if _mode_stack and busy():  # inside a jit trace or another capture: run eagerly
            return self._fn(*args, **kwargs)
        if self._last and not kwargs:
            e = self._same_as_last(args)
            if e is not None:  # every guard as on the last call: the same entry
                if e.graph is None:
                    self.stats["eager"] += 1
                    return self._fn(*args)
                self.stats["replays"] += 1
                if e.one and _grad_state.grad_enabled:
                    return self._replay_one(e, args)
                if e.train is not None:
                    return self._train_replay(e, args, list(args), args, kwargs)
                if e.returned:
                    return _put_inputs(self._replay(e, args, args), e.returned, args)
                return self._replay(e, args, args)
        key = self._guard_key(args, kwargs)
        if not kwargs and all(type(a) is Tensor for a in args):  # the common call
            targs, tensors = args, list(args)
        else:
            targs = self._tensor_args(args, kwargs)
            tensors = list(args) if targs is args else _flat(targs, [])
        if _tensor._mode_active[0]:
            specs = [(tuple(t.shape), t.dtype, t._requires_grad, t.is_contiguous())
                     for t in tensors]
        else:
            specs = [(t._data.shape, t.dtype, t._requires_grad, t._data.flags.c_contiguous)
                     for t in tensors]
        # the entry the ordered scan below chose for these exact guards last time: the
        # scan is a function of (guards, cache), and the memo is cleared whenever the
        # cache changes, so this is the same choice without re-checking every entry
        memo = self._hits
        try:
            full = (key, tuple(specs))
            hit = memo.get(full)
        except TypeError:  # an unhashable guard value: scan
            full = hit = None
        reasons = []
        for e in ((hit,) if hit is not None else self._cache):
            why = None if hit is not None else e.failed(key, specs)
            if why is None:
                if hit is None and full is not None and len(memo) < _MEMO_LIMIT:
                    memo[full] = e
                if full is not None and not kwargs and targs is args and \
                        not _tensor._mode_active[0]:
                    # the last two guard sets (a loop's first call often differs:
                    # a state without requires_grad)
                    self._last = [_snapshot(self._module, e, key[2], args, self._fn)] + \
                        self._last[:1]
                if e.graph is None:
                    self.stats["eager"] += 1
                    return self._fn(*args, **kwargs)
                self.stats["replays"] += 1
                if e.train is not None:
                    return self._train_replay(e, targs, tensors, args, kwargs)
                if e.returned:
                    return _put_inputs(self._replay(e, targs, tensors), e.returned, tensors)
                return self._replay(e, targs, tensors)
            reasons.append(why)
        if len(self._cache) >= config.cache_size_limit:
            if not self._warned:
                self._warned = True
                warnings.warn(f"ember.compile: cache_size_limit ({config.cache_size_limit}) "
                              f"reached for {getattr(self._fn, '__name__', self._fn)!r}; last "
                              f"reason: {reasons[-1]}. Further new guard sets run eagerly.",
                              UserWarning, stacklevel=2)
            self.stats["eager"] += 1
            return self._fn(*args, **kwargs)
        if reasons:
            _logging.log("recompiles", f"Recompiling function "
                         f"{getattr(self._fn, '__name__', type(self._fn).__name__)}: "
                         f"triggered by the following guard failure(s):\n    - "
                         + "\n    - ".join(reasons))
        self.stats["captures"] += 1
        _, call = self._split(args, kwargs)
        others = ()
        if self._module is None:  # a function: the tensors it reads from its closure
            others = []
            for _, o in _free_objects(self._fn):
                others += [o] if isinstance(o, Tensor) else \
                    list(o.parameters()) + [b for b in o.buffers() if b is not None]
        graph, out, breaks, train, extras = capture_graph(call, targs, self._module, others)
        if breaks:
            for b in breaks:
                _logging.log("graph_breaks", f"Graph break: {b}")
            if self.fullgraph:
                raise Unsupported(f"ember.compile(fullgraph=True): graph break: {breaks[0]}")
        entry = _Entry(key, specs, graph, breaks, train)
        entry.extras = extras
        if graph is not None:
            entry.returned = _returned_inputs(out, tensors)
        self._promote(entry)
        self._cache.append(entry)
        self._hits.clear()
        self._last = []
        return out

    def _plan_of(self, e, tensors):
        plan = e.plan
        if plan is None and e.why_unplanned is None:
            params = self._params()
            plan, why = _plan.build(e.graph, [t.requires_grad for t in tensors],
                                    {n: p.requires_grad for n, p in params.items()})
            if plan is None:
                e.why_unplanned = why
                _logging.log("perf_hints", f"no array plan ({why}); the graph is replayed "
                                           "op by op")
            else:
                e.plan = plan
                e.param_tensors = [params[n] for n in plan.param_names]
                # (each parameter's requires_grad is guarded: fixed for this entry)
                e.fixed_leaves = [p for p in e.param_tensors if p._requires_grad] + \
                    [c for _, c in plan.const_leaves]
                e.one = e.train is None and e.extras is None and not e.returned and \
                    type(e.graph.output_spec) is _ir.Ref and len(plan.out_slots) == 1 and \
                    plan.out_rg[0] and bool(plan.leaf_slots)
        return plan

    def _replay_one(self, e, args):
        """:meth:`_replay` of an entry returning one differentiable tensor (``e.one``)
        with grad mode on, for a call with tensors only: the same forward, node and
        output, without the general case's branches."""
        plan = e.plan
        if plan.mode is not None and plan.mode != "mixed" and config.reuse_buffers:
            return self._replay(e, args, args)  # (forward buffers laid out: see there)
        env, tape = plan.forward([t._data for t in args], [p._data for p in e.param_tensors],
                                 True, None)
        leaves = [t for t in args if t._requires_grad] + e.fixed_leaves

        def replay():
            with grad_mode.enable_grad():
                return leaves, _flat_all(e.graph.run(*args, params=self._params()))
        return _plan.attach_one(plan, env, tape, leaves, replay, self._note_recorded)

    def _train_replay(self, e, targs, tensors, args, kwargs):
        """A training step: the events before ``backward`` (``zero_grad``), the plan's
        forward and backward with the gradients accumulated into the leaves' ``.grad``
        as ``backward()`` does, then the events after it (``optimizer.step()``, through
        :func:`_step_one_pass`). Without a plan the call runs eagerly. At more than one
        ember thread NumPy's BLAS is held at one thread for the whole step
        (``blas_hold``), as an eager backward and optimizer step hold it."""
        held = _blas_hold.hold_blas() if _threads.MANY else None
        try:
            return self._train_step(e, tensors, args, kwargs)
        finally:
            _blas_hold.release_blas(held)

    def _train_step(self, e, tensors, args, kwargs):
        plan = self._plan_of(e, tensors)
        if plan is None or any(t.grad_fn is not None for t in tensors if t.requires_grad):
            self.stats["eager"] += 1
            return self._fn(*args, **kwargs)
        for ev in e.train.pre:
            ev.call(*ev.args, **ev.kwargs)
        ps = e.param_tensors
        inputs = [t._data for t in tensors]
        # buffers and fused loops where the step's temporaries are large (decided by the
        # first call of these input shapes); small ones are cheaper on the heap
        shapes = tuple([a.shape for a in inputs])
        big = plan.train_large.get(shapes, True)
        arena = plan.acquire("train") if config.reuse_buffers and big else None
        n_user = e.n_user
        if n_user is None:
            n_user = e.n_user = _n_user(e)
        try:
            # the forward in the caller's grad mode (enabled, as eagerly): an op whose
            # forward keeps what its backward reads only when a gradient may follow (a
            # convolution's columns) keeps it for the plan's backward too; the plan
            # records nothing (calls on Tensors run under no_grad themselves)
            env, tape = plan.forward(inputs, [p._data for p in ps], True, arena)
        except BaseException:
            plan.release(arena)
            raise
        with grad_mode.no_grad():
            try:
                if shapes not in plan.train_large:
                    if len(plan.train_large) > 64:
                        plan.train_large.clear()
                    plan.train_large[shapes] = _plan.large_temporaries(plan, env)
                seeds = [None] * len(plan.out_slots)
                loss = env[plan.out_slots[n_user]]
                # (``np.ones_like`` of a 0-d loss array, without its dispatch)
                seeds[n_user] = np.ones((), loss.dtype) if type(loss) is np.ndarray and \
                    not loss.shape else np.ones_like(loss)
                grads = plan.backward(env, tape, seeds, arena)
                _write_back(e, tensors, lambda v: env[plan.slots[id(v)]])
            finally:
                plan.release(arena)
            # (the parameters' requires_grad is guarded: ``fixed_leaves`` holds theirs)
            leaves = [t for t in tensors if t._requires_grad] + e.fixed_leaves
            seen = {}
            for leaf, g in zip(leaves, grads):
                if g is not None:
                    flags = g.flags
                    if not flags.writeable or not flags.c_contiguous:
                        g = np.ascontiguousarray(g).copy()
                    elif leaf._grad is None and leaf._extra is None and g.base is None:
                        # what ``_accumulate`` does for a leaf without hooks after
                        # ``zero_grad()``: the gradient, an array of its own, as ``.grad``
                        leaf._grad = _tensor._make(g)
                        continue
                    _engine._accumulate(leaf, _tensor._make(g), False, seen)
            for ev in e.train.post:
                if ev.kind == "step":
                    _step_one_pass(ev.obj)
                else:
                    ev.call(*ev.args, **ev.kwargs)
            outs = [_tensor._make(o) if type(o) is np.ndarray else o
                    for o in (env[s] for s in plan.out_slots[:n_user])]
        return _ir._fill(e.graph.output_spec[0],
                         {id(v): o for v, o in zip(plan.output_values, outs)})

    def _replay(self, e, targs, tensors):
        """Run a cached entry: its plan (array kernels, one autograd node) when it has
        one, else the graph op by op through ember's primitives."""
        plan = e.plan
        if plan is None:
            plan = self._plan_of(e, tensors)
        if plan is None:
            out = e.graph.run(*targs, params=self._params())
            if e.extras is None:
                return out
            vals = {id(v): o for v, o in zip(e.graph.outputs(), _flat_all(out))}
            _write_back(e, tensors, lambda v: vals[id(v)]._data)
            return out[0]
        ps = e.param_tensors
        record = grad_mode.state.grad_enabled and bool(plan.leaf_slots)
        inputs = [t._data for t in tensors]
        params = [p._data for p in ps]
        if record and plan.mode is None or plan.mode == "mixed" or not config.reuse_buffers:
            # no forward buffers to lay out or use (a call recorded for a later backward
            # on a plan never run otherwise, or run both ways): ``acquire`` would change
            # nothing and ``forward`` would not read its arena
            env, tape = plan.forward(inputs, params, record, None)
        else:
            # forward buffers only when nothing is kept for a later backward (_buffers)
            arena = plan.acquire(None if record else "infer")
            try:
                env, tape = plan.forward(inputs, params, record, arena)
            finally:
                plan.release(arena)
        if e.extras is not None:
            _write_back(e, tensors, lambda v: env[plan.slots[id(v)]])
        if not record:
            # nothing to differentiate: plain outputs (``attach`` reads no leaves then)
            leaves = ()
        else:
            leaves = [t for t in tensors if t._requires_grad] + \
                [p for p in ps if p._requires_grad] + [c for _, c in plan.const_leaves]

        def replay():
            with grad_mode.enable_grad():
                return leaves, _flat_all(e.graph.run(*targs, params=self._params()))

        outs = _plan.attach(plan, env, tape, leaves, replay, self._note_recorded)
        spec = e.graph.output_spec if e.extras is None else e.graph.output_spec[0]
        if type(spec) is _ir.Ref and len(outs) == 1:  # one tensor returned (a cell)
            return outs[0]
        return _ir._fill(spec,
                         {id(v): o for v, o in zip(plan.output_values, outs)})

    def _note_recorded(self):
        if not self._warned_recorded:
            self._warned_recorded = True
            warnings.warn("ember.compile: a backward with create_graph=True through a "
                          "compiled function runs eagerly (the captured graph is replayed in "
                          "ember ops, so the gradient is differentiable)", UserWarning,
                          stacklevel=4)

    def _promote(self, entry):
        """A capture whose guards differ from an earlier one only in sizes: when both
        graphs have the same structure, mark the differing sizes symbolic and keep one
        entry (``dynamic=None`` and ``True``; ``dynamic=False`` keeps sizes static)."""
        if self.dynamic is False or entry.graph is None:
            return
        for e in self._cache:
            if e.graph is None or e.key != entry.key or len(e.specs) != len(entry.specs):
                continue
            if any(d != d2 or r != r2 or c != c2 or len(s) != len(s2)
                   for (s, d, r, c), (s2, d2, r2, c2) in zip(entry.specs, e.specs)):
                continue
            if any(a != b and (a < 2 or b is not None and b < 2)
                   for (s, _, _, _), (s2, _, _, _) in zip(entry.specs, e.specs)
                   for a, b in zip(s, s2)):
                continue  # sizes 0 and 1 are never symbolic (see ``failed``)
            if signature(e.graph) != signature(entry.graph):
                continue
            entry.specs = [(tuple(None if a != b else a for a, b in zip(s, s2)), d, r, c)
                           for (s, d, r, c), (s2, _, _, _) in zip(entry.specs, e.specs)]
            entry.dynamic = True
            self._cache.remove(e)
            return


def _n_user(e):
    """How many of the graph's flat outputs are the user's (the rest are extras)."""
    n = []
    _ir._walk(e.graph.output_spec[0] if e.extras is not None else e.graph.output_spec,
              n.append)
    return len(n)


def _flat_all(tree):
    """The tensors of a result tree in the graph's output order (None skipped)."""
    out = []
    if isinstance(tree, Tensor):
        out.append(tree)
    elif isinstance(tree, dict):
        for v in tree.values():
            out += _flat_all(v)
    elif isinstance(tree, (tuple, list)):
        for v in tree:
            out += _flat_all(v)
    return out


def _returned_inputs(out, tensors):
    """The (flat output index, tensor argument index) pairs where ``out`` holds a tensor
    argument itself."""
    where = {id(t): i for i, t in enumerate(tensors)}
    return tuple((j, where[id(o)]) for j, o in enumerate(_flat_all(out)) if id(o) in where)


def _put_inputs(out, returned, tensors):
    """``out`` (a replay's result) with the outputs ``returned`` names replaced by the
    tensor arguments the capture call returned there (after the write-back, they hold
    the values the replay computed)."""
    flat = _flat_all(out)
    for j, i in returned:
        flat[j] = tensors[i]
    it = iter(flat)

    def rebuild(tree):
        if isinstance(tree, Tensor):
            return next(it)
        if isinstance(tree, dict):
            return {k: rebuild(v) for k, v in tree.items()}
        if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # (values, indices)
            return type(tree)(*(rebuild(v) for v in tree))
        if isinstance(tree, (tuple, list)):
            return type(tree)(rebuild(v) for v in tree)
        return tree
    return rebuild(out)


def _write_back(e, tensors, value_of):
    """Replay the in-place changes the captured call made to tensors that existed
    before it (an input, a buffer such as ``num_batches_tracked``, a parameter)."""
    if e.extras is None:
        return
    for key, v in e.extras.writes:
        t = tensors[key[1]] if key[0] == "input" else key[1]
        new = value_of(v)
        if new is not t._data:
            np.copyto(t._data, new, casting="unsafe")
        t._vc[0] += 1


class OptimizedModule:
    """What :func:`compile` returns for a module: calls go through the compiled
    forward; every other attribute is the original module's (``_orig_mod``)."""

    def __init__(self, mod, compiled):
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_compiled", compiled)

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    forward = __call__

    def __getattr__(self, name):
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def train(self, mode=True):
        self._orig_mod.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def __repr__(self):
        return f"OptimizedModule(\n  (_orig_mod): {self._orig_mod!r}\n)"


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,
            options=None, disable=False):
    """``torch.compile``: capture ``model`` (a module or function) on its first call and
    replay the captured graph while the guards hold (see docs/compile.md). Used as a
    decorator without arguments too. ``backend``/``mode``/``options`` are accepted;
    ember has one backend (the IR replay)."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if callable(backend) or backend not in _BACKENDS:
        raise NotImplementedError(f"ember.compile: backend {backend!r} is not supported "
                                  "(ember replays its own IR; use the default)")
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           + ", ".join(m for m in _MODES if m))
    if options is not None and mode not in (None, "default"):
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if disable:
        return model
    from ember.nn.modules.module import Module
    if isinstance(model, Module):
        return OptimizedModule(model, CompiledFunction(model, model, fullgraph, dynamic))
    if not callable(model):
        raise RuntimeError("compile() expects a callable or a Module")
    return CompiledFunction(model, None, fullgraph, dynamic)
