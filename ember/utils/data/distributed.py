"""``torch.utils.data.distributed``: ``DistributedSampler`` (defined with the other
samplers in ``ember.utils.data.sampler``)."""
from ember.utils.data.sampler import DistributedSampler

__all__ = ["DistributedSampler"]
