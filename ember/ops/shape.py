"""Shape and movement ops: views (reshape, permute, expand, narrow, ...) and their Tensor
methods. Flips, rolls and ``unfold`` are in ``reorder``, padding in ``padding``,
``narrow``/``select`` in ``narrowing``, ``expand``/broadcasting in ``broadcasting`` (all
re-exported here), joins and splits in ``join``, diagonals in ``diagonal``."""
from math import prod

import numpy as np

from ember._tensor import Size, Tensor, _mode_active, _mode_recorder  # noqa: F401  (shape.Size)
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive, _wrap
from ember.ops import _batch, _jvp, reinterpret
from ember.ops._util import _sizes, follows_int_reads, traced_ints, wrap_dim, wrap_dims  # noqa: F401,E501  (shape._sizes)
from ember.ops._views import ViewPrimitive, grad_array, grad_view, passes_array

# expand, broadcasting and its adjoint ``sum_to_size`` live in ``broadcasting``; their
# names stay importable from here (``shape.Expand``, ``shape.SumToSize`` ...)
from ember.ops.broadcasting import (  # noqa: F401
    Expand,
    SumToSize,
    _expand_shape,
    _expanded,
    broadcast_shapes,
    broadcast_tensors,
    broadcast_to,
    expand,
    expand_as,
    sum_to_size,
)
from ember.ops.indexing import GetItem, Select, transforming  # noqa: F401  (shape.Select)

# flips, rolls and unfold live in ``reorder``, padding in ``padding``, narrow and select in
# ``narrowing``; their names stay importable from here (``from ember.ops.shape import
# pad``, ``shape.Flip``, ``shape.NarrowCopy`` ...)
from ember.ops.narrowing import NarrowCopy, _narrow_index, narrow, narrow_copy, select  # noqa: F401
from ember.ops.padding import (  # noqa: F401
    _NP_MODES,
    ConstantPad,
    _pad_call,
    constant_pad_nd,
    pad,
)
from ember.ops.reorder import (  # noqa: F401
    Flip,
    Roll,
    Unfold,
    UnfoldBackward,
    _flip_method,
    flip,
    fliplr,
    flipud,
    roll,
    rot90,
    unfold,
)

__all__ = ["reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose",
           "swapaxes", "swapdims", "t", "movedim", "moveaxis", "broadcast_to", "broadcast_tensors",
           "broadcast_shapes", "atleast_1d", "atleast_2d", "atleast_3d", "ravel", "narrow",
           "narrow_copy", "select", "flip", "fliplr", "flipud", "roll", "rot90",
           "constant_pad_nd"]


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


def _int_shape(shape, numel):
    """``shape`` (the arguments of ``view``/``reshape``) resolved against ``numel`` when
    it is the common case: Python ints, or one tuple of them, all non-negative with
    ``numel`` elements in all. None otherwise (``-1``, other types, errors): the general
    path (``_sizes``, ``infer_shape``) then reads it."""
    if len(shape) == 1 and type(shape[0]) is tuple:
        shape = shape[0]
    for s in shape:
        if type(s) is not int or s < 0:
            return None
    return shape if prod(shape) == numel else None


def _try_view(x, shape):
    """``x`` reshaped without copying, or None when its strides do not allow it."""
    if x.flags.c_contiguous:
        return x.reshape(shape)
    try:
        # (``np.reshape(x, shape, copy=False)``'s own call)
        return x.reshape(shape, copy=False) if type(x) is np.ndarray else _cupy_view(x, shape)
    except (ValueError, AttributeError):
        return None


def _reshape_grad(gy, shape):
    """``gy.reshape(shape)``, a reshaping view's gradient: on arrays where
    ``_views.grad_array`` allows it and NumPy can view ``gy``'s array in that shape (what
    the Tensor op would do: a ``View``, or a ``ReshapeAlias`` of strided memory)."""
    g = grad_array(gy)
    if g is not None:
        try:
            v = _try_view(g, shape)
        except ValueError:  # the sizes disagree: the Tensor op raises PyTorch's error
            v = None
        if v is not None:
            return grad_view(gy, v)
        if g.size == prod(shape):
            # what the Tensor op does then: a row-major copy (``Clone``), reshaped
            # (``UnsafeReshape``), a new tensor
            return _wrap(g.copy().reshape(shape))
    return gy.reshape(shape)


