"""``torchvision.transforms`` under ``ember run``: :mod:`ember.transforms`, whose images
are NumPy arrays or ember tensors (there is no PIL path). Transforms ember lacks raise
``AttributeError`` naming them."""
from ember._torchvision import functional  # noqa: F401
from ember.compat import missing_torchvision
from ember.transforms import *  # noqa: F403
from ember.transforms import __all__ as _names

__all__ = [*_names, "functional"]


def __getattr__(name):
    raise missing_torchvision("torchvision.transforms", name)
