"""Inverses, determinants, solves, decompositions and the vector norm primitive.

Forward passes use ``numpy.linalg`` (which broadcasts over batch dims); every
backward is written in ember Tensor ops, so higher derivatives work. The formulas
follow PyTorch's ``FunctionsManual.cpp`` for real inputs.
"""
import math

import numpy as np

from ember._tensor import Tensor, _make
from ember.autograd.node import Primitive, _SavedOutput
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._einsum import DiagEmbed, _tname
from ember.ops.composite_node import one_node
from ember.ops.linalg import _write_out
from ember.ops.reduction import _return_type, return_types

__all__ = ["inverse", "det", "logdet", "slogdet", "cholesky", "cholesky_solve",
           "cholesky_inverse", "pinverse", "svd", "qr", "matrix_exp"]


class LinAlgError(RuntimeError):
    """A linear algebra routine failed on its input (``torch.linalg.LinAlgError``)."""


def _named(name, fields):
    """A ``torch.return_types.<name>`` namedtuple, also found as ``ember.return_types.<name>``."""
    cls = _return_type(name, fields)
    cls.__module__ = __name__
    cls.__qualname__ = "_rt_" + name
    globals()["_rt_" + name] = cls  # a module-level name, so the tuples pickle
    setattr(return_types, name, cls)
    return cls


_rt = {n: _named(n, f) for n, f in [
    ("linalg_slogdet", "sign logabsdet"), ("slogdet", "sign logabsdet"),
    ("linalg_inv_ex", "inverse info"), ("linalg_solve_ex", "result info"),
    ("linalg_cholesky_ex", "L info"), ("linalg_eigh", "eigenvalues eigenvectors"),
    ("linalg_svd", "U S Vh"), ("svd", "U S V"), ("linalg_qr", "Q R"), ("qr", "Q R")]}


def _results(name, results, out):
    """The named result tuple; with ``out`` (a tuple of tensors) written into those."""
    if out is not None:
        if len(out) != len(results):
            raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(results)} Tensors")
        short = name.removeprefix("_").removesuffix("_with_info")  # torch.lu's is _lu_with_info
        results = [_write_out(r, o, short) for r, o in zip(results, out)]
    return _rt[name](*results)


# ----- checks ----------------------------------------------------------------------------
# the ops (by the name their checks use) whose complex path is built; the others refuse
# complex input with an error naming them rather than computing something else
COMPLEX_OPS = frozenset({
    "linalg.inv", "linalg.inv_ex", "linalg.det", "linalg.slogdet", "logdet", "linalg.solve",
    "linalg.solve_triangular", "linalg.cholesky", "cholesky", "cholesky_inverse", "linalg.eigh",
    "linalg.eigvalsh", "linalg.svd", "linalg.svdvals", "svd", "linalg.qr", "qr", "linalg.pinv",
    "linalg.matrix_rank", "linalg.cond", "linalg.lstsq", "geqrf", "linalg.matrix_exp",
    "linalg.lu_factor_ex", "linalg.lu_factor", "linalg.lu", "linalg.lu_solve"})


def _conj(t):
    return t.conj() if t.is_complex() else t


def _check_gauge(a, b, message):
    """Raises when a loss depends on the free phase of complex singular/eigen vectors."""
    if not np.allclose(np.asarray(a), np.asarray(b), rtol=1e-2, atol=1e-2):
        raise RuntimeError(message)


def _mh(t):
    """The conjugate transpose of a complex tensor, the transpose of a real one."""
    return t.mT.conj() if t.is_complex() else t.mT


def _check_float(name, A):
    if not isinstance(A, Tensor):
        raise TypeError(f"{name.replace('.', '_')}(): argument 'A' (position 1) must be Tensor, "
                        f"not {type(A).__name__}")
    dt = A._data.dtype
    if dt.kind == "c" and name.removeprefix("torch.") not in COMPLEX_OPS:
        raise NotImplementedError(f"{name}: complex input ({_tname(dt)}) is not supported yet "
                                  "in ember")
    if dt.names:  # complex32, a structured pair of float16 parts
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got ComplexHalf")
    if dt.kind not in "fc":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {_tname(dt)}")
    if dt.itemsize < 4:
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {_tname(dt)}")


