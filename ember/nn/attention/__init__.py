"""``torch.nn.attention``: the sdpa backend selector. ember has one implementation of
``scaled_dot_product_attention`` (the math one, in ``ember.ops.attention``), so
:func:`sdpa_kernel` accepts any backends and changes nothing."""
import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The attention kernels PyTorch can choose between (ember always computes MATH)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Context manager restricting sdpa to ``backends`` (an :class:`SDPBackend` or a list
    of them; checked as PyTorch checks them, but ember's single implementation runs
    whatever they are)."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                             f"SDPBackend instances, got {type(backends).__name__}")
    yield {}
