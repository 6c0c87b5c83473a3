"""torch.func's differentiation transforms on ember's reverse-mode autograd.

Each transform wraps ``func``: the inputs it differentiates are replaced by fresh tracked
tensors (a new leaf, or a view when the input already carries an outer graph, so transforms
nest: ``grad(grad(f))``, ``jacrev(jacrev(f))``), ``func`` runs once under ``enable_grad``,
and ``ember.autograd.grad`` walks the graph back.  The graph of the result is kept
(``create_graph``) only when someone outside can still differentiate it: we are nested in
another transform, or an input already requires grad.
"""
from ember import _core as ember
from ember.autograd import forward_ad as _fwad
from ember.autograd import grad as _autograd_grad
from ember.autograd.grad_mode import enable_grad, is_grad_enabled
from ember.func import _batched
from ember.func._tree import flatten, unflatten

_depth = [0]  # how many transforms are running around the current call


def _argnums_tuple(argnums, nargs, name):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{name}: argnums must be non-empty")
    for n in nums:
        if not isinstance(n, int):
            raise RuntimeError(f"{name}: argnums must be int or Tuple[int, ...], got {argnums!r}")
        if not -nargs <= n < nargs:
            raise RuntimeError(f"{name}: Got argnums={argnums}, but only {nargs} positional "
                               "inputs")
    return tuple(n % nargs for n in nums)


def _track(x, name, lift=True):
    if not isinstance(x, ember.Tensor):
        raise RuntimeError(f"{name}: Expected inputs to be Tensors, got {type(x).__name__}")
    if not (x.is_floating_point() or x.is_complex()):
        raise RuntimeError(f"{name}: only Tensors of floating point dtype can require "
                           f"gradients, got {x.dtype}")
    if lift and _batched.levels:
        x = _batched.lift(x)  # inside vmap: one gradient per sample (docs/autograd.md)
    # a view keeps the outer graph (nesting); a fresh leaf otherwise
    return x.view_as(x) if x.requires_grad else x.detach().requires_grad_(True)


def _needs_graph(args):
    if not is_grad_enabled():
        return False
    if _depth[0] > 0:
        return True
    leaves, _ = flatten(list(args))
    return any(isinstance(t, ember.Tensor) and t.requires_grad for t in leaves)


def _grads(outputs, inputs, grad_outputs, create_graph):
    """``autograd.grad`` that returns zeros for inputs the outputs do not depend on."""
    if _batched.levels:
        return _batched.grads(outputs, inputs, grad_outputs, create_graph, _autograd_grad)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return [ember.zeros_like(x) for x in inputs]
    res = _autograd_grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
                         retain_graph=True, create_graph=create_graph, allow_unused=True)
    out = []
    for r, x in zip(res, inputs):
        r = ember.zeros_like(x) if r is None else r
        out.append(r if create_graph else r.detach())
    return out


class _Nested:
    def __enter__(self):
        _depth[0] += 1

    def __exit__(self, *exc):
        _depth[0] -= 1


def _call_tracked(func, args, kwargs, nums, name):
    """Run ``func`` with the inputs at ``nums`` tracked; return (out, [(leaves, spec)], graph)."""
    graph = _needs_graph(list(args) + list(kwargs.values()))
    args = list(args)
    tracked = []
    with enable_grad(), _Nested():
        for i in nums:
            leaves, spec = flatten(args[i])
            leaves = [_track(x, name) for x in leaves]
            args[i] = unflatten(leaves, spec)
            tracked.append((leaves, spec))
        out = func(*args, **kwargs)
    return out, tracked, graph


def _split_aux(out, has_aux, name):
    if not has_aux:
        return out, None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise RuntimeError(f"{name}(f, ...)(*args): output of function f should be a tuple: "
                           "(output, aux) if has_aux is True")
    return out[0], out[1]


def _regroup(flat, tracked, argnums):
    groups, k = [], 0
    for leaves, spec in tracked:
        groups.append(unflatten(flat[k:k + len(leaves)], spec))
        k += len(leaves)
    return groups[0] if isinstance(argnums, int) else tuple(groups)


def _detach_tree(tree, keep):
    if keep:
        return tree
    leaves, spec = flatten(tree)
    return unflatten([x.detach() if isinstance(x, ember.Tensor) else x for x in leaves], spec)


