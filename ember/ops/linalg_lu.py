"""LU factorization and what is built on it: ``linalg.lu_factor(_ex)``, ``linalg.lu``,
``lu_unpack``, ``linalg.lu_solve`` and the older ``torch.lu``/``lu_solve``/
``triangular_solve``, plus ``linalg.cond``, ``linalg.lstsq``, ``geqrf`` and ``ormqr``.

The factorization is one primitive (partial pivoting as LAPACK's ``getrf`` chooses its
pivots: the first largest entry of the column, ``|re| + |im|`` for complex); its
backward is written in ember ops. Everything else is a composite of differentiable
ember ops (triangular solves, matrix products), so it has no derivative code here.
"""
import math

import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import lapack as _lapack
from ember.ops import _batch, _linalg_util
from ember.ops._einsum import _tname
from ember.ops._linalg_util import (
    LinAlgError,
    _check_float,
    _check_matrix,
    _check_square,
    _named,
    _SavesOutputs,
)
from ember.ops.composite_node import compile_recorder
from ember.ops.linalg import _write_out
from ember.ops.linalg_decomp import pinv, svdvals
from ember.ops.linalg_solve import inv_ex, solve_triangular

__all__ = ["lu", "lu_unpack", "lu_solve", "triangular_solve", "geqrf", "ormqr"]

_rt = {n: _named(n, f) for n, f in [
    ("linalg_lu_factor", "LU pivots"), ("linalg_lu_factor_ex", "LU pivots info"),
    ("linalg_lu", "P L U"), ("lu_unpack", "P L U"), ("_lu_with_info", "LU pivots info"),
    ("triangular_solve", "solution cloned_coefficient"), ("geqrf", "a tau"),
    ("linalg_lstsq", "solution residuals rank singular_values")]}


def _results(name, results, out=None):
    return _linalg_util._results(name, results, out, _rt)


def _mH(t):
    return t.mT.conj() if t.is_complex() else t.mT


# ----- the factorization --------------------------------------------------------------------
def _getrf(a):
    """Partial-pivoting LU of every matrix in ``a`` (NumPy): packed LU, 1-based int32
    pivots and LAPACK's info (1-based index of the first zero pivot, 0 if none)."""
    a = np.array(a, copy=True)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    lu = a.reshape((math.prod(batch), m, n))
    piv = np.zeros((lu.shape[0], k), dtype=np.int32)
    info = np.zeros(lu.shape[0], dtype=np.int32)
    rows = np.arange(lu.shape[0])
    for j in range(k):
        col = lu[:, j:, j]
        size = np.abs(col.real) + np.abs(col.imag) if np.iscomplexobj(col) else np.abs(col)
        p = j + np.argmax(size, axis=1)
        piv[:, j] = p + 1
        lu[:, [j], :], lu[rows, p, :] = lu[rows, p, :][:, None, :], lu[:, j, :].copy()
        d = lu[:, j, j]
        zero = d == 0
        info[(info == 0) & zero] = j + 1
        safe = np.where(zero, 1, d)
        lu[:, j + 1:, j] = np.where(zero[:, None], lu[:, j + 1:, j], lu[:, j + 1:, j] /
                                    safe[:, None])
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    return lu.reshape(a.shape), piv.reshape(batch + (k,)), info.reshape(batch)


def _perm(piv, m):
    """The row order ``perm`` with ``P^T A = A[perm]`` from LAPACK pivots (NumPy)."""
    batch = piv.shape[:-1]
    piv = np.asarray(piv).reshape((math.prod(batch), piv.shape[-1])) - 1
    perm = np.tile(np.arange(m), (piv.shape[0], 1))
    rows = np.arange(piv.shape[0])
    for i in range(piv.shape[1]):
        p = piv[:, i]
        perm[rows, i], perm[rows, p] = perm[rows, p], perm[rows, i].copy()
    return perm.reshape(batch + (m,))


def _perm_matrix(piv, m, like):
    """The permutation matrix ``P`` (a constant tensor of ``like``'s dtype)."""
    pv = np.asarray(piv._data if isinstance(piv, Tensor) else piv)
    batch = pv.shape[:-1]
    perm = _perm(pv, m).reshape((math.prod(batch), m))
    P = np.zeros((perm.shape[0], m, m), dtype=like._data.dtype)
    b = np.arange(perm.shape[0])[:, None]
    P[b, perm, np.arange(m)[None, :]] = 1
    return _make(array_module(like._data).asarray(P.reshape(batch + (m, m))), False)


def _tril(x, k):
    return x.tril(k)


