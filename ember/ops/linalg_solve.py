"""Inverses, determinants, solves and the matrix exponential.

Forward passes use ``numpy.linalg`` (which broadcasts over batch dims); every
backward is written in ember Tensor ops, so higher derivatives work. The formulas
follow PyTorch's ``FunctionsManual.cpp`` for real inputs.
"""
import math

import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import dtypes as _dtypes
from ember.backend import lapack as _lapack
from ember.ops import _batch
from ember.ops._einsum import _tname
from ember.ops._linalg_util import (
    LinAlgError,
    _check_square,
    _conj,
    _eye,
    _mh,
    _needed,
    _results,
    _SavesOutputs,
    _singular_error,
    _tri_mask,
    _zero_pivot,
)
from ember.ops.composite_node import one_node
from ember.ops.linalg import _write_out

__all__ = ["inverse", "det", "logdet", "slogdet", "matrix_exp"]


# ----- inverse, determinant ----------------------------------------------------------------
class Inv(Primitive):
    _node_name = "LinalgInvExBackward0"
    save_output = True
    batch = _batch.passthrough
    torchscript = "linalg_inv"

    def forward(self, a):
        try:
            return _lapack.linalg.inv(a)
        except np.linalg.LinAlgError:
            raise _singular_error("linalg.inv", a) from None

    def backward(self, gy):
        inv, = self.saved_tensors
        t = _mh(inv)
        return -t.matmul(gy).matmul(t)

    def jvp(self, t):
        y = self.fw_output
        return -(y @ t @ y)


def inv(A, *, out=None):
    """The inverse of a square matrix (or of each in a batch).

    Raises ``ember.linalg.LinAlgError`` when a matrix is singular.
    """
    _check_square("linalg.inv", A)
    return _write_out(Inv.apply(A), out)


def inverse(input, *, out=None):
    """The inverse of a square matrix (``torch.inverse``, alias of ``torch.linalg.inv``)."""
    return inv(input, out=out)


def inv_ex(A, *, check_errors=False, out=None):
    """``(inverse, info)``: ``info`` is 0 where the matrix was invertible, else the
    (1-based) index of the first zero pivot, whose matrix's inverse is left as nan."""
    _check_square("linalg.inv_ex", A)
    if out is None and _mode_active[0] and (m := _mode_recorder((A,))) is not None:
        # one node: ``info`` and a singular matrix's NaNs are found on the values (a
        # capture would keep the example's)
        return m.composite_locals("linalg_inv_ex", inv_ex, locals())
    batch = tuple(A.shape[:-2])
    try:
        res = Inv.apply(A)
        info = np.zeros(batch, dtype=np.int32)
    except LinAlgError:
        if check_errors:
            raise
        flat = np.asarray(A._data).reshape((-1,) + tuple(A.shape[-2:]))
        invs, info = [], []
        for m in flat:
            try:
                invs.append(_lapack.linalg.inv(m))
                info.append(0)
            except np.linalg.LinAlgError:
                invs.append(np.full(m.shape, np.nan, dtype=m.dtype))
                info.append(_zero_pivot(m))
        info = np.array(info, dtype=np.int32).reshape(batch)
        res = _make(array_module(A._data).asarray(np.stack(invs).reshape(A._data.shape)), False)
    return _results("linalg_inv_ex", (res, _make(array_module(A._data).asarray(info), False)),
                    out)


class Det(Primitive):
    _node_name = "LinalgDetBackward0"
    save_inputs = (0,)
    save_output = True
    batch = _batch.passthrough
    onnx = "Det"
    torchscript = "linalg_det"

    def forward(self, a):
        return _lapack.linalg.det(a)

    def backward(self, gy):
        a, d = self.saved_tensors
        if not (d._data == 0).any() and np.isfinite(d._data).all():
            try:
                return (gy * _conj(d)).unsqueeze(-1).unsqueeze(-1) * _mh(inv(a))
            except LinAlgError:
                pass  # singular to working precision although det != 0
        # a singular matrix: the cofactor matrix from the SVD, as PyTorch does (imported
        # here: the decompositions import this module's solves)
        from ember.ops.linalg_decomp import svd_linalg
        U, S, Vh = svd_linalg(a, full_matrices=False)
        alpha = _conj(det(U) * det(Vh))
        n = S._data.shape[-1]
        prods = [math.prod([S[..., j] for j in range(n) if j != i], start=S[..., 0] * 0 + 1)
                 for i in range(n)]
        D = _stack_last(prods) * (alpha * gy).unsqueeze(-1)
        return (U * D.unsqueeze(-2)).matmul(Vh)


