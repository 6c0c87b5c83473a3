"""Padding layers: constant (zero), reflection, replication and circular, 1-3 dims."""
from ember.nn.modules.module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
           "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]


def _pad(input, pad, mode, value=None):
    from ember.ops.shape import pad as _shape_pad
    return _shape_pad(input, pad, mode=mode, value=value)


def _padding(padding, nd):
    """An int repeated to (left, right, ...) for ``nd`` dims; a tuple as given."""
    if isinstance(padding, int):
        return (padding,) * (2 * nd)
    return tuple(padding)


class _ConstantPadNd(Module):
    _nd = 1

    def __init__(self, padding, value):
        super().__init__()
        self.padding = _padding(padding, self._nd)
        self.value = value

    def forward(self, input):
        return _pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value``: ``padding`` is an int or (left, right)."""
    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with ``value``: (left, right, top, bottom)."""
    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with ``value``: (left, right, top, bottom, front, back)."""
    _nd = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dims with zeros: ``padding`` is an int or (left, right, top, bottom).

    Example::

        >>> ember.nn.ZeroPad2d((1, 1, 2, 0))(ember.ones(1, 1, 3, 3)).shape
        ember.Size([1, 1, 5, 5])
    """

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last three dims with zeros."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class _ModePadNd(Module):
    _nd = 1
    _mode = "reflect"

    def __init__(self, padding):
        super().__init__()
        self.padding = _padding(padding, self._nd)

    def forward(self, input):
        return _pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_ModePadNd):
    """Pad the last dim with its reflection (the edge value not repeated)."""
    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_ModePadNd):
    """Pad the last two dims with their reflection."""
    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_ModePadNd):
    """Pad the last three dims with their reflection."""
    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_ModePadNd):
    """Pad the last dim by repeating its edge value."""
    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_ModePadNd):
    """Pad the last two dims by repeating their edge values."""
    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_ModePadNd):
    """Pad the last three dims by repeating their edge values."""
    _nd, _mode = 3, "replicate"


class _CircularPadNd(_ModePadNd):
    _mode = "circular"

    def forward(self, input):
        n = self._nd
        if input.dim() not in (n + 1, n + 2):
            raise ValueError(f"expected {n + 1}D or {n + 2}D input (got {input.dim()}D input)")
        return _pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    """Pad the last dim by wrapping around."""
    _nd = 1


class CircularPad2d(_CircularPadNd):
    """Pad the last two dims by wrapping around."""
    _nd = 2


class CircularPad3d(_CircularPadNd):
    """Pad the last three dims by wrapping around."""
    _nd = 3
