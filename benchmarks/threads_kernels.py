"""The kernels of the benchmark workloads at 1 and 2 threads, each library in its own
process: which of ember's kernels scale with its threads, which stay serial, and where
threads wait.

    python benchmarks/threads_kernels.py [--only SUBSTR,...] [--pairs P] [--rounds R]
                                         [--numpy-only] [--tree PATH]

Every measurement is a fresh child process running one library at one thread count
(``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` set, and the
library's ``set_num_threads``), in the order ember 1t, torch 1t, ember 2t, torch 2t,
repeated ``--pairs`` times (with both libraries in one process, each one's idle
threads would spin on the cores the other uses). Each kernel (forward + backward of
one op, an op under no_grad, or an optimizer step, at the workloads' shapes) runs
``--rounds`` rounds of 3 calls. Printed per kernel: median wall milliseconds per call
for ember and torch at 1 and 2 threads, ember's 2t/1t wall ratio (about 0.5 for a
kernel that scales, 1.0 for a serial one), ember's CPU/wall at 2 threads (about 2 when
both threads work, about 1 when one works and the other sleeps; more than the wall
ratio suggests where threads spin waiting), ember's CPU time at 2 threads over its CPU
time at 1 (about 1 when the second thread only shares the work; well above 1 when
threads spin waiting for each other), and ember/torch at 2 threads; the load average is
printed before and after. ``--numpy-only`` runs ember as its default install
(``EMBER_MKL=0``, threadpoolctl and numba hidden); ``--tree PATH`` runs ember from
another source tree.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def cases(m):
    """name -> a call running one kernel of library ``m``."""
    import numpy as np
    rng = np.random.default_rng(0)
    F = m.nn.functional

    def t(*shape, grad=True):
        return m.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)

    def params(*shapes):
        ps = [m.nn.Parameter(m.tensor(rng.standard_normal(s).astype(np.float32)))
              for s in shapes]
        for p in ps:
            p.grad = m.tensor(rng.standard_normal(p.shape).astype(np.float32))
        return ps

    def back(f):
        def run():
            f().sum().backward()
        return run

    def no_grad(f):
        def run():
            with m.no_grad():
                f()
        return run

    x1, w1 = t(64, 1, 28, 28, grad=False), t(32, 1, 3, 3)
    x2, w2 = t(64, 32, 13, 13), t(64, 32, 3, 3)
    xp, xr = t(64, 32, 26, 26), t(64, 32, 26, 26)
    q, k, v = t(16, 4, 64, 32), t(16, 4, 64, 32), t(16, 4, 64, 32)
    xl, wl, bl = t(16, 64, 128), t(128), t(128)
    xm, wm, bm = t(128, 784, grad=False), t(256, 784), t(256)
    hm = t(128, 256)
    xi, wi, bi = t(1024, 784, grad=False), t(256, 784, grad=False), t(256, grad=False)
    hi = t(1024, 256, grad=False)
    logits, target = t(128, 10), m.tensor(rng.integers(0, 10, 128))
    xt, wt, bt = t(1024, 128), t(256, 128), t(256)
    mlp_params = params((256, 784), (256,), (128, 256), (128,), (10, 128), (10,))
    sgd = m.optim.SGD(mlp_params, lr=0.01, momentum=0.9)
    cnn_params = params((32, 1, 3, 3), (32,), (64, 32, 3, 3), (64,), (128, 1600), (128,),
                        (10, 128), (10,))
    adam = m.optim.Adam(cnn_params, lr=1e-3)
    m.manual_seed(0)
    lstm = m.nn.LSTM(64, 128, batch_first=True)
    xs = t(32, 32, 64, grad=False)
    cell = m.nn.RNNCell(64, 128)
    xc = t(32, 32, 64, grad=False)

    xa, ya = t(1024, 256), t(1024, 256, grad=False)
    hs = t(256, 256, grad=False)

    def cell_loop():
        h = m.zeros(32, 128)
        for i in range(32):
            h = cell(xc[i], h)
        h.pow(2).mean().backward()
    for _ in range(2):  # the optimizers' state exists before timing
        sgd.step()
        adam.step()
    return {
        "linear 128x784->256": back(lambda: F.linear(xm, wm, bm)),
        "relu 128x256": back(lambda: F.relu(hm)),
        "cross_entropy 128x10": lambda: F.cross_entropy(logits, target).backward(),
        "SGD momentum, MLP 235k": sgd.step,
        "linear nograd 1024x784->256": no_grad(lambda: F.linear(xi, wi, bi)),
        "relu nograd 1024x256": no_grad(lambda: F.relu(hi)),
        "conv2d 1->32, b64 28x28": back(lambda: F.conv2d(x1, w1)),
        "conv2d 32->64, b64 13x13": back(lambda: F.conv2d(x2, w2)),
        "max_pool2d 2, 64x32x26x26": back(lambda: F.max_pool2d(xp, 2)),
        "relu 64x32x26x26": back(lambda: F.relu(xr)),
        "Adam, CNN 225k": adam.step,
        "linear 1024x128->256": back(lambda: F.linear(xt, wt, bt)),
        "sdpa 16x4x64x32": back(lambda: F.scaled_dot_product_attention(q, k, v)),
        "layer_norm 16x64x128": back(lambda: F.layer_norm(xl, (128,), wl, bl)),
        "softmax 16x4x64x64": back(lambda: F.softmax(q @ k.transpose(-1, -2), -1)),
        "LSTM 32x32x64->128": back(lambda: lstm(xs)[0]),
        "RNNCell loop 32 steps": cell_loop,
        "add 1024x256 (residual)": back(lambda: xa + ya),
        "add nograd 64x32x26x26": no_grad(lambda: xr + xp),
        "bias add nograd 1024x256": no_grad(lambda: hi + bi),
        "mul nograd 256x256": no_grad(lambda: hs * hs),
        "exp nograd 1024x256": no_grad(lambda: hi.exp()),
        "mse_loss 1024x256": lambda: F.mse_loss(xa, ya).backward(),
    }


def child(spec):
    """Time every kernel of one library at one thread count; print JSON (child side)."""
    if spec["numpy_only"]:
        from two_threads import _NoExtras
        sys.meta_path.insert(0, _NoExtras())
    if spec["lib"] == "torch":
        import torch as m
    else:
        import ember as m
    m.set_num_threads(spec["threads"])
    out = {}
    for name, f in cases(m).items():
        if spec["only"] and not any(s in name for s in spec["only"]):
            continue
        f()
        wall, cpu = [], []
        for _ in range(spec["rounds"]):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(3):
                f()
            wall.append((time.perf_counter() - t0) / 3 * 1e3)
            cpu.append((time.process_time() - c0) / 3 * 1e3)
        out[name] = [statistics.median(wall), statistics.median(cpu)]
    print(json.dumps(out))


def _run(lib, n, args):
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS}
    env.update({k: str(n) for k in _THREAD_VARS})
    if lib == "ember":
        env["PYTHONPATH"] = os.path.abspath(args.tree)
        if args.numpy_only:
            env["EMBER_MKL"] = "0"
    spec = {"lib": lib, "threads": n, "rounds": args.rounds,
            "numpy_only": args.numpy_only and lib == "ember",
            "only": args.only.split(",") if args.only else None}
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                       env=env, capture_output=True, text=True, timeout=args.timeout,
                       cwd=HERE)
    if r.returncode:
        raise RuntimeError(f"{lib} at {n} threads failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _load():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="kernels whose names contain one of these")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--numpy-only", action="store_true")
    ap.add_argument("--tree", default=ROOT)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    print(f"each library in its own process; ember "
          f"{'NumPy only' if args.numpy_only else 'with the extras installed'} from "
          f"{os.path.abspath(args.tree)}; load average before {_load()}", flush=True)
    runs = {}
    for _ in range(args.pairs):
        for n in (1, 2):
            for lib in ("ember", "torch"):
                runs.setdefault((lib, n), []).append(_run(lib, n, args))
    med = {key: {k: [statistics.median(r[k][i] for r in rs) for i in (0, 1)]
                 for k in rs[0]} for key, rs in runs.items()}
    print(f"{'kernel (ms per call, wall)':<30}{'ember 1t':>10}{'ember 2t':>10}{'torch 1t':>10}"
          f"{'torch 2t':>10}{'e 2t/1t':>9}{'e cpu/wall 2t':>15}{'e cpu 2t/1t':>13}"
          f"{'e/t 2t':>8}")
    for k in med["ember", 1]:
        e1, e2 = med["ember", 1][k], med["ember", 2][k]
        t1, t2 = med["torch", 1][k][0], med["torch", 2][k][0]
        print(f"{k:<30}{e1[0]:>10.3f}{e2[0]:>10.3f}{t1:>10.3f}{t2:>10.3f}"
              f"{e2[0] / e1[0]:>9.2f}{e2[1] / e2[0]:>15.2f}{e2[1] / e1[1]:>13.2f}"
              f"{e2[0] / t2:>8.2f}")
    print(f"load average after {_load()}")


if __name__ == "__main__":
    main()
