"""Stochastic gradient descent, optionally with (Nesterov) momentum."""

import numpy as np

from ember._tensor import _make
from ember.backend import axpy as _blas_axpy
from ember.backend import threads as _threads
from ember.optim import _one_pass
from ember.optim.optimizer import (
    Optimizer,
    _axpy,
    _check_flags,
    _check_lr,
    _split_update,
    _value,
)

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""Stochastic gradient descent (optionally with momentum), as ``torch.optim.SGD``.

    For each parameter, with gradient :math:`g` (negated when ``maximize``)::

        g = g + weight_decay * p
        b = g                                       (first step)
        b = momentum * b + (1 - dampening) * g      (later steps)
        g = g + momentum * b if nesterov else b
        p = p - lr * g

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-3).
        momentum (float): momentum factor (default: 0).
        dampening (float): dampening for momentum (default: 0).
        weight_decay (float): L2 penalty (default: 0).
        nesterov (bool): Nesterov momentum (default: False).
        maximize (bool): maximize the objective instead of minimizing (default: False).
        foreach, fused: accepted for compatibility; ember has one implementation.
        differentiable (bool): must be False (NotImplementedError otherwise).

    Example::

        >>> opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        >>> opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
    """

    _complex_as_real = False
    _fused_checks_new_state = False
    _setstate_defaults = {"nesterov": False, "maximize": False, "foreach": None,
                          "differentiable": False, "fused": False}

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        _check_lr(lr)
        # PyTorch's SGD checks `< 0` (a NaN passes), the other optimizers `not >= 0`
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _check_flags(defaults)
        super().__init__(params, defaults)

    def _step_group(self, group):
        if _one_pass.wanted(self) and type(self).apply_single is SGD.apply_single and \
                _one_pass.sgd_group(self, group, _value(group["lr"])):
            return  # (a compiled step: the plain case's loop, bookkeeping once per group)
        for p, g, state in self._grads(group, with_state=group["momentum"] != 0):
            self.apply_single(g, p._data, state, group)

    def apply_single(self, gradient, parameter, state, group):
        """Update one parameter in place, on arrays (MLX's ``apply_single``): ``gradient``
        after ``maximize`` and weight decay (as ``_grads`` yields it), ``parameter`` the
        parameter's array, ``state`` its state dict (None without momentum), ``group``
        its param group. ``step`` runs it for each parameter (so does a compiled training
        step); where numba is importable it runs the one-pass loop
        (``_one_pass.wanted``): the same values in one pass over memory, where it covers
        the case."""
        lr = _value(group["lr"])
        momentum, dampening, nesterov = group["momentum"], group["dampening"], group["nesterov"]
        g = gradient
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                # torch clones the gradient, which torch gives the parameter's strides
                b = np.empty_like(parameter)
                b[...] = g
                state["momentum_buffer"] = _make(b)
            else:
                b = buf._data
            if _one_pass.wanted(self) and dampening == 0 and not nesterov and \
                    _one_pass.sgd(parameter, g, b, momentum, lr, buf is not None):
                return
            if buf is not None and not (dampening == 0 and type(momentum) is float and
                                        _threads.get_num_threads() == 1 and
                                        _blas_axpy.scale_add(b, momentum, g)):
                # (scale_add: the two passes below as one, the same roundings, from BLAS;
                # at more threads the passes run in blocks on ember's pool instead)
                if dampening == 0 and b.dtype.kind != "c":
                    # elementwise: in blocks on the intra-op threads when large
                    _split_update(lambda b, g: _momentum(b, momentum, g), 2, b, g)
                else:
                    # (complex: PyTorch's add_ multiplies by alpha even at 1, and a
                    # product with an infinite part makes a NaN)
                    b *= momentum
                    _axpy(b, 1 - dampening, g, out=b)
            g = _axpy(g, momentum, b) if nesterov else b
        elif _one_pass.wanted(self) and _one_pass.sgd(parameter, g, None, 0, lr, False):
            return
        # one rounding for p - lr * g, as PyTorch's param.add_(g, alpha=-lr)
        _axpy(parameter, -lr, g, out=parameter)


def _momentum(b, momentum, g):
    """``b = momentum * b + g`` in place (two roundings, as PyTorch's ``mul_`` then
    ``add_``)."""
    b *= momentum
    b += g
