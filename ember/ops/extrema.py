"""Value-selecting reductions: max, min, amax, amin, argmax, argmin, aminmax, median,
nanmedian and mode. The gradient goes to the selected elements: to the one at the
returned index, or shared evenly among ties where no index is returned."""
import inspect

import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._util import follows_int_reads, int_arg, refuse_kinds, with_out, wrap_dim
from ember.ops.gather_scatter import scatter_picked
from ember.ops.reduction import (
    _axes,
    _axis,
    _check_nonempty,
    _keep,
    _keep_shape,
    return_types,
)

__all__ = ["max", "min", "amax", "amin", "argmax", "argmin", "aminmax", "median", "nanmedian",
           "mode"]


class _EvenAll(Primitive):
    """A full reduction to one selected value (max, min, median): the gradient is shared
    evenly among the elements equal to it (the NaNs when it is NaN), as PyTorch's."""
    save_inputs = (0,)
    save_output = True

    def forward(self, x):
        return array_module(x).asarray(self.select(x))

    def backward(self, gy):
        x, y = self.saved_tensors
        if y._data.dtype.kind in "fV" and bool(array_module(y._data).isnan(y._data)):
            m = x.isnan()
        else:
            m = x == y
        # PyTorch's CPU formula: zeros with ``gy / count`` filled in where ``m``
        return _make(array_module(gy._data).zeros(x.shape, gy._data.dtype)).masked_fill(
            m, gy / m.sum())

    def jvp(self, t):
        return _jvp.reduced(self, t, None, False)


class _MaxAll(_EvenAll):
    _node_name = "MaxBackward1"
    batch = _batch.all_reduce(lambda: _MaxOfSamples)

    @staticmethod
    def select(x):
        _check_nonempty("max", x, (), True)
        return x.max()


class _MinAll(_EvenAll):
    _node_name = "MinBackward1"
    batch = _batch.all_reduce(lambda: _MinOfSamples)

    @staticmethod
    def select(x):
        _check_nonempty("min", x, (), True)
        return x.min()


def _nan_of(dt):
    """The median of nothing: NaN, which PyTorch's kernel converts to an integer dtype
    as the CPU does (the lowest int32/int64, zero for the narrower ones)."""
    if dt.kind in "fV":
        return dt.type(np.nan)
    return dt.type(np.iinfo(dt).min if dt.kind == "i" and dt.itemsize >= 4 else 0)


