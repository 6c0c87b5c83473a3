"""``einsum`` as PyTorch computes it, on Tensors (recording PyTorch's graph) or on arrays.

PyTorch computes ``einsum`` from other ops, so its graph is theirs: each operand is
aligned to one label order (a diagonal and a ``permute`` for each repeated label, an
``unsqueeze`` for each label it lacks, then one ``permute``), operands are contracted
left to right in pairs (dims only one side has are summed first; a pair with no dim to
contract is a product, otherwise both sides are permuted and reshaped to 3-D for one
``bmm`` whose result is viewed and permuted back), and the contracted dims are removed
at the end (a ``view`` after contractions, a ``sum`` for a lone operand).

The label order: the output's labels (the ellipsis's dims where it stands), then the
ellipsis's dims when the output has none, then the contracted labels, upper case before
lower case.

The sequence is written once, over a small set of steps (:data:`ON_TENSORS`,
:data:`ON_ARRAYS`). ``ember.ops._einsum.einsum`` runs it on Tensors in eager mode when a
graph is recorded; elsewhere its one-node ``Einsum`` op runs it on arrays with the
array kernels of the same ops (``bmm``'s, ``sum``'s, ``mul``'s, the views'), so an
einsum gives the same bits with or without a graph, and in captured graphs.
"""
import numpy as np

from ember.ops.matmul_graph import _reshape as _mg_reshape

__all__ = ["einsum_graph", "label_order", "ON_TENSORS", "ON_ARRAYS"]


class _OnTensors:
    """The steps as Tensor ops (each records its node)."""

    @staticmethod
    def diagonal(x, d1, d2):
        return x.diagonal(0, d1, d2)

    @staticmethod
    def permute(x, perm):
        return x.permute(perm)

    @staticmethod
    def unsqueeze(x, d):
        return x.unsqueeze(d)

    @staticmethod
    def sum(x, dims, keepdim):
        return x.sum(dims, keepdim)

    @staticmethod
    def mul(a, b):
        return a * b

    @staticmethod
    def reshape(x, shape):
        """PyTorch's ``reshape`` (``ember.ops.matmul_graph``'s)."""
        return _mg_reshape(x, tuple(shape))

    @staticmethod
    def view(x, shape):
        return x.view(list(shape))

    @staticmethod
    def bmm(a, b):
        from ember.ops.linalg import Bmm
        return Bmm.apply(a, b)


class _Scratch:
    """Stands in for a node when a primitive's ``forward`` runs on arrays alone."""


class _OnArrays:
    """The same steps on arrays, each by the array kernel its Tensor op runs (so the
    layouts, the summation and the products are the same, and the bits with them)."""

    @staticmethod
    def diagonal(x, d1, d2):
        from ember.ops.diagonals import _diag_view
        return _diag_view(x, 0, d1, d2)

    @staticmethod
    def permute(x, perm):
        return x.transpose(perm)

    @staticmethod
    def unsqueeze(x, d):
        return np.expand_dims(x, d)

    @staticmethod
    def sum(x, dims, keepdim):
        from ember.ops.reduction import SumDim
        return SumDim.forward(_Scratch(), x, tuple(sorted(dims)), keepdim, None)

    @staticmethod
    def mul(a, b):
        from ember.ops.elementwise import Mul
        return Mul.forward(_Scratch(), a, b)

    @staticmethod
    def reshape(x, shape):
        """``reshape_nodes``'s choice on arrays: a view where the strides allow one,
        otherwise a contiguous copy reshaped."""
        from ember.ops.shape import _try_view
        shape = tuple(shape)
        out = _try_view(x, shape)
        return x.copy().reshape(shape) if out is None else out

    @staticmethod
    def view(x, shape):
        from ember.ops.shape import View
        return View.forward(_Scratch(), x, tuple(shape))

    @staticmethod
    def bmm(a, b):
        from ember.ops.linalg import bmm_arrays
        return bmm_arrays(a, b)


ON_TENSORS = _OnTensors()
ON_ARRAYS = _OnArrays()


def _sumproduct_pair(left, right, sum_dims, on, lead=None, swaps=None):
    """``(left * right).sum(sum_dims, keepdim=True)`` for operands of equal rank, by one
    batched product (or a plain product when nothing is summed). ``lead``: whether
    ``left`` is the product's left matrix (None: PyTorch's choice); ``swaps``, a list
    or None: where the choice made is appended."""
    if not sum_dims:
        return on.mul(left, right)
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(len(left.shape)):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in sum_dims:
            if sl and sr:
                sum_size *= left.shape[i]
            elif sl:   # in one operand only: summed right away
                left = on.sum(left, [i], True)
            elif sr:
                right = on.sum(right, [i], True)
        elif sl and sr:
            lro.append(i)
            lro_size *= left.shape[i]
        elif sl:
            lo.append(i)
            lo_size *= left.shape[i]
        else:
            ro.append(i)
            ro_size *= right.shape[i]
    # PyTorch swaps the operands so that the product comes out in the output's order
    swap = bool(lo and ro and ro[-1] < lo[0]) if lead is None else not lead
    if swaps is not None:
        swaps.append(swap)
    if swap:
        left, right, lo, ro, lo_size, ro_size = right, left, ro, lo, ro_size, lo_size
    out_size = [left.shape[d] for d in lro] + [left.shape[d] for d in lo] + \
        [1] * len(sum_dims) + [right.shape[d] for d in ro]
    lperm = lro + lo + list(sum_dims) + ro
    rperm = lro + list(sum_dims) + ro + lo
    operm = [0] * len(lperm)
    for pos, d in enumerate(lperm):
        operm[d] = pos
    a = on.reshape(on.permute(left, lperm), (lro_size, lo_size, sum_size))
    b = on.reshape(on.permute(right, rperm), (lro_size, sum_size, ro_size))
    return on.permute(on.view(on.bmm(a, b), out_size), operm)


def label_order(subs, out, fresh):
    """The labels in the order the operands are aligned to: the output's, the
    ellipsis's when the output lacks them, then the rest sorted (upper case first)."""
    order = list(out)
    if fresh and not set(fresh) & set(out):
        order += list(fresh)
    seen = set(order)
    return order + sorted({c for s in subs for c in s} - seen)


def einsum_graph(subs, out, ops, fresh, on=ON_TENSORS, lead=None, swaps=None):
    """``einsum`` of ``ops`` with per-operand label lists ``subs`` and output labels
    ``out`` (the ellipsis already written as the labels ``fresh``, in its order), run
    by the steps ``on`` (:data:`ON_TENSORS` or :data:`ON_ARRAYS`). ``lead`` (two
    operands): whether the first is the left matrix of the product (None: PyTorch's
    choice); ``swaps``, a list or None, gets each product's choice (swapped or not)."""
    out = list(out)
    order = label_order(subs, out, fresh)
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
                op = on.diagonal(op, prev, dim)
                nd = len(op.shape)
                op = on.permute(op, list(range(prev)) + [nd - 1] + list(range(prev, nd - 1)))
        for p in range(n_all):
            if perm[p] == -1:
                op = on.unsqueeze(op, dim)
                perm[p] = dim
                dim += 1
        aligned.append(on.permute(op, perm))
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
            a = on.sum(a, a_sum, True)
        if b_sum:
            b = on.sum(b, b_sum, True)
        aligned.insert(0, _sumproduct_pair(a, b, sum_dims, on,
                                           lead if len(ops) == 2 else None, swaps))
    res = aligned[0]
    if n_all > n_out:
        if len(ops) > 1:
            return on.view(res, res.shape[:n_out])
        return on.sum(res, list(range(n_out, n_all)), False)
    return res
