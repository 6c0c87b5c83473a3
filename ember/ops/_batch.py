"""The common shapes of vmap batching rules, for ops to declare on their class.

An op declares ``batch = _batch.elementwise`` (or another rule here or in
``ember.ops._batch_nn``) beside its ``jvp``; family base classes declare it once for
their subclasses (the unary base, the comparisons, the reductions over dims...).
``Primitive.batch`` is None: an op without a rule makes ``vmap`` fall back to its
per-sample loop, naming the op in a warning.  Ops that have no rule on purpose sit in
:data:`NO_BATCH_RULE` with the reason; ``tests/test_op_records.py`` checks that every
primitive is in one place or the other.

A rule ``rule(cls, lvl, args, params)`` is called by the vmap dispatcher
(``ember.func._batched``) for a call of the primitive ``cls`` where some argument is
batched at level ``lvl`` (the innermost level among the arguments).  It unwraps the
arguments of that level (the underlying tensor has the batch in dim 0), runs ordinary
ember ops on them -- usually ``cls`` itself with its dims shifted by one, or a reshape of
the batch into an existing dim -- and wraps the result at ``lvl``.  Arguments batched
only at outer levels stay wrapped: the ops a rule runs meet them and dispatch again.
A rule that cannot handle a call raises ``NoRule`` (the loop then runs instead).

The shapes:

- :func:`elementwise`: broadcasting ops; batched operands get ones after their batch dim
  up to the common per-sample rank (also right for ops whose batch dims broadcast).
- :func:`passthrough`: ops on trailing dims only (pooling windows, padding, triangles,
  NumPy's stacked linear algebra): the batch is one more leading dim.
- :func:`dim_rule` ``(pos)``: the argument at ``pos`` is a dim, a tuple of dims or None
  (reductions, scans, softmax, FFTs): the dims move past the batch.
- views and shapes (:func:`view`, :func:`permute`, :func:`expand`, ...), indexing
  (:func:`getitem`, :func:`gather`, :func:`scatter`...), joins (:func:`cat`,
  :func:`stack`, :func:`split`), and in ``_batch_nn``: matmul, linear, einsum, conv,
  attention, cross entropy, normalisation.

The batch may sit on any argument, weights included (``vmap`` over an ensemble, or
``grad`` inside ``vmap``, which batches the parameters it differentiates).
"""
import numpy as np

from ember._tensor import Tensor


def _b():
    # the batched-tensor helpers; imported when a rule runs (vmap sits above ops/)
    from ember.func import _batched
    return _batched


def _lnd(v, batched):
    """Logical ndim of an unwrapped argument."""
    return v.dim() - 1 if batched else v.dim()


def _to_rank(v, n_have, n_want):
    """Batched ``v`` reshaped to ``[B, 1 * (n_want - n_have), *logical]``."""
    if n_have == n_want:
        return v
    shape = tuple(v.shape)
    return v.reshape((shape[0],) + (1,) * (n_want - n_have) + shape[1:])


def _expand_batch(v, batched, B):
    """An unbatched ``v`` given the batch by expansion (a view)."""
    if batched:
        return v
    return v.unsqueeze(0).expand((B,) + tuple(v.shape))


def _size(lvl):
    return _b().level(lvl).size


def _wrap_out(out, lvl):
    wrap = _b().wrap
    if isinstance(out, tuple):
        return tuple(wrap(o, lvl) for o in out)
    return wrap(out, lvl)


def _only_first(cls, lvl, args):
    """The unwrapped first argument; NoRule if it is not batched or another one is."""
    b = _b()
    v, batched = b.unwrap(args[0], lvl)
    if not batched or any(b.unwrap(a, lvl)[1] for a in args[1:]):
        raise b.NoRule(f"{cls._op_name} with a batched argument other than its input")
    return v


