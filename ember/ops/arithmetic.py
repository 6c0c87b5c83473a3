"""Elementwise arithmetic: add, sub, mul, div with their scalar, scaled and reversed
forms, and the operand helpers the other binary families share.

Each primitive's forward works on arrays and its backward on Tensors; gradients
of broadcast inputs are summed back to shape by the engine, never here. Tensor methods
and operators are bound in :mod:`ember.ops.elementwise`.
"""

import numpy as np

from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.autograd.saved import _read_saved, _saved_inputs
from ember.backend import threads as _threads
from ember.ops import _batch, _grad_arrays, _jvp
from ember.ops import product_saves as _product_saves
from ember.ops._util import (
    check_number_fits,
    cj,
    default_float_np,
    not_implemented_for,
    number_operand,
    opmath_number,
    promote_arrays,
    reduced_float,
    tensor_operands,
    with_out,
    write_out,
)

_ndarray = np.ndarray


def _float_result(a, b):
    """Operands of true division: integers divide as the default float dtype."""
    a, b = promote_arrays(a, b)
    ka = a.dtype.kind if type(a) is np.ndarray or hasattr(a, "dtype") else \
        ("f" if type(a) is float or type(a) is complex else "i")
    kb = b.dtype.kind if type(b) is np.ndarray or hasattr(b, "dtype") else \
        ("f" if type(b) is float or type(b) is complex else "i")
    if ka not in "fcV" and kb not in "fcV":
        f = default_float_np()
        a = a.astype(f) if hasattr(a, "astype") else float(a)
        b = b.astype(f) if hasattr(b, "astype") else float(b)
    return a, b


def _reduced_scalar(a, b):
    """``b`` as the number PyTorch's CPU kernels compute ``op(a, b)`` with in float32,
    where ``a`` is a float16/bfloat16 array and ``b`` a Python number or a 0-d array
    (whose own dtype does not change the result's); None otherwise."""
    if type(a) is not _ndarray or not reduced_float(a.dtype):
        return None
    tb = type(b)
    if tb is float or tb is int:
        return b
    if tb is _ndarray and not b.ndim and a.ndim and \
            (b.dtype.kind in "biuf" or reduced_float(b.dtype)):
        return b[()]
    return None


def _is_bool(x):
    return x.dtype.kind == "b" if hasattr(x, "dtype") else type(x) is bool


def _operand_array(x):
    return x._data if isinstance(x, Tensor) else x


def _refuse_bool_sub(a, b):
    """PyTorch's error for a subtraction with a bool operand (checked before promotion,
    which would turn a bool tensor into the other's dtype); its words differ when both
    are bool."""
    if _is_bool(a) and _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(a) or _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not "
                           "supported. If you are trying to invert a mask, use the `~` or "
                           "`logical_not()` operator instead.")


def _kind(x):
    if hasattr(x, "dtype"):
        return x.dtype.kind
    return "b" if type(x) is bool else "f" if isinstance(x, float) else \
        "c" if isinstance(x, complex) else "i"


def _check_divisor(kernel, a, b):
    """Integer division by zero raises (PyTorch's ZeroDivisionError); bool has no kernel."""
    k = _kind(a) if hasattr(a, "dtype") or not hasattr(b, "dtype") else _kind(b)
    if k == "b" and _kind(b) == "b" and _kind(a) == "b":
        raise not_implemented_for(kernel, np.bool_)
    if k in "iu":
        zero = b == 0  # no np.asarray: CuPy arrays stay on their device
        if zero.any() if hasattr(zero, "any") else zero:
            raise RuntimeError("ZeroDivisionError")



def _operand(x):
    return isinstance(x, (Tensor, int, float, bool, complex, np.generic, np.ndarray)) or \
        hasattr(x, "__cuda_array_interface__")


def _checked(op, symbol):
    """A dunder that raises Python's TypeError for operands that are not numbers or arrays."""
    def f(self, other):
        if not _operand(other):
            raise TypeError(f"unsupported operand type(s) for {symbol}: 'Tensor' and "
                            f"'{type(other).__name__}'")
        return op(self, other)
    return f


