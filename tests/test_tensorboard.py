"""SummaryWriter: ember's event files read back by TensorBoard's own readers and compared,
event by event, with what PyTorch's SummaryWriter writes for the same calls."""
import gc
import glob
import importlib
import io
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
import torch
import torch.utils.tensorboard as ttb
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

import ember
from ember.utils.tensorboard import SummaryWriter
from ember.utils.tensorboard._record import masked_crc32c

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _events(logdir):
    """Every event in ``logdir``'s event files (not sub-runs), wall times cleared."""
    out = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        for ev in LegacyEventFileLoader(path).Load():
            ev.wall_time = 0
            if ev.HasField("source_metadata"):  # the first event names its writer
                assert ev.source_metadata.writer.startswith(("ember.", "tensorboard."))
                ev.ClearField("source_metadata")
            out.append(ev)
    return out


def _both(tmp_path, calls):
    """Run ``calls(writer, lib)`` with ember's and torch's writers; their events."""
    res = []
    for name, W, lib in (("ember", SummaryWriter, ember), ("torch", ttb.SummaryWriter, torch)):
        d = str(tmp_path / name)
        with W(d) as w:
            calls(w, lib)
        res.append(_events(d))
    return res


def _same_events(tmp_path, calls):
    e, t = _both(tmp_path, calls)
    assert len(e) == len(t) > 1
    for a, b in zip(e, t):
        assert a == b, f"ember wrote\n{a}\ntorch wrote\n{b}"
    return e


def test_crc_and_framing_match_tensorboard():
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_crc
    for data in (b"", b"a", b"123456789", bytes(range(256)) * 3):
        assert masked_crc32c(data) == tb_crc(data)


def test_scalars_equal_torch(tmp_path):
    vals = [0.5, 1.25, -3.0, 1e-8]

    def calls(w, lib):
        for i, v in enumerate(vals):
            w.add_scalar("loss", lib.tensor(v), i)
            w.add_scalar("plain", v * 2, i)
            w.add_scalar("new", v, i, new_style=True)
            w.add_scalar("double", v, i, new_style=True, double_precision=True)
    _same_events(tmp_path, calls)
    ea = EventAccumulator(str(tmp_path / "ember"))
    ea.Reload()
    got = [(s.step, s.value) for s in ea.Scalars("loss")]
    assert got == [(i, np.float32(v)) for i, v in enumerate(vals)]
    assert [ev.tensor_proto.double_val[0] for ev in ea.Tensors("double")] == vals


def test_scalar_rejects_many_values(tmp_path):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(AssertionError):
        w.add_scalar("x", ember.ones(3), 0)


def test_add_scalars_sub_runs_equal_torch(tmp_path):
    def calls(w, lib):
        for i in range(3):
            w.add_scalars("run/a", {"sin": np.sin(i), "cos": lib.tensor(np.cos(i))}, i)
    _both(tmp_path, calls)
    subs = {os.path.basename(p): p for p in glob.glob(str(tmp_path / "ember" / "*"))
            if os.path.isdir(p)}
    tsubs = {os.path.basename(p) for p in glob.glob(str(tmp_path / "torch" / "*"))
             if os.path.isdir(p)}
    assert set(subs) == tsubs == {"run_a_sin", "run_a_cos"}
    for name in subs:
        e, t = _events(subs[name]), _events(str(tmp_path / "torch" / name))
        assert e == t and len(e) == 4


@pytest.mark.parametrize("bins", ["tensorflow", "auto", 7, "array"])
def test_histograms_equal_torch(tmp_path, bins):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 5)).astype(np.float32)
    edges = np.linspace(-3, 3, 13)

    def calls(w, lib):
        b = (lib.tensor(edges) if lib is ember else edges) if bins == "array" else bins
        w.add_histogram("w", lib.tensor(x), 3, bins=b)
        w.add_histogram("np", x * 2, 4, bins=b, max_bins=5)
    ev = _same_events(tmp_path, calls)
    h = [e.summary.value[0].histo for e in ev if e.HasField("summary")][0]
    assert h.num == x.size and np.isclose(h.sum, x.astype(float).sum())
    assert sum(h.bucket) == x.size
    ea = EventAccumulator(str(tmp_path / "ember"))
    ea.Reload()
    assert ea.Histograms("w")[0].histogram_value.num == x.size


def test_histogram_raw_equal_torch(tmp_path):
    values = np.repeat(np.arange(10.0), np.arange(10))
    counts, limits = np.histogram(values, bins=np.arange(12))

    def calls(w, lib):
        w.add_histogram_raw("raw", values.min(), values.max(), len(values), values.sum(),
                            values.dot(values), limits[1:].tolist(), counts.tolist(), 0)
    _same_events(tmp_path, calls)


