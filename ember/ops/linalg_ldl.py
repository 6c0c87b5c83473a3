"""``linalg.ldl_factor(_ex)`` and ``linalg.ldl_solve``: the Bunch-Kaufman factorization
``A = P L D L^T P^T`` of a symmetric matrix, stored as LAPACK's ``sytrf`` stores it
(``L`` below the diagonal, the 1x1 and 2x2 blocks of ``D`` on and next to it, the
interchanges in 1-based ``pivots``, negative for 2x2 blocks), and the solve from it.

ember writes the unblocked algorithm (LAPACK's ``sytf2``; the blocked ``sytrf`` makes
the same pivot choices) in NumPy, one matrix at a time: it is meant for small
matrices. Neither op is differentiable (nor in PyTorch). With ``hermitian=True`` a
complex matrix gets the Hermitian factorization ``A = P L D L^H P^T`` (LAPACK's
``hetf2``/``hetrs``: a real diagonal, conjugates in the updates).
"""
import math

import numpy as np

from ember._tensor import Tensor, _make, _mode_active, _mode_recorder
from ember.backend import array_module
from ember.ops._einsum import _tname
from ember.ops._linalg_util import LinAlgError, _named
from ember.ops.linalg import _write_out

__all__ = []

_rt = {n: _named(n, f) for n, f in [("linalg_ldl_factor", "LD pivots"),
                                     ("linalg_ldl_factor_ex", "LD pivots info")]}
_ALPHA = (1 + math.sqrt(17)) / 8


def _size(x):
    """LAPACK's ``i?amax`` measure: ``|re| + |im|`` for complex numbers."""
    return np.abs(x.real) + np.abs(x.imag) if np.iscomplexobj(x) else np.abs(x)


def _sytf2(a, herm=False):
    """Factor one symmetric (``herm``: Hermitian) matrix, lower triangle read, in place;
    returns pivots, info."""
    cj = np.conj if herm else (lambda v: v)
    re = np.real if herm else (lambda v: v)
    n = a.shape[0]
    piv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = _size(re(a[k, k]))
        if k < n - 1:
            imax = k + 1 + int(np.argmax(_size(a[k + 1:, k])))
            colmax = _size(a[imax, k])
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            info = info or k + 1
            kp = k
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:
                row = _size(a[imax, k:imax])
                rowmax = row.max()
                if imax < n - 1:
                    rowmax = max(rowmax, _size(a[imax + 1:, imax]).max())
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif _size(re(a[imax, imax])) >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:  # symmetric interchange of rows/columns kk and kp (lower part)
                a[kp + 1:, [kk, kp]] = a[kp + 1:, [kp, kk]]
                js = np.arange(kk + 1, kp)
                a[js, kk], a[kp, js] = cj(a[kp, js]), cj(a[js, kk])
                if herm:
                    a[kp, kk] = np.conj(a[kp, kk])
                a[kk, kk], a[kp, kp] = re(a[kp, kp]), re(a[kk, kk])
                if kstep == 2:
                    a[k, k] = re(a[k, k])
                    a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
            elif herm:
                a[k, k] = a[k, k].real
                if kstep == 2:
                    a[k + 1, k + 1] = a[k + 1, k + 1].real
            if kstep == 1:
                if k < n - 1:
                    r = 1 / re(a[k, k])
                    x = a[k + 1:, k].copy()
                    a[k + 1:, k + 1:] -= r * np.outer(x, cj(x))
                    a[k + 1:, k] = x * r
            elif k < n - 2 and herm:
                d = abs(a[k + 1, k])
                d11, d22 = a[k + 1, k + 1].real / d, a[k, k].real / d
                t = 1 / (d11 * d22 - 1)
                d21 = a[k + 1, k] / d
                d = t / d
                c0, c1 = a[k + 2:, k].copy(), a[k + 2:, k + 1].copy()
                wk = d * (d11 * c0 - d21 * c1)
                wkp1 = d * (d22 * c1 - np.conj(d21) * c0)
                a[k + 2:, k + 2:] -= np.outer(c0, np.conj(wk)) + np.outer(c1, np.conj(wkp1))
                a[k + 2:, k], a[k + 2:, k + 1] = wk, wkp1
            elif k < n - 2:
                d21 = a[k + 1, k]
                d11 = a[k + 1, k + 1] / d21
                d22 = a[k, k] / d21
                t = 1 / (d11 * d22 - 1)
                d21 = t / d21
                c0, c1 = a[k + 2:, k].copy(), a[k + 2:, k + 1].copy()
                wk = d21 * (d11 * c0 - c1)
                wkp1 = d21 * (d22 * c1 - c0)
                a[k + 2:, k + 2:] -= np.outer(c0, wk) + np.outer(c1, wkp1)
                a[k + 2:, k], a[k + 2:, k + 1] = wk, wkp1
            if herm:  # the diagonal of a Hermitian matrix stays real
                idx = np.arange(k, n)
                a[idx, idx] = a[idx, idx].real
        if kstep == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += kstep
    return np.tril(a), piv, info


def _is_complex(t):
    return t._data.dtype.kind == "c"


