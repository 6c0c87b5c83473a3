"""``torch.autograd.set_multithreading_enabled`` / ``is_multithreading_enabled`` and the
removed ``torch.autograd.variable``."""
__all__ = ["set_multithreading_enabled", "is_multithreading_enabled", "variable"]

_state = {"multithreading": True}


def is_multithreading_enabled():
    """Whether backward may run on per-device worker threads (recorded only: ember's
    engine always runs backward on the calling thread)."""
    return _state["multithreading"]


class set_multithreading_enabled:
    """Context manager (or plain call) setting :func:`is_multithreading_enabled`; the
    previous value comes back on exit."""

    def __init__(self, mode):
        self.prev = _state["multithreading"]
        self.mode = bool(mode)
        _state["multithreading"] = self.mode

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _state["multithreading"] = self.prev
        return False

    def clone(self):
        return self.__class__(self.mode)


def variable(*args, **kwargs):
    """Removed from torch: raises torch's message."""
    raise RuntimeError("torch.autograd.variable(...) is deprecated, use torch.tensor(...) "
                       "instead")
