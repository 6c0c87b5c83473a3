"""ember.datasets (IDX reader, checked downloader, Digits, MNIST1D), ember.transforms against
torch, and the main job (examples/mnist/train.py) on a small Digits subset.

The only network traffic is to an http.server on 127.0.0.1 that the tests start.
"""
import contextlib
import functools
import gzip
import hashlib
import http.server
import io
import os
import subprocess
import sys
import threading
import types

import numpy as np
import pytest
import torch

import ember
from ember import transforms as T
from ember.datasets import MNIST, MNIST1D, Digits, FashionMNIST
from ember.datasets import utils as dutils
from ember.datasets.mnist import read_idx, read_image_file, read_label_file
from ember.utils.data import DataLoader, Dataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CODES = {np.uint8: 0x08, np.int8: 0x09, np.int16: 0x0B, np.int32: 0x0C, np.float32: 0x0D,
          np.float64: 0x0E}


# ----- IDX files ---------------------------------------------------------------------------
def idx_bytes(arr):
    arr = np.asarray(arr)
    head = bytes([0, 0, _CODES[arr.dtype.type], arr.ndim])
    head += b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_idx(path, arr, compress=False):
    data = idx_bytes(arr)
    with open(path, "wb") as f:
        f.write(gzip.compress(data, mtime=0) if compress else data)
    return path


def fake_mnist(rng, n):
    return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n).astype(
        np.uint8)


def make_mnist_dir(root, name="MNIST", n_train=12, n_test=7, compress=(False, True), seed=0):
    rng = np.random.default_rng(seed)
    raw = os.path.join(root, name, "raw")
    os.makedirs(raw, exist_ok=True)
    arrays = {}
    for split, n, gz in (("train", n_train, compress[0]), ("t10k", n_test, compress[1])):
        x, y = fake_mnist(rng, n)
        sfx = ".gz" if gz else ""
        write_idx(os.path.join(raw, f"{split}-images-idx3-ubyte{sfx}"), x, gz)
        write_idx(os.path.join(raw, f"{split}-labels-idx1-ubyte{sfx}"), y, gz)
        arrays[split] = (x, y)
    return arrays


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_round_trip(tmp_path, dtype, compress):
    arr = (np.arange(2 * 3 * 5) - 7).reshape(2, 3, 5).astype(dtype)
    got, magic = read_idx(write_idx(tmp_path / "f", arr, compress))
    assert got.dtype == np.dtype(dtype) and got.dtype.isnative
    np.testing.assert_array_equal(got, arr)
    assert magic == (_CODES[dtype] << 8) + 3


def test_read_image_and_label_files(tmp_path):
    x, y = fake_mnist(np.random.default_rng(1), 5)
    imgs = read_image_file(write_idx(tmp_path / "i", x))
    labels = read_label_file(write_idx(tmp_path / "l.gz", y, compress=True))
    assert imgs.dtype == ember.uint8 and tuple(imgs.shape) == (5, 28, 28)
    assert labels.dtype == ember.int64 and tuple(labels.shape) == (5,)
    np.testing.assert_array_equal(imgs.numpy(), x)
    np.testing.assert_array_equal(labels.numpy(), y)


@pytest.mark.parametrize("blob,reader,match", [
    (idx_bytes(np.zeros(4, np.uint8)), read_image_file, "2049.*not an MNIST image file's 2051"),
    (idx_bytes(np.zeros((2, 3, 3), np.uint8)), read_label_file, "2051.*label file's 2049"),
    (idx_bytes(np.zeros((2, 3, 3), np.uint8))[:-5], read_image_file, "truncated"),
    (b"\x12\x34\x08\x03" + b"\x00" * 12, read_image_file, "not an IDX file"),
    (b"\x00\x00\x07\x01\x00\x00\x00\x01\x00", read_label_file, "type code 0x07"),
    (b"\x00\x00\x08\x03\x00\x00", read_image_file, "truncated IDX header"),
    (b"\x00\x00", read_image_file, "shorter than a header"),
    (b"\x1f\x8b\x08\x00garbage", read_image_file, "damaged gzip"),
])
def test_idx_errors_name_the_file(tmp_path, blob, reader, match):
    path = tmp_path / "bad-idx"
    path.write_bytes(blob)
    with pytest.raises(ValueError, match=match) as info:
        reader(path)
    assert str(path) in str(info.value)


