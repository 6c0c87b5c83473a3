"""Activation primitives: relu (with its array fast paths and threshold-style
gradient), leaky_relu, softplus, and ``zero_curvature``, which keeps the zero second
derivative of the piecewise-linear activations in the graph. Re-exported by
:mod:`ember.ops.unary`, which binds their Tensor methods and in-place forms."""
import numpy as np

from ember._tensor import _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.autograd.saved import _saved_output_array
from ember.backend.threads import parallel_rows
from ember.ops import _batch, _jvp
from ember.ops._util import not_implemented_for, number_operand, reduced_float
from ember.ops.elementwise import where

_BLOCK = 65536
_ZEROS = {}  # dtype -> a block of _BLOCK zeros, never written
_BITS = {2: np.int16, 4: np.int32, 8: np.int64}  # float itemsize -> its bits as an int
# elements up to which relu's gradient casts its mask whole (none split over threads)
_SMALL_MASK = 1 << 15


def _relu_array(x, out=None):
    """``max(x, 0)`` on an array (into ``out``, which may be ``x``, when given), keeping
    ``x`` where it equals 0 (relu(-0.0) is -0.0, as PyTorch's clamp_min): NumPy's
    ``maximum`` returns the second of equal operands (float16's loop the first). Against
    the scalar 0 it runs a broadcast inner loop without SIMD; against a block of zeros
    (the input seen as rows of ``_BLOCK``) it is 2-3 times as fast. Same values, NaNs
    and signed zeros."""
    if type(x) is np.ndarray and x.dtype == np.float16:
        return np.maximum(x, 0, dtype=x.dtype, out=out)
    if type(x) is not np.ndarray or x.size < 4096 or x.dtype.kind != "f" \
            or not x.flags.c_contiguous:
        return np.maximum(0, x, dtype=x.dtype, out=out)
    z = _ZEROS.get(x.dtype)
    if z is None:
        z = _ZEROS[x.dtype] = np.zeros(_BLOCK, x.dtype)
    if out is None:
        out = np.empty_like(x)
    flat, oflat = x.reshape(-1), out.reshape(-1)
    n = flat.size
    m = n - n % _BLOCK
    if m:
        rows, orows = flat[:m].reshape(-1, _BLOCK), oflat[:m].reshape(-1, _BLOCK)

        def block(lo, hi):
            np.maximum(z, rows[lo:hi], out=orows[lo:hi])
        parallel_rows(block, len(rows), m)
    if m < n:
        np.maximum(z[:n - m], flat[m:], out=oflat[m:])
    return out


