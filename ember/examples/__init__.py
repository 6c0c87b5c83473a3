"""Runnable examples shipped with ember: ``python -m ember.examples.mnist``."""
