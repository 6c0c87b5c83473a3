"""Settings and helpers of ``torch.utils.checkpoint`` besides ``checkpoint`` itself:
checkpoint policies, device RNG states, early-stop and debug switches.

ember's checkpoint recomputes the whole function in backward; early stop (stopping the
recomputation once the needed values exist) and the debug trace change nothing in the
values computed, so their switches are recorded only.
"""
import contextlib
import enum

__all__ = ["CheckpointPolicy", "SelectiveCheckpointContext", "DefaultDeviceType",
           "get_device_states", "set_device_states", "set_checkpoint_early_stop",
           "set_checkpoint_debug_enabled"]


class CheckpointPolicy(enum.Enum):
    """What selective checkpointing does with one op's output."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


class SelectiveCheckpointContext:
    """What a selective-checkpoint policy function is told: whether the op runs in the
    recomputation (``is_recompute``)."""

    def __init__(self, *, is_recompute, op_output=None):
        self.is_recompute = is_recompute
        self.op_output = op_output


class DefaultDeviceType:
    """The device type whose RNG state checkpoint saves and restores ("cpu" unless set)."""

    _default_device_type = "cpu"

    @staticmethod
    def set_device_type(device="cpu"):
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type():
        return DefaultDeviceType._default_device_type


def get_device_states(*args):
    """``(device ids, RNG states)`` of the accelerator devices the tensors in ``args``
    live on: empty lists for CPU tensors, as in torch."""
    from ember._tensor import Tensor
    if any(isinstance(a, Tensor) and a.is_cuda for a in args):
        raise NotImplementedError("torch.utils.checkpoint.get_device_states of CUDA tensors "
                                  "is not implemented in ember")
    return [], []


def set_device_states(devices, states, *, device_type=None):
    """Restore accelerator RNG states from :func:`get_device_states` (nothing to do for
    CPU-only calls)."""
    if list(devices) or list(states):
        raise NotImplementedError("torch.utils.checkpoint.set_device_states for accelerator "
                                  "devices is not implemented in ember")


_switches = {"early_stop": True, "debug": None}


@contextlib.contextmanager
def set_checkpoint_early_stop(enable):
    """Within the block, whether non-reentrant checkpoint may stop recomputing once it
    has what backward needs (recorded; the gradients are the same either way)."""
    prev, _switches["early_stop"] = _switches["early_stop"], bool(enable)
    try:
        yield
    finally:
        _switches["early_stop"] = prev


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled):
    """Within the block, whether checkpoint records a debug trace of the recomputation
    (recorded; ember adds no trace to its errors)."""
    prev, _switches["debug"] = _switches["debug"], enabled
    try:
        yield
    finally:
        _switches["debug"] = prev
