"""einsum, and the diagonal primitives that einsum, trace and the decompositions'
gradients share."""
import string

from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend.dtypes import FROM_NP
from ember.ops import _batch, _batch_nn, _jvp

__all__ = ["einsum"]


def _tname(np_dtype):
    """PyTorch's capitalised scalar type name: Float, Double, Long, ..."""
    name = FROM_NP[np_dtype].name
    return {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
            "uint8": "Byte", "float32": "Float", "float64": "Double", "float16": "Half",
            "bfloat16": "BFloat16", "bool": "Bool"}.get(name, name.capitalize())


# ----- diagonals (private: trace, einsum and the decompositions' gradients use them) ---------
class Diagonal(Primitive):
    """The main diagonal over dims ``d1 < d2``, moved to the last dim (a copy)."""

    def forward(self, x, d1, d2):
        self.meta = (x.shape, d1, d2)
        return x.diagonal(0, d1, d2).copy()

    def backward(self, gy):
        shape, d1, d2 = self.meta
        return DiagEmbed.apply(gy, shape, d1, d2), None, None

    jvp = _jvp.linear(0)
    batch = _batch.diagonal


class DiagEmbed(Primitive):
    """The adjoint of :class:`Diagonal`: zeros of ``shape`` with ``x`` on the diagonal."""

    def forward(self, x, shape, d1, d2):
        self.dims = (d1, d2)
        xp = array_module(x)
        out = xp.zeros(shape, dtype=x.dtype)
        view = xp.moveaxis(out, (d1, d2), (-2, -1))
        idx = xp.arange(min(shape[d1], shape[d2]))
        view[..., idx, idx] = x
        return out

    def backward(self, gy):
        d1, d2 = self.dims
        return Diagonal.apply(gy, d1, d2), None, None, None

    jvp = _jvp.linear(0)
    batch = _batch.diag_embed_shaped


def diag_embed_last(x):
    """``torch.diag_embed(x)``: a batch of diagonal matrices from the last dim of ``x``."""
    n = x._data.shape[-1]
    nd = x._data.ndim
    return DiagEmbed.apply(x, x._data.shape + (n,), nd - 1, nd)


def diagonal_last(x):
    """``x.diagonal(0, -2, -1)`` as a differentiable copy."""
    nd = x._data.ndim
    return Diagonal.apply(x, nd - 2, nd - 1)


# ----- einsum --------------------------------------------------------------------------------
class Einsum(Primitive):
    """``einsum`` as one node: ``spec`` is ``(ins, out, fresh)``, the operands' label
    strings (checked, the ellipsis written as the labels ``fresh``) and the output's.
    The forward runs :func:`ember.ops.einsum_graph.einsum_graph` on arrays, the ops
    PyTorch's einsum is made of, so the bits are those of the recorded graph; the
    gradient of an operand is an einsum again."""

    def forward(self, *arrays, spec, lead=None):
        from ember.ops.einsum_graph import ON_ARRAYS, einsum_graph
        self.spec = spec
        ins, out, fresh = spec
        self.swaps = []  # whether each product took its operands swapped
        res = einsum_graph([list(s) for s in ins], list(out), list(arrays), list(fresh),
                           ON_ARRAYS, lead, self.swaps)
        xp = array_module(arrays[0])
        if len(arrays) == 1 and xp.may_share_memory(res, arrays[0]):
            # a one-operand einsum may come out as a view of its input
            res = xp.array(res, copy=True)
        return xp.asarray(res)

    def backward(self, gy):
        ops = self.saved_tensors
        ins, out, fresh = self.spec
        from ember.ops.einsum_graph import label_order
        # the gradients' einsums contract in this einsum's label order (relabelled so
        # that their sorted order is it): a product's gradient then runs the ``bmm``
        # the recorded graph's backward runs, and gives its bits
        order = label_order(ins, out, fresh)
        rename = str.maketrans(dict(zip(order, string.ascii_uppercase + string.ascii_lowercase)))
        ins = [s.translate(rename) for s in ins]
        out = out.translate(rename)
        # and with the graph's operand order: a product ``A @ B``'s gradients are
        # ``gy @ B.T`` and ``A.T @ gy``, not their transposes (``B @ gy.T``...), whose
        # last bits may differ (OpenBLAS's AVX2 kernels)
        one_product = len(ins) == 2 and len(self.swaps) == 1
        return tuple(None if e is None else _operand_grad(
            gy, ins, out, ops, i, ((i == 0) != self.swaps[0]) if one_product else None)
            for i, e in enumerate(self._edges))

    jvp = _jvp.multilinear()
    batch = _batch_nn.einsum


