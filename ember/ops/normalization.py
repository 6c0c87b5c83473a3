"""Normalization: batch, layer, group and instance norm, and local response norm.

One fused primitive, :class:`Normalize`, computes ``(x - mean) / sqrt(var + eps) *
weight + bias`` over some axes in a single NumPy pass set, optionally updating running
statistics. Its backward runs array kernels that reuse the mean and inverse standard
deviation from forward. When a graph of the gradient is being recorded
(``create_graph``), layer and batch norm run the same kernels as one differentiable op
(:mod:`ember.ops.normalization_grad`, PyTorch's ``Native*BackwardBackward0``), so the
gradient has the same bits either way; group norm, and every norm under a transforming
mode (vmap, forward AD, a capture), record the gradient's formula in Tensor ops with
the statistics recomputed from the saved input, so higher derivatives are exact.
"""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.autograd.saved import _saved_inputs
from ember.backend import array_module
from ember.backend import dtypes as _dtypes
from ember.ops import _batch_nn
from ember.ops._util import opmath, scalar_type_name
from ember.ops._util import reduced_float as _reduced_float
from ember.ops.composite_node import call, records_graph, transforming

# the array kernels by layout; their names stay importable from here
from ember.ops.norm_layouts import (  # noqa: F401
    _BACKWARD,
    _FORWARD,
    _NUMBA,
    _layout,
    _prod,
    _reduced_axes,
    _row_kernels,
    _sum_to,
    fwd_rows_direct,
)
from ember.ops.normalization_grad import LayerNormGrads

# the names torch also has at top level, with the same signature
__all__ = ["layer_norm", "group_norm", "rms_norm"]


def seq_moments(x, axes):
    """Mean and biased variance of the array ``x`` over ``axes`` (kept as size 1) in
    double, each sum taken one element at a time in memory order, as PyTorch's batch
    norm kernel: where the largest floats overflow, the order decides inf or NaN."""
    xm = array_module(x)
    xd = x.astype(np.float64)
    kshape = tuple(1 if i in axes else v for i, v in enumerate(x.shape))
    n = _prod(x.shape[a] for a in axes)

    def seq_mean(a):
        rows = xm.moveaxis(a, axes, tuple(range(-len(axes), 0))).reshape(-1, n)
        return (xm.cumsum(rows, axis=1)[:, -1] / n).reshape(kshape)
    with np.errstate(all="ignore"):
        mean = seq_mean(xd)
        return mean, seq_mean(xm.square(xd - mean))


