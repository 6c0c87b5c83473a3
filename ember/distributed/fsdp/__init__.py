"""``torch.distributed.fsdp``: the names of fully sharded data parallelism.

ember does not shard parameters across ranks: wrapping a module in
:class:`FullyShardedDataParallel` or calling :func:`fully_shard` raises
NotImplementedError (``nn.parallel.DistributedDataParallel`` replicates instead). The
policy and option classes are plain records, so code that builds them or checks
``isinstance(module, FullyShardedDataParallel)`` runs.
"""
import enum
from dataclasses import dataclass

__all__ = ["FullyShardedDataParallel", "fully_shard", "FSDPModule", "CPUOffloadPolicy",
           "OffloadPolicy", "MixedPrecisionPolicy", "MixedPrecision", "CPUOffload",
           "ShardingStrategy", "BackwardPrefetch", "StateDictType"]

_WHY = ("is not implemented in ember yet: ember does not shard parameters across ranks "
        "(nn.parallel.DistributedDataParallel replicates them)")


class FullyShardedDataParallel:
    """FSDP's module wrapper; making one raises NotImplementedError in ember."""

    def __init__(self, module, *args, **kwargs):
        raise NotImplementedError(f"torch.distributed.fsdp.FullyShardedDataParallel {_WHY}")


class FSDPModule:
    """The class ``fully_shard`` mixes into a module (none exist in ember)."""


def fully_shard(module, *args, **kwargs):
    """FSDP2's ``fully_shard``; raises NotImplementedError in ember."""
    raise NotImplementedError(f"torch.distributed.fsdp.fully_shard {_WHY}")


@dataclass(frozen=True)
class OffloadPolicy:
    """No offloading."""


@dataclass(frozen=True)
class CPUOffloadPolicy(OffloadPolicy):
    """Offload sharded parameters to the CPU (a record: ember has no FSDP)."""
    pin_memory: bool = True


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    """FSDP2's mixed precision settings (a record: ember has no FSDP)."""
    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True


@dataclass
class MixedPrecision:
    """FSDP1's mixed precision settings (a record: ember has no FSDP)."""
    param_dtype: object = None
    reduce_dtype: object = None
    buffer_dtype: object = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True
    _module_classes_to_ignore: tuple = ()


@dataclass
class CPUOffload:
    """FSDP1's offload setting (a record: ember has no FSDP)."""
    offload_params: bool = False


class ShardingStrategy(enum.Enum):
    FULL_SHARD = enum.auto()
    SHARD_GRAD_OP = enum.auto()
    NO_SHARD = enum.auto()
    HYBRID_SHARD = enum.auto()
    _HYBRID_SHARD_ZERO2 = enum.auto()


class BackwardPrefetch(enum.Enum):
    BACKWARD_PRE = enum.auto()
    BACKWARD_POST = enum.auto()


class StateDictType(enum.Enum):
    FULL_STATE_DICT = enum.auto()
    LOCAL_STATE_DICT = enum.auto()
    SHARDED_STATE_DICT = enum.auto()


def __getattr__(name):
    from ember.compat import missing_attribute
    raise missing_attribute(__name__, name)
