"""Variable-length batches for recurrent layers (PyTorch's ``torch.nn.utils.rnn``).

A :class:`PackedSequence` holds the rows of all time steps stacked time-major
(``data``), how many sequences are still running at each step (``batch_sizes``), and
the permutation that sorted the batch by decreasing length.
"""
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from ember import _core as ember
from ember._tensor import Tensor, _mode_active, _mode_recorder
from ember.ops import rnn_packing as _ops

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor
    unsorted_indices: Tensor


def _bind(optional, fn):
    return None if optional is None else fn(optional)


class PackedSequence(PackedSequence_):
    """The data and list of ``batch_sizes`` of a packed sequence.

    Made by :func:`pack_padded_sequence` or :func:`pack_sequence`, never by hand.
    ``data`` is (sum of lengths, *), ``batch_sizes`` an int64 CPU tensor with the
    number of sequences at each time step, ``sorted_indices`` the order that sorted
    the batch by decreasing length (None when it already was) and
    ``unsorted_indices`` its inverse.

    Example::

        >>> p = pack_sequence([ember.tensor([1, 2, 3]), ember.tensor([4, 5])])
        >>> p.data, p.batch_sizes
        (tensor([1, 4, 2, 5, 3]), tensor([2, 2, 1]))
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is not None:
            if batch_sizes.device.type != "cpu":
                raise ValueError(
                    "batch_sizes should always be on CPU. Instances of PackedSequence should "
                    "never be created manually. They should be instantiated by functions like "
                    "pack_sequence and pack_padded_sequences in nn.utils.rnn. "
                    "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
        else:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """``data`` moved or cast as ``Tensor.to``; the indices follow ``data``'s device
        (``batch_sizes`` stays on the CPU)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self

        def move(t):
            return t.to(data.device)
        return type(self)(data, self.batch_sizes, _bind(self.sorted_indices, move),
                          _bind(self.unsorted_indices, move))

    def cuda(self, *args, **kwargs):
        """The sequence with ``data`` on a CUDA device."""
        kwargs.setdefault("device", "cuda")
        return self.to(*args, **kwargs)

    def cpu(self, *args, **kwargs):
        """The sequence with ``data`` on the CPU."""
        kwargs["device"] = "cpu"
        return self.to(*args, **kwargs)

    def double(self):
        return self.to(dtype=ember.float64)

    def float(self):
        return self.to(dtype=ember.float32)

    def half(self):
        return self.to(dtype=ember.float16)

    def long(self):
        return self.to(dtype=ember.int64)

    def int(self):
        return self.to(dtype=ember.int32)

    def short(self):
        return self.to(dtype=ember.int16)

    def char(self):
        return self.to(dtype=ember.int8)

    def byte(self):
        return self.to(dtype=ember.uint8)

    @property
    def is_cuda(self):
        """Whether ``data`` lives on a CUDA device."""
        return self.data.is_cuda

    def is_pinned(self):
        """Always False: ember has no pinned host memory."""
        return False

    def pin_memory(self):
        raise NotImplementedError("PackedSequence.pin_memory: ember has no pinned host memory")


def invert_permutation(permutation):
    """The inverse of a permutation of ``0..n-1`` (None stays None)."""
    if permutation is None:
        return None
    output = ember.empty_like(permutation)
    output.scatter_(0, permutation, ember.arange(permutation.numel(), device=permutation.device))
    return output


_LONG_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
               "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
               "bool": "Bool", "bfloat16": "BFloat16"}


def _select(t, dim, index):
    # PyTorch's own call: its node (IndexSelectBackward0) in the graph
    return t.index_select(dim, index)


