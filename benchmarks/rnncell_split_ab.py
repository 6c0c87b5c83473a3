"""The RNNCell loop of ``training_steps.py`` split into its forward (with ``zero_grad``
and the loss), ``backward()`` and SGD step, for an older ember tree, this one and torch
in one process, steps alternated (the trees swapped as in ``nn_ops_ab.py``).

    python benchmarks/rnncell_split_ab.py /tmp/before [--steps 150] [--no-numba]

One thread each (``OPENBLAS_NUM_THREADS=1`` set here). Prints the median CPU
milliseconds of each part, the ratios to torch, and the load average before and after.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _loop(m):
    """A step of ``training_steps.rnncell`` that records its three parts' CPU times."""
    m.manual_seed(0)
    cell = m.nn.RNNCell(64, 128)
    opt = m.optim.SGD(cell.parameters(), lr=0.01)
    xs = m.tensor(np.random.default_rng(0).standard_normal((32, 32, 64), dtype=np.float32))

    def step(times):
        c0 = time.process_time()
        opt.zero_grad()
        h = m.zeros(32, 128)
        for t in range(32):
            h = cell(xs[t], h)
        loss = h.pow(2).mean()
        c1 = time.process_time()
        loss.backward()
        c2 = time.process_time()
        opt.step()
        c3 = time.process_time()
        times.append((c1 - c0, c2 - c1, c3 - c2))
    return step


def main():
    sys.path.insert(0, HERE)
    from nn_ops_ab import _load, _use
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--no-numba", action="store_true")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    libs = [_load(args.before), _load(ROOT), (torch, None)]
    steps = []
    for m, mods in libs:
        _use(mods)
        steps.append((_loop(m), mods))
    for step, mods in steps:  # warm up
        _use(mods)
        for _ in range(5):
            step([])
    load0 = os.getloadavg()
    times = [[] for _ in libs]
    for _ in range(args.steps):
        for (step, mods), t in zip(steps, times):
            _use(mods)
            step(t)
    med = [np.median(np.array(t), axis=0) * 1e3 for t in times]
    print(f"one thread, EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if args.no_numba else ''}")
    for name, k in (("forward", 0), ("backward", 1), ("SGD", 2)):
        b, a, t = (x[k] for x in med)
        print(f"{name:8s} CPU ms before {b:.3f} after {a:.3f} torch {t:.3f} | "
              f"before/torch {b / t:.2f} after/torch {a / t:.2f}")
    print(f"load {' '.join(f'{v:.2f}' for v in load0)} -> "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
