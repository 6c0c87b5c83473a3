"""PyTorch's reparameterised gradients of gamma and Dirichlet draws, element by
element with PyTorch's approximations and its C++ types (``_standard_gamma_grad``,
``_dirichlet_grad``), so the gradients of ``rsample`` are torch's bits.

The standard gamma's gradient is computed in double for both dtypes. The Dirichlet's
keeps some steps in the tensor's dtype, as PyTorch's template does: for float32 the
small-``x`` series, the digammas and their ``logf``/``powf``/``tanf`` are float
(glibc's). The loops are :mod:`ember._sampler_loops`' (Python, or compiled by numba).
"""
import numpy as np

from ember import _random_samplers as _rs
from ember import _sampler_loops as _loops


def standard_gamma_grad(alpha, x):
    """``_standard_gamma_grad`` on flat float64 ``alpha`` and draws ``x`` (float64)."""
    out = np.zeros(alpha.size)
    ks = _rs.kernels(alpha.size)
    if ks is _loops:
        ks.gamma_grad_fill(alpha.tolist(), x.tolist(), out)
    else:
        ks.gamma_grad_fill(alpha, x, out)
    return out


def dirichlet_grad(x, alpha, total, single):
    """``_dirichlet_grad`` on flat float64 arrays (float32 values where ``single``)."""
    out = np.zeros(x.size)
    ks = _rs.kernels(x.size)
    if ks is _loops:
        ks.dirichlet_grad_fill(x.tolist(), alpha.tolist(), total.tolist(), single, out)
    else:
        ks.dirichlet_grad_fill(x, alpha, total, single, out)
    return out
