"""Variance and standard deviation: ``var``, ``std``, ``var_mean``, ``std_mean``.

Computed in two passes (the mean, then the centred squares), with float32 statistics
redone in double where float32 overflows, as PyTorch accumulates them.
"""
import builtins
import math

import numpy as np

from ember._tensor import Tensor
from ember.autograd.node import Primitive
from ember.backend import array_module
from ember.ops import _batch, _jvp
from ember.ops._util import follows_int_reads, opmath, with_out
from ember.ops.reduction import Mean, _axes, _keep, _restore, mean

__all__ = ["std", "var", "std_mean", "var_mean"]


def _two_pass_var(x, axes, correction, keepdim, n):
    centred = x - x.mean(axis=axes, keepdims=True)
    # the divisor is clipped at 0, as PyTorch's (so too few elements give inf or NaN)
    return (centred * centred).sum(axis=axes, keepdims=keepdim) / \
        x.dtype.type(builtins.max(n - correction, 0))


def _stat_mean(input, axes, keepdim):
    """The mean beside var_mean's and std_mean's statistic, as PyTorch's running (Welford)
    update gives it: in double for float32 (a sum that overflows float32 does not make
    it infinite), and NaN once an infinite element is followed by any other (the next
    update subtracts the infinite mean from it)."""
    m = mean(input, axes, keepdim)
    d = m._data
    xp = array_module(d)
    if d.dtype.kind != "f" or xp.isfinite(d).all():
        return m
    m._data = _stat_mean_fix(d, input._data, axes, keepdim)
    return m


def _stat_mean_fix(d, x, axes, keepdim):
    """:func:`_stat_mean`'s correction of a mean ``d`` that is not finite (a new array)."""
    xp = array_module(d)
    if d.dtype == np.float32:
        d = xp.asarray(x.astype(np.float64).mean(axis=axes, keepdims=keepdim), np.float32)
    else:
        d = xp.array(d)
    last = xp.ones((), dtype=bool)
    for a in axes:
        shape = [1] * x.ndim
        shape[a] = x.shape[a]
        last = last & (xp.arange(x.shape[a]) == x.shape[a] - 1).reshape(shape)
    d[(xp.isinf(x) & ~last).any(axis=axes, keepdims=keepdim)] = np.nan
    return d


class _VarStd(Primitive):
    save_inputs = (0,)
    batch = _batch.dim_rule(1)

    @opmath
    def forward(self, x, axes, correction, keepdim):
        if x.dtype.kind != "f":
            raise RuntimeError("std and var only support floating point and complex dtypes")
        n = math.prod(x.shape[a] for a in axes)
        self.meta = (x.shape, axes, keepdim, n - correction)
        if n == 0:
            v = array_module(x).full_like(x.sum(axis=axes, keepdims=keepdim), np.nan)
        else:
            v = self.finish(_two_pass_var(x, axes, correction, keepdim, n))
            if x.dtype == np.float32 and not array_module(v).isfinite(v).all():
                # PyTorch accumulates float32 statistics in double: squares of large
                # values that overflow float32 stay finite there (and so does their root)
                v = _two_pass_var(x.astype(np.float64), axes, correction, keepdim, n)
                v = self.finish(v).astype(np.float32)
            return v
        return self.finish(v)

    def _var_backward(self, gy, x):
        in_shape, axes, keepdim, dof = self.meta
        scale = 2.0 / dof if dof != 0 else math.copysign(math.inf, dof)
        centred = x - x.mean(axes, keepdim=True)
        return _keep(gy, in_shape, axes, keepdim) * centred * scale

    def jvp(self, t, *_):
        return _jvp.reduced(self, t, self.meta[1], self.meta[2])


class _Var(_VarStd):
    _node_name = "VarBackward0"

    @staticmethod
    def finish(v):
        return v

    def backward(self, gy):
        x, = self.saved_tensors
        return self._var_backward(gy, x), None, None, None


class _Std(_VarStd):
    _node_name = "StdBackward0"
    save_output = True

    @staticmethod
    def finish(v):
        return np.sqrt(v)

    def backward(self, gy):
        x, y = self.saved_tensors
        g_var = (gy / (y * 2)).masked_fill(y == 0, 0.0)
        return self._var_backward(g_var, x), None, None, None


