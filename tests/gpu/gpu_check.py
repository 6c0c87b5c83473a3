"""The GPU check: ember's ``cuda`` device against torch on ``cuda``, in one timed run.

``python tests/gpu/gpu_check.py --out DIR`` runs each part in its own process under its
own timeout and writes ``DIR/summary.json`` and ``DIR/summary.md`` (and ``sweep.json``,
``sweep_failures.txt``, ``parts.log``: five files, under a device run's limit of 8):

- ``env``: versions and the GPU's name;
- ``sweep``: every op family's oracle cases on ``cuda`` against torch on ``cuda``, with
  first gradients (``oracle_sweep.py``);
- ``devices``: mixed-device errors, ``.to``/``.cpu``/``.cuda`` copies and
  ``non_blocking``, ``save``/``load`` across devices (``map_location``), nn layers and an
  optimizer step on ``cuda`` against torch;
- ``demo``: the MNIST example (``examples/mnist/train.py --device cuda``);
- ``bench``: training steps of an MLP, a CNN and a Transformer layer: ember on cuda,
  torch on cuda, ember on cpu.

``EMBER_GPU_DRYRUN=1`` (or ``--dry-run``) runs the same code on a machine without a GPU:
``cupy`` is the CPU test double in ``tests/fake_cupy`` and torch runs on the CPU, with
smaller sizes, so the script itself is checked before a GPU is lent.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DRY = os.environ.get("EMBER_GPU_DRYRUN") == "1"
PARTS = ("env", "sweep", "devices", "demo", "bench")
TIMEOUTS = {"env": 60, "sweep": 200, "devices": 60, "demo": 120, "bench": 120}
TOTAL_S = 440  # all parts together; run_on_gpu.sh stops the run at 470 s


def _torch_dev():
    return "cpu" if DRY else "cuda"


# ----- parts (each runs in a child process) ----------------------------------------------

def part_env(out):
    import numpy
    import torch

    import ember
    info = {"dry_run": DRY, "python": sys.version.split()[0], "numpy": numpy.__version__,
            "torch": torch.__version__, "torch_cuda": torch.cuda.is_available(),
            "ember_cuda": ember.cuda.is_available()}
    import cupy
    info["cupy"] = cupy.__version__
    info["gpu"] = ember.cuda.get_device_name(0) if ember.cuda.is_available() else None
    return info


def part_sweep(out):
    sys.path.insert(0, HERE)
    import oracle_sweep
    # the cases stop 40 s before the part's timeout, leaving time to write the results
    budget = float(os.environ.get("EMBER_GPU_PART_TIMEOUT", TIMEOUTS["sweep"])) - 40
    fams = ["elementwise", "reduction"] if os.environ.get("EMBER_GPU_SWEEP_SMALL") else None
    with open(os.path.join(out, "sweep_failures.txt"), "w") as log:
        res = oracle_sweep.sweep(fams, "cuda", _torch_dev(), True, budget, log=log)
    counts, host = oracle_sweep.summary(res)
    errs = oracle_sweep.IMPORT_ERRORS
    with open(os.path.join(out, "sweep.json"), "w") as f:
        json.dump({"counts": counts, "host_fallbacks": host, "import_errors": errs,
                   "results": res}, f, indent=1)
    return {"counts": counts, "host_fallbacks": host, "import_errors": errs}


def _check(results, name, fn):
    try:
        fn()
        results[name] = "pass"
    except Exception as e:  # noqa: BLE001  (each check reports its own failure)
        results[name] = f"FAIL: {type(e).__name__}: {str(e)[:300]}"


def part_devices(out):
    import numpy as np
    import torch

    import ember
    td = _torch_dev()
    res = {}

    def mixed():
        a, b = ember.ones(2, 3, device="cuda"), ember.ones(2, 3)
        try:
            a + b
        except RuntimeError as e:
            assert "Expected all tensors to be on the same device" in str(e), e
        else:
            raise AssertionError("cuda + cpu did not raise")
        # a 0-dim CPU tensor joins a cuda op as a scalar, as in torch
        r = a * ember.tensor(2.0)
        assert r.device.type == "cuda" and r.sum().item() == 12.0

    def copies():
        x = ember.arange(6.0)
        c = x.cuda()
        assert c.device.type == "cuda" and c.is_cuda and not x.is_cuda
        assert c.cuda() is c and c.to("cuda") is c and x.cpu() is x
        c.add_(1)  # a copy: the CPU tensor is unchanged
        assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        back = c.to("cpu", non_blocking=True)
        assert back.device.type == "cpu" and back.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert c.to("cuda", copy=True) is not c
        h = c.double().cpu()
        assert h.dtype == ember.float64
        w = ember.ones(3, requires_grad=True)
        (w.cuda() * 2).sum().backward()  # the copy is differentiable
        assert w.grad.device.type == "cpu" and w.grad.tolist() == [2.0, 2.0, 2.0]

    def save_load():
        path = os.path.join(out, "cuda_ckpt.pt")
        lin = ember.nn.Linear(3, 2).cuda()
        ember.save({"sd": lin.state_dict(), "t": ember.arange(4.0).cuda()}, path)
        got = ember.load(path, map_location="cpu")
        assert got["t"].device.type == "cpu" and got["t"].tolist() == [0.0, 1.0, 2.0, 3.0]
        back = ember.load(path)
        assert back["t"].device.type == "cuda"
        # torch reads ember's cuda checkpoint, and ember reads torch's
        tt = torch.load(path, map_location="cpu", weights_only=True)
        assert tt["t"].tolist() == [0.0, 1.0, 2.0, 3.0]
        if not DRY:
            tpath = os.path.join(out, "torch_cuda_ckpt.pt")
            torch.save({"t": torch.arange(3.0, device="cuda")}, tpath)
            e = ember.load(tpath)
            assert e["t"].device.type == "cuda" and e["t"].tolist() == [0.0, 1.0, 2.0]

    def layers_and_step():
        rng = np.random.default_rng(0)
        x = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
        y = rng.integers(0, 5, 4)
        nets = []
        for m, dev in ((torch, td), (ember, "cuda")):
            m.manual_seed(0)
            nn = m.nn
            # (no conv bias before BatchNorm: its gradient is rounding noise, which Adam's
            # normalised step would turn into lr-sized differences)
            net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4),
                                nn.ReLU(),
                                nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.0),
                                nn.Linear(64, 16), nn.LayerNorm(16), nn.GELU(),
                                nn.Linear(16, 5))
            nets.append((m, dev, net))
        sd = {k: v.detach().numpy().copy() for k, v in nets[0][2].state_dict().items()}
        outs = []
        for m, dev, net in nets:
            net.load_state_dict({k: m.tensor(v) for k, v in sd.items()})
            net.to(dev)
            opt = m.optim.AdamW(net.parameters(), lr=1e-2)
            xt, yt = m.tensor(x).to(dev), m.tensor(y).to(dev)
            loss = m.nn.functional.cross_entropy(net(xt), yt)
            opt.zero_grad()
            loss.backward()
            grads = [p.grad.cpu().numpy().copy() for p in net.parameters()]
            opt.step()
            outs.append((loss.item(), grads,
                         [p.detach().cpu().numpy().copy() for p in net.parameters()]))
            assert all(p.device.type == (dev if m is ember else td) for p in net.parameters())
        (lt, gt, pt), (le, ge, pe) = outs
        assert abs(lt - le) < 1e-4, (lt, le)
        for a, b in zip(ge, gt):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)
        for a, b in zip(pe, pt):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)

    def rnn_and_attention():
        rng = np.random.default_rng(1)
        x = rng.standard_normal((5, 2, 8)).astype(np.float32)
        got = []
        for m, dev in ((torch, td), (ember, "cuda")):
            m.manual_seed(0)
            lstm = m.nn.LSTM(8, 6)
            mha = m.nn.MultiheadAttention(8, 2)
            got.append((lstm, mha, m, dev))
        lt, mt, _, _ = got[0]
        le, me, _, _ = got[1]
        for src, dst in ((lt, le), (mt, me)):
            dst.load_state_dict({k: ember.tensor(v.detach().numpy())
                                 for k, v in src.state_dict().items()})
        outs = []
        for lstm, mha, m, dev in got:
            lstm.to(dev)
            mha.to(dev)
            xt = m.tensor(x).to(dev)
            o, _ = lstm(xt)
            a, _ = mha(xt, xt, xt)
            outs.append((o.detach().cpu().numpy(), a.detach().cpu().numpy()))
        for a, b in zip(outs[1], outs[0]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

    _check(res, "mixed_devices", mixed)
    _check(res, "to_cpu_cuda_copies", copies)
    _check(res, "save_load_map_location", save_load)
    _check(res, "nn_layers_and_optimizer_step", layers_and_step)
    _check(res, "rnn_and_attention", rnn_and_attention)
    return res


def part_demo(out):
    sys.path.insert(0, ROOT)
    from ember.examples import mnist
    has_mnist = os.path.isdir(os.path.join(ROOT, "data", "MNIST", "raw"))
    try:
        import sklearn  # noqa: F401
        has_digits = True
    except ImportError:
        has_digits = False
    if not (has_mnist or has_digits):
        return {"skipped": "no data set: data/MNIST/raw is absent and scikit-learn (the "
                           "bundled digits) is not installed; carry data/ to run it"}
    argv = ["--device", "cuda", "--out", os.path.join(out, "demo"),
            "--logdir", os.path.join(out, "demo_runs")]
    if DRY:
        argv += ["--epochs", "1", "--limit", "300"]
    elif has_mnist:
        argv += ["--epochs", "2"]
    r = mnist.main(argv)
    return {"dataset": r["dataset"], "test_acc": r["test_acc"], "wall_s": r["wall_s"],
            "samples_per_s": r["history"]["samples_per_s"]}


def _models(m, small):
    nn = m.nn
    d = 64 if small else 512
    mlp = nn.Sequential(nn.Linear(784, 4 * d), nn.ReLU(), nn.Linear(4 * d, d), nn.ReLU(),
                        nn.Linear(d, 10))
    cnn = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    tfm = nn.TransformerEncoderLayer(d, 4 if small else 8, 2 * d, dropout=0.0,
                                     batch_first=True)
    return {"mlp": (mlp, (256, 784)), "cnn": (cnn, (64, 1, 28, 28)),
            "transformer": (tfm, (32, 64, d))}


def _time_steps(m, model, shape, dev, steps, sync):
    import numpy as np
    model.to(dev)
    opt = m.optim.SGD(model.parameters(), lr=1e-3)
    x = m.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32)).to(dev)

    def step():
        opt.zero_grad()
        out = model(x)
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()
    step()  # warm-up (kernel compilation, allocator)
    sync()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return 1000 * (time.perf_counter() - t) / steps


def part_bench(out):
    import torch

    import ember
    steps = 2 if DRY else 10
    table = {}

    def e_sync():
        if ember.cuda.is_available():
            ember.cuda.synchronize()

    def t_sync():
        if not DRY:
            torch.cuda.synchronize()
    for name in ("mlp", "cnn", "transformer"):
        row = {}
        for label, m, dev, sync in (("ember_cuda", ember, "cuda", e_sync),
                                    ("torch_cuda", torch, _torch_dev(), t_sync),
                                    ("ember_cpu", ember, "cpu", lambda: None)):
            m.manual_seed(0)
            model, shape = _models(m, DRY)[name]
            try:
                row[label + "_ms"] = round(_time_steps(m, model, shape, dev, steps, sync), 2)
            except Exception as e:  # noqa: BLE001  (a failing row is reported, not fatal)
                row[label + "_ms"] = f"FAIL: {type(e).__name__}: {str(e)[:200]}"
        table[name] = row
    return {"steps": steps, "ms_per_step": table}


# ----- the parent: one child per part, each with its own timeout -------------------------

def _run_part(part, out, timeout):
    env = dict(os.environ)
    paths = [ROOT] + ([os.path.join(ROOT, "tests", "fake_cupy")] if DRY else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    env["EMBER_GPU_PART_TIMEOUT"] = str(int(timeout))
    res_file = os.path.join(out, f"{part}.json")
    t = time.monotonic()
    try:
        p = subprocess.run([sys.executable, __file__, "--child", part, "--out", out],
                           env=env, timeout=timeout, capture_output=True, text=True)
        status = "ok" if p.returncode == 0 else f"exit {p.returncode}"
        log = p.stdout[-4000:] + p.stderr[-4000:]
    except subprocess.TimeoutExpired as e:
        status = f"timeout after {timeout} s"
        log = str(e.stdout or "")[-2000:]
    with open(os.path.join(out, "parts.log"), "a") as f:
        f.write(f"===== {part}: {status}\n{log}\n")
    result = None
    if os.path.exists(res_file):
        with open(res_file) as f:
            result = json.load(f)
    return {"status": status, "seconds": round(time.monotonic() - t, 1), "result": result}


def _markdown(summary):
    lines = [f"# ember on cuda: {'dry run (CuPy test double, torch on cpu)' if DRY else 'GPU run'}",
             "", f"date: {summary['date']}", ""]
    for part, r in summary["parts"].items():
        lines.append(f"## {part}: {r['status']} ({r['seconds']} s)")
        res = r["result"]
        if part == "sweep" and res:
            lines.append("| family | " + " | ".join(sorted({k for c in res["counts"].values()
                                                             for k in c})) + " |")
            keys = sorted({k for c in res["counts"].values() for k in c})
            lines.append("|---" * (len(keys) + 1) + "|")
            for fam, c in res["counts"].items():
                lines.append(f"| {fam} | " + " | ".join(str(c.get(k, 0)) for k in keys) + " |")
            if res.get("import_errors"):
                lines.append("")
                lines.append("test modules not imported: " + "; ".join(
                    f"{k} ({v[:120]})" for k, v in res["import_errors"].items()))
            if res["host_fallbacks"]:
                lines.append("")
                lines.append("host copies: " + ", ".join(res["host_fallbacks"]))
        elif part == "bench" and res:
            lines.append("| model | ember cuda ms | torch cuda ms | ember cpu ms |")
            lines.append("|---|---|---|---|")
            for name, row in res["ms_per_step"].items():
                lines.append(f"| {name} | {row['ember_cuda_ms']} | {row['torch_cuda_ms']} | "
                             f"{row['ember_cpu_ms']} |")
        else:
            lines.append("```")
            lines.append(json.dumps(res, indent=1)[:3000])
            lines.append("```")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    global DRY
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_out"))
    ap.add_argument("--parts", nargs="*", default=list(PARTS), choices=PARTS)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--child")
    a = ap.parse_args(argv)
    if a.dry_run:
        DRY = True
        os.environ["EMBER_GPU_DRYRUN"] = "1"
    os.makedirs(a.out, exist_ok=True)
    if a.child:  # (its --out is the parent's scratch folder)
        res = globals()["part_" + a.child](a.out)
        with open(os.path.join(a.out, f"{a.child}.json"), "w") as f:
            json.dump(res, f, indent=1, default=str)
        return 0
    summary = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "dry_run": DRY,
               "parts": {}}
    # the parts write into a scratch folder; $OUT gets a few files (a device run brings
    # back at most 8): summary.md/.json, sweep.json, sweep_failures.txt, parts.log
    import shutil
    import tempfile
    work = tempfile.mkdtemp(prefix="ember_gpu_")
    end = time.monotonic() + TOTAL_S
    for part in a.parts:
        left = end - time.monotonic()
        if left < 15:
            summary["parts"][part] = {"status": "skipped: out of time", "seconds": 0,
                                      "result": None}
        else:
            summary["parts"][part] = _run_part(part, work, min(TIMEOUTS[part], left))
        for name in ("sweep.json", "sweep_failures.txt", "parts.log"):
            if os.path.exists(os.path.join(work, name)):
                shutil.copy(os.path.join(work, name), os.path.join(a.out, name))
        print(f"{part}: {summary['parts'][part]['status']} "
              f"({summary['parts'][part]['seconds']} s)", flush=True)
        # written after every part: a run stopped from outside keeps what it finished
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1, default=str)
        with open(os.path.join(a.out, "summary.md"), "w") as f:
            f.write(_markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
