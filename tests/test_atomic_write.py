"""Atomic, durable saves: kills mid-write, full disks, permissions, races, links, modes."""
import errno
import io
import os
import signal
import socket
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from io_fault_child import _Failing  # a file that fails as a full disk does

import ember
from ember.utils import _atomic
from ember.utils import safetensors as est

HOST = socket.gethostname().replace(".", "_")[:32]


def _old_ckpt():
    return {"step": 1, "w": ember.from_numpy(np.arange(6, dtype=np.float32))}


def _big_ckpt(n=24):
    # many 1 MB records, so the file grows in small steps a poller can catch
    return {"step": 2, **{f"w{i}": ember.from_numpy(np.full(1 << 18, i, np.float32))
                          for i in range(n)}}


def _temps(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".ember-tmp"))


def _which(path):
    """1 or 2: the step of the checkpoint at ``path``, checked whole in ember and in torch."""
    e = ember.load(path)
    t = torch.load(path, weights_only=True)
    assert e["step"] == t["step"]
    if e["step"] == 1:
        np.testing.assert_array_equal(e["w"].numpy(), np.arange(6, dtype=np.float32))
        np.testing.assert_array_equal(t["w"].numpy(), np.arange(6, dtype=np.float32))
    else:
        for i in range(24):
            assert e[f"w{i}"].numpy().shape == (1 << 18,) and (e[f"w{i}"].numpy() == i).all()
            assert (t[f"w{i}"].numpy() == i).all()
    return e["step"]


def _fork(fn):
    """Run ``fn()`` in a forked child; it exits 0 on success, 1 on an exception."""
    pid = os.fork()
    if pid == 0:   # pragma: no cover - the child
        code = 1
        try:
            fn()
            code = 0
        finally:
            os._exit(code)
    return pid


def _kill_at(path, save, fraction, full):
    """Fork a child that runs ``save``; SIGKILL it once its temp file reaches ``fraction``.

    ``fraction`` None kills it once the temp file is gone (after the rename). Returns
    the temp file's size at the kill (None when there was none).
    """
    directory, base = os.path.split(path)
    pid = _fork(save)
    prefix = f".{base}.{HOST}.{pid}."
    seen = size = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        names = [n for n in os.listdir(directory) if n.startswith(prefix)]
        if names:
            seen = names[0]
            try:
                size = os.stat(os.path.join(directory, seen)).st_size
            except FileNotFoundError:
                size = None
            if fraction is not None and size is not None and size >= fraction * full:
                break
        elif seen is not None or os.waitpid(pid, os.WNOHANG) != (0, 0):
            size = None   # renamed into place, or the child is already done
            break
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return size


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_sigkill_mid_write_keeps_old_file(tmp_path, fmt):
    path = str(tmp_path / f"ckpt.{fmt}")
    if fmt == "pt":
        def save(obj):
            ember.save(obj, path)
        which = _which
        buf = io.BytesIO()
        ember.save(_big_ckpt(), buf)
        full = len(buf.getvalue())
    else:
        def save(obj):
            est.save_file({k: v for k, v in obj.items() if k != "step"}, path,
                          metadata={"step": str(obj["step"])})

        def which(p):
            from safetensors import safe_open
            from safetensors.numpy import load_file
            with safe_open(p, "np") as f:
                step = int(f.metadata()["step"])
            theirs, ours = load_file(p), est.load_file(p)
            assert sorted(theirs) == sorted(ours) == (["w"] if step == 1 else
                                                      sorted(f"w{i}" for i in range(24)))
            for k in theirs:
                np.testing.assert_array_equal(theirs[k], ours[k].numpy())
            return step
        full = len(est.save({k: v for k, v in _big_ckpt().items() if k != "step"}))
    fractions = [0.0, 0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95, 1.0, None]
    if fmt == "safetensors":
        fractions = fractions[::2] + [None]
    big = _big_ckpt()
    outcomes = []
    for fraction in fractions:
        save(_old_ckpt())
        assert _temps(tmp_path) == []   # the previous kill's temp file was cleaned up
        size = _kill_at(path, lambda: save(big), fraction, full)
        step = which(path)
        left = _temps(tmp_path)
        assert len(left) <= 1
        if size is not None and size < full:
            # killed while writing: the old file must be there, whole
            assert step == 1, (fraction, size, full)
            assert len(left) == 1 and left[0].startswith(f".ckpt.{fmt}.{HOST}.")
        outcomes.append((fraction, size, step))
    mid = [o for o in outcomes if o[1] is not None and o[1] < full]
    assert len(outcomes) >= (13 if fmt == "pt" else 8)
    # most kills land mid-write (safetensors writes its bytes in one call: fewer do)
    assert len(mid) >= (6 if fmt == "pt" else 3), outcomes
    assert any(o[2] == 2 for o in outcomes), outcomes   # a kill after the rename: new file
    print(f"\n{fmt}: {len(outcomes)} kills, {len(mid)} mid-write (old file each time), "
          f"{sum(o[2] == 2 for o in outcomes)} after the rename (new file): {outcomes}")


