"""Helpers shared by the distributions: broadcasting parameters, probabilities and
logits, clamping, and the cached property used for derived parameters."""
import numbers

import numpy as np

from ember import _core as ember

__all__ = ["broadcast_all", "logits_to_probs", "probs_to_logits", "clamp_probs",
           "lazy_property", "tril_matrix_to_vec", "vec_to_tril_matrix"]

euler_constant = 0.57721566490153286060


def broadcast_all(*values):
    """Broadcast tensors and Python numbers to one shape; numbers become tensors of the
    first tensor's dtype (the default dtype when there is none)."""
    if not all(isinstance(v, ember.Tensor) or isinstance(v, numbers.Number) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    if not all(isinstance(v, ember.Tensor) for v in values):
        ref = next((v for v in values if isinstance(v, ember.Tensor)), None)
        dtype = ref.dtype if ref is not None else ember.get_default_dtype()
        values = [v if isinstance(v, ember.Tensor) else ember.tensor(v, dtype=dtype)
                  for v in values]
    return ember.broadcast_tensors(*values)


def _finfo(tensor):
    return ember.finfo(tensor.dtype)


def clamp_probs(probs):
    """Clamp probabilities into the open interval (0, 1) by the dtype's epsilon."""
    eps = _finfo(probs).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    """Logits to probabilities: sigmoid for binary events, softmax over the last dim."""
    if is_binary:
        return logits.sigmoid()
    return ember.softmax(logits, -1)


def probs_to_logits(probs, is_binary=False):
    """Probabilities to logits (clamped so that 0 and 1 give finite values)."""
    ps = clamp_probs(probs)
    if is_binary:
        return ps.log() - (-ps).log1p()
    return ps.log()


class lazy_property:
    """A property computed on first use and cached in the instance (how a distribution
    made from ``probs`` gets its ``logits`` and the other way round)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with ember.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


def tril_matrix_to_vec(mat, diag=0):
    """The lower triangle (from diagonal ``diag``) of the last two dims, row by row."""
    n = mat.shape[-1]
    rows, cols = np.tril_indices(n, diag)
    return mat[..., ember.tensor(rows), ember.tensor(cols)]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of ``tril_matrix_to_vec``."""
    m = vec.shape[-1]
    n = int(round((-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * m + 4 * abs(diag) *
                                      (diag + 1)) ** 0.5) / 2))
    rows, cols = np.tril_indices(n, diag)
    out = vec.new_zeros(tuple(vec.shape[:-1]) + (n, n))
    out[..., ember.tensor(rows), ember.tensor(cols)] = vec
    return out
