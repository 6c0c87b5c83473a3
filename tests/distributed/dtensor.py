"""Run under ``mpiexec -n 4``: DeviceMesh, DTensor and the functional collectives on a
2x2 mesh. Each rank also builds torch's DeviceMesh and DTensor for its own rank over
torch's single-process "fake" process group (which lays data out without moving it), and
ember's local pieces, shapes, offsets, coordinates and groups must equal torch's. Rank 0
prints ``OK <name>`` per check; failures raise."""
import numpy as np
import torch
import torch.distributed as tdist
from torch.distributed.device_mesh import init_device_mesh as t_init_device_mesh
from torch.distributed.tensor import Partial as TPartial
from torch.distributed.tensor import Replicate as TReplicate
from torch.distributed.tensor import Shard as TShard
from torch.distributed.tensor import distribute_tensor as t_distribute_tensor
from torch.distributed.tensor._utils import (
    compute_local_shape_and_global_offset as t_local_shape,
)
from torch.testing._internal.distributed.fake_pg import FakeStore

import ember
import ember.distributed as dist
from ember.distributed import _functional_collectives as funcol
from ember.distributed.device_mesh import init_device_mesh
from ember.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from ember.distributed.tensor._utils import compute_local_shape_and_global_offset

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 4, world
tdist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)


def ok(name):
    dist.barrier()
    if rank == 0:
        print(f"OK {name}", flush=True)


def same(got, want, what):
    g, w = got.numpy(), want.numpy()
    assert g.shape == w.shape and g.dtype == w.dtype and np.array_equal(g, w), \
        f"rank {rank} {what}: {g} vs {w}"


mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
tmesh = t_init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
assert mesh.mesh.tolist() == tmesh.mesh.tolist() and mesh.shape == tuple(tmesh.shape)
assert mesh.get_coordinate() == list(tmesh.get_coordinate())
for d in ("dp", "tp"):
    assert mesh.get_local_rank(d) == tmesh.get_local_rank(d)
    assert mesh[d].mesh.tolist() == tmesh[d].mesh.tolist()
    assert dist.get_process_group_ranks(mesh.get_group(d)) == \
        tdist.get_process_group_ranks(tmesh.get_group(d))
assert mesh.size() == 4 and mesh.size(1) == 2 and mesh.ndim == 2
ok("device_mesh")

T = {Shard: TShard, Replicate: TReplicate}
x = np.arange(5 * 7, dtype=np.float32).reshape(5, 7)
LAYOUTS = [(Shard(0), Shard(1)), (Shard(0), Shard(0)), (Shard(1), Shard(1)),
           (Replicate(), Shard(1)), (Shard(1), Replicate()), (Replicate(), Replicate()),
           (Shard(-1), Shard(0))]


def torch_of(placements):
    return [TShard(p.dim) if isinstance(p, Shard) else TReplicate() for p in placements]


for placements in LAYOUTS:
    d = distribute_tensor(ember.tensor(x), mesh, placements)
    t = t_distribute_tensor(torch.tensor(x), tmesh, torch_of(placements), src_data_rank=None)
    same(d.to_local(), t.to_local(), f"local of {placements}")
    assert tuple(d.shape) == tuple(t.shape) and d.placements == tuple(
        Shard(p.dim) if isinstance(p, TShard) else Replicate() for p in t.placements)
    assert compute_local_shape_and_global_offset((5, 7), mesh, d.placements) == \
        t_local_shape((5, 7), tmesh, t.placements)
    same(d.full_tensor(), ember.tensor(x), f"full_tensor of {placements}")
    for target in LAYOUTS:
        r = d.redistribute(mesh, target)
        t2 = t_distribute_tensor(torch.tensor(x), tmesh, torch_of(target), src_data_rank=None)
        same(r.to_local(), t2.to_local(), f"{placements} -> {target}")
ok("distribute_redistribute")

# Partial: each rank's value is a summand (max: a candidate) of the tensor
mine = ember.arange(3.0) + 10 * rank
p = DTensor.from_local(mine, mesh, [Partial(), Replicate()])
same(p.full_tensor(), ember.arange(3.0) * 2 + 10 * (rank % 2) + 10 * (rank % 2 + 2),
     "partial sum over dp")
pm = DTensor.from_local(mine, mesh, [Replicate(), Partial("max")])
same(pm.full_tensor(), ember.arange(3.0) + 10 * (2 * (rank // 2) + 1), "partial max over tp")
back = DTensor.from_local(ember.ones(2, 4), mesh, [Shard(0), Shard(1)])
assert tuple(back.shape) == (4, 8)
try:
    back + 1
    raise AssertionError("an operation on a DTensor must raise")
except TypeError:
    pass
try:
    back.sum()
    raise AssertionError("an operation on a DTensor must raise")
except NotImplementedError as e:
    assert "DTensor.sum" in str(e)
assert isinstance(TPartial(), TPartial)  # torch's names exist as ember's do
ok("partial_from_local")

v = ember.arange(4.0) + rank
same(funcol.all_reduce(v, "sum", (mesh, 1)),
     ember.arange(4.0) * 2 + (rank // 2) * 4 + 1, "all_reduce over tp")
same(funcol.all_gather_tensor(v, 0, (mesh, 0)),
     ember.cat([ember.arange(4.0) + rank % 2, ember.arange(4.0) + rank % 2 + 2]),
     "all_gather over dp")
same(funcol.reduce_scatter_tensor(v, "sum", 0, (mesh, 1)),
     (ember.arange(4.0) * 2 + (rank // 2) * 4 + 1).chunk(2)[rank % 2],
     "reduce_scatter over tp")
same(funcol.wait_tensor(v), v, "wait_tensor")
ok("functional_collectives")
dist.destroy_process_group()