def _check_square(name, A, float_only=True):
    if not isinstance(A, Tensor):
        _check_float(name, A)
    if A.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    m, n = A.shape[-2:]
    if m != n:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {m} by "
                           f"{n} matrices")
    if float_only:
        _check_float(name, A)


def _check_matrix(name, A):
    if not isinstance(A, Tensor):
        _check_float(name, A)
    if A.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    _check_float(name, A)


def _batch_prefix(a, idx):
    return f"(Batch element {idx}): " if a.ndim > 2 else ""


def _first_failure(a, test):
    """Index of the first matrix of the batch ``a`` for which ``test`` fails."""
    flat = np.asarray(a).reshape((-1,) + a.shape[-2:])
    for i, m in enumerate(flat):
        try:
            test(m)
        except np.linalg.LinAlgError:
            return i, m
    return 0, flat[0]


def _zero_pivot(m):
    """LAPACK ``getrf``'s info: the 1-based index of the first exactly zero pivot."""
    a = np.array(m, dtype=np.float64)
    n = a.shape[0]
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            return k + 1
        a[[k, p]] = a[[p, k]]
        a[k + 1:, k:] -= np.outer(a[k + 1:, k] / a[k, k], a[k, k:])
    return n


def _singular_error(name, a):
    i, m = _first_failure(a, np.linalg.inv)
    return LinAlgError(f"{name}: {_batch_prefix(a, i)}The diagonal element {_zero_pivot(m)} is "
                       "zero, the inversion could not be completed because the input matrix is "
                       "singular.")


def _eye(like, n):
    return _make(array_module(like._data).eye(n, dtype=like._data.dtype), False)


def _tri_mask(like, n, k, upper):
    """A constant 0/1 matrix of ``like``'s dtype: the triangle on and above/below diag ``k``."""
    xp = array_module(like._data)
    ones = xp.ones((n, n), dtype=like._data.dtype)
    return _make(xp.triu(ones, k) if upper else xp.tril(ones, k), False)


def _needed(g):
    """Whether an output gradient contributes: nonzero, or part of a graph being built."""
    return g is not None and (g._requires_grad or bool(g._data.any()))


class _SavesOutputs(Primitive):
    """A primitive with several outputs whose backward reads them (``saved_outputs``).

    ``apply`` keeps them after the saved inputs in ``saved_tensors``, checked for
    in-place modification and linked to this node, so double backward
    differentiates through them.
    """
    saved_outputs = ()

    @classmethod
    def apply(cls, *args, **params):
        outs = super().apply(*args, **params)
        node = next((o.grad_fn for o in outs if o.grad_fn is not None), None)
        if isinstance(node, cls):
            node._saved = list(node._saved or []) + [
                _SavedOutput(outs[nr]._data, outs[nr]._vc, outs[nr]._requires_grad, nr)
                for nr in cls.saved_outputs]
        return outs


# ----- inverse, determinant ----------------------------------------------------------------
class Inv(Primitive):
    _node_name = "LinalgInvExBackward0"
    save_output = True
    batch = _batch.passthrough
    torchscript = "linalg_inv"

    def forward(self, a):
        try:
            return np.linalg.inv(a)
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
                invs.append(np.linalg.inv(m))
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
        return np.linalg.det(a)

    def backward(self, gy):
        a, d = self.saved_tensors
        if not (d._data == 0).any() and np.isfinite(d._data).all():
            try:
                return (gy * _conj(d)).unsqueeze(-1).unsqueeze(-1) * _mh(inv(a))
            except LinAlgError:
                pass  # singular to working precision although det != 0
        # a singular matrix: the cofactor matrix from the SVD, as PyTorch does
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
        return np.linalg.slogdet(a)

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
            return np.linalg.solve(a, b)
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


