"""``torch.distributed.fsdp.fully_sharded_data_parallel``: FSDP1's module, as
``ember.distributed.fsdp`` has it (making one raises: ember does not shard parameters)."""
from ember.distributed.fsdp import (
    BackwardPrefetch,
    CPUOffload,
    FullyShardedDataParallel,
    MixedPrecision,
    ShardingStrategy,
    StateDictType,
)

__all__ = ["FullyShardedDataParallel", "ShardingStrategy", "BackwardPrefetch",
           "StateDictType", "MixedPrecision", "CPUOffload"]
