"""Scans along one dim: cumsum, cumprod, cummax, cummin, logcumsumexp, and diff.

Each scan's derivative is another scan written in Tensor ops (a reversed cumsum for
cumsum, a scatter-add for cummax), so second derivatives come for free.
"""
import operator

import numpy as np

from ember._tensor import Tensor, _make, _mode_active
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend.dtypes import FROM_NP
from ember.ops import _batch, _jvp
from ember.ops._inplace import inplace_method
from ember.ops._util import (
    cj,
    follows_int_reads,
    reduced_float,
    refuse_dtype,
    traced_ints,
    with_out,
    wrap_dim,
    write_out,
)
from ember.ops.composite_node import one_node
from ember.ops.gather_scatter import ScatterAdd
from ember.ops.reduction import _dtype_name, _eye_along, _np_dtype, return_types

__all__ = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "diff"]


def _axis(input, dim):
    """``dim`` wrapped to an axis, or None for a 0-d input (where a scan is the identity)."""
    if isinstance(dim, (tuple, list)) or isinstance(dim, bool) or dim is None:
        raise TypeError(f"argument 'dim' must be int, not {type(dim).__name__}")
    nd = input._data.ndim
    a = wrap_dim(dim, nd)
    return None if nd == 0 else a


def _to_input_dtype(g, dt):
    return g if g._data.dtype == dt else g.to(FROM_NP[dt])


def _from_plus_zero(y, axis):
    """``y`` (a sum-like scan along ``axis``, in place) as if it started from +0.0, as
    PyTorch's kernels do: only a run of -0.0 at the start can leave a -0.0 behind
    (any other addend turns it to +0.0), so the whole fix is needed only when the
    first slice holds a -0.0."""
    if (y.dtype.kind in "fc" or reduced_float(y.dtype)) and y.shape[axis]:
        xp = array_module(y)
        first = y.take(0, axis)
        parts = (first.real, first.imag) if y.dtype.kind == "c" else (first,)
        if any(((p == 0) & xp.signbit(p)).any() for p in parts):
            y += 0.0
    return y


# the scans' accumulate type (PyTorch's CPU acc_type) where it is wider than the result's
_SCAN_ACC = {"float32": np.float64, "complex64": np.complex128, "float16": np.float32,
             "bfloat16": np.float32}


def _cumsum_array(x, axis, dtype=None):
    """``cumsum`` of an array as PyTorch's CPU kernel: in the accumulate type of the
    result's dtype (``x``'s by default; float32 sums in double), each partial sum rounded
    to it, from +0.0."""
    xp = array_module(x)
    dt = x.dtype if dtype is None else np.dtype(dtype)
    if dt != x.dtype:
        x = x.astype(dt)  # (PyTorch converts the input to the result's dtype first)
    acc = _SCAN_ACC.get(dt.name)
    if acc is None:
        return _from_plus_zero(xp.cumsum(x, axis=axis, dtype=dt), axis)
    return _from_plus_zero(xp.cumsum(x, axis=axis, dtype=acc).astype(dt), axis)


# ----- private helpers: flips, reversed cumsum, gather and scatter-add along an axis ---------
class Flip(Primitive):
    """Reverse along one axis (its own derivative)."""

    def forward(self, x, axis):
        self.axis = axis
        return array_module(x).flip(x, axis).copy()

    def backward(self, gy):
        return Flip.apply(gy, self.axis), None

    jvp = _jvp.linear(0)
    batch = _batch.flip


class ReverseCumsum(Primitive):
    """``flip(cumsum(flip(x)))``: the sums from each position to the end (cumsum's adjoint)."""

    def forward(self, x, axis):
        self.axis = axis
        xp = array_module(x)
        # (PyTorch's cumsum: in double for float32, from +0.0)
        return xp.flip(_cumsum_array(xp.flip(x, axis), axis), axis).copy()

    def backward(self, gy):
        return Cumsum.apply(gy, self.axis, None), None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(1)


class GatherAlong(Primitive):
    """``take_along_axis(x, idx, axis)`` with a constant index array."""

    def forward(self, x, idx, axis):
        self.meta = (idx, axis, x.shape)
        return array_module(x).take_along_axis(x, idx, axis)

    def backward(self, gy):
        idx, axis, shape = self.meta
        return ScatterAddAlong.apply(gy, idx, axis, shape), None, None

    jvp = _jvp.linear(0)


