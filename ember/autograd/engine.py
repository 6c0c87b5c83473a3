"""The backward engine: iterative, in reverse topological order.

Backward formulas are ordinary ember Tensor ops run with grad mode set to
``create_graph``: with it off they are plain array math, with it on they record a
graph of their own, which is what makes higher derivatives work.
"""
import sys

import numpy as np

from ember._tensor import Tensor, _as_array, _make
from ember.autograd import _modes, anomaly
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import _wrap
from ember.autograd.node import in_backward as _in_backward
from ember.autograd.saved import _FREED
from ember.backend import blas_hold as _blas_hold
from ember.backend import threads as _threads
from ember.backend.dtypes import FROM_NP as _FROM_NP

_active = _modes.active  # how many modes (ember.autograd._modes) a backward step sees

# False while a pass runs for autograd.grad() or backward(inputs=...): the reentrant
# checkpoint cannot deliver its gradients then (PyTorch's _is_checkpoint_valid)
checkpoint_valid = [True]


def _is_checkpoint_valid():
    """Whether the running backward pass accumulates into every leaf (see ``checkpoint``)."""
    return checkpoint_valid[0]


def _dependencies(root_nodes):
    """For each node reachable from the roots: how many edges lead into it; and for each
    leaf (by id), how many edges lead into its ``AccumulateGrad``."""
    deps = {}
    leaf_deps = {}
    # a root reachable from another root is walked once, not twice (else its inputs
    # would wait for an edge that never comes and lose their gradients); any other node
    # is walked when it first enters ``deps``. (One root, the usual ``loss.backward()``,
    # is reachable from no other, the graph having no cycles: no set to ask.)
    roots = set(root_nodes) if len(root_nodes) > 1 else ()
    stack = list(root_nodes)
    pop = stack.pop
    push = stack.append
    while stack:
        for e in pop()._edges:
            if type(e) is tuple:
                nxt = e[0]
                if nxt in deps:
                    deps[nxt] += 1
                else:
                    deps[nxt] = 1
                    if nxt not in roots:
                        push(nxt)
            elif e is not None:
                k = id(e)
                if k in leaf_deps:
                    leaf_deps[k] += 1
                else:
                    leaf_deps[k] = 1
    return deps, leaf_deps


def _needed(root_nodes, leaf_targets, node_targets):
    """The nodes from which some target can be reached (the rest need not run)."""
    needed = set()
    done = set()
    stack = [(n, False) for n in root_nodes]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            if node in node_targets:
                needed.add(node)
                continue
            for e in node._edges:
                if e is None:
                    continue
                if type(e) is tuple:
                    if e[0] in needed:
                        needed.add(node)
                        break
                elif id(e) in leaf_targets:
                    needed.add(node)
                    break
            continue
        if node in done:
            continue
        done.add(node)
        stack.append((node, True))
        for e in node._edges:
            if type(e) is tuple and e[0] not in done:
                stack.append((e[0], False))
    return needed


def _accumulate(leaf, g, create_graph, seen):
    extra = leaf._extra
    if extra is not None and extra.hooks:
        for hook in list(extra.hooks):
            r = hook(g)
            if r is not None:
                g = r
    if not create_graph and g._requires_grad:
        g = g.detach()
    if leaf._grad is None:
        if not create_graph:
            g = _own(g)
            # one tensor must not become two leaves' .grad, nor the user's grad_output: an
            # in-place change to one (clip_grad_norm_, zero_) would show in the other
            if id(g) in seen:
                g = g.clone()
            else:
                seen[id(g)] = g
        leaf._grad = g
    elif not create_graph and _summable_in_place(leaf._grad, g):
        # in place, as PyTorch's AccumulateGrad without a graph: whoever holds ``.grad``
        # (a user's reference, an optimizer's list) sees the sum (each leaf owns its own
        # ``.grad``: ``seen`` above never lets two leaves share one); the version bumped
        # as by ``add_``
        old = leaf._grad
        a = old._data
        if not _threads.MANY or a.size < _threads.SPLIT_ELEMENTS:
            np.add(a, g._data, out=a)
        else:
            _threads.add_into(a, g._data)
        old._vc[0] += 1
    else:
        # with a graph (create_graph), or a grad that cannot take the sum in place (an
        # expanded tensor, a sparse one, another dtype): a new tensor, as PyTorch's
        leaf._grad = leaf._grad + g
    if extra is not None and extra.post_acc_hooks:
        for hook in list(extra.post_acc_hooks):
            if hook(leaf) is not None:
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def _summable_in_place(old, g):
    """Whether ``old += g`` can run in place: plain dense tensors (not a sparse layout's
    subclass) of one shape and dtype, ``old`` writeable with no element repeated (an
    expanded tensor has zero strides)."""
    a = old._data
    if type(old) is not Tensor or type(g) is not Tensor or type(a) is not np.ndarray or \
            type(g._data) is not np.ndarray or a.shape != g.shape \
            or a.dtype != g._data.dtype or not a.flags.writeable:
        return False
    return 0 not in a.strides or all(st != 0 for st, n in zip(a.strides, a.shape) if n > 1)


