"""One node for an op that PyTorch runs as one kernel and ember writes as a composite.

``F.gelu`` in ember is a few elementwise primitives; PyTorch records one
``GeluBackward0`` whose only input is ``x``. A :class:`CompositeNode` subclass is that
one node: its forward runs the composite on arrays with no graph, and its backward
differentiates the same composite again on the saved inputs (``autograd.grad``, with a
graph when the engine is asked for one, so double backward is exact). A subclass may
give a direct formula instead (``backward``), where the op is on a hot path.

The node is made only where someone can see it: in eager mode, when the call records a
graph (:func:`records_graph`). Under ``no_grad``, with inputs that need no gradient, and
under a transforming mode (a graph capture, vmap, forward AD) the composite runs as
before, so exporters, batching rules and tangents are the composite's primitives' own:
:func:`call` picks the route.

A subclass declares:

- ``composite``: ``f(*tensors, **params)`` returning one Tensor (a staticmethod);
- ``save_inputs``: the positions of every Tensor input (all of them are read back);
- ``n_inputs`` / ``_edge_inputs``: PyTorch's edge list where it is not every Tensor
  input (a mask or noise that PyTorch takes as a plain argument).

A composite function whose first parameters are its Tensors declares its node with the
:func:`one_node` decorator instead (``dist`` is ``DistBackward0`` over ``(input, other)``,
``linalg.matrix_exp`` one ``LinalgMatrixExpBackward0``).
"""
import functools
import inspect

import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder, _mode_stack
from ember.autograd.grad_mode import enable_grad, no_grad
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive

__all__ = ["CompositeNode", "call", "one_node", "named_nodes", "nodes", "partial_inputs",
           "compile_recorder"]

# the modules whose import defines CompositeNode subclasses (see ``nodes``)
_DEFINED_IN = ("ember.ops.activation_nodes", "ember.ops.embedding", "ember.ops.dropout",
               "ember.ops.conv", "ember.ops.normalization_nodes", "ember.ops.resample",
               "ember.ops.resample_aa", "ember.ops.padding", "ember.ops.grid_sample",
               "ember.ops.linalg_decomp", "ember.ops.linalg_solve", "ember.ops.norms",
               "ember.ops.reorder", "ember.ops.elementwise", "ember.ops.linalg",
               "ember._runtime_api", "ember.linalg", "ember.ops.vector_norms", "ember.ops.scan",
               "ember.ops.special", "ember.ops.elementwise_composites")


def _is_array(a):
    return isinstance(a, np.ndarray) or (hasattr(a, "__cuda_array_interface__")
                                         and hasattr(a, "dtype"))


def _root(a):
    """The array owning ``a``'s memory (``a`` itself when it is no view)."""
    while getattr(a, "base", None) is not None and _is_array(a.base):
        a = a.base
    return a


class CompositeNode(Primitive):
    """Base of the one-node ops over ember composites (see the module docstring)."""
    _base_class = True
    composite = None
    # the positions of inputs in which the op is linear, and whose PyTorch node's double
    # backward still lists them (zeros, not None, as their second derivative)
    flat_in = ()

    def forward(self, *args, **params):
        self._plain = [None if _is_array(a) else a for a in args]
        self.params = params
        with no_grad():
            out = type(self).composite(*[_make(a) if _is_array(a) else a for a in args],
                                       **params)
        out = out._data
        # the node's output is a new tensor: never an input's memory seen again
        roots = {id(_root(a)) for a in args if _is_array(a)}
        return out.copy() if id(_root(out)) in roots else out

    def _inputs(self):
        """The forward's positional arguments again, the Tensors read back from the
        saved ones (version-checked)."""
        args = list(self._plain)
        for i, t in zip(type(self).save_inputs, self.saved_tensors):
            args[i] = t
        return args

    def backward(self, gy):
        if _mode_active[0] and (m := _mode_recorder()) is not None:
            return _backward_in_capture(self, m, gy)
        return self.recompute_grads(gy)

    def recompute_grads(self, gy):
        """Each input's gradient as the vjp of the composite recomputed on the saved
        inputs: on detached copies for a first-order pass, on the inputs themselves
        (so that the result is differentiable again) when the engine records a graph."""
        from ember.autograd import grad as _grad
        args = self._inputs()
        need = [i for i in type(self).save_inputs
                if i < len(self._edges) and self._edges[i] is not None]
        create = _grad_state.grad_enabled
        with enable_grad():
            if not create:
                for i in type(self).save_inputs:
                    if isinstance(args[i], Tensor):
                        args[i] = args[i].detach().requires_grad_(i in need)
            else:
                for i, t in zip(need, partial_inputs([args[i] for i in need])):
                    args[i] = t
            out = type(self).composite(*args, **self.params)
            if not need or not out.requires_grad:
                return (None,) * len(args)
            grads = _grad(out, [args[i] for i in need], gy, create_graph=create,
                          allow_unused=True)
        result = [None] * len(args)
        for i, g in zip(need, grads):
            if create and i in type(self).flat_in and g is not None:
                g = _flat_in(g, args[i])
            result[i] = g
        return tuple(result)