class Add(Primitive):
    broadcasts = True
    batch = _batch.elementwise
    onnx = "Add"
    complex32_math = True

    def forward(self, a, b):
        if type(a) is not _ndarray or type(b) is not _ndarray or a.dtype != b.dtype:
            # (two arrays of one dtype, the common case, need no promotion)
            a, b = promote_arrays(a, b)
            if type(b) is float or type(b) is int:
                b = number_operand(a, b)
        elif _threads.MANY and (a.size >= _threads.SPLIT_ELEMENTS or
                                b.size >= _threads.SPLIT_ELEMENTS):
            r = _threads.binary(np.add, a, b)  # large: in blocks on the intra-op threads
            if r is not None:
                return r
        return a + b

    def backward(self, gy):
        return gy, gy

    # No ``_array_grads``: an array form would hand one array to both inputs, and two
    # leaves reached that way would get two Tensors on the same memory as ``.grad`` (the
    # engine tells them apart by Tensor, ``_accumulate``'s ``seen``). The engine's one
    # Tensor around the array, passed to both, is what keeps them apart.

    def jvp(self, ta, tb):
        return ta if tb is None else tb if ta is None else ta + tb

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``; before broadcast reduction)."""
        g = grads[0]
        return [g, g]

    def forward_out(self, a, b, out):
        """``forward`` written into ``out(0, shape, dtype)`` (the compile plan's buffers;
        two floating arrays of one dtype, or one and a Python number)."""
        return _binary_out(np.add, a, b, out)

    fused = "{0} + {1}"  # one element, for the compile plan's fused loops


class AddScalar(Add):
    """``add.Scalar``: a tensor plus a Python number, the node PyTorch's own composites
    record (``AddBackward1``, one edge); ``x + 1.0`` from Python stays :class:`Add`."""
    _node_name = "AddBackward1"
    _op_name = "Add"   # the same op: Add's spellings write it
    broadcasts = False


class AddScaled(Primitive):
    """``a + alpha * b``."""
    broadcasts = True
    _node_name = "AddBackward0"
    batch = _batch.elementwise
    complex32_math = True

    def forward(self, a, b, alpha):
        a, b = promote_arrays(a, b)
        self.alpha = alpha
        k = _kind(a) if hasattr(a, "dtype") else _kind(b)
        if isinstance(alpha, bool) and k != "b":
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
        if isinstance(alpha, float) and k in "iub":
            raise RuntimeError("For integral input tensors, argument alpha must not be a floating "
                               "point number.")
        if k == "b":
            return np.logical_or(a, np.logical_and(b, bool(alpha)))
        dt = getattr(a, "dtype", None)
        wider = _WIDER.get(dt)
        if dt in _ALPHA_CHECKED or reduced_float(dt):
            check_number_fits(alpha, dt)  # (PyTorch converts alpha to the result's type)
        if reduced_float(dt):
            wider = np.float32  # bfloat16 as float16
            if type(b) in (float, int):
                b = _to_reduced(b, dt)  # a number other is the dtype's value, like alpha
        if wider is not None and isinstance(alpha, (int, float)) and hasattr(b, "dtype"):
            # PyTorch casts alpha to the result dtype and, for float32, computes a fused
            # multiply-add (one rounding; the same bits as float64 arithmetic rounded
            # once), for float16 and bfloat16 in float32
            if wider is np.float32:
                return _add_scaled_reduced(a, b, float(_to_reduced(alpha, dt)))
            al = float(dt.type(alpha))
            return (a.astype(wider) + al * b.astype(wider)).astype(a.dtype)
        return a + alpha * b

    def backward(self, gy):
        return gy, gy * self.alpha, None

    def jvp(self, ta, tb, _):
        tb = None if tb is None else tb * self.alpha
        return ta if tb is None else tb if ta is None else ta + tb


_WIDER = {np.dtype(np.float32): np.float64, np.dtype(np.float16): np.float32}
# the dtypes whose range an alpha can exceed (float16 and bfloat16: ``reduced_float``)
_ALPHA_CHECKED = frozenset((np.dtype(np.float32), np.dtype(np.complex64)))


def _to_reduced(x, dt):
    """The Python number ``x`` as a 0-d array of the float16/bfloat16 dtype ``dt``,
    converted through float32 as PyTorch converts it."""
    with np.errstate(over="ignore"):
        return np.asarray(np.float32(x)).astype(dt)


# elements per step of PyTorch's float16/bfloat16 ``add(alpha=)`` vector loop: 32 on
# its AVX2 kernels (two 16-lane vectors; measured on a Zen 3 machine) and on the
# AVX-512 machine ember's tests were first written on
_HALF_STEP = 32


def _add_scaled_reduced(a, b, alpha):
    """``a + alpha * b`` for float16/bfloat16 arrays (``alpha`` already the dtype's
    value), as PyTorch's CPU loop computes it: in float32, rounded once, by its vector
    kernel; the elements its scalar loop takes (past the last whole vector step of each
    inner run or thread's chunk, or all where the operands cannot be vectorised) round
    ``alpha * b`` to the dtype before the sum."""
    dt, f = a.dtype, np.float32
    if type(a) is not _ndarray or type(b) is not _ndarray:  # CuPy: one rounding throughout
        return (a.astype(f) + f(alpha) * b.astype(f)).astype(dt)
    from ember.ops._pow_kernels import _flat, _iteration, _threads, vector_mask
    shape = np.broadcast_shapes(a.shape, b.shape)
    perm, inner, vec = _iteration([a, b], shape)
    n = int(np.prod(shape, dtype=np.int64))
    # (_HALF_STEP elements per step of the vector loop)
    mask = vector_mask(n, inner, vec, _HALF_STEP, _threads())
    af = _flat(a, shape, perm).astype(f)
    p = f(alpha) * _flat(b, shape, perm).astype(f)
    out = af + p
    if not mask.all():
        out = np.where(mask, out, af + p.astype(dt).astype(f))
    out = out.astype(dt)
    return out.reshape([shape[d] for d in perm]).transpose(np.argsort(perm))


class Sub(Primitive):
    broadcasts = True
    batch = _batch.elementwise
    onnx = "Sub"
    complex32_math = True

    def forward(self, a, b):
        if type(a) is _ndarray and type(b) is _ndarray and a.dtype == b.dtype and \
                a.dtype.kind != "b":
            # the common case: nothing to promote, no bool to refuse
            if _threads.MANY and (a.size >= _threads.SPLIT_ELEMENTS or
                                  b.size >= _threads.SPLIT_ELEMENTS):
                r = _threads.binary(np.subtract, a, b)
                if r is not None:
                    return r
            return a - b
        _refuse_bool_sub(a, b)
        a, b = promote_arrays(a, b)
        if type(b) is float or type(b) is int:
            b = number_operand(a, b)
        return a - b

    def backward(self, gy):
        if self._edges[1] is None:
            return gy, None
        g = _array(gy)  # on the array when that is all ``-gy`` would do
        return gy, -gy if g is None else _wrap(np.negative(g))

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``)."""
        return gy, None if self._edges[1] is None else np.negative(g)

    def jvp(self, ta, tb):
        if tb is None:
            return ta
        return -tb if ta is None else ta - tb

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``; before broadcast reduction)."""
        g = grads[0]
        if self._edges[1] is None:
            return [g, None]
        return [g, np.negative(g, out=None if out is None else out(1, g.shape, g.dtype))]

    def forward_out(self, a, b, out):
        """``forward`` written into ``out(0, shape, dtype)`` (the compile plan's buffers;
        two floating arrays of one dtype, or one and a Python number)."""
        return _binary_out(np.subtract, a, b, out)

    fused = "{0} - {1}"  # one element, for the compile plan's fused loops


class Mul(Primitive):
    broadcasts = True
    save_inputs = (0, 1)
    # under saved-tensor hooks, each factor is packed only where the other one needs a
    # gradient (PyTorch's rule; ``x * 2`` packs nothing): ``product_saves``
    _pack_saved = _product_saves.pack_crossed
    _crossed = (1, 0)

    def forward(self, a, b):
        if type(a) is not _ndarray or type(b) is not _ndarray or a.dtype != b.dtype:
            # (two arrays of one dtype, the common case, need no promotion)
            if type(b) is _ndarray and not b.ndim:
                z = _reduced_scalar(a, b)  # a 0-d array beside float16: computed as a number
                if z is not None:
                    return opmath_number(np.multiply, a, z)
            a, b = promote_arrays(a, b)
            if type(b) is float or type(b) is int:
                b = number_operand(a, b)
                if type(b) is not _ndarray and reduced_float(getattr(a, "dtype", None)):
                    return opmath_number(np.multiply, a, b)
            elif (type(a) is float or type(a) is int) and \
                    reduced_float(getattr(b, "dtype", None)):
                return opmath_number(np.multiply, b, a)  # ``2.5 * x`` in a formula
        elif _threads.MANY and (a.size >= _threads.SPLIT_ELEMENTS or
                                b.size >= _threads.SPLIT_ELEMENTS):
            r = _threads.binary(np.multiply, a, b)
            if r is not None:
                return r
        return a * b

    def backward(self, gy):
        a, b = _read_saved(self)  # (``saved_tensors``, read by the node itself)
        e = self._edges
        g = _array(gy)  # on the arrays when that is all the Tensor ops would do
        ga = gb = None
        if e[0] is not None:
            ga = None if g is None else _times(g, b)
            if ga is None:
                ga = gy * cj(b)
        if e[1] is not None:
            gb = None if g is None else _times(g, a)
            if gb is None:
                gb = gy * cj(a)
        return ga, gb

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``)."""
        saved = _saved_inputs(self)
        if saved is None:
            return None
        a, b = saved
        e = self._edges
        ga = gb = None
        if e[0] is not None:
            if type(b) is float:
                ga = _mul_fw(None, g, b)  # ``gy * 2.5``: Mul's number path
            else:
                d = _same(b, g)
                if d is None:
                    return None
                ga = g * d
        if e[1] is not None:
            d = _same(a, g)
            if d is None:
                return None
            gb = g * d
        return ga, gb

    jvp = _jvp.multilinear(0, 1)
    batch = _batch.elementwise
    complex32_math = True
    onnx = "Mul"

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``; real operands, before broadcast reduction)."""
        g = grads[0]
        a, b = inputs
        res = [None, None]
        for i, other in ((0, b), (1, a)):
            if self._edges[i] is None:
                continue
            if out is None:
                res[i] = g * other
                continue
            o = getattr(other, "shape", g.shape)  # a Python number: g's shape
            shape = g.shape if g.shape == o else np.broadcast_shapes(g.shape, o)
            res[i] = np.multiply(g, other, out=out(i, shape, g.dtype))
        return res

    def forward_out(self, a, b, out):
        """``forward`` written into ``out(0, shape, dtype)`` (the compile plan's buffers;
        two floating arrays of one dtype, or one and a Python number)."""
        return _binary_out(np.multiply, a, b, out, self)

    fused = "{0} * {1}"  # one element, for the compile plan's fused loops


class MulScalar(Mul):
    """``mul.Scalar``: a tensor times a Python number, the node PyTorch's own composites
    record (``MulBackward1``, one edge); ``x * 2.0`` from Python stays :class:`Mul`."""
    _node_name = "MulBackward1"
    _op_name = "Mul"   # the same op: Mul's spellings write it
    broadcasts = False


class SubScalar(Sub):
    """``sub.Scalar``: a tensor minus a Python number, as PyTorch's own composites record
    it (``SubBackward1``, one edge); ``x - 2.0`` from Python stays :class:`Sub`."""
    _node_name = "SubBackward1"
    _op_name = "Sub"
    broadcasts = False


class Div(Primitive):
    broadcasts = True
    save_inputs = (0, 1)

    def _pack_saved(self):
        """``Node._pack_saved`` on what PyTorch's node keeps: the dividend only where the
        divisor needs a gradient (only that gradient reads it; ``x / 3`` packs
        nothing)."""
        saved = self._saved
        if type(saved) is list and len(saved) == 2 and self._edges[1] is None:
            saved[0] = _product_saves.NOT_SAVED
        Primitive._pack_saved(self)

    def forward(self, a, b):
        if type(a) is _ndarray and a.dtype.kind == "f":
            # the common cases: nothing to promote
            if type(b) is float:
                z = number_operand(a, b)
                if type(z) is _ndarray or not reduced_float(a.dtype):
                    return a / z
                return opmath_number(np.divide, a, b)
            if type(b) is _ndarray and b.dtype == a.dtype:
                if _threads.MANY and a.size >= _threads.SPLIT_ELEMENTS:
                    r = _threads.binary(np.divide, a, b)
                    if r is not None:
                        return r
                return a / b
        if type(b) is _ndarray and not b.ndim:
            z = _reduced_scalar(a, b)  # a 0-d array beside float16: computed as a number
            if z is not None:
                return opmath_number(np.divide, a, z)
        a, b = _float_result(a, b)
        if type(b) is float or type(b) is int:
            b = number_operand(a, b)
            if type(b) is not _ndarray and reduced_float(getattr(a, "dtype", None)):
                return opmath_number(np.divide, a, b)
        return a / b

    def backward(self, gy):
        a, b = _read_saved(self)  # (``saved_tensors``, read by the node itself)
        e = self._edges
        g = _array(gy)  # on the arrays when that is all the Tensor ops would do
        ga = gb = None
        if e[0] is not None:
            if g is not None:
                if type(b) is float:
                    ga = _wrap(_div_fw(None, g, b))  # ``gy / 3.0``: Div's number path
                else:
                    d = _same(b, g)
                    if d is not None:
                        ga = _wrap(g / d)
            if ga is None:
                ga = gy / cj(b)
        if e[1] is not None:
            # -gy * (a / b) / b, in torch's order: a / b first, so that b * b never
            # overflows and the two parts of x / f(x)'s gradient cancel exactly where
            # they should
            if g is not None:
                d = _same(b, g)
                c = None if d is None else _same(a, g)
                if c is not None:
                    gb = _wrap(np.negative(g) * (c / d / d))
            if gb is None:
                gb = -gy * cj(a / b / b)
        return ga, gb

    def _array_grads(self, gy, g):
        """``backward`` on the gradient's array (``Node._array_grads``)."""
        saved = _saved_inputs(self)
        if saved is None:
            return None
        a, b = saved
        e = self._edges
        ga = gb = None
        if e[0] is not None:
            if type(b) is float:
                ga = _div_fw(None, g, b)
            else:
                d = _same(b, g)
                if d is None:
                    return None
                ga = g / d
        if e[1] is not None:
            d = _same(b, g)
            c = None if d is None else _same(a, g)
            if c is None:
                return None
            gb = np.negative(g) * (c / d / d)
        return ga, gb

    jvp = _jvp.diagonal
    batch = _batch.elementwise
    onnx = "Div"

    def vjp(self, grads, inputs, outputs, out=None):
        """Array gradients (``Primitive.vjp``; real operands, before broadcast reduction)."""
        g = grads[0]
        a, b = inputs
        e = self._edges
        ga = g / b if e[0] is not None else None
        gb = -g * (a / b / b) if e[1] is not None else None  # backward's order
        return [ga, gb]

    def forward_out(self, a, b, out):
        """``forward`` written into ``out(0, shape, dtype)`` (the compile plan's buffers;
        two floating arrays of one dtype, or one and a Python number)."""
        return _binary_out(np.divide, a, b, out, self)

    fused = "{0} / {1}"  # one element, for the compile plan's fused loops


