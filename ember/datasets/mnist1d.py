"""``MNIST1D``: Greydanus's MNIST-1D, generated locally by the ``mnist1d`` package."""
import hashlib
import json
import os

import numpy as np

from ember.datasets.vision import _ArrayBacked
from ember.utils._atomic import atomic_write, makedirs

__all__ = ["MNIST1D"]

_EXTRA_HINT = ("ember.datasets.MNIST1D generates its data with the mnist1d package; install "
               "the extra: pip install -e '.[mnist1d]' (or pip install mnist1d)")


def _mnist1d_data():
    try:
        import mnist1d.data as m1d
    except ImportError as e:
        raise ImportError(_EXTRA_HINT) from e
    return m1d


def _resolve_args(m1d, args):
    """The package's default args, updated by ``args`` (a dict or an object of attributes)."""
    merged = m1d.get_dataset_args(as_dict=True)
    if args is not None:
        given = dict(args) if isinstance(args, dict) else dict(vars(args))
        unknown = set(given) - set(merged)
        if unknown:
            raise ValueError(f"MNIST1D: unknown dataset args {sorted(unknown)}; known: "
                             f"{sorted(merged)}")
        merged.update(given)
    return merged


class _Args:
    """The attribute bag ``mnist1d.data.make_dataset`` expects (like its ``ObjectView``)."""

    def __init__(self, d):
        self.__dict__.update(d)


class MNIST1D(_ArrayBacked):
    """MNIST-1D (Greydanus, 2020): 1-D signals of length 40, each a warped, shifted,
    noisy template of one of the ten digits; small, but it separates logistic
    regression (~32%), MLPs (~68%), CNNs (~94%) and GRUs (~91%) as MNIST cannot.

    Args:
        root (str, optional): a directory to cache the generated arrays in
            (``root/MNIST1D/mnist1d_<key>.npz``, keyed by the args); None generates
            them on every construction (about 4 s with the default args).
        train (bool): the first ``train_split`` (80%) of the samples if True, else the rest.
        transform (callable, optional): applied to each signal, a ``float32`` tensor of
            shape ``(40,)``.
        args (dict or object, optional): overrides of ``mnist1d.data.get_dataset_args()``
            (``num_samples``, ``seed``, ``shuffle_seq``, ...); None keeps the package's
            defaults, which give the paper's 4,000 training and 1,000 test samples.
        target_transform (callable, optional): applied to each label (an ``int``).

    The data are made by the package's own generator, ``mnist1d.data.make_dataset``,
    never downloaded. Attributes: ``data`` (``float32`` tensor ``(N, 40)``),
    ``targets`` (``int64`` tensor ``(N,)``), ``t`` (the sample positions), ``args``.
    Without the ``mnist1d`` package this raises ``ImportError`` naming the extra
    (``pip install -e '.[mnist1d]'``).
    """

    classes = [str(i) for i in range(10)]

    def __init__(self, root=None, train=True, transform=None, args=None, target_transform=None):
        super().__init__(root, transform=transform, target_transform=target_transform)
        import ember
        m1d = _mnist1d_data()
        self.args = _resolve_args(m1d, args)
        self.train = bool(train)
        arrays = self._cached() if self.root is not None else None
        if arrays is None:
            arrays = self._generate(m1d)
        x, y = (arrays["x"], arrays["y"]) if self.train else (arrays["x_test"], arrays["y_test"])
        self.t = arrays["t"]
        self.data = ember.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        self.targets = ember.from_numpy(np.asarray(y, dtype=np.int64))

    def _cache_path(self):
        key = json.dumps({k: v for k, v in self.args.items() if k != "url"}, sort_keys=True)
        digest = hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()[:12]
        return os.path.join(self.root, "MNIST1D", f"mnist1d_{digest}.npz")

    def _cached(self):
        path = self._cache_path()
        if not os.path.isfile(path):
            return None
        with np.load(path) as f:
            return {k: f[k] for k in f.files}

    def _generate(self, m1d):
        made = m1d.make_dataset(_Args(self.args))
        arrays = {k: np.asarray(made[k]) for k in ("x", "y", "x_test", "y_test", "t")}
        if self.root is not None:
            path = self._cache_path()
            makedirs(os.path.dirname(path), "cannot create the dataset cache folder")
            with atomic_write(path, "wb") as f:
                np.savez(f, **arrays)
        return arrays

    def __getitem__(self, index):
        """``(signal, target)``: a ``(40,)`` ``float32`` tensor (after ``transform``) and an
        ``int`` class index (after ``target_transform``)."""
        import ember
        index = int(index)
        x = ember.from_numpy(self._data_np[index].copy())
        return self._apply(x, int(self._targets_np[index]))

    def extra_repr(self):
        return f"Split: {'Train' if self.train else 'Test'}"
