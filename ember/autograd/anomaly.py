"""Anomaly detection: remember where each node was created, and stop at the first NaN."""
import os
import traceback
import warnings

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "set_anomaly_enabled"]

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

enabled = [False]
nan_check = [True]


def forward_trace():
    """The stack of the code creating a node, as formatted lines, ember's own frames
    at its top dropped: it ends at the user's line that called the op."""
    frames = traceback.extract_stack()
    while frames and frames[-1].filename.startswith(_EMBER_DIR):
        frames.pop()
    return traceback.format_list(frames)


def is_anomaly_enabled():
    """True while anomaly detection is on."""
    return enabled[0]


def is_anomaly_check_nan_enabled():
    """True if anomaly detection also stops at NaN gradients."""
    return nan_check[0]


def set_anomaly_enabled(enabled_, check_nan=True):
    """Turn anomaly detection on or off (``torch.set_anomaly_enabled``)."""
    enabled[0], nan_check[0] = bool(enabled_), bool(check_nan)


class detect_anomaly:
    """Context manager: record forward tracebacks; raise at the first backward NaN.

    The error names the backward node and prints the user's forward line that built it.
    """

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)
        self._prev = (enabled[0], nan_check[0])
        enabled[0], nan_check[0] = True, self.check_nan
        return self

    def __exit__(self, *exc):
        enabled[0], nan_check[0] = self._prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with detect_anomaly(self.check_nan):
                return fn(*a, **k)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off, at once or for a ``with`` block."""

    def __init__(self, mode, check_nan=True):
        self._prev = (enabled[0], nan_check[0])
        enabled[0], nan_check[0] = mode, check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        enabled[0], nan_check[0] = self._prev
        return False