class DivScalar(Div):
    """``div.Scalar``: a tensor divided by a Python number, the node PyTorch's own
    composites record (``DivBackward1``, one edge); ``x / 2.0`` from Python stays
    :class:`Div`."""
    _node_name = "DivBackward1"
    _op_name = "Div"   # the same op: Div's spellings write it
    broadcasts = False


# backward formulas on arrays where that is all their Tensor ops would do (``_grad_arrays``)
_array = _grad_arrays.array
_same = _grad_arrays.operand
_times = _grad_arrays.times
_wrap = _grad_arrays.wrap
_div_fw = Div.forward  # (read nothing from their node: called with None)
_mul_fw = Mul.forward


# PyTorch's nodes for subtraction with a scale or reversed operands: the same arithmetic
# as ``AddScaled``/``Sub`` on (other, input), listing the inputs in PyTorch's order
class SubScaled(AddScaled):
    _node_name = "SubBackward0"
    _op_name = "AddScaled"


class RsubScaled(AddScaled):
    _node_name = "RsubBackward0"
    _op_name = "AddScaled"
    _edge_inputs = (1, 0)


class Rsub(Sub):
    _node_name = "RsubBackward0"
    _op_name = "Sub"
    _edge_inputs = (1, 0)


class RsubScalar(Sub):
    _node_name = "RsubBackward1"  # ``number - tensor``: PyTorch's Scalar overload
    _op_name = "Sub"
    _edge_inputs = (1,)


