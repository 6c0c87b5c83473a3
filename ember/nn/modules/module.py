"""Module: the base class of every layer (PyTorch's ``torch.nn.Module``)."""


class Module:
    """Base class for all neural network modules (placeholder, being written)."""
