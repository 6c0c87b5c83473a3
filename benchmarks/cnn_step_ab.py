"""The small CNN training step (``cnn_step.py``) of an older ember tree, this one and
torch, in one process, rounds alternated (the trees swapped as in ``nn_ops_ab.py``).

    python benchmarks/cnn_step_ab.py /tmp/before [--steps N] [--batch B] [--no-numba]

``--no-numba`` hides numba from both trees, as an install without the ``ember[fast]``
extra (``EMBER_MKL=0`` does the same for MKL). (It once hid only this tree's pooling
kernels, so "before" kept numba's pooling and after/before read some 15 % high.)

One thread each (``OPENBLAS_NUM_THREADS=1`` set here). Prints the median CPU
milliseconds per step of each, the ratios to torch and after/before, the load average
before and after, and how far each ember's losses drift from torch's.
"""
import argparse
import os
import sys

os.environ["OPENBLAS_NUM_THREADS"] = "1"
if __name__ == "__main__" and "--no-numba" in sys.argv:
    sys.modules["numba"] = None

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main():
    sys.path.insert(0, HERE)
    import cnn_step
    from nn_ops_ab import _load, _use
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--no-numba", action="store_true",
                    help="both trees without numba (the default install)")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(1)
    before, bmods = _load(args.before)
    after, amods = _load(ROOT)
    rng = np.random.default_rng(0)
    xb = rng.standard_normal((args.batch, 1, 28, 28)).astype(np.float32)
    yb = rng.integers(0, 10, args.batch)
    torch.manual_seed(0)
    weights = {k: v.detach().numpy().copy()
               for k, v in cnn_step.build(torch).state_dict().items()}
    libs = [("before", before, bmods), ("after", after, amods), ("torch", torch, None)]
    runs = []
    for _, m, mods in libs:
        _use(mods)
        net = cnn_step.build(m, weights)
        step, _ = cnn_step.make_step(m, net)
        runs.append((step, m.tensor(xb), m.tensor(yb), mods))
    alternate(f"CNN step b{args.batch}", runs, args.warmup, args.steps, args.no_numba)


def alternate(label, runs, warmup, steps, no_numba):
    """Run the steps of ``runs`` (before, after, torch: ``(step, x, y, modules)``) in
    alternated rounds of three, CPU time per step after ``warmup``, and print the medians,
    the ratios and how far each tree's losses drift from torch's."""
    import time

    from nn_ops_ab import _use
    load0 = os.getloadavg()
    cpu = [[] for _ in runs]
    losses = [[] for _ in runs]
    done = 0
    while done < warmup + steps:
        n = min(3, warmup + steps - done)
        for (step, x, y, mods), c, lo in zip(runs, cpu, losses):
            _use(mods)
            for i in range(done, done + n):
                c0 = time.process_time()
                loss = step(x, y)
                dc = time.process_time() - c0
                lo.append(float(loss.detach()))
                if i >= warmup:
                    c.append(dc * 1e3)
        done += n
    b, a, t = (float(np.median(c)) for c in cpu)
    print(f"{label}, one thread, {steps} timed steps, "
          f"EMBER_MKL={os.environ.get('EMBER_MKL', 'unset')}"
          f"{', no numba' if no_numba else ''}; load average "
          f"{' '.join(f'{v:.2f}' for v in load0)} -> "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"  CPU ms/step  before {b:.2f}  after {a:.2f}  torch {t:.2f}")
    print(f"  ratio        before/torch {b / t:.3f}  after/torch {a / t:.3f}  "
          f"after/before {a / b:.3f}")
    for name, lo in zip(("before", "after"), losses[:2]):
        drift = max(abs(p - q) for p, q in zip(lo, losses[2]))
        print(f"  {name} losses agree with torch's to {drift:.1e} over {len(lo)} steps")


if __name__ == "__main__":
    main()