def _rdiv(self, other):
    """``other / self`` for a number ``other``: the reciprocal times ``other``, as
    PyTorch computes it (its node is a ``MulBackward0``)."""
    from ember.ops.unary import reciprocal
    return _mul(reciprocal(self), other)


def _reduced_number_out(op, a, b, out):
    """``op.forward(a, b)`` written into ``out(0, shape, dtype)`` where a float16/bfloat16
    array meets a Python number (computed in float32, as ``forward`` does); else None."""
    arr = a if type(a) is _ndarray else b
    if not reduced_float(getattr(arr, "dtype", None)):
        return None
    r = op.forward(a, b)
    o = out(0, r.shape, r.dtype)
    o[...] = r
    return o


def _binary_out(ufunc, a, b, out, op=None):
    """``ufunc(a, b)`` written into ``out(0, shape, dtype)``: two floating arrays of one
    dtype, or one and a Python number (NumPy casts the number to the array's dtype, as
    the operators do; with ``op``, a float16/bfloat16 array and a number go through
    :func:`_reduced_number_out`, as ``op.forward`` computes them)."""
    if op is not None and (type(a) is not np.ndarray or type(b) is not np.ndarray):
        r = _reduced_number_out(op, a, b, out)
        if r is not None:
            return r
    if type(b) is not np.ndarray:
        t = a
    elif type(a) is not np.ndarray:
        t = b
    else:
        t = a if a.shape == b.shape else None
    shape = t.shape if t is not None else np.broadcast_shapes(a.shape, b.shape)
    return ufunc(a, b, out=out(0, shape, (a if t is None else t).dtype))


