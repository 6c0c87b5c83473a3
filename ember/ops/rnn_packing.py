"""Packing variable-length batches for the recurrent layers: padded ``(T, B, *)`` (or
``(B, T, *)``) batches to packed ``(N, *)`` rows and back, and a list of sequences to a
padded batch, as primitives; and the descending sort that orders sequences by length.

The packed layout is the one the layers of ``ember.ops.rnn`` run over: the rows of every
time step stacked time-major, ``batch_sizes[t]`` rows at step ``t`` (non-increasing,
PyTorch's ``PackedSequence``). Packing and padding are each other's derivative.
"""
import functools

import numpy as np

from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _jvp
from ember.ops.rnn import _offsets

__all__ = []


@functools.lru_cache(maxsize=256)
def _pack_index(batch_sizes, batch_first, total_length, batch):
    """For each packed row, its row in the padded batch flattened over (time, batch), or
    over (batch, time) when ``batch_first``."""
    bs = np.asarray(batch_sizes, dtype=np.int64)
    t = np.repeat(np.arange(len(bs)), bs)
    b = np.arange(int(bs.sum())) - np.repeat(np.asarray(_offsets(batch_sizes)), bs)
    return b * total_length + t if batch_first else t * batch + b


def _device_index(like, idx):
    xp = array_module(like)
    return idx if xp is np else xp.asarray(idx)


class PackPadded(Primitive):
    """The packed rows of a padded batch: ``apply(padded, batch_sizes=..., batch_first=...)``
    with ``padded`` (T, B, *) (or (B, T, *)) and ``batch_sizes`` a tuple of ints."""
    _node_name = "PackPaddedSequenceBackward0"

    def forward(self, padded, batch_sizes, batch_first):
        shape = padded.shape
        T, B = (shape[1], shape[0]) if batch_first else (shape[0], shape[1])
        self.args = (batch_sizes, batch_first, T, B)
        idx = _device_index(padded, _pack_index(batch_sizes, batch_first, T, B))
        return padded.reshape((T * B,) + shape[2:])[idx]

    def backward(self, gy):
        bs, bf, T, B = self.args
        return PadPacked.apply(gy, batch_sizes=bs, batch_first=bf, padding_value=0.0,
                               total_length=T, batch=B)

    jvp = _jvp.linear(0)


class PadPacked(Primitive):
    """A padded (T, B, *) (or (B, T, *)) batch from packed rows, ``padding_value``
    elsewhere; ``T`` is ``total_length`` and ``B`` is ``batch`` (default ``batch_sizes[0]``).

    Its node is PyTorch's: ``pad_packed_sequence`` there writes each step's rows into a
    padded batch in place, so the time-major result's ``grad_fn`` is ``CopySlices``."""
    _node_name = "CopySlices"

    def forward(self, data, batch_sizes, batch_first, padding_value, total_length, batch=None):
        B = batch_sizes[0] if batch is None else batch
        T = total_length
        self.args = (batch_sizes, batch_first)
        xp = array_module(data)
        out = xp.full((T * B,) + data.shape[1:], padding_value, dtype=data.dtype)
        out[_device_index(data, _pack_index(batch_sizes, batch_first, T, B))] = data
        return out.reshape(((B, T) if batch_first else (T, B)) + data.shape[1:])

    def backward(self, gy):
        bs, bf = self.args
        return PackPadded.apply(gy, batch_sizes=bs, batch_first=bf)

    jvp = _jvp.linear(0, 3)


class PadSequence(Primitive):
    """``apply(*sequences, batch_first=..., padding_value=..., left=...)``: the (L_i, *)
    sequences written into a (T, B, *) batch (or (B, T, *)) in the first's dtype."""

    def forward(self, *seqs, batch_first, padding_value, left):
        T = max(s.shape[0] for s in seqs)
        trail = seqs[0].shape[1:]
        self.meta = [(s.shape, s.dtype) for s in seqs]
        self.args = (T, batch_first, left)
        xp = array_module(seqs[0])
        out = xp.full((len(seqs), T) + trail, padding_value, dtype=seqs[0].dtype)
        for i, s in enumerate(seqs):
            n = s.shape[0]
            if left:
                out[i, T - n:T] = s
            else:
                out[i, :n] = s
        return out if batch_first else xp.ascontiguousarray(out.swapaxes(0, 1))

    def backward(self, gy):
        from ember.backend.dtypes import FROM_NP
        T, bf, left = self.args
        grads = []
        for i, (shape, dt) in enumerate(self.meta):
            if self._edges[i] is None:
                grads.append(None)
                continue
            n = shape[0]
            rows = slice(T - n, T) if left else slice(0, n)
            g = gy[i, rows] if bf else gy[rows, i]
            if g.shape != shape:
                g = g.sum_to_size(shape)  # the sequence was broadcast into its slot
            if g._data.dtype != dt:
                g = g.to(FROM_NP[dt])
            grads.append(g)
        return tuple(grads)


