"""torch.autograd.forward_ad: dual tensors whose tangents ride along the forward pass.

A tangent lives on its tensor (``_extra.fw_grad``: a dict from open level to tangent). Each
open level is a mode on the mode stack (``ember.autograd._modes``): :class:`_Level`. Its
``op`` runs the op below itself, then, when an input has a tangent at this level, asks the
op for its output tangents with ``Primitive.jvp(*tangents)``: a rule written in ember Tensor
ops beside the op's forward and backward in ``ember/ops``. The rule runs with this level
hidden (its tangents carry no tangents at this level) and every mode below it visible:
under an outer level the tangent's own tangent is computed (``jvp`` of ``jvp``), under a
vmap level a batched tangent runs batched (``jacfwd`` maps over basis tangents). It runs
in the current grad mode, so a tangent computed from primals that require grad is itself
differentiable (forward-over-reverse).

An op whose primal inputs are batched by a vmap level below this one is computed beneath
that level (``ember.func._batched.jvp_beneath``): the inputs become batched duals whose
underlying tensors carry the tangents, so the op's batching rule and its ``jvp`` both run
on whole batches.

An op without a rule falls back to :func:`fallback_jvp`, the double-vjp trick on that one
op: the op is run again on fresh tracked inputs, ``g = Jᵀu`` is taken for a zero cotangent
``u`` that requires grad, and ``J t = d(g·t)/du``. Cost: a second forward of the op and two
backward passes through it (instead of one tangent formula), per op, only while a dual
level is open.

Tangents are independent of grad mode, as in PyTorch: a result computed under ``no_grad``
inside a level carries its tangent. ``dual_level`` levels do not nest (PyTorch's rule);
``ember.func.jvp`` opens levels of its own, which do.
"""
import weakref
from collections import namedtuple

import numpy as np

from ember import _tensor
from ember.autograd import _modes
from ember.autograd.grad_mode import state as _grad_state

Tensor = _tensor.Tensor

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])


class _Level(_modes.Mode):
    """An open forward-AD level: a mode on the stack, and the tensors given a tangent in
    it (their tangents are dropped on exit)."""

    def __init__(self, index, user):
        self.index = index
        self.user = user
        self.tensors = []

    def op(self, cls, args, params):
        tangents = None
        batched = False
        for i, a in enumerate(args):
            if not isinstance(a, Tensor):
                continue
            ex = a._extra
            fw = ex.fw_grad if ex is not None else None
            if fw and self in fw:
                tan = fw[self]
            elif a._base is not None:
                tan = get_tangent(a, self)
            else:
                tan = None
            if tan is not None:
                if tangents is None:
                    tangents = [None] * len(args)
                tangents[i] = tan
            if type(a._data) is not np.ndarray and hasattr(a._data, "level"):
                batched = True  # a vmap level below batches this primal
        if tangents is None:
            return cls.apply(*args, **params)
        if batched:
            from ember.func._batched import jvp_beneath
            return jvp_beneath(self, cls, args, params, tangents)
        res, node = _run_keeping_node(cls, args, params)
        _propagate(self, node, args, params, res, tangents)
        return res

    def function(self, cls, args, kwargs, below):
        tangents = _input_tangents(args, self)
        result, ctx = below()
        if tangents is not None:
            _run_jvp(cls, ctx, tangents, result, self)
        return result, ctx


_open = []         # the open levels, outermost first
_current = [None]  # the innermost open level, or None


def _enter(user):
    lvl = _Level(len(_open), user)
    _open.append(lvl)
    _current[0] = lvl
    _modes.push(lvl)
    return lvl


def _exit(lvl):
    _modes.pop(lvl)
    _open.remove(lvl)
    _current[0] = _open[-1] if _open else None
    for ref in lvl.tensors:
        t = ref()
        if t is not None and t._extra is not None and t._extra.fw_grad:
            t._extra.fw_grad.pop(lvl, None)
            if not t._extra.fw_grad:
                t._extra.fw_grad = None


def enter_dual_level():
    """Open a new forward-AD level and return its index."""
    if any(lv.user for lv in _open):
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    return _enter(True).index


def exit_dual_level(*, level=None):
    """Close the current forward-AD level; its dual tensors lose their tangents."""
    lvl = _current[0]
    if lvl is None or not lvl.user or (level is not None and level != lvl.index):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    _exit(lvl)


class dual_level:
    """Context manager for a forward-AD level (``with fwAD.dual_level(): ...``).

    Example::

        with fwAD.dual_level():
            x = fwAD.make_dual(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.0]))
            y = x.sin()
            fwAD.unpack_dual(y).tangent  # cos(x) * [1, 0]
    """

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


