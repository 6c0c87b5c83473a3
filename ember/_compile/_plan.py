"""A captured graph compiled into a plan: the forward as a list of array kernels over
numbered slots, and the backward schedule derived from it once.

At run time no Tensor and no autograd node is made per op: each step reads its input
arrays from the slot list, calls the primitive's array ``forward`` on one op object
made when the plan was built (reused every call), and writes its outputs to slots.
When a gradient is wanted, each step on the gradient path keeps its inputs, outputs
and the state its forward left (the arrays its backward reads: a softmax, an LSTM's
gate activations...) on a tape. The backward pass walks the steps in reverse, calling
the vector-Jacobian product its op's class declares (found by
:mod:`ember._compile._rules`; the plan states no derivative of its own), sums
gradients that meet, and reduces broadcast gradients to their input's shape. The
whole plan appears to autograd as one node (``CompiledFunctionBackward``) whose edges
are the graph's inputs and parameters that require grad. The forward and the backward
run as functions written out for the plan once per way of running it
(:mod:`ember._compile._codegen`; ``Plan.sources()`` shows them).

What a plan cannot run (an op with nested tensor arguments on the gradient path, an
in-place op, a user ``autograd.Function``, a function call without an array kernel on
the gradient path) makes :func:`build` return None and the caller replays the graph
with :meth:`Graph.run`, as eager ember would run it.
"""
import numpy as np

from ember import _tensor
from ember._compile import _buffers, _codegen, _mkl, _rules, _xent
from ember._compile._rewrites import (
    _direct,
    _fuse,
    _joined_vjp,
    _scatters,
    _unbind_stack,
)
from ember._graph.ir import ArrayRef, Ref
from ember.autograd.grad_mode import no_grad
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Node, Primitive
from ember.autograd.saved import _FREED_MSG
from ember.ops import nn_fused

Tensor = _tensor.Tensor
_make = _tensor._make
_new = object.__new__
_as_array = _tensor._as_array
_ndarray = np.ndarray
_LINEAR_FORWARD = nn_fused._Linear.forward

__all__ = ["Plan", "build", "Unplannable"]


class Unplannable(Exception):
    """Why a graph has no plan (the caller replays it op by op instead)."""


def _has_ref(tree, tensor=False):
    """Whether ``tree`` holds a Ref (to a tensor only, with ``tensor``)."""
    t = type(tree)
    if t is Ref:
        return not tensor or tree.value.type == "Tensor"
    if t is ArrayRef:  # an index or mask the op reads as an array: no gradient flows
        return not tensor
    if t in (tuple, list):
        return any(_has_ref(x, tensor) for x in tree)
    if t is dict:
        return any(_has_ref(x, tensor) for x in tree.values())
    if t is slice:
        return _has_ref((tree.start, tree.stop, tree.step), tensor)
    return False


def _fill(tree, env, slots, wrap):
    """``tree`` with each Ref replaced by its slot's value (arrays wrapped as Tensors
    when ``wrap``)."""
    t = type(tree)
    if t is Ref:
        v = env[slots[id(tree.value)]]
        return _make(v) if wrap and type(v) is _ndarray else v
    if t is ArrayRef:
        return tree.array(env[slots[id(tree.value)]])
    if t is tuple or t is list:
        return t(_fill(x, env, slots, wrap) for x in tree)
    if t is dict:
        return {k: _fill(x, env, slots, wrap) for k, x in tree.items()}
    if t is slice:
        return slice(_fill(tree.start, env, slots, wrap), _fill(tree.stop, env, slots, wrap),
                     _fill(tree.step, env, slots, wrap))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return t(*(_fill(x, env, slots, wrap) for x in tree))
    return tree


