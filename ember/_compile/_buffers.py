"""Buffers a plan reuses from step to step (see ``_plan``).

Once a plan's guards hold, every intermediate has the same shape and dtype on every
call (or, for a symbolic batch size, the same shape as on the previous call of that
size): the plan's steps that have an *into* kernel here write their outputs with
NumPy's ``out=`` into arrays kept by the plan's :class:`Arena`, instead of allocating
a fresh array per op and call (large fresh arrays come back from the allocator as
untouched pages, a page fault per 4 KiB, whenever the heap was trimmed in between).

Forward outputs share memory: a liveness analysis over the step order (the forward,
then the backward in reverse, where a step's backward reads its inputs and outputs
from the tape) gives each buffer the interval from the step that writes it to the last
step that reads it, or reads a view of it (a step without an into kernel may return a
view of its input, so its outputs are taken to alias all its inputs). Buffers whose
intervals do not overlap share one block of memory (greedy interval colouring).

What the user can hold is never a buffer: a buffer that reaches one of the graph's
outputs (through any chain of views) is not used (that step allocates, as eagerly),
and a leaf gradient the backward returns that lies in the arena is copied before it
becomes a ``.grad``. A plan whose forward is kept for a later ``backward()`` (a
compiled module called with grad enabled) does not use forward buffers at all: the
next call would overwrite the activations the pending backward reads. The backward's
gradient temporaries live in dedicated buffers (one per producing site, written once
per backward), which no later step of the same backward overwrites.
"""
import numpy as np

from ember.ops.unary import _relu_array

__all__ = ["Arena", "assign", "INTO", "owned"]

_ndarray = np.ndarray


class Arena:
    """The memory of one plan's buffers: a byte block per colour (shared by the forward
    buffers given that colour) and one per backward site, grown when a larger shape
    arrives, with the typed views of each block cached per (shape, dtype)."""

    __slots__ = ("blocks", "views", "busy", "roots")

    def __init__(self):
        self.blocks = {}
        self.views = {}
        self.busy = False
        self.roots = set()  # ids of the blocks (for ``owned``)

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


# ----- forward kernels writing into a buffer ------------------------------------------------
# ``into(args, arena, key)``: the op's array forward (the same NumPy calls, so the same
# values) with its result written into ``arena.get(key, shape, dtype)``.
def _linear_into(args, arena, key):
    x, w, b = args[0], args[1], args[2]
    n = w.shape[0]
    out = arena.get(key, x.shape[:-1] + (n,), np.result_type(x.dtype, w.dtype))
    if x.ndim == 2:
        np.matmul(x, w.T, out=out)
    else:
        np.matmul(x.reshape(-1, x.shape[-1]), w.T, out=out.reshape(-1, n))
    if b is not None:
        out += b
    return out


def _linear_relu_into(args, arena, key):
    out = _linear_into(args, arena, key)
    return _relu_array(out, out)


def _relu_into(args, arena, key):
    x = args[0]
    return _relu_array(x, arena.get(key, x.shape, x.dtype))


def _unary_into(f):
    def into(args, arena, key):
        x = args[0]
        return f(x, out=arena.get(key, x.shape, x.dtype))
    return into


def _binary_into(f):
    """Two tensors of one floating dtype, or one and a Python number (NumPy casts the
    number to the array's dtype, as eager ember's operators do)."""
    def into(args, arena, key):
        a, b = args[0], args[1]
        if type(b) is not _ndarray:
            t = a
        elif type(a) is not _ndarray:
            t = b
        else:
            t = a if a.shape == b.shape else None
        shape = t.shape if t is not None else np.broadcast_shapes(a.shape, b.shape)
        return f(a, b, out=arena.get(key, shape, (a if t is None else t).dtype))
    return into


# by op name: (kernel, which argument positions must be arrays of one floating dtype)
INTO = {
    "_Linear": (_linear_into, (0, 1)), "_LinearMm": (_linear_into, (0, 1)),
    "_LinearView": (_linear_into, (0, 1)), "_LinearUnsafeView": (_linear_into, (0, 1)),
    "_LinearRelu": (_linear_relu_into, (0, 1)),
    "Relu": (_relu_into, (0,)), "Tanh": (_unary_into(np.tanh), (0,)),
    "Add": (_binary_into(np.add), "binary"), "Sub": (_binary_into(np.subtract), "binary"),
    "Mul": (_binary_into(np.multiply), "binary"), "Div": (_binary_into(np.divide), "binary"),
}


def _floating_same(node, positions):
    """Whether the node's arguments at ``positions`` are tensors of one floating dtype
    (and its other tensor arguments, a bias, of that dtype too)."""
    from ember._graph.ir import Ref
    if positions == "binary":  # a Python number (not bool) may stand for one operand
        if len(node.args) != 2:
            return False
        refs = tuple(i for i, a in enumerate(node.args) if type(a) is Ref)
        if not refs or any(type(a) not in (int, float) for i, a in enumerate(node.args)
                           if i not in refs):
            return False
        positions = refs
    dts = set()
    for i in positions:
        if i >= len(node.args) or type(node.args[i]) is not Ref:
            return False
        v = node.args[i].value
        if v.type != "Tensor" or v.dtype is None or not v.dtype.is_floating_point:
            return False
        dts.add(v.dtype)
    for a in node.args:
        if type(a) is Ref and a.value.type == "Tensor":
            dts.add(a.value.dtype)
    out = node.outputs[0]
    return len(dts) == 1 and out.dtype in dts


