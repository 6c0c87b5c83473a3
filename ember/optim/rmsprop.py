"""RMSprop."""
import numpy as np

from ember.optim.optimizer import (
    Optimizer,
    _check_flags,
    _check_lr,
    _grad_of,
    _lerp_,
    _scalar_tensor,
    _value,
    _zeros_like,
)

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""RMSprop, as ``torch.optim.RMSprop``.

    For each parameter, with gradient :math:`g` (negated when ``maximize``)::

        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - ga * ga) + eps     with ga = alpha * ga + (1 - alpha) * g (centered)
        avg = sqrt(v) + eps               (otherwise)
        b = momentum * b + g / avg;  p = p - lr * b      (momentum > 0)
        p = p - lr * g / avg                              (otherwise)

    State: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0), ``grad_avg``
    (centered).

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-2).
        alpha (float): smoothing constant (default: 0.99).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): L2 penalty (default: 0).
        momentum (float): momentum factor (default: 0).
        centered (bool): normalize by the estimated variance of the gradient (default: False).
        maximize (bool): maximize the objective (default: False).
        capturable, foreach: accepted for compatibility; ember has one implementation.
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    _scalar_state = ("step",)

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        _check_flags(differentiable)
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                    "centered": centered, "weight_decay": weight_decay,
                    "capturable": capturable, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)

    def step(self, closure=None):
        """Perform a single optimization step; ``closure`` re-evaluates the loss."""
        return self._run_step(closure)

    def _step_group(self, group):
        lr = _value(group["lr"])
        alpha, eps, momentum = group["alpha"], group["eps"], group["momentum"]
        wd, centered, maximize = group["weight_decay"], group["centered"], group["maximize"]
        for p in group["params"]:
            if p._grad is None:
                continue
            state = self.state[p]
            if len(state) == 0:
                state["step"] = _scalar_tensor(0.0)
                state["square_avg"] = _zeros_like(p)
                if momentum > 0:
                    state["momentum_buffer"] = _zeros_like(p)
                if centered:
                    state["grad_avg"] = _zeros_like(p)
            state["step"]._data += 1
            pd, g = p._data, _grad_of(p, maximize)
            if wd != 0:
                g = g + wd * pd
            touched = [state["step"], state["square_avg"], p]
            v = state["square_avg"]._data
            v *= alpha
            avg = np.multiply(g, g)
            avg *= 1 - alpha
            v += avg
            if centered:
                ga = state["grad_avg"]
                _lerp_(ga._data, g, 1 - alpha)
                touched.append(ga)
                np.multiply(ga._data, ga._data, out=avg)
                np.subtract(v, avg, out=avg)
                np.sqrt(avg, out=avg)
            else:
                np.sqrt(v, out=avg)
            avg += eps
            np.divide(g, avg, out=avg)
            if momentum > 0:
                buf = state["momentum_buffer"]
                buf._data *= momentum
                buf._data += avg
                touched.append(buf)
                np.multiply(buf._data, lr, out=avg)
            else:
                avg *= lr
            pd -= avg
            for t in touched:
                t._vc[0] += 1
