"""vmap batching rules of linear algebra and neural-network primitives (the rule
protocol and the common shapes are in ``ember.ops._batch``).

A batched weight (an ensemble, or per-sample gradients, where ``grad`` inside ``vmap``
batches the parameters) turns ``linear``/``matmul`` into a batched matmul and ``conv``
into one grouped convolution with the batch folded into the groups.
"""
import string

from ember.ops._batch import _b, _expand_batch, _lnd, _shift, _size, _to_rank

# PyTorch's refusal of a batch norm updating running statistics without the batch
BATCHED_STATS = ("Batch norm got a batched tensor as input while the running_mean or "
                 "running_var, which will be updated in place, were not batched.")


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


def matmul(cls, lvl, args, params):
    """matmul, mm, bmm, mv, dot: one batched matmul with NumPy's rules per sample."""
    unwrap = _b().unwrap
    (a, ab), (b, bb) = unwrap(args[0], lvl), unwrap(args[1], lvl)
    return _b().wrap(_matmul_values(a, ab, b, bb), lvl)


def _linear(cls, lvl, args, params, relu):
    b = _b()
    x, w, bias = args
    (xv, xb), (wv, wb) = b.unwrap(x, lvl), b.unwrap(w, lvl)
    bv, bb = b.unwrap(bias, lvl) if bias is not None else (None, False)
    if not wb and not bb:
        return b.wrap(cls.apply(xv, wv, bv), lvl)
    B = _size(lvl)
    xv = _expand_batch(xv, xb, B)
    s = tuple(xv.shape)
    flat = xv.reshape(B, -1, s[-1])
    if flat.shape[1] == 1 and wb:
        # one row per sample (per-sample gradients): an einsum, whose weight gradient is
        # the outer product as a broadcast multiply -- NumPy's matmul with an inner dim
        # of 1 is about 3x slower (docs/performance/jit-func-distributed.md, "Per-sample
        # gradients")
        from ember.ops._einsum import _einsum
        out = _einsum(["bi", "boi"], "bo", [flat.squeeze(1), wv]).unsqueeze(1)
    else:
        out = _matmul_values(flat, True, wv.transpose(-1, -2), wb)  # (B, rows, out)
    if bv is not None:
        out = out + (bv.unsqueeze(1) if bb else bv)
    if relu:
        out = out.relu()
    return b.wrap(out.reshape(s[:-1] + (out.shape[-1],)), lvl)


def linear(cls, lvl, args, params):
    """``x @ w.T + b``.  Unbatched weights: one product with the batch as a leading dim
    of ``x``.  Batched weights (an ensemble, or per-sample gradients): a batched
    matmul."""
    return _linear(cls, lvl, args, params, False)


def linear_relu(cls, lvl, args, params):
    """The fused ``relu(x @ w.T + b)``: :func:`linear`, then the ReLU."""
    return _linear(cls, lvl, args, params, True)


def einsum(cls, lvl, args, params):
    """A fresh label for the batch, in front of each batched operand and the output."""
    ins, out, fresh = params["spec"]
    used = set("".join(ins) + out + fresh)
    free = next(c for c in string.ascii_letters if c not in used)
    vals, new_ins = [], []
    for a, spec in zip(args, ins):
        v, bt = _b().unwrap(a, lvl)
        vals.append(v)
        new_ins.append(free + spec if bt else spec)
    lead = {"lead": params["lead"]} if params.get("lead") is not None else {}
    return _b().wrap(cls.apply(*vals, spec=(tuple(new_ins), free + out, fresh), **lead), lvl)


def cross(cls, lvl, args, params):
    """The cross product along a dim: both operands (of one rank) get the batch in front,
    and the dim moves past it."""
    a, b, axis = args
    B = _size(lvl)
    av, bv = (_expand_batch(*_b().unwrap(t, lvl), B) for t in (a, b))
    return _b().wrap(cls.apply(av, bv, axis + 1), lvl)