class ScatterAddAlong(Primitive):
    """Zeros of ``shape`` with ``src`` added at ``idx`` along ``axis`` (repeats add up)."""

    def forward(self, src, idx, axis, shape):
        self.meta = (idx, axis)
        xp = array_module(src)
        out = xp.zeros(shape, dtype=src.dtype)
        where = list(xp.indices(idx.shape, sparse=True))
        where[axis] = idx
        xp.add.at(out, tuple(where), src)
        return out

    def backward(self, gy):
        idx, axis = self.meta
        return GatherAlong.apply(gy, idx, axis), None, None, None

    jvp = _jvp.linear(0)


# ----- cumsum and cumprod ----------------------------------------------------------------------
class Cumsum(Primitive):
    def forward(self, x, axis, np_dtype):
        self.meta = (axis, x.dtype)
        if np_dtype is None and x.dtype.kind in "biu":
            np_dtype = np.int64
        if axis is None:
            return x.astype(np_dtype or x.dtype, copy=True)
        # PyTorch accumulates float32 in double and float16/bfloat16 in float32, and
        # rounds each partial sum ([1e8, 1, -1e8] sums to 1, not 0, in float32)
        return _cumsum_array(x, axis, np_dtype)

    def backward(self, gy):
        axis, dt = self.meta
        gy = _to_input_dtype(gy, dt)
        if axis is None:
            return gy, None, None
        return ReverseCumsum.apply(gy, axis), None, None

    jvp = _jvp.linear(0)
    batch = _batch.dim_rule(1)


def _four_lane_sum(t):
    """``t`` summed along axis 0 as four interleaved running sums (element i into sum
    i mod 4) added together in order, the order torch's CPU sum follows on most short
    axes. It only shows where partial sums overflow (inf + -inf is NaN in one order and
    inf in another), which is where it makes cumprod's gradient agree with torch's."""
    lanes = []
    for k in range(min(4, t.shape[0])):
        acc = t[k]
        for row in t[k + 4::4]:
            acc = acc + row
        lanes.append(acc)
    total = lanes[0]
    for lane in lanes[1:]:
        total = total + lane
    return total


