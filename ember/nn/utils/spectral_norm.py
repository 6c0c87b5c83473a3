"""Legacy ``torch.nn.utils.spectral_norm`` / ``remove_spectral_norm``: ``<name>_orig``
parameter, ``<name>_u``/``<name>_v`` buffers, and a forward pre-hook that runs the power
iteration (in training mode) and divides by the estimated largest singular value."""
from ember import _core as ember
from ember.autograd.grad_mode import no_grad
from ember.nn import functional as F
from ember.nn.parameter import Parameter
from ember.nn.utils._lazy import refuse_uninitialized
from ember.nn.utils.parametrizations import _transposed_conv

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook of the legacy spectral norm."""

    _version = 1

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = n_power_iterations

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    # v first, then u: the legacy order, unlike the parametrization's
                    v.copy_(F.normalize(ember.mv(mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(ember.mv(mat, v), dim=0, eps=self.eps))
                u, v = u.clone(), v.clone()
        sigma = ember.dot(u, ember.mv(mat, v))
        return weight / sigma

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        refuse_uninitialized([weight], "spectral_norm")
        with no_grad():
            mat = fn.reshape_weight_to_matrix(weight)
            h, w = mat.shape
            u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        # a plain attribute until the first forward recomputes it (PyTorch's weight.data)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        module._register_state_dict_hook(_StateDictVersion(name))
        return fn


class _StateDictVersion:
    """The state-dict hook that records the legacy spectral norm's format version in the
    state dict's metadata, as PyTorch does: PyTorch reads it when loading to tell this
    format from the older one, so a state dict saved here loads there without a guess."""

    def __init__(self, name):
        self.name = name

    def __call__(self, module, state_dict, prefix, local_metadata):
        versions = local_metadata.setdefault("spectral_norm", {})
        key = self.name + ".version"
        if key in versions:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        versions[key] = SpectralNorm._version


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Spectral normalization with a forward pre-hook (PyTorch's legacy API)."""
    if dim is None:
        dim = 1 if _transposed_conv(module) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo ``spectral_norm``: ``<name>`` becomes one parameter again."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            for j, other in list(module._state_dict_hooks.items()):
                if isinstance(other, _StateDictVersion) and other.name == name:
                    del module._state_dict_hooks[j]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
