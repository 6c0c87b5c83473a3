"""Buffers a plan reuses from step to step (see ``_plan``).

Once a plan's guards hold, every intermediate has the same shape and dtype on every
call (or, for a symbolic batch size, the same shape as on the previous call of that
size): the plan's steps whose op class declares ``forward_out`` (its forward written
into a given array) write their outputs into arrays kept by the plan's
:class:`Arena`, instead of allocating a fresh array per op and call (large fresh
arrays come back from the allocator as untouched pages, a page fault per 4 KiB,
whenever the heap was trimmed in between).

Forward outputs share memory: a liveness analysis over the step order (the forward,
then the backward in reverse, where a step's backward reads its inputs and outputs
from the tape) gives each buffer the interval from the step that writes it to the last
step that reads it, or reads a view of it (a step without ``forward_out`` may return a
view of its input, so its outputs are taken to alias all its inputs, unless its class
is in ``_FRESH_OUT``). Buffers whose intervals do not overlap share one block of
memory (greedy interval colouring).

What the user can hold is never a buffer: a buffer that reaches one of the graph's
outputs (through any chain of views) is not used (that step allocates, as eagerly),
and a leaf gradient the backward returns that lies in the arena is copied before it
becomes a ``.grad``. A plan whose forward is kept for a later ``backward()`` (a
compiled module called with grad enabled) does not use forward buffers at all: the
next call would overwrite the activations the pending backward reads. The backward's
gradient temporaries live in dedicated buffers (one per producing site, written once
per backward), which no later step of the same backward overwrites: the op's own
``vjp`` writes them, given ``out`` (:func:`bvjp_for`).
"""
import numpy as np

from ember.ops import (
    attention,
    conv,
    elementwise,
    losses,
    normalization,
    pooling,
    reduction,
)

__all__ = ["Arena", "assign", "bvjp_for", "owned"]

_ndarray = np.ndarray


class Arena:
    """The memory of one plan's buffers: a byte block per colour (shared by the forward
    buffers given that colour) and one per backward site, grown when a larger shape
    arrives, with the typed views of each block cached per (shape, dtype)."""

    __slots__ = ("blocks", "views", "busy", "roots", "sites")

    def __init__(self):
        self.blocks = {}
        self.views = {}
        self.busy = False
        self.roots = set()  # ids of the blocks (for ``owned``)
        self.sites = {}

    def site(self, key):
        """The ``out(i, shape, dtype)`` an op's ``forward_out`` or ``vjp`` takes: arrays
        in block ``key`` (a forward buffer: one output) or, for a tuple ``key``, in
        block ``key + (i,)`` (a backward site: one block per result)."""
        f = self.sites.get(key)
        if f is None:
            get = self.get
            if type(key) is tuple:
                def f(i, shape, dtype):
                    return get(key + (i,), shape, dtype)
            else:
                def f(i, shape, dtype):
                    return get(key, shape, dtype)
            self.sites[key] = f
        return f

    def get(self, key, shape, dtype):
        """An array of ``shape`` and ``dtype`` in block ``key`` (its contents are
        whatever the last user left)."""
        v = self.views.get((key, shape, dtype))
        if v is not None:
            return v
        dtype = np.dtype(dtype)
        n = dtype.itemsize
        for d in shape:
            n *= d
        block = self.blocks.get(key)
        if block is None or block.nbytes < n:
            if block is not None:
                self.roots.discard(id(block))
                for k in [k for k in self.views if k[0] == key]:
                    del self.views[k]
            # 64-byte aligned, as NumPy's own large allocations are in practice
            raw = np.empty(n + 64, np.uint8)
            off = (-raw.ctypes.data) % 64
            block = raw[off:off + n]
            self.blocks[key] = block
            self.roots.add(id(raw))
        v = block[:n].view(dtype).reshape(shape)
        if len(self.views) > 4096:  # a symbolic size taking ever new values
            self.views.clear()
        self.views[(key, shape, dtype)] = v
        return v


def owned(arena, a):
    """Whether array ``a`` lies in ``arena``'s memory (then it must be copied before the
    user may hold it)."""
    if arena is None or type(a) is not _ndarray:
        return False
    b = a
    while b.base is not None and type(b.base) is _ndarray:
        b = b.base
    return id(b) in arena.roots


def _floating_same(node):
    """Whether the node's tensor arguments and its output are of one floating dtype
    (not complex), and its other arguments Python numbers (not bool) or None: then an
    op's NumPy calls give the same values written into a buffer of that dtype."""
    from ember._graph.ir import Ref
    if node.kwargs:
        return False
    dts = set()
    for a in node.args:
        if type(a) is Ref:
            v = a.value
            if v.type != "Tensor" or v.dtype is None or not v.dtype.is_floating_point or \
                    getattr(v.dtype, "is_complex", False):
                return False
            dts.add(v.dtype)
        elif a is not None and type(a) not in (int, float):
            return False
    out = node.outputs[0]
    return len(dts) == 1 and out.dtype in dts


# primitives whose outputs are always new arrays, never views of their inputs (a
# reduction, a convolution...): their outputs alias no buffer
_FRESH_OUT = {losses.NllLoss, losses.NllLoss2d, reduction.Mean, reduction.MeanDim, conv.Conv,
              pooling.MaxPool, normalization._LayerNorm, attention.ScaledDotProductAttention,
              elementwise.Add, elementwise.Sub, elementwise.Mul, elementwise.Div}


