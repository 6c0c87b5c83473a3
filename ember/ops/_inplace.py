"""In-place ops: computed out of place, then written into the tensor's memory.

The graph then continues from the new node, the version counter is bumped (so a
backward that needs the old values fails loudly), and, when the tensor is a view,
its base is rebased too (PyTorch's CopySlices), so gradients reach everything the
write touched.
"""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_with
from ember.autograd import _modes
from ember.autograd.grad_mode import state as _grad_state
from ember.backend.dtypes import through_float32

_ndarray = np.ndarray


def check_inplace(t):
    if _grad_state.grad_enabled and t._requires_grad and t.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")


def source_for(t, copies_self, args=()):
    """The operand an in-place op computes from.

    When the op's backward reads its input and a graph is being recorded, it gets a
    private copy of the old values with the same place in the graph.
    """
    if not copies_self or not _grad_state.grad_enabled:
        return t
    if not t._requires_grad and not any(isinstance(a, Tensor) and a._requires_grad
                                        for a in args):
        return t
    return _private_copy(t)


def _private_copy(t):
    """A copy of ``t``'s values at ``t``'s place in the graph, with its tangents."""
    d = t._data
    if type(d) is not _ndarray and hasattr(d, "level") and hasattr(d, "value"):
        # a batched tensor (vmap): the graph is the underlying one, so copy underneath
        from ember.func._batched import wrap
        src = wrap(_private_copy(d.value), d.level)
    else:
        src = _make(d.copy(), t._requires_grad)
        src.grad_fn = t.grad_fn
        src._output_nr = t._output_nr
    if _modes.active[0]:
        _copy_tangents(t, src)
    if _mode_active[0] and (m := _mode_with("alias")) is not None:
        m.alias(src, t)  # a graph capture: the copy is the same value as ``t``
    return src


def _copy_tangents(t, src):
    """The copy keeps ``t``'s tangent at every forward-AD level the call can see."""
    from ember.autograd import forward_ad
    for lvl in forward_ad.visible_levels():
        tan = forward_ad.get_tangent(t, lvl)
        if tan is not None:
            forward_ad._set(src, tan.clone(), lvl)


def _check_cast(result_np, self_np):
    """PyTorch's rule for writing an op's result into ``self``: no complex into a real
    dtype, no floating point into an integer or bool, nothing but bool into bool."""
    from ember.backend.dtypes import FROM_NP, can_cast
    r, s = FROM_NP.get(result_np), FROM_NP.get(self_np)
    if r is not None and s is not None and not can_cast(r, s):
        from ember.ops._util import type_name
        raise RuntimeError(f"result type {type_name(result_np)} can't be cast to the desired "
                           f"output type {type_name(self_np)}")


def _check_promotion(t, operands):
    from ember.backend.dtypes import result_type_of
    numbers = [a for a in operands if isinstance(a, (Tensor, bool, int, float, complex))]
    if numbers:
        _check_cast(result_type_of(t, *numbers).np, t._data.dtype)


@_modes.routed  # vmap's rule refuses a batch written into a tensor without it
def check_writes(targets, sources, message=None):
    """Nothing outside a transform: under ``vmap``, a tensor of ``sources`` batched at a
    level where a tensor of ``targets`` (to be written in place) is not raises PyTorch's
    refusal
    (``message``, or in-place arithmetic's), where a per-sample loop would write every
    sample into the same memory in turn (ember.func._function_rules)."""


_OVERLAP_MESSAGE = ("unsupported operation: more than one element of the written-to tensor "
                    "refers to a single memory location. Please clone() the tensor before "
                    "performing the operation.")


def overlaps_itself(d):
    """True when the array ``d`` has a dimension of size > 1 at stride 0: several of its
    elements are one memory location (torch's ``has_internal_overlap`` answering YES; a
    layout it cannot decide, such as ``as_strided((2, 2), (1, 1))``, is let through as
    torch lets it through). The first test is the only cost to an ordinary tensor."""
    return hasattr(d, "strides") and 0 in d.strides and d.size > 1 and \
        any(st == 0 and n > 1 for st, n in zip(d.strides, d.shape))


def refuse_overlap(t):
    """torch's ``assert_no_internal_overlap``: raise its error where several elements of
    ``t`` (about to be written) share one memory location."""
    if overlaps_itself(t._data):
        raise RuntimeError(_OVERLAP_MESSAGE)


