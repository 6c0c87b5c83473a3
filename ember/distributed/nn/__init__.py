"""``torch.distributed.nn``: collectives that autograd can differentiate through."""
from ember.distributed.nn import functional

__all__ = ["functional"]