# ----- Cholesky ------------------------------------------------------------------------------
class Cholesky(Primitive):
    _node_name = "LinalgCholeskyExBackward0"
    save_output = True
    batch = _batch.passthrough

    def forward(self, a, upper):
        self.upper = upper
        try:
            L = np.linalg.cholesky(a)
        except np.linalg.LinAlgError:
            i, m = _first_failure(a, np.linalg.cholesky)
            order = next(k for k in range(1, m.shape[0] + 1)
                         if not _is_pd(m[:k, :k]))
            raise LinAlgError(f"linalg.cholesky: {_batch_prefix(a, i)}The factorization could "
                              f"not be completed because the input is not positive-definite "
                              f"(the leading minor of order {order} is not "
                              "positive-definite).") from None
        return np.swapaxes(L, -1, -2).conj().copy() if upper else L

    def backward(self, gL):
        L, = self.saved_tensors
        if self.upper:
            L, gL = _mh(L), _mh(gL)
        n = L._data.shape[-1]
        gA = _mh(L).matmul(gL) * _tri_mask(L, n, 0, False)
        gA = 0.5 * (gA + _mh(gA * _tri_mask(L, n, -1, False)))
        gA = _solve(_mh(L), gA)
        return _mh(_solve(_mh(L), _mh(gA))), None

    def jvp(self, ta, _):
        # dL = L Phi(L^-1 dA L^-H), Phi: the lower triangle with its diagonal halved
        y = self.fw_output
        L = y.mH if self.upper else y
        Li = Inv.apply(L)
        X = Li @ ta @ Li.mH
        phi = X.tril() - X.diagonal(0, -2, -1).diag_embed() * 0.5
        dL = L @ phi
        return dL.mH if self.upper else dL


def _is_pd(m):
    try:
        np.linalg.cholesky(m)
        return True
    except np.linalg.LinAlgError:
        return False


def cholesky_linalg(A, *, upper=False, out=None):
    """The Cholesky factor ``L`` (lower) of a symmetric positive-definite ``A = L L^T``.

    Only the lower triangle of ``A`` is read. Raises ``LinAlgError`` when ``A`` is not
    positive-definite.
    """
    _check_square("linalg.cholesky", A)
    return _write_out(Cholesky.apply(A, bool(upper)), out)


class CholeskyLegacy(Cholesky):
    """``torch.cholesky``'s node (``CholeskyBackward0``): ``linalg.cholesky``'s kernel."""
    _node_name = "CholeskyBackward0"
    _op_name = "Cholesky"   # the same op: its spellings write it


def cholesky(input, upper=False, *, out=None):
    """``torch.cholesky``: the Cholesky factor, upper if ``upper``."""
    _check_square("cholesky", input)
    # torch.cholesky casts into out (torch.linalg.cholesky wants out's dtype exact)
    return _write_out(CholeskyLegacy.apply(input, bool(upper)), out, "cholesky")


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """``(L, info)``; raises like ``cholesky`` when ``A`` is not positive-definite."""
    L = cholesky_linalg(A, upper=upper)
    info = _make(array_module(A._data).asarray(np.zeros(tuple(A.shape[:-2]), np.int32)))
    return _results("linalg_cholesky_ex", (L, info), out)


def _from_cholesky(L, upper, name):
    if L.dim() < 2 or L.shape[-1] != L.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{tuple(L.shape[-2:])} matrices")
    return _mh(L).matmul(L) if upper else L.matmul(_mh(L))


@one_node("CholeskySolveBackward0", 2)
def cholesky_solve(B, L, upper=False, *, out=None):
    """The solution of ``A X = B`` given the Cholesky factor ``L`` of ``A = L L^T``."""
    if B.dtype != L.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{_tname(B._data.dtype)} and A of type {_tname(L._data.dtype)} "
                           "instead.")
    return _write_out(solve(_from_cholesky(L, upper, "cholesky_solve"), B), out, "cholesky_solve")


@one_node("CholeskyInverseBackward0", 1)
def cholesky_inverse(L, upper=False, *, out=None):
    """The inverse of ``A = L L^T`` (or ``U^T U``) from its Cholesky factor."""
    _check_float("cholesky_inverse", L)
    return _write_out(inv(_from_cholesky(L, upper, "cholesky_inverse")), out, "cholesky_inverse")


