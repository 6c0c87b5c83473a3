"""Loss primitives: each of PyTorch's loss kernels as one op and one node, with the
reduction (``'none'``, ``'mean'``, ``'sum'``) inside it, as PyTorch records them
(``mse_loss`` is one ``MseLossBackward0`` whose inputs are the input and the target).

Forward runs on arrays. Backward is written in ember Tensor ops, so a recorded
gradient (``create_graph``) differentiates again; the hot ones (``nll_loss``,
``mse_loss``) take an array route on a first-order pass. Arguments PyTorch does not
differentiate (class weights, margins' targets) are no edges of the node; the
functions in :mod:`ember.nn._functional_losses` refuse them when they require grad,
with PyTorch's message.
"""

import numpy as np

from ember._tensor import Tensor, _make
from ember._tensor import _mode_active as _active
from ember.autograd import _saved_hooks, anomaly
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.autograd.saved import _saved_inputs
from ember.backend import array_module
from ember.backend import threads as _threads
from ember.backend.meta import is_meta
from ember.ops._util import promote_arrays, reduced_float, refuse_dtype
from ember.ops.softmaxes import LogSoftmax

__all__ = []

_MEAN, _SUM, _NONE = "mean", "sum", "none"


def _reduce_array(loss, reduction):
    """The reduced loss array, with the numerics of ember's ``mean``/``sum``."""
    if reduction == _NONE:
        return loss
    low = reduced_float(loss.dtype)  # float16/bfloat16 accumulate in float32, as PyTorch
    if reduction == _SUM:
        return array_module(loss).asarray(
            loss.sum(dtype=np.float32).astype(loss.dtype) if low else loss.sum())
    if loss.size == 0:
        return array_module(loss).asarray(np.nan, dtype=loss.dtype)
    if low:
        return array_module(loss).asarray(loss.mean(dtype=np.float32).astype(loss.dtype))
    if type(loss) is np.ndarray and loss.dtype.char in "fd":
        # NumPy's ``mean`` written out (its Python wrapper costs more than a small loss's
        # sum): the sum, divided by the count as an ``intp`` in double and rounded back
        total = np.add.reduce(loss, axis=None)
        return np.asarray(total.dtype.type(total / np.intp(loss.size)))
    return array_module(loss).asarray(loss.mean())


def _scale(gy, reduction, n):
    """The gradient of the output with respect to each unreduced loss element:
    ``gy`` itself for 'none' and 'sum', ``gy / n`` for 'mean'."""
    return gy / n if reduction == _MEAN else gy


def _cast(w, x):
    # weights take part in the input's dtype, as PyTorch's kernels compute
    return w if w is None or w.dtype == x.dtype else w.astype(x.dtype)


def _as(g, like):
    return g if g._data.dtype == like._data.dtype else g.to(like.dtype)


# ----- elementwise losses of (input, target) ---------------------------------------------------
def _pointwise_batch(cls, lvl, args, params):
    """vmap rule of the elementwise losses: input and target of each sample stacked
    (an unbatched one expanded), the weights broadcast per sample, the unreduced loss
    computed in one call and reduced per sample."""
    from ember.ops._batch import _b, _expand_batch, _size, _to_rank
    b = _b()
    k = next(i for i, a in enumerate(args) if isinstance(a, str))   # the reduction
    (xv, xb), (tv, tb) = b.unwrap(args[0], lvl), b.unwrap(args[1], lvl)
    B = _size(lvl)
    xv, tv = _expand_batch(xv, xb, B), _expand_batch(tv, tb, B)
    n = xv.dim() - 1
    rest = []
    for a in args[2:k]:   # class weights: broadcast against one sample
        v, bt = b.unwrap(a, lvl) if a is not None else (None, False)
        rest.append(_to_rank(v, v.dim() - 1, n) if bt else v)
    out = cls.apply(xv, tv, *rest, "none", *args[k + 1:])
    reduction = args[k]
    if reduction != _NONE and n:
        dims = tuple(range(1, n + 1))
        out = out.mean(dims) if reduction == _MEAN else out.sum(dims)
    return b.wrap(out, lvl)


