"""Placeholders for the torchvision names timm imports at import time, for drivers run
on torch: torchvision cannot be installed beside the CPU torch the tests compare with.
Under ``python -m ember run``, ``import torchvision`` is ember's stand-in and
:func:`install` does nothing. The drivers use none of these names but
``FrozenBatchNorm2d``, written out here as torchvision defines it."""
import enum
import sys
import types

import torch


def install():
    """Put the placeholder modules into ``sys.modules`` (on torch only)."""
    if "+ember." in torch.__version__:
        return

    class FrozenBatchNorm2d(torch.nn.Module):
        """torchvision's: fixed per-channel statistics and affine parameters (buffers)."""

        def __init__(self, num_features, eps=1e-5):
            super().__init__()
            self.eps = eps
            for name, fill in (("weight", 1), ("bias", 0), ("running_mean", 0),
                               ("running_var", 1)):
                self.register_buffer(name, torch.full((num_features,), float(fill)))

        def _load_from_state_dict(self, state_dict, prefix, *args):
            state_dict.pop(prefix + "num_batches_tracked", None)
            super()._load_from_state_dict(state_dict, prefix, *args)

        def forward(self, x):
            w, b, rv, rm = (t.reshape(1, -1, 1, 1) for t in (
                self.weight, self.bias, self.running_var, self.running_mean))
            scale = w * (rv + self.eps).rsqrt()
            return x * scale + (b - rm * scale)

    def _placeholder(name, **names):
        module = types.ModuleType(name)
        module.__dict__.update(names)
        module.__getattr__ = lambda attr: (_ for _ in ()).throw(
            AttributeError(f"{name}.{attr}: torchvision is not installed"))
        sys.modules[name] = module
        return module

    tv = _placeholder("torchvision")
    tv.transforms = _placeholder("torchvision.transforms", ToTensor=type("ToTensor", (), {}))
    tv.transforms.functional = _placeholder(
        "torchvision.transforms.functional", InterpolationMode=enum.Enum(
            "InterpolationMode", {n.upper(): n for n in (
                "nearest", "bilinear", "bicubic", "box", "hamming", "lanczos")}))
    tv.datasets = _placeholder("torchvision.datasets", **{
        n: type(n, (), {}) for n in ("CIFAR100", "CIFAR10", "MNIST", "KMNIST",
                                     "FashionMNIST", "ImageFolder")})
    tv.ops = _placeholder("torchvision.ops")
    tv.ops.misc = _placeholder("torchvision.ops.misc", FrozenBatchNorm2d=FrozenBatchNorm2d)
