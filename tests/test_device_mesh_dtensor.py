"""``torch.distributed.device_mesh``, ``torch.distributed.tensor`` (DTensor, placements),
``torch.distributed._functional_collectives``, the FSDP names and
``torch.distributed.algorithms.join`` against torch 2.13. The multi-rank checks run
``tests/distributed/dtensor.py`` under a real ``mpiexec -n 4`` (with a timeout)."""
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed.fsdp as tfsdp
from torch.distributed.tensor.placement_types import Shard as TShard

import ember.distributed.fsdp as efsdp
from ember.distributed._launch_env import mpiexec_command
from ember.distributed.algorithms.join import Join, Joinable
from ember.distributed.tensor import Partial, Replicate, Shard
from ember.distributed.tensor.placement_types import _StridedShard

ROOT = Path(__file__).resolve().parent.parent


def test_dtensor_on_a_two_by_two_mesh_of_four_ranks():
    env = {"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    p = subprocess.run(mpiexec_command(4) + [sys.executable,
                                             str(ROOT / "tests/distributed/dtensor.py")],
                       capture_output=True, text=True, timeout=240, cwd=str(ROOT),
                       env={**os.environ, **env})
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    for name in ("device_mesh", "distribute_redistribute", "partial_from_local",
                 "functional_collectives"):
        assert f"OK {name}" in out, out


@pytest.mark.parametrize("size", [0, 1, 3, 7, 8, 10, 13])
def test_shard_sizes_and_offsets_follow_torch_chunk(size):
    for n in (1, 2, 3, 4, 5):
        for r in range(n):
            assert Shard.local_shard_size_and_offset(size, n, r) == \
                TShard.local_shard_size_and_offset(size, n, r)


def test_placements_compare_and_print_as_torch():
    from torch.distributed.tensor import Partial as TP
    from torch.distributed.tensor import Replicate as TR
    for e, t in ((Shard(1), TShard(1)), (Replicate(), TR()), (Partial(), TP()),
                 (Partial("max"), TP("max"))):
        assert repr(e) == repr(t) and str(e) == str(t)
        assert e.is_shard() == t.is_shard() and e.is_replicate() == t.is_replicate()
        assert e.is_partial() == t.is_partial()
    assert Shard(0) == Shard(0) != Shard(1) and Replicate() == Replicate() != Partial()
    assert len({Shard(0), Shard(0), Replicate()}) == 2
    assert Shard(1).is_shard(1) and not Shard(1).is_shard(0)
    assert _StridedShard(0, split_factor=2) != Shard(0)


def test_fsdp_names_exist_and_wrapping_raises():
    for name in ("FullyShardedDataParallel", "fully_shard", "CPUOffloadPolicy",
                 "MixedPrecisionPolicy", "ShardingStrategy", "BackwardPrefetch",
                 "StateDictType", "MixedPrecision", "CPUOffload"):
        assert hasattr(tfsdp, name) and hasattr(efsdp, name), name
    for cls in ("CPUOffloadPolicy", "MixedPrecisionPolicy", "MixedPrecision", "CPUOffload"):
        ef = [f.name for f in dataclasses.fields(getattr(efsdp, cls))]
        tf = [f.name for f in dataclasses.fields(getattr(tfsdp, cls))]
        assert ef == tf, cls
    assert efsdp.CPUOffloadPolicy().pin_memory is tfsdp.CPUOffloadPolicy().pin_memory
    assert [s.name for s in efsdp.ShardingStrategy] == [s.name for s in tfsdp.ShardingStrategy]
    import ember
    with pytest.raises(NotImplementedError, match="FullyShardedDataParallel"):
        efsdp.FullyShardedDataParallel(ember.nn.Linear(2, 2))
    with pytest.raises(NotImplementedError, match="fully_shard"):
        efsdp.fully_shard(ember.nn.Linear(2, 2))
    from ember.distributed._composable.fsdp import fully_shard
    from ember.distributed.fsdp.fully_sharded_data_parallel import FullyShardedDataParallel
    assert fully_shard is efsdp.fully_shard
    assert FullyShardedDataParallel is efsdp.FullyShardedDataParallel


def test_reachable_as_attributes_as_in_torch():
    import torch

    import ember
    for name in ("device_mesh", "algorithms", "DeviceMesh", "init_device_mesh"):
        assert hasattr(torch.distributed, name) and hasattr(ember.distributed, name), name
    assert ember.distributed.DeviceMesh is ember.distributed.device_mesh.DeviceMesh
    assert ember.distributed.algorithms.Join is Join


def test_join_raises_instead_of_hanging():
    with pytest.raises(ValueError, match="at least one joinable"):
        Join([])
    with pytest.raises(NotImplementedError, match="Join"):
        with Join([object()]):
            pass
    with Join([object()], enable=False):
        pass
    with pytest.raises(TypeError):
        Joinable()  # abstract, as in torch


def test_modules_import_under_ember_run(tmp_path):
    # the import paths transformers and accelerate use
    code = ("import torch.distributed.tensor as t, torch.distributed.device_mesh as dm;"
            "from torch.distributed.tensor import DTensor, Shard, Replicate, Partial, "
            "distribute_tensor;"
            "from torch.distributed.tensor.placement_types import _StridedShard;"
            "from torch.distributed.tensor._utils import compute_local_shape_and_global_offset;"
            "from torch.distributed._functional_collectives import wait_tensor;"
            "from torch.distributed._composable.fsdp import fully_shard;"
            "from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy;"
            "from torch.distributed.algorithms.join import Join;"
            "from torch.nn.attention.flex_attention import BlockMask, create_block_mask;"
            "print(t.DTensor.__module__, dm.DeviceMesh.__module__)")
    prog = tmp_path / "imports.py"
    prog.write_text(code)
    p = subprocess.run([sys.executable, "-m", "ember", "run", str(prog)],
                       capture_output=True, text=True, timeout=120, cwd=str(ROOT),
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["ember.distributed.tensor._api",
                                "ember.distributed.device_mesh"]