# ----- public functions ------------------------------------------------------------------
_add = Add.binary_function()
_sub = Sub.binary_function()
_mul = Mul.binary_function()
_div = Div.binary_function()


_NUMBERS = frozenset((bool, int, float, complex))


def _numbers_wrapped(input, other):
    """``input`` as PyTorch's arithmetic functions take it when both operands are Python
    numbers (``torch.add(2.5, 1.5)``): a 0-d tensor of its default dtype, so that the
    result is a float32 tensor computed in float32 for floats (int64 for ints, bool for
    bools, complex64 for a complex), not NumPy's float64."""
    if type(input) in _NUMBERS and type(other) in _NUMBERS:
        from ember._factory import tensor
        return tensor(input)
    return input


# add/sub/mul/div write out= themselves: with_out's extra call costs 10-20% of a small op
def add(input, other, *, alpha=1, out=None):
    """``input + alpha * other``, broadcasting, with PyTorch's type promotion."""
    input = _numbers_wrapped(input, other)
    if type(alpha) is int and alpha == 1:
        result = _add(input, other)
    else:
        result = AddScaled.apply(input, other, alpha)
    return result if out is None else write_out(result, out, "add", (input, other))


def sub(input, other, *, alpha=1, out=None):
    """``input - alpha * other``."""
    input = _numbers_wrapped(input, other)
    if type(alpha) is int and alpha == 1:
        result = _sub(input, other)
    else:
        _refuse_bool_sub(_operand_array(input), _operand_array(other))
        result = SubScaled.apply(input, other, -alpha)
    return result if out is None else write_out(result, out, "sub", (input, other))


