"""The backward engine: iterative, in reverse topological order.

Backward formulas are ordinary ember Tensor ops run with grad mode set to
``create_graph``: with it off they are plain array math, with it on they record a
graph of their own, which is what makes higher derivatives work.
"""
from ember._tensor import Tensor
from ember.backend.dtypes import FROM_NP as _FROM_NP
from ember.autograd import anomaly
from ember.autograd.grad_mode import state as _grad_state


def _topo_order(root_nodes):
    """Nodes reachable from the roots, each after every node that feeds it a gradient."""
    deps = {}
    stack = list(root_nodes)
    seen = set(stack)
    while stack:
        node = stack.pop()
        for e in node._edges:
            if type(e) is tuple:
                nxt = e[0]
                deps[nxt] = deps.get(nxt, 0) + 1
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    order = []
    ready = [n for n in seen if n not in deps]
    while ready:
        node = ready.pop()
        order.append(node)
        for e in node._edges:
            if type(e) is tuple:
                nxt = e[0]
                d = deps[nxt] - 1
                deps[nxt] = d
                if d == 0:
                    ready.append(nxt)
    return order


def _needed(order, leaf_targets, node_targets):
    """The nodes from which some target can be reached (the rest need not run)."""
    needed = set()
    for node in reversed(order):
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
    return needed


def _accumulate(leaf, g, create_graph):
    extra = leaf._extra
    if extra is not None and extra.hooks:
        for hook in list(extra.hooks):
            r = hook(g)
            if r is not None:
                g = r
    if not create_graph:
        g = g.detach() if g._requires_grad else g
    if leaf._grad is None:
        leaf._grad = g if create_graph else _own(g)
    else:
        # out of place: the old grad may be aliased by a user or another leaf
        leaf._grad = leaf._grad + g
    if extra is not None and extra.post_acc_hooks:
        for hook in list(extra.post_acc_hooks):
            hook(leaf)


def _own(g):
    # a gradient that a backward formula passed straight through may also be
    # another leaf's gradient or the user's grad_output: store a private copy
    # only when it is a view of someone else's data
    return g if g._base is None and g._data.base is None else g.clone()


def _sum_to(g, shape):
    if g._data.shape == shape:
        return g
    return g.sum_to_size(shape)


def _nan_check(node, grads):
    for i, g in enumerate(grads):
        if g is not None and g._data.dtype.kind == "f" and g.isnan().any().item():
            _report_anomaly(node)
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                               "output.")


def _report_anomaly(node):
    import sys
    trace = getattr(node, "_trace", None)
    if trace:
        sys.stderr.write(f"Error detected in {node.name()}. Traceback of forward call that "
                         "caused the error:\n" + "".join(trace))


def run_backward(roots, grad_roots, retain_graph, create_graph, inputs=None,
                 accumulate=True, allow_unused=False):
    """Propagate ``grad_roots`` from ``roots`` back through the graph.

    With ``accumulate`` the gradients land in leaves' ``.grad`` (only ``inputs``'
    when given); without it the gradients of ``inputs`` are returned (``grad``).
    """
    buffers = {}
    root_nodes = []
    captured = {}
    for t, g in zip(roots, grad_roots):
        fn = t.grad_fn
        if fn is None:
            if t._requires_grad:
                # the root is itself a leaf
                if inputs is None or any(t is i for i in inputs):
                    captured.setdefault(id(t), []).append(g)
            continue
        buf = buffers.get(fn)
        if buf is None:
            buf = buffers[fn] = [None] * fn.n_outputs
            root_nodes.append(fn)
        nr = t._output_nr
        buf[nr] = g if buf[nr] is None else buf[nr] + g

    order = _topo_order(root_nodes)
    leaf_targets = None
    node_targets = {}
    if inputs is not None:
        leaf_targets = set()
        for i in inputs:
            if i.grad_fn is None:
                leaf_targets.add(id(i))
            else:
                node_targets.setdefault(i.grad_fn, set()).add(i._output_nr)
        needed = _needed(order, leaf_targets, node_targets)
    else:
        needed = None

    prev_mode = _grad_state.grad_enabled
    _grad_state.grad_enabled = create_graph
    check_nan = anomaly.enabled[0] and anomaly.nan_check[0]
    try:
        for node in order:
            grads = buffers.pop(node, None)
            if grads is None:
                continue
            if node._tensor_pre_hooks:
                for nr, hooks in node._tensor_pre_hooks.items():
                    if grads[nr] is None:
                        continue
                    for hook in sorted(hooks, key=lambda h: getattr(h, "_is_retain", False)):
                        r = hook(grads[nr])
                        if r is not None:
                            grads[nr] = r
            if node in node_targets:
                for nr in node_targets[node]:
                    if grads[nr] is not None:
                        captured.setdefault((id(node), nr), []).append(grads[nr])
            if needed is not None and node not in needed:
                continue
            if node._pre_hooks:
                for hook in node._pre_hooks:
                    r = hook(tuple(grads))
                    if r is not None:
                        grads = list(r)
            if node.n_outputs > 1 and any(g is None for g in grads):
                grads = _fill_zeros(node, grads)
            try:
                in_grads = node.backward(*grads)
            except Exception:
                if anomaly.enabled[0]:
                    _report_anomaly(node)
                raise
            if type(in_grads) is not tuple:
                in_grads = (in_grads,) if not isinstance(in_grads, list) else tuple(in_grads)
            edges = node._edges
            if len(in_grads) != len(edges):
                raise RuntimeError(
                    f"function {node.name()} returned an incorrect number of gradients "
                    f"(expected {len(edges)}, got {len(in_grads)})")
            if node._hooks:
                for hook in node._hooks:
                    r = hook(in_grads, tuple(grads))
                    if r is not None:
                        in_grads = tuple(r)
            if check_nan:
                _nan_check(node, in_grads)
            if not retain_graph:
                node._release()
            shapes = node._in_shapes
            for i, e in enumerate(edges):
                if e is None:
                    continue
                g = in_grads[i]
                if g is None:
                    continue
                if shapes is not None and shapes[i] is not None:
                    shape, dt = shapes[i]
                    g = _sum_to(g, shape)
                    if g._data.dtype != dt:
                        g = g.to(_FROM_NP[dt])
                if type(e) is tuple:
                    nxt, nr = e
                    if needed is not None and nxt not in needed:
                        continue
                    buf = buffers.get(nxt)
                    if buf is None:
                        buf = buffers[nxt] = [None] * nxt.n_outputs
                    buf[nr] = g if buf[nr] is None else buf[nr] + g
                else:
                    if e._data.dtype != g._data.dtype:
                        g = g.to(e.dtype)
                    if leaf_targets is not None:
                        if id(e) in leaf_targets:
                            if accumulate:
                                _accumulate(e, g, create_graph)
                            else:
                                captured.setdefault(id(e), []).append(g)
                    elif accumulate:
                        _accumulate(e, g, create_graph)
    finally:
        _grad_state.grad_enabled = prev_mode

    if accumulate:
        for t in roots:
            if t.grad_fn is None and t._requires_grad and id(t) in captured:
                for g in captured.pop(id(t)):
                    _accumulate(t, g, create_graph)
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


def _fill_zeros(node, grads):
    from ember._tensor import _make
    from ember.backend import array_module
    xp = array_module(next(g for g in grads if g is not None)._data)
    return [_make(xp.zeros(*node._out_meta[i])) if g is None else g
            for i, g in enumerate(grads)]


def is_tensor(x):
    return isinstance(x, Tensor)
