"""``torchvision`` under ``python -m ember run``: a stand-in for the names that libraries
built on torch import from torchvision at import time.

torchvision's wheel carries compiled operators linked against PyTorch's C++ library, so
it cannot load beside ember. Libraries such as timm import a few of its names at import
time (``torchvision.transforms``, ``torchvision.transforms.functional``,
``torchvision.datasets``, ``torchvision.ops.misc.FrozenBatchNorm2d``); the aliased
``import torchvision`` gives them these modules:

- ``torchvision.transforms`` is :mod:`ember.transforms` (NumPy arrays stand in for PIL
  images), ``torchvision.transforms.functional`` the matching functions;
- ``torchvision.datasets`` has ember's MNIST and FashionMNIST; the other datasets
  libraries import by name are there, and constructing one raises NotImplementedError;
- ``torchvision.ops.misc.FrozenBatchNorm2d`` is a working module; the box operators
  and the ``torchvision.models`` builders that libraries import by name (torchmetrics:
  ``box_iou``, ``resnet50``, ``vgg16``...) are there, and calling one raises
  NotImplementedError;
- ``torchvision.io`` (and the v2 transforms modules, the same stand-ins as the first
  API's) hold the names transformers imports at import time; calling one raises;
- any other name raises: an attribute ``AttributeError``, a submodule
  ``ModuleNotFoundError``, each naming what ember does not provide.
"""
from ember.compat import TORCH_VERSION, missing_torchvision

# the torchvision release that pairs with the torch release ember implements
__version__ = {"2.13.0": "0.28.0"}.get(TORCH_VERSION, "0.0.0") + "+ember"


def absent(module, name):
    """A function standing for torchvision's ``module.name``: calling it raises
    NotImplementedError naming it."""
    def call(*args, **kwargs):
        raise NotImplementedError(f"{module}.{name} is not implemented in ember's "
                                  "torchvision stand-in")
    call.__name__ = call.__qualname__ = name
    call.__module__ = module
    call.__doc__ = f"Not in ember: calling {module}.{name} raises NotImplementedError."
    return call


def __getattr__(name):
    raise missing_torchvision("torchvision", name)