def assign(plan, record):
    """Lay out the plan's forward buffers: the elementwise chains fused
    (``plan.groups``), and a colour per buffered slot (``plan.colors``) from the
    liveness of the slots; ``record``: the backward reads the tape in the same call.
    Slots that may reach the user get no buffer (their step allocates)."""
    from ember._compile import _fused, _mkl
    steps = plan.steps
    n = len(steps)
    inf = 2 * n + 1
    for st in steps:
        st.color = st.group = None
        st.skip = False
    groups = _fused.groups(plan, record)
    pos = list(range(n))  # where each step's forward runs (a chain: at its last step)
    for g in groups:
        for st in g.steps:
            pos[st.index] = g.last.index
            st.skip = st is not g.last
        g.last.group = g
    last = [-1] * plan.n_slots
    for st in steps:
        for s in st.in_slots:
            last[s] = max(last[s], pos[st.index])
        if record and st.grad:
            # its backward reads its inputs and outputs from the tape (an earlier
            # reader's backward comes later: keep the latest)
            back = 2 * n - 1 - st.index
            for s in st.in_slots + st.outs:
                last[s] = max(last[s], back)
    for s in plan.out_slots:
        last[s] = inf
    # the buffers each slot may alias (a buffer is named by its slot)
    roots = [()] * plan.n_slots
    cand = []  # (slot, position written, step)
    kept = {s for g in groups for s in g.keep}
    for st in steps:
        if st.skip or st.group is not None:
            for s in st.outs:
                if s in kept:
                    roots[s] = (s,)
                    cand.append((s, pos[st.index], st))
            continue
        into = getattr(st.op, "forward_out", None) if st.prim and not st.multi and \
            st.inplace is None else None
        if into is not None and _floating_same(st.node):
            # a linear layer's product with its MKL arguments found once per layout
            st.into = _mkl.linear_into(into, act_of(st)) if _mkl.is_linear(st.node.target) \
                else into
            roots[st.outs[0]] = (st.outs[0],)
            cand.append((st.outs[0], st.index, st))
        elif not (st.prim and st.node.target in _FRESH_OUT and st.inplace is None):
            r = set()
            for s in st.in_slots:
                r.update(roots[s])
            r = tuple(r)
            for s in st.outs:
                roots[s] = r
    end = {}
    for s in range(plan.n_slots):
        for b in roots[s]:
            end[b] = max(end.get(b, -1), last[s])
    colours = []  # (end of the last buffer given it, estimated size)
    plan.colors = colors = {}
    for s, start, st in sorted(cand, key=lambda c: c[1]):
        e = end.get(s, start)
        if e >= inf:  # the user may hold it: a fresh array per call
            colors[s] = None
            continue
        v = st.node.outputs[0]
        size = int(np.prod(v.shape)) if v.shape and None not in v.shape else 0
        free = [c for c, (ce, _) in enumerate(colours) if ce < start]
        if free:
            c = min(free, key=lambda c: abs(colours[c][1] - size))
            colours[c] = (e, max(size, colours[c][1]))
        else:
            c = len(colours)
            colours.append((e, size))
        colors[s] = c
        if st.group is None and not st.skip:
            st.color = c
            st.buffer = plan.arena.site(c)
    plan.groups = groups
    return len(colours)


def act_of(st):
    """The ReLU step a linear step with a buffer runs over its output itself (its
    ``into`` returns the ReLU's output, ``_mkl.linear_into``), or None: the ReLU
    ``_rewrites._fuse`` found for it, where the ReLU runs on its own in the forward
    with buffers (not a member of a fused chain)."""
    a = st.act
    if a is None or a.group is not None or a.skip or a.nested or a.inplace is None:
        return None
    return a


# ----- backward: the op's own vjp writing its gradient temporaries into buffers -------------
def bvjp_for(st, arena):
    """``run(state, args, ys, gouts)`` for a plan step: its op's vjp given the
    buffers of its site in ``arena`` (each op puts its activation-sized results there,
    the parameter-sized ones, the ``.grad`` the user keeps, stay fresh), or None (the
    plain ``st.vjp`` runs). An op whose class declares a one-element gradient
    (``fused_vjp``), or an ``activation`` that does, runs that as one compiled loop
    (:mod:`ember._compile._fused`) where the arrays allow."""
    from ember._compile import _fused, _rules
    if not st.prim or st.multi or st.node.target.vjp is None or \
            not _floating_same(st.node):
        return None
    out = arena.site(("g", st.index))
    vjp = _rules.vjp_for(st.node, True, st.needs, out)
    cls = st.node.target
    loop = _fused.grad_loop(cls)
    if loop is not None:
        def run(state, args, ys, gouts):
            g = gouts[0]
            o = out(0, g.shape, g.dtype)
            if loop(g, ys[0], o):
                return [o]
            return vjp(state, args, ys, gouts)
        return run
    act = getattr(cls, "activation", None)
    loop = None if act is None else _fused.grad_loop(act)
    if loop is not None:
        # the base class's op, then the activation: its loop, then the base's vjp
        base = next(c.__dict__["vjp"] for c in cls.__mro__[1:] if "vjp" in c.__dict__)
        op = object.__new__(cls)
        op._edges = tuple(1 if n else None for n in st.needs)

        def run(state, args, ys, gouts):
            g = gouts[0]
            o = out("act", g.shape, g.dtype)
            if not loop(g, ys[0], o):
                return vjp(state, args, ys, gouts)
            if state:
                op.__dict__ = state
            return base(op, (o,), args, ys, out)
        return run
    return vjp


def slot_readers(plan):
    """{slot: how many of ``plan``'s steps read it, plus 2 where it is a graph output}: a
    slot read by one step alone and not returned may be overwritten by that step."""
    readers = {}
    for st in plan.steps:
        for s in st.in_slots:
            readers[s] = readers.get(s, 0) + 1
    for s in plan.out_slots:
        readers[s] = readers.get(s, 0) + 2
    return readers
