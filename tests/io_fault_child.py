"""The child process of tests/test_io_faults.py: runs ember's writers against a failing
file system and reports on stderr, between markers, what each one raised.

    python io_fault_child.py SCRATCH MODE:DIR [MODE:DIR ...] -- CASE [CASE ...]
    python io_fault_child.py tensorboard SCENARIO sim|real DIR

Each MODE says where the fault comes from: ``enospc``/``erofs``/``eacces`` make the
low-level calls fail with that errno (writes and fsync for a full disk; creating files
and directories for the others); ``real`` (or ``real-<anything>``) leaves the file system
as the parent made it (a full or read-only tmpfs), and ``drop`` first gives up root (a
real permission-denied directory). Each case runs one writer into DIR after a first run
into SCRATCH (so that every lazy import is done before the fault); its exception is
printed with its traceback between ``@@CASE mode/name`` and ``@@DONE mode/name``.
``@@EXIT`` ends the run: anything printed after it came from interpreter exit.
"""
import errno
import gc
import gzip
import os
import sys
import traceback

import numpy as np

import ember
import ember.datasets.utils
import ember.jit
import ember.onnx
import ember.utils.safetensors as est
from ember.utils.tensorboard import SummaryWriter


def _tensors():
    return {"w": ember.from_numpy(np.arange(20000, dtype=np.float32))}


def _model():
    return ember.nn.Linear(200, 100)


def _trace():
    from ember.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x = ember.ones(4, 4)
        for _ in range(300):
            x = (x * 1.0).relu()
    return prof


def _gz(src):
    path = os.path.join(src, "payload.bin.gz")
    if not os.path.exists(path):
        with gzip.open(path, "wb") as f:
            f.write(os.urandom(20000))
    return path


def writers(src):
    """name -> a function writing into the directory it is given."""
    def summary(d):
        w = SummaryWriter(os.path.join(d, "run"), max_queue=5, flush_secs=3600)
        for step in range(200):
            w.add_histogram("h", np.random.default_rng(step).normal(size=2000), step)
        w.close()

    def embedding(d):
        with SummaryWriter(os.path.join(d, "emb"), flush_secs=3600) as w:
            w.add_embedding(ember.randn(400, 20), metadata=[str(i) for i in range(400)])

    def script_save(d):
        ember.jit.trace(_model(), ember.randn(1, 200)).save(os.path.join(d, "m3.pt"))

    return {
        "save": lambda d: ember.save(_tensors(), os.path.join(d, "ckpt.pt")),
        "safetensors.save_file": lambda d: est.save_file(_tensors(),
                                                         os.path.join(d, "t.safetensors")),
        "safetensors.save_model": lambda d: est.save_model(_model(),
                                                           os.path.join(d, "m.safetensors")),
        "jit.save": lambda d: ember.jit.save(ember.jit.trace(_model(), ember.randn(1, 200)),
                                             os.path.join(d, "m.pt")),
        "ScriptModule.save": script_save,
        "onnx.export": lambda d: ember.onnx.export(_model(), (ember.randn(1, 200),),
                                                   os.path.join(d, "m.onnx")),
        "export_chrome_trace": lambda d: _trace().export_chrome_trace(
            os.path.join(d, "trace.json")),
        "download_url": lambda d: ember.datasets.utils.download_url(
            "file://" + _gz(src), os.path.join(d, "cache")),
        "extract_archive": lambda d: ember.datasets.utils.extract_archive(_gz(src), d),
        "SummaryWriter": summary,
        "add_embedding": embedding,
    }