def _batch_sizes(lengths):
    """Sequences still running at each step, for lengths in decreasing order."""
    out, n, t = [], len(lengths), 0
    while n:
        while n and lengths[n - 1] <= t:
            n -= 1
        if n:
            out.append(n)
        t += 1
    return tuple(out)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch of variable-length sequences.

    ``input`` is (T, B, *) (or (B, T, *) with ``batch_first``) and ``lengths`` the
    length of each sequence (a list or a 1-D tensor). With ``enforce_sorted`` the
    lengths must be in decreasing order; otherwise the batch is sorted here and the
    permutation is kept in the result, so RNN outputs come back in the input's order.
    The result is differentiable with respect to ``input``.
    """
    parts = _pack_padded(input, lengths, batch_first, enforce_sorted)
    if len(parts) == 2:
        return PackedSequence(parts[0], parts[1], None, None)
    return PackedSequence(*parts)


def _pack_padded(input, lengths, batch_first, enforce_sorted):
    """The tensors of the packed sequence: (data, batch_sizes) or (data, batch_sizes,
    sorted_indices, unsorted_indices). One node in a graph capture: the batch sizes and
    the order are computed from ``lengths`` (an input of the traced function)."""
    if _mode_active[0] and (m := _mode_recorder((input, lengths))) is not None:
        return m.composite("pack_padded_sequence", _pack_padded,
                           (input, lengths, batch_first, enforce_sorted), {})
    if not isinstance(lengths, Tensor):
        lengths = ember.as_tensor(lengths, dtype=ember.int64, device="cpu")
    else:
        lengths = lengths.to(dtype=ember.int64)
    if enforce_sorted:
        sorted_indices = None
    else:
        if lengths.dim() != 1:
            raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got "
                               f"{lengths.dim()}D {lengths.device.type} Long tensor")
        values, order = _ops.sort_descending(lengths.tolist())
        lengths = ember.as_tensor(values)
        sorted_indices = ember.as_tensor(order).to(input.device)
        input = _select(input, 0 if batch_first else 1, sorted_indices)
    if lengths.dim() != 1 or lengths.device.type != "cpu":
        raise RuntimeError("'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{lengths.dim()}D {lengths.device.type} "
                           f"{_LONG_NAMES.get(lengths.dtype.name, lengths.dtype.name)} tensor")
    if input.dim() < 2:
        raise RuntimeError(f"pack_padded_sequence: input must have at least 2 dimensions "
                           f"(time and batch), got {input.dim()}")
    batch = input.shape[0] if batch_first else input.shape[1]
    steps = input.shape[1] if batch_first else input.shape[0]
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    lens = lengths.tolist()
    if len(lens) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lens)} (batch_size={batch})")
    if lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lens, lens[1:])):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
            "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
            "pack_sequence to sidestep this requirement if you do not need ONNX exportability.")
    if lens[0] > steps:
        # PyTorch reads past the end of the input here; ember refuses
        raise RuntimeError(f"pack_padded_sequence: a length ({lens[0]}) exceeds the padded "
                           f"sequence length ({steps})")
    bs = _batch_sizes(lens)
    data = _ops.PackPadded.apply(input, batch_sizes=bs, batch_first=batch_first)
    bs = ember.as_tensor(bs, dtype=ember.int64)
    if sorted_indices is None:
        return data, bs
    return data, bs, sorted_indices, invert_permutation(sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Undo :func:`pack_padded_sequence`: ``(padded, lengths)``.

    ``padded`` is (T, B, *) (or (B, T, *)), with ``padding_value`` past each sequence's
    end and ``T = total_length`` when given (it must be at least the longest length);
    ``lengths`` is an int64 tensor, both in the batch's original order.
    """
    data, batch_sizes, _, unsorted_indices = sequence
    if _mode_active[0] and (m := _mode_recorder((data, batch_sizes))) is not None:
        # one node: the padded length and the lengths are read from batch_sizes
        args = (data, batch_sizes, unsorted_indices, batch_first, padding_value, total_length)
        return tuple(m.composite("pad_packed_sequence", _pad_packed, args, {}))
    return _pad_packed(data, batch_sizes, unsorted_indices, batch_first, padding_value,
                       total_length)


