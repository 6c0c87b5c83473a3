"""Checkpoints: PyTorch's zip format both ways, safety, damage, safetensors."""
import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

import ember
from ember.serialization import CheckpointError
from ember.utils import safetensors as est

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


def _array(dtype, shape=(3, 5), seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_file_loads_bit_exact(tmp_path, dtype):
    a = _array(dtype)
    path = tmp_path / "t.pt"
    t = torch.from_numpy(a)
    torch.save({"t": t, "view": t[1:, ::2], "n": 3,
                "s": "text", "none": None, "tup": (1.5, [2, 3])}, path)
    d = ember.load(path)
    assert d["t"].dtype.name == dtype
    np.testing.assert_array_equal(d["t"].numpy(), a)
    np.testing.assert_array_equal(d["view"].numpy(), a[1:, ::2])
    assert np.shares_memory(d["t"].numpy(), d["view"].numpy())
    assert d["n"] == 3 and d["s"] == "text" and d["none"] is None and d["tup"] == (1.5, [2, 3])


@pytest.mark.parametrize("dtype", DTYPES)
def test_ember_file_loads_in_torch_bit_exact(tmp_path, dtype):
    a = _array(dtype)
    t = ember.from_numpy(a.copy())
    path = tmp_path / "e.pt"
    ember.save({"t": t, "view": t[1:, 1:4], "transposed": t.t(), "list": [t[0], 7]}, path)
    d = torch.load(path, weights_only=True)
    np.testing.assert_array_equal(d["t"].numpy(), a)
    np.testing.assert_array_equal(d["view"].numpy(), a[1:, 1:4])
    np.testing.assert_array_equal(d["transposed"].numpy(), a.T)
    assert d["view"].untyped_storage().data_ptr() == d["t"].untyped_storage().data_ptr()
    assert d["list"][1] == 7
    np.testing.assert_array_equal(d["list"][0].numpy(), a[0])


def test_round_trip_keeps_sharing_and_requires_grad(tmp_path):
    w = ember.randn(4, 3, requires_grad=True) if hasattr(ember, "randn") else \
        ember.tensor(np.ones((4, 3), np.float32), requires_grad=True)
    path = tmp_path / "w.pt"
    ember.save({"w": w, "tied": w}, path)
    d = ember.load(path)
    assert d["w"] is d["tied"]
    assert d["w"].requires_grad
    d2 = torch.load(path, weights_only=True)
    assert d2["w"] is d2["tied"] and d2["w"].requires_grad


def test_buffer_and_map_location(tmp_path):
    buf = io.BytesIO()
    ember.save([ember.tensor([1.0, 2.0])], buf)
    buf.seek(0)
    out = ember.load(buf, map_location="cpu")
    assert out[0].tolist() == [1.0, 2.0]
    buf.seek(0)
    seen = []
    out = ember.load(buf, map_location=lambda t, loc: seen.append(loc) or t)
    assert seen == ["cpu"]
    buf.seek(0)
    assert ember.load(buf, map_location={"cuda:0": "cpu"})[0].tolist() == [1.0, 2.0]


def test_mmap_is_backed_by_the_file(tmp_path):
    path = tmp_path / "big.pt"
    torch.save({"x": torch.arange(1000, dtype=torch.float64)}, path)
    d = ember.load(path, mmap=True)
    owner, backed = d["x"].numpy(), False
    while owner is not None:
        backed = backed or isinstance(owner, np.memmap)
        owner = getattr(owner, "base", None)
    assert backed
    np.testing.assert_array_equal(d["x"].numpy(), np.arange(1000.0))
    with pytest.raises(ValueError):
        ember.load(io.BytesIO(b""), mmap=True)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


class _EvalEvil:
    def __reduce__(self):
        return (eval, ("__import__('os').getcwd()",))


@pytest.mark.parametrize("payload,name", [(_Evil(), "system"), (_EvalEvil(), "eval")])
def test_hostile_pickle_is_refused_and_nothing_runs(tmp_path, payload, name):
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.ones(2)}, path)
    with zipfile.ZipFile(path) as z:
        records = {n: z.read(n) for n in z.namelist()}
    pkl = next(n for n in records if n.endswith("data.pkl"))
    records[pkl] = pickle.dumps({"w": payload}, protocol=2)
    with zipfile.ZipFile(path, "w") as z:
        for n, data in records.items():
            z.writestr(n, data)
    with pytest.raises(pickle.UnpicklingError, match=name):
        ember.load(path)
    # the trusted path unpickles arbitrary objects
    assert ember.load(path, weights_only=False)["w"] is not None


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.99])
def test_truncated_file_says_it_is_damaged(tmp_path, cut):
    path = tmp_path / "t.pt"
    ember.save({"x": ember.arange(100.0)}, path)
    raw = path.read_bytes()
    path.write_bytes(raw[:int(len(raw) * cut)])
    with pytest.raises(CheckpointError, match="damaged"):
        ember.load(path)