class Normalize(Primitive):
    """``(x - mean) * rsqrt(var + eps) * w + b`` with mean and (biased) var over ``axes``.

    ``w`` and ``b`` (or None) broadcast against ``x``. ``stats``, when given, is a
    :class:`_RunningStats` updated in place with the batch mean and unbiased variance.
    Common layouts (:func:`_layout`) run in blocks of rows that stay in cache, with the
    row sums and dot products as BLAS matrix-vector products.
    """
    save_inputs = (0, 1)
    broadcasts = True
    _node_name = "NativeBatchNormBackward0"
    n_inputs = 3   # input, weight, bias (None when there is none), as PyTorch lists them
    # layer and group norm recompute rows whose moments overflow, scaled
    # (``_rescale_overflow``); batch and instance norm take double moments as PyTorch's do
    _rescale_rows = False
    batch = _batch_nn.normalize
    # the input's gradient has its shape, the weight's and bias's theirs (reduced and
    # reshaped in the kernels), so the engine has nothing to sum
    _grads_in_input_shapes = True
    # the op whose forward is the backward kernel, where a backward pass records a graph
    # (``ember.ops.normalization_grad``); None: the formula in Tensor ops below
    _grads_op = None

    def forward(self, x, w, b, axes, eps, stats=None):
        self.axes, self.eps = axes, eps
        self.b_shape = None if b is None else b.shape
        n = _prod(x.shape[a] for a in axes)
        self.layout = lay = _layout(x, w, b, axes)
        self.xhat = None
        if lay is not None:
            if lay[0] == "rows":
                # forward's normalized rows, kept for backward where the NumPy blocks run
                # (an array of their own, no extra pass where there is a weight; the
                # compile plan's forward runs without grad mode and keeps them too)
                keep = []
                out, mean, var = _FORWARD["rows"](x, w, b, eps, lay, keep)
                self.xhat = keep[0] if keep else None
            else:
                out, mean, var = _FORWARD[lay[0]](x, w, b, eps, lay)
            kshape = tuple(1 if i in axes else v for i, v in enumerate(x.shape))
            mean, var = mean.reshape(kshape), var.reshape(kshape)
            self.mean, self.invstd = mean, 1.0 / array_module(x).sqrt(var + eps)
        else:
            xm = array_module(x)
            mean = x.mean(axis=axes, keepdims=True)
            out = x - mean
            var = _sum_prod(out, out, axes) / max(n, 1)
            invstd = 1.0 / xm.sqrt(var + eps)
            self.mean, self.invstd = mean, invstd
            out *= invstd
            if w is not None:
                out *= w
            if b is not None:
                out += b
        if self._rescale_rows:
            out = self._rescale_overflow(x, w, b, out, var)
        elif x.dtype in (np.float32, np.float64) and n and \
                not (array_module(x).isfinite(mean).all() and array_module(x).isfinite(var).all()):
            out, mean, var = self._double_stats(x, w, b, axes, eps)
        if stats is not None:
            stats.update(mean, var * (n / (n - 1)) if n > 1 else var * np.nan)
        return out

    def _rescale_overflow(self, x, w, b, out, var):
        """``out`` with the rows whose moments overflowed (``var`` not finite) while
        their inputs are finite recomputed exactly: in double, on the row scaled by a
        power of two below its largest magnitude, the mean corrected by a second pass;
        ``self.mean``, ``self.invstd`` (and the kept normalized rows) follow. The true
        statistics of such a row fit its dtype (the variance may not, its reciprocal
        square root does), so the result is the finite normalization where PyTorch's
        moments give an infinite variance (the bias alone) or NaN. Rows holding inf or
        NaN keep their NaN. Only rows that overflow take this path."""
        xm = array_module(out)
        if xm.isfinite(var).all():
            return out
        axes, kshape = self.axes, self.mean.shape
        with np.errstate(all="ignore"):
            xd = x.astype(np.float64)
            top = xm.abs(xd).max(axis=axes, keepdims=True)
            fix = ~xm.isfinite(var.reshape(kshape)) & xm.isfinite(top)
            if not fix.any():
                return out
            e = xm.frexp(xm.where(fix, top, 1.0))[1]
            xs = xm.ldexp(xd, -e)
            ms = xs.mean(axis=axes, keepdims=True)
            ms = ms + (xs - ms).mean(axis=axes, keepdims=True)
            xc = xs - ms
            rs = 1.0 / xm.sqrt((xc * xc).mean(axis=axes, keepdims=True) +
                               xm.ldexp(float(self.eps), -2 * e))
            xhat = xc * rs
            y = xhat if w is None else xhat * w
            if b is not None:
                y = y + b
            out = xm.where(fix, y, out).astype(out.dtype, copy=False)
            self.mean = xm.where(fix, xm.ldexp(ms, e), self.mean).astype(self.mean.dtype)
            self.invstd = xm.where(fix, xm.ldexp(rs, -e), self.invstd).astype(
                self.invstd.dtype)
            if self.xhat is not None:  # (layer norm's rows: (M, D))
                rows = self.xhat.shape
                self.xhat[...] = xm.where(fix.reshape(rows[0], 1), xhat.reshape(rows),
                                          self.xhat)
        return out

    def _double_stats(self, x, w, b, axes, eps):
        """Batch and instance norm (and group norm of float64) as PyTorch computes them
        when the statistics overflow (or hold NaN): moments in double, then in x's dtype
        ``x * alpha + beta`` with ``alpha = invstd * w`` and ``beta = b - mean * alpha``,
        so huge values give finite results where ``(x - mean) * invstd`` gives inf * 0."""
        xm = array_module(x)
        mean, var = seq_moments(x, axes)
        with np.errstate(all="ignore"):
            mean, var = mean.astype(x.dtype), var.astype(x.dtype)
            invstd = (1.0 / xm.sqrt(var + eps)).astype(x.dtype)
            alpha = invstd if w is None else invstd * w
            beta = -mean * alpha if b is None else b - mean * alpha
            self.mean, self.invstd = mean, invstd
            return x * alpha + beta, mean, var

    def _saved_xw(self):
        if self._hook_at is not None:  # (layer norm's hooks were given the statistics)
            return self._saved_with_stats()
        return self.saved_tensors

    def _saved_with_stats(self):
        """The input and weight as ``saved_tensors`` gives them, for a node whose
        ``_hook_saves`` ends with the mean and reciprocal standard deviation: where
        saved-tensor hooks packed those, the statistics backward uses become what their
        unpack returns, as in PyTorch (the first derivative; a recorded one recomputes
        them from the input)."""
        if self._hook_at is None:
            return self.saved_tensors
        saved, hooked = self._saved_and_hooked(*[None] * (len(self._saved) - self._hook_at))
        # (statistics handed back as they were packed keep ember's own precision)
        own = (self.mean, self.invstd)
        self.mean, self.invstd = (
            o if h.size == o.size and (h.reshape(-1) == o.reshape(-1).astype(h.dtype)).all()
            else h.astype(o.dtype, copy=False).reshape(o.shape)
            for h, o in zip(hooked[-2:], own))
        if self.mean is not own[0] or self.invstd is not own[1]:
            self.xhat = None  # (kept from the forward: made from the statistics replaced)
        return saved

    def backward(self, gy):
        x, w = self._saved_xw()
        if not _grad_state.grad_enabled:
            need = tuple(e is not None for e in self._edges[:3])
            if self.layout is not None:
                gx, gw, gb = _BACKWARD[self.layout[0]](
                    gy._data, x._data, None if w is None else w._data, self.mean, self.invstd,
                    need, self.layout, self.b_shape, **self._kept())
                if gw is not None and gw.shape != w.shape:  # (see ``_grad_arrays``)
                    gw = gw.reshape(w.shape)
                if gb is not None and gb.shape != self.b_shape:
                    gb = gb.reshape(self.b_shape)
                return (_wrap(gx), _wrap(gw), _wrap(gb)) + (None,) * 3
            return self._backward_arrays(gy._data, x._data, None if w is None else w._data)
        if self._grads_op is not None and not transforming():
            # recorded (create_graph): the same kernel, as one differentiable op
            return self._grads_op.grads(self, gy, *self.saved_tensors[:2])
        # recorded under a transforming mode (vmap, forward AD, a capture): the
        # statistics recomputed in differentiable ops, whose rules those modes have
        axes = self.axes
        e = self._edges
        mean = x.mean(axes, keepdim=True)
        xc = x - mean
        invstd = ((xc * xc).mean(axes, keepdim=True) + self.eps).rsqrt()
        xhat = xc * invstd
        g = gy * w if w is not None else gy
        gx = gw = gb = None
        if e[0] is not None:
            gx = (g - g.mean(axes, keepdim=True)
                  - xhat * (g * xhat).mean(axes, keepdim=True)) * invstd
        if e[1] is not None:
            gw = gy * xhat
        if e[2] is not None:
            gb = gy
        return gx, gw, gb, None, None, None

    def _kept(self):
        """Forward's normalized rows for the rows kernels' backward (``{"xhat": ...}``),
        handed over once: a second pass recomputes them by forward's operations."""
        xhat = getattr(self, "xhat", None)
        if xhat is None:
            return {}
        self.xhat = None
        return {"xhat": xhat}

    def _grad_arrays(self, gy, x, w):
        """The three gradients (arrays or None) ``backward`` wraps without a graph."""
        if self.layout is not None:
            need = tuple(e is not None for e in self._edges[:3])
            gx, gw, gb = _BACKWARD[self.layout[0]](gy, x, w, self.mean, self.invstd, need,
                                                   self.layout, self.b_shape, **self._kept())
            # reshaped only where the kernel's shape differs: a reshape to the same shape
            # is a NumPy view, which the engine copies before it becomes a leaf's .grad
            if gw is not None and gw.shape != w.shape:
                gw = gw.reshape(w.shape)
            if gb is not None and gb.shape != self.b_shape:
                gb = gb.reshape(self.b_shape)
            return gx, gw, gb
        return tuple(None if t is None else t._data for t in self._backward_arrays(gy, x, w)[:3])

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``), where the
        saved input and weight are unchanged NumPy arrays."""
        if type(self)._saved_xw is not Normalize._saved_xw:
            return None
        saved = _saved_inputs(self)
        if saved is None:
            return None
        x, w = saved
        xd = x._data
        wd = None if w is None else w._data
        if type(xd) is not np.ndarray or w is not None and type(wd) is not np.ndarray:
            return None
        return self._grad_arrays(g, xd, wd) + (None,) * 3

    def _backward_arrays(self, gy, x, w):
        """The first-order gradients in fused array code (no graph is being recorded):
        two full-size temporaries, the reductions as einsum contractions."""
        axes = self.axes
        e = self._edges
        xm = array_module(x)
        n = max(_prod(x.shape[a] for a in axes), 1)
        xhat = x - self.mean
        xhat *= self.invstd
        gx = gw = gb = None
        if e[1] is not None:
            gw = _make(_sum_prod(gy, xhat, _reduced_axes(x.shape, w.shape)).reshape(w.shape))
        if e[2] is not None:
            gb = _make(_sum_to(gy, self.b_shape))
        if e[0] is not None:
            g = gy * w if w is not None else gy
            a = g.sum(axis=axes, keepdims=True)
            a /= n
            c = _sum_prod(g, xhat, axes)
            c /= n
            gx = xhat
            gx *= c
            gx += a
            xm.subtract(g, gx, out=gx)
            gx *= self.invstd
            gx = _make(gx)
        return gx, gw, gb, None, None, None

    def jvp(self, tx, tw, tb, *_):
        # d xhat = invstd (dxc - xhat mean(xhat dxc)), with the statistics recomputed in
        # Tensor ops (as backward does) so the tangent stays differentiable
        x, w = self.fw_inputs[:2]
        axes = self.axes
        xc = x - x.mean(axes, keepdim=True)
        invstd = ((xc * xc).mean(axes, keepdim=True) + self.eps).rsqrt()
        xhat = xc * invstd
        out = None
        if tx is not None:
            dxc = tx - tx.mean(axes, keepdim=True)
            out = (dxc - xhat * (xhat * dxc).mean(axes, keepdim=True)) * invstd
            if w is not None:
                out = out * w
        if tw is not None:
            out = xhat * tw if out is None else out + xhat * tw
        if tb is not None:
            out = tb if out is None else out + tb
        return out


def _wrap(a):
    return None if a is None else _make(a)


def _sum_prod(a, b, axes):
    """``(a * b).sum(axes, keepdims=True)`` without the temporary product."""
    nd = a.ndim
    letters = "abcdefghijklmnopqrstuvwxyz"[:nd]
    out = "".join(c for i, c in enumerate(letters) if i not in axes)
    r = array_module(a).einsum(f"{letters},{letters}->{out}", a, b)
    return r.reshape(tuple(1 if i in axes else s for i, s in enumerate(a.shape)))


class _LayerNorm(Normalize):
    _node_name = "NativeLayerNormBackward0"
    _grads_op = LayerNormGrads
    _rescale_rows = True
    _general_forward = opmath(Normalize.forward)

    def forward(self, x, w, b, axes, eps, stats=None):
        # the common call first, with the fewest checks: NumPy float32/float64 rows with
        # a weight and/or bias of the trailing shape, run as one block of rows
        # (``norm_layouts.fwd_rows_direct``); the same operations as the general path
        dt = getattr(x, "dtype", None)
        if type(x) is np.ndarray and (dt == np.float32 or dt == np.float64) and \
                stats is None and axes and (w is not None or b is not None):
            k = x.ndim - len(axes)
            tail = x.shape[k:]
            if all(t is None or type(t) is np.ndarray and t.dtype == dt and t.shape == tail
                   for t in (w, b)) and axes == tuple(range(k, x.ndim)):
                keep = []
                r = fwd_rows_direct(x, w, b, eps, keep)
                if r is not None:
                    M, D, out, mean, var, invstd = r
                    self.axes, self.eps = axes, eps
                    self.b_shape = None if b is None else b.shape
                    self.layout = ("rows", M, D)
                    self.xhat = keep[0]
                    kshape = x.shape[:k] + (1,) * len(axes)
                    self.mean, self.invstd = mean.reshape(kshape), invstd.reshape(kshape)
                    return self._rescale_overflow(x, w, b, out, var)
        return self._general_forward(x, w, b, axes, eps, stats)

    def _hook_saves(self, args, out):
        """What PyTorch's node saves besides the input and weight, for saved-tensor
        hooks (``Primitive._hook_saves``): the bias, the mean and the reciprocal
        standard deviation (with the input's dims, 1 over the normalized ones)."""
        b = args[2]
        out = [] if b is None else [(b, b._vc[0])]
        dt = args[0]._data.dtype
        for a in (self.mean, self.invstd):
            out.append((_make(array_module(a).asarray(a, dtype=dt), False), None))
        return out

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``): what ``backward`` computes without a
        graph, on the arrays themselves (the compile plan calls this)."""
        return list(self._grad_arrays(grads[0], inputs[0], inputs[1])) + \
            [None] * (len(inputs) - 3)


class _GroupNorm(Normalize):
    _node_name = "NativeGroupNormBackward0"
    # PyTorch's node has three outputs (the result, mean and rstd): hooks get None for
    # the two ember's node does not have
    _hook_n_outputs = 3
    _rescale_rows = True
    forward = opmath(Normalize.forward)  # (float16/bfloat16 computed in float32)


def _channel_view(t, nd):
    """A per-channel vector (C,) as (1, C, 1, ...) for an input of ``nd`` dims."""
    return None if t is None else t.reshape((1, -1) + (1,) * (nd - 2))


def _check_channel_vec(name, t, c):
    if t is not None and t.numel() != c:
        raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")


def _check_dtypes(input, decide, order):
    """Check the dtypes of a normalization's tensors as PyTorch's CPU kernels do and say
    whether the call is of mixed types (a float16/bfloat16 input with float32
    parameters, computed in float32 and rounded to the input's dtype). The first tensor
    given in ``decide`` (None for absent ones) settles it: of another dtype than the
    input, every parameter must be float32 and the input of reduced precision; of the
    input's, every other must be the input's too, checked in ``order`` (the order
    PyTorch's kernel reads them, which its messages show)."""
    if not input.dtype.is_floating_point:
        return False
    params = [t for t in decide if t is not None]
    if not params:
        return False
    if params[0].dtype != input.dtype:
        if any(t.dtype != _dtypes.float32 for t in params):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of "
                               "Float")
        if input.dtype not in (_dtypes.bfloat16, _dtypes.float16):
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
        return True
    for t in order:
        if t is not None and t.dtype != input.dtype:
            raise RuntimeError(f"expected scalar type {scalar_type_name(input.dtype)} but "
                               f"found {scalar_type_name(t.dtype)}")
    return False


def _reduced(t):
    return t.dtype in (_dtypes.bfloat16, _dtypes.float16)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-05):
    """Batch normalization over dim 1 of (N, C, *): in training, normalize with the batch
    statistics and update ``running_mean`` / ``running_var`` in place (``momentum`` is the
    weight of the new batch; the running variance is unbiased); in eval, use the running
    statistics.

    >>> x = ember.randn(8, 3)
    >>> batch_norm(x, None, None, training=True).mean(0).abs().max() < 1e-6
    tensor(True)
    """
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    if input.dim() == 1 and input.numel() == 0:  # PyTorch sees no channels: nothing to do
        for name, t in (("running_mean", running_mean), ("running_var", running_var),
                        ("weight", weight), ("bias", bias)):
            _check_channel_vec(name, t, 0)
        return input.clone()
    if input.dim() < 2:
        raise IndexError(f"batch_norm: dimension 1 (the channels) is out of range for a "
                         f"{input.dim()}-D input; expected 2D or higher input")
    c = input.shape[1]
    nd = input.dim()
    _check_channel_vec("running_mean", running_mean, c)
    _check_channel_vec("running_var", running_var, c)
    _check_channel_vec("weight", weight, c)
    _check_channel_vec("bias", bias, c)
    if training and (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither "
                         "be None")
    if input.numel() == 0:
        # PyTorch's kernel returns a copy scaled by the first channel's affine pair and
        # leaves the running statistics alone (the mean of nothing would be NaN)
        out = input.clone()
        if weight is not None:
            out = out * weight[0]
        if bias is not None:
            out = out + bias[0]
        return out
    # (PyTorch's kernel reads the statistics before the bias in training)
    mixed = _check_dtypes(input, (weight, bias, running_mean, running_var),
                          (weight, running_mean, running_var, bias) if training else
                          (weight, bias, running_mean, running_var))
    if training:
        size = input.numel() // c if c else 0
        if size == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {input.shape!r}".replace("ember.Size",
                                                                  "torch.Size"))
        axes = (0,) + tuple(range(2, nd))
        stats = None
        if running_mean is not None or running_var is not None:
            stats = _RunningStats(running_mean, running_var, momentum)
            if _mode_active[0]:
                _stats_capturable(stats)
        if (mixed or _reduced(input)) and not transforming() or \
                records_graph(input, weight, bias):
            # (a float16/bfloat16 input runs in float32 inside the node's kernel; the
            # node is eager mode's: under vmap or a capture the views' op runs)
            from ember.ops.normalization_nodes import _BatchNorm
            return _BatchNorm.apply(input, weight, bias, axes, eps, stats)
        return Normalize.apply(input, _channel_view(weight, nd), _channel_view(bias, nd),
                               axes, eps, stats)
    if running_mean is None:
        raise RuntimeError("running_mean must be defined in evaluation mode")
    if running_var is None:
        raise RuntimeError("running_var must be defined in evaluation mode")
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None and \
            "batch_norm" not in m.unrolled:
        # a graph capture records eval-mode batch norm as one call (PyTorch's
        # aten::batch_norm), not as the affine map below
        return m.composite_locals("batch_norm", batch_norm, locals())
    # torch runs one kernel in eval mode too (NativeBatchNormBackward0)
    from ember.ops.normalization_nodes import _BatchNormEval, batch_norm_eval_array
    if not _mode_active[0] and not (_grad_state.grad_enabled and any(
            t is not None and t._requires_grad
            for t in (input, weight, bias, running_mean, running_var))):
        # no graph and nothing observing the ops: the composite's values in one pass
        out = batch_norm_eval_array(input, weight, bias, running_mean, running_var, eps)
        if out is not None:
            return _make(out)
    return call(_BatchNormEval, input, weight, bias, running_mean, running_var, eps)