# ----- elementwise (broadcasting) ---------------------------------------------------------
def elementwise(cls, lvl, args, params):
    """Broadcasting ops: batched operands get ones after the batch dim up to the common
    per-sample rank, unbatched ones broadcast from the right as they would per sample."""
    b = _b()
    unwrap = b.unwrap
    un = [unwrap(a, lvl) for a in args]
    tensors = [(v, bt) for v, bt in un if isinstance(v, Tensor)]
    n = max((_lnd(v, bt) for v, bt in tensors), default=0)
    new = []
    for v, bt in un:
        if bt:
            v = _to_rank(v, v.dim() - 1, n)
        new.append(v)
    if len(tensors) == 2:
        new = _promote_zero_dim(new, tensors)
    pk = {}
    for k, v in params.items():
        pv, pb = unwrap(v, lvl)
        pk[k] = _to_rank(pv, pv.dim() - 1, n) if pb else pv
    return b.wrap(cls.apply(*new, **pk), lvl)


def _promote_zero_dim(new, tensors):
    """A batched per-sample 0-dim operand is 1-dim underneath, which would change the
    result dtype under PyTorch's promotion rules (a 0-dim tensor does not lift a
    dimensioned one's dtype within a category): cast to the per-sample result dtype."""
    (a, ab), (b, bb) = tensors
    if a.dtype == b.dtype or not ((ab and a.dim() == 1) or (bb and b.dim() == 1)):
        return new
    from ember.backend import dtypes
    from ember.ops._util import _promote_np
    r = _promote_np(a._data.dtype, _lnd(a, ab) == 0, b._data.dtype, _lnd(b, bb) == 0)
    dt = dtypes.FROM_NP[r]
    return [v.to(dt) if isinstance(v, Tensor) and v.dtype != dt and v.is_floating_point()
            else v for v in new]


# ----- ops on trailing dims: the batch rides along in front ------------------------------
def _without_x(cls, args):
    """A pooling adjoint's arguments without the pooled input it may take last (an edge
    for a zero second derivative, read by no forward: ``pooling._adjoint_in_x``)."""
    n = getattr(cls, "n_args", None)
    return args[:n] if n is not None else args


def passthrough(cls, lvl, args, params):
    """Ops that act on trailing dims only (pooling windows, padding, triangles, NumPy's
    stacked linear algebra): the batch is one more leading dim."""
    args = _without_x(cls, args)
    v = _only_first(cls, lvl, args)
    if any(_b().unwrap(a, lvl)[1] for a in params.values()):
        raise _b().NoRule(f"{cls._op_name} with a batched argument other than its input")
    return _wrap_out(cls.apply(v, *args[1:], **params), lvl)


def pool_positions(cls, lvl, args, params):
    """Max pooling's adjoints (``(g, arg, geom)``, ``arg`` the raw array of each window's
    max position): trailing dims only, so the batch is one more leading dim; a per-sample
    ``arg`` (the pooling ran outside the vmap) is read for every sample (a stride-0 view)."""
    args = _without_x(cls, args)
    v = _only_first(cls, lvl, args)
    arg = args[1]
    if isinstance(arg, Tensor) or not isinstance(arg, np.ndarray):
        raise _b().NoRule(f"{cls._op_name} with positions that are not a plain array")
    if arg.ndim == v.dim() - 1:
        arg = np.broadcast_to(arg, (v.shape[0],) + arg.shape)
    return _b().wrap(cls.apply(v, arg, *args[2:], **params), lvl)


def fold_into_n(cls, lvl, args, params):
    """Ops on ``(N, C, *S)`` whose samples are independent (im2col, col2im): the batch
    joins N, and leaves it again in the result."""
    v = _only_first(cls, lvl, args)
    s = tuple(v.shape)
    out = cls.apply(v.reshape((s[0] * s[1],) + s[2:]), *args[1:], **params)
    return _b().wrap(out.reshape((s[0], s[1]) + tuple(out.shape[1:])), lvl)


# ----- dims shifted by one ----------------------------------------------------------------
def _shift(d, n):
    """Per-sample dim ``d`` (of ``n`` dims) as a dim of the underlying tensor."""
    if n == 0:
        return 1 if d in (0, -1) else d + 1
    return d % n + 1


