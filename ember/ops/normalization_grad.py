"""The first-order gradients of layer and batch norm as one differentiable op.

PyTorch computes a normalization's gradients with one kernel, ``native_layer_norm_backward``
(``native_batch_norm_backward``), with or without ``create_graph``; recorded, that kernel
is itself a node (``NativeLayerNormBackwardBackward0``) whose backward is the double
backward formula. ember does the same: where a backward pass records a graph, the
normalization's node calls :class:`LayerNormGrads` (:class:`BatchNormGrads`), whose
forward is the very array kernel of the pass without a graph, so a gradient has the same
bits either way, and whose backward is the derivative of those gradients in Tensor ops
(statistics recomputed from the saved input, so every order is exact).

With ``a = ggx`` (the incoming gradient of ``gx``), ``g = gy * w``, per normalized group
``s = rsqrt(var + eps)``, ``xhat = (x - mean) * s``, ``m(v)`` the group mean and
``P(v) = v - m(v) - xhat * m(xhat * v)`` (so ``gx = s * P(g)``):

- ``d gy = w * s * P(a) + ggw * xhat + ggb``
- ``d w  = sum(gy * s * P(a))`` over the dims ``w`` broadcasts along
- ``d x  = s * P(ggw * gy) - s**2 * (c * xhat + m(g xhat) * P(a) + m(a xhat) * P(g))``
  with ``c = m(a g) - m(a) m(g) - m(a xhat) m(g xhat)``.
"""
from ember.autograd.node import Primitive
from ember.backend import array_module

__all__ = []


class _NormGrads(Primitive):
    """``(gx, gw, gb)`` of the normalization node ``node`` for the output gradient ``gy``.

    ``node`` is the forward's node (its statistics, layout and which inputs need a
    gradient); the input and weight are also this op's own operands, at PyTorch's
    positions, so the second-order graph has PyTorch's edges. An output whose input of
    the forward needs no gradient is an empty placeholder (the forward's node gives
    None for it)."""
    _base_class = True
    n_outputs = 3
    _custom_zeros = True  # an output no gradient reached is None in ``backward``
    _w_at = None  # the weight's position among the operands (``n_inputs`` of them)
    _bias_at = None  # the bias's, where PyTorch's node lists it
    _flat_params = False  # the weight and bias are (C,), viewed to broadcast in ``node``

    @classmethod
    def grads(cls, node, gy, x, w):
        """The forward node's gradient tuple (``Normalize.backward``'s) for ``gy``, the
        saved input ``x`` and weight ``w`` (as the user passed them), recorded."""
        args = [gy, x] + [None] * (cls.n_inputs - 2)
        args[cls._w_at] = w
        outs = cls.apply(*args, node=node)
        e = node._edges
        gx, gw, gb = (o if e[i] is not None else None for i, o in enumerate(outs))
        fn = outs[0].grad_fn
        if fn is not None and cls._bias_at is not None and e[2] is not None:
            # PyTorch's node lists the bias too (whose gradient it never changes)
            fn._edges[cls._bias_at] = e[2]
        return gx, gw, gb, None, None, None

    def forward(self, gy, x, *rest, node):
        self.node = node
        w = rest[self._w_at - 2]
        wv = None if w is None else self._view(w)
        gx, gw, gb = node._grad_arrays(gy, x, wv)
        empty = array_module(gy).empty((0,), gy.dtype)
        if gw is not None:
            gw = gw.reshape(w.shape)
        if gb is not None and self._flat_params:
            gb = gb.reshape(-1)
        return tuple(empty if g is None else g for g in (gx, gw, gb))

    def _view(self, w):
        return w.reshape(self.node.view) if self._flat_params else w

    def backward(self, ggx, ggw, ggb):
        gy, x, w = self.saved_tensors[:3]
        node = self.node
        e = self._edges
        axes, eps = node.axes, node.eps
        wv = None if w is None else self._view(w)
        if ggw is not None:
            ggw = self._view(ggw)
        if ggb is not None:
            ggb = self._view(ggb)

        def m(v):
            return v.mean(axes, keepdim=True)
        xc = x - m(x)
        s = (m(xc * xc) + eps).rsqrt()
        xhat = xc * s

        def proj(v):
            return v - m(v) - xhat * m(xhat * v)
        pa = None if ggx is None else proj(ggx) * s
        d_gy = d_x = d_w = None
        if e[0] is not None:
            for t in (None if pa is None else pa if wv is None else pa * wv,
                      None if ggw is None else ggw * xhat, ggb):
                if t is not None:
                    d_gy = t if d_gy is None else d_gy + t
            if d_gy is not None and tuple(d_gy.shape) != tuple(gy.shape):
                d_gy = d_gy.expand(gy.shape)
        if e[1] is not None:
            if ggw is not None:
                d_x = proj(ggw * gy) * s
            if ggx is not None:
                g = gy if wv is None else gy * wv
                mga, maa = m(g * xhat), m(ggx * xhat)
                c = m(ggx * g) - m(ggx) * m(g) - maa * mga
                t = (c * xhat + mga * proj(ggx) + maa * proj(g)) * (s * s)
                d_x = -t if d_x is None else d_x - t
        if self._w_at < len(e) and e[self._w_at] is not None and pa is not None:
            d_w = (gy * pa).sum_to_size(wv.shape).reshape(w.shape)
        out = [d_gy, d_x] + [None] * (self.n_inputs - 2)
        out[self._w_at] = d_w
        return tuple(out)


