"""AdamW: Adam with decoupled weight decay."""
from ember.optim.adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    r"""AdamW, as ``torch.optim.AdamW``: Adam whose weight decay shrinks the parameters
    directly (``p = p * (1 - lr * weight_decay)``) instead of entering the moments.

    Args:
        params (iterable): parameters or dicts defining parameter groups.
        lr (float or Tensor): learning rate (default: 1e-3).
        betas (tuple[float, float]): running average coefficients (default: (0.9, 0.999)).
        eps (float): added to the denominator (default: 1e-8).
        weight_decay (float): weight decay coefficient (default: 1e-2).
        amsgrad (bool): use the AMSGrad variant (default: False).
        maximize (bool): maximize the objective (default: False).
        foreach, capturable, fused: accepted for compatibility; ember has one implementation
            (``capturable=True`` needs parameters on an accelerator, as in PyTorch).
        differentiable (bool): must be False (NotImplementedError otherwise).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        # PyTorch: whatever was saved, AdamW's groups always decouple the weight decay
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