def _reshape_array(node, g, shape):
    """``_reshape_grad``'s result on the array ``g`` (``Node._array_grads``), or None where
    only the Tensor op may answer (a hooked or leaf input, sizes that disagree)."""
    if not passes_array(node):
        return None
    try:
        v = _try_view(g, shape)
    except ValueError:
        return None
    if v is not None:
        return v
    if g.size == prod(shape):
        return g.copy().reshape(shape)
    return None


def _cupy_view(x, shape):
    v = x.view()
    v.shape = shape
    return v


class _GradInShape:
    """The gradient of a view that only reshapes (``view``, ``squeeze``): the incoming
    gradient reshaped to the input's shape ``in_shape``, as a Tensor op, on arrays
    (``Node._array_grads``) and as ``Primitive.vjp``."""

    def backward(self, gy):
        return _reshape_grad(gy, self.in_shape), None

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``)."""
        v = _reshape_array(self, g, self.in_shape)
        return None if v is None else (v, None)

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``)."""
        return [grads[0].reshape(self.in_shape), None]


class View(_GradInShape, ViewPrimitive):
    batch = _batch.view
    torchscript = "view"

    def forward(self, x, shape):
        self.in_shape = x.shape
        out = _try_view(x, shape)
        if out is None:
            raise RuntimeError(
                "view size is not compatible with input tensor's size and stride (at least one "
                "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
        return out


class ReshapeAlias(View):
    """``reshape`` of a tensor that is not contiguous but whose strides allow a view
    (PyTorch's ``_reshape_alias``): the same view under its own node name."""
    _node_name = "ReshapeAliasBackward0"
    torchscript = "reshape"
    profiler_name = "aten::_reshape_alias"


class UnsafeReshape(Primitive):
    """The reshape of a fresh contiguous copy that ``reshape`` makes when no view is
    possible; like PyTorch's ``_unsafe_view`` its output is not recorded as a view of
    the copy (nothing else can see the copy)."""
    _node_name = "UnsafeViewBackward0"

    def forward(self, x, shape):
        self.in_shape = x.shape
        return x.reshape(shape)

    def backward(self, gy):
        return _reshape_grad(gy, self.in_shape), None

    jvp = _jvp.linear(0)
    batch = _batch.reshape_copy
    torchscript = "reshape"


class ReshapeCopy(Primitive):
    """A reshape that copies, as one node (vmap's fallback for batches that cannot be
    viewed)."""
    _node_name = "ViewBackward0"

    def forward(self, x, shape):
        self.in_shape = x.shape
        return np.reshape(x, shape).copy()

    def backward(self, gy):
        return _reshape_grad(gy, self.in_shape), None

    jvp = _jvp.linear(0)
    batch = _batch.reshape_copy
    torchscript = "reshape"


def _arg_type(a):
    """An argument's type as PyTorch's argument errors name it (``ember.dtype``, ``int``)."""
    return "ember.dtype" if type(a).__name__ == "dtype" and hasattr(a, "itemsize") else \
        type(a).__name__


def view(self, *shape, **kwargs):
    """A view with another shape (one dim may be -1; fails if the strides do not allow
    it), or, given a dtype (``view(ember.int32)``, ``view(dtype=...)``), the same bytes
    read as that dtype (see ``ember.ops.reinterpret``)."""
    if _mode_active[0] and (m := _mode_recorder((self,) + shape)) is not None:
        return m.composite("view", view, (self,) + shape, kwargs)
    if not kwargs and (s := _int_shape(shape, self._data.size)) is not None:
        return View.apply(self, s)
    if kwargs:
        if len(kwargs) == 1 and not shape and "dtype" in kwargs:
            return reinterpret.view_dtype(self, kwargs["dtype"])
        if len(kwargs) == 1 and not shape and "size" in kwargs:
            shape = (kwargs["size"],)
        else:
            got = ", ".join([_arg_type(a) for a in shape] +
                            [f"{k}={_arg_type(v)}" for k, v in kwargs.items()])
            raise TypeError(f"view() received an invalid combination of arguments - got "
                            f"({got}), but expected one of:\n * (torch.dtype dtype)\n"
                            f" * (tuple of ints size)")
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, tuple, list, Tensor)):
        if isinstance(shape[0], str):
            raise TypeError("view() received an invalid combination of arguments - got (str), "
                            "but expected (torch.dtype dtype) or (tuple of ints size)")
        return reinterpret.view_dtype(self, shape[0])
    if any(not isinstance(s, (int, np.integer, tuple, list, Tensor)) for s in shape):
        got = ", ".join(_arg_type(a) for a in shape)
        raise TypeError(f"view() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:\n * (torch.dtype dtype)\n * (tuple of ints size)")
    return View.apply(self, infer_shape(_sizes(shape), self._data.size))