class inner_level:
    """A level of ``ember.func``'s own (``jvp``, ``jacfwd``): these nest."""

    def __enter__(self):
        self.lvl = _enter(False)
        return self.lvl

    def __exit__(self, *exc):
        _exit(self.lvl)


def _check_level(level):
    lvl = _current[0]
    if level is not None and (lvl is None or level != lvl.index):
        raise RuntimeError(f"forward_ad: level {level} is not the current level")
    return lvl


def visible_levels():
    """The open levels the current call can see, innermost first."""
    if not _open:
        return ()
    return [m for m in reversed(_modes.visible()) if type(m) is _Level]


# ----- tangent storage -----------------------------------------------------------------

def _own(t, lvl):
    """``(True, tangent-or-None)`` when ``t`` has an entry at ``lvl``, else ``(False, None)``."""
    ex = t._extra
    if ex is None:
        return False, None
    fw = ex.fw_grad
    if not fw or lvl not in fw:
        return False, None
    return True, fw[lvl]


def _set(t, tangent, lvl):
    ex = t._get_extra()
    if ex.fw_grad is None:
        ex.fw_grad = {}
    ex.fw_grad[lvl] = tangent
    lvl.tensors.append(weakref.ref(t))


def get_tangent(t, lvl=None):
    """The tangent of ``t`` at level ``lvl`` (default: the innermost open one; None if it
    has none).

    A view whose base gained a tangent after the view was taken (an in-place op on the
    base) reads the matching window of the base's tangent, as PyTorch's views do."""
    lvl = lvl or _current[0]
    if lvl is None:
        return None
    ex = t._extra
    if ex is not None and ex.fw_grad and lvl in ex.fw_grad:
        return ex.fw_grad[lvl]
    base = t._base
    if base is None:
        return None
    has, bt = _own(base, lvl)
    if not has or bt is None:
        return None
    tan = _window(bt, base, t)
    _set(t, tan, lvl)
    return tan


def _window(bt, base, view):
    """The part of tangent ``bt`` (laid out as ``base``) that ``view`` sees of ``base``."""
    b, v, d = base._data, view._data, bt._data
    if v.size == 0:
        return _tensor._make(d.reshape(-1)[:0].reshape(v.shape))
    if d.strides != b.strides or d.dtype != v.dtype or type(d) is not np.ndarray or \
            not (b.flags.c_contiguous or b.flags.f_contiguous):
        raise NotImplementedError(
            "forward_ad: the tangent of a view cannot be derived from its base's tangent "
            "when the base is not contiguous or the two are laid out differently in memory "
            "(give make_dual a tangent with the primal's layout, e.g. .contiguous() both)")
    start = (v.__array_interface__["data"][0] - b.__array_interface__["data"][0]) // b.itemsize
    flat = d.ravel(order="K")  # a view: d is contiguous in C or F order
    arr = np.lib.stride_tricks.as_strided(flat[start:], v.shape, v.strides)
    t = _tensor._make(arr, bt._requires_grad)
    t._vc = bt._vc
    t._base = bt if bt._base is None else bt._base
    return t


# ----- propagation through ops ----------------------------------------------------------

def _run_keeping_node(cls, args, params):
    """Run the op below the calling level and return ``(result, node)``: the op's node
    (its forward state is what its ``jvp`` reads). A node is kept by recording the op in
    the graph: when it would not be recorded (no input requires grad, or grad mode is
    off) the inputs are marked as requiring grad for the call and the outputs are taken
    out of the graph again, so the caller sees what the plain call gives."""
    flipped = ()
    prev = _grad_state.grad_enabled
    recorded = False
    if prev:
        for a in args:
            if isinstance(a, Tensor) and a._requires_grad:
                recorded = True
                break
    if not recorded:
        flipped = [a for a in args if isinstance(a, Tensor) and not a._requires_grad
                   and a._data.dtype.kind in "fcV"]
        for a in flipped:
            a._requires_grad = True
        _grad_state.grad_enabled = True
    try:
        res = cls.apply(*args, **params)
    finally:
        _grad_state.grad_enabled = prev
        for a in flipped:
            a._requires_grad = False
    outs = res if type(res) is tuple else (res,)
    node = None
    for o in outs:
        if isinstance(o, Tensor) and isinstance(o.grad_fn, cls):
            for a in args:
                if o is a:
                    break
            else:
                node = o.grad_fn
                break
    if not recorded:
        for o in outs:
            if isinstance(o, Tensor) and o.grad_fn is node and node is not None:
                o.grad_fn = None
                o._requires_grad = False
                o._output_nr = 0
    return res, node