def _operand_grad(gy, ins, out, ops, i, lead=None):
    """The gradient of operand ``i``: the einsum of ``gy`` with the other operands onto
    the labels it shares with them (a label of size 1 here but larger elsewhere is
    summed), broadcast over its labels found nowhere else, and written onto the
    diagonals of its repeated labels."""
    lab = ins[i]
    size = {}
    for c, n in zip(lab, ops[i]._data.shape):
        size.setdefault(c, n)
    distinct = list(dict.fromkeys(lab))
    rest = [j for j in range(len(ins)) if j != i]
    others = set(out).union(*(ins[j] for j in rest))
    keep = [c for c in distinct if size[c] != 1 and c in others]
    from ember.ops._util import cj  # complex operands: the conjugates
    g = _einsum([out] + [ins[j] for j in rest], "".join(keep), [gy] + [cj(ops[j]) for j in rest],
                lead=lead)
    mid = [g._data.shape[keep.index(c)] if c in keep else 1 for c in distinct]
    full = [size[c] for c in distinct]
    if tuple(mid) != g._data.shape:
        g = g.reshape(mid)
    if mid != full:
        g = g.expand(full)
    cur = distinct
    for q, c in enumerate(lab):
        if lab.index(c) == q:
            continue
        # labels up to q are in place: put this repeat's axis at q, g on the diagonal
        p = cur.index(c)
        g = g.permute([k for k in range(len(cur)) if k != p] + [p])
        cur = cur[:q] + [c] + cur[q:]
        g = DiagEmbed.apply(g, tuple(size[x] for x in cur), p, q)
    return g


_EINSUM_NODES = {}


def _einsum_node(n):
    cls = _EINSUM_NODES.get(n)
    if cls is None:
        cls = _EINSUM_NODES[n] = type("Einsum", (Einsum,), {"save_inputs": tuple(range(n))})
    return cls


def _parse_operand(sub, i, t, eq):
    """Labels of one operand: letters, and ``...`` as None; checked against its rank."""
    labels = []
    pos = 0
    while pos < len(sub):
        c = sub[pos]
        if c == ".":
            if sub[pos:pos + 3] != "..." or None in labels:
                raise RuntimeError("einsum(): found '.' for operand " + str(i) +
                                   " that is not part of any ellipsis")
            labels.append(None)
            pos += 3
            continue
        if c not in string.ascii_letters:
            raise RuntimeError(f"einsum(): invalid subscript given at index {eq.index(c)} in the "
                               f"equation string, subscripts must be in [a-zA-Z]")
        labels.append(c)
        pos += 1
    nd = t.dim()
    n_lab = sum(c is not None for c in labels)
    if None in labels:
        if n_lab > nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({n_lab}) is "
                               f"more than the number of dimensions ({nd}) for operand {i}")
    elif n_lab != nd:
        raise RuntimeError(f"einsum(): the number of subscripts in the equation ({n_lab}) does "
                           f"not match the number of dimensions ({nd}) for operand {i} and no "
                           "ellipsis was given")
    return labels