class _Pointwise:
    """Mixin of the elementwise loss primitives ``f(input, target)`` of one shape (the callers
    broadcast first, as PyTorch's functions do), reduced by ``reduction``; a subclass
    writes ``loss`` on arrays and ``grads`` in Tensor ops."""
    save_inputs = (0, 1)
    n_inputs = 2
    batch = _pointwise_batch
    # float16 computed op by op in float16 (PyTorch's rounding), or in float32 at once
    half_in_float = False
    # the dtypes PyTorch's kernel (``kernel``) has no loop for, where it is one kernel
    kernel, refuses = None, ""

    def forward(self, x, t, reduction, *params):
        self.reduction, self.n = reduction, x.size
        x, t = promote_arrays(x, t)   # PyTorch's result type (an int target: the input's)
        if self.refuses:
            refuse_dtype(self, x, t)
        half = self.half_in_float and x.dtype == np.float16
        if half:   # this kernel computes float16 in float32 and rounds once, as PyTorch's
            x, t = x.astype(np.float32), t.astype(np.float32)
        with np.errstate(all="ignore"):
            out = _reduce_array(self.loss(x, t, *params), reduction)
        return out.astype(np.float16) if half else out

    def backward(self, gy):
        x, t = self.saved_tensors
        g = _scale(gy, self.reduction, self.n)
        gx, gt = self.grads(x, t, g, *self.params())
        return self._out(gx, gt, x, t)

    def _out(self, gx, gt, x, t):
        # one gradient per input; an operand's in its own dtype (a target of another
        # floating dtype takes part in the input's)
        e = self._edges
        gx = _as(gx, x) if e[0] is not None else None
        gt = _as(gt, t) if len(e) > 1 and e[1] is not None and gt is not None else None
        return (gx, gt) + (None,) * (len(e) - 2)

    def params(self):
        return ()


def _split(x, t):
    """Whether ``x`` and ``t`` (arrays of one shape) make an elementwise loss large
    enough to compute in flat blocks on the intra-op threads (the same NumPy calls per
    block, so the same values)."""
    return type(x) is np.ndarray and type(t) is np.ndarray and \
        x.size >= _threads.SPLIT_ELEMENTS and x.shape == t.shape and \
        x.dtype == t.dtype and x.dtype.char in "fd" and x.flags.c_contiguous and \
        t.flags.c_contiguous and _threads.get_num_threads() > 1