class _MedianAll(_EvenAll):
    _node_name = "MedianBackward0"

    @staticmethod
    def select(x):
        flat = x.reshape(-1)
        if flat.size == 0:
            return _nan_of(x.dtype)
        if x.dtype.kind in "fV" and np.isnan(flat).any():  # (bfloat16's kind is V)
            return x.dtype.type(np.nan)
        return np.partition(flat, (flat.size - 1) // 2)[(flat.size - 1) // 2]


class _NanmedianAll(_EvenAll):
    _node_name = "NanmedianBackward0"

    @staticmethod
    def select(x):
        flat = x.reshape(-1)
        if x.dtype.kind in "fV":
            flat = flat[~np.isnan(flat)]
        if flat.size == 0:
            return _nan_of(x.dtype)
        return np.partition(flat, (flat.size - 1) // 2)[(flat.size - 1) // 2]


class _SelectDim(Primitive):
    """A reduction along one dim that picks an element: (values, indices). The gradient
    goes to the picked element only (PyTorch's ``value_selecting_reduction_backward``)."""
    n_outputs = 2
    differentiable_outputs = (0,)
    batch = _batch.dim_rule(1)

    def forward(self, x, axis, keepdim):
        self.meta = (x.shape, axis, keepdim)
        if axis is None:  # a 0-d input: the element itself, index 0
            return x.copy(), array_module(x).zeros((), dtype=np.int64)
        _check_nonempty(self.op, x, (axis,), False)
        idx = self.pick(x, axis).astype(np.int64)  # keepdim shape
        values = np.take_along_axis(x, idx, axis)
        self.idx = idx.copy()  # private: the user may write into the returned indices
        if not keepdim:
            values, idx = values.squeeze(axis), idx.squeeze(axis)
        return values, idx

    def _hook_saves(self, args, out):
        """PyTorch's node saves the indices output, for saved-tensor hooks
        (``Primitive._hook_saves``)."""
        in_shape, axis, keepdim = self.meta
        if axis is None:
            idx = array_module(args[0]._data).zeros((), dtype=np.int64)
        else:
            idx = self.idx if keepdim else self.idx.squeeze(axis)
        return [(_make(idx, False), None)]

    def backward(self, gv, gi):
        in_shape, axis, keepdim = self.meta
        if axis is None:  # a 0-d input: the one element, index 0
            own = array_module(gv._data).zeros((), dtype=np.int64)
        else:
            own = self.idx if keepdim else self.idx.squeeze(axis)
        idx, = self._saved_and_hooked(own)[1]
        return scatter_picked(gv, in_shape, idx, axis or 0, keepdim), None, None

    def jvp(self, t, *_):
        _, axis, keepdim = self.meta
        return _jvp.picked(self, t, axis, _make(self.idx) if axis is not None else None,
                           keepdim), None


def _nan_first(x, axis, base):
    """Indices from ``base``, replaced by the first NaN's where a slice holds a NaN."""
    if x.dtype.kind not in "fV":
        return base
    nan = np.isnan(x)
    has = nan.any(axis=axis, keepdims=True)
    if not has.any():
        return base
    return np.where(has, np.argmax(nan, axis=axis, keepdims=True), base)


class _MaxDim(_SelectDim):
    _node_name = "MaxBackward0"
    op = "max"

    @staticmethod
    def pick(x, axis):
        return np.argmax(x, axis=axis, keepdims=True)


class _MinDim(_SelectDim):
    _node_name = "MinBackward0"
    op = "min"

    @staticmethod
    def pick(x, axis):
        return np.argmin(x, axis=axis, keepdims=True)


def _kth_sorted(x, axis, k):
    order = np.argsort(x, axis=axis, kind="stable")
    return np.take_along_axis(order, k, axis)


class _MedianDim(_SelectDim):
    _node_name = "MedianBackward1"
    op = "median"

    @staticmethod
    def pick(x, axis):
        n = x.shape[axis]
        k = array_module(x).full(_keep_shape(x.shape, (axis,)), (n - 1) // 2)
        return _nan_first(x, axis, _kth_sorted(x, axis, k))


class _NanmedianDim(_SelectDim):
    _node_name = "NanmedianBackward1"
    op = "nanmedian"

    @staticmethod
    def pick(x, axis):
        n = x.shape[axis]
        if x.dtype.kind not in "fV":
            k = array_module(x).full(_keep_shape(x.shape, (axis,)), (n - 1) // 2)
            return _kth_sorted(x, axis, k)
        valid = n - np.isnan(x).sum(axis=axis, keepdims=True)
        k = np.where(valid > 0, (valid - 1) // 2, 0)  # NaNs sort last
        return _kth_sorted(x, axis, k)


class _ModeDim(_SelectDim):
    _node_name = "ModeBackward0"
    op = "mode"

    @staticmethod
    def pick(x, axis):
        # the most frequent value (the smallest among equally frequent ones), at its
        # last occurrence, as PyTorch's CPU kernel
        s = np.sort(x, axis=axis)
        xm = np.moveaxis(s, axis, -1)
        n = xm.shape[-1]
        xp = array_module(x)
        r = xp.arange(n)
        new = xp.ones(xm.shape, dtype=bool)
        new[..., 1:] = xm[..., 1:] != xm[..., :-1]
        start = np.maximum.accumulate(np.where(new, r, 0), axis=-1)
        end_new = xp.ones(xm.shape, dtype=bool)
        end_new[..., :-1] = new[..., 1:]
        end = np.flip(np.minimum.accumulate(np.flip(np.where(end_new, r, n), -1), axis=-1), -1)
        best = np.argmax(end - start, axis=-1)[..., None]
        value = np.moveaxis(np.take_along_axis(xm, best, -1), -1, axis)
        hits = np.where(x == value, xp.arange(x.shape[axis]).reshape(
            [-1 if d == axis else 1 for d in range(x.ndim)]), -1)
        idx = hits.max(axis=axis, keepdims=True)
        if xp is not np:
            return idx
        # a value occurring more than once: which occurrence PyTorch's CPU kernel reports
        # depends on how std::sort moved the equal elements (see _cpu_order); a row with
        # NaN (unordered, so std::sort leaves it where its swaps put it, and never equal
        # to itself) gets its value that way too
        from ember.ops._cpu_order import mode_row
        rows = np.moveaxis(x, axis, -1)
        odd = (rows == np.moveaxis(value, axis, -1)).sum(-1) > 1
        if x.dtype.kind in "fcV":
            odd |= np.isnan(rows).any(-1)
        ties = np.argwhere(odd)
        if len(ties):
            idx = np.moveaxis(idx, axis, -1).copy()
            for r in map(tuple, ties):
                idx[r] = mode_row(rows[r].tolist())[1]
            idx = np.moveaxis(idx, -1, axis)
        return idx


def _overload(name, args, kwargs):
    """``(dim, keepdim, other)`` of a ``max``/``min`` call, as torch picks its overload: a
    tensor second argument is ``other`` (the elementwise op) when given alone by
    position; given as ``dim=`` or with ``keepdim``, a 0-d integer tensor is the dim
    (``torch.max(x, torch.tensor(1), True)`` reduces along dim 1)."""
    if len(args) > 2:
        raise TypeError(f"{name}() takes from 1 to 3 positional arguments but "
                        f"{len(args) + 1} were given")
    given = dict(zip(("dim", "keepdim"), args))
    for k, v in kwargs.items():
        if k not in ("dim", "keepdim", "other") or k in given:
            raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
        given[k] = v
    if "other" in given:
        if len(given) > 1:
            raise TypeError(f"{name}() received an invalid combination of arguments")
        return None, False, given["other"]
    dim, keepdim = given.get("dim"), given.get("keepdim", False)
    if isinstance(dim, Tensor):
        if len(given) == 1 and args:
            return None, False, dim
        d = int_arg(dim)
        if isinstance(d, Tensor):
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"(Tensor, Tensor, {type(keepdim).__name__})")
        dim = d
    return dim, keepdim, None


# (the signature the overloads share, for introspection)
_SIGNATURE = inspect.Signature([
    inspect.Parameter("input", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("dim", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
    inspect.Parameter("keepdim", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False),
    inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None)])


def _select(cls, rtype, input, dim, keepdim):
    v, i = cls.apply(input, _axis(input, dim, cls.op), keepdim)
    return rtype(v, i)


@follows_int_reads
def max(input, *args, **kwargs):
    """The largest element (a 0-d tensor); with ``dim`` (an int), ``(values, indices)``
    along it; with a tensor second argument, the elementwise :func:`maximum`.

    NaN propagates. The gradient of the full maximum is shared evenly among ties.

        >>> values, indices = ember.tensor([[1., 5.], [7., 2.]]).max(1)
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"max(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    dim, keepdim, other = _overload("max", args, kwargs)
    if other is not None:
        from ember.ops.elementwise import maximum
        return maximum(input, other)
    if dim is None:
        if keepdim:
            raise TypeError("max(): keepdim requires an int dim")
        refuse_kinds(input, "c", "\"max_all\" not implemented for '{type}'",
                     NotImplementedError)
        return _MaxAll.apply(input)
    refuse_kinds(input, "c", "max(): does not support complex input")
    return _select(_MaxDim, return_types.max, input, dim, keepdim)


max.__signature__ = _SIGNATURE
max = with_out(max)


@follows_int_reads
def min(input, *args, **kwargs):
    """The smallest element; with ``dim``, ``(values, indices)``; with a tensor second
    argument, the elementwise :func:`minimum`."""
    if not isinstance(input, Tensor):
        raise TypeError(f"min(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    dim, keepdim, other = _overload("min", args, kwargs)
    if other is not None:
        from ember.ops.elementwise import minimum
        return minimum(input, other)
    if dim is None:
        if keepdim:
            raise TypeError("min(): keepdim requires an int dim")
        refuse_kinds(input, "c", "\"min_all\" not implemented for '{type}'",
                     NotImplementedError)
        return _MinAll.apply(input)
    refuse_kinds(input, "c", "min(): does not support complex input")
    return _select(_MinDim, return_types.min, input, dim, keepdim)


min.__signature__ = _SIGNATURE
min = with_out(min)


class _AmaxAmin(Primitive):
    """amax/amin over several dims; ties share the gradient evenly, as PyTorch's."""
    save_inputs = (0,)
    save_output = True
    batch = _batch.dim_rule(1)
    nan_ties = False  # a NaN result shares the gradient among the NaNs (max()/min())

    def forward(self, x, axes, keepdim):
        _check_nonempty(self.op, x, axes, False)
        self.meta = (x.shape, axes, keepdim)
        return self.fn(x, axis=axes, keepdims=keepdim)

    def backward(self, gy):
        x, y = self.saved_tensors
        in_shape, axes, keepdim = self.meta
        y = _keep(y, in_shape, axes, keepdim, view=True)
        mask = x == y
        if self.nan_ties:
            mask = mask | (y.isnan() & x.isnan())
        # no axes: nothing was reduced (a 0-d sample under vmap, whose batch is the
        # underlying dim 0): each element is its own tie count, where sum(()) would count
        # over every dim
        count = mask.sum(axes, keepdim=True) if axes else mask
        return _keep(gy, in_shape, axes, keepdim, view=True) / count * mask, None, None

    def jvp(self, t, *_):
        return _jvp.reduced(self, t, self.meta[1], self.meta[2])


class _Amax(_AmaxAmin):
    _node_name = "AmaxBackward0"
    op = "amax"
    fn = staticmethod(np.amax)


class _Amin(_AmaxAmin):
    _node_name = "AminBackward0"
    op = "amin"
    fn = staticmethod(np.amin)


class _MaxOfSamples(_Amax):
    """``max()`` of each sample under vmap (:class:`_MaxAll`'s rule): amax over the
    sample's dims, whose gradient goes evenly to the NaNs when the maximum is NaN, as
    ``max()``'s does (amax's own is NaN there)."""
    _node_name = "MaxBackward1"
    nan_ties = True


class _MinOfSamples(_Amin):
    """``min()`` of each sample under vmap (see :class:`_MaxOfSamples`)."""
    _node_name = "MinBackward1"
    nan_ties = True


def _amax_amin(cls, input, dim, keepdim):
    x = input._data
    if (dim is None or dim == () or dim == []) and x.size == 0:
        _check_nonempty(cls.op, x, (), True)
    return cls.apply(input, _axes(input, dim), keepdim)


@with_out
def amax(input, dim=(), keepdim=False, *, out=None):
    """The maximum over ``dim`` (an int, a tuple, or all dims when empty); ties share the
    gradient evenly. Unlike :func:`max` it returns values only."""
    if input._data.size:  # (an empty input runs no kernel: PyTorch returns)
        refuse_kinds(input, "c", "\"max_values_cpu\" not implemented for '{type}'",
                     NotImplementedError)
    return _amax_amin(_Amax, input, dim, keepdim)


@with_out
def amin(input, dim=(), keepdim=False, *, out=None):
    """The minimum over ``dim`` (an int, a tuple, or all dims when empty)."""
    if input._data.size:  # (an empty input runs no kernel: PyTorch returns)
        refuse_kinds(input, "c", "\"min_values_cpu\" not implemented for '{type}'",
                     NotImplementedError)
    return _amax_amin(_Amin, input, dim, keepdim)


@with_out
@follows_int_reads
def aminmax(input, *, dim=None, keepdim=False, out=None):
    """``(min, max)`` over ``dim`` (an int) or all elements, as a named tuple."""
    refuse_kinds(input, "c", "\"aminmax_cpu\" not implemented for '{type}'",
                 NotImplementedError)
    x = input._data
    if dim is None:
        if x.size == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as "
                               "the operation has no identity.")
        axes = ()
    else:
        a = _axis(input, dim, "aminmax")
        if a is not None and x.shape[a] == 0:
            raise IndexError(f"aminmax(): Expected reduction dim {a} to have non-zero size.")
        axes = () if a is None else a
    mn, mx = _Aminmax.apply(input, _axes(input, axes), keepdim, axes != ())
    return return_types.aminmax(mn, mx)


class _Aminmax(Primitive):
    """``(min, max)`` over ``axes`` in one node, as PyTorch's ``aminmax``; each gradient
    is shared evenly among ties, as ``amin``'s and ``amax``'s."""
    _node_name = "AminmaxBackward0"
    n_outputs = 2
    save_inputs = (0,)
    batch = _batch.dim_rule(1)

    def forward(self, x, axes, keepdim, along_dim):
        self.meta = (x.shape, axes, keepdim)
        mn = np.amin(x, axis=axes, keepdims=keepdim)
        mx = np.amax(x, axis=axes, keepdims=keepdim)
        if along_dim and x.dtype.kind in "fV":
            for y in (mn, mx):
                _first_zero_sign(y, x, axes[0], keepdim)
        self.picked = (mn.copy(), mx.copy())  # the user may write into the results
        return mn, mx

    def _weights(self, x, y):
        """Where ``x`` equals the reduced ``y``, 1 / (the number of ties); else 0."""
        in_shape, axes, keepdim = self.meta
        mask = (x == _keep(_make(y), in_shape, axes, keepdim)).to(x.dtype)  # not float32
        # no axes: nothing was reduced (a 0-d input, or 0-d samples under vmap), each
        # element is its own tie count, where sum(()) would count over the whole batch;
        # mask / mask keeps torch's 0 / 0 = NaN where the element is NaN
        return mask / (mask.sum(axes, keepdim=True) if axes else mask)

    def backward(self, gmin, gmax):
        x, = self.saved_tensors
        in_shape, axes, keepdim = self.meta
        g = None
        for gy, y in zip((gmin, gmax), self.picked):
            if gy is not None:
                part = _keep(gy, in_shape, axes, keepdim) * self._weights(x, y)
                g = part if g is None else g + part
        return g, None, None, None

    def jvp(self, t, *_):
        if t is None:
            return None, None
        x = self.fw_inputs[0].detach()
        _, axes, keepdim = self.meta
        return tuple((self._weights(x, y) * t).sum(axes, keepdim=keepdim)
                     for y in self.picked)


def _first_zero_sign(y, x, axis, keepdim):
    """PyTorch's aminmax along a dim keeps the first of equal values, so a zero result
    takes the sign of the first zero along ``axis``; NumPy's reduction may pick another
    (``y`` is fixed in place, and only when it holds a zero)."""
    xp = array_module(y)
    zero = y == 0
    if not zero.any():
        return
    first = xp.take_along_axis(x, xp.expand_dims(xp.argmax(x == 0, axis=axis), axis), axis)
    if not keepdim:
        first = xp.squeeze(first, axis)
    y[zero] = first[zero]


class _ArgExtreme(Primitive):
    batch = _batch.dim_rule(1, all_if_none=False)

    def forward(self, x, axis, keepdim):
        if x.dtype == np.bool_:
            raise RuntimeError(f"{self.op}(): does not support bool input")
        if axis is None:  # over all elements
            if x.size == 0:
                raise IndexError(f"{self.op}(): Expected reduction dim to be specified for "
                                 "input.numel() == 0.")
            i = array_module(x).asarray(self.fn(x.reshape(-1)), dtype=np.int64)
            return i.reshape((1,) * x.ndim) if keepdim else i
        if x.ndim == 0:
            return array_module(x).zeros((), dtype=np.int64)
        _check_nonempty(self.op, x, (axis,), False)
        return self.fn(x, axis=axis, keepdims=keepdim).astype(np.int64)


class _Argmax(_ArgExtreme):
    op = "argmax"
    fn = staticmethod(np.argmax)


class _Argmin(_ArgExtreme):
    op = "argmin"
    fn = staticmethod(np.argmin)


@with_out
def argmax(input, dim=None, keepdim=False):
    """Index of the largest element: of the flattened tensor when ``dim`` is None, else
    along ``dim``. The first occurrence wins ties; NaN counts as the largest."""
    refuse_kinds(input, "c", "argmax(): does not support complex input")
    refuse_kinds(input, "b", "argmax(): does not support bool input")
    return _Argmax.apply(input, None if dim is None else wrap_dim(dim, input._data.ndim),
                         keepdim)


@with_out
def argmin(input, dim=None, keepdim=False):
    """Index of the smallest element (flattened when ``dim`` is None)."""
    refuse_kinds(input, "c", "argmin(): does not support complex input")
    refuse_kinds(input, "b", "argmin(): does not support bool input")
    return _Argmin.apply(input, None if dim is None else wrap_dim(dim, input._data.ndim),
                         keepdim)


@with_out
def median(input, dim=None, keepdim=False, *, out=None):
    """The lower median of all elements (a 0-d tensor; NaN if any is NaN), or with ``dim``
    the named tuple ``(values, indices)`` along it."""
    refuse_kinds(input, "cb", "\"median_cpu\" not implemented for '{type}'" if dim is None
                 else "\"median_out\" not implemented for '{type}'", NotImplementedError)
    if dim is None:
        return _MedianAll.apply(input)
    return _select(_MedianDim, return_types.median, input, dim, keepdim)


@with_out
def nanmedian(input, dim=None, keepdim=False, *, out=None):
    """:func:`median` ignoring NaNs (NaN only where a slice is all NaN)."""
    refuse_kinds(input, "cb", "\"median_cpu\" not implemented for '{type}'" if dim is None
                 else "\"median_out\" not implemented for '{type}'", NotImplementedError)
    if dim is None:
        return _NanmedianAll.apply(input)
    return _select(_NanmedianDim, return_types.nanmedian, input, dim, keepdim)


@with_out
@follows_int_reads
def mode(input, dim=-1, keepdim=False, *, out=None):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and
    the index of its last occurrence, as ``(values, indices)``."""
    refuse_kinds(input, "c", "\"mode_cpu\" not implemented for '{type}'", NotImplementedError)
    return _select(_ModeDim, return_types.mode, input, dim, keepdim)


def _bind():
    for fn in (max, min, amax, amin, argmax, argmin, aminmax, median, nanmedian, mode):
        setattr(Tensor, fn.__name__, fn)


_bind()