def _png(ev):
    return np.asarray(Image.open(io.BytesIO(ev.summary.value[0].image.encoded_image_string)))


def test_images_equal_torch_and_decode(tmp_path):
    rng = np.random.default_rng(1)
    chw = rng.random((3, 6, 5)).astype(np.float32)
    hwc8 = rng.integers(0, 256, (4, 7, 3), dtype=np.uint8)
    gray = rng.random((6, 5)).astype(np.float32)
    batch = rng.random((5, 1, 4, 4)).astype(np.float32)

    def calls(w, lib):
        w.add_image("chw", lib.tensor(chw), 0)
        w.add_image("hwc", lib.tensor(hwc8), 0, dataformats="HWC")
        w.add_image("gray", gray, 0, dataformats="HW")
        w.add_images("batch", lib.tensor(batch), 0)
        w.add_images("nhwc", batch.transpose(0, 2, 3, 1), 1, dataformats="NHWC")
    ev = [e for e in _same_events(tmp_path, calls) if e.HasField("summary")]
    img = {e.summary.value[0].tag: _png(e) for e in ev}
    expect = (chw.transpose(1, 2, 0) * 255).clip(0, 255).astype(np.uint8)
    np.testing.assert_array_equal(img["chw"], expect)
    np.testing.assert_array_equal(img["hwc"], hwc8)
    assert img["batch"].shape == (4, 5 * 4, 3)  # up to 8 images a row
    np.testing.assert_array_equal(img["batch"][:, 4:8, 0],
                                  (batch[1, 0] * 255).astype(np.uint8))


def test_image_with_boxes_and_figure(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = str(tmp_path / "e")
    with SummaryWriter(d) as w:
        fig = plt.figure(figsize=(2, 1), dpi=50)
        plt.plot([0, 1], [1, 0])
        w.add_figure("fig", fig, 0)
        w.add_image_with_boxes("boxes", np.zeros((3, 10, 10)), np.array([[1, 1, 8, 8]]), 0)
    ev = {e.summary.value[0].tag: _png(e) for e in _events(d) if e.HasField("summary")}
    assert ev["fig"].shape == (50, 100, 3) and ev["fig"].min() < 100  # the line is drawn
    assert ev["boxes"][1, 4].tolist() == [255, 0, 0] and ev["boxes"][4, 4].tolist() == [0] * 3


def test_text_audio_tensor_pr_custom_mesh_equal_torch(tmp_path):
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 50)
    preds = rng.random(50)
    verts = rng.random((1, 4, 3)).astype(np.float32)
    faces = np.array([[[0, 1, 2], [0, 2, 3]]], dtype=np.int32)
    counts = [np.arange(5.0) for _ in range(6)]

    def calls(w, lib):
        w.add_text("note", "hello **world**", 2)
        w.add_audio("beep", lib.tensor(np.sin(np.arange(100) / 3.0)), 1, sample_rate=8000)
        w.add_tensor("t", lib.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), 0)
        w.add_pr_curve("pr", labels, preds, 0, num_thresholds=20)
        w.add_pr_curve_raw("prraw", *counts, 1, num_thresholds=5)
        w.add_custom_scalars({"cat": {"lines": ["Multiline", ["a", "b"]],
                                      "band": ["Margin", ["m", "lo", "hi"]]}})
        w.add_custom_scalars_multilinechart(["a", "b"])
        w.add_mesh("mesh", lib.tensor(verts), faces=lib.tensor(faces), global_step=0)
    _same_events(tmp_path, calls)
    ea = EventAccumulator(str(tmp_path / "ember"))
    ea.Reload()
    assert ea.Tensors("note/text_summary")[0].tensor_proto.string_val == [b"hello **world**"]
    assert ea.Audio("beep")[0].length_frames == 100


def test_hparams_own_run_equal_torch(tmp_path):
    hp = {"lr": 0.1, "bs": 32, "opt": "sgd", "nesterov": True}
    metrics = {"hparam/acc": 0.75}

    def calls(w, lib):
        w.add_hparams(hp, metrics, {"opt": ["sgd", "adam"]}, run_name="trial")
    _both(tmp_path, calls)
    e, t = _events(str(tmp_path / "ember" / "trial")), _events(str(tmp_path / "torch" / "trial"))
    assert e == t and len(e) == 5
    from tensorboard.plugins.hparams import plugin_data_pb2
    content = e[2].summary.value[0].metadata.plugin_data.content
    ssi = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    assert ssi.hparams["lr"].number_value == 0.1 and ssi.hparams["opt"].string_value == "sgd"
    assert ssi.hparams["nesterov"].number_value == 1.0  # PyTorch logs a bool as a number
    assert e[4].summary.value[0].simple_value == 0.75