def _stack_last(ts):
    """Stack tensors of equal shape along a new last dim, differentiably."""
    n = len(ts)
    out = None
    for i, t in enumerate(ts):
        onehot = np.zeros(n, dtype=t._data.dtype)
        onehot[i] = 1
        term = t.unsqueeze(-1) * _make(array_module(t._data).asarray(onehot), False)
        out = term if out is None else out + term
    return out


def det(A, *, out=None):
    """The determinant of a square matrix (or of each in a batch)."""
    _check_square("linalg.det", A)
    return _write_out(Det.apply(A), out)


class Slogdet(_SavesOutputs):
    _node_name = "LinalgSlogdetBackward0"
    n_outputs = 2
    save_inputs = (0,)
    saved_outputs = (0,)
    batch = _batch.passthrough

    def forward(self, a):
        return _lapack.linalg.slogdet(a)

    def backward(self, gsign, glogabs):
        a, sign = self.saved_tensors[:2]
        g = glogabs
        if a.is_complex():
            # the sign moves with the phase of the determinant: d sign = i sign Im(tr(A^-1 dA))
            g = g.to(a.dtype)
            if _needed(gsign):
                g = g - (gsign.conj() * sign).imag * 1j
        return g.unsqueeze(-1).unsqueeze(-1) * _mh(inv(a))


def slogdet(A, *, out=None):
    """``(sign, logabsdet)`` of the determinant; ``sign`` is 0 for a singular matrix."""
    _check_square("linalg.slogdet", A)
    return _results("slogdet", Slogdet.apply(A), out)


def slogdet_linalg(A, *, out=None):
    """``torch.linalg.slogdet``: ``(sign, logabsdet)`` of the determinant."""
    _check_square("linalg.slogdet", A)
    return _results("linalg_slogdet", Slogdet.apply(A), out)


def logdet(input):
    """``log(det(input))``: nan for a negative determinant, -inf for a singular matrix."""
    _check_square("logdet", input)
    sign, logabs = Slogdet.apply(input)
    if input.is_complex():  # log det = log|det| + i arg(det), the phase differentiable too
        return logabs + sign.log()
    # PyTorch's: NaN where the determinant is negative (no gradient there)
    from ember.ops.elementwise import where
    return where(sign.detach() == -1, math.nan, logabs)


# ----- solve -----------------------------------------------------------------------------
class Solve(Primitive):
    """``X = A^-1 B`` for matrices ``B``; batch dims broadcast."""
    _node_name = "LinalgSolveExBackward0"
    broadcasts = True
    save_inputs = (0,)
    save_output = True
    batch = _batch.elementwise

    def forward(self, a, b):
        try:
            return _lapack.linalg.solve(a, b)
        except np.linalg.LinAlgError:
            raise LinAlgError("torch.linalg.solve: The solver failed because the input matrix "
                              "is singular.") from None

    def backward(self, gx):
        a, x = self.saved_tensors
        gb = _solve(_mh(a), gx)
        ga = -gb.matmul(_mh(x)) if self._edges[0] is not None else None
        return ga, gb


def _solve(a, b):
    return Solve.apply(a, b)


def _solve_composite(A, B, *, left=True, out=None):
    """Whether ``solve`` is a composite of ember's (vectors, ``left=False``) that PyTorch
    runs as its one node."""
    return not left or isinstance(B, Tensor) and isinstance(A, Tensor) and (
        B.dim() == 1 or B.dim() == A.dim() - 1 and B.shape == A.shape[:-1])


