"""``DTensor``: a tensor laid out over a :class:`~ember.distributed.device_mesh.DeviceMesh`
by one placement per mesh dimension, and ``distribute_tensor``.

ember's DTensor holds this rank's local tensor, its mesh, its placements and the global
shape, and moves data between placements with ember.distributed's collectives
(``redistribute``, ``full_tensor``). It does not run tensor operations on the
distributed value (PyTorch propagates each op's sharding): it is not an ``ember.Tensor``,
and any operation on it raises. ``to_local()`` gives the local tensor to compute with.
"""
from ember.distributed.tensor.placement_types import Partial, Replicate, Shard

__all__ = ["DTensor", "distribute_tensor"]


def _check_placements(mesh, placements):
    placements = tuple(placements)
    if len(placements) != mesh.ndim:
        raise ValueError(f"`placements` must have the same length as `device_mesh.ndim`! "
                         f"Found placements length: {len(placements)}, and "
                         f"device_mesh.ndim: {mesh.ndim}.")
    for p in placements:
        if getattr(p, "split_factor", None) is not None:
            raise NotImplementedError("DTensor with a _StridedShard placement is not "
                                      "implemented in ember yet")
    return tuple(Shard(p.dim + 0) if isinstance(p, Shard) else p for p in placements)


def _normalize(placements, ndim):
    return tuple(Shard(p.dim + ndim) if isinstance(p, Shard) and p.dim < 0 else p
                 for p in placements)


class DTensor:
    """A distributed tensor: ``to_local()`` on each rank, ``placements`` on
    ``device_mesh``, and the global ``shape``. Build one with :meth:`from_local` or
    :func:`distribute_tensor`."""

    def __init__(self, *args, **kwargs):
        raise TypeError("build a DTensor with DTensor.from_local or distribute_tensor")

    @classmethod
    def _make(cls, local, mesh, placements, shape):
        self = object.__new__(cls)
        self._local_tensor, self.device_mesh = local, mesh
        self.placements, self._shape = tuple(placements), tuple(shape)
        return self

    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False,
                   shape=None, stride=None):
        """The DTensor whose piece on this rank is ``local_tensor`` (every rank calls it).
        Without ``shape`` the global shape is worked out from the local shapes, which
        must then be those of an even split."""
        from ember.distributed.device_mesh import DeviceMesh
        if device_mesh is None:
            raise RuntimeError("DTensor.from_local needs a device_mesh in ember (no default "
                               "mesh is kept)")
        if not isinstance(device_mesh, DeviceMesh):
            raise TypeError(f"device_mesh must be a DeviceMesh, got {type(device_mesh)}")
        placements = _normalize(_check_placements(
            device_mesh, placements or [Replicate()] * device_mesh.ndim), local_tensor.dim())
        if shape is None:
            shape = list(local_tensor.shape)
            for i, p in enumerate(placements):
                if isinstance(p, Shard):
                    shape[p.dim] *= device_mesh.size(i)
        if run_check:
            from ember import distributed as dist
            for i, p in enumerate(placements):
                if isinstance(p, Replicate):
                    first = local_tensor.detach().clone()
                    dist.broadcast(first, group_src=0, group=device_mesh.get_group(i))
                    local_tensor = first
        return DTensor._make(local_tensor, device_mesh, placements, shape)

    def to_local(self, *, grad_placements=None):
        """This rank's piece (the tensor itself: gradients reach it)."""
        return self._local_tensor

    def full_tensor(self, *, grad_placements=None):
        """The whole tensor on every rank (gathered and reduced by collectives)."""
        return self.redistribute(self.device_mesh,
                                 [Replicate()] * self.device_mesh.ndim).to_local()

    def redistribute(self, device_mesh=None, placements=None, *, async_op=False,
                     forward_dtype=None, backward_dtype=None):
        """The same tensor with ``placements`` on the same mesh: gathered to the whole
        value, then split or made partial again as asked. Not differentiable in ember."""
        mesh = device_mesh or self.device_mesh
        if mesh != self.device_mesh:
            raise NotImplementedError("DTensor.redistribute to another mesh is not "
                                      "implemented in ember yet")
        placements = _normalize(_check_placements(mesh, placements), len(self._shape))
        whole = _gather(self._local_tensor, mesh, self.placements, self._shape)
        return DTensor._make(_split(whole, mesh, placements), mesh, placements, self._shape)

    # ---- metadata ----------------------------------------------------------------------
    @property
    def shape(self):
        from ember import Size
        return Size(self._shape)

    def size(self, dim=None):
        return self.shape if dim is None else self._shape[dim]

    def dim(self):
        return len(self._shape)

    ndim = property(dim)

    @property
    def dtype(self):
        return self._local_tensor.dtype

    @property
    def device(self):
        return self._local_tensor.device

    @property
    def requires_grad(self):
        return self._local_tensor.requires_grad

    def __repr__(self):
        return (f"DTensor(local_tensor={self._local_tensor!r}, device_mesh={self.device_mesh},"
                f" placements={self.placements})")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(
            f"DTensor.{name} is not implemented in ember yet: ember's DTensor does not run "
            "operations on the distributed value; use to_local() or full_tensor()")


