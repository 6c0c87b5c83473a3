"""Datasets, as ``torchvision.datasets``: MNIST and Fashion-MNIST from their IDX files
(with a checked downloader), scikit-learn's bundled 8x8 digits, and MNIST-1D.

Image datasets return NumPy ``uint8`` arrays of shape ``(H, W)`` (no PIL); use
``ember.transforms.ToTensor()`` to get ``(1, H, W)`` float tensors in ``[0, 1]``.
"""
from ember.datasets import utils
from ember.datasets.digits import Digits
from ember.datasets.mnist import MNIST, FashionMNIST
from ember.datasets.mnist1d import MNIST1D
from ember.datasets.vision import VisionDataset

__all__ = ["MNIST", "FashionMNIST", "Digits", "MNIST1D", "VisionDataset", "utils"]