def _lu_backward(gLU, LU, piv):
    """The gradient of ``A`` from that of the packed ``LU`` (``A = P L U``)."""
    import ember
    m, n = LU.shape[-2:]
    k = min(m, n)
    P = _perm_matrix(piv, m, LU)
    L = _tril(LU[..., :, :k], -1) + ember.eye(m, k, dtype=LU.dtype)
    U = LU[..., :k, :].triu()
    gL = _tril(gLU[..., :, :k], -1)
    gU = gLU[..., :k, :].triu()
    L1, U1 = L[..., :k, :], U[..., :, :k]
    if m < n:   # wide: U = [U1 U2] and U2 = L^-1 P^T A2
        gU2 = gU[..., :, k:]
        gA2 = solve_triangular(_mH(L1), gU2, upper=True, unitriangular=True)
        gL = gL - _tril(gA2 @ _mH(U[..., :, k:]), -1)
    elif m > n:  # tall: L = [L1; L2] and L2 = A2 U^-1 (rows after P^T)
        gL2 = gL[..., k:, :]
        gA2 = solve_triangular(_mH(U1), gL2, upper=False, left=False)
        gU = gU - (_mH(L[..., k:, :]) @ gA2).triu()
    phi = _tril(_mH(L1) @ gL[..., :k, :], -1) + (gU[..., :, :k] @ _mH(U1)).triu()
    g = solve_triangular(_mH(L1), phi, upper=True, unitriangular=True)
    g = solve_triangular(_mH(U1), g, upper=False, left=False)
    if m < n:
        g = ember.cat([g, gA2], -1)
    elif m > n:
        g = ember.cat([g, gA2], -2)
    return P @ g


class LuFactorEx(_SavesOutputs):
    """``(LU, pivots, info)`` of ``A = P L U``; only ``LU`` is differentiable."""
    _node_name = "LinalgLuFactorExBackward0"
    n_outputs = 3
    differentiable_outputs = (0,)
    saved_outputs = (0, 1)
    batch = _batch.passthrough

    def forward(self, a):
        xp = array_module(a)
        lu, piv, info = _getrf(np.asarray(a) if xp is np else xp.asnumpy(a))
        return xp.asarray(lu), xp.asarray(piv), xp.asarray(info)

    def backward(self, gLU, gpiv, ginfo):
        LU, piv = self.saved_tensors
        return _lu_backward(gLU, LU, piv)


def _check_pivot(name, pivot):
    if not pivot:
        raise RuntimeError(f"{name}: LU without pivoting is not implemented on the CPU")


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """``(LU, pivots, info)``: the packed LU factorization with partial pivoting, LAPACK's
    1-based int32 pivots and ``info`` (> 0 where a pivot is exactly zero)."""
    _check_matrix("torch.linalg.lu_factor_ex", A)
    _check_pivot("linalg.lu_factor", pivot)
    if check_errors and out is None and (m := compile_recorder(A)) is not None:
        # its check reads info's values: one node for compile, checked at every replay
        return m.composite_locals("linalg_lu_factor_ex", lu_factor_ex, locals())
    LU, piv, info = LuFactorEx.apply(A)
    if check_errors and info._data.any():
        raise LinAlgError("torch.linalg.lu_factor_ex: The factorization could not be completed "
                          "because the input is not invertible.")
    return _results("linalg_lu_factor_ex", (LU, piv, info), out)