class _Failing:
    """A file whose writes fail with ``code`` once ``room`` bytes are used, as on a full
    disk; everything else goes to the real file."""

    def __init__(self, f, code, room):
        self.f, self.code, self.room = f, code, room

    def write(self, b):
        n = len(memoryview(b))
        if n > self.room:
            raise OSError(self.code, os.strerror(self.code))
        self.room -= n
        return self.f.write(b)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def inject(code):
    """Make the low-level calls fail with ``code`` as the kernel would."""
    import ember.utils.tensorboard._record as record
    real_fdopen, real_open, real_makedirs, real_fsync = os.fdopen, os.open, os.makedirs, \
        os.fsync
    real_builtin_open = open

    def restore():
        os.fdopen, os.open, os.makedirs, os.fsync = real_fdopen, real_open, real_makedirs, \
            real_fsync
        record.__dict__.pop("open", None)
    if code == errno.ENOSPC:
        # writes fail after a little; the event file too (it is opened with open())
        os.fdopen = lambda fd, mode="r", *a, **k: (
            _Failing(real_fdopen(fd, mode, *a, **k), code, 1000) if "w" in mode
            else real_fdopen(fd, mode, *a, **k))
        record.open = lambda path, mode="r", *a, **k: _Failing(
            real_builtin_open(path, mode, *a, **k), code, 2000)

        def fsync(fd):
            raise OSError(code, os.strerror(code))
        os.fsync = fsync
        return restore

    def deny(path, *a, **k):
        raise OSError(code, os.strerror(code), os.fspath(path))

    def opener(path, flags, *a, **k):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            deny(path)
        return real_open(path, flags, *a, **k)

    def makedirs(path, mode=0o777, exist_ok=False):
        if not os.path.isdir(path):
            deny(path)
        return real_makedirs(path, mode, exist_ok)
    os.open, os.makedirs = opener, makedirs
    record.open = lambda path, mode="r", *a, **k: deny(path) if any(
        c in mode for c in "wax+") else real_builtin_open(path, mode, *a, **k)
    return restore


def fill(directory):
    """Write a filler file into ``directory`` until its file system is full."""
    chunk = b"\0" * 4096
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)


def tensorboard(scenario, fault, directory):
    """A SummaryWriter whose disk fills while it runs; the exceptions are not caught
    unless the scenario says so, as in a user's training script."""
    import time
    if fault == "sim":
        inject(errno.ENOSPC)   # room for the file's header, not for much more
    w = SummaryWriter(directory, max_queue=1000,
                      flush_secs=0.05 if scenario.startswith("thread") else 3600)
    if fault == "real":
        fill(directory)
    values = np.random.default_rng(0).normal(size=2000)
    if scenario == "loop":
        for step in range(1000):
            w.add_histogram("h", values, step)
            w.flush()
    elif scenario == "with":
        with SummaryWriter(directory, max_queue=2, flush_secs=3600) as w2:
            for step in range(1000):
                w2.add_histogram("h", values, step)
    elif scenario.startswith("thread"):
        w.add_histogram("h", values, 0)
        deadline = time.monotonic() + 30
        while w.file_writer.event_writer._error is None and time.monotonic() < deadline:
            time.sleep(0.02)
        print("thread met the fault:", w.file_writer.event_writer._error is not None,
              flush=True)
        if scenario == "thread-raised":
            w.add_scalar("x", 1.0, 1)
    elif scenario == "after":
        try:
            w.add_histogram("h", values, 0)
            w.flush()
        except OSError as e:
            print("first:", e, flush=True)
        for step in range(3):
            try:
                w.add_scalar("x", 1.0, step)
            except OSError as e:
                print("later:", e, flush=True)
        w.close()
        w.close()
        print("closed quietly", flush=True)


def main():
    if sys.argv[1] == "tensorboard":
        return tensorboard(*sys.argv[2:5])
    scratch = sys.argv[1]
    runs = [arg.split(":", 1) for arg in sys.argv[2:sys.argv.index("--")]]
    names = sys.argv[sys.argv.index("--") + 1:]
    table = writers(scratch)
    for name in names:   # every lazy import before the fault (or before giving up root)
        table[name](scratch)
    for mode, target in runs:
        restore = None
        if mode == "drop":   # last: root is not given back
            os.setgid(65534)
            os.setuid(65534)
        elif not mode.startswith("real"):
            restore = inject(getattr(errno, mode.upper()))
        for name in names:
            sys.stderr.write(f"@@CASE {mode}/{name}\n")
            sys.stderr.flush()
            try:
                table[name](target)
                print(f"{name}: no error", flush=True)
            except Exception:
                traceback.print_exc()
            gc.collect()   # a writer's __del__ speaks now, inside its case, if at all
            sys.stderr.write(f"@@DONE {mode}/{name}\n")
            sys.stderr.flush()
        if restore is not None:
            restore()
    sys.stderr.write("@@EXIT\n")
    sys.stderr.flush()


if __name__ == "__main__":
    main()