_recomputing = set()


def _backward_in_capture(node, m, gy):
    """``node.recompute_grads(gy)`` while a capture records composites. A composite that
    records itself as one capture node (``pdist``, ``matrix_exp``, ``segment_reduce``)
    would make this node again and differentiate it, without end. Where the capture
    records nothing (a compiled training step's backward runs beneath it) it is hidden;
    where it records (a ``jit.trace`` of a function that takes a gradient) the second
    entry is refused by name."""
    passes = getattr(m, "_passes", None)
    if passes is not None and passes():
        from ember.autograd._modes import hidden
        with hidden(m):
            return node.recompute_grads(gy)
    cls = type(node)
    if cls in _recomputing:
        raise NotImplementedError(
            f"jit.trace: the derivative of {cls._node_name[:-len('Backward0')]} taken inside "
            "the traced function cannot be recorded (the op is one call in the trace); "
            "take the gradient outside the traced function")
    _recomputing.add(cls)
    try:
        return node.recompute_grads(gy)
    finally:
        _recomputing.discard(cls)


def _flat_in(g, x):
    """``g``, marked as a function of ``x`` with a zero derivative (see ``flat_in``)."""
    from ember.ops.unary import _ZerosLikeOf
    return g + _ZerosLikeOf.apply(g, x) if x._requires_grad else g


def partial_inputs(tensors):
    """``tensors`` ready for an ``autograd.grad`` that must give partial derivatives.

    ``autograd.grad`` gives total derivatives: where one input was computed from another
    (``solve_triangular(A, solve_triangular(A, B))`` recomputed on ``A`` and the inner
    result; attention's saved gradient, a function of ``q``), the other's gradient would
    also count the path through it. Then each becomes an alias of itself (PyTorch's
    ``AliasBackward0``) that no other's history reaches; otherwise they are returned as
    they are (leaves, or a single tensor, cannot reach each other)."""
    if len(tensors) > 1 and any(t.grad_fn is not None for t in tensors):
        return [t[...] for t in tensors]
    return list(tensors)


def records_graph(*tensors):
    """Whether a call on ``tensors`` (None allowed) records a graph in eager mode: grad
    mode on, some input requiring grad, and no mode on the stack but observers (the
    profiler, which then times the ops PyTorch's graph runs)."""
    if not _grad_state.grad_enabled:
        return False
    for i in range(_mode_active[0]):
        if not getattr(_mode_stack[i], "observer", False):
            return False
    for x in tensors:
        if x is not None and x._requires_grad:
            return True
    return False


def transforming():
    """Whether a mode other than an observer (the profiler) is on the stack: vmap,
    forward AD or a graph capture, which must see the ops of an op's formulas (their
    rules), not one op made for eager mode."""
    for i in range(_mode_active[0]):
        if not getattr(_mode_stack[i], "observer", False):
            return True
    return False


def _inexact(dt):
    """Whether the NumPy dtype ``dt`` is floating or complex (bfloat16's kind is "V")."""
    return dt.kind in "fc" or dt.name == "bfloat16"


def runs_node(dtype, *tensors):
    """Whether an op with a one-node eager form and a composite of ember's ops runs the
    node on ``tensors`` (None allowed) of ``dtype``: where a graph is recorded (see
    :func:`records_graph`), and for float16/bfloat16 wherever no transform needs the
    composite's ops, since the node computes in float32 and rounds once, as PyTorch's
    kernel, where the composite rounds after every step."""
    return records_graph(*tensors) or \
        getattr(dtype, "name", None) in ("float16", "bfloat16") and not transforming()


