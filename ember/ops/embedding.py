"""Embedding lookups as PyTorch's graph shows them: ``F.embedding`` is one node over the
weight (``EmbeddingBackward0``), ``F.embedding_bag`` one node over the weight and the
per-sample weights (``EmbeddingBagBackward0``); the indices, bags and modes are plain
arguments. Each class's composite is written here beside it, with the gradient helpers
(``padding_idx`` rows masked, ``scale_grad_by_freq`` scaling).

The public functions check their arguments, renormalise rows for ``max_norm`` and call
these nodes; they live in :mod:`ember.nn.functional`.
"""
import math

import numpy as np

from ember import _core as ember
from ember.ops.composite_node import CompositeNode

__all__ = []


def _pad_mask_grad(out, input, padding_idx):
    """Keep ``out``'s values but stop the gradient at positions equal to ``padding_idx``."""
    mask = (input == padding_idx).unsqueeze(-1)
    return ember.where(mask, out.detach(), out)


def _freq_scale(out, input):
    """1 / how often each index occurs in ``input``, shaped to scale rows of ``out``."""
    _, inverse, counts = np.unique(input._host().reshape(-1), return_inverse=True,
                                   return_counts=True)
    freq = counts[inverse].reshape(input.shape).astype(out._data.dtype)
    return ember.from_numpy(1.0 / freq).to(out.device).unsqueeze(-1)


def _scale_grad(out, input, num):
    """Divide each looked-up row's gradient by how often its index occurs in ``input``."""
    s = _freq_scale(out, input)
    return out.detach() + (out - out.detach()) * s


def _scale_grad_values(g, input):
    """``g``'s rows divided by how often their index occurs in ``input``."""
    return g * _freq_scale(g, input)


def _bag_scale_grad(rows, flat):
    """embedding_bag's ``scale_grad_by_freq`` as PyTorch's CPU kernel computes it: the
    i-th smallest distinct index is scaled by the count of the i-th smallest index
    *occurrence* (not always its own count), which is what programs trained in PyTorch got."""
    a = flat._host().reshape(-1)
    uniq, counts = np.unique(a, return_counts=True)
    srt = np.sort(a)
    scale = 1.0 / counts[np.searchsorted(uniq, srt[:len(uniq)])]
    s = scale[np.searchsorted(uniq, a)].astype(rows._data.dtype)
    s = ember.from_numpy(s).to(rows.device).unsqueeze(-1)
    return rows.detach() + (rows - rows.detach()) * s


def _lookup(weight, indices, padding_idx, scale_grad_by_freq):
    out = weight[indices]
    if padding_idx is not None:
        out = _pad_mask_grad(out, indices, padding_idx)
    if scale_grad_by_freq and out.requires_grad:
        out = _scale_grad(out, indices, weight.shape[0])
    return out


class Embedding(CompositeNode):
    """``F.embedding``: PyTorch's one node over the weight (the indices are a plain
    argument). Its gradient adds each row's output gradient into that row of zeros
    (none for ``padding_idx``, divided by the index's count with
    ``scale_grad_by_freq``)."""
    save_inputs = (0,)
    composite = staticmethod(_lookup)

    def forward(self, weight, **params):
        self.w_shape = weight.shape
        return CompositeNode.forward(self, weight, **params)

    def backward(self, gy):
        from ember.ops.indexing import IndexScatter
        p = self.params
        indices = p["indices"]
        g = gy
        if p["padding_idx"] is not None:
            g = g.masked_fill((indices == p["padding_idx"]).unsqueeze(-1), 0)
        if p["scale_grad_by_freq"]:
            g = _scale_grad_values(g, indices)
        return IndexScatter.apply(g, self.w_shape, (indices._data,), True)


class EmbeddingBag(CompositeNode):
    """``F.embedding_bag``: PyTorch's one node over the weight and the per-sample
    weights (the indices and bags are plain arguments)."""
    save_inputs = (0, 1)
    n_inputs = 2

    @staticmethod
    def composite(weight, psw, **params):
        return _bags(weight, psw, **params)


def _bags(weight, psw, flat, starts, ends, mode, padding_idx, scale_grad_by_freq):
    n = flat.shape[0]
    # membership matrix: member[b, i] = 1 when index i belongs to bag b (and is not padding)
    member = np.zeros((len(starts), n), dtype=bool)
    for b, (s, e) in enumerate(zip(starts, ends)):
        member[b, s:e] = True
    if padding_idx is not None:
        member &= flat._host() != padding_idx
    counts = member.sum(1)
    rows = weight[flat]
    if scale_grad_by_freq and rows.requires_grad:
        rows = _bag_scale_grad(rows, flat)
    if mode == "max":
        mask = ember.from_numpy(member).to(weight.device).unsqueeze(-1)
        neg = ember.full((), -math.inf, dtype=weight.dtype, device=weight.device)
        big = ember.where(mask, rows.unsqueeze(0), neg)
        out = big.amax(1) if n else ember.zeros(len(starts), weight.shape[1],
                                                 dtype=weight.dtype, device=weight.device)
        empty = ember.from_numpy(counts == 0).to(weight.device).unsqueeze(-1)
        return ember.where(empty, ember.zeros((), dtype=weight.dtype, device=weight.device),
                           out)
    # each bag's rows added one by one into zeros (as PyTorch's kernel), not a product
    # with the 0/1 membership matrix, where 0 * inf would make NaN
    keep = np.nonzero(member.any(0))[0]
    bag_of = member[:, keep].argmax(0) if len(keep) else np.zeros(0, np.int64)
    # float16/bfloat16 bags are summed (and weighted, and averaged) in float32 and
    # rounded once, as PyTorch's kernel does
    low = weight.dtype if weight.dtype in (ember.float16, ember.bfloat16) else None
    vals = rows if low is None else rows.float()
    if psw is not None:
        vals = vals * (psw if low is None else psw.float()).unsqueeze(-1)
    if len(keep) < n:
        vals = vals[ember.from_numpy(keep).to(weight.device)]
    out = ember.zeros(len(starts), weight.shape[1], dtype=vals.dtype, device=weight.device)
    out = out.index_add(0, ember.from_numpy(bag_of.astype(np.int64)).to(weight.device), vals)
    if mode == "mean":
        c = ember.from_numpy(np.maximum(counts, 1).astype(out._data.dtype)).to(weight.device)
        out = out / c.unsqueeze(-1)
    return out if low is None else out.to(low)