class LayerNormGrads(_NormGrads):
    """Layer norm's gradients: operands ``(grad_out, input, mean, rstd, weight, bias)``
    as PyTorch's ``native_layer_norm_backward`` takes them (mean and rstd are the
    forward node's arrays here: no edges, as in PyTorch)."""
    _node_name = "NativeLayerNormBackwardBackward0"
    save_inputs = (0, 1, 4)
    n_inputs = 6
    _w_at = 4
    _bias_at = 5


class BatchNormGrads(_NormGrads):
    """Batch (and instance) norm's gradients in training mode: operands ``(grad_out,
    input, weight, save_mean, save_invstd)`` as PyTorch's node lists them."""
    _node_name = "NativeBatchNormBackwardBackward0"
    save_inputs = (0, 1, 2)
    n_inputs = 5
    _w_at = 2
    _flat_params = True


class BatchNormEvalGrads(Primitive):
    """Batch norm's gradients with the running statistics (eval mode): operands
    ``(grad_out, input, weight, running_mean, running_var)``, the statistics plain
    buffers (no edges, as in PyTorch's node). The forward is the eval node's array
    code (``_BatchNormEval._plain_grads``); the map is affine in the input, so with
    ``s = rsqrt(running_var + eps)`` per channel and ``gw = sum(gy * (x - mean) * s)``:
    ``d gy = ggx * w * s + ggw * s * (x - mean) + ggb``, ``d x = gy * ggw * s`` and
    ``d w = sum(ggx * gy) * s``."""
    _node_name = "NativeBatchNormBackwardBackward0"
    n_outputs = 3
    save_inputs = (0, 1, 2)
    n_inputs = 5
    _custom_zeros = True

    @classmethod
    def grads(cls, node, gy, x, w, mean, var):
        """The eval node's gradient tuple for ``gy``, recorded."""
        outs = cls.apply(gy, x, w, None, None, node=node, stats=(mean._data, var._data))
        e = node._edges
        return tuple(o if i < len(e) and e[i] is not None else None
                     for i, o in enumerate(outs)) + (None,) * 3

    def forward(self, gy, x, w, _mean, _var, node, stats):
        from ember._tensor import _make
        # Tensors of the arrays, which need no gradient: nothing is recorded
        grads, invstd = node._plain_grads(*(None if a is None else _make(a)
                                            for a in (gy, x, w) + stats))
        grads = tuple(None if g is None else g._data for g in grads)
        self.invstd, self.mean = invstd._data, stats[0]
        empty = array_module(gy).empty((0,), gy.dtype)
        return tuple(empty if g is None else g for g in grads)

    def backward(self, ggx, ggw, ggb):
        from ember._tensor import _make
        gy, x, w = self.saved_tensors[:3]
        e = self._edges
        nd = x.dim()
        view = (1, -1) + (1,) * (nd - 2)
        s = _make(self.invstd)
        d_gy = d_x = d_w = None
        if e[0] is not None:
            for t in (None if ggx is None else ggx * (s if w is None else s * w).reshape(view),
                      None if ggw is None else (ggw * s).reshape(view) *
                      (x - _make(self.mean).reshape(view)),
                      None if ggb is None else ggb.reshape(view)):
                if t is not None:
                    d_gy = t if d_gy is None else d_gy + t
            if d_gy is not None and tuple(d_gy.shape) != tuple(gy.shape):
                d_gy = d_gy.expand(gy.shape)
        if e[1] is not None and ggw is not None:
            d_x = gy * (ggw * s).reshape(view)
        if len(e) > 2 and e[2] is not None and ggx is not None:
            d_w = (ggx * gy).sum((0,) + tuple(range(2, nd))) * s
        return d_gy, d_x, d_w, None, None