def _propagate(lvl, node, args, params, res, tangents):
    """Set the output tangents of an op run at ``lvl`` from the op's ``jvp``."""
    outs = res if type(res) is tuple else (res,)
    cls = type(node) if node is not None else None
    diff = cls.differentiable_outputs if cls is not None else None
    targets = [o if isinstance(o, Tensor) and o._data.dtype.kind in "fcV"
               and (diff is None or k in diff) and not any(o is a for a in args) else None
               for k, o in enumerate(outs)]
    if node is None or not any(t is not None for t in targets):
        return
    saved_fw = node.__dict__.get("fw_inputs", _MISSING), node.__dict__.get("fw_params"), \
        node.__dict__.get("fw_output")
    node.fw_inputs, node.fw_params, node.fw_output = args, params, res
    try:
        got = node.jvp(*tangents)
    finally:
        if saved_fw[0] is _MISSING:
            del node.fw_inputs, node.fw_params, node.fw_output
        else:
            node.fw_inputs, node.fw_params, node.fw_output = saved_fw
    if type(res) is not tuple:
        got = (got,)
    elif type(got) is not tuple:
        got = tuple(got)
    for o, tan in zip(targets, got):
        if o is not None:
            _set(o, _fit(tan, o), lvl)
    if (cls.save_output or getattr(cls, "saved_outputs", ())) and node._saved is not None \
            and node._saved is not _FREED:
        # backward rebuilds saved outputs from arrays: they get their tangent back there
        # (the one output, or a decomposition's ``saved_outputs``)
        node._fw_out = _SavedTangents(lvl, [get_tangent(o, lvl) if o is not None else None
                                            for o in targets], node.__dict__.get("_fw_out"))


_MISSING = object()
_FREED = "freed"


class _SavedTangents:
    """Gives a node's rebuilt saved output its tangent while the level is open."""

    __slots__ = ("lvl", "tangents", "prev")

    def __init__(self, lvl, tangents, prev=None):
        self.lvl, self.tangents, self.prev = lvl, tangents, prev

    def __call__(self, t, nr):
        if self.lvl in _open and nr < len(self.tangents) and self.tangents[nr] is not None:
            _set(t, self.tangents[nr], self.lvl)
        if self.prev is not None:
            self.prev(t, nr)


def _input_tangents(args, lvl):
    """Each input's tangent at ``lvl`` for a custom Function's ``jvp`` (zeros for a tensor
    without one, None for other arguments), or None when no input has a tangent."""
    from ember import zeros_like
    tans = [get_tangent(a, lvl) if isinstance(a, Tensor) else None for a in args]
    if all(t is None for t in tans):
        return None
    return [zeros_like(a).detach() if t is None and isinstance(a, Tensor) and
            a._data.dtype.kind in "fcV" else t for a, t in zip(args, tans)]


def _run_jvp(cls, ctx, tangents, result, lvl):
    """Forward mode through a custom Function: its ``jvp`` gives the output tangents (it
    runs with ``lvl`` hidden, as the Function's forward did)."""
    ctx._in_jvp = True
    try:
        out_t = cls.jvp(ctx, *tangents)
    finally:
        ctx._in_jvp = False
    outs = result if isinstance(result, tuple) else (result,)
    if not isinstance(out_t, tuple):
        out_t = (out_t,)
    if len(out_t) != len(outs):
        raise RuntimeError(f"{cls.__name__}.jvp returned {len(out_t)} tangents, expected one "
                           f"per output of forward ({len(outs)})")
    for o, t in zip(outs, out_t):
        if isinstance(o, Tensor) and o._data.dtype.kind in "fcV" and t is not None:
            if not isinstance(t, Tensor):
                raise TypeError(f"{cls.__name__}.jvp must return Tensors (or None), got "
                                f"{type(t).__name__}")
            _set(o, _fit(t, o), lvl)


def _fit(tan, o):
    """A rule's tangent as the output's tangent: zeros for None, broadcast to the output's
    shape (a copy, so in-place ops can write it) and cast to its dtype."""
    from ember import zeros_like
    if tan is None:
        return zeros_like(o).detach()
    if tan._data.shape != o._data.shape:
        tan = tan.expand(o.shape).clone()
    if tan._data.dtype != o._data.dtype:
        tan = tan.to(o.dtype)
    return tan


