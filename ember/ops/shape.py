"""Shape and movement ops: views (reshape, permute, expand, ...), joins and splits."""
import numpy as np

from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.ops._util import wrap_dim, wrap_dims
from ember.ops._views import ViewPrimitive

__all__ = ["reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose",
           "swapaxes", "swapdims", "t", "movedim", "moveaxis", "broadcast_to", "broadcast_tensors",
           "broadcast_shapes", "atleast_1d", "atleast_2d", "atleast_3d", "ravel"]


def _sizes(args):
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        args = args[0]
    return tuple(int(s) for s in args)


def infer_shape(shape, numel):
    """Resolve one ``-1`` in ``shape`` against ``numel``; PyTorch's errors otherwise."""
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if neg:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _try_view(x, shape):
    """``x`` reshaped without copying, or None when its strides do not allow it."""
    if x.flags.c_contiguous:
        return x.reshape(shape)
    try:
        return np.reshape(x, shape, copy=False) if type(x) is np.ndarray else _cupy_view(x, shape)
    except (ValueError, AttributeError):
        return None


def _cupy_view(x, shape):
    v = x.view()
    v.shape = shape
    return v


class View(ViewPrimitive):
    def forward(self, x, shape):
        self.in_shape = x.shape
        out = _try_view(x, shape)
        if out is None:
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
        return out

    def backward(self, gy):
        return gy.reshape(self.in_shape), None


class ReshapeCopy(Primitive):
    _node_name = "ViewBackward0"

    def forward(self, x, shape):
        self.in_shape = x.shape
        return np.reshape(x, shape).copy()

    def backward(self, gy):
        return gy.reshape(self.in_shape), None


def view(self, *shape):
    """A view with another shape (one dim may be -1); fails if the strides do not allow it."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, tuple, list, Tensor)):
        return self.to(shape[0])  # view(dtype) reinterpretation is not supported: cast
    return View.apply(self, infer_shape(_sizes(shape), self._data.size))


def reshape(input, *shape):
    """``input`` with another shape: a view when possible, else a copy."""
    shape = infer_shape(_sizes(shape), input._data.size)
    if _try_view(input._data, shape) is not None:
        return View.apply(input, shape)
    return ReshapeCopy.apply(input, shape)


def view_as(self, other):
    """``self.view(other.shape)``."""
    return view(self, other._data.shape)


def reshape_as(self, other):
    """``self.reshape(other.shape)``."""
    return reshape(self, other._data.shape)


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims ``start_dim`` to ``end_dim`` into one."""
    shape = input._data.shape
    if len(shape) == 0:
        return reshape(input, (1,))
    s = wrap_dim(start_dim, len(shape))
    e = wrap_dim(end_dim, len(shape))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    n = 1
    for d in shape[s:e + 1]:
        n *= d
    return reshape(input, shape[:s] + (n,) + shape[e + 1:])


ravel = lambda input: reshape(input, (-1,))  # noqa: E731
ravel.__doc__ = "A 1-D tensor of all elements (a view when possible)."


def unflatten(input, dim, sizes):
    """Split dim ``dim`` into ``sizes`` (one may be -1)."""
    shape = input._data.shape
    d = wrap_dim(dim, len(shape))
    sizes = infer_shape(tuple(sizes), shape[d])
    return view(input, shape[:d] + sizes + shape[d + 1:]) if _try_view(
        input._data, shape[:d] + sizes + shape[d + 1:]) is not None else reshape(
        input, shape[:d] + sizes + shape[d + 1:])


class Permute(ViewPrimitive):
    def forward(self, x, dims):
        self.dims = dims
        return x.transpose(dims)

    def backward(self, gy):
        inv = [0] * len(self.dims)
        for i, d in enumerate(self.dims):
            inv[d] = i
        return gy.permute(inv), None


def permute(input, *dims):
    """Reorder the dims (a view)."""
    dims = _sizes(dims)
    n = input._data.ndim
    if len(dims) != n:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {n} is not equal to len(dims) = {len(dims)}")
    dims = tuple(wrap_dim(d, n) for d in dims)
    if len(set(dims)) != n:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return Permute.apply(input, dims)


class Transpose(ViewPrimitive):
    def forward(self, x, d0, d1):
        self.dims = (d0, d1)
        return x.swapaxes(d0, d1)

    def backward(self, gy):
        return gy.transpose(*self.dims), None, None


def transpose(input, dim0, dim1):
    """Swap two dims (a view)."""
    n = input._data.ndim
    d0, d1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
    if n == 0:
        return View.apply(input, ())
    return Transpose.apply(input, d0, d1)


swapaxes = swapdims = transpose


def t(input):
    """Transpose a tensor of at most 2 dims."""
    n = input._data.ndim
    if n > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {n}D")
    return transpose(input, 0, 1) if n == 2 else View.apply(input, input._data.shape)


def movedim(input, source, destination):
    """Move dims from ``source`` to ``destination`` positions."""
    n = input._data.ndim
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    src = [wrap_dim(d, n) for d in src]
    dst = [wrap_dim(d, n) for d in dst]
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, order)


moveaxis = movedim


class Squeeze(ViewPrimitive):
    def forward(self, x, dims):
        self.in_shape = x.shape
        return x.reshape([s for i, s in enumerate(x.shape) if i not in dims])

    def backward(self, gy):
        return gy.reshape(self.in_shape), None