def _relu_grad_array(gy, y, out=None):
    """relu's derivative on arrays, as PyTorch's ``threshold_backward``: 0 where
    ``y <= 0`` and ``gy`` elsewhere. So a NaN output passes the gradient on, and an
    infinite or NaN ``gy`` is not multiplied into the zeros (``inf * 0`` would be NaN).
    Into ``out`` when given; split over the intra-op threads when large."""
    dtype = np.result_type(gy.dtype, np.bool_) if hasattr(gy, "dtype") else None
    if type(gy) is np.ndarray and type(y) is np.ndarray and gy.shape == y.shape and \
            gy.size >= 4096 and gy.dtype.kind == "f" and \
            not (gy.flags.c_contiguous and y.flags.c_contiguous):
        # a gradient broadcast from a sum or mean (stride 0), or a transposed one: one
        # copy to C order costs a pass, where the masked ``where`` below branches on
        # each element (128 x 256 float32: 170 us against 5 + 13)
        gy, y = np.ascontiguousarray(gy), np.ascontiguousarray(y)
    if type(gy) is not np.ndarray or type(y) is not np.ndarray or gy.shape != y.shape \
            or gy.size < 4096 or not (gy.flags.c_contiguous and y.flags.c_contiguous):
        # a scalar zero, not a host array: gy may live on a GPU
        res = np.where(y <= 0, dtype.type(0) if dtype is not None else 0.0, gy)
        if out is None:
            return res
        np.copyto(out, res)
        return out
    if out is None:
        bits = _BITS.get(gy.dtype.itemsize) if gy.dtype.kind == "f" and \
            dtype == gy.dtype else None
        if bits is not None and gy.size <= _SMALL_MASK:
            # small arrays: the mask made at gy's width by one cast of the int8 mask is
            # the result's own array, ANDed with gy's bits in place (three short passes;
            # building the mask in a new output through ``less_equal``'s cast to the
            # integer width costs about 1.6x: 128 x 256 float32 33 -> 21 us)
            keep = np.less_equal(y.reshape(-1), 0).view(np.int8)
            np.subtract(keep, 1, out=keep)  # True (1) -> 0, False (0) -> -1: all ones
            res = keep.astype(bits)
            np.bitwise_and(gy.reshape(-1).view(bits), res, out=res)
            return res.view(gy.dtype).reshape(gy.shape)
        out = np.empty(gy.shape, dtype)
    bits = _BITS.get(gy.dtype.itemsize) if gy.dtype.kind == "f" and \
        out.dtype == gy.dtype and out.flags.c_contiguous else None
    if bits is None:
        g, yf, o = gy.reshape(-1), y.reshape(-1), out.reshape(-1)

        def block(lo, hi):
            np.copyto(o[lo:hi], g[lo:hi])
            np.copyto(o[lo:hi], 0, where=yf[lo:hi] <= 0)
    else:
        # a masked copy (copyto's where=, np.where) branches on each element and runs
        # ~20x slower than a bitwise AND of gy's bits with a mask of all ones where
        # y > 0 (or NaN) and zeros where y <= 0: the same +0.0 there, gy elsewhere
        g, yf, o = gy.reshape(-1).view(bits), y.reshape(-1), out.reshape(-1).view(bits)
        if np.may_share_memory(out, gy):
            if g.size <= _SMALL_MASK:
                # small arrays: the mask widened to gy's integer width by one cast first,
                # so the AND runs on one type; the mixed-type AND below sets up a
                # buffered cast that costs more than the cast itself here (4-8 us of
                # 10-22 at 4-32 K elements), while on large arrays its buffers win
                keep = np.less_equal(yf, 0).view(np.int8)
                np.subtract(keep, 1, out=keep)
                np.bitwise_and(g, keep.astype(bits), out=o)
                return out

            def block(lo, hi):
                for a in range(lo, hi, _BLOCK):  # (pieces that stay in cache, below)
                    b = min(a + _BLOCK, hi)
                    keep = np.less_equal(yf[a:b], 0).view(np.int8)
                    np.subtract(keep, 1, out=keep)  # True (1) -> 0, False (0) -> -1
                    np.bitwise_and(g[a:b], keep, out=o[a:b])
        else:
            # the mask built in the output itself, at gy's width: the AND then runs
            # without widening an int8 mask element by element. In pieces of _BLOCK
            # elements, so the second and third passes read what the first left in
            # cache: 2.6 -> 1.9 ms for the small CNN's first relu (64x32x26x26, one
            # thread; docs/performance/cnn.md, "fourteenth pass")
            def block(lo, hi):
                for a in range(lo, hi, _BLOCK):
                    b = min(a + _BLOCK, hi)
                    ob = o[a:b]
                    np.less_equal(yf[a:b], 0, out=ob, casting="unsafe")
                    np.subtract(ob, 1, out=ob)  # 1 -> 0 where y <= 0, 0 -> all ones else
                    np.bitwise_and(g[a:b], ob, out=ob)
    parallel_rows(block, g.size, 2 * g.size)
    return out