class _Step:
    """One node of the graph as a call on arrays."""

    __slots__ = ("node", "prim", "op", "args", "refs", "nested", "kwargs", "outs", "multi",
                 "grad", "needs", "in_slots", "vjp", "index", "inplace", "into", "color",
                 "bvjp", "group", "skip", "buffer", "fast", "wanted",
                 "scatter", "joined", "plain", "declared", "bias", "linear",
                 "add_into", "shared", "routes", "act", "feeds")

    def __init__(self, node, slots):
        self.node = node
        t = node.target
        self.prim = isinstance(t, type) and issubclass(t, Primitive)
        if isinstance(t, type) and not self.prim:
            raise Unplannable(f"{node.op} is a user autograd.Function")
        if node.op.endswith("_") or getattr(t, "_side_effect", False):
            raise Unplannable(f"{node.op} changes a tensor in place")
        # the op object whose array forward every call runs (its state is per call)
        self.op = object.__new__(t) if self.prim else t
        self.args = list(node.args)
        # an index read as an array (an ArrayRef as recorded) is its slot's array
        self.refs = [(i, slots[id(a.value)]) for i, a in enumerate(node.args)
                     if type(a) is Ref or (type(a) is ArrayRef and a.shape is None)]
        direct = {i for i, _ in self.refs}
        nested_args = [(i, a) for i, a in enumerate(node.args)
                       if i not in direct and _has_ref(a)]
        nested_kw = [(k, a) for k, a in node.kwargs.items() if _has_ref(a)]
        self.nested = (nested_args, nested_kw) if nested_args or nested_kw else None
        self.kwargs = dict(node.kwargs)
        self.outs = [slots[id(v)] for v in node.outputs]
        self.multi = node.multi
        self.in_slots = [slots[id(v)] for v in node.inputs]
        self.grad = False
        self.needs = None
        self.vjp = None
        self.index = 0
        self.inplace = None  # an array function writing into its input (see _fuse)
        self.into = None     # a forward writing into a buffer, and the buffer's colour
        self.act = None      # a linear layer's: the in-place ReLU over its output (_fuse)
        self.color = None    # (see _buffers.assign)
        self.buffer = None   # the colour's ``out`` for ``into``
        self.bvjp = None     # the vjp writing its gradients into buffers (_buffers)
        self.group = None    # the fused chain this step ends, and whether it is a chain
        self.skip = False    # member the chain computes (see _fused.groups)
        # a call above the primitives that is one NumPy call on its array (see _direct)
        self.wanted = ()
        self.scatter = False  # x[i]'s gradient written into x's (see _scatters)
        self.feeds = None     # a view of x[i] whose gradient goes into x's (_scatters)
        self.joined = False   # a stack of all of x's unbound pieces: a copy of x
        self.plain = False    # a primitive run as recorded (the forward's short path)
        self.declared = None  # its class's vjp, op object and buffers (see _rules)
        self.bias = None      # a linear layer's op object without its bias edge (_biases)
        self.linear = None    # (x, w, b) slots of a linear layer the forward runs itself
        self.shared = False   # its weight read by other linear steps too (``kept_weights``)
        self.routes = {}      # array layouts -> the linear step's product (_linear)
        # (a, b) slots of ``a + b`` written over ``a``, the kernel, whether ``b`` is released
        self.add_into = None
        self.fast = None if self.prim or self.nested or node.kwargs or node.multi else \
            _direct(node)

    def run(self, env, slots, arena=None):
        """Run the step; returns (positional argument values, state) for the tape."""
        args = self.args[:]
        for i, s in self.refs:
            args[i] = env[s]
        kwargs = self.kwargs
        if self.nested:
            # sizes (and, for a call above the primitives, tensors) inside lists: a
            # primitive receives nested tensors as Tensors, as ``apply`` passes them
            for i, a in self.nested[0]:
                args[i] = _fill(a, env, slots, True)
            if self.nested[1]:
                kwargs = dict(kwargs)
                for k, a in self.nested[1]:
                    kwargs[k] = _fill(a, env, slots, True)
        if self.inplace is not None:
            env[self.outs[0]] = self.inplace(args[0])
            return args, None
        if self.fast is not None:
            out = self.fast(args)
            if out is not None:
                env[self.outs[0]] = out
                return args, None
        if arena is not None and self.color is not None:
            env[self.outs[0]] = self.into(*args, out=self.buffer)
            return args, None
        if self.prim:
            op = self.op
            out = op.forward(*args, **kwargs)
            state = op.__dict__
            if state:
                state = dict(state)
            if self.multi:
                for s, o in zip(self.outs, out):
                    env[s] = o if type(o) is _ndarray else _as_array(o)
            else:
                env[self.outs[0]] = out if type(out) is _ndarray else _as_array(out)
            return args, state
        targs = [_make(a) if type(a) is _ndarray else a for a in args]
        with no_grad():
            out = self.op(*targs, **kwargs)
        if self.multi:
            for s, o in zip(self.outs, out):
                env[s] = o._data if isinstance(o, Tensor) else o
        else:
            env[self.outs[0]] = out._data if isinstance(out, Tensor) else out
        return [a._data if isinstance(a, Tensor) else a for a in args], None