def _leaf_done(leaf, g, accumulate, create_graph, seen, leaf_targets, captured):
    """A leaf's summed gradient, once all its edges have run: into ``.grad``, or kept for
    ``autograd.grad``'s result."""
    if accumulate:
        _outside(_accumulate, leaf, g, create_graph, seen)
    elif leaf_targets is not None:
        captured.setdefault(id(leaf), []).append(g)


def _outside(fn, *args):
    """Call ``fn`` (the user's hooks) as code outside ember's backward formulas: built-in
    nodes hide ``saved_tensors`` from it (``Primitive.saved_tensors``)."""
    depth = _in_backward[0]
    _in_backward[0] = 0
    try:
        return fn(*args)
    finally:
        _in_backward[0] = depth


def _own(g):
    # a gradient that a backward formula passed straight through may be another
    # leaf's gradient, a view of something else, or the user's grad_output
    if g._base is None and g._data.base is None and g._extra is None and \
            g._data.flags.c_contiguous:
        return g
    return g.clone()  # a row-major copy, like the leaves' own layout


def _nan_check(node, grads):
    for i, g in enumerate(grads):
        if g is not None and g._data.dtype.kind == "f" and g.isnan().any().item():
            _report_anomaly(node)
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                               "output.")


def _report_anomaly(node):
    trace = getattr(node, "_trace", None)
    if trace:
        sys.stderr.write(f"Error detected in {node.name()}. Traceback of forward call that "
                         "caused the error:\n" + "".join(trace))


def _run_tensor_hooks(node, grads):
    for nr, hooks in node._tensor_pre_hooks.items():
        if grads[nr] is None:
            continue
        # retain_grad's hook sees the gradient after the user's hooks, as in PyTorch
        for hook in sorted(hooks, key=lambda h: getattr(h, "_is_retain", False)):
            r = hook(grads[nr])
            if r is not None:
                grads[nr] = r
    return grads


def _restore_meta(g, meta):
    """Sum a broadcast gradient back to its input's shape and cast it to its dtype."""
    shape, dt = meta
    if g._data.shape != shape:
        g = g.sum_to_size(shape)
    if g._data.dtype != dt:
        if g._data.dtype.kind == "c" and dt.kind != "c":
            g = g.real  # a real input's gradient is the real part (PyTorch's handle_r_to_c)
        g = g.to(_FROM_NP[dt])
    return g


def _into_region(node, g, edges, buffers):
    """For a node whose first input's gradient is zero outside ``node.grad_region`` (a
    select's or slice's) with its gradient ``g`` as an array, on the short path: when
    the node before already has an engine-made array buffered (no view, nothing else
    holds it) of the input's shape and ``g``'s dtype, add ``g`` into that region of it
    and say True. The same sums as before, when ``_array_grads`` made the zeros with
    ``g`` written into the region and the buffered sum added that region alone: ``x +
    g`` for each element of the region, the rest unchanged."""
    e = edges[0]
    if type(e) is not tuple:
        return False
    buf = buffers.get(e[0])
    if buf is None:
        return False
    a = buf[e[1]]
    if type(a) is not _ndarray or a.base is not None or a.dtype is not g.dtype and \
            a.dtype != g.dtype or a.shape != node.in_shape or not a.flags.writeable:
        return False
    part = a[node.grad_region]
    if part.shape != g.shape:
        return False
    _np_add(part, g, part)
    return True


