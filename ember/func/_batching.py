"""Batching rules for ``vmap``, keyed by primitive op name (``cls._op_name``).

A rule ``rule(cls, lvl, args, params)`` is called by ``_batched._Dispatch`` for a call of
the primitive ``cls`` where some argument is batched at level ``lvl`` (the innermost
level among the arguments).  It unwraps the arguments of that level (the underlying
tensor has the batch in dim 0), runs ordinary ember ops on them -- usually ``cls``
itself with its dims shifted by one, or a reshape of the batch into an existing dim --
and wraps the result at ``lvl``.  Arguments batched only at outer levels stay wrapped:
the ops a rule runs meet them and dispatch again.

The batch may sit on any argument, weights included (``vmap`` over an ensemble, or
``grad`` inside ``vmap``, which batches the parameters it differentiates): a batched
weight turns ``linear``/``matmul`` into a batched matmul and ``conv`` into one grouped
convolution with the batch folded into the groups.
"""
import string

from ember import _core as ember
from ember._tensor import Tensor
from ember.func._batched import NoRule, level, unwrap, wrap

RULES = {}


def _register(names, fn):
    for n in names.split():
        RULES[n] = fn


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
    return level(lvl).size


# ----- elementwise (broadcasting) ---------------------------------------------------------
def _elementwise(cls, lvl, args, params):
    un = [unwrap(a, lvl) for a in args]
    tensors = [(v, b) for v, b in un if isinstance(v, Tensor)]
    n = max((_lnd(v, b) for v, b in tensors), default=0)
    new = []
    for v, b in un:
        if b:
            v = _to_rank(v, v.dim() - 1, n)
        new.append(v)
    if len(tensors) == 2:
        new = _promote_zero_dim(new, un, tensors)
    pk = {}
    for k, v in params.items():
        pv, pb = unwrap(v, lvl)
        pk[k] = _to_rank(pv, pv.dim() - 1, n) if pb else pv
    return wrap(cls.apply(*new, **pk), lvl)


def _promote_zero_dim(new, un, tensors):
    """A batched per-sample 0-dim operand is 1-dim underneath, which would change the
    result dtype under PyTorch's promotion rules (a 0-dim tensor does not lift a
    dimensioned one's dtype within a category): cast to the per-sample result dtype."""
    (a, ab), (b, bb) = tensors
    if a.dtype == b.dtype or not ((ab and a.dim() == 1) or (bb and b.dim() == 1)):
        return new
    from ember.ops._util import _promote_np
    za = _lnd(a, ab) == 0
    zb = _lnd(b, bb) == 0
    r = _promote_np(a._data.dtype, za, b._data.dtype, zb)
    from ember.backend import dtypes
    dt = dtypes.FROM_NP[r]
    return [v.to(dt) if isinstance(v, Tensor) and v.dtype != dt and v.is_floating_point()
            else v for v in new]


def _elementwise_names():
    from ember.autograd.node import Primitive
    from ember.ops import bitwise, complex_numbers, elementwise, special, unary
    mods = {m.__name__ for m in (unary, elementwise, bitwise, special, complex_numbers)}
    names = set()
    seen = set()
    stack = [Primitive]
    while stack:
        c = stack.pop()
        for s in c.__subclasses__():
            if s not in seen:
                seen.add(s)
                stack.append(s)
                if s.__module__ in mods and not s.__dict__.get("_renamed_from"):
                    names.add(s.__dict__.get("_op_name") or s._op_name)
    names -= {"ViewAsComplex", "ViewAsReal"}
    return names


_EXTRA_ELEMENTWISE = ("ToCopy Clone Contiguous Copy Fill FillBackward0 FillBackward1 "
                      "FillBackward2 FillBackward3 ZeroBackward0 MaskedFill BinaryCrossEntropy "
                      "_Identity _DelayedError")


# ----- ops on trailing dims: the batch rides along in front ------------------------------
def _passthrough(cls, lvl, args, params):
    """Ops that act on trailing dims only (pooling windows, padding, triangles, linear
    layers with unbatched weights): the batch is one more leading dim."""
    v, _ = unwrap(args[0], lvl)
    for a in list(args[1:]) + list(params.values()):
        if unwrap(a, lvl)[1]:
            raise NoRule(f"{cls._op_name} with a batched argument other than its input")
    out = cls.apply(v, *args[1:], **params)
    return _wrap_out(out, lvl)


