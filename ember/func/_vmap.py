"""torch.func.vmap on ember.

Two strategies, chosen per call:

* **one batched call** — when every op that ``func`` runs on one sample is *batch
  transparent* (``_TRANSPARENT`` below: elementwise ops, ``matmul``/``linear`` with the
  batched operand on the left), the batch dim can simply ride along as a leading dim, so
  ``func`` runs once on the whole batch.  The ops are read from the autograd graph of one
  per-sample call, and the batched result is checked against the per-sample results of the
  first and the last sample (shape and values) before it is used; any mismatch or error
  falls back to the loop.
* **per-sample loop** — otherwise ``func`` runs on each sample and the results are stacked
  (a warning names the ops without a rule, once per set of ops).  ``vmap(grad(f))`` always
  takes this path (a gradient is not batch transparent: the batched call would sum the
  per-sample losses), so per-sample gradients are exact but cost one backward per sample.
"""
import warnings

import ember
from ember.autograd.grad_mode import enable_grad
from ember.func._tree import flatten, unflatten

# autograd node names (without the BackwardN suffix) whose forward is batch transparent
# when the batch rides as a leading dim on inputs that are batched
_TRANSPARENT = frozenset("""
Add Sub Mul Div Neg Exp Exp2 Expm1 Log Log1p Log2 Tanh Sigmoid Relu Gelu Silu Elu LeakyRelu
Softplus Pow Sqrt Rsqrt Sin Cos Tan Abs Clamp ClampMin ClampMax Where Maximum Minimum
Reciprocal Square Erf Hardtanh Matmul Addmm Mm Mv ToCopy Clone Alias Sign
""".split())
_warned = set()


def _in_dims_tree(in_dims, args):
    if isinstance(in_dims, int) or in_dims is None:
        return [in_dims] * len(args)
    if not isinstance(in_dims, (tuple, list)) or len(in_dims) != len(args):
        raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                         "compatible with the structure of `inputs`. in_dims has structure "
                         f"{in_dims} but inputs has {len(args)} arguments")
    return list(in_dims)


def _leaf_dims(args, in_dims):
    """Flatten args and give every leaf its batch dim (None: not batched)."""
    leaves, spec = flatten(list(args))
    dims = []
    for a, d in zip(args, _in_dims_tree(in_dims, args)):
        sub, _ = flatten(a)
        if isinstance(d, (tuple, list, dict)):
            dsub, _ = flatten(d)
            if len(dsub) != len(sub):
                raise ValueError("vmap: in_dims is not compatible with the structure of "
                                 "`inputs`")
            dims.extend(dsub)
        else:
            dims.extend([d] * len(sub))
    return leaves, spec, dims


def _batch_size(leaves, dims):
    sizes = set()
    for x, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(x, ember.Tensor):
            raise ValueError(f"vmap: Got in_dim={d} for an input but the input is of type "
                             f"{type(x).__name__}. We cannot vmap over non-Tensor arguments")
        if not -x.dim() <= d < max(x.dim(), 1) or x.dim() == 0:
            raise ValueError(f"vmap: Got in_dim={d} for some input, but that input is a Tensor "
                             f"of dimensionality {x.dim()} so expected in_dim to satisfy "
                             f"-{x.dim()} <= in_dim < {x.dim()}.")
        sizes.add(x.shape[d])
    if not sizes:
        raise ValueError("vmap: at least one input must be batched (in_dims all None)")
    if len(sizes) > 1:
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sorted(sizes)} for the mapped dimension")
    return sizes.pop()


def _stack_outputs(outs, out_dims):
    spec = None
    columns = []
    for o in outs:
        leaves, spec = flatten(o)
        columns.append(leaves)
    n = len(columns[0])
    od = [out_dims] * n if isinstance(out_dims, int) or out_dims is None else flatten(out_dims)[0]
    if len(od) != n:
        raise ValueError("vmap: out_dims is not compatible with the structure of the outputs")
    stacked = []
    for j in range(n):
        col = [c[j] for c in columns]
        if not isinstance(col[0], ember.Tensor):
            raise ValueError("vmap: `func` must only return Tensors, got type "
                             f"{type(col[0]).__name__}")
        if od[j] is None:
            stacked.append(col[0])
        else:
            stacked.append(ember.stack(col, dim=od[j]))
    return unflatten(stacked, spec)


