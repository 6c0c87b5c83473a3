"""Load every file of one kind of the hostile corpus, each in a forked child process.

Usage: ``python tests/hostile_runner.py KIND WORKDIR`` (KIND: ckpt, jit, onnx, st) prints
one JSON object per line: for each case, ember's outcome, the reference loader's outcome
(torch.load, torch.jit.load, onnxruntime, the safetensors package), and after ember's
load whether the process is still intact (every dtype, Size, device, a checkpoint round
trip and a seeded ``randn`` give what they gave before) and whether the marker file that
the hostile payloads try to create appeared.

Each load runs in its own fork with an address-space limit and an alarm, so a memory
bomb or an endless load fails fast instead of taking the machine.
"""
import hashlib
import io
import json
import os
import resource
import signal
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))

import hostile_corpus  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import ember  # noqa: E402
import ember.jit  # noqa: E402,F401
import ember.onnx  # noqa: E402,F401

torch.set_num_threads(1)
HEADROOM = 2 << 30  # address space a child may add to what the runner maps already
ALARM_S = 30


# ----- what a healthy process gives -----------------------------------------------------
def probe():
    """A fingerprint of ember's shared objects and basic results, as strings."""
    from ember.backend import dtypes as _dt
    out = {}
    for name, d in sorted(_dt._BY_NAME.items()):
        out[f"dtype.{name}"] = repr((id(d), getattr(ember, name, None) is d, d.name,
                                     str(d.np), d.itemsize, d.is_floating_point, d.is_signed,
                                     d.is_complex))
        try:
            t = ember.tensor([1, 0, 1], dtype=d)
            out[f"tensor.{name}"] = repr((t.dtype is d, str(t._host().dtype),
                                          t._host().tobytes().hex()))
        except Exception as e:  # some dtypes cannot be built from lists: that must not change
            out[f"tensor.{name}"] = type(e).__name__
    out["float64"] = repr(ember.tensor([0.1], dtype=ember.float64).tolist())
    out["size"] = repr((ember.Size([2, 3]).numel(), ember.zeros(2, 3).shape, ember.Size))
    out["device"] = repr((ember.device("cpu"), ember.device("cpu").type, ember.device))
    ember.manual_seed(0)
    out["randn"] = ember.randn(5).numpy().tobytes().hex()
    buf = io.BytesIO()
    sd = {"a": ember.randn(3, 4), "b": ember.arange(5), "c": ember.ones(2, dtype=ember.float64),
          "d": ember.ones(3, dtype=ember.bfloat16), "e": ember.tensor([True, False])}
    ember.save(sd, buf)
    buf.seek(0)
    back = ember.load(buf)
    out["roundtrip"] = repr({k: (v.dtype.name, tuple(v.shape), _digest(v)) for k, v in
                             back.items()})
    out["roundtrip_equal"] = repr(all(_digest(back[k]) == _digest(v) for k, v in sd.items()))
    return out


def _digest(t):
    """dtype, shape and a hash of the bytes of an ember or torch tensor, or numpy array."""
    if isinstance(t, torch.Tensor):
        t = t.detach().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return (str(t.dtype).replace("torch.", ""), list(t.shape),
                hashlib.sha256(raw).hexdigest()[:16])
    if isinstance(t, ember.Tensor):
        arr = np.ascontiguousarray(t.detach()._host())
        return (t.dtype.name, list(t.shape), hashlib.sha256(arr.tobytes()).hexdigest()[:16])
    arr = np.ascontiguousarray(t)
    return (str(arr.dtype), list(arr.shape), hashlib.sha256(arr.tobytes()).hexdigest()[:16])