def commit(t, result, scattered=None):
    """Write ``result`` into ``t``'s memory and move ``t`` to ``result``'s graph node.

    Where several elements of ``t`` share one memory location, writing the whole result
    would leave whichever element came last, so the write is refused with torch's error
    (its ``assert_no_internal_overlap``), before anything is written. The few ops torch
    lets write there (fill_, masked_fill_, index_fill_, index_put_) pass ``scattered``:
    a function ``scattered(array, result)`` writing only the op's own positions of
    ``result`` into the array, used in that case."""
    td = t._data
    if type(td) is _ndarray and 0 in td.strides and overlaps_itself(td):
        # (an ordinary tensor pays the stride test alone)
        return _commit_overlapping(t, result, scattered)
    if _mode_active[0] and (m := _mode_with("commit")) is not None and not m.depth:
        return m.commit(commit, t, result)  # a graph capture notes the write
    if not isinstance(result, Tensor):
        raise TypeError("in-place op produced no tensor")
    rd, td = result._data, t._data
    if rd.dtype != td.dtype:
        _check_cast(rd.dtype, td.dtype)
    if rd.shape != td.shape:
        if td.ndim < rd.ndim or td.shape != _broadcast_shape(td.shape, rd.shape):
            raise RuntimeError(f"output with shape {list(td.shape)} doesn't match the broadcast "
                               f"shape {list(rd.shape)}")
    recording = _grad_state.grad_enabled and result._requires_grad
    if _modes.active[0]:
        check_writes((t,), (result,))
        from ember.autograd import forward_ad
        for lvl in forward_ad.visible_levels():
            forward_ad.commit_inplace(t, result, lvl)
    if t._base is not None and recording:
        from ember.ops._views import rebase_view
        rebase_view(t, result)
        return t
    if rd is not td:
        try:
            td[...] = rd if rd.dtype == td.dtype else through_float32(rd, td.dtype)
        except ValueError:
            # NumPy refuses to write into broadcast (expanded) arrays and conj()'s results
            from ember.ops._util import write_error
            raise write_error(td) from None
    t._vc[0] += 1
    if recording:
        t.grad_fn = result.grad_fn
        t._output_nr = result._output_nr
        t._requires_grad = True
        from ember.ops._views import refresh_views
        refresh_views(t)  # views of t taken earlier now read its new node
    return t


def warn_shared_write(name, example, stacklevel=4):
    """torch's deprecation warning for ``name`` (masked_fill_, index_fill_, index_put_)
    writing into memory several elements share; ``example``: its indexing spelling."""
    import warnings
    warnings.warn(f"Use of {name} on expanded tensors is deprecated. Please clone() the "
                  "tensor before performing this operation. This also applies to advanced "
                  f"indexing e.g. {example}", UserWarning, stacklevel=stacklevel)


def write_everywhere(a, result):
    """``scattered`` of the fills that write every element with one value."""
    np.copyto(a, result._data)


def _commit_overlapping(t, result, scattered):
    if scattered is None or _grad_state.grad_enabled and (result._requires_grad or
                                                          t._requires_grad):
        # (torch refuses the fills too when autograd records them: the view's base
        # would take a scatter into memory its elements share)
        raise RuntimeError(_OVERLAP_MESSAGE)
    if _mode_active[0] or _modes.active[0]:
        raise NotImplementedError(
            "an in-place fill into a tensor whose elements share memory (a stride-0 "
            "dimension) under a transform or a graph capture: ember cannot record a write "
            "whose value depends on the order of the elements. clone() the tensor first")
    scattered(writable(t._data), result)
    t._vc[0] += 1
    return t


class _Interface:
    """An ``__array_interface__`` holder: NumPy keeps it (and so ``base``) alive as the
    base of the array made from it."""
    def __init__(self, interface, base):
        self.__array_interface__ = interface
        self.base = base


def writable(d):
    """``d``, or where it is read-only (an expanded tensor: NumPy's broadcast views refuse
    writes) a writable array over the same memory, for the writes torch makes into
    shared memory. A ``conj()`` copy or an array over read-only memory stays refused."""
    if d.flags.writeable:
        return d
    from ember.ops._util import write_error
    root, a = d, d.base
    while a is not None:  # (a broadcast view's base is NumPy's interface holder)
        if isinstance(a, _ndarray):
            root = a
        a = getattr(a, "base", None)
    if not root.flags.writeable:
        raise write_error(root)
    alias = np.asarray(_Interface({"data": (d.__array_interface__["data"][0], False),
                                   "shape": d.shape, "strides": d.strides,
                                   "typestr": f"|V{d.dtype.itemsize}", "version": 3}, root))
    return alias.view(d.dtype)


def _broadcast_shape(a, b):
    import numpy as np
    return np.broadcast_shapes(a, b)


def inplace_method(fn, copies_self=False, promotes=False):
    """Make ``Tensor.op_`` from the out-of-place ``op``.

    ``promotes``: the op's result dtype is the promotion of ``self`` and its tensor and
    number operands; a result ``self`` cannot hold is refused before anything is
    computed, with PyTorch's message, as PyTorch checks it."""
    from ember.ops._overlap import APART_INPLACE, refuse_partial_overlap
    apart = fn.__name__ in APART_INPLACE

    def method(self, *args, **kwargs):
        check_inplace(self)
        if _modes.active[0]:  # (before the op: one without a rule would loop first)
            check_writes((self,), (*args, *kwargs.values()))
        if promotes:
            _check_promotion(self, (*args, *kwargs.values()))
        if apart:
            refuse_partial_overlap(self, args if not kwargs else (*args, *kwargs.values()))
        return commit(self, fn(source_for(self, copies_self, args), *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    method.__doc__ = f"In-place version of :func:`{fn.__name__}`."
    method._forwards_to = fn  # its parameters, for ops._numpy_names
    return method