def lu_factor(A, *, pivot=True, out=None):
    """``(LU, pivots)`` of ``A = P L U``; raises when ``U`` has a zero on its diagonal."""
    _check_matrix("torch.linalg.lu_factor", A)
    if out is None and (m := compile_recorder(A)) is not None:
        # its check reads info's values: one node for compile, checked at every replay
        return m.composite_locals("linalg_lu_factor", lu_factor, locals())
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    bad = info._host()  # (read on the host: one int per matrix, also from a GPU)
    if bad.any():
        flat = bad.reshape(-1)
        i = int(np.flatnonzero(flat)[0])
        where = f"(Batch element {i}): " if bad.ndim else ""
        raise RuntimeError(f"torch.linalg.lu_factor: {where}U[{flat[i]},{flat[i]}] is zero and "
                           "using it on lu_solve would result in a division by zero. If you "
                           "still want to perform the factorization, consider calling "
                           "linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return _results("linalg_lu_factor", (LU, piv), out)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """``(P, L, U)`` from a packed LU and its pivots (``L`` unit lower, ``U`` upper).
    Differentiable in ``LU_data``; unpacked parts not asked for are empty tensors."""
    import ember
    if LU_data.dim() < 2:
        raise RuntimeError("torch.lu_unpack: Expected tensor with 2 or more dimensions. Got "
                           f"size: {list(LU_data.shape)} instead")
    if LU_pivots._data.dtype != np.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor "
                           "of torch.int32 dtype. Note: this function is intended to be used "
                           "with the output produced by torch.linalg.lu_factor")
    if out is None and _mode_active[0] and (m := _mode_recorder((LU_data, LU_pivots))) is not None:
        # one node: the permutation is built from the pivots' values (a capture would keep it)
        return m.composite_locals("lu_unpack", lu_unpack, locals())
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    empty = ember.empty(0, dtype=LU_data.dtype)
    if unpack_data:
        L = _tril(LU_data[..., :, :k], -1) + ember.eye(m, k, dtype=LU_data.dtype)
        U = LU_data[..., :k, :].triu()
    else:
        L = U = empty
    # only the first min(m, n) pivots are swaps (as torch reads them)
    P = _perm_matrix(LU_pivots._data[..., :k], m, LU_data) if unpack_pivots else empty
    return _results("lu_unpack", (P, L, U), out)


def linalg_lu(A, *, pivot=True, out=None):
    """``(P, L, U)`` with ``A = P @ L @ U`` (``torch.linalg.lu``)."""
    _check_matrix("torch.linalg.lu", A)
    LU, piv, _ = lu_factor_ex(A, pivot=pivot)
    return _results("linalg_lu", tuple(lu_unpack(LU, piv)), out)


def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """The solution ``X`` of ``A X = B`` (``X A = B`` with ``left=False``; ``A^H`` for ``A``
    with ``adjoint=True``) from ``A``'s ``lu_factor``. Differentiable in ``LU`` and ``B``."""
    _check_square("torch.linalg.lu_solve", LU)
    if B.dim() < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 "
                           "dimensions.")
    if LU.dtype != B.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found "
                           f"LU of type {_tname(LU._data.dtype)} and B of type "
                           f"{_tname(B._data.dtype)} instead")
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise RuntimeError("linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be the "
                           "same.")
    if out is None and _mode_active[0] and (m := _mode_recorder((LU, pivots, B))) is not None:
        # one node: the permutation is built from the pivots' values (a capture would keep it)
        return m.composite_locals("linalg_lu_solve", linalg_lu_solve, locals())
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return _write_out(_mH(linalg_lu_solve(LU, pivots, _mH(B), adjoint=not adjoint)), out)
    P = _perm_matrix(pivots, n, LU)
    if adjoint:   # A^H = U^H L^H P^T:  X = P L^-H U^-H B
        X = solve_triangular(_mH(LU), B, upper=False)
        X = solve_triangular(_mH(LU), X, upper=True, unitriangular=True)
        X = P @ X
    else:         # A = P L U:  X = U^-1 L^-1 P^T B
        X = solve_triangular(LU, P.mT @ B, upper=False, unitriangular=True)
        X = solve_triangular(LU, X, upper=True)
    return _write_out(X, out)


def lu(A, pivot=True, get_infos=False, out=None):
    """``torch.lu``: ``(LU, pivots)`` or, with ``get_infos``, ``(LU, pivots, infos)``."""
    if get_infos:
        return _results("_lu_with_info", tuple(lu_factor_ex(A, pivot=pivot)), out)
    if out is None and (m := compile_recorder(A)) is not None:
        # its check reads info's values: one node for compile, checked at every replay
        return m.composite_locals("lu", lu, locals())
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    if info._data.any():
        lu_factor(A, pivot=pivot)  # raises PyTorch's error naming the zero pivot
    res = (LU, piv)
    return tuple(_write_out(r, o) for r, o in zip(res, out)) if out is not None else res


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    """``torch.lu_solve(b, LU_data, LU_pivots)``: ``linalg.lu_solve(LU_data, LU_pivots, b)``."""
    return linalg_lu_solve(LU_data, LU_pivots, b, out=out)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """``(X, A.clone())`` with ``op(A) X = b`` for triangular ``A`` (``op`` the transpose
    when ``transpose``); batch dims broadcast."""
    import ember
    if b.dim() < 2 or A.dim() < 2:
        raise RuntimeError(f"torch.triangular_solve: The input tensor "
                           f"{'b' if b.dim() < 2 else 'A'} must have at least 2 dimensions.")
    if b.dtype != A.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{_tname(b._data.dtype)} and A of type {_tname(A._data.dtype)} "
                           "instead.")
    if out is None and _mode_active[0] and (m := _mode_recorder((b, A))) is not None:
        # one node: the batch is broadcast to sizes read here (a capture would keep the
        # example's)
        return m.composite_locals("triangular_solve", triangular_solve, locals())
    batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(b.shape[:-2])))
    Ab = A.expand(*batch, *A.shape[-2:])
    bb = b.expand(*batch, *b.shape[-2:])
    M = Ab.mT if transpose else Ab
    X = solve_triangular(M, bb, upper=upper != transpose, unitriangular=unitriangular)
    res = (X, ember.clone(Ab))
    return _results("triangular_solve", res, out)


