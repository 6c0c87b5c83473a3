"""``logsumexp``, ``softmax`` and ``log_softmax``: reductions of ``exp`` computed
shifted by the maximum, so that they do not overflow.
"""
import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.autograd.saved import _saved_output_array
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._util import cj, follows_int_reads, opmath, to_float, with_out, wrap_dim
from ember.ops.reduction import _axes, _dtype_name, _keep

__all__ = ["logsumexp", "softmax", "log_softmax"]


# ----- logsumexp -----------------------------------------------------------------------------
class _Logsumexp(Primitive):
    _node_name = "LogsumexpBackward0"
    save_inputs = (0,)
    save_output = True
    batch = _batch.dim_rule(1)
    torchscript = "logsumexp"

    @opmath
    def forward(self, x, axes, keepdim):
        x = to_float(x)
        xp = array_module(x)
        self.meta = (x.shape, axes, keepdim)
        if not axes and x.dtype.kind != "c":
            return x.copy()
        if x.size == 0:  # the log of an empty sum
            return xp.full_like(x.sum(axis=axes, keepdims=keepdim), -np.inf)
        # complex: shifted by the largest real part only, so the result's imaginary part is
        # the principal log's, in (-pi, pi], as torch's (even for a single element)
        m = (x.real if x.dtype.kind == "c" else x).max(axis=axes, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0).astype(x.dtype)
        s = xp.log(xp.exp(x - m).sum(axis=axes, keepdims=True)) + m
        return s if keepdim else s.squeeze(axes)

    def backward(self, gy):
        x, y = self.saved_tensors
        in_shape, axes, keepdim = self.meta
        return _keep(gy, in_shape, axes, keepdim) * cj(
            (x - _keep(y, in_shape, axes, keepdim)).exp()), None, None

    def jvp(self, t, *_):
        return _jvp.reduced(self, t, self.meta[1], self.meta[2])


@with_out
@follows_int_reads
def logsumexp(input, dim, keepdim=False, *, out=None):
    """``log(sum(exp(input)))`` over ``dim`` (an int or tuple), computed without overflow."""
    if dim is None:
        raise TypeError("logsumexp(): argument 'dim' (position 1) must be tuple of ints, not "
                        "NoneType")
    return _Logsumexp.apply(input, _axes(input, dim), keepdim)


# ----- softmax -------------------------------------------------------------------------------
def _shifted(x, axis, op):
    if x.size == 0:  # (PyTorch returns before its kernel's dtype check)
        return x.copy()
    if x.dtype.kind != "f":
        # PyTorch's kernel for the last dim (any layout: made contiguous) has its own name
        last = "_lastdim" if x.ndim == 0 or axis in (x.ndim - 1, -1) else ""
        raise NotImplementedError(f'"{op}{last}_kernel_impl" not implemented for '
                                  f"'{_dtype_name(x.dtype)}'")
    if type(x) is np.ndarray and x.ndim == 2 and axis == 1 and x.shape[1] <= 64 \
            and x.shape[0] >= 32 and x.flags.c_contiguous:
        # short rows (a classifier's scores): NumPy reduces each row in its own inner
        # loop, 128 rows of 10 in 11 us; over a transposed copy the same maxima come
        # from one loop down contiguous columns (3 us). A maximum is exact in any
        # order; where a row's maximum is a zero of either sign, ``x - m`` may differ
        # in a zero's sign only, which no output shows (exp gives 1 for both, and
        # log_softmax subtracts a positive log from it)
        m = np.maximum.reduce(np.ascontiguousarray(x.T), axis=0).reshape(x.shape[0], 1)
    else:
        m = x.max(axis=axis, keepdims=True)
    # the max is subtracted even when infinite, as PyTorch does: a slice holding +inf (or
    # only -inf) comes out all NaN, never a one-hot of the infinity
    with np.errstate(invalid="ignore"):
        return x - m


def _slice_sum(t, axis):
    """``t`` summed over the softmax's axis, kept. ``axis`` is what the forward reduced
    over: under ``vmap`` a 0-d sample's softmax reduces over no axis, ``()``, which for a
    Tensor's ``sum`` would mean every axis (the whole batch)."""
    return t if axis == () else t.sum(axis, keepdim=True)


