"""``torch.nn.parallel``: ``DataParallel`` (one device) and ``DistributedDataParallel``
(processes on MPI, see ``ember.distributed``)."""
from ember.nn.parallel.data_parallel import DataParallel, data_parallel
from ember.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DataParallel", "data_parallel", "DistributedDataParallel"]