def test_sigkill_separate_interpreter(tmp_path):
    """A real ``python`` process (not a fork) killed mid-save leaves the old checkpoint."""
    path = tmp_path / "ckpt.pt"
    ember.save(_old_ckpt(), path)
    code = ("import sys, numpy as np, ember\n"
            "big = {'step': 2, **{f'w{i}': ember.from_numpy(np.full(1 << 18, i, np.float32))"
            " for i in range(24)}}\n"
            "while True:\n    ember.save(big, sys.argv[1])\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    # the child saves over other.pt in a loop; we kill it mid-write there, then check both
    ember.save(_old_ckpt(), tmp_path / "other.pt")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "other.pt")], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            names = [n for n in _temps(tmp_path) if f".{proc.pid}." in n]
            if names:
                try:
                    if os.stat(tmp_path / names[0]).st_size > 1 << 20:
                        break
                except FileNotFoundError:
                    pass
        proc.kill()
    finally:
        proc.wait()
    assert _which(tmp_path / "other.pt") in (1, 2)
    assert _which(path) == 1
    ember.save(_old_ckpt(), tmp_path / "other.pt")
    assert _temps(tmp_path) == []


def test_enospc_on_write_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    ember.save(_old_ckpt(), path)
    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode, **kw: _Failing(real(fd, mode), errno.ENOSPC,
                                                              3 << 20))
    with pytest.raises(OSError) as info:
        ember.save(_big_ckpt(), path)
    assert info.value.errno == errno.ENOSPC
    assert str(path) in str(info.value) and "No space left" in str(info.value)
    assert "old file was left" in str(info.value)
    monkeypatch.undo()
    assert _which(path) == 1
    assert _temps(tmp_path) == []


def test_enospc_on_fsync_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "model.safetensors"
    est.save_file({"w": ember.ones(3)}, path)

    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="No space left") as info:
        est.save_file({"w": ember.zeros(1000)}, path)
    assert info.value.filename == str(path)
    monkeypatch.undo()
    assert est.load_file(path)["w"].tolist() == [1.0, 1.0, 1.0]
    assert _temps(tmp_path) == []


def _mount_tmpfs(directory, size):
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(directory)], capture_output=True).returncode == 0