def test_embedding_projector_files_equal_torch(tmp_path):
    rng = np.random.default_rng(3)
    mat = rng.standard_normal((6, 3)).astype(np.float32)
    imgs = rng.random((6, 3, 4, 4)).astype(np.float32)
    meta = [f"p{i}" for i in range(6)]

    def calls(w, lib):
        w.add_embedding(lib.tensor(mat), metadata=meta, label_img=lib.tensor(imgs))
        w.add_embedding(lib.tensor(mat * 2), metadata=[[m, i] for i, m in enumerate(meta)],
                        metadata_header=["name", "i"], global_step=3, tag="a/b")
    _both(tmp_path, calls)
    files = sorted(os.path.relpath(p, tmp_path / "ember")
                   for p in glob.glob(str(tmp_path / "ember" / "**" / "*"), recursive=True)
                   if os.path.isfile(p) and "tfevents" not in p)
    assert "projector_config.pbtxt" in files and len(files) == 6
    for f in files:
        a = (tmp_path / "ember" / f).read_bytes()
        b = (tmp_path / "torch" / f).read_bytes()
        if f.endswith(".png"):
            a, b = (np.asarray(Image.open(io.BytesIO(x))) for x in (a, b))
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b, f
    rows = (tmp_path / "ember" / "00000" / "default" / "tensors.tsv").read_text().splitlines()
    np.testing.assert_array_equal(np.array([r.split("\t") for r in rows], np.float32), mat)


class _Net(ember.nn.Module):
    def __init__(self, nn):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * 2


class _TNet(torch.nn.Module):
    def __init__(self, nn):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)

    forward = _Net.forward


def test_graph_read_back_with_torch_scopes(tmp_path):
    d = str(tmp_path / "e")
    with SummaryWriter(d) as w:
        w.add_graph(_Net(ember.nn), ember.randn(5, 4))
    with ttb.SummaryWriter(str(tmp_path / "t")) as w:
        w.add_graph(_TNet(torch.nn), torch.randn(5, 4))
    graphs = []
    for path in (d, str(tmp_path / "t")):
        ea = EventAccumulator(path)
        ea.Reload()
        assert ea.Tags()["graph"] and ea.Tags()["run_metadata"] == ["step1"]
        graphs.append(ea.Graph())
    e, t = graphs

    def scopes(g):
        # the module scopes that hold ops (parameter names differ: torch's are trace names)
        return {n.name.rsplit("/", 1)[0] for n in g.node if n.op.startswith("aten::")}

    assert {s.replace("_Net", "_TNet") for s in scopes(e)} == scopes(t)
    io_e = {(n.name, tuple(d.size for d in n.attr["_output_shapes"].list.shape[0].dim))
            for n in e.node if n.op == "IO Node"}
    io_t = {(n.name, tuple(d.size for d in n.attr["_output_shapes"].list.shape[0].dim))
            for n in t.node if n.op == "IO Node"}
    assert io_e == io_t == {("input/x", (5, 4)), ("output/output.1", (5, 2))}
    by_name = {n.name: n for n in e.node}
    relu = by_name["_Net/ReLU[act]/relu"]
    assert relu.op == "aten::relu" and list(relu.input) == ["_Net/Linear[fc1]/linear"]
    assert list(by_name["output/output.1"].input) == ["_Net/mul"]


def test_logging_never_keeps_a_graph_alive(tmp_path):
    net = _Net(ember.nn)
    x = ember.randn(5, 4)
    with SummaryWriter(str(tmp_path)) as w:
        out = net(x)
        loss = out.pow(2).mean()
        ref = weakref.ref(loss.grad_fn)
        w.add_scalar("loss", loss, 0)
        w.add_histogram("out", out, 0)
        w.add_image("img", out.sigmoid(), 0, dataformats="HW")
        w.add_embedding(out)
        w.add_graph(net, x)
        del out, loss
        gc.collect()
        assert ref() is None