def summarize(obj):
    """A JSON-able summary comparable between ember's and the reference's results."""
    if isinstance(obj, (torch.Tensor, ember.Tensor, np.ndarray)):
        values = obj.detach().float().reshape(-1).tolist() \
            if not isinstance(obj, np.ndarray) else obj.astype(np.float64).reshape(-1).tolist()
        return ["tensor", *_digest(obj), values[:64]]
    if isinstance(obj, dict):
        return {str(k): summarize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [summarize(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return f"<{type(obj).__name__}>"


# ----- loading one case, ember and the reference -----------------------------------------
X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)


def load_ember(kind, path):
    if kind == "ckpt":
        return summarize(ember.load(path))
    if kind == "jit":
        m = ember.jit.load(path)
        return summarize(m(ember.tensor(X)))
    if kind == "onnx":
        m = ember.onnx.load(path)
        return summarize(m(ember.tensor(X)))
    from ember.utils import safetensors
    return summarize(safetensors.load_file(path))


def load_reference(kind, path):
    if kind == "ckpt":
        return summarize(torch.load(path, weights_only=True))
    if kind == "jit":
        m = torch.jit.load(path)
        return summarize(m(torch.tensor(X)))
    if kind == "onnx":
        import onnxruntime
        sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        return summarize(sess.run(None, {"x": X})[0])
    from safetensors.torch import load_file
    return summarize(load_file(path))


def _mapped_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def in_child(fn):
    """Run ``fn()`` in a fork under the limits; its JSON-able result, or how it died."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        try:
            limit = _mapped_bytes() + HEADROOM
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            signal.alarm(ALARM_S)
            result = fn()
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            result = {"outcome": "crash", "error": repr(e)[:300]}
        with os.fdopen(w, "w") as fh:
            fh.write(json.dumps(result))
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        text = fh.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        return {"outcome": "died", "signal": sig,
                "timeout": sig == signal.SIGALRM}
    return json.loads(text)


def attempt(load, kind, path, marker, baseline):
    def run():
        res = {}
        start = time.monotonic()
        try:
            res["outcome"], res["result"] = "ok", load(kind, path)
        except BaseException as e:  # noqa: BLE001 - the outcome is what we measure
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            res.update(outcome="error", types=[c.__name__ for c in type(e).__mro__],
                       message=str(e)[:400],
                       where=traceback.extract_tb(e.__traceback__)[-1].filename[-60:]
                       if e.__traceback__ else "")
        res["seconds"] = round(time.monotonic() - start, 3)
        if baseline is not None:
            signal.alarm(ALARM_S)  # the checks get their own time
            try:
                now = probe()
                res["damaged"] = sorted(k for k in baseline if now.get(k) != baseline[k])
            except BaseException as e:  # noqa: BLE001
                res["damaged"] = [f"probe raised {type(e).__name__}: {str(e)[:200]}"]
            res["marker"] = os.path.exists(marker)
        return res
    return in_child(run)


def build_goods(work):
    buf = io.BytesIO()
    torch.save({"w": torch.arange(4.0), "b": torch.tensor([1, 2]),
                "h": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)}, buf)
    ckpt = buf.getvalue()
    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(3, 2)), buf)
    script = buf.getvalue()
    from safetensors.torch import save
    st = save({"a": torch.randn(3, 4), "b": torch.arange(5),
               "c": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
               "d": torch.tensor([True, False])})
    return ckpt, script, st


def main(kind, work):
    work = Path(work)
    (work / "cases").mkdir(parents=True, exist_ok=True)
    marker = str(work / "marker")
    hostile_corpus.MARKER = marker
    ckpt, script, st = build_goods(work)
    if kind == "ckpt":
        cases = hostile_corpus.checkpoint_cases(ckpt, script)
    elif kind == "jit":
        cases = hostile_corpus.torchscript_cases(script)
    elif kind == "onnx":
        cases = hostile_corpus.onnx_cases()
    else:
        cases = hostile_corpus.safetensors_cases(st)
    baseline = probe()
    ember.manual_seed(0)
    torch.manual_seed(0)
    assert np.array_equal(ember.randn(5).numpy(), torch.randn(5).numpy())
    for i, case in enumerate(cases):
        d = work / "cases" / f"{i:03d}"
        d.mkdir()
        path = str(d / ("file" + case.suffix))
        Path(path).write_bytes(case.data)
        for name, data in case.extra_files.items():
            (d / name).write_bytes(data)
        mine = attempt(load_ember, kind, path, marker, baseline)
        if os.path.exists(marker):
            os.remove(marker)
        ref = attempt(load_reference, kind, path, marker, None)
        ref_marker = os.path.exists(marker)
        if ref_marker:
            os.remove(marker)
        print(json.dumps({"name": case.name, "bytes": len(case.data),
                          "memory_bomb": case.memory_bomb, "ember": mine, "reference": ref,
                          "reference_marker": ref_marker}), flush=True)
        os.remove(path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