def fallback_jvp(node, tangents):
    """The double-vjp trick on one op (see the module docstring): ``J t`` from two
    backward passes through the op run again on tracked copies of its inputs."""
    from ember import zeros_like
    from ember.autograd import grad
    cls = type(node)
    args = list(node.fw_inputs)
    keep = _grad_state.grad_enabled and (
        any(isinstance(a, Tensor) and a._requires_grad for a in args)
        or any(t is not None and t._requires_grad for t in tangents))
    leaves, ts = [], []
    prev = _grad_state.grad_enabled
    _grad_state.grad_enabled = True
    try:
        for i, t in enumerate(tangents):
            if t is not None:
                a = args[i]
                x = a.view_as(a) if a._requires_grad and keep else \
                    a.detach().requires_grad_(True)
                args[i] = x
                leaves.append(x)
                ts.append(t)
        out = cls.apply(*args, **node.fw_params)
        outs = out if type(out) is tuple else (out,)
        diff = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o._requires_grad]
        if not diff:
            return None if type(out) is not tuple else (None,) * len(outs)
        us = [zeros_like(outs[k]).requires_grad_(True) for k in diff]
        gs = grad([outs[k] for k in diff], leaves, us, create_graph=True, allow_unused=True)
        pairs = []
        for g, t in zip(gs, ts):
            if g is None:
                continue
            if g._requires_grad:
                # g = Jᵀu is linear in u: one that does not depend on u is zero
                pairs.append((g, t))
        if not pairs:
            jvs = [None] * len(us)
        else:
            jvs = grad([g for g, _ in pairs], us, [t for _, t in pairs], create_graph=keep,
                       allow_unused=True)
    finally:
        _grad_state.grad_enabled = prev
    res = [None] * len(outs)
    for k, jv in zip(diff, jvs):
        res[k] = jv if jv is None or keep else jv.detach()
    return tuple(res) if type(out) is tuple else res[0]


def commit_inplace(t, result, lvl):
    """After an in-place op wrote ``result`` into ``t``: ``t``'s tangent at ``lvl`` becomes
    ``result``'s, written into ``t``'s tangent memory so that views of ``t`` (and its
    base, when ``t`` is a view) see it."""
    rt = get_tangent(result, lvl) if result is not t else None
    tt = get_tangent(t, lvl)
    if rt is None and tt is None:
        return
    if tt is None:
        base = t._base
        if base is None:
            _set(t, rt.detach() if rt is not None else rt, lvl)
            return
        if get_tangent(base, lvl) is None:
            _set(base, _make_like(base), lvl)
        tt = get_tangent(t, lvl)
    if rt is None:
        tt._data[...] = 0
    else:
        tt._data[...] = rt._data
    tt._vc[0] += 1


def _make_like(t):
    """Zeros laid out in memory as ``t`` is (so views map onto it)."""
    from ember.backend import array_module
    arr = array_module(t._data).zeros_like(t._data)
    return _tensor._make(arr)


# ----- the public API -------------------------------------------------------------------

def make_dual(tensor, tangent, *, level=None):
    """A view of ``tensor`` whose forward gradient (tangent) is ``tangent``.

    The result is an alias of ``tensor`` (same data, same graph); ``tangent`` must have its
    shape. Ops on the dual propagate the tangent until the level closes."""
    lvl = _check_level(level)
    if lvl is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level "
                           "exists, make sure to enter_dual_level() first.")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual(): expected Tensor arguments")
    if not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not (tangent.is_floating_point() or tangent.is_complex()):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than "
                           "that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")
    dual = _alias(tensor, lvl)
    if tangent._data.dtype != tensor._data.dtype:
        tangent = tangent.to(tensor.dtype)
    _set(dual, tangent, lvl)
    return dual


def _alias(t, lvl):
    """``t``'s data under a new tensor with no tangent of its own at ``lvl`` (it keeps its
    tangents at other levels): a view when ``t`` is in a graph (so gradients still reach
    it), else a plain alias sharing data and version (which, unlike PyTorch's, is not a
    view: ops that read a view's base, as_strided, then see the dual itself)."""
    if not t._requires_grad:
        d = t.detach()
        ex = t._extra
        if ex is not None and ex.fw_grad:
            for other, tan in ex.fw_grad.items():
                if other is not lvl:
                    _set(d, tan, other)
        return d
    with _modes.hidden(lvl):  # the levels below give the view their tangents
        return t.view_as(t)


def unpack_dual(tensor, *, level=None):
    """``UnpackedDualTensor(primal, tangent)``: ``primal`` is a view of ``tensor`` without
    tangent, ``tangent`` is ``tensor``'s tangent at the level (None when it has none)."""
    lvl = _check_level(level)
    if lvl is None or not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    tan = get_tangent(tensor, lvl)
    if tan is None:
        return UnpackedDualTensor(tensor, None)
    primal = _alias(tensor, lvl)
    _set(primal, None, lvl)  # explicitly none: not derived from its base's tangent
    return UnpackedDualTensor(primal, tan)
