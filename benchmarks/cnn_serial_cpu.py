"""The small CNN's step (``cnn_step.py``) at two ember threads: how much of the calling
thread's CPU time is spent outside the kernels the pool splits (the serial part), by CPU
time, which a loaded machine changes much less than wall time.

    python benchmarks/cnn_serial_cpu.py [--numpy-only] [--threads N] [--steps S]

Every ``parallel_rows`` call (ember.backend.threads, looked up by the kernels as a module
global) is wrapped to add up the caller's thread CPU time inside it; the rest of the
caller's CPU time is the serial part. Printed per step: the caller's CPU, the process's
CPU, the caller's CPU inside splits and outside them, the prediction of the quiet wall
time (serial part + the split kernels' CPU of both threads / threads), and the split
kernels by call site. Run it with ``PYTHONPATH`` at another tree for a before/after.
``--numpy-only`` hides numba, threadpoolctl and MKL (the default install).
"""
import argparse
import collections
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__" and "--numpy-only" in sys.argv:
    for _name in ("numba", "threadpoolctl", "mkl"):
        sys.modules[_name] = None
    os.environ["EMBER_MKL"] = "0"

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numpy-only", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import cnn_step
    import torch

    import ember
    from ember.backend import threads
    ember.set_num_threads(args.threads)
    real = threads.parallel_rows
    inside = [0.0]
    depth = [0]
    sites = collections.Counter()

    def parallel_rows(fn, rows, cost, xp=np, blas=False, most=None):
        c0 = time.thread_time()
        depth[0] += 1
        try:
            return real(fn, rows, cost, xp, blas, most)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                d = time.thread_time() - c0
                inside[0] += d
                f = sys._getframe(1)
                sites[f"{os.path.basename(f.f_code.co_filename)}:"
                      f"{f.f_code.co_name}"] += d
    for mod in list(sys.modules.values()):
        if getattr(mod, "parallel_rows", None) is real:
            mod.parallel_rows = parallel_rows

    torch.manual_seed(0)
    weights = {k: v.detach().numpy().copy()
               for k, v in cnn_step.build(torch).state_dict().items()}
    net = cnn_step.build(ember, weights)
    step, _ = cnn_step.make_step(ember, net)
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 10, 64))
    for _ in range(5):
        step(x, y)
    inside[0] = 0.0
    sites.clear()
    load = os.getloadavg()[0]
    c0, p0 = time.thread_time(), time.process_time()
    for _ in range(args.steps):
        step(x, y)
    n = args.steps
    caller = (time.thread_time() - c0) / n * 1e3
    proc = (time.process_time() - p0) / n * 1e3
    split = inside[0] / n * 1e3
    serial = caller - split
    print(f"ember {os.path.dirname(ember.__file__)}, {args.threads} threads, "
          f"{'NumPy only' if args.numpy_only else 'as installed'}, load {load:.1f}")
    print(f"  CPU ms per step: caller {caller:.2f}, process {proc:.2f}; caller inside "
          f"splits {split:.2f}, outside (serial) {serial:.2f}")
    print(f"  predicted quiet wall: serial + (process - serial) / {args.threads} = "
          f"{serial + (proc - serial) / args.threads:.2f} ms")
    for k, v in sites.most_common(12):
        print(f"    {k:40s} {v / n:6.2f}")


if __name__ == "__main__":
    main()