def test_real_full_filesystem_keeps_old_file(tmp_path):
    """A real kernel failure: a 2 MB tmpfs (as root), else a 2 MB file-size limit (EFBIG)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    path = disk / "ckpt.pt"
    mounted = _mount_tmpfs(disk, "2m")
    try:
        ember.save(_old_ckpt(), path)
        if mounted:
            with pytest.raises(OSError) as info:
                ember.save(_big_ckpt(), path)
            assert info.value.errno == errno.ENOSPC
            assert str(path) in str(info.value)
        else:
            import resource
            r, w = os.pipe()

            def child():
                os.close(r)
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))
                try:
                    ember.save(_big_ckpt(), path)
                    os.write(w, b"saved")
                except OSError as e:
                    os.write(w, f"{e.errno}|{e}".encode())
            pid = _fork(child)
            os.close(w)
            msg = os.read(r, 4096).decode()
            os.close(r)
            os.waitpid(pid, 0)
            assert msg.startswith(f"{errno.EFBIG}|") and str(path) in msg, msg
        assert _which(path) == 1
        assert _temps(disk) == []
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], check=True)


def _unprivileged(fn):
    """Run ``fn`` as a user without special rights: a child that drops root, if we are root."""
    if os.geteuid() != 0:
        return fn()
    r, w = os.pipe()

    def child():
        os.close(r)
        os.setgid(65534)
        os.setuid(65534)
        try:
            fn()
            os.write(w, b"ok")
        except OSError as e:
            os.write(w, f"{type(e).__name__}|{e.errno}|{e}".encode())
    pid = _fork(child)
    os.close(w)
    msg = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    if msg != "ok":
        name, code, text = msg.split("|", 2)
        raise PermissionError(int(code), text) if name == "PermissionError" else \
            OSError(int(code), text)


def test_permission_errors_name_target_and_keep_old_file(tmp_path):
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    path = ro_dir / "ckpt.pt"
    ember.save(_old_ckpt(), path)
    os.chmod(path, 0o644)
    os.chmod(ro_dir, 0o555)
    os.chmod(tmp_path, 0o755)
    try:
        with pytest.raises(PermissionError) as info:
            _unprivileged(lambda: ember.save(_big_ckpt(), path))
        assert str(path) in str(info.value) and "temporary file" in str(info.value)
    finally:
        os.chmod(ro_dir, 0o755)
    assert _which(path) == 1
    # a writable directory but a read-only file: refused, as open(path, "wb") refuses it
    os.chmod(ro_dir, 0o777)
    os.chmod(path, 0o444)
    with pytest.raises(PermissionError) as info:
        _unprivileged(lambda: ember.save(_big_ckpt(), path))
    assert str(path) in str(info.value)
    assert _which(path) == 1
    assert _temps(ro_dir) == []


def test_permission_error_on_rename_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    ember.save(_old_ckpt(), path)

    def replace(src, dst):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), src, dst)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(PermissionError, match="(?i)permission denied") as info:
        ember.save(_big_ckpt(), path)
    assert info.value.filename == str(path)
    monkeypatch.undo()
    assert _which(path) == 1
    assert _temps(tmp_path) == []


def test_two_processes_racing(tmp_path):
    path = str(tmp_path / "ckpt.pt")
    ember.save(_old_ckpt(), path)
    objs = {a: {"step": a, "w": ember.from_numpy(np.full(1 << 20, a, np.float32))}
            for a in (10, 20)}
    go = time.monotonic() + 0.3

    def saver(a):
        def run():
            while time.monotonic() < go:
                pass
            for _ in range(8):
                ember.save(objs[a], path)
        return run
    pids = [_fork(saver(a)) for a in (10, 20)]
    codes = {}
    while len(codes) < len(pids):
        d = ember.load(path)   # a reader never sees a half-written file
        if d["step"] != 1:
            assert (d["w"].numpy() == d["step"]).all() and d["w"].shape == (1 << 20,)
        for p in pids:
            if p not in codes:
                done, status = os.waitpid(p, os.WNOHANG)
                if done:
                    codes[p] = os.waitstatus_to_exitcode(status)
        time.sleep(0.001)
    assert list(codes.values()) == [0, 0]
    final = torch.load(path, weights_only=True)
    assert final["step"] in (10, 20)
    assert (final["w"].numpy() == final["step"]).all() and final["w"].shape == (1 << 20,)
    assert _temps(tmp_path) == []


def test_symlink_is_kept_and_its_target_replaced(tmp_path):
    real_dir = tmp_path / "store"
    real_dir.mkdir()
    real = real_dir / "real.pt"
    ember.save(_old_ckpt(), real)
    link = tmp_path / "latest.pt"
    os.symlink(os.path.join("store", "real.pt"), link)   # relative, to another directory
    ember.save(_big_ckpt(), link)
    assert os.path.islink(link) and os.readlink(link) == os.path.join("store", "real.pt")
    assert _which(real) == 2 and _which(link) == 2
    assert _temps(tmp_path) == [] and _temps(real_dir) == []
    # a dangling link: the file it names is created
    dangling = tmp_path / "next.pt"
    os.symlink("store/new.pt", dangling)
    est.save_file({"a": ember.ones(2)}, dangling)
    assert os.path.islink(dangling) and est.load_file(real_dir / "new.pt")["a"].tolist() == [1, 1]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_file_mode_follows_umask_like_open(tmp_path, umask):
    old = os.umask(umask)
    try:
        ember.save(_old_ckpt(), tmp_path / "e.pt")
        torch.save({"a": torch.ones(1)}, tmp_path / "t.pt")
        with open(tmp_path / "o.bin", "wb"):
            pass
    finally:
        os.umask(old)
    mode = stat.S_IMODE(os.stat(tmp_path / "e.pt").st_mode)
    assert mode == 0o666 & ~umask
    assert mode == stat.S_IMODE(os.stat(tmp_path / "t.pt").st_mode)
    assert mode == stat.S_IMODE(os.stat(tmp_path / "o.bin").st_mode)


def test_replaced_file_keeps_its_mode(tmp_path):
    path = tmp_path / "ckpt.pt"
    ember.save(_old_ckpt(), path)
    os.chmod(path, 0o640)
    ember.save(_big_ckpt(2), path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640   # as open(path, "wb") keeps it


def _dead_pid():
    pid = _fork(lambda: None)
    os.waitpid(pid, 0)
    return pid


def test_stale_temp_files_cleaned_by_next_save(tmp_path):
    path = tmp_path / "ckpt.pt"
    dead = _dead_pid()
    stale = tmp_path / f".ckpt.pt.{HOST}.{dead}.0123abcd.ember-tmp"
    live = tmp_path / f".ckpt.pt.{HOST}.{os.getpid()}.0123abcd.ember-tmp"   # a save under way
    remote = tmp_path / f".ckpt.pt.otherhost.{dead}.0123abcd.ember-tmp"   # not ours to judge
    other = tmp_path / f".other.pt.{HOST}.{dead}.0123abcd.ember-tmp"   # another target's
    for p in (stale, live, remote, other):
        p.write_bytes(b"partial")
    ember.save(_old_ckpt(), path)
    assert not stale.exists()
    assert live.exists() and remote.exists() and other.exists()
    assert _which(path) == 1


def test_failed_block_leaves_target_and_no_temp(tmp_path):
    path = tmp_path / "notes.txt"
    with _atomic.atomic_write(path, "w", encoding="utf-8") as f:
        f.write("first ünïcode\n")
    with pytest.raises(ValueError, match="boom"):
        with _atomic.atomic_write(path, "w") as f:
            f.write("second")
            raise ValueError("boom")
    # an OSError about another file passes through unchanged
    with pytest.raises(FileNotFoundError) as info:
        with _atomic.atomic_write(path, "wb"):
            open(tmp_path / "missing", "rb")
    assert info.value.filename == str(tmp_path / "missing")
    assert path.read_text(encoding="utf-8") == "first ünïcode\n"
    assert _temps(tmp_path) == []
    with pytest.raises(IsADirectoryError, match="directory"):
        ember.save(_old_ckpt(), tmp_path)
    with pytest.raises(ValueError, match="mode"):
        with _atomic.atomic_write(path, "ab"):
            pass


def test_safetensors_save_model_matches_package(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_model as t_load_model
    from safetensors.torch import save_model as t_save_model

    def tied(nn):
        m = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5, bias=False))
        m[1].weight = m[0].weight
        return m
    e, t = tied(ember.nn), tied(torch.nn)
    est.save_model(e, tmp_path / "e.safetensors")
    t_save_model(t, tmp_path / "t.safetensors")
    for name in ("e", "t"):
        with safe_open(tmp_path / f"{name}.safetensors", "np") as f:
            assert list(f.keys()) == ["0.weight"] and f.metadata() == {"1.weight": "0.weight"}
    assert t_load_model(t, tmp_path / "e.safetensors") == (set(), [])
    np.testing.assert_array_equal(t[1].weight.detach().numpy(), e[0].weight.detach().numpy())
    e2 = tied(ember.nn)
    assert est.load_model(e2, tmp_path / "e.safetensors") == (set(), [])
    assert e2[1].weight is e2[0].weight
    np.testing.assert_array_equal(e2[1].weight.detach().numpy(), e[0].weight.detach().numpy())
    with pytest.raises(RuntimeError, match="Missing key"):
        est.load_model(ember.nn.Sequential(ember.nn.Linear(3, 5)), tmp_path / "e.safetensors")


def _writers():
    """Each writer of the other subsystems that takes a path: (name, write(path, n))."""
    import ember.onnx

    def jit_save(path, n):
        m = ember.jit.trace(ember.nn.Linear(n, 2), ember.randn(1, n))
        ember.jit.save(m, str(path))

    def onnx_export(path, n):
        ember.onnx.export(ember.nn.Linear(n, 2), (ember.randn(1, n),), str(path))

    def projector(path, n):
        from ember.utils.tensorboard import SummaryWriter
        with SummaryWriter(str(path.parent / "runs")) as w:
            w.add_embedding(ember.randn(4, n), metadata=list("abcd"))
    return {"jit.save": jit_save, "onnx.export": onnx_export, "add_embedding": projector}


@pytest.mark.parametrize("name", ["jit.save", "onnx.export"])
def test_other_writers_keep_old_file_when_replace_fails(tmp_path, monkeypatch, name):
    """jit.save and onnx.export go through atomic_write: a failure at the last step leaves
    the previous file whole and no temporary file."""
    write = _writers()[name]
    path = tmp_path / "model.bin"
    write(path, 3)
    before = path.read_bytes()

    def no_replace(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", no_replace)
    with pytest.raises(OSError):
        write(path, 5)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _temps(tmp_path) == []


def test_tensorboard_side_files_are_atomic(tmp_path, monkeypatch):
    calls = []
    real = _atomic.atomic_write

    def spy(path, *a, **k):
        calls.append(os.fspath(path))
        return real(path, *a, **k)
    import ember.utils.tensorboard._embedding as emb
    monkeypatch.setattr(emb, "atomic_write", spy)
    _writers()["add_embedding"](tmp_path / "x", 3)
    assert any(c.endswith("projector_config.pbtxt") or c.endswith(".tsv") for c in calls)
