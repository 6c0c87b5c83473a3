"""``torch.nn.attention``: the sdpa backend selector.

ember's ``scaled_dot_product_attention`` runs one of two CPU kernels, chosen as PyTorch
chooses on CPU: the fused one (one node, PyTorch's flash kernel for CPU) where its
conditions hold, else the math one (the composite PyTorch writes out op by op).
:func:`sdpa_kernel` restricts the choice, as in PyTorch; the GPU-only backends are
accepted and never chosen on CPU.
"""
import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The attention kernels PyTorch can choose between."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_enabled = [frozenset(SDPBackend) - {SDPBackend.ERROR}]


def enabled(backend):
    """Whether ``backend`` may be chosen now (inside :func:`sdpa_kernel` blocks)."""
    return backend in _enabled[0]


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Context manager restricting sdpa to ``backends`` (an :class:`SDPBackend` or a list
    of them); the previous choice comes back on exit."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                             f"SDPBackend instances, got {type(backends).__name__}")
    if isinstance(backends, SDPBackend):
        backends = [backends]
    for b in backends:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                                 f"SDPBackend instances, got {type(b).__name__}")
    old = _enabled[0]
    _enabled[0] = frozenset(backends)
    try:
        yield {}
    finally:
        _enabled[0] = old