def _check(name, A):
    if not isinstance(A, Tensor):
        raise TypeError(f"{name}(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError(f"torch.{name}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"torch.{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if A._data.dtype.kind not in "fc":
        raise RuntimeError(f"torch.{name}: Expected a floating point or complex tensor as "
                           f"input. Got {_tname(A._data.dtype)}")


def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """``(LD, pivots, info)``: the Bunch-Kaufman factorization of the symmetric ``A``
    (its lower triangle is read), as LAPACK's ``sytrf`` returns it."""
    _check("linalg.ldl_factor_ex", A)
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        m.unrecordable("linalg.ldl_factor_ex (its pivoting is chosen from the values)")
    herm = bool(hermitian) and _is_complex(A)
    xp = array_module(A._data)
    x = np.array(A._data if xp is np else xp.asnumpy(A._data))
    n = x.shape[-1]
    batch = x.shape[:-2]
    flat = x.reshape((math.prod(batch), n, n))
    LD = np.zeros_like(flat)
    piv = np.zeros((flat.shape[0], n), dtype=np.int32)
    info = np.zeros(flat.shape[0], dtype=np.int32)
    for i in range(flat.shape[0]):
        LD[i], piv[i], info[i] = _sytf2(flat[i].copy(), herm)
    if check_errors and info.any():
        raise LinAlgError(f"torch.linalg.ldl_factor_ex: The factorization could not be "
                          f"completed because the input is singular (info = {info.max()})")
    res = (_make(xp.asarray(LD.reshape(x.shape)), False),
           _make(xp.asarray(piv.reshape(batch + (n,))), False),
           _make(xp.asarray(info.reshape(batch)), False))
    if out is not None:
        res = tuple(_write_out(r, o) for r, o in zip(res, out))
    return _rt["linalg_ldl_factor_ex"](*res)


def ldl_factor(A, *, hermitian=False, out=None):
    """``(LD, pivots)`` of ``ldl_factor_ex``; raises when ``D`` is singular."""
    LD, piv, info = ldl_factor_ex(A, hermitian=hermitian)
    bad = np.asarray(info._data)
    if bad.any():
        raise LinAlgError(f"torch.linalg.ldl_factor: The factorization could not be completed "
                          f"because the input is singular: D[{int(bad.max())}] is zero.")
    res = (LD, piv)
    if out is not None:
        res = tuple(_write_out(r, o) for r, o in zip(res, out))
    return _rt["linalg_ldl_factor"](*res)


def _sytrs(a, piv, b, herm=False):
    """Solve ``A X = B`` from one ``sytrf`` factorization (LAPACK's ``sytrs``, lower;
    ``hetrs`` with ``herm``)."""
    cj = np.conj if herm else (lambda v: v)
    n = a.shape[0]
    b = b.copy()
    k = 0
    while k < n:  # L D Y = P^T B
        if piv[k] > 0:
            kp = piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= np.outer(a[k + 1:, k], b[k])
            b[k] = b[k] / (a[k, k].real if herm else a[k, k])
            k += 1
        else:
            kp = -piv[k] - 1
            b[[k + 1, kp]] = b[[kp, k + 1]]
            b[k + 2:] -= np.outer(a[k + 2:, k], b[k]) + np.outer(a[k + 2:, k + 1], b[k + 1])
            akm1k = a[k + 1, k]
            akm1, ak = a[k, k] / cj(akm1k), a[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1
            bkm1, bk = b[k] / cj(akm1k), b[k + 1] / akm1k
            b[k], b[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T P^T X = Y
        if piv[k] > 0:
            b[k] -= cj(a[k + 1:, k]) @ b[k + 1:]
            kp = piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            b[k] -= cj(a[k + 1:, k]) @ b[k + 1:]
            b[k - 1] -= cj(a[k + 1:, k - 1]) @ b[k + 1:]
            kp = -piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 2
    return b


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """The solution ``X`` of ``A X = B`` from ``A``'s ``ldl_factor``; batch dims
    broadcast."""
    _check("linalg.ldl_solve", LD)
    if _mode_active[0] and (m := _mode_recorder()) is not None:
        m.unrecordable("linalg.ldl_solve (its permutation is read from the pivots' values)")
    if B.dim() < 2:
        raise RuntimeError("torch.linalg.ldl_solve: The input tensor B must have at least 2 "
                           "dimensions.")
    if LD.dtype != B.dtype:
        raise RuntimeError(f"torch.linalg.ldl_solve: Expected LD and B to have the same dtype, "
                           f"but got LD with dtype {_tname(LD._data.dtype)} and B with dtype "
                           f"{_tname(B._data.dtype)} instead")
    if pivots._data.dtype != np.int32:
        raise RuntimeError("torch.linalg.ldl_solve: Expected pivots to be integers. Got "
                           f"{_tname(pivots._data.dtype)}")
    n = LD.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"torch.linalg.ldl_solve: Incompatible shapes of A and B for the "
                           f"equation AX = B ({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    xp = array_module(LD._data)
    a, p, b = (np.asarray(t._data if xp is np else xp.asnumpy(t._data)) for t in (LD, pivots, B))
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    nb = math.prod(batch)
    a = np.broadcast_to(a, batch + a.shape[-2:]).reshape((nb, n, n))
    p = np.broadcast_to(p, batch + (n,)).reshape((nb, n))
    b = np.broadcast_to(b, batch + b.shape[-2:]).reshape((nb,) + b.shape[-2:])
    herm = bool(hermitian) and _is_complex(LD)
    X = np.stack([_sytrs(a[i], p[i], b[i], herm) for i in range(b.shape[0])]) if b.shape[0] else \
        np.zeros(b.shape, dtype=b.dtype)
    res = _make(xp.asarray(X.reshape(batch + B.shape[-2:])), False)
    return _write_out(res, out) if out is not None else res