def grad_and_value(func, argnums=0, has_aux=False):
    """Return a function computing ``(grad of func w.r.t. argnums, func's value)``.

    ``func`` must return a one-element tensor (or ``(tensor, aux)`` with ``has_aux``)."""
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "grad_and_value")
        out, tracked, graph = _call_tracked(func, args, kwargs, nums, "grad_and_value")
        out, aux = _split_aux(out, has_aux, "grad_and_value")
        if not isinstance(out, ember.Tensor):
            raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a "
                               f"Tensor, got {type(out).__name__}")
        if out.numel() != 1:
            raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar "
                               f"Tensor, got tensor with {out.dim()} dims. Maybe you wanted to "
                               "use the vjp or jacrev APIs instead?")
        flat_in = [x for leaves, _ in tracked for x in leaves]
        g = _grads([out], flat_in, [ember.ones_like(out)], graph)
        value = out if graph else out.detach()
        grads = _regroup(g, tracked, argnums)
        if has_aux:
            return grads, (value, _detach_tree(aux, graph))
        return grads, value
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: a function returning the gradient of ``func`` w.r.t. ``argnums``."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: ``(func(*primals), vjp_fn)``; ``vjp_fn(cotangents)`` returns one
    gradient per primal (same structure as the primal)."""
    nums = tuple(range(len(primals)))
    out, tracked, graph = _call_tracked(func, primals, {}, nums, "vjp")
    out, aux = _split_aux(out, has_aux, "vjp")
    out_leaves, out_spec = flatten(out)
    flat_in = [x for leaves, _ in tracked for x in leaves]

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        ct_leaves, ct_spec = flatten(cotangents)
        if len(ct_leaves) != len(out_leaves):
            raise RuntimeError("vjp_fn: Expected pytree structure of cotangents to be the "
                               "same as pytree structure of outputs to the function")
        for o, c in zip(out_leaves, ct_leaves):
            if tuple(o.shape) != tuple(c.shape):
                raise RuntimeError(f"vjp_fn: Mismatch in shape: output has shape "
                                   f"{tuple(o.shape)} but cotangent has shape {tuple(c.shape)}")
        keep = graph or _needs_graph([cotangents]) if create_graph is None else create_graph
        g = _grads(out_leaves, flat_in, ct_leaves, keep)
        return tuple(_regroup(g, tracked, nums))

    result = _detach_tree(out, graph)
    if has_aux:
        return result, vjp_fn, _detach_tree(aux, graph)
    return result, vjp_fn


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: ``(func(*primals), J @ tangents)`` in forward mode: ``func`` runs once
    on dual tensors and the tangents ride along (see ``autograd.forward_ad``). Each call
    opens a forward-AD level of its own, so jvp of jvp nests, and under ``vmap`` batched
    primals and tangents run batched."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be "
                           "tuples")
    if len(primals) != len(tangents):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have "
                           "the same python structure")
    p_leaves, _ = flatten(list(primals))
    t_leaves, _ = flatten(list(tangents))
    if len(t_leaves) != len(p_leaves):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have "
                           "the same python structure")
    for p, t in zip(p_leaves, t_leaves):
        if isinstance(p, ember.Tensor) and tuple(p.shape) != tuple(t.shape):
            raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to "
                               f"have the same shape, got {tuple(p.shape)} and {tuple(t.shape)}")
    out, tan, aux, graph = _forward_pass(func, list(primals), {}, range(len(primals)),
                                         t_leaves, has_aux, "jvp")
    if has_aux:
        return out, tan, aux
    return out, tan


def _forward_pass(func, args, kwargs, nums, t_leaves, has_aux, name):
    """Run ``func`` once in a forward-AD level with the inputs at ``nums`` made dual
    (``t_leaves``: their flattened tangents); return ``(out, tangents, aux, graph)``.

    The duals are tracked by autograd (so reverse transforms inside ``func`` keep the
    tangents: forward-over-reverse), and the graph is kept only when someone outside can
    still differentiate the result."""
    graph = _needs_graph(list(args) + list(kwargs.values()) + [t_leaves])
    k = 0
    with _fwad.inner_level(), enable_grad(), _Nested():
        for i in nums:
            leaves, spec = flatten(args[i])
            duals = []
            for x in leaves:
                # not lifted to the running vmaps: a batched tangent on a shared primal
                # runs the primal once and the tangents batched
                x = _track(x, name, lift=False)
                duals.append(_fwad.make_dual(x, t_leaves[k]))
                k += 1
            args[i] = unflatten(duals, spec)
        out = func(*args, **kwargs)
        out, aux = _split_aux(out, has_aux, name)
        out_leaves, out_spec = flatten(out)
        prims, tans = [], []
        for o in out_leaves:
            if not isinstance(o, ember.Tensor):
                raise RuntimeError(f"{name}(f, ...)(*args): expected f(*args) to return only "
                                   f"tensors, got unsupported type {type(o).__name__}")
            p, t = _fwad.unpack_dual(o)
            prims.append(p if graph else p.detach())
            tans.append(ember.zeros_like(o).detach() if t is None else
                        (t if graph else t.detach()))
    return (unflatten(prims, out_spec), unflatten(tans, out_spec),
            _detach_tree(aux, graph) if has_aux else None, graph)


def _jacfwd(func, argnums, has_aux, randomness):
    """The Jacobian by forward mode: ``jvp`` mapped with ``vmap`` over the basis tangents
    (one batched forward pass: row ``k`` of the basis is the one-hot tangent of input
    element ``k``)."""
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), "jacfwd")
        tracked = [flatten(args[i]) for i in nums]
        flat_in = [x for leaves, _ in tracked for x in leaves]
        for x in flat_in:
            _track(x, "jacfwd", lift=False)  # the type checks
        sizes = [x.numel() for x in flat_in]
        n = sum(sizes)
        if n == 0:  # no input elements: one pass for the outputs' shapes
            zeros = [ember.zeros_like(x).detach() for x in flat_in]
            out, _, aux, graph = _forward_pass(func, list(args), kwargs, nums, zeros,
                                               has_aux, "jacfwd")
            cols = None
        else:
            eye = ember.eye(n, dtype=flat_in[0].dtype)
            basis, k = [], 0
            for x, m in zip(flat_in, sizes):
                basis.append(eye[:, k:k + m].to(x.dtype).reshape((n,) + tuple(x.shape)))
                k += m
            box = {}

            def push(*ts):
                o, tan, a, _ = _forward_pass(func, list(args), kwargs, nums, list(ts),
                                             has_aux, "jacfwd")
                o_leaves, box["out"] = flatten(o)
                a_leaves, box["aux"] = flatten(a)
                box["aux_leaves"] = a_leaves
                box["n"] = (len(o_leaves), [isinstance(v, ember.Tensor) for v in a_leaves])
                t_leaves = flatten(tan)[0]
                # the primal outputs come out of the vmap too: batched when func lifts
                # its inputs to the basis (reverse mode inside, as in hessian), the same
                # for every basis row
                return t_leaves + o_leaves + [v for v in a_leaves
                                              if isinstance(v, ember.Tensor)]
            from ember.func._vmap import vmap
            res = vmap(push, randomness=randomness)(*basis)
            n_out, is_t = box["n"]
            cols = res[:n_out]
            out = unflatten([v[0] for v in res[n_out:2 * n_out]], box["out"])
            rest = iter(res[2 * n_out:])
            aux = unflatten([next(rest)[0] if t else v
                             for v, t in zip(box["aux_leaves"], is_t)], box["aux"])
        out_leaves, out_spec = flatten(out)
        per_output = []
        for i, o in enumerate(out_leaves):
            blocks, k = [], 0
            for x, m in zip(flat_in, sizes):
                shape = tuple(o.shape) + tuple(x.shape)
                if cols is None or m == 0:
                    blocks.append(ember.zeros(shape, dtype=o.dtype))
                else:
                    col = cols[i].narrow(0, k, m)  # [m, *o.shape]
                    blocks.append(col.movedim(0, -1).reshape(shape))
                k += m
            per_output.append(_regroup(blocks, [(lv, sp) for lv, sp in tracked], argnums))
        jac = unflatten(per_output, out_spec)
        if has_aux:
            return jac, aux
        return jac
    return wrapper


def _rows_by_vmap(out_leaves, flat_in, tracked, argnums, graph):
    """Every row of the Jacobian in one backward pass: the vjp mapped with ``vmap`` over
    the one-hot cotangents of all output elements (the backward formulas run on the
    batch of cotangents through their batching rules)."""
    from ember.func._vmap import vmap
    sizes = [o.numel() for o in out_leaves]
    n = sum(sizes)
    cols = None
    if n:
        eye = ember.eye(n, dtype=out_leaves[0].dtype)
        basis, k = [], 0
        for o, m in zip(out_leaves, sizes):
            basis.append(eye.narrow(1, k, m).to(o.dtype).reshape((n,) + tuple(o.shape)))
            k += m
        cols = vmap(lambda *cts: tuple(_grads(out_leaves, flat_in, list(cts), graph)))(*basis)
    per_output, k = [], 0
    for o, m in zip(out_leaves, sizes):
        blocks = []
        for j, x in enumerate(flat_in):
            shape = tuple(o.shape) + tuple(x.shape)
            if cols is None or m == 0:
                blocks.append(ember.zeros(shape, dtype=x.dtype))
            else:
                blocks.append(cols[j].narrow(0, k, m).reshape(shape))
        per_output.append(_regroup(blocks, tracked, argnums))
        k += m
    return per_output


def _jacobian(func, argnums, has_aux, name):
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args), name)
        out, tracked, graph = _call_tracked(func, args, kwargs, nums, name)
        out, aux = _split_aux(out, has_aux, name)
        out_leaves, out_spec = flatten(out)
        flat_in = [x for leaves, _ in tracked for x in leaves]
        for o in out_leaves:
            if not isinstance(o, ember.Tensor):
                raise RuntimeError(f"{name}(f, ...)(*args): expected f(*args) to return only "
                                   f"tensors, got unsupported type {type(o).__name__}")
        if not _batched.levels:
            jac = unflatten(_rows_by_vmap(out_leaves, flat_in, tracked, argnums, graph),
                            out_spec)
            if has_aux:
                return jac, _detach_tree(aux, graph)
            return jac
        per_output = []
        for o in out_leaves:
            rows = []
            # one backward pass per output element, seeded with a one-hot cotangent
            for k in range(o.numel()):
                seed = ember.zeros(o.numel(), dtype=o.dtype)
                seed[k] = 1
                rows.append(_grads([o], flat_in, [seed.reshape(o.shape)], graph))
            blocks = []
            for j, x in enumerate(flat_in):
                if rows:
                    col = ember.stack([r[j] for r in rows]).reshape(tuple(o.shape) + tuple(x.shape))
                else:
                    col = ember.zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype)
                blocks.append(col)
            per_output.append(_regroup(blocks, tracked, argnums))
        jac = unflatten(per_output, out_spec)
        if has_aux:
            return jac, _detach_tree(aux, graph)
        return jac
    return wrapper


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: the Jacobian of ``func`` w.r.t. ``argnums`` by reverse mode: the
    vjp mapped with ``vmap`` over the one-hot cotangents, one batched backward pass
    (inside another ``vmap`` or ``jacfwd``, one backward per output element, each batched
    at the running levels).  ``chunk_size`` is accepted and has no effect."""
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")
    return _jacobian(func, argnums, has_aux, "jacrev")


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the Jacobian of ``func`` w.r.t. ``argnums`` by forward mode:
    ``jvp`` under ``vmap`` over the one-hot basis tangents, one batched forward pass
    (cheaper than ``jacrev`` when inputs are fewer than outputs). ``randomness`` is the
    basis vmap's."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    return _jacfwd(func, argnums, has_aux, randomness)


def hessian(func, argnums=0):
    """torch.func.hessian: ``jacfwd(jacrev(func, argnums), argnums)``, forward-over-reverse:
    the reverse-mode gradient carries the forward tangents through its backward pass."""
    return jacfwd(jacrev(func, argnums), argnums)


def linearize(func, *primals):
    """torch.func.linearize: ``(func(*primals), jvp_fn)``; each ``jvp_fn(*tangents)`` call
    reruns ``func`` in forward mode (ember keeps no linearized graph)."""
    out = func(*primals)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]
    return _detach_tree(out, _needs_graph(primals)), jvp_fn
