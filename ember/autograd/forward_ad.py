"""torch.autograd.forward_ad: dual tensors whose tangents ride along the forward pass.

A tangent lives on its tensor (``_extra.fw_grad = (level, tangent)``). While a level is
open, ``Primitive.apply`` hands every op to :func:`_propagate`, which gathers the inputs'
tangents and, when one is present, asks the op for its output tangents with
``Primitive.jvp(*tangents)``: a rule written in ember Tensor ops beside the op's forward and
backward in ``ember/ops``. The rule runs with tangent propagation suspended (tangents carry
no tangents: one level, as in PyTorch) and in the current grad mode, so a tangent computed
from primals that require grad is itself differentiable (forward-over-reverse).

An op without a rule falls back to :func:`fallback_jvp`, the double-vjp trick on that one
op: the op is run again on fresh tracked inputs, ``g = Jᵀu`` is taken for a zero cotangent
``u`` that requires grad, and ``J t = d(g·t)/du``. Cost: a second forward of the op and two
backward passes through it (instead of one tangent formula), per op, only while a dual
level is open.

Tangents are independent of grad mode, as in PyTorch: a result computed under ``no_grad``
inside a level carries its tangent.
"""
import weakref
from collections import namedtuple

import numpy as np

from ember import _tensor
from ember.autograd import node as _node
from ember.autograd.grad_mode import state as _grad_state

Tensor = _tensor.Tensor

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])


class _Level:
    """An open forward-AD level: the tensors given a tangent in it (cleared on exit)."""

    __slots__ = ("index", "tensors")

    def __init__(self, index):
        self.index = index
        self.tensors = []


_current = [None]  # the open _Level, or None


def enter_dual_level():
    """Open a new forward-AD level and return its index."""
    if _current[0] is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _current[0] = _Level(0)
    _node.forward_ad_hook[0] = _propagate
    return 0


def exit_dual_level(*, level=None):
    """Close the current forward-AD level; its dual tensors lose their tangents."""
    lvl = _current[0]
    if lvl is None or (level is not None and level != lvl.index):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    _current[0] = None
    _node.forward_ad_hook[0] = None
    for ref in lvl.tensors:
        t = ref()
        if t is not None and t._extra is not None:
            t._extra.fw_grad = None


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


def _check_level(level):
    lvl = _current[0]
    if level is not None and (lvl is None or level != lvl.index):
        raise RuntimeError(f"forward_ad: level {level} is not the current level")
    return lvl


# ----- tangent storage -----------------------------------------------------------------

def _own(t, lvl):
    """``(True, tangent-or-None)`` when ``t`` has an entry at ``lvl``, else ``(False, None)``."""
    ex = t._extra
    if ex is None:
        return False, None
    fw = ex.fw_grad
    if fw is None or fw[0] is not lvl:
        return False, None
    return True, fw[1]


def _set(t, tangent, lvl):
    t._get_extra().fw_grad = (lvl, tangent)
    lvl.tensors.append(weakref.ref(t))


def get_tangent(t, lvl=None):
    """The tangent of ``t`` at the open level (None if it has none).

    A view whose base gained a tangent after the view was taken (an in-place op on the
    base) reads the matching window of the base's tangent, as PyTorch's views do."""
    lvl = lvl or _current[0]
    if lvl is None:
        return None
    has, tan = _own(t, lvl)
    if has:
        return tan
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

def _propagate(node, args, params, res):
    """Called by ``Primitive.apply`` for every op while a level is open."""
    lvl = _current[0]
    tangents = None
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            tan = get_tangent(a, lvl)
            if tan is not None:
                if tangents is None:
                    tangents = [None] * len(args)
                tangents[i] = tan
    if tangents is None:
        return
    outs = res if type(res) is tuple else (res,)
    diff = type(node).differentiable_outputs
    targets = [o if isinstance(o, Tensor) and o._data.dtype.kind in "fcV"
               and (diff is None or k in diff) and not any(o is a for a in args) else None
               for k, o in enumerate(outs)]
    if not any(t is not None for t in targets):
        return
    node.fw_inputs, node.fw_params, node.fw_output = args, params, res
    _node.forward_ad_hook[0] = None
    try:
        got = node.jvp(*tangents)
    finally:
        _node.forward_ad_hook[0] = _propagate
        del node.fw_inputs, node.fw_params, node.fw_output
    if type(res) is not tuple:
        got = (got,)
    elif type(got) is not tuple:
        got = tuple(got)
    for o, tan in zip(targets, got):
        if o is not None:
            _set(o, _fit(tan, o), lvl)
    if type(node).save_output and node._saved is not None:
        # backward rebuilds saved outputs from arrays: they get their tangent back there
        node._fw_out = _SavedTangents(lvl, [get_tangent(o, lvl) if o is not None else None
                                            for o in targets])


class _SavedTangents:
    """Gives a node's rebuilt saved output its tangent while the level is open."""

    __slots__ = ("lvl", "tangents")

    def __init__(self, lvl, tangents):
        self.lvl, self.tangents = lvl, tangents

    def __call__(self, t, nr):
        if self.lvl is _current[0] and nr < len(self.tangents) and \
                self.tangents[nr] is not None:
            _set(t, self.tangents[nr], self.lvl)


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


def commit_inplace(t, result):
    """After an in-place op wrote ``result`` into ``t``: ``t``'s tangent becomes
    ``result``'s, written into ``t``'s tangent memory so that views of ``t`` (and its
    base, when ``t`` is a view) see it."""
    lvl = _current[0]
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
    dual = _alias(tensor)
    if tangent._data.dtype != tensor._data.dtype:
        tangent = tangent.to(tensor.dtype)
    _set(dual, tangent, lvl)
    return dual


def _alias(t):
    """``t``'s data under a new tensor with no tangent of its own: a view when ``t`` is in
    a graph (so gradients still reach it), else a plain alias sharing data and version
    (which, unlike PyTorch's, is not a view: ops that read a view's base, as_strided,
    then see the dual itself)."""
    if not t._requires_grad:
        return t.detach()
    hook = _node.forward_ad_hook[0]
    _node.forward_ad_hook[0] = None
    try:
        return t.view_as(t)
    finally:
        _node.forward_ad_hook[0] = hook


def unpack_dual(tensor, *, level=None):
    """``UnpackedDualTensor(primal, tangent)``: ``primal`` is a view of ``tensor`` without
    tangent, ``tangent`` is ``tensor``'s tangent at the level (None when it has none)."""
    lvl = _check_level(level)
    if lvl is None or not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    tan = get_tangent(tensor, lvl)
    if tan is None:
        return UnpackedDualTensor(tensor, None)
    primal = _alias(tensor)
    _set(primal, None, lvl)  # explicitly none: not derived from its base's tangent
    return UnpackedDualTensor(primal, tan)
