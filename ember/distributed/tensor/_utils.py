"""``torch.distributed.tensor._utils``: where this rank's piece of a sharded tensor lies."""
from ember.distributed.tensor.placement_types import Shard

__all__ = ["compute_local_shape_and_global_offset"]


def compute_local_shape_and_global_offset(global_shape, mesh, placements, skip_offset=False):
    """(local shape, global offset) of this rank's piece of a tensor of ``global_shape``
    laid out on ``mesh`` by ``placements``; ``((0,), ())`` for a rank outside the mesh."""
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return (0,), ()
    shape = list(global_shape)
    offset = [0] * len(shape)
    for i, p in enumerate(placements):
        if isinstance(p, Shard):
            if getattr(p, "split_factor", None) is not None:
                raise NotImplementedError("compute_local_shape_and_global_offset of a "
                                          "_StridedShard placement is not implemented in "
                                          "ember yet")
            size, start = Shard.local_shard_size_and_offset(shape[p.dim], mesh.size(i),
                                                             coordinate[i])
            shape[p.dim] = size
            offset[p.dim] += start
    return tuple(shape), (() if skip_offset else tuple(offset))