def reshape(input, *shape):
    """``input`` with another shape: a view when possible, else a copy."""
    if _mode_active[0] and (m := _mode_recorder((input,) + shape)) is not None:
        return m.composite("reshape", reshape, (input,) + shape, {})
    s = _int_shape(shape, input._data.size)
    return reshape_nodes(input, infer_shape(_sizes(shape), input._data.size) if s is None else s)


def reshape_nodes(x, shape):
    """``x`` reshaped to the resolved ``shape`` with PyTorch's nodes: a contiguous tensor
    is viewed (``ViewBackward0``); one whose strides still allow a view is aliased
    (``ReshapeAliasBackward0``); any other is copied to a contiguous tensor first
    (``CloneBackward0`` under ``UnsafeViewBackward0``)."""
    data = x._data
    if data.flags.c_contiguous:
        return View.apply(x, shape)
    if _try_view(data, shape) is not None:
        return ReshapeAlias.apply(x, shape)
    from ember.ops.conversion import Clone
    return UnsafeReshape.apply(Clone.apply(x), shape)


def view_as(self, other):
    """``self.view(other.shape)``."""
    if _mode_active[0] and (m := _mode_recorder((self, other))) is not None:
        return m.composite("view_as", view_as, (self, other), {})
    return view(self, other._data.shape)


def reshape_as(self, other):
    """``self.reshape(other.shape)``."""
    if _mode_active[0] and (m := _mode_recorder((self, other))) is not None:
        return m.composite("reshape_as", reshape_as, (self, other), {})
    return reshape(self, other._data.shape)


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims ``start_dim`` to ``end_dim`` into one."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None:
        return m.composite_locals("flatten", flatten, locals())
    shape = input._data.shape
    if len(shape) == 0:
        wrap_dim(start_dim, 0)  # a 0-d tensor takes dims 0 and -1 only
        wrap_dim(end_dim, 0)
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


def ravel(input):
    """A 1-D tensor of all elements: a view of a contiguous tensor, else of a contiguous
    copy (``contiguous().view(-1)``, as PyTorch records it)."""
    if transforming():
        # captures and transforms record it as reshape(-1) of a contiguous input (a
        # replay at a strided input copies, as eagerly)
        return reshape(input.contiguous(), (-1,))
    if not input._data.flags.c_contiguous:
        from ember.ops.conversion import Clone
        input = Clone.apply(input)
    return View.apply(input, (input._data.size,))


