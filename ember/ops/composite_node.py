"""One backward node for a function ember computes as a composite of primitives.

PyTorch runs some functions as one kernel with one node over the function's own inputs
(``dist`` is ``DistBackward0`` over ``(input, other)``, ``linalg.matrix_exp`` one
``LinalgMatrixExpBackward0``); ember computes them from primitives. Where a user can see
the graph (eager mode, a graph being recorded) such a function runs as one
:class:`EagerComposite` node of PyTorch's name over PyTorch's inputs in PyTorch's order:
its forward runs the composite on the arrays without recording, and its backward runs
the composite again on the saved inputs under grad mode and takes its vector-Jacobian
product (with ``create_graph`` when the engine records the backward pass, so higher
derivatives stay exact). Captures and transforms (jit, ONNX, vmap, forward AD) keep
running the composite, whose primitives have their rules; these nodes are exempt from
them for that reason.

A subclass names the node (``_node_name``), the composite (``composite``, a function of
Tensors and the call's plain parameters) and which positional inputs are Tensors
(``save_inputs``); plain parameters are passed as keywords, so they are no edges.
"""
import functools
import inspect

from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import enable_grad, no_grad
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive

__all__ = ["EagerComposite", "one_node", "eager_nodes"]

# modules defining EagerComposite nodes: imported before the nodes are listed
_DEFINING = ("ember.ops.linalg_decomp", "ember.ops.norms", "ember.ops.reorder",
             "ember.ops.elementwise", "ember.ops.linalg",
             "ember.nn.functional", "ember._runtime_api", "ember.linalg",
             "ember.ops.reduction")


class EagerComposite(Primitive):
    """Base of the one-node forms of composite functions (see the module's docstring)."""
    _base_class = True
    composite = None

    def forward(self, *args, **params):
        self.params = params
        ts = [None if a is None else _make(a, False) for a in args]
        with no_grad():
            out = type(self).composite(*ts, **params)
        # a fresh array: the output is no view of an input
        return out._data.copy() if out._data.base is not None else out._data

    def backward(self, gy):
        from ember.autograd import grad
        saved = self.saved_tensors
        create = _grad_state.grad_enabled
        args, wrt, where = [], [], []
        for i, x in enumerate(saved):
            if isinstance(x, Tensor) and self._edges[i] is not None:
                # with create_graph the inputs stay in the graph (a view of each), so the
                # gradient depends on them; otherwise fresh leaves
                v = x.view_as(x) if create else x.detach().requires_grad_()
                wrt.append(v)
                where.append(i)
                args.append(v)
            else:
                args.append(x.detach() if isinstance(x, Tensor) else x)
        with enable_grad():
            out = type(self).composite(*args, **self.params)
        gs = grad(out, wrt, gy, create_graph=create, allow_unused=True)
        res = [None] * len(saved)
        for i, g in zip(where, gs):
            res[i] = g
        return tuple(res)


def one_node(name, n_tensors, *, when=None, names=()):
    """Decorator: the composite function ``fn``, whose first ``n_tensors`` parameters
    are its Tensor inputs (None allowed) and the rest plain values, runs as one
    :class:`EagerComposite` node named ``name`` where the call records a graph in eager
    mode (no ``out=``; a floating or complex input requiring grad), and as itself
    elsewhere. ``when(*args, **kwargs)``, if given, must also hold (PyTorch records a
    composite for the other calls). ``name`` may be a function of the call's arguments
    giving the name (None: the composite), one of ``names``."""
    def decorate(fn):
        sig = inspect.signature(fn)
        names_ = list(sig.parameters)
        classes = {n: type(EagerComposite)(n.split("Backward")[0], (EagerComposite,), {
            "_node_name": n, "composite": staticmethod(fn),
            "save_inputs": tuple(range(n_tensors)), "__module__": fn.__module__,
            "__qualname__": f"{fn.__qualname__}.node_{n}", "__doc__": fn.__doc__})
            for n in ((name,) if isinstance(name, str) else names)}

        @functools.wraps(fn)
        def call(*args, **kwargs):
            from ember.ops.matmul_graph import records_graph
            ts = args[:n_tensors]
            if len(ts) < n_tensors:
                ts = ts + tuple(kwargs.get(n) for n in names_[len(ts):n_tensors])
            if kwargs.get("out") is None and records_graph(*[
                    t for t in ts if isinstance(t, Tensor)]) and \
                    all(t is None or isinstance(t, Tensor) and t._data.dtype.kind in "fc"
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


def eager_nodes():
    """Every :class:`EagerComposite` node class (for the exemption lists)."""
    import importlib
    for m in _DEFINING:
        importlib.import_module(m)
    out, stack = [], [EagerComposite]
    while stack:
        for c in stack.pop().__subclasses__():
            if not c.__dict__.get("_renamed_from"):
                out.append(c)
                stack.append(c)
    return [EagerComposite] + out
