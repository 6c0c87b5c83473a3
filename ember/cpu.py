"""``torch.cpu``: the CPU as a device module (what ``torch.get_device_module('cpu')``
returns), with the few functions programs call on every device module."""
__all__ = ["is_available", "device_count", "current_device", "synchronize", "set_device"]


def is_available():
    """True: the CPU is always there."""
    return True


def device_count():
    """1."""
    return 1


def current_device():
    """``"cpu"``."""
    return "cpu"


def synchronize(device=None):
    """Nothing to wait for: CPU ops finish before they return."""


def set_device(device):
    """Nothing to select: there is one CPU device."""