def test_read_idx_strict_rejects_trailing_bytes(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(idx_bytes(np.zeros(3, np.uint8)) + b"xx")
    with pytest.raises(ValueError, match="holds 5 bytes"):
        read_idx(path)
    assert read_idx(path, strict=False)[0].shape == (3,)


# ----- MNIST / FashionMNIST ------------------------------------------------------------------
@pytest.mark.parametrize("cls", [MNIST, FashionMNIST])
def test_mnist_reads_torchvision_layout(tmp_path, cls):
    arrays = make_mnist_dir(tmp_path, cls.__name__)
    for train, split in ((True, "train"), (False, "t10k")):
        ds = cls(tmp_path, train=train)
        x, y = arrays[split]
        assert len(ds) == len(x) and ds.data.dtype == ember.uint8
        assert ds.targets.dtype == ember.int64
        np.testing.assert_array_equal(ds.data.numpy(), x)
        img, target = ds[-1]
        assert isinstance(img, np.ndarray) and img.dtype == np.uint8 and img.shape == (28, 28)
        assert type(target) is int and target == y[-1]
        np.testing.assert_array_equal(img, x[-1])
    assert ds.raw_folder == os.path.join(str(tmp_path), cls.__name__, "raw")
    assert len(ds.classes) == 10 and ds.class_to_idx[ds.classes[3]] == 3
    assert "Split: Test" in repr(ds) and f"Dataset {cls.__name__}" in repr(ds)


def test_mnist_transforms_and_loader(tmp_path):
    arrays = make_mnist_dir(tmp_path)
    ds = MNIST(str(tmp_path), transform=T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.25,))]),
               target_transform=lambda t: t + 100)
    img, target = ds[2]
    x, y = arrays["train"]
    assert tuple(img.shape) == (1, 28, 28) and img.dtype == ember.float32
    np.testing.assert_allclose(img.numpy()[0], (x[2] / np.float32(255) - 0.5) / 0.25, rtol=1e-6)
    assert target == y[2] + 100
    assert "Transform: Compose(" in repr(ds)
    batches = list(DataLoader(ds, batch_size=5))
    assert [tuple(b[0].shape) for b in batches] == [(5, 1, 28, 28), (5, 1, 28, 28), (2, 1, 28, 28)]
    assert batches[0][1].dtype == ember.int64
    ds.data, ds.targets = ds.data[:4], ds.targets[:4]   # as people slice torchvision's
    assert len(ds) == 4 and ds[3][1] == y[3] + 100
    with pytest.raises(IndexError):
        ds[4]


def test_mnist_missing_files_say_where_and_how(tmp_path):
    with pytest.raises(RuntimeError) as info:
        MNIST(tmp_path / "nowhere", train=True)
    msg = str(info.value)
    assert os.path.join(str(tmp_path), "nowhere", "MNIST", "raw") in msg
    assert "download=True" in msg and "train-images-idx3-ubyte" in msg
    with pytest.raises(TypeError, match="root"):
        MNIST(None)


def test_mnist_inconsistent_files(tmp_path):
    make_mnist_dir(tmp_path)
    raw = tmp_path / "MNIST" / "raw"
    write_idx(raw / "train-labels-idx1-ubyte", np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="12 images but .* 3 labels"):
        MNIST(tmp_path)
    write_idx(raw / "train-labels-idx1-ubyte", np.full(12, 10, np.uint8))
    with pytest.raises(ValueError, match="label 10 is out of range"):
        MNIST(tmp_path)