def _shift_axes(axes, n):
    if n == 0 and not isinstance(axes, int):
        return ()  # a per-sample scalar: nothing to reduce over
    if axes is None:
        return tuple(range(1, n + 1))
    if isinstance(axes, int):
        return _shift(axes, n)
    return tuple(_shift(a, n) for a in axes)


def dim_rule(pos, all_if_none=True):
    """A rule for ops whose argument at ``pos`` is a dim, a tuple of dims or None (all
    dims; with ``all_if_none=False``, None means "over the flattened sample", as for
    ``argmax`` and ``prod``)."""
    def rule(cls, lvl, args, params):
        v = _only_first(cls, lvl, args)
        n = v.dim() - 1
        args = list(args)
        args[0] = v
        if pos < len(args):
            d = args[pos]
            if d is None and not all_if_none:
                return _flat_none(cls, lvl, v, args, pos)
            if n == 0 and isinstance(d, int):
                return _scalar_dim(cls, lvl, v, args, pos, params)
            args[pos] = _shift_axes(d, n)
        return _wrap_out(cls.apply(*args, **params), lvl)
    rule.__doc__ = f"The dims at argument {pos} move past the batch."
    return rule


def _scalar_dim(cls, lvl, v, args, pos, params):
    """A dim of a 0-d sample (0 or -1, as PyTorch allows): the underlying ``(B,)`` has
    no dim past the batch, so each sample becomes ``(1,)`` for the call and its result
    0-d again (dim 1 of a ``(B,)`` tensor would be out of range, or, under an outer
    level, silently the outer batch's dim)."""
    args[0] = v.unsqueeze(1)
    args[pos] = 1
    out = cls.apply(*args, **params)
    B = v.shape[0]
    fix = lambda o: o.reshape(B) if isinstance(o, Tensor) and o.dim() == 2 else o  # noqa: E731
    return _wrap_out(tuple(fix(o) for o in out) if isinstance(out, tuple) else fix(out), lvl)


def _flat_none(cls, lvl, v, args, pos):
    """``dim=None`` meaning "over the flattened tensor" (argmax, prod): flatten each
    sample first."""
    B = v.shape[0]
    args[0] = v.reshape(B, -1)
    args[pos] = 1
    keep = len(args) > pos + 1 and args[pos + 1] is True
    out = cls.apply(*args)
    if keep:
        out = out.reshape((B,) + (1,) * (v.dim() - 1))
    return _b().wrap(out, lvl)


def all_reduce(target):
    """``max()``/``min()`` over a whole sample: ``target()`` (the class of the reduction
    over given dims, looked up when the rule runs) over all of the sample's dims."""
    def rule(cls, lvl, args, params):
        v = _only_first(cls, lvl, args)
        return _b().wrap(target().apply(v, tuple(range(1, v.dim())), False), lvl)
    return rule


def vector_norm(cls, lvl, args, params):
    """``(x, p, dims, keepdim)``: the dims move past the batch."""
    x, p, axes, keepdim = args
    v = _only_first(cls, lvl, args)
    return _b().wrap(cls.apply(v, p, _shift_axes(axes, v.dim() - 1), keepdim), lvl)


# ----- views and shapes -------------------------------------------------------------------
def view(cls, lvl, args, params):
    """``(x, shape)``: the batch goes in front of the shape."""
    v = _only_first(cls, lvl, args)
    shape = (v.shape[0],) + tuple(args[1])
    try:
        return _b().wrap(cls.apply(v, shape), lvl)
    except RuntimeError:
        # the batch dim came from a movedim and the samples are not laid out for a view:
        # a reshape copies (PyTorch's vmap does the same for non-viewable batches)
        from ember.ops.shape import ReshapeCopy
        return _b().wrap(ReshapeCopy.apply(v, shape), lvl)


def _reach(shape, strides, offset):
    """The storage positions ``[first, last]`` a strided window reads, None if empty."""
    if 0 in shape:
        return None
    return offset, offset + sum((n - 1) * s for n, s in zip(shape, strides))