def test_defaults_purge_step_reopen(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_c", purge_step=5)
    assert w.get_logdir().startswith("runs" + os.sep) and w.get_logdir().endswith("_c")
    w.add_scalar("x", 1.0, 6)
    w.close()
    w.close()  # twice is fine, as in PyTorch
    w.add_scalar("x", 2.0, 7)  # reopens a new event file
    w.flush()
    ev = _events(w.get_logdir())
    assert ev[1].step == 5 and ev[2].session_log.status == ev[2].session_log.START
    assert [e.summary.value[0].simple_value for e in ev if e.HasField("summary")] == [1.0, 2.0]
    assert len(glob.glob(os.path.join(w.get_logdir(), "events.*"))) == 2
    w.close()
    with pytest.raises(NotImplementedError, match="add_video"):
        w.add_video("v", np.zeros((1, 1, 3, 2, 2)))


_CHILD = r"""
import sys, time
sys.path.insert(0, {root!r})
from ember.utils.tensorboard import SummaryWriter
w = SummaryWriter({logdir!r}, max_queue=1000, flush_secs={secs})
for i in range(5):
    w.add_scalar("loss", i / 2, i)
{tail}
"""


def _child(tmp_path, secs, tail):
    logdir = str(tmp_path / "run")
    code = _CHILD.format(root=ROOT, logdir=logdir, secs=secs, tail=tail)
    return logdir, subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _losses(logdir):
    return [(e.step, e.summary.value[0].simple_value) for e in _events(logdir)
            if e.HasField("summary")]


def test_killed_process_leaves_flushed_events(tmp_path):
    # flush_secs: the timer thread writes the five pending events; then the process is
    # killed (no atexit) and TensorBoard's reader reads what reached the file
    logdir, p = _child(tmp_path, 0.2, "print('logged', flush=True)\nsys.stdin.read()")
    try:
        assert p.stdout.readline().strip() == b"logged"
        want = [(i, i / 2) for i in range(5)]
        for _ in range(600):  # bounded: at most 60 s
            if len(glob.glob(os.path.join(logdir, "events.*"))) and _losses(logdir) == want:
                break
            p.wait(timeout=0.1) if p.poll() is not None else __import__("time").sleep(0.1)
        p.kill()
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == -9
    assert _losses(logdir) == want


@pytest.mark.parametrize("tail", ["", "1 / 0"])
def test_exit_and_crash_flush_at_exit(tmp_path, tail):
    # flush_secs is long and the queue never fills: only interpreter exit writes them
    logdir, p = _child(tmp_path, 3600, tail)
    p.communicate(timeout=60)
    assert _losses(logdir) == [(i, i / 2) for i in range(5)]


def test_missing_tensorboard_names_the_extra(monkeypatch):
    # as if the package were not installed: the import of ember.utils.tensorboard fails
    for name in [m for m in sys.modules if m == "ember.utils.tensorboard" or
                 m.startswith("ember.utils.tensorboard.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[tensorboard\]'"):
        importlib.import_module("ember.utils.tensorboard")


def test_torch_import_path_under_ember_run(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "from torch.utils.tensorboard import SummaryWriter\nimport torch\n"
        f"with SummaryWriter({str(tmp_path / 'r')!r}) as w:\n"
        "    w.add_scalar('a', torch.tensor(3.5), 1)\n"
        "print(type(w).__module__)\n")
    out = subprocess.run([sys.executable, "-m", "ember", "run", str(script)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.stdout.strip() == "ember.utils.tensorboard.writer", out.stderr
    assert _losses(str(tmp_path / "r")) == [(1, 3.5)]


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tensorboard_server_serves_ember_scalars(tmp_path):
    import json
    import time
    import urllib.request
    with SummaryWriter(str(tmp_path / "run1")) as w:
        for i in range(4):
            w.add_scalar("loss", 1.0 / (i + 1), i)
    port = _free_port()
    # the real server, on loopback only, started and stopped here
    p = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp_path),
                          "--host", "127.0.0.1", "--port", str(port), "--load_fast=false"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/data"
    try:
        runs = None
        for _ in range(240):  # bounded: at most about 60 s
            try:
                with urllib.request.urlopen(base + "/runs", timeout=5) as r:
                    runs = json.load(r)
                if runs == ["run1"]:
                    break
            except OSError:
                pass
            assert p.poll() is None, "tensorboard exited"
            time.sleep(0.25)
        assert runs == ["run1"]
        url = base + "/plugin/scalars/scalars?run=run1&tag=loss"
        with urllib.request.urlopen(url, timeout=10) as r:
            got = json.load(r)
    finally:
        p.terminate()
        p.wait(timeout=30)
    assert [(step, v) for _, step, v in got] == [(i, np.float32(1.0 / (i + 1))) for i in range(4)]


def test_forked_child_does_not_write_the_parents_events(tmp_path):
    # a DataLoader worker forked while events are pending must not write them again
    w = SummaryWriter(str(tmp_path), max_queue=100)
    w.add_scalar("loss", 1.0, 0)
    w.add_scalar("loss", 2.0, 1)
    pid = os.fork()
    if pid == 0:
        try:
            w.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    w.close()
    assert _losses(str(tmp_path)) == [(0, 1.0), (1, 2.0)]