class MseLoss(_Pointwise, Primitive):
    """``(input - target) ** 2``."""
    _node_name = "MseLossBackward0"
    kernel, refuses = "mse_cpu", "biuc"  # floating types only

    def loss(self, x, t):
        if _split(x, t):
            out = np.empty(x.shape, x.dtype)
            xf, tf, of = x.reshape(-1), t.reshape(-1), out.reshape(-1)

            def block(lo, hi):  # large: in blocks on the intra-op threads
                d = np.subtract(xf[lo:hi], tf[lo:hi], out=of[lo:hi])
                np.multiply(d, d, out=d)
            _threads.flat_blocks(block, x.size, 2 * x.size)
            return out
        d = x - t
        if type(d) is np.ndarray and d.ndim:
            return np.multiply(d, d, out=d)  # squared in place: one temporary, not two
        return d * d

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``), where the saved
        input and target are unchanged NumPy arrays of the gradient's dtype (``_out``
        converts nothing then)."""
        saved = _saved_inputs(self)
        if saved is None:
            return None
        x, t = saved
        xd, td = x._data, t._data
        if type(xd) is not np.ndarray or type(td) is not np.ndarray or \
                xd.dtype != g.dtype or td.dtype != g.dtype:
            return None
        gx, gt = self._grad_arrays(g, xd, td)
        if gx.dtype != xd.dtype:
            return None
        e = self._edges
        return (gx if e[0] is not None else None, gt) + (None,) * (len(e) - 2)

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``): ``backward``'s no-graph arrays (the
        compile plan casts each to its input's dtype)."""
        gx, gt = self._grad_arrays(grads[0], inputs[0], inputs[1])
        return [gx if self._edges[0] is not None else None, gt] + [None] * (len(inputs) - 2)

    def _norm(self):
        """PyTorch's ``2 / n`` for 'mean', else 2 (a Python number: it takes part in the
        input's dtype). The gradient is ``norm * d * g`` in that order, so ``2/n * max``
        stays finite."""
        if self.reduction != _MEAN:
            return 2.0
        return 2.0 / self.n if self.n else float("inf")  # (C's 2. / 0: an empty input's)

    def _grad_arrays(self, g, xd, td):
        """The input's and (where it has an edge) the target's gradient arrays, given the
        output gradient's array ``g`` (no graph recorded): ``(norm * (x - t)) * g``, as
        PyTorch's kernel orders it (times a ``g`` of 1 is left out: the same bits)."""
        norm = self._norm()
        if type(g) is np.ndarray and g.ndim == 0 and type(xd) is np.ndarray and \
                type(td) is np.ndarray and xd.shape == td.shape and xd.ndim and \
                xd.dtype == td.dtype == g.dtype and xd.dtype.kind == "f":
            # a reduced loss: each product written in place into one array
            one = g == 1
            if _split(xd, td):
                gx = np.empty(xd.shape, xd.dtype)
                xf, tf, of = xd.reshape(-1), td.reshape(-1), gx.reshape(-1)

                def block(lo, hi):  # large: in blocks on the intra-op threads
                    o = np.subtract(xf[lo:hi], tf[lo:hi], out=of[lo:hi])
                    np.multiply(o, norm, out=o)
                    if not one:
                        np.multiply(o, g, out=o)
                _threads.flat_blocks(block, xd.size, 2 * xd.size)
            else:
                gx = np.subtract(xd, td)
                gx *= norm
                if not one:
                    gx *= g
        else:
            gx = xd - td
            if type(gx) is np.ndarray and gx.dtype.kind == "f" and \
                    np.result_type(gx, g) == gx.dtype and np.shape(g) in ((), gx.shape):
                # each product written into ``d``'s own array: the same elementwise
                # products, no other full-size temporary
                np.multiply(gx, norm, out=gx)
                np.multiply(gx, g, out=gx)
            else:
                gx = norm * gx * g
        # the target's gradient only where the target has an edge
        gt = -gx if len(self._edges) > 1 and self._edges[1] is not None else None
        return gx, gt

    def backward(self, gy):
        x, t = self.saved_tensors
        if _grad_state.grad_enabled:
            d = x - t
            # the norm rounded to the dtype first, as PyTorch's kernel (float16: 2/n)
            norm = self._norm()
            if d.is_floating_point():
                norm = float(d._data.dtype.type(norm))
            gx = d * norm * gy
            return self._out(gx, -gx, x, t)
        gx, gt = self._grad_arrays(gy._data, x._data, t._data)
        return self._out(_make(gx), None if gt is None else _make(gt), x, t)


class SmoothL1Loss(_Pointwise, Primitive):
    """``0.5 d ** 2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d`` the
    difference; ``beta > 0``)."""
    _node_name = "SmoothL1LossBackward0"
    kernel, refuses = "smooth_l1_cpu", "biuc"

    def loss(self, x, t, beta):
        self.beta = beta
        d = x - t
        z = np.abs(d)
        quad = ~(z >= beta)   # NaN is quadratic: its value and gradient stay NaN
        dq = np.where(quad, d, 0)
        return np.where(quad, dq * dq * (0.5 / beta), z - 0.5 * beta)

    def params(self):
        return (self.beta,)

    def grads(self, x, t, g, beta):
        import ember
        d = x - t
        one = ember.ones((), dtype=d.dtype)
        gd = ember.where(d < -beta, -one, ember.where(d > beta, one, d / beta)) * g
        return gd, -gd


