"""Rewrites of a compiled plan's steps (see ``_plan``) that remove work eager ember does
without changing a value: calls recorded above the primitives run as the one NumPy call
they are (:func:`_direct`), ``stack(x.unbind(d), d)`` as one copy of ``x``
(:func:`_unbind_stack`), the gradients of ``x[0]``, ``x[1]``... written into one
array for ``x`` (:func:`_scatters`), and elementwise steps written over a fresh input
(:func:`_fuse`). Each keeps eager ember's values to the bit."""
import numpy as np

from ember._compile import _buffers, _fused, _mkl
from ember._graph.ir import Ref
from ember.ops import conv, elementwise, join, nn_fused, unary

_ndarray = np.ndarray

__all__ = []


def _basic_key(key):
    """Whether ``key`` is a NumPy basic index that means the same as ember's (ints, slices
    with a positive step, None, ``...``): then ``a[key]`` is ember's ``getitem``."""
    for k in key if type(key) is tuple else (key,):
        t = type(k)
        if t is slice:
            if not all(type(v) in (int, type(None)) for v in (k.start, k.stop, k.step)) \
                    or (k.step is not None and k.step <= 0):
                return False
        elif t is not int and k is not None and k is not Ellipsis:
            return False
    return True


def _getitem(args):
    return args[0][args[1]]


def _view(args):
    a = args[0]
    shape = args[1] if len(args) == 2 and type(args[1]) in (tuple, list) else args[1:]
    try:  # a view or nothing: where NumPy would copy, ember's own view decides (raises)
        return a.reshape(tuple(shape), copy=False)
    except (ValueError, TypeError):
        return None


def _reshape(args):
    a = args[0]
    shape = args[1] if len(args) == 2 and type(args[1]) in (tuple, list) else args[1:]
    return a.reshape(tuple(shape))  # a view where the strides allow, else a copy: ember's


def _size(args):
    return args[0].shape[args[1]]


def _direct(node):
    """The array function of a call recorded above the primitives when it is one NumPy
    call with the same result as ember's function on the array (``x[0]``, ``view``,
    ``reshape``, ``size``, arithmetic on sizes), else None (the call runs on Tensors).
    Saves wrapping the arrays as Tensors and a grad mode switch per call."""
    from ember._compile import _plan
    op, args = node.op, node.args
    if not node.inputs or any(v.type != "Tensor" for v in node.inputs[:1]):
        return (lambda a, f=node.target: f(*a)) if op.startswith("int.") and \
            all(type(a) in (int, Ref) for a in args) else None
    rest = args[1:]
    if op == "getitem" and len(args) == 2 and type(args[1]) is not Ref and \
            not _plan._has_ref(args[1]) and _basic_key(args[1]):
        return _getitem
    if op in ("view", "reshape") and rest and all(
            type(a) in (int, Ref) for a in (rest[0] if len(rest) == 1 and
                                             type(rest[0]) in (tuple, list) else rest)):
        if any(type(a) is Ref and a.value.type == "Tensor" for a in rest):
            return None
        return _view if op == "view" else _reshape
    if op == "size" and len(args) == 2 and type(args[1]) is int:
        return _size
    return None


def _unbind_stack(steps, graph):
    """``stack(x.unbind(d), d)`` (a recurrent layer's per-step outputs joined back, as
    PyTorch records it) where nothing else reads the pieces: the stack step becomes a
    copy of ``x`` (the same values and C-ordered layout ``np.stack`` gives) and the
    unbind step goes; the gradient passes through (see :func:`_joined_vjp`)."""
    readers = {}
    for st in steps:
        for s in st.in_slots:
            readers[s] = readers.get(s, 0) + 1
    outs = {id(v) for v in graph.outputs()}
    producer = {s: st for st in steps for s in st.outs}
    gone = set()
    for st in steps:
        if not st.prim or st.node.target is not join.Stack or st.nested or \
                len(st.refs) != len(st.args) or not st.refs:
            continue
        u = producer.get(st.refs[0][1])
        if u is None or not u.prim or u.node.target is not join.Unbind or \
                len(u.refs) != 1 or len(u.args) != 2 or type(u.args[1]) is not int:
            continue
        x = u.node.inputs[0]
        nd = len(x.shape) if x.shape is not None else None
        dim = st.kwargs.get("dim")
        if nd is None or type(dim) is not int or dim % nd != u.args[1] % nd or \
                [s for _, s in st.refs] != u.outs or \
                any(readers.get(s) != 1 for s in u.outs) or \
                any(id(v) in outs for v in u.node.outputs) or \
                st.node.outputs[0].dtype != x.dtype or x.dtype is None:
            continue
        src = u.refs[0][1]
        st.args, st.refs, st.in_slots, st.kwargs = [None], [(0, src)], [src], {}
        st.prim, st.fast, st.joined = False, _copy, True
        gone.add(id(u))
    return [st for st in steps if id(st) not in gone]


