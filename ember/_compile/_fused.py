"""Elementwise chains as one kernel in a compiled plan.

A chain of elementwise operations (``g * (y > 0)``, ``(1 - y * y) * g``, a forward
``(a - b) * (a - b)``...) costs NumPy a full pass over memory per operation and a
temporary array between each. With numba (the ``ember[compile]`` extra, as
:mod:`ember._compile._optim`) the chain is one compiled loop doing, element by
element, the same float operations in the same order as NumPy's calls (no fused
multiply-add, no reassociation: numba compiles without fast-math), so the values are
NumPy's to the bit. Without numba, or for arrays a loop over flat memory does not
cover (non-contiguous, broadcast, mixed dtypes), each function here runs the NumPy
calls of eager ember with ``out=`` into the given buffer: the same values either way.

Transcendental functions (``exp``, ``tanh``...) are not fused: numba calls the C
library's, which can differ in the last bit from NumPy's SIMD loops, and the compiled
loss curves must stay eager ember's.

No op's math is written here: each op class a loop may hold declares one element of
its forward (``fused = "{0} + {1}"``: ``{0}``, ``{1}`` its operands, ``z`` the dtype's
zero, ``one`` its one) and, for a gradient read from the output, one element of that
(``fused_vjp = "(one - {y} * {y}) * {g}"``); this module only strings them into loops.
"""
import string

import numpy as np

from ember.backend import threads as _threads_mod
from ember.backend.threads import _state as _threads
from ember.backend.threads import parallel_rows

from ._jit import njit_source

__all__ = ["act_over", "bias_act_loop", "grad_loop", "available", "groups"]

_kernels = {}


def _numba():
    """The compiled loops, built on first use (an empty dict without numba)."""
    if "ready" in _kernels:
        return _kernels
    _kernels["ready"] = True
    try:
        import numba
    except ImportError:
        return _kernels

    _kernels.update(numba=numba)
    return _kernels


def available():
    """True when numba is importable (the fused loops run)."""
    return "numba" in _numba()


def _flat_ok(*arrays):
    """Whether the arrays are C-contiguous NumPy arrays of one shape and one float32 or
    float64 dtype (a loop over flat memory covers them). Called once per fused loop and
    call: written for small arrays too, where each attribute read shows."""
    a0 = arrays[0]
    if type(a0) is not np.ndarray:
        return False
    shape, dt = a0.shape, a0.dtype
    if dt.char not in "fd" or not dt.isnative:
        return False
    for a in arrays:
        if type(a) is not np.ndarray or a.shape != shape or \
                (a.dtype is not dt and a.dtype != dt) or not a.flags.c_contiguous:
            return False
    return True


def _run(kernel, arrays, extra=(), cost=2):
    """``kernel`` over the arrays seen flat, split over the intra-op threads when large
    (each block a slice of every array)."""
    flat = [a.reshape(-1) for a in arrays]
    n = flat[0].size
    # (below twice the least work per thread ``parallel_rows`` runs one block anyway)
    if _threads["threads"] < 2 or cost * n < 2 * _threads_mod._MIN_COST_PER_THREAD:
        # one block: the loop called directly (a small cell's arrays, one thread)
        kernel(*flat, *extra)
        return
    parallel_rows(lambda lo, hi: kernel(*[f[lo:hi] for f in flat], *extra), n, cost * n)


_grad_loops = {}  # op class -> its gradient loop (or None)


def grad_loop(cls):
    """``loop(g, y, out) -> bool`` writing ``cls``'s gradient from its output (its
    ``fused_vjp``) into ``out`` as one compiled loop, False (nothing written) where the
    arrays are not flat arrays of one shape and float dtype; None without numba or
    without ``fused_vjp``."""
    if not available():
        return None
    if cls in _grad_loops:
        return _grad_loops[cls]
    expr = getattr(cls, "fused_vjp", None)
    if expr is None:
        _grad_loops[cls] = None
        return None
    # a loop over whole (sliced) arrays from 0: indices known non-negative, so LLVM
    # drops the wraparound checks and vectorizes the loop
    src = ("def grad(g, y, out):\n"
           "    z = g.dtype.type(0)\n"
           "    one = g.dtype.type(1)\n"
           "    for i in range(out.size):\n"
           f"        out[i] = {expr.format(g='g[i]', y='y[i]')}\n")
    kernel = njit_source(src, "grad", "grad", f"<ember fused {cls.__name__} gradient>",
                         nogil=True)

    def loop(g, y, out):
        if not _flat_ok(g, y, out):
            return False
        _run(kernel, (g, y, out))
        return True
    _grad_loops[cls] = loop
    return loop


_bias_act_loops = {}  # op class -> its loop (or None)