def test_flipped_bytes_in_storage_size_and_pickle(tmp_path):
    path = tmp_path / "t.pt"
    ember.save({"x": ember.arange(10.0)}, path)
    with zipfile.ZipFile(path) as z:
        records = {n: z.read(n) for n in z.namelist()}
    storage = next(n for n in records if "/data/" in n)
    short = dict(records)
    short[storage] = records[storage][:-4]
    with zipfile.ZipFile(path, "w") as z:
        for n, data in short.items():
            z.writestr(n, data)
    with pytest.raises(CheckpointError, match="storage"):
        ember.load(path)
    bad = dict(records)
    pkl = next(n for n in records if n.endswith("data.pkl"))
    bad[pkl] = records[pkl][:10] + b"\xff\xfe" + records[pkl][12:]
    with zipfile.ZipFile(path, "w") as z:
        for n, data in bad.items():
            z.writestr(n, data)
    with pytest.raises((CheckpointError, pickle.UnpicklingError)):
        ember.load(path)


def test_newer_format_version_is_refused(tmp_path):
    path = tmp_path / "t.pt"
    ember.save({"x": ember.arange(3.0)}, path)
    with zipfile.ZipFile(path) as z:
        records = {n: z.read(n) for n in z.namelist()}
    ver = next(n for n in records if n.endswith("/version") and ".data" not in n)
    records[ver] = b"9\n"
    with zipfile.ZipFile(path, "w") as z:
        for n, data in records.items():
            z.writestr(n, data)
    with pytest.raises(CheckpointError, match="version 9"):
        ember.load(path)


def test_missing_file_error():
    with pytest.raises(FileNotFoundError):
        ember.load("/nonexistent/checkpoint.pt")


def test_not_a_checkpoint(tmp_path):
    path = tmp_path / "x.pt"
    path.write_bytes(b"hello world")
    with pytest.raises(CheckpointError, match="zip directory"):
        ember.load(path)


# ----- safetensors -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_safetensors_cross_checks(tmp_path, dtype):
    from safetensors.numpy import load_file as np_load
    from safetensors.numpy import save_file as np_save
    from safetensors.torch import load_file as t_load
    a = _array(dtype)
    path = tmp_path / "e.safetensors"
    est.save_file({"a": ember.from_numpy(a.copy()), "b": ember.from_numpy(a[0].copy())}, path,
                  metadata={"format": "pt"})
    np.testing.assert_array_equal(np_load(path)["a"], a)
    np.testing.assert_array_equal(t_load(path)["b"].numpy(), a[0])
    np_save({"x": a}, tmp_path / "n.safetensors")
    got = est.load_file(tmp_path / "n.safetensors")["x"]
    assert got.dtype.name == dtype
    np.testing.assert_array_equal(got.numpy(), a)


def test_safetensors_refuses_shared_tensors(tmp_path):
    x = ember.arange(6.0)
    with pytest.raises(RuntimeError, match="share memory"):
        est.save_file({"a": x, "b": x[2:]}, tmp_path / "s.safetensors")


def test_safetensors_bad_data():
    with pytest.raises(ValueError):
        est.load(b"\x01\x00")
    good = est.save({"a": ember.arange(4.0)})
    with pytest.raises(ValueError):
        est.load(good[:-3])


class _Point:
    def __init__(self, x):
        self.x = x


def test_safe_globals_admit_trusted_classes(tmp_path):
    path = tmp_path / "p.pt"
    ember.save({"p": _Point(ember.ones(2))}, path)
    with pytest.raises(pickle.UnpicklingError, match="_Point"):
        ember.load(path)
    with ember.serialization.safe_globals([_Point]):
        assert ember.load(path)["p"].x.tolist() == [1.0, 1.0]
    with pytest.raises(pickle.UnpicklingError):
        ember.load(path)
    ember.serialization.add_safe_globals([_Point])
    try:
        assert isinstance(ember.load(path)["p"], _Point)
    finally:
        ember.serialization.clear_safe_globals()


def test_sparse_tensors_are_refused_not_densified(tmp_path):
    with pytest.raises(NotImplementedError, match="sparse"):
        ember.save(ember.ones(2, 2).to_sparse(), tmp_path / "s.pt")


def test_sets_load_with_weights_only(tmp_path):
    path = tmp_path / "s.pt"
    ember.save({"s": {1, 2}, "f": frozenset([3])}, path)
    assert ember.load(path) == {"s": {1, 2}, "f": frozenset([3])}
