"""``torch.utils.benchmark``: ``Timer`` measures a statement's run time with Python's
``timeit`` machinery (setup once, the statement in blocks, per-run times in a
``Measurement``); ``Compare`` prints measurements side by side."""
from ember.utils.benchmark.timer import Compare, Language, Measurement, Timer

__all__ = ["Timer", "Measurement", "Compare", "Language"]