def storage_as_strided(cls, lvl, args, params):
    """``torch.as_strided(x, size, stride, offset)`` as PyTorch's vmap reads it: one window
    on the storage under the batch, with the batch's own stride in front of the sample's
    strides, so that sample ``b`` starts ``b`` batch strides after the offset (an explicit
    offset counts from the storage's start, so it is sample 0's).  The per-sample loop
    would read every sample's window from sample 0's storage place."""
    v = _only_first(cls, lvl, args)
    x, shape, strides, offset = args
    bottom = _b().bottom(v)
    k = bottom.dim() - v.dim()
    step = bottom.stride(k)  # the batch dim's stride, in the storage
    # PyTorch's check: each sample's window lies in the memory of that sample, else
    # samples would read each other's values
    start = bottom.storage_offset()
    have = _reach(tuple(v.shape[1:]), bottom.stride()[k + 1:], start)
    want = _reach(tuple(shape), tuple(strides), start if offset is None else offset)
    if want is not None and (have is None or want[0] < have[0] or want[1] > have[1]):
        def show(r):
            return "[]" if r is None else f"[{r[0]}, {r[1] + 1}]"
        raise _b().Refused(
            f"result = tensor.as_strided({list(shape)}, {list(strides)}, {offset}) can access "
            f"memory outside of `tensor`. `result` can access some memory in range "
            f"{show(want)}, but `tensor` can only access some memory in range {show(have)}. "
            "This is not supported inside of vmap, please try to rewrite the `as_strided` "
            "call as a sequence of PyTorch view operations")
    return _b().wrap(cls.apply(v, (v.shape[0],) + tuple(shape), (step,) + tuple(strides),
                               offset), lvl)


