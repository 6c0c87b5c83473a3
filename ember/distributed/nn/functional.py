"""Differentiable collectives (``torch.distributed.nn.functional``).

``all_reduce(x)`` with SUM returns a new tensor; its gradient is the all-reduced sum of
every rank's gradient, because every rank's output depends on every rank's input. This
is what ``SyncBatchNorm`` uses to share batch statistics.
"""
from ember.autograd.function import Function
from ember.distributed import _collectives as C

__all__ = ["all_reduce"]


class _AllReduceSum(Function):
    @staticmethod
    def forward(ctx, group, x):
        ctx.group = group
        y = x.clone()
        C.all_reduce(y, C.ReduceOp.SUM, group)
        return y

    @staticmethod
    def backward(ctx, gy):
        g = gy.clone()
        C.all_reduce(g, C.ReduceOp.SUM, ctx.group)
        return None, g


def all_reduce(tensor, op=C.ReduceOp.SUM, group=None):
    """The all-reduced ``tensor`` as a new tensor that gradients flow through (SUM only)."""
    if int(op) != int(C.ReduceOp.SUM):
        raise NotImplementedError("ember.distributed.nn.functional.all_reduce supports "
                                  "ReduceOp.SUM only")
    return _AllReduceSum.apply(group, tensor)
