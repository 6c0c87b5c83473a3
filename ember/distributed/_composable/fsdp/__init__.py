"""``torch.distributed._composable.fsdp``: FSDP2's names, as ``ember.distributed.fsdp``
has them (``fully_shard`` raises: ember does not shard parameters)."""
from ember.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
)

__all__ = ["fully_shard", "FSDPModule", "CPUOffloadPolicy", "MixedPrecisionPolicy",
           "OffloadPolicy"]
