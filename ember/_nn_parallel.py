"""Kept for old imports: ``torch.nn.parallel`` is ``ember.nn.parallel``."""
from ember.nn.parallel import *  # noqa: F403
from ember.nn.parallel import __all__  # noqa: F401
