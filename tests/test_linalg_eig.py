"""``linalg.eig`` against torch: what LAPACK's ``geev`` determines must match.

Eigenvalues come in LAPACK's order; each eigenvector has unit 2-norm and its largest
component real. That leaves a sign per column (a real +-1, since the largest component
is real), which LAPACK builds choose differently (NumPy's OpenBLAS, torch's MKL): ember's
eigenvectors equal torch's times such a sign, and phase-invariant functions of them
(OpInfo's ``(L, |V|)``) and their gradients match.
"""
import numpy as np
import pytest
import torch

import ember


def _matrix(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(6, 6), (3, 4, 4), (1, 1)])
def test_eig_matches_lapack_normalisation(dtype, shape):
    a = _matrix(shape, dtype, seed=len(shape) + shape[-1])
    tL, tV = (v.numpy() for v in torch.linalg.eig(torch.from_numpy(a)))
    e = ember.linalg.eig(ember.tensor(a))
    eL, eV = e.eigenvalues.numpy(), e.eigenvectors.numpy()
    assert eL.dtype == tL.dtype and eV.dtype == tV.dtype
    single = np.dtype(dtype) in (np.float32, np.complex64)
    tol = 2e-5 if single else 1e-12
    np.testing.assert_allclose(eL, tL, rtol=tol, atol=tol)  # same order
    np.testing.assert_allclose(np.linalg.norm(eV, axis=-2), 1, rtol=tol)
    largest = np.take_along_axis(eV, np.abs(eV).argmax(-2)[..., None, :], -2)
    assert not largest.imag.any()  # LAPACK's convention: the largest component is real
    phase = np.sum(np.conj(tV) * eV, axis=-2)  # <v_torch, v_ember> per column
    np.testing.assert_allclose(np.abs(phase.imag), 0, atol=10 * tol)
    np.testing.assert_allclose(np.abs(phase.real), 1, rtol=10 * tol)
    np.testing.assert_allclose(eV, tV * np.sign(phase.real)[..., None, :], atol=10 * tol)


def test_eig_phase_invariant_gradients():
    a = _matrix((5, 5), np.float64, seed=3)
    gos = [np.linspace(-1, 1, 5), np.linspace(0, 1, 25).reshape(5, 5)]
    grads = []
    for m in (torch, ember):
        x = m.tensor(a, requires_grad=True)
        L, V = m.linalg.eig(x)
        loss = (L * m.tensor(gos[0])).real.sum() + (V.abs() * m.tensor(gos[1])).sum()
        grads.append(m.autograd.grad(loss, x)[0].detach().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_eig_double_backward_matches_torch(dtype):
    """eig's second derivative (it raised NotImplementedError): a gauge-invariant loss
    (eigenvalues and |V|^2), its gradient with create_graph, then that gradient's
    derivative, against torch at well-conditioned matrices."""

    rng = np.random.default_rng(0)
    for _ in range(3):
        a = rng.standard_normal((4, 4)) + 3 * np.diag([1.0, 2, 3, 4])
        c = rng.standard_normal((4, 4))
        if dtype == "complex128":
            a = a + 1j * rng.standard_normal((4, 4))
            c = c + 1j * rng.standard_normal((4, 4))
        wl = rng.standard_normal(4) + 1j * rng.standard_normal(4)
        wv = rng.standard_normal((4, 4))
        got = []
        for m in (torch, ember):
            A = m.tensor(a, requires_grad=True)
            L, V = m.linalg.eig(A)
            loss = (L * m.tensor(wl)).real.sum() + ((V.abs() ** 2) * m.tensor(wv)).sum()
            g, = m.autograd.grad(loss, A, create_graph=True)
            gg, = m.autograd.grad((g * m.tensor(c)).real.sum(), A)
            got.append((g.detach().numpy(), gg.numpy()))
        np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-10, atol=1e-12)