def _copy(args):
    return args[0].copy()


def _joined_vjp(state, args, ys, gouts):
    """The gradient of a copy (``_unbind_stack``), C-ordered as eager's stacked one."""
    g = gouts[0]
    return [g if g is None or g.flags.c_contiguous else np.ascontiguousarray(g)]


def _scatters(plan):
    """Mark the ``x[i]`` steps (int ``i``) whose gradients are the only ones ``x``
    receives, with two or more distinct ``i`` (a projection split into q, k, v): their
    backward writes each gradient into one array for ``x`` (:func:`_scatter`) instead of
    a zero-filled array of ``x``'s size per step and a full-size sum between them."""
    readers = {}
    for st in plan.grad_steps:
        for _, s in st.wanted:
            readers.setdefault(s, []).append(st)
    outs = set(plan.out_slots)
    for s, sts in readers.items():
        if s in outs or len(sts) < 2:
            continue
        keys = [st.args[1] if len(st.args) == 2 else None for st in sts]
        if not all(st.fast is _getitem and len(st.wanted) == 1 for st in sts) or \
                any(type(k) is not int for k in keys) or len(set(keys)) != len(keys) or \
                not (all(k >= 0 for k in keys) or all(k < 0 for k in keys)):
            continue
        for st in sts:
            st.scatter = True
    _scatter_views(plan, outs)


def _scatter_views(plan, outs):
    """Mark the ``view``/``reshape`` of a marked ``x[i]`` (:func:`_scatters`) that is its
    only reader on the gradient path (a head split's ``q.view(...)``): its backward
    writes its gradient straight into ``x``'s array through ``x[i]``'s row seen in the
    view's shape (:func:`_scatter`), where the view's own backward would first copy a
    gradient not laid out in rows into ``x[i]``'s shape and the scatter then copy it
    again (one pass over the row instead of two; the same values)."""
    by_out = {st.outs[0]: st for st in plan.grad_steps if st.scatter}
    readers = {}
    for st in plan.grad_steps:
        for _, s in st.wanted:
            readers[s] = readers.get(s, 0) + 1
    for st in plan.grad_steps:
        if st.fast not in (_view, _reshape) or len(st.wanted) != 1 or \
                st.wanted[0][0] != 0 or len(st.outs) != 1:
            continue
        s = st.wanted[0][1]
        src = by_out.get(s)
        if src is not None and readers[s] == 1 and s not in outs:
            st.feeds = src


def _scatter(G, st, args, g, arena, firsts, unfilled, shaped=False):
    """``x[i]``'s gradient ``g`` put into ``x``'s (see :func:`_scatters`), with eager's
    values to the bit: eager makes zeros with ``g`` at ``i`` per step and sums them, so a
    lone gradient is kept as it is, and once two meet every element has had ``+ 0.0``
    (-0.0 becomes 0.0), which is done here on the rows written. False (nothing done)
    for a gradient of another dtype or shape (the step's own vjp runs).

    An arena's buffer is not zero-filled first: the rows written are recorded in
    ``unfilled`` (slot -> rows), and :func:`_zero_unwritten` zeroes the rest where the
    array is read (its producer's backward, a leaf's gradient, another gradient added
    to it). A projection split into q, k and v writes every row, so nothing is filled.

    ``shaped``: ``g`` is the gradient of a view of ``x[i]`` (``_scatter_views``), of any
    shape of ``x[i]``'s size: it is written into the row seen in its shape (a C-ordered
    row reshaped is a view of it), as the view's backward would have reshaped it."""
    x, i = args[0], args[1]
    s = st.wanted[0][1]
    if type(g) is not _ndarray or g.dtype != x.dtype or \
            (g.size * x.shape[0] != x.size if shaped else g.shape != x.shape[1:]):
        rows = unfilled.pop(s, None)
        if rows is not None:
            _zero_unwritten(G[s], rows)
        return False
    buf = G.get(s)
    if buf is None:
        if arena is None:
            buf = np.zeros(x.shape, x.dtype)
        else:
            buf = arena.get(("scatter", s), x.shape, x.dtype)
            unfilled[s] = [i]
        if shaped:
            np.copyto(buf[i].reshape(g.shape, copy=False), g)
        else:
            buf[i] = g
        G[s] = buf
        firsts[s] = i
        return True
    rows = unfilled.get(s)
    if rows is not None:
        rows.append(i)
    first = firsts.pop(s, None)
    if first is not None:
        np.add(buf[first], 0.0, out=buf[first])
    row = buf[i]
    np.add(g, 0.0, out=row.reshape(g.shape, copy=False) if shaped else row)
    return True