def _in_input_meta(grads, shapes):
    """``grads`` (arrays or Tensors) of a node whose class declares them in its inputs'
    shapes (``Node._grads_in_input_shapes``), on the engine's short path: each is
    checked against its input's shape and dtype, and one that differs (a formula that
    fell back to ``backward``, a dtype the kernel widened) is summed back and cast as
    the general path does (``_restore_meta``)."""
    out = None
    for i, g in enumerate(grads):
        meta = shapes[i] if i < len(shapes) else None
        if g is None or meta is None:
            continue
        a = g._data if isinstance(g, Tensor) else g
        if a.shape != meta[0] or a.dtype != meta[1]:
            if out is None:
                out = list(grads)
            out[i] = _restore_meta(g if isinstance(g, Tensor) else _wrap(g), meta)
    return grads if out is None else tuple(out)


def _fill_zeros(node, grads):
    if getattr(node, "_custom_zeros", False):
        return grads  # a user Function materializes (or not) its own missing grads
    from ember._tensor import _make
    from ember.backend import array_module
    xp = array_module(next(g for g in grads if g is not None)._data)
    return [_make(xp.zeros(*node._out_meta[i])) if g is None else g
            for i, g in enumerate(grads)]


def _refs(buf, nr):
    """(references to ``buf[nr]``, references to its array), counted as ``_add_to_buffer``
    counts them: called once on a fresh tensor, it gives the counts of an unshared one."""
    old = buf[nr]
    a = old._data
    return sys.getrefcount(old), sys.getrefcount(a)


_UNSHARED = _refs([_make(np.zeros(1))], 0)


def _add_to_buffer(buf, nr, g, region):
    """``buf[nr] + g`` for a gradient arriving where one is already buffered (grad mode
    off). Like PyTorch's input buffer, the sum is written into the buffered gradient when
    nothing else can see it: the buffer alone holds that tensor, the tensor alone its
    NumPy array (no view of it, no other tensor on it). ``region``: a basic index outside
    which ``g`` is zero (the gradient of a select or slice), so only that part is added."""
    old = buf[nr]
    a = old._data
    ga = g._data
    if (type(old) is Tensor and type(g) is Tensor and type(a) is np.ndarray
            and type(ga) is np.ndarray and a.base is None and ga.dtype == a.dtype
            and a.dtype.names is None  # (complex32 is a structured pair: no ufunc loop)
            and ga.shape == a.shape and a.flags.writeable and not old._requires_grad
            and sys.getrefcount(old) <= _UNSHARED[0] and sys.getrefcount(a) <= _UNSHARED[1]):
        if region is None:
            if not _threads.MANY or a.size < _threads.SPLIT_ELEMENTS:
                np.add(a, ga, out=a)
            else:
                _threads.add_into(a, ga)  # (large: in blocks on the intra-op threads)
        else:
            part = a[region]
            np.add(part, ga[region], out=part)
        return old
    return old + g


def _hook_outputs(node, grads):
    """The output gradients as hooks see them: one per output of PyTorch's node
    (``Node._hook_n_outputs``: None for an output ember's node does not have, such as
    group norm's mean; none for an integer output, such as ``max``'s indices)."""
    n = node._hook_n_outputs
    if n is None:
        # outputs after the differentiable ones are integer (indices, pivots): PyTorch's
        # node gives them no slot
        d = getattr(node, "differentiable_outputs", None)
        if d and tuple(d) == tuple(range(len(d))):
            n = len(d)
    if n is None or n == len(grads):
        return tuple(grads)
    return tuple(grads[:n]) + (None,) * (n - len(grads))


def _hook_result(hook, r, expected):
    """A node hook's return value ``r`` checked as PyTorch checks it: None, or a tuple of
    ``expected`` Tensors or Nones."""
    if r is None:
        return None
    if type(r) is not tuple:
        raise TypeError(f"expected tuple, but hook returned '{_type_name(r)}'")
    if len(r) != expected:
        raise RuntimeError(f"hook '{getattr(hook, '__name__', 'hook')}' has returned an "
                           f"incorrect number of values (got {len(r)}, but expected "
                           f"{expected})")
    for v in r:
        if v is not None and not isinstance(v, Tensor):
            raise TypeError(f"expected Variable, but hook returned '{_type_name(v)}'")
    return r