def sort_descending(values):
    """``(sorted, indices)`` of a 1-D integer array in decreasing order, ties placed as
    PyTorch's CPU ``sort(descending=True)`` places them (libstdc++'s introsort on
    (value, index) pairs, compared by value)."""
    keys = [int(v) for v in values]
    idx = list(range(len(keys)))
    _introsort(keys, idx, 0, len(keys), 2 * (max(len(keys), 1).bit_length() - 1))
    _final_insertion_sort(keys, idx, 0, len(keys))
    return np.asarray(keys, dtype=np.int64), np.asarray(idx, dtype=np.int64)


# libstdc++'s std::sort (bits/stl_algo.h) with comp(a, b) = a > b, moving (key, index)
# pairs together; only the tie order depends on following it step by step.
_THRESHOLD = 16


def _swap(k, v, a, b):
    k[a], k[b] = k[b], k[a]
    v[a], v[b] = v[b], v[a]


def _move_median_to_first(k, v, result, a, b, c):
    if k[a] > k[b]:
        if k[b] > k[c]:
            _swap(k, v, result, b)
        elif k[a] > k[c]:
            _swap(k, v, result, c)
        else:
            _swap(k, v, result, a)
    elif k[a] > k[c]:
        _swap(k, v, result, a)
    elif k[b] > k[c]:
        _swap(k, v, result, c)
    else:
        _swap(k, v, result, b)


def _unguarded_partition(k, v, first, last, pivot):
    while True:
        while k[first] > k[pivot]:
            first += 1
        last -= 1
        while k[pivot] > k[last]:
            last -= 1
        if not first < last:
            return first
        _swap(k, v, first, last)
        first += 1


def _heap_select_sort(k, v, first, last):
    # std::partial_sort(first, last, last): heapsort of the range, as libstdc++ does it
    pairs = list(zip(k[first:last], v[first:last]))
    n = len(pairs)

    def adjust(hole, length, value):
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if _gt(pairs[child], pairs[child - 1]):
                child -= 1
            pairs[hole] = pairs[child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            pairs[hole] = pairs[child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and _gt(pairs[parent], value):
            pairs[hole] = pairs[parent]
            hole = parent
            parent = (hole - 1) // 2
        pairs[hole] = value

    if n >= 2:
        for parent in range((n - 2) // 2, -1, -1):
            adjust(parent, n, pairs[parent])
    for end in range(n - 1, 0, -1):
        value = pairs[end]
        pairs[end] = pairs[0]
        adjust(0, end, value)
    for i, (a, b) in enumerate(pairs):
        k[first + i], v[first + i] = a, b


def _gt(p, q):
    return p[0] > q[0]


def _introsort(k, v, first, last, depth):
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_select_sort(k, v, first, last)
            return
        depth -= 1
        mid = first + (last - first) // 2
        _move_median_to_first(k, v, first, first + 1, mid, last - 1)
        cut = _unguarded_partition(k, v, first + 1, last, first)
        _introsort(k, v, cut, last, depth)
        last = cut


def _insertion_sort(k, v, first, last):
    for i in range(first + 1, last):
        key, val = k[i], v[i]
        if key > k[first]:
            k[first + 1:i + 1] = k[first:i]
            v[first + 1:i + 1] = v[first:i]
            k[first], v[first] = key, val
        else:
            j = i
            while key > k[j - 1]:
                k[j], v[j] = k[j - 1], v[j - 1]
                j -= 1
            k[j], v[j] = key, val


def _final_insertion_sort(k, v, first, last):
    if last - first > _THRESHOLD:
        _insertion_sort(k, v, first, first + _THRESHOLD)
        for i in range(first + _THRESHOLD, last):  # unguarded
            key, val = k[i], v[i]
            j = i
            while key > k[j - 1]:
                k[j], v[j] = k[j - 1], v[j - 1]
                j -= 1
            k[j], v[j] = key, val
    else:
        _insertion_sort(k, v, first, last)