def _wrap_out(out, lvl):
    if isinstance(out, tuple):
        return tuple(wrap(o, lvl) for o in out)
    return wrap(out, lvl)


def _pool(cls, lvl, args, params):
    """Pooling primitives work on the trailing spatial dims of (N, C, *S)."""
    return _passthrough(cls, lvl, args, params)


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


def _dim_rule(pos, all_if_none=True):
    """A rule for ops whose argument at ``pos`` is a dim, a tuple of dims or None."""
    def rule(cls, lvl, args, params):
        v, b = unwrap(args[0], lvl)
        if not b or any(unwrap(a, lvl)[1] for a in args[1:]):
            raise NoRule(f"{cls._op_name} with a batched argument other than its input")
        n = v.dim() - 1
        args = list(args)
        args[0] = v
        if pos < len(args):
            d = args[pos]
            if d is None and not all_if_none:
                return _flat_none(cls, lvl, v, args, pos)
            args[pos] = _shift_axes(d, n)
        return _wrap_out(cls.apply(*args, **params), lvl)
    return rule


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
    return wrap(out, lvl)


def _all_reduce(target):
    """``max()``/``min()`` over a whole sample: an amax over all its dims."""
    def rule(cls, lvl, args, params):
        v, b = unwrap(args[0], lvl)
        if not b:
            raise NoRule(cls._op_name)
        from ember.ops import extrema
        op = getattr(extrema, target)
        return wrap(op.apply(v, tuple(range(1, v.dim())), False), lvl)
    return rule


def _vector_norm(cls, lvl, args, params):
    x, p, axes, keepdim = args
    v, b = unwrap(x, lvl)
    if not b:
        raise NoRule(cls._op_name)
    return wrap(cls.apply(v, p, _shift_axes(axes, v.dim() - 1), keepdim), lvl)


# ----- views and shapes -------------------------------------------------------------------
def _only_first(cls, lvl, args):
    v, b = unwrap(args[0], lvl)
    if not b or any(unwrap(a, lvl)[1] for a in args[1:]):
        raise NoRule(f"{cls._op_name} with a batched argument other than its input")
    return v


