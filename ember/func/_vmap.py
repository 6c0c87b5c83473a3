"""torch.func.vmap on ember: one batched call through batching rules.

``func`` runs once, on batched tensors (``ember/func/_batched.py``): every op it reaches
runs its batching rule (``cls.batch``, shapes in ``ember/ops/_batch.py``) on the whole
batch.  Transforms compose through the same tensors: ``grad`` inside ``vmap`` lifts the
inputs it differentiates to the batch and runs one backward over the batched graph
(``_batched.grads``), nested ``vmap`` calls stack levels.  An op without a rule (or code
that needs a batched tensor's values, such as ``.item()``) makes the call start again as
a per-sample loop, with one warning per op naming it.
"""
import functools
import warnings

from ember import _core as ember
from ember.func import _batched as _b
from ember.func._tree import flatten, unflatten

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


def _sample(leaves, dims, b):
    return [x if d is None else x.select(d, b) for x, d in zip(leaves, dims)]


def _out_dims(out_dims, n):
    od = [out_dims] * n if isinstance(out_dims, int) or out_dims is None else flatten(out_dims)[0]
    if len(od) != n:
        raise ValueError("vmap: out_dims is not compatible with the structure of the outputs")
    return od


def _check_leaf(o):
    if not isinstance(o, ember.Tensor):
        raise ValueError("vmap: `func` must only return Tensors, got type "
                         f"{type(o).__name__}")


def _unwrap_outputs(out, lv, out_dims):
    leaves, spec = flatten(out)
    res = []
    for o, d in zip(leaves, _out_dims(out_dims, len(leaves))):
        _check_leaf(o)
        v, batched = _b.unwrap(o, lv.id)
        if d is None:
            if batched:
                raise ValueError("vmap: out_dims=None for an output that depends on the "
                                 "batched inputs; only unbatched outputs can have out_dim None")
            res.append(o)
            continue
        n = o.dim() + 1
        if not -n <= d < n:
            raise IndexError(f"vmap: out_dim {d} is out of range for an output of "
                             f"{o.dim()} dims (per sample)")
        d %= n
        if batched:
            res.append(v if d == 0 else v.movedim(0, d))
        else:
            # an output that does not depend on the batch is the same for every sample
            res.append(o.unsqueeze(d).expand(tuple(o.shape[:d]) + (lv.size,)
                                             + tuple(o.shape[d:])))
    return unflatten(res, spec)


class _Random(Exception):
    pass


def _batched_call(func, leaves, spec, dims, kwargs, B, out_dims, randomness, attempt):
    lv = _b.push(B, randomness)
    attempt.append(lv)
    try:
        lv.rng_state = _b.rng_state()
        wrapped = [x if d is None else _b.wrap(x if d % x.dim() == 0 else x.movedim(d, 0), lv.id)
                   for x, d in zip(leaves, dims)]
        out = func(*unflatten(wrapped, spec), **kwargs)
        if not _b._same_state(lv.rng_state):
            if randomness == "error":
                raise _Random()
            raise _b.NoRule("a random operation without a batching rule")
        return _unwrap_outputs(out, lv, out_dims)
    finally:
        _b.pop(lv)


_RANDOM_MSG = ("vmap: called random operation while in randomness error mode. Please either "
               "use the 'same' or 'different' randomness flags on vmap or perform the "
               "randomness operation out of vmap")


def _loop(func, leaves, spec, dims, kwargs, B, out_dims, randomness):
    rng = ember.get_rng_state()
    outs = []
    for b in range(B):
        if randomness == "same":
            ember.set_rng_state(rng)
        before = ember.get_rng_state() if randomness == "error" else None
        outs.append(func(*unflatten(_sample(leaves, dims, b), spec), **kwargs))
        if before is not None and not ember.equal(before, ember.get_rng_state()):
            raise RuntimeError(_RANDOM_MSG)
    return _stack_outputs(outs, out_dims)


def _run(func, leaves, spec, dims, kwargs, B, out_dims, randomness):
    attempt = []
    try:
        return _batched_call(func, leaves, spec, dims, kwargs, B, out_dims, randomness,
                             attempt)
    except _Random:
        raise _b.RandomnessError(_RANDOM_MSG) from None
    except (_b.RandomnessError, _b.Refused):
        raise
    except (_b.NoRule, NotImplementedError) as e:
        why = f"ember has no batching rule for {getattr(e, 'what', e)}"
        err = e
    except (ValueError, IndexError):
        raise
    except Exception as e:  # a failure of the batched call: the loop decides who is right
        why = f"the batched call failed ({type(e).__name__}: {e})"
        err = e
    if _b.levels:
        # inside an outer vmap the loop would see the outer batch: let it fall back too
        raise _b.NoRule(getattr(err, "what", why))
    if attempt:
        # the loop runs ``func`` again: what the failed batched call wrote is put back
        _b.undo_writes(attempt[0])
    from ember._tensor import _mode_with
    rec = _mode_with("unrecordable")  # a graph capture cannot replay a per-sample loop
    if rec is not None:
        rec.unrecordable(f"vmap's per-sample fallback loop ({why})")
    if why not in _warned:
        _warned.add(why)
        warnings.warn(f"vmap: {why}; falling back to a per-sample loop (exact, but one call "
                      "per sample)", stacklevel=4)
    return _loop(func, leaves, spec, dims, kwargs, B, out_dims, randomness)


def _cat_chunks(chunks, out_dims):
    cols, spec = [], None
    for c in chunks:
        leaves, spec = flatten(c)
        cols.append(leaves)
    od = _out_dims(out_dims, len(cols[0]))
    res = []
    for j, d in enumerate(od):
        col = [c[j] for c in cols]
        res.append(col[0] if d is None else ember.cat(col, dim=d))
    return unflatten(res, spec)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.func.vmap: map ``func`` over a batch dim of its inputs (``in_dims``: an int or
    None per argument, or a matching pytree), placing the batch dim of each output at
    ``out_dims``.  ``randomness``: 'error' raises if ``func`` draws random numbers,
    'different' gives each sample its own draws, 'same' gives every sample the same ones.
    ``chunk_size`` runs the batch in chunks of that many samples.

    >>> vmap(ember.dot)(ember.ones(3, 2), ember.ones(3, 2))
    tensor([2., 2., 2.])
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        leaves, spec, dims = _leaf_dims(args, in_dims)
        B = _batch_size(leaves, dims)
        if chunk_size is None or chunk_size >= B:
            return _run(func, leaves, spec, dims, kwargs, B, out_dims, randomness)
        chunks = []
        rng = ember.get_rng_state() if randomness == "same" else None
        for start in range(0, B, chunk_size):
            if rng is not None:
                ember.set_rng_state(rng)  # 'same': every chunk draws what the first drew
            n = min(chunk_size, B - start)
            part = [x if d is None else x.narrow(d, start, n) for x, d in zip(leaves, dims)]
            chunks.append(_run(func, part, spec, dims, kwargs, n, out_dims, randomness))
        return _cat_chunks(chunks, out_dims)
    return wrapper
