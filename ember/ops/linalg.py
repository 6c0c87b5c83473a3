"""Linear algebra: matmul and its relatives, einsum, norms, inverse and determinant."""
import numpy as np

from ember._tensor import Tensor
from ember.autograd.node import Primitive

__all__ = ["matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger"]


def _check_dtypes(op, a, b):
    if a.dtype != b.dtype:
        from ember.backend.dtypes import FROM_NP
        raise RuntimeError(f"{op}: expected both operands to have the same dtype, but got "
                           f"{FROM_NP[a.dtype].name.capitalize()} and "
                           f"{FROM_NP[b.dtype].name.capitalize()}")


class MatMul(Primitive):
    """``a @ b`` with NumPy's (and PyTorch's) rules for 1-D and batched operands."""
    _node_name = "MmBackward0"
    save_inputs = (0, 1)

    def forward(self, a, b):
        _check_dtypes("matmul", a, b)
        if a.ndim == 0 or b.ndim == 0:
            raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                               f"{a.ndim}D and {b.ndim}D")
        try:
            return np.matmul(a, b)
        except ValueError:
            sa = "x".join(map(str, a.shape[-2:])) if a.ndim > 1 else str(a.shape[0])
            sb = "x".join(map(str, b.shape[-2:])) if b.ndim > 1 else str(b.shape[0])
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({sa} and {sb})") \
                from None

    def backward(self, gy):
        a, b = self.saved_tensors
        e = self._edges
        ga = gb = None
        a_nd, b_nd = a._data.ndim, b._data.ndim
        # 1-D operands are promoted to matrices for the formulas, then squeezed back
        a2 = a.unsqueeze(0) if a_nd == 1 else a
        b2 = b.unsqueeze(-1) if b_nd == 1 else b
        g2 = gy
        if a_nd == 1:
            g2 = g2.unsqueeze(-2)
        if b_nd == 1:
            g2 = g2.unsqueeze(-1)
        if e[0] is not None:
            ga = g2.matmul(b2.mT)
            if a_nd == 1:
                ga = ga.squeeze(-2)
            ga = _reduce_batch(ga, a._data.shape)
        if e[1] is not None:
            gb = a2.mT.matmul(g2)
            if b_nd == 1:
                gb = gb.squeeze(-1)
            gb = _reduce_batch(gb, b._data.shape)
        return ga, gb


def _reduce_batch(g, shape):
    if g._data.shape == shape:
        return g
    return g.sum_to_size(shape) if len(shape) == g._data.ndim else \
        g.sum(tuple(range(g._data.ndim - len(shape)))).sum_to_size(shape)


def matmul(input, other, *, out=None):
    """Matrix product with broadcasting over batch dims; 1-D operands act as vectors."""
    return MatMul.apply(input, other)


def mm(input, mat2, *, out=None):
    """Product of two matrices."""
    if input.dim() != 2 or mat2.dim() != 2:
        raise RuntimeError(f"self must be a matrix" if input.dim() != 2 else
                           "mat2 must be a matrix")
    return MatMul.apply(input, mat2)


def bmm(input, mat2, *, out=None):
    """Batched product of (b, n, m) and (b, m, p) tensors."""
    if input.dim() != 3 or mat2.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if input.dim() != 3 else
                           "batch2 must be a 3D tensor")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{input.shape[0]}, {input.shape[2]}] but got: "
                           f"[{mat2.shape[0]}, {mat2.shape[1]}].")
    return MatMul.apply(input, mat2)


def mv(input, vec, *, out=None):
    """Matrix-vector product."""
    if input.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.dim()}, "
                           f"{vec.dim()}")
    return MatMul.apply(input, vec)


def dot(input, other, *, out=None):
    """Dot product of two 1-D tensors."""
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D "
                           "tensors")
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and "
                           f"src [{other.shape[0]}] to have the same number of elements, but "
                           "got {input.shape[0]} and {other.shape[0]} elements respectively")
    return MatMul.apply(input, other)


vdot = dot


def inner(input, other, *, out=None):
    """Sum of products over the last dims."""
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    return matmul(input, other.unsqueeze(-1) if other.dim() == 1 else other.mT) \
        if other.dim() <= 2 else (input.unsqueeze(-2) * other).sum(-1)


def outer(input, vec2, *, out=None):
    """Outer product of two 1-D tensors."""
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer

Tensor.matmul = matmul
Tensor.mm = mm
Tensor.bmm = bmm
Tensor.mv = mv
Tensor.dot = dot
Tensor.inner = inner
Tensor.outer = outer
Tensor.ger = outer
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)