# the trailing axes by (input dims, normalized dims)
_TRAILING = {}


def _common_layer_norm_axes(input, shape, weight, bias):
    """The normalized axes of a layer norm call that passes ``layer_norm``'s checks
    plainly: a floating input Tensor ending in ``shape`` (a tuple), a weight and bias
    (or None) Tensors of that shape and the input's dtype; else None, and the checks
    run in full (with their messages). Outside any mode."""
    if _mode_active[0] or type(shape) is not tuple or not shape or \
            not isinstance(input, Tensor):
        return None  # (under a mode shapes may be symbolic or batched: the full checks)
    xd = input._data
    xs = xd.shape
    nd, n = len(xs), len(shape)
    if nd < n or xs[nd - n:] != shape or xd.dtype.kind != "f":
        return None
    dt = xd.dtype
    for t in (weight, bias):
        if t is not None and (not isinstance(t, Tensor) or t._data.shape != shape or
                              t._data.dtype != dt):
            return None
    axes = _TRAILING.get((nd, n))
    if axes is None:
        axes = _TRAILING[(nd, n)] = tuple(range(nd - n, nd))
    return axes


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Layer normalization over the last ``len(normalized_shape)`` dims, with elementwise
    ``weight`` and ``bias`` of shape ``normalized_shape``.

    >>> layer_norm(ember.randn(2, 5), (5,)).mean(-1).abs().max() < 1e-6
    tensor(True)
    """
    axes = _common_layer_norm_axes(input, normalized_shape, weight, bias)
    if axes is not None:
        return _LayerNorm.apply(input, weight, bias, axes, eps, None)
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    shape = tuple(int(s) for s in normalized_shape)
    n = len(shape)
    if n == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    if tuple(input.shape[input.dim() - n:]) != shape or input.dim() < n:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {list(t.shape)} and normalized_shape = "
                               f"{list(shape)}")
    _check_dtypes(input, (weight, bias), (weight, bias))
    axes = tuple(range(input.dim() - n, input.dim()))
    return _LayerNorm.apply(input, weight, bias, axes, eps, None)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalization over the last ``len(normalized_shape)`` dims:
    ``x * rsqrt(mean(x**2) + eps) * weight``; ``eps`` defaults to the dtype's epsilon."""
    if isinstance(normalized_shape, (int, np.integer)):
        normalized_shape = (int(normalized_shape),)
    shape = tuple(int(s) for s in normalized_shape)
    n = len(shape)
    if n == 0 or input.dim() < n or tuple(input.shape[input.dim() - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(weight.shape)} and normalized_shape = "
                           f"{list(shape)}")
    # float16/bfloat16 are computed in float32 and rounded once, as PyTorch's composite
    # does (its graph: ToCopy, the steps, ToCopy back): in float16 the squares of values
    # above 256 overflow, and the result would be zeros
    low = input.dtype if _reduced_float(input.dtype) else None
    if eps is None:  # the epsilon of the type computed in (float32's for float16/bfloat16)
        eps = float(np.finfo(np.float32 if low is not None else input._data.dtype).eps) \
            if input.is_floating_point() else 0.0
    from ember.ops.elementwise import AddScalar
    dims = tuple(range(input.dim() - n, input.dim()))
    x = input.to(_dtypes.float32) if low is not None else input
    # PyTorch's steps (pow, mean, add.Scalar, rsqrt, mul), so the graph is its graph
    ms = x.pow(2).mean(dims, keepdim=True)
    out = x * AddScalar.apply(ms, eps).rsqrt()
    if weight is not None:
        out = out * weight
    return out.to(low) if low is not None else out


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    """Group normalization: the C channels of (N, C, *) split into ``num_groups`` groups,
    each normalized over its channels and spatial dims; per-channel ``weight``/``bias``."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    n, c = input.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    _check_channel_vec("weight", weight, c)
    _check_channel_vec("bias", bias, c)
    _check_dtypes(input, (weight, bias), (weight, bias))
    if records_graph(input, weight, bias):
        from ember.ops.normalization_nodes import _GroupNormNode
        return _GroupNormNode.apply(input, weight, bias, num_groups, eps)
    rest = tuple(input.shape[2:])
    x = input.reshape((n, num_groups, c // num_groups) + rest)
    nd = x.dim()
    wshape = (1, num_groups, c // num_groups) + (1,) * len(rest)
    w = None if weight is None else weight.reshape(wshape)
    b = None if bias is None else bias.reshape(wshape)
    out = _GroupNorm.apply(x, w, b, tuple(range(2, nd)), eps, None)
    return out.reshape(tuple(input.shape))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    """Instance normalization: each (sample, channel) plane normalized over its spatial
    dims; running statistics, if given, are updated with the mean over the batch."""
    if _mode_active[0] and (m := _mode_recorder(locals().values())) is not None and \
            "instance_norm" not in m.unrolled:
        # a graph capture records instance norm as one call (PyTorch's
        # aten::instance_norm, in both modes), not as the batch norm it runs below
        return m.composite_locals("instance_norm", instance_norm, locals())
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher input (got {input.dim()}D input)")
    n, c = input.shape[:2]
    nd = input.dim()
    _check_channel_vec("weight", weight, c)
    _check_channel_vec("bias", bias, c)
    if not use_input_stats:
        if records_graph(input, weight, bias):
            # PyTorch's graph: eval batch norm of the (1, N*C, *) view over the statistics
            # and parameters repeated per sample, viewed back (ViewBackward0 on top)
            x = input.contiguous().view((1, n * c) + tuple(input.shape[2:]))
            rep = [None if t is None else t.repeat(n)
                   for t in (running_mean, running_var, weight, bias)]
            out = batch_norm(x, *rep, False, momentum, eps)
            return out.view(tuple(input.shape))
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if _prod(input.shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input "
                         f"size {list(input.shape)}")
    axes = tuple(range(2, nd))
    stats = None
    if running_mean is not None or running_var is not None:
        _check_channel_vec("running_mean", running_mean, c)
        _check_channel_vec("running_var", running_var, c)
        stats = _RunningStats(running_mean, running_var, momentum, per_instance=True)
        if _mode_active[0]:
            _stats_capturable(stats)
    _check_dtypes(input, (weight, bias, running_mean, running_var),
                  (weight, running_mean, running_var, bias))
    if _reduced(input) and not transforming() or records_graph(input, weight, bias):
        # (a float16/bfloat16 input runs in float32 inside the node's kernel)
        # PyTorch's graph: batch norm of the input viewed as one sample of N*C channels,
        # over the parameters repeated per sample, viewed back
        x = input.contiguous().view((1, n * c) + tuple(input.shape[2:]))
        w = None if weight is None else weight.repeat(n)
        b = None if bias is None else bias.repeat(n)
        from ember.ops.normalization_nodes import _BatchNorm
        out = _BatchNorm.apply(x, w, b, (0,) + axes, eps, stats)
        return out.view(tuple(input.shape))
    return Normalize.apply(input, _channel_view(weight, nd), _channel_view(bias, nd), axes,
                           eps, stats)


def _stats_capturable(stats):
    """Under a graph capture, note as unrecordable running statistics that are an
    argument of the captured call or computed in it: the node holds the tensors it
    updates, so a replay would update the capture call's tensors (a module's buffers
    are the same tensors on every call, and pass)."""
    m = _mode_recorder()
    tmap = getattr(m, "tmap", None)
    if tmap is None:
        return
    for t in stats.tensors:
        e = tmap.get(id(t)) if t is not None else None
        if e is not None and e[0] is t and e[1].kind in ("input", "node"):
            m.unrecordable("running statistics passed as an argument (they are updated "
                           "in place; a module's buffers replay)")
            return


class _RunningStats:
    """Running-statistics buffers that :class:`Normalize` blends the batch statistics into.

    ``per_instance``: the statistics are per (sample, channel) and averaged over the
    batch first (instance norm).
    """

    def __init__(self, running_mean, running_var, momentum, per_instance=False):
        self.tensors = (running_mean, running_var)
        self.momentum = momentum
        self.per_instance = per_instance

    def update(self, mean, unbiased_var):
        m = self.momentum
        for t, v in zip(self.tensors, (mean, unbiased_var)):
            if t is None:
                continue
            c = t._data.shape[0]
            v = v.reshape(-1, c).mean(0) if self.per_instance else v.reshape(c)
            arr = t._data
            if type(arr) is not type(v):
                from ember.backend import device_of
                raise RuntimeError("Expected all tensors to be on the same device, but found "
                                   f"at least two devices, {device_of(v)} and {t.device}!")
            arr *= 1 - m
            arr += (m * v).astype(arr.dtype)
            t._vc[0] += 1


def local_response_norm(input, size, alpha=0.0001, beta=0.75, k=1.0):
    """Local response normalization across channels: ``x / (k + alpha/size * sum of x**2
    over ``size`` neighbouring channels) ** beta``."""
    from ember.ops.padding import constant_pad_nd
    from ember.ops.pooling import avg_pool2d, avg_pool3d
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
    if input.numel() == 0:
        return input * 1
    # PyTorch's steps, so that the graph is its graph: the squares get one unit dim,
    # zero padding of size//2 channels before and (size-1)//2 after, an average over
    # windows of ``size`` channels, and the unit dim squeezed away again
    div = input * input
    if dim == 3:
        div = constant_pad_nd(div.unsqueeze(1), (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = tuple(input.shape)
        div = div.view(sizes[0], 1, sizes[1], sizes[2], -1)
        div = constant_pad_nd(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1).view(sizes)
    return input / (div * alpha + k) ** beta
