"""Per-op overhead (the chain of ``op_overhead.py``) of an older ember tree, this one and
torch, in one process, rounds alternated (the trees swapped as in ``nn_ops_ab.py``).

    git archive main | tar -x -C /tmp/before
    cd /tmp && python $REPO/benchmarks/op_overhead_ab.py /tmp/before [--rounds R]

Printed per mode (forward with a graph, forward + backward, forward under no_grad): the
best CPU microseconds per op over the rounds of each, the ratios to torch and
after/before, and the load average before and after. One thread each.
"""
import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _setup(m, mode):
    """One call of the chain in ``mode``, on fresh (16,) inputs of ``m``."""
    from op_overhead import chain
    rng = np.random.default_rng(0)
    x = m.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True)
    w = m.tensor(rng.standard_normal(16).astype(np.float32), requires_grad=True)

    def once():
        if mode == "no_grad":
            with m.no_grad():
                chain(m, x, w)
        elif mode == "forward":
            chain(m, x, w)
        else:
            chain(m, x, w).sum().backward()
    return once


def main():
    sys.path.insert(0, HERE)
    import nn_ops_ab
    from op_overhead import N_OPS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="root of the older ember tree")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--modes", default="forward,forward+backward,no_grad")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    before, bmods = nn_ops_ab._load(args.before)
    after, amods = nn_ops_ab._load(ROOT)
    libs = [(before, bmods), (after, amods), (torch, None)]
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; one thread each; "
          f"best CPU us per op of {args.rounds} alternated rounds of 20 chains")
    print(f"{'mode':<18}{'before':>8}{'after':>8}{'torch':>8}{'b/torch':>9}{'a/torch':>9}"
          f"{'after/b':>9}")
    for mode in args.modes.split(","):
        fns = []
        for m, mods in libs:
            nn_ops_ab._use(mods)
            fns.append(_setup(m, mode))
        best = [float("inf")] * len(libs)
        for r in range(args.rounds + 1):
            for i, ((_, mods), fn) in enumerate(zip(libs, fns)):
                nn_ops_ab._use(mods)
                c = time.process_time()
                for _ in range(20):
                    fn()
                if r:  # the first round warms up
                    best[i] = min(best[i], (time.process_time() - c) / 20 / N_OPS * 1e6)
        b, a, t = best
        print(f"{mode:<18}{b:8.2f}{a:8.2f}{t:8.2f}{b / t:9.2f}{a / t:9.2f}{a / b:9.2f}",
              flush=True)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
