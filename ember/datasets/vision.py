"""``VisionDataset``: the base of the image datasets (root, transforms, a readable repr)."""
import os

import numpy as np

from ember.utils.data import Dataset

__all__ = ["VisionDataset"]


class VisionDataset(Dataset):
    """A dataset with a ``root`` directory, a ``transform`` for the input and a
    ``target_transform`` for the label, as ``torchvision.datasets.VisionDataset``.

    Subclasses set ``self.data`` and ``self.targets`` and implement ``__getitem__``
    and ``__len__``; ``extra_repr`` adds lines to the repr.
    """

    _repr_indent = 4

    def __init__(self, root=None, transform=None, target_transform=None):
        if isinstance(root, (str, os.PathLike)):
            root = os.path.expanduser(os.fspath(root))
        self.root = root
        for name, fn in (("transform", transform), ("target_transform", target_transform)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{type(self).__name__}: {name} must be callable, got "
                                f"{type(fn).__name__}")
        self.transform = transform
        self.target_transform = target_transform

    def _apply(self, x, target):
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return x, target

    def extra_repr(self):
        return ""

    def __repr__(self):
        body = [f"Number of datapoints: {len(self)}"]
        if self.root is not None:
            body.append(f"Root location: {self.root}")
        body += self.extra_repr().splitlines()
        for name, fn in (("Transform", self.transform),
                         ("Target transform", self.target_transform)):
            if fn is not None:
                lines = repr(fn).splitlines()
                body += [f"{name}: {lines[0]}"] + [" " * (len(name) + 2) + ln for ln in lines[1:]]
        pad = " " * self._repr_indent
        return "\n".join([f"Dataset {type(self).__name__}"] + [pad + line for line in body])


class _ArrayBacked(VisionDataset):
    """A dataset whose samples are rows of ``data``/``targets`` tensors.

    Assigning ``data`` or ``targets`` (``ds.data = ds.data[:100]``, as people do with
    torchvision) also refreshes the NumPy views that ``__getitem__`` reads.
    """

    @property
    def data(self):
        return self._data

    @data.setter
    def data(self, value):
        self._data = value
        self._data_np = value.numpy() if hasattr(value, "numpy") else np.asarray(value)

    @property
    def targets(self):
        return self._targets

    @targets.setter
    def targets(self, value):
        self._targets = value
        self._targets_np = value.numpy() if hasattr(value, "numpy") else np.asarray(value)

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    def __len__(self):
        return len(self._data_np)