class HuberLoss(_Pointwise, Primitive):
    """``0.5 d ** 2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    _node_name = "HuberLossBackward0"
    kernel, refuses = "huber_cpu", "biuc"
    half_in_float = True

    def loss(self, x, t, delta):
        self.delta = delta
        d = x - t
        z = np.abs(d)
        quad = ~(z >= delta)
        dq = np.where(quad, d, 0)
        return np.where(quad, dq * dq * 0.5, (z - 0.5 * delta) * delta)

    def params(self):
        return (self.delta,)

    def grads(self, x, t, g, delta):
        import ember
        d = x - t
        lim = ember.full((), delta, dtype=d.dtype)
        gd = ember.where(d < -delta, -lim, ember.where(d > delta, lim, d)) * g
        return gd, -gd


class SoftMarginLoss(_Pointwise, Primitive):
    """``log(1 + exp(-target * input))``; the target is no edge (PyTorch does not
    differentiate it)."""
    _node_name = "SoftMarginLossBackward0"
    n_inputs = 1

    def loss(self, x, t):
        return np.log1p(np.exp(-x * t))

    def grads(self, x, t, g):
        z = (-x * t).exp()
        return -t * z / (z + 1) * g, None


class BinaryCrossEntropy(_Pointwise, Primitive):
    """``-w (t log x + (1 - t) log(1 - x))`` with the logs clamped at -100; its input
    gradient is PyTorch's, ``w (x - t) / max(x (1 - x), 1e-12)``, finite where ``x`` is
    exactly 0 or 1 (a saturated float32 sigmoid). The weight is no edge."""
    _node_name = "BinaryCrossEntropyBackward0"

    def forward(self, x, t, w, reduction):
        # checked on the arrays, so a compiled or traced replay checks every call (as
        # PyTorch's kernel does); NaN fails too
        if x.size and not is_meta(x) and not ((x >= 0) & (x <= 1)).all():
            raise RuntimeError("all elements of input should be between 0 and 1")
        self.w = _cast(w, x)
        return _Pointwise.forward(self, x, t, reduction)

    def loss(self, x, t):
        log_x = np.maximum(np.log(x), -100)
        log_1mx = np.maximum(np.log(1 - x), -100)
        loss = -(t * log_x + (1 - t) * log_1mx)
        return loss if self.w is None else loss * self.w

    def grads(self, x, t, g):
        if self.w is not None:
            g = g * _make(self.w)
        gx = g * (x - t) / ((1 - x) * x).clamp_min(1e-12)
        gt = g * ((1 - x).log() - x.log())  # unclamped, as PyTorch's
        return gx, gt


def _logsigmoid(x):
    # log(sigmoid(x)) without overflow: x - log1p(exp(x)) below 0, -log1p(exp(-x)) above
    neg = x < 0
    return np.where(neg, np.where(neg, x, 0) - np.log1p(np.exp(np.where(neg, x, 0))),
                    0 - np.log1p(np.exp(-np.where(neg, 0, x))))


class BinaryCrossEntropyWithLogits(_Pointwise, Primitive):
    """``w ((1 - t) x - lw logsigmoid(x))`` with ``lw = (pos_weight - 1) t + 1`` (1
    without ``pos_weight``); the weights are no edges."""
    _node_name = "BinaryCrossEntropyWithLogitsBackward0"

    def forward(self, x, t, w, pw, reduction):
        self.w, self.pw = _cast(w, x), _cast(pw, x)
        return _Pointwise.forward(self, x, t, reduction)

    def loss(self, x, t):
        log_sig = _logsigmoid(x)
        if self.pw is not None:
            log_sig = log_sig * ((self.pw - 1) * t + 1)
        loss = (1 - t) * x - log_sig
        return loss if self.w is None else loss * self.w

    def grads(self, x, t, g):
        if self.w is not None:
            g = g * _make(self.w)
        if self.pw is None:
            return (x.sigmoid() - t) * g, -x * g
        pw = _make(self.pw)
        lw = (pw - 1) * t + 1
        gx = ((1 - t) - lw * (1 - x.sigmoid())) * g
        gt = (-x - (pw - 1) * _log_sigmoid_tensor(x)) * g
        return gx, gt


def _log_sigmoid_tensor(x):
    import ember
    zero = ember.zeros((), dtype=x.dtype)
    neg = x < 0
    xn = ember.where(neg, x, zero)
    xp = ember.where(neg, zero, x)
    return ember.where(neg, xn - xn.exp().log1p(), zero - (-xp).exp().log1p())


# ----- classification ---------------------------------------------------------------------------
class NllLoss(Primitive):
    """``-weight[t] * input[..., t, ...]`` per sample for log-probabilities ``input``
    (C) or (N, C) and class indices ``target``, samples equal to ``ignore_index``
    left out; 'mean' divides by the total weight of the samples kept (NaN, with a zero
    gradient, when none is). Only the input is an edge, as in PyTorch."""
    n_inputs = 1
    _node_name = "NllLossBackward0"
    batch = None

    def forward(self, x, t, w, ignore_index, reduction):
        xp = array_module(x)
        c = x.shape[1] if x.ndim >= 2 else x.shape[0]
        flat = t.reshape(-1)
        n = flat.shape[0]
        if x.ndim == 4:   # (N, C, H, W): classes last, one row per position
            scores = xp.moveaxis(x, 1, -1).reshape(n, c)
        else:
            scores = x.reshape(n, c)
        if n and type(flat) is np.ndarray and flat.dtype == np.int64 and \
                not 0 <= ignore_index < c:
            # one reduction instead of two: seen unsigned, a negative target is larger
            # than any class, so the largest below ``c`` puts every target in [0, c),
            # and the ignore_index outside it is then nowhere
            lo, hi = (0, c - 1) if int(flat.view(np.uint64).max()) < c else (-1, c)
        else:
            # (a meta tensor has no values to check)
            lo, hi = (int(flat.min()), int(flat.max())) if n and not is_meta(flat) else \
                (0, -1)
        if 0 <= lo and hi < c and not lo <= ignore_index <= hi:
            valid, safe = None, flat   # every target a class (the common case)
        else:
            valid = flat != ignore_index
            safe = xp.where(valid, flat, 0)
            bad = valid & ((flat < 0) | (flat >= c))
            if bad.any():
                raise IndexError(f"Target {int(flat[bad][0])} is out of bounds.")
        rows = xp.arange(n)
        if w is None:
            wt = None if valid is None else valid.astype(x.dtype)
        else:
            wt = w[safe] if valid is None else w[safe] * valid
        picked = scores[rows, safe]
        loss = -picked if wt is None else -picked * wt
        self.rows, self.safe, self.wt, self.reduction = rows, safe, wt, reduction
        self.shape, self.c, self.ignore = x.shape, c, ignore_index
        if reduction == _NONE:
            return loss.reshape(t.shape)
        if reduction == _SUM:
            return xp.asarray(loss.sum())
        total = x.dtype.type(n) if wt is None else wt.sum()
        self.total = total
        if total == 0:   # every target ignored: NaN, and a zero gradient
            return xp.asarray(np.nan, dtype=x.dtype)
        return xp.asarray(loss.sum() / total)

    def _coefficients(self, dtype, g=None):
        """d loss / d input per unit of the output's gradient, in the input's layout
        (with the samples of 'none' still to be scaled by their own gradients); times
        ``g`` when given (a 0-d gradient array of a reduced loss)."""
        xp = array_module(self.safe)
        n, c = self.rows.shape[0], self.c
        m = xp.zeros((n, c), dtype=dtype)
        coef = -1 if self.wt is None else -self.wt
        if self.reduction == _MEAN:
            coef = coef / self.total if self.total != 0 else coef * 0
        if g is not None:
            coef = coef * g
        m[self.rows, self.safe] = coef
        if len(self.shape) == 4:
            nn, _, h, w = self.shape
            return xp.moveaxis(m.reshape(nn, h, w, c), -1, 1)
        return m.reshape(self.shape)

    def _per_sample(self, g):
        # 'none': one gradient per sample, broadcast over the class dim
        if self.reduction != _NONE or len(self.shape) == 1:
            return g
        return g.reshape(g.shape[:1] + (1,) + g.shape[1:])

    def _hook_saves(self, args, out):
        """What PyTorch's node saves, for saved-tensor hooks: the input, the target, the
        class weights when given and the total weight (0 for 'none'), each a Tensor
        (``Primitive._hook_saves``); ember's forward keeps its own arrays instead."""
        x, t, w = args[:3]
        if self.reduction == _NONE:
            total = 0
        elif self.wt is None:
            total = self.rows.shape[0]
        else:
            total = self.wt.sum()
        total = _make(np.asarray(total, dtype=x._data.dtype), False)
        saved = [(x, x._vc[0]), (t, t._vc[0])]
        if w is not None:
            saved.append((w, w._vc[0]))
        saved.append((total, None))
        return saved

    def _use_unpacked(self):
        """Where saved-tensor hooks packed the target, weights and total weight, the
        choice and scale of backward from what their unpack returns, as PyTorch's."""
        n = self._saved_and_hooked(*[None] * (len(self._saved) - self._hook_at))[1]
        t, w, total = n[1], (n[2] if len(n) == 4 else None), n[-1]
        xp = array_module(t)
        flat = t.reshape(-1)
        valid = flat != self.ignore
        self.safe = xp.where(valid, flat, 0)
        if w is None:
            self.wt = valid.astype(total.dtype)
        else:
            self.wt = w[self.safe] * valid
        self.total = total.reshape(()).item()

    def backward(self, gy):
        if self._hook_at is not None:
            self._use_unpacked()
        elif self._saved is not None:
            _ = self.saved_tensors  # the hooks' tensors are unpacked, as PyTorch's are
        if not _grad_state.grad_enabled:
            g = gy._data
            if self.reduction != _NONE:   # the scale goes into the scattered values
                return _make(self._coefficients(g.dtype, g)), None, None, None, None
            return _make(self._coefficients(g.dtype) * self._per_sample(g)), None, None, \
                None, None
        return self._grad_node.record(self, gy), None, None, None, None

    def _array_grads(self, gy, g):
        """``backward``'s first-order formula on the gradient's array
        (``Node._array_grads``)."""
        if type(g) is not np.ndarray or type(self.safe) is not np.ndarray or \
                self._saved is not None:
            return None
        if self.reduction != _NONE:
            return self._coefficients(g.dtype, g), None, None, None, None
        return self._coefficients(g.dtype) * self._per_sample(g), None, None, None, None

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``): the input's only."""
        g = grads[0]
        return [self._coefficients(g.dtype) * self._per_sample(g), None, None, None, None]

    def jvp(self, tx, *_):
        x, t, w, ignore_index, reduction = self.fw_inputs
        return None if tx is None else type(self).apply(tx, t, w, ignore_index, reduction)


