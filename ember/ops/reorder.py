"""Ops that reorder elements: flips, rolls, ``rot90``, and ``unfold``'s window view along
one dim. Bound as ``Tensor`` methods (and re-exported) by :mod:`ember.ops.shape`."""
import operator

import numpy as np

from ember._tensor import Tensor, _mode_active
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._util import follows_int_reads, int_args, traced_ints, wrap_dim, wrap_dims
from ember.ops._views import ViewPrimitive
from ember.ops.composite_node import one_node

__all__ = ["flip", "fliplr", "flipud", "roll", "rot90"]


def _xp(a):
    return array_module(a)


class Flip(Primitive):
    def forward(self, x, dims):
        self.dims = dims
        return _xp(x).ascontiguousarray(_xp(x).flip(x, dims)) if dims else x.copy()

    def backward(self, gy):
        return Flip.apply(gy, self.dims), None

    jvp = _jvp.linear(0)
    batch = _batch.flip


@follows_int_reads
def flip(input, dims):
    """``input`` with the order of elements reversed along ``dims`` (a copy)."""
    if isinstance(dims, Tensor):  # (its elements are not a tuple of ints: torch refuses)
        raise TypeError("flip(): argument 'dims' (position 2) must be tuple of ints, not "
                        "Tensor")
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    return Flip.apply(input, wrap_dims(dims, input._data.ndim) if input._data.ndim else ())


def _flip_method(self, *dims, **kw):
    """``Tensor.flip(dims)``, also as ``x.flip(0, 1)``; as torch's method, one tensor of
    one integer or boolean element given alone is one dim (``x.flip(k)``)."""
    if "dims" in kw:
        if isinstance(kw["dims"], Tensor):
            raise TypeError("flip(): argument 'dims' must be tuple of ints, not Tensor")
        return flip(self, kw.pop("dims"), **kw)
    if len(dims) == 1 and isinstance(dims[0], Tensor):
        t = dims[0]
        if t._data.size != 1 or t._data.dtype.kind not in "iub":
            raise TypeError("flip(): argument 'dims' (position 1) must be tuple of ints, not "
                            "Tensor")
        # a 0-d integer tensor stays a tensor: a trace records the read (it follows it)
        return flip(self, (t if t._data.ndim == 0 and t._data.dtype.kind in "iu"
                           else int(t),))
    return flip(self, dims[0] if len(dims) == 1 else dims)


def fliplr(input):
    """Flip dim 1 (left/right)."""
    if input._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input):
    """Flip dim 0 (up/down)."""
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


class Roll(Primitive):
    def forward(self, x, shifts, dims):
        self.meta = (shifts, dims)
        # no dims (PyTorch's ``dims=[]``): the elements rolled in row-major order
        return _xp(x).roll(x, shifts, axis=dims or None)

    def backward(self, gy):
        shifts, dims = self.meta
        return Roll.apply(gy, tuple(-s for s in shifts), dims), None, None

    jvp = _jvp.linear(0)
    batch = _batch.roll
    torchscript = "roll"
    complex32_math = True


def roll(input, shifts, dims=None):
    """Shift elements cyclically by ``shifts`` along ``dims`` (all elements, read as 1-D,
    when ``dims`` is None)."""
    shifts, dims = int_args(shifts), int_args(dims)  # (0-d integer tensors, as torch)
    shifts = (int(shifts),) if isinstance(shifts, (int, np.integer)) else tuple(
        int(s) for s in shifts)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               "dims:0")
        return Roll.apply(input, shifts, ())  # over the flattened elements, in one node
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if input._data.ndim == 0 and dims:  # no scalar wrapping of roll's dims, as torch
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:"
                           f"{len(dims)}")
    return Roll.apply(input, shifts, tuple(wrap_dim(d, input._data.ndim) for d in dims))


@one_node("Rot90Backward0", 1)
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims`` (from the first dim
    towards the second)."""
    if _mode_active[0] and (r := traced_ints(k, dims)) is not None:
        # a traced count or dim picks the flips and transposes: one node
        return r[0].composite("rot90", rot90, (input,) + r[1], {})
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    nd = input._data.ndim
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = wrap_dim(dims[0], nd), wrap_dim(dims[1], nd)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    if isinstance(k, Tensor):
        k = operator.index(k)  # (the branch taken: a trace keeps it, and says so)
    k %= 4
    if k == 1:
        return flip(input, (d1,)).transpose(d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return flip(input, (d0,)).transpose(d0, d1)
    return input.clone()


class Unfold(ViewPrimitive):
    batch = _batch.unfold

    def forward(self, x, d, size, step):
        self.meta = (x.shape, d, size, step)
        m = (x.shape[d] - size) // step + 1
        shape = x.shape[:d] + (m,) + x.shape[d + 1:] + (size,)
        st = x.strides
        strides = st[:d] + (st[d] * step,) + st[d + 1:] + (st[d],)
        return _xp(x).lib.stride_tricks.as_strided(x, shape, strides)

    def backward(self, gy):
        return UnfoldBackward.apply(gy, *self.meta), None, None, None


class UnfoldBackward(Primitive):
    """The adjoint of ``unfold``: windows added back where they came from."""

    def forward(self, g, in_shape, d, size, step):
        self.meta = (d, size, step)
        out = _xp(g).zeros(in_shape, g.dtype)
        m = g.shape[d]
        for i in range(size):
            # element i of every window: input positions i, i + step, ...
            out[(slice(None),) * d + (slice(i, i + step * (m - 1) + 1, step),)] += g[..., i]
        return out

    def backward(self, gy):
        return Unfold.apply(gy, *self.meta), None, None, None, None

    jvp = _jvp.linear(0)


def unfold(self, dimension, size, step):
    """A view with all windows of ``size`` elements, ``step`` apart, along ``dimension``
    (the windows form a new last dim)."""
    if _mode_active[0] and (r := traced_ints(dimension, size, step)) is not None:
        # a traced dim, size or step: the window's layout is computed in Python
        return r[0].composite("unfold", unfold, (self,) + r[1], {})
    if self._data.ndim == 0:
        if size > 1:
            raise RuntimeError(f"maximum size for tensor at dimension 0 is 1 but size is {size}")
        return self.reshape(1)
    d = wrap_dim(dimension, self._data.ndim)
    n = self._data.shape[d]
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return Unfold.apply(self, d, int(size), int(step))
