"""MNIST and Fashion-MNIST, read from the original IDX files, as ``torchvision.datasets``.

The files live where torchvision puts them::

    root/MNIST/raw/train-images-idx3-ubyte      (or train-images-idx3-ubyte.gz)
    root/MNIST/raw/train-labels-idx1-ubyte      (or .gz)
    root/MNIST/raw/t10k-images-idx3-ubyte       (or .gz)
    root/MNIST/raw/t10k-labels-idx1-ubyte       (or .gz)

so a directory torchvision downloaded into works here, and the other way round.
Images come out as NumPy ``uint8`` arrays of shape ``(28, 28)`` (ember's stand-in for
torchvision's PIL images, there is no PIL dependency); ``transforms.ToTensor()`` turns
one into a ``(1, 28, 28)`` float tensor in ``[0, 1]``.
"""
import gzip
import os
import warnings

import numpy as np

from ember.datasets.utils import download_from_mirrors
from ember.datasets.vision import _ArrayBacked

__all__ = ["MNIST", "FashionMNIST", "read_sn3_pascalvincent_tensor", "read_image_file",
           "read_label_file", "read_idx"]

# IDX type codes (the third byte of the magic number) and the big-endian dtypes they hold
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
IMAGES_MAGIC = 2051   # 0x00000803: unsigned bytes, 3 dimensions
LABELS_MAGIC = 2049   # 0x00000801: unsigned bytes, 1 dimension


def _read_maybe_gzip(path):
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if head == b"\x1f\x8b":
            try:
                with gzip.GzipFile(fileobj=f) as g:
                    return g.read()
            except (OSError, EOFError) as e:
                raise ValueError(f"{path}: a damaged gzip file ({e}); delete it and download "
                                 f"it again") from None
        return f.read()