def einsum(*args):
    """Sum of products over the labelled dims of the operands (``torch.einsum``).

    Accepts ``einsum('ij,jk->ik', a, b)``, operands as one list, or the sublist
    form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``. Supports ``...``, repeated
    labels in an operand (diagonals), implicit output (labels seen once, in
    alphabetical order, after the ellipsis dims) and size-1 broadcasting.
    """
    if not args:
        raise TypeError("einsum(): must specify the equation string and at least one operand, "
                        "or at least one operand and its subscripts list")
    if isinstance(args[0], str):
        eq, ops = args[0], args[1:]
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = tuple(ops[0])
    else:
        eq, ops = _sublist_equation(args)
    for i, t in enumerate(ops):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 1, but got "
                            f"{type(t).__name__}")
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    in_subs = lhs.split(",")
    if len(in_subs) > len(ops):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                           "equation")
    if len(in_subs) < len(ops):
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                           "equation")
    for t in ops:
        if t.dtype != ops[0].dtype:
            raise RuntimeError(f"expected scalar type {_tname(ops[0]._data.dtype)} but found "
                               f"{_tname(t._data.dtype)}")
    labels = [_parse_operand(s, i, t, eq) for i, (s, t) in enumerate(zip(in_subs, ops))]
    used = set(eq)
    ell_nd = max((t.dim() - len(lab) + 1 for lab, t in zip(labels, ops) if None in lab),
                 default=0)
    fresh = [c for c in string.ascii_letters if c not in used][:ell_nd]
    if len(fresh) < ell_nd:
        raise RuntimeError("einsum(): too many dimensions for ember's 52 labels")
    subs = []
    for lab, t in zip(labels, ops):
        if None in lab:
            k = lab.index(None)
            cover = t.dim() - len(lab) + 1
            lab = lab[:k] + fresh[ell_nd - cover:] + lab[k + 1:]
        subs.append(lab)
    if arrow:
        out = _parse_output(rhs, fresh, labels)
    else:
        counts = {}
        for lab in labels:
            for c in lab:
                if c is not None:
                    counts[c] = counts.get(c, 0) + 1
        out = fresh + sorted(c for c, n in counts.items() if n == 1)
    _check_sizes(subs, ops, set(fresh))
    from ember.ops.matmul_graph import records_graph
    if records_graph(*ops):
        # recorded with PyTorch's nodes (permutes, bmm, views...)
        from ember.ops.einsum_graph import einsum_graph
        return einsum_graph(subs, out, list(ops), fresh)
    return _einsum(["".join(s) for s in subs], "".join(out), list(ops), "".join(fresh))


def _sublist_equation(args):
    """The sublist form ``(op, [labels], op, [labels], ..., [out])`` as an equation."""
    def letters(sub):
        out = ""
        for s in sub:
            if s is Ellipsis:
                out += "..."
            elif not 0 <= int(s) < 52:
                raise RuntimeError(f"einsum(): subscript in subscript list is not within the "
                                   f"valid range [0, 52), got {s}")
            else:
                out += string.ascii_letters[int(s)]
        return out
    ops, subs = list(args[0::2]), [letters(s) for s in args[1::2]]
    if len(args) % 2:
        return ",".join(subs[:len(ops) - 1]) + "->" + letters(args[-1]), tuple(ops[:-1])
    return ",".join(subs), tuple(ops)


def _parse_output(rhs, fresh, labels):
    seen = set(c for lab in labels for c in lab if c is not None)
    out = []
    pos = 0
    while pos < len(rhs):
        c = rhs[pos]
        if c == ".":
            if rhs[pos:pos + 3] != "...":
                raise RuntimeError("einsum(): found '.' for output that is not part of any "
                                   "ellipsis")
            out.extend(fresh)
            pos += 3
            continue
        if c not in string.ascii_letters:
            raise RuntimeError(f"einsum(): invalid subscript given at index {pos} in the "
                               f"equation string, subscripts must be in [a-zA-Z]")
        if c in out:
            raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the "
                               "output")
        if c not in seen:
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation "
                               "for any input operand")
        out.append(c)
        pos += 1
    return out


def _check_sizes(subs, ops, ell):
    sizes = {}
    for i, (lab, t) in enumerate(zip(subs, ops)):
        mine = {}
        for c, n in zip(lab, t.shape):
            if c in mine and mine[c] != n:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {i} but the "
                                   f"sizes don't match, {mine[c]} != {n}")
            mine[c] = n
        for c, n in mine.items():
            prev = sizes.get(c)
            if prev is None or prev == 1:
                sizes[c] = n
            elif n != 1 and n != prev:
                if c in ell:
                    raise RuntimeError(f"einsum(): operands do not broadcast: a dimension "
                                       f"covered by ellipsis in operand {i} has size {n} which "
                                       f"does not broadcast with previously seen size {prev}")
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {i} which "
                                   f"does not broadcast with previously seen size {prev}")


def _einsum(subs, out, ops, fresh="", lead=None):
    """The one-node einsum of letter subscripts ``subs -> out`` (checked) on Tensors;
    ``fresh``: the labels an ellipsis stands for (they order the contraction); ``lead``
    (two operands): whether the first is the product's left matrix (None: PyTorch's
    choice)."""
    if lead is None:
        return _einsum_node(len(ops)).apply(*ops, spec=(tuple(subs), out, fresh))
    return _einsum_node(len(ops)).apply(*ops, spec=(tuple(subs), out, fresh), lead=lead)
