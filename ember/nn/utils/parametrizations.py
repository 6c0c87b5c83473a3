"""``torch.nn.utils.parametrizations``: ``weight_norm``, ``spectral_norm`` and
``orthogonal`` as parametrizations (see ``ember.nn.utils.parametrize``)."""
from enum import Enum, auto

from ember import _core as ember
from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.utils import parametrize
from ember.nn.utils._lazy import refuse_uninitialized

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return ember._weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return ember.norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` with the norm taken over
    every dimension but ``dim`` (``None``: over all). ``g`` and ``v`` are
    ``parametrizations.<name>.original0`` and ``original1``, as in PyTorch.

    >>> m = weight_norm(ember.nn.Linear(20, 40), name="weight")
    >>> m.parametrizations.weight.original0.shape
    ember.Size([40, 1])
    """
    _weight_norm_module = _WeightNorm(dim)
    parametrize.register_parametrization(module, name, _weight_norm_module, unsafe=True)

    def _load_hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                   error_msgs):
        # state dicts saved with the legacy nn.utils.weight_norm use <name>_g / <name>_v
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)
    if hasattr(module, "_register_load_state_dict_pre_hook"):
        module._register_load_state_dict_pre_hook(_load_hook)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                mat = self._reshape_weight_to_matrix(weight)
                h, w = mat.shape
                # drawn in PyTorch's order, so the same seed gives the same vectors
                u = mat.new_empty(h).normal_(0, 1)
                v = mat.new_empty(w).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=eps))
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, mat, n):
        with no_grad():
            for _ in range(n):
                self._u.copy_(F.normalize(ember.mv(mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(ember.mv(mat.mT, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = ember.vdot(u, ember.mv(mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def _transposed_conv(module):
    from ember import nn  # the package this module is part of
    return isinstance(module, (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide ``module.<name>`` by its largest singular value, estimated by power
    iteration (``n_power_iterations`` steps per forward in training mode; the vectors
    ``_u``/``_v`` are buffers of the parametrization). ``dim`` defaults to 1 for
    transposed convolutions and 0 otherwise."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    refuse_uninitialized([weight], "spectral_norm", RuntimeError)
    if dim is None:
        dim = 1 if _transposed_conv(module) else 0
    parametrize.register_parametrization(module, name,
                                         _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


def _is_orthogonal(q):
    n, k = q.shape[-2], q.shape[-1]
    eye = ember.eye(k, dtype=q.dtype)
    return ember.allclose(q.mT @ q, eye, atol=10.0 * n * ember.finfo(q.dtype).eps)


def _make_orthogonal(a):
    """The Q of ``a = QR`` with R's diagonal made non-negative."""
    q, r = ember.linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x):
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            x = x.tril()
            if n != k:
                x = ember.cat([x, x.new_zeros(n, n - k).expand(*x.shape[:-2], -1, -1)], dim=-1)
            a = x - x.mT
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                q = ember.matrix_exp(a)
            else:
                eye = ember.eye(n, dtype=a.dtype)
                q = ember.linalg.solve(eye - 0.5 * a, eye + 0.5 * a)
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (a * a).sum(dim=-2))
            q = ember.linalg.householder_product(a, tau)
            q = q * x.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            q = self.base @ q
        if transposed:
            q = q.mT
        return q

    def right_inverse(self, q):
        with no_grad():
            if q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {q.shape}.")
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            transposed = n < k
            if transposed:
                q = q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map != _OrthMaps.householder:
                    # the exponential and Cayley maps have no inverse to assign through;
                    # at registration this leaves the weight itself as the original
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the "
                        "Cayley parametrizations when use_trivialization=False.")
                # Q's Householder reflectors (the QR of Q); the diagonal keeps the signs of
                # R's diagonal, flipped where LAPACK skipped a reflection (tau == 0), so
                # that forward's product of reflectors times those signs gives back Q
                a, tau = ember.geqrf(q)
                signs = a.diagonal(dim1=-2, dim2=-1).sign()
                a.diagonal(dim1=-2, dim2=-1).copy_(ember.where(tau == 0.0, -signs, signs))
                return a.mT if transposed else a
            if n == k:
                q = _make_orthogonal(q) if not _is_orthogonal(q) else q.clone()
            else:
                extra = ember.randn(*(tuple(q.shape[:-2]) + (n, n - k)), dtype=q.dtype)
                q = _make_orthogonal(ember.cat([q, extra], dim=-1))
            self.base = q
            neg_id = ember.zeros_like(q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Keep ``module.<name>`` (a matrix or batch of matrices) orthogonal through
    ``matrix_exp`` (the default for square matrices), ``cayley`` or ``householder``
    (the default otherwise). The starting value is the nearest orthogonal matrix to the
    current weight (the Q of its QR factorization). ``use_trivialization`` (the default)
    keeps that matrix in a ``base`` buffer and parametrizes from it; without it the
    original is the map's own coordinates (the current weight for ``matrix_exp`` and
    ``cayley``, which then cannot be assigned to)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. "
                         f"Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
