"""Numerical integration by the trapezoid rule, as composites of ember ops:
``trapezoid``, ``trapz``, ``cumulative_trapezoid``."""
from ember._factory import zeros
from ember.ops.scan import diff

__all__ = ["trapezoid", "trapz", "cumulative_trapezoid"]


def _trap_dx(y, x, dx, dim):
    if x is None:
        return dx
    if x.ndim == 1:
        shape = [1] * y.ndim
        shape[dim] = -1
        return diff(x).reshape(shape)
    return diff(x, dim=dim)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along ``dim`` (spacing ``dx``, default 1, or samples ``x``)."""
    dim = dim % y.ndim if y.ndim else 0
    if y.shape[dim] == 0:
        return zeros(y.shape[:dim] + y.shape[dim + 1:], dtype=y.dtype)
    left = y.narrow(dim, 0, y.shape[dim] - 1)
    right = y.narrow(dim, 1, y.shape[dim] - 1)
    d = _trap_dx(y, x, 1 if dx is None else dx, dim)
    return ((left + right) * d).sum(dim) / 2


def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of ``trapezoid``."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integral along ``dim`` (one element shorter)."""
    dim = dim % y.ndim if y.ndim else 0
    n = y.shape[dim]
    if n == 0:
        return y
    left = y.narrow(dim, 0, n - 1)
    right = y.narrow(dim, 1, n - 1)
    d = _trap_dx(y, x, 1 if dx is None else dx, dim)
    return ((left + right) * d / 2).cumsum(dim)