# ----- the downloader, against a server on 127.0.0.1 -----------------------------------------
@pytest.fixture
def server(tmp_path):
    """Serve tmp_path/www on 127.0.0.1 (port 0); yields (base URL, list of requested paths)."""
    www = tmp_path / "www"
    www.mkdir()
    hits = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            functools.partial(Handler, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", www, hits
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def publish(www, mirror, seed=0, corrupt=()):
    """Write gzip IDX files under www/mirror/; returns the resources list (name, md5)."""
    (www / mirror).mkdir(exist_ok=True)
    rng = np.random.default_rng(seed)
    resources, arrays = [], {}
    for split, n in (("train", 6), ("t10k", 4)):
        x, y = fake_mnist(rng, n)
        arrays[split] = (x, y)
        for kind, arr in (("images-idx3", x), ("labels-idx1", y)):
            name = f"{split}-{kind}-ubyte.gz"
            blob = gzip.compress(idx_bytes(arr), mtime=0)
            resources.append((name, hashlib.md5(blob).hexdigest()))
            (www / mirror / name).write_bytes(blob[:-9] + b"corrupted" if name in corrupt
                                              else blob)
    return resources, arrays


def local_mnist(mirrors, resources):
    return type("LocalMNIST", (MNIST,), {"mirrors": mirrors, "resources": resources})


def test_download_from_local_mirror(tmp_path, server):
    base, www, hits = server
    resources, arrays = publish(www, "good")
    cls = local_mnist([base + "missing/", base + "good/"], resources)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        ds = cls(tmp_path / "data", train=False, download=True)
    np.testing.assert_array_equal(ds.data.numpy(), arrays["t10k"][0])
    assert ds[0][1] == arrays["t10k"][1][0]
    raw = tmp_path / "data" / "LocalMNIST" / "raw"
    assert sorted(os.listdir(raw)) == sorted([n for n, _ in resources] +
                                             [n[:-3] for n, _ in resources])
    assert "trying the next mirror" in out.getvalue()       # the 404 mirror
    n = len(hits)
    with contextlib.redirect_stdout(io.StringIO()):
        cls(tmp_path / "data", train=True, download=True)     # already there: no request
    assert len(hits) == n


def test_corrupted_download_is_deleted_and_next_mirror_used(tmp_path, server):
    base, www, hits = server
    resources, arrays = publish(www, "good")
    publish(www, "bad", corrupt=("train-images-idx3-ubyte.gz",))
    cls = local_mnist([base + "bad/", base + "good/"], resources)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        ds = cls(tmp_path, download=True)
    assert "checksum mismatch" in out.getvalue()
    assert "/bad/train-images-idx3-ubyte.gz" in hits and "/good/train-images-idx3-ubyte.gz" in hits
    np.testing.assert_array_equal(ds.data.numpy(), arrays["train"][0])
    gz = tmp_path / "LocalMNIST" / "raw" / "train-images-idx3-ubyte.gz"
    assert dutils.check_md5(gz, resources[0][1])


def test_every_mirror_corrupted_fails_and_leaves_nothing(tmp_path, server):
    base, www, _ = server
    resources, _ = publish(www, "good")
    publish(www, "bad", corrupt=("train-images-idx3-ubyte.gz",))
    cls = local_mnist([base + "bad/"], resources)
    with contextlib.redirect_stdout(io.StringIO()):
        with pytest.raises(RuntimeError, match="every mirror failed") as info:
            cls(tmp_path, download=True)
    assert "checksum mismatch" in str(info.value)
    assert not os.listdir(tmp_path / "LocalMNIST" / "raw")


def test_download_url_checks_md5(tmp_path, server):
    base, www, _ = server
    (www / "blob.bin").write_bytes(b"hello ember")
    good = hashlib.md5(b"hello ember").hexdigest()
    with pytest.raises(dutils.ChecksumError, match="was deleted"):
        dutils.download_url(base + "blob.bin", tmp_path / "d", md5="0" * 32)
    assert not os.listdir(tmp_path / "d")
    path = dutils.download_url(base + "blob.bin", tmp_path / "d", md5=good)
    assert dutils.check_integrity(path, good) and not dutils.check_integrity(path, "0" * 32)
    assert dutils.calculate_md5(path) == good and not dutils.check_integrity(tmp_path / "x")


# ----- Digits -----------------------------------------------------------------------------
def test_digits_split_is_deterministic_and_stratified():
    from sklearn.datasets import load_digits
    bunch = load_digits()
    train, test = Digits(), Digits(train=False)
    assert (len(train), len(test)) == (1438, 359)
    assert not set(train.indices) & set(test.indices)
    np.testing.assert_array_equal(Digits(train=False).indices, test.indices)
    assert not np.array_equal(Digits(train=False, seed=1).indices, test.indices)
    counts = np.bincount(test.targets.numpy(), minlength=10)
    np.testing.assert_array_equal(counts, np.rint(0.2 * np.bincount(bunch.target)))
    np.testing.assert_array_equal(test.data.numpy(),
                                  np.rint(bunch.images[test.indices] * 255 / 16))
    np.testing.assert_array_equal(test.targets.numpy(), bunch.target[test.indices])
    img, target = test[0]
    assert img.dtype == np.uint8 and img.shape == (8, 8) and type(target) is int
    assert test.data.dtype == ember.uint8 and test.targets.dtype == ember.int64
    half = Digits(train=False, split=0.5)
    assert len(half) == sum(int(round(0.5 * c)) for c in np.bincount(bunch.target))
    with pytest.raises(ValueError, match="split"):
        Digits(split=1.0)


def test_digits_without_sklearn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"\.\[demo\]"):
        Digits()