def _zero_unwritten(buf, rows):
    """Zeroes the rows of ``buf`` (along its first dim) not in ``rows`` (the indices
    :func:`_scatter` wrote, all of one sign) and returns it."""
    n = buf.shape[0]
    if len(rows) < n:
        written = {r % n for r in rows}
        for r in range(n):
            if r not in written:
                buf[r] = 0
    return buf


# one-input elementwise ops whose backward reads their output only (they run in place
# through their class's ``forward_out``)
_INPLACE = {unary.Relu, unary.tanh.primitive}
# producers whose backward reads neither their output nor keeps it in their state, and
# whose output is a fresh array (not a view): a consumer may overwrite it
_FRESH = {nn_fused._Linear, nn_fused._LinearMm, nn_fused._LinearView,
          nn_fused._LinearUnsafeView, elementwise.Add, elementwise.Sub, conv.Conv,
          elementwise.AddScaled}


def _tanh_over(x):
    """tanh's ``forward_out`` written over ``x`` (``_tanh_out``), without its frames."""
    return np.tanh(x, out=x)


def _add_over(a, b):
    """Add's ``forward_out`` over ``a`` for two arrays of one shape and dtype (what
    ``_binary_out`` calls then), without its frames."""
    return np.add(a, b, out=a)


def _in_place(op):
    """``x -> op(x)`` written over ``x`` (ReLU's on a flat float array: one compiled
    loop where numba is present, :func:`ember._compile._fused.act_over`)."""
    if type(op) is unary.tanh.primitive:
        return _tanh_over
    forward_out = op.forward_out
    loop = _fused.act_over(unary.Relu) if type(op) is unary.Relu else None

    def run(x):
        return forward_out(x, out=lambda key, shape, dtype: x)
    if loop is None:
        return run

    def relu_over(x):
        return x if loop(x) else run(x)
    return relu_over


def _fuse(plan):
    """Elementwise chains computed in place: a ReLU or tanh whose input is the fresh
    output of a linear layer, a convolution or an addition that nothing else reads
    (not another step, not the result) writes over that array instead of making a new
    one (eager ember allocates one per op). Same values; one full-size array and one
    memory pass fewer per fused pair."""
    readers = _buffers.slot_readers(plan)
    producer = {}
    for st in plan.steps:
        for s in st.outs:
            producer[s] = st
    for st in plan.steps:
        if not st.prim or st.node.target not in _INPLACE or len(st.refs) != 1 or \
                st.refs[0][0] != 0 or len(st.args) != 1:
            continue
        s = st.refs[0][1]
        src = producer.get(s)
        if src is None or not src.prim or src.node.target not in _FRESH or src.multi or \
                readers.get(s) != 1:
            continue
        v = st.node.inputs[0]
        if v.dtype is None or not v.dtype.is_floating_point or \
                st.node.outputs[0].dtype != v.dtype or \
                tuple(st.node.outputs[0].shape or ()) != tuple(v.shape or ()):
            continue
        st.inplace = _in_place(st.op)
        if st.node.target is unary.Relu and _mkl.is_linear(src.node.target):
            # the bias and the ReLU in one loop where the product is written into a
            # buffer (``_mkl.linear_into``); ReLU alone: tanh's loop would call the C
            # library's tanh, not NumPy's (other last bits)
            src.act = st
    # ``a + b`` over ``a`` when ``a`` is such a fresh array read by the sum alone, of the
    # sum's shape and dtype (an RNN cell's two linear layers): the sum's backward reads
    # neither operand's values, the producer's backward not its output
    for st in plan.steps:
        if st.node.target is not elementwise.Add or st.kwargs or len(st.args) != 2 or \
                [i for i, _ in st.refs] != [0, 1]:
            continue
        s0, s1 = st.refs[0][1], st.refs[1][1]
        src = producer.get(s0)
        if s0 == s1 or src is None or not src.prim or src.node.target not in _FRESH or \
                src.multi or readers.get(s0) != 1:
            continue
        va, vb, vo = st.node.args[0].value, st.node.args[1].value, st.node.outputs[0]
        if va.dtype is None or not va.dtype.is_floating_point or \
                not (va.dtype == vb.dtype == vo.dtype) or va.shape is None or \
                tuple(va.shape) != tuple(vb.shape or ()) or \
                tuple(va.shape) != tuple(vo.shape or ()):
            continue
        # (the forward calls it for two arrays of the sum's shape and dtype only); ``b``
        # released after the sum where the sum alone reads it and its producer's
        # backward reads neither its output nor state (``_FRESH``)
        src1 = producer.get(s1)
        drop = src1 is not None and src1.prim and src1.node.target in _FRESH and \
            not src1.multi and readers.get(s1) == 1
        st.add_into = (s0, s1, _add_over, drop)
