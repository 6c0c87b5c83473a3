"""Hostile checkpoints: each is crafted here from pickle opcodes and zip records, loaded by
``ember.load`` in a child process (with a timeout, and an address-space limit for memory
bombs) that then proves the process is intact: fresh tensors of every dtype, a good
checkpoint that round-trips, ``manual_seed(0); randn(3)`` equal to torch's, and no marker
file from code that must not run. Where it means something, ``torch.load`` reads the same
file: torch refuses => ember refuses; torch loads => ember loads the same values."""
import io
import json
import os
import pickle
import random
import struct
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest
import torch

import ember
from ember.serialization import CheckpointError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))

# ----- pickle opcodes, spelled out ----------------------------------------------------------
PROTO = pickle.PROTO + b"\x02"
STOP, MARK, TUPLE, REDUCE, BUILD = pickle.STOP, pickle.MARK, pickle.TUPLE, pickle.REDUCE, \
    pickle.BUILD
TUPLE1, TUPLE2, TUPLE3 = pickle.TUPLE1, pickle.TUPLE2, pickle.TUPLE3
EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE = pickle.EMPTY_DICT, pickle.EMPTY_LIST, pickle.EMPTY_TUPLE
SETITEM, SETITEMS, APPEND, APPENDS = pickle.SETITEM, pickle.SETITEMS, pickle.APPEND, \
    pickle.APPENDS
NONE, NEWOBJ, BINPERSID, NEWTRUE = pickle.NONE, pickle.NEWOBJ, pickle.BINPERSID, pickle.NEWTRUE


def G(module, name):
    return pickle.GLOBAL + f"{module}\n{name}\n".encode()


def S(text):
    raw = text.encode()
    return pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw


def I(n):  # noqa: E743 - an int, as pickle writes it
    if 0 <= n < 256:
        return pickle.BININT1 + bytes([n])
    if -2**31 <= n < 2**31:
        return pickle.BININT + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return pickle.LONG1 + bytes([len(raw)]) + raw


def PUT(i):
    return pickle.BINPUT + bytes([i])


def GET(i):
    return pickle.BINGET + bytes([i])


def call(func, *args):
    """``func(*args)``: GLOBAL/REDUCE."""
    return func + MARK + b"".join(args) + TUPLE + REDUCE


def setattrs(target, **attrs):
    """BUILD with slot state: ``setattr(target, k, v)`` under a plain unpickler."""
    d = EMPTY_DICT + b"".join(S(k) + v for k, v in attrs.items())
    if attrs:
        d = EMPTY_DICT + MARK + b"".join(S(k) + v for k, v in attrs.items()) + SETITEMS
    return target + NONE + d + TUPLE2 + BUILD


def tensor(key, numel, storage="FloatStorage", size=None):
    """``_rebuild_tensor_v2`` of storage ``key`` (a persistent id), as torch.save writes."""
    size = (numel,) if size is None else size
    pid = MARK + S("storage") + G("torch", storage) + S(key) + S("cpu") + I(numel) + TUPLE
    return call(G("torch._utils", "_rebuild_tensor_v2"),
                pid + BINPERSID, I(0), MARK + b"".join(I(s) for s in size) + TUPLE,
                MARK + b"".join(I(1) for _ in size) + TUPLE, pickle.NEWFALSE,
                call(G("collections", "OrderedDict")))


def checkpoint(pkl, storages=None, extra=None, compress=None):
    """The bytes of a zip checkpoint: ``archive/data.pkl`` = ``pkl``, storages
    ``archive/data/<key>``, and the records torch writes."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are written on purpose
        with zipfile.ZipFile(buf, "w") as z:
            records = [("archive/data.pkl", pkl), ("archive/version", b"3\n"),
                       ("archive/byteorder", b"little")]
            records += [(f"archive/data/{k}", v) for k, v in (storages or {}).items()]
            records += list(extra or [])
            for name, data in records:
                z.writestr(name, data, compress_type=compress or zipfile.ZIP_STORED)
    return buf.getvalue()


F32 = np.arange(4, dtype=np.float32).tobytes()


# ----- the child process -------------------------------------------------------------------
_CHILD = r"""
import json, os, pickle, resource, sys, traceback
spec = json.loads(sys.argv[1])
if spec["limit"]:
    resource.setrlimit(resource.RLIMIT_AS, (spec["limit"], spec["limit"]))
