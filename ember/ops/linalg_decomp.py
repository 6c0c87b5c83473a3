"""Decompositions (Cholesky, eigh, SVD, QR) and what the singular values give
(pseudo-inverse, rank).

Forward passes use ``numpy.linalg`` (which broadcasts over batch dims); every
backward is written in ember Tensor ops, so higher derivatives work. The formulas
follow PyTorch's ``FunctionsManual.cpp`` for real inputs.
"""
import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import lapack as _lapack
from ember.ops import _batch
from ember.ops._einsum import DiagEmbed, _tname
from ember.ops._linalg_util import (
    LinAlgError,
    _batch_prefix,
    _check_float,
    _check_gauge,
    _check_matrix,
    _check_square,
    _eye,
    _first_failure,
    _mh,
    _needed,
    _results,
    _SavesOutputs,
    _tri_mask,
)
from ember.ops.composite_node import one_node
from ember.ops.linalg import _write_out
from ember.ops.linalg_solve import Inv, _solve, inv, solve

__all__ = ["cholesky", "cholesky_solve", "cholesky_inverse", "pinverse", "svd", "qr"]


# ----- Cholesky ------------------------------------------------------------------------------
class Cholesky(Primitive):
    _node_name = "LinalgCholeskyExBackward0"
    save_output = True
    batch = _batch.passthrough

    def forward(self, a, upper):
        self.upper = upper
        try:
            L = _lapack.linalg.cholesky(a)
        except np.linalg.LinAlgError:
            i, m = _first_failure(a, _lapack.linalg.cholesky)
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
        _lapack.linalg.cholesky(m)
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
        return tuple(_lapack.linalg.eigh(a, UPLO=uplo))

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
        U, S, Vh = _lapack.linalg.svd(a, full_matrices=full_matrices)
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
            R = _lapack.linalg.qr(a, mode="r")
            return array_module(a).zeros((0,), dtype=a.dtype), R
        Q, R = _lapack.linalg.qr(a, mode=mode)
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
            w, V = _lapack.linalg.eigh(a)
            cut = _cutoff(np.abs(w), atol, rtol, a.shape)
            winv = np.where(np.abs(w) > cut, 1 / np.where(w == 0, 1, w), 0).astype(w.dtype)
            with _lapack.one_thread():  # the one-thread bits at any thread count
                return (V * winv[..., None, :]) @ np.swapaxes(V, -1, -2).conj()
        U, s, Vh = _lapack.linalg.svd(a, full_matrices=False)
        cut = _cutoff(s, atol, rtol, a.shape)
        sinv = np.where(s > cut, 1 / np.where(s == 0, 1, s), 0).astype(s.dtype)
        with _lapack.one_thread():
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
    if out is None and _mode_active[0] and (m := _mode_recorder((A, atol, rtol))) is not None:
        # one node: the rank is counted from the singular values (a capture would keep it)
        return m.composite_locals("linalg_matrix_rank", matrix_rank, locals())
    a = A._data
    s = np.abs(_lapack.linalg.eigvalsh(a)) if hermitian else \
        _lapack.linalg.svd(a, compute_uv=False)
    if hermitian:
        s = -np.sort(-s, axis=-1)
    cut = _cutoff(s, _tol(atol), _tol(rtol), a.shape)
    rank = (s > cut).sum(-1).astype(np.int64)
    return _write_out(_make(array_module(a).asarray(rank), False), out, "matrix_rank")


Tensor.cholesky = cholesky
Tensor.pinverse = pinverse
Tensor.svd = svd
Tensor.qr = qr
Tensor.cholesky_solve = cholesky_solve
Tensor.cholesky_inverse = cholesky_inverse