class Relu(Primitive):
    save_output = True

    def forward(self, x):
        if x.dtype == np.bool_:
            raise RuntimeError("Boolean inputs not supported for relu")
        if x.dtype.kind == "c":  # (PyTorch's relu is a clamp, which has no complex order)
            raise NotImplementedError("clamp is not supported for complex types")
        return _relu_array(x)

    def backward(self, gy):
        y, = self.saved_tensors
        if not _grad_state.grad_enabled:
            # first order: one array multiply, no nodes
            return _make(_relu_grad_array(gy._data, y._data))
        return _relu_grad(gy, y)

    def _array_grads(self, gy, g):
        """``backward``'s first-order formula on the gradient's array and the saved
        output's (``Node._array_grads``); None where the output was changed, packed by
        hooks or is not a NumPy array of the gradient's shape and dtype."""
        y = _saved_output_array(self)
        if type(y) is np.ndarray and type(g) is np.ndarray and y.shape == g.shape and \
                y.dtype == g.dtype:
            return _relu_grad_array(g, y)
        return None

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    onnx = "Relu"
    torchscript = "relu"

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradient (``Primitive.vjp``), from the output."""
        g = grads[0]
        return [_relu_grad_array(g, outputs[0], None if out is None else
                                 out(0, g.shape, g.dtype))]

    def forward_out(self, x, out):
        """``forward`` written into ``out(0, shape, dtype)`` (a floating ``x``)."""
        return _relu_array(x, out(0, x.shape, x.dtype))

    # one element of the forward and of the gradient from the output, for the compile
    # plan's fused loops (``z``: the dtype's zero): x unless x < 0, so NaN and -0.0 pass
    # as in the forward above; the gradient is threshold_backward's
    fused = "z if {0} < z else {0}"
    fused_vjp = "z if {y} <= z else {g}"


class ReluBackward(Primitive):
    """``gy * (y > 0)`` as one op (PyTorch's threshold_backward).

    Its derivative with respect to ``y`` is zero, but it is a tensor, not None: a
    gradient penalty through ReLU layers then reaches the earlier biases with zeros,
    as in PyTorch, instead of leaving them out of the graph.
    """
    # operands broadcast (a batched gradient against an unbatched output under vmap):
    # each operand's gradient is summed back to its shape
    broadcasts = True
    save_inputs = (1,)
    _node_name = "ThresholdBackwardBackward0"

    def forward(self, gy, y):
        return _relu_grad_array(gy, y)

    def backward(self, ggx):
        y, = self.saved_tensors
        return _relu_grad(ggx, y), y * 0

    jvp = _jvp.diagonal
    batch = _batch.elementwise


_relu_grad = ReluBackward.binary_function()


class _ZerosLikeOf(Primitive):
    """Zeros shaped like ``x``, computed from ``(g, x)`` so that they stay in the graph:
    a derivative that is zero, but a tensor rather than None."""
    # operands broadcast (a batched gradient against an unbatched output under vmap):
    # each operand's gradient is summed back to its shape
    broadcasts = True
    save_inputs = (1,)
    _node_name = "ZerosLikeBackward0"

    def forward(self, g, x):
        if g.shape != x.shape:  # the batch rule's broadcast operands: zeros of both
            return np.zeros(np.broadcast_shapes(g.shape, x.shape), x.dtype)
        return np.zeros_like(x)

    def backward(self, gz):
        x, = self.saved_tensors
        return None, _ZerosLikeOf.apply(gz, x)

    jvp = _jvp.diagonal
    batch = _batch.elementwise


class ZeroCurvature(Primitive):
    """``y`` unchanged, marking that ``y``'s second derivative with respect to ``x`` is
    zero. Piecewise-linear ops built from ``where`` (threshold, the shrinks, prelu,
    rrelu) and pooling would otherwise leave a first derivative that does not depend on
    ``x`` at all, so ``grad(grad(y), x)`` would be None where PyTorch's dedicated backward
    ops give zeros."""
    # operands broadcast (a batched gradient against an unbatched output under vmap):
    # each operand's gradient is summed back to its shape
    broadcasts = True
    _node_name = "AliasBackward0"
    save_inputs = (1,)

    def forward(self, y, x):
        return y

    def backward(self, gy):
        if not _grad_state.grad_enabled:
            return gy, None
        x, = self.saved_tensors
        return gy, _ZerosLikeOf.apply(gy, x)

    jvp = _jvp.diagonal
    batch = _batch.elementwise


def zero_curvature(y, x):
    """``y``, with a zero (rather than missing) second derivative in ``x`` (see
    ``ZeroCurvature``); a no-op outside autograd."""
    if not (x._requires_grad and _grad_state.grad_enabled):
        return y
    return ZeroCurvature.apply(y, x)


class TanhBackward(Primitive):
    """``gy * (1 - y**2)`` as one op: tanh's derivative is on every RNN's hot path."""
    # operands broadcast (a batched gradient against an unbatched output under vmap):
    # each operand's gradient is summed back to its shape
    broadcasts = True
    save_inputs = (0, 1)
    _node_name = "TanhBackwardBackward0"

    def forward(self, gy, y):
        if y.dtype.kind == "c":
            return gy * np.conj(1 - y * y)
        if reduced_float(y.dtype):
            # float16/bfloat16: PyTorch's kernel computes in float32, rounds once
            w = y.astype(np.float32)
            return (gy.astype(np.float32) * (np.float32(1) - w * w)).astype(y.dtype)
        return gy * (number_operand(y, 1) - y * y)

    def backward(self, ggx):
        gy, y = self.saved_tensors
        if y.is_complex():
            # gy * conj(1 - y**2) is antiholomorphic in y: its gradient there is
            # conj(ggx * conj(gy) * dg/dy) (conjugate Wirtinger), not ggx * gy * dg/dy
            return ggx * (1 - y * y), (ggx * gy.conj() * y * -2).conj()
        return ggx * (1 - y * y), ggx * gy * y * -2

    jvp = _jvp.diagonal
    batch = _batch.elementwise


class SigmoidBackward(Primitive):
    """``(gy * (1 - y)) * y`` as one op (PyTorch's order)."""
    # operands broadcast (a batched gradient against an unbatched output under vmap):
    # each operand's gradient is summed back to its shape
    broadcasts = True
    save_inputs = (0, 1)
    _node_name = "SigmoidBackwardBackward0"

    def forward(self, gy, y):
        # PyTorch's kernel: (gy * (1 - y)) * y, in float32 for bfloat16 (rounded once),
        # in the dtype's own arithmetic for float16; the conjugate factor for complex
        if y.dtype.kind == "c":
            return gy * np.conj((1 - y) * y)
        if y.dtype.kind == "V" and reduced_float(y.dtype):
            d = gy.astype(np.float32) * (np.float32(1) - y.astype(np.float32))
            return (d * y.astype(np.float32)).astype(y.dtype)
        d = gy * (number_operand(y, 1) - y)
        d *= y
        return d

    def backward(self, ggx):
        gy, y = self.saved_tensors
        if y.is_complex():  # (antiholomorphic in y, as TanhBackward's)
            return ggx * y * (1 - y), (ggx * gy.conj() * (1 - y * 2)).conj()
        return ggx * y * (1 - y), ggx * gy * (1 - y * 2)

    jvp = _jvp.diagonal
    batch = _batch.elementwise


def relu(input):
    """``max(input, 0)``."""
    return Relu.apply(input)


class LeakyRelu(Primitive):
    """``x`` where ``x > 0``, else ``negative_slope * x``."""
    save_inputs = (0,)

    def forward(self, x, negative_slope):
        if x.dtype.kind in "cbiu":  # (PyTorch's kernel: floating types only)
            raise not_implemented_for("leaky_relu_cpu", x.dtype)
        self.negative_slope = negative_slope
        # half precision: the product in float32, rounded once (PyTorch's CPU kernel)
        w = x.astype(np.float32) if reduced_float(x.dtype) else x
        return np.where(x > 0, x, w * w.dtype.type(negative_slope)).astype(x.dtype,
                                                                                   copy=False)

    def backward(self, gy):
        x, = self.saved_tensors
        ns = self.negative_slope

        def slope(a):
            return np.where(a > 0, a.dtype.type(1), a.dtype.type(ns))
        # (lazily: unary imports this module)
        from ember.ops.unary import _piecewise_grad
        if reduced_float(x._data.dtype):
            # half precision: the product in float32, rounded once (PyTorch's kernel)
            return _piecewise_grad(gy.float(), x.float(), slope).to(gy.dtype), None
        return _piecewise_grad(gy, x, slope), None

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "leaky_relu"


class LeakyReluInplace(LeakyRelu):
    """``leaky_relu_``: the same op, PyTorch's in-place node."""
    _node_name = "LeakyReluBackward1"
    _op_name = "LeakyRelu"


def leaky_relu(input, negative_slope=0.01):
    """``x`` where ``x > 0``, else ``negative_slope * x`` (``F.leaky_relu``)."""
    return LeakyRelu.apply(input, negative_slope)


class Elu(Primitive):
    """``scale * x`` where ``x > 0``, else ``scale * alpha * (exp(input_scale * x) - 1)``
    (``F.elu``; ``selu`` is it with fixed constants). Half precision computes in float32
    and rounds once, as PyTorch's CPU kernel."""
    save_inputs = (0,)

    def forward(self, x, alpha, scale=1.0, input_scale=1.0):
        self.p = (alpha, scale, input_scale)
        w = x.astype(np.float32) if reduced_float(x.dtype) else x
        neg = np.expm1(np.where(w > 0, w.dtype.type(0), w) * input_scale) * alpha
        out = np.where(w > 0, w, neg)
        if scale != 1.0:
            out = out * scale
        return out.astype(x.dtype, copy=False)

    def backward(self, gy):
        import ember  # (lazily: ember imports this module)
        x, = self.saved_tensors
        alpha, scale, input_scale = self.p
        low = reduced_float(x._data.dtype)
        if low:
            # half precision: the slope and product in float32, rounded once (PyTorch's)
            x, gy_low, gy = x.float(), gy, gy.float()
        zero = ember.zeros((), dtype=x.dtype, device=x.device)
        xn = ember.where(x > 0, zero, x)   # no exp of a large input in the unused branch
        neg = (xn * input_scale).exp() * (alpha * scale * input_scale)
        d = ember.where(x > 0, ember.full((), scale, dtype=x.dtype, device=x.device), neg)
        gx = gy * d
        return (gx.to(gy_low.dtype) if low else gx), None, None, None

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "elu"


class EluInplace(Elu):
    """``elu_``/``selu_``: the same op, PyTorch's in-place node."""
    _node_name = "EluBackward1"
    _op_name = "Elu"


class Celu(Elu):
    """``F.celu``: :class:`Elu` with ``input_scale = 1 / alpha`` (PyTorch's own node)."""

    def forward(self, x, alpha):
        return Elu.forward(self, x, alpha, 1.0, 1.0 / alpha)

    def backward(self, gy):
        return Elu.backward(self, gy)[:2]

    torchscript = "celu"


class CeluInplace(Celu):
    """``celu_``: the same op, PyTorch's in-place node."""
    _node_name = "CeluBackward1"
    _op_name = "Celu"


class Threshold(Primitive):
    """``value`` where ``x <= threshold``, else ``x`` (NaN stays NaN); the gradient passes
    wherever ``x <= threshold`` is false, NaN included (``F.threshold``)."""
    save_inputs = (0,)

    def forward(self, x, threshold, value):
        self.threshold = threshold
        return np.where(x <= threshold, x.dtype.type(value), x).astype(x.dtype,
                                                                              copy=False)

    def backward(self, gy):
        x, = self.saved_tensors
        th = self.threshold

        def slope(a):
            # PyTorch zeroes the gradient where x <= threshold: NaN passes it through
            return (~(a <= th)).astype(a.dtype)
        from ember.ops.unary import _piecewise_grad  # (lazily: unary imports this module)
        return _piecewise_grad(gy, x, slope), None, None

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "threshold"


class ThresholdInplace(Threshold):
    """``threshold_``: the same op, PyTorch's in-place node."""
    _node_name = "ThresholdBackward1"
    _op_name = "Threshold"


class Softplus(Primitive):
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``.

    One op (not a chain of exp, log1p and where) so that exporters write it as one
    node, as PyTorch's do. Half precision computes in float32 and rounds once."""
    save_inputs = (0,)

    def forward(self, x, beta, threshold):
        if x.dtype.kind != "f" and not reduced_float(x.dtype):
            raise not_implemented_for("softplus_cpu", x.dtype)
        self.beta, self.threshold = beta, threshold
        wide = x.astype(np.float32) if reduced_float(x.dtype) else x
        z = wide * wide.dtype.type(beta)
        big = z > threshold
        with np.errstate(over="ignore"):
            soft = np.log1p(np.exp(np.where(big, wide.dtype.type(0), z)))
        if beta != 1:
            soft = soft / wide.dtype.type(beta)
        return np.where(big, wide, soft).astype(x.dtype, copy=False)

    def backward(self, gy):
        x, = self.saved_tensors
        wide = x.float() if x.dtype.itemsize < 4 else x
        z = wide * self.beta
        s = z.sigmoid()
        # at and past the threshold the slope is a constant to a second derivative (torch's)
        slope = where(z < self.threshold, s, s.detach().masked_fill(z > self.threshold, 1.0))
        if slope.dtype != gy.dtype:
            # half precision: the product in float32 too, rounded once (PyTorch's kernel)
            return (gy.float() * slope).to(gy.dtype), None, None
        return gy * slope, None, None

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    torchscript = "softplus"


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``
    (``F.softplus``)."""
    return Softplus.apply(input, beta, threshold)
