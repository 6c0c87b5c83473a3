"""``torchvision.datasets`` under ``ember run``: ember's MNIST and FashionMNIST, and the
other datasets libraries import by name, which raise ``NotImplementedError`` when
constructed."""
from ember.compat import missing_torchvision
from ember.datasets import MNIST, FashionMNIST, VisionDataset

_ABSENT = ("CIFAR10", "CIFAR100", "KMNIST", "QMNIST", "EMNIST", "ImageFolder",
           "DatasetFolder", "ImageNet", "Places365", "INaturalist", "SVHN", "STL10",
           "CelebA", "CocoDetection", "FakeData")

__all__ = ["MNIST", "FashionMNIST", "VisionDataset", *_ABSENT]


def _absent(name):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"torchvision.datasets.{name} is not implemented in "
                                  "ember's torchvision stand-in (it has MNIST and "
                                  "FashionMNIST)")
    return type(name, (VisionDataset,), {"__init__": __init__, "__module__": __name__,
                                         "__doc__": f"Not in ember: constructing {name} "
                                                    "raises NotImplementedError."})


globals().update({name: _absent(name) for name in _ABSENT})


def __getattr__(name):
    raise missing_torchvision("torchvision.datasets", name)
