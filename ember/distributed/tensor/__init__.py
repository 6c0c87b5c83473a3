"""``torch.distributed.tensor``: :class:`DTensor` (a tensor laid out over a device mesh),
its placements and ``distribute_tensor``; see ``_api`` for what ember's DTensor does and
does not do."""
from ember.distributed.device_mesh import DeviceMesh, init_device_mesh
from ember.distributed.tensor._api import DTensor, distribute_tensor
from ember.distributed.tensor.placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "distribute_tensor", "DeviceMesh", "init_device_mesh", "Shard",
           "Replicate", "Partial", "Placement", "distribute_module"]


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None,
                      output_fn=None):
    """Not implemented in ember: its parameters would become DTensors, on which ember runs
    no operations."""
    raise NotImplementedError("torch.distributed.tensor.distribute_module is not implemented "
                              "in ember yet (ember's DTensor runs no operations)")


def __getattr__(name):
    from ember.compat import missing_attribute
    raise missing_attribute(__name__, name)