def _cumprod_grad_numpy(gy, x, y, axis):
    """cumprod's first derivative without dividing by a zero, for inputs with zeros, in
    O(n). Along each slice, with z1 its first zero and z2 its second:

    - before z1: ``sum_{k>=i} gy_k y_k / x_i``, the sum taken over the part before z1 only;
    - at z1: ``y_{z1-1} * sum_{z1<=k<z2} gy_k prod_{z1<j<=k} x_j``;
    - from z1 on: 0.

    These are the products of the other factors, grouped as torch groups them, so a NaN
    or inf elsewhere in the slice reaches the same elements."""
    xp = array_module(x)
    g, v, out = (xp.moveaxis(a, axis, 0) for a in (gy, x, y))
    zero = v == 0
    count = xp.cumsum(zero, axis=0)
    before = count == 0
    w = xp.where(before, out * g, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # (the sums from +0.0, as PyTorch's scan: a slice of -0.0 sums to +0.0)
        tail = xp.flip(_cumsum_array(xp.flip(w, 0), 0), 0)
        res = xp.where(before, tail / v, 0)
    seg = count == 1  # from the first zero to the one before the second
    first = seg & zero
    partial = xp.cumprod(xp.where(seg & ~zero, v, 1), axis=0)
    with np.errstate(invalid="ignore", over="ignore"):
        total = _four_lane_sum(partial * xp.where(seg, g, 0))[None]
    z1 = xp.argmax(seg, axis=0)[None]
    prev = xp.take_along_axis(out, xp.maximum(z1 - 1, 0), axis=0)
    prev = xp.where(z1 == 0, 1, prev)
    with np.errstate(invalid="ignore"):
        res = xp.where(first, total * prev, res).astype(v.dtype, copy=False)
    return xp.moveaxis(res, 0, axis)


# the product's accumulate type (PyTorch's CPU acc_type) where it is wider than the dtype
_CUMPROD_ACC = {"float32": np.float64, "complex64": np.complex128, "float16": np.float32,
                "bfloat16": np.float32}


class Cumprod(Primitive):
    save_inputs = (0,)
    save_output = True
    batch = _batch.dim_rule(1)

    def forward(self, x, axis, np_dtype):
        self.meta = (axis, x.dtype)
        if np_dtype is None and x.dtype.kind in "biu":
            np_dtype = np.int64
        if axis is None:
            return x.astype(np_dtype or x.dtype, copy=True)
        acc = _CUMPROD_ACC.get(np.dtype(np_dtype or x.dtype).name)
        if acc is not None:
            # PyTorch's CPU kernel runs the product in its accumulate type and rounds
            # each output: 1e30 * 1e30 * 1e-30 is 1e30 in float32, not inf, and
            # a product of subnormals keeps its last bits
            return array_module(x).cumprod(x, axis=axis, dtype=acc).astype(
                np_dtype or x.dtype)
        return array_module(x).cumprod(x, axis=axis, dtype=np_dtype)

    def backward(self, gy):
        x, y = self.saved_tensors
        axis, dt = self.meta
        gy = _to_input_dtype(gy, dt)
        if axis is None or x.numel() <= 1:
            return gy, None, None
        y = _to_input_dtype(y, dt)
        if not (x._data == 0).any():
            return ReverseCumsum.apply(gy * cj(y), axis) / cj(x), None, None
        if not _grad_state.grad_enabled:
            # (complex: the same products of the conjugates, PyTorch's grad * conj(dy/dx))
            xs, ys = (np.conj(a) if a.dtype.kind == "c" else a for a in (x._data, y._data))
            return _make(_cumprod_grad_numpy(gy._data, xs, ys, axis)), None, None
        # differentiable and exact with zeros, O(n^2): row k of `rows` is x with x_k set to
        # 1, so its cumprod at i >= k is prod_{j <= i, j != k} x_j = d y_i / d x_k
        n = x.shape[axis]
        xp = array_module(x._data)
        rows = Cumprod.apply(x.unsqueeze(axis).masked_fill(_eye_along(n, x.dim(), axis, xp), 1.0),
                             axis + 1, None)
        upper = _eye_along(n, x.dim(), axis, xp, k=-1)  # i < k: no dependence
        return (gy.unsqueeze(axis) * cj(rows)).masked_fill(upper, 0.0).sum(axis + 1), None, None


# out dtypes a scan with out= does not run in: bool (refused), and the half floats, which
# torch accumulates in float32
_OWN_ACC = ("ember.bool", "ember.float16", "ember.bfloat16")


def _refuse_bool_scan(name, dtype):
    """PyTorch's scans have no bool loop: ``dtype=torch.bool`` is refused."""
    if dtype is not None and str(dtype) == "ember.bool":
        raise NotImplementedError(f"\"{name}_out_cpu\" not implemented for 'Bool'")


@follows_int_reads
def cumsum(input, dim, *, dtype=None, out=None):
    """Cumulative sums along ``dim``; bool and integer tensors sum as int64."""
    _refuse_bool_scan("cumsum", dtype)
    if out is not None and dtype is None and str(out.dtype) not in _OWN_ACC:
        dtype = out.dtype  # torch scans in out's dtype (integer outs included)
    elif out is not None and dtype is None and str(out.dtype) in _OWN_ACC[1:] \
            and input.is_floating_point():
        input = input.to(out.dtype).float()  # rounded to out's dtype, summed in float32
    return write_out(Cumsum.apply(input, _axis(input, dim), _np_dtype(dtype, input)), out,
                     "cumsum", (input,))


@follows_int_reads
def cumprod(input, dim, *, dtype=None, out=None):
    """Cumulative products along ``dim``; the gradient is exact with zeros in the input."""
    _refuse_bool_scan("cumprod", dtype)
    if out is not None and dtype is None and str(out.dtype) not in _OWN_ACC:
        dtype = out.dtype  # torch scans in out's dtype (integer outs included)
    elif out is not None and dtype is None and str(out.dtype) in _OWN_ACC[1:] \
            and input.is_floating_point():
        input = input.to(out.dtype).float()  # rounded to out's dtype, summed in float32
    result = Cumprod.apply(input, _axis(input, dim), _np_dtype(dtype, input))
    return write_out(result, out, "cumprod", (input,))


# ----- cummax and cummin -----------------------------------------------------------------------
class _CumExtreme(Primitive):
    n_outputs = 2
    differentiable_outputs = (0,)
    batch = _batch.dim_rule(1)
    refuses = "c"  # (complex numbers have no order)

    def forward(self, x, axis):
        if axis is not None and x.size:  # (PyTorch's kernel runs on neither 0-d nor empty)
            refuse_dtype(self, x)
        xp = array_module(x)
        self.axis = axis
        if axis is None:
            return x.copy(), xp.zeros((), dtype=np.int64)
        values = self.acc.accumulate(x, axis=axis)
        # the running extreme's index: the last position that reached it (ties move the
        # index forward, as PyTorch's >= / <=), or the last NaN once there is one
        hit = x == values
        if x.dtype.kind in "fV":
            hit |= xp.isnan(x)
        r = xp.arange(x.shape[axis]).reshape([-1 if d == axis else 1 for d in range(x.ndim)])
        idx = xp.maximum.accumulate(xp.where(hit, r, 0), axis=axis).astype(np.int64)
        self.idx = idx.copy()  # private: the user may write into the returned indices
        return values, idx

    def _hook_saves(self, args, out):
        """PyTorch's node saves the input and the indices (``Primitive._hook_saves``)."""
        x = args[0]
        idx = self.idx if self.axis is not None else out[1]._data
        return [(x, x._vc[0]), (_make(idx, False), None)]

    def backward(self, gv, gi):
        if self.axis is None:  # a 0-d input: the one element, index 0
            own = array_module(gv._data).zeros((), dtype=np.int64)
        else:
            own = self.idx
        _, idx = self._saved_and_hooked(None, own)[1]
        if gv._data.size == 0:
            return gv, None
        # PyTorch's: zeros with the gradient added at the indices (``scatter_add``)
        return ScatterAdd.apply(_make(array_module(gv._data).zeros(gv.shape, gv._data.dtype)),
                                gv, idx, self.axis or 0), None

    def jvp(self, t, *_):
        return _jvp.picked(self, t, self.axis, self.fw_output[1], True), None


class _Cummax(_CumExtreme):
    _node_name = "CummaxBackward0"
    kernel = "cummax_cpu"
    acc = np.maximum


class _Cummin(_CumExtreme):
    _node_name = "CumminBackward0"
    kernel = "cummin_cpu"
    acc = np.minimum


@with_out
@follows_int_reads
def cummax(input, dim):
    """Running maximum along ``dim`` and the index where it was reached, as
    ``(values, indices)``; NaN propagates."""
    axis = _axis(input, dim)
    v, i = _Cummax.apply(input, axis)
    return return_types.cummax(v, i)


@with_out
@follows_int_reads
def cummin(input, dim):
    """Running minimum along ``dim`` and its index, as ``(values, indices)``."""
    axis = _axis(input, dim)
    v, i = _Cummin.apply(input, axis)
    return return_types.cummin(v, i)


# ----- logcumsumexp ----------------------------------------------------------------------------
class Logcumsumexp(Primitive):
    save_inputs = (0,)
    save_output = True
    batch = _batch.dim_rule(1)
    torchscript = "logcumsumexp"

    def forward(self, x, axis):
        if x.dtype.kind != "f" and not reduced_float(x.dtype):
            raise NotImplementedError(f'"logcumsumexp_out_cpu" not implemented for '
                                      f"'{_dtype_name(x.dtype)}'")
        self.axis = axis
        if axis is None:
            return x.copy()
        if reduced_float(x.dtype):  # accumulated in float32, each result rounded once
            y = np.logaddexp.accumulate(x.astype(np.float32), axis=axis).astype(x.dtype)
            return _from_plus_zero(y, axis)
        return _from_plus_zero(np.logaddexp.accumulate(x, axis=axis), axis)

    def backward(self, gy):
        x, y = self.saved_tensors
        a = self.axis
        if a is None or gy.numel() == 0:
            return gy, None
        # gx_k = sum_{i >= k} gy_i exp(x_k - y_i), summed in log space by the sign of gy
        # (PyTorch's formula, after TensorFlow's)
        from ember.ops.elementwise import where
        lowest = float(np.finfo(x._data.dtype).min)

        def rev_lcse(t):
            return Flip.apply(Logcumsumexp.apply(Flip.apply(t, a), a), a)
        log_abs = gy.abs().log()
        pos = where(gy > 0, log_abs, lowest)
        neg = where(gy < 0, log_abs, lowest)
        return (rev_lcse(pos - y) + x).exp() - (rev_lcse(neg - y) + x).exp(), None

    def jvp(self, t, _):
        # ty_i = sum_{j <= i} exp(x_j - y_i) t_j, shifted by the slice's max for range
        x, a = self.fw_inputs
        if a is None:
            return t
        m = x.amax(a, keepdim=True).detach()
        m = m.masked_fill(~m.isfinite(), 0.0)
        return ((x - m).exp() * t).cumsum(a) * (m - self.fw_output).exp()


@with_out
@follows_int_reads
def logcumsumexp(input, dim, *, out=None):
    """``log(cumsum(exp(input)))`` along ``dim``, without overflow."""
    if isinstance(input, Tensor) and input.is_complex():
        return _complex_logcumsumexp(input, dim)
    return Logcumsumexp.apply(input, _axis(input, dim))


def _complex_logcumsumexp(x, dim):
    """Complex ``logcumsumexp``: a running ``logaddexp`` (the operand of larger real part
    factored out, the imaginary parts not wrapped, as PyTorch's), written in ember ops so
    its gradient is the holomorphic one; one step per element along ``dim``."""
    return _complex_scan(x, dim)


@one_node("LogcumsumexpBackward0", 1)
def _complex_scan(x, dim):
    from ember.ops.elementwise import logaddexp
    from ember.ops.join import stack
    axis = _axis(x, dim)
    if axis is None or x.shape[axis] == 0:
        return x.clone()
    acc = x.select(axis, 0)
    outs = [acc]
    for i in range(1, x.shape[axis]):
        acc = logaddexp(acc, x.select(axis, i))
        outs.append(acc)
    return stack(outs, axis)


# ----- diff -----------------------------------------------------------------------------------
@with_out
@follows_int_reads
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (``out[i] = x[i + 1] - x[i]``), after
    joining ``prepend`` and ``append`` to ``input`` along ``dim``. Bool tensors give
    ``x[i + 1] != x[i]``."""
    if _mode_active[0] and (r := traced_ints(n, dim)) is not None:
        # a traced count of differences (a loop in Python) or dim (the slices' keys): the
        # call is one node
        return r[0].composite("diff", diff, (input,) + r[1] + (prepend, append), {})
    if input._data.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if isinstance(n, Tensor):
        n = operator.index(n)  # (the count of differences: a trace keeps it, and says so)
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    axis = wrap_dim(dim, input._data.ndim)
    if n == 0:  # PyTorch ignores prepend and append then, and copies input into a new tensor
        from ember._factory import empty_like
        return empty_like(input).copy_(input)
    for name, p in (("prepend", prepend), ("append", append)):
        if p is not None and not isinstance(p, Tensor):
            raise TypeError(f"diff(): argument '{name}' must be Tensor, not {type(p).__name__}")
    parts = [p for p in (prepend, input, append) if p is not None]
    for p in parts:
        if p.dim() != input.dim():
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        if any(a != b for d, (a, b) in enumerate(zip(p.shape, input.shape)) if d != axis):
            raise RuntimeError("diff expects the shape of tensor to prepend or append to match "
                               "that of input except along the differencing dimension; input "
                               f"size: {list(input.shape)}, tensor size: {list(p.shape)}")
    if len(parts) > 1:
        from ember.ops.join import cat
        input = cat(parts, axis)
    # PyTorch's steps: at most size differences, each of two narrowed copies
    from ember.ops.shape import narrow
    size = input.shape[axis]
    for i in range(min(n, size)):
        a, b = narrow(input, axis, 1, size - 1 - i), narrow(input, axis, 0, size - 1 - i)
        input = a != b if input._data.dtype == np.bool_ else a - b
    return input


def _bind():
    for fn in (cumsum, cumprod, cummax, cummin, logcumsumexp, diff):
        setattr(Tensor, fn.__name__, fn)
    Tensor.cumsum_ = inplace_method(cumsum, False)
    Tensor.cumprod_ = inplace_method(cumprod, True)


_bind()
