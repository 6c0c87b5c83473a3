"""Slices along one dim: ``narrow`` and ``select`` (views, PyTorch's slice and select
nodes) and ``narrow_copy``. Re-exported from ``ember.ops.shape``, which binds the Tensor
methods."""
from ember._tensor import Tensor, _mode_active, _mode_recorder
from ember.autograd.node import Primitive
from ember.ops import _jvp
from ember.ops._util import follows_int_reads, int_arg, traced_ints, with_out, wrap_dim
from ember.ops.indexing import GetItem, Select, transforming


def narrow(input, dim, start, length):
    """The view of ``length`` elements of ``input`` from ``start`` along ``dim``."""
    if _mode_active[0] and (m := _mode_recorder((input, start, length))) is not None:
        return m.composite("narrow", narrow, (input, dim, start, length), {})
    shape = input._data.shape
    if not shape:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, len(shape))
    n = shape[d]
    if isinstance(start, Tensor) and (start._data.ndim or start._data.dtype.kind not in "iu"):
        raise RuntimeError("start must be an 0-dim integral Tensor.")
    start, length = int(start), int(length)
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got "
                         f"{start})")
    if start < 0:
        start += n
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return GetItem.apply(input, _narrow_index(d, start, length))


def _narrow_index(d, start, length):
    return (slice(None),) * d + (slice(start, start + length), Ellipsis)


class NarrowCopy(Primitive):
    """A copy of ``length`` elements of ``x`` from ``start`` along ``dim``."""

    def forward(self, x, dim, start, length):
        self.meta = (x.shape, _narrow_index(dim, start, length))
        return x[self.meta[1]].copy()

    def backward(self, gy):
        from ember.ops.indexing import IndexScatter
        shape, idx = self.meta
        return IndexScatter.apply(gy, shape, idx, False), None, None, None

    jvp = _jvp.linear(0)


@with_out
def narrow_copy(input, dim, start, length):
    """A copy of ``narrow(input, dim, start, length)``."""
    if input._data.ndim and int(dim) >= input._data.ndim:
        # torch's narrow_copy checks this bound itself (a RuntimeError); narrow's wrapping
        # gives the IndexError of a negative dim out of range
        raise RuntimeError(f"narrow_copy(): expected dim < {input._data.ndim} (the number of "
                           f"dimensions), but got {int(dim)}")
    view = narrow(input, dim, start, length)  # checks the arguments
    if transforming():  # transforms and captures see the view and its clone
        return view.clone()
    d = wrap_dim(dim, input._data.ndim)
    start = int(start) + (input._data.shape[d] if int(start) < 0 else 0)
    return NarrowCopy.apply(input, d, start, int(length))


@follows_int_reads
def select(input, dim, index):
    """The view of ``input`` at ``index`` along ``dim``, without that dim."""
    if _mode_active[0] and (r := traced_ints(dim)) is not None:
        # a traced dim picks the key's layout: the call is one node, run again at its value
        return r[0].composite("select", select, (input, r[1][0], index), {})
    shape = input._data.shape
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = int(wrap_dim(dim, len(shape)))
    index = int_arg(index)  # (a traced int under jit.trace: the replay follows it)
    if not isinstance(index, int):
        index = int(index)
    if not -shape[d] <= index < shape[d]:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(shape)} at dimension {d}")
    return Select.apply(input, (slice(None),) * d + (index, Ellipsis))


