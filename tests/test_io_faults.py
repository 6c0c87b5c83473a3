"""Every ember writer meets a full disk, a read-only file system and a permission-denied
directory with exactly one clear exception: an ``OSError`` (``PermissionError`` for
EACCES) whose message says what happened in plain words and names the path, printed as
one traceback, with nothing more at interpreter exit (no thread, atexit or ``__del__``
tracebacks).

Each run is a child process (tests/io_fault_child.py) so that its whole stderr, exit
included, can be read. The faults are simulated (the low-level write, fsync, open and
mkdir calls raise the errno) and, where this process may mount file systems (root), real:
a full tmpfs, a tmpfs remounted read-only, and a mode-0555 directory for a process that
gave up root. Where mounting is not possible the real-fault tests run the simulated
fault instead, so every test always runs.
"""
import contextlib
import errno
import json
import os
import re
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CHILD = os.path.join(HERE, "io_fault_child.py")
WRITERS = ["save", "safetensors.save_file", "safetensors.save_model", "jit.save",
           "ScriptModule.save", "onnx.export", "export_chrome_trace", "download_url",
           "extract_archive", "SummaryWriter", "add_embedding"]
PLAIN = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only",
         errno.EACCES: "permission denied"}
TRACEBACK = "Traceback (most recent call last)"


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONWARNINGS", None)
    return env


def _run(*args, timeout=180):
    return subprocess.run([sys.executable, CHILD, *map(str, args)], capture_output=True,
                          text=True, env=_env(), timeout=timeout, cwd=ROOT)


@contextlib.contextmanager
def _tmpfs(directory, size="256k"):
    """Mount a tmpfs of ``size`` on ``directory``; yields False where that is not allowed."""
    ok = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        capture_output=True, timeout=30).returncode == 0
    try:
        yield ok
    finally:
        if ok:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True, timeout=30)


def _cases(stderr):
    """{mode/case: its stderr} and what came after ``@@EXIT``."""
    head, _, tail = stderr.partition("@@EXIT\n")
    cases = dict(re.findall(r"@@CASE (\S+)\n(.*?)@@DONE \1\n", head, re.S))
    return cases, tail


def _check_one_error(text, code, path_prefix):
    """``text`` holds one traceback ending in the plain-words error naming a path."""
    assert text.count(TRACEBACK) == 1, text
    assert "Exception ignored" not in text and "Exception in thread" not in text, text
    last = text.strip().splitlines()[-1]
    kind = "PermissionError" if code == errno.EACCES else "OSError"
    assert last.startswith(f"{kind}: [Errno {code}] "), last
    assert PLAIN[code] in last, last
    assert re.search(r"'" + re.escape(str(path_prefix)) + r"[^']*'$", last), last


def _check_writers(scratch, runs):
    """Run every writer under each ``(mode, directory, errno)`` of ``runs`` in one child."""
    r = _run(scratch, *[f"{mode}:{d}" for mode, d, _ in runs], "--", *WRITERS)
    assert r.returncode == 0, r.stderr
    cases, tail = _cases(r.stderr)
    assert len(cases) == len(runs) * len(WRITERS), r.stderr
    for mode, directory, code in runs:
        for name in WRITERS:
            _check_one_error(cases[f"{mode}/{name}"], code, directory)
        leftovers = [n for _, _, files in os.walk(directory) for n in files
                     if n.endswith(".ember-tmp")]
        assert leftovers == []
    assert tail == "", tail   # nothing at interpreter exit


def test_simulated_faults_every_writer(tmp_path):
    runs = []
    for code in (errno.ENOSPC, errno.EROFS, errno.EACCES):
        d = tmp_path / errno.errorcode[code]
        d.mkdir()
        runs.append((errno.errorcode[code].lower(), d, code))
    (tmp_path / "s").mkdir()
    _check_writers(tmp_path / "s", runs)


def _fill(directory):
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_real_faults_every_writer(tmp_path):
    """A full tmpfs, a tmpfs remounted read-only and a directory of mode 0555 for a
    process without root; where mounting is not allowed, the simulated fault instead."""
    base = tempfile.mkdtemp()   # every user can reach it: the dropped child reads here
    full, ro = os.path.join(base, "full"), os.path.join(base, "ro")
    denied, scratch = os.path.join(base, "denied"), os.path.join(base, "s")
    for d in (full, ro, denied, scratch):
        os.mkdir(d)
    os.chmod(base, 0o755)
    os.chmod(scratch, 0o777)
    os.chmod(denied, 0o555)
    try:
        with _tmpfs(full) as full_ok, _tmpfs(ro) as ro_ok:
            runs = []
            if full_ok:
                _fill(full)
                runs.append(("real-full", full, errno.ENOSPC))
            else:
                runs.append(("enospc", full, errno.ENOSPC))
            if ro_ok:
                # an existing target: a read-only mount was once reported as "not writable"
                with open(os.path.join(ro, "ckpt.pt"), "wb") as f:
                    f.write(b"old")
                os.mkdir(os.path.join(ro, "run"))
                remount = subprocess.run(["mount", "-o", "remount,ro", ro],
                                         capture_output=True, timeout=30)
                assert remount.returncode == 0, remount.stderr
                runs.append(("real-ro", ro, errno.EROFS))
            else:
                runs.append(("erofs", ro, errno.EROFS))
            runs.append(("drop" if os.geteuid() == 0 else "real", denied, errno.EACCES))
            _check_writers(scratch, runs)
            if ro_ok:
                with open(os.path.join(ro, "ckpt.pt"), "rb") as f:
                    assert f.read() == b"old"
    finally:
        os.chmod(denied, 0o755)
        subprocess.run(["rm", "-rf", base], timeout=30)