import numpy as np
import ember
from ember.backend import dtypes as _dt
from ember.serialization import CheckpointError, add_safe_globals

for g in spec.get("allow", []):
    mod, _, name = g.rpartition(".")
    add_safe_globals([getattr(__import__(mod, fromlist=[name]), name)])

EXPECT = spec["dtypes"]

def intact():
    bad = []
    for d in _dt.ALL:
        want = EXPECT[d.name]
        t = ember.ones(3, dtype=d)
        if t.dtype is not d or t.element_size() != want[1] or str(d.np) != want[0] \
                or repr(d) != "ember." + d.name or d.name != want[2]:
            bad.append(f"dtype {d.name} changed")
    if ember.arange(5).tolist() != [0, 1, 2, 3, 4] or ember.arange(3.0).dtype is not ember.float32:
        bad.append("arange")
    if ember.Size([2, 3]).numel() != 6 or repr(ember.device("cpu")) != "device(type='cpu')":
        bad.append("Size or device changed")
    good = ember.load(spec["good"])
    for k, (vals, dname) in spec["good_values"].items():
        if good[k].tolist() != vals or good[k].dtype.name != dname:
            bad.append(f"good checkpoint's {k} loads as {good[k].dtype} {good[k].tolist()}")
    x = {"a": ember.arange(6.0).reshape(2, 3), "i": ember.arange(3, dtype=ember.int32)}
    ember.save(x, spec["tmp"])
    y = ember.load(spec["tmp"])
    if not (y["a"].tolist() == x["a"].tolist() and y["i"].dtype is ember.int32):
        bad.append("round trip")
    ember.manual_seed(0)
    if ember.randn(3).tolist() != spec["randn"]:
        bad.append("randn")
    if os.path.exists(spec["marker"]):
        bad.append("marker file appeared")
    return bad

out = []
for path in spec["files"]:
    try:
        ember.load(path, **spec.get("kwargs", {}))
        res = "loaded"
    except pickle.UnpicklingError as e:
        res = "UnpicklingError: " + str(e)
    except CheckpointError as e:
        res = "CheckpointError: " + str(e)
    except BaseException as e:
        res = f"OTHER {type(e).__name__}: {e}"
    out.append([res, intact()])
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("untrusted")
    good = d / "good.pt"
    vals = {"f": torch.arange(5.0), "h": torch.arange(3, dtype=torch.float16),
            "l": torch.arange(4), "b": torch.tensor([True, False])}
    torch.save(vals, good)
    torch.manual_seed(0)
    randn = torch.randn(3).tolist()
    dtypes = {d.name: [str(d.np), d.itemsize, d.name] for d in ember.backend.dtypes.ALL}
    return {"dir": d, "good": str(good), "randn": randn, "dtypes": dtypes,
            "good_values": {k: [v.tolist(), str(v.dtype).replace("torch.", "")]
                            for k, v in vals.items()}}


def run_child(env, files, limit=2 << 30, allow=(), kwargs=None, timeout=90):
    """Load each file in one fresh process; [(outcome, damage found afterwards)]."""
    d = env["dir"]
    marker = d / "marker"
    paths = []
    for i, data in enumerate(files):
        p = d / f"hostile{i}.pt"
        p.write_bytes(data)
        paths.append(str(p))
    spec = {"limit": limit, "files": paths, "good": env["good"], "randn": env["randn"],
            "dtypes": env["dtypes"], "good_values": env["good_values"],
            "tmp": str(d / "roundtrip.pt"), "marker": str(marker), "allow": list(allow),
            "kwargs": kwargs or {}}
    envvars = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True,
                          text=True, timeout=timeout, env=envvars)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert line, proc.stderr[-3000:]
    assert not marker.exists()
    return json.loads(line[0][len("RESULT"):]), paths


