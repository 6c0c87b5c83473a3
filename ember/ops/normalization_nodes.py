"""Batch, instance and group norm as PyTorch's graph shows them: the nodes made where a
graph is recorded in eager mode (the functions are :mod:`ember.ops.normalization`'s).

Batch and group norm list the (C,) weight and bias themselves, as PyTorch's
``NativeBatchNormBackward0``/``NativeGroupNormBackward0`` do; ``Normalize`` takes them
viewed to broadcast, so these subclasses view them inside, and sum their gradients back
to (C,). Eval-mode batch norm is one node over ember's affine map.
"""
import numpy as np

from ember._tensor import _make, _mode_active
from ember.autograd.grad_mode import no_grad
from ember.autograd.grad_mode import state as _grad_state
from ember.backend import dtypes as _dtypes
from ember.backend.threads import parallel_rows
from ember.ops._util import reduced_float
from ember.ops.composite_node import CompositeNode, transforming
from ember.ops.norm_layouts import _BLOCK_BYTES
from ember.ops.normalization import Normalize, _channel_view, _GroupNorm, _sum_prod
from ember.ops.normalization_grad import BatchNormEvalGrads, BatchNormGrads

__all__ = []


class _BatchNorm(Normalize):
    """Batch (and instance) norm over the per-channel ``weight`` and ``bias`` of shape
    (C,) themselves, as PyTorch's node lists them (``Normalize`` takes them viewed to
    broadcast). Made only where a graph is recorded in eager mode; elsewhere batch norm
    runs ``Normalize`` on the views, whose vmap rule and tangent serve."""
    _node_name = "NativeBatchNormBackward0"
    _op_name = "Normalize"
    _grads_op = BatchNormGrads

    def forward(self, x, w, b, axes, eps, stats=None):
        self.view = view = (1, -1) + (1,) * (x.ndim - 2)
        # a float16/bfloat16 input (with parameters of its dtype or float32): computed
        # in float32, the result rounded to the input's dtype, as PyTorch's CPU kernel
        # does (its "opmath" type)
        self.low_dtype = low = x.dtype if reduced_float(x.dtype) else None
        if low is not None:
            x = x.astype(np.float32)
            w, b = (None if t is None else t.astype(np.float32) for t in (w, b))
        out = Normalize.forward(self, x, None if w is None else w.reshape(view),
                                None if b is None else b.reshape(view), axes, eps, stats)
        return out if low is None else out.astype(low)

    def _saved_xw(self):
        x, w = self._saved_with_stats()
        if self.low_dtype is not None:
            x, w = x.float(), None if w is None else w.float()
        return x, None if w is None else w.reshape(self.view)

    def _hook_saves(self, args, out):
        """What PyTorch's node also saves, for saved-tensor hooks
        (``Primitive._hook_saves``): the running mean and variance (as updated) and the
        batch's mean and reciprocal standard deviation per channel. Instance norm's
        running statistics are left out: PyTorch saves per-sample copies of them."""
        stats = args[5] if len(args) > 5 else None
        out = []
        if stats is not None and not stats.per_instance:
            out += [(t, t._vc[0]) for t in stats.tensors if t is not None]
        dt = args[0]._data.dtype
        return out + [(_make(a.reshape(-1).astype(dt, copy=False), False), None)
                      for a in (self.mean, self.invstd)]

    def backward(self, gy):
        if self.low_dtype is not None:
            gy = gy.float()  # (the input's gradient is rounded back to its dtype)
        if _grad_state.grad_enabled and not transforming():
            x, w = self.saved_tensors[:2]
            return self._grads_op.grads(self, gy, x if self.low_dtype is None else x.float(), w)
        gx, gw, gb = Normalize.backward(self, gy)[:3]
        # the per-channel gradients summed to (1, C, 1, ...) and given the parameters' shape
        if gw is not None:
            gw = gw.sum_to_size(self.view_shape(gw)).reshape(-1)
        if gb is not None:
            gb = gb.sum_to_size(self.view_shape(gb)).reshape(-1)
        return gx, gw, gb, None, None, None

    def view_shape(self, g):
        return (1, g.shape[1]) + (1,) * (g.ndim - 2)


def _eval_scale_shift(weight, bias, running_mean, running_var, eps,
                      rsqrt=lambda t: t.rsqrt()):
    """Eval-mode batch norm's per-channel ``scale`` and ``shift`` (of (C,)), from ember
    Tensors, or from arrays of one floating dtype with ``rsqrt`` as
    :func:`_rsqrt_array` (the same NumPy calls the ember ops make, without their
    dispatch); ``weight`` and ``bias`` may be None."""
    scale = rsqrt(running_var + eps)
    if weight is not None:
        scale = scale * weight
    shift = -running_mean * scale
    if bias is not None:
        shift = shift + bias
    return scale, shift