# primitives whose outputs are always new arrays, never views of their inputs (a
# reduction, a convolution...): their outputs alias no buffer
_FRESH_OUT = {"_CrossEntropy", "Mean", "MeanDim", "Conv", "MaxPool", "_LayerNorm",
              "ScaledDotProductAttention", "Add", "Sub", "Mul", "Div"}


def assign(plan, record):
    """Lay out the plan's forward buffers: the elementwise chains fused
    (``plan.groups``), and a colour per buffered slot (``plan.colors``) from the
    liveness of the slots; ``record``: the backward reads the tape in the same call.
    Slots that may reach the user get no buffer (their step allocates)."""
    from ember._compile import _fused
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
        k = INTO.get(st.node.op) if st.prim and not st.multi and st.inplace is None else None
        if k is not None and _floating_same(st.node, k[1]):
            st.into = k[0]
            roots[st.outs[0]] = (st.outs[0],)
            cand.append((st.outs[0], st.index, st))
        elif not (st.prim and st.node.op in _FRESH_OUT and st.inplace is None):
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
    plan.groups = groups
    return len(colours)


# ----- backward kernels writing their gradient temporaries into buffers -----------------------
# ``bvjp(state, args, ys, gouts, needs, arena, key)``: the ``_kernels`` vjp of the same
# op, its activation-sized results written into ``arena.get(("g", key, i), ...)``, the
# parameter-sized ones (a weight's, a bias's gradient: the ``.grad`` the user keeps)
# fresh as before.
def _site(arena, key, i, shape, dtype):
    return arena.get(("g", key, i), shape, dtype)


def _linear_bvjp(relu):
    def bvjp(state, args, ys, gouts, needs, arena, key):
        from ember._compile import _fused
        x, w = args[0], args[1]
        g = gouts[0]
        if relu:
            g = _fused.relu_grad(g, ys[0], _site(arena, key, "m", g.shape, g.dtype))
        n = g.shape[-1]
        g2 = g if g.ndim == 2 else g.reshape(-1, n)
        gx = gw = gb = None
        if needs[0]:
            gx = _site(arena, key, 0, x.shape, np.result_type(g.dtype, w.dtype))
            np.matmul(g2, w, out=gx if gx.ndim == 2 else gx.reshape(-1, w.shape[1]))
        if needs[1]:
            gw = np.matmul(g2.T, x if x.ndim == 2 else x.reshape(-1, x.shape[-1]))
        if len(needs) > 2 and needs[2]:
            gb = g2.sum(0)
        return [gx, gw, gb]
    return bvjp


def _relu_bvjp(state, args, ys, gouts, needs, arena, key):
    from ember._compile import _fused
    g = gouts[0]
    return [_fused.relu_grad(g, ys[0], _site(arena, key, 0, g.shape, g.dtype))]


def _tanh_bvjp(state, args, ys, gouts, needs, arena, key):
    from ember._compile import _fused
    g = gouts[0]
    return [_fused.tanh_grad(g, ys[0], _site(arena, key, 0, g.shape, g.dtype))]


def _sub_bvjp(state, args, ys, gouts, needs, arena, key):
    g = gouts[0]
    return [g, np.negative(g, out=_site(arena, key, 1, g.shape, g.dtype))
            if needs[1] else None]


def _mul_bvjp(state, args, ys, gouts, needs, arena, key):
    g = gouts[0]
    a, b = args
    out = [None, None]
    for i, other in ((0, b), (1, a)):
        if needs[i]:
            o = getattr(other, "shape", g.shape)  # a Python number: g's shape
            shape = g.shape if g.shape == o else np.broadcast_shapes(g.shape, o)
            out[i] = np.multiply(g, other, out=_site(arena, key, i, shape, g.dtype))
    return out


_BVJP = {
    "_Linear": _linear_bvjp(False), "_LinearMm": _linear_bvjp(False),
    "_LinearView": _linear_bvjp(False), "_LinearUnsafeView": _linear_bvjp(False),
    "_LinearRelu": _linear_bvjp(True), "Relu": _relu_bvjp, "Tanh": _tanh_bvjp,
    "Sub": _sub_bvjp, "Mul": _mul_bvjp,
}


def bvjp_for(st):
    """The buffered vjp of a plan step, or None (its ``_kernels`` vjp runs)."""
    if not st.prim or st.multi:
        return None
    f = _BVJP.get(st.node.op)
    if f is None or not _floating_same(st.node, INTO[st.node.op][1]):
        return None
    return f
