"""``torch.distributed.algorithms``: the ``Join`` interface for uneven inputs."""
from ember.distributed.algorithms.join import Join, Joinable, JoinHook

__all__ = ["Join", "Joinable", "JoinHook"]