def _type_name(v):
    # as PyTorch prints a type: a class defined in Python (a Tensor) by its name, a C
    # type by its full name (``numpy.ndarray``), a builtin by its name
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" or isinstance(v, Tensor) else \
        f"{t.__module__}.{t.__name__}"


def _run_pre_hooks(node, grads):
    """Run ``node``'s pre-hooks ``fn(grad_outputs)``; what they return replaces the
    gradients of the outputs ember's node has."""
    view = _hook_outputs(node, grads)
    for hook in node._pre_hooks:
        r = _hook_result(hook, _outside(hook, view), len(view))
        if r is not None:
            view = r
    n = min(len(view), len(grads))
    return list(view[:n]) + list(grads[n:])


def _run_node_hooks(node, hooks, in_grads, grads):
    """Run ``node``'s hooks ``fn(grad_inputs, grad_outputs)`` on the gradients PyTorch's
    node lists (``next_functions``' order: no slot for a plain argument such as a dim or
    an eps) and put what they return back in the slots of ``backward``'s result."""
    shapes = node._in_shapes
    if shapes is not None:
        # the gradients as the inputs will get them: summed back over broadcast dims
        in_grads = tuple(g if g is None or i >= len(shapes) or shapes[i] is None else
                         _restore_meta(g, shapes[i]) for i, g in enumerate(in_grads))
    slots = node._hook_slots()
    view = in_grads if slots is None else \
        tuple(None if i is None else in_grads[i] for i in slots)
    grads = _hook_outputs(node, grads)
    for hook in hooks:
        r = _hook_result(hook, _outside(hook, view, grads), len(view))
        if r is not None:
            view = r
    if slots is None:
        return view
    out = list(in_grads)
    for j, i in enumerate(slots):
        if i is not None:
            out[i] = view[j]
    return tuple(out)


def _counted(node, in_grads, edges):
    """``in_grads`` cut to one per edge: extra trailing Nones are allowed, as PyTorch
    allows them; any other count is an error."""
    if len(in_grads) > len(edges) and all(g is None for g in in_grads[len(edges):]):
        return in_grads[:len(edges)]
    raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                       f"(expected {len(edges)}, got {len(in_grads)})")


_np_add = np.add
_unsplit_float = _threads.unsplit_float
_ndarray = np.ndarray


def _array_of(gy):
    """The array of the gradient ``gy`` when a node's ``_array_grads`` may take it: a
    Tensor (not a subclass) on a real floating NumPy array below the size the
    elementwise ops split over threads (``ember.ops._grad_arrays.array``'s test, in the
    engine's pass without a graph and without modes); None otherwise."""
    if type(gy) is not Tensor:
        return None
    g = gy._data
    return g if _unsplit_float(g) else None


_final_callbacks = []


def queue_callback(fn):
    """Run ``fn()`` once the backward pass now running has finished (PyTorch's
    ``Variable._execution_engine.queue_callback``; DistributedDataParallel waits for its
    gradient all-reduces this way)."""
    _final_callbacks.append(fn)


def run_backward(roots, grad_roots, retain_graph, create_graph, inputs=None,
                 accumulate=True, allow_unused=False):
    """Propagate ``grad_roots`` from ``roots`` back through the graph.

    With ``accumulate`` the gradients land in leaves' ``.grad`` (only ``inputs``'
    when given); without it the gradients of ``inputs`` are returned (``grad``).
    Callbacks queued during the pass (``queue_callback``) run at its end.
    """
    outer = len(_final_callbacks)
    # at more than one thread, NumPy's BLAS at one thread for the pass (blas_hold)
    held = _blas_hold.hold_blas() if _threads.MANY else None
    try:
        result = _run_backward(roots, grad_roots, retain_graph, create_graph, inputs,
                               accumulate, allow_unused)
    except BaseException:
        del _final_callbacks[outer:]
        raise
    finally:
        _blas_hold.release_blas(held)
    while len(_final_callbacks) > outer:
        _final_callbacks.pop(outer)()
    return result