# ----- eigh, svd, qr -------------------------------------------------------------------------
class Eigh(_SavesOutputs):
    _node_name = "LinalgEighBackward0"
    n_outputs = 2
    saved_outputs = (0, 1)
    batch = _batch.passthrough

    def forward(self, a, uplo):
        return tuple(np.linalg.eigh(a, UPLO=uplo))

    def backward(self, gL, gV):
        L, V = self.saved_tensors
        if not _needed(gV):
            return V.matmul(gL.unsqueeze(-1) * _mh(V)), None
        VhgV = _mh(V).matmul(gV)
        if V.is_complex():
            _check_gauge(VhgV.detach()._data.diagonal(0, -2, -1).imag, 0,
                         "linalg_eigh_backward: The eigenvectors in the complex case are "
                         "specified up to multiplication by e^{i phi}. The specified loss "
                         "function depends on this quantity, so it is ill-defined.")
        VhgV = 0.5 * (VhgV - _mh(VhgV))
        E = L.unsqueeze(-2) - L.unsqueeze(-1) + _eye(L, L._data.shape[-1])
        ret = VhgV / E
        if _needed(gL):
            ret = ret + DiagEmbed.apply(gL, gL._data.shape + gL._data.shape[-1:],
                                        gL._data.ndim - 1, gL._data.ndim)
        return V.matmul(ret.matmul(_mh(V))), None


def eigh(A, UPLO="L", *, out=None):
    """``(eigenvalues, eigenvectors)`` of a symmetric matrix, eigenvalues ascending.

    Only the triangle named by ``UPLO`` is read. Eigenvectors are defined up to sign.
    """
    _check_square("linalg.eigh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return _results("linalg_eigh", Eigh.apply(A, UPLO), out)


def eigvalsh(A, UPLO="L", *, out=None):
    """Eigenvalues of a symmetric matrix, ascending."""
    _check_square("linalg.eigvalsh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return _write_out(Eigh.apply(A, UPLO)[0], out)


class Svd(_SavesOutputs):
    _node_name = "LinalgSvdBackward0"
    n_outputs = 3
    saved_outputs = (0, 1, 2)
    batch = _batch.passthrough

    def forward(self, a, full_matrices):
        self.full = full_matrices
        U, S, Vh = np.linalg.svd(a, full_matrices=full_matrices)
        return U, S, Vh

    def backward(self, gU, gS, gVh):
        U, S, Vh = self.saved_tensors
        if self.full:
            # the extra columns of U and rows of Vh are not unique: PyTorch drops them
            k = S._data.shape[-1]
            U, Vh, gU, gVh = U[..., :k], Vh[..., :k, :], gU[..., :k], gVh[..., :k, :]
        return _svd_backward(gU, gS, gVh, U, S, Vh), None


def _svd_backward(gU, gS, gVh, U, S, Vh):
    m, n = U._data.shape[-2], Vh._data.shape[-1]
    use_u, use_v = _needed(gU), _needed(gVh)
    if not use_u and not use_v:
        gS = gS.to(U.dtype) if U.is_complex() else gS
        if m >= n:
            return U.matmul(gS.unsqueeze(-1) * Vh)
        return (U * gS.unsqueeze(-2)).matmul(Vh)
    k = S._data.shape[-1]
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + _eye(S, k)
    gA = None
    cplx = U.is_complex()
    if use_u:
        UhgU = _mh(U).matmul(gU)
        gA = (UhgU - _mh(UhgU)) * S.unsqueeze(-2)
    if use_v:
        VhgV = Vh.matmul(_mh(gVh))
        term = S.unsqueeze(-1) * (VhgV - _mh(VhgV))
        gA = term if gA is None else gA + term
    if cplx:
        # a loss must not see the common phase of a pair of singular vectors
        zero = np.zeros(S._data.shape, S._data.dtype)
        imu = UhgU.detach()._data.diagonal(0, -2, -1).imag if use_u else zero
        imv = VhgV.detach()._data.diagonal(0, -2, -1).imag if use_v else zero
        _check_gauge(imu, -imv, "svd_backward: The singular vectors in the complex case are "
                     "specified up to multiplication by e^{i phi}. The specified loss function "
                     "depends on this phase term, making it ill-defined.")
    gA = gA / E
    if _needed(gS):
        gA = gA + DiagEmbed.apply(gS.to(gA.dtype) if cplx else gS, gS._data.shape + (k,),
                                  gS._data.ndim - 1, gS._data.ndim)
    if cplx and use_u:
        # the phase of u_i is fixed by v_i: i Im(u_i^H gu_i) / s_i on the diagonal
        d = UhgU.diagonal(0, -2, -1).imag / S * 1j
        gA = gA + DiagEmbed.apply(d, d._data.shape + (k,), d._data.ndim - 1, d._data.ndim)
    if m > n and use_u:
        gA = U.matmul(gA)
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - U.matmul(_mh(U).matmul(gUSinv))
        return gA.matmul(Vh)
    if m < n and use_v:
        gA = gA.matmul(Vh)
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA + SinvgVh - SinvgVh.matmul(_mh(Vh)).matmul(Vh)
        return U.matmul(gA)
    return U.matmul(gA.matmul(Vh)) if m >= n else U.matmul(gA).matmul(Vh)


def svd_linalg(A, full_matrices=True, *, driver=None, out=None):
    """``(U, S, Vh)`` with ``A = U @ diag(S) @ Vh``, singular values descending.

    Singular vectors are defined up to sign; gradients through them need distinct
    singular values (as in PyTorch).
    """
    _check_matrix("linalg.svd", A)
    return _results("linalg_svd", Svd.apply(A, bool(full_matrices)), out)


def svdvals(A, *, driver=None, out=None):
    """The singular values of ``A``, descending."""
    _check_matrix("linalg.svdvals", A)
    return _write_out(Svd.apply(A, False)[1], out)


def svd(input, some=True, compute_uv=True, *, out=None):
    """``torch.svd``: ``(U, S, V)`` (note: ``V``, not ``Vh``), reduced when ``some``."""
    _check_matrix("svd", input)
    U, S, Vh = Svd.apply(input, not some)
    if not compute_uv:
        zu = _make(array_module(input._data).zeros_like(U._data), False)
        zv = _make(array_module(input._data).zeros_like(Vh._data), False)
        return _results("svd", (zu, S, zv.mT), out)
    return _results("svd", (U, S, _mh(Vh)), out)


class Qr(_SavesOutputs):
    _node_name = "LinalgQrBackward0"
    n_outputs = 2
    saved_outputs = (0, 1)
    batch = _batch.passthrough

    def forward(self, a, mode):
        self.mode = mode
        if mode == "r":
            R = np.linalg.qr(a, mode="r")
            return array_module(a).zeros((0,), dtype=a.dtype), R
        Q, R = np.linalg.qr(a, mode=mode)
        return Q, R

    def backward(self, gQ, gR):
        if self.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed "
                               "when mode='r'. Please use linalg.qr(A, mode='reduced') if you "
                               "are going to differentiate through linalg.qr.")
        Q, R = self.saved_tensors
        m, n = Q._data.shape[-2], R._data.shape[-1]
        if self.mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' "
                               "and nrows > ncols.")
        if m >= n:
            return _qr_backward_tall(gQ, gR, Q, R), None
        # A = Q [X | Y] with R = [U | V]: X = Q U is a square QR, Y = Q V
        U, V = R[..., :m], R[..., m:]
        gU, gV = gR[..., :m], gR[..., m:]
        gX = _qr_backward_tall(gQ + Q.matmul(V).matmul(_mh(gV)), gU, Q, U)
        gY = Q.matmul(gV)
        xp = array_module(Q._data)
        eye = xp.eye(n, dtype=Q._data.dtype)
        left, right = _make(eye[:m], False), _make(eye[m:], False)
        return gX.matmul(left) + gY.matmul(right), None


