"""``einsum`` recorded as PyTorch records it, where a user can see the graph.

PyTorch computes ``einsum`` from other ops, so its graph is theirs: each operand is
aligned to one label order (a diagonal and a ``permute`` for each repeated label, an
``unsqueeze`` for each label it lacks, then one ``permute``), operands are contracted
left to right in pairs (dims only one side has are summed first; a pair with no dim to
contract is a product, otherwise both sides are permuted and reshaped to 3-D for one
``bmm`` whose result is viewed and permuted back), and the contracted dims are removed
at the end (a ``view`` after contractions, a ``sum`` for a lone operand).

The label order: the output's labels (the ellipsis's dims where it stands), then the
ellipsis's dims when the output has none, then the contracted labels, upper case before
lower case. ``ember.ops._einsum.einsum`` calls :func:`einsum_graph` in eager mode when
a graph is recorded; elsewhere its one-kernel op runs.
"""
from ember.ops.matmul_graph import _reshape as _mg_reshape

__all__ = ["einsum_graph"]


def _reshape(x, shape):
    """PyTorch's ``reshape`` (``ember.ops.matmul_graph``'s)."""
    return _mg_reshape(x, tuple(shape))


def _sumproduct_pair(left, right, sum_dims):
    """``(left * right).sum(sum_dims, keepdim=True)`` for operands of equal rank, by one
    batched product (or a plain product when nothing is summed)."""
    if not sum_dims:
        return left * right
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(left.dim()):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in sum_dims:
            if sl and sr:
                sum_size *= left.shape[i]
            elif sl:   # in one operand only: summed right away
                left = left.sum(i, True)
            elif sr:
                right = right.sum(i, True)
        elif sl and sr:
            lro.append(i)
            lro_size *= left.shape[i]
        elif sl:
            lo.append(i)
            lo_size *= left.shape[i]
        else:
            ro.append(i)
            ro_size *= right.shape[i]
    if lo and ro and ro[-1] < lo[0]:
        # PyTorch swaps the operands so that the product comes out in the output's order
        left, right, lo, ro, lo_size, ro_size = right, left, ro, lo, ro_size, lo_size
    out_size = [left.shape[d] for d in lro] + [left.shape[d] for d in lo] + \
        [1] * len(sum_dims) + [right.shape[d] for d in ro]
    lperm = lro + lo + list(sum_dims) + ro
    rperm = lro + list(sum_dims) + ro + lo
    operm = [0] * len(lperm)
    for pos, d in enumerate(lperm):
        operm[d] = pos
    a = _reshape(left.permute(lperm), (lro_size, lo_size, sum_size))
    b = _reshape(right.permute(rperm), (lro_size, sum_size, ro_size))
    from ember.ops.linalg import Bmm
    return Bmm.apply(a, b).view(out_size).permute(operm)


def einsum_graph(subs, out, ops, fresh):
    """``einsum`` of ``ops`` with per-operand label lists ``subs`` and output labels
    ``out`` (the ellipsis already written as the labels ``fresh``, in its order)."""
    out = list(out)
    order = list(out)
    if fresh and not set(fresh) & set(out):
        order += list(fresh)
    seen = set(order)
    order += sorted({c for s in subs for c in s} - seen)
    index = {c: i for i, c in enumerate(order)}
    n_out, n_all = len(out), len(order)
    counts = [0] * n_all
    aligned = []
    for op, labels in zip(ops, subs):
        perm = [-1] * n_all
        dim = 0
        for c in labels:
            p = index[c]
            if perm[p] == -1:
                if op.shape[dim] != 1:
                    counts[p] += 1
                perm[p] = dim
                dim += 1
            else:   # a repeated label: its diagonal, moved back to the first one's place
                prev = perm[p]
                op = op.diagonal(0, prev, dim)
                nd = op.dim()
                op = op.permute(list(range(prev)) + [nd - 1] + list(range(prev, nd - 1)))
        for p in range(n_all):
            if perm[p] == -1:
                op = op.unsqueeze(dim)
                perm[p] = dim
                dim += 1
        aligned.append(op.permute(perm))
    while len(aligned) > 1:
        a, b = aligned[0], aligned[1]
        del aligned[:2]
        sum_dims, a_sum, b_sum = [], [], []
        for d in range(n_out, n_all):
            if a.shape[d] != 1 and b.shape[d] != 1:
                counts[d] -= 1
                if counts[d] == 1:
                    sum_dims.append(d)
                    counts[d] = 0
            elif counts[d] == 1:
                if a.shape[d] != 1:
                    a_sum.append(d)
                    counts[d] = 0
                elif b.shape[d] != 1:
                    b_sum.append(d)
                    counts[d] = 0
        if a_sum:
            a = a.sum(a_sum, True)
        if b_sum:
            b = b.sum(b_sum, True)
        aligned.insert(0, _sumproduct_pair(a, b, sum_dims))
    res = aligned[0]
    if n_all > n_out:
        if len(ops) > 1:
            return res.view(list(res.shape[:n_out]))
        return res.sum(list(range(n_out, n_all)))
    return res
