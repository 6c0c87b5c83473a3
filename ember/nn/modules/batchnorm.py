"""``torch.nn.modules.batchnorm``: the batch normalization layers (defined in
``normalization``) under torch's module path."""
from ember.nn.modules.lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d  # noqa: F401
from ember.nn.modules.normalization import (  # noqa: F401
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    _BatchNorm,
    _NormBase,
)
from ember.nn.modules.sync_batchnorm import SyncBatchNorm  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]