_new = object.__new__
_anomaly = anomaly.enabled


class _NllLossBackward(Primitive):
    """``nll_loss``'s first gradient as a node of its own, recorded only where that
    gradient's graph is made (create_graph): its edges are the output gradient and the
    loss's input, as PyTorch's ``nll_loss_backward``, so a second derivative by the input
    is zeros (the gradient does not depend on it) rather than None; the first-order pass
    keeps ``NllLoss``' array path."""
    _node_name = "NllLossBackwardBackward0"
    _op_name = "nll_loss_backward"

    @classmethod
    def record(cls, loss_node, gy):
        """The gradient ``d loss / d input`` for the output gradient ``gy``, a Tensor
        whose node leads to ``gy`` and to the loss's input."""
        coef = loss_node._coefficients(gy._data.dtype)
        g = loss_node._per_sample(gy) if loss_node.reduction == _NONE else gy
        node = _new(cls)
        node.coef, node.loss_node, node.gy_shape = coef, loss_node, gy.shape
        fn = gy.grad_fn
        gy_edge = (fn, gy._output_nr) if fn is not None else (gy if gy._requires_grad
                                                               else None)
        node._edges = (gy_edge, loss_node._edges[0])
        node._n_in = 2
        out = _make(coef * g._data, True)
        out.grad_fn = node
        return out

    def backward(self, gg):
        # linear in the output gradient: its coefficient summed over the classes
        by_gy = None
        if self._edges[0] is not None:
            prod = gg * _make(self.coef)
            if self.loss_node.reduction == _NONE and len(self.loss_node.shape) > 1:
                by_gy = prod.sum(1)
            else:
                by_gy = prod.sum()
            by_gy = by_gy.reshape(self.gy_shape)
        return by_gy, _make(np.zeros_like(gg._data))