def call(cls, *args, **params):
    """``cls``'s node where a graph is recorded in eager mode, else the composite."""
    if records_graph(*[a for a in args if isinstance(a, Tensor)]):
        return cls.apply(*args, **params)
    return cls.composite(*args, **params)


def one_node(name, n_tensors, *, when=None, names=()):
    """Decorator: the composite function ``fn``, whose first ``n_tensors`` parameters
    are its Tensor inputs (None allowed) and the rest plain values, runs as one
    node (a :class:`CompositeNode`) named ``name`` where the call records a graph in eager
    mode (no ``out=``; a floating or complex input requiring grad), and as itself
    elsewhere. ``when(*args, **kwargs)``, if given, must also hold (PyTorch records a
    composite for the other calls). ``name`` may be a function of the call's arguments
    giving the name (None: the composite), one of ``names``."""
    def decorate(fn):
        sig = inspect.signature(fn)
        names_ = list(sig.parameters)
        classes = {n: type(CompositeNode)(n.split("Backward")[0], (CompositeNode,), {
            "_node_name": n, "composite": staticmethod(fn),
            "save_inputs": tuple(range(n_tensors)), "__module__": fn.__module__,
            "__qualname__": f"{fn.__qualname__}.node_{n}", "__doc__": fn.__doc__})
            for n in ((name,) if isinstance(name, str) else names)}

        @functools.wraps(fn)
        def call(*args, **kwargs):
            ts = args[:n_tensors]
            if len(ts) < n_tensors:
                ts = ts + tuple(kwargs.get(n) for n in names_[len(ts):n_tensors])
            if kwargs.get("out") is None and records_graph(*[
                    t for t in ts if isinstance(t, Tensor)]) and \
                    all(t is None or isinstance(t, Tensor) and _inexact(t._data.dtype)
                        for t in ts) and (when is None or when(*args, **kwargs)):
                n = name if isinstance(name, str) else name(*args, **kwargs)
                if n is not None:
                    bound = sig.bind(*args, **kwargs)
                    bound.apply_defaults()
                    vals = list(bound.arguments.items())
                    params = dict(vals[n_tensors:])
                    if params.get("out") is None:  # (``out`` given by position: as fn)
                        return classes[n].apply(*[v for _, v in vals[:n_tensors]],
                                                **params)
            return fn(*args, **kwargs)
        call.node_classes = classes
        return call
    return decorate


def nodes():
    """Every CompositeNode subclass (the modules that define them imported first)."""
    import importlib
    for m in _DEFINED_IN:
        importlib.import_module(m)
    out, stack = [], [CompositeNode]
    while stack:
        for c in stack.pop().__subclasses__():
            if c not in out:
                out.append(c)
                stack.append(c)
    return out


def named_nodes(base, names, module, aten=None):
    """``{key: subclass of base}`` with PyTorch's node name ``names[key]`` each (one op
    whose node name depends on its mode or rank); ``module`` is the defining module's
    ``__name__``; ``aten(key)``, if given, is the profiler's ``aten::`` name where it is
    not the node name's."""
    out = {}
    for key, node_name in names.items():
        op = node_name[:-len("Backward0")] if node_name.endswith("Backward0") else node_name
        attrs = {"_node_name": node_name, "_op_name": op, "__module__": module,
                 "__qualname__": f"{base.__qualname__}.{op}"}
        if aten is not None and aten(key) is not None:
            attrs["profiler_name"] = aten(key)
        out[key] = type(base)(op, (base,), attrs)
    return out


def compile_recorder(*tensors):
    """The capture of ``ember.compile`` (one that lists graph breaks) when it is the mode
    that records composites for a call on ``tensors``, else None. A composite that reads
    its inputs' values outside the recorded ops (ranks, a check that raises) records
    itself as one node there (``m.composite_locals(...)``), run again at every replay, so
    the compiled graph stays whole and never replays the example's values; ``jit.trace``
    keeps recording its ops (its TorchScript has no row for such a node)."""
    if not _mode_active[0]:
        return None
    m = _mode_recorder(tuple(t for t in tensors if isinstance(t, Tensor)))
    return m if m is not None and getattr(m, "breaks", None) is not None else None
