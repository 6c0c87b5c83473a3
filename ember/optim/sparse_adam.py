"""SparseAdam: Adam's moments and update at the entries a sparse gradient holds."""
import math

import numpy as np

from ember._tensor import Tensor
from ember.optim.optimizer import Optimizer, _value, _zeros_like

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    r"""Adam for sparse gradients, as ``torch.optim.SparseAdam``.

    Each parameter (dense) takes sparse COO gradients; only the entries a gradient holds
    (after ``coalesce``) move: with ``g`` those values and ``m``, ``v`` the moments
    there::

        m += (1 - beta1) * (g - m);  v += (1 - beta2) * (g * g - v)
        p -= lr * sqrt(1 - beta2**t) / (1 - beta1**t) * m / (sqrt(v) + eps)

    The state of each parameter is ``step`` (a Python int, as in PyTorch),
    ``exp_avg`` and ``exp_avg_sq``. A dense gradient raises ``RuntimeError`` at the
    step; sparse or complex parameters raise ``ValueError`` here.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-3).
        betas (tuple[float, float]): running average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        maximize (bool): maximize the objective (default: False).

    Example::

        >>> p = ember.zeros(5, 3, requires_grad=True)
        >>> opt = ember.optim.SparseAdam([p], lr=0.1)
        >>> p.grad = ember.sparse_coo_tensor([[0, 2]], ember.ones(2, 3), (5, 3))
        >>> opt.step()    # rows 0 and 2 move, the others stay
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize}
        super().__init__(params, defaults)
        sparse, complex_ = [], []
        for index, group in enumerate(self.param_groups):
            for d_index, p in enumerate(group["params"]):
                if p.is_sparse:
                    sparse.append([index, d_index])
                if p.is_complex():
                    complex_.append([index, d_index])
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense "
                             "parameter tensors")
        if complex_:
            raise ValueError(f"Complex params at indices {complex_}: SparseAdam does not "
                             "support complex parameters")

    def _step_group(self, group):
        beta1, beta2 = group["betas"]
        eps, maximize = group["eps"], group.get("maximize", False)
        lr = group["lr"]
        # a Tensor lr keeps its dtype in the step size, as PyTorch's 0-d tensor does
        lr = lr._data.reshape(())[()] if isinstance(lr, Tensor) else _value(lr)
        updates = []
        for p in group["params"]:
            if p._grad is None:
                continue
            if not p._grad.is_sparse:
                raise RuntimeError("SparseAdam does not support dense gradients, please "
                                   "consider Adam instead")
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = _zeros_like(p)
                state["exp_avg_sq"] = _zeros_like(p)
            state["step"] += 1
            updates.append((p, state))
        for p, state in updates:
            grad = p._grad.coalesce()  # the update is not linear: indices must be unique
            values = grad._values()._data
            if values.size == 0:
                continue
            if maximize:
                values = -values
            at = tuple(grad._indices()._data)
            m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
            old_m, old_v = m[at], v[at]
            dm = (values - old_m) * (1 - beta1)
            m[at] += dm
            dv = (values ** 2 - old_v) * (1 - beta2)
            v[at] += dv
            numer = dm + old_m
            denom = np.sqrt(dv + old_v) + eps
            step = state["step"]
            step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
            p._data[at] += -step_size * (numer / denom)
            for t in (p, state["exp_avg"], state["exp_avg_sq"]):
                t._vc[0] += 1