def _qr_backward_tall(gQ, gR, Q, R):
    """gA = (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q (m >= n)."""
    n = R._data.shape[-1]
    X = gR.matmul(_mh(R)) - _mh(Q).matmul(gQ)
    Xu = X * _tri_mask(X, n, 0, True)
    C = Xu + _mh(Xu * _tri_mask(X, n, 1, True))
    if X.is_complex():  # the diagonal of a Hermitian matrix: its real part
        d = Xu.diagonal(0, -2, -1)
        C = C - DiagEmbed.apply(d.imag * 1j, d._data.shape + (n,), d._data.ndim - 1,
                                d._data.ndim)
    return _mh(_solve(R, _mh(gQ + Q.matmul(C))))


def qr_linalg(A, mode="reduced", *, out=None):
    """``(Q, R)`` with ``A = Q @ R``; ``mode`` is ``'reduced'``, ``'complete'`` or ``'r'``."""
    _check_matrix("linalg.qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    return _results("linalg_qr", Qr.apply(A, mode), out)


def qr(input, some=True, *, out=None):
    """``torch.qr``: ``(Q, R)``, reduced when ``some``."""
    _check_matrix("qr", input)
    return _results("qr", Qr.apply(input, "reduced" if some else "complete"), out)


# ----- pseudo-inverse, rank ------------------------------------------------------------------
def _tol(x):
    if isinstance(x, Tensor):
        return x._data
    return x


def _cutoff(s, atol, rtol, shape):
    """PyTorch's threshold ``max(atol, rtol * smax)`` with its defaults."""
    if atol is None and rtol is None:
        rtol = np.finfo(s.dtype).eps * max(shape[-2:])
    if rtol is None:
        rtol = 0.0 if np.any(np.asarray(atol) > 0) else np.finfo(s.dtype).eps * max(shape[-2:])
    atol = 0.0 if atol is None else atol
    smax = s.max(-1, keepdims=True) if s.shape[-1] else np.zeros(s.shape[:-1] + (1,), s.dtype)
    return np.maximum(np.asarray(atol)[..., None] if np.ndim(atol) else atol,
                      (np.asarray(rtol)[..., None] if np.ndim(rtol) else rtol) * smax)


class Pinv(Primitive):
    _node_name = "LinalgPinvBackward0"
    save_inputs = (0,)
    save_output = True
    batch = _batch.passthrough

    def forward(self, a, atol, rtol, hermitian):
        if hermitian:
            w, V = np.linalg.eigh(a)
            cut = _cutoff(np.abs(w), atol, rtol, a.shape)
            winv = np.where(np.abs(w) > cut, 1 / np.where(w == 0, 1, w), 0).astype(w.dtype)
            return (V * winv[..., None, :]) @ np.swapaxes(V, -1, -2).conj()
        U, s, Vh = np.linalg.svd(a, full_matrices=False)
        cut = _cutoff(s, atol, rtol, a.shape)
        sinv = np.where(s > cut, 1 / np.where(s == 0, 1, s), 0).astype(s.dtype)
        return (np.swapaxes(Vh, -1, -2).conj() * sinv[..., None, :]) @ \
            np.swapaxes(U, -1, -2).conj()

    def backward(self, g):
        A, P = self.saved_tensors
        m, n = A._data.shape[-2:]
        Ph, gh = _mh(P), _mh(g)
        if m <= n:
            K = gh.matmul(P)
            KPh = K.matmul(Ph)
            gA = -_mh(P.matmul(K)) + KPh - A.matmul(P).matmul(KPh) + \
                Ph.matmul(P).matmul(gh - K.matmul(A))
        else:
            K = P.matmul(gh)
            PhK = Ph.matmul(K)
            gA = -_mh(K.matmul(P)) + (gh - A.matmul(K)).matmul(P).matmul(Ph) + PhK - \
                PhK.matmul(P).matmul(A)
        return gA, None, None, None


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The Moore-Penrose pseudo-inverse; singular values at most ``max(atol, rtol * smax)``
    count as zero (default ``rtol``: ``eps * max(m, n)``)."""
    _check_matrix("linalg.pinv", A)
    return _write_out(Pinv.apply(A, _tol(atol), _tol(rtol), bool(hermitian)), out, "pinv")


def pinverse(input, rcond=1e-15):
    """``torch.pinverse``: the pseudo-inverse with relative tolerance ``rcond``."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The number of singular values above ``max(atol, rtol * smax)`` (an int64 tensor)."""
    _check_matrix("linalg.matrix_rank", A)
    a = A._data
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    if hermitian:
        s = -np.sort(-s, axis=-1)
    cut = _cutoff(s, _tol(atol), _tol(rtol), a.shape)
    rank = (s > cut).sum(-1).astype(np.int64)
    return _write_out(_make(array_module(a).asarray(rank), False), out, "matrix_rank")


# ----- vector norm -------------------------------------------------------------------------
def _modulus(z):
    """``|z|`` of a complex array, correctly rounded for complex64 as PyTorch's (NumPy's
    single precision ``abs`` is an ulp off for about a third of values)."""
    if z.dtype == np.complex64:
        re, im = z.real.astype(np.float64), z.imag.astype(np.float64)
        return np.sqrt(re * re + im * im).astype(np.float32)
    return np.hypot(z.real, z.imag)


class VectorNorm(Primitive):
    """``sum(|x|^p)^(1/p)`` over ``axes`` (with the limits for p = 0 and +-inf)."""
    _node_name = "LinalgVectorNormBackward0"
    save_inputs = (0,)
    save_output = True
    batch = _batch.vector_norm
    complex32_math = True

    def forward(self, x, p, axes, keepdim):
        self.meta = (p, axes, keepdim, x.shape)
        if x.dtype.kind == "c":  # the norm of the moduli: a real result
            if p == 2:
                sq = x.real * x.real + x.imag * x.imag
                return np.sqrt(sq.sum(axis=axes, keepdims=keepdim))
            ax = _modulus(x)
        elif p == 2:
            return np.sqrt((x * x).sum(axis=axes, keepdims=keepdim))
        else:
            ax = np.abs(x)
        if p == 1:
            return ax.sum(axis=axes, keepdims=keepdim)
        if p == math.inf:
            return ax.max(axis=axes, keepdims=keepdim)
        if p == -math.inf:
            return ax.min(axis=axes, keepdims=keepdim)
        if p == 0:
            return (x != 0).sum(axis=axes, keepdims=keepdim).astype(ax.dtype)
        return ((ax ** p).sum(axis=axes, keepdims=keepdim)) ** (1.0 / p)

    def backward(self, g):
        x, norm = self.saved_tensors
        p, axes, keepdim, shape = self.meta
        if p == 0:
            return None, None, None, None
        if not keepdim and axes:
            kept = tuple(1 if i in axes else s for i, s in enumerate(shape))
            g, norm = g.reshape(kept), norm.reshape(kept)
        zero = norm == 0
        if p == 1:
            gx = x.sgn() * g
        elif p == 2:
            gx = g * (x / norm).masked_fill(zero, 0.0)
        elif math.isinf(p):
            # the positions of the extreme modulus, found with the forward's own modulus
            xa = _make(_modulus(x._data)) if x.is_complex() else x.abs()
            mask = (xa == norm).logical_or(xa.isnan())
            gx = x.sgn() * ((g / mask.sum(axes, keepdim=True)) * mask)
        elif p < 1:
            scaled = x.sgn() * x.abs().pow(p - 1).masked_fill(x == 0, 0.0)
            gx = scaled * g * norm.pow(1 - p)
        elif p < 2:
            gx = x.sgn() * x.abs().pow(p - 1) * (g / norm.pow(p - 1)).masked_fill(zero, 0.0)
        else:
            gx = x * x.abs().pow(p - 2) * (g / norm.pow(p - 1)).masked_fill(zero, 0.0)
        return gx, None, None, None

    def jvp(self, t, *_):
        g = None
        if t is not None and t.is_complex() and not self.fw_output.is_complex():
            # a real norm of complex x: dy = Re(sum(conj(g) t)), g the gradient of y
            # (its rows), which is 0 (not nan) at x = 0 as torch's subgradient
            from ember import ones_like
            g = _jvp.through_backward(self, 0, ones_like(self.fw_output).detach())
        if g is not None:
            d = (g.conj() * t).real
            axes, keepdim = self.meta[1], self.meta[2]
            if axes is None:
                return d.sum()
            return d if len(axes) == 0 else d.sum(tuple(axes), keepdim=keepdim)
        return _jvp.reduced(self, t, self.meta[1], self.meta[2])


Tensor.det = det
Tensor.logdet = logdet
Tensor.slogdet = slogdet
Tensor.inverse = inverse
Tensor.cholesky = cholesky
Tensor.pinverse = pinverse
Tensor.svd = svd
Tensor.qr = qr


# ----- matrix exponential ----------------------------------------------------------------
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)


@one_node("LinalgMatrixExpBackward0", 1)
def matrix_exp(A):
    """The matrix exponential ``sum_k A^k / k!`` of a square matrix (or batch).

    Computed by scaling and squaring with a degree-13 Pade approximant (Higham 2005),
    written in ember ops, so it differentiates (to any order) like any composite.
    """
    _check_square("linalg.matrix_exp", A)
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


Tensor.cholesky_solve = cholesky_solve
Tensor.cholesky_inverse = cholesky_inverse
Tensor.matrix_exp = matrix_exp
