"""``torch.distributed.algorithms.join``: training with uneven inputs across ranks.

:class:`Joinable` and :class:`JoinHook` are the interfaces a participant implements.
ember's ``DistributedDataParallel`` is not joinable, so entering :class:`Join` raises
NotImplementedError rather than letting ranks with fewer batches hang.
"""
from abc import ABC, abstractmethod

__all__ = ["Join", "Joinable", "JoinHook"]


class JoinHook:
    """What a joined rank runs in place of its participant's collectives."""

    def main_hook(self):
        """Called for each iteration the joined rank shadows."""

    def post_hook(self, is_last_joiner):
        """Called once every rank has joined."""


class Joinable(ABC):
    """A participant of :class:`Join` (PyTorch's DDP and ZeroRedundancyOptimizer)."""

    @abstractmethod
    def __init__(self):
        super().__init__()

    @abstractmethod
    def join_hook(self, **kwargs):
        """The :class:`JoinHook` of this participant."""

    @property
    @abstractmethod
    def join_device(self):
        """The device of the join's collectives."""

    @property
    @abstractmethod
    def join_process_group(self):
        """The process group of the join's collectives."""


class Join:
    """Context manager shadowing the collectives of ranks that ran out of inputs."""

    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables, self._enable = joinables, enable

    def __enter__(self):
        if self._enable:
            raise NotImplementedError(
                "torch.distributed.algorithms.join.Join is not implemented in ember yet "
                "(give every rank the same number of batches, or pass enable=False)")
        return self

    def __exit__(self, *exc):
        return None

    @staticmethod
    def notify_join_context(joinable):
        """Nothing to notify: no Join runs in ember (None, as PyTorch returns outside a
        Join)."""
        return None