# ----- MNIST1D (the generator is stubbed: the real one needs the mnist1d extra) --------------
@pytest.fixture
def fake_mnist1d(monkeypatch):
    calls = []

    def get_dataset_args(as_dict=False):
        d = {"num_samples": 50, "train_split": 0.8, "seed": 42, "shuffle_seq": False,
             "url": "unused"}
        return d if as_dict else types.SimpleNamespace(**d)

    def make_dataset(args=None):
        calls.append(args)
        rng = np.random.default_rng(args.seed)
        x = rng.standard_normal((args.num_samples, 40))
        y = np.arange(args.num_samples) % 10
        k = int(args.num_samples * args.train_split)
        return {"x": x[:k], "x_test": x[k:], "y": y[:k], "y_test": y[k:],
                "t": np.linspace(-1, 1, 40), "templates": {}}

    data = types.ModuleType("mnist1d.data")
    data.get_dataset_args, data.make_dataset = get_dataset_args, make_dataset
    pkg = types.ModuleType("mnist1d")
    pkg.data = data
    monkeypatch.setitem(sys.modules, "mnist1d", pkg)
    monkeypatch.setitem(sys.modules, "mnist1d.data", data)
    return calls


def test_mnist1d_generates_with_the_package(fake_mnist1d, tmp_path):
    train = MNIST1D()
    test = MNIST1D(train=False, args={"num_samples": 30})
    assert (len(train), len(test)) == (40, 6)
    assert fake_mnist1d[1].num_samples == 30 and fake_mnist1d[1].seed == 42
    assert train.data.dtype == ember.float32 and train.targets.dtype == ember.int64
    x, y = train[3]
    assert isinstance(x, ember.Tensor) and tuple(x.shape) == (40,) and y == 3
    cached = MNIST1D(root=tmp_path, train=False)
    again = MNIST1D(root=tmp_path, train=False)
    assert len(fake_mnist1d) == 3            # the second one read the cache
    np.testing.assert_array_equal(cached.data.numpy(), again.data.numpy())
    with pytest.raises(ValueError, match="unknown dataset args"):
        MNIST1D(args={"num_sample": 10})


def test_mnist1d_without_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mnist1d", None)
    monkeypatch.setitem(sys.modules, "mnist1d.data", None)
    with pytest.raises(ImportError, match=r"\.\[mnist1d\]"):
        MNIST1D()


