"""Batch, instance and group norm as PyTorch's graph shows them: the nodes made where a
graph is recorded in eager mode (the functions are :mod:`ember.ops.normalization`'s).

Batch and group norm list the (C,) weight and bias themselves, as PyTorch's
``NativeBatchNormBackward0``/``NativeGroupNormBackward0`` do; ``Normalize`` takes them
viewed to broadcast, so these subclasses view them inside, and sum their gradients back
to (C,). Eval-mode batch norm is one node over ember's affine map.
"""
from ember._tensor import _make
from ember.autograd.grad_mode import state as _grad_state
from ember.ops.composite_node import CompositeNode, transforming
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
        return Normalize.forward(self, x, None if w is None else w.reshape(view),
                                 None if b is None else b.reshape(view), axes, eps, stats)

    def _saved_xw(self):
        x, w = self._saved_with_stats()
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
        if _grad_state.grad_enabled and not transforming():
            return self._grads_op.grads(self, gy, *self.saved_tensors[:2])
        gx, gw, gb = Normalize.backward(self, gy)[:3]
        # the per-channel gradients summed to (1, C, 1, ...) and given the parameters' shape
        if gw is not None:
            gw = gw.sum_to_size(self.view_shape(gw)).reshape(-1)
        if gb is not None:
            gb = gb.sum_to_size(self.view_shape(gb)).reshape(-1)
        return gx, gw, gb, None, None, None

    def view_shape(self, g):
        return (1, g.shape[1]) + (1,) * (g.ndim - 2)


def _batch_norm_eval(input, weight, bias, running_mean, running_var, eps):
    nd = input.dim()
    scale = (running_var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight
    shift = -running_mean * scale
    if bias is not None:
        shift = shift + bias
    return input * _channel_view(scale, nd) + _channel_view(shift, nd)


class _BatchNormEval(CompositeNode):
    """Batch norm with the running statistics: PyTorch's one node over (input, weight,
    bias); ember's affine map underneath. Its gradient is the affine map's, written
    out (the running statistics, plain buffers, get none)."""
    _node_name = "NativeBatchNormBackward0"
    save_inputs = (0, 1, 2, 3, 4)
    n_inputs = 3
    composite = staticmethod(_batch_norm_eval)

    def backward(self, gy):
        e = self._edges
        if any(i < len(e) and e[i] is not None for i in (3, 4)):
            return self.recompute_grads(gy)  # statistics that require grad: rare
        x, w, b, mean, var = self.saved_tensors
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
        out = Normalize.forward(self, x.reshape(self.x_view),
                                None if w is None else w.reshape(self.view),
                                None if b is None else b.reshape(self.view),
                                tuple(range(2, len(self.x_view))), eps, None)
        return out.reshape(x.shape)

    def _saved_xw(self):
        x, w = self._saved_with_stats()
        return x.reshape(self.x_view), None if w is None else w.reshape(self.view)

    def _hook_saves(self, args, out):
        """PyTorch's node also saves the mean and rstd of each (sample, group), for
        saved-tensor hooks (``Primitive._hook_saves``)."""
        ng = self.x_view[:2]
        dt = args[0]._data.dtype
        return [(_make(a.reshape(ng).astype(dt, copy=False), False), None)
                for a in (self.mean, self.invstd)]

    def backward(self, gy):
        gx, gw, gb = Normalize.backward(self, gy.reshape(self.x_view))[:3]
        if gx is not None:
            gx = gx.reshape(self.x_shape)
        if gw is not None:
            gw = gw.sum_to_size(self.view).reshape(-1)
        if gb is not None:
            gb = gb.sum_to_size(self.view).reshape(-1)
        return gx, gw, gb, None, None