def _rsqrt_array(a):
    return 1 / np.sqrt(a)  # (ember's ``rsqrt``; a Python ``eps`` adds in a's dtype)


def _batch_norm_eval(input, weight, bias, running_mean, running_var, eps):
    nd = input.dim()
    # a float16/bfloat16 input (with parameters of its dtype or float32): computed in
    # float32, rounded once to the input's dtype, as PyTorch's CPU kernel does
    low = input.dtype if input.dtype in (_dtypes.bfloat16, _dtypes.float16) else None
    if low is not None:
        input = input.float()
        weight, bias, running_mean, running_var = (
            None if t is None else t.float()
            for t in (weight, bias, running_mean, running_var))
    scale, shift = _eval_scale_shift(weight, bias, running_mean, running_var, eps)
    out = input * _channel_view(scale, nd) + _channel_view(shift, nd)
    return out.to(low) if low is not None else out


def batch_norm_eval_array(input, weight, bias, running_mean, running_var, eps):
    """:func:`_batch_norm_eval`'s result as an array, computed without ember ops on the
    input: the same per-channel ``scale`` and ``shift`` (:func:`_eval_scale_shift`), then
    ``input * scale + shift`` in blocks of samples that stay in cache, each element
    rounded after the product and after the sum as there (one pass over memory where
    the two ops make two and a full-size temporary). None where the composite must run
    (not a C-ordered float32/float64 NumPy input, or statistics of another dtype, which
    promote). Called only where nothing observes the ops (no mode on the stack)."""
    x = input._data
    if type(x) is not np.ndarray or x.dtype not in (np.float32, np.float64) or \
            not x.flags.c_contiguous or x.size == 0:
        return None
    vecs = [None if v is None else v._data for v in (weight, bias, running_mean, running_var)]
    if all(type(v) is np.ndarray and v.dtype == x.dtype and v.ndim == 1 for v in vecs):
        s, t = _eval_scale_shift(*vecs, eps, rsqrt=_rsqrt_array)
    else:  # (mixed dtypes, which promote; the ember ops apply the rules)
        with no_grad():
            scale, shift = _eval_scale_shift(weight, bias, running_mean, running_var, eps)
        s, t = scale._data, shift._data
        if type(s) is not np.ndarray or s.dtype != x.dtype or t.dtype != x.dtype:
            return None
    n, c = x.shape[0], x.shape[1]
    inner = x.size // (n * c)
    out = np.empty(x.shape, x.dtype)
    if inner == 1:  # (N, C): the channels along the rows
        xb, ob, s, t = x.reshape(n, c), out.reshape(n, c), s.reshape(c), t.reshape(c)
    else:
        xb, ob = x.reshape(n, c, inner), out.reshape(n, c, inner)
        s, t = s.reshape(c, 1), t.reshape(c, 1)
    per = max(1, _BLOCK_BYTES // (c * inner * x.itemsize))

    def block(lo, hi):
        for i in range(lo, hi, per):
            j = min(i + per, hi)
            np.multiply(xb[i:j], s, out=ob[i:j])
            np.add(ob[i:j], t, out=ob[i:j])
    parallel_rows(block, n, 2 * x.size)
    return out


class _BatchNormEval(CompositeNode):
    """Batch norm with the running statistics: PyTorch's one node over (input, weight,
    bias); ember's affine map underneath. Its gradient is the affine map's, written
    out (the running statistics, plain buffers, get none)."""
    _node_name = "NativeBatchNormBackward0"
    save_inputs = (0, 1, 2, 3, 4)
    n_inputs = 3
    composite = staticmethod(_batch_norm_eval)

    def forward(self, *args, **params):
        # (observed ops: the composite's, as without a graph; device arrays: its ops)
        if not _mode_active[0] and all(type(a) is np.ndarray for a in args[:5]
                                       if a is not None):
            out = batch_norm_eval_array(*[_make(a) if isinstance(a, np.ndarray) else a
                                          for a in args], **params)
            if out is not None:
                self._plain = [None if isinstance(a, np.ndarray) else a for a in args]
                self.params = params
                return out
        return super().forward(*args, **params)

    def backward(self, gy):
        e = self._edges
        if any(i < len(e) and e[i] is not None for i in (3, 4)):
            return self.recompute_grads(gy)  # statistics that require grad: rare
        x, w, b, mean, var = self.saved_tensors
        if x.dtype in (_dtypes.bfloat16, _dtypes.float16):
            # computed in float32 as the forward (the engine rounds the gradients back)
            gy, x, w, mean, var = (None if t is None else t.float()
                                   for t in (gy, x, w, mean, var))
        if _grad_state.grad_enabled and not transforming():
            # recorded: the arrays of the pass without a graph, as one differentiable op
            return BatchNormEvalGrads.grads(self, gy, x, w, mean, var)
        if not _grad_state.grad_enabled:
            return self._plain_grads(gy, x, w, mean, var)[0] + (None,) * 3
        # under a transforming mode: the formulas in ops that have its rules
        eps = self._plain[5]
        nd = x.dim()
        axes = (0,) + tuple(range(2, nd))
        invstd = (var + eps).rsqrt()
        need_w, need_b = len(e) > 1 and e[1] is not None, len(e) > 2 and e[2] is not None
        gx = gw = gb = None
        if e[0] is not None:
            gx = gy * _channel_view(invstd if w is None else invstd * w, nd)
        if need_w or need_b:
            gsum = gy.sum(axes)
            if need_w:
                gw = invstd * ((gy * x).sum(axes) - mean * gsum)
            if need_b:
                gb = gsum
        return gx, gw, gb, None, None, None

    def _plain_grads(self, gy, x, w, mean, var):
        """``((gx, gw, gb), invstd)`` of a pass without a graph: the gradients (None where
        none is wanted) and the running statistics' ``rsqrt(var + eps)``, from Tensors
        (the output gradient, input, weight and running statistics) that record nothing."""
        e = self._edges
        nd = x.dim()
        axes = (0,) + tuple(range(2, nd))
        invstd = (var + self._plain[5]).rsqrt()
        need_w, need_b = len(e) > 1 and e[1] is not None, len(e) > 2 and e[2] is not None
        gx = gw = gb = None
        if e[0] is not None:
            gx = gy * _channel_view(invstd if w is None else invstd * w, nd)
        # d/dw = invstd * (sum(gy * x) - mean * sum(gy)): one pass over the input
        gsum = gy._data.sum(axis=axes) if need_w or need_b else None
        if need_w:
            gw = _make(invstd._data * (_sum_prod(gy._data, x._data, axes).reshape(-1)
                                       - mean._data * gsum))
        if need_b:
            gb = _make(gsum)
        return (gx, gw, gb), invstd


class _GroupNormNode(_GroupNorm):
    """Group norm over the input and the (C,) weight and bias themselves, as PyTorch's
    node lists them: the kernel runs on the input grouped into (N, G, C/G, *) with the
    parameters viewed to match. Made only where a graph is recorded in eager mode;
    elsewhere ``_GroupNorm`` runs on the views, whose vmap rule and tangent serve."""
    _node_name = "NativeGroupNormBackward0"
    _op_name = "_GroupNorm"

    def forward(self, x, w, b, num_groups, eps):
        n, c = x.shape[:2]
        rest = tuple(x.shape[2:])
        self.x_shape = x.shape
        self.x_view = (n, num_groups, c // num_groups) + rest
        self.view = (1, num_groups, c // num_groups) + (1,) * len(rest)
        # a float16/bfloat16 input: computed in float32, rounded to its dtype (opmath)
        self.low_dtype = low = x.dtype if reduced_float(x.dtype) else None
        if low is not None:
            x = x.astype(np.float32)
            w, b = (None if t is None else t.astype(np.float32) for t in (w, b))
        out = Normalize.forward(self, x.reshape(self.x_view),
                                None if w is None else w.reshape(self.view),
                                None if b is None else b.reshape(self.view),
                                tuple(range(2, len(self.x_view))), eps, None)
        out = out.reshape(x.shape)
        return out if low is None else out.astype(low)

    def _saved_xw(self):
        x, w = self._saved_with_stats()
        if self.low_dtype is not None:
            x, w = x.float(), None if w is None else w.float()
        return x.reshape(self.x_view), None if w is None else w.reshape(self.view)

    def _hook_saves(self, args, out):
        """PyTorch's node also saves the mean and rstd of each (sample, group), for
        saved-tensor hooks (``Primitive._hook_saves``)."""
        ng = self.x_view[:2]
        dt = args[0]._data.dtype
        return [(_make(a.reshape(ng).astype(dt, copy=False), False), None)
                for a in (self.mean, self.invstd)]

    def backward(self, gy):
        if self.low_dtype is not None:
            gy = gy.float()  # (the gradients are rounded back to their inputs' dtypes)
        gx, gw, gb = Normalize.backward(self, gy.reshape(self.x_view))[:3]
        if gx is not None:
            gx = gx.reshape(self.x_shape)
        if gw is not None:
            gw = gw.sum_to_size(self.view).reshape(-1)
        if gb is not None:
            gb = gb.sum_to_size(self.view).reshape(-1)
        return gx, gw, gb, None, None