def bias_act_loop(cls):
    """``loop(y, b) -> bool`` writing ``cls``'s forward of ``y + b`` over ``y`` (a bias
    row ``b`` broadcast down the rows of the matrix ``y``: a linear layer's product
    followed by its activation) as one compiled loop; False (nothing written) where
    ``y`` is not a C-ordered float matrix with ``b`` a contiguous vector of its columns
    and dtype; None without numba. One pass where NumPy makes two (the bias added, then
    the activation over the sum), each element the same sum and the same ``fused``
    expression, so the same bits -- for an op whose ``fused`` expression holds no
    transcendental function (see the module docstring)."""
    if not available():
        return None
    if cls in _bias_act_loops:
        return _bias_act_loops[cls]
    src = ("def bias_act(y, b):\n"
           "    z = y.dtype.type(0)\n"
           "    one = y.dtype.type(1)\n"
           "    for i in range(y.shape[0]):\n"
           "        for j in range(y.shape[1]):\n"
           "            v = y[i, j] + b[j]\n"
           f"            y[i, j] = {cls.fused.format('v')}\n")
    kernel = njit_source(src, "bias_act", "bias_act", f"<ember fused bias + {cls.__name__}>",
                         nogil=True)

    def loop(y, b):
        if type(y) is not np.ndarray or type(b) is not np.ndarray or y.ndim != 2 or \
                b.ndim != 1 or b.shape[0] != y.shape[1] or y.dtype.char not in "fd" or \
                not y.dtype.isnative or b.dtype != y.dtype or \
                not (y.flags.c_contiguous and b.flags.c_contiguous):
            return False
        m, n = y.shape
        if _threads["threads"] < 2 or 2 * m * n < 2 * _threads_mod._MIN_COST_PER_THREAD:
            kernel(y, b)
        else:  # (rows in blocks: each element's sum is its own, whatever the split)
            parallel_rows(lambda lo, hi: kernel(y[lo:hi], b), m, 2 * m * n)
        return True
    _bias_act_loops[cls] = loop
    return loop


_act_overs = {}  # op class -> its in-place loop (or None)


def act_over(cls):
    """``loop(y) -> bool`` writing ``cls``'s forward of ``y`` over ``y`` (its ``fused``
    expression, element by element, on flat memory) as one compiled loop; False
    (nothing written) where ``y`` is not a C-ordered native float32/float64 array;
    None without numba or ``fused``. For an op whose ``fused`` expression holds no
    transcendental function (see the module docstring): the same bits as its NumPy
    forward. ReLU's is ``z if x < z else x``, NumPy's ``maximum(0, x)`` element by
    element (a NaN or a zero of either sign is ``x``, a negative ``+0.0``) without
    its NaN-aware compare: ~8x faster over a 1024x256 float32 array just written by
    a product (15 against 128 us)."""
    if not available():
        return None
    if cls in _act_overs:
        return _act_overs[cls]
    expr = getattr(cls, "fused", None)
    if expr is None or _arity(expr) != 1:
        _act_overs[cls] = None
        return None
    src = ("def act(y):\n"
           "    z = y.dtype.type(0)\n"
           "    one = y.dtype.type(1)\n"
           "    for i in range(y.size):\n"
           "        v = y[i]\n"
           f"        y[i] = {expr.format('v')}\n")
    kernel = njit_source(src, "act", "act", f"<ember fused {cls.__name__} in place>",
                         nogil=True)

    def loop(y):
        if type(y) is not np.ndarray or not y.flags.c_contiguous or \
                not y.flags.writeable or y.dtype.char not in "fd" or not y.dtype.isnative:
            return False
        n = y.size
        flat = y.reshape(-1)
        if _threads["threads"] < 2 or n < 2 * _threads_mod._MIN_COST_PER_THREAD:
            kernel(flat)
        else:  # (each element its own: any split gives the same values)
            parallel_rows(lambda lo, hi: kernel(flat[lo:hi]), n, n)
        return True
    _act_overs[cls] = loop
    return loop


# ----- forward chains -------------------------------------------------------------------------
def _arity(expr):
    """The number of operands of a ``fused`` expression (``{0}``, ``{1}``...)."""
    return 1 + max(int(f) for _, f, _, _ in string.Formatter().parse(expr)
                   if f is not None and f.isdigit())


_chains = {}  # loop source -> its compiled function (shared by the plans)