def unflatten(input, dim, sizes):
    """Split dim ``dim`` into ``sizes`` (one may be -1)."""
    if _mode_active[0] and (m := _mode_recorder((input, dim, sizes))) is not None:
        return m.composite("unflatten", unflatten, (input, dim, sizes), {})
    shape = input._data.shape
    d = wrap_dim(dim, len(shape))
    sizes = infer_shape(tuple(sizes), shape[d])
    new = shape[:d] + sizes + shape[d + 1:]
    if _int_shape(new, input._data.size) is not None and _try_view(input._data, new) is not None:
        return View.apply(input, new)  # what ``view`` does with these sizes
    return view(input, shape[:d] + sizes + shape[d + 1:]) if _try_view(
        input._data, shape[:d] + sizes + shape[d + 1:]) is not None else reshape(
        input, shape[:d] + sizes + shape[d + 1:])


class Permute(ViewPrimitive):
    batch = _batch.permute

    def forward(self, x, dims):
        self.dims = dims
        return x.transpose(dims)

    def backward(self, gy):
        inv = [0] * len(self.dims)
        for i, d in enumerate(self.dims):
            inv[d] = i
        g = grad_array(gy)
        if g is not None and g.ndim == len(inv):  # (the view ``gy.permute(inv)`` makes)
            return grad_view(gy, g.transpose(inv)), None
        return gy.permute(inv), None

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``)."""
        dims = self.dims
        if g.ndim != len(dims) or not passes_array(self):
            return None
        inv = [0] * len(dims)
        for i, d in enumerate(dims):
            inv[d] = i
        return g.transpose(inv), None

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``)."""
        return [grads[0].transpose(np.argsort(self.dims)), None]


def permute(input, *dims):
    """Reorder the dims (a view)."""
    n = input._data.ndim
    d = dims[0] if len(dims) == 1 and type(dims[0]) in (tuple, list) else dims
    if len(d) == n:  # the common case: each dim once, as Python ints
        w = []
        for i in d:
            if type(i) is not int or not -n <= i < n:
                break
            w.append(i + n if i < 0 else i)
        else:
            if len(set(w)) == n:
                return Permute.apply(input, tuple(w))
    dims = _sizes(dims, "dims")
    if len(dims) != n:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {n} is not equal to len(dims) = {len(dims)}")
    dims = tuple(wrap_dim(d, n) for d in dims)
    if len(set(dims)) != n:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return Permute.apply(input, dims)


class Transpose(ViewPrimitive):
    batch = _batch.transpose

    def forward(self, x, d0, d1):
        self.dims = (d0, d1)
        return x.swapaxes(d0, d1)

    def backward(self, gy):
        g = grad_array(gy)
        if g is not None and g.ndim > max(self.dims):  # (the view ``gy.transpose`` makes)
            return grad_view(gy, g.swapaxes(*self.dims)), None, None
        return gy.transpose(*self.dims), None, None

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``)."""
        if g.ndim <= max(self.dims) or not passes_array(self):
            return None
        return g.swapaxes(*self.dims), None, None

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``)."""
        return [grads[0].swapaxes(*self.dims), None, None]


@follows_int_reads
def transpose(input, dim0, dim1, _op=Transpose):
    """Swap two dims (a view)."""
    n = input._data.ndim
    if type(dim0) is int and type(dim1) is int and -n <= dim0 < n and -n <= dim1 < n:
        return _op.apply(input, dim0 + n if dim0 < 0 else dim0, dim1 + n if dim1 < 0 else dim1)
    d0, d1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
    if n == 0:
        return View.apply(input, ())
    return _op.apply(input, d0, d1)


class TransposeInplace(Transpose):
    """``transpose_``: the same op, PyTorch's in-place node."""
    _node_name = "TransposeBackward1"
    _op_name = "Transpose"


swapaxes = swapdims = transpose


class T(Transpose):
    _node_name = "TBackward0"
    _op_name = "Transpose"  # the same op to the graph IR and its consumers


class TInplace(T):
    """``t_``: the same op, PyTorch's in-place node."""
    _node_name = "TBackward1"
    _op_name = "Transpose"


def t(input, _op=T):
    """Transpose a tensor of at most 2 dims."""
    n = input._data.ndim
    if n > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {n}D")
    if n == 0:
        return View.apply(input, ())
    return _op.apply(input, 0, n - 1)  # a vector's transpose is itself, PyTorch's node still