class Plan:
    """The compiled form of one graph for one set of guards (see the module docstring).

    ``input_rg``: per graph input, whether it requires grad; ``param_rg``: per
    parameter name, whether it requires grad (both are guarded by the caller)."""

    def __init__(self, graph, input_rg, param_rg):
        self.graph = graph
        self.large = {}  # output-gradient shapes -> whether the backward uses the arena
        slots = {}

        def slot(v):
            slots[id(v)] = len(slots)
            return slots[id(v)]
        self.input_slots = [slot(v) for v in graph.inputs]
        self.param_names = list(graph.params)
        self.param_slots = [slot(graph.params[n]) for n in self.param_names]
        # constants: tensors a function reads from its closure or globals (a parameter
        # among them, read afresh each call) and arrays the capture baked in
        self.const = [(slot(c), c.data) for c in graph.constants]
        for n in graph.nodes:
            for v in n.outputs:
                slot(v)
        self.slots = slots
        self.n_slots = len(slots)
        self.made_slots = [slots[id(v)] for n in graph.nodes for v in n.outputs]
        self.train_large = {}  # input shapes -> whether a training call uses the arena
        self.steps = _unbind_stack([_Step(n, slots) for n in graph.nodes], graph)
        self.output_values = graph.outputs()
        self.out_slots = [slots[id(v)] for v in self.output_values]
        # which slots carry a gradient: the inputs and parameters asked for, and every
        # floating output of a step reading one
        rg = [False] * self.n_slots
        for s, r in zip(self.input_slots, input_rg):
            rg[s] = r
        for s, n in zip(self.param_slots, self.param_names):
            rg[s] = param_rg[n]
        for s, c in self.const:
            rg[s] = isinstance(c, Tensor) and c.requires_grad
        self.const_leaves = [(s, c) for s, c in self.const if rg[s]]
        self.leaf_slots = [s for s in self.input_slots + self.param_slots if rg[s]] + \
            [s for s, _ in self.const_leaves]
        for i, st in enumerate(self.steps):
            st.index = i
            if not any(rg[s] for s in st.in_slots):
                continue
            diff = getattr(st.node.target, "differentiable_outputs", None) if st.prim else None
            any_out = False
            for k, v in enumerate(st.node.outputs):
                floating = v.type == "Tensor" and v.dtype is not None and \
                    v.dtype.is_floating_point
                if v.type == "Tensor" and v.dtype is not None and v.dtype.is_complex and \
                        (diff is None or k in diff):
                    # the array gradient kernels are real ones (no conjugates): the graph
                    # is replayed op by op, whose formulas are PyTorch's complex ones
                    raise Unplannable(f"{st.node.op} makes a complex value on the "
                                      "gradient path")
                if floating and (diff is None or k in diff):
                    rg[st.outs[k]] = any_out = True
            if not any_out:
                continue
            if any(type(a) is not Ref and _has_ref(a, True) for a in st.node.args) or \
                    _has_ref(st.node.kwargs, True):
                raise Unplannable(f"{st.node.op} takes tensors inside a list on the "
                                  "gradient path")
            st.grad = True
            st.needs = [False] * len(st.args)
            for i2, s in st.refs:
                st.needs[i2] = rg[s]
            st.vjp = _joined_vjp if st.joined else \
                _rules.vjp_for(st.node, st.prim, st.needs)
            if st.vjp is None:
                raise Unplannable(f"{st.node.op} has no array gradient kernel")
            st.declared = getattr(st.vjp, "declared", None)
        self.rg = rg
        self.out_rg = [rg[s] for s in self.out_slots]
        self.any_out_rg = any(self.out_rg)
        _fuse(self)
        for st in self.steps:
            st.plain = st.prim and not st.nested and not st.multi and st.inplace is None
            if st.plain and getattr(st.node.target, "forward", None) is _LINEAR_FORWARD and \
                    not st.kwargs and len(st.args) == 3 and \
                    [i for i, _ in st.refs] == [0, 1, 2]:
                st.linear = tuple(s for _, s in st.refs)
        # a weight several linear steps read (a cell unrolled over time): its row-major
        # copy is made once per run (``matmul_graph.linear_rows``' ``kept``)
        uses = {}
        for st in self.steps:
            if st.linear is not None:
                uses[st.linear[1]] = uses.get(st.linear[1], 0) + 1
        for st in self.steps:
            if st.linear is not None and uses[st.linear[1]] > 1:
                st.shared = True
        self.kept_weights = any(n > 1 for n in uses.values())
        self.grad_steps = [st for st in self.steps if st.grad][::-1]
        for st in self.grad_steps:  # the arguments whose gradient the backward keeps
            st.wanted = [(i, s) for i, s in st.refs if st.needs[i]]
        _scatters(self)
        _biases(self)
        self.arena = _buffers.Arena()
        for st in self.grad_steps:
            st.bvjp = _buffers.bvjp_for(st, self.arena)
        _xent.fuse(self)  # log_softmax -> nll_loss: lean kernels, one backward
        _mkl.use_sites(self)  # linear layers' MKL products: arguments found once
        self.mode = None  # what the forward buffers were laid out for ("train"/"infer")
        self.groups, self.colors = [], {}
        # (arena used, tape kept) or ("backward", arena used) -> the generated function
        # (``_codegen``); the forward's with the arena bind the buffers' layout, so a
        # new layout clears them
        self.generated = {}

    # ----- buffers ---------------------------------------------------------------------
    def acquire(self, mode):
        """The plan's arena for one call (None while another call holds it), its forward
        buffers laid out for ``mode`` on first use: "train" (the backward runs in the
        same call), "infer" (no backward), or None (the forward is kept for a later
        backward: no forward buffers, only the backward's)."""
        arena = self.arena
        if arena.busy:
            return None
        if mode != self.mode and self.mode != "mixed":
            if self.mode is not None:  # used both ways: no forward buffers from now on
                mode = "mixed"
            for st in self.steps:
                st.color = st.group = None
                st.skip = False
            self.groups, self.colors = [], {}
            self.generated = {k: f for k, f in self.generated.items() if k[0] is not True}
            if mode in ("train", "infer"):
                _buffers.assign(self, mode == "train")
            self.mode = mode
        arena.busy = True
        return arena

    def release(self, arena):
        if arena is not None:
            arena.busy = False

    # ----- running ---------------------------------------------------------------------
    def forward(self, inputs, params, record, arena=None):
        """Run the forward on arrays. ``inputs``: one array per graph input; ``params``:
        one array per name in ``param_names``; ``arena``: from :meth:`acquire` (its
        forward buffers are used). Returns (slot list, tape or None). Runs the
        generated function of this way of running (see :mod:`._codegen`)."""
        if arena is not None and self.mode not in ("train", "infer"):
            arena = None
        key = (arena is not None, bool(record))
        fn = self.generated.get(key)
        if fn is None:
            fn = self.generated[key] = _codegen.forward_function(self, *key)
        return fn(inputs, params, arena)

    def backward(self, env, tape, out_grads, arena=None):
        """The gradients of the leaves (``leaf_slots`` order) given one gradient array
        (or None) per graph output; with ``arena``, gradient temporaries are written
        into its buffers (the leaves' gradients are never among them)."""
        key = ("backward", arena is not None)
        fn = self.generated.get(key)
        if fn is None:
            fn = self.generated[key] = _codegen.backward_function(self, key[1])
        return fn(env, tape, out_grads, arena)

    def sources(self):
        """The source of each function generated for this plan so far, by (arena used,
        tape kept) for the forward and ("backward", arena used) for the backward."""
        return {k: fn.source for k, fn in self.generated.items()}


