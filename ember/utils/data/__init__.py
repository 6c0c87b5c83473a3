"""Data loading: datasets, samplers, collation and the DataLoader."""
from ember.utils.data._collate import default_collate, default_convert
from ember.utils.data._worker import WorkerInfo, get_worker_info
from ember.utils.data.dataloader import DataLoader
from ember.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from ember.utils.data.sampler import (
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = ["DataLoader", "Dataset", "IterableDataset", "TensorDataset", "StackDataset",
           "ConcatDataset", "ChainDataset", "Subset", "random_split", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "DistributedSampler", "default_collate", "default_convert",
           "get_worker_info", "WorkerInfo"]
from ember.utils.data.datapipes import *  # noqa: E402,F401,F403
from ember.utils.data.datapipes import __all__ as _datapipes_all  # noqa: E402

__all__ += _datapipes_all
