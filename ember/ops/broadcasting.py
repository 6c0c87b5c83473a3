"""Broadcasting views and their adjoint: ``expand``/``expand_as``/``broadcast_to`` (a view
with PyTorch's strides), ``broadcast_shapes``/``broadcast_tensors``, and ``sum_to_size``,
which sums a broadcast gradient back. Re-exported from ``ember.ops.shape``."""
import numpy as np

from ember._tensor import Size, _mode_active, _mode_recorder
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._util import _sizes, reduced_float
from ember.ops._views import ViewPrimitive


class Expand(ViewPrimitive):
    batch = _batch.expand

    def forward(self, x, shape):
        self.in_shape = x.shape
        if type(x) is not np.ndarray:
            return array_module(x).broadcast_to(x, shape)
        return _expanded(x, shape)

    def backward(self, gy):
        return gy.sum_to_size(self.in_shape), None


def _expanded(x, shape):
    """The view ``x.expand(shape)`` of a NumPy array, with torch's strides: a dim that is
    broadcast has stride 0, a new dim of size 1 the stride of a contiguous step over the
    dims after it (so ``arange(8).expand(1, -1)`` has strides ``(8, 1)``, not ``(0, 1)``);
    every stride of an expanded 0-d tensor is 0. The view is writable, like ``x``, unless
    elements share memory (a stride 0 over a dim longer than 1): NumPy then refuses
    writes, as torch refuses in-place ops there."""
    lead = len(shape) - x.ndim
    strides = [0] * len(shape)
    for i in range(len(shape) - 1, -1, -1):
        d = i - lead
        if d >= 0:
            size, stride = x.shape[d], x.strides[d]
        else:
            size = 1
            stride = shape[i + 1] * strides[i + 1] if i + 1 < len(shape) else 0
        strides[i] = stride if size == shape[i] else 0
    overlaps = any(st == 0 and n > 1 for st, n in zip(strides, shape))
    return np.lib.stride_tricks.as_strided(x, shape, strides,
                                           writeable=x.flags.writeable and not overlaps)


def _expand_shape(in_shape, sizes):
    if len(sizes) < len(in_shape):
        raise RuntimeError(f"expand(torch.FloatTensor{{{list(in_shape)}}}, size={list(sizes)}): "
                           "the number of sizes provided ({len(sizes)}) must be greater or equal "
                           f"to the number of dimensions in the tensor ({len(in_shape)})")
    lead = len(sizes) - len(in_shape)
    out = []
    for i, s in enumerate(sizes):
        cur = in_shape[i - lead] if i >= lead else None
        if s == -1:
            if cur is None:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing "
                                   "dimension")
            s = cur
        elif cur is not None and cur != s and cur != 1:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({cur}) at non-singleton dimension {i}.  Target sizes: "
                               f"{list(sizes)}.  Tensor sizes: {list(in_shape)}")
        out.append(s)
    return tuple(out)


def expand(self, *sizes):
    """A broadcast view of ``self`` with the given sizes (-1 keeps a dim)."""
    if _mode_active[0] and (m := _mode_recorder((self,) + sizes)) is not None:
        return m.composite("expand", expand, (self,) + sizes, {})
    return Expand.apply(self, _expand_shape(self._data.shape, _sizes(sizes)))


def expand_as(self, other):
    """``self.expand(other.shape)``."""
    if _mode_active[0] and (m := _mode_recorder((self, other))) is not None:
        return m.composite("expand_as", expand_as, (self, other), {})
    return expand(self, other._data.shape)


broadcast_to = lambda input, size: expand(input, tuple(size))  # noqa: E731
broadcast_to.__doc__ = "``input.expand(size)``."


def broadcast_shapes(*shapes):
    """The shape that the given shapes broadcast to."""
    try:
        return Size(np.broadcast_shapes(*[(s,) if isinstance(s, int) else tuple(s)
                                          for s in shapes]))
    except ValueError:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: "
                           f"{shapes}") from None


def broadcast_tensors(*tensors):
    """Expand all tensors to their common broadcast shape."""
    shape = list(broadcast_shapes(*[t._data.shape for t in tensors]))
    if _mode_active[0]:
        # a size read from a traced tensor (a SymInt) where one has it: the graph then
        # expands to the input's size, not the example's
        for t in tensors:
            ts = t.shape
            for k, s in enumerate(ts):
                i = len(shape) - len(ts) + k
                if s != 1 and type(shape[i]) is int:
                    shape[i] = s
        return tuple(expand(t, tuple(shape)) for t in tensors)
    shape = tuple(shape)
    # a tensor that has the shape already is returned itself, as PyTorch does
    return tuple(t if t._data.shape == shape else Expand.apply(t, shape) for t in tensors)


class SumToSize(Primitive):
    """Sum a broadcast gradient back to ``shape`` (the adjoint of ``expand``)."""
    _node_name = "SumBackward1"

    def forward(self, x, shape):
        self.in_shape = x.shape
        lead = x.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
        # where only leading dims are summed, the sum has ``shape`` without keeping them
        # (the same reduction): a fresh array, not a reshaped view, which the engine
        # would copy before it becomes a leaf's .grad (a bias's gradient)
        keep = axes != tuple(range(lead)) or not shape
        if not axes:
            out = x
        elif reduced_float(x.dtype):
            # half and bfloat16 accumulate in float32 and round once, as PyTorch's sum
            out = x.sum(axis=axes, keepdims=keep, dtype=np.float32).astype(x.dtype)
        elif x.dtype.kind in "biu" and x.dtype != np.uint64:
            # bool and integers sum to int64, as PyTorch's sum (only when something is summed)
            out = x.sum(axis=axes, keepdims=keep, dtype=np.int64)
        else:
            out = x.sum(axis=axes, keepdims=keep)
        if lead and keep:
            out = out.reshape(shape)
        return out

    def backward(self, gy):
        return gy.expand(self.in_shape), None

    jvp = _jvp.linear(0)
    batch = _batch.sum_to_size


def sum_to_size(self, *size):
    """Sum ``self`` down to ``size``, which ``self``'s shape must broadcast from."""
    shape = _sizes(size)
    if not len(shape):  # PyTorch's sum_to: a full sum (SumBackward0), even of a 0-d tensor
        return self.sum()
    if tuple(shape) == self._data.shape:
        return self
    try:
        if np.broadcast_shapes(shape, self._data.shape) != self._data.shape:
            raise ValueError
    except ValueError:
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size "
                           f"{{{list(self.shape)}}}.") from None
    lead = self._data.ndim - len(shape)
    if lead and self.requires_grad and _grad_state.grad_enabled:
        # recorded as PyTorch's sum_to records it: the sum kept in every dim (SumBackward1),
        # then a view dropping the leading ones (ViewBackward0); the same sums
        kept = SumToSize.apply(self, (1,) * lead + tuple(shape))
        return kept.view(tuple(shape))
    return SumToSize.apply(self, tuple(shape))


# the array gradient of the composites a graph capture records as calls (``Primitive.vjp``'s
# form without ``self``; gradients before broadcast reduction)
def _expand_vjp(grads, inputs, outputs, out=None):
    return [grads[0]] + [None] * (len(inputs) - 1)


expand.vjp = expand_as.vjp = _expand_vjp