_hook_stack = _saved_hooks.stack


def log_softmax_nll(x, t, ignore_index, reduction):
    """``NllLoss.apply(LogSoftmax.apply(x, 1), t, None, ignore_index, reduction)``:
    ``cross_entropy`` of (N, C) scores and N class indices. Where ``x`` requires grad,
    grad mode is on and nothing watches the graph being made (no mode, anomaly mode or
    saved-tensor hook), the two nodes, their edges, saved output and Tensors are made
    here as those ``apply`` calls leave them, without their generic argument handling (a
    classifier's loss per step); the same kernels, so the same values."""
    xd, td = x._data, t._data
    if x._requires_grad and _grad_state.grad_enabled and not _active[0] and \
            not _anomaly[0] and not _hook_stack and type(xd) is np.ndarray and \
            type(td) is np.ndarray and xd.dtype.char in "fd":
        try:
            ls = _new(LogSoftmax)
            y = LogSoftmax.forward(ls, xd, 1)
            nll = _new(NllLoss)
            loss = NllLoss.forward(nll, y, td, None, ignore_index, reduction)
        except Exception:  # noqa: BLE001 - the applies below raise it as they do
            ls = None
        if ls is not None and type(y) is np.ndarray and type(loss) is np.ndarray:
            fn = x.grad_fn
            ls._edges = (x if fn is None else (fn, x._output_nr), None)
            ls._n_in = 1  # (the dim is no edge)
            vc = [0]
            ls._saved = [(y, vc, 0, True, 0)]  # the saved output, as ``_record`` keeps it
            lt = _new(Tensor)
            lt._data = y
            lt._grad = lt._base = lt._extra = None
            lt._output_nr = 0
            lt._vc = vc
            lt._requires_grad = True
            lt.grad_fn = ls
            nll._edges = [(ls, 0), None, None, None, None]
            nll._n_in = 2  # the input and the target (PyTorch lists Tensors only)
            out = _new(Tensor)
            out._data = loss
            out._grad = out._base = out._extra = None
            out._output_nr = 0
            out._vc = [0]
            out._requires_grad = True
            out.grad_fn = nll
            return out
    return NllLoss.apply(LogSoftmax.apply(x, 1), t, None, ignore_index, reduction)


