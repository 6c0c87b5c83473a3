"""``cupy.cuda`` of the CPU test double: devices, the runtime, streams."""
from cupy import Device  # noqa: F401
from cupy.cuda import runtime  # noqa: F401


def is_available():
    """True: the double always has its one fake GPU."""
    return runtime.getDeviceCount() > 0


class Stream:
    """A CUDA stream; the double runs everything at once, so waiting is immediate."""

    null = None

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.ptr = 0 if null else id(self)

    def synchronize(self):
        """Wait for queued work (none)."""

    def use(self):
        """Make this the current stream."""
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


Stream.null = Stream(null=True)


def get_current_stream():
    """The current stream (always the null stream here)."""
    return Stream.null