# ----- transforms against torch ----------------------------------------------------------
def _img(shape, dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.uint8:
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("shape", [(5, 7), (5, 7, 3), (1, 1)])
def test_to_tensor(shape):
    a = _img(shape)
    got = T.ToTensor()(a)
    ref = torch.from_numpy(a.reshape(shape[0], shape[1], -1).transpose(2, 0, 1).copy())
    ref = ref.float().div(255)
    assert got.dtype == ember.float32 and tuple(got.shape) == tuple(ref.shape)
    np.testing.assert_array_equal(got.numpy(), ref.numpy())
    f = T.ToTensor()(_img(shape, np.float64))              # other dtypes are not scaled
    assert f.dtype == ember.float64
    np.testing.assert_array_equal(f.numpy().reshape(-1), np.moveaxis(
        _img(shape, np.float64).reshape(shape[0], shape[1], -1), 2, 0).reshape(-1))


def test_to_tensor_errors():
    with pytest.raises(TypeError, match="ndarray"):
        T.ToTensor()(ember.zeros(1, 2, 2))
    with pytest.raises(ValueError, match="2/3 dimensional"):
        T.ToTensor()(np.zeros((1, 2, 2, 1), np.uint8))


def test_normalize_matches_torch_with_grad():
    a = _img((2, 3, 4, 5), np.float32)
    mean, std = (0.1, -0.2, 0.3), (0.5, 2.0, 1.5)
    x, tx = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y = T.Normalize(mean, std)(x)
    ty = (tx - torch.tensor(mean).view(-1, 1, 1)) / torch.tensor(std).view(-1, 1, 1)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
    z = ember.tensor(a)
    assert T.Normalize(mean, std, inplace=True)(z) is z
    np.testing.assert_allclose(z.numpy(), ty.detach().numpy(), rtol=1e-6)
    hwc = _img((4, 5, 3), np.float64)                       # NumPy: channels last
    np.testing.assert_allclose(T.Normalize(mean, std)(hwc), (hwc - mean) / np.array(std))
    assert repr(T.Normalize(mean, std)) == f"Normalize(mean={mean}, std={std})"


@pytest.mark.parametrize("img,exc,match", [
    (ember.zeros(1, 2, 2, dtype=ember.uint8), TypeError, "float tensor"),
    (ember.zeros(2, 2), ValueError, r"\(\.\.\., C, H, W\)"),
    ([1.0], TypeError, "Tensor Image"),
    (np.zeros((2, 2, 3), np.uint8), TypeError, "float array"),
])
def test_normalize_errors(img, exc, match):
    with pytest.raises(exc, match=match):
        T.Normalize((0.5,), (0.5,))(img)


def test_normalize_zero_std():
    with pytest.raises(ValueError, match="division by zero"):
        T.Normalize((0.5,), (0.0,))(ember.zeros(1, 2, 2))


@pytest.mark.parametrize("cls,dim", [(T.RandomHorizontalFlip, -1), (T.RandomVerticalFlip, -2)])
def test_random_flips_draw_like_torchvision(cls, dim):
    a = _img((3, 4, 5), np.float32)
    ember.manual_seed(7)
    torch.manual_seed(7)
    for _ in range(12):
        got = cls(p=0.5)(ember.tensor(a)).numpy()
        ref = torch.tensor(a).flip(dim) if torch.rand(1) < 0.5 else torch.tensor(a)
        np.testing.assert_array_equal(got, ref.numpy())
    hw = _img((4, 5))
    axis = 1 if dim == -1 else 0
    np.testing.assert_array_equal(cls(p=1.0)(hw), np.flip(hw, axis))
    np.testing.assert_array_equal(cls(p=0.0)(hw), hw)


def _torch_random_crop(img, size, padding, mode):
    """torchvision's RandomCrop logic on a torch (C, H, W) tensor with NumPy padding."""
    if padding:
        img = torch.from_numpy(np.pad(img.numpy(), [(0, 0), (padding, padding),
                                                    (padding, padding)], mode=mode))
    h, w = img.shape[-2:]
    i = torch.randint(0, h - size[0] + 1, size=(1,)).item()
    j = torch.randint(0, w - size[1] + 1, size=(1,)).item()
    return img[..., i:i + size[0], j:j + size[1]]


@pytest.mark.parametrize("size,padding,mode", [((4, 4), None, "constant"), (6, 2, "constant"),
                                               ((5, 3), 1, "edge"), (6, 2, "reflect"),
                                               (6, 3, "symmetric")])
def test_random_crop_draws_like_torchvision(size, padding, mode):
    a = _img((2, 6, 7))
    crop = T.RandomCrop(size, padding=padding, padding_mode=mode)
    sz = (size, size) if isinstance(size, int) else size
    for seed in range(5):
        ember.manual_seed(seed)
        torch.manual_seed(seed)
        got = crop(ember.tensor(a))
        ref = _torch_random_crop(torch.tensor(a), sz, padding, mode)
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
        ember.manual_seed(seed)                               # NumPy HWC: the same crop
        hwc = crop(np.ascontiguousarray(np.moveaxis(a, 0, -1)))
        np.testing.assert_array_equal(np.moveaxis(hwc, -1, 0), ref.numpy())


def test_random_crop_edges():
    a = _img((5, 5))
    assert T.RandomCrop(7, pad_if_needed=True)(a).shape == (7, 7)
    np.testing.assert_array_equal(T.RandomCrop(5)(a), a)
    with pytest.raises(ValueError, match="larger than input image size"):
        T.RandomCrop(6)(a)
    with pytest.raises(ValueError, match="two dimensions"):
        T.RandomCrop((1, 2, 3))
    with pytest.raises(ValueError, match="Padding mode"):
        T.Pad(1, padding_mode="wrap")
    np.testing.assert_array_equal(T.Pad((1, 2), fill=9)(a)[0], np.full(7, 9))
    assert T.Pad((1, 2, 3, 4))(ember.zeros(1, 5, 5)).shape == (1, 11, 9)


@pytest.mark.parametrize("shape,size", [((6, 8), 4), ((7, 9), (3, 4)), ((4, 4), 6),
                                        ((5, 4), (8, 3))])
def test_center_crop(shape, size):
    a = _img(shape)
    th, tw = (size, size) if isinstance(size, int) else size
    got = T.CenterCrop(size)(a)
    h, w = shape
    pl, pt = max(tw - w, 0) // 2, max(th - h, 0) // 2
    padded = np.pad(a, [(pt, max(th - h, 0) - pt), (pl, max(tw - w, 0) - pl)])
    h, w = padded.shape
    top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
    np.testing.assert_array_equal(got, padded[top:top + th, left:left + tw])
    np.testing.assert_array_equal(T.CenterCrop(size)(ember.tensor(a[None])).numpy()[0], got)


@pytest.mark.parametrize("hw,out", [((28, 28), (14, 14)), ((8, 8), (28, 28)), ((28, 20), (9, 31)),
                                    ((7, 9), (5, 13))])
@pytest.mark.parametrize("mode,antialias", [("bilinear", True), ("bilinear", False),
                                            ("nearest", False)])
def test_resize_matches_interpolate(hw, out, mode, antialias):
    a = _img((2, 3) + hw, np.float32)
    got = T.Resize(out, interpolation=mode, antialias=antialias)(ember.tensor(a))
    ref = torch.nn.functional.interpolate(
        torch.tensor(a), size=out, mode=mode,
        **({"antialias": antialias, "align_corners": False} if mode == "bilinear" else {}))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
    hwc = np.ascontiguousarray(np.moveaxis(a[0], 0, -1))  # NumPy HWC gives the same image
    np.testing.assert_allclose(np.moveaxis(T.Resize(out, mode, antialias=antialias)(hwc), -1, 0),
                               ref.numpy()[0], rtol=1e-5, atol=1e-5)


def test_resize_sizes_and_uint8():
    a = _img((6, 12))
    assert T.Resize(3)(a).shape == (3, 6)
    assert T.Resize(4, max_size=6)(a).shape == (3, 6)
    assert T.Resize([2, 5])(ember.tensor(a)).shape == (2, 5)
    small = T.Resize((3, 6))(a)
    ref = torch.nn.functional.interpolate(torch.tensor(a, dtype=torch.float64)[None, None],
                                          size=(3, 6), mode="bilinear", antialias=True)
    assert small.dtype == np.uint8
    np.testing.assert_array_equal(small, ref[0, 0].round().numpy())
    with pytest.raises(NotImplementedError, match="bicubic"):
        T.Resize(4, interpolation="bicubic")
    with pytest.raises(ValueError, match="max_size"):
        T.Resize((4, 4), max_size=9)


def test_compose_lambda_repr():
    t = T.Compose([T.Lambda(lambda x: x * 2), T.RandomHorizontalFlip(0.0)])
    np.testing.assert_array_equal(t(np.ones((2, 2))), 2 * np.ones((2, 2)))
    assert repr(t) == "Compose(\n    Lambda()\n    RandomHorizontalFlip(p=0.0)\n)"
    with pytest.raises(TypeError, match="callable"):
        T.Lambda(3)


class _Same(Dataset):
    """The same image every time, randomly cropped: workers must crop differently."""

    def __init__(self):
        self.img = np.arange(100, dtype=np.uint8).reshape(10, 10)
        self.tf = T.Compose([T.RandomCrop(6), T.ToTensor()])

    def __len__(self):
        return 16

    def __getitem__(self, i):
        return self.tf(self.img)


def test_workers_augment_differently():
    batches = list(DataLoader(_Same(), batch_size=8, num_workers=2,
                              generator=ember.Generator().manual_seed(0)))
    assert len(batches) == 2 and not np.array_equal(batches[0].numpy(), batches[1].numpy())


class _Ragged(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return ember.zeros(3 if i == 5 else 2), i


def test_inconsistent_shapes_name_batch_and_shapes():
    with pytest.raises(RuntimeError) as info:
        list(DataLoader(_Ragged(), batch_size=4))
    msg = str(info.value)
    assert "in batch 1" in msg and "(2,)" in msg and "(3,)" in msg


# ----- the main job ------------------------------------------------------------------------
def test_train_smoke_on_digits_without_tqdm_or_matplotlib(tmp_path, monkeypatch, capsys):
    from ember.examples import mnist as job
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    res = job.main(["--epochs", "1", "--limit", "160", "--data-root", str(tmp_path / "none"),
                    "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert "MNIST not found" in out and "scikit-learn's bundled 8x8" in out
    assert "epoch  1/1" in out and "samples/s" in out and "test accuracy" in out
    assert res["dataset"] == "digits" and res["plot"] is None and "plot: skipped" in out
    assert res["test_acc"] > 0.3
    ckpt = ember.load(res["checkpoint"])
    assert ckpt["epoch"] == 1 and set(ckpt) >= {"model", "optimizer", "epoch"}
    model = job.build_model("mlp", 8, 8)
    model.load_state_dict(ckpt["model"])
    opt = ember.optim.Adam(model.parameters())
    opt.load_state_dict(ckpt["optimizer"])


def test_train_uses_mnist_when_present(tmp_path, capsys):
    from ember.examples import mnist as job
    make_mnist_dir(tmp_path, n_train=40, n_test=10)
    res = job.main(["--epochs", "1", "--data-root", str(tmp_path), "--out", str(tmp_path),
                    "--batch-size", "16"])
    assert res["dataset"] == "mnist" and "mnist: 40 training / 10 test" in capsys.readouterr().out
    with pytest.raises(RuntimeError, match="download=True"):
        job.main(["--dataset", "mnist", "--data-root", str(tmp_path / "empty")])


def test_train_script_runs_as_a_program(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "mnist", "train.py"),
                        "--model", "cnn", "--epochs", "1", "--limit", "64", "--data-root",
                        str(tmp_path), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "test accuracy" in r.stdout and os.path.isfile(tmp_path / "out" / "digits-cnn.pt")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "plot: skipped" in r.stdout
    else:
        assert (tmp_path / "out" / "digits-cnn.png").read_bytes()[:4] == b"\x89PNG"
    r = subprocess.run([sys.executable, "-m", "ember.examples.mnist", "--help"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "--model" in r.stdout and "--download" in r.stdout


def _baselines():
    import importlib.util
    path = os.path.join(ROOT, "examples", "mnist1d", "baselines.py")
    spec = importlib.util.spec_from_file_location("mnist1d_baselines", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)   # not __main__: the ember backend
    return mod


def test_mnist1d_baseline_models_and_hand_gru_match_torch():
    b = _baselines()
    assert b.torch is ember
    sizes = {name: sum(p.numel() for p in b.build(name).parameters())
             for name in ("logistic", "mlp", "cnn", "gru")}
    assert sizes == {"logistic": 410, "mlp": 15210, "cnn": 5210, "gru": 5134}   # the paper's
    ember.manual_seed(3)
    torch.manual_seed(3)
    hand = b.HandGRU(1, 6, batch_first=True, bidirectional=True)
    ref = torch.nn.GRU(1, 6, batch_first=True, bidirectional=True)
    assert [n for n, _ in hand.named_parameters()] == [n for n, _ in ref.named_parameters()]
    for p, q in zip(hand.parameters(), ref.parameters()):      # same initial weights
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    x = np.random.default_rng(0).standard_normal((3, 7, 1)).astype(np.float32)
    h0 = np.zeros((2, 3, 6), np.float32)
    out, hn = hand(ember.tensor(x), ember.tensor(h0))
    tout, thn = ref(torch.tensor(x), torch.tensor(h0))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(hn.detach().numpy(), thn.detach().numpy(), atol=1e-6)
    (out ** 2).sum().backward()
    (tout ** 2).sum().backward()
    for p, q in zip(hand.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)