def _biases(plan):
    """Linear layers handed the same gradient array as the one before them in the
    backward (an RNN cell's ``linear(x, w_ih, b_ih) + linear(h, w_hh, b_hh)``: the
    sum's gradient goes to both) share one bias gradient: the first one's vjp makes
    it, the second runs its vjp without the bias edge (``st.bias``, an op object
    with no state: a linear layer's forward leaves none) and gets a copy. The same
    sum of the same array: the same bits."""
    for st in plan.grad_steps:
        if st.declared is None or len(st.needs) != 3 or not st.needs[2] or \
                st.node.target.vjp is not nn_fused._Linear.vjp or \
                type(st.node.args[2]) is not Ref:
            continue
        bare = object.__new__(st.node.target)
        bare._edges = st.declared[1]._edges[:2] + (None,)
        st.bias = bare


def _accumulate(G, s, g):
    prev = G.get(s)
    G[s] = g if prev is None else prev + g


def _accumulate_into(G, s, g, arena):
    """``_accumulate`` with the sum written into slot ``s``'s own buffer."""
    prev = G.get(s)
    if prev is None:
        G[s] = g
    elif prev.shape == g.shape and prev.dtype == g.dtype and type(prev) is _ndarray \
            and type(g) is _ndarray:
        G[s] = np.add(prev, g, out=arena.get(("acc", s), g.shape, g.dtype))
    else:
        G[s] = prev + g