@follows_int_reads
def movedim(input, source, destination):
    """Move dims from ``source`` to ``destination`` positions."""
    if _mode_active[0] and (r := traced_ints(source, destination)) is not None:
        # traced dims order the permutation in Python: the call is one node
        return r[0].composite("movedim", movedim, (input,) + r[1], {})
    n = input._data.ndim
    one_s, one_d = _one_dim(source), _one_dim(destination)
    if one_s != one_d or isinstance(source, Tensor) and not one_s or \
            isinstance(destination, Tensor) and not one_d:
        raise TypeError("movedim() received an invalid combination of arguments: source and "
                        "destination must both be ints or both be sequences of ints (a "
                        "tensor only as a 0-d integer one)")
    src = (source,) if one_s else tuple(source)
    dst = (destination,) if one_d else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    src = [wrap_dim(d, n) for d in src]
    dst = [wrap_dim(d, n) for d in dst]
    for name, ds in (("source", src), ("destination", dst)):
        if len(set(ds)) != len(ds):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({ds})")
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, order)


def _one_dim(d):
    """Whether ``d`` is one dim: an int, or a 0-d integer tensor (torch takes it as an int;
    any other tensor is neither an int nor a sequence of ints to it)."""
    if isinstance(d, Tensor):
        return d._data.ndim == 0 and d._data.dtype.kind in "iu"
    return isinstance(d, (int, np.integer))


moveaxis = movedim


class Squeeze(_GradInShape, ViewPrimitive):
    batch = _batch.squeeze

    def forward(self, x, dims):
        # ``dims``: the dims asked for (None: all); those of size 1 here go, so a trace
        # replayed at other sizes squeezes what eager squeezes there
        self.in_shape = shape = x.shape
        dims = tuple(d for d in (range(len(shape)) if dims is None else dims)
                     if shape[d] == 1)
        self.dims = dims
        if len(dims) == 1:  # (the same shape as below, made by slicing)
            d = dims[0]
            return x.reshape(shape[:d] + shape[d + 1:])
        return x.reshape([s for i, s in enumerate(shape) if i not in dims])

    def backward(self, gy):
        if not _grad_state.grad_enabled:
            return _GradInShape.backward(self, gy)
        # recorded (create_graph): PyTorch's unsqueeze_to, one unsqueeze per squeezed dim
        for d in sorted(d for d in self.dims if self.in_shape[d] == 1):
            gy = gy.unsqueeze(d)
        return gy, None

    # without a graph the gradient is the reshape above: its array form still applies
    # (a class that defines ``backward`` otherwise drops the inherited one)
    _array_grads = _GradInShape._array_grads


class SqueezeDim(Squeeze):
    _node_name = "SqueezeBackward1"  # PyTorch's overloads: squeeze(), (dim), (dims)
    _op_name = "Squeeze"


class SqueezeDims(Squeeze):
    _node_name = "SqueezeBackward2"
    _op_name = "Squeeze"


# ``squeeze_``'s nodes: the same ops, PyTorch's in-place overloads' names
class SqueezeAllInplace(Squeeze):
    """``squeeze_()``."""
    _node_name = "SqueezeBackward3"
    _op_name = "Squeeze"


class SqueezeInplace(SqueezeDim):
    """``squeeze_(dim)`` (PyTorch's ``matmul`` of a vector and a matrix ends so too)."""
    _node_name = "SqueezeBackward4"
    _op_name = "Squeeze"


class SqueezeDimsInplace(SqueezeDims):
    """``squeeze_(dims)``."""
    _node_name = "SqueezeBackward5"
    _op_name = "Squeeze"


_SQUEEZES = (Squeeze, SqueezeDim, SqueezeDims)
_SQUEEZES_INPLACE = (SqueezeAllInplace, SqueezeInplace, SqueezeDimsInplace)