def torch_refuses(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.load(path, weights_only=True)
        except Exception:
            return True
    return False


def assert_refused(results, kind="UnpicklingError"):
    for (outcome, damage) in results:
        assert outcome.startswith(kind), outcome
        assert damage == [], damage


# ----- 1. a weights-only load cannot change ember's own objects ---------------------------
MUTATIONS = {
    "dtype name": setattrs(G("torch", "float32"), name=S("int32")),
    "dtype itemsize": setattrs(G("torch", "float16"), itemsize=I(8), np=G("torch", "int64")),
    "storage type dtype": setattrs(G("torch", "FloatStorage"), dtype=G("torch", "int32")),
    "untyped storage": setattrs(G("torch.storage", "UntypedStorage"), dtype=G("torch", "bool")),
    "Size.numel": setattrs(G("torch", "Size"), numel=G("torch", "float32")),
    "device class": setattrs(G("torch", "device"), __repr__=G("torch", "Size")),
    "device instance": setattrs(call(G("torch", "device"), S("cpu")), type=S("cuda")),
    "dict state on dtype": G("torch", "float32") + EMPTY_DICT + S("x") + I(1) + SETITEM + BUILD,
    "SETITEM on a storage type": G("torch", "FloatStorage") + S("dtype") +
    G("torch", "int32") + SETITEM,
    "SETITEMS on a tensor": tensor("0", 4) + MARK + I(0) + I(7) + SETITEMS,
    "APPEND to the Size class": G("torch", "Size") + I(1) + APPEND,
    "APPENDS to a tuple": EMPTY_TUPLE + MARK + I(1) + APPENDS,
    "APPEND to a string": S("abc") + I(1) + APPEND,
    "BUILD on a function": setattrs(G("torch._utils", "_rebuild_tensor_v2"),
                                    __code__=G("torch", "float32")),
}


def _mutation_file(body):
    # the mutation, then a damaged remainder: the load fails, and must leave no damage
    return checkpoint(PROTO + body + STOP, {"0": F32})


def test_mutations_are_refused_and_leave_no_damage(env):
    names = sorted(MUTATIONS)
    results, paths = run_child(env, [_mutation_file(MUTATIONS[n]) for n in names])
    for name, (outcome, damage), path in zip(names, results, paths):
        assert outcome.startswith("UnpicklingError"), (name, outcome)
        assert damage == [], (name, damage)
        assert torch_refuses(path), name


def test_immutable_singletons():
    from ember.serialization._allowlist import _STORAGE_TYPES
    objs = list(ember.backend.dtypes.ALL) + list(_STORAGE_TYPES.values()) + [
        ember.device("cpu"), ember.device("cuda", 1), ember.backend.CPU, ember.Size([2, 3]),
        ember.strided, ember.sparse_coo, ember.sparse_csr, ember.contiguous_format,
        ember.channels_last, ember.channels_last_3d, ember.preserve_format,
        ember.legacy_contiguous_format]
    for obj in objs:
        for cls_or_obj in (obj, type(obj)):
            for name in ("name", "dtype", "numel", "__repr__", "type", "itemsize", "np",
                         "new_attribute"):
                with pytest.raises((AttributeError, TypeError)):
                    setattr(cls_or_obj, name, None)
            with pytest.raises((AttributeError, TypeError)):
                delattr(cls_or_obj, "__repr__")
    with pytest.raises(AttributeError):
        ember.UntypedStorage.nbytes = None
    # what torch allows stays: copies, pickling, equality
    import copy
    assert copy.deepcopy(ember.float32) is ember.float32
    assert copy.deepcopy(ember.device("cuda", 1)) == ember.device("cuda:1")
    assert pickle.loads(pickle.dumps(ember.Size([2, 3]))) == ember.Size([2, 3])


# ----- 2 and 8. allowlisted callables cannot build more than the file justifies ------------
def _big_size_reuse():
    # one 20000-int list, then torch.Size(list) 5000 times: 10**8 tuple slots from 100 kB
    body = EMPTY_LIST + PUT(0) + MARK + I(0) * 20000 + APPENDS
    body += EMPTY_LIST + MARK + (call(G("torch", "Size"), GET(0))) * 5000 + APPENDS
    return body + TUPLE2


BOMBS = {
    "bytes(10**10)": call(G("builtins", "bytes"), I(10**10)),
    "list(range(10**9))": call(G("builtins", "list"), call(G("builtins", "range"), I(10**9))),
    "str * n": call(G("builtins", "str"), I(10**9)),
    "int of a long string": call(G("builtins", "int"), S("9" * 1000)),
    "bytearray(10**12)": call(G("builtins", "bytearray"), I(10**12)),
    "bytearray(10**7)": call(G("builtins", "bytearray"), I(10**7)),
    "Size(list) 5000 times": _big_size_reuse(),
    "set of a huge bytearray": call(G("builtins", "set"),
                                    call(G("builtins", "bytearray"), I(10**9))),
    "encode in a binary codec": call(G("_codecs", "encode"), S("x" * 100), S("zlib")),
}


def test_memory_bombs_are_refused_under_a_memory_limit(env):
    names = sorted(BOMBS)
    files = [checkpoint(PROTO + BOMBS[n] + STOP) for n in names]
    results, paths = run_child(env, files, limit=2 << 30)
    for name, (outcome, damage), path in zip(names, results, paths):
        assert outcome.startswith("UnpicklingError"), (name, outcome)
        assert damage == [], (name, damage)
        if "bytearray" not in name and "Size" not in name:
            assert torch_refuses(path), name  # torch refuses the global itself
    # (torch has no bound: it would try to allocate bytearray(10**12) and the Sizes)


def test_small_allowlisted_objects_load_as_in_torch(tmp_path):
    body = EMPTY_DICT + MARK
    body += S("ba") + call(G("builtins", "bytearray"), I(5))
    body += S("set") + call(G("builtins", "set"), EMPTY_LIST + MARK + I(1) + I(2) + APPENDS)
    body += S("c") + call(G("builtins", "complex"), I(1), I(2))
    body += S("b") + call(G("_codecs", "encode"), S("\xff\x01"), S("latin1"))
    body += S("size") + call(G("torch", "Size"), EMPTY_LIST + MARK + I(2) + I(3) + APPENDS)
    body += S("t") + tensor("0", 4)
    body += S("od") + call(G("collections", "OrderedDict")) + EMPTY_DICT + S("_metadata") + \
        EMPTY_DICT + SETITEM + BUILD + S("k") + I(1) + SETITEM
    body += SETITEMS
    path = tmp_path / "ok.pt"
    path.write_bytes(checkpoint(PROTO + body + STOP, {"0": F32}))
    got = ember.load(path)
    want = torch.load(path, weights_only=True)
    assert got["ba"] == want["ba"] == bytearray(5)
    assert got["set"] == want["set"] and got["c"] == want["c"] and got["b"] == want["b"]
    assert tuple(got["size"]) == tuple(want["size"])
    np.testing.assert_array_equal(got["t"].numpy(), want["t"].numpy())
    assert got["od"]._metadata == want["od"]._metadata == {}
    assert list(got["od"].items()) == list(want["od"].items())


def test_tensor_views_and_storages_are_checked(tmp_path):
    cases = {
        "numel beyond the record": checkpoint(PROTO + tensor("0", 400) + STOP, {"0": F32}),
        "view beyond its storage": checkpoint(
            PROTO + call(G("torch._utils", "_rebuild_tensor_v2"),
                         MARK + S("storage") + G("torch", "FloatStorage") + S("0") + S("cpu") +
                         I(4) + TUPLE + BINPERSID, I(3), MARK + I(2) + TUPLE, MARK + I(1) +
                         TUPLE, pickle.NEWFALSE, call(G("collections", "OrderedDict"))) + STOP,
            {"0": F32}),
        "storage that is a tuple": checkpoint(
            PROTO + call(G("torch._utils", "_rebuild_tensor_v2"),
                         MARK + call(G("builtins", "bytearray"), I(4)) + S("cpu") + TUPLE,
                         I(0), MARK + I(4) + TUPLE, MARK + I(1) + TUPLE) + STOP),
        "missing storage": checkpoint(PROTO + tensor("9", 4) + STOP, {"0": F32}),
    }
    for name, data in cases.items():
        path = tmp_path / "v.pt"
        path.write_bytes(data)
        with pytest.raises(CheckpointError, match="damaged"):
            ember.load(path)
        assert torch_refuses(path), name


# ----- code that must not run, even with a user allowlist -------------------------------------
def test_code_execution_is_refused(env):
    marker = str(env["dir"] / "marker")
    touch = S(f"touch {marker}")
    files = [
        checkpoint(PROTO + call(G("os", "system"), touch) + STOP),
        checkpoint(PROTO + call(G("posix", "system"), touch) + STOP),
        checkpoint(PROTO + call(G("builtins", "eval"),
                                S(f"__import__('os').system('touch {marker}')")) + STOP),
        checkpoint(PROTO + call(G("subprocess", "check_call"),
                                EMPTY_LIST + MARK + S("touch") + S(marker) + APPENDS) +
                   STOP),
        checkpoint(PROTO + call(G("builtins", "getattr"), G("torch", "float32"),
                                S("__class__")) + STOP),
    ]
    # os.system allowlisted by the user is still refused: its module is blocked
    results, paths = run_child(env, files, allow=["os.system"])
    assert_refused(results)
    assert all(torch_refuses(p) for p in paths)


# ----- 4 and 5: the zip ---------------------------------------------------------------------
def _good_bytes():
    buf = io.BytesIO()
    ember.save({"w": ember.arange(16.0).reshape(4, 4), "i": ember.arange(5),
                "n": {"lr": 0.1, "steps": [1, 2, 3]}}, buf)
    return buf.getvalue()


def test_duplicate_and_stray_entries_are_refused(tmp_path):
    pkl = PROTO + tensor("0", 4) + STOP
    cases = {
        "archive/data/0": checkpoint(pkl, {"0": F32},
                                     extra=[("archive/data/0", b"\0" * 16)]),
        "archive/data.pkl": checkpoint(pkl, {"0": F32},
                                       extra=[("archive/data.pkl", PROTO + I(1) + STOP)]),
        "elsewhere/data/0": checkpoint(pkl, {"0": F32}, extra=[("elsewhere/data/0", F32)]),
    }
    for entry, data in cases.items():
        path = tmp_path / "d.pt"
        path.write_bytes(data)
        with pytest.raises(CheckpointError, match=entry):
            ember.load(path)
    # torch reads the first of two same-named entries; ember refuses to guess
    path.write_bytes(cases["archive/data/0"])
    assert torch.load(path, weights_only=True).tolist() == [0, 1, 2, 3]


def test_compressed_entries_load_as_in_torch_but_not_mapped(tmp_path):
    data = _good_bytes()
    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for info in src.infolist():
            z.writestr(info.filename, src.read(info), compress_type=zipfile.ZIP_DEFLATED)
    path = tmp_path / "deflated.pt"
    path.write_bytes(buf.getvalue())
    got, want = ember.load(path), torch.load(path, weights_only=True)
    np.testing.assert_array_equal(got["w"].numpy(), want["w"].numpy())
    assert got["n"] == want["n"]
    with pytest.raises(CheckpointError, match="compressed"):
        ember.load(path, mmap=True)
    # a compression method neither reads
    raw = bytearray(buf.getvalue())
    for at in _all(raw, b"PK\x03\x04"):
        raw[at + 8:at + 10] = struct.pack("<H", 12)
    for at in _all(raw, b"PK\x01\x02"):
        raw[at + 10:at + 12] = struct.pack("<H", 12)
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="compression method 12"):
        ember.load(path)
    assert torch_refuses(path)


