"""Legacy modules torch still exports: ``nn.Container`` (deprecated) and
``nn.CrossMapLRN2d`` (Lua Torch's SpatialCrossMapLRN)."""
import warnings

from ember import _core as ember
from ember.nn.modules.module import Module

__all__ = ["Container", "CrossMapLRN2d"]


class Container(Module):
    """Deprecated: a Module holding the submodules given as keyword arguments."""

    def __init__(self, **kwargs):
        super().__init__()
        warnings.warn("nn.Container is deprecated. All of it's functionality is now "
                      "implemented in nn.Module. Subclass that instead.", stacklevel=2)
        for key, value in kwargs.items():
            self.add_module(key, value)


class CrossMapLRN2d(Module):
    """Local response normalization across channels of a 4-D input, as Lua Torch's
    ``SpatialCrossMapLRN`` computes it: ``y = x * (k + alpha/size * s)^-beta`` where
    ``s`` sums ``x**2`` over a window of channels.

    The window is torch's: channel ``j`` counts for channels ``c`` with
    ``c - p < j <= c + p - 1`` (``p = (size - 1) // 2 + 1``), except that channel 0
    counts for every later channel too, which torch's running-sum update never removes.
    ember reproduces that to give torch's numbers.
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def _window(self, channels, like):
        p = int((self.size - 1) / 2 + 1)
        c = ember.arange(channels).unsqueeze(1)
        j = ember.arange(channels).unsqueeze(0)
        inside = (j <= c + p - 1) & ((j == 0) | (c < j + p))
        return inside.to(like.dtype)

    def forward(self, input):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D "
                             "instead.")
        m = self._window(input.size(1), input)
        s = ember.einsum("cj,njhw->nchw", m, input * input)
        return input * (self.k + self.alpha / self.size * s) ** -self.beta

    def extra_repr(self):
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)