def _run_backward(roots, grad_roots, retain_graph, create_graph, inputs, accumulate,
                  allow_unused):
    buffers = {}
    root_nodes = []
    captured = {}
    seen = {id(g): g for g in grad_roots}  # tensors the user holds, or already a leaf's .grad
    for t, g in zip(roots, grad_roots):
        fn = t.grad_fn
        if fn is None:
            if t._requires_grad and (inputs is None or any(t is i for i in inputs)):
                captured.setdefault(id(t), []).append(g)  # the root is itself a leaf
            continue
        buf = buffers.get(fn)
        if buf is None:
            buf = buffers[fn] = [None] * fn.n_outputs
            root_nodes.append(fn)
        nr = t._output_nr
        buf[nr] = g if buf[nr] is None else buf[nr] + g

    deps, leaf_deps = _dependencies(root_nodes)
    leaf_targets = None
    node_targets = None
    needed = None
    if inputs is not None:
        leaf_targets = set()
        node_targets = {}
        for i in inputs:
            if i.grad_fn is None:
                leaf_targets.add(id(i))
            else:
                node_targets.setdefault(i.grad_fn, set()).add(i._output_nr)
        needed = _needed(root_nodes, leaf_targets, node_targets)

    # a leaf's gradients are summed here as they arrive and reach the leaf once, when its
    # last edge has run (PyTorch's AccumulateGrad node: the leaf's hooks see the total)
    leaf_bufs = {}
    owned = set()  # keys of leaf_bufs whose tensor the engine made (``_add_to_buffer``)
    ready = [n for n in root_nodes if n not in deps]
    plain = node_targets is None  # no node's gradient is captured, every node runs
    prev_mode = _grad_state.grad_enabled
    _grad_state.grad_enabled = create_graph
    prev_valid = checkpoint_valid[0]
    checkpoint_valid[0] = inputs is None
    check_nan = anomaly.enabled[0] and anomaly.nan_check[0]
    # every gradient goes to the leaves' ``.grad`` with no graph of its own, no anomaly
    # check: a node without hooks takes the short path in the loop
    fast = inputs is None and not create_graph and not check_nan
    # the backward functions below are ember's own (``Primitive.saved_tensors``); the
    # user's hooks run with the marker lowered again (``_outside``)
    _in_backward[0] += 1
    try:
        while ready:
            node = ready.pop()
            if type(node) is tuple:
                # (node, its one gradient), from the short path: no buffer was made
                node, gy = node
                grads = None
            else:
                grads = buffers.pop(node, None)
                gy = grads[0] if grads is not None and len(grads) == 1 else None
            edges = node._edges
            if fast and gy is not None and not node._hooked and not _active[0] and \
                    (node._in_shapes is None or node._grads_in_input_shapes):
                # the common node: one output, no hooks, no mode, no broadcast input (or
                # one whose class says its gradients come in its inputs' shapes); what
                # the general path below does for it, with its branches left out.
                # Its gradient may be an array: the ``_array_grads`` of the node before
                # (see ``Node._array_grads``) pass new arrays on, and a Tensor is made
                # where one is needed (another node's ``backward``, a leaf, a sum)
                try:
                    in_grads = None
                    array_grads = node._array_grads
                    if node.grad_region is not None and type(gy) is _ndarray and \
                            _into_region(node, gy, edges, buffers):
                        # a select's or slice's gradient added straight into the region
                        # of the one already buffered: no zeros of the input's size
                        in_grads = (None,) * len(edges)
                    elif isinstance(gy, Tensor):
                        if array_grads is not None:
                            g = _array_of(gy)
                            if g is not None:
                                in_grads = array_grads(gy, g)
                        if in_grads is None:
                            in_grads = node.backward(gy)
                    else:
                        if type(gy) is not _ndarray:
                            gy = _as_array(gy)  # a NumPy scalar (0-d arrays' formulas)
                        if array_grads is not None:
                            in_grads = array_grads(gy, gy)
                        if in_grads is None:
                            in_grads = node.backward(_wrap(gy))
                except Exception:
                    if anomaly.enabled[0]:
                        _report_anomaly(node)
                    raise
                if type(in_grads) is not tuple:
                    in_grads = tuple(in_grads) if type(in_grads) is list else (in_grads,)
                if len(in_grads) != len(edges):
                    in_grads = _counted(node, in_grads, edges)
                if node._in_shapes is not None:
                    in_grads = _in_input_meta(in_grads, node._in_shapes)
                if not retain_graph and node._saved is not None:
                    node._saved = _FREED
                for e, g in zip(edges, in_grads):
                    if type(e) is tuple:
                        nxt, nr = e
                        d = deps[nxt] - 1
                        if g is not None:
                            buf = buffers.get(nxt)
                            if buf is None:
                                if nxt.n_outputs == 1:
                                    if not d:
                                        # its only gradient: ready now, with no buffer
                                        # (its count is read no more)
                                        ready.append((nxt, g))
                                        continue
                                    buffers[nxt] = [g]
                                else:
                                    buf = buffers[nxt] = [None] * nxt.n_outputs
                                    buf[nr] = g
                            elif buf[nr] is None:
                                buf[nr] = g
                            else:
                                # a sum: of Tensors (no local name keeps the buffered
                                # one, so that ``_add_to_buffer`` may write into it)
                                if not isinstance(buf[nr], Tensor):
                                    buf[nr] = _wrap(buf[nr])
                                if not isinstance(g, Tensor):
                                    g = _wrap(g)
                                if _active[0]:
                                    buf[nr] = buf[nr] + g
                                else:
                                    # (only a select's or slice's first input has one)
                                    region = node.grad_region if e is edges[0] else None
                                    buf[nr] = _add_to_buffer(buf, nr, g, region)
                        if d:
                            deps[nxt] = d
                        else:
                            ready.append(nxt)  # (its count is read no more)
                    elif e is not None:
                        k = id(e)
                        if g is not None:
                            if isinstance(g, Tensor):
                                ga = g._data
                            else:
                                ga = g
                                g = None  # (the Tensor is made where one is needed)
                            dt = e._data.dtype
                            if ga.dtype is not dt and ga.dtype != dt:
                                g = (_wrap(ga) if g is None else g).to(e.dtype)
                                ga = g._data
                            if k in owned:
                                # a sum the engine made: nothing else sees it, and every
                                # arrival has the leaf's shape and dtype
                                a = leaf_bufs[k]._data
                                if not _threads.MANY or a.size < _threads.SPLIT_ELEMENTS:
                                    _np_add(a, ga, a)
                                else:
                                    _threads.add_into(a, ga)
                            else:
                                if g is None:
                                    g = _wrap(ga)
                                if k not in leaf_bufs:
                                    leaf_bufs[k] = g
                                elif _active[0]:
                                    leaf_bufs[k] = leaf_bufs[k] + g
                                else:
                                    b = leaf_bufs[k] = _add_to_buffer(leaf_bufs, k, g, None)
                                    a = b._data
                                    if type(a) is np.ndarray and a.dtype.names is None and \
                                            type(ga) is np.ndarray and a.flags.writeable:
                                        owned.add(k)
                        d = leaf_deps[k] - 1
                        if d:
                            leaf_deps[k] = d
                        elif k in leaf_bufs:
                            _leaf_done(e, leaf_bufs.pop(k), accumulate, False, seen, None,
                                       captured)
                continue
            if grads is None and gy is not None:
                grads = [gy]
            if fast and grads is not None:
                # the general path takes Tensors (see the short path above)
                grads = [g if g is None or isinstance(g, Tensor) else _wrap(g) for g in grads]
            hooked = node._hooked
            if grads is not None and (hooked or not plain):
                if hooked and node._tensor_pre_hooks:
                    grads = _outside(_run_tensor_hooks, node, grads)
                if node_targets and node in node_targets:
                    for nr in node_targets[node]:
                        if grads[nr] is not None:
                            captured.setdefault((id(node), nr), []).append(grads[nr])
                if needed is not None and node not in needed:
                    grads = None
            if grads is None:
                if not retain_graph and needed is None and node._saved is not None:
                    node._saved = _FREED
                for e in edges:
                    if type(e) is tuple:
                        nxt = e[0]
                        d = deps[nxt] - 1
                        deps[nxt] = d
                        if d == 0:
                            ready.append(nxt)
                    elif e is not None:
                        k = id(e)
                        d = leaf_deps[k] - 1
                        leaf_deps[k] = d
                        if d == 0 and k in leaf_bufs:
                            _leaf_done(e, leaf_bufs.pop(k), accumulate, create_graph, seen,
                                       leaf_targets, captured)
                continue
            if hooked and node._pre_hooks:
                grads = _run_pre_hooks(node, grads)
            one = len(grads) == 1
            given = grads  # (node hooks see None for an output no gradient reached)
            if not one and any(g is None for g in grads):
                grads = _fill_zeros(node, grads)
            try:
                if _active[0]:
                    in_grads = _outside(_modes.run_node, node, grads)
                elif one:
                    in_grads = node.backward(grads[0])
                else:
                    in_grads = node.backward(*grads)
            except Exception:
                if anomaly.enabled[0]:
                    _report_anomaly(node)
                raise
            if type(in_grads) is not tuple:
                in_grads = tuple(in_grads) if type(in_grads) is list else (in_grads,)
            if len(in_grads) != len(edges):
                in_grads = _counted(node, in_grads, edges)
            hooks = node._hooks if hooked else None
            if hooks:
                in_grads = _run_node_hooks(node, hooks, in_grads, tuple(given))
            if check_nan:
                _nan_check(node, in_grads)
            if not retain_graph and node._saved is not None:
                node._saved = _FREED
            shapes = node._in_shapes
            i = -1
            for e in edges:
                i += 1
                if e is None:
                    continue
                g = in_grads[i]
                if type(e) is tuple:
                    nxt, nr = e
                    if g is not None:
                        if shapes is not None and shapes[i] is not None:
                            g = _restore_meta(g, shapes[i])
                        buf = buffers.get(nxt)
                        if buf is None:
                            if nxt.n_outputs == 1:
                                buffers[nxt] = [g]
                            else:
                                buf = buffers[nxt] = [None] * nxt.n_outputs
                                buf[nr] = g
                        elif buf[nr] is None:
                            buf[nr] = g
                        else:
                            if fast and not isinstance(buf[nr], Tensor):
                                # an array the short path buffered (see above)
                                buf[nr] = _wrap(buf[nr])
                            if create_graph or _active[0]:
                                buf[nr] = buf[nr] + g
                            else:
                                # a select's or slice's gradient: zeros outside its index
                                region = node.grad_region if i == 0 and not hooks and (
                                    shapes is None or shapes[0] is None) else None
                                buf[nr] = _add_to_buffer(buf, nr, g, region)
                    d = deps[nxt] - 1
                    deps[nxt] = d
                    if d == 0:
                        ready.append(nxt)
                    continue
                k = id(e)
                if leaf_targets is not None and k not in leaf_targets:
                    continue
                if g is not None:
                    if shapes is not None and shapes[i] is not None:
                        g = _restore_meta(g, shapes[i])
                    dt = e._data.dtype
                    if g._data.dtype is not dt and g._data.dtype != dt:
                        g = g.to(e.dtype)
                    if k not in leaf_bufs:
                        leaf_bufs[k] = g
                    elif k in owned:
                        # a sum the engine made: nothing else sees it, and every arrival
                        # has the leaf's shape and dtype
                        a = leaf_bufs[k]._data
                        if not _threads.MANY or a.size < _threads.SPLIT_ELEMENTS:
                            np.add(a, g._data, out=a)
                        else:
                            _threads.add_into(a, g._data)
                    elif create_graph or _active[0]:
                        leaf_bufs[k] = leaf_bufs[k] + g
                    else:
                        b = leaf_bufs[k] = _add_to_buffer(leaf_bufs, k, g, None)
                        a = b._data
                        if type(a) is np.ndarray and a.dtype.names is None and \
                                type(g._data) is np.ndarray and a.flags.writeable:
                            owned.add(k)
                d = leaf_deps[k] - 1
                leaf_deps[k] = d
                if d == 0 and k in leaf_bufs:
                    _leaf_done(e, leaf_bufs.pop(k), accumulate, create_graph, seen,
                               leaf_targets, captured)
    finally:
        _in_backward[0] -= 1
        _grad_state.grad_enabled = prev_mode
        checkpoint_valid[0] = prev_valid

    if accumulate:
        for t in roots:
            if t.grad_fn is None and t._requires_grad and id(t) in captured:
                for g in captured.pop(id(t)):
                    _accumulate(t, g, create_graph, seen)
        return None
    results = []
    for i in inputs:
        key = id(i) if i.grad_fn is None else (id(i.grad_fn), i._output_nr)
        gs = captured.get(key)
        if gs is None:
            results.append(None)
            continue
        g = gs[0]
        for more in gs[1:]:
            g = g + more
        if i.grad_fn is None and not create_graph and g._requires_grad:
            g = g.detach()
        results.append(g)
    return results


def is_tensor(x):
    return isinstance(x, Tensor)
