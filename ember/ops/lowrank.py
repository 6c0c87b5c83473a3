"""Randomized low-rank SVD and PCA (``torch.svd_lowrank``, ``torch.pca_lowrank``):
Halko, Martinsson and Tropp's range finder (Algorithm 4.4) and SVD of the projection
(Algorithm 5.1), as composites of ember ops, so they are differentiable. The random
test matrix comes from ember's generator with PyTorch's shape and dtype, so a seeded
call matches PyTorch's."""
__all__ = ["svd_lowrank", "pca_lowrank"]


def _mH(t):
    return t.mT.conj() if t.is_complex() else t.mT


def _basis(A, q, niter, M):
    """An orthonormal ``Q`` (``(*, m, q)``) with ``Q Q^H (A - M)`` close to ``A - M``."""
    import ember

    def times(B):
        return A @ B if M is None else A @ B - M @ B

    def times_h(B):
        return _mH(A) @ B if M is None else _mH(A) @ B - _mH(M) @ B

    R = ember.randn(A.shape[-1], q, dtype=A.dtype)
    Q = ember.linalg.qr(times(R)).Q
    for _ in range(2 if niter is None else niter):
        Q = ember.linalg.qr(times_h(Q)).Q
        Q = ember.linalg.qr(times(Q)).Q
    return Q


def svd_lowrank(A, q=6, niter=2, M=None):
    """``(U, S, V)`` with ``A - M ~ U diag(S) V^H`` of rank ``q`` (default 6), from
    ``niter`` subspace iterations on a random start (``M``, broadcast to ``A``, is
    subtracted implicitly)."""
    import ember
    if not A.is_floating_point() and not A.is_complex():
        A = A.to(ember.get_default_dtype())
    q = 6 if q is None else q
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    if m < n:
        A = _mH(A)
        M = None if M is None else _mH(M)
    Q = _basis(A, q, niter, M)
    B = _mH(Q) @ A
    if M is not None:
        B = B - _mH(Q) @ M
    U, S, Vh = ember.linalg.svd(B, full_matrices=False)
    U, V = Q @ U, _mH(Vh)
    return (V, S, U) if m < n else (U, S, V)


def pca_lowrank(A, q=None, center=True, niter=2):
    """``svd_lowrank`` of ``A`` with its column means removed (``center=True``);
    ``q`` defaults to ``min(6, m, n)``."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than "
                         f"min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return svd_lowrank(A, q, niter=niter)
    return svd_lowrank(A - A.mean(dim=(-2,), keepdim=True), q, niter=niter)