def _all(raw, sig):
    at = raw.find(sig)
    while at >= 0:
        yield at
        at = raw.find(sig, at + 1)


def test_bit_flips_and_truncations_fail_as_checkpoint_errors():
    data = _good_bytes()
    want = ember.load(io.BytesIO(data))
    rng = random.Random(0)
    outcomes = {}
    cases = [(rng.randrange(len(data)), 1 << rng.randrange(8)) for _ in range(400)]
    cases += [(cut, None) for cut in range(0, len(data), max(1, len(data) // 60))]
    for at, bit in cases:
        bad = bytearray(data)
        if bit is None:
            bad = bad[:at]
        else:
            bad[at] ^= bit
        try:
            got = ember.load(io.BytesIO(bytes(bad)))
            outcomes["loaded"] = outcomes.get("loaded", 0) + 1
            assert isinstance(got, dict)
        except (CheckpointError, pickle.UnpicklingError) as e:
            outcomes[type(e).__name__] = outcomes.get(type(e).__name__, 0) + 1
    assert set(outcomes) <= {"loaded", "CheckpointError", "UnpicklingError"}
    assert outcomes.get("CheckpointError", 0) > 100
    # the process is intact after 460 damaged loads
    again = ember.load(io.BytesIO(data))
    np.testing.assert_array_equal(again["w"].numpy(), want["w"].numpy())
    assert again["i"].dtype is ember.int64 and ember.ones(2).dtype is ember.float32


# ----- 6 and 7: TorchScript archives, the hub --------------------------------------------------
def test_torchscript_archive_is_recognised(tmp_path):
    path = tmp_path / "script.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 3)), path)
    with pytest.warns(UserWarning, match="TorchScript archive"):
        with pytest.raises(RuntimeError, match="weights_only=True.*TorchScript"):
            ember.load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="TorchScript"):
            torch.load(path)
        m = ember.load(path, weights_only=False)
        tm = torch.load(path, weights_only=False)
    np.testing.assert_array_equal(m.weight.detach().numpy(), tm.weight.detach().numpy())


def test_hub_is_weights_only_by_default(env, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    ckpts = tmp_path / "hub" / "checkpoints"
    ckpts.mkdir(parents=True)
    marker = tmp_path / "marker"
    (ckpts / "evil.pth").write_bytes(
        checkpoint(PROTO + call(G("os", "system"), S(f"touch {marker}")) + STOP))
    with pytest.raises(pickle.UnpicklingError, match="os.system"):
        ember.hub.load_state_dict_from_url("https://example.com/w/evil.pth")
    assert not marker.exists()


def test_overlapping_entries_are_refused(tmp_path):
    # entry data/0 grown (in both headers) to cover data/1: one region, two storages
    raw = bytearray(checkpoint(PROTO + tensor("0", 4) + STOP, {"0": F32, "1": F32}))
    z = zipfile.ZipFile(io.BytesIO(bytes(raw)))
    a, b = z.getinfo("archive/data/0"), z.getinfo("archive/data/1")
    grown = b.header_offset + 30 + len(b.filename) + b.file_size - (
        a.header_offset + 30 + len(a.filename))
    raw[a.header_offset + 18:a.header_offset + 26] = struct.pack("<II", grown, grown)
    for at in _all(raw, b"PK\x01\x02"):
        n = struct.unpack("<H", raw[at + 28:at + 30])[0]
        if raw[at + 46:at + 46 + n] == b"archive/data/0":
            raw[at + 20:at + 28] = struct.pack("<II", grown, grown)
    assert zipfile.ZipFile(io.BytesIO(bytes(raw))).getinfo("archive/data/0").file_size == grown
    path = tmp_path / "overlap.pt"
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="overlap"):
        ember.load(path)


class _Colour(__import__("enum").Enum):
    RED = 1


class _Box:
    pass


def test_allowlisted_classes_build_only_their_new_instances(tmp_path):
    enum_build = call(G(__name__, "_Colour"), I(1)) + EMPTY_DICT + S("hacked") + I(1) + \
        SETITEM + BUILD
    box = G(__name__, "_Box") + EMPTY_TUPLE + NEWOBJ + EMPTY_DICT + S("w") + \
        tensor("0", 4) + SETITEM + BUILD
    path = tmp_path / "c.pt"
    with ember.serialization.safe_globals([_Colour, _Box]):
        path.write_bytes(checkpoint(PROTO + enum_build + STOP, {"0": F32}))
        with pytest.raises(pickle.UnpicklingError, match="did not create"):
            ember.load(path)
        assert not hasattr(_Colour.RED, "hacked")
        path.write_bytes(checkpoint(PROTO + box + STOP, {"0": F32}))
        got = ember.load(path)
        assert isinstance(got, _Box) and got.w.tolist() == [0, 1, 2, 3]
