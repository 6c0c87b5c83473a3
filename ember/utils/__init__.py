"""Utilities: ``ember.utils.data`` (datasets, samplers, DataLoader), ``checkpoint``."""
import importlib

# loaded on first use, as ``torch.utils.checkpoint`` is reachable after ``import torch``
_LAZY = ("checkpoint", "hooks", "data", "_pytree", "benchmark", "flop_counter")


def __getattr__(name):
    if name in _LAZY:
        return importlib.import_module(f"ember.utils.{name}")
    raise AttributeError(f"module 'ember.utils' has no attribute '{name}'")