def _pad_packed(data, batch_sizes, unsorted_indices, batch_first, padding_value,
                total_length):
    bs = tuple(batch_sizes.tolist())
    max_seq_length = len(bs)
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {max_seq_length}")
        max_seq_length = total_length
    # time-major, then a transposed view for batch_first: PyTorch's graph and strides
    padded = _ops.PadPacked.apply(data, batch_sizes=bs, batch_first=False,
                                  padding_value=padding_value, total_length=max_seq_length)
    if batch_first:
        padded = padded.transpose(0, 1)
    lens = [0] * (bs[0] if bs else 0)
    for n in bs:
        for b in range(n):
            lens[b] += 1
    lengths = ember.as_tensor(lens, dtype=ember.int64)
    if unsorted_indices is not None:
        return (_select(padded, 0 if batch_first else 1, unsorted_indices),
                lengths[unsorted_indices.cpu()])
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack (L_i, *) tensors into a (T, B, *) batch (``batch_first``: (B, T, *)),
    padded with ``padding_value`` on the ``padding_side`` ('right' or 'left');
    the result has the first sequence's dtype.
    """
    if not isinstance(sequences, Iterable):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg "
                           f"of type: {type(sequences)}")
    sequences = tuple(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError("Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    first = sequences[0]
    if first.dim() == 0:
        raise RuntimeError("pad_sequence: sequences must have at least one dimension (time)")
    trail = tuple(first.shape[1:])
    for s in sequences:
        shape = tuple(s.shape)
        if len(shape) != len(trail) + 1:
            raise RuntimeError(f"pad_sequence: every sequence must have {len(trail) + 1} "
                               f"dimensions like the first, got {len(shape)}")
        for d, (a, b) in enumerate(zip(trail, shape[1:])):
            if a != b and b != 1:
                raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor "
                                   f"b ({b}) at non-singleton dimension {d + 1}")
    if _mode_active[0] or not any(s.requires_grad for s in sequences):
        # one node for a graph capture (the batch's length depends on the data)
        return _ops.PadSequence.apply(*sequences, batch_first=batch_first,
                                      padding_value=padding_value,
                                      left=padding_side == "left")
    # PyTorch's graph: each sequence copied into its slice of a padded batch (one
    # CopySlices node per sequence)
    T = max(s.shape[0] for s in sequences)
    B = len(sequences)
    shape = ((B, T) if batch_first else (T, B)) + trail
    out = ember.full(shape, padding_value, dtype=first.dtype, device=first.device)
    for i, s in enumerate(sequences):
        n = s.shape[0]
        t = slice(T - n, T) if padding_side == "left" else slice(0, n)
        region = (i, t) if batch_first else (t, i)
        if s.dtype == out.dtype:
            # copy_, as PyTorch's kernel: a sequence that broadcasts records no expand
            out[region].copy_(s)
        else:  # PyTorch's copy_ converts inside its one node
            from ember.ops._views import PutFlat
            idx = np.arange(out.numel()).reshape(out.shape)[region]
            out = PutFlat.apply(out, s, _ops._device_index(out._data, idx))
    return out


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Split a padded batch back into a list of (L_i, *) tensors.

    As in PyTorch, a time-major ``padded_sequences`` is transposed in place.
    """
    unpadded_sequences = []
    if not batch_first:
        padded_sequences.transpose_(0, 1)
    max_length = padded_sequences.shape[1]
    idx = ember.arange(max_length, device=lengths.device)
    for seq, length in zip(padded_sequences, lengths):
        mask = idx < length
        unpadded_sequences.append(seq[mask])
    return unpadded_sequences


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of (L_i, *) tensors (in decreasing length unless
    ``enforce_sorted=False``)."""
    lengths = ember.as_tensor([v.size(0) for v in sequences])
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of (L_i, *) tensors a :class:`PackedSequence` holds, in original order."""
    padded_sequences, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded_sequences, lengths, batch_first=True)
