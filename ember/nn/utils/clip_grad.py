"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_``."""
import functools
import warnings

from ember import _core as ember
from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad
from ember.nn.utils._lazy import refuse_uninitialized

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_"]


def _no_grad(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with no_grad():
            return fn(*args, **kwargs)
    return wrapper


def _as_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


@_no_grad
def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of all ``tensors`` together, as if concatenated into one vector.

    ``foreach`` is accepted for compatibility (ember has one implementation).
    """
    tensors = _as_list(tensors)
    refuse_uninitialized(tensors, "get_total_norm")
    norm_type = float(norm_type)
    if not tensors:
        return ember.tensor(0.0)
    first_device = tensors[0].device
    norms = [ember.norm(g, norm_type) for g in tensors]
    total = ember.norm(ember.stack([n.to(first_device) for n in norms]), norm_type)
    if error_if_nonfinite and bool(total.isnan() | total.isinf()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable this "
                           "error and scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    return total


@_no_grad
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients in place by ``min(1, max_norm / (total_norm + 1e-6))``."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.to(g.device))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradients of ``parameters`` in place so their total norm is at most
    ``max_norm``; returns the total norm before clipping."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of :func:`clip_grad_norm_`."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@_no_grad
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient in place to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        if p.grad is not None:
            p.grad.clamp_(min=-clip_value, max=clip_value)
