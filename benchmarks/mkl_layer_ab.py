"""MKL's products in two ember trees with torch imported first (``ember[mkl]``): the
threading layer each tree's ``ember.backend.gemm`` picks, and the time of its products.

    python benchmarks/mkl_layer_ab.py /tmp/base8 --threads 1 --rounds 4
    python benchmarks/mkl_layer_ab.py /tmp/base8 --threads 2 --rounds 4

MKL's threading layer is chosen once per process, so the two trees cannot share one:
each round runs one child process per tree (alternated, so that the machine's load hits
both alike). A child imports torch, then ember from its tree, and times each product on
MKL (``gemm.matmul``) and on ``np.matmul`` interleaved; it prints the medians of CPU and
wall microseconds. The MKL/NumPy ratio is the figure to compare between trees (NumPy's
OpenBLAS is the same in both and absorbs the load); the worst error against a float64
product, in units of a k-term float32 sum's rounding bound, says whether MKL is right.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = ((128, 784, 256), (1024, 784, 256), (1024, 128, 384), (32, 128, 512),
          (512, 512, 512))

_CHILD = r"""
import json, sys, time
import numpy as np
import torch  # noqa: F401  (its libgomp in the global scope first, as in a user's script)
import ember
from ember.backend import gemm
threads, shapes = int(sys.argv[1]), json.loads(sys.argv[2])
ember.set_num_threads(threads)
torch.set_num_threads(threads)
assert gemm.mkl_available()
layer = gemm._lib[0].lib.MKL_Set_Threading_Layer(-1)
rng = np.random.default_rng(0)
rows = []
for m, k, n in shapes:
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = 2 * k * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b))
    err = float(np.max(np.abs(gemm.matmul(a, b) - ref) / bound))
    fns = (lambda: gemm.matmul(a, b), lambda: np.matmul(a, b))
    t = time.perf_counter()
    fns[0]()
    reps = max(3, int(0.02 / max(time.perf_counter() - t, 1e-6)))
    cpu, wall = ([], []), ([], [])
    for _ in range(7):
        for i, fn in enumerate(fns):
            c, w = time.process_time(), time.perf_counter()
            for _ in range(reps):
                fn()
            cpu[i].append((time.process_time() - c) / reps * 1e6)
            wall[i].append((time.perf_counter() - w) / reps * 1e6)
    med = lambda x: float(np.median(x))
    rows.append([m, k, n, med(cpu[0]), med(cpu[1]), med(wall[0]), med(wall[1]), err])
print(json.dumps({"layer": layer, "rows": rows}))
"""

_LAYERS = {0: "intel", 1: "sequential", 3: "gnu", 4: "tbb"}


def _child(tree, threads):
    env = dict(os.environ, PYTHONPATH=tree, OPENBLAS_NUM_THREADS="1")
    for var in ("MKL_THREADING_LAYER", "EMBER_MKL", "OMP_NUM_THREADS"):
        env.pop(var, None)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(threads), json.dumps(SHAPES)],
                       env=env, cwd=tree, capture_output=True, text=True, timeout=600,
                       check=True)  # cwd: python -c puts it before PYTHONPATH
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base", help="the other ember tree (e.g. an exported commit)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    trees = {"base": os.path.abspath(args.base), "this": HERE}
    runs = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            runs[name].append(_child(tree, args.threads))
    print(f"threads {args.threads}, rounds {args.rounds}, load average "
          f"{os.getloadavg()[0]:.1f}; layers: " + ", ".join(
              f"{n} {sorted({_LAYERS.get(r['layer'], r['layer']) for r in rs})}"
              for n, rs in runs.items()))
    print(f"{'m x k x n':<16}{'tree':<6}{'mkl cpu us':>11}{'np cpu us':>10}{'mkl wall':>10}"
          f"{'np wall':>9}{'mkl/np cpu':>11}{'mkl/np wall':>12}{'err/bound':>11}")
    import statistics as st
    for i, (m, k, n) in enumerate(SHAPES):
        for name, rs in runs.items():
            cols = list(zip(*(r["rows"][i][3:] for r in rs)))
            mc, nc, mw, nw = (st.median(c) for c in cols[:4])
            err = max(cols[4])
            ratio_cpu = st.median(r["rows"][i][3] / r["rows"][i][4] for r in rs)
            ratio_wall = st.median(r["rows"][i][5] / r["rows"][i][6] for r in rs)
            print(f"{f'{m}x{k}x{n}':<16}{name:<6}{mc:>11.0f}{nc:>10.0f}{mw:>10.0f}{nw:>9.0f}"
                  f"{ratio_cpu:>11.2f}{ratio_wall:>12.2f}{err:>11.2g}")


if __name__ == "__main__":
    main()