@one_node("LinalgSolveExBackward0", 2, when=_solve_composite)
def solve(A, B, *, left=True, out=None):
    """The solution ``X`` of ``A @ X = B`` (or ``X @ A = B`` with ``left=False``).

    ``B`` is a batch of vectors when it is 1-D or has the shape ``A.shape[:-1]``;
    batch dims broadcast.
    """
    _check_square("linalg.solve", A)
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A "
                           f"of type {_tname(A._data.dtype)} and B of type "
                           f"{_tname(B._data.dtype)} instead")
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and B.shape == A.shape[:-1])
    if vector and not left:
        raise RuntimeError("linalg.solve: Vector broadcasting of the left hand side is not "
                           "supported for left=False. In this case linalg.solve is equivalent "
                           "to B / A.squeeze(-1)")
    Bm = B.unsqueeze(-1) if vector else B
    if not left:
        A, Bm = A.mT, Bm.mT
    n = A.shape[-1]
    if Bm.dim() < 2 or Bm.shape[-2] != n:
        bs = (B.shape[-1], 1) if vector else tuple(B.shape[-2:])
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                           f"{'x'.join(map(str, bs))})")
    try:
        np.broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2]))
    except ValueError:
        raise RuntimeError(f"linalg.solve: Incompatible batch shapes {list(A.shape[:-2])} and "
                           f"{list(Bm.shape[:-2])}") from None
    X = _solve(A, Bm)
    if not left:
        X = X.mT
    return _write_out(X.squeeze(-1) if vector else X, out)


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """``(solve(A, B), info)``; raises like ``solve`` on a singular matrix."""
    X = solve(A, B, left=left)
    info = np.zeros(tuple(A.shape[:-2]), dtype=np.int32)
    return _results("linalg_solve_ex", (X, _make(array_module(A._data).asarray(info), False)),
                    out)


@one_node("LinalgSolveTriangularBackward0", 2)
def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """Solve ``A X = B`` (or ``X A = B``) reading only the upper or lower triangle of ``A``."""
    _check_square("linalg.solve_triangular", A)
    n = A.shape[-1]
    tri = A * _tri_mask(A, n, 1 if unitriangular else 0, upper) if upper else \
        A * _tri_mask(A, n, -1 if unitriangular else 0, upper)
    if unitriangular:
        tri = tri + _eye(A, n)
    return _write_out(solve(tri, B, left=left), out)


# ----- matrix exponential ----------------------------------------------------------------
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)


@one_node("LinalgMatrixExpBackward0", 1)
def matrix_exp(A):
    """The matrix exponential ``sum_k A^k / k!`` of a square matrix (or batch).

    Computed by scaling and squaring with a degree-13 Pade approximant (Higham 2005),
    written in ember ops, so it differentiates (to any order) like any composite.
    float16/bfloat16 are computed in float32 and rounded once (the approximant's
    coefficients, up to 6.5e16, overflow float16; PyTorch's half result overflows to inf
    for matrices of norm near 1).
    """
    if isinstance(A, Tensor) and A.dtype in (_dtypes.float16, _dtypes.bfloat16):
        low = A.dtype
        A = A.float()
        _check_square("linalg.matrix_exp", A)
        return _matrix_exp(A).to(low)
    _check_square("linalg.matrix_exp", A)
    if _mode_active[0] and (m := _mode_recorder((A,))) is not None:
        # one node: the scaling is chosen from the matrix's norm (a capture would keep it)
        return m.composite_locals("linalg_matrix_exp", matrix_exp, locals())
    return _matrix_exp(A)


def _matrix_exp(A):
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    norm1 = float(abs(A._data).sum(-2).max()) if A.numel() else 0.0  # any device
    s = max(0, int(math.ceil(math.log2(norm1 / 5.371920351148152)))) if norm1 > 0 else 0
    X = A / (2 ** s) if s else A
    b = _PADE13
    eye = _eye(A, n)
    X2 = X.matmul(X)
    X4 = X2.matmul(X2)
    X6 = X4.matmul(X2)
    U = X.matmul(X6.matmul(b[13] * X6 + b[11] * X4 + b[9] * X2) + b[7] * X6 + b[5] * X4 +
                 b[3] * X2 + b[1] * eye)
    V = X6.matmul(b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 + \
        b[0] * eye
    R = _solve(V - U, V + U)
    for _ in range(s):
        R = R.matmul(R)
    return R


Tensor.det = det
Tensor.logdet = logdet
Tensor.slogdet = slogdet
Tensor.inverse = inverse
Tensor.matrix_exp = matrix_exp
