"""ember.nn.modules: the layer classes (PyTorch's ``torch.nn.modules``)."""

from ember.nn.modules.module import Module

__all__ = ["Module"]

# ---------------------------------------------------------------------------
# Convolution / pooling / normalization / upsampling modules (owned by the
# conv/pool/norm engineer): add `from ember.nn.modules.<file> import ...` lines
# and extend __all__ below this line.
# ---------------------------------------------------------------------------