@follows_int_reads
def squeeze(input, dim=None, _ops=_SQUEEZES):
    """Remove dims of size 1 (all, or those in ``dim``)."""
    every, one, several = _ops
    shape = input._data.shape
    n = len(shape)
    if type(dim) is int and -n <= dim < n:  # (wrap_dims' answer for one int dim)
        return one.apply(input, (dim + n if dim < 0 else dim,))
    if dim is None:
        return every.apply(input, None)
    dims = tuple(wrap_dims(dim, len(shape))) if shape else ()
    return (one if isinstance(dim, int) else several).apply(input, dims)


class Unsqueeze(ViewPrimitive):
    batch = _batch.unsqueeze

    def forward(self, x, dim):
        self.dim = dim
        shape = x.shape
        return x.reshape(shape[:dim] + (1,) + shape[dim:])  # (np.expand_dims' own call)

    def backward(self, gy):
        g = grad_array(gy)
        d = self.dim
        if g is not None and d < g.ndim and g.shape[d] == 1:
            # the view ``gy.squeeze(d)`` makes (``Squeeze.forward``'s reshape)
            return grad_view(gy, g.reshape(g.shape[:d] + g.shape[d + 1:])), None
        return gy.squeeze(d), None

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``)."""
        d = self.dim
        if d >= g.ndim or g.shape[d] != 1 or not passes_array(self):
            return None
        return g.reshape(g.shape[:d] + g.shape[d + 1:]), None

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``): the incoming gradient without dim ``dim``."""
        g, d = grads[0], self.dim
        return [g.reshape(g.shape[:d] + g.shape[d + 1:]), None]


class UnsqueezeInplace(Unsqueeze):
    """``unsqueeze_``: the same op, PyTorch's in-place node."""
    _node_name = "UnsqueezeBackward1"
    _op_name = "Unsqueeze"


@follows_int_reads
def unsqueeze(input, dim, _op=Unsqueeze):
    """Insert a dim of size 1 at ``dim``."""
    n = input._data.ndim + 1
    if type(dim) is int and -n <= dim < n:
        return _op.apply(input, dim + n if dim < 0 else dim)
    return _op.apply(input, wrap_dim(dim, n))


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


def _xp(a):
    from ember.backend import array_module
    return array_module(a)


def _bind():
    T = Tensor
    for fn in (narrow, narrow_copy, select, fliplr, flipud, roll, rot90, unfold):
        setattr(T, fn.__name__, fn)
    T.flip = _flip_method
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
    # the conjugate transposes: for complex tensors a conjugate view, as torch
    T.H = property(lambda s: _T(s).conj() if s.is_complex() else _T(s))
    T.mH = property(lambda s: _mT(s).conj() if s.is_complex() else _mT(s))

    def t_(self):
        return _retarget(self, t(self, TInplace))

    def transpose_(self, d0, d1):
        return _retarget(self, transpose(self, d0, d1, TransposeInplace))

    def squeeze_(self, dim=None):
        return _retarget(self, squeeze(self, dim, _SQUEEZES_INPLACE))

    def unsqueeze_(self, dim):
        return _retarget(self, unsqueeze(self, dim, UnsqueezeInplace))
    T.t_, T.transpose_, T.squeeze_, T.unsqueeze_ = t_, transpose_, squeeze_, unsqueeze_


def _retarget(self, new):
    """Shape-changing in-place methods: ``self`` takes the new view's place."""
    self._data = new._data
    if new._requires_grad:
        self.grad_fn = new.grad_fn
        self._output_nr = new._output_nr
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        m.alias(self, new)  # a capture: ``self`` is the new view's graph value from here
    return self


_bind()


# ----- array gradients of the composites a graph capture records as calls ---------------
# (``Primitive.vjp``'s form without ``self``: the compile plan finds them on the
# function it recorded; gradients before broadcast reduction)
def _reshape_vjp(grads, inputs, outputs, out=None):
    return [grads[0].reshape(inputs[0].shape)] + [None] * (len(inputs) - 1)



for _f in (view, reshape, flatten, unflatten, view_as, reshape_as):
    _f.vjp = _reshape_vjp