# ----- condition number, least squares ------------------------------------------------------
def cond(A, p=None, *, out=None):
    """The condition number of ``A`` in the matrix norm ``p`` (default 2: the ratio of
    the largest to the smallest singular value). For ``'fro'``, ``'nuc'``, +-1 and +-inf
    it is ``norm(A) * norm(inv(A))``, ``inf`` for singular matrices."""
    import ember
    _check_matrix("linalg.cond", A)
    if p in (None, 2, -2):
        if A.numel() == 0:  # torch's value for an empty matrix (no singular values)
            real = A.abs().dtype if A.is_complex() else A.dtype
            return _write_out(ember.zeros(A.shape[:-2], dtype=real), out, "cond")
        s = svdvals(A)
        big, small = s[..., 0], s[..., -1]
        res = big / small if p in (None, 2) else small / big
        return _write_out(res, out, "cond")
    if p not in ("fro", "nuc", 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    _check_square("linalg.cond", A)
    real = A.abs().dtype if A.is_complex() else A.dtype
    if A.numel() == 0:
        return _write_out(ember.zeros(A.shape[:-2], dtype=real), out, "cond")
    Ainv, info = inv_ex(A)
    res = ember.linalg.matrix_norm(A, p) * ember.linalg.matrix_norm(Ainv, p)
    bad = _make(array_module(info._data).asarray(info._data != 0), False)
    res = ember.where(bad, ember.full((), math.inf, dtype=real), res)
    return _write_out(res, out, "cond")


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None, out=None):
    """``(solution, residuals, rank, singular_values)`` of ``min ||A X - B||``.

    The solution is ``pinv(A) @ B`` (the minimum-norm least-squares solution, what
    LAPACK's drivers return for full-rank inputs), so it is differentiable. As in
    PyTorch, ``rank`` is filled for every driver but ``'gels'``, ``singular_values`` for
    ``'gelsd'``/``'gelss'``, and ``residuals`` (squared column norms of ``A X - B``) when
    ``m > n``, ``A`` has full rank and the driver is not ``'gelsy'``.
    """
    import ember
    _check_matrix("torch.linalg.lstsq", A)
    _check_float("torch.linalg.lstsq", B)
    if A.dtype != B.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same "
                           f"dtype, but got input's dtype {_tname(A._data.dtype)} and other's "
                           f"dtype {_tname(B._data.dtype)}")
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of "
                           "(gels, gelsy, gelsd, gelss)")
    if driver not in (None, "gelsy") and _mode_active[0] and \
            (mr := _mode_recorder()) is not None:
        # whether residuals come back follows the rank (the values) and m > n (a size a
        # graph serving several sizes would not check)
        mr.unrecordable(f"linalg.lstsq with driver={driver!r} (its residuals follow the "
                        "rank of A)")
    m, n = A.shape[-2:]
    vector = B.dim() == A.dim() - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != m:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    real = A.abs().dtype if A.is_complex() else A.dtype
    eps = float(np.finfo(np.dtype(real.np if hasattr(real, "np") else "float64")).eps)
    rc = eps * max(m, n) if rcond is None or rcond < 0 else float(rcond)
    s = svdvals(A.detach()) if A.numel() else ember.zeros(*A.shape[:-2], 0, dtype=real)
    X = pinv(A, rtol=rc) @ Bm if A.numel() else ember.zeros(
        *np.broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2])), n, Bm.shape[-1],
        dtype=A.dtype)
    empty = ember.empty(0, dtype=real)
    if driver == "gels":
        rank = ember.empty(0, dtype=ember.int64)
    elif s.shape[-1]:
        rank = (s > rc * s[..., :1]).sum(-1)
    else:
        rank = ember.zeros(s.shape[:-1], dtype=ember.int64)
    full = driver == "gels" or bool((rank == min(m, n)).all())
    if m > n and full and driver != "gelsy" and A.numel():
        res = ((A @ X - Bm).abs() ** 2).sum(-2)
        residuals = res.squeeze(-1) if vector else res
    else:
        # still an output of the differentiable solve: torch's empty residuals require
        # grad when the inputs do
        residuals = X.reshape(-1)[:0].abs() if X.requires_grad else empty
    sv = s if driver in ("gelsd", "gelss") else empty
    X = X.squeeze(-1) if vector else X
    return _results("linalg_lstsq", (X, residuals, rank, sv), out)


