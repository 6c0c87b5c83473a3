"""``jit.trace``: run a function or module once on example inputs and keep what it did
as an :class:`ember._graph.ir.Graph` (see ``ember._graph.capture`` for how calls are
recorded)."""
import warnings

import numpy as np

from ember import _tensor
from ember._graph.capture import (
    RANDOM_OPS,
    TracerWarning,
    _user_frame,
    _warn,
    is_tracing,
)
from ember._graph.ir import Ref
from ember._graph.record import rebuild as _rebuild
from ember._graph.record import record as _record

Tensor = _tensor.Tensor

__all__ = ["trace", "trace_module", "is_tracing", "TracerWarning", "TracingCheckError"]



class TracingCheckError(Exception):
    """``check_trace`` found that the traced graph does not reproduce the function."""

    def __init__(self, graph_diff_error, tensor_compare_error, extra_msg=None):
        self.message = "Tracing failed sanity checks!\n"
        if extra_msg is not None:
            self.message += extra_msg + "\n"
        if graph_diff_error is not None:
            self.message += "ERROR: Graphs differed across invocations!\n"
            self.message += "\n".join("\t" + x for x in graph_diff_error.splitlines()) + "\n"
        if tensor_compare_error is not None:
            self.message += ("ERROR: Tensor-valued Constant nodes differed in value across "
                             "invocations. This often indicates that the tracer has encountered "
                             "untraceable code.\n")
            self.message += "\n".join("\t" + x for x in tensor_compare_error.splitlines())
        super().__init__(self.message)


def _as_args(example_inputs):
    if isinstance(example_inputs, Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, list):
        return tuple(example_inputs)
    if not isinstance(example_inputs, tuple):
        return (example_inputs,)
    return example_inputs


# ----- checking --------------------------------------------------------------------------
def _close(a, b, tol):
    from ember.backend import is_gpu_array
    # the check compares on the host (a traced module may run on a GPU)
    a, b = (x.get() if is_gpu_array(x) else np.asarray(x) for x in (a, b))
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        return bool(np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True))
    return bool(np.array_equal(a, b))


def _where(node):
    at = f" (scope: {node.scope})" if node.scope else ""
    if node.source:
        at += f" at {node.source[0]}:{node.source[1]}"
    return at


_UNDEFINED = {"empty", "empty_like"}  # outputs whose values mean nothing


def _check(graph, args, params, snapshots, eager_out, tol):
    """Replay the graph on the example and compare every node with what the trace saw
    (and the result with the eager one). A deterministic graph that differs raises
    :class:`TracingCheckError` naming the first differing node; with random nodes the
    differences are expected and a :class:`TracerWarning` says so, as in PyTorch."""
    nondet = [n for n in graph.nodes if n.op in RANDOM_OPS]
    first = []

    def observe(node, outs):
        if first or node.op in _UNDEFINED or node.op in RANDOM_OPS:
            return
        for v, o in zip(node.outputs, outs):
            snap = snapshots.get(id(v))
            if snap is not None and isinstance(o, Tensor) and not _close(o._data, snap, tol):
                first.append((node, v))
                return

    from ember.autograd.grad_mode import no_grad
    with no_grad():
        got = graph.run(*args, params=params, observer=observe)
    problem = None
    if first:
        node, v = first[0]
        problem = (f"The traced graph does not reproduce the example: the first differing "
                   f"node is\n{node!r}\n{node.op} gave a different %{v.name}{_where(node)}",
                   None)
    else:
        flat_got, flat_ref = [], []
        _flatten(got, flat_got)
        _flatten(eager_out, flat_ref)
        for i, (a, b) in enumerate(zip(flat_got, flat_ref)):
            if isinstance(a, Tensor) and isinstance(b, Tensor) and \
                    not _close(a._data, b._data, tol):
                problem = (None, f"Output nr {i + 1}. of the traced function does not match "
                                 "the corresponding output of the Python function.")
                break
    if problem is None:
        return
    if nondet:
        _warn("Trace had nondeterministic nodes. Did you forget call .eval() on your model? "
              "Nodes:\n" + "\n".join(f"\t{n!r}" for n in nondet[:5]) + "\nThis may cause "
              "errors in trace checking. To disable trace checking, pass check_trace=False "
              "to torch.jit.trace()", _user_frame(1))
        return
    raise TracingCheckError(*problem)