def _sizes_along(shape, mesh, placements, upto):
    """The global shape cut by the shards of mesh dims before ``upto`` (this rank's)."""
    coordinate = mesh.get_coordinate()
    shape = list(shape)
    for i in range(upto):
        p = placements[i]
        if isinstance(p, Shard):
            shape[p.dim] = Shard.local_shard_size_and_offset(shape[p.dim], mesh.size(i),
                                                             coordinate[i])[0]
    return shape


def _gather(local, mesh, placements, shape):
    """The whole tensor from each rank's piece: mesh dims undone last to first."""
    from ember import cat, nn
    from ember import distributed as dist
    t = local.detach()
    for i in range(mesh.ndim - 1, -1, -1):
        p, group = placements[i], mesh.get_group(i)
        if isinstance(p, Partial):
            t = t.clone()
            op = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG,
                  "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[p.reduce_op]
            dist.all_reduce(t, op=op, group=group)
        elif isinstance(p, Shard):
            n = mesh.size(i)
            full = _sizes_along(shape, mesh, placements, i)[p.dim]
            sizes = [Shard.local_shard_size_and_offset(full, n, r)[0] for r in range(n)]
            pad = [0, 0] * (t.dim() - 1 - p.dim) + [0, max(sizes) - t.shape[p.dim]]
            padded = nn.functional.pad(t, pad).contiguous()
            parts = [padded.clone() for _ in range(n)]
            dist.all_gather(parts, padded, group=group)
            t = cat([q.narrow(p.dim, 0, s) for q, s in zip(parts, sizes)], dim=p.dim)
    return t


def _split(whole, mesh, placements):
    """This rank's piece of ``whole`` under ``placements`` (mesh dims first to last)."""
    coordinate = mesh.get_coordinate()
    t = whole
    for i, p in enumerate(placements):
        if isinstance(p, Shard):
            size, start = Shard.local_shard_size_and_offset(t.shape[p.dim], mesh.size(i),
                                                            coordinate[i])
            t = t.narrow(p.dim, start, size)
        elif isinstance(p, Partial):
            if p.reduce_op not in ("sum", "avg"):
                t = t.clone()  # max/min of equal copies is the value itself
            elif coordinate[i] != 0 and p.reduce_op == "sum":
                t = t * 0  # the value lives on the first rank of the dim; the others add 0
    return t.contiguous()


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0):
    """Lay ``tensor`` (the whole value, the same on every rank; ``src_data_rank``'s copy
    is broadcast first) out on ``device_mesh`` by ``placements`` (default: replicated)."""
    from ember import distributed as dist
    if device_mesh is None:
        raise RuntimeError("distribute_tensor needs a device_mesh in ember (no default mesh "
                           "is kept)")
    placements = _normalize(_check_placements(
        device_mesh, placements or [Replicate()] * device_mesh.ndim), tensor.dim())
    whole = tensor.detach()
    if src_data_rank is not None:
        whole = whole.clone().contiguous()
        dist.broadcast(whole, src=src_data_rank)
    local = _split(whole, device_mesh, placements)
    if tensor.requires_grad:
        local = local.detach().requires_grad_()
    return DTensor._make(local, device_mesh, placements, tensor.shape)