def squeeze(input, dim=None):
    """Remove dims of size 1 (all, or those in ``dim``)."""
    shape = input._data.shape
    if dim is None:
        dims = tuple(i for i, s in enumerate(shape) if s == 1)
    else:
        dims = tuple(d for d in wrap_dims(dim, len(shape)) if shape[d] == 1) if shape else ()
    return Squeeze.apply(input, dims)


class Unsqueeze(ViewPrimitive):
    def forward(self, x, dim):
        self.dim = dim
        return np.expand_dims(x, dim)

    def backward(self, gy):
        return gy.squeeze(self.dim), None


def unsqueeze(input, dim):
    """Insert a dim of size 1 at ``dim``."""
    return Unsqueeze.apply(input, wrap_dim(dim, input._data.ndim + 1))


class Expand(ViewPrimitive):
    def forward(self, x, shape):
        self.in_shape = x.shape
        return np.broadcast_to(x, shape)

    def backward(self, gy):
        return gy.sum_to_size(self.in_shape), None


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
    shape = _expand_shape(self._data.shape, _sizes(sizes))
    if shape == self._data.shape:
        return View.apply(self, shape)
    return Expand.apply(self, shape)


def expand_as(self, other):
    """``self.expand(other.shape)``."""
    return expand(self, other._data.shape)


broadcast_to = lambda input, size: expand(input, tuple(size))  # noqa: E731
broadcast_to.__doc__ = "``input.expand(size)``."


def broadcast_shapes(*shapes):
    """The shape that the given shapes broadcast to."""
    try:
        return tuple(np.broadcast_shapes(*[(s,) if isinstance(s, int) else tuple(s)
                                           for s in shapes]))
    except ValueError:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: "
                           f"{shapes}") from None


def broadcast_tensors(*tensors):
    """Expand all tensors to their common broadcast shape."""
    shape = broadcast_shapes(*[t._data.shape for t in tensors])
    return tuple(expand(t, shape) for t in tensors)


class SumToSize(Primitive):
    """Sum a broadcast gradient back to ``shape`` (the adjoint of ``expand``)."""
    _node_name = "SumBackward1"

    def forward(self, x, shape):
        self.in_shape = x.shape
        lead = x.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
        out = x.sum(axis=axes, keepdims=True) if axes else x
        if lead:
            out = out.reshape(shape)
        return out

    def backward(self, gy):
        return gy.expand(self.in_shape), None


def sum_to_size(self, *size):
    """Sum ``self`` down to ``size``, which ``self``'s shape must broadcast from."""
    shape = _sizes(size)
    if tuple(shape) == self._data.shape:
        return self
    try:
        if np.broadcast_shapes(shape, self._data.shape) != self._data.shape:
            raise ValueError
    except ValueError:
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size "
                           f"{{{list(self.shape)}}}.") from None
    return SumToSize.apply(self, tuple(shape))


def atleast_1d(*tensors):
    """Each tensor with at least one dim."""
    out = [t.reshape(1) if t.dim() == 0 else t for t in _flat_args(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


def atleast_2d(*tensors):
    """Each tensor with at least two dims."""
    out = []
    for t in _flat_args(tensors):
        out.append(t.reshape(1, 1) if t.dim() == 0 else t.unsqueeze(0) if t.dim() == 1 else t)
    return out[0] if len(out) == 1 else tuple(out)


def atleast_3d(*tensors):
    """Each tensor with at least three dims."""
    out = []
    for t in _flat_args(tensors):
        d = t.dim()
        out.append(t.reshape(1, 1, 1) if d == 0 else t.reshape(1, -1, 1) if d == 1 else
                   t.unsqueeze(-1) if d == 2 else t)
    return out[0] if len(out) == 1 else tuple(out)


def _flat_args(tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def _T(self):
    n = self._data.ndim
    if n == 2:
        return transpose(self, 0, 1)
    if n < 2:
        return self
    return permute(self, tuple(range(n - 1, -1, -1)))


def _mT(self):
    if self._data.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self._data.ndim}-D tensor.")
    return transpose(self, -2, -1)


def _bind():
    T = Tensor
    for name, fn in (("view", view), ("reshape", reshape), ("view_as", view_as),
                     ("reshape_as", reshape_as), ("flatten", flatten), ("unflatten", unflatten),
                     ("permute", permute), ("transpose", transpose), ("swapaxes", transpose),
                     ("swapdims", transpose), ("t", t), ("movedim", movedim),
                     ("moveaxis", movedim), ("squeeze", squeeze), ("unsqueeze", unsqueeze),
                     ("expand", expand), ("expand_as", expand_as), ("sum_to_size", sum_to_size),
                     ("broadcast_to", broadcast_to), ("ravel", ravel)):
        setattr(T, name, fn)
    T.T = property(_T)
    T.mT = property(_mT)
    T.H = property(_T)
    T.mH = property(_mT)

    def t_(self):
        return _retarget(self, t(self))

    def transpose_(self, d0, d1):
        return _retarget(self, transpose(self, d0, d1))

    def squeeze_(self, dim=None):
        return _retarget(self, squeeze(self, dim))

    def unsqueeze_(self, dim):
        return _retarget(self, unsqueeze(self, dim))
    T.t_, T.transpose_, T.squeeze_, T.unsqueeze_ = t_, transpose_, squeeze_, unsqueeze_


def _retarget(self, new):
    """Shape-changing in-place methods: ``self`` takes the new view's place."""
    self._data = new._data
    if new._requires_grad:
        self.grad_fn = new.grad_fn
        self._output_nr = new._output_nr
    return self


_bind()