def _distinct(leaf):
    """The leaves' gradients with each array that an earlier leaf also receives copied
    (``a + b`` hands both operands one array): every ``.grad`` its own memory, as
    eagerly, so an in-place change to one (``zero_``, clipping) leaves the other."""
    seen = set()
    for k, g in enumerate(leaf):
        if g is not None:
            if id(g) in seen:
                leaf[k] = g.copy()
            else:
                seen.add(id(g))
    return leaf


def _sum_to(g, shape):
    """``g`` summed over the dims broadcasting added or stretched to reach ``shape``."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape)
                                      if n == 1 and g.shape[i + lead] != 1)
    if axes:
        if g.dtype == np.float16 or g.dtype.kind == "V":
            # half and bfloat16 accumulate in float32 and round once (``SumToSize``)
            g = g.sum(axis=axes, keepdims=True, dtype=np.float32).astype(g.dtype)
        else:
            g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def build(graph, input_rg, param_rg):
    """A :class:`Plan` for ``graph``, or None with the reason when it has none."""
    try:
        return Plan(graph, input_rg, param_rg), None
    except Unplannable as e:
        return None, str(e)


# ----- the plan as one autograd node ------------------------------------------------------
# glibc's default mmap threshold: smaller arrays come from the heap, without page faults
_ARENA_MIN_BYTES = 1 << 17


def _large(plan, env, out_grads):
    """Whether any array a step of the plan made is at least ``_ARENA_MIN_BYTES`` (its
    inputs and parameters are not counted: they are no temporaries), remembered per
    plan and shapes of the output gradients (a heuristic: it picks where temporaries
    live, never what they hold)."""
    key = tuple([None if g is None else g.shape for g in out_grads])
    seen = plan.large
    big = seen.get(key)
    if big is None:
        big = large_temporaries(plan, env)
        if len(seen) > 64:
            seen.clear()
        seen[key] = big
    return big


def large_temporaries(plan, env):
    """Whether a forward's step outputs (in ``env``) hold an array of at least
    ``_ARENA_MIN_BYTES``: below that the heap serves them without page faults, and the
    arena's bookkeeping and compiled loops cost more than they save (a cell called in a
    Python loop on a small batch)."""
    for s in plan.made_slots:
        a = env[s]
        if type(a) is _ndarray and a.nbytes >= _ARENA_MIN_BYTES:
            return True
    return False


_config = []  # ``_compiled.config``, once imported


class CompiledFunctionBackward(Node):
    """The node a planned forward leaves: its backward runs the plan's backward
    schedule on arrays (or, under ``create_graph``, the graph again in ember ops)."""

    _node_name = "CompiledFunctionBackward"
    _custom_zeros = True

    def backward(self, *grads):
        saved = self._saved
        if type(saved) is not tuple:  # the engine's "freed" mark
            raise RuntimeError(_FREED_MSG)
        if _grad_state.grad_enabled:
            return self._recorded(grads)
        leaf = self._leaf_arrays(saved, [None if g is None else g._data for g in grads])
        return _handed(leaf, {id(g._data): g for g in grads if g is not None}, False)

    def _array_grads(self, gy, g):
        """``backward`` on the output gradient's array (``Node._array_grads``; the engine
        calls it for a plan of one output): the leaves' gradients as arrays, except where
        the plan hands one array to several leaves or passes ``g`` itself on
        (:func:`_handed`). None where ``backward`` must answer (a freed graph)."""
        saved = self._saved
        if type(saved) is not tuple:
            return None
        plan = self.plan
        big = plan.large.get((g.shape,))  # (``_large``'s key for one output gradient)
        if big is False:  # small temporaries (a cell in a Python loop): no arena
            leaf = plan.backward(saved[0], saved[1], [g], None)
        else:
            leaf = self._leaf_arrays(saved, [g])
        ids = set(map(id, leaf))
        if len(ids) == len(leaf) and id(g) not in ids and id(None) not in ids:
            return tuple(leaf)  # each an array of its own
        own = set()
        for a in leaf:
            if a is not None:
                if a is g or id(a) in own:
                    return _handed(leaf, {id(g): gy if isinstance(gy, Tensor) else None},
                                   True)
                own.add(id(a))
        return tuple(leaf)

    def _leaf_arrays(self, saved, out_grads):
        """The plan's backward on the output gradients' arrays: the leaves' gradient
        arrays (``plan.leaf_slots`` order)."""
        env, tape = saved
        plan = self.plan
        if not _config:  # (``_compiled`` imports this module)
            from ember._compile._compiled import config
            _config.append(config)
        config = _config[0]
        # buffers pay where temporaries are large (fresh pages, a fault per 4 KiB); for
        # small ones (a cell called in a Python loop) the heap is cheaper than the
        # arena's bookkeeping and the copy of each leaf gradient out of it
        arena = plan.acquire(None) if config.reuse_buffers and _large(plan, env, out_grads) \
            else None
        try:
            return plan.backward(env, tape, out_grads, arena)
        finally:
            plan.release(arena)

    def _recorded(self, grads):
        """``create_graph=True``: the graph is replayed in ember ops from the same
        inputs (eager ember's graph), and differentiated with a graph recorded."""
        from ember import _logging
        from ember.autograd import grad as _grad
        _logging.log("perf_hints", "create_graph=True through a compiled function: its "
                                "backward runs eagerly (the graph replayed in ember ops)")
        self.on_recorded()
        leaves, outs = self.replay()
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        got = _grad([o for o, _ in pairs], leaves, [g for _, g in pairs],
                    create_graph=True, allow_unused=True)
        return tuple(got)


def _handed(leaf, passed, arrays):
    """The leaves' gradient arrays as the plan's node hands them to the engine, which
    tells leaves' gradients apart by Tensor (one Tensor reaching a second leaf, or the
    caller's gradient, becomes a copy there): an array that goes to several leaves (the
    two operands of ``a + b``), or an output's gradient passed on (``passed``: id of its
    array -> its Tensor, or None), becomes one Tensor for all its places; the others
    stay arrays (``arrays``) or each get a Tensor of their own. No two leaves' ``.grad``
    then share memory, nor one and the caller's gradient."""
    many = {}
    for a in leaf:
        if a is not None:
            many[id(a)] = id(a) in many
    made = dict(passed)
    out = []
    for a in leaf:
        if a is None:
            out.append(None)
            continue
        k = id(a)
        if many[k] or k in made:
            t = made.get(k)
            if t is None:
                t = made[k] = _make(a)
            out.append(t)
        else:
            out.append(a if arrays else _make(a))
    return tuple(out)


def attach(plan, env, tape, leaves, replay, on_recorded):
    """The graph's outputs as Tensors, the differentiable ones sharing one
    :class:`CompiledFunctionBackward` node with edges to ``leaves`` (the Tensors of
    ``plan.leaf_slots``)."""
    outs = [env[s] for s in plan.out_slots]
    if not plan.any_out_rg or not _grad_state.grad_enabled:
        return [_make(o if type(o) is _ndarray else _as_array(o)) if not isinstance(o, int)
                else o for o in outs]
    node = _backward_node(plan, env, tape, leaves, replay, on_recorded, len(outs))
    result = []
    for i, (o, rg) in enumerate(zip(outs, plan.out_rg)):
        if isinstance(o, int):
            result.append(o)
            continue
        t = _make(o if type(o) is _ndarray else _as_array(o), rg)
        if rg:
            t.grad_fn = node
            t._output_nr = i
        result.append(t)
    return result


def _backward_node(plan, env, tape, leaves, replay, on_recorded, n_outputs):
    """The ``CompiledFunctionBackward`` node of one run of ``plan``: edges to the leaves'
    nodes, the run's arrays and tape kept for its backward."""
    node = _new(CompiledFunctionBackward)
    node._edges = tuple([t if t.grad_fn is None else (t.grad_fn, t._output_nr)
                         for t in leaves])
    node._saved = (env, tape)
    node.plan = plan
    node.replay = replay
    node.on_recorded = on_recorded
    node.n_outputs = n_outputs
    return node


def attach_one(plan, env, tape, leaves, replay, on_recorded):
    """:func:`attach` for a plan with one output, differentiable, under grad mode: the
    same node and Tensor (a compiled cell's repeated call)."""
    node = _backward_node(plan, env, tape, leaves, replay, on_recorded, 1)
    o = env[plan.out_slots[0]]
    t = _make(o if type(o) is _ndarray else _as_array(o), True)
    t.grad_fn = node
    t._output_nr = 0
    return t
