"""``Digits``: scikit-learn's bundled 8x8 handwritten digits, available offline."""
import functools

import numpy as np

from ember.datasets.vision import _ArrayBacked

__all__ = ["Digits"]

_EXTRA_HINT = ("ember.datasets.Digits needs scikit-learn, which ships the digits data; "
               "install the demo extra: pip install -e '.[demo]' (or pip install scikit-learn)")


def _load_digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise ImportError(_EXTRA_HINT) from e
    return _read_once(load_digits)


@functools.lru_cache(maxsize=1)
def _read_once(load_digits):
    """``load_digits()``, read once per process (its arrays are never modified)."""
    return load_digits()


def split_indices(targets, split, seed):
    """Stratified, deterministic train/test indices: ``round(split * n_c)`` of each class
    ``c`` go to the test set, chosen by a ``numpy.random.RandomState(seed)`` shuffle."""
    rng = np.random.RandomState(seed)
    train, test = [], []
    for c in np.unique(targets):
        idx = np.flatnonzero(targets == c)
        idx = idx[rng.permutation(len(idx))]
        n_test = int(round(split * len(idx)))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


class Digits(_ArrayBacked):
    """The UCI optical handwritten digits that scikit-learn bundles
    (``sklearn.datasets.load_digits``): 1,797 real 8x8 images of the digits 0-9 from
    43 writers, so a model can be trained with no download at all.

    Args:
        root: ignored (the data ships inside scikit-learn); accepted so the signature
            matches the other datasets.
        train (bool): the training part of the split if True, else the test part.
        transform (callable, optional): applied to each image, a NumPy ``uint8`` array of
            shape ``(8, 8)``; e.g. ``transforms.ToTensor()``.
        target_transform (callable, optional): applied to each label (an ``int``).
        split (float): the fraction of each class held out for testing (0 < split < 1).
        seed (int): the seed of the split; the same seed gives the same split everywhere.

    The original pixels are 4-bit (0..16); they are scaled to ``uint8`` 0..255
    (``round(v * 255 / 16)``) so the images are used exactly like MNIST's.
    Attributes: ``data`` (``uint8`` tensor ``(N, 8, 8)``), ``targets`` (``int64``
    tensor ``(N,)``), ``classes``, ``indices`` (the rows of ``load_digits()`` used).

    scikit-learn is an optional dependency: without it this raises ``ImportError``
    naming the ``demo`` extra (``pip install -e '.[demo]'``).
    """

    classes = [str(i) for i in range(10)]

    def __init__(self, root=None, train=True, transform=None, target_transform=None,
                 split=0.2, seed=0):
        super().__init__(root, transform=transform, target_transform=target_transform)
        if not 0.0 < float(split) < 1.0:
            raise ValueError(f"Digits: split must be a fraction between 0 and 1, got {split}")
        import ember
        bunch = _load_digits()
        images = np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)
        labels = bunch.target.astype(np.int64)
        train_idx, test_idx = split_indices(labels, float(split), int(seed))
        self.train, self.split, self.seed = bool(train), float(split), int(seed)
        self.indices = train_idx if self.train else test_idx
        self.data = ember.from_numpy(np.ascontiguousarray(images[self.indices]))
        self.targets = ember.from_numpy(labels[self.indices])

    def __getitem__(self, index):
        """``(image, target)``: an ``(8, 8)`` ``uint8`` NumPy array (after ``transform``)
        and an ``int`` class index (after ``target_transform``)."""
        index = int(index)
        return self._apply(self._data_np[index].copy(), int(self._targets_np[index]))

    def extra_repr(self):
        return (f"Split: {'Train' if self.train else 'Test'} "
                f"(split={self.split}, seed={self.seed})")