class _NllLoss2dBackward(_NllLossBackward):
    """``nll_loss2d``'s first gradient as a node (``_NllLossBackward``)."""
    _node_name = "NllLoss2DBackwardBackward0"
    _op_name = "nll_loss2d_backward"


NllLoss._grad_node = _NllLossBackward


class NllLoss2d(NllLoss):
    """``nll_loss`` of (N, C, H, W) scores and (N, H, W) targets: PyTorch's
    ``nll_loss2d`` kernel and node."""
    _node_name = "NllLoss2DBackward0"
    _op_name = "NllLoss"
    _grad_node = _NllLoss2dBackward


def _per_row(g, reduction, n):
    # the output's gradient per sample, as a column over the classes
    if reduction == _NONE:
        return g.reshape(n, 1)
    return g / n if reduction == _MEAN else g


class MultiMarginLoss(Primitive):
    """Multi-class hinge loss of scores (N, C) or (C) and class indices:
    ``sum_{j != y} w[y] max(0, margin - x[y] + x[j]) ** p / C`` per sample (a NaN term
    counts as 0, as in PyTorch's kernel). Only the input is an edge."""
    n_inputs = 1
    save_inputs = (0,)
    batch = None

    def forward(self, x, t, w, p, margin, reduction):
        xp = array_module(x)
        x2 = x.reshape(1, -1) if x.ndim < 2 else x
        n, c = x2.shape
        shape = t.shape if x.ndim < 2 else (n,)  # a (C) input's 'none' loss has the target's
        t = t.reshape(-1)
        # checked on the arrays, so a compiled or traced replay checks every call
        if t.size and not is_meta(t) and ((t < 0) | (t >= c)).any():
            raise RuntimeError("target out of range")
        rows = xp.arange(n)
        with np.errstate(invalid="ignore"):
            z = margin - x2[rows, t][:, None] + x2
            mask = z > 0
        mask[rows, t] = False
        wy = xp.ones(n, dtype=x.dtype) if w is None else w[t].astype(x.dtype, copy=False)
        zz = xp.where(mask, z, 0)
        if p == 2:
            zz = zz * zz
        if w is not None:
            zz = zz * wy[:, None]
        loss = zz.sum(1) / c
        self.t, self.mask, self.wy, self.p, self.margin = t, mask, wy, p, margin
        self.reduction, self.nc = reduction, (n, c)
        return _reduce_array(loss.reshape(shape), reduction)  # shape, (1) or (), as PyTorch's

    def backward(self, gy):
        x, = self.saved_tensors
        n, c = self.nc
        rows = np.arange(n)
        coef = self.mask * (self.wy[:, None] / c)
        if self.p == 2:   # 2 z per active term, z in Tensor ops (a second derivative)
            x2 = x.reshape(n, c)
            z = x2 - x2[rows, self.t].unsqueeze(1) + self.margin
            # inactive terms (z <= 0, NaN, -inf) are 0, not 0 * z: no NaN enters the sum
            z = z.masked_fill(_make(~self.mask), 0)
            coef = _make(coef.astype(x._data.dtype)) * z * 2
        else:
            coef = _make(coef.astype(x._data.dtype))
        onehot = np.zeros((n, c), dtype=x._data.dtype)
        onehot[rows, self.t] = 1
        # the row's total only in the target's column: not 0 * total elsewhere, which is
        # NaN for an infinite total
        gx = coef - coef.sum(1, keepdim=True).expand(n, c).masked_fill(_make(onehot == 0), 0)
        gx = gx * _per_row(gy, self.reduction, n)
        return gx.reshape(x.shape), None, None, None, None, None