# ----- Householder QR in LAPACK's packed form ------------------------------------------------
class Geqrf(Primitive):
    """LAPACK's ``geqrf`` through ``numpy.linalg.qr(mode='raw')`` (which returns the
    packed matrix transposed, Fortran order)."""
    n_outputs = 2
    batch = _batch.passthrough

    def forward(self, x):
        xp = array_module(x)
        x = np.asarray(x) if xp is np else xp.asnumpy(x)
        m, n = x.shape[-2:]
        k = min(m, n)
        flat = x.reshape((math.prod(x.shape[:-2]), m, n))
        a = np.empty_like(flat)
        tau = np.zeros((flat.shape[0], k), dtype=x.dtype)
        for i, mat in enumerate(flat):
            if mat.size:
                h, t = _lapack.linalg.qr(mat, mode="raw")
                a[i] = h.T
                tau[i] = t[:k]
        return xp.asarray(a.reshape(x.shape)), xp.asarray(tau.reshape(x.shape[:-2] + (k,)))

    def backward(self, ga, gtau):
        raise RuntimeError("the derivative for 'geqrf' is not implemented.")


def geqrf(input, *, out=None):
    """``(a, tau)``: LAPACK's packed QR (``R`` on and above the diagonal, the Householder
    vectors below it, their scales in ``tau``). Not differentiable, as in PyTorch."""
    _check_float("geqrf", input)
    if input.dim() < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    return _results("geqrf", tuple(Geqrf.apply(input)), out)


def ormqr(input, tau, other, left=True, transpose=False, *, out=None):
    """``Q @ other`` (``other @ Q`` with ``left=False``; ``Q^H`` for ``Q`` with
    ``transpose``) where ``Q = H_1 ... H_k`` is the full orthogonal matrix of ``geqrf``'s
    reflectors. A composite of ember ops: differentiable in all three tensors."""
    import ember
    for name, t in (("input", input), ("tau", tau), ("other", other)):
        if not isinstance(t, Tensor):
            raise TypeError(f"ormqr(): argument '{name}' must be Tensor, not "
                            f"{type(t).__name__}")
    if input.dim() < 2 or other.dim() < 2:
        raise RuntimeError("torch.ormqr: input and other must have at least 2 dimensions.")
    k = tau.shape[-1]
    m = input.shape[-2]
    nq = other.shape[-2] if left else other.shape[-1]
    if nq != m:
        raise RuntimeError(f"torch.ormqr: other.shape[{-2 if left else -1}] must be equal to "
                           f"input.shape[-2]")
    if k > input.shape[-1] or k > m:
        raise RuntimeError("torch.ormqr: tau.shape[-1] must be less than or equal to "
                           "input.shape[-1]")
    if k != min(nq, input.shape[-1]):  # one reflector per column of a full geqrf
        raise RuntimeError(f"torch.ormqr: tau.shape[-1] must be equal to "
                           f"min(other.shape[{-2 if left else -1}], input.shape[-1])")
    if out is None and _mode_active[0] and (m_ := _mode_recorder((input, tau, other))) is not None:
        # one node: the reflectors are applied one by one for the sizes read here (a
        # capture would keep the example's)
        return m_.composite_locals("ormqr", ormqr, locals())
    rows = ember.arange(m).unsqueeze(-1)
    C = other
    # Q = H_1 ... H_k; Q^H = H_k^H ... H_1^H with H_i^H = I - conj(tau_i) v_i v_i^H
    order = range(k - 1, -1, -1) if left != transpose else range(k)
    for i in order:
        v = ember.where(rows > i, input[..., :, i:i + 1], (rows == i).to(input.dtype))
        t = tau[..., i:i + 1].unsqueeze(-1)
        if transpose and t.is_complex():
            t = t.conj()
        if left:
            C = C - t * (v @ (_mH(v) @ C))
        else:
            C = C - t * ((C @ v) @ _mH(v))
    return _write_out(C, out)


def _bind():
    for name, fn in (("lu", lu), ("lu_solve", lambda self, LU_data, LU_pivots:
                                     lu_solve(self, LU_data, LU_pivots)),
                     ("triangular_solve", triangular_solve), ("geqrf", geqrf),
                     ("ormqr", ormqr)):
        setattr(Tensor, name, fn)


_bind()