def reshape_copy(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    return _b().wrap(cls.apply(v, (v.shape[0],) + tuple(args[1])), lvl)


def permute(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    return _b().wrap(cls.apply(v, (0,) + tuple(_shift(d, n) for d in args[1])), lvl)


def transpose(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    return _b().wrap(cls.apply(v, _shift(args[1], n), _shift(args[2], n)), lvl)


def unsqueeze(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    return _b().wrap(cls.apply(v, args[1] % v.dim() + 1), lvl)


def squeeze(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    dims = range(n) if args[1] is None else args[1]  # (None: every dim but the batch's)
    return _b().wrap(cls.apply(v, tuple(_shift(d, n) for d in dims)), lvl)


def expand(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    shape = tuple(args[1])
    v = _to_rank(v, v.dim() - 1, len(shape))
    shape = tuple(v.shape[i + 1] if s == -1 else s for i, s in enumerate(shape))
    return _b().wrap(cls.apply(v, (v.shape[0],) + shape), lvl)


def sum_to_size(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    shape = tuple(args[1])
    extra = v.dim() - 1 - len(shape)
    if extra > 0:
        v = v.sum(tuple(range(1, 1 + extra)))
    return _b().wrap(cls.apply(v, (v.shape[0],) + shape), lvl)


def flip(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    d = args[1]
    return _b().wrap(cls.apply(v, _shift(d, n) if isinstance(d, int) else
                               tuple(_shift(a, n) for a in d)), lvl)


def roll(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    x, shifts, dims = args
    n = v.dim() - 1
    if dims is None or dims == () or dims == []:
        B = v.shape[0]
        out = cls.apply(v.reshape(B, -1), shifts, 1)
        return _b().wrap(out.reshape(tuple(v.shape)), lvl)
    dims = _shift(dims, n) if isinstance(dims, int) else tuple(_shift(d, n) for d in dims)
    return _b().wrap(cls.apply(v, shifts, dims), lvl)


def unfold(cls, lvl, args, params):
    """``Tensor.unfold(dim, size, step)``."""
    v = _only_first(cls, lvl, args)
    x, d, size, step = args
    return _b().wrap(cls.apply(v, _shift(d, v.dim() - 1), size, step), lvl)


def repeat(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    reps = tuple(args[1])
    v = _to_rank(v, v.dim() - 1, len(reps))
    return _b().wrap(cls.apply(v, (1,) + reps), lvl)


def diagonal(cls, lvl, args, params):
    """Diagonals over the dims in the last two arguments."""
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    args = list(args)
    args[0] = v
    args[-2], args[-1] = _shift(args[-2], n), _shift(args[-1], n)
    return _b().wrap(cls.apply(*args), lvl)


def diag_embed_shaped(cls, lvl, args, params):
    """``(x, out_shape, d1, d2)`` with dims of the output (non-negative)."""
    v = _only_first(cls, lvl, args)
    x, shape, d1, d2 = args
    return _b().wrap(cls.apply(v, (v.shape[0],) + tuple(shape), d1 + 1, d2 + 1), lvl)


def diag_embed(cls, lvl, args, params):
    """``(x, offset, d1, d2)`` with dims of the output (non-negative)."""
    v = _only_first(cls, lvl, args)
    x, offset, d1, d2 = args
    return _b().wrap(cls.apply(v, offset, d1 + 1, d2 + 1), lvl)


# ----- joins and splits -------------------------------------------------------------------
def _join(cls, lvl, args, params, stack):
    B = _size(lvl)
    un = [_b().unwrap(a, lvl) for a in args]
    parts = [_expand_batch(v, bt, B) for v, bt in un]
    dim = params["dim"]
    n = max(p.dim() - 1 for p in parts)
    if stack:
        dim = dim % (n + 1) + 1
    else:
        dim = _shift(dim, n)
        parts = [p for p in parts if not (p.dim() == 2 and p.shape[1] == 0)] or parts
    return _b().wrap(cls.apply(*parts, **dict(params, dim=dim)), lvl)


def cat(cls, lvl, args, params):
    """cat: unbatched parts get the batch by expansion; the dim moves by one."""
    return _join(cls, lvl, args, params, False)


def stack(cls, lvl, args, params):
    """stack: unbatched parts get the batch by expansion; the new dim goes after it."""
    return _join(cls, lvl, args, params, True)


def split(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    x, sizes, dim = args
    return _wrap_out(cls.apply(v, sizes, _shift(dim, v.dim() - 1)), lvl)


def unbind(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    return _wrap_out(cls.apply(v, _shift(args[1], v.dim() - 1)), lvl)


# ----- indexing ---------------------------------------------------------------------------
def getitem(cls, lvl, args, params):
    """Basic indexing: a full slice for the batch in front of the key."""
    v = _only_first(cls, lvl, args)
    return _b().wrap(cls.apply(v, (slice(None),) + tuple(args[1])), lvl)


def index_adjoint(cls, lvl, args, params):
    """The adjoint of indexing (``g`` written into zeros of ``shape`` at ``idx``): a full
    slice for the batch in front of the key and of the shape.  With advanced indices
    apart from each other NumPy moves their dims in front of the batch: no rule."""
    g, shape, idx, accumulate = args
    v = _only_first(cls, lvl, args)
    key = tuple(idx) if isinstance(idx, tuple) else (idx,)
    # with index arrays (``accumulate``) an int is an advanced index too (NumPy's rule)
    pos = [i for i, k in enumerate(key) if not isinstance(k, (slice, type(None), type(...)))
           and (accumulate or not np.isscalar(k))]
    if pos and pos != list(range(pos[0], pos[-1] + 1)):
        raise _b().NoRule(f"{cls._op_name} with advanced indices apart from each other")
    return _b().wrap(cls.apply(v, (_size(lvl),) + tuple(shape), (slice(None),) + key,
                               accumulate), lvl)


def getitem_advanced(cls, lvl, args, params):
    """``x[adv]``: ``adv`` holds full slices and int index arrays (a batched index is a
    batched tensor's array).  Index arrays next to each other keep their place in the
    result (NumPy's rule), so a leading full slice for the batch is enough; otherwise,
    or when an index is batched, an ``arange`` over the batch joins the indices and the
    block of index dims is moved back where a single sample puts it."""
    b = _b()
    x, idx = args
    v, vb = b.unwrap(x, lvl)
    B = _size(lvl)
    items = []
    any_batched = False
    for it in idx:
        d, ib = b.unwrap(_as_tensor(it), lvl) if not isinstance(it, slice) else (it, False)
        any_batched = any_batched or ib
        items.append((d, ib))
    v = _expand_batch(v, vb, B)
    pos = [i for i, (d, _) in enumerate(items) if not isinstance(d, slice)]
    adjacent = pos == list(range(pos[0], pos[-1] + 1))
    if not any_batched and adjacent:
        key = (slice(None),) + tuple(d if isinstance(d, slice) else d._data for d, _ in items)
        return b.wrap(cls.apply(v, key), lvl)
    k = max(_lnd(d, ib) for d, ib in items if not isinstance(d, slice))
    key = [np.arange(B).reshape((B,) + (1,) * k)]
    for d, ib in items:
        if isinstance(d, slice):
            key.append(d)
        else:
            key.append((_to_rank(d, d.dim() - 1, k) if ib else d)._data)
    out = cls.apply(v, tuple(key))
    if adjacent and pos[0] > 0:
        # NumPy put the index dims (after the batch) in front; a sample has them at pos[0]
        p = pos[0]
        order = [0] + list(range(1 + k, 1 + k + p)) + list(range(1, 1 + k)) + \
            list(range(1 + k + p, out.dim()))
        out = out.permute(order)
    return b.wrap(out, lvl)


def _as_tensor(a):
    from ember._tensor import _make
    b = _b()
    if type(a) is b.BArr:
        return b.wrap(a.value, a.level)
    return a if isinstance(a, Tensor) else _make(a)


def _raw(a, lvl):
    """An index argument passed as an array (or as a tensor, as ``gather`` passes it):
    ``(array underneath, batched)``."""
    b = _b()
    if isinstance(a, Tensor):
        a = a._data
    if type(a) is b.BArr:
        if a.level != lvl or type(a.value._data) is b.BArr:
            raise b.NoRule("an index batched at several vmap levels")
        return a.value._data, True
    return a, False


def gather(cls, lvl, args, params):
    """``(x, index array, dim)``: the index gets the batch too (broadcast if shared);
    keyword parameters pass through."""
    b = _b()
    x, idx, dim = args
    B = _size(lvl)
    v, vb = b.unwrap(x, lvl)
    i, ib = _raw(idx, lvl)
    n = _lnd(v, vb)
    if not ib:
        i = np.broadcast_to(i, (B,) + i.shape)
    return b.wrap(cls.apply(_expand_batch(v, vb, B), np.ascontiguousarray(i), _shift(dim, n),
                            **params), lvl)


def _scatter(cls, lvl, args, params, per_row):
    b = _b()
    x, src, idx, dim = args[:4]
    B = _size(lvl)
    v, vb = b.unwrap(x, lvl)
    sv, sb = b.unwrap(src, lvl)
    i, ib = _raw(idx, lvl)
    n = _lnd(v, vb)
    if ib and not per_row:
        raise b.NoRule(f"{cls._op_name} with a batched index")
    if per_row:
        if not ib:
            i = np.broadcast_to(i, (B,) + i.shape)
        i = np.ascontiguousarray(i)
    if n == 0 and not per_row:
        return _scatter_scalar_sample(cls, lvl, v, vb, sv, sb, i, args, params)
    if isinstance(sv, Tensor) and (sb or per_row or sv.dim() > 0):
        sv = _expand_batch(sv, sb, B)
    return b.wrap(cls.apply(_expand_batch(v, vb, B).clone(), sv, i, _shift(dim, n), *args[4:],
                            **params), lvl)


def _scatter_scalar_sample(cls, lvl, v, vb, sv, sb, i, args, params):
    """index_add/copy/fill into 0-d samples (one element along dim 0, as PyTorch allows):
    the underlying ``(B,)`` has no dim past the batch, so each sample becomes ``(1,)`` for
    the call (its source too, unless it is a fill's shared value, which broadcasts), and
    the result is 0-d again."""
    B = _size(lvl)
    if isinstance(sv, Tensor) and (sb or not cls.shared_value_broadcasts):
        sv = _expand_batch(sv, sb, B).reshape(B, 1)
    out = cls.apply(_expand_batch(v, vb, B).reshape(B, 1).clone(), sv, i, 1, *args[4:],
                    **params)
    return _b().wrap(out.reshape(B), lvl)


def scatter(cls, lvl, args, params):
    """scatter/scatter_add/scatter_reduce ``(x, src, index array, dim, ...)``: the
    written tensor, the source and the index get the batch; the dim moves by one."""
    return _scatter(cls, lvl, args, params, True)


def index_scatter(cls, lvl, args, params):
    """index_add/copy/fill ``(x, src, 1-d index, dim)``: the written tensor and the
    source get the batch; the dim moves by one (a batched index has no rule)."""
    return _scatter(cls, lvl, args, params, False)


def index_select(cls, lvl, args, params):
    b = _b()
    x, idx, dim = args
    v, vb = b.unwrap(x, lvl)
    if not vb or b.unwrap(idx, lvl)[1]:
        raise b.NoRule(f"{cls._op_name} with a batched index")
    return b.wrap(cls.apply(v, idx, _shift(dim, v.dim() - 1)), lvl)


def refuse(message):
    """The rule of an op PyTorch's vmap refuses, where ember's per-sample loop would not
    give what the op means for a batch: raise ``message``."""
    def rule(cls, lvl, args, params):
        raise _b().Refused(message)
    return rule


# ----- ops without a rule -----------------------------------------------------------------
_RANDOM = "random: runs per sample, so each sample draws its own values"
_NOT_YET = "no rule written yet: vmap runs the per-sample loop"
_BACKWARD = "a backward helper (backward runs on the unbatched graph); no rule written yet"
_BASE = "a base class, never applied itself: its subclasses declare their rules"


def _no_batch_rule():
    from ember.ops import (
        _views,
        conv,
        ctc,
        diagonals,
        extrema,
        flat_index,
        indexing,
        linalg_add,
        linalg_eig,
        losses,
        masking,
        matmul_graph,
        pooling,
        rnn,
        rnn_graph,
        rnn_packing,
        sampling,
        scan,
        shape,
        sparse_ops,
    )
    from ember.ops import sampling as rnd
    from ember.ops._linalg_util import _SavesOutputs
    table = {
        rnd._Sample: _RANDOM,
        sampling.StandardGamma: _RANDOM,
        sampling.SampleDirichlet: _RANDOM,
        sampling.Dirichlet: _RANDOM,
        _views.ViewPrimitive: _BASE,
        _SavesOutputs: _BASE,
        rnn._Layer: _BASE,
        extrema._EvenAll: _BASE,
        _views.AsStrided: "strides of the storage: a per-sample stride does not describe "
                          "the batch",
        _views.AsStridedScatter: "strides of the storage: a per-sample stride does not "
                                 "describe the batch",
        _views.TakeFlat: "flat positions in a view's storage (writes through views); no "
                         "rule written yet",
        _views.PutFlat: "flat positions in a view's storage (writes through views); no "
                        "rule written yet",
        extrema._MedianAll: _NOT_YET,
        extrema._NanmedianAll: _NOT_YET,
        diagonals.DiagonalScatter: _NOT_YET,
        indexing.IndexPut: _NOT_YET, indexing.SetItemCopy: _NOT_YET,
        diagonals.SelectScatter: _NOT_YET, diagonals.SliceScatter: _NOT_YET,
        indexing.SetItemSlices: _NOT_YET,
        masking.MaskedScatter: _NOT_YET,
        ctc.CtcNll: _NOT_YET,
        losses.NllLoss: "vmap runs nll_loss's batched composite (ember.func._function_rules)",
        losses.NllLoss2d: "vmap runs nll_loss's batched composite "
                          "(ember.func._function_rules)",
        scan.GatherAlong: "its constant index array has the per-sample shape; no rule "
                          "written yet",
        scan.ScatterAddAlong: _BACKWARD,
        shape.UnfoldBackward: _BACKWARD,
        losses._NllLossBackward: _BACKWARD,
        losses._NllLoss2dBackward: _BACKWARD,
        conv.ConvWeight: _BACKWARD,
        linalg_eig._EigGrad: _BACKWARD,
        pooling.ScatterFlat: _BACKWARD,
        pooling.MaxUnpool: "takes positions as a raw index array; no rule written yet",
        pooling.MaxUnpool3D: "takes positions as a raw index array; no rule written yet",
        pooling.GatherFlat: "takes positions as a raw index array; no rule written yet",
        rnn_packing.PackPadded: "data-dependent output shape (packed rows)",
        rnn_packing.PadPacked: "packed sequences (a data-dependent layout); no rule written yet",
        rnn_packing.PadSequence: "data-dependent output shape (the longest sequence)",
        sparse_ops.FromDense: "sparse layouts are not batched by vmap",
        sparse_ops.Scale: "sparse layouts are not batched by vmap",
        sparse_ops.SparseGather: "sparse layouts are not batched by vmap",
        sparse_ops.SparseMmReduce: "sparse layouts are not batched by vmap",
        sparse_ops.SparsePack: "sparse layouts are not batched by vmap",
        sparse_ops.ToDense: "sparse layouts are not batched by vmap",
    }
    stack = [rnd._Sample]
    while stack:  # the sampling nodes (_random_ops makes one class per PyTorch node name)
        for c in stack.pop().__subclasses__():
            table[c] = _RANDOM
            stack.append(c)
    for c in (linalg_add._AddProduct, *linalg_add.ADD_PRODUCTS):
        table[c] = ("made only in eager mode to show PyTorch's one node; under vmap the "
                    "add* products run their composites, whose ops have rules")
    for c in (rnn.GRULayer, rnn.LSTMLayer, rnn.RNNReluLayer, rnn.RNNTanhLayer,
              rnn.MkldnnLSTMLayer):
        table[c] = "recurrent layers over packed rows; no rule written yet"
    for c in rnn_graph.FUSED_LAYERS:
        table[c] = ("made only in eager mode, under PyTorch's step nodes; under vmap the "
                    "recurrent layers run their own ops")
    for c in (matmul_graph.Addmm, matmul_graph.UnsafeView, matmul_graph.Trilinear):
        table[c] = ("made only in eager mode to show PyTorch's nodes; under vmap linear, "
                    "matmul and bilinear run their one-kernel ops, which have rules")
    for c in (flat_index.Take, flat_index.Put, flat_index.MaskedSelect, shape.NarrowCopy):
        table[c] = ("made only in eager mode to show PyTorch's node; under vmap take, put, "
                    "masked_select and narrow_copy run as index ops, which have rules")
    from ember.ops import composite_node
    table[composite_node.CompositeNode] = "a family base class: never recorded itself"
    for c in composite_node.nodes():
        table[c] = ("made only in eager mode to show PyTorch's node; under vmap the "
                    "composite's primitives run, which have rules")
    for c in (losses.MultiMarginLoss, losses.MultilabelMarginLoss):
        table[c] = _NOT_YET
    from ember.ops import adaptive_pooling
    for c in (adaptive_pooling.FractionalMaxPool, adaptive_pooling.FractionalMaxPool3D):
        table[c] = ("its windows come from the caller's random draw for the unbatched "
                    "shape: under vmap the loop runs the pooling per sample")
    from ember.ops import normalization_grad
    for c in (normalization_grad.LayerNormGrads, normalization_grad.BatchNormGrads,
              normalization_grad.BatchNormEvalGrads):
        table[c] = ("made only by a backward pass recording a graph outside any mode; "
                    "under vmap the norm's gradient formula runs in ops that have rules")
    table[normalization_grad._NormGrads] = "a family base class: never recorded itself"
    from ember.ops import activation_nodes, attention
    table[attention.AttentionGrads] = ("made only by a backward pass recording a graph "
                                       "outside any mode; under vmap attention's gradient "
                                       "formula runs in ops that have rules")
    table[activation_nodes.GeluGrad] = ("made only by a backward pass recording a graph "
                                        "outside any mode; under vmap GELU's gradient runs "
                                        "its composite's ops, which have rules")
    return table


def __getattr__(name):
    # NO_BATCH_RULE names classes of many op modules, which import this one: built on
    # first use
    if name == "NO_BATCH_RULE":
        table = globals()["NO_BATCH_RULE"] = _no_batch_rule()
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
