"""``torch.random``: the default generator's seed and state, and ``fork_rng``."""
import contextlib

from ember._random import (
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng",
           "default_generator"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """Run the block with the default generator's state saved and restored after it, so
    random draws inside do not change the draws after it. ember has one generator for
    all devices, so ``devices`` and ``device_type`` only need to be valid."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def thread_safe_generator():
    """None: ember's DataLoader workers are processes, which draw from the default
    generator (torch returns None outside thread workers too)."""
    return None


__all__ += ["thread_safe_generator"]
