"""General (non-symmetric) eigendecomposition: ``linalg.eig`` and ``linalg.eigvals``.

The forward is LAPACK's ``geev`` through ``numpy.linalg.eig`` (eigenvectors of unit
norm, as PyTorch's); results are always complex. The gradient is PyTorch's formula
for ``A = V diag(L) V^-1``, computed on arrays by a second primitive; where the
gradient's own graph is made (create_graph) the same formula runs in ember Tensor ops,
so eig's higher derivatives follow from it.
"""
import numpy as np

from ember._tensor import _make
from ember.autograd.grad_mode import state as _grad_state
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.backend import lapack as _lapack
from ember.ops import _batch
from ember.ops._einsum import _tname
from ember.ops._linalg_util import _check_square, _named, _SavesOutputs
from ember.ops.linalg import _write_out

__all__ = []

_rt = {"linalg_eig": _named("linalg_eig", "eigenvalues eigenvectors")}
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128,
            np.dtype(np.complex64): np.complex64, np.dtype(np.complex128): np.complex128}


def _np(x):
    xp = array_module(x)
    return (np.asarray(x) if xp is np else xp.asnumpy(x)), xp


def _mH(a):
    return np.conj(np.swapaxes(a, -1, -2))


class Eig(_SavesOutputs):
    _node_name = "LinalgEigBackward0"
    n_outputs = 2
    saved_outputs = (0, 1)
    batch = _batch.passthrough

    def forward(self, a):
        x, xp = _np(a)
        cdt = _COMPLEX[x.dtype]
        self.real_input = x.dtype.kind == "f"
        if x.size == 0:
            return (xp.zeros(x.shape[:-1], dtype=cdt), xp.zeros(x.shape, dtype=cdt))
        w, v = _lapack.linalg.eig(x)
        return xp.asarray(w.astype(cdt)), xp.asarray(v.astype(cdt))

    def backward(self, gL, gV):
        L, V = self.saved_tensors
        if _grad_state.grad_enabled:   # create_graph: the formula in Tensor ops
            gA = _eig_grad_differentiable(gL, gV, L, V)
        else:
            gA = _EigGrad.apply(gL, gV, L, V)
        return gA.real if self.real_input else gA

    def jvp(self, tA):
        """PyTorch's rule: with ``dP = V^-1 dA V``, ``dL = diag(dP)`` and ``dV = V C`` for
        ``C = dP / (L_j - L_i)`` off the diagonal (0 on it), less ``V`` times the real part
        of ``diag(V^H V C)``, which keeps each eigenvector's norm at 1. (The double-vjp
        fallback would need a derivative of the backward, which ember does not have.)"""
        from ember.ops.linalg_solve import solve
        if tA is None:
            return None, None
        L, V = self.fw_output
        tA = tA.to(V.dtype) if tA._data.dtype != V._data.dtype else tA
        dP = solve(V, tA @ V)
        dL = dP.diagonal(0, -2, -1)
        n = L.shape[-1]
        eye = _make(np.eye(n, dtype=bool))
        E = (L.unsqueeze(-2) - L.unsqueeze(-1)).masked_fill(eye, 1.0)
        dV = V @ (dP / E).masked_fill(eye, 0.0)
        dV = dV - V * (V.mH @ dV).diagonal(0, -2, -1).real.unsqueeze(-2)
        return dL, dV


def _eig_grad_differentiable(gL, gV, L, V):
    """``_EigGrad``'s formula written in ember Tensor ops, so that a gradient made with
    create_graph has a derivative of its own (eig's second and higher derivatives)."""
    from ember.ops.linalg_solve import solve
    Vh = V.mH
    n = L.shape[-1]
    eye = _make(np.eye(n, dtype=bool))
    if gV is None:
        inner = _make(np.zeros(V.shape, dtype=V._data.dtype))
    else:
        gV = gV.to(V.dtype) if gV._data.dtype != V._data.dtype else gV
        VhgV = Vh @ gV
        diag = VhgV.diagonal(0, -2, -1).real
        inner = VhgV - Vh @ (V * diag.unsqueeze(-2))
        Lc = L.conj()
        E = (Lc.unsqueeze(-2) - Lc.unsqueeze(-1)).masked_fill(eye, 1.0)
        inner = (inner / E).masked_fill(eye, 0.0)
    if gL is not None:
        gL = gL.to(L.dtype) if gL._data.dtype != L._data.dtype else gL
        inner = inner + gL.diag_embed()
    return solve(Vh, inner @ Vh)


class _EigGrad(Primitive):
    """``gA = V^-H (diag(gL) + off-diagonal part of V^H gV / conj(L_j - L_i)) V^H``,
    with the normalisation term of unit-norm eigenvectors."""

    def forward(self, gL, gV, L, V):
        (L, xp), (V, _) = _np(L), _np(V)
        gL = None if gL is None else _np(gL)[0]
        gV = None if gV is None else _np(gV)[0]
        Vh = _mH(V)
        if gV is None or not np.any(gV):
            inner = np.zeros(V.shape, dtype=V.dtype)
        else:
            with _lapack.one_thread():  # the one-thread bits at any thread count
                VhgV = Vh @ gV
                diag = np.real(np.diagonal(VhgV, axis1=-2, axis2=-1))
                inner = VhgV - Vh @ (V * diag[..., None, :])
            E = np.conj(L)[..., None, :] - np.conj(L)[..., :, None]
            n = L.shape[-1]
            E[..., np.arange(n), np.arange(n)] = 1
            inner = inner / E
        n = L.shape[-1]
        inner[..., np.arange(n), np.arange(n)] = 0 if gL is None else gL
        with _lapack.one_thread():  # the one-thread bits at any thread count
            return xp.asarray(_lapack.linalg.solve(Vh, inner @ Vh))

    def backward(self, gy):
        raise NotImplementedError("the derivative of linalg.eig's backward (third and higher "
                                  "derivatives of linalg.eig) is not implemented in ember")


def _check(name, A):
    _check_square(name, A, float_only=False)
    if A._data.dtype.kind not in "fc":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{_tname(A._data.dtype)}")
    if not np.isfinite(_np(A._data)[0]).all():
        raise RuntimeError(f"{name}: input tensor should not contain infs or NaNs.")


def eig(A, *, out=None):
    """``(eigenvalues, eigenvectors)`` of a square matrix (batches too), complex even for
    real input; eigenvectors have unit norm. Differentiable, with PyTorch's caveat that
    the loss must not depend on the eigenvectors' phases."""
    _check("linalg.eig", A)
    L, V = Eig.apply(A)
    res = (L, V)
    if out is not None:
        res = tuple(_write_out(r, o) for r, o in zip(res, out))
    return _rt["linalg_eig"](*res)


def eigvals(A, *, out=None):
    """The eigenvalues of a square matrix (complex; see ``eig``)."""
    _check("linalg.eigvals", A)
    L = Eig.apply(A)[0]
    return _write_out(L, out) if out is not None else L