class _StatMean(_VarStd):
    """``(statistic, mean)`` in one node, as PyTorch's ``var_mean``/``std_mean``; the
    mean as :func:`_stat_mean` gives it."""
    n_outputs = 2

    def forward(self, x, axes, correction, keepdim):
        v = _VarStd.forward(self, x, axes, correction, keepdim)
        m = object.__new__(Mean).forward(x, axes, keepdim, None)
        if not array_module(m).isfinite(m).all():
            m = _stat_mean_fix(array_module(m).asarray(m), x, axes, keepdim)
        return v, m

    def backward(self, g_stat, g_mean):
        x, = self.saved_tensors
        in_shape, axes, keepdim, _ = self.meta
        g = None if g_stat is None else self.stat_backward(g_stat, x)
        if g_mean is not None:
            n = math.prod(in_shape[a] for a in axes)
            part = _restore(g_mean / n, in_shape, axes, keepdim)
            g = part if g is None else g + part
        return g, None, None, None

    def jvp(self, t, *_):
        if t is None:
            return None, None
        x = self.fw_inputs[0].detach()
        _, axes, keepdim, dof = self.meta
        scale = 2.0 / dof if dof != 0 else math.copysign(math.inf, dof)
        t_var = ((x - x.mean(axes, keepdim=True)) * t).sum(axes, keepdim=keepdim) * scale
        return self.stat_tangent(t_var, x), t.mean(axes, keepdim=keepdim)


class _VarMean(_StatMean):
    _node_name = "VarMeanBackward0"
    finish = staticmethod(_Var.finish)

    def stat_backward(self, gy, x):
        return self._var_backward(gy, x)

    @staticmethod
    def stat_tangent(t_var, x):
        return t_var


class _StdMean(_StatMean):
    _node_name = "StdMeanBackward0"
    finish = staticmethod(_Std.finish)

    def _std(self, x):
        # the forward's standard deviation again, recorded under create_graph so that
        # second derivatives see it depend on x (a node with two outputs saves no output)
        _, axes, keepdim, dof = self.meta
        n = math.prod(x.shape[a] for a in axes)
        return _Std.apply(x, axes, n - dof, keepdim)

    def stat_backward(self, gy, x):
        y = self._std(x)
        return self._var_backward((gy / (y * 2)).masked_fill(y == 0, 0.0), x)

    def stat_tangent(self, t_var, x):
        y = self._std(x)
        return (t_var / (y * 2)).masked_fill(y == 0, 0.0)


def _var_args(op, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):  # var(input, unbiased)
        if unbiased is not None:
            raise TypeError(f"{op}(): unbiased given twice")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{op}: can't specify both correction and unbiased")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return _axes(input, dim), correction, keepdim


@with_out
@follows_int_reads
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """Variance over ``dim`` with ``correction`` (Bessel's, 1, by default; ``unbiased=False``
    means 0): ``sum((x - mean)**2) / (N - correction)``; of a complex input, the real
    variance of ``|x - mean|`` (that of the real part plus that of the imaginary part)."""
    if input.is_complex():
        return var(input.real, dim, unbiased, keepdim, correction=correction) + \
            var(input.imag, dim, unbiased, keepdim, correction=correction)
    return _Var.apply(input, *_var_args("var", input, dim, unbiased, keepdim, correction))


@with_out
@follows_int_reads
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """Standard deviation over ``dim``: ``sqrt(var(...))``; its gradient is 0 where it is 0."""
    if input.is_complex():
        return var(input, dim, unbiased, keepdim, correction=correction).sqrt()
    return _Std.apply(input, *_var_args("std", input, dim, unbiased, keepdim, correction))


@with_out
@follows_int_reads
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """``(var, mean)`` over ``dim``, as a tuple."""
    axes, c, keepdim = _var_args("var_mean", input, dim, unbiased, keepdim, correction)
    if input.is_complex():
        return var(input, dim, unbiased, keepdim, correction=correction), \
            _stat_mean(input, axes, keepdim)
    return _VarMean.apply(input, axes, c, keepdim)


@with_out
@follows_int_reads
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
    """``(std, mean)`` over ``dim``, as a tuple."""
    axes, c, keepdim = _var_args("std_mean", input, dim, unbiased, keepdim, correction)
    if input.is_complex():
        return std(input, dim, unbiased, keepdim, correction=correction), \
            _stat_mean(input, axes, keepdim)
    return _StdMean.apply(input, axes, c, keepdim)


Tensor.std = std
Tensor.var = var