# ----- neural-network primitives ----------------------------------------------------------
def conv(cls, lvl, args, params):
    """``conv(x, w, b)``.  Unbatched weights: the batch joins N.  Batched weights: the
    batch joins the channels and the groups -- ``(N, B*C, *S)`` convolved with
    ``(B*F, C/G, *K)`` in ``B*G`` groups is every sample's convolution at once."""
    from ember.ops.conv import Geom
    b = _b()
    x, w, bias, g = args
    (xv, xb), (wv, wb) = b.unwrap(x, lvl), b.unwrap(w, lvl)
    bv, bb = b.unwrap(bias, lvl) if bias is not None else (None, False)
    B = _size(lvl)
    if not wb and not bb:
        s = tuple(xv.shape)
        out = cls.apply(xv.reshape((s[0] * s[1],) + s[2:]), wv, bv, g)
        return b.wrap(out.reshape((B, s[1]) + tuple(out.shape[1:])), lvl)
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
    return b.wrap(out, lvl)


def conv_input(cls, lvl, args, params):
    """conv_transpose with an unbatched weight: the batch joins N."""
    b = _b()
    y, w, bias, g = args
    yv, _ = b.unwrap(y, lvl)
    if b.unwrap(w, lvl)[1] or (bias is not None and b.unwrap(bias, lvl)[1]):
        raise b.NoRule("conv_transpose with batched weights")
    s = tuple(yv.shape)
    out = cls.apply(yv.reshape((s[0] * s[1],) + s[2:]), w, bias, g)
    return b.wrap(out.reshape((s[0], s[1]) + tuple(out.shape[1:])), lvl)


def attention(cls, lvl, args, params):
    """scaled_dot_product_attention works on the trailing (L, E) dims with any leading
    dims: q, k, v get the batch; a mask or bias broadcasts as in a sample."""
    b = _b()
    q, k, v, bias, dmask, scale, safe = args
    B = _size(lvl)
    un = [b.unwrap(t, lvl) for t in (q, k, v)]
    n = max(_lnd(t, bt) for t, bt in un)
    qkv = [_to_rank(_expand_batch(t, bt, B), _lnd(t, bt), n) for t, bt in un]
    extra = []
    for t in (bias, dmask):
        if t is None:
            extra.append(None)
            continue
        tv, tb = b.unwrap(t, lvl)
        extra.append(_to_rank(tv, tv.dim() - 1, n) if tb else tv)
    return b.wrap(cls.apply(*qkv, *extra, scale, safe), lvl)


def normalize(cls, lvl, args, params):
    """layer/group/batch norm statistics over ``axes`` of each sample; weight and bias
    broadcast against the sample (a batched one gets ones after its batch dim)."""
    b = _b()
    x, w, bias, axes, eps = args[:5]
    stats = args[5] if len(args) > 5 else params.get("stats")
    if stats is not None:
        if b.unwrap(x, lvl)[1] and any(t is not None and not b.unwrap(t, lvl)[1]
                                       for t in stats.tensors):
            # one buffer per sample's statistics is not there: PyTorch refuses, where the
            # per-sample loop would blend every sample into the same buffers in turn
            raise b.Refused(BATCHED_STATS)
        raise b.NoRule(f"{cls._op_name} updating running statistics")
    xv, xb = b.unwrap(x, lvl)
    B = _size(lvl)
    xv = _expand_batch(xv, xb, B)
    n = xv.dim() - 1
    wv, wb = b.unwrap(w, lvl) if w is not None else (None, False)
    bv, bb = b.unwrap(bias, lvl) if bias is not None else (None, False)
    if wb:
        wv = _to_rank(wv, wv.dim() - 1, n)
    if bb:
        bv = _to_rank(bv, bv.dim() - 1, n)
    return b.wrap(cls.apply(xv, wv, bv, tuple(_shift(a, n) for a in axes), eps), lvl)