def _view(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    shape = (v.shape[0],) + tuple(args[1])
    try:
        return wrap(cls.apply(v, shape), lvl)
    except RuntimeError:
        # the batch dim came from a movedim and the samples are not laid out for a view:
        # a reshape copies (PyTorch's vmap does the same for non-viewable batches)
        from ember.ops.shape import ReshapeCopy
        return wrap(ReshapeCopy.apply(v, shape), lvl)


def _reshape_copy(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    return wrap(cls.apply(v, (v.shape[0],) + tuple(args[1])), lvl)


def _permute(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    return wrap(cls.apply(v, (0,) + tuple(_shift(d, n) for d in args[1])), lvl)


def _transpose(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    return wrap(cls.apply(v, _shift(args[1], n), _shift(args[2], n)), lvl)


def _unsqueeze(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    return wrap(cls.apply(v, args[1] % v.dim() + 1), lvl)


def _expand(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    shape = tuple(args[1])
    n = v.dim() - 1
    v = _to_rank(v, n, len(shape))
    shape = tuple(v.shape[i + 1] if s == -1 else s for i, s in enumerate(shape))
    return wrap(cls.apply(v, (v.shape[0],) + shape), lvl)


def _sum_to_size(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    shape = tuple(args[1])
    extra = v.dim() - 1 - len(shape)
    if extra > 0:
        v = v.sum(tuple(range(1, 1 + extra)))
    return wrap(cls.apply(v, (v.shape[0],) + shape), lvl)


def _getitem(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    return wrap(cls.apply(v, (slice(None),) + tuple(args[1])), lvl)


def _getitem_advanced(cls, lvl, args, params):
    """``x[adv]``: ``adv`` holds full slices and int index arrays (a batched index is a
    batched tensor's array).  Index arrays next to each other keep their place in the
    result (NumPy's rule), so a leading full slice for the batch is enough; otherwise,
    or when an index is batched, an ``arange`` over the batch joins the indices and the
    block of index dims is moved back where a single sample puts it."""
    x, idx = args
    v, b = unwrap(x, lvl)
    B = _size(lvl)
    items = []
    any_batched = False
    for it in idx:
        d, ib = unwrap(_as_tensor(it), lvl) if not isinstance(it, slice) else (it, False)
        any_batched = any_batched or ib
        items.append((d, ib))
    v = _expand_batch(v, b, B)
    pos = [i for i, (d, _) in enumerate(items) if not isinstance(d, slice)]
    adjacent = pos == list(range(pos[0], pos[-1] + 1))
    if not any_batched and adjacent:
        key = (slice(None),) + tuple(d if isinstance(d, slice) else d._data for d, _ in items)
        return wrap(cls.apply(v, key), lvl)
    k = max(_lnd(d, ib) for d, ib in items if not isinstance(d, slice))
    arange = ember.arange(B).reshape((B,) + (1,) * k)
    key = [arange._data]
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
    return wrap(out, lvl)


def _as_tensor(a):
    from ember._tensor import _make
    from ember.func._batched import BArr
    if type(a) is BArr:
        return wrap(a.value, a.level)
    return a if isinstance(a, Tensor) else _make(a)


def _squeeze(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    return wrap(cls.apply(v, tuple(_shift(d, n) for d in args[1])), lvl)


def _flip(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    d = args[1]
    return wrap(cls.apply(v, _shift(d, n) if isinstance(d, int) else
                          tuple(_shift(a, n) for a in d)), lvl)


def _roll(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    x, shifts, dims = args
    n = v.dim() - 1
    if dims is None or dims == () or dims == []:
        B = v.shape[0]
        out = cls.apply(v.reshape(B, -1), shifts, 1)
        return wrap(out.reshape(tuple(v.shape)), lvl)
    dims = _shift(dims, n) if isinstance(dims, int) else tuple(_shift(d, n) for d in dims)
    return wrap(cls.apply(v, shifts, dims), lvl)


def _unfold(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    x, d, size, step = args
    return wrap(cls.apply(v, _shift(d, v.dim() - 1), size, step), lvl)


def _repeat(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    reps = tuple(args[1])
    v = _to_rank(v, v.dim() - 1, len(reps))
    return wrap(cls.apply(v, (1,) + reps), lvl)


def _diagonal(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    n = v.dim() - 1
    args = list(args)
    args[0] = v
    args[-2], args[-1] = _shift(args[-2], n), _shift(args[-1], n)
    return wrap(cls.apply(*args), lvl)


def _join(cls, lvl, args, params):
    """cat/stack: unbatched parts get the batch by expansion; the dim moves by one."""
    B = _size(lvl)
    un = [unwrap(a, lvl) for a in args]
    parts = [_expand_batch(v, b, B) for v, b in un]
    dim = params["dim"]
    n = max(p.dim() - 1 for p in parts)
    if cls._op_name == "Stack":
        dim = dim % (n + 1) + 1
    else:
        dim = _shift(dim, n)
        parts = [p for p in parts if not (p.dim() == 2 and p.shape[1] == 0)] or parts
    return wrap(cls.apply(*parts, **dict(params, dim=dim)), lvl)


def _split(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    x, sizes, dim = args
    return _wrap_out(cls.apply(v, sizes, _shift(dim, v.dim() - 1)), lvl)


def _unbind(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    return _wrap_out(cls.apply(v, _shift(args[1], v.dim() - 1)), lvl)


def _raw(a, lvl):
    """An index argument passed as an array: ``(array underneath, batched)``."""
    from ember.func._batched import BArr
    if type(a) is BArr:
        if a.level != lvl or type(a.value._data) is BArr:
            raise NoRule("an index batched at several vmap levels")
        return a.value._data, True
    return a, False


def _gather(cls, lvl, args, params):
    import numpy as np
    x, idx, dim = args
    B = _size(lvl)
    v, b = unwrap(x, lvl)
    i, ib = _raw(idx, lvl)
    n = _lnd(v, b)
    if not ib:
        i = np.broadcast_to(i, (B,) + i.shape)
    return wrap(cls.apply(_expand_batch(v, b, B), np.ascontiguousarray(i), _shift(dim, n)), lvl)


def _scatter(cls, lvl, args, params):
    """scatter/scatter_add (index arrays as ``idx``) and index_add/copy/fill (a 1-d
    index): the written tensor and the source get the batch, the dim moves by one."""
    import numpy as np
    x, src, idx, dim = args[:4]
    B = _size(lvl)
    v, b = unwrap(x, lvl)
    sv, sb = unwrap(src, lvl)
    i, ib = _raw(idx, lvl)
    n = _lnd(v, b)
    per_row = cls._op_name in ("Scatter", "ScatterAdd")
    if ib and not per_row:
        raise NoRule(f"{cls._op_name} with a batched index")
    if per_row:
        if not ib:
            i = np.broadcast_to(i, (B,) + i.shape)
        i = np.ascontiguousarray(i)
    if isinstance(sv, Tensor) and (sb or per_row or sv.dim() > 0):
        sv = _expand_batch(sv, sb, B)
    return wrap(cls.apply(_expand_batch(v, b, B).clone(), sv, i, _shift(dim, n), *args[4:],
                          **params), lvl)


def _attention(cls, lvl, args, params):
    """scaled_dot_product_attention works on the trailing (L, E) dims with any leading
    dims: q, k, v get the batch; a mask or bias broadcasts as in a sample."""
    q, k, v, bias, dmask, scale, safe = args
    B = _size(lvl)
    un = [unwrap(t, lvl) for t in (q, k, v)]
    n = max(_lnd(t, b) for t, b in un)
    qkv = [_to_rank(_expand_batch(t, b, B), _lnd(t, b), n) for t, b in un]
    extra = []
    for t in (bias, dmask):
        if t is None:
            extra.append(None)
            continue
        tv, tb = unwrap(t, lvl)
        extra.append(_to_rank(tv, tv.dim() - 1, n) if tb else tv)
    return wrap(cls.apply(*qkv, *extra, scale, safe), lvl)


def _cross(cls, lvl, args, params):
    """The cross product along a dim: both operands (of one rank) get the batch in front,
    and the dim moves past it."""
    a, b, axis = args
    B = _size(lvl)
    av, bv = (_expand_batch(*unwrap(t, lvl), B) for t in (a, b))
    return wrap(cls.apply(av, bv, axis + 1), lvl)


def _conv_input(cls, lvl, args, params):
    """conv_transpose with an unbatched weight: the batch joins N."""
    y, w, bias, g = args
    yv, _ = unwrap(y, lvl)
    if unwrap(w, lvl)[1] or (bias is not None and unwrap(bias, lvl)[1]):
        raise NoRule("conv_transpose with batched weights")
    s = tuple(yv.shape)
    out = cls.apply(yv.reshape((s[0] * s[1],) + s[2:]), w, bias, g)
    return wrap(out.reshape((s[0], s[1]) + tuple(out.shape[1:])), lvl)


def _index_select(cls, lvl, args, params):
    x, idx, dim = args
    v, b = unwrap(x, lvl)
    if not b or unwrap(idx, lvl)[1]:
        raise NoRule("IndexSelect with a batched index")
    return wrap(cls.apply(v, idx, _shift(dim, v.dim() - 1)), lvl)


# ----- linear algebra ---------------------------------------------------------------------
def _matmul_values(a, ab, b, bb):
    """``matmul`` of two unwrapped operands (at least one batched) with NumPy's rules
    per sample: 1-d operands become matrices, and a batched operand's batch goes in
    front of the broadcast batch dims of both."""
    from ember.ops.linalg import MatMul
    na, nb = _lnd(a, ab), _lnd(b, bb)
    if na == 0 or nb == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D")
    a_vec, b_vec = na == 1, nb == 1
    if a_vec:
        a, na = a.unsqueeze(-2), 2
    if b_vec:
        b, nb = b.unsqueeze(-1), 2
    L = max(na, nb) - 2
    if ab:
        a = _to_rank(a, na, L + 2)
    if bb:
        b = _to_rank(b, nb, L + 2)
    if ab and not bb and L == 0:
        # one product with the batch folded into the rows
        s = tuple(a.shape)
        out = MatMul.apply(a.reshape(s[0] * s[1], s[2]), b).reshape(s[0], s[1], -1)
    else:
        out = MatMul.apply(a, b)
    if a_vec:
        out = out.squeeze(-2)
    if b_vec:
        out = out.squeeze(-1)
    return out


def _matmul(cls, lvl, args, params):
    (a, ab), (b, bb) = unwrap(args[0], lvl), unwrap(args[1], lvl)
    return wrap(_matmul_values(a, ab, b, bb), lvl)


def _linear(cls, lvl, args, params):
    """``x @ w.T + b`` (and the fused ReLU).  Unbatched weights: one product with the
    batch as a leading dim of ``x``.  Batched weights (an ensemble, or per-sample
    gradients): a batched matmul."""
    x, w, bias = args
    (xv, xb), (wv, wb) = unwrap(x, lvl), unwrap(w, lvl)
    bv, bb = unwrap(bias, lvl) if bias is not None else (None, False)
    if not wb and not bb:
        return wrap(cls.apply(xv, wv, bv), lvl)
    B = _size(lvl)
    xv = _expand_batch(xv, xb, B)
    s = tuple(xv.shape)
    flat = xv.reshape(B, -1, s[-1])
    if flat.shape[1] == 1 and wb:
        # one row per sample (per-sample gradients): an einsum, whose weight gradient is
        # the outer product as a broadcast multiply -- NumPy's matmul with an inner dim
        # of 1 is about 3x slower (docs/performance.md)
        from ember.ops._einsum import _einsum
        out = _einsum(["bi", "boi"], "bo", [flat.squeeze(1), wv]).unsqueeze(1)
    else:
        out = _matmul_values(flat, True, wv.transpose(-1, -2), wb)  # (B, rows, out)
    if bv is not None:
        out = out + (bv.unsqueeze(1) if bb else bv)
    if cls._op_name == "_LinearRelu":
        out = out.relu()
    return wrap(out.reshape(s[:-1] + (out.shape[-1],)), lvl)


def _einsum(cls, lvl, args, params):
    ins, out = params["spec"]
    used = set("".join(ins) + out)
    free = next(c for c in string.ascii_letters if c not in used)
    vals, new_ins = [], []
    for a, spec in zip(args, ins):
        v, b = unwrap(a, lvl)
        vals.append(v)
        new_ins.append(free + spec if b else spec)
    return wrap(cls.apply(*vals, spec=(new_ins, free + out)), lvl)


# ----- neural-network primitives ----------------------------------------------------------
def _conv(cls, lvl, args, params):
    """``conv(x, w, b)``.  Unbatched weights: the batch joins N.  Batched weights: the
    batch joins the channels and the groups -- ``(N, B*C, *S)`` convolved with
    ``(B*F, C/G, *K)`` in ``B*G`` groups is every sample's convolution at once."""
    from ember.ops.conv import Geom
    x, w, bias, g = args
    (xv, xb), (wv, wb) = unwrap(x, lvl), unwrap(w, lvl)
    bv, bb = unwrap(bias, lvl) if bias is not None else (None, False)
    B = _size(lvl)
    if not wb and not bb:
        s = tuple(xv.shape)
        out = cls.apply(xv.reshape((s[0] * s[1],) + s[2:]), wv, bv, g)
        return wrap(out.reshape((B, s[1]) + tuple(out.shape[1:])), lvl)
    xv = _expand_batch(xv, xb, B)
    wv = _expand_batch(wv, wb, B)
    s = tuple(xv.shape)  # B, N, C, *S
    n, c = s[1], s[2]
    xg = xv.movedim(0, 1).reshape((n, B * c) + s[3:])
    ws = tuple(wv.shape)  # B, F, C/G, *K
    wg = wv.reshape((B * ws[1],) + ws[2:])
    bg = None if bv is None else _expand_batch(bv, bb, B).reshape(-1)
    g2 = Geom(g.S, g.O, g.K, g.s, g.d, g.lo, g.hi, g.G * B)
    out = cls.apply(xg, wg, bg, g2)  # N, B*F, *O
    out = out.reshape((n, B, ws[1]) + tuple(out.shape[2:])).movedim(1, 0)
    return wrap(out, lvl)


def _softmax(cls, lvl, args, params):
    v = _only_first(cls, lvl, args)
    return wrap(cls.apply(v, _shift(args[1], v.dim() - 1)), lvl)


def _cross_entropy(cls, lvl, args, params):
    """Fused ``cross_entropy`` (logits (N, C) or (C,), class targets): the samples'
    rows are stacked into one call with ``reduction='none'``, then reduced per sample."""
    x, t, ignore_index, reduction = args
    (xv, xb), (tv, tb) = unwrap(x, lvl), unwrap(t, lvl)
    B = _size(lvl)
    xv, tv = _expand_batch(xv, xb, B), _expand_batch(tv, tb, B)
    c = xv.shape[-1]
    rows = cls.apply(xv.reshape(-1, c), tv.reshape(-1), ignore_index, "none")
    rows = rows.reshape(B, -1)
    if reduction == "none":
        return wrap(rows.reshape(tuple(tv.shape)), lvl)
    total = rows.sum(1)
    if reduction == "sum":
        return wrap(total, lvl)
    count = (tv.reshape(B, -1) != ignore_index).sum(1).to(total.dtype)
    return wrap(total / count, lvl)


def _normalize(cls, lvl, args, params):
    """layer/group/batch norm statistics over ``axes`` of each sample; weight and bias
    broadcast against the sample (a batched one gets ones after its batch dim)."""
    x, w, b, axes, eps = args[:5]
    stats = args[5] if len(args) > 5 else params.get("stats")
    if stats is not None:
        raise NoRule(f"{cls._op_name} updating running statistics")
    xv, xb = unwrap(x, lvl)
    B = _size(lvl)
    xv = _expand_batch(xv, xb, B)
    n = xv.dim() - 1
    wv, wb = unwrap(w, lvl) if w is not None else (None, False)
    bv, bb = unwrap(b, lvl) if b is not None else (None, False)
    if wb:
        wv = _to_rank(wv, wv.dim() - 1, n)
    if bb:
        bv = _to_rank(bv, bv.dim() - 1, n)
    return wrap(cls.apply(xv, wv, bv, tuple(_shift(a, n) for a in axes), eps), lvl)


def _install():
    _register(" ".join(sorted(_elementwise_names())) + " " + _EXTRA_ELEMENTWISE, _elementwise)
    _register("Sum Mean Nansum _Amax _Amin _AmaxAmin _All _Any _AllAny _Logsumexp _Std _Var "
              "_VarStd _CountNonzero", _dim_rule(1))
    _register("_MaxDim _MinDim _MedianDim _NanmedianDim _ModeDim _SelectDim LogSoftmax Softmax "
              "Cumsum Cumprod Logcumsumexp _Cummax _Cummin _CumExtreme ReverseCumsum",
              _dim_rule(1))
    _register("Prod _ArgExtreme _Argmax _Argmin", _dim_rule(1, all_if_none=False))
    RULES["_MaxAll"] = _all_reduce("_Amax")
    RULES["_MinAll"] = _all_reduce("_Amin")
    RULES["_VectorNorm"] = _vector_norm
    RULES["View"] = _view
    RULES["ReshapeCopy"] = _reshape_copy
    RULES["Permute"] = _permute
    RULES["Transpose"] = _transpose
    RULES["Unsqueeze"] = _unsqueeze
    RULES["Squeeze"] = _squeeze
    RULES["Expand"] = _expand
    RULES["SumToSize"] = _sum_to_size
    _register("GetItem Select", _getitem)
    RULES["GetItemAdvanced"] = _getitem_advanced
    RULES["Flip"] = _flip
    RULES["Roll"] = _roll
    RULES["Unfold"] = _unfold
    RULES["Repeat"] = _repeat
    RULES["Diagonal"] = _diagonal
    _register("Cat Stack", _join)
    _register("Split SplitWithSizes", _split)
    RULES["Unbind"] = _unbind
    RULES["Gather"] = _gather
    RULES["IndexSelect"] = _index_select
    _register("MatMul Mm Bmm Mv Dot", _matmul)
    _register("_Linear _LinearMm _LinearRelu _LinearView _LinearUnsafeView", _linear)
    RULES["Einsum"] = _einsum
    RULES["Cross"] = _cross
    RULES["Conv"] = _conv
    _register("MaxPool MaxPoolWithIndices AvgPool AdaptiveMaxPool ConstantPad Tril Triu "
              "ViewAsComplex ViewAsReal", _passthrough)
    RULES["_CrossEntropy"] = _cross_entropy
    RULES["ConvInput"] = _conv_input
    _register("Scatter ScatterAdd IndexAdd IndexCopy IndexFill", _scatter)
    RULES["ScaledDotProductAttention"] = _attention
    RULES["VectorNorm"] = _vector_norm
    # linear algebra on the trailing two dims (NumPy's linalg loops over leading ones)
    _register("Cholesky Det Eigh Inv Pinv Qr Slogdet Svd", _passthrough)
    _register("Normalize _LayerNorm _GroupNorm", _normalize)


_install()
