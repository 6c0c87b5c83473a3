"""Utilities: ``ember.utils.data`` (datasets, samplers, DataLoader)."""