class MultilabelMarginLoss(Primitive):
    """Multi-label hinge loss of scores (N, C) or (C) and targets listing each sample's
    classes (ended by the first -1): ``max(0, 1 - (x[y] - x[i])) / C`` summed over target
    classes ``y`` and non-target classes ``i``. Only the input is an edge."""
    n_inputs = 1
    batch = None

    def forward(self, x, t, reduction):
        xp = array_module(x)
        x2 = x.reshape(1, -1) if x.ndim < 2 else x
        n, c = x2.shape
        t = t.reshape(n, c)
        valid = xp.cumprod(t >= 0, axis=1).astype(bool)  # targets end at the first -1
        safe = xp.where(valid, t, 0)
        rows = xp.repeat(xp.arange(n), c).reshape(n, c)
        is_target = xp.zeros((n, c), dtype=bool)
        is_target[rows[valid], t[valid]] = True
        with np.errstate(invalid="ignore"):
            z = 1 - x2[rows, safe][:, :, None] + x2[:, None, :]
            mask = (z > 0) & valid[:, :, None] & ~is_target[:, None, :]
        loss = xp.where(mask, z, 0).sum((1, 2)) / c
        # d loss / d x per sample: +1/C for each active (y, i) at i, -1/C at y
        m = mask.sum(1).astype(x.dtype)
        xp.add.at(m, (rows, safe), -mask.sum(2).astype(x.dtype))
        self.m, self.reduction, self.nc, self.shape = m / c, reduction, (n, c), x.shape
        if x.ndim < 2:
            loss = loss.reshape(())
        return _reduce_array(loss, reduction)

    def backward(self, gy):
        n, c = self.nc
        gx = _make(self.m) * _per_row(gy, self.reduction, n)
        return gx.reshape(self.shape), None, None