class Softmax(Primitive):
    save_output = True

    @opmath
    def forward(self, x, axis):
        self.axis = axis
        if x.size == 0:  # any dtype, as PyTorch's (before its kernel's dtype check)
            return x.copy()
        e = array_module(x).exp(_shifted(x, axis, "softmax"))
        return e / e.sum(axis=axis, keepdims=True)

    def backward(self, gy):
        y, = self.saved_tensors
        a = self.axis
        return y * (gy - _slice_sum(gy * y, a)), None

    jvp = _jvp.diagonal
    batch = _batch.dim_rule(1)


class SafeSoftmax(Softmax):
    """``_safe_softmax``: softmax whose slices holding only -inf give zeros instead of
    NaN (the weights of PyTorch's math attention: a query that may attend to nothing)."""
    _node_name = "SafeSoftmaxBackward0"
    torchscript = "_safe_softmax"

    def forward(self, x, axis):
        y = Softmax.forward(self, x, axis)
        xp = array_module(x)
        empty = (x == -np.inf).all(axis=axis, keepdims=True)
        if empty.any():
            y = xp.where(empty, y.dtype.type(0), y)
        return y


def _safe_softmax(input, dim):
    """Softmax over ``dim`` with all -inf slices given zero weights (PyTorch's
    ``torch._safe_softmax``)."""
    input, axis = _prepare(input, dim, None)
    return SafeSoftmax.apply(input, axis)


class LogSoftmax(Primitive):
    save_output = True
    batch = _batch.dim_rule(1)

    @opmath
    def forward(self, x, axis):
        self.axis = axis
        if x.size == 0:  # any dtype, as PyTorch's (before its kernel's dtype check)
            return x.copy()
        xp = array_module(x)
        s = _shifted(x, axis, "log_softmax")
        return s - xp.log(xp.exp(s).sum(axis=axis, keepdims=True))

    def backward(self, gy):
        y, = self.saved_tensors
        a = self.axis
        if not _grad_state.grad_enabled and y._data.dtype in (np.float32, np.float64):
            # first order (cross_entropy's hot path): the same formula on arrays
            g, yd = gy._data, y._data
            xp = array_module(yd)
            return _make(g - xp.exp(yd) * g.sum(axis=a, keepdims=True)), None
        return gy - y.exp() * _slice_sum(gy, a), None

    def _array_grads(self, gy, g):
        """``backward``'s first-order formula on the gradient's array and the saved
        output's (``Node._array_grads``); None where the output was changed or packed,
        or for other dtypes."""
        y = _saved_output_array(self)
        if type(y) is np.ndarray and type(g) is np.ndarray and \
                y.dtype in (np.float32, np.float64) and g.dtype == y.dtype:
            return g - np.exp(y) * g.sum(axis=self.axis, keepdims=True), None
        return None

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``, what a compiled plan runs): ``backward``'s
        first-order formula on the arrays; other dtypes through its Tensor ops."""
        g, y = grads[0], outputs[0]
        a = self.axis
        if type(y) is np.ndarray and y.dtype in (np.float32, np.float64):
            return [g - np.exp(y) * g.sum(axis=a, keepdims=True), None]
        gy = _make(g)
        r = gy - _make(y).exp() * _slice_sum(gy, a)
        return [r._data, None]

    def jvp(self, t, _):
        return t - _slice_sum(self.fw_output.exp() * t, self.axis)


def _prepare(input, dim, dtype):
    if dim is None:
        raise TypeError("softmax(): argument 'dim' must be int, not NoneType")
    if dtype is not None:
        input = input.to(dtype)
    nd = input._data.ndim
    axis = wrap_dim(dim, nd)
    return input, (None if nd == 0 else axis)


@with_out
@follows_int_reads
def softmax(input, dim, dtype=None):
    """``exp(x) / exp(x).sum(dim)`` along ``dim``; ``dtype`` casts the input first.

        >>> ember.tensor([1., 2., 3.]).softmax(0)
        tensor([0.0900, 0.2447, 0.6652])
    """
    input, axis = _prepare(input, dim, dtype)
    return Softmax.apply(input, axis)


@with_out
@follows_int_reads
def log_softmax(input, dim, dtype=None):
    """``log(softmax(x, dim))``, computed as ``x - logsumexp(x, dim)`` for stability."""
    input, axis = _prepare(input, dim, dtype)
    return LogSoftmax.apply(input, axis)


Tensor.logsumexp = logsumexp
Tensor.softmax = softmax
Tensor.log_softmax = log_softmax
