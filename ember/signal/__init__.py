"""``ember.signal``: PyTorch's ``torch.signal`` (its ``windows`` submodule)."""
from ember.signal import windows

__all__ = ["windows"]