def _value_key(g, v, positions):
    if v.kind in ("param", "buffer"):
        return (v.kind, v.name)
    if v.kind == "input":
        return ("input", g.inputs.index(v))
    if v.kind == "constant":
        d = v.data._data
        return ("constant", d.shape, str(d.dtype), d.tobytes())
    return ("node", positions[id(v.node)], v.index)


def _norm(x, g, positions):
    if isinstance(x, Ref):
        return _value_key(g, x.value, positions)
    if isinstance(x, (tuple, list)):
        return (type(x).__name__,) + tuple(_norm(y, g, positions) for y in x)
    if isinstance(x, dict):
        return tuple((k, _norm(y, g, positions)) for k, y in x.items())
    if isinstance(x, slice):
        return ("slice",) + _norm((x.start, x.stop, x.step), g, positions)
    if isinstance(x, np.ndarray):
        return ("array", x.shape, str(x.dtype), x.tobytes())
    if isinstance(x, (int, float, str, bool, type(None))):
        return x
    if isinstance(x, Tensor):
        return ("tensor", id(x))   # the same module state in both traces
    slots = getattr(type(x), "__slots__", None)
    if slots:
        return (type(x).__name__,) + tuple(_norm(getattr(x, k, None), g, positions)
                                           for k in slots)
    if hasattr(x, "__dict__") and not callable(x):
        return (type(x).__name__,) + tuple((k, _norm(v, g, positions))
                                           for k, v in sorted(vars(x).items()))
    return repr(x)


def _first_difference(g1, g2):
    """The first pair of nodes where two traces of the same call differ, or None."""
    p1 = {id(n): i for i, n in enumerate(g1.nodes)}
    p2 = {id(n): i for i, n in enumerate(g2.nodes)}
    for a, b in zip(g1.nodes, g2.nodes):
        if a.op != b.op or _norm((a.args, a.kwargs), g1, p1) != _norm((b.args, b.kwargs), g2,
                                                                          p2):
            return a, b
    if len(g1.nodes) != len(g2.nodes):
        n = min(len(g1.nodes), len(g2.nodes))
        extra = (g1.nodes[n:] or g2.nodes[n:])[0]
        return (extra, None) if len(g1.nodes) > n else (None, extra)
    if _norm(g1.output_spec, g1, p1) != _norm(g2.output_spec, g2, p2):
        return "outputs", "outputs"
    return None


def _flatten(tree, out):
    if isinstance(tree, (tuple, list)):
        for x in tree:
            _flatten(x, out)
    elif isinstance(tree, dict):
        for x in tree.values():
            _flatten(x, out)
    else:
        out.append(tree)


def _snapshot_outputs(out):
    if isinstance(out, Tensor):
        return _tensor._make(out._data.copy())
    if isinstance(out, (tuple, list)):
        return _rebuild(out, [_snapshot_outputs(x) for x in out])
    if isinstance(out, dict):
        return {k: _snapshot_outputs(x) for k, x in out.items()}
    return out


def _trace_one(fn, args, module, check_trace, tol, strict):
    g, out, snaps = _record(fn, args, module, strict, check_trace, True)
    if check_trace:
        # trace again: a function whose recorded calls change from run to run (Python
        # state, data-dependent branches) is caught here, as PyTorch re-traces
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TracerWarning)
            g2 = _record(fn, args, module, strict, False, True)[0]
        diff = _first_difference(g, g2)
        if diff is not None and not any(n.op in RANDOM_OPS for n in g.nodes):
            a, b = diff
            raise TracingCheckError(
                "The traces of two runs on the same inputs differ; the first diverging "
                f"node is\n  first run:  {a!r}\n  second run: {b!r}", None)
        ref = _snapshot_outputs(out)
        params = {}
        if module is not None:
            params = dict(module.named_parameters())
            params.update((k, b) for k, b in module.named_buffers() if b is not None)
        _check(g, args, params, snaps, ref, tol)
    return g


