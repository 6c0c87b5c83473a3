"""``torch.distributed._functional_collectives``: collectives that return new tensors
instead of writing into their arguments.

ember's collectives finish before they return, so the tensors these give are complete
and ``wait_tensor`` has nothing left to wait for. ``group`` may be a process group, a
list of global ranks, a ``DeviceMesh`` of one dimension, or ``(mesh, mesh_dim)``.
"""
from ember.autograd.function import Function
from ember.distributed import _collectives as C

__all__ = ["wait_tensor", "all_reduce", "all_gather_tensor", "reduce_scatter_tensor",
           "all_to_all_single", "all_to_all_single_autograd", "broadcast"]

_OPS = {"sum": C.ReduceOp.SUM, "avg": C.ReduceOp.AVG, "max": C.ReduceOp.MAX,
        "min": C.ReduceOp.MIN, "product": C.ReduceOp.PRODUCT}


def _group(group):
    from ember.distributed import _pg
    from ember.distributed.device_mesh import DeviceMesh
    if isinstance(group, DeviceMesh):
        return group.get_group()
    if isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
        return group[0].get_group(group[1])
    if isinstance(group, list):
        return _pg.new_group(group)
    return group


def _op(op):
    return _OPS[op.lower()] if isinstance(op, str) else op


def wait_tensor(tensor):
    """``tensor`` itself: every collective here has completed when it returns."""
    return tensor


def all_reduce(self, reduceOp, group, tag=""):
    """The reduction of ``self`` over ``group`` (``reduceOp``: ``"sum"``, ``"avg"``, ...)."""
    out = self.detach().clone()
    C.all_reduce(out, _op(reduceOp), _group(group))
    return out


def all_gather_tensor(self, gather_dim, group, tag=""):
    """Every rank's ``self`` concatenated along ``gather_dim``."""
    from ember import cat
    g = _group(group)
    parts = [self.detach().clone() for _ in range(C.resolve(g).size())]
    C.all_gather(parts, self.detach().contiguous(), g)
    return cat(parts, dim=gather_dim)


def reduce_scatter_tensor(self, reduceOp, scatter_dim, group, tag=""):
    """This rank's equal piece (along ``scatter_dim``) of the reduction of ``self``."""
    g = _group(group)
    n = C.resolve(g).size()
    whole = all_reduce(self, reduceOp, g)
    rank = C.resolve(g).rank()
    return whole.chunk(n, scatter_dim)[rank].contiguous()


def all_to_all_single(self, output_split_sizes, input_split_sizes, group, tag=""):
    """Pieces of ``self`` (``input_split_sizes`` along dim 0) sent one to each rank; the
    pieces received, concatenated."""
    g = _group(group)
    n = C.resolve(g).size()
    if output_split_sizes is None:
        rows = self.shape[0] // n
        out_rows = rows * n
    else:
        out_rows = sum(output_split_sizes)
    out = self.new_empty((out_rows, *self.shape[1:]))
    C.all_to_all_single(out, self.detach().contiguous(), output_split_sizes,
                        input_split_sizes, g)
    return out


class _AllToAll(Function):
    @staticmethod
    def forward(ctx, x, out_sizes, in_sizes, group):
        ctx.sizes, ctx.group = (out_sizes, in_sizes), group
        return all_to_all_single(x, out_sizes, in_sizes, group)

    @staticmethod
    def backward(ctx, g):
        out_sizes, in_sizes = ctx.sizes
        # the gradient goes back the way the data came
        return all_to_all_single(g.contiguous(), in_sizes, out_sizes, ctx.group), None, \
            None, None


def all_to_all_single_autograd(self, output_split_sizes, input_split_sizes, group, tag=""):
    """:func:`all_to_all_single` that gradients flow back through."""
    return _AllToAll.apply(self, output_split_sizes, input_split_sizes, _group(group))


def broadcast(self, src, group, tag=""):
    """``self`` of global rank ``src`` on every rank of ``group``."""
    out = self.detach().clone()
    C.broadcast(out, src=src, group=_group(group))
    return out