subtract = sub


def mul(input, other, *, out=None):
    """Elementwise product."""
    result = _mul(_numbers_wrapped(input, other), other)
    return result if out is None else write_out(result, out, "mul", (input, other))


multiply = mul


def div(input, other, *, rounding_mode=None, out=None):
    """True division (integers give floats), or rounded with ``'trunc'`` or ``'floor'``."""
    input = _numbers_wrapped(input, other)
    if rounding_mode is None:
        result = _div(input, other)
    elif rounding_mode == "floor":
        from ember.ops.division import DivFloor
        result = DivFloor.apply(input, other)
    elif rounding_mode == "trunc":
        from ember.ops.division import TruncDivide
        result = TruncDivide.apply(input, other)
    else:
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    return result if out is None else write_out(result, out, "div", (input, other))


divide = div



@with_out
def true_divide(dividend, divisor, *, out=None):
    """True division."""
    return Div.apply(_numbers_wrapped(dividend, divisor), divisor)


def rsub(input, other, *, alpha=1):
    """``other - alpha * input`` (subtraction with the operands reversed)."""
    if not isinstance(input, Tensor):
        tensor_operands("rsub", input, other, "other")
    if isinstance(other, Tensor):
        if type(alpha) is int and alpha == 1:
            return Rsub.apply(other, input)
        _refuse_bool_sub(_operand_array(input), _operand_array(other))
        return RsubScaled.apply(other, input, -alpha)
    if alpha != 1:
        return other - input * alpha
    return RsubScalar.apply(other, input)


def _rsub_scalar(self, other):
    """``other - self`` for a number ``other`` (the reflected ``-``)."""
    return RsubScalar.apply(other, self)