def _check_input(g, fn, args, module, tol):
    """``check_inputs``: the graph traced on the example, run on ``args``, gives what
    ``fn`` itself gives there (a value the trace keeps from the example, an index or a
    branch, shows here), as PyTorch compares its trace with the Python function."""
    from ember.autograd.grad_mode import no_grad
    params = {}
    if module is not None:
        params = dict(module.named_parameters())
        params.update((k, b) for k, b in module.named_buffers() if b is not None)
    with warnings.catch_warnings(), no_grad():
        warnings.simplefilter("ignore", TracerWarning)
        want = _snapshot_outputs(fn(*args))
        got = g.run(*args, params=params)
    flat_got, flat_ref = [], []
    _flatten(got, flat_got)
    _flatten(want, flat_ref)
    for i, (a, b) in enumerate(zip(flat_got, flat_ref)):
        if isinstance(a, Tensor) and isinstance(b, Tensor) and (
                a._data.shape != b._data.shape or not _close(a._data, b._data, tol)):
            if any(n.op in RANDOM_OPS for n in g.nodes):
                return  # the example's own check warned about the random nodes
            raise TracingCheckError(None, f"Output nr {i + 1}. of the traced function does "
                                    "not match the corresponding output of the Python "
                                    "function.")


# ----- the public entry points -----------------------------------------------------------
def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, _force_outplace=False, _module_class=None,
          _compilation_unit=None, example_kwarg_inputs=None, _store_inputs=True):
    """Trace ``func`` (a function or an ``nn.Module``) on ``example_inputs``.

    The calls ``func`` makes on tensors are recorded once into a graph (``.graph``);
    the result runs that graph (so Python control flow is frozen as it went on the
    example, and a :class:`TracerWarning` names each place where a tensor became a
    Python value). Sizes read with ``x.size(0)``/``x.shape[0]`` stay computations,
    so the result runs at other batch sizes where the model allows it.

    >>> lin = ember.nn.Linear(3, 2)
    >>> traced = ember.jit.trace(lin, ember.randn(4, 3))
    >>> traced(ember.randn(5, 3)).shape
    ember.Size([5, 2])
    """
    from ember.nn.modules.module import Module
    if example_kwarg_inputs is not None:
        raise NotImplementedError("jit.trace(example_kwarg_inputs=...): pass the inputs "
                                  "positionally as example_inputs")
    if isinstance(func, Module):
        return trace_module(func, {"forward": example_inputs}, None, check_trace,
                            None if check_inputs is None else
                            [{"forward": c} for c in check_inputs],
                            check_tolerance, strict)
    if example_inputs is None:
        raise RuntimeError("jit.trace: example_inputs are required")
    owner = getattr(func, "__self__", None)
    module = owner if isinstance(owner, Module) else None
    args = _as_args(example_inputs)
    g = _trace_one(func, args, module, check_trace, check_tolerance, strict)
    if check_inputs:
        for ci in check_inputs:
            _trace_one(func, _as_args(ci), module, True, check_tolerance, strict)
            _check_input(g, func, _as_args(ci), module, check_tolerance)
    from ember.jit._traced import make_traced_function
    return make_traced_function(func, g, module)


def trace_module(mod, inputs, optimize=None, check_trace=True, check_inputs=None,
                 check_tolerance=1e-5, strict=True, _force_outplace=False,
                 _module_class=None, _compilation_unit=None, example_inputs_is_kwarg=False,
                 _store_inputs=True):
    """Trace the methods of ``mod`` named in ``inputs`` (``{"forward": example}``)."""
    from ember.nn.modules.module import Module
    if not isinstance(mod, Module):
        raise AttributeError("expected torch.nn.Module as the first argument")
    if not isinstance(inputs, dict):
        raise AttributeError("expected a dictionary of (method_name, input) pairs")
    graphs = {}
    for name, example in inputs.items():
        method = getattr(mod, name)
        args = _as_args(example)
        graphs[name] = _trace_one(method, args, mod, check_trace, check_tolerance, strict)
    if check_inputs:
        for ci in check_inputs:
            for name, example in ci.items():
                _trace_one(getattr(mod, name), _as_args(example), mod, True, check_tolerance,
                           strict)
                _check_input(graphs[name], getattr(mod, name), _as_args(example), mod,
                             check_tolerance)
    from ember.jit._traced import make_traced_module
    return make_traced_module(mod, graphs)

