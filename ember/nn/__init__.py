"""ember.nn: neural network layers (PyTorch's ``torch.nn``)."""

from ember.nn import functional  # noqa: F401
from ember.nn.modules import *  # noqa: F401,F403