def _tensorboard(scenario, tmp_path, fault="real"):
    """Run one SummaryWriter scenario on a real small tmpfs that fills up (as root), else
    (or when ``fault`` is "sim") on the simulated full disk."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if fault == "sim":
        return _run("tensorboard", scenario, "sim", disk)
    with _tmpfs(disk, "512k") as mounted:
        return _run("tensorboard", scenario, "real" if mounted else "sim", disk)


def _one_traceback_then_nothing(r):
    assert r.returncode == 1, r.stderr
    assert r.stderr.count(TRACEBACK) == 1, r.stderr
    assert "Exception ignored" not in r.stderr and "Exception in thread" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("OSError: [Errno 28] cannot write the TensorBoard event file: "
                           "the disk is full"), r.stderr
    assert "events.out.tfevents." in last and "writes no more" in last


@pytest.mark.parametrize("scenario,fault", [("loop", "real"), ("loop", "sim"),
                                            ("with", "real"), ("thread-raised", "real")])
def test_summary_writer_full_disk_uncaught(tmp_path, scenario, fault):
    """The training script dies of one traceback, the writer's own words, and the exit
    (atexit close, flush thread, ``__del__``) adds nothing."""
    r = _tensorboard(scenario, tmp_path, fault)
    _one_traceback_then_nothing(r)
    if scenario == "thread-raised":
        assert "thread met the fault: True" in r.stdout


def test_summary_writer_failure_nobody_raised_is_told_once_at_exit(tmp_path):
    r = _tensorboard("thread-unraised", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "thread met the fault: True" in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("ember.utils.tensorboard: [Errno 28] cannot write the "
                               "TensorBoard event file: the disk is full"), r.stderr


def test_broken_summary_writer_does_not_spam(tmp_path):
    r = _tensorboard("after", tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("first: [Errno 28] cannot write the TensorBoard event file: "
                             "the disk is full")
    later = [line for line in out if line.startswith("later: ")]
    assert len(later) == 3
    assert all("this TensorBoard writer is broken: an earlier write failed (the disk is "
               "full" in line and "events.out.tfevents." in line for line in later)
    assert out[-1] == "closed quietly"


_TORCH_CHILD = r"""
import json, os, sys
import numpy as np
which = sys.argv[1]
if which == "torch":
    from torch.utils.tensorboard import SummaryWriter
else:
    from ember.utils.tensorboard import SummaryWriter
result = {}
for fault, directory in zip(sys.argv[2::2], sys.argv[3::2]):
    try:
        w = SummaryWriter(os.path.join(directory, which), max_queue=1000, flush_secs=3600)
        if fault == "full":
            fd = os.open(os.path.join(directory, which + ".filler"), os.O_WRONLY | os.O_CREAT)
            try:
                while True:
                    os.write(fd, b"\0" * 4096)
            except OSError:
                os.close(fd)
            for step in range(200):
                w.add_histogram("h", np.arange(2000.0), step)
            w.flush()
        result[fault] = None
    except Exception as e:
        result[fault] = [type(e).__name__, getattr(e, "errno", None)]
print(json.dumps(result))
"""


def _both(*faults):
    """{library: ({fault: [exception type, errno]}, stderr)} for torch's and ember's
    SummaryWriter meeting each ``(fault, directory)``."""
    out = {}
    args = [str(x) for pair in faults for x in pair]
    for which in ("torch", "ember"):
        r = subprocess.run([sys.executable, "-c", _TORCH_CHILD, which, *args],
                           capture_output=True, text=True, env=_env(), timeout=180, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        out[which] = (json.loads(r.stdout.strip().splitlines()[-1]), r.stderr)
    return out


def test_summary_writer_refuses_what_torch_refuses(tmp_path):
    """torch's SummaryWriter meets the same faults with an OSError of the same errno
    (its flush thread prints a second traceback of its own; ember's prints nothing)."""
    full, ro = tmp_path / "full", tmp_path / "ro"
    full.mkdir()
    ro.mkdir()
    with _tmpfs(full, "512k") as full_ok, _tmpfs(ro, "64k") as ro_ok:
        if full_ok and ro_ok:
            subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True, timeout=30)
            out = _both(("full", full), ("open", ro))
            torch_seen, ember_seen = out["torch"][0], out["ember"][0]
            assert torch_seen["full"] == ember_seen["full"] == ["OSError", errno.ENOSPC], out
            assert torch_seen["open"] == ember_seen["open"] == ["OSError", errno.EROFS], out
            assert out["ember"][1].count(TRACEBACK) == 0, out["ember"][1]
            return
    if os.geteuid() != 0:   # a directory nobody may write, for a user that is not root
        os.chmod(ro, 0o555)
        try:
            out = _both(("open", ro))
        finally:
            os.chmod(ro, 0o755)
        assert out["torch"][0]["open"] == out["ember"][0]["open"] == \
            ["PermissionError", errno.EACCES], out
        return
    # root that may not mount: a log directory under a regular file is the real fault left
    (ro / "file").write_bytes(b"")
    out = _both(("open", ro / "file"))
    assert out["torch"][0]["open"] == out["ember"][0]["open"] == \
        ["NotADirectoryError", errno.ENOTDIR], out