class Group:
    """Consecutive elementwise steps of one shape and floating dtype, run as one loop at
    the position of the last (see :func:`groups`). ``inputs``: the slots it reads from
    outside; ``keep``: the member outputs written to memory (read after the group, by
    another step, the result or the backward); the others stay in registers."""

    __slots__ = ("steps", "inputs", "keep", "kernel", "consts", "last")

    def __init__(self, steps, keep):
        self.steps = steps
        self.last = steps[-1]
        produced = {st.outs[0] for st in steps}
        inputs = []
        for st in steps:
            for _, s in st.refs:
                if s not in produced and s not in inputs:
                    inputs.append(s)
        self.inputs = inputs
        self.keep = [st.outs[0] for st in steps if st.outs[0] in keep]
        self.kernel = None
        self.consts = None

    def source(self):
        """The loop's Python source (compiled by numba) and its constants, in order."""
        names = {s: f"a{i}[i]" for i, s in enumerate(self.inputs)}
        consts = []
        body = []
        for k, st in enumerate(self.steps):
            ops = []
            for j, a in enumerate(st.args):
                ref = dict(st.refs).get(j)
                if ref is not None:
                    ops.append(names[ref])
                else:
                    consts.append(a)
                    ops.append(f"c{len(consts) - 1}")
            body.append(f"        t{k} = " + st.node.target.fused.format(*ops, z="z",
                                                                        one="one"))
            names[st.outs[0]] = f"t{k}"
            if st.outs[0] in self.keep:
                body.append(f"        o{self.keep.index(st.outs[0])}[i] = t{k}")
        params = [f"a{i}" for i in range(len(self.inputs))] + \
            [f"o{i}" for i in range(len(self.keep))] + \
            [f"c{i}" for i in range(len(consts))] + ["z", "one"]
        src = (f"def chain({', '.join(params)}):\n"
               "    for i in range(a0.size):\n" + "\n".join(body) + "\n")
        return src, consts

    def compile(self):
        numba = _numba().get("numba")
        if numba is None:
            return False
        src, consts = self.source()
        kernel = _chains.get(src)
        if kernel is None:
            # error_model="numpy": a float division by zero is inf or NaN, as NumPy's
            kernel = _chains[src] = njit_source(src, "chain", "chain", "<ember fused chain>",
                                                nogil=True, error_model="numpy")
        self.kernel = kernel
        self.consts = consts
        return True

    def run(self, env, arena, colors):
        """Compute the group's kept outputs into their buffers (``env`` updated)."""
        ins = [env[s] for s in self.inputs]
        a0 = ins[0]
        dt = a0.dtype
        outs = [np.empty(a0.shape, dt) if colors[s] is None else
                arena.get(colors[s], a0.shape, dt) for s in self.keep]
        if self.kernel is not None and _flat_ok(*ins, *outs):
            _run(self.kernel, ins + outs,
                 [dt.type(c) for c in self.consts] + [dt.type(0), dt.type(1)],
                 2 * len(self.steps))
            for s, o in zip(self.keep, outs):
                env[s] = o
            return
        # NumPy, op by op (each op's ``forward_out``, else ``forward``): kept outputs
        # into their buffers, the others fresh
        keep = dict(zip(self.keep, outs))
        for st in self.steps:
            args = list(st.args)
            for j, s in st.refs:
                args[j] = env[s]
            o = keep.get(st.outs[0])
            into = getattr(st.op, "forward_out", None)
            if o is not None and into is not None:
                env[st.outs[0]] = into(*args, out=lambda key, shape, dtype, o=o: o)
            elif o is not None:
                np.copyto(o, st.op.forward(*args))
                env[st.outs[0]] = o
            else:
                env[st.outs[0]] = st.op.forward(*args)


def _member(st):
    """(shape, dtype) of an elementwise step a chain may hold, or None."""
    from ember._graph.ir import Ref
    if not st.prim or st.multi or st.nested or st.node.kwargs:
        return None
    expr = getattr(st.node.target, "fused", None)
    if expr is None or len(st.args) != _arity(expr) or not st.refs:
        return None
    out = st.node.outputs[0]
    if out.dtype is None or not out.dtype.is_floating_point or \
            getattr(out.dtype, "is_complex", False) or out.shape is None:
        return None
    shape = tuple(out.shape)
    for a in st.args:
        if type(a) is Ref:
            v = a.value
            if v.type != "Tensor" or v.dtype != out.dtype or v.shape is None or \
                    tuple(v.shape) != shape:
                return None
        elif type(a) not in (int, float):  # bool, complex: another promotion
            return None
    return shape, out.dtype


def groups(plan, record):
    """The plan's elementwise chains of two steps or more (:class:`Group`), each kept
    output chosen for ``record`` (the backward reads the tape in this call)."""
    found, cur, key = [], [], None
    for st in plan.steps:
        k = _member(st)
        if k is not None and k == key:
            cur.append(st)
            continue
        if len(cur) > 1:
            found.append(cur)
        cur, key = ([st], k) if k is not None else ([], None)
    if len(cur) > 1:
        found.append(cur)
    if not found or not available():  # numba is imported only when there is a chain
        return []
    out = []
    for steps in found:
        members = {id(st) for st in steps}
        keep = set(plan.out_slots)
        for st in plan.steps:
            if id(st) not in members:
                keep.update(st.in_slots)
            elif record and st.grad:
                keep.update(st.in_slots)
                keep.update(st.outs)
        g = Group(steps, keep)
        if not g.keep or not g.compile():
            continue
        out.append(g)
    return out