def read_idx(path, strict=True):
    """Read an IDX file (gzip-compressed or not) into a NumPy array in native byte order.

    Returns ``(array, magic)``. The header is big-endian: two zero bytes, a type code,
    the number of dimensions, then one 4-byte size per dimension. Raises ``ValueError``
    naming the file for a bad magic number, an unknown type, or a body whose length
    does not match the sizes (``strict=False`` allows trailing bytes, as torchvision).
    """
    path = os.fspath(path)
    data = _read_maybe_gzip(path)
    if len(data) < 4:
        raise ValueError(f"{path}: not an IDX file: {len(data)} bytes, shorter than a header")
    magic = int.from_bytes(data[:4], "big")
    if data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file: magic number {magic} (0x{magic:08x}) does "
                         f"not start with two zero bytes")
    code, ndim = data[2], data[3]
    if code not in _IDX_TYPES:
        raise ValueError(f"{path}: IDX type code 0x{code:02x} is unknown (known: "
                         f"{', '.join(f'0x{c:02x}' for c in _IDX_TYPES)})")
    if not 1 <= ndim <= 4:
        raise ValueError(f"{path}: IDX header says {ndim} dimensions; expected 1 to 4")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: truncated IDX header: {len(data)} bytes, need {header} for "
                         f"{ndim} dimensions")
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_TYPES[code])
    need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    have = len(data) - header
    if have < need or (strict and have != need):
        raise ValueError(f"{path}: the header says shape {shape} of {dtype.name} "
                         f"({need} bytes of data) but the file holds {have} bytes of data"
                         + (" (truncated: delete it and download it again)" if have < need
                            else ""))
    arr = np.frombuffer(data, dtype=dtype, count=need // dtype.itemsize, offset=header)
    return arr.reshape(shape).astype(dtype.newbyteorder("="), copy=True), magic


def read_sn3_pascalvincent_tensor(path, strict=True):
    """An IDX ("SN3 Pascal Vincent") file as an ember tensor (torchvision's name)."""
    import ember
    arr, _ = read_idx(path, strict)
    return ember.from_numpy(arr)


def _expect(path, magic, want, ndim, what):
    if magic != want:
        raise ValueError(f"{path}: magic number {magic} (0x{magic:08x}) is not an MNIST {what} "
                         f"file's {want} (0x{want:08x}: unsigned bytes, {ndim} "
                         f"dimension{'s' if ndim > 1 else ''})")


def read_image_file(path):
    """An MNIST image file (magic 2051) as a ``uint8`` tensor of shape ``(N, H, W)``."""
    import ember
    arr, magic = read_idx(path, strict=False)
    _expect(path, magic, IMAGES_MAGIC, 3, "image")
    return ember.from_numpy(arr)


def read_label_file(path):
    """An MNIST label file (magic 2049) as an ``int64`` tensor of shape ``(N,)``."""
    import ember
    arr, magic = read_idx(path, strict=False)
    _expect(path, magic, LABELS_MAGIC, 1, "label")
    return ember.from_numpy(arr.astype(np.int64))


class MNIST(_ArrayBacked):
    """The `MNIST <http://yann.lecun.com/exdb/mnist/>`_ handwritten digits, as
    ``torchvision.datasets.MNIST``.

    Args:
        root (str or PathLike): the directory holding ``MNIST/raw/`` (the IDX files,
            gzip-compressed or not).
        train (bool): the 60,000 training images if True, else the 10,000 test images.
        transform (callable, optional): applied to each image, a NumPy ``uint8`` array
            of shape ``(28, 28)``; e.g. ``transforms.ToTensor()``.
        target_transform (callable, optional): applied to each label (an ``int``).
        download (bool): download the files from ``mirrors`` into ``MNIST/raw/`` when
            they are missing; each download's MD5 is checked and a corrupted file is
            deleted, never read.

    Attributes: ``data`` (``uint8`` tensor ``(N, 28, 28)``), ``targets`` (``int64``
    tensor ``(N,)``), ``classes``, ``class_to_idx``, ``raw_folder``.

    A missing file without ``download=True`` raises ``RuntimeError`` naming the
    directory it looked in and how to download.
    """

    mirrors = [
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ]
    resources = [
        ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
        ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ]
    training_file = "training.pt"
    test_file = "test.pt"
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six",
               "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        if root is None:
            raise TypeError(f"{type(self).__name__}: root must be a directory, not None")
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = bool(train)
        if self._check_legacy_exist():
            data, targets = self._load_legacy_data()
        else:
            if download:
                self.download()
            if not self._check_exists():
                raise RuntimeError(self._not_found_message())
            data, targets = self._load_data()
        self.data, self.targets = data, targets

    @property
    def train_labels(self):
        warnings.warn("train_labels has been renamed targets", stacklevel=2)
        return self.targets

    @property
    def test_labels(self):
        warnings.warn("test_labels has been renamed targets", stacklevel=2)
        return self.targets

    @property
    def train_data(self):
        warnings.warn("train_data has been renamed data", stacklevel=2)
        return self.data

    @property
    def test_data(self):
        warnings.warn("test_data has been renamed data", stacklevel=2)
        return self.data

    @property
    def raw_folder(self):
        return os.path.join(self.root, type(self).__name__, "raw")

    @property
    def processed_folder(self):
        return os.path.join(self.root, type(self).__name__, "processed")

    def _split_files(self):
        prefix = "train" if self.train else "t10k"
        return f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"

    def _find(self, name):
        """The raw file ``name`` or, failing that, ``name.gz``; None if neither exists."""
        for candidate in (name, name + ".gz"):
            path = os.path.join(self.raw_folder, candidate)
            if os.path.isfile(path):
                return path
        return None

    def _check_exists(self):
        return all(self._find(os.path.splitext(fname)[0]) is not None
                   for fname, _ in self.resources)

    def _not_found_message(self):
        missing = [os.path.splitext(f)[0] for f, _ in self.resources
                   if self._find(os.path.splitext(f)[0]) is None]
        name = type(self).__name__
        return (f"Dataset not found: {name} looked in {os.path.abspath(self.raw_folder)} for "
                f"{', '.join(missing)} (each raw or gzip-compressed as .gz) and did not find "
                f"them. Use {name}(root={self.root!r}, download=True) to download them from "
                f"{self.mirrors[0]}, or put the files there by hand.")

    def _check_legacy_exist(self):
        return all(os.path.isfile(os.path.join(self.processed_folder, f))
                   for f in (self.training_file, self.test_file))

    def _load_legacy_data(self):
        import ember
        fname = self.training_file if self.train else self.test_file
        return ember.load(os.path.join(self.processed_folder, fname), weights_only=True)

    def _load_data(self):
        image_name, label_name = self._split_files()
        image_path, label_path = self._find(image_name), self._find(label_name)
        data = read_image_file(image_path)
        targets = read_label_file(label_path)
        if data.shape[0] != targets.shape[0]:
            raise ValueError(f"{type(self).__name__}: {image_path} holds {data.shape[0]} images "
                             f"but {label_path} holds {targets.shape[0]} labels")
        if targets.shape[0] and int(targets.max()) >= len(self.classes):
            raise ValueError(f"{label_path}: label {int(targets.max())} is out of range for "
                             f"{len(self.classes)} classes")
        return data, targets

    def download(self):
        """Download the missing files into ``raw_folder``, trying each mirror in turn."""
        if self._check_exists():
            return
        from ember.utils._atomic import makedirs
        makedirs(self.raw_folder, "cannot create the dataset folder")
        for filename, md5 in self.resources:
            if self._find(os.path.splitext(filename)[0]) is None:
                download_from_mirrors(self.mirrors, filename, self.raw_folder, md5)

    def __getitem__(self, index):
        """``(image, target)``: a ``(H, W)`` ``uint8`` NumPy array (after ``transform``)
        and an ``int`` class index (after ``target_transform``)."""
        index = int(index)
        img = self._data_np[index].copy()
        target = int(self._targets_np[index])
        return self._apply(img, target)

    def extra_repr(self):
        return f"Split: {'Train' if self.train else 'Test'}"


class FashionMNIST(MNIST):
    """`Fashion-MNIST <https://github.com/zalandoresearch/fashion-mnist>`_: Zalando's
    28x28 clothing images in MNIST's IDX format, as ``torchvision.datasets.FashionMNIST``.

    Same arguments and layout as ``MNIST``, under ``root/FashionMNIST/raw/``.
    """

    mirrors = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
        ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
        ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"),
    ]
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]