def _node_names(outs, probes):
    """Names of the autograd nodes on a path from a batched input (one of ``probes``) to an
    output: ops that only touch unbatched tensors do not matter to batching."""
    ids = {id(p) for p in probes}
    memo = {}

    def reaches(node):
        if node is None:
            return False
        if id(node) not in memo:
            memo[id(node)] = False  # the graph is a DAG; this only guards re-entry
            if type(node).__name__ == "AccumulateGrad":
                memo[id(node)] = id(getattr(node, "variable", None)) in ids
            else:
                memo[id(node)] = any([reaches(n) for n, _ in node.next_functions])
        return memo[id(node)]

    names, seen = set(), set()
    stack = [t.grad_fn for t in flatten(outs)[0]
             if isinstance(t, ember.Tensor) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen or not reaches(node):
            continue
        seen.add(id(node))
        name = type(node).__name__
        if name != "AccumulateGrad":
            names.add(name.rstrip("0123456789").removesuffix("Backward"))
        stack.extend(n for n, _ in getattr(node, "next_functions", ()))
    return names


def _sample(leaves, dims, b):
    return [x if d is None else x.select(d, b) for x, d in zip(leaves, dims)]


def _close(a, b):
    la, _ = flatten(a)
    lb, _ = flatten(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if not (isinstance(x, ember.Tensor) and isinstance(y, ember.Tensor)):
            return False
        if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
            return False
        if not ember.allclose(x.detach(), y.detach(), rtol=1e-5, atol=1e-6, equal_nan=True):
            return False
    return True


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.func.vmap: map ``func`` over a batch dim of its inputs (``in_dims``: an int or
    None per argument, or a matching pytree), placing the batch dim of each output at
    ``out_dims``.  ``randomness``: 'error' raises if ``func`` draws random numbers,
    'different' gives each sample its own draws, 'same' gives every sample the same ones.
    See the module docstring for how the batched result is computed."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    def wrapper(*args, **kwargs):
        leaves, spec, dims = _leaf_dims(args, in_dims)
        B = _batch_size(leaves, dims)
        rng = ember.get_rng_state()

        def call(b):
            if randomness == "same":
                ember.set_rng_state(rng)
            before = ember.get_rng_state() if randomness == "error" else None
            out = func(*unflatten(_sample(leaves, dims, b), spec), **kwargs)
            if before is not None and not ember.equal(before, ember.get_rng_state()):
                raise RuntimeError("vmap: called random operation while in randomness error "
                                   "mode. Please either use the 'same' or 'different' "
                                   "randomness flags on vmap or perform the randomness "
                                   "operation out of vmap")
            return out

        first = call(0)
        fast = _try_batched(func, leaves, spec, dims, kwargs, B, first, call, out_dims,
                            randomness)
        if fast is not None:
            return fast
        outs = [first] + [call(b) for b in range(1, B)]
        return _stack_outputs(outs, out_dims)
    return wrapper


def _try_batched(func, leaves, spec, dims, kwargs, B, first, call, out_dims, randomness):
    """The one-call strategy, or None when it does not apply (after warning once)."""
    if randomness != "error":
        return None  # random draws are not batch transparent
    # read the ops of one sample from its autograd graph (inputs made to require grad)
    probe, probes = [], []
    for x, d in zip(_sample(leaves, dims, 0), dims):
        if isinstance(x, ember.Tensor):
            x = x.detach()
            if d is not None and x.is_floating_point():
                x.requires_grad_(True)
                probes.append(x)
        probe.append(x)
    try:
        with enable_grad():
            names = _node_names(func(*unflatten(probe, spec), **kwargs), probes)
    except Exception:
        names = {"<not traceable>"}
    missing = sorted(names - _TRANSPARENT)
    if not missing and names:
        moved = [x if d is None else x.movedim(d, 0) for x, d in zip(leaves, dims)]
        try:
            out = func(*unflatten(moved, spec), **kwargs)
            o_leaves, o_spec = flatten(out)
            if all(isinstance(o, ember.Tensor) and o.dim() > 0 and o.shape[0] == B
                   for o in o_leaves):
                sample = lambda b: unflatten([o[b] for o in o_leaves], o_spec)  # noqa: E731
                if _close(sample(0), first) and (B == 1 or _close(sample(B - 1), call(B - 1))):
                    od = ([out_dims] * len(o_leaves) if isinstance(out_dims, int)
                          else flatten(out_dims)[0])
                    if len(od) == len(o_leaves) and all(isinstance(d, int) for d in od):
                        return unflatten([o.movedim(0, d) for o, d in zip(o_leaves, od)],
                                         o_spec)
        except Exception:
            pass
        why = ("the one batched call of ops " + ", ".join(sorted(names))
               + " did not reproduce the per-sample results")
    else:
        why = "ember has no batching rule for " + ", ".join(missing)
    if why not in _warned:
        _warned.add(why)
        warnings.warn(f"vmap: {why}; falling back to a per-sample loop (exact, but one call "
                      "per sample)", stacklevel=3)
    return None
